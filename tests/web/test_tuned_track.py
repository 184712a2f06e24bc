"""The suite page's tuned track (docs/tuning.md) on a real PostgreSQL, from stored cells:
the track switch, the tuned tables, the chosen trials, the tuning gain paired over seeds,
the budget and sensitivity plots, and a suite without a tuned protocol saying so."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from django.test import Client

from harness.contract.registry import get_suite
from harness.contract.suite import CellResult
from harness.objectives.search import trials
from harness.storage import store
from harness.storage.models import Objective, ObjectiveVersion

pytestmark = pytest.mark.django_db
SUITE = get_suite("noisy-labels")
ENV = {"python": "3.11", "device": "cpu"}
SEEDS = (0, 1, 2, 3, 4)


def _version(slug: str):
    objective = Objective.objects.create(slug=slug, name=slug, is_builtin=True)
    return ObjectiveVersion.objects.create(objective=objective, code="x",
                                           code_sha256=f"{slug:0<64}"[:64],
                                           hyperparameters={}, key=slug, label=slug)


def _cells(version, suite, accuracy, record=None, **info):
    store.store_results(version, suite, [
        CellResult("sym-0.4", s, "ok", {"test_acc": accuracy(s)}, wall_time=1.0,
                   info={**({"tuned": record} if record else {}), **info})
        for s in (SEEDS if record is None or "split" not in info else range(1000, 1005))],
        ENV)


@pytest.fixture
def tuned_cells():
    """ce and gce: defaults, 8 trials each on validation (trial 5 the best), the final."""
    t = SUITE.tuning
    found = trials(t.dimensions(), (), t.k, t.seed)
    for slug, base in (("ce", 0.70), ("gce", 0.76)):
        version = _version(slug)
        _cells(version, SUITE, lambda s, b=base: b + 0.002 * s)
        for i, (settings, _) in enumerate(found):
            record = {"trial": i, "settings": settings, "hyperparameters": {}}
            _cells(version, SUITE.trial(i), lambda s, i=i: 0.5 + (0.1 if i == 5 else 0.005 * i)
                   + 0.001 * (s - 1000), record, split="validation")
        record = {"trial": 5, "settings": found[5][0], "hyperparameters": {}}
        _cells(version, SUITE.tuned(found[5][0]), lambda s, b=base: b + 0.03 + 0.001 * s,
               record)
    return found


def test_the_tuned_track_shows_the_chosen_trials_the_gain_and_the_plots(tuned_cells):
    page = Client().get("/suites/noisy-labels/", {"variant": "sym-0.4", "track": "tuned"})
    assert page.status_code == 200
    html = page.content.decode()
    assert "tuned at k=8" in html and 'id="tuning-table"' in html
    table = html[html.index('id="tuning-table"'):html.index("</table>", html.index(
        'id="tuning-table"'))]
    assert table.count("#5: lr=") == 2  # both chose trial 5, its learning rate shown
    # tuned − defaults on the same seeds: +3.0 pp − 0.1 pp·s over seeds 0..4 → +2.8 pp,
    # and the tuned rows themselves in the page's main table
    assert table.count("+2.8") == 2
    assert "73.2" in html and "79.2" in html  # the tuned means of ce and gce (%)
    figures = dict(re.findall(r'<script id="([\w-]+)" type="application/json">(.*?)</script>',
                              html, re.S))
    budget = json.loads(figures["budget-data"])
    assert len([t for t in budget["data"] if t.get("name")]) == 2  # a curve per objective
    curve = next(t for t in budget["data"] if t.get("name") == "gce")["y"]
    # one trial: the mean of the trials' scores; eight: towards the best (trial 5's 60.2%)
    means = [50.2 + (10 if i == 5 else 0.5 * i) for i in range(8)]
    assert curve[0] == pytest.approx(sum(means) / 8) and curve[0] < curve[-1] < 60.2
    sensitivity = json.loads(figures["sensitivity-data-0"])  # the learning rate, every seed
    assert sum(len(t["x"]) for t in sensitivity["data"]) == 2 * 8 * 5
    assert sensitivity["layout"]["xaxis"]["type"] == "log"


def test_the_defaults_track_links_to_the_tuned_one_and_stays_as_it_was(tuned_cells):
    html = Client().get("/suites/noisy-labels/", {"variant": "sym-0.4"}).content.decode()
    assert "track=tuned" in html and 'id="tuning-table"' not in html
    assert "70.4" in html  # ce's default mean (%), not its tuned one


@pytest.mark.parametrize("query, message", [
    ({"track": "tuned"}, "has no tuned track"), ({"track": "best"}, "no track")])
def test_a_track_that_does_not_exist_is_a_clear_404(query, message, monkeypatch):
    monkeypatch.setenv("HARNESS_SUITES", "tests.fake_suite")  # a suite with no tuned protocol
    page = Client().get("/suites/fake-regression/" if "tuned" in query.values()
                        else "/suites/noisy-labels/", query)
    assert page.status_code == 404 and message in page.content.decode()
    if "tuned" in query.values():
        api = Client().get("/api/suites/fake-regression", query)
        assert api.status_code == 404


def test_the_home_board_scores_either_track_and_names_it(tuned_cells):
    tuned = Client().get("/", {"track": "tuned"}).content.decode()
    board = tuned[tuned.index('id="home-board"'):tuned.index("</table>")]
    assert "Only suites with a tuned protocol are scored here" in tuned
    assert "/suites/noisy-labels/?track=tuned" in board and "/suites/unlearning-tofu/" not in board
    assert ">ce<" in board and ">gce<" in board
    default = Client().get("/").content.decode()
    board = default[default.index('id="home-board"'):default.index("</table>")]
    assert "Only suites with a tuned protocol" not in default
    assert "/suites/noisy-labels/" in board and "track=tuned" not in board


def test_the_objective_page_takes_the_track_and_shows_what_tuning_gained(tuned_cells):
    first = Client().get("/objectives/gce/").content.decode()  # cached first: no leak
    html = Client().get("/objectives/gce/", {"track": "tuned"}).content.decode()
    assert "tuning-noisy-labels" not in first and "tuning-noisy-labels" in html
    table = html[html.index('id="tuning-noisy-labels"'):]
    table = table[:table.index("</table>")]
    # gce: defaults 76.4% over seeds 0..4, tuned 79.2%, the paired gain +2.8 pp, trial 5
    assert "76.4" in table and "79.2" in table and "+2.8" in table and "#5: lr=" in table
    assert "/suites/noisy-labels/?track=tuned" in html and "not comparable" in html
    assert 'action="/objectives/gce/compare/"' not in html  # compare reads defaults only
    default = Client().get("/objectives/gce/").content.decode()
    assert "tuning-noisy-labels" not in default and "?track=tuned" in default  # the switch
    assert "76.4" in default and "79.2" not in default
    bad = Client().get("/objectives/gce/", {"track": "best"})
    assert bad.status_code == 404 and "no track" in bad.content.decode()


def test_exports_and_the_api_give_the_track_asked(tuned_cells):
    def rows(url, **query):
        return list(csv.DictReader(io.StringIO(Client().get(url, query).content.decode())))

    tuned = rows("/export/noisy-labels/csv", variant="sym-0.4", track="tuned")
    default = rows("/export/noisy-labels/csv", variant="sym-0.4")
    means = {r["slug"]: (r["suite_version"], float(r["mean"])) for r in tuned}
    assert means["gce"] == (SUITE.tuned().version, pytest.approx(0.792))
    assert {r["slug"]: float(r["mean"]) for r in default}["gce"] == pytest.approx(0.764)
    latex = Client().get("/export/noisy-labels/tex", {"track": "tuned"}).content.decode()
    assert "Tuned track" in latex and "79.2" in latex
    scores = rows("/export/scores.csv", track="tuned")
    assert {r["track"] for r in scores} == {"tuned"}
    assert "normalized_unlearning-tofu" not in scores[0]
    api = Client().get("/api/scores", {"track": "tuned"}).json()
    assert api["track"] == "tuned" and {r["slug"] for r in api["rows"]} == {"ce", "gce"}
    detail = Client().get("/api/suites/noisy-labels", {"track": "tuned",
                                                       "variant": "sym-0.4"}).json()
    assert detail["suite"]["version"] == SUITE.tuned().version
    assert Client().get("/api/scores", {"track": "best"}).status_code == 400
    for url in ("/export/noisy-labels/csv", "/export/scores.csv"):
        assert Client().get(url, {"track": "best"}).status_code == 404
