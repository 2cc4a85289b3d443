"""Consolidation at scale: the join's filters and the batched merge change nothing."""

from __future__ import annotations

import contextlib
import itertools
import math
import random
import sqlite3
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.test_packs import check_lists, fold_rows
from darwin_memo import MemoryEntry, native
from darwin_memo.backends import postings, sqlstore

# A few template words shared by many sets, a middle band of phrase words, a rare tail.
TEMPLATE = [f"t{i}" for i in range(8)]
PHRASES = [[f"p{k}a", f"p{k}b", f"p{k}c"] for k in range(12)]
TAIL = [f"r{i}" for i in range(400)]


def _templated_sets(rnd: random.Random, size: int) -> list[frozenset[str]]:
    sets: list[frozenset[str]] = []
    for _ in range(size):
        if sets and rnd.random() < 0.3:  # a near-duplicate of an earlier set
            base = set(rnd.choice(sets))
            for t in rnd.sample(sorted(base), k=min(len(base), rnd.randint(0, 3))):
                base.discard(t)
            base.update(rnd.choices(TAIL, k=rnd.randint(0, 3)))
            sets.append(frozenset(base))
            continue
        words = set(rnd.sample(TEMPLATE, k=rnd.randint(0, len(TEMPLATE))))
        for phrase in rnd.sample(PHRASES, k=rnd.randint(0, 4)):
            words.update(phrase)
        words.update(rnd.choices(TAIL, k=rnd.randint(0, 6)))
        sets.append(frozenset(words))
    return sets


@contextlib.contextmanager
def _constants(**values: int) -> Iterator[None]:
    """The join's tuning constants (``darwin_memo.retrieval.simjoin``) set, then put back."""
    module = sys.modules["darwin_memo.retrieval.simjoin"]
    kept = {name: getattr(module, name) for name in values}
    for name, value in values.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in kept.items():
            setattr(module, name, value)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


@settings(max_examples=120, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 90), st.floats(0.2, 1.0), st.sampled_from([1, 3, 64]))
def test_jaccard_partners_equal_the_pairwise_scan(
    seed: int, size: int, threshold: float, common: int
) -> None:
    """Every partner the filters keep, and none they drop, for any set of skips.

    ``common``: how many sets must hold a token for it to count as a bit (1: every
    token, 3: the templated words, 64: none in sets this small).
    """
    from darwin_memo.retrieval.simjoin import _jaccard_partners

    rnd = random.Random(seed)
    sets = _templated_sets(rnd, size)
    with _constants(COMMON_TOKEN_SETS=common):
        partners = _jaccard_partners(sets, threshold)
    for i in range(size):
        skip = {j for j in range(size) if rnd.random() < 0.2}
        want = [
            j
            for j in range(size)
            if j != i and j not in skip and sets[i] and sets[j]
            if _jaccard(sets[i], sets[j]) >= threshold
        ]
        got = [j for j in partners(i, skip) if j != i]
        assert got == want


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 160), st.floats(0.2, 1.0), st.sampled_from([3, 64]))
def test_jaccard_partners_with_a_growing_skip(
    seed: int, size: int, threshold: float, common: int
) -> None:
    """The greedy pass's own skips (each call's a superset of the last), which the
    lists drop as they go: still every partner and nothing else, call after call."""
    from darwin_memo.retrieval.simjoin import _jaccard_partners

    rnd = random.Random(seed)
    sets = _templated_sets(rnd, size)
    # COMPACTED_LIST: compact the short lists too
    with _constants(COMMON_TOKEN_SETS=common, COMPACTED_LIST=1 if seed % 2 else 4):
        partners = _jaccard_partners(sets, threshold, growing=True)
    _replay_greedy(sets, partners, lambda a, b: _jaccard(a, b) >= threshold, rnd)


def _replay_greedy(
    sets: list[frozenset[str]],
    partners: Callable[[int, set[int]], list[int]],
    similar: Callable[[frozenset[str], frozenset[str]], bool],
    rnd: random.Random,
) -> None:
    """The greedy pass over ``partners``, each call checked against ``similar`` pair by pair."""
    skip: set[int] = set()
    for i in range(len(sets)):
        if i in skip:
            continue
        skip.add(i)
        want = [
            j
            for j in range(len(sets))
            if j not in skip and sets[i] and sets[j] and similar(sets[i], sets[j])
        ]
        got = partners(i, skip)
        assert got == want
        skip.update(got)
        # and now and then an entry the pass set aside for another reason
        skip.update(j for j in range(len(sets)) if rnd.random() < 0.05)


def _weights(sets: list[frozenset[str]]) -> dict[str, float]:
    """The rarity weights ``_weighted_partners`` gives these sets' tokens."""
    df: dict[str, int] = {}
    for ts in sets:
        for t in ts:
            df[t] = df.get(t, 0) + 1
    return {t: math.log(1.0 + len(sets) / (1.0 + c)) for t, c in df.items()}


def _weighted(a: frozenset[str], b: frozenset[str], w: dict[str, float]) -> float:
    """The weighted rule's pairwise definition: shared mass over the union's mass."""
    inter = math.fsum(w[t] for t in a & b)
    return inter / (math.fsum(w[t] for t in a) + math.fsum(w[t] for t in b) - inter)


