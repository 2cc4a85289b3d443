from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from conftest import PUBLISHED
from darwin_memo import (
    EmbeddingRetriever,
    EntryKind,
    HashingEmbedder,
    MemoryEntry,
    MemoryStore,
    StoreFormatError,
    StoreNotFound,
)


def test_entry_dict_round_trip_omits_default_lifecycle_fields() -> None:
    e = MemoryEntry("q?", "a.", kind=EntryKind.ENTITY, sources=["doc"])
    d = e.to_dict()
    for name in ("pinned", "probation", "juvenile", "imported_from", "imported_at"):
        assert name not in d
    assert d["kind"] == "entity"
    assert list(d)[-1] == "id"
    assert MemoryEntry.from_dict(d) == e
    e.pinned, e.probation = True, 2
    d = e.to_dict()
    assert d["pinned"] is True and d["probation"] == 2
    assert MemoryEntry.from_dict(d) == e


def test_entry_properties() -> None:
    e = MemoryEntry("q", "a")
    assert e.alive and e.may_decide and len(e.id) == 12
    e.energy = 1e-10
    assert not e.alive
    e.probation = 1
    assert not e.may_decide
    assert MemoryEntry.from_dict({"question": "q", "answer": "a", "id": "x"}).recorded_ts == ""


@pytest.mark.parametrize(
    "name", ["store.json", "ledger.json", "demo-survivors.json", "embedding-store.json"]
)
def test_published_files_load_and_round_trip(name: str, tmp_path: Path) -> None:
    original = json.loads((PUBLISHED / name).read_text(encoding="utf-8"))
    retriever = EmbeddingRetriever(HashingEmbedder()) if "embedding" in name else None
    store = MemoryStore.load(PUBLISHED / name, retriever=retriever)
    assert len(store) == len(original["entries"])
    assert store.dead_count() == len(original["graveyard"])
    out = tmp_path / name
    store.save(out)
    written = json.loads(out.read_text(encoding="utf-8"))
    assert written == original  # byte-for-byte in meaning: nothing lost, nothing added


def test_published_lifecycle_fields_are_read() -> None:
    store = MemoryStore.load(PUBLISHED / "store.json")
    pinned = [e for e in store.alive() if e.pinned]
    assert len(pinned) == 1
    assert pinned[0].probation == 2 and pinned[0].imported_from == "demo.json"
    assert pinned[0].recorded_ts == ""
    assert any(e.energy < 0 for e in store.graveyard())


def test_save_then_load_is_identity(tmp_path: Path) -> None:
    store = MemoryStore(max_energy=4.0, upkeep=0.1)
    store.add(MemoryEntry("q1", "a1", sources=["x"], energy=2.5))
    dead = store.add(MemoryEntry("q2", "a2"))
    store.bury(dead.id)
    path = tmp_path / "m.json"
    store.save(path)
    again = MemoryStore.load(path)
    assert again.to_payload() == store.to_payload()
    assert (again.max_energy, again.upkeep) == (4.0, 0.1)


