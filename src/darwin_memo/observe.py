"""Read-only views of a ledger and its journal: ``top``, ``why``, ``audit``, ``doctor``.

Everything here reads; nothing writes the store or the journal. Each function
returns the JSON object the published 0.7.1 commands print (``top --json``,
``why --json``, ``audit --json``, ``doctor --json``) or the pieces the dashboard
serves (``timeline``, ``economics``), so the CLI, the MCP server and the UI only
have to serialize.

The published signatures hold: ``read_events(log_path)``, ``top_row(entry, tick,
store)``, ``economics(events, store)``, ``audit_digest(events, store)``. Our stores
may keep their journal in a table rather than a file, so ``ledger_events(ledger)``
reads any ledger's journal, and ``ledger_economics(ledger, events)`` refreshes a
durable ledger before reading its store.

The journal is tamperable and may come from older writers, so every reader is
defensive: a record with a missing or mistyped field counts as if the field
were absent, never as an error.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Sequence
from typing import Any

from .backends.journal import EventLog
from .economy.rules import bounded
from .ledger import Ledger, note_text
from .records.entry import MemoryEntry
from .sim.diagnose import (
    MIN_DEATHS,
    MIN_DECIDES,
    MIN_QUIET_TICKS,
    MIN_SETTLES,
    SILENCE_LIMIT,
    STALE_TICKET_TICKS,
    STARVED_SHARE,
    Finding,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from os import PathLike

    from .backends.interface import Population

__all__ = [
    "MOVERS",
    "audit_digest",
    "doctor",
    "economics",
    "entry_life",
    "entry_status",
    "filter_events",
    "ledger_economics",
    "ledger_events",
    "read_events",
    "tick_fields",
    "timeline",
    "top",
    "top_row",
]

#: Gainers and losers listed by ``audit_digest``, each.
MOVERS = 5
#: Ids ``tickets_stale`` names in its evidence.
_STALE_LISTED = 5
#: The detail a ticket expiry settles with.
_EXPIRED_DETAIL = "expired unsettled"
_CAUSES = ("executed", "starved", "forgotten")
_DIED_TEXT = re.compile(r"\b(executed|starved)\b")
_CREDIT_TEXT = re.compile(r"credit ([+-]?\d+(?:\.\d+)?)")

JsonDict = dict[str, Any]


# -- small defensive readers -------------------------------------------------------


def _num(value: Any) -> float:
    """A finite number from a record field, else 0.0.

    Clamped to ``economy.rules.MAX_MAGNITUDE`` either way (``bounded``): a journal may hold
    a delta of 1e308 (written before settles were bounded, or by hand), and any
    number of clamped values sum without overflowing.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    try:
        x = float(value)
    except OverflowError:  # an integer too large for a float
        x = math.copysign(math.inf, value)
    return bounded(x) if math.isfinite(x) else 0.0


def _opt_num(value: Any) -> float | None:
    """A finite number from a record field (clamped as ``_num``), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        x = float(value)
    except OverflowError:
        return None
    return bounded(x) if math.isfinite(x) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _r3(x: float) -> float:
    return round(x, 3) + 0.0  # + 0.0 turns -0.0 into 0.0


def _r6(x: float) -> float:
    return round(x, 6) + 0.0


def _applied(record: JsonDict) -> list[tuple[str, float]]:
    """The ``(entry, credit)`` pairs a settle record applied (empty when untracked)."""
    applied = record.get("applied")
    if not isinstance(applied, list):
        return []
    pairs: list[tuple[str, float]] = []
    for item in applied:
        if isinstance(item, dict) and isinstance(item.get("entry"), str):
            pairs.append((item["entry"], _num(item.get("credit"))))
    return pairs


def _is_expiry(record: JsonDict) -> bool:
    return record.get("expired") is True or record.get("detail") == _EXPIRED_DETAIL


def _of(events: Iterable[JsonDict], kind: str) -> list[JsonDict]:
    return [e for e in events if e.get("event") == kind]


def _fresh(ledger: Ledger) -> None:
    """Bring a durable ledger's view up to date (a no-op for in-memory ledgers)."""
    ledger.refresh()


