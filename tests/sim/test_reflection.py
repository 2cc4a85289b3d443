"""ReflectionEncoder over the real wire: a loopback OpenAI-compatible server scripts the model.

The server reads which of the five steps a prompt is (and for which document),
and answers with good, malformed, truncated or failing replies.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any

import pytest

from darwin_memo.answer.clients import OpenAICompatClient
from darwin_memo.errors import LLMError
from darwin_memo.records.entry import EntryKind
from darwin_memo.sim.encode import Document, ReflectionEncoder
from darwin_memo.sim.reflection import Progress, parse_items
from llm_servers import chat_server

DOCS = [
    Document(
        "runbook", "Cache chunks under cache/ are safe to remove. The Platform Team owns data/."
    ),
    Document(
        "notes", "The Platform Team backs up data/ nightly. Restores cost three times the size."
    ),
]


def step_of(prompt: str) -> tuple[str, list[str]]:
    ids = re.findall(r'Document "([^"]+)"', prompt)
    for prefix, step in (
        ("Read the document and write", "extract"),
        ("Here are question/answer pairs", "consolidate"),
        ("Check each question/answer pair", "verify"),
        ("List the named entities", "entities"),
        ("Read the two documents", "cross_doc"),
    ):
        if prompt.startswith(prefix):
            return step, ids
    raise AssertionError(f"unknown prompt: {prompt[:60]}")


def qa(question: str, answer: str, kind: str | None = None) -> dict[str, str]:
    item = {"question": question, "answer": answer}
    if kind is not None:
        item["kind"] = kind
    return item


GOOD: dict[tuple[str, str], Any] = {
    ("extract", "runbook"): [
        qa(
            "Can cache chunks under cache/ be removed?", "Yes, they are safe to remove.", "explicit"
        ),
        qa("Is cache/ disposable?", "Yes, cache chunks are safe to remove.", "explicit"),
        qa("Who owns data/?", "The Platform Team owns data/.", "explicit"),
        qa("Should data/ be deleted casually?", "No: a team owns it.", "inferred"),
    ],
    ("consolidate", "runbook"): [
        qa("Can cache chunks under cache/ be removed?", "Yes, they are disposable.", "explicit"),
        qa("Who owns data/?", "The Platform Team owns data/.", "explicit"),
        qa("Should data/ be deleted casually?", "No: a team owns it.", "inferred"),
    ],
    ("verify", "runbook"): [
        qa("Can cache chunks under cache/ be removed?", "Yes, they are disposable.", "explicit"),
        qa("Who owns data/?", "The Platform Team owns data/.", "explicit"),
        qa("Should files under data/ be deleted casually?", "No: a team owns it.", "inferred"),
    ],
    ("entities", "runbook"): [
        {
            "entity": "Platform Team",
            "question": "What does the Platform Team own?",
            "answer": "The Platform Team owns data/.",
        },
        {
            "entity": "Platform Team",
            "question": "Who owns data/?",
            "answer": "The Platform Team owns data/.",
        },
    ],
    ("extract", "notes"): [
        qa("When is data/ backed up?", "The Platform Team backs up data/ nightly.", "explicit"),
        qa("What does a restore cost?", "Three times the size.", "explicit"),
    ],
    ("consolidate", "notes"): [
        qa("When is data/ backed up?", "The Platform Team backs up data/ nightly.", "explicit"),
        qa("What does a restore cost?", "Three times the size.", "explicit"),
    ],
    ("verify", "notes"): [
        qa("When is data/ backed up?", "The Platform Team backs up data/ nightly.", "explicit"),
        qa("What does restoring a file from data/ cost?", "Three times its size.", "explicit"),
    ],
    ("entities", "notes"): [],
    ("cross_doc", "runbook+notes"): [
        qa("Who owns and backs up data/?", "The Platform Team owns data/ and backs it up nightly."),
    ],
}


def scripted(
    overrides: dict[tuple[str, str], Callable[[int], Any]] | None = None,
) -> Callable[[str, str], Any]:
    """Good replies, except where ``overrides`` answers (given how often it was asked)."""
    asked: dict[tuple[str, str], int] = {}

    def respond(prompt: str, system: str) -> Any:
        step, ids = step_of(prompt)
        key = (step, "+".join(ids) if step == "cross_doc" else ids[0] if ids else "")
        if step == "consolidate":  # the consolidation prompt shows pairs, not the document
            key = (step, "runbook" if "cache/" in prompt else "notes")
        n = asked[key] = asked.get(key, 0) + 1
        if overrides and key in overrides:
            return overrides[key](n)
        return json.dumps(GOOD[key])

    return respond


def client(url: str, **kwargs: Any) -> OpenAICompatClient:
    return OpenAICompatClient("test-model", base_url=url, api_key="", backoff=0.0, **kwargs)


def test_five_steps_make_entries_of_each_kind_with_sources() -> None:
    seen: list[Progress] = []
    with chat_server(scripted()) as server:
        encoder = ReflectionEncoder(client(server.url), progress=seen.append)
        entries = encoder.encode(DOCS)
    assert len(server.prompts) == 4 * 2 + 1 == encoder.calls
    assert encoder.skipped == []
    got = [(e.kind, e.question, e.sources) for e in entries]
    assert got == [
        (EntryKind.EXPLICIT, "Can cache chunks under cache/ be removed?", ["runbook"]),
        (EntryKind.EXPLICIT, "Who owns data/?", ["runbook"]),
        (EntryKind.INFERRED, "Should files under data/ be deleted casually?", ["runbook"]),
        (EntryKind.ENTITY, "What does the Platform Team own?", ["runbook"]),
        (EntryKind.EXPLICIT, "When is data/ backed up?", ["notes"]),
        (EntryKind.EXPLICIT, "What does restoring a file from data/ cost?", ["notes"]),
        (EntryKind.CROSS_DOC, "Who owns and backs up data/?", ["runbook", "notes"]),
    ]
    # consolidation's output was what verification saw; verification's output was kept
    verify = next(p for p in server.prompts if p.startswith("Check each") and "cache/" in p)
    assert "Is cache/ disposable?" not in verify
    assert [p.done for p in seen] == list(range(1, 10))
    assert {p.total for p in seen} == {9}
    assert all(p.ok for p in seen)


def test_same_lesson_from_two_documents_is_one_entry_with_both_sources() -> None:
    same = json.dumps([qa("Who owns data/?", "The Platform Team owns data/.", "explicit")])
    overrides = {
        (step, doc): (lambda n, s=same: s)
        for step in ("extract", "consolidate", "verify")
        for doc in ("runbook", "notes")
    }
    with chat_server(scripted(overrides)) as server:
        entries = ReflectionEncoder(client(server.url)).encode(DOCS)
    owners = [e for e in entries if e.question == "Who owns data/?"]
    assert len(owners) == 1
    assert owners[0].sources == ["runbook", "notes"]


def test_malformed_reply_is_asked_again_with_a_reminder() -> None:
    replies = {
        ("extract", "notes"): lambda n: (
            "Sure! Here are the facts: the team backs things up."
            if n == 1
            else json.dumps(GOOD[("extract", "notes")])
        )
    }
    with chat_server(scripted(replies)) as server:
        encoder = ReflectionEncoder(client(server.url))
        entries = encoder.encode(DOCS)
    extracts = [p for p in server.prompts if p.startswith("Read the document") and '"notes"' in p]
    assert len(extracts) == 2
    assert "could not be used (no JSON array found)" in extracts[1]
    assert encoder.skipped == []
    assert any(e.question == "When is data/ backed up?" for e in entries)


def test_a_document_the_model_never_answers_properly_is_skipped_not_fatal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    garbage = {("extract", "notes"): lambda n: '[{"q": "broken", "a": 1}, {"question": ""}]'}
    with chat_server(scripted(garbage)) as server, caplog.at_level(logging.INFO):
        encoder = ReflectionEncoder(client(server.url), retries=2)
        entries = encoder.encode(DOCS)
    extracts = [p for p in server.prompts if p.startswith("Read the document") and '"notes"' in p]
    assert len(extracts) == 3  # asked, then two retries
    skipped = {(s.step, s.doc_ids) for s in encoder.skipped}
    assert ("extract", ("notes",)) in skipped
    reason = next(s.reason for s in encoder.skipped if s.step == "extract")
    assert reason == "no object had both a question and an answer after 3 attempts"
    assert "skipped extract for notes" in caplog.text
    # the other document and the pair still produced their entries
    assert any(e.sources == ["runbook"] and e.kind == EntryKind.EXPLICIT for e in entries)
    assert any(e.kind == EntryKind.CROSS_DOC for e in entries)
    assert not any(e.sources == ["notes"] and e.kind == EntryKind.EXPLICIT for e in entries)


def test_truncated_fenced_reply_with_think_block_keeps_its_complete_objects() -> None:
    full = json.dumps(GOOD[("extract", "notes")])
    cut = "<think>let me list facts [not json]</think>\n```json\n" + full[: full.rfind("{") + 30]
    with chat_server(scripted({("extract", "notes"): lambda n: cut})) as server:
        encoder = ReflectionEncoder(client(server.url))
        encoder.encode(DOCS)
    # the first complete object survived; consolidation saw it, and only it
    consolidate = next(p for p in server.prompts if p.startswith("Here are") and "backed up" in p)
    assert "When is data/ backed up?" in consolidate
    assert "What does a restore cost?" not in consolidate
    assert encoder.skipped == []


def test_empty_consolidation_or_verification_keeps_the_earlier_facts() -> None:
    empty = {("consolidate", "notes"): lambda n: "[]", ("verify", "notes"): lambda n: "[]"}
    with chat_server(scripted(empty)) as server:
        encoder = ReflectionEncoder(client(server.url), retries=1)
        entries = encoder.encode(DOCS)
    notes = [e.question for e in entries if e.sources == ["notes"]]
    assert notes == ["When is data/ backed up?", "What does a restore cost?"]
    assert {(s.step, s.reason) for s in encoder.skipped} == {
        ("consolidate", "an empty array after 2 attempts"),
        ("verify", "an empty array after 2 attempts"),
    }


def test_questions_that_point_at_the_document_are_dropped() -> None:
    dangling = [
        qa("What does this document say about restores?", "They cost three times the size."),
        qa("When is data/ backed up?", "The Platform Team backs up data/ nightly."),
    ]
    with chat_server(scripted({("verify", "notes"): lambda n: json.dumps(dangling)})) as server:
        entries = ReflectionEncoder(client(server.url)).encode(DOCS)
    questions = [e.question for e in entries]
    assert "When is data/ backed up?" in questions
    assert not any("this document" in q for q in questions)


def test_server_errors_skip_that_document_and_name_the_endpoint() -> None:
    failing = {
        ("extract", "notes"): lambda n: (500, {"error": {"message": "model crashed"}}),
        ("entities", "notes"): lambda n: (500, {"error": {"message": "model crashed"}}),
    }
    with chat_server(scripted(failing)) as server:
        encoder = ReflectionEncoder(client(server.url, retries=1))
        entries = encoder.encode(DOCS)
    reasons = [s.reason for s in encoder.skipped if s.step == "extract"]
    assert len(reasons) == 1
    assert reasons[0].startswith("model call failed: OpenAICompatClient (model 'test-model', ")
    assert "HTTP 500: model crashed (gave up after 2 attempts)" in reasons[0]
    assert entries and all(
        "notes" not in e.sources or e.kind == EntryKind.CROSS_DOC for e in entries
    )


def test_nothing_reachable_raises_the_clients_error() -> None:
    with chat_server(scripted()) as server:
        url = server.url
    dead = client(url, retries=0)
    with pytest.raises(LLMError, match=r"cannot connect"):
        ReflectionEncoder(dead).encode(DOCS)


def test_duplicate_ids_and_empty_input() -> None:
    with chat_server(scripted()) as server:
        encoder = ReflectionEncoder(client(server.url))
        with pytest.raises(ValueError, match="share the id"):
            encoder.encode([DOCS[0], DOCS[0]])
        assert encoder.encode([]) == []
    assert server.prompts == []


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('[{"question": "q", "answer": "a"}]', [{"question": "q", "answer": "a"}]),
        ("[]", []),
        ("no json at all", None),
        ('{"pairs": [{"question": "q", "answer": "a"}]}', [{"question": "q", "answer": "a"}]),
        ('{"question": "q", "answer": "a"}', [{"question": "q", "answer": "a"}]),
        (
            '[{"question": "q", "answer": "a"}, {"question": "r", "ans',
            [{"question": "q", "answer": "a"}],
        ),
        ('<think>[1, 2]</think>["text", 3]', []),
    ],
)
def test_parse_items(reply: str, expected: Any) -> None:
    assert parse_items(reply) == expected


def test_declared_names_resolve() -> None:
    import importlib

    for name in ("encode", "reflection", "semantic", "llm"):
        module = importlib.import_module(f"darwin_memo.{name}")
        for attr in module.__all__:
            assert getattr(module, attr) is not None, (name, attr)
    from darwin_memo.sim import encode, reflection

    assert encode.ReflectionEncoder is reflection.ReflectionEncoder
    assert "ReflectionEncoder" in encode.__all__


@pytest.mark.parametrize("mode", ["json_object", "json_schema"])
def test_json_mode_asks_the_server_for_schema_constrained_replies(mode: str) -> None:
    wrapped = {key: (lambda n, v=value: json.dumps({"items": v})) for key, value in GOOD.items()}
    with chat_server(scripted(wrapped)) as server:
        entries = ReflectionEncoder(client(server.url, json_mode=mode)).encode(DOCS)
    assert len(entries) == 7  # the object-wrapped arrays read like bare ones
    formats = [body["response_format"] for body in server.bodies]
    assert len(formats) == 9
    if mode == "json_object":
        assert {f["type"] for f in formats} == {"json_object"}
        schemas = [f["schema"] for f in formats]
    else:
        assert {f["type"] for f in formats} == {"json_schema"}
        schemas = [f["json_schema"]["schema"] for f in formats]
    item = schemas[0]["properties"]["items"]["items"]
    assert item["required"] == ["question", "answer", "kind"]
    assert any("entity" in s["properties"]["items"]["items"]["properties"] for s in schemas)


def test_without_json_mode_no_response_format_is_sent() -> None:
    with chat_server(scripted()) as server:
        ReflectionEncoder(client(server.url)).encode(DOCS)
    assert all("response_format" not in body for body in server.bodies)
    with pytest.raises(ValueError, match="json_mode"):
        client(server.url, json_mode="yaml")
