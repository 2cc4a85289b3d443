"""The published README's Python blocks run, unchanged, against our package.

A darwin-memo 0.7.1 user switching to ours keeps their code; the README's examples are
the code most of them started from. Each block of the seed README
(``../shared/seeds/darwin-memo-README.md``, copied verbatim into
``tests/fixtures/seed_readme_blocks.md`` so a clone without the seed beside it still runs
this) is executed with ``exec`` in a temporary working directory, and then what the
README says it does is checked: the types and values it promises, the files it writes.

The blocks are examples, not programs, so the harness supplies what the README leaves to
the reader, and nothing else: a ``runbook.txt`` to encode, the CI numbers and run URL a
settlement reports (``passes_before``/``passes_after``/``run_url``), the entry whose
obituary is read (``entry_id``), the ``dollars_saved`` a cancellation measures, and a
``my_model`` with an ``encode`` method. Blocks that build on an earlier one (the store,
then the Ledger over it, then the SurvivalLoop over it; the Ollama stack, then the cloud
client over its store) run in sequence in one namespace, as a reader running the README
top to bottom would.

The model-backed blocks talk to the loopback server of ``tests/llm_servers.py``, which
speaks the real Ollama and Anthropic wire protocols, and never to the network:

- The cloud block's ``AnthropicClient()`` takes no URL; it reads ``ANTHROPIC_BASE_URL``
  and ``ANTHROPIC_API_KEY`` from the environment (as Anthropic's own SDK does), so the
  test sets those.
- The Ollama block names no URL either: ``OllamaClient``/``OllamaEmbedder`` default to
  ``DEFAULT_OLLAMA_URL`` (``http://localhost:11434``), and no environment variable moves
  that (as in 0.7.1). Binding port 11434 would collide with a real Ollama on a
  developer's machine, so instead the test points that one default at the loopback
  server for the duration of the block: every constructor default equal to
  ``DEFAULT_OLLAMA_URL`` is replaced (``monkeypatch`` restores it). The block's text is
  untouched, and the objects it builds are checked to have taken the default.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import math
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

from darwin_memo import (
    Document,
    EmbeddingRetriever,
    EntryKind,
    HashingEmbedder,
    Ledger,
    MemoryEntry,
    MemoryStore,
    OllamaClient,
    OllamaEmbedder,
    Outcome,
    ProtocolAnswer,
    QueryProtocol,
    ReflectionEncoder,
    SurvivalConfig,
    SurvivalLoop,
    SurvivalReport,
    Task,
    Ticket,
    llm,
    reflection,
)
from darwin_memo.llm import AnthropicClient
from llm_servers import ChatServer, chat_server

FIXTURE = Path(__file__).parents[1] / "fixtures" / "seed_readme_blocks.md"
#: Where the seed lives: ``shared/`` beside the repository root.
SEED = Path(__file__).resolve().parents[3] / "shared" / "seeds" / "darwin-memo-README.md"

_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def python_blocks(markdown: str) -> list[str]:
    """The bodies of a markdown text's ```python blocks, in order."""
    return _PYTHON_BLOCK.findall(markdown)


BLOCKS = python_blocks(FIXTURE.read_text(encoding="utf-8"))
# The seven blocks, by the README section they sit in.
USING_IT, LEDGER, SURVIVAL_LOOP, OLLAMA, CLOUD_LLM, OWN_ENVIRONMENT, RETRIEVAL_MODES = range(7)

#: The reader's runbook for the first block: the demo runbook, plus the helper the
#: Ledger block asks about.
RUNBOOK = """\
Old app log files under logs/ may be deleted after seven days on disk.
Cache chunk files under cache/ are disposable and safe to remove at any time.
Tmp build artifact files under tmp/ are disposable and safe to remove once a build has finished.
Database store files under data/ are protected by the Platform Team and must be retained.
Quarterly report pdf files under reports/ are protected records and must be kept for five years.
The dedupe helper in tools/dedupe.py is unused since the storage rewrite and safe to remove.
"""

DEDUPE_QUESTION = "Is the dedupe helper safe to remove?"


