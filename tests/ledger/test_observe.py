"""Read-only views (top, why, audit, timeline, economics, doctor) on real ledgers.

Every store is built by driving a ``Ledger`` on both durable backends (SQLite
and the published JSON file with its ``.events.jsonl`` journal) through add,
decide, settle, forget and tick.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from darwin_memo.economy.config import SurvivalConfig
from darwin_memo.ledger import Ledger
from darwin_memo.observe import (
    audit_digest,
    doctor,
    economics,
    entry_life,
    filter_events,
    ledger_events,
    read_events,
    timeline,
    top,
    top_row,
)
from darwin_memo.records.entry import EntryKind, MemoryEntry
from darwin_memo.sim.diagnose import MIN_DECIDES, MIN_QUIET_TICKS, MIN_SETTLES, STALE_TICKET_TICKS
from darwin_memo.store import MemoryStore

TOP_ROW_KEYS = [
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
]
WHY_KEYS = [
    "id",
    "status",
    "question",
    "answer",
    "kind",
    "sources",
    "balance",
    "uses",
    "ticks_to_starvation",
    "pinned",
    "probation",
    "juvenile",
    "birth",
    "settlements",
    "merged_into",
    "cause_of_death",
    "events",
]
AUDIT_KEYS = [
    "events",
    "window",
    "decides",
    "settles",
    "adds",
    "forgets",
    "ticks",
    "merges",
    "expired",
    "energy",
    "culled",
    "top_gainers",
    "top_losers",
]
#: Distinct words, so each lesson is found by exactly its own query.
WORDS = ["postgres", "redis", "nginx", "kafka", "memcached", "rabbitmq", "zookeeper", "etcd"]


def lesson(word: str) -> tuple[str, str]:
    return (
        f"Is the {word} daemon safe to restart during business hours?",
        f"The {word} daemon restarts cleanly; {word} clients reconnect on their own.",
    )


def query(word: str) -> str:
    return f"can I restart the {word} daemon now"


@pytest.fixture(params=["s.db", "s.json"])
def store_path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return tmp_path / str(request.param)


@pytest.fixture
def ledger(store_path: Path) -> Iterator[Ledger]:
    with Ledger.open(store_path) as led:
        yield led


def add(led: Ledger, word: str, source: str = "agent") -> MemoryEntry:
    q, a = lesson(word)
    return led.add(q, a, source=source)


def decided(led: Ledger, word: str) -> str:
    """Decide on ``word``'s query; the ticket must be pending (memory spoke)."""
    ticket = led.decide(query(word))
    assert ticket.provenance, f"memory was silent on {word!r}"
    return ticket.id


def ticks(led: Ledger, n: int, **kw: Any) -> None:
    for _ in range(n):
        led.tick(**kw)


def codes(findings: list[Any]) -> list[str]:
    return [f.code for f in findings]


def applied_credits(events: list[dict[str, Any]]) -> list[float]:
    return [a["credit"] for e in events if e["event"] == "settle" for a in e["applied"]]


# -- top -----------------------------------------------------------------------------


def test_top_rows_have_the_published_shape_and_numbers(ledger: Ledger) -> None:
    a = add(ledger, "postgres")
    b = add(ledger, "redis", source="runbook")
    assert ledger.settle(decided(ledger, "postgres"), 3.0, "run 42: 3 tests fixed")
    ticks(ledger, 2)
    out = top(ledger)
    assert list(out) == ["tick", "alive", "entries"]
    assert out["tick"] == 2 and out["alive"] == 2
    first, second = out["entries"]
    assert list(first) == TOP_ROW_KEYS
    expected = 1.0 + 0.6 * math.tanh(3.0) - 2 * 0.05
    assert first == {
        "id": a.id,
        "balance": round(expected, 3),
        "kind": "experience",
        "sources": ["agent"],
        "born_tick": 0,
        "age_ticks": 2,
        "last_settled_tick": 0,
        "uses": 1,
        "pinned": False,
        "probation": 0,
        "question": a.question,
        "ticks_to_starvation": round(expected / 0.05, 1),
    }
    assert second["id"] == b.id and second["last_settled_tick"] is None
    assert second["uses"] == 0 and second["balance"] == 0.9 and second["sources"] == ["runbook"]
    assert second["ticks_to_starvation"] == 18.0
    json.dumps(out)  # plain JSON all the way down