@settings(max_examples=120, deadline=None)
@given(
    st.integers(0, 10_000),
    st.integers(2, 90),
    st.floats(0.05, 1.0),
    st.sampled_from([1, 3, 64]),
    st.sampled_from([0, 10**9]),
)
def test_weighted_partners_equal_the_pairwise_scan(
    seed: int, size: int, threshold: float, common: int, bounded: int
) -> None:
    """Every partner under the rarity-weighted rule, and nothing else, for any skips.

    ``common`` as above; ``bounded``: from how many candidates the shared counts bound
    the shared mass (0: always, 10**9: never).
    """
    from darwin_memo.retrieval.simjoin import _weighted_partners

    rnd = random.Random(seed)
    sets = _templated_sets(rnd, size)
    w = _weights(sets)
    with _constants(COMMON_TOKEN_SETS=common, BOUNDED_CANDIDATES=bounded):
        partners = _weighted_partners(sets, threshold)
        for i in range(size):
            skip = {j for j in range(size) if rnd.random() < 0.2}
            want = [
                j
                for j in range(size)
                if j != i and j not in skip and sets[i] and sets[j]
                if _weighted(sets[i], sets[j], w) >= threshold
            ]
            assert partners(i, skip) == want


@settings(max_examples=80, deadline=None)
@given(
    st.integers(0, 10_000),
    st.integers(2, 160),
    st.floats(0.05, 1.0),
    st.sampled_from([3, 64]),
    st.sampled_from([0, 16]),
)
def test_weighted_partners_with_a_growing_skip(
    seed: int, size: int, threshold: float, common: int, bounded: int
) -> None:
    """The greedy pass under the weighted rule, its lists compacted as the skips grow."""
    from darwin_memo.retrieval.simjoin import _weighted_partners

    rnd = random.Random(seed)
    sets = _templated_sets(rnd, size)
    w = _weights(sets)
    compact = 1 if seed % 2 else 4  # compact the short lists too
    with _constants(COMMON_TOKEN_SETS=common, COMPACTED_LIST=compact, BOUNDED_CANDIDATES=bounded):
        partners = _weighted_partners(sets, threshold, growing=True)
        _replay_greedy(sets, partners, lambda a, b: _weighted(a, b, w) >= threshold, rnd)


@settings(max_examples=120, deadline=None)
@given(
    st.integers(0, 10_000),
    st.integers(1, 90),
    st.floats(0.05, 1.0),
    st.sampled_from([1, 3, 64]),
    st.sampled_from([1, 10**9]),
)
def test_pairs_touching_equal_the_pairwise_scan(
    seed: int, size: int, threshold: float, common: int, few: int
) -> None:
    """Every similar pair with an end among the targets, both ways, and nothing else.

    ``few``: 1 takes the path for a few targets (they look up their rarest tokens'
    holders), 10**9 the one indexing the targets' prefixes.
    """
    from darwin_memo.retrieval.simjoin import _pairs_touching

    rnd = random.Random(seed)
    sets = _templated_sets(rnd, size)
    targets = sorted(rnd.sample(range(size), k=rnd.randint(0, size)))
    with _constants(COMMON_TOKEN_SETS=common, FEW_TARGETS=few):
        near = _pairs_touching(sets, targets, threshold)
    chosen = set(targets)
    want: dict[int, set[int]] = {}
    for i in range(size):
        for j in range(size):
            touching = i != j and (i in chosen or j in chosen) and sets[i] and sets[j]
            if touching and _jaccard(sets[i], sets[j]) >= threshold:
                want.setdefault(i, set()).add(j)
    assert near == want


def _tables(store: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table but the migration log (one added later is compared too),
    less the write versions: merges made outside an operation are a transaction each
    one by one and one in all at once, so the version counter differs, not the rows."""
    conn = store.conn
    names = [
        str(row[0])
        for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        if not str(row[0]).startswith("sqlite_") and row[0] != "schema_migrations"
    ]
    tables = {}
    for name in names:
        columns = [c[1] for c in conn.execute(f"PRAGMA table_info({name})") if c[1] != "version"]
        selected = ", ".join(columns)
        tables[name] = sorted(conn.execute(f"SELECT {selected} FROM {name}").fetchall(), key=repr)
    # A random number rewritten at every index change (long-lived handles' cache key).
    tables["counters"] = [row for row in tables["counters"] if row[0] != "index_stamp"]
    tables["meta"] = [row for row in tables["meta"] if row[0] != "version"]
    return tables


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000))
def test_merge_many_writes_what_merge_into_writes(seed: int) -> None:
    """The SQLite store's batched merges (all at once, or in batches as consolidation
    hands them over) leave the rows, index and books of one by one."""
    with pytest.MonkeyPatch.context() as mp:
        if seed % 2:  # small thresholds: tokens turn to bits and back during the merges
            mp.setattr(postings, "DENSE_MIN", 4)
            mp.setattr(postings, "DENSE_DROP", 2)
            mp.setattr(postings, "BLOCK_SHIFT", 3)
            mp.setattr(postings, "_BLOCK_MASK", 7)
        if seed % 4 >= 2:  # the join in Python instead of darwin_memo._cjoin
            mp.setenv(native.PURE_PYTHON_ENV, "1")
        _merge_many_against_merge_into(seed)


def test_merge_many_leaves_the_page_cache_and_the_collector_as_they_were() -> None:
    """The bulk writes grow SQLite's page cache and pause the collector only meanwhile."""
    import gc

    from conftest import new_store

    store = new_store("sqlite")
    for i in range(4):
        store.add(MemoryEntry("same words here", "", id=f"e{i:03d}", recorded_ts="t"))
    store.conn.execute("PRAGMA cache_size = -1234")
    seen: list[tuple[int, bool]] = []
    write_heirs = store._write_heirs

    def spy(heirs: list[MemoryEntry]) -> None:
        seen.append((store.conn.execute("PRAGMA cache_size").fetchone()[0], gc.isenabled()))
        write_heirs(heirs)

    store._write_heirs = spy  # type: ignore[method-assign]
    heir = MemoryEntry("same words here", "", id="h0", lineage=["e000", "e001"])
    assert gc.isenabled()
    store.merge_many([(heir, ["e000", "e001"])])
    assert seen == [(-postings.BULK_CACHE_KIB, False)]
    assert store.conn.execute("PRAGMA cache_size").fetchone()[0] == -1234
    assert gc.isenabled()


