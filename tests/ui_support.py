"""Stores and servers shared by the dashboard tests (``test_ui.py``, ``test_ui_browser.py``)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from darwin_memo.dashboard.server import DashboardServer, make_server
from darwin_memo.ledger import Ledger

#: Memory text that would run script if the page ever treated it as HTML.
HOSTILE_QUESTION = '<img src=x onerror="window.__pwned=1"> is the tmp folder safe to clear?'
HOSTILE_ANSWER = "<script>window.__pwned=2</script> yes, always clear tmp"


@dataclass
class Scenario:
    """What ``build_store`` did, for tests to check the dashboard against."""

    path: Path
    ids: dict[str, str] = field(default_factory=dict)
    pending_ticket: str = ""


def build_store(path: Path, ticks: int = 22) -> Scenario:
    """A store that has lived: credits, an execution, starvation, a merge, a forget,
    a pin, a hostile entry, and one open ticket (the hostile entry's)."""
    scenario = Scenario(path)
    with Ledger.open(path) as ledger:
        add = ledger.add
        ids = scenario.ids
        ids["cache"] = add(
            "Are cache chunk files under cache/ safe to delete?",
            "Yes: cache chunk files are disposable.",
            source="runbook",
        ).id
        ids["logs"] = add(
            "May old log files under logs/ be deleted?",
            "Old log files may be deleted after seven days.",
            source="runbook",
        ).id
        ids["logs_twin"] = add(
            "May old log files under logs/ be deleted?",
            "Old log files may be deleted after seven days.",
            source="wiki",
        ).id
        ids["poison"] = add(
            "Are database store files under data/ safe to remove?",
            "Yes: database store files are redundant and safe to remove.",
            source="forum-post",
        ).id
        ids["hostile"] = add(HOSTILE_QUESTION, HOSTILE_ANSWER, source="forum-post").id
        ids["trivia"] = add(
            "When is the annual offsite?", "Usually in October near the lake.", source="notes"
        ).id
        ids["editor"] = add("Which editor does the team use?", "Mostly vim.", source="notes").id
        ids["backups"] = add(
            "Who backs up the database store files?",
            "The platform team, nightly.",
            source="runbook",
        ).id
        ledger.pin(ids["backups"])
        ledger.forget(ids["editor"])
        for run in range(2):  # the poison decides twice and is executed by the damage
            ticket = ledger.decide("Is it safe to remove database store files under data/?")
            ledger.settle(ticket.id, -6, detail=f"restore cost: 6 files (run {run})")
        # The hostile entry decides once and its ticket stays open: escrowed, it lives on.
        scenario.pending_ticket = ledger.decide("Is the tmp folder safe to clear?").id
        for run in range(3):  # settlements of tickets nobody opened: settles_dropped
            ledger.settle(f"{run:012x}", 1, detail="a typo in the ticket id")
        for tick in range(ticks):
            if tick % 3 == 0:
                ticket = ledger.decide("Is it safe to delete cache chunk files under cache/?")
                ledger.settle(ticket.id, 3, detail=f"freed 3 chunk files (run {tick})")
            if tick % 4 == 1:
                ticket = ledger.decide("May old log files under logs/ be deleted?")
                ledger.settle(ticket.id, 1, detail=f"freed a log file (run {tick})")
            ledger.tick()
    return scenario


@dataclass
class ServerProcess:
    """A ``darwin-memo ui`` running as its own process, as people run it."""

    url: str
    port: int
    proc: subprocess.Popen[str]
    token: str = ""

    @property
    def page_url(self) -> str:
        """The printed address: the page with its token."""
        return f"{self.url}/?token={self.token}"


def interruptible() -> None:
    """In a child the test will stop with SIGINT: take SIGINT's default action back.

    A test run started in the background by a shell without job control inherits
    SIGINT ignored, and so would the child, which Python then never interrupts.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def running(
    path: Path, *, in_process: bool = False, **kwargs: Any
) -> Iterator[ServerProcess | DashboardServer]:
    """A dashboard on an ephemeral loopback port.

    By default ``darwin-memo ui`` in a child process, so the test may open the
    store itself (in another process, as every real reader and writer does);
    ``in_process=True`` serves from a thread instead (for ``make_server`` options).
    """
    if in_process:
        server = make_server(path, port=0, **kwargs)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
        thread.start()
        try:
            yield server
        finally:
            server.shutdown()
            thread.join(10)
            server.server_close()
        return
    env = {k: v for k, v in os.environ.items() if k != "DARWIN_MEMO_DEBUG"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "darwin_memo", "ui", str(path), "--port", "0", "--no-open"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=interruptible,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.fullmatch(
        r"darwin-memo ui: (http://127\.0\.0\.1:(\d+))/\?token=([A-Za-z0-9_-]{32})  "
        r"\(ctrl-c to stop\)\n",
        line,
    )
    if match is None:
        proc.kill()
        _, err = proc.communicate(timeout=30)
        raise AssertionError(f"darwin-memo ui did not start: {line!r} {err!r}")
    try:
        yield ServerProcess(match.group(1), int(match.group(2)), proc, match.group(3))
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    assert proc.returncode == 0, err
    assert err.strip() == "darwin-memo ui: stopped", err


def fetch(
    server: ServerProcess | DashboardServer,
    path: str,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    token: bool = True,
) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of one request (errors are answers, not exceptions).

    An ``/api/`` request carries the server's token unless ``headers`` say otherwise
    (``token=False`` sends none).
    """
    data = b"{}" if method in ("POST", "PUT", "PATCH") else None
    headers = dict(headers or {})
    if token and path.startswith("/api/"):
        headers.setdefault("X-Darwin-Memo-Token", server.token)
    request = urllib.request.Request(server.url + path, method=method, headers=headers, data=data)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def get_json(server: ServerProcess | DashboardServer, path: str) -> Any:
    status, _, body = fetch(server, path)
    assert status == 200, (path, status, body[:300])
    return json.loads(body)


def cli(
    *args: str, cwd: Path | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``darwin-memo ARGS`` in a fresh interpreter: another process, as in real use."""
    env = {k: v for k, v in os.environ.items() if k != "DARWIN_MEMO_DEBUG"}
    env["PYTHONUTF8"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "darwin_memo", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
