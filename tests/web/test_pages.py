"""Leaderboard pages: render with the expected content, hide private code, export tables,
answer unknown names with a friendly 404, and keep a fixed number of queries per page."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.web.test_leaderboard import (
    CE,
    FAKE_HUBER,
    FAKE_MSE,
    GCE,
    MAE,
    make_objective,
    with_fake_suite,
)

pytestmark = pytest.mark.django_db
FULL = {v: [0.80, 0.82, 0.81] for v in ("clean", "sym-0.2", "sym-0.4", "sym-0.6", "asym-0.2",
                                         "asym-0.4", "idn-0.4")}


@pytest.fixture
def board():
    make_objective("ce", CE, curves=True)
    make_objective("gce", GCE, curves=True)
    make_objective("mae", MAE)


@pytest.fixture
def alice():
    return User.objects.create_user("alice", password="alice-pass-123")


def _json_script(html: str, element_id: str):
    match = re.search(rf'<script id="{element_id}" type="application/json">(.*?)</script>',
                      html, re.S)
    assert match, f"no json_script {element_id}"
    return json.loads(match.group(1))


def panel(figure: dict, title: str, axis: str = "x") -> list[dict]:
    """The traces of a figure's panel whose x (or y) axis title contains ``title``."""
    keys = [k for k, a in figure["layout"].items() if k.startswith(f"{axis}axis")
            and title in a.get("title", {}).get("text", "")]
    assert len(keys) == 1, f"no single panel {title!r}"
    ref = keys[0].replace("axis", "")
    return [t for t in figure["data"] if t.get(f"{axis}axis", axis) == ref]


def test_home_lists_objectives_with_relative_cells_and_filters(client, board):
    make_objective("mine", GCE, builtin=False)
    html = client.get("/").content.decode()
    assert 'id="home-board"' in html and "noisy-labels" in html
    for name in ("gce", "mae", "mine"):
        assert f'href="/objectives/{name}/"' in html
    assert html.count('class="badge baseline"') == 3  # ce, gce, mae; not the submission
    assert "+10.3" in html  # gce: mean over seeds of mean over clean, sym-0.4 of gce - ce (pp)
    assert "reference" in html and "webapp/board.js" in html
    submitted = client.get("/?kind=submitted").content.decode()
    assert 'href="/objectives/mine/"' in submitted
    assert 'href="/objectives/gce/"' not in submitted
    assert client.get("/?suite=noisy-labels").status_code == 200
    missing = client.get("/?suite=nope")
    assert missing.status_code == 404 and "no suite" in missing.content.decode()


def test_pages_without_results_say_so(client):
    html = client.get("/").content.decode()
    assert "make demo" in html and "harness profile" in html and 'href="/submit/"' in html
    tta = client.get("/?suite=tta").content.decode()
    assert "harness run suite tta" in tta
    suite = client.get("/suites/noisy-labels/").content.decode()
    assert "No results for clean yet" in suite
    assert "harness run suite noisy-labels --variants clean" in suite
    assert 'href="/submit/?suite=noisy-labels"' in suite
    from django.contrib.auth.models import User

    client.force_login(User.objects.create_user("newcomer"))
    form = client.get("/submit/?suite=noisy-labels").content.decode()
    ticked = re.findall(r'<input[^>]*name="suites"[^>]*>', form)
    assert [t for t in ticked if " checked" in t] == [
        t for t in ticked if 'value="noisy-labels"' in t] != []


