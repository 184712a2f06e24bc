"""Over 500 lines on purpose: every page a newcomer meets, in one browser session.

Browser tests: headless Chromium (Debian's) driven by Playwright against a live server
on the real PostgreSQL, with the in-process runner training submissions for real."""

from __future__ import annotations

import os
import re
import shutil

import pytest

from harness.runner.inprocess import run_cells
from tests.web.test_tuned_track import tuned_cells  # noqa: F401 - a fixture used below

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium"),
]
# Playwright's sync API runs an event loop in this thread; the ORM calls made here by
# the live server's fixtures are ordinary synchronous calls.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-quic", "--no-first-run", "--disable-component-update", "--disable-sync"]

GOOD = '''"""Huber loss with a wide delta (browser test)."""
import torch.nn.functional as F


def regression_loss(pred, target, *, delta: float = 2.0):
    # secret-marker-7f3a: private code must not reach other users
    return F.huber_loss(pred, target, reduction="none", delta=delta)
'''
FAKE = "fake-regression"  # tests/fake_suite, registered as a plugin is

BROKEN = '''def classification_loss(logits, targets)
    return logits.sum()
'''


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, live_server, settings):
    settings.HARNESS_EXECUTOR = "thread"
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.set_default_timeout(20_000)
    pg.base = live_server.url
    yield pg
    from webapp.execution import executors

    executors.drain(timeout=120)
    context.close()


def sign_up(page, username: str) -> None:
    page.goto(page.base + "/accounts/signup/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password1]", "correct-horse-battery-9")
    page.fill("input[name=password2]", "correct-horse-battery-9")
    page.click("form button[type=submit], form input[type=submit]")
    page.wait_for_load_state()
    assert username in page.inner_text("header")


def assert_accessible(page) -> None:
    """axe-core (the copy axe-playwright-python bundles) finds nothing serious or critical
    on the page as it stands: the WCAG 2 A/AA rules and axe's best practices."""
    from axe_playwright_python.sync_playwright import Axe

    found = Axe().run(page).response["violations"]
    bad = [f"{v['id']} ({v['impact']}): {v['help']} — "
           + "; ".join(n["target"][0] if isinstance(n["target"][0], str) else str(n["target"])
                       for n in v["nodes"][:3])
           for v in found if v["impact"] in ("serious", "critical")]
    assert not bad, f"{page.url}:\n" + "\n".join(bad)


def fill_submission(page, name: str, code: str, seeds: int = 2,
                    suite: str = "noisy-labels") -> None:
    page.goto(page.base + "/submit/")
    page.fill("input[name=name]", name)
    page.fill("textarea[name=code_text]", code)
    page.check("input[name=visibility][value=private]")
    for box in page.locator("input[name=suites]").all():
        box.set_checked(box.get_attribute("value") == suite)
    page.fill("input[name=seeds]", str(seeds))
    page.click("button.primary")
    page.wait_for_load_state()


@pytest.mark.django_db(transaction=True)
def test_submit_train_and_find_it_on_the_leaderboard(page, browser, monkeypatch):
    """The whole path on a suite's full protocol (a shortened run is kept apart from the
    leaderboard): the fake suite's, seconds where any real suite's takes a minute; the
    real suites' own training is tested with each suite."""
    monkeypatch.setenv("HARNESS_SUITES", "tests.fake_suite")
    sign_up(page, "alice")
    fill_submission(page, "wide-huber", GOOD, suite=FAKE)
    assert re.search(r"/runs/\d+/$", page.url), page.url
    page.evaluate("window.__noReload = 1")  # survives only if the page never reloads
    assert page.locator("table.run-cells tbody tr").count() == 3 * 2  # variants × seeds
    page.wait_for_selector("#run-state:has-text('Finished')", timeout=240_000)
    assert page.evaluate("window.__noReload") == 1
    assert page.locator("span[data-count=ok]").inner_text() == "6"
    assert_accessible(page)

    page.goto(page.base + "/")
    assert "wide-huber" in page.inner_text("main")
    assert_accessible(page)
    page.goto(page.base + f"/suites/{FAKE}/")
    assert "wide-huber" in page.inner_text("main")
    page.wait_for_selector(".plot svg.main-svg")
    points = page.locator(".plot svg .point").count()
    assert points >= 2, "the per-seed plot drew no points"
    assert_accessible(page)

    page.goto(page.base + "/objectives/wide-huber/")
    assert "secret-marker-7f3a" in page.inner_text("main")  # the owner sees the code
    page.wait_for_selector(".plot svg.main-svg")
    assert_accessible(page)
    page.goto(page.base + "/submit/")
    assert_accessible(page)

    # A second user never sees the private code, on the page or through the API.
    page.click("header button:has-text('Log out')")
    sign_up(page, "bob")
    page.goto(page.base + "/objectives/wide-huber/")
    assert "secret-marker-7f3a" not in page.content()
    response = page.goto(page.base + "/api/objectives/wide-huber")
    assert response.status == 200 and "secret-marker-7f3a" not in response.text()