# -- top ---------------------------------------------------------------------------


def top_row(entry: MemoryEntry, tick: int, store: Population) -> JsonDict:
    """One ``top --json`` row for a living ``entry`` of ``store``, seen at ledger ``tick``."""
    return {
        "id": entry.id,
        "balance": _r3(entry.energy),
        "kind": entry.kind.value,
        "sources": list(entry.sources),
        "born_tick": entry.born_cycle,
        "age_ticks": tick - entry.born_cycle,
        "last_settled_tick": entry.last_used_cycle if entry.last_used_cycle >= 0 else None,
        "uses": entry.uses,
        "pinned": entry.pinned,
        "probation": entry.probation,
        "question": entry.question,
        "ticks_to_starvation": _ttl(store.ticks_to_starvation(entry)),
    }


def _ttl(value: float | None) -> float | None:
    return None if value is None else value + 0.0


def top(ledger: Ledger, limit: int = 10) -> JsonDict:
    """The ``top --json`` object: living entries by balance (ties by id), at most ``limit``."""
    _fresh(ledger)
    living = sorted(ledger.store.alive(), key=lambda e: (-e.energy, e.id))
    return {
        "tick": ledger.tick_count,
        "alive": len(living),
        "entries": [top_row(e, ledger.tick_count, ledger.store) for e in living[: max(0, limit)]],
    }


# -- why ---------------------------------------------------------------------------


def _note_dicts(notes: Sequence[Any]) -> list[JsonDict]:
    """Notes as objects (old stores hold bare strings: they become ``{"text": ...}``)."""
    return [dict(n) if isinstance(n, dict) else {"text": note_text(n)} for n in notes]


def _cause_from_notes(notes: Sequence[JsonDict]) -> str | None:
    """The last death/buried note's cause, else one read from the note texts."""
    for note in reversed(notes):
        if note.get("event") in ("death", "buried") and note.get("cause") in _CAUSES:
            return str(note["cause"])
    for note in reversed(notes):
        text = str(note.get("text", ""))
        if "by forget" in text:
            return "forgotten"
        if text.startswith(("died at tick", "buried at tick")):
            match = _DIED_TEXT.search(text)
            if match:
                return match.group(1)
    return None


def _birth(entry: MemoryEntry | None, notes: Sequence[JsonDict]) -> JsonDict | None:
    for note in notes:
        if note.get("event") in ("birth", "import"):
            stake = note.get("stake")
            return {
                "tick": _int(note.get("tick")),
                "ts": _str(note.get("ts")),
                "source": _str(note.get("source")),
                "stake": _num(stake) if stake is not None else None,
            }
    if entry is None:
        return None
    # No birth note (an encoded store, or notes from before they were written).
    return {
        "tick": entry.born_cycle,
        "ts": entry.recorded_ts or None,
        "source": entry.sources[0] if entry.sources else None,
        "stake": None,
    }


def entry_status(ledger: Ledger, entry_id: str) -> str | None:
    """``living``, ``merged`` (an heir's lineage names it), ``dead``, or None if unknown."""
    _fresh(ledger)
    return _store_status(ledger.store, entry_id)


def _store_status(store: Population, entry_id: str) -> str | None:
    """``entry_status`` read from a store alone (an heir found as ``Ledger.heir_of`` does)."""
    if store.get(entry_id) is not None:
        return "living"
    lookup = getattr(store, "heir_of", None)  # SQL stores index lineage
    if lookup is not None:
        if lookup(entry_id):
            return "merged"
    elif any(entry_id in e.lineage for e in list(store.alive()) + store.graveyard()):
        return "merged"
    if store.get_dead(entry_id) is not None:
        return "dead"
    return None


