"""orch ui in a real headless Chromium (playwright, Debian's /usr/bin/chromium), on SQLite
and on the PostgreSQL server: each page renders with the quickstart sweep's data, a second
process's trials appear on an open sweep page without a reload and without losing the
selection, filters and links round-trip through the URL, a download equals `orch export`,
writes are refused, the SQLite file is byte-identical after every page was browsed, and the
database password appears in no page and no log line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from tests.orchestrator.orch_helpers import REPO, orch
from tests.orchestrator.ui.ui_helpers import (
    CHROMIUM,
    LIVE_SWEEP,
    QUICKSTART,
    SWEEP,
    UIServer,
    file_digest,
    launch_browser,
    request,
    submit,
)

sync_api = pytest.importorskip("playwright.sync_api", reason="the ui extra (playwright)")
if not os.path.exists(CHROMIUM):
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)

pytestmark = pytest.mark.xdist_group("ui_browser")


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def site(request, tmp_path_factory):
    """(database URL, running UIServer, folder) with the quickstart sweep's results."""
    tmp = tmp_path_factory.mktemp("ui")
    if request.param == "sqlite":
        url = f"sqlite:///{tmp / 'orch.db'}"
    else:
        import sqlalchemy as sa

        url = request.getfixturevalue("pg_server_url")
        engine = sa.create_engine(url)
        with engine.begin() as c:
            c.execute(sa.text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
        engine.dispose()
    submit(url, QUICKSTART)
    server = UIServer(url, tmp / "ui.log")
    yield url, server, tmp
    server.stop()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = launch_browser(p)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(accept_downloads=True, viewport={"width": 1280, "height": 900})
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    ctx.close()
    assert errors == [], errors  # no JavaScript error on any page


def trial_ids(url: str) -> list[int]:
    r = orch("export", "--format", "json", "--sweep", SWEEP, "--db", url)
    assert r.returncode == 0, r.stderr
    return [row["trial_id"] for row in json.loads(r.stdout)]


def test_each_page_renders_the_quickstart_results(site, page):
    url, server, _ = site
    assert orch("tag", SWEEP, "demo", "--db", url).returncode == 0
    assert orch("note", SWEEP, "first try on the tiny pairs", "--db", url).returncode == 0
    page.goto(server.base + "/?tag=demo")
    sync_api.expect(page.locator("#sweeps-table tbody tr")).to_have_count(1)
    sync_api.expect(page.locator("#sweeps-table")).to_contain_text("first try on the tiny pairs")
    page.goto(server.base + "/?tag=other")
    sync_api.expect(page.locator("#sweeps")).to_contain_text("no sweeps with that tag")
    page.goto(server.base + "/")
    row = page.locator("#sweeps-table tbody tr", has_text=SWEEP)
    sync_api.expect(row).to_contain_text("finished")
    sync_api.expect(row.locator(".counts")).to_have_text("10 / 0 / 0 / 0")
    sync_api.expect(row).to_contain_text("tiny-llama/tiny-llama-draft")
    row.locator("a.sweep-link").click()
    page.wait_for_url(f"**/sweep/{SWEEP}")
    table = page.locator("#compare-table tbody tr")
    sync_api.expect(table).to_have_count(6)  # 3 methods x 2 pairs, as orch compare prints
    sync_api.expect(page.locator("#annotations")).to_contain_text("demo")
    sync_api.expect(page.locator("#annotations")).to_contain_text("first try on the tiny pairs")
    compared = json.loads(orch("compare", "--format", "json", "--sweep", SWEEP, "--db", url).stdout)
    linear = next(r for r in compared if r["method"] == "linear")
    sync_api.expect(page.locator("#compare-table")).to_contain_text(linear["params"])
    sync_api.expect(page.locator("#trials-table tbody tr")).to_have_count(10)
    sync_api.expect(page.locator("#figures svg").first).to_be_visible()
    assert page.locator("#figures .figure").count() >= 5  # axes, tau, split, depth, histogram
    sync_api.expect(page.locator("#timeline svg rect.bar")).to_have_count(10)
    first = page.locator("#trials-table tbody tr").first.locator("a")
    tid = first.inner_text()
    first.click()
    page.wait_for_url(f"**/trial/{tid}")
    sync_api.expect(page.locator("#hash")).to_have_text(lambda_hash(url, int(tid)))
    sync_api.expect(page.locator("#prompts-table tbody tr")).to_have_count(4)
    sync_api.expect(page.locator("#prompts-table pre.cmd").first).to_contain_text("orch generate")
    sync_api.expect(page.locator("#fig-iter svg")).to_be_visible()
    page.goto(server.base + f"/compare?a={SWEEP}&b={SWEEP}")
    sync_api.expect(page.locator("#compare2-table tbody tr")).to_have_count(10)
    sync_api.expect(page.locator("#compare2-table")).to_contain_text("1×")  # ratio of itself


def lambda_hash(url: str, tid: int) -> str:
    r = orch("export", "--format", "json", "--sweep", SWEEP, "--db", url)
    return next(row["config_hash"] for row in json.loads(r.stdout) if row["trial_id"] == tid)


def test_trials_another_process_submits_appear_live_and_keep_the_selection(site, page):
    url, server, tmp = site
    path = tmp / f"live-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(LIVE_SWEEP)
    submit(url, path, "--only", "method=autoregressive")  # 1 of 3 trials; 2 stay pending
    page.goto(server.base + "/sweep/live-tiny")
    rows = page.locator("#trials-table tbody tr")
    sync_api.expect(rows).to_have_count(1)
    sync_api.expect(page.locator("#counts")).to_contain_text("1 done, 2 pending")
    rows.first.click()  # select it
    sync_api.expect(rows.first).to_have_class("selected")
    assert "sel=" in page.url
    sync_api.expect(page.locator("#live")).to_contain_text("live")  # polling
    for _ in range(3):  # zoom: drag across a figure (a redraw in mid-drag drops the drag)
        figure = page.locator("#fig-tau-speedup svg")
        figure.scroll_into_view_if_needed()
        box = figure.bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.2, box["y"] + box["height"] / 2)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * 0.7, box["y"] + box["height"] / 2, steps=5)
        page.mouse.up()
        if "z.tau-speedup=" in page.url:
            break
    assert "z.tau-speedup=" in page.url
    zoom = page.evaluate("Charts.zoom['tau-speedup']")
    page.evaluate("window.scrollTo(0, 300)")
    page.evaluate("window.__same_page = true")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    second = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "submit", str(path), "--executor", "local",
         "--db", url], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    try:
        sync_api.expect(rows).to_have_count(3, timeout=180_000)
    finally:
        out, _ = second.communicate(timeout=300)
    assert second.returncode == 0, out
    sync_api.expect(page.locator("#counts")).to_contain_text("3 done, 0 pending", timeout=60_000)
    assert page.evaluate("window.__same_page") is True  # no reload happened
    assert page.evaluate("Charts.zoom['tau-speedup']") == zoom and "z.tau-speedup=" in page.url
    assert page.evaluate("window.scrollY") == 300
    sync_api.expect(page.locator("#trials-table tbody tr.selected")).to_have_count(1)
    sync_api.expect(page.locator("#trials-table tbody tr.selected")).to_contain_text(
        "autoregressive"
    )
    sync_api.expect(page.locator("#live")).to_contain_text("live")