def test_top_orders_by_balance_then_id_and_honours_limit(ledger: Ledger) -> None:
    entries = [add(ledger, w) for w in WORDS[:4]]
    assert ledger.settle(decided(ledger, "kafka"), 1.0)
    out = top(ledger, limit=2)
    assert out["alive"] == 4 and len(out["entries"]) == 2
    assert out["entries"][0]["id"] == entries[3].id
    tied = sorted(e.id for e in entries[:3])
    assert out["entries"][1]["id"] == tied[0]
    assert top(ledger, limit=0)["entries"] == []


def test_top_shows_pins_and_probation(ledger: Ledger) -> None:
    mine = add(ledger, "postgres")
    assert ledger.pin(mine.id)
    foreign = MemoryEntry(*lesson("redis"), kind=EntryKind.EXPLICIT, sources=["wiki"])
    (imported,) = ledger.import_entries([foreign], source="team.json")
    rows = {r["id"]: r for r in top(ledger)["entries"]}
    assert rows[mine.id]["pinned"] is True and rows[mine.id]["ticks_to_starvation"] is None
    assert rows[imported.id]["probation"] == 3 and rows[imported.id]["kind"] == "explicit"
    assert top_row(imported, ledger.tick_count, ledger.store) == rows[imported.id]


def test_top_of_an_empty_store(ledger: Ledger) -> None:
    assert top(ledger) == {"tick": 0, "alive": 0, "entries": []}


# -- why -----------------------------------------------------------------------------


def test_why_living_entry_tells_birth_and_settlements(ledger: Ledger, store_path: Path) -> None:
    e = add(ledger, "postgres", source="runbook")
    assert ledger.settle(decided(ledger, "postgres"), 2.0, "deploy ok")
    ledger.tick()
    assert ledger.settle(decided(ledger, "postgres"), -1.0, "deploy broke")
    life = entry_life(ledger, e.id)
    assert life is not None and list(life) == WHY_KEYS
    assert life["status"] == "living" and life["cause_of_death"] is None
    assert life["merged_into"] is None
    assert life["birth"]["tick"] == 0 and life["birth"]["source"] == "runbook"
    assert life["birth"]["stake"] == 1.0 and isinstance(life["birth"]["ts"], str)
    assert [s["delta"] for s in life["settlements"]] == [2.0, -1.0]
    assert [s["credit"] for s in life["settlements"]] == [
        round(0.6 * math.tanh(2.0), 6),
        round(0.6 * math.tanh(-1.0), 6),
    ]
    assert [n["event"] for n in life["events"]] == ["birth", "settle", "settle"]
    assert life["uses"] == 2 and life["question"] == e.question
    json.dumps(life)
    ledger.close()
    with Ledger.open(store_path) as again:  # the notes are durable on both backends
        assert entry_life(again, e.id) == life


def test_why_forgotten_starved_and_executed(ledger: Ledger) -> None:
    forgotten = add(ledger, "postgres")
    assert ledger.forget(forgotten.id) == "buried"
    executed = add(ledger, "redis")
    assert ledger.settle(decided(ledger, "redis"), -3.0, "outage")
    assert ledger.settle(decided(ledger, "redis"), -3.0, "outage again")
    starved = add(ledger, "nginx")
    ticks(ledger, 20)

    life = entry_life(ledger, forgotten.id)
    assert life is not None and life["status"] == "dead"
    assert life["cause_of_death"] == "forgotten" and life["balance"] == 0.0

    life = entry_life(ledger, executed.id)
    assert life is not None and life["status"] == "dead"
    assert life["cause_of_death"] == "executed" and len(life["settlements"]) == 2
    assert life["events"][-1]["event"] == "buried"

    life = entry_life(ledger, starved.id)
    assert life is not None and life["status"] == "dead"
    assert life["cause_of_death"] == "starved" and life["settlements"] == []
    assert life["ticks_to_starvation"] == 0.0


def test_why_merged_member_names_its_heir(ledger: Ledger) -> None:
    first = add(ledger, "postgres")
    second = add(ledger, "postgres", source="runbook")
    ticks(ledger, 5)  # consolidation every 5 ticks merges the twins
    heir = ledger.heir_of(first.id)
    assert heir is not None and sorted(heir.lineage) == sorted([first.id, second.id])
    life = entry_life(ledger, first.id)
    assert life is not None
    assert life["status"] == "merged" and life["merged_into"] == heir.id
    assert life["cause_of_death"] == "merged"
    heir_life = entry_life(ledger, heir.id)
    assert heir_life is not None and heir_life["status"] == "living"
    assert heir_life["kind"] == "consolidated" and heir_life["birth"]["source"] == "merge"
    assert heir_life["birth"]["tick"] == 5
    audit = audit_digest(ledger_events(ledger))
    assert audit["merges"] == 1