def _merge_many_against_merge_into(seed: int) -> None:
    from conftest import new_store

    rnd = random.Random(seed)
    rows = [
        (
            " ".join(rnd.choices(TEMPLATE + TAIL[:30], k=rnd.randint(1, 8))),
            " ".join(rnd.choices(TAIL[:60], k=rnd.randint(0, 5))),
            rnd.choice([0.5, 1.0, 2.0, 30.0]),
        )
        for _ in range(rnd.randint(2, 40))
    ]
    ids = [f"e{i:03d}" for i in range(len(rows))]
    order = ids[:]
    rnd.shuffle(order)
    plan: list[tuple[str, list[str]]] = []
    while len(order) >= 2 and rnd.random() < 0.9:
        k = rnd.randint(2, min(5, len(order)))
        plan.append((f"h{len(plan):03d}", [order.pop() for _ in range(k)]))
    stores = []
    for mode in ("one by one", "many", "batches"):
        store = new_store("sqlite")
        for entry_id, (q, a, energy) in zip(ids, rows, strict=True):
            store.add(MemoryEntry(q, a, energy=energy, id=entry_id, recorded_ts="2026-01-01"))
        store.forget_cached(ids[: len(ids) // 2])  # some members are read back from rows
        heirs = [
            (
                MemoryEntry(
                    f"heir {h}", "merged", id=h, lineage=list(members), recorded_ts="2026-01-02"
                ),
                members,
            )
            for h, members in plan
        ]
        if mode == "many":
            clipped = store.merge_many(heirs)
        elif mode == "batches":  # as consolidation hands them over: cut anywhere
            cuts = sorted(rnd.sample(range(len(heirs) + 1), rnd.randint(0, len(heirs) + 1)))
            bounds = [0, *cuts, len(heirs)]
            clipped = store.merge_batches(heirs[a:b] for a, b in itertools.pairwise(bounds))
        else:
            clipped = [store.merge_into(heir, members) for heir, members in heirs]
        store.flush(store.dirty)
        stores.append((store, clipped, dict(store.books.totals)))
    (one, clipped_one, books_one), *others = stores
    for many, clipped_many, books_many in others:
        assert clipped_many == clipped_one
        assert books_many == books_one
        assert _tables(many) == _tables(one)
        assert sorted(e.id for e in many.alive()) == sorted(e.id for e in one.alive())
        check_lists(many.conn)


def test_members_read_from_their_rows_are_buried_without_rewriting_their_json(
    tmp_path: Any,
) -> None:
    """A consolidation buries the members it read from their rows by their columns
    alone (alive, energy, anchor, version): their JSON stays as it was, and read back
    they are what burying them from the cache (JSON rewritten) leaves."""
    import shutil

    from darwin_memo.backends.sqlite import SqliteBackend
    from darwin_memo.backends.sqlstore import SqlStore
    from darwin_memo.retrieval.simjoin import merge_groups

    rnd = random.Random(21)
    sets = _templated_sets(rnd, 150)
    built = tmp_path / "built.db"
    backend = SqliteBackend(built)
    store = SqlStore(backend, max_energy=5.0, upkeep=0.05)
    for i, words in enumerate(sets):
        energy = rnd.choice([0.5, 1.0, 2.5])
        store.add(
            MemoryEntry(" ".join(sorted(words)) or "empty", "", id=f"e{i:03d}", energy=energy)
        )
    backend.close()
    member_columns = "id, alive, energy, anchor, pinned, death_tick, toks, kind, damaged"
    before = dict(sqlite3.connect(built).execute("SELECT id, data FROM entries").fetchall())
    outcomes = []
    for cached in (True, False):
        path = tmp_path / f"cached-{cached}.db"
        shutil.copy(built, path)
        backend = SqliteBackend(path)
        store = SqlStore(backend, max_energy=5.0, upkeep=0.05)
        if cached:
            store.alive()  # every member held: buried by the path that rewrites the JSON
        merges = merge_groups(store, cycle=1)
        store.flush(store.dirty)
        conn = store.conn
        columns = sorted(
            conn.execute(
                f"SELECT {member_columns} FROM entries WHERE id GLOB 'e[0-9][0-9][0-9]'"
            ).fetchall()
        )
        data = dict(conn.execute("SELECT id, data FROM entries WHERE alive = 0").fetchall())
        store.forget_cached()
        dead = {i: store.get_dead(i) for i in data}
        outcomes.append(
            (
                [sorted(m.members) for m in merges],
                columns,
                {i: e.to_dict() for i, e in dead.items() if e is not None},
                sum(e.energy for e in store.alive()),
            )
        )
        check_lists(conn)
        # The cached path rewrites the members' JSON, to the same text: a burial
        # changes the balance only, which a row keeps in its column (schema 7).
        changed = [i for i in data if data[i] != before[i]]
        assert not changed, "a burial leaves a member's JSON as it was"
        backend.close()
    (merged, columns, dead, total), (merged_rows, columns_rows, dead_rows, total_rows) = outcomes
    assert merged and merged == merged_rows
    assert columns == columns_rows
    assert dead == dead_rows and len(dead) == sum(map(len, merged))
    assert all(d["energy"] == 0.0 for d in dead.values())
    assert total == total_rows


def test_consolidation_on_every_backend_merges_alike(pg_cluster: Any) -> None:
    """Batched merges on SQLite and PostgreSQL: the memory store's groups, a sound index."""
    from conftest import new_store
    from darwin_memo.retrieval.simjoin import merge_groups

    rnd = random.Random(11)
    sets = _templated_sets(rnd, 120)
    stores = [new_store(kind) for kind in ("memory", "sqlite", "postgres")]
    results = []
    for store in stores:
        for i, words in enumerate(sets):
            text = " ".join(sorted(words))
            store.add(MemoryEntry(text or "empty", "", id=f"e{i:03d}", recorded_ts="t"))
        merges = merge_groups(store, cycle=1, threshold=0.55)
        kept = sorted(e.id for e in store.alive() if e.id.startswith("e") and len(e.id) == 4)
        results.append(([m.members for m in merges], kept, len(store)))
    assert results[0] == results[1] == results[2]
    assert results[0][0], "the templated sets should have near-duplicates to merge"
    for store in stores[1:]:
        conn = store.conn
        (df,) = conn.execute("SELECT SUM(df) FROM tokens").fetchone()
        if store is stores[1]:  # SQLite: the lists are checked against the rows below
            held = sum(
                len(sqlstore.row_tokens(str(toks), data).split())
                for toks, data in conn.execute(
                    "SELECT toks, question || ' ' || answer FROM entries WHERE alive = 1"
                )
            )
        else:
            (held,) = conn.execute("SELECT COUNT(*) FROM postings").fetchone()
            (dead,) = conn.execute(
                "SELECT COUNT(*) FROM postings p JOIN entries e ON e.rowid = p.entry_rowid "
                "WHERE e.alive = 0"
            ).fetchone()
            assert dead == 0
        assert df == held
        if store is stores[1]:
            check_lists(conn)  # SQLite's packs and bits followed the batched burials
        hits = [e.id for e, _ in store.retrieve(" ".join(sorted(sets[0])), k=5)]
        assert all(e is not None for e in map(store.get, hits))
    stores[2].backend.close()


def _random_sql_store(rnd: random.Random, size: int) -> tuple[Any, set[str]]:
    """An SQLite store with pinned, probationary, juvenile, decayed and cached entries."""
    from conftest import new_store

    store = new_store("sqlite", upkeep=0.05)
    sets = _templated_sets(rnd, size)
    for i, words in enumerate(sets):
        store.tick = rnd.randint(0, 6)  # rows anchored at different ticks: lazy upkeep differs
        entry = MemoryEntry(
            " ".join(sorted(words)) or "empty",
            rnd.choice(["", "r1", "t0 t1"]),
            energy=rnd.choice([0.5, 1.0, 1.0, 2.0, 0.30000000000000004]),
            sources=rnd.sample(["a", "b", "c"], k=rnd.randint(0, 2)),
            id=f"e{i:03d}",
            pinned=rnd.random() < 0.1,
            probation=rnd.choice([0, 0, 0, 1, -1]),
            juvenile=rnd.choice([0, 0, 0, 2]),
            recorded_ts="t",
        )
        store.add(entry)
    store.tick = 7
    store.forget_cached()
    # Some entries are read back and changed in memory only (what alive() returns for them).
    for entry_id in rnd.sample([f"e{i:03d}" for i in range(size)], k=size // 3):
        entry = store.get(entry_id)
        if entry is None:
            continue
        change = rnd.randint(0, 4)
        if change == 0:
            entry.energy = rnd.choice([0.1, 3.0])
        elif change == 1:
            entry.probation = rnd.choice([0, 2])
        elif change == 2:
            entry.juvenile = rnd.choice([0, 1])
        elif change == 3:
            entry.sources = rnd.sample(["a", "b", "c"], k=rnd.randint(0, 3))
    exclude = {f"e{i:03d}" for i in range(size) if rnd.random() < 0.1}
    return store, exclude


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 70))
def test_sql_candidates_equal_alive(seed: int, size: int) -> None:
    """``SqlStore.merge_candidates`` lists what ``alive()`` and ``token_sets`` give, in order."""
    from darwin_memo.retrieval.simjoin import _candidates

    rnd = random.Random(seed)
    store, exclude = _random_sql_store(rnd, size)
    for need_sources in (False, True):
        got = store.merge_candidates(exclude, need_sources)
        assert got is not None
        want = _candidates(store, exclude)
        assert got.ids == [e.id for e in want]
        assert got.tokens == store.token_sets(want)
        if need_sources:
            assert got.sources == [tuple(e.sources) for e in want]
        picked = sorted(rnd.sample(range(len(want)), k=min(len(want), 5)))
        assert got.entries(picked) == [want[i] for i in picked]
        assert all(
            a is b for a, b in zip(got.entries(picked), [want[i] for i in picked], strict=True)
        )
        store.forget_cached([e.id for e in want if rnd.random() < 0.5])


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 10_000),
    st.integers(2, 70),
    st.floats(0.2, 1.0),
    st.sampled_from(["off", "shared", "identical"]),
)
@pytest.mark.slow
def test_sql_store_groups_equal_pairwise(
    seed: int, size: int, threshold: float, policy: str
) -> None:
    """On an SQLite store (candidates read from rows) the groups are the pairwise scan's."""
    from darwin_memo.retrieval.simjoin import _groups_indexed, _groups_pairwise

    rnd = random.Random(seed)
    store, exclude = _random_sql_store(rnd, size)
    got = _groups_indexed(store, store.retriever, threshold, exclude, policy)
    want = _groups_pairwise(store, threshold, exclude, policy)
    assert [[e.id for e in g] for g in got] == [[e.id for e in g] for g in want]
    assert all(a is b for g, h in zip(got, want, strict=True) for a, b in zip(g, h, strict=True))


