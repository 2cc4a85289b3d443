"""The SOURCES line in the shapes models write, read through the real OpenAI wire.

Each row is one shape of the citation line a model may end its answer with. The
loopback server (tests/llm_servers.py) answers the protocol's two prompts: the
grounding prompt with two sub-questions, so three snippets are consulted, and
the answer prompt with an answer plus that row's citation line, numbered after
the snippet list the prompt really carried. The cited entry must decide (or the
cited entries support, for a row naming two), the line must be gone from the
text, and after settling the ticket no entry the line did not name may have
moved: credit along provenance, not blame spread over bystanders.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from darwin_memo import MemoryEntry, MemoryStore, ProtocolAnswer, QueryProtocol
from darwin_memo.answer.clients import OpenAICompatClient
from darwin_memo.answer.model_protocol import split_citations
from darwin_memo.ledger import Ledger
from llm_servers import ChatServer, chat_server

QUERY = "Can I delete old log files?"
BODY = "Old log files may be deleted after seven days."
ENTRIES = [
    ("Is it safe to delete old log files?", "Old log files may be deleted after seven days."),
    ("When can old log files be deleted?", "Old log files may be deleted after thirty days."),
    ("Are old log files archived before deletion?", "Old log files are archived first."),
    ("Are cache chunk files disposable?", "Cache chunk files are disposable."),
]
SUBQUESTIONS = "Is it safe to delete old log files?\nAre old log files archived before deletion?"
SNIPPET = re.compile(r"^\[(\d+)\] Q: (.*)$", re.MULTILINE)


@dataclass(frozen=True)
class Shape:
    """A citation line: ``{a}`` is the target snippet's number, ``{b}`` another
    consulted one's, ``{out}`` a number past the last snippet. ``kept`` is what of
    the reply stays after the answer (an earlier line the last one overrides)."""

    name: str
    line: str
    cites_b: bool = False
    kept: str = ""


SHAPES = [
    Shape("bare number", "SOURCES: {a}"),
    Shape("bracketed", "SOURCES: [{a}]"),
    Shape("title case, trailing period", "Sources: [{a}]."),
    Shape("lowercase", "sources: {a}"),
    Shape("bare number, trailing period", "SOURCES: {a}."),
    Shape("comma list", "SOURCES: {b}, {a}", cites_b=True),
    Shape("and list", "SOURCES: {b} and {a}", cites_b=True),
    Shape("adjacent brackets", "SOURCES: [{b}][{a}]", cites_b=True),
    Shape("bracketed list", "SOURCES: [{b}, {a}]", cites_b=True),
    Shape("snippet word", "SOURCES: snippet {a}"),
    Shape("snippets and ampersand", "Sources: Snippets {b} & {a}", cites_b=True),
    Shape("hash", "SOURCES: #{a}"),
    Shape("bold label", "**SOURCES:** [{a}]"),
    Shape("bold label before colon", "**Sources**: [{a}]"),
    Shape("underscores and backticks", "__Sources__: `[{a}]`"),
    Shape("emphasis around the number", "SOURCES: **{a}**"),
    Shape("dash separator", "Sources - [{a}]"),
    Shape("heading", "### Sources: [{a}]"),
    Shape("list item", "- SOURCES: [{a}]"),
    Shape("sources used", "Sources used: {a}"),
    Shape("out of range mixed with a valid one", "SOURCES: {out}, {a}, {out}"),
    Shape("bracket then prose", "SOURCES: [{a}] (the log retention rule)"),
    Shape("list on the next line", "SOURCES:\n[{a}]"),
    Shape("on the answer's own line", " SOURCES: [{a}]"),
    Shape(
        "two lines, the last wins",
        "SOURCES: [{b}]\nThat is the rule.\nSOURCES: {a}",
        kept="\nSOURCES: [{b}]\nThat is the rule.",
    ),
]


def balances(store: MemoryStore, entries: list[MemoryEntry]) -> dict[str, float]:
    found = {e.id: store.get(e.id) for e in entries}
    return {i: e.energy for i, e in found.items() if e is not None}


def make_store() -> tuple[MemoryStore, list[MemoryEntry]]:
    store = MemoryStore()
    return store, [store.add(MemoryEntry(q, a)) for q, a in ENTRIES]


class Script:
    """The model: grounding splits the question, the answer cites per ``line``."""

    def __init__(self, line: str) -> None:
        self.line = line
        self.numbers: dict[str, int] = {}  # question -> snippet number, as prompted

    def respond(self, prompt: str, system: str) -> str:
        if prompt.startswith("Split the question"):
            return SUBQUESTIONS
        self.numbers = {q: int(n) for n, q in SNIPPET.findall(prompt)}
        if not self.line:
            return BODY
        joiner = "" if self.line.startswith(" ") else "\n"
        return BODY + joiner + self.fill(self.line)

    def fill(self, text: str) -> str:
        numbers = self.numbers
        assert len(numbers) >= 3, f"three snippets must be consulted, got {numbers}"
        return text.format(a=numbers[ENTRIES[2][0]], b=numbers[ENTRIES[0][0]], out=len(numbers) + 5)


@pytest.fixture(scope="module")
def server_and_script() -> Iterator[tuple[Script, ChatServer]]:
    # One server for the module: stopping one waits out its half-second poll.
    script = Script("")
    with chat_server(script.respond) as server:
        yield script, server


@pytest.fixture
def wired(
    server_and_script: tuple[Script, ChatServer],
) -> tuple[Script, ChatServer, OpenAICompatClient]:
    script, server = server_and_script
    script.line, script.numbers = "", {}
    with server.lock:
        server.paths.clear()
    return script, server, OpenAICompatClient("scripted", base_url=server.url)


def test_the_table_covers_a_dozen_shapes() -> None:
    assert len(SHAPES) >= 12
    assert len({s.line for s in SHAPES}) == len(SHAPES)


@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_query_protocol_reads_the_shape(
    shape: Shape, wired: tuple[Script, ChatServer, OpenAICompatClient]
) -> None:
    script, server, client = wired
    script.line = shape.line
    store, entries = make_store()
    answer = QueryProtocol(store, client).answer(QUERY)
    assert server.paths == ["/v1/chat/completions"] * 2
    target, other = entries[2], entries[0]
    assert answer.attribution == "cited"
    if shape.cites_b:
        assert answer.deciding_entry is None
        assert sorted(answer.supporting_entries) == sorted([other.id, target.id])
    else:
        assert answer.deciding_entry == target.id
        assert answer.supporting_entries == []
    assert answer.text == BODY.rstrip() + script.fill(shape.kept)
    assert answer.annotated_text == answer.text


@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_ledger_credits_only_the_cited(
    shape: Shape, wired: tuple[Script, ChatServer, OpenAICompatClient], tmp_path: Path
) -> None:
    script, _server, client = wired
    script.line = shape.line
    store, entries = make_store()
    log = tmp_path / "events.jsonl"
    ledger = Ledger(store, protocol=QueryProtocol(store, client), event_log=log)
    before = balances(store, entries)
    ticket = ledger.decide(QUERY)
    target, other = entries[2], entries[0]
    cited = {target.id, other.id} if shape.cites_b else {target.id}
    assert set(ticket.provenance) == cited
    assert ticket.deciding_entry == (None if shape.cites_b else target.id)
    assert "SOURCES" not in ticket.answer.split("\n")[-1].upper()
    assert ledger.settle(ticket.id, 1.0, "measured")
    after = balances(store, entries)
    moved = {i for i in before if after[i] != before[i]}
    assert moved == cited  # nobody the line did not name
    assert all(after[i] > before[i] for i in cited)
    decide = [e for e in map(json.loads, log.read_text().splitlines()) if e["event"] == "decide"]
    assert decide[-1]["attribution"] == "cited"
    assert decide[-1]["provenance"] == ticket.provenance


def test_no_citation_line_falls_back_and_says_so(
    wired: tuple[Script, ChatServer, OpenAICompatClient], tmp_path: Path
) -> None:
    script, _server, client = wired
    script.line = ""  # the answer alone: nothing to parse
    store, entries = make_store()
    answer = QueryProtocol(store, client).answer(QUERY)
    assert answer.attribution == "fallback"
    assert answer.text == BODY and answer.deciding_entry is None
    consulted = set(answer.supporting_entries)
    assert len(consulted) == 3 and entries[3].id not in consulted

    log = tmp_path / "events.jsonl"
    ledger = Ledger(store, protocol=QueryProtocol(store, client), event_log=log)
    ticket = ledger.decide(QUERY)
    assert set(ticket.supporting_entries) == consulted and ticket.deciding_entry is None
    before = balances(store, entries)
    assert ledger.settle(ticket.id, -1.0, "measured")
    after = balances(store, entries)
    moved = {i for i in before if after[i] != before[i]}
    assert moved == consulted  # the fallback spreads the outcome: why it is recorded
    events = [json.loads(line) for line in log.read_text().splitlines()]
    decide = next(e for e in events if e["event"] == "decide")
    assert decide["attribution"] == "fallback" and decide["silent"] is False


@pytest.mark.parametrize("line", ["", "Sources: the runbook", "SOURCES: 9", "SOURCES: []"])
def test_refuse_unparseable_refuses_instead(
    line: str, wired: tuple[Script, ChatServer, OpenAICompatClient], tmp_path: Path
) -> None:
    script, _server, client = wired
    script.line = line
    store, entries = make_store()
    protocol = QueryProtocol(store, client, refuse_unparseable=True)
    answer = protocol.answer(QUERY)
    assert answer.refused and answer.silent and answer.text == ""
    assert answer.attribution == "unparsed"

    log = tmp_path / "events.jsonl"
    ledger = Ledger(store, protocol=protocol, event_log=log)
    before = balances(store, entries)
    ticket = ledger.decide(QUERY)
    assert ticket.provenance == [] and ledger.pending() == []
    assert not ledger.settle(ticket.id, -1.0, "measured")
    assert balances(store, entries) == before
    decide = next(json.loads(x) for x in log.read_text().splitlines() if '"decide"' in x)
    assert decide["attribution"] == "unparsed" and decide["silent"] is True


def test_explicit_none_is_silent_and_recorded(
    wired: tuple[Script, ChatServer, OpenAICompatClient], tmp_path: Path
) -> None:
    script, _server, client = wired
    script.line = "**Sources:** None."
    store, _entries = make_store()
    log = tmp_path / "events.jsonl"
    ledger = Ledger(store, protocol=QueryProtocol(store, client), event_log=log)
    ticket = ledger.decide(QUERY)
    assert ticket.provenance == []
    decide = next(json.loads(x) for x in log.read_text().splitlines() if '"decide"' in x)
    assert decide["attribution"] == "none" and decide["silent"] is True


def test_local_mode_keeps_the_published_decide_event(tmp_path: Path) -> None:
    store, _entries = make_store()
    log = tmp_path / "events.jsonl"
    ledger = Ledger(store, event_log=log)
    answer = ledger.protocol.answer(QUERY)
    assert answer.attribution == "local" and answer.deciding_entry is not None
    ledger.decide(QUERY)
    decide = next(json.loads(x) for x in log.read_text().splitlines() if '"decide"' in x)
    assert set(decide) == {"event", "tick", "ts", "ticket", "query", "silent", "provenance"}


def test_published_constructor_still_works() -> None:
    answer = ProtocolAnswer("yes", "e1", ["e2"], "yes (annotated)", False)
    assert answer.attribution == "local" and answer.provenance == ["e2", "e1"]
    assert ProtocolAnswer("x") == ProtocolAnswer(text="x", attribution="local")
    assert ProtocolAnswer("x") != ProtocolAnswer("x", attribution="fallback")


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("A\nSources: the 2 runbooks", ("A", None)),  # prose: a bare number is no citation
        ("A\nSources: see snippet 2, not 1", ("A", [1])),  # marked numbers only
        (
            "I read the sources: 1 and 2.\nDelete it.",
            ("I read the sources: 1 and 2.\nDelete it.", None),
        ),
        ("A\nSource code lives in src/ 2", ("A\nSource code lives in src/ 2", None)),
        ("A\nSources-based answer 2", ("A\nSources-based answer 2", None)),
        ("A\n<think>SOURCES: 2</think>", ("A", None)),
        ("A\nSOURCES: none [1]", ("A", [0])),  # a citation wins over "none"
        ("A\nSOURCES: 2, 2, [2]", ("A", [1])),  # deduplicated
        ("A\nSOURCES: 0", ("A", None)),  # snippets count from 1
    ],
)
def test_prose_is_not_a_citation(reply: str, expected: tuple[str, list[int] | None]) -> None:
    assert split_citations(reply, 3) == expected
