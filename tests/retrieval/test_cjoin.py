"""The compiled join (``darwin_memo._cjoin``) gives the published rule's groups.

It is optional: where no C compiler was found at install time the package runs the
same join in Python. These tests compare it with the pairwise definition and with
the Python join; they skip where it is not built, unless
``DARWIN_MEMO_REQUIRE_EXTENSION=1`` (as ``.ci/run`` sets) makes that a failure.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import random
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_consolidation import _templated_sets

from conftest import compiled_or_skip
from darwin_memo import MemoryEntry, MemoryStore


def _compiled() -> ModuleType:
    return compiled_or_skip("_cjoin")  # type: ignore[no-any-return]


def _compiled_wanted(monkeypatch: pytest.MonkeyPatch) -> None:
    """For a test of the route to the compiled join: the join built, and wanted even
    where the suite runs under ``DARWIN_MEMO_PURE_PYTHON=1``."""
    from darwin_memo.native import PURE_PYTHON_ENV

    _compiled()
    monkeypatch.delenv(PURE_PYTHON_ENV, raising=False)


def _greedy(sets: list[Any], threshold: float) -> list[list[int]]:
    """The published greedy pass, pair by pair, with the pairwise scan's expression."""
    taken: set[int] = set()
    groups: list[list[int]] = []
    for i, a in enumerate(sets):
        if i in taken:
            continue
        taken.add(i)
        if not a:
            continue
        partners = [
            j
            for j, b in enumerate(sets)
            if j not in taken and b and len(a & b) / len(a | b) >= threshold
        ]
        taken.update(partners)
        if partners:
            groups.append([i, *partners])
    return groups


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 160), st.floats(0.05, 1.2))
def test_groups_equal_the_pairwise_greedy_pass(seed: int, size: int, threshold: float) -> None:
    cjoin = _compiled()
    rnd = random.Random(seed)
    sets = _templated_sets(rnd, size)
    assert cjoin.greedy_groups(sets, threshold) == _greedy(sets, threshold)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 60), st.integers(1, 12), st.floats(0.05, 1.0))
def test_groups_on_small_vocabularies(seed: int, size: int, vocab: int, threshold: float) -> None:
    """Tiny sets from a few words: pairs one shared token can make, exact ties."""
    cjoin = _compiled()
    rnd = random.Random(seed)
    words = [f"w{i}" for i in range(vocab)]
    sets = [frozenset(rnd.sample(words, rnd.randint(0, min(4, vocab)))) for _ in range(size)]
    assert cjoin.greedy_groups(sets, threshold) == _greedy(sets, threshold)


def test_thresholds_on_the_edge_of_a_fraction() -> None:
    """Overlaps whose similarity is exactly the threshold pass, as in the pairwise scan."""
    cjoin = _compiled()
    base = frozenset(f"t{i}" for i in range(20))
    sets = [base, *(frozenset(list(base)[:k]) | {f"x{k}"} for k in range(1, 20))]
    for k in range(1, 21):
        for threshold in (k / 21, k / 20, math.nextafter(k / 20, 0), math.nextafter(k / 20, 1)):
            assert cjoin.greedy_groups(sets, threshold) == _greedy(sets, threshold), threshold


