"""Held-out variants: drawn from the server's secret, run only where it is set, in no
public list or API answer, shown as a column beside their public twin."""

from __future__ import annotations

import numpy as np
import pytest

from harness.contract import heldout
from harness.contract.registry import get_suite
from harness.contract.suite import Anchors, MetricSpec, Suite, SuiteError, Variant
from harness.sandbox import launch as sandbox_launch
from suites.noisy_labels import noise
from suites.noisy_labels.pipeline import NoisyLabels, load_dataset
from tests.client.test_cli import IN_PROCESS, harness
from tests.web.test_leaderboard import make_objective

SECRET = "a-server-secret-of-some-length"
SUITE = get_suite("noisy-labels")
HELD = SUITE.variant("held-out")


@pytest.fixture
def secret(monkeypatch):
    monkeypatch.setenv(heldout.SECRET_ENV, SECRET)
    return SECRET


def test_draws_are_keyed_by_the_secret_and_the_purpose(monkeypatch):
    monkeypatch.setenv(heldout.SECRET_ENV, SECRET)
    a = heldout.draw("noisy-labels", "held-out", "split")
    assert a == heldout.draw("noisy-labels", "held-out", "split") and 0 <= a < 2**63
    assert a != heldout.draw("noisy-labels", "held-out", "noise")
    fp = heldout.fingerprint()
    monkeypatch.setenv(heldout.SECRET_ENV, SECRET + "!")
    assert a != heldout.draw("noisy-labels", "held-out", "split")
    assert fp != heldout.fingerprint()


def test_without_a_long_enough_secret_nothing_is_drawn(monkeypatch):
    monkeypatch.delenv(heldout.SECRET_ENV, raising=False)
    assert not heldout.available()
    with pytest.raises(heldout.Unavailable, match="run only on the server"):
        heldout.draw("s", "v", "p")
    with pytest.raises(heldout.Unavailable):
        NoisyLabels().prepare(SUITE, [HELD], [0])
    monkeypatch.setenv(heldout.SECRET_ENV, "short")
    with pytest.raises(heldout.Unavailable, match="at least 16 characters"):
        heldout.fingerprint()


def test_the_held_out_variant_draws_its_split_and_noise_from_the_secret(secret, monkeypatch):
    public = load_dataset("digits", None, False)
    (job,) = NoisyLabels().prepare(SUITE, [HELD], [0, 1])
    data = job.private
    assert data.x_train.shape == public.x_train.shape  # same protocol: 1000/797, stratified
    assert np.array_equal(np.bincount(data.y_train), np.bincount(public.y_train))
    assert not np.array_equal(data.x_train, public.x_train)  # another split
    labels = job.inputs["labels"]
    assert noise.realized_rate(data.y_train, labels[0]) == pytest.approx(0.4, abs=0.002)
    # reproducible under the same secret, another draw under another
    (again,) = NoisyLabels().prepare(SUITE, [HELD], [0, 1])
    assert np.array_equal(again.inputs["labels"], labels)
    monkeypatch.setenv(heldout.SECRET_ENV, SECRET + "-rotated")
    (other,) = NoisyLabels().prepare(SUITE, [HELD], [0, 1])
    assert not np.array_equal(other.private.x_train, data.x_train)


def test_public_variants_do_not_change_and_stay_one_job(secret):
    jobs = NoisyLabels().prepare(SUITE, [SUITE.variant("sym-0.4"), HELD], [0])
    assert [j.members for j in jobs] == [[("sym-0.4", 0)], [("held-out", 0)]]
    assert np.array_equal(jobs[0].private.x_train, load_dataset("digits", None, False).x_train)


def test_the_secret_never_reaches_a_sandboxed_child(secret):
    env = sandbox_launch.environment(None, 1, "cpu")
    assert heldout.SECRET_ENV not in env and SECRET not in "".join(env.values())


def test_held_out_variants_are_on_no_public_list():
    assert "held-out" not in [v.name for v in SUITE.variants]
    assert "held-out" not in SUITE.default_variants and "held-out" not in SUITE.ranked_variants
    assert HELD.held_out_of == "sym-0.4"


def _suite(**changes) -> Suite:
    fields = dict(name="t", version="1", description="d", hooks=("classification_loss",),
                  headline="err", metrics=(MetricSpec("err", "e", better="lower"),),
                  anchors={"err": Anchors(1.0, 0.0)}, variants=(Variant("a", {}, ""),),
                  pipeline="x:Y", baselines=("ce",))
    return Suite(**{**fields, **changes})


@pytest.mark.parametrize("changes, message", [
    ({"held_out": (Variant("h", {}, "", held_out_of="zzz"),)}, "held_out_of= one of its"),
    ({"held_out": (Variant("a", {}, "", held_out_of="a"),)}, "repeats a variant's name"),
    ({"variants": (Variant("a", {}, ""), Variant("h", {}, "", held_out_of="a"))},
     "declare it in held_out"),
])
def test_a_bad_held_out_declaration_is_refused(changes, message):
    with pytest.raises(SuiteError, match=message):
        _suite(**changes)