def _weighted_groups_pairwise(
    store: Any, threshold: float, exclude: set[str], policy: str
) -> list[list[str]]:
    """The greedy clustering under the weighted rule with a source policy, pair by pair."""
    from darwin_memo.retrieval.simjoin import _candidates, _joins

    cands = _candidates(store, exclude)
    toks = [store.retriever.tokens(e) for e in cands]
    w = _weights(toks)
    consumed: set[int] = set()
    groups = []
    for i, anchor in enumerate(cands):
        if i in consumed or (policy != "off" and not anchor.sources) or not toks[i]:
            continue
        group = [i]
        shared = set(anchor.sources)
        for j, other in enumerate(cands):
            if j == i or j in consumed or not toks[j]:
                continue
            if not _joins(anchor, other, policy, shared):
                continue
            if _weighted(toks[i], toks[j], w) >= threshold:
                group.append(j)
                consumed.add(j)
                if policy == "shared":
                    shared &= set(other.sources)
        if len(group) >= 2:
            consumed.add(i)
            groups.append([cands[g].id for g in group])
    return groups


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 10_000),
    st.integers(2, 70),
    st.floats(0.2, 1.0),
    st.sampled_from(["off", "shared", "identical"]),
)
@pytest.mark.slow
def test_sql_store_weighted_groups_equal_pairwise(
    seed: int, size: int, threshold: float, policy: str
) -> None:
    """The weighted rule on an SQLite store (candidates read from rows), any source policy."""
    from darwin_memo.retrieval.simjoin import _groups_indexed

    rnd = random.Random(seed)
    store, exclude = _random_sql_store(rnd, size)
    got = _groups_indexed(store, store.retriever, threshold, exclude, policy, weighted=True)
    assert [[e.id for e in g] for g in got] == _weighted_groups_pairwise(
        store, threshold, exclude, policy
    )