def test_suite_page_table_plots_and_exports(client, board):
    response = client.get("/suites/noisy-labels/?variant=sym-0.4")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="variant-table"' in html and "P(&gt;ce)" in html
    assert "≈ n.d." in html  # mae is not distinguishable from ce on sym-0.4
    assert "★" in html
    for v in ("clean", "sym-0.2", "cifar10n/worst"):  # the variant picker
        assert f"?variant={v}" in html
    assert "/export/noisy-labels/csv?variant=sym-0.4" in html
    assert "/export/noisy-labels/tex?variant=sym-0.4" in html
    assert "/static/vendor/plotly.min.js" in html and "cdn" not in html.lower()
    strip = _json_script(html, "strip-data")  # the figure, drawn ×100 as the table shows
    assert [t["name"] for t in strip["data"]] == ["gce ★", "mae", "ce"]
    assert GCE["sym-0.4"] == [0.90, 0.93, 0.91, 0.92]
    assert strip["data"][0]["x"] == [90, 93, 91, 92]
    assert strip["layout"]["xaxis"]["title"]["text"] == \
        "clean test accuracy (last epoch) (%) — higher is better"
    family = _json_script(html, "family-data")
    sym = [t for t in panel(family, "digits/symmetric") if "name" in t]  # the lines
    assert {t["name"] for t in sym} == {"gce", "mae", "ce"}
    assert sym[0]["x"] == [0.0, 0.2, 0.4, 0.6]
    assert [m is None for m in sym[0]["y"]] == [False, True, False, True]
    default = client.get("/suites/noisy-labels/").content.decode()
    assert "<h2>clean" in default  # the first default variant with results
    assert client.get("/suites/noisy-labels/?variant=sym-0.4&kind=submitted&show=all"
                      ).status_code == 200


def _across_rows(html: str) -> dict[str, str]:
    table = html.split('id="across-table"')[1].split("</table>")[0]
    rows = re.findall(r"<tr class=[^>]*>(.*?)</tr>", table, re.S)
    return {re.search(r'class="obj">([^<]+)<', r).group(1): r for r in rows}


def _cells(row_html: str) -> list[str]:
    return [re.sub(r"<[^>]+>", " ", c).split() for c in
            re.findall(r"<td[^>]*>(.*?)</td>", row_html, re.S)]


def test_suite_page_across_variants_marks_the_worst_variant(client, board):
    make_objective("full", {v: [0.5 + i / 100, 0.52 + i / 100] for i, v in enumerate(FULL)},
                   builtin=False)
    html = client.get("/suites/noisy-labels/?variant=sym-0.4").content.decode()
    assert "<h2 id=\"across-variants\">Across variants</h2>" in html
    rows = _across_rows(html)
    assert list(rows) == ["full", "gce", "ce", "mae"]  # complete first, then by mean
    gce = _cells(rows["gce"])
    # objective, mean, worst (value, variant), the 7 default variants, covered/total
    assert gce[1] == ["94.0"] and gce[2] == ["91.5", "sym-0.4"]
    assert gce[3] == ["96.5"] and gce[5] == ["91.5"] and gce[4] == ["–"]
    assert gce[-1] == ["2/7"]
    assert re.findall(r'<td[^>]*class="worst"[^>]*>([^<]*)</td>', rows["gce"]) == ["91.5"]
    full = _cells(rows["full"])  # its worst is clean, the lowest mean (51.0)
    assert full[2] == ["51.0", "clean"] and full[-1] == ["7/7"]
    assert full[1] == ["54.0"]  # mean over the 7 per-variant means 51.0 … 57.0
    submitted = client.get("/suites/noisy-labels/?variant=sym-0.4&kind=submitted")
    assert list(_across_rows(submitted.content.decode())) == ["full", "ce"]
    assert 'id="heatmap-data"' not in html  # noisy-labels declares no heatmap


def test_suite_page_heatmap_and_across_variants_when_lower_is_better(client, monkeypatch):
    with_fake_suite(monkeypatch)
    html = client.get("/suites/fake-regression/?variant=out-0.4").content.decode()
    (heat,) = _json_script(html, "heatmap-data")["data"]
    assert heat["y"] == ["huber", "mse"]  # out-0.4's table: RMSE 0.875 < 0.9
    expected = [[sum(p[k] for p in values["out-0.4"]) / 2 for k in (0, 1)]
                for values in (FAKE_HUBER, FAKE_MSE)]
    assert [[round(x, 6) for x in row] for row in heat["z"]] == \
        [[round(x, 6) for x in row] for row in expected]  # not a percent: not ×100
    assert heat["x"] == ["RMSE", "MAE"] and heat["reversescale"] is True  # lower is better
    assert heat["colorbar"]["title"]["text"] == "lower is better"
    assert 'data-plot="heatmap"' in html
    rows = _across_rows(html)
    assert list(rows) == ["huber", "mse"]  # mean RMSE 0.725 < 0.867
    assert _cells(rows["mse"])[2] == ["1.100", "out-0.2"]  # the largest RMSE is the worst
    assert _cells(rows["huber"])[2] == ["0.875", "out-0.4"]
    assert _cells(rows["huber"])[1] == ["0.725"]