def test_filters_and_links_round_trip_through_the_url(site, page):
    _, server, _ = site
    page.goto(server.base + f"/sweep/{SWEEP}")
    sync_api.expect(page.locator("#trials-table tbody tr")).to_have_count(10)
    page.fill("input[name=where]", "method=linear; k>=4")
    page.fill("input[name=columns]", "+ttft_s")
    page.click("#filters button[type=submit]")
    sync_api.expect(page.locator("#trials-table tbody tr")).to_have_count(2)
    assert "where=method%3Dlinear" in page.url and "where=k%3E%3D4" in page.url
    page.locator("#trials-table tbody tr").first.click()
    page.reload()  # the URL alone rebuilds the page: filters, columns, selection
    sync_api.expect(page.locator("input[name=where]")).to_have_value("method=linear; k>=4")
    sync_api.expect(page.locator("#trials-table tbody tr")).to_have_count(2)
    sync_api.expect(page.locator("#trials-table tbody tr.selected")).to_have_count(1)
    sync_api.expect(page.locator("#configs-table thead")).to_contain_text("ttft_s")
    page.go_back()  # before the filter: every trial again
    sync_api.expect(page.locator("#trials-table tbody tr")).to_have_count(10)
    page.locator("#compare-table a.filter", has_text="fixed_tree").first.click()
    page.wait_for_url("**where=method%3Dfixed_tree")
    sync_api.expect(page.locator("#trials-table tbody tr")).to_have_count(4)
    page.goto(server.base + f"/sweep/{SWEEP}?where=nonsense_col%3D1")
    assert "unknown --where column 'nonsense_col'" in page.inner_text("#error")
    status, body, _ = request(server.base + f"/sweep/{SWEEP}?where=k%3E%3Dabc")
    assert status == 400 and b"needs a number" in body and b"Traceback" not in body
    status, body, _ = request(server.base + "/sweep/no-such-sweep")
    assert status == 404 and b"no sweep named" in body


