"""The ledger CLI contract, end to end in real subprocesses: the published JSON shapes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

CACHE_Q = "Are cache chunk files safe to delete?"
CACHE_A = "Cache chunk files under cache/ are disposable and safe to delete."


def cli(*args: str, cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "darwin_memo", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        timeout=60,
    )


def ledger(path: str, *args: str, cwd: Path, stdin: bytes | None = None) -> dict:
    proc = cli("ledger", path, *args, cwd=cwd, stdin=stdin)
    assert b"Traceback" not in proc.stderr + proc.stdout
    out = json.loads(proc.stdout)
    out["_rc"] = proc.returncode
    return out


@pytest.fixture(params=["lessons.db", "lessons.json"])
def store(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_published_shapes(tmp_path: Path, store: str) -> None:
    added = ledger(store, "add", CACHE_Q, CACHE_A, cwd=tmp_path)
    assert set(added) == {"entry_id", "_rc"} and len(added["entry_id"]) == 12
    decided = ledger(store, "decide", "Is it safe to delete cache chunk files?", cwd=tmp_path)
    assert decided["silent"] is False and decided["answer"].startswith(CACHE_A)
    assert list(decided) == ["answer", "ticket_id", "silent", "_rc"]
    ticket = decided["ticket_id"]
    assert ledger(
        store, "--scale", "2", "settle", ticket, "3", "--detail", "run 42", cwd=tmp_path
    ) == {
        "settled": True,
        "_rc": 0,
    }
    assert ledger(store, "settle", ticket, "3", cwd=tmp_path)["settled"] is False
    silent = ledger(store, "decide", "quantum zebra marmalade", cwd=tmp_path)
    assert silent == {"answer": None, "ticket_id": None, "silent": True, "_rc": 0}
    tick = ledger(store, "tick", cwd=tmp_path)
    assert list(tick)[:-1] == [
        "tick",
        "population",
        "deaths",
        "merges",
        "pending",
        "expired",
        "total_energy",
        "upkeep_charged",
    ]
    stats = ledger(store, "stats", cwd=tmp_path)
    assert stats["alive"] == 1 and stats["energy_share_by_kind"] == {"experience": 1.0}
    story = ledger(store, "obituary", added["entry_id"], cwd=tmp_path)["obituary"]
    assert "credit +0.543 (measured delta +3, run 42)" in story
    assert ledger(store, "verify", cwd=tmp_path)["ok"] is True


def test_forget_pin_reasons(tmp_path: Path, store: str) -> None:
    entry = ledger(store, "add", CACHE_Q, CACHE_A, cwd=tmp_path)["entry_id"]
    ticket = ledger(store, "decide", CACHE_Q, cwd=tmp_path)["ticket_id"]
    assert ledger(store, "forget", entry, cwd=tmp_path) == {
        "forgotten": False,
        "reason": "escrowed by a pending ticket",
        "_rc": 0,
    }
    assert ledger(store, "abandon", ticket, cwd=tmp_path) == {"abandoned": True, "_rc": 0}
    assert ledger(store, "abandon", ticket, cwd=tmp_path) == {"abandoned": False, "_rc": 0}
    assert ledger(store, "pin", entry, cwd=tmp_path) == {"pinned": True, "_rc": 0}
    assert ledger(store, "forget", entry, cwd=tmp_path)["reason"] == "pinned; unpin first"
    assert ledger(store, "unpin", entry, cwd=tmp_path) == {"unpinned": True, "_rc": 0}
    assert ledger(store, "forget", entry, cwd=tmp_path) == {"forgotten": True, "_rc": 0}
    assert ledger(store, "forget", entry, cwd=tmp_path) == {"forgotten": False, "_rc": 0}


@pytest.mark.parametrize("delta", ["-1e3", "-inf", "-2.5", "-.5"])
def test_negative_deltas_parse_without_double_dash(tmp_path: Path, delta: str) -> None:
    ledger("s.db", "add", CACHE_Q, CACHE_A, cwd=tmp_path)
    ticket = ledger("s.db", "decide", CACHE_Q, cwd=tmp_path)["ticket_id"]
    out = ledger("s.db", "settle", ticket, delta, cwd=tmp_path)
    if delta == "-inf":
        assert out["code"] == "bad_input" and out["_rc"] == 1
        assert (
            len(ledger("s.db", "stats", cwd=tmp_path))
            and ledger("s.db", "stats", cwd=tmp_path)["pending_tickets"] == 1
        )
    else:
        assert out == {"settled": True, "_rc": 0}


def test_stdin_carries_text_over_the_argv_limit(tmp_path: Path) -> None:
    answer = "Cache chunk files are disposable. " * 8000  # ~270 KB, over the 128 KiB argv limit
    out = ledger("s.db", "add", CACHE_Q, "-", cwd=tmp_path, stdin=answer.encode())
    assert "entry_id" in out
    bad = ledger("s.db", "decide", "-", cwd=tmp_path, stdin=b"\xff\xfe not utf-8")
    assert bad["code"] == "bad_input" and "UTF-8" in bad["error"]
    # one trailing line break (what `echo` adds) is not part of the text
    ticket = ledger("s.db", "decide", "-", cwd=tmp_path, stdin=CACHE_Q.encode() + b"\n")
    assert ticket["ticket_id"]
    from darwin_memo.ledger import Ledger

    with Ledger.open(tmp_path / "s.db", create=False) as opened:
        assert [t.query for t in opened.pending()] == [CACHE_Q]


def test_missing_store_is_not_created_except_by_add(tmp_path: Path) -> None:
    for op in (["decide", "anything"], ["stats"], ["tick"], ["settle", "abc", "1"]):
        proc = cli("ledger", "typo.db", *op, cwd=tmp_path)
        assert proc.returncode == 0 and json.loads(proc.stdout)["store"] == "missing"
        assert b"no store at typo.db" in proc.stderr
    assert not (tmp_path / "typo.db").exists()
    ledger("sub/dir/new.db", "add", "q?", "a.", cwd=tmp_path)
    assert (tmp_path / "sub/dir/new.db").exists()
    assert oct((tmp_path / "sub/dir/new.db").stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize(
    "content", [b"", b"{trunc", b"SQLite format 3\x00garbage" * 10, b"\x00\x01\x02"]
)
def test_corrupt_store_is_refused_and_untouched(tmp_path: Path, content: bytes) -> None:
    for name in ("bad.json", "bad.db", "bad"):
        path = tmp_path / name
        path.write_bytes(content)
        for op in (["decide", "x"], ["add", "q", "a"], ["tick"]):
            out = ledger(name, *op, cwd=tmp_path)
            assert out["_rc"] == 1 and out["code"] in {"store_corrupt", "bad_input"}, out
        assert path.read_bytes() == content


def test_usage_errors_are_json(tmp_path: Path) -> None:
    out = ledger("s.db", "settle", cwd=tmp_path)
    assert out["code"] == "usage" and out["_rc"] == 2
    out = ledger("s.db", "frobnicate", cwd=tmp_path)
    assert out["code"] == "usage"
    out = ledger("s.db", "--scale", "0", "stats", cwd=tmp_path)
    assert out["code"] == "usage"


def test_import_views_and_migrate(tmp_path: Path) -> None:
    src = tmp_path / "team.json"
    ledger("team.json", "add", CACHE_Q, CACHE_A, cwd=tmp_path)
    proc = cli("import", str(src), "mine.db", cwd=tmp_path)
    imported = json.loads(proc.stdout)
    assert imported["imported"] == 1 and imported["probation"] == 3
    again = json.loads(cli("import", str(src), "mine.db", cwd=tmp_path).stdout)
    assert again["imported"] == 0 and again["skipped"] == 1
    top = json.loads(cli("top", "mine.db", "--json", cwd=tmp_path).stdout)
    assert top["entries"][0]["probation"] == 3
    why = cli("why", "mine.db", imported["entries"][0], "--json", cwd=tmp_path)
    assert json.loads(why.stdout)["status"] == "living"
    assert cli("why", "mine.db", "nope", cwd=tmp_path).returncode == 1
    assert json.loads(cli("audit", "mine.db", "--json", cwd=tmp_path).stdout)["events"] >= 1
    doctor = cli("doctor", "mine.db", "--json", cwd=tmp_path)
    assert "findings" in json.loads(doctor.stdout)
    migrated = cli("migrate", "mine.db", "mine.json", cwd=tmp_path)
    assert json.loads(migrated.stdout)["verify"] == "ok"
    refused = cli("migrate", "mine.db", "mine.json", cwd=tmp_path)
    assert refused.returncode == 1 and b"already exists" in refused.stderr
    assert cli("import", "nope.json", "mine.db", cwd=tmp_path).returncode == 1


ARGVS = [
    ["s.db", "decide", "restart the api"],
    ["s.db", "decide", "-"],  # stdin
    ["s.db", "decide", ""],
    ["decide", "decide", "q"],
    ["s.db", "decide", "-k"],  # option-like: argparse decides
    ["s.db", "decide", "q", "-k", "2"],
    ["s.db", "settle", "t1", "0.25"],
    ["s.db", "settle", "t1", "-1e3"],
    ["s.db", "settle", "t1", "-inf"],
    ["s.db", "settle", "t1", "-x"],
    ["s.db", "settle", "t1", "2", "--detail", "3 passed"],
    ["s.db", "settle", "t1", "2", "--detail", "-"],
    ["s.db", "settle", "t1", "2", "--detail=x"],
    ["s.db", "settle", "t1", "2", "--det", "x"],
    ["s.db", "settle", "-", "2"],
    ["s.db", "abandon", "t1"],
    ["s.db", "abandon", "-t"],
    ["-", "abandon", "t1"],
    ["s.db", "abandon", "t1", "extra"],
    ["s.db", "--scale", "2", "decide", "q", "-k", "5", "--half-life", "3", "--kind", "explicit"],
    ["--scale", "decide", "s.db", "decide", "q"],  # a --scale value that names an op
    ["tick", "tick", "--expire-after", "3"],  # a store path that names an op
    ["settle", "decide", "abc"],  # the store "settle", op decide
    ["s.db", "settle", "t1", "-0.5", "--detail", "ci run 7"],
    ["s.db", "add", "q", "a", "--source", "ci"],
    ["s.db", "stats"],
    ["s.db", "obituary", "e1"],
    ["s.db", "verify"],
    # usage errors: the messages must be the whole parser's
    ["s.db"],
    ["s.db", "decide"],
    ["s.db", "decide", "q", "-k", "many"],
    ["s.db", "decide", "q", "--half-life", "-1"],
    ["s.db", "settle", "t1"],
    ["s.db", "nonsense", "x"],
    ["s.db", "stats", "extra"],
    ["s.db", "tick", "--expire-after"],
]


def _read(parse: Callable[[list[str]], Any], argv: list[str]) -> object:
    from darwin_memo.cli.ledger_cmd import UsageError

    try:
        return vars(parse(argv))
    except UsageError as exc:
        return str(exc)


def test_the_shared_parser_reads_each_call_as_a_fresh_one_would() -> None:
    """One parser serves every call of a process (``serve`` parses each request with it):
    nothing one call reads or refuses may leak into the next."""
    from darwin_memo.cli.ledger_cmd import _parse, build_ledger_parser

    def fresh(argv: list[str]) -> Any:
        parser = build_ledger_parser()
        try:
            return parser.parse_args(argv)
        except Exception as exc:
            raise type(exc)(f"{exc} (usage: {parser.format_usage().strip()[7:]})") from None

    expected = [_read(fresh, argv) for argv in ARGVS]
    for order in (ARGVS, ARGVS[::-1]):
        got = [_read(_parse, argv) for argv in order]
        want = expected if order is ARGVS else expected[::-1]
        assert got == want
    assert _read(_parse, ["s.db", "settle", "t1", "-1e3"]) == {
        "memory": "s.db",
        "scale": 1.0,
        "retriever": None,
        "op": "settle",
        "ticket_id": "t1",
        "delta": "-1e3",
        "detail": "",
    }
    refused = _read(_parse, ["s.db", "decide"])
    assert isinstance(refused, str)
    assert refused.startswith("the following arguments are required: question (usage: ")