@pytest.mark.django_db(transaction=True)
def test_broken_file_shows_the_validator_message_on_the_form(page):
    sign_up(page, "carol")
    page.goto(page.base + "/submit/")
    # sending says it is validating and sends once: a second submit is cancelled
    state = page.evaluate("""() => {
        const form = document.querySelector('form.submit-form');
        form.addEventListener('submit', e => e.preventDefault());  // stay to look
        const first = form.dispatchEvent(new Event('submit', {cancelable: true}));
        const again = form.dispatchEvent(new Event('submit', {cancelable: true}));
        const b = form.querySelector('button.primary');
        return [b.disabled, b.textContent, !document.getElementById('submit-status').hidden,
                again];
    }""")
    assert state == [True, "Validating\u2026", True, False]
    fill_submission(page, "broken-loss", BROKEN)
    assert page.url.endswith("/submit/")
    errors = page.inner_text("#code-errors")
    assert "syntax error" in errors and "line 1" in errors
    from harness.storage.models import Cell, Objective

    assert not Objective.objects.filter(slug="broken-loss").exists()
    assert not Cell.objects.filter(version__objective__slug="broken-loss").exists()


@pytest.mark.django_db(transaction=True)
def test_status_page_follows_a_cell_through_requeue_to_killed_with_owner_details(page, browser):
    """No training: the cells' states are written here and the page must follow them live
    (attempts, worker, the typed reason in words; error and output for the owner only)."""
    from django.contrib.auth.models import User

    from harness.contract.registry import suite_at
    from harness.objectives.loading import load_objective
    from harness.storage import store
    from harness.storage.models import Cell, Submission

    sign_up(page, "hana")
    suite = suite_at("noisy-labels", "1.0+e1")
    version = store.version_for(load_objective("ce"))
    owner = User.objects.get(username="hana")
    cells = [Cell.objects.create(version=version, suite=suite.name, suite_version=suite.version,
                                 variant=v, seed=0,
                                 variant_hash=suite.variant(v).config_hash(suite))
             for v in ("clean", "sym-0.4")]
    submission = Submission.objects.create(owner=owner, version=version, suites=[suite.name])
    submission.cells.set(cells)
    killed, ok = cells
    Cell.objects.filter(pk=killed.pk).update(status="running", attempts=1, worker="cpu@box-1")
    page.goto(page.base + f"/runs/{submission.pk}/")
    row = page.locator(f'tr[data-cell="{killed.pk}"]')
    assert row.locator(".worker").inner_text() == "cpu@box-1"
    assert row.locator(".cell-details").is_hidden()

    # The worker dies: the cell is queued again, then a second worker's sandbox kills it.
    Cell.objects.filter(pk=killed.pk).update(status="queued", worker="")
    page.wait_for_selector(f'tr[data-cell="{killed.pk}"] .reason-text:has-text("attempt 2")')
    Cell.objects.filter(pk=killed.pk).update(
        status="killed", reason="memory", attempts=2, worker="cpu@box-2",
        error="MemoryError: owner-only-error-5d1", captured="owner-only-output-5d1")
    Cell.objects.filter(pk=ok.pk).update(status="ok", attempts=1, worker="cpu@box-2")
    page.wait_for_selector("#run-state:has-text('Finished')")
    assert row.locator(".st").inner_text() == "killed"
    assert row.locator(".st").get_attribute("data-reason") == "memory"
    assert row.locator(".attempts").inner_text() == "2"
    assert row.locator(".worker").inner_text() == "cpu@box-2"
    assert "ran out of memory" in row.locator(".reason-text").inner_text()
    assert page.locator("span[data-count=killed]").inner_text() == "1"
    row.locator(".cell-details summary").click()
    assert row.locator(".cell-error").inner_text() == "MemoryError: owner-only-error-5d1"
    assert row.locator(".cell-output").inner_text() == "owner-only-output-5d1"

    page.click("header button:has-text('Log out')")
    sign_up(page, "ivan")
    page.goto(page.base + f"/runs/{submission.pk}/")
    assert "ran out of memory" in page.inner_text(f'tr[data-cell="{killed.pk}"]')
    assert "owner-only" not in page.content()