def test_sql_candidates_damaged_rows_fail_as_alive_fails() -> None:
    """A row SQLite cannot read, or with a field of the wrong type, names the entry."""
    from conftest import new_store
    from darwin_memo.errors import StoreFormatError
    from darwin_memo.retrieval.simjoin import merge_groups

    for bad in ("{not json", '{"id": "e001", "question": "q", "answer": "", "probation": "x"}'):
        store = new_store("sqlite")
        for i in range(3):
            store.add(MemoryEntry("same words here", "", id=f"e{i:03d}", recorded_ts="t"))
        store.conn.execute("UPDATE entries SET data = ? WHERE id = 'e001'", (bad,))
        store.forget_cached()
        with pytest.raises(StoreFormatError, match="e001"):
            merge_groups(store, cycle=1)


def test_merge_many_heirs_changed_after_are_written() -> None:
    """An heir written in bulk and changed in memory before the flush is written again."""
    from conftest import new_store

    store = new_store("sqlite")
    for i in range(4):
        store.add(MemoryEntry("same words here", "", id=f"e{i:03d}", recorded_ts="t"))
    heirs = [
        (MemoryEntry("same words here", "", id="h0", lineage=["e000", "e001"]), ["e000", "e001"]),
        (MemoryEntry("same words here", "", id="h1", lineage=["e002", "e003"]), ["e002", "e003"]),
    ]
    store.merge_many(heirs)
    store.get("h1").probation = 3  # type: ignore[union-attr]
    store.flush(store.dirty)
    store.forget_cached()
    assert store.get("h0").probation == 0  # type: ignore[union-attr]
    assert store.get("h1").probation == 3  # type: ignore[union-attr]
    assert store.get("h1").energy == 2.0  # type: ignore[union-attr]
    check_lists(store.conn)


def _settled_ids(store: Any) -> set[str]:
    return {
        str(entry_id)
        for (entry_id,) in store.conn.execute(
            "SELECT e.id FROM settled s JOIN entries e ON e.rowid = s.entry_rowid WHERE e.alive = 1"
        )
    }


def _assert_settled_apart(store: Any, threshold: float) -> None:
    """No two living settled entries reach the threshold (the invariant the tick relies on)."""
    toks = {
        str(entry_id): frozenset(sqlstore.row_tokens(str(text), data).split())
        for entry_id, text, data in store.conn.execute(
            "SELECT id, toks, question || ' ' || answer FROM entries WHERE alive = 1"
        )
    }
    settled = sorted(_settled_ids(store))
    for k, a in enumerate(settled):
        for b in settled[k + 1 :]:
            if toks[a] and toks[b]:
                assert _jaccard(toks[a], toks[b]) < threshold, (a, b)