def test_large_sets() -> None:
    """Sets of hundreds of tokens (beyond the table of needed overlaps it caches)."""
    cjoin = _compiled()
    rnd = random.Random(11)
    vocab = [f"v{i}" for i in range(3000)]
    base = [set(rnd.sample(vocab, rnd.randint(400, 900))) for _ in range(6)]
    sets = []
    for _ in range(60):
        words = set(rnd.choice(base))
        for w in rnd.sample(sorted(words), k=rnd.randint(0, len(words) // 2)):
            words.discard(w)
        words.update(rnd.sample(vocab, rnd.randint(0, 200)))
        sets.append(frozenset(words))
    for threshold in (0.3, 0.55, 0.8):
        assert cjoin.greedy_groups(sets, threshold) == _greedy(sets, threshold)


def test_any_hashable_tokens_and_repeats() -> None:
    cjoin = _compiled()
    sets = [[1, 2, 3, 3], (1, 2, 3), {"a", "b"}, frozenset({"a", "b", "c"}), [], [(1, 2)]]
    as_sets = [frozenset(s) for s in sets]
    assert cjoin.greedy_groups(sets, 0.6) == _greedy(as_sets, 0.6) == [[0, 1], [2, 3]]


def test_bad_input_is_refused() -> None:
    cjoin = _compiled()
    for threshold in (0.0, -1.0, math.nan):
        with pytest.raises(ValueError, match="threshold"):
            cjoin.greedy_groups([{"a"}], threshold)
    with pytest.raises(TypeError):
        cjoin.greedy_groups(5, 0.5)
    with pytest.raises(TypeError):
        cjoin.greedy_groups([{"a"}, 3], 0.5)
    with pytest.raises(TypeError):
        cjoin.greedy_groups([[["unhashable"]]], 0.5)
    assert cjoin.greedy_groups([], 0.5) == []


@contextlib.contextmanager
def _pure_python() -> Iterator[None]:
    from darwin_memo.retrieval.simjoin import PURE_PYTHON_ENV

    kept = os.environ.get(PURE_PYTHON_ENV)
    os.environ[PURE_PYTHON_ENV] = "1"
    try:
        yield
    finally:
        if kept is None:
            del os.environ[PURE_PYTHON_ENV]
        else:
            os.environ[PURE_PYTHON_ENV] = kept


SLOTS = [f"svc{i}" for i in range(40)]
TEMPLATES = [
    "is it safe to {a} the {b} of {c} during business hours",
    "why does {c} {a} when the {b} hangs",
    "how do I fix {c} failing in {b} on {a} after the deploy of the api worker",
]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 200), st.floats(0.2, 1.0))
def test_consolidation_compiled_and_in_python_alike(seed: int, size: int, threshold: float) -> None:
    """A store's groups are the same with the compiled join and without it."""
    _compiled()
    from darwin_memo.retrieval.simjoin import _groups_indexed, _groups_pairwise

    rnd = random.Random(seed)
    store = MemoryStore()
    for _ in range(size):
        text = rnd.choice(TEMPLATES).format(
            a=rnd.choice(SLOTS[:5]), b=rnd.choice(SLOTS), c=rnd.choice(SLOTS[30:])
        )
        store.add(MemoryEntry(text, "", energy=rnd.choice([0.5, 1.0, 2.0])))
    compiled = _groups_indexed(store, store.retriever, threshold, (), "off")  # type: ignore[arg-type]
    with _pure_python():
        python = _groups_indexed(store, store.retriever, threshold, (), "off")  # type: ignore[arg-type]
    want = _groups_pairwise(store, threshold, (), "off")
    ids = [[[e.id for e in g] for g in groups] for groups in (compiled, python, want)]
    assert ids[0] == ids[1] == ids[2]


def test_the_environment_variable_keeps_the_join_in_python(monkeypatch: Any) -> None:
    _compiled_wanted(monkeypatch)
    module = importlib.import_module("darwin_memo.retrieval.simjoin")
    calls: list[int] = []
    original = module._jaccard_partners

    def spy(tokens: Any, threshold: float, growing: bool = False) -> Any:
        calls.append(len(tokens))
        return original(tokens, threshold, growing)

    monkeypatch.setattr(module, "_jaccard_partners", spy)
    store = MemoryStore()
    for i in range(30):
        store.add(MemoryEntry(f"restart the worker of svc{i % 7}", "drain it first"))
    compiled = module.merge_groups(store, 1)
    assert calls == [] and compiled
    store = MemoryStore()
    for i in range(30):
        store.add(MemoryEntry(f"restart the worker of svc{i % 7}", "drain it first"))
    with _pure_python():
        python = module.merge_groups(store, 1)
    assert calls == [30]
    assert [m.members for m in python] != [] and len(python) == len(compiled)