def test_downloads_equal_orch_export(site, page):
    url, server, tmp = site
    page.goto(server.base + f"/sweep/{SWEEP}?where=method%3Dlinear")
    sync_api.expect(page.locator("#trials-table tbody tr")).to_have_count(4)
    with page.expect_download() as d:
        page.click("a[data-fmt=csv]")
    got = tmp / "dl.csv"
    d.value.save_as(got)
    want = orch("export", "--format", "csv", "--sweep", SWEEP, "--where", "method=linear",
                "--db", url)  # fmt: skip
    assert want.returncode == 0, want.stderr
    assert got.read_text() == want.stdout
    assert len(want.stdout.splitlines()) == 5
    for fmt in ("json", "parquet"):
        out = tmp / f"want.{fmt}"
        r = orch("export", "--format", fmt, "--sweep", SWEEP, "-o", str(out), "--db", url)
        assert r.returncode == 0, r.stderr
        status, body, headers = request(server.base + f"/sweep/{SWEEP}/export.{fmt}")
        assert status == 200 and "attachment" in headers["Content-Disposition"]
        assert body == out.read_bytes()


def test_read_only_no_password_and_the_file_unchanged(site, browser):
    url, server, tmp = site
    before = file_digest(url)
    ctx = browser.new_context()
    page = ctx.new_page()
    seen: list[str] = []
    page.on("response", lambda r: seen.append(r.text() if r.ok or r.status >= 400 else ""))
    ids = trial_ids(url)
    paths = ["/", f"/sweep/{SWEEP}", f"/sweep/{SWEEP}?where=method%3Dlinear&best_by=throughput",
             f"/compare?a={SWEEP}&b={SWEEP}", f"/sweep/{SWEEP}/report", "/sweep/missing",
             "/trial/999999", *[f"/trial/{i}" for i in ids]]  # fmt: skip
    for path in paths:
        page.goto(server.base + path)
        page.wait_for_load_state("networkidle")
        seen.append(page.content())
    assert page.evaluate("fetch('/api/sweeps', {method: 'POST'}).then(r => r.status)") == 405
    ctx.close()
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        status, body, headers = request(server.base + f"/sweep/{SWEEP}", method, b"x=1")
        assert status == 405 and headers["Allow"] == "GET, HEAD", (method, status)
    status, body, _ = request(server.base + "/api/sweeps")
    listed = json.loads(body)
    assert [s["name"] for s in listed["sweeps"]].count(SWEEP) == 1
    seen.append(body.decode())
    seen.append(server.log())
    from sqlalchemy.engine import make_url

    password = make_url(url).password
    if password:  # the Postgres fixture's URL has one
        assert listed["database"] == make_url(url).render_as_string(hide_password=True)
        assert all(password not in text for text in seen)
    else:
        assert file_digest(url) == before  # every page browsed, every write refused
