"""The compiled reader of a JSON store's plain entries (``darwin_memo._cload``).

``MemoryStore.from_payload`` hands the run of plain entries (the shape ``to_dict``
writes for a lesson with no lifecycle fields) to C and reads every other record in
Python. These tests read the same documents both ways and compare everything the
store holds: entries (their classes, kinds and fields), the order, the opening
posting (summed in the same order, so equal to the last bit), the problems a lenient
read lists and the error a strict read raises. They skip where the extension is not
built, unless ``DARWIN_MEMO_REQUIRE_EXTENSION=1`` (as ``.ci/run`` sets).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import darwin_memo.store as store_module
from conftest import compiled_or_skip
from darwin_memo.errors import StoreFormatError
from darwin_memo.store import MemoryStore
from darwin_memo.types import _WRITTEN_KEYS, MemoryEntry


@pytest.fixture(autouse=True)
def _compiled_reader() -> Iterator[None]:
    compiled_or_skip("_cload")
    store_module._COMPILED.clear()
    yield
    store_module._COMPILED.clear()


def _read(payload: Any, *, compiled: bool, strict: bool = True) -> MemoryStore:
    store_module._COMPILED.clear()
    if not compiled:
        store_module._COMPILED["plain_entries"] = None
    try:
        return MemoryStore.from_payload(copy.deepcopy(payload), strict=strict)
    finally:
        store_module._COMPILED.clear()


def _state(store: MemoryStore) -> Any:
    def entry(e: MemoryEntry) -> Any:
        return (type(e), type(e.kind), e.to_dict(), e.extra, e.pinned, e.probation, e.juvenile)

    return (
        [entry(e) for e in store.alive()],
        [entry(e) for e in store.graveyard()],
        store.books.totals,
        [(p.where, p.index, p.message) for p in store.load_problems],
        store._unreadable,
        store.payload_extra,
    )


def _plain(i: int, energy: float = 1.0) -> dict[str, Any]:
    return MemoryEntry(f"question {i}?", f"answer {i}.", energy=energy, id=f"e{i:04d}").to_dict()


def test_a_plain_entry_is_the_shape_the_reader_takes() -> None:
    assert tuple(_plain(1)) == _WRITTEN_KEYS
    reader = store_module._compiled("plain_entries")
    assert reader is not None
    population: dict[str, Any] = {}
    living: list[Any] = []
    stop, opening = reader(
        [_plain(1, 0.5), _plain(2, 0.25), {"question": "odd"}, _plain(3)],
        0,
        10.0,
        *store_module._PLAIN_SHAPE,
        population,
        living,
    )
    assert (stop, opening) == (2, 10.75)  # stopped at the record it does not take
    assert list(population) == ["e0001", "e0002"] and living == list(population.values())
    assert living[0] == MemoryEntry.from_dict(_plain(1, 0.5))
    stop, _ = reader([_plain(1)], 0, 0.0, *store_module._PLAIN_SHAPE, population, [])
    assert stop == 0  # an id the population holds: the caller names the duplicate


#: Records of every kind: plain ones and ones a single change takes off the shape.
_VARIANTS: list[tuple[str, Any]] = [
    ("plain", None),
    ("int energy", ("energy", 2)),
    ("bool uses", ("uses", True)),
    ("nan energy", ("energy", float("nan"))),
    ("infinite energy", ("energy", float("inf"))),
    ("empty id", ("id", "")),
    ("unknown kind", ("kind", "rumour")),
    ("other kind", ("kind", "inferred")),
    ("source not text", ("sources", ["agent", 3])),
    ("lineage not text", ("lineage", [None])),
    ("pinned", ("pinned", True)),
    ("reordered", "reorder"),
    ("key missing", "drop"),
    ("not an object", "list"),
    ("duplicate id", "dup"),
]


def _record(i: int, variant: int, energy: float) -> Any:
    _name, change = _VARIANTS[variant]
    d = _plain(i, energy)
    if change == "reorder":
        d = {"id": d.pop("id"), **d}
    elif change == "drop":
        del d["recorded_ts"]
    elif change == "list":
        return [d["question"], d["answer"]]
    elif change == "dup":
        d["id"] = "e0000"
    elif change is not None:
        key, value = change
        d[key] = value
    return d


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, len(_VARIANTS) - 1),
            st.floats(-5.0, 5.0, allow_nan=False) | st.sampled_from([1.0, 0.1, 1e-12]),
        ),
        max_size=40,
    ),
    st.integers(0, 5),
    st.booleans(),
)
def test_compiled_and_python_reads_agree(
    records: list[tuple[int, float]], in_graveyard: int, strict: bool
) -> None:
    made = [_record(i, variant, energy) for i, (variant, energy) in enumerate(records)]
    payload = {
        "config": {"max_energy": 10.0},
        "entries": made[in_graveyard:],
        "graveyard": made[:in_graveyard],
        "other": {"kept": True},
    }
    outcomes = []
    for compiled in (True, False):
        try:
            outcomes.append(("ok", _state(_read(payload, compiled=compiled, strict=strict))))
        except StoreFormatError as exc:
            outcomes.append(("error", str(exc)))
    assert outcomes[0] == outcomes[1]


def test_a_store_file_reads_the_same_both_ways(tmp_path: Any) -> None:
    store = MemoryStore()
    for i in range(300):
        store.add(MemoryEntry(f"how do I fix job {i}?", f"rerun step {i % 7}", energy=0.1 + i / 97))
    pinned = MemoryEntry("keep me", "always", pinned=True)
    store.add(pinned)
    path = tmp_path / "store.json"
    store.save(path)
    payload = json.loads(path.read_text())
    a, b = _read(payload, compiled=True), _read(payload, compiled=False)
    assert _state(a) == _state(b)
    assert a.books.totals["opening"] == b.books.totals["opening"]
    assert a.get(pinned.id) is not None and a.get(pinned.id).pinned  # type: ignore[union-attr]
    # The entries keep the decoded lists (as read_entry does), and are searchable.
    entry, _score = a.retrieve("how do I fix job 42?", 1)[0]
    assert entry.answer == "rerun step 0"


def test_a_duplicate_id_is_named_as_before() -> None:
    payload = {"entries": [_plain(1), _plain(2), _plain(1)]}
    with pytest.raises(StoreFormatError, match=r"entries\[2\]: entry 'e0001': the id appears"):
        _read(payload, compiled=True)
    lenient = _read(payload, compiled=True, strict=False)
    assert [p.index for p in lenient.load_problems] == [2] and len(lenient) == 2


# -- read_document: the file's bytes, plain entries made while decoding ----------------


def _load(path: Any, *, compiled: bool, strict: bool = True) -> Any:
    store_module._COMPILED.clear()
    if not compiled:
        store_module._COMPILED["read_document"] = None
    try:
        return ("ok", _state(MemoryStore.load(path, strict=strict)))
    except StoreFormatError as exc:
        return ("error", str(exc))
    finally:
        store_module._COMPILED.clear()


_TEXT = st.text(
    alphabet=st.sampled_from([*'ab "\\/\n\t\u00e9\u2014\u5b66\U0001f600\x01', "\ud800"]),
    max_size=12,
)
_NUMBER = st.sampled_from(["1.0", "1", "-0.0", "1e0", "2.5E+1", "0.1", "-3", "1e999", "NaN"])
_INT = st.sampled_from(["0", "-1", "7", "-0", "12345678901234567890", "1.0", "true"])


@st.composite
def _documents(draw: Any) -> str:
    """Store files as text: entries written in the plain shape with any of the number
    spellings JSON allows, strings with escapes and non-ASCII, other shapes, other
    top-level keys, any indentation, escaped or raw non-ASCII."""
    entries = []
    for i in range(draw(st.integers(0, 6))):
        if draw(st.booleans()):
            entries.append(_plain(i, draw(st.sampled_from([1.0, 0.25, -1.5]))))
        else:
            entries.append(
                {
                    "question": draw(_TEXT) or "q",
                    "answer": draw(_TEXT),
                    "kind": draw(st.sampled_from(["experience", "explicit", "nope"])),
                    "sources": [draw(_TEXT)],
                    "energy": f"@{draw(_NUMBER)}@",
                    "born_cycle": f"@{draw(_INT)}@",
                    "recorded_ts": draw(_TEXT),
                    "last_used_cycle": f"@{draw(_INT)}@",
                    "uses": f"@{draw(_INT)}@",
                    "lineage": draw(st.lists(_TEXT, max_size=2)),
                    "id": draw(st.sampled_from([f"x{i}", "e0001", ""])),
                }
            )
    payload: dict[str, Any] = {"config": {"max_energy": 5.0, "upkeep": 0.05}, "entries": entries}
    if draw(st.booleans()):
        payload["graveyard"] = [_plain(90)]
    if draw(st.booleans()):
        payload["ledger"] = {"tick_count": 3, "pending": [], "deep": [[[{"a": [1, {}]}]]]}
    indent = draw(st.sampled_from([None, 0, 1, 2, "\t"]))
    text = json.dumps(payload, indent=indent, ensure_ascii=draw(st.booleans()))
    text = text.replace('"@', "").replace('@"', "")  # the numbers as spelled above
    if draw(st.booleans()):  # a duplicate top-level key: the last one wins
        text = text[: text.rindex("}")] + ', "entries": []}'
    return text


@settings(max_examples=200, deadline=None)
@given(_documents(), st.booleans(), st.integers(0, 3), st.integers(0, 10_000))
def test_read_document_loads_what_json_loads_loads(
    text: str, strict: bool, damage: int, where: int
) -> None:
    import tempfile
    from pathlib import Path

    raw = text.encode("utf-8", "surrogatepass")
    if damage and raw:  # a cut, a stray byte or a lost byte somewhere
        at = where % len(raw)
        raw = [raw[:at], raw[:at] + b"}" + raw[at:], raw[:at] + raw[at + 1 :]][damage - 1]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "store.json"
        path.write_bytes(raw)
        compiled, python = (
            _load(path, compiled=True, strict=strict),
            _load(path, compiled=False, strict=strict),
        )
    assert compiled == python


def test_read_document_makes_the_plain_entries_itself(tmp_path: Any) -> None:
    path = tmp_path / "store.json"
    path.write_text(
        json.dumps({"entries": [_plain(1), {"question": "q", "answer": "a", "id": "z"}]}),
        encoding="utf-8",
    )
    reader = store_module._compiled("read_document")
    assert reader is not None
    made = reader(path.read_bytes(), _WRITTEN_KEYS, store_module._KINDS, MemoryEntry, json.loads)
    first, second = made["entries"]
    assert type(first) is MemoryEntry and first == MemoryEntry.from_dict(_plain(1))
    assert second == {"question": "q", "answer": "a", "id": "z"}  # json.loads's, as it is
    assert reader(b"[1, 2]", _WRITTEN_KEYS, store_module._KINDS, MemoryEntry, json.loads) is None
    store = MemoryStore.load(path)
    assert [e.id for e in store.alive()] == ["e0001", "z"]


def test_a_subclass_with_its_own_from_payload_is_given_the_document(tmp_path: Any) -> None:
    """``load`` reads entries in C only for ``MemoryStore``'s own ``from_payload``; a
    subclass that overrides it still gets the decoded document, dicts and all."""
    seen: list[Any] = []

    class Noted(MemoryStore):
        @classmethod
        def from_payload(cls, payload: Any, retriever: Any = None, *, strict: bool = True) -> Any:
            seen.extend(payload["entries"])
            return super().from_payload(payload, retriever, strict=strict)

    path = tmp_path / "store.json"
    path.write_text(json.dumps({"entries": [_plain(1), _plain(2)]}), encoding="utf-8")
    store = Noted.load(path)
    assert type(store) is Noted and len(store) == 2
    assert seen == [_plain(1), _plain(2)]  # the dicts json.loads makes
