"""The organic layer (spec §1.13, §2.12, §10): every formula and tie rule on small stores.

Vectors are chosen by hand (a lookup-table embedder) so each cosine is known exactly;
entry ids are chosen so that sorting by id would give a different order than
insertion, which is the order every tie must follow.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from darwin_memo import HashingEmbedder, MemoryEntry, MemoryStore
from darwin_memo.organic import (
    ActivationState,
    BruteForceBackend,
    EarnedImportance,
    HebbianWeights,
    OrganicMemory,
    build_graph,
    detail,
    store_related,
    surface,
)

SQ = 1 / math.sqrt(2)

#: question -> vector; an entry's text is "question answer", so the question picks it.
VECTORS: dict[str, list[float]] = {
    "x": [1.0, 0.0, 0.0],
    "x2": [1.0, 0.0, 0.0],  # identical to x: cosine 1
    "diag": [SQ, SQ, 0.0],  # cosine SQ with x
    "y": [0.0, 1.0, 0.0],  # orthogonal to x
    "negx": [-1.0, 0.0, 0.0],  # cosine -1 with x: clamped to 0
    "z": [0.0, 0.0, 1.0],
    "mostly_x": [0.8, 0.6, 0.0],  # cosine 0.8 with x
    "zero": [0.0, 0.0, 0.0],
}


def table_embedder(seen: list[str] | None = None) -> object:
    def embed(text: str) -> Sequence[float]:
        if seen is not None:
            seen.append(text)
        return VECTORS[text.split()[0]]

    return embed


def make_store(*questions: str, ids: Sequence[str] | None = None) -> MemoryStore:
    """Entries in the given order; default ids descend, so id order != insertion order."""
    store = MemoryStore()
    ids = ids or [f"{'zyxwvutsrqponm'[i]}{i:011d}" for i in range(len(questions))]
    for q, entry_id in zip(questions, ids, strict=True):
        store.add(MemoryEntry(q, "answer", id=entry_id))
    return store


def organic(store: MemoryStore) -> OrganicMemory:
    return OrganicMemory(store, embedder=table_embedder())  # type: ignore[arg-type]


def ids_of(store: MemoryStore) -> list[str]:
    return [e.id for e in store.alive()]


# --------------------------------------------------------------------------- #
# Phase 1: the associative graph
# --------------------------------------------------------------------------- #


def test_graph_embeds_question_space_answer() -> None:
    seen: list[str] = []
    store = MemoryStore()
    store.add(MemoryEntry("x what is it?", "the answer", sources=["doc.txt"]))
    build_graph(store, embedder=table_embedder(seen))  # type: ignore[arg-type]
    assert seen == ["x what is it? the answer"]


def test_related_is_clamped_cosine_best_first_self_excluded() -> None:
    store = make_store("x", "negx", "diag", "x2", "y", "mostly_x")
    a, negx, diag, x2, y, mostly = ids_of(store)
    graph = build_graph(store, embedder=table_embedder())  # type: ignore[arg-type]
    related = graph.related(a, k=10)
    assert [i for i, _ in related] == [x2, mostly, diag, y, negx]
    scores = dict(related)
    assert scores[x2] == pytest.approx(1.0)
    assert scores[mostly] == pytest.approx(0.8)
    assert scores[diag] == pytest.approx(SQ)
    assert scores[y] == 0.0
    assert scores[negx] == 0.0  # cosine -1, clamped
    assert a not in scores
    assert graph.related(a, k=2) == related[:2]
    assert graph.related(a, k=0) == []
    assert graph.related("not-there") == []


def test_related_ties_keep_insertion_order_never_id_order() -> None:
    # Three identical vectors; ids sort the opposite way from insertion.
    store = make_store("x", "x2", "x", "x2", ids=["d0", "c0", "b0", "a0"])
    graph = build_graph(store, embedder=table_embedder())  # type: ignore[arg-type]
    assert [i for i, _ in graph.related("d0", 5)] == ["c0", "b0", "a0"]
    assert [i for i, _ in graph.related("a0", 5)] == ["d0", "c0", "b0"]
    assert [graph.ordinal(i) for i in ("d0", "c0", "b0", "a0")] == [0, 1, 2, 3]


def test_remove_then_add_joins_at_the_end_and_readd_keeps_place() -> None:
    store = make_store("x", "x2", "x", ids=["c", "b", "a"])
    graph = build_graph(store, embedder=table_embedder())  # type: ignore[arg-type]
    graph.add(store.get("b"))  # type: ignore[arg-type]  # already there: keeps its place
    assert graph.ordinal("b") == 1
    graph.remove("b")
    graph.remove("never-there")  # no error
    assert "b" not in graph.ids and graph.ids == {"a", "c"}
    graph.add(store.get("b"))  # type: ignore[arg-type]
    assert graph.ordinal("b") == 3
    assert [i for i, _ in graph.related("c")] == ["a", "b"]
    with pytest.raises(KeyError):
        graph.ordinal("never-there")


def test_readding_an_entry_reembeds_it() -> None:
    store = make_store("x", "y", ids=["p", "q"])
    graph = build_graph(store, embedder=table_embedder())  # type: ignore[arg-type]
    assert graph.related("p") == [("q", 0.0)]
    entry = store.get("q")
    assert entry is not None
    entry.question = "x2"
    graph.add(entry)
    assert graph.related("p") == [("q", pytest.approx(1.0))]


def test_store_related_uses_the_hashing_embedder_over_living_entries() -> None:
    store = MemoryStore()
    a = store.add(MemoryEntry("Are cache files safe to delete?", "Yes, cache files can go."))
    b = store.add(MemoryEntry("Are cache files safe to remove?", "Yes, they can go."))
    c = store.add(MemoryEntry("Who maintains the payroll database?", "The finance team."))
    dead = store.add(MemoryEntry("Are cache files safe to delete?", "Yes, cache files can go."))
    store.bury(dead.id)
    related = store_related(store, a.id, k=5)
    assert [i for i, _ in related] == [b.id, c.id]
    embed = HashingEmbedder()
    va = embed(f"{a.question} {a.answer}")
    vb = embed(f"{b.question} {b.answer}")
    cosine = sum(x * y for x, y in zip(va, vb, strict=True))
    assert related[0][1] == pytest.approx(cosine)
    assert 0.0 <= related[1][1] < related[0][1]
    assert store_related(store, dead.id) == []


def test_brute_force_backend_raw_cosines_ties_and_exclude() -> None:
    backend = BruteForceBackend()
    backend.add("a", [1.0, 0.0])
    backend.add("b", [0.0, 0.0])  # zero vector: cosine 0
    backend.add("c", [-2.0, 0.0])
    backend.add("d", [0.0, 3.0])  # ties b at 0.0, added later
    assert backend.search([1.0, 0.0], 10) == [
        ("a", 1.0),
        ("b", 0.0),
        ("d", 0.0),
        ("c", -1.0),
    ]
    assert [i for i, _ in backend.search([1.0, 0.0], 2, exclude="a")] == ["b", "d"]
    backend.add("a", [0.0, 1.0])  # replaced in place: keeps its place among ties
    assert [i for i, _ in backend.search([1.0, 0.0], 3)] == ["a", "b", "d"]
    backend.remove("b")
    assert len(backend) == 3
    with pytest.raises(ValueError, match="dimensions"):
        backend.search([1.0, 0.0, 0.0], 1)
    with pytest.raises(ValueError, match="dimensions"):
        backend.add("e", [1.0])


# --------------------------------------------------------------------------- #
# Phase 2: activation, gist and detail
# --------------------------------------------------------------------------- #


def test_bump_raises_never_lowers_and_decay_halves_and_prunes() -> None:
    state = ActivationState()
    assert state.level("a") == 0.0
    state.bump("a")
    assert state.level("a") == 1.0
    state.bump("a", to=0.3)  # never lowers
    assert state.level("a") == 1.0
    state.bump("b", to=0.3)
    state.bump("b", to=0.4)
    state.bump("c", to=0.0019)  # halves to 0.00095 < 1e-3: pruned
    state.bump("d", to=0.002)  # halves to exactly 1e-3: kept
    state.decay()
    assert state.level("a") == 0.5
    assert state.level("b") == pytest.approx(0.2)
    assert state.level("c") == 0.0 and "c" not in state.levels()
    assert state.level("d") == pytest.approx(0.001)
    state.decay(0.1)
    assert state.levels() == {"a": pytest.approx(0.05), "b": pytest.approx(0.02)}
    for bad in (-0.1, 1.5, math.nan):
        with pytest.raises(ValueError):
            state.bump("a", to=bad)
        with pytest.raises(ValueError):
            state.decay(bad)


def test_surface_is_gist_below_threshold_and_detail_at_it() -> None:
    entry = MemoryEntry("Q?", "A.", sources=["one.txt", "two.txt"])
    before = entry.to_dict() if hasattr(entry, "to_dict") else repr(entry)
    assert detail(entry) == "Q? A. (sources: one.txt, two.txt)"
    assert detail(MemoryEntry("Q?", "A.")) == "Q? A."
    state = ActivationState()
    assert surface(entry, state) == "Q?"
    state.bump(entry.id, to=0.49)
    assert surface(entry, state) == "Q?"
    state.bump(entry.id, to=0.5)
    assert surface(entry, state) == "Q? A. (sources: one.txt, two.txt)"
    assert surface(entry, state, threshold=0.6) == "Q?"
    after = entry.to_dict() if hasattr(entry, "to_dict") else repr(entry)
    assert before == after


# --------------------------------------------------------------------------- #
# Phase 3: Hebbian links and the OrganicMemory facade
# --------------------------------------------------------------------------- #


def test_hebbian_symmetric_capped_self_ignored_decay_prunes() -> None:
    h = HebbianWeights()
    h.strengthen("a", "b")
    assert h.weight("a", "b") == h.weight("b", "a") == 0.25
    h.strengthen("b", "a", by=0.9)
    assert h.weight("a", "b") == 1.0  # capped
    h.strengthen("a", "a")
    assert h.weight("a", "a") == 0.0 and "a" not in h.neighbors("a")
    h.strengthen("a", "c", by=0.0011)
    assert h.neighbors("a") == {"b": 1.0, "c": 0.0011}
    h.decay()  # x0.9: c falls to 0.00099 < 1e-3 and is dropped
    assert h.neighbors("a") == {"b": pytest.approx(0.9)}
    assert h.neighbors("c") == {}
    assert h.links() == 1
    with pytest.raises(ValueError):
        h.strengthen("a", "b", by=-0.25)
    with pytest.raises(ValueError):
        h.decay(1.1)


def test_organic_related_formula_and_candidates() -> None:
    # x's cosines: x2 1.0, mostly 0.8, diag SQ, y 0, z 0, negx 0 (clamped).
    store = make_store("x", "x2", "mostly_x", "diag", "y", "z", "negx")
    a, x2, mostly, diag, y, z, negx = ids_of(store)
    om = organic(store)
    assert om.related(a, k=2) == [(x2, pytest.approx(1.0)), (mostly, pytest.approx(0.8))]
    # A learned link adds its weight; the importance bias adds 0.2 * importance.
    om.hebbian.strengthen(a, diag, by=0.1)
    om.earned.record_recall(y)  # y: recall part 1/1 -> importance 1/3, bias 0.0667
    scores = dict(om.related(a, k=10))
    assert scores[diag] == pytest.approx(SQ + 0.1)
    assert scores[y] == pytest.approx(0.2 / 3)
    assert scores[mostly] == pytest.approx(0.8)
    assert scores[x2] == pytest.approx(1.0)  # clamp01 caps at 1
    assert scores[z] == 0.0 and scores[negx] == 0.0
    # Candidates at k=1 are the cosine top 2 (x2, mostly) plus learned neighbours;
    # a learned neighbour outside the cosine top 2k counts its link alone.
    om.hebbian.strengthen(a, z, by=0.95)
    assert om.related(a, k=1) == [(x2, pytest.approx(1.0))]
    assert om.related(a, k=2)[1] == (z, pytest.approx(0.95))


def test_organic_related_ties_by_insertion_ordinal() -> None:
    # y, z and negx all score 0 against x; ids sort the other way.
    store = make_store("x", "y", "z", "negx", ids=["d", "c", "b", "a"])
    om = organic(store)
    assert om.related("d", k=5) == [("c", 0.0), ("b", 0.0), ("a", 0.0)]
    om.hebbian.strengthen("d", "a", by=0.5)
    om.hebbian.strengthen("d", "b", by=0.5)
    assert om.related("d", k=2) == [("b", 0.5), ("a", 0.5)]


def test_recall_counts_bumps_spreads_and_strengthens() -> None:
    store = make_store("x", "mostly_x", "diag", "y", "z")
    a, mostly, diag, y, z = ids_of(store)
    om = organic(store)
    om.recall(a, k=3)
    assert om.earned.recalls(a) == 1
    assert all(om.earned.recalls(i) == 0 for i in (mostly, diag, y, z))
    assert om.state.level(a) == 1.0
    assert om.activation is om.state
    assert om.state.level(mostly) == pytest.approx(0.5 * 0.8)
    assert om.state.level(diag) == pytest.approx(0.5 * SQ)
    assert om.state.level(y) == 0.0  # a zero-relatedness neighbour is still traversed
    assert om.state.level(z) == 0.0
    for other in (mostly, diag, y):
        assert om.hebbian.weight(a, other) == 0.25
    assert om.hebbian.weight(a, z) == 0.0  # not among the 3
    # A second recall: the recall is counted before relatedness is read, and the
    # links just learned now lift the same neighbours.
    om.recall(a, k=3, spread=1.0)
    assert om.earned.recalls(a) == 2
    assert om.state.level(mostly) == pytest.approx(min(1.0, 0.8 + 0.25))
    assert om.hebbian.weight(a, mostly) == 0.5
    with pytest.raises(ValueError):
        om.recall(a, spread=2.0)


def test_recall_of_a_dead_or_unknown_entry_changes_nothing() -> None:
    store = make_store("x", "x2")
    _, b = ids_of(store)
    om = organic(store)
    om.recall("nope")
    store.bury(b)
    om.recall(b)
    assert om.state.levels() == {} and om.earned.recalls(b) == 0 and om.hebbian.links() == 0


def test_decay_halves_activation_and_scales_links() -> None:
    store = make_store("x", "mostly_x")
    a, b = ids_of(store)
    om = organic(store)
    om.recall(a)
    om.decay()
    assert om.state.level(a) == 0.5
    assert om.state.level(b) == pytest.approx(0.2)
    assert om.hebbian.weight(a, b) == pytest.approx(0.225)


def test_sync_follows_deaths_and_births() -> None:
    store = make_store("x", "x2", "mostly_x")
    a, b, c = ids_of(store)
    om = organic(store)
    om.recall(a)
    store.bury(b)
    # The dead entry is gone from every read, its links and activation forgotten.
    assert [i for i, _ in om.related(a)] == [c]
    assert om.hebbian.neighbors(a) == {c: 0.25}
    assert om.state.level(b) == 0.0
    late = store.add(MemoryEntry("x2", "answer", id="0late"))
    # c: 0.8 + 0.25 learned = 1.0 (capped) ties late's cosine 1.0; c joined first.
    assert om.related(a) == [(c, 1.0), (late.id, pytest.approx(1.0))]
    assert om.graph.ordinal(late.id) == 3


def test_population_since_lists_joins_and_departures_only() -> None:
    store = make_store("x", "y")
    a, b = ids_of(store)
    start = store.version
    assert store.population_since(start) == []
    store.credit(a, 0.5, cycle=1)  # a balance moved: counted, but nobody joined or left
    assert store.version > start and store.population_since(start) == []
    late = store.add(MemoryEntry("z", "answer", id="0late"))
    store.bury(b)
    heir = MemoryEntry("x2", "answer", id="0heir")
    store.merge_into(heir, [a, late.id])
    assert store.population_since(start) == [late.id, b, a, late.id, heir.id]
    assert store.population_since(store.version) == []
    assert store.population_since(store.version + 1) is None  # not a version it had


def test_population_since_forgets_far_back_and_sync_then_walks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import darwin_memo.store as store_module

    monkeypatch.setattr(store_module, "MOVES_KEPT", 2)
    store = make_store("x", "y")
    om = organic(store)
    start = store.version
    added = [store.add(MemoryEntry(q, "answer", id=f"0{q}")) for q in ("z", "diag", "mostly_x")]
    store.bury(added[1].id)
    store.bury(ids_of(store)[0])
    assert len(store.population_since(store.version - 2) or []) == 2
    assert store.population_since(start) is None  # more changes than it keeps
    living = ids_of(store)
    assert om.related(living[0], 10) == build_graph(store, table_embedder()).related(  # type: ignore[arg-type]
        living[0], 10
    )
    assert sorted(om.graph.ids) == sorted(living)


def test_reads_of_an_unchanged_store_make_no_pass_over_it() -> None:
    store = make_store("x", "x2", "mostly_x", "y")
    a, b, c, d = ids_of(store)
    passes: list[int] = []
    alive = store.alive

    def counted() -> list[MemoryEntry]:
        passes.append(1)
        return alive()

    store.alive = counted  # type: ignore[method-assign]  # counts the real passes
    om = organic(store)
    passes.clear()
    first = om.related(a, 3)
    for _ in range(5):
        assert om.related(a, 3) == first
        om.importance(b)
    assert len(passes) == 1  # the importance peaks, once; the population, never
    # A balance moved through the store: the credit peak follows it (one pass).
    store.set_energy(c, 3.0)
    assert om.related(a, 3)[1] == (c, pytest.approx(0.8 + 0.2 * (1 / 3)))
    assert len(passes) == 2
    # Births and deaths are followed without a walk; only the peaks are recomputed.
    store.bury(b)
    late = store.add(MemoryEntry("x2", "answer", id="0late"))
    assert [i for i, _ in om.related(a, 3)] == [late.id, c, d]
    assert len(passes) == 3
    assert om.graph.ordinal(late.id) == 4 and b not in om.graph
    # A recall changes the recall counts: the recall peak follows (a pass over the
    # recalled entries), the credit peak is kept.
    om.recall(a, k=1)
    assert dict(om.related(c, 3))[a] == pytest.approx(0.8 + 0.2 * (1 / 3))
    om.related(a, 3)
    assert len(passes) == 3


def test_surface_through_organic_memory() -> None:
    store = make_store("x", "y")
    a, b = ids_of(store)
    om = organic(store)
    om.recall(a)
    entry_a, entry_b = store.get(a), store.get(b)
    assert entry_a is not None and entry_b is not None
    assert om.surface(entry_a) == "x answer"
    assert om.surface(entry_b) == "y"  # 0.5 * 0 relatedness: stays a gist


# --------------------------------------------------------------------------- #
# Phase 4: earned importance and upkeep relief
# --------------------------------------------------------------------------- #


def test_importance_is_three_equal_thirds_over_living_peaks() -> None:
    store = make_store("x", "y", "z")
    a, b, c = ids_of(store)
    earned = EarnedImportance()
    assert earned.scores(store) == {a: 0.0, b: 0.0, c: 0.0}  # every peak is 0
    for _ in range(4):
        earned.record_recall(a)
    earned.record_recall(b)
    store.set_energy(a, 1.5)  # credit 0.5
    store.set_energy(b, 3.0)  # credit 2.0 (the peak)
    store.set_energy(c, 0.5)  # below spawn: credit 0
    scores = earned.scores(store, {a: 0.3, b: 2.0, c: -1.0})  # centrality clamped
    assert scores[a] == pytest.approx((1.0 + 0.25 + 0.3) / 3)
    assert scores[b] == pytest.approx((0.25 + 1.0 + 1.0) / 3)
    assert scores[c] == 0.0
    # Peaks are over the living: once a dies, b is the most recalled.
    store.bury(a)
    assert earned.scores(store)[b] == pytest.approx((1.0 + 1.0) / 3)


def test_centrality_and_importance_through_organic_memory() -> None:
    store = make_store("x", "mostly_x", "diag", "y")
    a, mostly, diag, y = ids_of(store)
    om = organic(store)
    om.hebbian.strengthen(a, mostly, by=0.5)
    central = om.centrality(k=2)
    # a's cosine top 2: mostly (0.8 + 0.5 learned, capped 1) and diag (SQ).
    assert central[a] == pytest.approx((1.0 + SQ) / 2)
    # y: cosine top 2 are mostly (0.6) and diag (SQ).
    assert central[y] == pytest.approx((0.6 + SQ) / 2)
    assert list(central) == [a, mostly, diag, y]  # graph order
    full = om.centrality()  # k=5: every other entry
    assert om.importance(a) == pytest.approx(full[a] / 3)
    assert om.importance(a, {a: 0.9}) == pytest.approx(0.3)
    assert om.importance("nope") == 0.0


def test_upkeep_scale_formula() -> None:
    store = make_store("x", "mostly_x", "y")
    a, b, c = ids_of(store)
    om = organic(store)
    om.recall(a)
    store.set_energy(a, 3.0)
    central = om.centrality()
    scale = om.upkeep_scale()
    importance = om.earned.scores(store, central)
    assert set(scale) == {a, b, c}
    for i in (a, b, c):
        assert scale[i] == pytest.approx(max(0.25, 1 - 0.5 * importance[i]))
    assert importance[a] == pytest.approx((1 + 1 + central[a]) / 3)
    assert min(scale.values()) >= 0.5 and max(scale.values()) <= 1.0
    assert om.earned.upkeep_scale(store, {a: 1.0})[a] == pytest.approx(0.5)


def test_phase_four_changes_upkeep_only_when_wired() -> None:
    def run(wired: bool) -> dict[str, float]:
        store = make_store("x", "mostly_x", "y", ids=["a", "b", "c"])
        om = organic(store)
        for _ in range(3):
            om.recall("a")
        store.charge_upkeep(scale=om.upkeep_scale() if wired else None)
        return {e.id: e.energy for e in store.alive()}

    flat, wired = run(False), run(True)
    assert flat == {"a": 0.95, "b": 0.95, "c": 0.95}
    store = make_store("x", "mostly_x", "y", ids=["a", "b", "c"])
    om = organic(store)
    for _ in range(3):
        om.recall("a")
    scale = om.upkeep_scale()
    for i in ("a", "b", "c"):
        assert wired[i] == pytest.approx(1.0 - 0.05 * scale[i])
    assert wired["a"] > wired["b"] > flat["b"]


# --------------------------------------------------------------------------- #
# Phases 1-3 never touch energy (a property test)
# --------------------------------------------------------------------------- #

OPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["related", "graph", "recall", "decay", "centrality", "importance", "scale", "surface"]
        ),
        st.integers(min_value=0, max_value=7),
        st.integers(min_value=0, max_value=6),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(
    questions=st.lists(st.sampled_from(sorted(set(VECTORS) - {"zero"})), min_size=1, max_size=8),
    energies=st.lists(st.floats(min_value=0.01, max_value=5.0), min_size=8, max_size=8),
    ops=OPS,
)
def test_the_organic_layer_never_touches_the_store(
    questions: list[str], energies: list[float], ops: list[tuple[str, int, int]]
) -> None:
    store = make_store(*questions)
    for entry, energy in zip(store.alive(), energies, strict=False):
        entry.energy = energy
    before = store.to_payload()
    om = organic(store)
    ids = ids_of(store)
    for op, pick, k in ops:
        entry_id = ids[pick % len(ids)]
        if op == "related":
            om.related(entry_id, k)
        elif op == "graph":
            om.graph.related(entry_id, k)
        elif op == "recall":
            om.recall(entry_id, k)
        elif op == "decay":
            om.decay()
        elif op == "centrality":
            om.centrality(max(1, k))
        elif op == "importance":
            om.importance(entry_id)
        elif op == "scale":
            om.upkeep_scale()  # computed, not passed to charge_upkeep
        else:
            entry = store.get(entry_id)
            assert entry is not None
            om.surface(entry)
    assert store.to_payload() == before


# --------------------------------------------------------------------------- #
# The turbovec backend (the organic extra)
# --------------------------------------------------------------------------- #


def test_turbovec_backend_matches_brute_force_recall_on_a_small_store() -> None:
    pytest.importorskip("turbovec", reason="the organic extra (turbovec) is not installed")
    from darwin_memo import demo_corpus
    from darwin_memo.organic.turbovec_backend import TurbovecBackend
    from darwin_memo.sim.encode import LocalEncoder

    store = MemoryStore()
    for entry in LocalEncoder().encode(demo_corpus()):
        store.add(entry)
    assert len(store) >= 10
    exact = build_graph(store)
    approx = build_graph(store, backend=TurbovecBackend(256))
    k = 3
    hits = total = 0
    for entry_id in ids_of(store):
        want = {i for i, _ in exact.related(entry_id, k)}
        got = {i for i, _ in approx.related(entry_id, k)}
        hits += len(want & got)
        total += len(want)
        assert exact.related(entry_id, 1)[0][0] == approx.related(entry_id, 1)[0][0]
    assert hits / total >= 0.95
    # Removal and re-adding, and the published constructor's checks.
    first = ids_of(store)[0]
    approx.remove(first)
    assert all(i != first for e in ids_of(store)[1:] for i, _ in approx.related(e, 20))
    with pytest.raises(ValueError, match="multiple of 8"):
        TurbovecBackend(12)
    with pytest.raises(ValueError, match="bit_width"):
        TurbovecBackend(16, bit_width=9)
