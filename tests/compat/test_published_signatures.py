"""Signatures as darwin-memo 0.7.1 published them, each called the published way.

Issue 32, item 3: code written against the published package calls these names
with these arguments (positional order and keyword names); ours answers the same
calls. Where we also accept another spelling (the spec's keyword names, the
ledger-based observe readers), that is checked too.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from darwin_memo import observe, ui
from darwin_memo.backends.journal import event_log_path
from darwin_memo.ci import FLAKY_FLIPS, Transitions, diff_runs, quarantined
from darwin_memo.environments import VerifiableQAEnv
from darwin_memo.ledger import Ledger
from darwin_memo.mcp_server import DEFAULT_MEMORY, save_with_retry
from darwin_memo.store import MemoryStore
from darwin_memo.survival import (
    SurvivalConfig,
    SurvivalLoop,
    advance_lifecycle,
    assign_credit,
    is_silent,
)
from darwin_memo.temporal import CONFLICT_HEADER, age_annotation, render_consult
from darwin_memo.types import EntryKind, MemoryEntry, Outcome, Trajectory

CACHE_Q = "Are cache chunk files safe to delete?"
CACHE_A = "Cache chunk files under cache/ are disposable and safe to delete."


def lesson_store(*pairs: tuple[str, str]) -> MemoryStore:
    store = MemoryStore()
    for q, a in pairs:
        store.add(MemoryEntry(q, a))
    return store


# -- types.Trajectory ------------------------------------------------------------------


def test_trajectory_task_is_the_prompt_string() -> None:
    store = lesson_store(
        ("What is the capital of France?", "The capital of France is Paris."),
        ("What colour is the sky on a clear day?", "The sky is blue on a clear day."),
    )
    env = VerifiableQAEnv(
        [("What is the capital of France?", "Paris"), ("What colour is the sky?", "blue")],
        per_cycle=2,
    )
    loop = SurvivalLoop(store, env, config=SurvivalConfig(cycles=2, write_experience=False))
    report = loop.run()
    prompts = {t.prompt for t in env.tasks(0)} | {t.prompt for t in env.tasks(1)}
    assert len(report.trajectories) == 4
    for trajectory in report.trajectories:
        assert isinstance(trajectory.task, str) and trajectory.task in prompts
    paris = [t for t in report.trajectories if "France" in t.task]
    assert paris and all(t.outcome.delta == 1.0 and t.deciding_entry for t in paris)
    # The published constructor, positionally: (cycle, task, answer, decider, supporters, outcome).
    made = Trajectory(3, "free 1 GB?", "delete cache/", "abc", ["def"], Outcome(1.0, "ok"))
    assert (made.cycle, made.task, made.deciding_entry) == (3, "free 1 GB?", "abc")


# -- temporal.render_consult -----------------------------------------------------------


def test_render_consult_takes_entry_score_pairs_as_retrieve_returns_them() -> None:
    store = lesson_store((CACHE_Q, CACHE_A), ("How do I rotate logs?", "Use logrotate weekly."))
    hits = store.retrieve("are cache chunk files safe to delete", k=3)
    assert hits and isinstance(hits[0], tuple) and hits[0][0].answer == CACHE_A
    text = render_consult(hits, store.similarity, 0.55)
    assert text == f"{CACHE_A}\n{age_annotation(hits[0][0])}"
    # Plain entries, as before, give the same text.
    assert render_consult([e for e, _ in hits], store.similarity, 0.55) == text
    assert render_consult([], store.similarity, 0.55) == ""


def test_render_consult_pairs_show_a_conflict_group() -> None:
    old = MemoryEntry("When may old log files be deleted?", "Delete logs after thirty days.")
    old.recorded_ts = "2026-01-01T00:00:00+00:00"
    new = MemoryEntry("When may old log files be deleted?", "Delete logs after seven days.")
    new.recorded_ts = "2026-02-01T00:00:00+00:00"
    store = MemoryStore()
    store.add(old)
    store.add(new)
    text = render_consult([(old, 0.9), (new, 0.8)], store.similarity, 0.55)
    lines = text.splitlines()
    assert lines[0] == CONFLICT_HEADER
    assert lines[1].startswith("- Delete logs after seven days.")  # newest first
    assert lines[2].startswith("- Delete logs after thirty days.")


# -- observe ---------------------------------------------------------------------------


@pytest.fixture
def json_ledger(tmp_path: Path) -> Ledger:
    """A JSON-file ledger with a journal: an add, a settled decision, a silence, ticks."""
    path = tmp_path / "lessons.json"
    with Ledger.open(path) as ledger:
        kept = ledger.add(CACHE_Q, CACHE_A)
        ticket = ledger.decide("are cache chunk files safe to delete")
        assert ticket.deciding_entry == kept.id
        assert ledger.settle(ticket.id, 3.0, "freed 3 GB")
        ledger.decide("an unrelated question about sailing boats")
        ledger.tick()
        ledger.tick()
    return Ledger.open(path)


def test_read_events_takes_the_log_path(json_ledger: Ledger, tmp_path: Path) -> None:
    log = event_log_path(tmp_path / "lessons.json")
    events = observe.read_events(log)
    assert [e["event"] for e in events] == ["add", "decide", "settle", "decide", "tick", "tick"]
    assert observe.read_events(str(log)) == events
    assert events == observe.ledger_events(json_ledger)


def test_top_row_takes_entry_tick_and_store(json_ledger: Ledger) -> None:
    (entry,) = json_ledger.store.alive()
    row = observe.top_row(entry, json_ledger.tick_count, json_ledger.store)
    assert row["id"] == entry.id and row["born_tick"] == 0 and row["age_ticks"] == 2
    assert row["balance"] == round(entry.energy, 3) and row["last_settled_tick"] == 0
    assert row == observe.top(json_ledger)["entries"][0]
    assert observe.top_row(entry, 10, json_ledger.store)["age_ticks"] == 10


def test_economics_takes_events_and_store(json_ledger: Ledger, tmp_path: Path) -> None:
    events = observe.read_events(event_log_path(tmp_path / "lessons.json"))
    econ = observe.economics(events, json_ledger.store)
    assert econ["resource"] == {"delta_total": 3.0, "decides": 2, "silent": 1, "settles": 1}
    credit = round(0.6 * math.tanh(3.0), 6)
    assert econ["energy"]["credited"] == credit and econ["energy"]["net"] == credit
    assert econ["energy"]["upkeep_paid"] == 0.1 and econ["energy"]["upkeep_exact"] is True
    assert econ["population"] == {"alive": 1, "dead": 0}
    assert observe.ledger_economics(json_ledger, events) == econ


def test_audit_digest_takes_events_and_store(tmp_path: Path) -> None:
    path = tmp_path / "audit.json"
    with Ledger.open(path) as ledger:
        good = ledger.add(CACHE_Q, CACHE_A)
        bad = ledger.add("Is the dedupe helper safe to remove?", "Yes, remove it.")
        assert ledger.settle(ledger.decide("cache chunk files safe to delete").id, 2.0)
        assert ledger.settle(ledger.decide("dedupe helper safe to remove").id, -9.0)
        assert ledger.forget(bad.id) == "buried"
    events = observe.read_events(event_log_path(path))
    store = MemoryStore.load(path)
    digest = observe.audit_digest(events, store)
    assert [g["entry"] for g in digest["top_gainers"]] == [good.id]
    assert digest["top_gainers"][0]["status"] == "living"
    assert digest["top_gainers"][0]["question"] == CACHE_Q
    (loser,) = digest["top_losers"]
    assert (loser["entry"], loser["status"], loser["question"]) == (bad.id, "dead", bad.question)
    assert digest["culled"] == {"count": 1, "entries": [bad.id]}


def test_audit_digest_names_a_merged_entry_from_the_store() -> None:
    store = MemoryStore()
    heir = store.add(MemoryEntry("q", "a", kind=EntryKind.CONSOLIDATED, lineage=["aaaaaaaaaaaa"]))
    events = [
        {"event": "settle", "delta": 1.0, "applied": [{"entry": "aaaaaaaaaaaa", "credit": 0.4}]},
        {"event": "settle", "delta": 1.0, "applied": [{"entry": heir.id, "credit": 0.2}]},
    ]
    digest = observe.audit_digest(events, store)
    statuses = {g["entry"]: g["status"] for g in digest["top_gainers"]}
    assert statuses == {"aaaaaaaaaaaa": "merged", heir.id: "living"}


# -- ui.serve ----------------------------------------------------------------------------


def test_ui_serve_returns_the_running_server(json_ledger: Ledger, tmp_path: Path) -> None:
    server = ui.serve(tmp_path / "lessons.json", 0)  # (memory, port), host defaults to loopback
    try:
        assert isinstance(server, ui.DashboardServer)
        assert server.server_address[0] == "127.0.0.1" and server.port > 0
        entries = urllib.request.Request(  # the API needs the per-run token (issue 33)
            server.url + "/api/entries", headers={"X-Darwin-Memo-Token": server.token}
        )
        with urllib.request.urlopen(entries, timeout=30) as reply:
            body = json.loads(reply.read())
        assert [row["id"] for row in body["entries"]] == [e.id for e in json_ledger.store.alive()]
    finally:
        server.server_close()
    assert server.thread is not None and not server.thread.is_alive()
    with pytest.raises(OSError):
        urllib.request.urlopen(server.url + "/api/version", timeout=5)


def test_ui_serve_is_a_context_manager_and_refuses_remote_hosts(
    json_ledger: Ledger, tmp_path: Path
) -> None:
    with ui.serve(tmp_path / "lessons.json", port=0, host="localhost") as server:
        with urllib.request.urlopen(server.page_url, timeout=30) as reply:
            assert reply.status == 200
        thread = server.thread
    assert thread is not None and not thread.is_alive()
    with pytest.raises(ui.UiError, match="loopback only"):
        ui.serve(tmp_path / "lessons.json", 0, "0.0.0.0")


# -- mcp_server --------------------------------------------------------------------------


def test_mcp_default_memory_is_the_published_path() -> None:
    assert DEFAULT_MEMORY == "~/.darwin-memo/memory.json"


def test_save_with_retry_writes_the_ledger_file(tmp_path: Path) -> None:
    ledger = Ledger(MemoryStore())
    entry = ledger.add(CACHE_Q, CACHE_A)
    out = tmp_path / "saved.json"
    assert save_with_retry(ledger, out) is None
    again = Ledger.load(out)
    assert [e.id for e in again.store.alive()] == [entry.id]
    # Another process holds the lock for a moment: the save waits its turn, then lands.
    code = (
        "import sys, time; from darwin_memo.backends.jsonfile import store_lock\n"
        "with store_lock(sys.argv[1]):\n    print('held', flush=True); time.sleep(0.5)"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE, text=True
    ) as holder:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        second = ledger.add("How do I rotate logs?", "Use logrotate weekly.")
        started = time.monotonic()
        save_with_retry(ledger, out, retries=5, backoff=0.05)
        assert time.monotonic() - started >= 0.2
        assert holder.wait(30) == 0
    assert {e.id for e in Ledger.load(out).store.alive()} == {entry.id, second.id}


def test_save_with_retry_does_not_retry_other_errors(tmp_path: Path) -> None:
    ledger = Ledger(MemoryStore())
    with pytest.raises(FileNotFoundError):
        save_with_retry(ledger, tmp_path / "no-such-dir" / "m.json", retries=3, backoff=5.0)


def test_mcp_build_server_takes_path_and_resource_scale(tmp_path: Path) -> None:
    pytest.importorskip("mcp", reason="build_server needs the mcp extra")
    import anyio
    from mcp import Client

    from darwin_memo.mcp_server import build_server

    path = tmp_path / "sub" / "lessons.json"
    server = build_server(str(path), 2.0)
    ledger = server.ledger  # type: ignore[attr-defined]
    try:
        assert ledger.resource_scale == 2.0

        async def session() -> tuple[set[str], Any]:
            async with Client(server) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                added = await client.call_tool(
                    "memory_add", {"question": CACHE_Q, "answer": CACHE_A}
                )
                return names, added

        names, added = anyio.run(session)
        assert "memory_add" in names and "memory_audit" in names
        assert not added.is_error
    finally:
        ledger.close()
    # Each call is its own transaction: the store on disk has the lesson already.
    assert [e.question for e in Ledger.load(path).store.alive()] == [CACHE_Q]


# -- ci ----------------------------------------------------------------------------------


def test_transitions_delta_is_a_method_with_exclude() -> None:
    base = {"t::a": True, "t::b": False, "t::c": True, "t::d": False}
    head = {"t::a": False, "t::b": True, "t::c": True, "t::d": True, "t::e": True}
    moves = diff_runs(base, head)
    assert isinstance(moves, Transitions)
    assert moves.delta() == 2.0  # b and d fixed, e added passing, a broke
    assert moves.delta(exclude=None) == 2.0
    assert moves.delta(exclude={"t::d"}) == 1.0
    assert moves.delta(["t::a", "t::e"]) == 2.0
    assert diff_runs(base, head, exclude={"t::d"}).delta() == moves.delta(exclude={"t::d"})


def test_quarantined_takes_flip_threshold() -> None:
    history = {"flaky": [True, False, True, False], "steady": [True, True, True, True]}
    assert quarantined(history, flip_threshold=3) == {"flaky"}
    assert quarantined(history, flip_threshold=4) == set()
    assert quarantined(history) == {"flaky"} and FLAKY_FLIPS == 3


# -- survival keyword names ------------------------------------------------------------


def test_assign_credit_and_advance_lifecycle_with_published_keywords() -> None:
    store = MemoryStore()
    decider = store.add(MemoryEntry("q1", "a1", juvenile=1))
    supporter = store.add(MemoryEntry("q2", "a2", probation=1))
    applied = assign_credit(
        store,
        deciding_entry=decider.id,
        supporting_entries=[supporter.id],
        delta=1.0,
        resource_scale=1.0,
        config=SurvivalConfig(),
        cycle=4,
    )
    credit = 0.6 * math.tanh(1.0)
    assert applied == [(decider.id, credit * 0.25), (supporter.id, credit * 0.25)]
    events = advance_lifecycle(store, applied, delta=1.0, deciding_entry=decider.id)
    assert events == [(decider.id, "admitted"), (supporter.id, "graduated")]
    assert decider.last_used_cycle == 4 and supporter.uses == 1


def test_credit_functions_accept_the_spec_keywords_too() -> None:
    store = MemoryStore()
    juvenile = store.add(MemoryEntry("q1", "a1", juvenile=2))
    applied = assign_credit(
        store, deciding=juvenile.id, supporting=[], delta=-1.0, resource_scale=1.0,
        config=SurvivalConfig(), cycle=0,
    )  # fmt: skip
    assert applied == [(juvenile.id, 0.6 * math.tanh(-1.0) * 0.25)]
    assert advance_lifecycle(store, applied, -1.0, deciding=juvenile.id) == [
        (juvenile.id, "admission_denied")
    ]
    assert juvenile.energy == 0.0
    with pytest.raises(TypeError, match="twice"):
        assign_credit(
            store, deciding_entry=juvenile.id, deciding=juvenile.id, supporting_entries=[],
            delta=1.0, resource_scale=1.0, config=SurvivalConfig(), cycle=0,
        )  # fmt: skip


def test_is_silent_with_published_and_spec_keywords() -> None:
    assert is_silent("", deciding_entry="x", supporting_entries=[])
    assert is_silent("text", deciding_entry=None, supporting_entries=[])
    assert not is_silent("text", deciding_entry=None, supporting_entries=["y"])
    assert not is_silent(text="text", deciding="x", supporting=[])


# -- ledger history ----------------------------------------------------------------------


def test_buried_notes_say_via_settle_or_forget(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "notes.json") as ledger:
        forgotten = ledger.add("How do I rotate logs?", "Use logrotate weekly.")
        assert ledger.forget(forgotten.id) == "buried"
        doomed = ledger.add("Is the dedupe helper safe to remove?", "Yes, remove it.")
        for _ in range(2):
            assert ledger.settle(ledger.decide("dedupe helper safe to remove").id, -9.0)
        assert ledger.store.get(doomed.id) is None
    ledger = Ledger.load(tmp_path / "notes.json")  # as saved, in the published layout
    (note,) = [n for n in ledger.history(forgotten.id) if n["event"] == "buried"]
    assert (note["via"], note["cause"]) == ("forget", "forgotten")
    assert note["text"].endswith("by forget")
    (note,) = [n for n in ledger.history(doomed.id) if n["event"] == "buried"]
    assert (note["via"], note["cause"]) == ("settle", "executed")
    assert note["text"].endswith("on settle")


# -- stats -------------------------------------------------------------------------------


def _stats(path: Path) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "DARWIN_MEMO_DEBUG"}
    proc = subprocess.run(
        [sys.executable, "-m", "darwin_memo", "stats", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    return proc.stdout.splitlines()


def test_stats_prints_the_event_log_lines(json_ledger: Ledger, tmp_path: Path) -> None:
    lines = _stats(tmp_path / "lessons.json")
    assert lines[:2] == [
        "alive: 1  graveyard: 0",
        f"total energy: {1.0 + 0.6 * math.tanh(3) - 0.1:.3f}",
    ]
    assert lines[2] == "resource delta: +3 over 2 decisions (1 silent, 1 settled)"
    assert lines[3] == (
        f"energy net: {0.6 * math.tanh(3):+.3f} from settlements against 0.100 upkeep paid"
    )
    assert lines[4] == "energy share by kind:"


def test_stats_without_an_event_log_prints_no_economics(
    json_ledger: Ledger, tmp_path: Path
) -> None:
    copy = tmp_path / "copy.json"
    copy.write_bytes((tmp_path / "lessons.json").read_bytes())
    lines = _stats(copy)
    assert not any(line.startswith(("resource delta", "energy net")) for line in lines)
    assert lines[2] == "energy share by kind:"


def test_run_suite_takes_the_published_keywords() -> None:
    from darwin_memo.testsuite_env import run_suite, run_suite_detail

    app = "def double(x):\n    return 2 * x\n"
    tests = (
        "from app import double\n"
        "def test_two():\n    assert double(1) == 2\n"
        "def test_three():\n    assert double(1) == 3\n"
    )
    assert run_suite(app_source=app, test_source=tests) == 1
    assert run_suite_detail(app_source=app, test_source=tests) == frozenset({"test_two"})
    assert run_suite(app_src=app, test_src=tests) == 1  # the spec's spelling
    with pytest.raises(TypeError, match="twice"):
        run_suite(app_src=app, app_source=app, test_source=tests)


def test_note_text_takes_the_published_keyword() -> None:
    from darwin_memo.ledger import note_text

    assert note_text(event={"text": "credited +0.3"}) == "credited +0.3"
    assert note_text(note="an old bare note") == "an old bare note"


def test_mcp_build_server_takes_memory_path_by_keyword(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from darwin_memo.mcp_server import build_server

    path = tmp_path / "memory.json"
    server = build_server(memory_path=str(path), resource_scale=2.0)
    try:
        assert server.ledger.resource_scale == 2.0  # type: ignore[attr-defined]
    finally:
        server.ledger.close()  # type: ignore[attr-defined]


def test_a_client_whose_system_is_keyword_only_works() -> None:
    """Clients written for the published package may declare ``complete(prompt, *, system)``."""
    from darwin_memo import Document, QueryProtocol, ReflectionEncoder

    class KeywordClient:
        def __init__(self) -> None:
            self.systems: list[str] = []

        def complete(self, prompt: str, *, system: str = "") -> str:
            self.systems.append(system)
            if "JSON" in prompt or "json" in prompt:
                return '[{"question": "Can old logs go?", "answer": "Yes, after 7 days."}]'
            return "Yes, after seven days.\nSOURCES: [1]"

    client = KeywordClient()
    store = MemoryStore()
    store.add(MemoryEntry("Can old log files be deleted?", "Old log files may be deleted."))
    answer = QueryProtocol(store, client).answer("Can old log files be deleted?")
    assert answer.deciding_entry is not None and answer.attribution == "cited"
    ReflectionEncoder(client).encode([Document("runbook", "Old logs may go after 7 days.")])
    assert client.systems and all(client.systems)  # every call passed its system text


def test_an_embedder_that_returns_none_for_an_entry_is_passed_over() -> None:
    from darwin_memo import EmbeddingRetriever

    def embed(text: str) -> list[float] | None:
        return None if "broken" in text else [1.0, 0.0]

    retriever = EmbeddingRetriever(embed)  # type: ignore[arg-type]
    store = MemoryStore(retriever=retriever)
    good = store.add(MemoryEntry("old logs", "may be deleted"))
    store.add(MemoryEntry("broken entry", "has no vector"))
    assert retriever.warm(store.alive()) == 1
    assert [e.id for e, _ in store.retrieve("old logs")] == [good.id]