def test_why_knows_an_id_only_through_an_heirs_lineage() -> None:
    led = Ledger(MemoryStore())
    heir = led.store.add(
        MemoryEntry("q?", "a.", kind=EntryKind.CONSOLIDATED, lineage=["ghost", "other"])
    )
    life = entry_life(led, "ghost")
    assert life is not None and list(life) == WHY_KEYS
    assert life["status"] == "merged" and life["merged_into"] == heir.id
    assert life["cause_of_death"] == "merged" and life["events"] == []
    assert entry_life(led, "nobody") is None


def test_why_reads_old_string_notes() -> None:
    led = Ledger(MemoryStore())
    e = led.store.add(MemoryEntry("q?", "a.", energy=0.0, sources=["doc"]))
    led.store.bury(e.id)
    led.apply_ledger_block(
        {"history": {e.id: ["born at tick 0", "died at tick 20 (starved: never earned)"]}}
    )
    life = entry_life(led, e.id)
    assert life is not None
    assert life["cause_of_death"] == "starved"
    assert life["events"][1] == {"text": "died at tick 20 (starved: never earned)"}
    assert life["birth"] == {"tick": 0, "ts": e.recorded_ts, "source": "doc", "stake": None}


def test_why_unknown_id_is_none(ledger: Ledger) -> None:
    add(ledger, "postgres")
    assert entry_life(ledger, "000000000000") is None


# -- the journal ---------------------------------------------------------------------


def test_filter_events_since_then_last() -> None:
    events = [
        {"event": "add", "tick": 0, "ts": "2026-01-01T00:00:00+00:00"},
        {"event": "decide", "tick": 0},  # no ts: outside any --since window
        {"event": "tick", "tick": 1, "ts": "2026-01-02T00:00:00+00:00"},
        {"event": "tick", "tick": 2, "ts": "2026-01-03T00:00:00+00:00"},
    ]
    assert filter_events(events) == events
    assert filter_events(events, since="2026-01-02") == events[2:]
    assert filter_events(events, last=2) == events[2:]
    assert filter_events(events, since="2026-01-01", last=1) == events[3:]
    assert filter_events(events, since="", last=0) == events
    assert filter_events(events, since="2027") == []


def test_ledger_events_is_the_journal(ledger: Ledger, store_path: Path) -> None:
    add(ledger, "postgres")
    ledger.tick()
    kinds = [e["event"] for e in ledger_events(ledger)]
    assert kinds == ["add", "tick"]
    if store_path.suffix == ".json":  # the journal is a file: read_events reads it by path
        log = store_path.with_name(store_path.stem + ".events.jsonl")
        assert read_events(log) == ledger_events(ledger)


def test_read_events_reads_rotations_oldest_first_and_skips_junk(tmp_path: Path) -> None:
    log = tmp_path / "m.events.jsonl"
    (tmp_path / "m.events.jsonl.2").write_text('{"event": "add", "n": 1}\n')
    (tmp_path / "m.events.jsonl.1").write_text('{"event": "tick", "n": 2}\nnot json\n[1]\n')
    log.write_text('{"event": "settle", "n": 3}\n')
    assert [e["n"] for e in read_events(log)] == [1, 2, 3]
    assert read_events(str(tmp_path / "missing.events.jsonl")) == []


