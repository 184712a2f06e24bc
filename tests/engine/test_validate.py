"""validate(): every failure mode of an objective gets its own code and a specific message."""

import subprocess
import sys
import textwrap

import pytest

from harness.contract import registry
from harness.objectives.template import TEMPLATE, render
from harness.objectives.validate import Problem, Validation, validate


def write(tmp_path, body, name="bad.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body).lstrip("\n"))
    return str(path)


def only_problem(report: Validation) -> Problem:
    assert len(report.problems) == 1, report.format()
    return report.problems[0]


def check_error(spec, code, *texts, overrides=None) -> Problem:
    report = validate(spec, overrides)
    problem = only_problem(report)
    assert (problem.code, problem.severity) == (code, "error"), report.format()
    for text in texts:
        assert text in problem.message, problem.message
    assert not report.ok
    return problem


# --- loading problems, converted ----------------------------------------------------


def test_missing_file(tmp_path):
    check_error(str(tmp_path / "missing.py"), "not-found", "missing.py does not exist")


def test_unknown_name():
    check_error("no_such_objective", "not-found", "unknown objective 'no_such_objective'",
                "gce")


def test_not_utf8(tmp_path):
    path = tmp_path / "latin.py"
    path.write_bytes(b"# caf\xe9\ndef classification_loss(logits, targets):\n    return 0\n")
    check_error(str(path), "encoding", "not UTF-8")


def test_syntax_error_names_line_and_text(tmp_path):
    spec = write(tmp_path, """
        import torch

        def classification_loss(logits, targets)
            return logits
    """)
    check_error(spec, "syntax", "syntax error in bad.py at line 3",
                "def classification_loss(logits, targets)")


def test_exception_at_import_has_user_traceback(tmp_path):
    spec = write(tmp_path, """
        import torch

        SCALE = 1 / 0

        def classification_loss(logits, targets):
            return logits
    """)
    check_error(spec, "import", "bad.py raised ZeroDivisionError while loading",
                "SCALE = 1 / 0", "line 3")


def test_no_hook_suggests_the_right_name(tmp_path):
    spec = write(tmp_path, """
        def classification_los(logits, targets):
            return logits
    """)
    check_error(spec, "no-hook", "no known hook",
                "found 'classification_los': did you mean 'classification_loss'?")


def test_signature_missing_targets(tmp_path):
    spec = write(tmp_path, """
        def classification_loss(logits):
            return logits
    """)
    check_error(spec, "signature", "must take (logits, targets)", "it takes (logits)")


def test_signature_hyperparameter_without_default(tmp_path):
    spec = write(tmp_path, """
        def classification_loss(logits, targets, *, q):
            return logits
    """)
    check_error(spec, "signature", "'q' is not context this hook receives")


def test_unknown_hyperparameter_lists_known_ones():
    check_error("gce", "unknown-hyperparameter", "unknown hyperparameter 'r'",
                "this objective has: q", overrides={"r": 0.5})


def test_wrong_override_type():
    check_error("gce", "bad-override", "'q' expects float", overrides={"q": "big"})


# --- smoke test of the hook ---------------------------------------------------------


def test_exception_in_hook_names_hook_type_and_user_line(tmp_path):
    spec = write(tmp_path, """
        import torch

        def classification_loss(logits, targets):
            scaled = logits * 2
            return logits.foo()
    """)
    problem = check_error(spec, "exception", "classification_loss raised AttributeError",
                          "has no attribute 'foo'", "return logits.foo()", "line 5")
    assert "validate.py" not in problem.message  # only the user's frames


def test_exception_with_relative_path(tmp_path, monkeypatch):
    write(tmp_path, """
        def classification_loss(logits, targets):
            return logits.foo()
    """)
    monkeypatch.chdir(tmp_path)
    check_error("bad.py", "exception", "return logits.foo()")


def test_not_a_tensor(tmp_path):
    spec = write(tmp_path, """
        def classification_loss(logits, targets):
            return 1.0
    """)
    check_error(spec, "not-a-tensor", "returned float, not a torch.Tensor", ".item()")


def test_wrong_shape(tmp_path):
    spec = write(tmp_path, """
        def classification_loss(logits, targets):
            return logits
    """)
    check_error(spec, "shape", "returned shape [8, 10]", "scalar or a per-sample loss")


def test_integer_dtype(tmp_path):
    spec = write(tmp_path, """
        def classification_loss(logits, targets):
            return targets
    """)
    check_error(spec, "dtype", "returned dtype torch.int64", "floating-point")


def test_nan_on_ordinary_batch(tmp_path):
    spec = write(tmp_path, """
        def classification_loss(logits, targets):
            return logits.sum() * float("nan")
    """)
    check_error(spec, "non-finite", "classification_loss returned NaN")


def test_inf_only_on_all_zero_logits(tmp_path):
    spec = write(tmp_path, """
        import torch.nn.functional as F

        def classification_loss(logits, targets):
            ce = F.cross_entropy(logits, targets, reduction="none")
            return ce / logits.abs().amax(-1)
    """)
    check_error(spec, "non-finite", "on all-zero logits", "inf (8 of 8 samples)")


def test_overflow_on_confident_logits(tmp_path):
    spec = write(tmp_path, """
        def classification_loss(logits, targets):
            return logits.exp().sum(-1).log()
    """)
    check_error(spec, "non-finite", "on confident logits (30 × randn)", "inf")


def test_inf_at_progress_zero(tmp_path):
    spec = write(tmp_path, """
        import torch.nn.functional as F

        def classification_loss(logits, targets, *, progress):
            return F.cross_entropy(logits, targets) / progress
    """)
    check_error(spec, "non-finite", "on progress=0.0", "inf")


def test_non_finite_on_several_cases_is_one_problem(tmp_path):
    spec = write(tmp_path, """
        import torch.nn.functional as F

        def classification_loss(logits, targets, *, progress):
            ce = F.cross_entropy(logits, targets, reduction="none")
            return ce / logits.abs().amax(-1) / progress
    """)
    check_error(spec, "non-finite", "non-finite loss on 2 input cases",
                "all-zero logits", "progress=0.0")


def test_detached_loss(tmp_path):
    spec = write(tmp_path, """
        import torch.nn.functional as F

        def classification_loss(logits, targets):
            return F.cross_entropy(logits.detach(), targets)
    """)
    check_error(spec, "no-grad", "the loss does not depend on the logits")


def test_loss_with_unrelated_grad(tmp_path):
    spec = write(tmp_path, """
        import torch

        W = torch.ones(1, requires_grad=True)

        def classification_loss(logits, targets):
            return W.sum()
    """)
    check_error(spec, "no-grad", "the loss does not depend on the logits")


def test_zero_gradient(tmp_path):
    spec = write(tmp_path, """
        def classification_loss(logits, targets):
            return (logits * 0).sum(-1) + 1.0
    """)
    check_error(spec, "no-grad", "gradient to the logits is zero everywhere")


def test_non_finite_gradient(tmp_path):
    spec = write(tmp_path, """
        def classification_loss(logits, targets):
            return logits.pow(2).sum(-1).sqrt()
    """)
    check_error(spec, "non-finite-grad", "on all-zero logits",
                "gradient to the logits contains NaN")


def test_exception_only_in_a_later_case(tmp_path):
    spec = write(tmp_path, """
        def classification_loss(logits, targets, *, progress):
            if progress == 1.0:
                raise ValueError("schedule ended")
            return logits.logsumexp(-1)
    """)
    check_error(spec, "exception", "on progress=1.0", "ValueError: schedule ended",
                'raise ValueError("schedule ended")')


def test_item_warns_not_vmappable_but_is_ok(tmp_path):
    spec = write(tmp_path, """
        import torch.nn.functional as F

        SEARCH_SPACE = {"scale": {"low": 0.5, "high": 2.0}}

        def classification_loss(logits, targets, *, scale: float = 1.0):
            top = logits.abs().max().item()
            return F.cross_entropy(logits * scale / max(top, 1.0), targets, reduction="none")
    """, name="item_loss.py")
    report = validate(spec)
    problem = only_problem(report)
    assert (problem.code, problem.severity) == ("not-vmappable", "warning")
    assert "cannot run seed-batched (vmap)" in problem.message
    assert ".item()" in problem.message
    assert "fall back to a per-seed loop (same numbers, slower)" in problem.message
    assert report.ok
    text = report.format()
    assert text.startswith("warning: [not-vmappable]")
    assert text.endswith("OK: item_loss — classification_loss(scale=1.0)")


def test_stateful_hook_with_context_is_ok(tmp_path):
    spec = write(tmp_path, """
        import torch
        import torch.nn.functional as F

        SEARCH_SPACE = {"beta": {"low": 0.5, "high": 0.99}}

        def classification_loss(logits, targets, *, state, progress, beta: float = 0.9):
            ce = F.cross_entropy(logits, targets, reduction="none")
            with torch.no_grad():
                old = torch.nan_to_num(state, nan=0.0)
                state.copy_(beta * old + (1 - beta) * ce)
            return ce * (1 + progress)
    """, name="ema.py")
    report = validate(spec)
    assert report.problems == [], report.format()


def test_asking_for_index_is_an_error_that_says_why(tmp_path):
    spec = write(tmp_path, """
        def classification_loss(logits, targets, *, index, state):
            return logits.logsumexp(-1) - logits.gather(1, targets[:, None])[:, 0]
    """, name="indexed.py")
    report = validate(spec)
    assert [p.code for p in report.problems] == ["signature"], report.format()
    assert "no longer told which training samples" in report.problems[0].message


def test_user_keyboard_interrupt_is_not_swallowed(tmp_path):
    spec = write(tmp_path, """
        def classification_loss(logits, targets):
            raise KeyboardInterrupt
    """)
    with pytest.raises(KeyboardInterrupt):
        validate(spec)


# --- report format, built-ins, template ---------------------------------------------


def test_format_ok_line_shows_hyperparameters():
    assert validate("gce").format() == "OK: gce — classification_loss(q=0.7)"
    assert validate("gce", {"q": 0.5}).format() == "OK: gce — classification_loss(q=0.5)"


def test_format_error_block(tmp_path):
    spec = write(tmp_path, """
        def classification_loss(logits, targets):
            return logits
    """)
    text = validate(spec).format()
    assert text.startswith("error: [shape] classification_loss returned shape [8, 10]")
    assert text.splitlines()[-1] == f"FAILED: {spec} — 1 error"


@pytest.mark.parametrize("name", list(registry.builtins()))
def test_builtins_validate_without_problems(name):
    report = validate(name)
    # The unlearning suites' reference row leaves the target untouched on purpose.
    allowed = {"target": {"no-update"}}.get(name, set())
    assert report.ok and {p.code for p in report.problems} == allowed, report.format()
    assert report.objective is not None and report.objective.origin == "builtin"


def test_template_validates_without_problems(tmp_path):
    path = tmp_path / "my_loss.py"
    path.write_text(render("my_loss"))
    report = validate(str(path))
    assert report.problems == [], report.format()
    assert report.format() == "OK: my_loss — classification_loss(temperature=1.0)"
    assert report.objective.description.startswith("my_loss: a training objective")


def test_template_text():
    text = render("sharp_ce")
    assert "{name}" in TEMPLATE and "{name}" not in text
    assert "harness validate sharp_ce.py" in text
    for word in ("progress", "state", "SEARCH_SPACE", "averages", ".item()", "[B, C]"):
        assert word in text
    compile(TEMPLATE, "template.py", "exec")
    with pytest.raises(ValueError):
        render('bad"""name')


def test_importing_validate_does_not_import_torch():
    code = "import sys, harness.objectives.validate; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


# --- the test-time adaptation hooks --------------------------------------------------


@pytest.mark.parametrize("body, code, words", [
    ("return probs.tolist()", "type", "returned list; it must return a tensor of "
                                      "probabilities (an ordinary batch)"),
    ("raise RuntimeError('no')", "exception", "tta_adjust raised RuntimeError: no"),
    ("return probs[:, :3]", "shape", "returned shape [16, 3], not the batch's [16, 10]"),
    ("return probs * float('nan')", "non-finite", "returned non-finite probabilities"),
    ("return probs * 2", "range", "outside [0, 1]"),
    ("return probs if len(probs) > 1 else probs * 0", "range", "do not sum to 1 (a batch of "
                                                               "one sample)"),
])
def test_a_bad_tta_adjust_is_caught_before_it_runs(tmp_path, body, code, words):
    check_error(write(tmp_path, f"""
        def tta_adjust(probs, features):
            {body}
    """), code, words)


def test_good_test_time_hooks_pass_and_a_bad_step_option_does_not(tmp_path):
    for name in ("tent", "eata", "sar", "lame", "source"):
        assert validate(name).ok, validate(name).format()
    check_error(write(tmp_path, """
        MODEL = {"sharpness": -1.0}
        def tta_loss(logits):
            return logits.logsumexp(-1)
    """), "model", "MODEL['sharpness'] must be a finite number ≥ 0")