@pytest.mark.django_db(transaction=True)
def test_a_suites_own_axes_and_plots_render(page, monkeypatch):
    """The fake suite (tests/fake_suite): its curve against input noise σ, its reliability
    diagram and its scatter of two non-percent metrics are drawn, with their own axis
    titles, and no plot fails."""
    monkeypatch.setenv("HARNESS_SUITES", "tests.fake_suite")
    from harness.contract import registry
    from harness.objectives.loading import load_objective
    from harness.storage import store

    suite = registry.get_suite("fake-regression")
    for name in ("mse", "huber"):
        objective = load_objective(name)
        store.store_results(store.version_for(objective), suite,
                              run_cells(suite, objective, ["clean", "out-0.4"], [0, 1]),
                              {"device": "cpu"})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{page.base}/objectives/huber/")
    for plot in ("curves-data-fake-regression", "reliability-fake-regression",
                 "scatter-fake-regression-1"):
        page.wait_for_selector(f"#{plot}-plot[data-rendered='true']")
    curves = page.locator("#curves-data-fake-regression-plot")
    assert curves.locator("text=input noise σ").count() == 1  # its own x axis
    assert curves.locator("text=epoch").count() == 1
    assert page.locator("#reliability-fake-regression-plot").locator(
        "text=mean confidence in the bin").count() == 1
    scatter = page.locator("#scatter-fake-regression-1-plot")
    assert scatter.locator("text=test RMSE — lower is better").count() == 1
    assert "(%)" not in scatter.inner_text()
    page.goto(f"{page.base}/suites/fake-regression/?variant=out-0.4")
    page.wait_for_selector("#strip-data-plot[data-rendered='true']")
    assert page.locator("#strip-data-plot").locator(
        "text=test RMSE — lower is better").count() == 1
    assert errors == []


@pytest.mark.django_db(transaction=True)
def test_a_suites_heatmap_renders(page, monkeypatch):
    """The fake suite declares a heatmap (RMSE and MAE, lower is better): the suite page
    draws it as a plotly heatmap, objectives × metrics, next to the across-variants table."""
    from tests.web.test_leaderboard import with_fake_suite

    with_fake_suite(monkeypatch)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{page.base}/suites/fake-regression/?variant=out-0.2")
    page.wait_for_selector("#heatmap-data-plot[data-rendered='true']")
    plot = page.locator("#heatmap-data-plot")
    assert plot.locator(".hm").count() == 1  # plotly's heatmap layer
    trace = page.evaluate("() => { var t = document.getElementById('heatmap-data-plot')"
                          ".data[0]; return {type: t.type, x: t.x, y: t.y, z: t.z}; }")
    assert trace["type"] == "heatmap" and trace["x"] == ["RMSE", "MAE"]
    assert trace["y"] == ["huber", "mse"]
    assert [[round(v, 6) for v in row] for row in trace["z"]] == [[0.8, 0.55], [1.1, 0.85]]
    assert plot.locator("text=lower is better").count() == 1  # the colour bar's title
    assert page.locator("#across-table td.worst").count() == 2  # one per objective
    assert errors == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("viewport", [(1280, 800), (390, 844)], ids=["desktop", "phone"])
