"""``darwin-memo ledger STORE serve``, driven as real processes over real pipes.

A serve process answers each JSON-array request with the object the one-shot command
prints, in order, one line each; every request is its own transaction, so one-shot
commands and other serve processes share the store, and killing serve (``kill -9``)
loses nothing it acknowledged.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from darwin_memo.ledger import Ledger

ENTRY_POINT = Path(sys.executable).with_name("darwin-memo")

LOG_Q = "Is it safe to delete old log files?"
LOG_A = "Old log files under logs/ may be deleted after seven days."


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DARWIN_MEMO_DEBUG"}
    env["PYTHONUTF8"] = "1"
    return env


def one_shot(store: Path, *args: str, stdin: str | None = None) -> dict[str, Any]:
    proc = subprocess.run(
        [str(ENTRY_POINT), "ledger", str(store), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout
    out: dict[str, Any] = json.loads(lines[0])
    return out


class Serve:
    """One ``ledger STORE serve`` process and its two pipes."""

    def __init__(self, store: Path, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [str(ENTRY_POINT), "ledger", str(store), *extra, "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(),
        )

    def send(self, line: bytes | str | list[str]) -> None:
        if isinstance(line, list):
            line = json.dumps(line)
        if isinstance(line, str):
            line = line.encode("utf-8")
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def reply(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.endswith(b"\n"), "serve ended without replying"
        out: dict[str, Any] = json.loads(line)
        return out

    def ask(self, request: bytes | str | list[str]) -> dict[str, Any]:
        self.send(request)
        return self.reply()

    def close(self) -> int:
        """End input; the exit code (serve must end by itself)."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=30)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        assert self.proc.stdout.read() == b""  # no reply without a request
        assert b"Traceback" not in self.proc.stderr.read()
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


@pytest.fixture
def serves() -> Iterator[list[Serve]]:
    started: list[Serve] = []
    yield started
    for s in started:
        s.kill()
        for pipe in (s.proc.stdin, s.proc.stdout, s.proc.stderr):
            if pipe is not None:
                pipe.close()


