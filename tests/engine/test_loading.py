"""load_objective: file paths, built-in names, dotted modules, overrides, identity, bind."""

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
import torch

from harness.contract import registry
from harness.objectives.loading import (
    ObjectiveError,
    load_objective,
    parse_assignments,
    user_traceback,
)

SCALED = '''
"""Scaled logsumexp: a test objective.

More text.
"""


def classification_loss(logits, targets, *, scale: float = 1.0, steps: int = 3):
    return (logits * scale).logsumexp(-1)
'''


def write(directory: Path, body: str, name: str = "scaled.py") -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(body).lstrip("\n"))
    return path


def error_of(spec, overrides=None) -> ObjectiveError:
    with pytest.raises(ObjectiveError) as info:
        load_objective(spec, overrides)
    return info.value


def make_package(tmp_path, monkeypatch, modules: dict[str, str]) -> str:
    """A uniquely named package on sys.path holding ``modules``; returns its name."""
    package = f"objpkg_{uuid.uuid4().hex[:8]}"
    root = tmp_path / package
    root.mkdir()
    (root / "__init__.py").write_text("")
    for name, body in modules.items():
        write(root, body, f"{name}.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    return package


# --- where an objective comes from ---------------------------------------------------


def test_load_by_file_path(tmp_path):
    path = write(tmp_path, SCALED)
    obj = load_objective(str(path))
    assert (obj.name, obj.origin, obj.path) == ("scaled", "file", str(path.resolve()))
    assert obj.source == path.read_text()
    assert obj.defaults == {"scale": 1.0, "steps": 3}
    assert obj.description == "Scaled logsumexp: a test objective."
    assert list(obj.hooks) == ["classification_loss"]


def test_load_by_relative_path_keeps_user_traceback(tmp_path, monkeypatch):
    write(tmp_path, """
        def classification_loss(logits, targets):
            return logits.foo()
    """, "broken.py")
    monkeypatch.chdir(tmp_path)
    obj = load_objective("broken.py")
    with pytest.raises(AttributeError) as info:
        obj.bind("classification_loss")(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long))
    assert "return logits.foo()" in user_traceback(info.value, obj.path)


def test_load_builtin_by_name():
    obj = load_objective("gce")
    assert (obj.name, obj.origin) == ("gce", "builtin")
    assert obj.path == str(registry.builtins()["gce"].path)
    assert obj.defaults == {"q": 0.7}
    assert "def classification_loss" in obj.source


def test_load_by_dotted_module(tmp_path, monkeypatch):
    package = make_package(tmp_path, monkeypatch, {"myloss": SCALED})
    obj = load_objective(f"{package}.myloss")
    assert (obj.name, obj.origin) == ("myloss", "module")
    assert obj.path.endswith("myloss.py")
    assert obj.defaults == {"scale": 1.0, "steps": 3}


def test_missing_dotted_module(tmp_path, monkeypatch):
    package = make_package(tmp_path, monkeypatch, {})
    err = error_of(f"{package}.nothere")
    assert err.code == "not-found" and "cannot import module" in err.message


def test_dotted_module_with_a_missing_dependency_is_an_import_error(tmp_path, monkeypatch):
    package = make_package(tmp_path, monkeypatch, {"needs": """
        import not_installed_anywhere_xyz

        def classification_loss(logits, targets):
            return logits
    """})
    err = error_of(f"{package}.needs")
    assert err.code == "import"
    assert "ModuleNotFoundError" in err.message
    assert "import not_installed_anywhere_xyz" in err.message


def test_dotted_module_with_a_syntax_error(tmp_path, monkeypatch):
    package = make_package(tmp_path, monkeypatch, {"typo": """
        def classification_loss(logits, targets)
            return logits
    """})
    err = error_of(f"{package}.typo")
    assert err.code == "syntax"
    assert "syntax error in typo.py at line 1" in err.message


def test_file_with_null_byte_is_a_syntax_error(tmp_path):
    path = tmp_path / "nul.py"
    path.write_bytes(b"x = 1\x00\n")
    err = error_of(str(path))
    assert err.code == "syntax" and "line None" not in err.message


def test_no_hook_lists_functions(tmp_path):
    path = write(tmp_path, """
        def my_loss(logits, targets):
            return logits
    """)
    err = error_of(str(path))
    assert err.code == "no-hook"
    assert "classification_loss(logits[B, C], targets[B])" in err.message
    assert "found functions: my_loss" in err.message


def test_extra_positional_without_default(tmp_path):
    path = write(tmp_path, """
        def classification_loss(logits, targets, q):
            return logits
    """)
    err = error_of(str(path))
    assert err.code == "signature"
    assert "extra positional argument(s) without a default: q" in err.message