def test_the_family_plot_breaks_a_line_where_a_variant_was_not_run(page, monkeypatch,
                                                                     viewport):
    """A third objective ran clean and out-0.4 but not out-0.2: its line and its band stop
    at the gap, a dotted segment joins clean to out-0.4 (no point floats alone), and no
    plot fails."""
    from tests.web.test_leaderboard import make_fake, with_fake_suite

    suite = with_fake_suite(monkeypatch)
    make_fake(suite, "gap", {"clean": [(0.45, 0.3), (0.55, 0.4)],
                             "out-0.4": [(0.85, 0.6), (0.95, 0.7)]})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_viewport_size({"width": viewport[0], "height": viewport[1]})
    page.goto(f"{page.base}/suites/fake-regression/?variant=out-0.2")  # gap is not here
    page.wait_for_selector("#family-data-plot[data-rendered='true']")
    traces = page.evaluate("() => document.getElementById('family-data-plot').data.map("
                           "t => ({name: t.name, x: t.x, y: t.y, fill: t.fill || '',"
                           " group: t.legendgroup, visible: t.visible}))")
    line = next(t for t in traces if t["name"] == "gap")
    assert line["x"] == [0, 0.2, 0.4, 0.6] and line["y"][1] is None and line["y"][3] is None
    assert [round(v, 6) for v in (line["y"][0], line["y"][2])] == [0.5, 0.9]
    band = next(t for t in traces if t["group"] == "gap" and t["fill"] == "toself")
    assert None in band["x"]  # two polygons, one per run of consecutive variants
    bridge = next(t for t in traces if t["group"] == "gap" and not t["name"] and not t["fill"])
    assert bridge["x"] == [0, 0.4] and [round(v, 6) for v in bridge["y"]] == [0.5, 0.9]
    assert line["visible"] is True  # three objectives: all drawn at first
    assert errors == []
    # the plot fits its viewport, and so does the page: nothing scrolls sideways
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport[0]


@pytest.mark.django_db(transaction=True)
def test_a_label_is_drawn_as_text_never_as_markup(page):
    """Objective labels are user input: every plot shows one as text, as written
    (harness.report.figures escapes it), never as markup: plotly builds a link from ``<a href>``
    and bold text from ``<b>`` in names, titles and hover text."""
    from tests.web.test_leaderboard import make_objective

    evil = '<a href="https://evil.example/">x</a><b>y</b><img src=x onerror=window.__xss=1>'
    make_objective("ce", {"clean": [0.9, 0.91], "sym-0.4": [0.70, 0.72]}, curves=True)
    make_objective("evil", {"clean": [0.92, 0.93], "sym-0.4": [0.80, 0.82]}, label=evil,
                   curves=True)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    for url, plots in (("/suites/noisy-labels/?variant=sym-0.4", ("strip-data", "family-data")),
                       ("/objectives/evil/", ("family-noisy-labels",
                                              "curves-data-noisy-labels"))):
        page.goto(page.base + url)
        for plot in plots:
            page.wait_for_selector(f"#{plot}-plot[data-rendered='true']")
            assert evil in page.locator(f"#{plot}-plot").text_content()  # as written
        assert page.locator(".plot svg a").count() == 0  # no link (the modebar's are HTML)
        assert page.locator(".plot svg tspan[style*='bold']").count() == 0
        assert page.locator(".plot img").count() == 0
        assert page.evaluate("window.__xss") is None
    assert errors == []


