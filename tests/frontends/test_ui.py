"""The dashboard's server, over real HTTP on an ephemeral loopback port.

Every JSON endpoint is checked against the library objects the CLI prints
(``top --json``, ``why --json``, ``doctor --json``, ``ledger stats``, and the
``timeline``/``economics`` pieces), on both durable backends; paging, sorting
and searching on an SQLite store of a few thousand entries are checked against
a brute-force sort of every entry; and the security promises (escaping, CSP,
no write methods, loopback only, the Host guard) are checked on the wire. The
same API tests run on a PostgreSQL store (a ``postgresql://`` URL in place of the
path) in the throwaway cluster of ``conftest.pg_cluster``.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from darwin_memo.backends.sqlite import SqliteBackend
from darwin_memo.backends.sqlstore import write_entries_bulk
from darwin_memo.cli import ui_cmd
from darwin_memo.dashboard import server as ui
from darwin_memo.dashboard.data import CAUSES, SORT_KEYS, series
from darwin_memo.ledger import Ledger
from darwin_memo.observe import (
    doctor,
    economics,
    entry_life,
    ledger_events,
    timeline,
    top,
)
from darwin_memo.records.entry import EntryKind, MemoryEntry
from darwin_memo.retrieval.lexical import tokenize
from ui_support import (
    HOSTILE_ANSWER,
    HOSTILE_QUESTION,
    Scenario,
    build_store,
    cli,
    fetch,
    get_json,
    interruptible,
    running,
)

STATIC_DIR = Path(ui.__file__).with_name("static")
TOP_ROW_KEYS = {
    "id",
    "balance",
    "kind",
    "sources",
    "born_tick",
    "age_ticks",
    "last_settled_tick",
    "uses",
    "pinned",
    "probation",
    "question",
    "ticks_to_starvation",
}


@pytest.fixture(scope="module", params=["sqlite", "json", "postgres"])
def scenario(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    if request.param == "postgres":
        from conftest import pg_url

        return build_store(pg_url(request.getfixturevalue("pg_cluster")))  # a URL, not a path
    suffix = ".db" if request.param == "sqlite" else ".json"
    return build_store(tmp_path_factory.mktemp(f"ui-{request.param}") / f"store{suffix}")


def _kind(store: Path | str) -> str:
    if isinstance(store, str):
        return "postgres"
    return "sqlite" if store.suffix == ".db" else "json"


@pytest.fixture(scope="module")
def server(scenario: Scenario) -> Iterator[Any]:
    with running(scenario.path) as srv:
        yield srv


# -- the API against the library -----------------------------------------------------


def test_summary_is_ledger_stats_and_economics(scenario: Scenario, server: Any) -> None:
    summary = get_json(server, "/api/summary")
    with Ledger.open(scenario.path, create=False) as ledger:
        assert summary["stats"] == ledger.stats()
        assert summary["economics"] == economics(ledger_events(ledger), ledger.store)
        assert summary["tick"] == ledger.tick_count
        assert summary["counts"] == {
            "alive": len(ledger.store),
            "dead": ledger.store.dead_count(),
            "pinned": sum(1 for e in ledger.store.alive() if e.pinned),
            "pending": len(ledger.pending()),
        }
    assert summary["counts"] == {"alive": 4, "dead": 5, "pinned": 1, "pending": 1}
    assert summary["backend"] == _kind(scenario.path)
    assert summary["kinds"] == ["consolidated", "experience"]


def test_series_extends_the_timeline_with_causes_and_economics(
    scenario: Scenario, server: Any
) -> None:
    data = get_json(server, "/api/series")
    with Ledger.open(scenario.path, create=False) as ledger:
        base = timeline(ledger_events(ledger))
    rows = data["ticks"]
    assert len(rows) == len(base) == 22
    for row, expected in zip(rows, base, strict=True):
        assert {k: row[k] for k in expected} == expected
        assert set(row["died"]) == set(CAUSES)
        assert row["upkeep_charged"] is not None
    assert data["deaths_by_cause"] == {"executed": 1, "starved": 1, "merged": 2, "forgotten": 1}
    # The executed poison and the forgotten entry died before the first tick.
    assert rows[0]["died"] == {"executed": 1, "starved": 0, "merged": 0, "forgotten": 1}
    # The tick that merged the log-file twins (the fifth) carries their deaths.
    assert rows[4]["tick"] == 5 and rows[4]["died"]["merged"] == 2
    summary = get_json(server, "/api/summary")
    assert sum(r["delta"] for r in rows) == pytest.approx(
        summary["economics"]["resource"]["delta_total"]
    )
    assert sum(r["upkeep_charged"] for r in rows) == pytest.approx(
        summary["economics"]["energy"]["upkeep_paid"]
    )
    assert sum(r["credited"] - r["debited"] for r in rows) == pytest.approx(
        summary["economics"]["energy"]["net"]
    )


def test_series_reads_a_tampered_journal_defensively() -> None:
    events: list[Any] = [
        "not a record",
        {"event": "settle", "delta": "3", "applied": "x", "buried": "abc", "tick": 0},
        {"event": "settle", "delta": 2, "applied": [{"entry": "a", "credit": 0.5}, 7]},
        {"event": "tick", "tick": 1, "population": "7", "total_energy": float("nan")},
        {"event": "merge", "tick": 1, "members": ["m1", "m2", 3]},
        {"event": "tick", "tick": 2, "dead_entries": ["d1", "m1"], "upkeep_charged": 0.1},
        {"event": "forget", "entry": "f1", "tick": 2},
    ]
    data = series(events, damaged=frozenset({"d1"}))
    one, two, after = data["ticks"]
    assert one["delta"] == 2.0 and one["credited"] == 0.5 and one["settles"] == 2
    assert one["population"] is None and one["total_energy"] is None
    assert one["died"]["merged"] == 2  # the merge recorded right after tick 1
    assert two["died"] == {"executed": 1, "starved": 0, "merged": 0, "forgotten": 0}
    assert two["upkeep_charged"] == 0.1
    assert after["open"] is True and after["died"]["forgotten"] == 1
    assert data["deaths_by_cause"] == {"executed": 1, "starved": 0, "merged": 2, "forgotten": 1}


def test_entries_first_page_is_top(scenario: Scenario, server: Any) -> None:
    page = get_json(server, "/api/entries")
    with Ledger.open(scenario.path, create=False) as ledger:
        board = top(ledger, limit=50)
    assert page["total"] == board["alive"] == 4
    assert page["entries"] == board["entries"]
    assert all(set(row) == TOP_ROW_KEYS for row in page["entries"])
    assert page["entries"][-1]["id"] == scenario.ids["hostile"]  # escrowed, below zero


def test_entry_is_why_json_for_living_dead_and_merged(scenario: Scenario, server: Any) -> None:
    with Ledger.open(scenario.path, create=False) as ledger:
        for name in ("cache", "poison", "logs", "editor", "hostile"):
            entry_id = scenario.ids[name]
            life = get_json(server, f"/api/entry/{entry_id}")
            assert isinstance(life.pop("related"), list)
            assert life == entry_life(ledger, entry_id)
    assert get_json(server, f"/api/entry/{scenario.ids['poison']}")["cause_of_death"] == (
        "executed"
    )
    life = get_json(server, f"/api/entry/{scenario.ids['cache']}")
    assert life["status"] == "living"
    assert [s["detail"] for s in life["settlements"]][:2] == [
        "freed 3 chunk files (run 0)",
        "freed 3 chunk files (run 3)",
    ]
    status, _, body = fetch(server, "/api/entry/nope")
    assert status == 404
    assert json.loads(body) == {"error": "nope is unknown to this store"}


def test_entry_lists_its_related_entries_as_ledger_related_does(
    scenario: Scenario, server: Any
) -> None:
    for name in ("cache", "hostile", "poison"):
        entry_id = scenario.ids[name]
        related = get_json(server, f"/api/entry/{entry_id}")["related"]
        proc = cli("ledger", str(scenario.path), "related", entry_id)
        assert proc.returncode == 0, proc.stderr
        assert related == json.loads(proc.stdout)["related"]
        assert len(related) <= 5
    assert get_json(server, f"/api/entry/{scenario.ids['poison']}")["related"] == []  # dead
    hostile = get_json(server, f"/api/entry/{scenario.ids['cache']}")["related"]
    assert scenario.ids["hostile"] in [row["entry_id"] for row in hostile]


@pytest.mark.parametrize("suffix", [".db", ".json"])
def test_entry_related_shows_a_recalled_neighbour_and_its_link(tmp_path: Path, suffix: str) -> None:
    from darwin_memo.organic import OrganicMemory

    path = tmp_path / f"organic{suffix}"
    with Ledger.open(path) as ledger:
        lone = ledger.add("Is the lighthouse lamp serviced weekly?", "Yes, on Mondays.").id
    with running(path) as srv:  # one entry and no organic rows: no neighbours
        assert get_json(srv, f"/api/entry/{lone}")["related"] == []
        with Ledger.open(path) as ledger:
            far = ledger.add("Which cheese goes with pears?", "Aged gouda.").id
            near = ledger.add("Who services the lighthouse lamp?", "The keeper does.").id
            OrganicMemory.open(ledger).recall(lone)
        related = get_json(srv, f"/api/entry/{lone}")["related"]
    by_id = {row["entry_id"]: row for row in related}
    assert set(by_id) == {near, far}
    assert by_id[near] == {
        "entry_id": near,
        "score": by_id[near]["score"],
        "link": 0.25,
        "question": "Who services the lighthouse lamp?",
    }
    assert by_id[near]["score"] >= 0.25 and by_id[near]["score"] > by_id[far]["score"]
    assert related[0]["entry_id"] == near


def test_graveyard_rows_carry_causes(scenario: Scenario, server: Any) -> None:
    page = get_json(server, "/api/graveyard")
    assert page["total"] == 5
    causes = {row["id"]: row["cause"] for row in page["entries"]}
    ids = scenario.ids
    assert causes == {
        ids["poison"]: "executed",
        ids["trivia"]: "starved",
        ids["logs"]: "merged",
        ids["logs_twin"]: "merged",
        ids["editor"]: "forgotten",
    }
    assert page["deaths_by_cause"] == {"executed": 1, "starved": 1, "merged": 2, "forgotten": 1}
    assert page["entries"][0]["id"] == ids["trivia"]  # the latest death comes first
    merged = next(r for r in page["entries"] if r["id"] == ids["logs"])
    assert merged["merged_into"] is not None and merged["died_tick"] == 5
    two = get_json(server, "/api/graveyard?limit=2&offset=2")
    assert [r["id"] for r in two["entries"]] == [r["id"] for r in page["entries"][2:4]]
    found = get_json(server, "/api/graveyard?q=offsite")
    assert [r["id"] for r in found["entries"]] == [ids["trivia"]]


def test_tickets_doctor_events_and_state(scenario: Scenario, server: Any) -> None:
    tickets = get_json(server, "/api/tickets")["tickets"]
    assert [t["id"] for t in tickets] == [scenario.pending_ticket]
    assert tickets[0]["deciding_entry"] == scenario.ids["hostile"]
    assert tickets[0]["age_ticks"] == 22

    report = get_json(server, "/api/doctor?wait=10")
    with Ledger.open(scenario.path, create=False) as ledger:
        expected = [f.as_dict() for f in doctor(ledger, ledger_events(ledger))]
        journal = ledger_events(ledger)
    assert report["findings"] == expected
    assert [f["code"] for f in expected] == ["settles_dropped"]
    assert report["stale"] is False and report["pending"] is False

    assert get_json(server, "/api/events")["events"] == journal[-200:]
    assert get_json(server, "/api/events?last=3")["events"] == journal[-3:]
    since = journal[-1]["ts"]
    assert get_json(server, f"/api/events?since={since}")["events"] == [
        e for e in journal if e["ts"] >= since
    ]

    state = get_json(server, "/api/state")
    assert list(state) == [
        "tick",
        "upkeep",
        "counts",
        "total_energy",
        "doctor",
        "timeline",
        "economics",
        "entries",
        "graveyard",
        "pending",
    ]
    assert state["counts"]["pending"] == 1
    assert state["pending"][0] == {
        "id": scenario.pending_ticket,
        "query": "Is the tmp folder safe to clear?",
        "born_tick": 0,
        "age_ticks": 22,
    }
    assert set(state["graveyard"][0]) == {"id", "question", "cause", "uses", "sources"}
    assert state["doctor"] == expected
    assert ui.state(scenario.path)["counts"] == state["counts"]


def test_entries_search_sort_and_filters(scenario: Scenario, server: Any) -> None:
    ids = scenario.ids
    found = get_json(server, "/api/entries?q=chunk+files")
    assert [r["id"] for r in found["entries"]] == [ids["cache"]] and found["total"] == 1
    assert (
        get_json(server, f"/api/entries?q={ids['backups'][:6]}")["entries"][0]["id"]
        == (ids["backups"])
    )
    assert get_json(server, "/api/entries?q=zebra")["total"] == 0
    pinned = get_json(server, "/api/entries?flag=pinned")
    assert [r["id"] for r in pinned["entries"]] == [ids["backups"]]
    assert get_json(server, "/api/entries?kind=consolidated")["total"] == 1
    by_id = get_json(server, "/api/entries?sort=id&order=asc")["entries"]
    assert [r["id"] for r in by_id] == sorted(r["id"] for r in by_id)
    runway = get_json(server, "/api/entries?sort=ticks_to_starvation")["entries"]
    assert runway[0]["ticks_to_starvation"] is None  # pinned: cannot starve


@pytest.mark.parametrize(
    "query",
    [
        "sort=bogus",
        "order=up",
        "limit=0",
        "limit=100000",
        "offset=-1",
        "offset=x",
        "flag=immortal",
        "&".join(f"p{i}=1" for i in range(40)),
    ],
)
def test_bad_parameters_are_400(server: Any, query: str) -> None:
    status, headers, body = fetch(server, f"/api/entries?{query}")
    assert status == 400, body
    assert headers["Content-Type"] == "application/json; charset=utf-8"
    assert set(json.loads(body)) == {"error"}


def test_unknown_routes(server: Any) -> None:
    status, _, body = fetch(server, "/api/nothing")
    assert status == 404 and "error" in json.loads(body)
    for path in ("/../../etc/passwd", "/ui_static/app.js", "/%2e%2e/ui.py", "/style.css/x"):
        status, headers, _ = fetch(server, path)
        assert status == 404, path
        assert headers["X-Content-Type-Options"] == "nosniff"


# -- security on the wire ---------------------------------------------------------------


def test_memory_text_is_escaped_in_json(scenario: Scenario, server: Any) -> None:
    status, _, body = fetch(server, f"/api/entry/{scenario.ids['hostile']}")
    assert status == 200
    assert b"<" not in body and b">" not in body
    life = json.loads(body)
    assert life["question"] == HOSTILE_QUESTION and life["answer"] == HOSTILE_ANSWER
    for path in ("/api/entries", "/api/state", "/api/events", "/api/tickets"):
        assert b"<" not in fetch(server, path)[2], path


def test_security_headers_everywhere(server: Any) -> None:
    for path in ("/", "/app.js", "/style.css", "/api/summary", "/api/nothing", "/nothing"):
        _, headers, _ = fetch(server, path)
        csp = headers["Content-Security-Policy"]
        assert "default-src 'self'" in csp and "script-src 'self'" in csp, path
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert "frame-ancestors 'none'" in csp
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Referrer-Policy"] == "no-referrer"
        assert headers["Cache-Control"] == "no-store"
    _, headers, body = fetch(server, "/")
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert body.startswith(b"<!doctype html>")
    assert fetch(server, "/app.js")[1]["Content-Type"] == "text/javascript; charset=utf-8"


def test_page_has_no_inline_script_or_html_sinks() -> None:
    html = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", html, flags=re.DOTALL | re.I)
    assert scripts == [""]  # one external script, nothing inline
    assert re.search(r'<script src="/app.js" defer>', html)
    assert not re.search(r"\son[a-z]+\s*=", html, flags=re.I)  # no inline handlers
    assert "<style" not in html and "style=" not in html
    assert "http://" not in html and "https://" not in html  # nothing from elsewhere
    source = (STATIC_DIR / "app.js").read_text(encoding="utf-8")
    js = "\n".join(ln for ln in source.splitlines() if not ln.strip().startswith("//"))
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in js, sink
    assert "new Function" not in js and 'setAttribute("on' not in js
    assert "http://" not in js.replace('"http://www.w3.org/2000/svg"', "")


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"])
def test_no_write_methods(scenario: Scenario, server: Any, method: str) -> None:
    before = _fingerprint(scenario.path)
    for path in ("/api/entries", f"/api/entry/{scenario.ids['cache']}", "/"):
        status, headers, body = fetch(server, path, method=method)
        assert status == 405, (method, path)
        assert headers["Allow"] == "GET, HEAD"
        assert "read-only" in json.loads(body)["error"]
    assert _fingerprint(scenario.path) == before


def test_head_has_headers_and_no_body(server: Any) -> None:
    status, headers, body = fetch(server, "/api/summary", method="HEAD")
    assert status == 200 and body == b""
    assert int(headers["Content-Length"]) > 0


def _raw_get(server: Any, host: str | None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.putrequest("GET", "/api/version", skip_host=True)
    if host is not None:
        conn.putheader("Host", host)
    conn.putheader("X-Darwin-Memo-Token", server.token)
    conn.endheaders()
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, body


def test_host_header_guards_against_dns_rebinding(server: Any) -> None:
    port = server.port
    for host in (f"127.0.0.1:{port}", "localhost", f"LOCALHOST:{port}", f"[::1]:{port}"):
        assert _raw_get(server, host)[0] == 200, host
    for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.evil.example", "", None):
        status, body = _raw_get(server, host)
        assert status == 421, host
        assert json.loads(body) == {"error": "unexpected Host; the dashboard is loopback-only"}


def test_serving_never_writes_the_store(tmp_path: Path) -> None:
    for name in ("store.db", "store.json"):
        scenario = build_store(tmp_path / name, ticks=3)
        before = _fingerprint(scenario.path)
        with running(scenario.path) as srv:
            for path in (
                "/",
                "/api/state",
                "/api/summary",
                "/api/series",
                "/api/entries?q=cache&sort=uses",
                "/api/graveyard",
                "/api/tickets",
                "/api/doctor?wait=10",
                "/api/events",
                f"/api/entry/{scenario.ids['cache']}",
            ):
                assert fetch(srv, path)[0] == 200, path
        assert _fingerprint(scenario.path) == before, name


def _fingerprint(path: Path | str) -> Any:
    """The store's logical content (SQLite, PostgreSQL) or its bytes and journal (JSON)."""
    tables = ("meta", "entries", "tickets", "notes", "events")
    if isinstance(path, str):
        import psycopg

        from darwin_memo.backends.postgres import parse_url

        conninfo, schema, _ = parse_url(path)
        with psycopg.connect(conninfo) as conn:
            return [
                conn.execute(f"SELECT * FROM {schema}.{table} ORDER BY 1").fetchall()
                for table in tables
            ]
    if path.suffix == ".json":
        journal = path.with_suffix(".events.jsonl")
        return (
            hashlib.sha256(path.read_bytes()).hexdigest(),
            hashlib.sha256(journal.read_bytes()).hexdigest() if journal.exists() else None,
        )
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall() for table in tables]
    finally:
        conn.close()