def test_audit_digest_counts_and_energy(ledger: Ledger) -> None:
    a = add(ledger, "postgres")
    b = add(ledger, "redis")
    c = add(ledger, "nginx")
    assert ledger.settle(decided(ledger, "postgres"), 3.0, "fixed 3")
    assert ledger.settle(decided(ledger, "redis"), -2.0, "broke 2")
    pending = decided(ledger, "nginx")
    assert ledger.abandon(pending)  # lands at delta 0
    assert ledger.decide("an unrelated question about sailing boats").provenance == []
    assert not ledger.settle(pending, 1.0)  # already settled: dropped
    assert not ledger.settle("feedfacecafe", 1.0)  # unknown: dropped
    escrow = decided(ledger, "nginx")
    assert ledger.forget(c.id) == "escrowed"
    assert ledger.pin(a.id) and ledger.forget(a.id) == "pinned"
    assert ledger.settle(escrow, 0.0)
    assert ledger.forget(c.id) == "buried"
    ticks(ledger, 2)

    events = ledger_events(ledger)
    digest = audit_digest(events, ledger.store)
    assert list(digest) == AUDIT_KEYS
    assert digest["events"] == len(events)
    assert digest["window"]["first_tick"] == 0 and digest["window"]["last_tick"] == 2
    assert digest["window"]["first_ts"] == events[0]["ts"]
    assert digest["window"]["last_ts"] == events[-1]["ts"]
    assert digest["decides"] == {"total": 5, "silent": 1}
    assert digest["settles"] == {"landed": 4, "dropped": 2, "delta_total": 1.0, "untracked": 0}
    assert digest["adds"] == 3
    assert digest["forgets"] == {"buried": 1, "refused": 2}
    assert digest["ticks"] == 2 and digest["merges"] == 0 and digest["expired"] == 0

    credits = applied_credits(events)
    credited = math.fsum(x for x in credits if x > 0)
    debited = -math.fsum(x for x in credits if x < 0)
    assert digest["energy"] == {
        "credited": round(credited, 6),
        "debited": round(debited, 6),
        "net": round(credited - debited, 6),
    }
    assert digest["energy"]["credited"] == round(0.6 * math.tanh(3.0), 6)
    assert digest["culled"] == {"count": 1, "entries": [c.id]}
    assert digest["top_gainers"] == [
        {"entry": a.id, "net": round(0.6 * math.tanh(3.0), 6), "question": a.question,
         "status": "living"}
    ]  # fmt: skip
    assert digest["top_losers"] == [
        {"entry": b.id, "net": round(0.6 * math.tanh(-2.0), 6), "question": b.question,
         "status": "living"}
    ]  # fmt: skip
    # Without the ledger, questions and statuses come from the window itself.
    assert audit_digest(events)["top_gainers"] == digest["top_gainers"]
    json.dumps(digest)


def test_audit_digest_of_a_window(ledger: Ledger) -> None:
    add(ledger, "postgres")
    assert ledger.settle(decided(ledger, "postgres"), 1.0)
    ticks(ledger, 3)
    events = ledger_events(ledger)
    digest = audit_digest(filter_events(events, last=2))
    assert digest["events"] == 2 and digest["ticks"] == 2
    assert digest["window"]["first_tick"] == 2 and digest["window"]["last_tick"] == 3
    assert digest["energy"] == {"credited": 0.0, "debited": 0.0, "net": 0.0}
    empty = audit_digest([])
    assert empty["events"] == 0 and empty["window"] == {
        "first_ts": None,
        "last_ts": None,
        "first_tick": None,
        "last_tick": None,
    }


def test_audit_movers_are_five_each_and_culled_status(ledger: Ledger) -> None:
    entries = {w: add(ledger, w) for w in WORDS[:7]}
    for i, w in enumerate(WORDS[:7]):
        assert ledger.settle(decided(ledger, w), float(i + 1))
    doomed = add(ledger, "etcd")
    assert ledger.settle(decided(ledger, "etcd"), -5.0)
    assert ledger.settle(decided(ledger, "etcd"), -5.0)
    digest = audit_digest(ledger_events(ledger), ledger.store)
    gainers = digest["top_gainers"]
    assert len(gainers) == 5
    assert [g["entry"] for g in gainers] == [entries[w].id for w in reversed(WORDS[2:7])]
    assert [g["net"] for g in gainers] == sorted((g["net"] for g in gainers), reverse=True)
    (loser,) = digest["top_losers"]
    assert loser["entry"] == doomed.id and loser["status"] == "dead"
    assert loser["net"] == round(2 * 0.6 * math.tanh(-5.0), 6)
    assert digest["culled"]["entries"] == [doomed.id]
    assert audit_digest(ledger_events(ledger))["top_losers"] == [loser]


def test_audit_counts_untracked_settles_from_older_writers() -> None:
    events = [
        {"event": "settle", "tick": 0, "ts": "t0", "ticket": "a", "delta": 2.0, "detail": ""},
        {
            "event": "settle",
            "tick": 0,
            "ts": "t1",
            "ticket": "b",
            "delta": 1.0,
            "detail": "",
            "applied": [{"entry": "x", "credit": 0.1234567}, {"entry": "y", "credit": -0.01}],
            "buried": [],
        },
    ]
    digest = audit_digest(events)
    assert digest["settles"] == {"landed": 2, "dropped": 0, "delta_total": 3.0, "untracked": 1}
    assert digest["energy"] == {"credited": 0.123457, "debited": 0.01, "net": 0.113457}
    assert digest["top_gainers"][0]["question"] is None