@pytest.mark.django_db(transaction=True)
def test_performance_profiles_and_the_cd_diagram_render(page):
    from tests.web.test_leaderboard import make_objective

    ranked = ("clean", "sym-0.4", "sym-0.6", "asym-0.4")
    for slug, top, step in (("ce", 0.90, 0.1), ("gce", 0.92, 0.05), ("mae", 0.80, 0.0)):
        make_objective(slug, {v: [top - step * i + d for d in (0.0, 0.01, -0.01)]
                              for i, v in enumerate(ranked)})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{page.base}/suites/noisy-labels/")
    for plot in ("profiles-data", "cd-data"):
        page.wait_for_selector(f"#{plot}-plot[data-rendered='true']")
    profile = page.evaluate("() => document.getElementById('profiles-data-plot').data.map("
                            "t => [t.name, t.y[0], t.y[t.y.length - 1]])")
    assert profile == [["gce", 0.75, 1], ["mae", 0.25, 1], ["ce", 0, 1]]
    cd = page.locator("#cd-data-plot")
    assert cd.locator("text=critical difference 1.66").count() == 1  # the legend entry
    assert errors == []
    page.goto(f"{page.base}/objectives/gce/compare/")  # against the reference, on phones too
    page.wait_for_selector(".plot[data-rendered='true']")
    assert_accessible(page)
    page.set_viewport_size({"width": 390, "height": 844})
    assert_accessible(page)


@pytest.mark.django_db(transaction=True)
def test_the_variance_sources_plot_renders_a_bar_per_stream_with_its_interval(page):
    import numpy as np

    from tests.web.test_factorial import _grid, _store, _version

    _store(_version("ce"), "sym-0.4", _grid(np.random.default_rng(0)))
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{page.base}/suites/noisy-labels/?variant=sym-0.4")
    page.wait_for_selector("#variance-data-plot[data-rendered='true']")
    bars = page.evaluate("() => document.getElementById('variance-data-plot').data.map("
                         "t => [t.name, t.x.length, t.error_x.array.length])")
    assert bars == [[n, 1, 1] for n in ("init", "order", "noise", "interactions")]
    assert errors == []


def _with_every_metric(slug: str, acc: float) -> None:
    """An objective with every noisy-labels metric stored: the widest variant table."""
    from harness.contract.suite import CellResult
    from harness.storage import store
    from tests.web.test_leaderboard import ENV, SUITE, make_objective

    version = make_objective(slug, {})
    store.store_results(version, SUITE, [
        CellResult(v, seed, "ok", {m.name: (acc if m.name == "test_acc" else 0.5)
                                   for m in SUITE.metrics})
        for v in ("clean", "sym-0.4") for seed in range(3)], ENV)


@pytest.mark.django_db(transaction=True)
def test_a_keyboard_skips_to_the_content_and_links_are_underlined_not_only_coloured(page):
    """The first Tab reaches a skip link that moves focus into the content; a link in the
    content differs from its text by an underline, not by colour alone (contrast 1.3–2.3:1
    before)."""
    page.goto(page.base + "/api/")
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.className") == "skip-link"
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.activeElement.id") == "main"
    underline = page.evaluate("() => getComputedStyle(document.querySelector("
                              "'main p a')).textDecorationLine")
    assert "underline" in underline


@pytest.mark.django_db(transaction=True)
def test_a_run_page_on_a_phone_scrolls_its_table_in_a_frame_with_the_time_in_view(
        browser, live_server):
    """The run page was 1,002 px wide at 390: the whole page scrolled sideways and the time
    left was off-screen. Its table scrolls in a frame, the time column right after the
    status; a group's time is on its first row only."""
    from django.contrib.auth.models import User
    from django.utils import timezone

    from harness.contract.registry import suite_at
    from harness.objectives.loading import load_objective
    from harness.storage import store
    from harness.storage.models import Cell, Submission

    suite = suite_at("noisy-labels", "1.0")
    version = store.version_for(load_objective("ce"))
    started = timezone.now() - timezone.timedelta(minutes=5)
    cells = [Cell.objects.create(version=version, suite=suite.name, suite_version=suite.version,
                                 variant=v, seed=s, status="running", worker="cpu@box-1",
                                 started_at=started, progress=0.1, attempts=1,
                                 variant_hash=suite.variant(v).config_hash(suite))
             for v in ("clean", "sym-0.4") for s in range(5)]
    owner = User.objects.create_user("olga", password="olga-pass-123")
    submission = Submission.objects.create(owner=owner, version=version, suites=[suite.name])
    submission.cells.set(cells)
    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                                has_touch=True)
    page = phone.new_page()
    page.goto(f"{live_server.url}/runs/{submission.pk}/")
    page.wait_for_selector("td.time .time-text:has-text('left')")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    first = page.locator("tbody tr").first.locator("td.time")
    assert first.evaluate("td => td.getBoundingClientRect().left") < 390  # in view
    assert page.locator("td.time .time-text:has-text('left')").count() == 1
    assert page.locator("td.time .time-text.same-group").count() == len(cells) - 1
    phone.close()