def entry_life(ledger: Ledger, entry_id: str) -> JsonDict | None:
    """The ``why --json`` object for an entry, living, dead or merged away; None if unknown."""
    _fresh(ledger)
    store = ledger.store
    living = store.get(entry_id)
    entry = living if living is not None else store.get_dead(entry_id)
    heir = ledger.heir_of(entry_id)
    notes = _note_dicts(ledger.history(entry_id))
    heir_id: str | None = heir.id if heir is not None else None
    if heir_id is None:
        for note in reversed(notes):
            if note.get("event") == "merged" and isinstance(note.get("heir"), str):
                heir_id = note["heir"]
                break
    if entry is None and heir_id is None:
        return None
    if living is not None:
        status, cause = "living", None
    elif heir_id is not None:
        status, cause = "merged", "merged"
    else:
        status, cause = "dead", _cause_from_notes(notes) or "unknown"
    life: JsonDict = {
        "id": entry_id,
        "status": status,
        "question": entry.question if entry is not None else None,
        "answer": entry.answer if entry is not None else None,
        "kind": entry.kind.value if entry is not None else None,
        "sources": list(entry.sources) if entry is not None else [],
        "balance": _r3(entry.energy) if entry is not None else None,
        "uses": entry.uses if entry is not None else None,
        "ticks_to_starvation": (
            _ttl(store.ticks_to_starvation(entry)) if entry is not None else None
        ),
        "pinned": entry.pinned if entry is not None else False,
        "probation": entry.probation if entry is not None else 0,
        "juvenile": entry.juvenile if entry is not None else 0,
        "birth": _birth(entry, notes),
        "settlements": [n for n in notes if n.get("event") == "settle"],
        "merged_into": heir_id,
        "cause_of_death": cause,
        "events": notes,
    }
    return life


# -- the journal -------------------------------------------------------------------


def read_events(log_path: str | PathLike[str]) -> list[JsonDict]:
    """The records of the event log file at ``log_path``, oldest first (published form).

    Rotations (``NAME.events.jsonl.1`` ...) are read first, oldest first, then the
    live file; unreadable lines are skipped, and a missing log is an empty journal.
    """
    return list(EventLog(os.fspath(log_path)).read())


def ledger_events(ledger: Ledger) -> list[JsonDict]:
    """A ledger's whole journal, oldest first, wherever it is kept.

    ``read_events`` for a ``Ledger``: JSON stores' log files (across rotations),
    or the journal table of SQLite and PostgreSQL stores, which no path names.
    """
    return [e for e in ledger.events() if isinstance(e, dict)]


def filter_events(
    events: Sequence[JsonDict], since: str | None = None, last: int | None = None
) -> list[JsonDict]:
    """Records at or after ``since`` (ISO strings compared as strings), then the last ``last``.

    With ``since`` given, records without a string ``ts`` fall outside. An empty
    ``since`` and a ``last`` of None or below 1 do not filter (as the MCP tool's 0/"").
    """
    kept = list(events)
    if since:
        kept = [e for e in kept if isinstance(e.get("ts"), str) and e["ts"] >= since]
    if last is not None and last > 0:
        kept = kept[-last:]
    return kept


def _energy(settles: Sequence[JsonDict]) -> tuple[float, float]:
    """(credited, debited) over settle records, both >= 0, full precision."""
    credits = [c for s in settles for _, c in _applied(s)]
    credited = math.fsum(c for c in credits if c > 0)
    debited = -math.fsum(c for c in credits if c < 0)
    return credited, debited


def _energy_dict(settles: Sequence[JsonDict]) -> JsonDict:
    credited, debited = _energy(settles)
    return {
        "credited": _r6(credited),
        "debited": _r6(debited),
        "net": _r6(credited - debited),
    }


def _first(values: Iterable[Any]) -> Any:
    return next(iter(values), None)


def _culled(events: Sequence[JsonDict]) -> list[str]:
    ids: list[str] = []
    for e in events:
        kind = e.get("event")
        if kind == "settle":
            buried = e.get("buried")
            ids += [i for i in buried if isinstance(i, str)] if isinstance(buried, list) else []
        elif kind == "forget" and isinstance(e.get("entry"), str):
            ids.append(e["entry"])
        elif kind == "tick":
            dead = e.get("dead_entries")
            ids += [i for i in dead if isinstance(i, str)] if isinstance(dead, list) else []
    return list(dict.fromkeys(ids))