# -- timeline and economics ----------------------------------------------------------


def test_timeline_rows_and_open_tail(ledger: Ledger) -> None:
    add(ledger, "postgres")
    add(ledger, "redis")
    assert ledger.settle(decided(ledger, "postgres"), 2.0)
    assert ledger.settle(decided(ledger, "redis"), -0.5)
    ledger.tick()
    ledger.tick()
    assert ledger.settle(decided(ledger, "postgres"), 1.5)
    rows = timeline(ledger_events(ledger))
    assert [r["tick"] for r in rows] == [1, 2, 2]
    assert list(rows[0]) == [
        "tick",
        "population",
        "total_energy",
        "deaths",
        "merges",
        "pending",
        "delta",
    ]
    assert rows[0]["delta"] == 1.5 and rows[1]["delta"] == 0.0
    assert rows[0]["population"] == 2 and rows[0]["pending"] == 0
    assert rows[2]["open"] is True and rows[2]["delta"] == 1.5
    assert rows[2]["population"] is None and rows[2]["total_energy"] is None
    ledger.tick()
    assert "open" not in timeline(ledger_events(ledger))[-1]


def test_economics_exact_upkeep(ledger: Ledger) -> None:
    add(ledger, "postgres")
    pinned = add(ledger, "redis")
    assert ledger.pin(pinned.id)
    assert ledger.settle(decided(ledger, "postgres"), 1.0)
    ledger.decide("nothing about sailing boats here")
    ticks(ledger, 25)  # the pinned entry floors at 0, so upkeep is less than 2 x 25 x 0.05
    events = ledger_events(ledger)
    econ = economics(events, ledger.store)
    assert list(econ) == ["resource", "energy", "population"]
    assert econ["resource"] == {"delta_total": 1.0, "decides": 2, "silent": 1, "settles": 1}
    upkeep = math.fsum(e["upkeep_charged"] for e in events if e["event"] == "tick")
    credited = round(math.fsum(applied_credits(events)), 6)
    assert econ["energy"] == {
        "credited": credited,
        "debited": 0.0,
        "net": credited,
        "upkeep_paid": round(upkeep, 6),
        "upkeep_exact": True,
        "upkeep_caveat": None,
    }
    assert econ["energy"]["upkeep_paid"] == 2.25  # 25 ticks on the settled one + 20 pinned
    assert econ["population"] == {"alive": 2, "dead": 0}


def test_economics_estimates_upkeep_for_old_tick_records(ledger: Ledger) -> None:
    add(ledger, "postgres")
    ticks(ledger, 2)
    events = ledger_events(ledger)
    old = [{k: v for k, v in e.items() if k != "upkeep_charged"} for e in events]
    econ = economics(old, ledger.store)
    assert econ["energy"]["upkeep_exact"] is False
    assert econ["energy"]["upkeep_paid"] == round(2 * 1 * 0.05, 6)
    assert "estimated" in econ["energy"]["upkeep_caveat"]


# -- doctor --------------------------------------------------------------------------


def test_doctor_is_clean_on_a_healthy_store(ledger: Ledger) -> None:
    for w in WORDS[:3]:
        add(ledger, w)
    for _ in range(4):
        for w in WORDS[:3]:
            assert ledger.settle(decided(ledger, w), 1.0, "measured")
        ledger.tick()
    assert doctor(ledger, ledger_events(ledger)) == []


def test_doctor_silent_majority(ledger: Ledger) -> None:
    add(ledger, "postgres")
    for i in range(MIN_DECIDES):
        assert ledger.decide(f"how do I tune sailboat rigging number {i}").provenance == []
    findings = doctor(ledger, ledger_events(ledger))
    assert codes(findings) == ["silent_majority"]
    f = findings[0]
    assert f.severity == "error" and "10 of 10" in f.summary
    assert f.fix and f.evidence
    assert set(f.as_dict()) == {"code", "severity", "summary", "evidence", "fix"}


def test_doctor_env_never_paid(ledger: Ledger) -> None:
    for w in WORDS[:MIN_SETTLES]:
        add(ledger, w)
    for w in WORDS[:MIN_SETTLES]:
        assert ledger.settle(decided(ledger, w), 0.0, "no outcome read")
    findings = doctor(ledger, ledger_events(ledger))
    assert codes(findings) == ["env_never_paid"]
    assert findings[0].severity == "error"


