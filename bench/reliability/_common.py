"""Helpers shared by the reliability benchmarks (stdlib + darwin_memo only).

* a seeded store whose questions the benchmark queries match (so ``decide`` is
  not silent);
* running ``darwin-memo ledger`` either as a real program (``python -m
  darwin_memo``) or in-process through ``darwin_memo.cli.main`` (same code path
  minus the interpreter start, for the fast pytest versions and for inputs argv
  cannot carry, such as NUL bytes);
* strict parsing of the CLI's "one JSON object on stdout" contract;
* journal bookkeeping (decided / settled / pending tickets) and store dumps that
  tell whether a refused command changed anything.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import platform
import sqlite3
import subprocess
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOPICS = [
    "nginx", "postgres", "redis", "kafka", "grafana", "jenkins", "airflow", "minio",
    "consul", "vault", "traefik", "rabbitmq", "elastic", "prometheus", "haproxy",
    "memcached", "zookeeper", "cassandra", "keycloak", "gitea",
]  # fmt: skip

SUFFIX = {"db": ".db", "json": ".json"}


def topic_question(name: str) -> str:
    return f"How do I clear the {name} cache safely?"


def topic_answer(name: str) -> str:
    return f"Stop {name}, run `{name}-ctl cache purge`, then start {name} again."


def topic_query(name: str) -> str:
    return f"clear the {name} cache safely"


def store_path(directory: Path, backend: str, stem: str = "store") -> Path:
    return directory / f"{stem}{SUFFIX[backend]}"


def seed_store(path: Path | str, n: int = 20) -> list[str]:
    """Create a store holding ``n`` topic entries (through the library; a URL for PG)."""
    from darwin_memo.ledger import Ledger

    if isinstance(path, Path):
        path.parent.mkdir(parents=True, exist_ok=True)
    with Ledger.open(path) as ledger:
        return [ledger.add(topic_question(t), topic_answer(t)).id for t in TOPICS[:n]]


def machine() -> dict[str, Any]:
    import darwin_memo

    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "sqlite": sqlite3.sqlite_version,
        "darwin_memo": darwin_memo.__version__,
        "darwin_memo_path": str(Path(darwin_memo.__file__).parent),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }


# -- running the CLI ---------------------------------------------------------------


@dataclass
class CliResult:
    rc: int
    stdout: bytes
    stderr: bytes
    elapsed: float
    argv: list[Any] = field(default_factory=list)

    @property
    def text(self) -> str:
        return (self.stdout + self.stderr).decode("utf-8", "replace")


def cli_command(*args: str | bytes) -> list[str | bytes]:
    return [sys.executable, "-m", "darwin_memo", *args]


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DARWIN_MEMO_DEBUG"}
    if extra:
        env.update(extra)
    return env


def run_subprocess(
    args: list[str | bytes],
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    cwd: Path | None = None,
) -> CliResult:
    """``python -m darwin_memo ARGS`` as a real program."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        cli_command(*args),
        input=stdin if stdin is not None else b"",
        capture_output=True,
        env=env if env is not None else child_env(),
        timeout=timeout,
        cwd=cwd,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - t0, args)


class _Stdin:
    def __init__(self, data: bytes) -> None:
        self.buffer = io.BytesIO(data)

    def read(self) -> str:  # pragma: no cover - the CLI reads .buffer
        return self.buffer.read().decode("utf-8")


def run_inprocess(args: list[str], stdin: bytes | None = None) -> CliResult:
    """``darwin_memo.cli.main(ARGS)`` with stdin/stdout/stderr captured.

    An exception escaping ``main`` is what a real process would print as a
    traceback, so its formatted traceback goes into ``stderr``.
    """
    import darwin_memo.cli.common as common
    from darwin_memo.cli import main

    # read_text_arg remembers in a module global that stdin was consumed; a real
    # process starts fresh, so we do too (see docs/reliability.md, findings).
    common._stdin_used = False
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = _Stdin(stdin or b"")  # type: ignore[assignment]
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(list(args))
            except SystemExit as exc:
                code = exc.code
                rc = code if isinstance(code, int) else (0 if code is None else 1)
            except BaseException:  # what would have been a traceback
                err.write(traceback.format_exc())
                rc = 1
    finally:
        sys.stdin = old_stdin
    elapsed = time.perf_counter() - t0
    enc = "utf-8"
    return CliResult(
        rc,
        out.getvalue().encode(enc, "surrogateescape"),
        err.getvalue().encode(enc, "surrogateescape"),
        elapsed,
        list(args),
    )


def one_json_object(stdout: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """The single JSON object on stdout, or why stdout is not exactly that."""
    try:
        text = stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"stdout is not valid UTF-8 (byte {exc.start})"
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) != 1:
        return None, f"stdout has {len(lines)} non-empty lines, expected 1"
    try:
        obj = json.loads(lines[0])
    except ValueError as exc:
        return None, f"stdout is not JSON: {exc}"
    if not isinstance(obj, dict):
        return None, f"stdout is JSON {type(obj).__name__}, not an object"
    return obj, None


def contract_problem(res: CliResult) -> str | None:
    """None when a CLI run kept its contract: no traceback, one JSON object,
    failures as {"error", "code"} with a non-zero exit."""
    if b"Traceback" in res.stdout or b"Traceback" in res.stderr:
        return "traceback in output"
    obj, why = one_json_object(res.stdout)
    if obj is None:
        return why
    if res.rc != 0:
        if not isinstance(obj.get("error"), str) or not isinstance(obj.get("code"), str):
            return f"exit {res.rc} without an error object: {sorted(obj)}"
    elif "error" in obj:
        return "error object with exit status 0"
    return None


def short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def describe_argv(argv: list[Any]) -> list[str]:
    return [short(a if isinstance(a, str) else repr(a), 80) for a in argv]


# -- journal and store state ------------------------------------------------------------


@dataclass
class JournalIndex:
    decided: Counter[str]
    settled: Counter[str]
    expired: set[str]
    events: int


def journal_index(events: Any) -> JournalIndex:
    decided: Counter[str] = Counter()
    settled: Counter[str] = Counter()
    expired: set[str] = set()
    n = 0
    for e in events:
        n += 1
        kind = e.get("event")
        if kind == "decide" and e.get("ticket"):
            decided[str(e["ticket"])] += 1
        elif kind == "settle":
            settled[str(e.get("ticket"))] += 1
            if e.get("expired"):
                expired.add(str(e.get("ticket")))
    return JournalIndex(decided, settled, expired, n)


def sqlite_dump(path: Path) -> str:
    """A digest of every row of every table of an SQLite store (content, not bytes)."""
    conn = sqlite3.connect(path)
    try:
        h = hashlib.sha256()
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]  # fmt: skip
        for table in tables:
            h.update(f"\x00{table}\x00".encode())
            for row in sorted(conn.execute(f'SELECT * FROM "{table}"'), key=repr):
                h.update(repr(row).encode("utf-8", "surrogatepass"))
        return h.hexdigest()
    finally:
        conn.close()


def file_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def semantic_state(path: Path) -> dict[str, Any]:
    """Balances, liveness, open tickets and tick, as a fresh process sees them."""
    from darwin_memo.ledger import Ledger

    with Ledger.open(path, create=False) as ledger:
        return {
            "alive": sorted((e.id, round(e.energy, 12), e.pinned) for e in ledger.store.alive()),
            "dead": sorted(e.id for e in ledger.store.graveyard()),
            "pending": sorted(t.id for t in ledger.pending()),
            "tick": ledger.tick_count,
            "stats": ledger.stats(),
        }


def write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[k]