def test_suite_page_limits_rows_but_keeps_the_reference(client):
    make_objective("ce", {"sym-0.4": [0.1, 0.1]})
    for i in range(20):
        make_objective(f"obj-{i}", {"sym-0.4": [0.5 + i / 100, 0.5]}, builtin=False)
    html = client.get("/suites/noisy-labels/?variant=sym-0.4&show=15").content.decode()
    table = html.split('id="variant-table"')[1].split("</table>")[0]
    assert table.count("<tr class=") == 16  # 15 best + the reference
    assert "5 more objectives hidden" in html


def test_objective_page_shows_numbers_curves_and_public_code(client, board):
    response = client.get("/objectives/gce/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "The gce objective." in html and "Built-in baseline" in html
    assert '<h1>gce <span class="badge baseline">' in html  # read as "gce baseline"
    assert 'class="code highlight"' in html and "classification_loss" in html
    assert 'id="variants-noisy-labels"' in html and "sym-0.4" in html
    assert 'Curves <span class="muted small">clean</span>' in html
    curves = _json_script(html, "curves-data-noisy-labels")
    assert {t["name"] for t in curves["data"] if t.get("name", "").endswith(" mean")} == \
        {"gce mean", "ce mean"}
    loss = {t.get("name"): t for t in panel(curves, "training loss", axis="y")}
    assert loss["gce seed 0"]["y"] == [2.0, 1.0, 0.5]
    assert loss["gce seed 0"]["visible"] == "legendonly"
    accuracy = {t.get("name"): t for t in panel(curves, "accuracy (%)", axis="y")}
    assert accuracy["gce mean"]["y"][-1] == 96.5  # clean: the mean of 0.96, 0.97, 0.97, 0.96
    family = _json_script(html, "family-noisy-labels")
    assert family["data"] and "noise rate" in family["layout"]["xaxis"]["title"]["text"]
    other = client.get("/objectives/gce/?curves-noisy-labels=sym-0.4").content.decode()
    assert 'Curves <span class="muted small">sym-0.4</span>' in other
    accuracy = {t.get("name"): t for t in panel(_json_script(other, "curves-data-noisy-labels"),
                                            "accuracy (%)", axis="y")}
    assert accuracy["gce mean"]["y"][-1] == 91.5  # sym-0.4: 0.90, 0.93, 0.91, 0.92
    assert 'action="/objectives/gce/compare/"' in html
    assert '<option value="ce" selected>' in html  # compare with the reference by default


def test_private_code_is_hidden_from_others_and_shown_to_its_owner(client, alice):
    make_objective("ce", CE)
    make_objective("secret", GCE, builtin=False, owner=alice, visibility="private",
                   code="SECRET_MARKER = 'do not leak'\n", hp={"q": 0.5})
    User.objects.create_user("bob", password="bob-pass-123")
    anonymous = client.get("/objectives/secret/")
    assert anonymous.status_code == 200  # results are public
    assert "SECRET_MARKER" not in anonymous.content.decode()
    assert "keeps this objective's code private" in anonymous.content.decode()
    client.login(username="bob", password="bob-pass-123")
    assert "SECRET_MARKER" not in client.get("/objectives/secret/").content.decode()
    client.login(username="alice", password="alice-pass-123")
    mine = client.get("/objectives/secret/").content.decode()
    assert "SECRET_MARKER" in mine and "q=0.5" in mine


def test_compare_page_is_paired(client, board):
    response = client.get("/objectives/gce/compare/?with=mae&suite=noisy-labels")
    assert response.status_code == 200
    html = response.content.decode()
    assert "gce better by (pp)" in html
    assert 'id="compare-table"' in html and "gce better" in html
    forest = _json_script(html, "forest-data")
    assert forest["layout"]["xaxis"]["title"]["text"] == "gce better than mae by (pp)"
    seeds, mean = forest["data"]
    assert mean["y"] == ["clean", "sym-0.4"]
    assert seeds["x"][:4] == pytest.approx([6, 6, 8, 6])  # clean: gce − mae per seed, in pp
    assert client.get("/objectives/gce/compare/?with=mae").status_code == 200  # default suite
    # no ?with=: against the suite's reference; the reference itself against another
    assert client.get("/objectives/gce/compare/")["Location"] == \
        "/objectives/gce/compare/?with=ce&suite=noisy-labels"
    assert client.get("/objectives/ce/compare/")["Location"] == \
        "/objectives/ce/compare/?with=gce&suite=noisy-labels"
    assert client.get("/objectives/gce/compare/?with=nope").status_code == 404


def test_csv_and_latex_exports(client, board):
    response = client.get("/export/noisy-labels/csv?variant=sym-0.4")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert 'filename="noisy-labels-1.0-sym-0.4.csv"' in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["objective"] for r in rows] == ["gce", "mae", "ce"]
    assert float(rows[0]["mean"]) == pytest.approx(sum(GCE["sym-0.4"]) / 4)
    assert rows[0]["unit"] == "fraction"  # what the numbers are (0.915), not how pages show them
    tex = client.get("/export/noisy-labels/tex?variant=sym-0.4").content.decode()
    assert "\\toprule" in tex and "\\bottomrule" in tex and "\\textbf{91.5" in tex
    # a ">" in text mode prints "¿" under OT1: math mode
    assert "$P(>\\mathrm{ce})$" in tex and "P(\\textgreater" not in tex
    wide = client.get("/export/noisy-labels/tex").content.decode()
    assert "Objective & clean & sym-0.4" in wide
    assert client.get("/export/noisy-labels/tex?ci=interval").status_code == 200
    assert client.get("/export/noisy-labels/pdf").status_code == 404
    assert client.get("/export/nope/csv").status_code == 404
    empty = client.get("/export/certified/tex")  # no results: no table without rows
    assert empty.status_code == 404 and "no results on certified yet" in empty.content.decode()
    assert client.get("/export/noisy-labels/csv?variant=nope").status_code == 404


