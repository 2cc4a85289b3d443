"""Writing store files: the indented encoder is the standard one, byte for byte, and
saving pauses the cyclic collector without ever leaving it off."""

from __future__ import annotations

import enum
import gc
import json
import math
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from darwin_memo import MemoryEntry, MemoryStore, collector
from darwin_memo.backends.jsonfile import dumps_indented, write_json_atomic
from darwin_memo.errors import StoreFormatError
from darwin_memo.ledger import Ledger
from darwin_memo.records.entry import read_entry

leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
documents = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.lists(inner, max_size=3).map(tuple)
        | st.lists(st.text(), max_size=4)  # the lists of strings entries hold, joined in C
        | st.dictionaries(st.text(), inner, max_size=5)
    ),
    max_leaves=40,
)


def standard(payload: Any, indent: int = 2) -> str:
    return json.dumps(payload, indent=indent, ensure_ascii=False, allow_nan=False)


@settings(max_examples=400, deadline=None)
@given(documents, st.sampled_from([0, 1, 2, 4]))
def test_same_text_as_the_standard_encoder(payload: Any, indent: int) -> None:
    assert dumps_indented(payload, indent) == standard(payload, indent)


class Colour(str, enum.Enum):
    RED = "red"


class Count(int):
    def __repr__(self) -> str:
        return "Count()"


@pytest.mark.parametrize(
    "payload",
    [
        {1: "int key", None: "none key", 2.5: "float key", False: "bool key"},
        {"kind": Colour.RED, "n": Count(3)},  # subclasses: the standard encoder decides
        [Colour.RED, "plain"],
        {"nested": {"deep": [[], {}, [{}], [[1, 2.0, 'x\u2028\x00"\\']]]}},
        {"energy": 1e-320, "big": 1e300, "neg": -0.0},
    ],
)
def test_unusual_values_match_the_standard_encoder(payload: Any) -> None:
    assert dumps_indented(payload) == standard(payload)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("where", ["top", "dict", "list"])
def test_non_finite_numbers_are_refused(bad: float, where: str) -> None:
    payload: Any = {"top": bad, "dict": {"energy": bad}, "list": [1, bad]}[where]
    with pytest.raises(ValueError, match="not JSON compliant"):
        dumps_indented(payload)


@pytest.mark.slow
def test_values_json_has_no_form_for_raise_what_the_standard_encoder_raises() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps_indented({"when": object()})
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular reference"):
        dumps_indented({"loop": cycle})


def test_write_refuses_non_finite_with_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    with pytest.raises(StoreFormatError, match=r"refusing to write .*s\.json"):
        write_json_atomic(path, {"energy": math.nan})
    assert not path.exists()


def test_saved_store_is_the_standard_text(tmp_path: Path) -> None:
    store = MemoryStore()
    for i in range(30):
        store.add(
            MemoryEntry(
                question=f"How do I fix flaky test {i} in \u00e9t\u00e9?",
                answer=f'Pin the clock; see INC-{i} \u2014 "quoted" and \\ slashed.',
                sources=["ci", f"run-{i}"] if i % 2 else [],
                pinned=i % 5 == 0,
            )
        )
    ledger = Ledger(store)
    ledger.decide("flaky test clock")
    path = tmp_path / "store.json"
    ledger.save(path)
    text = path.read_text(encoding="utf-8")
    assert text == standard(json.loads(text)) + "\n"
    assert Ledger.load(path).store.get(next(iter(store.alive())).id) is not None


def test_paused_restores_the_collector_state() -> None:
    assert gc.isenabled()
    with collector.paused():
        assert not gc.isenabled()
        with collector.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block found it off and leaves it off
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector.paused():
        raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with collector.paused():
            pass
        assert not gc.isenabled()  # off before, off after
    finally:
        gc.enable()


def test_a_failed_save_leaves_the_collector_on(tmp_path: Path) -> None:
    ledger = Ledger(MemoryStore())
    with pytest.raises(Exception, match="does not exist"):
        ledger.save(tmp_path / "missing" / "store.json")
    assert gc.isenabled()
    with pytest.raises(Exception, match="does not exist"):
        ledger.store.save(tmp_path / "missing" / "store.json")
    assert gc.isenabled()


class _Careful(dict):  # type: ignore[type-arg]
    """A dict that is not exactly ``dict``: ``from_dict`` reads it field by field."""


field_values = (
    st.text(max_size=8)
    | st.integers(min_value=-3, max_value=3)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.booleans()
    | st.none()
    | st.lists(st.text(max_size=4), max_size=3)
    | st.lists(st.integers() | st.text(max_size=2), max_size=3)
    | st.sampled_from(["experience", "explicit", "consolidated", "bogus"])
)
entry_dicts = st.dictionaries(
    # every field an entry has, and one this version does not know
    st.sampled_from([*(f.name for f in fields(MemoryEntry) if f.name != "extra"), "custom"]),
    field_values,
)


@settings(max_examples=600, deadline=None)
@given(entry_dicts, st.booleans())
def test_reading_a_plain_entry_quickly_reads_what_the_careful_path_reads(
    raw: dict[str, Any], complete: bool
) -> None:
    if complete:  # a plain entry with a few fields changed: mostly the quick path's cases
        raw = {**PLAIN, **dict(list(raw.items())[:2])}
    same_reading(raw)


PLAIN = MemoryEntry(question="q", answer="a", sources=["ci"], lineage=["x"], id="e1").to_dict()


def test_a_plain_entry_is_written_in_the_order_stores_read_quickly() -> None:
    """``read_entry`` takes its quick path for the keys in the order ``to_dict`` writes."""
    from darwin_memo.records.entry import _WRITTEN_KEYS

    assert tuple(PLAIN) == _WRITTEN_KEYS


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"energy": math.nan},
        {"energy": math.inf},
        {"energy": 2},
        {"lineage": [1]},
        {"sources": ["ok", None]},
        {"sources": "ci"},
        {"kind": "bogus"},
        {"kind": "consolidated"},
        {"id": ""},
        {"question": None},
        {"answer": 3},
        {"born_cycle": 2.0},
        {"born_cycle": 2.5},
        {"uses": True},
        {"custom": {"kept": 1}},
        {"pinned": True, "probation": 2},
    ],
)
def test_each_check_holds_on_the_quick_path(change: dict[str, Any]) -> None:
    same_reading({**PLAIN, **change})
    missing = dict(PLAIN)
    for key in change:
        missing.pop(key, None)
    same_reading(missing)


def same_reading(raw: dict[str, Any]) -> None:
    try:
        careful: MemoryEntry | str = MemoryEntry.from_dict(_Careful(raw))
    except StoreFormatError as exc:
        careful = str(exc)
    try:
        quick: MemoryEntry | str = MemoryEntry.from_dict(dict(raw))
    except StoreFormatError as exc:
        quick = str(exc)
    try:  # what a store reads its decoded entries with (a dict it owns)
        kept: MemoryEntry | str = read_entry(json.loads(json.dumps(raw)))
    except StoreFormatError as exc:
        kept = str(exc)
    assert quick == careful
    assert kept == careful
    for read in (quick, kept):
        if isinstance(read, MemoryEntry) and isinstance(careful, MemoryEntry):
            assert read.extra == careful.extra
            assert read.to_dict() == careful.to_dict()
            assert type(read.energy) is float
            assert [type(x) for x in read.sources] == [type(x) for x in careful.sources]
