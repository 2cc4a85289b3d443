"""The dashboard in a real browser: headless Chromium driven by Playwright.

No browser is downloaded: Playwright launches the system Chromium through
``executable_path`` (Debian's ``chromium`` package; ``DARWIN_MEMO_CHROMIUM``
names another binary). Without Playwright or a Chromium the tests skip and
say why, unless ``DARWIN_MEMO_REQUIRE_BROWSER=1`` (set it in CI) turns that
into a failure.

The store is the one the demo leaves behind (``darwin-memo demo -o``, migrated
to SQLite), lived in further by ``ui_support.build_store``: credits, an
execution, starvation, a merge, a forget, a pin, a hostile entry and an open
ticket. Every number the page shows is checked against the library. The live
test settles that ticket and adds an entry from other processes and watches
the page change without a reload. Screenshots go to ``DARWIN_MEMO_UI_ARTIFACTS``
(else a temporary folder whose path the tests print).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from darwin_memo.ledger import Ledger
from darwin_memo.observe import entry_life, top
from darwin_memo.retrieval.lexical import tokenize
from ui_support import HOSTILE_ANSWER, HOSTILE_QUESTION, Scenario, build_store, cli, running

pytestmark = pytest.mark.browser

REQUIRED = os.environ.get("DARWIN_MEMO_REQUIRE_BROWSER") == "1"
#: Where Chromium lives when it is not on PATH (Debian's real binary behind its wrapper
#: script first, then Ubuntu, snap and macOS locations).
KNOWN_PATHS = (
    "/usr/lib/chromium/chromium",
    "/usr/lib/chromium-browser/chromium-browser",
    "/snap/bin/chromium",
    "/Applications/Chromium.app/Contents/MacOS/Chromium",
    "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
)
NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
TIMEOUT_MS = 20_000


def _unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"DARWIN_MEMO_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


def find_chromium() -> str | None:
    """A Chromium or Chrome binary: $DARWIN_MEMO_CHROMIUM, known paths, then PATH."""
    named = os.environ.get("DARWIN_MEMO_CHROMIUM")
    if named:
        return named
    for path in KNOWN_PATHS:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError:
        _unavailable("Playwright is not installed (pip install -e '.[dev]')")
    executable = find_chromium()
    with sync_playwright() as p:
        try:
            if executable is not None:
                launched = p.chromium.launch(executable_path=executable, headless=True)
            else:  # a browser `playwright install` put in its own cache, if any
                launched = p.chromium.launch(headless=True)
        except Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            _unavailable(
                f"no Chromium could be launched ({executable or 'none found'}): {first}; "
                "install Debian's chromium package or set DARWIN_MEMO_CHROMIUM"
            )
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    named = os.environ.get("DARWIN_MEMO_UI_ARTIFACTS")
    folder = Path(named) if named else tmp_path_factory.mktemp("ui-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"dashboard screenshots: {folder}")
    return folder


def demo_store(folder: Path) -> Scenario:
    """The demo's survivors and graveyard, in SQLite, then lived in by build_store."""
    proc = cli("demo", "--cycles", "30", "-o", "demo.json", cwd=folder, timeout=120)
    assert proc.returncode == 0, proc.stderr
    proc = cli("migrate", "demo.json", "store.db", cwd=folder)
    assert proc.returncode == 0, proc.stderr
    return build_store(folder / "store.db")


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    return demo_store(tmp_path_factory.mktemp("ui-browser"))


@pytest.fixture(scope="module")
def server(scenario: Scenario) -> Iterator[Any]:
    with running(scenario.path) as srv:
        yield srv