@pytest.mark.parametrize("url", ["/suites/nope/", "/objectives/nope/",
                                 "/suites/noisy-labels/?variant=nope",
                                 "/objectives/nope/compare/?with=ce", "/?kind=everything",
                                 "/objectives/gce/compare/?suite=nope"])
def test_unknown_names_get_a_friendly_404(client, board, url):
    response = client.get(url)
    assert response.status_code == 404
    html = response.content.decode()
    assert "Not found" in html and "Back to the leaderboard" in html
    assert "Traceback" not in html and "File \"" not in html


def test_an_objectives_name_finds_its_page_and_a_listed_builtin_says_how_to_run_it(client,
                                                                                    board):
    """``ldr_kl`` is stored as ``ldr-kl``: its name redirects (query kept), page and API; a
    built-in nobody has run here says so and how; a name nobody knows stays a plain 404."""
    make_objective("ldr-kl", GCE)
    page = client.get("/objectives/ldr_kl/?curves-noisy-labels=clean")
    assert page.status_code == 301
    assert page["Location"] == "/objectives/ldr-kl/?curves-noisy-labels=clean"
    assert client.get("/objectives/ldr_kl/compare/?with=ce")["Location"] == \
        "/objectives/ldr-kl/compare/?with=ce"
    assert client.get(page["Location"]).status_code == 200
    listed = client.get("/objectives/ibp/")
    assert listed.status_code == 404
    assert "ibp is a built-in objective with no results here yet" in listed.content.decode()
    assert "harness run suite certified -o ibp" in listed.content.decode()
    assert "built-in" not in client.get("/objectives/no_such_loss/").content.decode()


