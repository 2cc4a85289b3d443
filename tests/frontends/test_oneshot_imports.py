"""A one-shot ``darwin-memo ledger`` call loads what a decide and a settle use, nothing more.

Agents and the OpenClaw plugin start one such process on every recall, so the front
ends' dependencies (servers, the MCP SDK, HTTP clients, numpy, the LLM and chain
clients) stay out of it. The standard library's small modules (``dataclasses``,
``argparse``, ``sqlite3``) are not policed: they are what the command is made of.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

#: Modules a one-shot decide or settle has no use for.
NOT_NEEDED = (
    "asyncio",
    "concurrent.futures",
    "darwin_memo.answer.clients",
    "darwin_memo.answer.http",
    "darwin_memo.dashboard",
    "darwin_memo.integrations.evm",
    "darwin_memo.mcp",
    "darwin_memo.retrieval.ann",
    "darwin_memo.retrieval.embedding",
    "darwin_memo.sim",
    "email",
    "http.client",
    "http.server",
    "mcp",
    "multiprocessing",
    "numpy",
    "pydantic",
    "socket",
    "ssl",
    "urllib.request",
)


def test_a_one_shot_decide_and_settle_load_no_front_end(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    subprocess.run(
        [sys.executable, "-m", "darwin_memo", "ledger", str(store), "add", "how do I restart",
         "systemctl restart api"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    code = f"""
import contextlib, io, json, sys
from darwin_memo.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    main(["ledger", {str(store)!r}, "decide", "how do I restart the api"])
    ticket = json.loads(out.getvalue())["ticket_id"]
    main(["ledger", {str(store)!r}, "settle", ticket, "-0.5", "--detail", "ci run 7"])
print(out.getvalue().splitlines()[-1])
print(json.dumps(sorted(m for m in {NOT_NEEDED!r} if m in sys.modules)))
print(json.dumps("darwin_memo.ledger" in sys.modules))
"""
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    settled, loaded, ledger = proc.stdout.strip().splitlines()[-3:]
    assert json.loads(settled) == {"settled": True}
    assert json.loads(loaded) == []
    assert json.loads(ledger) is True  # the check above looked at a process that ran


_BLAS_CHILD = """
import os, sys
from darwin_memo.cli import run
sys.argv = ["darwin-memo", "--version"]
try:
    run()
except SystemExit:
    pass
import numpy
print(os.environ.get("OPENBLAS_NUM_THREADS"))
"""


def test_the_command_runs_numpy_on_one_blas_thread_unless_the_user_chose() -> None:
    """OpenBLAS's pool spins a second core for about 0.1 s after numpy loads; a
    command's few matrix-vector products gain nothing from it (docs/retrieval.md)."""
    import os

    def child(**extra: str) -> str:
        env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
        env.update(extra)
        return subprocess.run(
            [sys.executable, "-c", _BLAS_CHILD], check=True, capture_output=True, text=True,
            env=env, timeout=60,
        ).stdout.split()[-1]  # fmt: skip

    assert child() == "1"
    assert child(OPENBLAS_NUM_THREADS="4") == "4"
