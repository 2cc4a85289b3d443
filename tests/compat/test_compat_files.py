"""Stores written by our implementation keep the published (0.7.1) file shape.

``fixtures/ours-0.8/`` holds files our writer produced (see its README: the
published 0.7.1 loads, queries, charges and re-saves both). These tests hold the
files, and a fresh run of their generator, to that shape.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from conftest import FIXTURES, PUBLISHED
from darwin_memo import EmbeddingRetriever, HashingEmbedder, MemoryStore

OURS = FIXTURES / "ours-0.8"

TOP_LEVEL_KEYS = {"config", "entries", "graveyard", "retriever"}
CORE_KEYS = [
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
]
LIFECYCLE_DEFAULTS: dict[str, Any] = {
    "pinned": False,
    "probation": 0,
    "juvenile": 0,
    "imported_from": None,
    "imported_at": None,
}
PUBLISHED_ENTRY_KEYS = {*CORE_KEYS, *LIFECYCLE_DEFAULTS, "id"}
FILES = ["survivors.json", "embedding-store.json"]


def _retriever(name: str) -> EmbeddingRetriever | None:
    return EmbeddingRetriever(HashingEmbedder()) if name == "embedding-store.json" else None


def _no_constants(name: str) -> Any:
    raise AssertionError(f"non-finite JSON constant {name} in the file")


def _read(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    for bad in ("NaN", "Infinity"):
        assert bad not in text, f"{path.name} contains {bad!r}"
    doc = json.loads(text, parse_constant=_no_constants)
    assert isinstance(doc, dict)
    return doc


def _records(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [*doc["entries"], *doc["graveyard"]]


def _check_shape(doc: dict[str, Any]) -> None:
    assert set(doc) <= TOP_LEVEL_KEYS
    assert {"config", "entries", "graveyard"} <= set(doc)
    assert set(doc["config"]) == {"max_energy", "upkeep"}
    for record in _records(doc):
        keys = list(record)
        assert set(keys) <= PUBLISHED_ENTRY_KEYS, set(keys) - PUBLISHED_ENTRY_KEYS
        # core fields always, in the published order, id last
        assert keys[: len(CORE_KEYS)] == CORE_KEYS
        assert keys[-1] == "id"
        # lifecycle fields present exactly when they differ from their defaults
        for name, default in LIFECYCLE_DEFAULTS.items():
            if name in record:
                assert record[name] != default, (record["id"], name)
        lifecycle = [k for k in keys if k in LIFECYCLE_DEFAULTS]
        assert lifecycle == [k for k in LIFECYCLE_DEFAULTS if k in record]
        assert math.isfinite(record["energy"])
    for entry in doc["graveyard"]:
        assert entry["energy"] <= 0


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ours_make_fixtures", OURS / "make_fixtures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated() -> dict[str, dict[str, Any]]:
    """What make_fixtures.py writes, built fresh in memory (and JSON round-tripped)."""
    payloads: dict[str, dict[str, Any]] = _load_generator().payloads()
    return {name: json.loads(json.dumps(p, allow_nan=False)) for name, p in payloads.items()}


def test_published_fixture_keys_are_the_published_vocabulary() -> None:
    doc = _read(PUBLISHED / "store.json")
    seen = {k for record in _records(doc) for k in record}
    assert seen <= PUBLISHED_ENTRY_KEYS
    assert {"pinned", "probation", "imported_from", "imported_at"} <= seen


@pytest.mark.parametrize("name", FILES)
def test_fixture_has_the_published_shape(name: str) -> None:
    _check_shape(_read(OURS / name))


@pytest.mark.parametrize("name", FILES)
def test_our_code_loads_fixture_and_writes_it_back_identically(name: str, tmp_path: Path) -> None:
    path = OURS / name
    before = path.read_bytes()
    store = MemoryStore.load(path, _retriever(name))
    assert store.load_problems == []
    assert store.payload_extra == {}
    assert store.to_payload() == _read(path)
    out = tmp_path / name
    store.save(out)
    assert out.read_bytes() == before
    assert path.read_bytes() == before


def test_survivors_fixture_contents() -> None:
    doc = _read(OURS / "survivors.json")
    store = MemoryStore.load(OURS / "survivors.json")
    assert len(store) == len(doc["entries"]) >= 2
    assert store.dead_count() == len(doc["graveyard"]) > 0
    assert any("forum-post" in e.sources for e in store.graveyard())
    assert not any("forum-post" in e.sources for e in store.alive())
    imported = [e for e in store.alive() if e.imported_from is not None]
    assert len(imported) == 1
    (entry,) = imported
    assert entry.pinned and entry.probation == 2 and not entry.may_decide
    assert entry.imported_from == "team-memory.json"
    assert entry.imported_at
    assert sum(1 for e in store.alive() if e.juvenile) == 1
    # lineage only points at ids the file holds
    ids = {r["id"] for r in _records(doc)}
    assert all(parent in ids for r in _records(doc) for parent in r["lineage"])
    assert store.total_energy() == pytest.approx(math.fsum(e["energy"] for e in doc["entries"]))


def test_embedding_fixture_persists_every_vector() -> None:
    doc = _read(OURS / "embedding-store.json")
    vectors = doc["retriever"]["vectors"]
    assert set(vectors) == {e["id"] for e in doc["entries"]}
    assert all(len(v) == 256 and all(math.isfinite(x) for x in v) for v in vectors.values())
    retriever = EmbeddingRetriever(HashingEmbedder())
    store = MemoryStore.load(OURS / "embedding-store.json", retriever)
    assert retriever.dump_state() == doc["retriever"]
    hits = store.retrieve("Is it safe to delete cache chunk files?", k=3)
    assert hits and hits[0][0].id == "g00000000001"


@pytest.mark.parametrize("name", FILES)
def test_generator_output_has_the_shape_of_the_fixture(
    name: str, generated: dict[str, dict[str, Any]]
) -> None:
    fresh, stored = generated[name], _read(OURS / name)
    _check_shape(fresh)
    assert set(fresh) == set(stored)
    assert fresh["config"] == stored["config"]
    assert bool(fresh["graveyard"]) == bool(stored["graveyard"])

    def shapes(doc: dict[str, Any]) -> set[tuple[str, ...]]:
        return {tuple(record) for record in _records(doc)}

    assert shapes(fresh) == shapes(stored)
    if "retriever" in stored:
        assert set(fresh["retriever"]) == set(stored["retriever"]) == {"vectors"}
        assert set(fresh["retriever"]["vectors"]) == {e["id"] for e in fresh["entries"]}


def test_embedding_generator_is_exact(generated: dict[str, dict[str, Any]]) -> None:
    # No selection run involved: the generator must reproduce the file exactly.
    assert generated["embedding-store.json"] == _read(OURS / "embedding-store.json")
