from __future__ import annotations

import pytest

import darwin_memo
from darwin_memo import (
    CONFLICT_HEADER,
    MemoryEntry,
    MemoryStore,
    QueryProtocol,
    age_annotation,
    conflict_clusters,
    newest_first,
    recency_weight,
)
from darwin_memo.answer.model_protocol import split_citations


def logs_store() -> tuple[MemoryStore, MemoryEntry, MemoryEntry]:
    store = MemoryStore()
    seven = store.add(
        MemoryEntry(
            "Is it safe to delete old log files?",
            "Old log files under logs/ may be deleted after seven days.",
            recorded_ts="2026-01-01T00:00:00+00:00",
        )
    )
    thirty = store.add(
        MemoryEntry(
            "Is it safe to delete old log files?",
            "Old log files under logs/ may be deleted after thirty days.",
            recorded_ts="2026-02-01T00:00:00+00:00",
        )
    )
    store.add(MemoryEntry("Are cache chunks disposable?", "Cache chunk files are disposable."))
    return store, seven, thirty


def test_local_answer_with_provenance_and_conflict_block() -> None:
    store, seven, thirty = logs_store()
    answer = QueryProtocol(store).answer("Is it safe to delete old log files?")
    assert answer.deciding_entry in {seven.id, thirty.id}
    assert set(answer.supporting_entries) == {seven.id, thirty.id} - {answer.deciding_entry}
    assert answer.attribution == "local"
    lines = answer.annotated_text.splitlines()
    assert lines[0] == CONFLICT_HEADER
    assert "thirty days" in lines[1] and "seven days" in lines[2]  # newest first
    assert "[recorded 2026-02-01T00:00:00+00:00; born tick 0; never settled]" in lines[1]


def test_single_hit_has_age_line() -> None:
    store = MemoryStore()
    e = store.add(
        MemoryEntry("Are cache chunks disposable?", "Cache chunks are disposable.", recorded_ts="")
    )
    answer = QueryProtocol(store).answer("cache chunks disposable")
    assert answer.text == e.answer
    assert answer.annotated_text == f"{e.answer}\n[age unknown; born tick 0; never settled]"


def test_silence_when_nothing_clears_the_floor() -> None:
    store, _, _ = logs_store()
    answer = QueryProtocol(store).answer("quantum zebra marmalade")
    assert answer.text == "" and answer.deciding_entry is None and answer.silent


def test_probationary_entries_never_decide() -> None:
    store = MemoryStore()
    p = store.add(
        MemoryEntry("Are cache chunks disposable?", "Cache chunks are disposable.", probation=3)
    )
    assert QueryProtocol(store).answer("cache chunks disposable").text == ""
    good = store.add(
        MemoryEntry("Are cache chunks disposable?", "Yes, cache chunks are disposable.")
    )
    answer = QueryProtocol(store).answer("cache chunks disposable")
    assert answer.deciding_entry == good.id and answer.supporting_entries == [p.id]


def test_temporal_helpers() -> None:
    e = MemoryEntry(
        "q", "a", born_cycle=3, last_used_cycle=9, recorded_ts="2026-01-01T00:00:00+00:00"
    )
    assert (
        age_annotation(e)
        == "[recorded 2026-01-01T00:00:00+00:00; born tick 3; last settled tick 9]"
    )
    assert recency_weight(e, 29, 20) == pytest.approx(0.5)
    assert recency_weight(e, 5, 20) == 1.0
    with pytest.raises(ValueError):
        recency_weight(e, 5, 0)
    old = MemoryEntry("q", "a", recorded_ts="")
    assert newest_first([old, e]) == [e, old]
    store, seven, thirty = logs_store()
    clusters = conflict_clusters(store.alive(), store.similarity, 0.55)
    assert [[m.id for m in c] for c in clusters] == [[thirty.id, seven.id]]