def _queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


def test_query_count_per_page_does_not_grow_with_objectives(client, django_assert_max_num_queries):
    make_objective("ce", FULL, curves=True)
    make_objective("gce", GCE, curves=True)
    urls = ["/", "/suites/noisy-labels/?variant=sym-0.4", "/objectives/gce/"]
    for url in urls:
        client.get(url)  # fill the cache
    before = {url: _queries(client, url) for url in urls}
    for i in range(20):
        make_objective(f"extra-{i}", {v: [0.7 + i / 200, 0.71] for v in FULL}, builtin=False)
    for url in urls:
        client.get(url)  # the fingerprints changed: recompute once
    after = {url: _queries(client, url) for url in urls}
    assert after == before
    for url in urls:
        with django_assert_max_num_queries(8):
            client.get(url)


def test_the_favicon_is_served(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301
    icon = client.get(response["Location"])
    assert icon.status_code == 200 and b"<svg" in b"".join(icon.streaming_content
                                                          if icon.streaming else [icon.content])
    assert 'rel="icon"' in client.get("/").content.decode()


def test_a_row_below_the_minimum_of_seeds_exports_its_mean_only():
    """No "77.3 ± 0.0" or "[nan, nan]": a 2-seed row has no interval to print."""
    import math

    from harness.contract.suite import MetricSpec
    from webapp.exports import _latex_interval, _latex_pm

    spec = MetricSpec("test_acc", "test accuracy", unit="percent")
    row = {"mean": 0.773, "ci_low": math.nan, "ci_high": math.nan}
    assert _latex_pm(row, spec) == _latex_interval(row, spec) == spec.format(0.773)
    assert "pm" in _latex_pm({**row, "ci_low": 0.7, "ci_high": 0.8}, spec)


def test_the_home_page_marks_unranked_objectives_provisional_and_says_why(client, board):
    html = client.get("/").content.decode()
    # the board's objectives cover 2 of the 4 ranked variants: none is ranked yet
    assert html.count('class="muted provisional"') == 3
    assert "ranked on clean, sym-0.4, sym-0.6, asym-0.4 with 3 or more seeds each" in html


def test_a_plot_is_written_as_its_compact_figure_and_a_broken_one_spares_the_page(caplog):
    from django.template import Context, Template

    from harness.report import figures
    template = Template('{% include "webapp/includes/plot.html" with id="p" kind=kind '
                        'data=data label="a plot" %}')
    payload = {"objects": [1]}  # what the variance plot needs is missing
    html = template.render(Context({"kind": "variance", "data": payload}))
    assert 'data-plot="variance"' in html and 'data-source="p"' in html
    assert '<script id="p" type="application/json">null</script>' in html  # "not drawn"
    assert "the variance figure could not be built" in caplog.text
    profile = {"variants": ["a"], "tau": [0.0, 0.5], "objectives": [
        {"label": "<b>x</b>", "is_reference": False, "rho": [0.5, 1.0]}]}
    html = template.render(Context({"kind": "profile", "data": profile}))
    written = _json_script(html, "p")
    assert written == json.loads(json.dumps(figures.build("profile", profile)))
    body = html.split('type="application/json">')[1]
    assert ", " not in body.split('"hovertemplate"')[0]  # no spaces between numbers
    assert "\\u003Cb\\u003E" not in body  # no raw tag, even inside the script
    assert written["data"][0]["name"] == "&lt;b&gt;x&lt;/b&gt;"  # plotly shows <b>x</b>


def test_compact_json_script_escapes_as_json_script_does():
    from django.utils.html import json_script

    from webapp.templatetags.board import compact_json_script

    value = {"a": "</script><script>alert(1)</script> & <!--", "b": [1.5, None]}
    html = str(compact_json_script(value, "x"))
    assert html.count("</script>") == 1 and "<!--" not in html and "<script>" not in html
    assert _json_script(html, "x") == value
    assert html == str(json_script(value, "x")).replace(", ", ",").replace(": ", ":")