def audit_digest(events: Sequence[JsonDict], store: Population | None = None) -> JsonDict:
    """The ``audit --json`` digest of a window of journal records.

    Movers' ``question`` and ``status`` come from ``store`` when given (it knows
    every entry it ever held, the dead too), else from the window itself (add,
    import and merge records; burials and merges in the window).
    """
    events = [e for e in events if isinstance(e, dict)]
    decides = _of(events, "decide")
    settles = _of(events, "settle")
    ticks = _of(events, "tick")
    culled = _culled(events)

    nets: dict[str, list[float]] = {}
    for s in settles:
        for entry_id, credit in _applied(s):
            nets.setdefault(entry_id, []).append(credit)
    totals = {i: math.fsum(cs) for i, cs in nets.items()}

    questions: dict[str, str] = {}
    merged: set[str] = set()
    for e in events:
        if e.get("event") in ("add", "import", "merge") and isinstance(e.get("entry"), str):
            q = e.get("question")
            if isinstance(q, str):
                questions[e["entry"]] = q
        if e.get("event") == "merge" and isinstance(e.get("members"), list):
            merged.update(m for m in e["members"] if isinstance(m, str))
    dead = set(culled)

    def mover(entry_id: str, net: float) -> JsonDict:
        question: str | None
        status: str | None
        if store is not None:
            found = store.get(entry_id) or store.get_dead(entry_id)
            question = found.question if found is not None else questions.get(entry_id)
            status = _store_status(store, entry_id)
        else:
            question = questions.get(entry_id)
            status = "merged" if entry_id in merged else "dead" if entry_id in dead else "living"
        return {"entry": entry_id, "net": _r6(net), "question": question, "status": status}

    gainers = sorted(((i, n) for i, n in totals.items() if n > 0), key=lambda p: (-p[1], p[0]))
    losers = sorted(((i, n) for i, n in totals.items() if n < 0), key=lambda p: (p[1], p[0]))
    stamped = [e["ts"] for e in events if isinstance(e.get("ts"), str)]
    ticked = [t for t in (_int(e.get("tick")) for e in events) if t is not None]
    return {
        "events": len(events),
        "window": {
            "first_ts": _first(stamped),
            "last_ts": stamped[-1] if stamped else None,
            "first_tick": _first(ticked),
            "last_tick": ticked[-1] if ticked else None,
        },
        "decides": {
            "total": len(decides),
            "silent": sum(1 for d in decides if d.get("silent") is True),
        },
        "settles": {
            "landed": len(settles),
            "dropped": len(_of(events, "settle_dropped")),
            "delta_total": _r6(math.fsum(_num(s.get("delta")) for s in settles)),
            "untracked": sum(1 for s in settles if not isinstance(s.get("applied"), list)),
        },
        "adds": len(_of(events, "add")),
        "forgets": {
            "buried": len(_of(events, "forget")),
            "refused": len(_of(events, "forget_refused")),
        },
        "ticks": len(ticks),
        "merges": sum(int(_num(t.get("merges"))) for t in ticks),
        "expired": sum(int(_num(t.get("expired"))) for t in ticks),
        "energy": _energy_dict(settles),
        "culled": {"count": len(culled), "entries": culled},
        "top_gainers": [mover(i, n) for i, n in gainers[:MOVERS]],
        "top_losers": [mover(i, n) for i, n in losers[:MOVERS]],
    }


# -- dashboard pieces --------------------------------------------------------------


def tick_fields(event: JsonDict) -> JsonDict:
    """The population statistics a ``tick`` event records, read defensively."""
    return {
        "tick": _int(event.get("tick")),
        "population": _int(event.get("population")),
        "total_energy": _opt_num(event.get("total_energy")),
        "deaths": _int(event.get("deaths")),
        "merges": _int(event.get("merges")),
        "pending": _int(event.get("pending")),
    }