# --- overrides -----------------------------------------------------------------------


def test_parse_assignments():
    assert parse_assignments(["q=0.5", "name=x", "n = 3", "flag=True"]) == {
        "q": 0.5, "name": "x", "n": 3, "flag": True}
    with pytest.raises(ObjectiveError) as info:
        parse_assignments(["q"])
    assert info.value.code == "bad-override" and "key=value" in info.value.message


def test_a_key_set_twice_is_an_error_not_last_wins():
    with pytest.raises(ObjectiveError, match="'q' is set twice"):
        parse_assignments(["q=0.5", "q = 0.7"])


def test_override_from_set():
    obj = load_objective("gce", parse_assignments(["q=0.5"]))
    assert obj.hyperparameters == {"q": 0.5}


def test_int_override_becomes_float():
    obj = load_objective("gce", {"q": 1})
    assert obj.hyperparameters["q"] == 1.0 and isinstance(obj.hyperparameters["q"], float)


def test_unknown_override_lists_known_hyperparameters(tmp_path):
    err = error_of(str(write(tmp_path, SCALED)), {"sclae": 2.0})
    assert err.code == "unknown-hyperparameter"
    assert err.message == "unknown hyperparameter 'sclae' (this objective has: scale, steps)"


def test_wrong_override_type(tmp_path):
    err = error_of(str(write(tmp_path, SCALED)), {"steps": 2.5})
    assert err.code == "bad-override"
    assert "'steps' expects int (default 3), got 2.5" in err.message


def test_bool_override_from_text():
    assert load_objective("aldr_kl", {"softplus": "true"}).hyperparameters["softplus"] is True
    assert load_objective("aldr_kl", {"softplus": "false"}).hyperparameters["softplus"] is False
    err = error_of("aldr_kl", {"softplus": "maybe"})
    assert err.code == "bad-override" and "expects bool" in err.message


# --- identity and display -------------------------------------------------------------


def test_version_key_tracks_code_and_hyperparameters(tmp_path):
    path = write(tmp_path, SCALED)
    key = load_objective(str(path)).version_key
    assert load_objective(str(path)).version_key == key
    assert load_objective(str(path), {"scale": 1.0}).version_key == key  # = the default
    assert load_objective(str(path), {"scale": 2.0}).version_key != key
    path.write_text(path.read_text() + "\n# a comment\n")
    assert load_objective(str(path)).version_key != key


def test_version_key_differs_between_objectives():
    assert load_objective("gce").version_key != load_objective("ce").version_key


def test_label_shows_changed_hyperparameters():
    assert load_objective("gce").label == "gce"
    assert load_objective("gce", {"q": 0.7}).label == "gce"
    assert load_objective("gce", {"q": 0.5}).label == "gce(q=0.5)"
    assert load_objective("sce", {"beta": 2.0, "alpha": 0.5}).label == "sce(alpha=0.5, beta=2.0)"


# --- bind ------------------------------------------------------------------------------


def test_bind_passes_only_requested_context(tmp_path):
    path = write(tmp_path, """
        def classification_loss(logits, targets, *, scale: float = 1.0):
            return logits.logsumexp(-1) * scale
    """)
    obj = load_objective(str(path), {"scale": 2.0})
    assert obj.context == {"classification_loss": ()}
    assert not obj.wants("classification_loss", "progress")
    logits = torch.zeros(2, 3)
    out = obj.bind("classification_loss")(logits, torch.zeros(2, dtype=torch.long),
                                          progress=0.5, index=torch.arange(2),
                                          state=torch.zeros(4))
    assert torch.allclose(out, 2.0 * logits.logsumexp(-1))


def test_bind_passes_progress_when_asked(tmp_path):
    path = write(tmp_path, """
        def classification_loss(logits, targets, *, progress, scale: float = 1.0):
            return logits.sum(-1) * 0 + progress * scale
    """)
    obj = load_objective(str(path))
    assert obj.context == {"classification_loss": ("progress",)}
    assert obj.wants("classification_loss", "progress")
    bound = obj.bind("classification_loss")
    assert bound.__name__ == "scaled.classification_loss"
    out = bound(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long), progress=0.25,
                index=torch.arange(2))
    assert out.tolist() == [0.25, 0.25]


def test_context_with_a_default_is_not_a_hyperparameter(tmp_path):
    path = write(tmp_path, """
        def classification_loss(logits, targets, progress=0.0, scale=1.0):
            return logits.sum(-1) * 0 + progress * scale
    """)
    obj = load_objective(str(path))
    assert obj.defaults == {"scale": 1.0}
    assert obj.context == {"classification_loss": ("progress",)}


def test_importing_loading_does_not_import_torch():
    code = "import sys, harness.objectives.loading; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