@pytest.fixture(params=["db", "json"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A store (SQLite or the published JSON format) holding one lesson."""
    path = tmp_path / f"memory.{request.param}"
    assert "entry_id" in one_shot(path, "add", LOG_Q, LOG_A)
    return path


def test_replies_match_the_one_shot_command_in_order(store: Path, serves: list[Serve]) -> None:
    s = Serve(store)
    serves.append(s)
    requests: list[list[str]] = [
        ["stats"],
        ["add", "--source", "runbook", "Where do cache chunks live?", "Under cache/."],
        ["stats"],
        ["decide", LOG_Q, "--half-life", "20"],
        ["obituary", "no-such-entry"],
        ["settle", "no-such-ticket", "1"],
        ["tick"],
        ["verify"],
    ]
    for r in requests:
        s.send(r)  # all at once: the replies must still come one a request, in order
    replies = [s.reply() for _ in requests]
    assert s.close() == 0

    assert replies[0]["alive"] == 1
    assert isinstance(replies[1]["entry_id"], str)
    assert replies[2]["alive"] == 2
    assert replies[3]["silent"] is False and replies[3]["answer"].startswith(LOG_A)
    assert replies[3]["ticket_id"]
    assert replies[4] == one_shot(store, "obituary", "no-such-entry")
    assert replies[5] == {"settled": False}
    assert replies[6]["tick"] == 1
    assert replies[7]["ok"] is True and replies[7]["problems"] == []
    # The one-shot command sees what serve committed.
    after = one_shot(store, "stats")
    assert after["alive"] == 2 and after["pending_tickets"] == 1
    assert one_shot(store, "settle", replies[3]["ticket_id"], "1") == {"settled": True}


def test_a_bad_line_gets_a_json_error_and_serve_carries_on(
    store: Path, serves: list[Serve]
) -> None:
    s = Serve(store)
    serves.append(s)
    bad: list[bytes | str | list[str]] = [
        "not json",
        '{"op": "stats"}',
        "[1, 2]",
        "[]",
        '"stats"',
        b'["stats\xff"]',
        ["serve"],
        ["decide", "-"],
        ["add", LOG_Q, "-"],
        ["frobnicate"],
        ["settle", "t", "nan"],
        ["decide", "--help"],
        ["--he"],
        ["-h"],
    ]
    codes = []
    for line in bad:
        out = s.ask(line)
        assert set(out) == {"error", "code"}, out
        assert "Traceback" not in out["error"]
        codes.append(out["code"])
    assert codes[:9] == ["bad_input"] * 9
    assert codes[9] == "usage"
    assert codes[10:] == ["bad_input"] * 4
    s.send("")  # a blank line is no request: no reply
    assert s.ask(["stats"])["alive"] == 1  # still serving, and nothing was written
    assert s.close() == 0


def test_scale_given_to_serve_applies_to_every_request(tmp_path: Path, serves: list[Serve]) -> None:
    path = tmp_path / "m.db"
    one_shot(path, "add", LOG_Q, LOG_A)
    s = Serve(path, "--scale", "2")
    serves.append(s)
    ticket = s.ask(["decide", LOG_Q])["ticket_id"]
    assert s.ask(["settle", ticket, "1.5"]) == {"settled": True}
    assert s.close() == 0
    # One entry, no supporters: its balance moved by exactly 0.6 * tanh(delta / scale).
    with Ledger.open(path, create=False) as ledger:
        (entry,) = ledger.store.alive()
        assert entry.energy == pytest.approx(1.0 + 0.6 * math.tanh(1.5 / 2), abs=1e-12)


def test_one_shot_and_two_serve_processes_share_the_store(store: Path, serves: list[Serve]) -> None:
    a, b = Serve(store), Serve(store)
    serves += [a, b]
    tickets = []
    for i in range(6):
        who = a if i % 2 else b
        got = who.ask(["decide", LOG_Q])
        assert got.get("ticket_id"), (i, got)
        tickets.append(got["ticket_id"])
        one_shot(store, "add", f"Question number {i}?", f"Answer number {i}.")
    assert len(set(tickets)) == 6
    assert a.ask(["stats"])["pending_tickets"] == 6
    assert b.ask(["stats"])["alive"] == 7
    # A ticket opened by one process is settled by another, exactly once.
    assert a.ask(["settle", tickets[0], "1"]) == {"settled": True}
    assert b.ask(["settle", tickets[0], "1"]) == {"settled": False}
    assert one_shot(store, "settle", tickets[1], "-1") == {"settled": True}
    assert a.ask(["verify"])["ok"] is True
    assert a.close() == 0 and b.close() == 0


def test_kill_9_loses_no_acknowledged_settlement(store: Path, serves: list[Serve]) -> None:
    n = 60
    opener = Serve(store)
    serves.append(opener)
    for _ in range(n):
        opener.send(["decide", LOG_Q])
    tickets = [opener.reply()["ticket_id"] for _ in range(n)]
    assert opener.close() == 0
    assert len(set(tickets)) == n

    s = Serve(store)
    serves.append(s)
    for i, t in enumerate(tickets):  # the whole stream, before any reply is read
        s.send(["settle", "--detail", f"run {i}", t, "1" if i % 3 else "-1"])
    acked = [s.reply() for _ in range(n // 3)]
    os.kill(s.proc.pid, signal.SIGKILL)
    s.proc.wait(timeout=30)
    assert s.proc.returncode == -signal.SIGKILL
    assert all(r == {"settled": True} for r in acked)

    # Every acknowledged settlement is on disk: settling it again is refused.
    for t in tickets[: len(acked)]:
        assert one_shot(store, "settle", t, "1") == {"settled": False}
    # A client retries the rest through a new serve process: each lands exactly once
    # (a request that landed before the kill but was never acknowledged is refused).
    again = Serve(store)
    serves.append(again)
    retried = [
        again.ask(["settle", t, "1" if i % 3 else "-1"])
        for i, t in enumerate(tickets)
        if i >= len(acked)
    ]
    assert all(r in ({"settled": True}, {"settled": False}) for r in retried)
    stats = again.ask(["stats"])
    assert stats["pending_tickets"] == 0
    verify = again.ask(["verify"])
    assert verify["ok"] is True, verify["problems"]
    assert again.close() == 0
    assert one_shot(store, "verify")["ok"] is True


def test_serve_takes_no_operands(tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(ENTRY_POINT), "ledger", str(tmp_path / "m.db"), "serve", "extra"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["code"] == "usage"
    assert "Traceback" not in proc.stderr


def test_a_missing_store_is_created_by_add_and_then_served(
    tmp_path: Path, serves: list[Serve]
) -> None:
    path = tmp_path / "new" / "m.db"
    s = Serve(path)
    serves.append(s)
    assert s.ask(["stats"])["store"] == "missing"
    assert not path.exists()  # only add creates it
    assert "entry_id" in s.ask(["add", LOG_Q, LOG_A])
    assert s.ask(["stats"])["alive"] == 1
    # Replaced under serve (as a restore from backup would): serve follows the path.
    path.unlink()
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    assert one_shot(path, "add", "Another question?", "Another answer.")["entry_id"]
    one_shot(path, "add", "A third question?", "A third answer.")
    assert s.ask(["stats"])["alive"] == 2
    assert s.close() == 0