@pytest.mark.slow
@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0.55, 0.55, 0.4, 0.8]))
def test_settled_consolidations_equal_pairwise(seed: int, threshold: float) -> None:
    """Consolidation after consolidation, with adds, edits, burials, exclusions and a new
    process now and then: the groups stay the pairwise scan's, settled entries stay apart."""
    from conftest import new_store
    from darwin_memo.retrieval.simjoin import _groups_pairwise, merge_groups

    rnd = random.Random(seed)
    store = new_store("sqlite")
    pool = _templated_sets(rnd, 160)
    added = 0

    def add(k: int) -> None:
        nonlocal added
        for _ in range(k):
            words = rnd.choice(pool) if rnd.random() < 0.5 else pool[added % len(pool)]
            store.add(
                MemoryEntry(
                    " ".join(sorted(words)) or "empty",
                    "",
                    energy=rnd.choice([0.5, 1.0, 2.0]),
                    id=f"n{added:04d}",
                    recorded_ts="t",
                )
            )
            added += 1

    add(rnd.randint(10, 60))
    rule = threshold
    for cycle in range(1, 7):
        if rnd.random() < 0.15:
            rule = rnd.choice([0.55, 0.4, 0.8])  # another rule: what was settled is forgotten
        living = [e.id for e in store.alive()]
        for entry_id in rnd.sample(living, k=min(len(living), rnd.randint(0, 3))):
            entry = store.get(entry_id)
            assert entry is not None
            change = rnd.randint(0, 3)
            if change == 0:  # new words: no longer settled
                entry.question = " ".join(sorted(rnd.choice(pool))) or "empty"
                store.flush([entry_id])
            elif change == 1:
                store.bury(entry_id)
            elif change == 2:
                entry.probation = rnd.choice([0, 1])
                store.flush([entry_id])
            else:
                entry.juvenile = rnd.choice([0, 1])
        add(rnd.randint(0, 12))
        if rnd.random() < 0.3:
            store.forget_cached()  # another process: rows only
        living = [e.id for e in store.alive()]
        exclude = set(rnd.sample(living, k=min(len(living), rnd.randint(0, 4))))
        want = _groups_pairwise(store, rule, exclude, "off")
        merges = merge_groups(store, cycle=cycle, threshold=rule, exclude=exclude)
        assert [list(m.members) for m in merges] == [[e.id for e in g] for g in want]
        store.flush(store.dirty)
        store.dirty.clear()
        _assert_settled_apart(store, rule)
    check_lists(store.conn)


def test_settled_skip_the_join_and_survive_migration(tmp_path: Any) -> None:
    """A store from before m005 migrates with nothing settled; its first consolidation
    settles what stands, and the next one compares only pairs touching newcomers."""
    import sqlite3

    from darwin_memo.backends.sqlite import SqliteBackend
    from darwin_memo.backends.sqlstore import SqlStore
    from darwin_memo.retrieval.simjoin import _groups_pairwise, merge_groups

    path = tmp_path / "store.db"
    backend = SqliteBackend(path)
    store = SqlStore(backend, max_energy=5.0, upkeep=0.05)
    rnd = random.Random(5)
    sets = _templated_sets(rnd, 150)
    for i, words in enumerate(sets):
        store.add(MemoryEntry(" ".join(sorted(words)) or "empty", "", id=f"e{i:03d}"))
    backend.close()
    fold_rows(path)  # (the rows as schema 4 held them)
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE settled")
    conn.execute("DELETE FROM schema_migrations WHERE version >= 5")
    conn.commit()
    conn.close()

    backend = SqliteBackend(path)  # migrates to m005
    store = SqlStore(backend, max_energy=5.0, upkeep=0.05)
    assert _settled_ids(store) == set()
    want = _groups_pairwise(store, 0.55, (), "off")
    merges = merge_groups(store, cycle=1)
    assert [list(m.members) for m in merges] == [[e.id for e in g] for g in want]
    assert merges, "the templated sets should have near-duplicates to merge"
    store.flush(store.dirty)
    standing = {e.id for e in store.alive() if e.kind.value != "consolidated"}
    assert _settled_ids(store) == standing
    _assert_settled_apart(store, 0.55)

    merges = merge_groups(store, cycle=2)  # the heirs settle too (or merge on)
    store.flush(store.dirty)
    # Newcomers, some near-duplicates of settled entries: the next consolidation takes
    # the pairs touching them (the join over everyone is not built).
    for i, words in enumerate(rnd.sample(sets, 6)):
        store.add(MemoryEntry(" ".join(sorted(words)) or "empty", "", id=f"x{i:03d}"))
    import darwin_memo.retrieval.simjoin  # noqa: F401

    module = sys.modules["darwin_memo.retrieval.simjoin"]
    calls: list[int] = []
    originals = (module._jaccard_partners, module._native_stream)

    def spy(original: Any) -> Any:
        def joined(tokens: Any, threshold: float) -> Any:
            calls.append(len(tokens))
            return original(tokens, threshold)

        return joined

    module._jaccard_partners, module._native_stream = map(spy, originals)
    try:
        store.forget_cached()
        want = _groups_pairwise(store, 0.55, (), "off")
        # as in a large store, where a few newcomers are fewer than one in 32
        with _constants(COMPILED_JOIN_TARGETS=1):
            merges = merge_groups(store, cycle=3)
    finally:
        module._jaccard_partners, module._native_stream = originals
    assert [list(m.members) for m in merges] == [[e.id for e in g] for g in want]
    assert calls == []
    assert merges, "some newcomers should merge with what was settled"
    _assert_settled_apart(store, 0.55)
    backend.close()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c", "d", "e"]),
            st.lists(st.sampled_from(["ci", "pm", "doc", "log"]), max_size=4),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_an_heir_holds_the_first_three_answers_and_every_source_once(
    rows: list[tuple[str, list[str]]],
) -> None:
    """The heir's answer joins the group's first three distinct answers, in group order;
    its sources are every member's, each once, in the order first seen."""
    from darwin_memo.economy.merge import heir as _heir

    group = [
        MemoryEntry(question=f"q{i}", answer=a, sources=srcs, uses=i, id=f"m{i}")
        for i, (a, srcs) in enumerate(rows)
    ]
    heir, ids = _heir(group, 7)
    answers: list[str] = []
    sources: list[str] = []
    for m in group:  # the definition, spelled out
        if m.answer not in answers:
            answers.append(m.answer)
        for s in m.sources:
            if s not in sources:
                sources.append(s)
    assert heir.answer == " ".join(answers[:3])
    assert heir.sources == sources
    assert heir.question == "q0" and heir.lineage == ids == [m.id for m in group]
    assert heir.uses == sum(range(len(rows))) and heir.born_cycle == 7