def test_more_anchors_than_the_stamps_hold() -> None:
    """Past 16,383 anchors the meeting stamps start over: no stale stamp counts."""
    cjoin = _compiled()
    from darwin_memo.retrieval.simjoin import _jaccard_partners

    rnd = random.Random(3)
    words = [f"w{i}" for i in range(300)]
    sets = [frozenset(rnd.sample(words, rnd.randint(2, 7))) for _ in range(20_000)]
    partners = _jaccard_partners(sets, 0.55, growing=True)
    want: list[list[int]] = []
    skip: set[int] = set()
    for i in range(len(sets)):
        if i in skip:
            continue
        skip.add(i)
        found = partners(i, skip)
        skip.update(found)
        if found:
            want.append([i, *found])
    assert len(want) > 100
    assert cjoin.greedy_groups(sets, 0.55) == want


def _many_sets() -> list[frozenset[str]]:
    rnd = random.Random(4)
    words = [f"w{i}" for i in range(300)]
    return [frozenset(rnd.sample(words, rnd.randint(2, 7))) for _ in range(20_000)]


def test_a_sink_gets_the_groups_in_batches_in_order() -> None:
    cjoin = _compiled()
    sets = _many_sets()
    batches: list[list[list[int]]] = []
    assert cjoin.greedy_groups(sets, 0.55, batches.append) is None
    assert len(batches) > 1 and all(batches)
    assert [group for batch in batches for group in batch] == cjoin.greedy_groups(sets, 0.55)


def test_an_error_in_the_sink_stops_the_join() -> None:
    cjoin = _compiled()
    calls: list[int] = []

    def sink(batch: list[list[int]]) -> None:
        calls.append(len(batch))
        raise RuntimeError("nobody listens")

    with pytest.raises(RuntimeError, match="nobody listens"):
        cjoin.greedy_groups(_many_sets(), 0.55, sink)
    assert len(calls) == 1
    with pytest.raises(TypeError, match="sink"):
        cjoin.greedy_groups([{"a"}], 0.5, 5)


def test_the_stream_runs_the_join_on_a_thread_it_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    """Groups in order from the thread; closing early stops it; its errors reach us."""
    import threading

    _compiled_wanted(monkeypatch)
    from darwin_memo.retrieval.simjoin import _native_stream

    sets = _many_sets()
    stream = _native_stream(sets, 0.55)
    assert stream is not None
    first = next(stream)
    stream.close()
    assert not [t for t in threading.enumerate() if t.name == "darwin-memo-join"]
    whole = _native_stream(sets, 0.55)
    assert whole is not None
    groups = [group for batch in whole for group in batch]
    assert groups[: len(first)] == first
    assert groups == _compiled().greedy_groups(sets, 0.55)
    broken = _native_stream([frozenset({"a"}), [["unhashable"]]], 0.55)  # type: ignore[list-item]
    assert broken is not None
    with pytest.raises(TypeError):
        list(broken)
    assert not [t for t in threading.enumerate() if t.name == "darwin-memo-join"]


SEPARATORS = [" ", "  ", "\t", "\n", "\xa0", "\u3000", "\u2003", "\x1c", "\x85", "\u2029"]
LETTERS = ["a", "b", "é", "ß", "中", "文", "\U0001f600", "z", "0", "."]


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 80), st.floats(0.05, 1.0))
def test_texts_split_as_str_split_does(seed: int, size: int, threshold: float) -> None:
    """Token sets given as text (a store's ``toks`` column): the groups of their
    ``str.split()`` sets, across every separator Python splits on and every width of
    character (the same token inside texts of different widths is one token)."""
    cjoin = _compiled()
    rnd = random.Random(seed)
    vocab = ["".join(rnd.choices(LETTERS, k=rnd.randint(1, 3))) for _ in range(25)]
    texts = []
    for _ in range(size):
        words = rnd.choices(vocab, k=rnd.randint(0, 8))
        parts = [rnd.choice(["", *SEPARATORS])]
        for w in words:
            parts += [w, rnd.choice(SEPARATORS)]
        texts.append("".join(parts))
    sets = [frozenset(t.split()) for t in texts]
    assert cjoin.greedy_groups(texts, threshold) == _greedy(sets, threshold)


#: Every character ``str.split()`` splits on, as Python itself says (``str.isspace``).
WHITESPACE = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]