def test_the_cli_says_it_cannot_run_held_out_variants(cli_env, tmp_path):
    cli_env.pop(heldout.SECRET_ENV, None)
    proc = harness("run", "suite", "noisy-labels", "--variants", "held-out", "--epochs", "1",
                   env=cli_env, cwd=tmp_path)
    assert proc.returncode != 0
    assert "held-out: held out" in proc.stderr and "runs only on the server" in proc.stderr
    listing = harness("ls", env=cli_env, cwd=tmp_path)
    assert "held-out" in listing.stdout and "runs only there" in listing.stdout


# --- the web app ---------------------------------------------------------------------------


def _with_held_out(slug: str, public: list[float], held: list[float]):
    version = make_objective(slug, {"sym-0.4": public, "held-out": held})
    return version


@pytest.mark.django_db
def test_the_suite_page_shows_the_held_out_mean_and_its_gap_to_the_twin(client, secret,
                                                                       monkeypatch):
    _with_held_out("ce", [0.70, 0.72, 0.71], [0.69, 0.70, 0.71])
    _with_held_out("tuned", [0.90, 0.91, 0.92], [0.80, 0.81, 0.82])
    page = client.get("/suites/noisy-labels/?variant=sym-0.4").content.decode()
    assert "held-out" in page and "vs sym-0.4" in page
    assert "81.0" in page and "(−10.0)" in page  # tuned: 81.0 held out, 91.0 public
    assert "(−1.0)" in page  # ce: 70.0 vs 71.0
    # the variant's own table, cells and config are on no page or answer
    assert "?variant=held-out" not in page and "secret" not in page.split("<table")[0]
    api = client.get("/api/results?variant=held-out").json()
    assert api["results"] == [] or all(r["variant"] != "held-out" for r in api["results"])
    everything = client.get("/api/results?page_size=100").json()
    assert {r["variant"] for r in everything["results"]} == {"sym-0.4"}
    assert client.get("/api/results?suite=noisy-labels&variant=held-out").status_code == 404
    suite = client.get("/api/suites/noisy-labels").json()
    assert "held-out" not in str(suite)
    # under a rotated secret the stored draws are another variant's: no column
    monkeypatch.setenv(heldout.SECRET_ENV, SECRET + "-rotated")
    page = client.get("/suites/noisy-labels/?variant=sym-0.4").content.decode()
    assert "vs sym-0.4" not in page


@pytest.mark.django_db
def test_without_the_secret_the_server_shows_no_held_out_column(client, monkeypatch):
    monkeypatch.setenv(heldout.SECRET_ENV, SECRET)
    _with_held_out("ce", [0.70, 0.72, 0.71], [0.69, 0.70, 0.71])
    monkeypatch.delenv(heldout.SECRET_ENV)
    page = client.get("/suites/noisy-labels/?variant=sym-0.4").content.decode()
    assert "vs sym-0.4" not in page


@pytest.mark.django_db
def test_a_submission_runs_the_held_out_variants_where_the_secret_is(secret, monkeypatch,
                                                                     django_user_model):
    from webapp.forms import SubmissionForm, _submitted_variants

    form = SubmissionForm(user=django_user_model.objects.create_user("bob"))
    assert form._held_out_allowed([SUITE])
    assert _submitted_variants(SUITE, True) == [*SUITE.default_variants, "held-out"]
    assert _submitted_variants(SUITE, False) == SUITE.default_variants
    monkeypatch.delenv(heldout.SECRET_ENV)
    assert not form._held_out_allowed([SUITE])


SNOOP = '''\
"""Cross-entropy that looks for the held-out secret wherever a loss could."""
import os

import torch.nn.functional as F

found = [k for k, v in os.environ.items() if "HELDOUT" in k or "server-secret" in v]
print("secret:", found or "absent")


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
'''