def timeline(events: Sequence[JsonDict]) -> list[JsonDict]:
    """One row per tick record, with the settle deltas logged since the previous tick.

    Settles after the last tick record make a trailing ``open: true`` row whose
    population statistics are None.
    """
    rows: list[JsonDict] = []
    deltas: list[float] = []
    open_settles = False
    open_tick: int | None = None
    for e in events:
        if not isinstance(e, dict):
            continue
        kind = e.get("event")
        if kind == "settle":
            deltas.append(_num(e.get("delta")))
            open_settles = True
            open_tick = _int(e.get("tick"))
        elif kind == "tick":
            rows.append({**tick_fields(e), "delta": _r6(math.fsum(deltas))})
            deltas, open_settles = [], False
    if open_settles:
        rows.append(
            {
                "tick": open_tick,
                "population": None,
                "total_energy": None,
                "deaths": None,
                "merges": None,
                "pending": None,
                "delta": _r6(math.fsum(deltas)),
                "open": True,
            }
        )
    return rows


def economics(events: Sequence[JsonDict], store: Population) -> JsonDict:
    """Resource delta over decisions, energy moved by settlements, upkeep paid, population.

    Upkeep is exact (the sum of the ticks' ``upkeep_charged``) only when every tick
    record carries it; otherwise it is estimated as the summed tick populations
    times ``store``'s upkeep rate. The population is ``store``'s.
    """
    events = [e for e in events if isinstance(e, dict)]
    decides = _of(events, "decide")
    settles = _of(events, "settle")
    ticks = _of(events, "tick")
    exact = all(
        isinstance(t.get("upkeep_charged"), (int, float))
        and not isinstance(t.get("upkeep_charged"), bool)
        for t in ticks
    )
    if exact:
        upkeep_paid = _r6(math.fsum(_num(t.get("upkeep_charged")) for t in ticks))
        caveat = None
    else:
        population = math.fsum(_num(t.get("population")) for t in ticks)
        upkeep_paid = _r6(population * store.upkeep)
        caveat = (
            "estimated: some tick records lack upkeep_charged (written by an older "
            "version), so upkeep is the summed tick populations times the upkeep rate; "
            "pinned floors and deaths make the true figure lower"
        )
    energy = _energy_dict(settles)
    energy.update(upkeep_paid=upkeep_paid, upkeep_exact=exact, upkeep_caveat=caveat)
    return {
        "resource": {
            "delta_total": _r6(math.fsum(_num(s.get("delta")) for s in settles)),
            "decides": len(decides),
            "silent": sum(1 for d in decides if d.get("silent") is True),
            "settles": len(settles),
        },
        "energy": energy,
        "population": {"alive": len(store), "dead": store.dead_count()},
    }


def ledger_economics(ledger: Ledger, events: Sequence[JsonDict]) -> JsonDict:
    """``economics`` of a ledger's store, brought up to date first (durable stores)."""
    _fresh(ledger)
    return economics(events, ledger.store)


# -- doctor ------------------------------------------------------------------------


def _credit_of(note: Any) -> float:
    """The credit a settle note records (old string notes: read from the text)."""
    if isinstance(note, dict):
        if note.get("event") == "settle":
            return _num(note.get("credit"))
        return 0.0
    match = _CREDIT_TEXT.search(str(note))
    return float(match.group(1)) if match else 0.0