def run_block(index: int, namespace: dict[str, Any], *, unclosed_file: bool = False) -> list[str]:
    """Execute block ``index`` in ``namespace``; return the lines it printed.

    ``unclosed_file``: the block itself leaves a file for the garbage collector to close
    (the README's ``open("runbook.txt").read()``), which Python reports as a
    ResourceWarning, an error under this suite's warning filter. That is the reader's
    code, not ours, so for that block alone the warning is ignored.
    """
    out = io.StringIO()
    code = compile(BLOCKS[index], f"<seed README python block {index + 1}>", "exec")
    with contextlib.redirect_stdout(out), warnings.catch_warnings():
        if unclosed_file:
            warnings.simplefilter("ignore", ResourceWarning)
        exec(code, namespace)
    return out.getvalue().splitlines()


# -- the fixture is the seed's blocks -------------------------------------------------


def test_fixture_holds_the_seven_blocks() -> None:
    assert len(BLOCKS) == 7, "a block was added or removed: give it a test here"
    assert all(block.startswith("from darwin_memo import") for block in BLOCKS)


def test_fixture_matches_the_seed() -> None:
    if not SEED.is_file():
        pytest.skip(f"the seed README is not beside this checkout ({SEED})")
    assert python_blocks(SEED.read_text(encoding="utf-8")) == BLOCKS


# -- offline blocks ---------------------------------------------------------------------


def test_using_it_then_the_ledger_then_the_survival_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("runbook.txt").write_text(RUNBOOK, encoding="utf-8")
    ns: dict[str, Any] = {}

    # "Using it": encode a runbook, answer with provenance.
    printed = run_block(USING_IT, ns, unclosed_file=True)
    store, answer = ns["store"], ns["answer"]
    assert isinstance(store, MemoryStore)
    assert store.upkeep == 0.05
    entries = store.alive()
    assert len(entries) >= 6
    assert all(e.sources == ["runbook"] and e.energy == 1.0 for e in entries)
    assert isinstance(answer, ProtocolAnswer)
    logs = next(e for e in entries if e.answer.startswith("Old app log files"))
    assert answer.deciding_entry == logs.id  # provenance: the entry that says so
    assert answer.text == logs.answer
    assert printed == [answer.text, logs.id]

    # "the Ledger": decide, settle with a measured delta, tick, read an obituary.
    dedupe = next(e for e in entries if "dedupe helper" in e.answer)
    ns.update(passes_before=40, passes_after=42, run_url="https://ci.example/run/7")
    ns["entry_id"] = dedupe.id
    printed = run_block(LEDGER, ns)
    ledger, ticket = ns["ledger"], ns["ticket"]
    assert isinstance(ledger, Ledger) and isinstance(ticket, Ticket)
    assert ticket.query == DEDUPE_QUESTION
    assert ticket.deciding_entry == dedupe.id
    assert ticket.answer.startswith(dedupe.answer)
    assert ledger.pending() == []  # settled
    # credit 0.6 * tanh(2 / 2.0) (resource_scale=2.0), then one tick of upkeep
    assert store.get(dedupe.id).energy == pytest.approx(1.0 + 0.6 * math.tanh(2 / 2.0) - 0.05)
    events = [json.loads(line) for line in Path("events.jsonl").read_text().splitlines()]
    kinds = [event["event"] for event in events]
    assert [k for k in kinds if k != "snapshot"] == ["decide", "settle", "tick"]
    settle = next(event for event in events if event["event"] == "settle")
    assert (settle["delta"], settle["detail"]) == (2.0, "https://ci.example/run/7")
    obituary = "\n".join(printed)
    assert obituary.startswith(dedupe.id)
    assert "https://ci.example/run/7" in obituary

    # "the SurvivalLoop": 30 cycles against a real disk, survivors saved.
    printed = run_block(SURVIVAL_LOOP, ns)
    loop, report = ns["loop"], ns["report"]
    assert isinstance(loop, SurvivalLoop) and isinstance(report, SurvivalReport)
    loop.env.cleanup()
    summary = "\n".join(printed)
    assert summary == report.summary()
    rows = [line for line in printed if re.match(r"\s+\d+\s+\d+", line)]
    assert [int(row.split()[0]) for row in rows] == list(range(30))
    saved = MemoryStore.load("memory.json")
    assert sorted(e.id for e in saved.alive()) == sorted(e.id for e in store.alive())
    assert 0 < len(saved) < len(entries) + 30