class PageWatch:
    """A page plus everything it said: console errors, dialogs, page errors."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))

        def dialog(d: Any) -> None:
            self.dialogs.append(d.message)
            d.dismiss()

        page.on("dialog", dialog)


@pytest.fixture
def watch(browser: Any) -> Iterator[PageWatch]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    yield PageWatch(page)
    context.close()


def open_dashboard(watch: PageWatch, server: Any) -> Any:
    page = watch.page
    page.goto(server.page_url)
    page.wait_for_function("() => Number(document.body.dataset.refreshes || 0) >= 1")
    return page


def text(page: Any, selector: str) -> str:
    return str(page.locator(selector).first.text_content()).strip()


# -- the page shows the store --------------------------------------------------------------


def test_cards_charts_and_tables_show_the_store(
    watch: PageWatch, server: Any, scenario: Scenario, artifacts: Path
) -> None:
    from playwright.sync_api import expect

    with Ledger.open(scenario.path, create=False) as ledger:
        stats = ledger.stats()
        board = top(ledger, limit=25)
        tick = ledger.tick_count
    page = open_dashboard(watch, server)
    expect(page.locator("#store-name")).to_have_text("store.db (sqlite)")
    assert text(page, "[data-card=tick] .value") == f"{tick:,}"
    assert text(page, "[data-card=alive] .value") == f"{stats['alive']:,}"
    assert text(page, "[data-card=dead] .value") == f"{stats['graveyard']:,}"
    assert text(page, "[data-card=pending] .value") == "1"
    assert text(page, "[data-card=energy] .value") == f"{stats['total_energy']:,.3f}"

    # Charts: one point per tick, a bar per cause and tick that saw deaths.
    series = page.evaluate(
        "token => fetch('/api/series', {headers: {'X-Darwin-Memo-Token': token}})"
        ".then(r => r.json())",
        server.token,
    )
    ticks = [r for r in series["ticks"] if not r.get("open")]
    population = page.locator("#chart-population svg [data-series=population] circle")
    assert population.count() == len(ticks) == tick
    assert page.locator("#chart-population").get_attribute("data-last-population") == str(
        ticks[-1]["population"]
    )
    bars = sum(1 for r in series["ticks"] for n in r["died"].values() if n)
    assert page.locator("#chart-deaths svg rect.bar").count() == bars
    for cause, n in series["deaths_by_cause"].items():
        assert f"{cause} {n:,}" in text(page, f"#chart-deaths .legend [data-series={cause}]")
        assert text(page, f"#graveyard-causes [data-cause={cause}] .n") == f"{n:,}"
    delta_total = sum(r["delta"] for r in series["ticks"])
    assert f"total +{delta_total:g}" in text(page, "#chart-economics .legend [data-series=pos]")
    assert page.locator("#chart-economics svg [data-series=upkeep] circle").count() == tick

    # Tables: the first page of living entries is `top`; graveyard and tickets complete.
    rows = page.locator("#living-table tbody tr")
    assert rows.count() == min(25, stats["alive"])
    assert [rows.nth(i).get_attribute("data-id") for i in range(rows.count())] == [
        r["id"] for r in board["entries"]
    ]
    first = board["entries"][0]
    assert text(page, "#living-table tbody tr td") == f"{first['balance']:,.3f}"
    assert page.locator("#living-table").get_attribute("data-total") == str(stats["alive"])
    assert page.locator("#graveyard-table").get_attribute("data-total") == str(stats["graveyard"])
    assert page.locator("#tickets-table tbody tr").get_attribute("data-id") == (
        scenario.pending_ticket
    )
    pinned = page.locator(f"#living-table tr[data-id='{scenario.ids['backups']}'] .badge.pinned")
    expect(pinned).to_have_text("pinned")

    # Doctor: the dropped settlements are flagged.
    finding = page.locator("#doctor-body .finding.warn[data-code=settles_dropped]")
    expect(finding).to_contain_text("WARN [settles_dropped]")
    expect(finding).to_contain_text("3 settlements were dropped")
    assert page.locator("#events-list li").count() > 10
    page.screenshot(path=str(artifacts / "dashboard.png"), full_page=True)
    assert watch.errors == [] and watch.dialogs == []


def test_hostile_memory_text_is_shown_as_text(
    watch: PageWatch, server: Any, scenario: Scenario, artifacts: Path
) -> None:
    from playwright.sync_api import expect

    page = open_dashboard(watch, server)
    hostile = scenario.ids["hostile"]
    row = page.locator(f"#living-table tr[data-id='{hostile}']")
    expect(row.locator("td.text")).to_have_text(HOSTILE_QUESTION)
    row.locator("button.link").click()
    drawer = page.locator("#drawer")
    expect(drawer).to_be_visible()
    expect(drawer.locator(".qa.q")).to_have_text(HOSTILE_QUESTION)
    expect(drawer.locator(".qa.a")).to_have_text(HOSTILE_ANSWER)
    # Nothing from the text became markup, and nothing ran.
    assert page.locator("main img, #drawer img, #drawer script").count() == 0
    assert page.locator("script").count() == 1
    assert page.evaluate("() => window.__pwned") is None
    expect(page.locator("#tickets-table tbody td.text")).to_have_text(
        "Is the tmp folder safe to clear?"
    )
    page.screenshot(path=str(artifacts / "hostile-entry.png"))
    assert watch.dialogs == []
    assert watch.errors == []  # no CSP violation either: the page uses no inline code


def test_search_and_sort_the_living_table(
    watch: PageWatch, server: Any, scenario: Scenario
) -> None:
    from playwright.sync_api import expect

    with Ledger.open(scenario.path, create=False) as ledger:
        living = list(ledger.store.alive())
        alive = len(living)
    wanted = set(tokenize("database files"))
    matching = sorted(
        (e for e in living if wanted <= set(tokenize(e.text))), key=lambda e: (-e.energy, e.id)
    )
    assert matching
    page = open_dashboard(watch, server)
    page.fill("#living-search", "database files")
    table = page.locator("#living-table")
    expect(table).to_have_attribute("data-total", str(len(matching)))
    ids = table.locator("tbody tr")
    expect(ids).to_have_count(len(matching))
    assert [ids.nth(i).get_attribute("data-id") for i in range(len(matching))] == [
        e.id for e in matching
    ]
    expect(page.locator("#living-count")).to_have_text(f"({len(matching)} matching)")
    page.fill("#living-search", "zebra crossing")
    expect(table.locator("tbody tr.empty")).to_have_text("No living entry matches.")
    page.fill("#living-search", "")
    expect(table).to_have_attribute("data-total", str(alive))

    # Sorting: balance ascending puts the escrowed, indebted hostile entry first.
    page.click("#living-table th button[data-sort=balance]")
    expect(page.locator("#living-table th[aria-sort=ascending]")).to_have_count(1)
    expect(table.locator("tbody tr").first).to_have_attribute("data-id", scenario.ids["hostile"])
    page.click("#living-table th button[data-sort=id]")
    first_ids = sorted(e.id for e in living)[:3]
    expect(table.locator("tbody tr").nth(2)).to_have_attribute("data-id", first_ids[2])
    assert watch.errors == []


def test_life_story_of_living_merged_and_dead_entries(
    watch: PageWatch, server: Any, scenario: Scenario
) -> None:
    from playwright.sync_api import expect

    ids = scenario.ids
    with Ledger.open(scenario.path, create=False) as ledger:
        cache = entry_life(ledger, ids["cache"])
        merged = entry_life(ledger, ids["logs"])
    assert cache is not None and merged is not None
    page = open_dashboard(watch, server)
    page.locator(f"#living-table tr[data-id='{ids['cache']}'] button.link").click()
    drawer = page.locator("#drawer")
    expect(drawer).to_have_attribute("data-entry", ids["cache"])
    expect(drawer.locator("[data-fact=status]")).to_have_text("living")
    settlements = drawer.locator("table.settlements tbody tr")
    expect(settlements).to_have_count(len(cache["settlements"]))
    first = cache["settlements"][0]
    expect(settlements.first.locator("td").nth(3)).to_have_text(first["detail"])
    expect(settlements.first.locator("td").nth(2)).to_have_text(f"+{first['delta']:g}")
    expect(drawer.locator("ol.story li")).to_have_count(len(cache["events"]))
    # Its neighbours, the hostile entry among them: its question shown as text, its id a link.
    neighbour = drawer.locator(f"table.related tr[data-related='{ids['hostile']}']")
    expect(neighbour.locator("td.text")).to_have_text(HOSTILE_QUESTION)
    assert page.locator("#drawer img, #drawer script").count() == 0
    neighbour.locator("button.link").click()
    expect(drawer).to_have_attribute("data-entry", ids["hostile"])
    expect(drawer.locator(".qa.q")).to_have_text(HOSTILE_QUESTION)
    assert page.evaluate("() => window.__pwned") is None
    page.keyboard.press("Escape")
    expect(drawer).to_be_hidden()

    # A merged-away entry from the graveyard, then its heir through the link.
    page.locator(f"#graveyard-table tr[data-id='{ids['logs']}'] button.link").click()
    expect(drawer.locator("[data-fact=status]")).to_have_text("merged (merged)")
    drawer.locator("[data-fact='merged into'] button").click()
    expect(drawer).to_have_attribute("data-entry", merged["merged_into"])
    expect(page).to_have_url(f"{server.url}/#entry={merged['merged_into']}")
    # The executed poison: a life story reached by its URL.
    page.goto(f"{server.url}/#entry={ids['poison']}")
    expect(drawer.locator("[data-fact=status]")).to_have_text("dead (executed)")
    assert watch.errors == []


# -- live updates ------------------------------------------------------------------------------


def test_other_processes_writes_appear_without_a_reload(
    watch: PageWatch, browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    from playwright.sync_api import expect

    scenario = demo_store(tmp_path)
    hostile = scenario.ids["hostile"]
    with running(scenario.path) as srv:
        page = open_dashboard(watch, srv)
        page.evaluate("() => { window.__marker = 42; }")
        alive = int(text(page, "[data-card=alive] .value").replace(",", ""))
        delta_fact = text(page, "[data-fact='resource delta']")
        page.locator(f"#living-table tr[data-id='{hostile}'] button.link").click()
        expect(page.locator("#drawer table.settlements")).to_have_count(0)

        proc = cli(
            "ledger",
            str(scenario.path),
            "settle",
            scenario.pending_ticket,
            "5",
            "--detail",
            "settled by another process",
        )
        assert proc.returncode == 0, proc.stderr
        proc = cli("ledger", str(scenario.path), "add", "Is /var/tmp cleared?", "No, only /tmp.")
        assert proc.returncode == 0, proc.stderr

        expect(page.locator("#tickets-table")).to_have_attribute("data-total", "0")
        expect(page.locator("[data-card=pending] .value")).to_have_text("0")
        expect(page.locator("[data-card=alive] .value")).to_have_text(f"{alive + 1:,}")
        expect(page.locator("#events-list li").first).to_contain_text("add")
        expect(page.locator("#events-list")).to_contain_text("settled by another process")
        assert text(page, "[data-fact='resource delta']") != delta_fact
        # The open life story refreshed too: the settlement landed on the hostile entry.
        rows = page.locator("#drawer table.settlements tbody tr")
        expect(rows).to_have_count(1)
        expect(rows.first.locator("td").nth(3)).to_have_text("settled by another process")
        assert page.evaluate("() => window.__marker") == 42  # same page: no reload happened
        page.screenshot(path=str(artifacts / "after-live-update.png"), full_page=True)
        assert watch.errors == []
