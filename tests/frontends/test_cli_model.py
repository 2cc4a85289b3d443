"""``darwin-memo query/encode --model SPEC``: the real CLI in a subprocess, models on loopback.

The model servers run in this test process (tests/llm_servers.py) and speak the
real OpenAI, Ollama and Anthropic wire formats; the CLI reaches them over TCP.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from darwin_memo.answer.clients import MODEL_SPEC_HELP, client_from_spec
from darwin_memo.cli import core
from darwin_memo.records.entry import EntryKind, MemoryEntry
from darwin_memo.store import MemoryStore
from llm_servers import chat_server


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    full_env.pop("DARWIN_MEMO_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "darwin_memo", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=full_env,
    )


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1, proc
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.fixture
def store_file(tmp_path: Path) -> tuple[Path, list[str]]:
    store = MemoryStore()
    ids = [
        store.add(
            MemoryEntry(
                "Can cache chunks under cache/ be removed?",
                "Cache chunks under cache/ are disposable and safe to remove.",
                EntryKind.EXPLICIT,
                ["runbook"],
            )
        ).id,
        store.add(
            MemoryEntry(
                "Who owns the database files under data/?",
                "The Platform Team owns data/ and its files must be retained.",
                EntryKind.EXPLICIT,
                ["runbook"],
            )
        ).id,
    ]
    path = tmp_path / "memory.json"
    store.save(path)
    return path, ids


def answering(answer: str) -> Any:
    """Grounding echoes the question; the answer call gets ``answer``."""

    def respond(prompt: str, system: str) -> str:
        if prompt.startswith("Split the question"):
            return prompt.rsplit("Question: ", 1)[1]
        return answer

    return respond


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_query_with_an_openai_compatible_model_names_the_cited_entry(
    store_file: tuple[Path, list[str]],
) -> None:
    path, _ = store_file
    reply = "<think>cache is [1]</think>Yes: cache chunks are disposable.\nSOURCES: [1]"
    with chat_server(answering(reply)) as server:
        proc = run(
            "query", str(path), "can I remove cache chunks?", "--model", f"openai:m@{server.url}"
        )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "Yes: cache chunks are disposable."
    assert "deciding entry: [explicit] Can cache chunks under cache/ be removed?" in proc.stdout
    assert "sources: runbook" in proc.stdout
    assert "<think>" not in proc.stdout and "SOURCES" not in proc.stdout
    assert server.paths == ["/v1/chat/completions"] * 2
    assert "[1] Q: Can cache chunks under cache/ be removed?" in server.prompts[1]


def test_query_with_two_citations_lists_both(store_file: tuple[Path, list[str]]) -> None:
    path, ids = store_file
    reply = "Cache yes, data no.\nSOURCES: [1] [2]"
    with chat_server(answering(reply)) as server:
        proc = run(
            "query",
            str(path),
            "can I delete cache/ chunks and data/ database files?",
            "--model",
            f"openai:m@{server.url}",
        )
    assert proc.returncode == 0, proc.stderr
    cited = re.search(r"cited entries: (.*)", proc.stdout)
    assert cited is not None
    assert sorted(cited.group(1).split(", ")) == sorted(ids)


def test_query_with_ollama_and_anthropic_specs(store_file: tuple[Path, list[str]]) -> None:
    path, _ = store_file
    with chat_server(answering("Retain them.\nSOURCES: [1]")) as server:
        ollama = run("query", str(path), "who owns data/?", "--model", f"ollama:m@{server.root}")
        claude = run(
            "query",
            str(path),
            "who owns data/?",
            "--model",
            f"anthropic:claude-test@{server.root}",
            env={"ANTHROPIC_API_KEY": "sk-ant-test"},
        )
    for proc in (ollama, claude):
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("Retain them.")
        assert "deciding entry: [explicit] Who owns the database files under data/?" in proc.stdout
    assert server.paths == ["/api/chat"] * 2 + ["/v1/messages"] * 2


def test_unreachable_openai_server_is_one_clear_line(store_file: tuple[Path, list[str]]) -> None:
    path, _ = store_file
    url = f"http://127.0.0.1:{closed_port()}/v1"
    line = one_line_error(run("query", str(path), "cache?", "--model", f"openai:m@{url}"))
    assert line.startswith(f"error: OpenAICompatClient (model 'm', {url}/chat/completions): ")
    assert "cannot connect" in line


def test_unreachable_ollama_is_refused_before_any_work(store_file: tuple[Path, list[str]]) -> None:
    path, _ = store_file
    url = f"http://127.0.0.1:{closed_port()}"
    line = one_line_error(run("query", str(path), "cache?", "--model", f"ollama:llama3.2@{url}"))
    assert line == (
        f"error: OllamaClient (model 'llama3.2', {url}): no Ollama server answers there "
        "(start one with `ollama serve`, or name another with ollama:NAME@URL)"
    )


def test_server_errors_end_in_one_line_after_retries(store_file: tuple[Path, list[str]]) -> None:
    path, _ = store_file
    with chat_server(lambda p, s: (503, {"error": {"message": "overloaded"}})) as server:
        line = one_line_error(
            run("query", str(path), "cache?", "--model", f"openai:m@{server.url}")
        )
    assert "HTTP 503: overloaded (gave up after 4 attempts)" in line
    assert len(server.prompts) == 4


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("gpt-4", f"error: unknown model spec 'gpt-4': expected {MODEL_SPEC_HELP}"),
        ("mistral:7b", f"error: unknown model spec 'mistral:7b': expected {MODEL_SPEC_HELP}"),
        ("openai:m@", f"error: unknown model spec 'openai:m@': expected {MODEL_SPEC_HELP}"),
    ],
)
def test_bad_specs(store_file: tuple[Path, list[str]], spec: str, message: str) -> None:
    path, _ = store_file
    assert one_line_error(run("query", str(path), "cache?", "--model", spec)) == message


def test_anthropic_without_a_key(store_file: tuple[Path, list[str]]) -> None:
    path, _ = store_file
    proc = run(
        "query", str(path), "cache?", "--model", "anthropic:claude-x", env={"ANTHROPIC_API_KEY": ""}
    )
    assert "no API key; set ANTHROPIC_API_KEY" in one_line_error(proc)


def test_encode_with_a_model_writes_reflection_entries(tmp_path: Path) -> None:
    doc = tmp_path / "runbook.txt"
    doc.write_text("Cache chunks under cache/ are disposable. The Platform Team owns data/.\n")
    other = tmp_path / "notes.txt"
    other.write_text("The Platform Team backs up data/ nightly.\n")
    facts = json.dumps([{"question": "Who owns data/?", "answer": "The Platform Team."}])

    def respond(prompt: str, system: str) -> str:
        if prompt.startswith("List the named entities"):
            return "not json"  # always malformed: skipped after retries, reported
        if prompt.startswith("Read the two documents"):
            return json.dumps([{"question": "Who owns and backs up data/?", "answer": "Both."}])
        return facts

    out = tmp_path / "memory.json"
    with chat_server(respond) as server:
        proc = run(
            "encode", str(doc), str(other), "-o", str(out), "--model", f"openai:m@{server.url}"
        )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == f"Encoded 2 entries from 2 documents -> {out}"
    assert "[9/9]" in proc.stderr
    assert "skipped entities for runbook: no JSON array found after 3 attempts" in proc.stderr
    store = MemoryStore.load(out)
    by_question = {e.question: e for e in store.alive()}
    assert by_question["Who owns data/?"].sources == ["runbook", "notes"]
    assert by_question["Who owns and backs up data/?"].kind == EntryKind.CROSS_DOC


def test_cli_help_names_the_same_specs_as_the_library() -> None:
    assert core.MODEL_SPEC_HELP == MODEL_SPEC_HELP
    with pytest.raises(Exception, match="unknown model spec"):
        client_from_spec("openai:")


def test_a_grounding_reply_that_answers_instead_of_splitting_still_consults_memory(
    store_file: tuple[Path, list[str]],
) -> None:
    """Small models answer the grounding prompt; the query itself is retrieved too."""
    from darwin_memo.answer.clients import OpenAICompatClient
    from darwin_memo.answer.protocol import QueryProtocol

    path, ids = store_file

    def respond(prompt: str, system: str) -> str:
        if prompt.startswith("Split the question"):
            return "Sure! Here are the sub-questions you asked for, in order:"
        return "Disposable.\nSOURCES: [1]"

    store = MemoryStore.load(path)
    with chat_server(respond) as server:
        client = OpenAICompatClient("m", base_url=server.url, api_key="")
        answer = QueryProtocol(store, client).answer("Can cache chunks under cache/ be removed?")
    assert answer.deciding_entry == ids[0]
    assert "[1] Q: Can cache chunks under cache/ be removed?" in server.prompts[1]