@pytest.mark.django_db(transaction=True)
def test_tables_fit_at_1280_px_and_scroll_with_their_names_in_view_on_a_phone(browser,
                                                                               live_server):
    """At 1280 px the variant table fits (its other metrics are a table of their own); on a
    phone a wide table scrolls inside its frame, says so, and keeps the names in view."""
    for slug, acc in (("ce", 0.70), ("gce", 0.90), ("mae", 0.80)):
        _with_every_metric(slug, acc)
    url = f"{live_server.url}/suites/noisy-labels/?variant=sym-0.4"
    wide = browser.new_context(viewport={"width": 1280, "height": 900})
    page = wide.new_page()
    page.goto(url)
    fits = page.evaluate("() => Array.from(document.querySelectorAll('.table-wrap')).map("
                         "w => [w.querySelector('table').id, w.scrollWidth <= w.clientWidth])")
    assert dict(fits)["variant-table"] is True
    assert "secondary-table" in dict(fits)
    assert page.locator("p.scroll-hint:visible").count() == 0 or not dict(fits)["secondary-table"]
    wide.close()
    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                                has_touch=True)
    page = phone.new_page()
    page.goto(url)
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390  # no page scroll
    hint = page.locator("#variant-table").locator("xpath=../following-sibling::p[1]")
    assert hint.is_visible() and "more columns to the right" in hint.inner_text()
    wrap = page.locator("#variant-table").locator("xpath=..")
    left = wrap.evaluate("w => w.getBoundingClientRect().left")
    wrap.evaluate("w => { w.scrollLeft = 300; }")
    name = page.locator("#variant-table tbody td.name").first
    assert abs(name.evaluate("td => td.getBoundingClientRect().left") - left) <= 2  # sticky
    assert name.inner_text().startswith("gce")
    # plots laid out for the phone: a grid's panels stacked, none squeezed to a sliver
    page.wait_for_selector("div.plot[data-plot=family][data-rendered='true']")
    widths = page.evaluate("() => Array.from(document.querySelectorAll("
                           "'div.plot[data-plot=family][data-rendered]')).map(gd => Object.keys("
                           "gd._fullLayout).filter(k => /^xaxis\\d*$/.test(k)).map("
                           "k => gd._fullLayout[k]._length))")
    panels = [w for plot in widths for w in plot]
    assert len(panels) >= 2 and min(panels) >= 250, widths  # three of ~80 px before
    for path in ("/", "/objectives/gce/", "/objectives/gce/compare/", "/submit/", "/api/",
                 "/accounts/signup/", "/suites/nope/"):  # every page within the phone's width
        page.goto(live_server.url + path)
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390, path
    phone.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("tuned_cells")
def test_the_tuned_tracks_plots_render_and_its_pages_are_accessible(page):
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{page.base}/suites/noisy-labels/?variant=sym-0.4&track=tuned")
    for plot in ("budget-data", "sensitivity-data-0"):
        page.wait_for_selector(f"#{plot}-plot[data-rendered='true']")
    curves = page.evaluate("() => document.getElementById('budget-data-plot').data"
                           ".filter(t => t.name).map(t => [t.name, t.x.length])")
    assert sorted(curves) == [["ce", 8], ["gce", 8]]  # a curve per objective, 1…k trials
    assert_accessible(page)
    page.goto(f"{page.base}/objectives/gce/?track=tuned")
    page.wait_for_selector("#tuning-noisy-labels")
    assert_accessible(page)
    assert errors == []