class ScriptedModel:
    """A model that replies from a script: a test double for an in-process client."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.prompts: list[str] = []

    def complete(self, prompt: str, system: str = "") -> str:
        self.prompts.append(prompt)
        return self.replies.pop(0)


def test_llm_mode_single_citation_decides() -> None:
    store, seven, thirty = logs_store()
    model = ScriptedModel(
        "Is it safe to delete old log files?",
        "<think>SOURCES: [2]</think>Delete logs older than seven days.\nSOURCES: [1]",
    )
    answer = QueryProtocol(store, model).answer("Can I delete old logs?")
    consulted = model.prompts[1]
    first = seven if consulted.index(seven.answer) < consulted.index(thirty.answer) else thirty
    assert answer.deciding_entry == first.id and answer.supporting_entries == []
    assert answer.text == "Delete logs older than seven days."
    assert "are conflicting/overlapping advice, newest first" in consulted


def test_llm_mode_multi_citation_none_and_fallback() -> None:
    store, seven, thirty = logs_store()
    answer = QueryProtocol(store, ScriptedModel("old logs", "Both.\nSOURCES: [1] [2]")).answer(
        "old logs?"
    )
    assert answer.deciding_entry is None and set(answer.supporting_entries) == {seven.id, thirty.id}
    assert answer.attribution == "cited"
    answer = QueryProtocol(store, ScriptedModel("old logs", "No idea.\nSOURCES: none")).answer(
        "old logs?"
    )
    assert answer.text == "No idea." and answer.silent and answer.attribution == "none"
    answer = QueryProtocol(store, ScriptedModel("old logs", "Delete them.")).answer("old logs?")
    assert answer.deciding_entry is None and set(answer.supporting_entries) == {seven.id, thirty.id}
    assert answer.attribution == "fallback"
    refusing = QueryProtocol(
        store, ScriptedModel("old logs", "Delete them."), refuse_unparseable=True
    )
    refused = refusing.answer("old logs?")
    assert refused.refused and refused.attribution == "unparsed"


def test_split_citations_rules() -> None:
    assert split_citations("Answer.\nSources: prose\nSOURCES: [2] [9] [2]", 3) == (
        "Answer.\nSources: prose",
        [1],
    )
    assert split_citations("x\nSOURCES: none [1]", 2) == ("x", [0])
    assert split_citations("x", 2) == ("x", None)
    assert split_citations("x\nSOURCES: 2", 2) == ("x", [1])  # no brackets needed
    assert split_citations("x\n**Sources:** [1][2].", 2) == ("x", [0, 1])


def test_grounding_keeps_numbers_inside_subquestions() -> None:
    """The list marker "1." is stripped from a sub-question, its "8080" is not: only
    the number tells the two stored lessons apart, and the question as asked matches
    neither, so the 8080 lesson is consulted first (and decides) only if it survives."""
    store = MemoryStore()
    other = store.add(
        MemoryEntry("Which service listens on port 9090?", "The exporter listens on port 9090.")
    )
    gateway = store.add(
        MemoryEntry("Which service listens on port 8080?", "The gateway listens on port 8080.")
    )
    assert store.retrieve("where does this traffic end up?") == []
    model = ScriptedModel("1. Which service listens on port 8080", "The gateway.\nSOURCES: [1]")
    answer = QueryProtocol(store, model).answer("where does this traffic end up?")
    consult = model.prompts[1]
    assert consult.index(gateway.answer) < consult.index(other.answer)
    assert "[1] Q: Which service listens on port 8080?" in consult
    assert answer.deciding_entry == gateway.id and answer.text == "The gateway."


def test_public_surface_is_declared() -> None:
    import types

    public = {
        name
        for name in dir(darwin_memo)
        if not name.startswith("_") and not isinstance(getattr(darwin_memo, name), types.ModuleType)
    }
    assert sorted(public) == sorted(set(darwin_memo.__all__) - {"__version__"})
    for name in darwin_memo.__all__:
        assert getattr(darwin_memo, name) is not None
    assert callable(darwin_memo.consolidate)  # the function, never the submodule
    import darwin_memo.consolidate as module  # noqa: F401  (importing it must not shadow)

    assert callable(darwin_memo.consolidate)
    assert issubclass(darwin_memo.StoreLockedError, darwin_memo.DarwinMemoError)
    assert issubclass(darwin_memo.StoreFormatError, ValueError)
