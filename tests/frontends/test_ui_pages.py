"""The dashboard's pages come from the population (``page_entries``, ``page_graveyard``)
and are the same rows whichever store holds the lessons: in memory, JSON, SQLite or
PostgreSQL (the throwaway cluster of ``conftest.pg_cluster``).

One JSON store lives a while (ticks, credits, pins, forgets, deaths) and is copied
to the others, so all four hold the same lessons with the same balances; every
sort, order, filter and search is then asked of each and the answers compared.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from darwin_memo import MemoryStore
from darwin_memo.backends.pages import SORT_KEYS, PageRequest
from darwin_memo.ledger import Ledger
from darwin_memo.records.entry import EntryKind, MemoryEntry
from darwin_memo.transfer import copy_store

WORDS = ["cache", "chunk", "backup", "shard", "deploy", "index", "tmp", "log", "vim", "lake"]
SEARCHES = ["", "cache", "cache chunk", "backup shard", "zebra", "Number 1", "/", "deleted?"]


def _live(path: Path) -> None:
    rng = random.Random(7)
    with Ledger.open(path) as ledger:
        for n in range(80):
            a, b = rng.sample(WORDS, 2)
            ledger.add(
                f"Is the {a} {b} file number {n} safe to touch?",
                f"Yes: {a} files under {b}/ may be deleted (case {n}).",
                source=rng.choice(["runbook", "wiki", "notes"]),
            )
        living = sorted(e.id for e in ledger.store.alive())
        for entry_id in living[3:40:9]:
            ledger.pin(entry_id)
        for entry_id in living[50:56]:
            ledger.forget(entry_id)
        for _ in range(3):
            ledger.tick()
        for word in ("cache chunk", "backup shard", "deploy index", "tmp log"):
            ticket = ledger.decide(f"Is the {word} file safe to touch?")
            ledger.settle(ticket.id, 2, detail="measured")
        # Settling all but one open ticket drives an entry below zero; the last
        # ticket keeps it alive in escrow.
        tickets = [ledger.decide("Is the vim lake file number 9 safe to touch?") for _ in range(7)]
        for ticket in tickets[:-1]:
            ledger.settle(ticket.id, -40, detail="broke it")
        ledger.tick()


@pytest.fixture(scope="module")
def populations(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    from conftest import pg_url

    root = tmp_path_factory.mktemp("pages")
    source = root / "source.json"
    _live(source)
    sqlite = root / "copy.db"
    copy_store(source, sqlite)
    url = pg_url(request.getfixturevalue("pg_cluster"))
    copy_store(source, url)
    ledgers = [Ledger.open(p, create=False) for p in (source, sqlite, url)]
    try:
        out: dict[str, Any] = {"memory": MemoryStore.load(source)}
        for name, ledger in zip(("json", "sqlite", "postgres"), ledgers, strict=True):
            assert ledger.backend.kind == name
            out[name] = ledger.store
        yield out
    finally:
        for ledger in ledgers:
            ledger.close()


def _row(e: MemoryEntry) -> tuple[Any, ...]:
    return (e.id, round(e.energy, 9), e.pinned, e.kind.value, e.question, e.uses)


@pytest.mark.postgres
def test_the_stores_hold_the_same_lessons(populations: dict[str, Any]) -> None:
    rows = {name: sorted(_row(e) for e in s.alive()) for name, s in populations.items()}
    assert len(rows["memory"]) > 60
    assert any(r[1] < 0 for r in rows["memory"]) and any(r[2] for r in rows["memory"])
    for name in ("json", "sqlite", "postgres"):
        assert rows[name] == rows["memory"], name


@pytest.mark.postgres
@pytest.mark.parametrize("sort", SORT_KEYS)
def test_living_pages_agree_across_stores(populations: dict[str, Any], sort: str) -> None:
    memory = populations["memory"]
    for order in ("desc", "asc"):
        for search in SEARCHES:
            everything, total = memory.page_entries(
                sort=sort, order=order, search=search, limit=1000
            )
            assert total == len(everything)
            for offset, limit in ((0, 1000), (0, 7), (5, 11), (total - 3, 50), (total + 5, 5)):
                offset = max(offset, 0)
                want = [e.id for e in everything[offset : offset + limit]]
                for name, store in populations.items():
                    page, got_total = store.page_entries(
                        sort=sort, order=order, search=search, offset=offset, limit=limit
                    )
                    assert got_total == total, (name, sort, order, search)
                    assert [e.id for e in page] == want, (name, sort, order, search, offset)


@pytest.mark.postgres
def test_filters_agree_across_stores(populations: dict[str, Any]) -> None:
    memory = populations["memory"]
    pinned, n_pinned = memory.page_entries(flag="pinned", limit=500)
    assert n_pinned == 5 and all(e.pinned for e in pinned)
    assert memory.page_entries(kind="no-such-kind")[1] == 0
    for kind in ("", EntryKind.EXPERIENCE.value, "no-such-kind"):
        for flag in ("", "pinned", "probation"):
            for search in ("", "cache", "tmp"):
                want = memory.page_entries(kind=kind, flag=flag, search=search, limit=500)
                want_ids = ([e.id for e in want[0]], want[1])
                for name, store in populations.items():
                    page, total = store.page_entries(kind=kind, flag=flag, search=search, limit=500)
                    assert ([e.id for e in page], total) == want_ids, (name, kind, flag, search)


@pytest.mark.postgres
def test_an_id_prefix_finds_its_entry(populations: dict[str, Any]) -> None:
    some = sorted(e.id for e in populations["memory"].alive())[17]
    for name, store in populations.items():
        page, total = store.page_entries(search=some[:8])
        assert some in [e.id for e in page], name
        assert total >= 1


@pytest.mark.postgres
def test_graveyard_pages_agree_across_stores(populations: dict[str, Any]) -> None:
    memory = populations["memory"]
    dead, total = memory.page_graveyard(limit=500)
    assert total == len(dead) >= 6
    for search in ("", "cache", "number 5", "zebra", dead[0][:6]):
        want = memory.page_graveyard(search=search, limit=500)
        if search in ("", dead[0][:6]):
            assert dead[0] in want[0]
        for name, store in populations.items():
            got = store.page_graveyard(search=search, limit=500)
            assert sorted(got[0]) == sorted(want[0]) and got[1] == want[1], (name, search)
            window = store.page_graveyard(search=search, offset=1, limit=2)
            assert window == (got[0][1:3], got[1]), (name, search)


def test_a_bad_request_is_a_clear_error() -> None:
    for bad in ({"sort": "energy"}, {"order": "up"}, {"flag": "dead"}, {"offset": -1}):
        with pytest.raises(ValueError, match="must be"):
            PageRequest(**bad)
    with pytest.raises(ValueError, match="sort must be one of"):
        MemoryStore().page_entries(sort="energy")