def test_every_character_splits_as_str_split_splits_on_it() -> None:
    """The join reads texts in UTF-8 and knows the whitespace by its bytes: ``x<c>y``
    is the set {x, y} exactly for the characters ``c`` Python splits on, among all of
    them (lone surrogates included)."""
    cjoin = _compiled()
    chars = [chr(c) for c in range(sys.maxunicode + 1) if chr(c) not in "xy"]
    texts = ["x y", *(f"x{c}y" for c in chars)]
    expect = [0, *(i for i, c in enumerate(chars, 1) if c.isspace())]
    assert cjoin.greedy_groups(texts, 1.0) == [expect]
    assert len(expect) - 1 == len(WHITESPACE) >= 29  # U+0009 to U+3000


#: Any character, lone surrogates and whitespace of every kind, and a few that repeat.
_ANY_CHAR = st.one_of(
    st.characters(codec=None, blacklist_categories=()),
    st.sampled_from(["\ud800", "\udfff", "\udce9", "a", "\xe9", "\u4e2d"]),
    st.sampled_from(WHITESPACE),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text(_ANY_CHAR, min_size=1, max_size=4), min_size=1, max_size=12),
    st.lists(st.lists(st.integers(0, 11), max_size=8), max_size=40),
    st.lists(st.sampled_from(WHITESPACE), min_size=1, max_size=5),
    st.floats(0.05, 1.0),
)
def test_any_texts_group_as_their_str_split_sets(
    vocab: list[str], picks: list[list[int]], separators: list[str], threshold: float
) -> None:
    """Texts of any characters (every script and width, lone surrogates, any whitespace,
    tokens that hold whitespace themselves) group as the sets ``str.split()`` makes of
    them, in the pairwise definition."""
    cjoin = _compiled()
    texts = []
    for k, pick in enumerate(picks):
        words = [vocab[i % len(vocab)] for i in pick]
        sep = separators[k % len(separators)]
        texts.append(sep + sep.join(words) if k % 3 == 0 else sep.join(words))
    sets = [frozenset(t.split()) for t in texts]
    assert cjoin.greedy_groups(texts, threshold) == _greedy(sets, threshold)
    assert cjoin.greedy_groups(sets, threshold) == _greedy(sets, threshold)


def test_the_build_uses_the_stable_abi() -> None:
    """Built by setup.py with ``py_limited_api``: one ``abi3`` build for every Python
    from 3.10 (a build against one version's full API would be named for it)."""
    cjoin = _compiled()
    name = os.path.basename(str(cjoin.__file__))
    assert name.endswith(".pyd" if sys.platform == "win32" else ".abi3.so"), name
    source = os.path.join(os.path.dirname(str(cjoin.__file__)), "_cjoin.c")
    if os.path.exists(source):  # an editable install: the source is beside it
        with open(source, encoding="utf-8") as fh:
            assert "#define Py_LIMITED_API 0x030A0000\n" in fh.read()


def test_texts_and_sets_are_not_mixed() -> None:
    cjoin = _compiled()
    with pytest.raises(TypeError, match="text"):
        cjoin.greedy_groups(["a b", {"a", "b"}], 0.5)
    with pytest.raises(TypeError, match="text"):
        cjoin.greedy_groups([{"a", "b"}, "a b"], 0.5)
    assert cjoin.greedy_groups(["a b", "b a", ""], 0.5) == [[0, 1]]


def test_merge_candidates_from_texts_make_sets_when_asked() -> None:
    from darwin_memo.retrieval.simjoin import MergeCandidates

    found = MergeCandidates(["x", "y"], None, [], lambda _: [], texts=["b a", "c\u3000a"])
    assert found.join_input() == ["b a", "c\u3000a"]
    assert found.tokens == [frozenset({"a", "b"}), frozenset({"a", "c"})]
    assert found.join_input() == found.tokens
    with pytest.raises(ValueError, match="tokens or texts"):
        MergeCandidates(["x"], None, [], lambda _: [])


def test_beyond_its_size_the_join_stays_in_python(monkeypatch: Any) -> None:
    _compiled_wanted(monkeypatch)
    module = importlib.import_module("darwin_memo.retrieval.simjoin")
    monkeypatch.setattr(module, "COMPILED_JOIN_MAX", 10)
    assert module._native_stream([frozenset({"a"})] * 10, 0.5) is None
    assert module._native_stream([frozenset({"a"})] * 9, 0.5) is not None