def test_bring_your_own_selection_pressure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    ns: dict[str, Any] = {"dollars_saved": 120.0}
    assert run_block(OWN_ENVIRONMENT, ns) == []
    env = ns["BudgetEnv"]()
    [task] = env.tasks(0)
    assert isinstance(task, Task)
    assert (task.prompt, task.context) == ("Is the paymentsly plan safe to cancel?", {})
    cancelled = env.verify(task, "Yes, the paymentsly plan is safe to cancel.")
    assert isinstance(cancelled, Outcome)
    assert (cancelled.delta, cancelled.detail) == (120.0, "cancelled")
    for kept in ("Do not cancel it: keep paying.", ""):
        outcome = env.verify(task, kept)
        assert (outcome.delta, outcome.detail) == (0.0, "kept")

    # "Implement two methods": the loop takes it as it is, and the right advice earns.
    store = MemoryStore()
    advice = store.add(
        MemoryEntry(
            "Is the paymentsly plan safe to cancel?",
            "Yes: nobody has used the paymentsly plan in a year, so it is safe to cancel.",
        )
    )
    SurvivalLoop(store, env, config=SurvivalConfig(cycles=3)).run()
    assert advice.energy > 1.0
    assert advice.uses == 3


class _SentenceModel:
    """What the README's ``my_model`` stands for: an object whose ``encode`` embeds text."""

    def __init__(self) -> None:
        self.embedder = HashingEmbedder(dims=128)
        self.texts: list[str] = []

    def encode(self, text: str) -> list[float]:
        self.texts.append(text)
        return self.embedder(text)


def test_retrieval_modes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    my_model = _SentenceModel()
    ns: dict[str, Any] = {"my_model": my_model}
    assert run_block(RETRIEVAL_MODES, ns) == []
    store = ns["store"]  # the last line's store: any text -> vector function
    assert isinstance(store.retriever, EmbeddingRetriever)
    lessons = [
        store.add(MemoryEntry(q, a, kind=EntryKind.EXPLICIT, sources=["runbook"]))
        for q, a in (
            ("Can old app log files under logs/ be deleted?", "Yes, after seven days on disk."),
            ("Can database files under data/ be deleted?", "No: database files are protected."),
        )
    ]
    hits = store.retrieve("Can database files be deleted?")
    assert hits and hits[0][0] is lessons[1]
    embedded = len(my_model.texts)
    assert embedded >= 3  # both entries and the query went through my_model.encode

    # "Vectors persist inside memory.json so paid embeddings are never recomputed."
    store.save("memory.json")
    loaded = MemoryStore.load("memory.json", retriever=EmbeddingRetriever(my_model.encode))
    again = loaded.retrieve("Can database files be deleted?")
    assert again[0][0].id == lessons[1].id
    assert my_model.texts[embedded:] == ["Can database files be deleted?"]

    # The HashingEmbedder line: "databse" still finds database entries.
    hashing = MemoryStore(retriever=EmbeddingRetriever(HashingEmbedder()))
    for lesson in lessons:
        hashing.add(MemoryEntry(lesson.question, lesson.answer))
    [(hit, _)] = hashing.retrieve("Are databse files protected?")
    assert hit.answer == lessons[1].answer


# -- model-backed blocks, against the loopback server ------------------------------------

#: What the scripted model "reads" in the runbook (each reflection step returns these).
LESSONS = [
    {
        "question": "Can old app log files under logs/ be deleted?",
        "answer": "Yes, after seven days on disk.",
        "kind": "explicit",
    },
    {
        "question": "Can database store files under data/ be deleted?",
        "answer": "No: the Platform Team protects them and they must be retained.",
        "kind": "explicit",
    },
    {
        "question": "Is the dedupe helper in tools/dedupe.py safe to remove?",
        "answer": "Yes: nothing has used it since the storage rewrite.",
        "kind": "inferred",
    },
]
ENTITIES = [
    {
        "entity": "Platform Team",
        "question": "What does the Platform Team protect?",
        "answer": "The database store files under data/.",
    }
]
MODEL_ANSWER = "Yes, the dedupe helper can go: nothing uses it since the storage rewrite."


def _starts(prompt: str, template: str) -> bool:
    return prompt.startswith(template.split("{")[0][:40])