def test_new_store_files_are_private_and_existing_modes_kept(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    MemoryStore().save(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    os.chmod(path, 0o644)
    MemoryStore().save(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def _write(tmp_path: Path, payload: object) -> Path:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path


def _entry(**over: object) -> dict:
    d = MemoryEntry("q", "a", id="abc123abc123").to_dict()
    d.update(over)
    return d


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        (_entry(kind="wizard"), "unknown kind 'wizard'"),
        (_entry(energy="1.0"), "'energy' must be a number"),
        (_entry(question=42), "'question' must be a string"),
        (_entry(energy=float("inf")), "'energy' must be a finite number"),
        (_entry(sources="doc"), "'sources' must be a list of strings"),
    ],
)
def test_bad_entries_are_named(tmp_path: Path, entry: dict, needle: str) -> None:
    path = _write(tmp_path, {"entries": [_entry(id="good00000000"), entry], "graveyard": []})
    before = path.read_bytes()
    with pytest.raises(StoreFormatError) as info:
        MemoryStore.load(path)
    message = str(info.value)
    assert "abc123abc123" in message and needle in message and str(path) in message
    assert path.read_bytes() == before


def test_infinity_in_the_file_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "inf.json"
    path.write_text(
        '{"entries": [{"question": "q", "answer": "a", "energy": Infinity, "id": "immortal0000"}]}'
    )
    with pytest.raises(StoreFormatError, match="immortal0000"):
        MemoryStore.load(path)


def test_duplicate_ids_are_reported_not_dropped(tmp_path: Path) -> None:
    path = _write(tmp_path, {"entries": [_entry(), _entry(answer="other")], "graveyard": []})
    with pytest.raises(StoreFormatError, match="more than once"):
        MemoryStore.load(path)
    store = MemoryStore.load(path, strict=False)
    assert len(store) == 1 and len(store.load_problems) == 1
    out = tmp_path / "out.json"
    store.save(out)
    assert len(json.loads(out.read_text())["entries"]) == 2  # the duplicate is written back


def test_lenient_load_keeps_unreadable_records(tmp_path: Path) -> None:
    bad = _entry(kind="wizard", id="bad000000000")
    path = _write(tmp_path, {"entries": [_entry(), bad], "graveyard": []})
    store = MemoryStore.load(path, strict=False)
    assert len(store) == 1
    assert "bad000000000" in store.load_problems[0].message
    store.save(path)
    assert bad in json.loads(path.read_text())["entries"]


def test_unknown_fields_are_preserved(tmp_path: Path) -> None:
    newer = _entry(confidence=0.9, provenance_chain=["x"])
    path = _write(
        tmp_path,
        {
            "entries": [newer],
            "graveyard": [],
            "schema_version": 9,
            "config": {"max_energy": 5.0, "upkeep": 0.05},
        },
    )
    store = MemoryStore.load(path)
    store.save(path)
    written = json.loads(path.read_text())
    assert written["schema_version"] == 9
    assert written["entries"][0]["confidence"] == 0.9


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"", "empty"),
        (b"{not json", "line 1"),
        (b"\xff\xfe\x00", "UTF-8"),
        (b"[1, 2]", "JSON object"),
        (b'{"hello": 1}', "does not look like a darwin-memo store"),
        (b'{"entries": {}}', "'entries' must be a list"),
    ],
)
def test_corrupt_files_give_one_line_errors_and_are_untouched(
    tmp_path: Path, content: bytes, needle: str
) -> None:
    path = tmp_path / "corrupt.json"
    path.write_bytes(content)
    with pytest.raises(StoreFormatError) as info:
        MemoryStore.load(path)
    assert needle in str(info.value) and "\n" not in str(info.value)
    assert path.read_bytes() == content


def test_missing_store_and_directory(tmp_path: Path) -> None:
    with pytest.raises(StoreNotFound, match="no such store"):
        MemoryStore.load(tmp_path / "nope.json")
    assert not (tmp_path / "nope.json.lock").exists()
    with pytest.raises(StoreNotFound, match="does not exist"):
        MemoryStore().save(tmp_path / "missing-dir" / "m.json")


def test_never_writes_non_finite(tmp_path: Path) -> None:
    store = MemoryStore()
    e = store.add(MemoryEntry("q", "a"))
    e.energy = float("nan")
    path = tmp_path / "m.json"
    with pytest.raises(StoreFormatError, match="non-finite"):
        store.save(path)
    assert not path.exists()


def test_saved_file_loads_in_published_shape(tmp_path: Path) -> None:
    """What we write has only the published keys, in the published layout."""
    store = MemoryStore.load(PUBLISHED / "store.json")
    out = tmp_path / "ours.json"
    store.save(out)
    payload = json.loads(out.read_text())
    assert set(payload) == {"config", "entries", "graveyard"}
    shutil.copy(out, tmp_path / "copy.json")
    for e in payload["entries"] + payload["graveyard"]:
        assert {
            "question",
            "answer",
            "kind",
            "sources",
            "energy",
            "born_cycle",
            "recorded_ts",
            "last_used_cycle",
            "uses",
            "lineage",
            "id",
        } <= set(e)