@pytest.mark.slow
def test_an_operator_runs_a_held_out_variant_and_the_sandboxed_loss_never_sees_the_secret(
        cli_env, tmp_path, monkeypatch):
    from tests.client.test_cli import query

    (tmp_path / "snoop.py").write_text(SNOOP)
    cli_env[heldout.SECRET_ENV] = SECRET
    proc = harness("run", "suite", "noisy-labels", "-o", "snoop.py", "--variants", "held-out",
                   "--seeds", "1", "--epochs", "1", "--sandbox", *IN_PROCESS, env=cli_env,
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = query(cli_env, "SELECT v.label, c.variant, c.status, c.captured, c.variant_hash "
                          "FROM webapp_cell c JOIN webapp_objectiveversion v "
                          "ON c.version_id = v.id ORDER BY v.label")
    assert [r[:3] for r in rows] == [("ce", "held-out", "ok"), ("snoop", "held-out", "ok")]
    assert "secret: absent" in rows[1][3] and SECRET not in proc.stdout + proc.stderr
    monkeypatch.setenv(heldout.SECRET_ENV, SECRET)  # the stored hash names this secret
    assert rows[1][4] == HELD.config_hash(SUITE.shortened(1))


@pytest.mark.slow
@pytest.mark.django_db
def test_a_web_submission_runs_the_held_out_variant_and_shows_only_its_mean(
        secret, settings, client, django_capture_on_commit_callbacks):
    from django.contrib.auth.models import User

    from harness.storage.models import Submission
    from tests.web.test_submit import status, submit
    from webapp import leaderboard
    from webapp.leaderboard.held_out_column import held_out_columns

    settings.HARNESS_RUN_EPOCHS, settings.HARNESS_EXECUTOR = 1, "inline"
    owner = client.__class__()
    owner.force_login(User.objects.create_user("alice", password="correct-horse-1"))
    with django_capture_on_commit_callbacks(execute=True):
        submit(owner, seeds=1)
    submission = Submission.objects.get()
    state = status(owner, submission)
    assert state["finished"] and state["counts"]["ok"] == len(SUITE.default_variants) + 1
    (cell,) = submission.cells.filter(variant="held-out")
    run = SUITE.shortened(1)
    assert cell.variant_hash == HELD.config_hash(run)  # drawn under this server's secret
    rows = leaderboard.suite_page(run, "sym-0.4")["across"]["rows"]
    (column,) = held_out_columns(run, rows)
    assert column == {"variant": "held-out", "twin": "sym-0.4"}
    (mine,) = [r for r in rows if r["slug"] == "my-loss"]
    mean = cell.metrics.get(name="test_acc").value
    assert mine["held_out"][0]["mean"] == pytest.approx(mean) and mine["held_out"][0]["seeds"] == 1
    twin = [c["mean"] for c in mine["cells"] if c["variant"] == "sym-0.4"][0]
    assert mine["held_out"][0]["gap"] == pytest.approx(mean - twin)
    # the public API lists neither the variant nor its cells
    assert "held-out" not in str(client.get("/api/suites/noisy-labels").json())
    results = client.get("/api/results?objective=my-loss&page_size=100").json()["results"]
    assert len(results) == len(SUITE.default_variants)
    assert all(r["variant"] != "held-out" for r in results)


# --- the quota on probing them (webapp/quota.py) ----------------------------------------


def _probe(user, *, hours_ago: float = 1.0, held_status: str = "queued",
           reason: str = "") -> None:
    """A submission of ``user`` that queued one public and one held-out cell."""
    from datetime import timedelta

    from django.utils import timezone

    from harness.storage.models import Cell, Submission

    version = make_objective(f"probe-{Submission.objects.count()}", {}, builtin=False,
                             owner=user)
    sub = Submission.objects.create(owner=user, version=version, suites=[SUITE.name])
    Submission.objects.filter(pk=sub.pk).update(
        created=timezone.now() - timedelta(hours=hours_ago))
    sub.cells.set([Cell.objects.create(version=version, suite=SUITE.name,
                                       suite_version=SUITE.version, variant=v, seed=0,
                                       status=s, reason=r)
                   for v, s, r in (("sym-0.4", "ok", ""), ("held-out", held_status, reason))])


@pytest.mark.django_db
def test_past_its_daily_allowance_a_submission_runs_the_public_variants_only(
        secret, client, settings, django_user_model):
    from webapp.forms import SubmissionForm
    from webapp.quota import allowance
    from webapp.tokens import create

    settings.HARNESS_HELDOUT_RUNS_PER_DAY = 2
    alice = django_user_model.objects.create_user("alice", password="pw-alice-123")
    form = SubmissionForm(user=alice)
    assert form._held_out_allowed([SUITE]) and allowance(alice).remaining == 2
    client.force_login(alice)
    assert "2 of 2 runs left" in client.get("/submit/").content.decode()
    _probe(alice, hours_ago=30)  # outside the window
    _probe(alice, held_status="failed", reason="infrastructure")  # the server's failure
    _probe(alice, held_status="failed", reason="objective")  # the objective's: counts
    _probe(alice, held_status="running")
    left = allowance(alice)
    assert (left.used, left.remaining) == (2, 0)
    assert not form._held_out_allowed([SUITE])
    assert "public variants only" in form.warnings[0] and "limit is 2" in form.warnings[0]
    assert "0 of 2 runs left" in client.get("/submit/").content.decode()
    # what the API says to the token holder
    _, token = create(alice, "cli")
    answer = client.get("/api/quota", HTTP_AUTHORIZATION=f"Bearer {token}").json()
    assert answer["remaining"] == 0 and answer["used"] == 2 and answer["held_out_variants"]
    assert answer["next_frees_at"] == left.frees_at.isoformat()
    assert client.get("/api/quota").status_code == 401
    settings.HARNESS_HELDOUT_RUNS_PER_DAY = 3
    assert SubmissionForm(user=alice)._held_out_allowed([SUITE])