def test_doctor_env_never_paid_ignores_expiry_settles(ledger: Ledger) -> None:
    for w in WORDS[:MIN_SETTLES]:
        add(ledger, w)
        decided(ledger, w)
    ledger.tick(expire_after=0)  # every ticket expires: settles at delta 0, "expired"
    events = ledger_events(ledger)
    expiries = [e for e in events if e["event"] == "settle"]
    assert len(expiries) == MIN_SETTLES and all(e.get("expired") for e in expiries)
    assert "env_never_paid" not in codes(doctor(ledger, events))


def test_doctor_starvation_cliff(ledger: Ledger) -> None:
    ledger.add("Which port does the admin console use?", "Port 8443.")
    ledger.add("Who approves schema migrations?", "The data platform on-call engineer.")
    ledger.add("Where are nightly backups kept?", "In the cold-storage bucket, for 35 days.")
    ticks(ledger, 20)  # nothing similar enough to merge: all three starve together
    assert len(ledger.store) == 0 and ledger.store.dead_count() == 3
    findings = doctor(ledger, ledger_events(ledger))
    assert codes(findings) == ["starvation_cliff"]
    assert findings[0].severity == "error" and "3 of 3" in findings[0].summary


def test_doctor_ticking_without_evidence(ledger: Ledger) -> None:
    add(ledger, "postgres")
    assert ledger.settle(decided(ledger, "postgres"), 1.0)
    # Balance 1 + 0.457 = 1.457: after T ticks the runway is 29.1 - T, so the quiet
    # spell reaches the runway at T = 15 (and 15 >= MIN_QUIET_TICKS).
    ticks(ledger, 14)
    assert doctor(ledger, ledger_events(ledger)) == []
    ledger.tick()
    findings = doctor(ledger, ledger_events(ledger))
    assert codes(findings) == ["ticking_without_evidence"]
    assert findings[0].severity == "warn" and "15 ticks" in findings[0].summary
    assert MIN_QUIET_TICKS <= 15


def test_doctor_ticking_without_evidence_survives_journal_loss(ledger: Ledger) -> None:
    add(ledger, "postgres")
    assert ledger.settle(decided(ledger, "postgres"), 1.0)
    ticks(ledger, 15)
    tail = filter_events(ledger_events(ledger), last=3)  # the settle is outside the window
    assert codes(doctor(ledger, tail)) == ["ticking_without_evidence"]


def test_doctor_tickets_stale(ledger: Ledger) -> None:
    e = add(ledger, "postgres")
    ticket = decided(ledger, "postgres")
    ticks(ledger, STALE_TICKET_TICKS + 1, expire_after=None)
    assert ledger.store.get(e.id) is not None  # escrowed: kept despite a negative balance
    findings = doctor(ledger, ledger_events(ledger))
    assert codes(findings) == ["tickets_stale"]
    assert findings[0].severity == "warn" and ticket in findings[0].evidence


def test_doctor_settles_dropped(ledger: Ledger) -> None:
    add(ledger, "postgres")
    ticket = decided(ledger, "postgres")
    assert ledger.settle(ticket, 1.0)
    assert not ledger.settle(ticket, 1.0)
    assert not ledger.settle("feedfacecafe", 1.0)
    findings = doctor(ledger, ledger_events(ledger))
    assert codes(findings) == ["settles_dropped"]
    # Dropped settles no more numerous than silent decides are explained by them.
    for i in range(2):
        ledger.decide(f"sailboat rigging question {i}")
    assert doctor(ledger, ledger_events(ledger)) == []


def test_doctor_credit_untracked(ledger: Ledger) -> None:
    add(ledger, "postgres")
    assert ledger.settle(decided(ledger, "postgres"), 1.0)
    legacy = {"event": "settle", "tick": 0, "ts": "2025-01-01T00:00:00+00:00", "ticket": "t",
              "delta": 1.0, "detail": "from 0.3"}  # fmt: skip
    findings = doctor(ledger, [legacy, *ledger_events(ledger)])
    assert codes(findings) == ["credit_untracked"]
    assert findings[0].severity == "warn"


def test_doctor_findings_are_in_rule_order() -> None:
    led = Ledger(MemoryStore(), config=SurvivalConfig(consolidate_every=None))
    events = [
        {"event": "settle_dropped", "tick": 0, "ts": "t", "ticket": "x", "delta": 1.0},
        {"event": "settle", "tick": 0, "ts": "t", "ticket": "y", "delta": 0.0},
    ]
    assert codes(doctor(led, events)) == ["settles_dropped", "credit_untracked"]