def test_a_consolidation_failing_after_some_batches_leaves_the_store_as_it_was(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches are written while the join goes on: an error in a later batch rolls back
    the earlier ones too, and the next tick merges as an undisturbed one does."""
    import shutil

    from darwin_memo.backends.sqlite import SqliteBackend
    from darwin_memo.backends.sqlstore import SqlStore
    from darwin_memo.ledger import Ledger

    consolidate = sys.modules["darwin_memo.retrieval.simjoin"]
    rnd = random.Random(8)
    built = tmp_path / "built.db"
    backend = SqliteBackend(built)
    store = SqlStore(backend, max_energy=5.0, upkeep=0.05)
    for i, words in enumerate(_templated_sets(rnd, 150)):
        store.add(MemoryEntry(" ".join(sorted(words)) or "empty", "", id=f"e{i:03d}"))
    backend.close()
    path, undisturbed = tmp_path / "store.db", tmp_path / "undisturbed.db"
    shutil.copy(built, path)
    shutil.copy(built, undisturbed)

    def dump(db: Any) -> dict[str, list[Any]]:
        conn = sqlite3.connect(db)
        try:
            names = [
                n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            ]
            return {n: sorted(map(repr, conn.execute(f"SELECT * FROM {n}"))) for n in names}
        finally:
            conn.close()

    def groups(db: Any) -> list[list[str]]:
        conn = sqlite3.connect(db)
        try:
            by_heir: dict[str, list[str]] = {}
            for member, heir in conn.execute("SELECT member, heir FROM lineage"):
                by_heir.setdefault(heir, []).append(member)
            return sorted(sorted(g) for g in by_heir.values())
        finally:
            conn.close()

    def tick(db: Any) -> dict[str, Any]:
        ledger = Ledger.open(db, create=False)
        ledger.config.consolidate_every = 1
        try:
            return ledger.tick()
        finally:
            ledger.close()

    before = dump(path)
    split = consolidate._group_batches

    def one_group_a_batch(*args: Any, **kwargs: Any) -> Iterator[list[list[MemoryEntry]]]:
        for batch in split(*args, **kwargs):
            for group in batch:
                yield [group]

    written: list[int] = []
    write_heirs = SqlStore._write_heirs

    def failing(self: SqlStore, heirs: list[MemoryEntry]) -> None:
        written.append(len(heirs))
        if len(written) == 3:
            raise RuntimeError("the disk went away")
        write_heirs(self, heirs)

    with monkeypatch.context() as mp:
        mp.setattr(consolidate, "_group_batches", one_group_a_batch)
        mp.setattr(SqlStore, "_write_heirs", failing)
        with pytest.raises(RuntimeError, match="disk went away"):
            tick(path)
    assert written == [1, 1, 1]  # two batches were written before the third failed
    assert dump(path) == before
    assert tick(path)["merges"] == tick(undisturbed)["merges"] >= 3
    assert groups(path) == groups(undisturbed)
    conn = sqlite3.connect(path)
    check_lists(conn)
    conn.close()


def test_a_merge_notes_its_members_once_by_its_heir(tmp_path: Any) -> None:
    """Each member's history ends "merged into HEIR", on SQLite as on a JSON store; SQLite
    (schema 9) holds that note once per merge, by its heir, and reads it through the
    member's lineage row: in ``history``, ``all_history`` and after reopening."""
    from darwin_memo.ledger import Ledger

    def shape(notes: list[Any], heir: str | None) -> list[tuple[Any, ...]]:
        out = []
        for n in notes:
            text = n["text"].replace(heir, "HEIR") if heir else n["text"]
            out.append((n.get("event"), text, n.get("heir") == heir, n.get("tick")))
        return out

    shapes = []
    for name in ("store.json", "store.db"):
        ledger = Ledger.open(tmp_path / name)
        added = [
            ledger.add(f"How do I restart worker {k} of the queue?", f"Run restart-{k}. ({i})").id
            for k in range(3)
            for i in range(4)
        ]
        ledger.config.consolidate_every = 1
        merges = sum(ledger.tick()["merges"] for _ in range(4))
        assert merges >= 3
        heirs = {i: getattr(ledger.heir_of(i), "id", None) for i in added}
        merged = [i for i in added if heirs[i] is not None]
        assert len(merged) >= 6
        seen = {i: shape(ledger.history(i), heirs[i]) for i in added}
        assert all(seen[i][-1][:3] == ("merged", seen[i][-1][1], True) for i in merged)
        if name == "store.db":
            conn = sqlite3.connect(tmp_path / name)
            folded = conn.execute("SELECT COUNT(*) FROM merge_notes").fetchone()[0]
            per_member = conn.execute(
                'SELECT COUNT(*) FROM notes WHERE data LIKE \'%"event":"merged"%\''
            ).fetchone()[0]
            conn.close()
            assert folded == merges and per_member == 0  # one note per merge, in all
            everything = ledger.backend.all_history()  # type: ignore[union-attr]
            assert all(everything[i] == ledger.history(i) for i in merged)
            ledger.close()
            ledger = Ledger.open(tmp_path / name)
            assert {i: shape(ledger.history(i), heirs[i]) for i in added} == seen
            assert f"merged into {heirs[merged[0]]}" in ledger.obituary(merged[0])
        ledger.close()
        shapes.append([seen[i] for i in added])  # ids are random: in the order added
    assert shapes[0] == shapes[1]


def test_members_noted_one_by_one_before_schema_9_read_alike(tmp_path: Any) -> None:
    """A store whose members' "merged" notes are rows of their own (as written before
    m009) reads the same histories after the migration, without a second copy, and
    its next merges are noted once by their heirs."""
    from darwin_memo.ledger import Ledger

    path = tmp_path / "store.db"
    ledger = Ledger.open(path)
    ids = [
        ledger.add(f"How do I drain node {k} before an upgrade?", f"Cordon node-{k}. ({i})").id
        for k in range(2)
        for i in range(3)
    ]
    ledger.config.consolidate_every = 1
    assert sum(ledger.tick()["merges"] for _ in range(4)) >= 2
    before = {i: ledger.history(i) for i in ids}
    ledger.close()
    fold_rows(path)
    conn = sqlite3.connect(path)  # as darwin-memo wrote it before schema 9
    conn.execute(
        "INSERT INTO notes (entry_id, data) SELECT l.member, m.data "
        "FROM lineage AS l JOIN merge_notes AS m ON m.heir = l.heir ORDER BY l.member"
    )
    conn.execute("DROP TABLE merge_notes")
    conn.execute("DELETE FROM schema_migrations WHERE version >= 9")
    conn.commit()
    conn.close()

    ledger = Ledger.open(path)  # migrates: merge_notes, empty
    assert {i: ledger.history(i) for i in ids} == before
    assert all(ledger.backend.all_history()[i] == before[i] for i in ids)  # type: ignore[union-attr]
    newer = [
        ledger.add("How do I rotate the signing key?", f"Run rotate-key. ({i})").id
        for i in range(3)
    ]
    assert sum(ledger.tick()["merges"] for _ in range(4)) >= 1
    heir = ledger.heir_of(newer[0])
    assert heir is not None and ledger.history(newer[0])[-1]["heir"] == heir.id
    ledger.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT COUNT(*) FROM merge_notes").fetchone()[0] >= 1
    conn.close()


def test_a_merged_note_not_to_exactly_the_heirs_lineage_stays_a_row_of_its_own(
    tmp_path: Any,
) -> None:
    """Only a merge's one note to exactly its lineage is held once: a "merged" note to
    anyone else, or differing between members, is written (and read) as a notes row."""
    from darwin_memo.ledger import Ledger

    path = tmp_path / "store.db"
    ledger = Ledger.open(path)
    ids = [
        ledger.add("How do I clear the build cache?", f"Run make clean. ({i})").id for i in range(3)
    ]
    other = ledger.add("Which port does the api listen on?", "8080.").id
    ledger.config.consolidate_every = 1
    assert sum(ledger.tick()["merges"] for _ in range(4)) >= 1
    heir = ledger.heir_of(ids[0])
    assert heir is not None
    members = list(heir.lineage)
    before = {i: ledger.history(i) for i in members}
    stray = {"tick": 9, "ts": "t", "text": f"merged into {heir.id}", "event": "merged"}
    stray["heir"] = heir.id
    with ledger._op() as changes:  # a note naming the heir, to an entry not of its lineage
        changes.notes.append((other, stray))
        changes.touched.add(other)  # (notes alone do not make a write)
    with ledger._op() as changes:  # and two that differ, to its members
        changes.notes += [(m, {**stray, "text": f"again {n}"}) for n, m in enumerate(members)]
        changes.touched.add(other)
    assert ledger.history(other)[-1] == stray
    for n, m in enumerate(members):  # its own rows in order, then the merge's note
        again = {**stray, "text": f"again {n}"}
        assert ledger.history(m) == [*before[m][:-1], again, before[m][-1]]
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT COUNT(*) FROM notes WHERE data LIKE '%\"heir\"%'").fetchone()[0]
    held = conn.execute("SELECT COUNT(*) FROM merge_notes").fetchone()[0]
    conn.close()
    assert rows == 1 + len(members)  # the stray ones, each a row
    assert held >= 1  # the merge's own, still once
    ledger.close()
