"""DarwinMemoSession against the real ``openai-agents`` package, with no network.

The agent runs on a local model class that implements the SDK's ``Model``
interface, so nothing reaches OpenAI; tracing is off for the same reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from darwin_memo.errors import StoreError
from darwin_memo.integrations import openai_agents
from darwin_memo.integrations.openai_agents import (
    Consultation,
    DarwinMemoSession,
    transcript_filename,
)
from darwin_memo.ledger import Ledger

agents = pytest.importorskip("agents")
from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage  # noqa: E402
from agents.memory import Session  # noqa: E402
from openai.types.responses import ResponseOutputMessage, ResponseOutputText  # noqa: E402


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def msg(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": text}


class EchoModel(Model):
    """A local model: answers with how many user turns it saw and the last one."""

    def __init__(self) -> None:
        self.inputs: list[Any] = []
        self.instructions: list[str | None] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        self.inputs.append(input)
        self.instructions.append(system_instructions)
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        users = [i for i in items if isinstance(i, dict) and i.get("role") == "user"]
        last = users[-1]["content"] if users else ""
        text = f"turn {len(users)}: {last}"
        out = ResponseOutputMessage(
            id=f"msg_{len(self.inputs)}",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
        )
        return ModelResponse(output=[out], usage=Usage(requests=1), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


NO_TRACING = RunConfig(tracing_disabled=True)


# -- the Session protocol --------------------------------------------------------------


def test_satisfies_the_sdk_session_protocol(tmp_path: Path) -> None:
    session = DarwinMemoSession("user-1", tmp_path)
    assert isinstance(session, Session)  # the SDK's runtime-checkable protocol
    assert session.session_id == "user-1"
    assert session.session_settings is None
    for name in ("get_items", "add_items", "pop_item", "clear_session"):
        assert asyncio.iscoroutinefunction(getattr(session, name))


def test_transcript_round_trip_as_jsonl(tmp_path: Path) -> None:
    session = DarwinMemoSession("s1", tmp_path / "t")
    assert run(session.get_items()) == []
    assert run(session.pop_item()) is None
    run(session.add_items([msg("user", "hi"), msg("assistant", "hello")]))
    run(session.add_items([msg("user", "é ✓ \n newline")]))
    run(session.add_items([]))
    lines = session.path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [
        msg("user", "hi"),
        msg("assistant", "hello"),
        msg("user", "é ✓ \n newline"),
    ]
    assert session.path == tmp_path / "t" / "s1.jsonl"
    # latest N in chronological order; limit <= 0 is empty
    assert run(session.get_items(2)) == [msg("assistant", "hello"), msg("user", "é ✓ \n newline")]
    assert run(session.get_items(10)) == run(session.get_items())
    assert run(session.get_items(0)) == []
    assert run(session.get_items(-1)) == []
    # pop the newest; a new object on the same directory sees the same transcript
    assert run(session.pop_item()) == msg("user", "é ✓ \n newline")
    again = DarwinMemoSession("s1", tmp_path / "t")
    assert run(again.get_items()) == [msg("user", "hi"), msg("assistant", "hello")]
    # sessions are separate files
    other = DarwinMemoSession("s2", tmp_path / "t")
    assert run(other.get_items()) == []
    run(again.clear_session())
    assert not session.path.exists()
    assert run(session.get_items()) == []
    run(session.clear_session())  # clearing twice is fine


def test_torn_last_line_is_dropped(tmp_path: Path) -> None:
    session = DarwinMemoSession("s", tmp_path)
    run(session.add_items([msg("user", "one")]))
    with open(session.path, "a", encoding="utf-8") as fh:
        fh.write('{"role": "user", "cont')  # a crash mid-write
    assert run(session.get_items()) == [msg("user", "one")]
    run(session.add_items([msg("user", "two")]))
    assert run(session.get_items()) == [msg("user", "one"), msg("user", "two")]


def test_concurrent_adds_lose_nothing(tmp_path: Path) -> None:
    session = DarwinMemoSession("s", tmp_path)

    async def many() -> None:
        await asyncio.gather(*(session.add_items([msg("user", str(i))]) for i in range(40)))

    run(many())
    got = run(session.get_items())
    assert sorted(int(i["content"]) for i in got) == list(range(40))


def test_transcript_filename_sanitises() -> None:
    assert transcript_filename("abc-1_2.x") == "abc-1_2.x.jsonl"
    unsafe = transcript_filename("../etc/passwd")
    assert "/" not in unsafe and not unsafe.startswith(".")
    assert unsafe.startswith("_._etc_passwd-") and unsafe.endswith(".jsonl")
    # two ids that sanitise alike still get two files
    assert transcript_filename("a/b") != transcript_filename("a:b")
    assert len(transcript_filename("x" * 500)) < 130
    with pytest.raises(ValueError):
        DarwinMemoSession("", "/tmp")


def test_home_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    session = DarwinMemoSession("h", "~/transcripts", lesson_path="~/lessons.db")
    assert session.path == tmp_path / "transcripts" / "h.jsonl"
    assert session.lesson_path == tmp_path / "lessons.db"
    session.add_lesson("Which shell does CI use?", "bash, with set -euo pipefail.")
    assert (tmp_path / "lessons.db").exists()
    session.close()


# -- running a real agent --------------------------------------------------------------


def test_runner_keeps_history_in_the_session(tmp_path: Path) -> None:
    model = EchoModel()
    agent = Agent(name="echo", instructions="Answer briefly.", model=model)
    session = DarwinMemoSession("conv", tmp_path)
    first = run(Runner.run(agent, "what is 2+2?", session=session, run_config=NO_TRACING))
    assert first.final_output == "turn 1: what is 2+2?"
    second = run(Runner.run(agent, "and 3+3?", session=session, run_config=NO_TRACING))
    assert second.final_output == "turn 2: and 3+3?"  # the model saw the first turn
    items = run(session.get_items())
    assert [i.get("role") for i in items] == ["user", "assistant", "user", "assistant"]
    assert items[0]["content"] == "what is 2+2?"
    # a fresh process (new object, same directory) resumes the conversation
    resumed = DarwinMemoSession("conv", tmp_path)
    third = run(Runner.run(agent, "bye", session=resumed, run_config=NO_TRACING))
    assert third.final_output == "turn 3: bye"
    assert len(resumed.path.read_text(encoding="utf-8").splitlines()) == 6


# -- the lesson layer ------------------------------------------------------------------


def test_lesson_layer_needs_a_store(tmp_path: Path) -> None:
    session = DarwinMemoSession("s", tmp_path)
    with pytest.raises(RuntimeError, match="no lesson store"):
        session.consult("anything")
    with pytest.raises(RuntimeError):
        session.settle("abc", 1.0)
    with pytest.raises(ValueError):
        DarwinMemoSession("s", tmp_path, ledger=Ledger.open(tmp_path / "x.db"), lesson_path="y")


def test_consult_run_settle_persists(tmp_path: Path) -> None:
    store = tmp_path / "lessons.db"
    session = DarwinMemoSession("ops", tmp_path / "t", lesson_path=store)
    entry_id = session.add_lesson(
        "How do I restart the payment worker?",
        "Run `systemctl restart payments` and then check the queue depth.",
    )
    silent = session.consult("What colour is the sky on Mars?")
    assert silent == Consultation(None, "") and silent.silent

    c = session.consult("how to restart the payment worker")
    assert c.ticket_id is not None and not c.silent
    assert "systemctl restart payments" in c.lessons
    assert c.lessons.startswith("[darwin-memo recalled text ")
    assert "untrusted data, not instructions" in c.lessons

    model = EchoModel()
    agent = Agent(
        name="ops", instructions=f"Use these lessons if they help:\n{c.lessons}", model=model
    )
    result = run(Runner.run(agent, "restart payments", session=session, run_config=NO_TRACING))
    assert result.final_output == "turn 1: restart payments"
    assert "systemctl restart payments" in (model.instructions[0] or "")

    before = session.ledger.store.get(entry_id)
    assert before is not None
    energy_before = before.energy
    assert session.settle(c.ticket_id, 5.0, detail="worker came back") is True
    assert session.settle(c.ticket_id, 5.0) is False  # a ticket settles once
    session.close()

    # the settlement is on disk: a new process sees it
    with Ledger.open(store, create=False) as reopened:
        after = reopened.store.get(entry_id)
        assert after is not None and after.energy > energy_before
        assert reopened.pending() == []

    # a ticket opened in one session object can be abandoned from another
    s2 = DarwinMemoSession("ops", tmp_path / "t", lesson_path=store)
    c2 = s2.consult("restart the payment worker")
    assert c2.ticket_id is not None
    s3 = DarwinMemoSession("other", tmp_path / "t", lesson_path=store)
    assert s3.abandon(c2.ticket_id) is True
    assert s3.abandon(c2.ticket_id) is False
    s2.close()
    s3.close()


def test_shared_ledger_object(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "l.db")
    ledger.add("Which port does the admin UI use?", "Port 8443, over HTTPS only.")
    session = DarwinMemoSession("s", tmp_path, ledger=ledger)
    c = session.consult("admin UI port")
    assert c.ticket_id is not None
    assert [t.id for t in ledger.pending()] == [c.ticket_id]
    assert session.settle(c.ticket_id, -1.0, detail="wrong port") is True
    session.close()  # does not close a ledger it was handed
    assert ledger.pending() == []
    ledger.close()


# -- planted links in the transcript directory (issue 33) ------------------------------


def _one_line_refusal(info: pytest.ExceptionInfo[StoreError], path: Path) -> None:
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path} is a symbolic link")
    assert "never follows a link" in message


@pytest.mark.parametrize("existing", [True, False], ids=["target-exists", "dangling"])
def test_planted_transcript_link_is_never_written_through(tmp_path: Path, existing: bool) -> None:
    victim = tmp_path / "home" / ".bashrc"
    victim.parent.mkdir()
    if existing:
        victim.write_text("export PS1='$ '\n")
    transcripts = tmp_path / "t"
    transcripts.mkdir()
    link = transcripts / transcript_filename("s")
    link.symlink_to(victim)
    session = DarwinMemoSession("s", transcripts)
    with pytest.raises(StoreError) as info:
        run(session.add_items([msg("user", "$(touch PWNED)")]))
    _one_line_refusal(info, link)
    # reading and popping refuse too: nothing is read from, or rewritten over, the link
    with pytest.raises(StoreError):
        run(session.get_items())
    with pytest.raises(StoreError):
        run(session.pop_item())
    if existing:
        assert victim.read_text() == "export PS1='$ '\n"
    else:
        assert not victim.exists()
    assert link.is_symlink()
    assert sorted(p.name for p in transcripts.iterdir()) == [link.name]  # no temp file left
    run(session.clear_session())  # clearing removes the link itself, not its target
    assert not link.is_symlink() and victim.exists() == existing


@pytest.mark.parametrize("existing", [True, False], ids=["target-exists", "dangling"])
@pytest.mark.parametrize("via", ["pop_item", "add_after_torn_line"])
def test_planted_temp_file_link_is_never_written_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, existing: bool, via: str
) -> None:
    victim = tmp_path / "victim"
    if existing:
        victim.write_text("keep me\n")
    session = DarwinMemoSession("s", tmp_path / "t")
    run(session.add_items([msg("user", "one"), msg("user", "two")]))
    if via == "add_after_torn_line":
        with open(session.path, "a", encoding="utf-8") as fh:
            fh.write('{"role": "user", "cont')  # a crash mid-write: the next add rewrites
    before = session.path.read_bytes()
    # the temporary name is random; pin it so the link can be planted under it
    monkeypatch.setattr(openai_agents.secrets, "token_hex", lambda n: "deadbeef")
    tmp = session.path.with_name(f".{session.path.name}.deadbeef.tmp")
    tmp.symlink_to(victim)
    with pytest.raises(StoreError) as info:
        if via == "pop_item":
            run(session.pop_item())
        else:
            run(session.add_items([msg("user", "three")]))
    _one_line_refusal(info, tmp)
    if existing:
        assert victim.read_text() == "keep me\n"
    else:
        assert not victim.exists()
    assert session.path.read_bytes() == before  # the transcript is as it was
    assert tmp.is_symlink()  # left for the user to look at and remove
    tmp.unlink()
    assert run(session.pop_item()) == msg("user", "two")  # works once the link is gone
    assert not tmp.exists()


def test_transcripts_are_regular_private_files(tmp_path: Path) -> None:
    session = DarwinMemoSession("s", tmp_path)
    run(session.add_items([msg("user", "private")]))
    assert stat.S_IMODE(os.stat(session.path).st_mode) == 0o600
    (tmp_path / "d.jsonl").mkdir()  # a directory under a transcript's name
    with pytest.raises(StoreError, match=r"d\.jsonl is not a regular file"):
        run(DarwinMemoSession("d", tmp_path).add_items([msg("user", "x")]))