def doctor(ledger: Ledger, events: Sequence[JsonDict]) -> list[Finding]:
    """Name the degeneracies visible in a store and its journal (see the spec's seven rules).

    ``events`` is the window to judge (normally the whole journal). Credit noted
    in the entries' histories counts as evidence even when the journal has been
    rotated away.
    """
    _fresh(ledger)
    store = ledger.store
    events = [e for e in events if isinstance(e, dict)]
    decides = _of(events, "decide")
    silent = sum(1 for d in decides if d.get("silent") is True)
    settles = _of(events, "settle")
    untracked = sum(1 for s in settles if not isinstance(s.get("applied"), list))
    credited, _ = _energy(settles)

    # Store-wide evidence from the notes: survives journal rotation.
    entries = list(store.alive()) + store.graveyard()
    histories = {e.id: ledger.history(e.id) for e in entries}
    last_credit: int | None = None
    for notes in histories.values():
        for note in notes:
            tick = _int(note.get("tick")) if isinstance(note, dict) else None
            if _credit_of(note) != 0 and tick is not None:
                last_credit = tick if last_credit is None else max(last_credit, tick)
    noted_credit = any(_credit_of(n) != 0 for notes in histories.values() for n in notes)
    for s in settles:
        tick = _int(s.get("tick"))
        if tick is not None and any(c != 0 for _, c in _applied(s)):
            last_credit = tick if last_credit is None else max(last_credit, tick)
    earned = noted_credit or any(_num(s.get("delta")) != 0 for s in settles)

    findings: list[Finding] = []

    # 1. silent_majority
    silent_fired = False
    if not earned and len(decides) >= MIN_DECIDES and silent / len(decides) > SILENCE_LIMIT:
        silent_fired = True
        findings.append(
            Finding(
                code="silent_majority",
                severity="error",
                summary=(
                    f"memory was silent on {silent} of {len(decides)} decisions and nothing "
                    "has ever been credited: queries do not reach the lessons, so no entry "
                    "can earn its upkeep"
                ),
                evidence=(
                    f"{silent}/{len(decides)} decide records silent "
                    f"({silent / len(decides):.0%} > {SILENCE_LIMIT:.0%}); "
                    "no settle with a non-zero delta in the journal or the entries' notes"
                ),
                fix=(
                    "ask decide in the words your lessons use (an entry must match a quarter "
                    "of the query's weighted terms), add lessons that answer the questions you "
                    "actually ask (`darwin-memo ledger FILE add QUESTION ANSWER`), or drop "
                    "--kind/--source filters that exclude every entry"
                ),
            )
        )

    # 2. env_never_paid
    measured = [s for s in settles if not _is_expiry(s)]
    if not earned and not silent_fired and len(measured) >= MIN_SETTLES:
        expired = len(settles) - len(measured)
        findings.append(
            Finding(
                code="env_never_paid",
                severity="error",
                summary=(
                    f"none of {len(measured)} settlements carried an outcome: every delta "
                    "was 0, so selection has nothing to select on"
                ),
                evidence=(
                    f"{len(measured)} settle records (not counting {expired} expiries), "
                    "0 with a non-zero delta; no credit in any entry's notes"
                ),
                fix=(
                    "settle with the measured change in your outcome (for example tests "
                    "passing after minus before, or +1/-1 for task success/failure), not 0; "
                    "use abandon only for decisions you did not act on, and check that the "
                    "code computing the delta actually sees the result"
                ),
            )
        )

    # 3. starvation_cliff
    graveyard = store.graveyard()
    merged_away = {i for e in entries for i in e.lineage}
    starved = 0
    for e in graveyard:
        notes = _note_dicts(histories.get(e.id, []))
        settled = any(n.get("event") == "settle" for n in notes)
        cause = _cause_from_notes(notes)
        if cause is None and not notes and e.uses == 0 and e.id not in merged_away:
            cause = "starved"  # no history at all: it never earned (as the obituary says)
        if cause == "starved" and not settled:
            starved += 1
    if (
        len(graveyard) >= MIN_DEATHS
        and starved / len(graveyard) >= STARVED_SHARE
        and credited == 0
        and not earned
        and untracked == 0
    ):
        findings.append(
            Finding(
                code="starvation_cliff",
                severity="error",
                summary=(
                    f"{starved} of {len(graveyard)} dead entries starved without a single "
                    "settlement: the store is being ticked but never paid, and will go extinct"
                ),
                evidence=(
                    f"graveyard {len(graveyard)}, {starved} starved with no settle notes; "
                    f"0 energy credited in {len(settles)} settle records; "
                    f"tick {ledger.tick_count}, {len(store)} alive"
                ),
                fix=(
                    "settle each decision's ticket with its measured delta before ticking "
                    "again, and tick only on cycles where a settlement landed (as settle-ci "
                    "does); pin entries that must outlive long gaps without evidence "
                    "(`darwin-memo ledger FILE pin ID`)"
                ),
            )
        )

    # 4. ticking_without_evidence
    if last_credit is not None:
        quiet = ledger.tick_count - last_credit
        runways = [store.ticks_to_starvation(e) for e in store.alive()]
        can_starve = [r for r in runways if r is not None]
        if not runways:
            longest: float | None = 0.0
        elif can_starve:
            longest = max(can_starve)
        else:
            longest = None  # every living entry is pinned (or upkeep is 0): nothing can starve
        if longest is not None and quiet >= MIN_QUIET_TICKS and quiet >= longest:
            findings.append(
                Finding(
                    code="ticking_without_evidence",
                    severity="warn",
                    summary=(
                        f"{quiet} ticks since the last credited outcome (tick {last_credit}): "
                        "upkeep keeps draining while no evidence arrives"
                    ),
                    evidence=(
                        f"tick {ledger.tick_count}, last credit at tick {last_credit}; longest "
                        f"remaining runway {longest:g} ticks across {len(store)} living entries"
                    ),
                    fix=(
                        "settle the pending tickets (or the next decisions) with measured "
                        "deltas before ticking further; if nothing is being decided, pause the "
                        "tick schedule so the store is not starved by the clock alone"
                    ),
                )
            )

    # 5. tickets_stale
    stale = [t for t in ledger.pending() if ledger.tick_count - t.born_tick > STALE_TICKET_TICKS]
    if stale:
        stale.sort(key=lambda t: (t.born_tick, t.id))
        shown = ", ".join(t.id for t in stale[:_STALE_LISTED])
        more = f" and {len(stale) - _STALE_LISTED} more" if len(stale) > _STALE_LISTED else ""
        findings.append(
            Finding(
                code="tickets_stale",
                severity="warn",
                summary=(
                    f"{len(stale)} pending ticket(s) older than {STALE_TICKET_TICKS} ticks: "
                    "their entries are escrowed (they pay upkeep but cannot die or merge)"
                ),
                evidence=(
                    f"tick {ledger.tick_count}; oldest born at tick {stale[0].born_tick}: "
                    f"{shown}{more}"
                ),
                fix=(
                    "settle each listed ticket with its measured delta "
                    "(`darwin-memo ledger FILE settle ID DELTA`) or release it "
                    "(`darwin-memo ledger FILE abandon ID`); keep tick's expiry on "
                    "(--expire-after) so forgotten tickets close by themselves"
                ),
            )
        )

    # 6. settles_dropped
    dropped = _of(events, "settle_dropped")
    if len(dropped) > silent:
        findings.append(
            Finding(
                code="settles_dropped",
                severity="warn",
                summary=(
                    f"{len(dropped)} settlements were dropped (unknown, already settled or "
                    "expired tickets): measured outcomes are being lost"
                ),
                evidence=(
                    f"{len(dropped)} settle_dropped records vs {silent} silent decisions "
                    f"(silent decisions explain at most that many); {len(settles)} landed"
                ),
                fix=(
                    "settle only ticket ids returned by a speaking decide, exactly once, "
                    "against the same store; settle within the expiry window (50 ticks by "
                    "default) or raise --expire-after; skip settling silent decisions"
                ),
            )
        )

    # 7. credit_untracked
    if untracked:
        findings.append(
            Finding(
                code="credit_untracked",
                severity="warn",
                summary=(
                    f"{untracked} settle record(s) do not say which entries were credited: "
                    "energy totals and movers in audit undercount"
                ),
                evidence=f"{untracked} of {len(settles)} settle records lack 'applied'",
                fix=(
                    "these records come from an older or foreign writer; write settlements "
                    "through this version's ledger (which records every credit), and judge "
                    "credit from `why` (per-entry notes) for the untracked period"
                ),
            )
        )
    return findings