# -- live updates and locking ------------------------------------------------------------


def test_writes_by_another_process_show_up(
    scenario: Scenario, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    copy: Path | str
    if isinstance(scenario.path, str):  # PostgreSQL: a second store in the same database
        from conftest import pg_url
        from darwin_memo.transfer import copy_store

        copy = pg_url(request.getfixturevalue("pg_cluster"))
        copy_store(scenario.path, copy)
    else:
        copy = tmp_path / scenario.path.name
        copy.write_bytes(scenario.path.read_bytes())
        journal = scenario.path.with_suffix(".events.jsonl")
        if journal.exists():
            copy.with_suffix(".events.jsonl").write_bytes(journal.read_bytes())
    with running(copy) as srv:
        version = get_json(srv, "/api/version")["version"]
        before = get_json(srv, "/api/summary")
        proc = cli("ledger", str(copy), "settle", scenario.pending_ticket, "2", "--detail", "late")
        assert proc.returncode == 0 and json.loads(proc.stdout) == {"settled": True}, proc.stderr
        proc = cli("ledger", str(copy), "add", "Is /var/tmp cleared at boot?", "No, only /tmp.")
        assert proc.returncode == 0, proc.stderr
        new_id = json.loads(proc.stdout)["entry_id"]
        assert get_json(srv, "/api/version")["version"] != version
        after = get_json(srv, "/api/summary")
        assert after["counts"]["alive"] == before["counts"]["alive"] + 1
        assert after["counts"]["pending"] == 0
        assert after["economics"]["resource"]["delta_total"] == (
            before["economics"]["resource"]["delta_total"] + 2
        )
        assert get_json(srv, "/api/tickets")["tickets"] == []
        assert get_json(srv, f"/api/entry/{new_id}")["status"] == "living"
        assert get_json(srv, "/api/events?last=2")["events"][0]["detail"] == "late"
        assert get_json(srv, "/api/series")["ticks"][-1].get("open") is True


def test_a_locked_json_store_answers_503(tmp_path: Path) -> None:
    from darwin_memo.backends.jsonfile import store_lock

    scenario = build_store(tmp_path / "store.json", ticks=2)
    with running(scenario.path, in_process=True, lock_timeout=0.2) as srv:
        assert fetch(srv, "/api/summary")[0] == 200
        with Ledger.open(scenario.path) as writer:
            writer.tick()
        with store_lock(scenario.path, 5):
            status, _, body = fetch(srv, "/api/summary")
        assert status == 503, body
        assert "locked" in json.loads(body)["error"]
        assert fetch(srv, "/api/summary")[0] == 200


def test_a_demo_store_is_served(tmp_path: Path) -> None:
    proc = cli("demo", "--cycles", "30", "-o", "demo.json", cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    store = tmp_path / "demo.json"
    payload = json.loads(store.read_text(encoding="utf-8"))
    with running(store) as srv:
        summary = get_json(srv, "/api/summary")
        assert summary["counts"]["alive"] == len(payload["entries"])
        assert summary["counts"]["dead"] == len(payload["graveyard"])
        assert get_json(srv, "/api/series") == {
            "ticks": [],
            "deaths_by_cause": dict.fromkeys(CAUSES, 0),
        }
        page = get_json(srv, "/api/graveyard?limit=100")
        assert page["total"] == len(payload["graveyard"])
        assert {r["cause"] for r in page["entries"]} <= {"merged", "unknown"}
        assert get_json(srv, "/api/entries")["total"] == len(payload["entries"])
    assert not store.with_suffix(".events.jsonl").exists()  # nothing was written


# -- paging a few thousand SQLite entries ----------------------------------------------------


def _bulk_store(path: Path, n: int, seed: int = 5, dead_every: int = 10) -> None:
    """An SQLite store of ``n`` lessons written in one transaction (as ``migrate`` does)."""
    rng = random.Random(seed)
    words = "cache log data file delete keep backup index shard chunk tmp build test deploy"
    vocab = words.split()

    def entries() -> Iterator[tuple[MemoryEntry, bool]]:
        for i in range(n):
            picked = rng.sample(vocab, 3)
            entry = MemoryEntry(
                question=f"Is the {picked[0]} {picked[1]} number {i} safe to touch?",
                answer=f"Only the {picked[2]} one, lesson {i}.",
                kind=EntryKind.EXPERIENCE if i % 3 else EntryKind.EXPLICIT,
                sources=["bulk"],
                energy=round(rng.uniform(0.05, 4.0), 4),
                born_cycle=rng.randrange(0, 5),
                uses=rng.randrange(0, 4),
                last_used_cycle=rng.choice([-1, 0, 1, 2]),
                id=f"{i:012x}",
                recorded_ts="2026-01-01T00:00:00+00:00",
            )
            yield entry, i % dead_every != 0

    backend = SqliteBackend(path, create=True)
    conn = backend.conn
    conn.execute("BEGIN IMMEDIATE")
    write_entries_bulk(conn, entries(), damaged=(), tick=0, upkeep=0.05, version=1)
    conn.executemany(
        "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
        [
            ("version", "1"),
            ("tick_count", "0"),
            ("config", json.dumps({"max_energy": 5.0, "upkeep": 0.05})),
        ],
    )
    conn.execute("COMMIT")
    backend.close()


@pytest.fixture(scope="module")
def big_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3,000 lessons that have lived: ticks, re-anchored balances, pins, an escrowed debt."""
    path = tmp_path_factory.mktemp("ui-paging") / "big.db"
    _bulk_store(path, 3000)
    with Ledger.open(path) as ledger:
        for _ in range(3):  # (the fifth tick would merge these look-alike lessons)
            ledger.tick()
        for word in ("cache chunk", "backup shard", "deploy index", "tmp log"):
            ticket = ledger.decide(f"Is the {word} safe to touch?")
            ledger.settle(ticket.id, 2, detail="measured")
        living = sorted(e.id for e in ledger.store.alive())
        for entry_id in living[5:300:37]:
            ledger.pin(entry_id)
        # Open tickets on one entry; settling all but one drives it below zero while
        # the last keeps it alive in escrow.
        tickets = [ledger.decide("Is the data file number 7 safe to touch?") for _ in range(9)]
        for ticket in tickets[:-1]:
            ledger.settle(ticket.id, -40, detail="broke it")
        ledger.tick()
    return path


def _expected_ids(ledger: Ledger, sort: str, order: str, q: str = "") -> list[str]:
    store = ledger.store
    entries = list(store.alive())
    if q:
        wanted = set(tokenize(q))
        entries = [e for e in entries if wanted <= set(tokenize(e.text))]

    def key(e: MemoryEntry) -> Any:
        if sort == "balance":
            return e.energy
        if sort == "ticks_to_starvation":
            return (1, 0.0) if store.ticks_to_starvation(e) is None else (0, e.energy)
        if sort == "age_ticks":
            return -e.born_cycle
        if sort == "last_settled_tick":
            return e.last_used_cycle
        if sort == "question":
            return e.question.lower()
        if sort == "uses":
            return e.uses
        if sort == "kind":
            return e.kind.value
        return e.id

    entries.sort(key=lambda e: e.id)
    entries.sort(key=key, reverse=order == "desc")
    return [e.id for e in entries]


def _page_ids(srv: Any, query: str) -> tuple[int, list[str]]:
    page = get_json(srv, f"/api/entries?{query}")
    return page["total"], [row["id"] for row in page["entries"]]


def test_paging_matches_a_full_sort(big_sqlite: Path) -> None:
    with Ledger.open(big_sqlite, create=False) as ledger:
        alive = len(ledger.store)
        negative = [e for e in ledger.store.alive() if e.energy < 0]
        assert negative and any(e.pinned for e in ledger.store.alive())
        expected = {
            (sort, order): _expected_ids(ledger, sort, order)
            for sort in SORT_KEYS
            for order in ("desc", "asc")
        }
    assert 2000 < alive < 2700  # the bulk's dead tenth and the starved are gone
    rng = random.Random(3)
    with running(big_sqlite) as srv:
        for (sort, order), ids in expected.items():
            offsets = [0, 50, alive - 20, *rng.sample(range(alive), 2)]
            for offset in offsets:
                total, got = _page_ids(srv, f"sort={sort}&order={order}&offset={offset}&limit=40")
                assert total == alive
                assert got == ids[offset : offset + 40], (sort, order, offset)
        # Walking every page of the default order visits every living entry once.
        seen: list[str] = []
        for offset in range(0, alive, 500):
            seen += _page_ids(srv, f"offset={offset}&limit=500")[1]
        assert seen == expected[("balance", "desc")]
        assert _page_ids(srv, f"offset={alive}")[1] == []


@pytest.mark.parametrize("q", ["chunk", "cache backup", "number 7", "zebra", "tmp tmp"])
def test_search_matches_a_full_scan(big_sqlite: Path, q: str) -> None:
    with Ledger.open(big_sqlite, create=False) as ledger:
        ids = _expected_ids(ledger, "balance", "desc", q)
    with running(big_sqlite) as srv:
        total, got = _page_ids(srv, f"q={q.replace(' ', '+')}&limit=100")
    assert total == len(ids)
    assert got == ids[:100]


def test_graveyard_paging_on_sqlite(big_sqlite: Path) -> None:
    with Ledger.open(big_sqlite, create=False) as ledger:
        dead = {e.id for e in ledger.store.graveyard()}
    with running(big_sqlite) as srv:
        seen: list[str] = []
        total = None
        for offset in range(0, len(dead) + 100, 100):
            page = get_json(srv, f"/api/graveyard?offset={offset}&limit=100")
            total = page["total"]
            seen += [row["id"] for row in page["entries"]]
        found = get_json(srv, "/api/graveyard?q=number+10&limit=5")
    assert total == len(dead) and len(seen) == len(dead) and set(seen) == dead
    assert [row["id"] for row in found["entries"]] == [f"{10:012x}"]


# -- 100,000 entries --------------------------------------------------------------------------


@pytest.mark.slow
def test_100k_entries_page_load_under_500ms(tmp_path: Path) -> None:
    """Everything the page asks for on first load, on a cold server: under 500 ms.

    Measured as the request threads' CPU time (the ``Server-Timing`` cpu figure), so
    the bound holds on a shared CI machine; the doctor, which reads every entry's
    notes, runs in its own thread and is not part of the page load.
    """
    path = tmp_path / "big.db"
    _bulk_store(path, 100_000)
    page_load = [
        "/api/version",
        "/api/summary",
        "/api/series",
        "/api/entries?sort=balance&order=desc&offset=0&limit=25",
        "/api/graveyard?offset=0&limit=25",
        "/api/tickets",
        "/api/events?last=60",
        "/api/doctor?wait=0",
    ]
    with running(path) as srv:
        for asset in ("/", "/app.js", "/style.css"):
            assert fetch(srv, asset)[0] == 200
        cpu: dict[str, float] = {}
        for request in page_load:
            status, headers, body = fetch(srv, request)
            assert status == 200, (request, body[:200])
            timing = dict(re.findall(r"(\w+);dur=([\d.]+)", headers["Server-Timing"]))
            cpu[request] = float(timing["cpu"])
        assert sum(cpu.values()) < 500, cpu
        summary = get_json(srv, "/api/summary")
        assert summary["counts"]["alive"] == 90_000
        assert get_json(srv, "/api/entries?limit=25")["total"] == 90_000
        # A later page and a word search stay interactive too.
        for request in ("/api/entries?offset=1000&limit=25", "/api/entries?q=chunk+cache"):
            _, headers, _ = fetch(srv, request)
            timing = dict(re.findall(r"(\w+);dur=([\d.]+)", headers["Server-Timing"]))
            assert float(timing["cpu"]) < 500, (request, timing)
        # The doctor finishes in the background (and must, to leave the CPU to others).
        report = get_json(srv, "/api/doctor?wait=10")
        deadline = time.monotonic() + 300
        while report["pending"] and time.monotonic() < deadline:
            report = get_json(srv, "/api/doctor?wait=10")
        assert report["as_of"] is not None and report["error"] is None, report


# -- the command line ---------------------------------------------------------------------------


def test_cli_serves_until_interrupted(scenario: Scenario, tmp_path: Path) -> None:
    import os

    env = {k: v for k, v in os.environ.items() if k != "DARWIN_MEMO_DEBUG"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "darwin_memo", "ui", str(scenario.path), "--port", "0", "--no-open"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=interruptible,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.fullmatch(
            r"darwin-memo ui: (http://127\.0\.0\.1:(\d+))/\?token=([\w-]+)  "
            r"\(ctrl-c to stop\)\n",
            line,
        )
        assert match, line
        conn = http.client.HTTPConnection("127.0.0.1", int(match.group(2)), timeout=30)
        conn.request("GET", "/api/summary")
        response = conn.getresponse()
        assert response.status == 403  # no token
        response.read()
        conn.request("GET", "/api/summary", headers={"X-Darwin-Memo-Token": match.group(3)})
        response = conn.getresponse()
        assert response.status == 200
        assert json.loads(response.read())["counts"]["pending"] == 1
        conn.close()
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in out + err
    assert err.strip() == "darwin-memo ui: stopped"


def _assert_one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


def test_cli_refuses_other_interfaces_and_missing_stores(tmp_path: Path) -> None:
    scenario = build_store(tmp_path / "store.db", ticks=1)
    line = _assert_one_line_error(
        cli("ui", str(scenario.path), "--host", "0.0.0.0", "--port", "0", "--no-open")
    )
    assert "refusing to serve on 0.0.0.0" in line and "--allow-remote" in line
    line = _assert_one_line_error(cli("ui", str(tmp_path / "missing.db"), "--no-open"))
    assert "missing.db" in line and "not found" in line
    assert not (tmp_path / "missing.db").exists()
    proc = cli("ui", str(scenario.path), "--port", "70000")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_cli_port_in_use_is_one_line(scenario: Scenario) -> None:
    with running(scenario.path) as srv:
        port = str(srv.port)
        line = _assert_one_line_error(cli("ui", str(scenario.path), "--port", port, "--no-open"))
    assert f"cannot listen on 127.0.0.1:{port}" in line and "--port" in line


def test_make_server_refuses_remote_unless_allowed(scenario: Scenario) -> None:
    with pytest.raises(ui.UiError, match="loopback only"):
        ui.make_server(scenario.path, port=0, host="0.0.0.0")
    server = ui.make_server(scenario.path, port=0, host="0.0.0.0", allow_remote=True)
    try:
        assert server.allow_remote
    finally:
        server.server_close()


def test_serve_warns_about_remote_access(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupt(self: Any, poll_interval: float = 0.5) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ui.DashboardServer, "serve_forever", interrupt)
    assert ui.serve_until_stopped(scenario.path, port=0, host="0.0.0.0", allow_remote=True) == 0
    err = capsys.readouterr().err
    assert "token can read every entry" in err and "0.0.0.0" in err


def test_cli_parsing_does_not_load_the_server() -> None:
    code = (
        "import sys; from darwin_memo.cli import build_parser; build_parser(); "
        "print(sorted(m for m in ('http.server', 'darwin_memo.dashboard.server', "
        "'darwin_memo.dashboard.data') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
    assert ui_cmd.DEFAULT_PORT == ui.DEFAULT_PORT


def test_static_assets_are_package_data() -> None:
    names = {p.name for p in STATIC_DIR.iterdir()}
    assert {"index.html", "app.js", "style.css", "favicon.svg"} <= names
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text("utf-8")
    assert '"dashboard/static/*"' in pyproject


def test_doctor_runs_in_the_background_and_reports_staleness(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "silent.db") as ledger:
        ledger.add("Are cache chunk files safe to delete?", "Yes.")
        for i in range(12):
            ledger.decide(f"what is the colour of the sky number {i}?")
    with running(tmp_path / "silent.db") as srv:
        report = get_json(srv, "/api/doctor?wait=10")
        assert [f["code"] for f in report["findings"]] == ["silent_majority"]
        assert report["findings"][0]["severity"] == "error"
        version = report["as_of"]
        with Ledger.open(tmp_path / "silent.db") as ledger:
            ledger.tick()
        quick = get_json(srv, "/api/doctor?wait=0")
        if quick["as_of"] == version:  # the new diagnosis has not finished yet
            assert quick["stale"] is True and quick["pending"] is True
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            fresh = get_json(srv, "/api/doctor?wait=1")
            if not fresh["stale"]:
                break
            time.sleep(0.2)
        assert fresh["as_of"] != version and fresh["stale"] is False


# -- PostgreSQL stores (the API tests above run on one too: see ``scenario``) -------------


def _url_with_password(cluster: Any, secret: str) -> str:
    """A store URL that carries a password (the throwaway cluster trusts loopback)."""
    from conftest import pg_url

    url = pg_url(cluster)
    return url.replace(f"://{cluster.user}@", f"://{cluster.user}:{secret}@", 1)


def test_a_postgres_url_never_shows_its_password(
    pg_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from darwin_memo.backends.postgres import parse_url

    secret = "s3cret-dashboard-pw"
    url = _url_with_password(pg_cluster, secret)
    scenario = build_store(url, ticks=3)
    shown = parse_url(url)[2]
    routes = ["/", "/api/state", "/api/summary", "/api/series", "/api/entries", "/api/tickets"]
    routes += ["/api/graveyard", "/api/events", f"/api/entry/{scenario.ids['cache']}"]
    with running(url) as srv:  # a real `darwin-memo ui URL`
        summary = get_json(srv, "/api/summary")
        assert summary["store"] == shown and summary["backend"] == "postgres"
        for route in routes:
            status, _, body = fetch(srv, route)
            assert status == 200 and secret.encode() not in body, route
    # The doctor's child process gets the store on stdin: argv is visible to every user.
    started: list[list[str]] = []
    real_popen = subprocess.Popen

    def spy(args: Any, *rest: Any, **kwargs: Any) -> Any:
        started.append([str(a) for a in args])
        return real_popen(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", spy)
    with running(url, in_process=True) as srv:
        deadline = time.monotonic() + 120
        report = get_json(srv, "/api/doctor?wait=10")
        while report["pending"] and time.monotonic() < deadline:
            report = get_json(srv, "/api/doctor?wait=10")
    assert report["error"] is None and report["stale"] is False
    with Ledger.open(url, create=False) as ledger:
        assert report["findings"] == [f.as_dict() for f in doctor(ledger, ledger_events(ledger))]
    assert started and not any(secret in " ".join(args) for args in started)


def test_a_lost_postgres_server_answers_503_then_recovers(pg_cluster: Any) -> None:
    secret = "s3cret-lost-pw"
    url = _url_with_password(pg_cluster, secret)
    scenario = build_store(url, ticks=2)
    with running(url, in_process=True) as srv:
        before = get_json(srv, "/api/summary")
        pg_cluster.stop()
        try:
            for route in ("/api/version", "/api/summary", "/api/entries"):
                status, _, body = fetch(srv, route)
                assert status == 503, (route, body)
                message = json.loads(body)["error"]
                assert "\n" not in message and secret not in message
                # The first request finds the open connection broken; later ones cannot connect.
                assert "lost the PostgreSQL server" in message or "cannot connect" in message
        finally:
            pg_cluster.start()
        assert get_json(srv, "/api/summary")["counts"] == before["counts"]
        proc = cli("ledger", url, "settle", scenario.pending_ticket, "2", "--detail", "back")
        assert json.loads(proc.stdout) == {"settled": True}, proc.stdout
        after = get_json(srv, "/api/summary")  # the reconnected view follows new writes
        assert after["counts"]["pending"] == before["counts"]["pending"] - 1


def test_cli_postgres_errors_are_one_redacted_line(pg_cluster: Any) -> None:
    secret = "s3cret-cli-pw"
    missing = _url_with_password(pg_cluster, secret)  # a store nobody created
    line = _assert_one_line_error(cli("ui", missing, "--port", "0", "--no-open"))
    assert "no such store" in line and secret not in line and "store=" in line
    unreachable = f"postgresql://ann:{secret}@127.0.0.1:1/db?store=x&connect_timeout=2"
    line = _assert_one_line_error(cli("ui", unreachable, "--port", "0", "--no-open"))
    assert "cannot connect" in line and secret not in line
    assert line.startswith("error: postgresql://ann@127.0.0.1:1/db")


def test_a_large_store_lists_no_neighbours_in_a_life_story(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above RELATED_MAX_POPULATION the page does not build the graph while it waits."""
    from darwin_memo.dashboard import data as ui_data
    from darwin_memo.ledger import Ledger

    path = tmp_path / "lessons.db"
    ledger = Ledger.open(path)
    try:
        first = ledger.add("Can old log files be deleted?", "Yes, after seven days.")
        ledger.add("Can old log files be removed?", "Yes, after a week.")
    finally:
        ledger.close()
    view = ui_data.StoreView(path)
    try:
        assert view.entry(first.id)["related"]  # type: ignore[index]
        monkeypatch.setattr(ui_data, "RELATED_MAX_POPULATION", 1)
        fresh = ui_data.StoreView(path)
        try:
            assert fresh.entry(first.id)["related"] == []  # type: ignore[index]
        finally:
            fresh.close()
    finally:
        view.close()