def scripted_model(prompt: str, system: str) -> str:
    """The model: reflection steps get JSON lessons; the answer step cites one snippet."""
    if _starts(prompt, reflection.ENTITY_PROMPT):
        return json.dumps(ENTITIES)
    if any(
        _starts(prompt, template)
        for template in (
            reflection.EXTRACT_PROMPT,
            reflection.CONSOLIDATE_PROMPT,
            reflection.VERIFY_PROMPT,
        )
    ):
        return json.dumps(LESSONS)
    snippets = re.split(r"\n(?=\[\d+\])", prompt)[1:]
    if snippets:  # the answer-seeking step: numbered memory snippets
        cited = [s[1 : s.index("]")] for s in snippets if "dedupe helper" in s.split("\n\n")[0]]
        if not cited:
            return "I cannot tell.\nSOURCES: none"
        return f"{MODEL_ANSWER}\nSOURCES: [{cited[0]}]"
    question = re.search(r"Question: (.*)", prompt)  # grounding: already atomic
    return question.group(1) if question else ""


def _default_ollama_url(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    """Make ``url`` the default base URL of the Ollama client and embedder (see above)."""
    for cls in (OllamaClient, OllamaEmbedder):
        init = cls.__init__
        defaults = init.__defaults__ or ()
        replaced = tuple(url if d == llm.DEFAULT_OLLAMA_URL else d for d in defaults)
        assert replaced != defaults, f"{cls.__name__} no longer defaults to DEFAULT_OLLAMA_URL"
        monkeypatch.setattr(init, "__defaults__", replaced)
    assert inspect.signature(OllamaClient).parameters["base_url"].default == url


def _models(server: ChatServer, path: str, since: int = 0) -> set[str]:
    """The models named by the requests to ``path`` (from request number ``since`` on)."""
    requests = zip(server.paths[since:], server.bodies[since:], strict=True)
    return {body["model"] for seen, body in requests if seen == path}


def _dedupe_entry(store: MemoryStore) -> MemoryEntry:
    return next(e for e in store.alive() if e.question.startswith("Is the dedupe helper"))


def test_fully_local_with_ollama_then_a_cloud_llm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    ns: dict[str, Any] = {}
    runbook = [Document("runbook", RUNBOOK)]
    server: ChatServer
    with chat_server(scripted_model, embed=HashingEmbedder(dims=64)) as server:
        # "Fully local with Ollama": the four objects of the local stack.
        with monkeypatch.context() as patch:
            _default_ollama_url(patch, server.root)
            assert run_block(OLLAMA, ns) == []
        chat, store, encoder, protocol = (ns[k] for k in ("chat", "store", "encoder", "protocol"))
        assert isinstance(chat, OllamaClient) and chat.model == "llama3.2"
        assert chat.base_url == server.root  # the default, pointed at the loopback server
        assert isinstance(store.retriever, EmbeddingRetriever)
        assert isinstance(encoder, ReflectionEncoder) and isinstance(protocol, QueryProtocol)

        for entry in encoder.encode(runbook):
            store.add(entry)
        assert sorted(e.question for e in store.alive()) == sorted(
            [lesson["question"] for lesson in LESSONS] + [ENTITIES[0]["question"]]
        )
        answer = protocol.answer(DEDUPE_QUESTION)
        assert answer.deciding_entry == _dedupe_entry(store).id  # the snippet the model cited
        assert answer.text == MODEL_ANSWER  # the SOURCES line is removed
        assert {"/api/chat", "/api/embed"} <= set(server.paths)
        assert _models(server, "/api/chat") == {"llama3.2"}
        assert _models(server, "/api/embed") == {"nomic-embed-text"}
        asked = len(server.paths)

        # "With a cloud LLM": the same store, now answered by Claude over the Messages API.
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.root)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-loopback")
        monkeypatch.delenv("DARWIN_MEMO_MODEL", raising=False)
        assert run_block(CLOUD_LLM, ns) == []
        client, encoder, protocol = ns["client"], ns["encoder"], ns["protocol"]
        assert isinstance(client, AnthropicClient) and client.model == "claude-sonnet-4-6"
        assert isinstance(encoder, ReflectionEncoder) and protocol.store is store
        assert [e.question for e in encoder.encode(runbook)] == [e.question for e in store.alive()]
        answer = protocol.answer(DEDUPE_QUESTION)
        assert answer.deciding_entry == _dedupe_entry(store).id
        assert answer.text == MODEL_ANSWER
        later = server.paths[asked:]
        assert "/v1/messages" in later and "/api/chat" not in later
        assert _models(server, "/v1/messages", asked) == {"claude-sonnet-4-6"}
