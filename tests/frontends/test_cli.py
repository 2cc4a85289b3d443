"""The ``darwin-memo`` command line, driven as a real program in subprocesses.

Most tests run ``python -m darwin_memo``; one runs the installed console script.
Two inputs cannot travel through argv at all (a NUL byte, and a single argument
over Linux's 128 KiB ``MAX_ARG_STRLEN``), so those call ``cli.main`` in-process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import darwin_memo
from conftest import PUBLISHED
from darwin_memo import MemoryStore
from darwin_memo.cli import main
from darwin_memo.cli.common import MAX_QUERY_CHARS

ENTRY_POINT = Path(sys.executable).with_name("darwin-memo")

RUNBOOK = """\
Cache chunk files under cache/ are disposable and safe to remove at any time.
Old log files under logs/ may be deleted after seven days.
Database store files under data/ are protected and must be retained.
The Platform Team backs up database store files nightly.
"""
NOTES = """\
The annual offsite usually happens in October near the lake office.
Quarterly report pdf files under reports/ must be kept five years.
"""
LOG_QUESTION = "Is it safe to delete old log files?"
SILENT = "(memory is silent: no entry clears the relevance floor)"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cli-home")


def run(
    *args: str, cwd: Path, home: Path, entry_point: bool = False
) -> subprocess.CompletedProcess[str]:
    cmd = [str(ENTRY_POINT)] if entry_point else [sys.executable, "-m", "darwin_memo"]
    env = {k: v for k, v in os.environ.items() if k != "DARWIN_MEMO_DEBUG"}
    env.update(HOME=str(home), DARWIN_MEMO_HOME=str(home / ".darwin-memo"), PYTHONUTF8="1")
    return subprocess.run(
        [*cmd, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def assert_clean_error(proc: subprocess.CompletedProcess[str]) -> str:
    """Exit 1, exactly one ``error:`` line on stderr, no traceback anywhere."""
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: "), proc.stderr
    return lines[0]


def assert_usage_error(proc: subprocess.CompletedProcess[str], flag: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert flag in proc.stderr
    assert proc.stdout == ""


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory, home: Path) -> Iterator[Path]:
    """A folder holding runbook.txt, notes.txt and memory.json encoded from both."""
    d = tmp_path_factory.mktemp("cli-store")
    (d / "runbook.txt").write_text(RUNBOOK, encoding="utf-8")
    (d / "notes.txt").write_text(NOTES, encoding="utf-8")
    proc = run("encode", "runbook.txt", "notes.txt", cwd=d, home=home)
    assert proc.returncode == 0, proc.stderr
    (d / "encode-stdout.txt").write_text(proc.stdout, encoding="utf-8")
    yield d


# -- version / wiring ----------------------------------------------------------


def test_version(tmp_path: Path, home: Path) -> None:
    proc = run("--version", cwd=tmp_path, home=home)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"darwin-memo {darwin_memo.__version__}"


def test_installed_entry_point(store_dir: Path, home: Path) -> None:
    if not ENTRY_POINT.exists():
        pytest.skip(f"no console script next to {sys.executable}")
    proc = run("--version", cwd=store_dir, home=home, entry_point=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"darwin-memo {darwin_memo.__version__}"
    proc = run("stats", "memory.json", cwd=store_dir, home=home, entry_point=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("alive: ")


def test_no_command_and_unknown_command_are_usage_errors(tmp_path: Path, home: Path) -> None:
    assert_usage_error(run(cwd=tmp_path, home=home), "COMMAND")
    assert_usage_error(run("bogus", cwd=tmp_path, home=home), "bogus")


# -- demo --------------------------------------------------------------------------


def test_demo_default_seed_kills_the_poison(tmp_path: Path, home: Path) -> None:
    proc = run("demo", cwd=tmp_path, home=home)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "seed 11, 30 cycles" in proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1] == "Poisoned entries still alive: 0"
    assert list(tmp_path.iterdir()) == []  # nothing written without --out


def test_demo_seed_cycles_and_out(tmp_path: Path, home: Path) -> None:
    proc = run("demo", "--seed", "3", "--cycles", "5", "--out", "f.json", cwd=tmp_path, home=home)
    assert proc.returncode == 0, proc.stderr
    assert "seed 3, 5 cycles" in proc.stdout
    assert "Survivor store written to f.json" in proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1].startswith("Poisoned entries still alive: ")
    store = MemoryStore.load(tmp_path / "f.json")
    assert len(store) > 0
    stats = run("stats", "f.json", cwd=tmp_path, home=home)
    assert stats.returncode == 0, stats.stderr
    assert stats.stdout.startswith(f"alive: {len(store)}  graveyard: {store.dead_count()}\n")


def test_demo_negative_cycles_is_a_usage_error(tmp_path: Path, home: Path) -> None:
    assert_usage_error(run("demo", "--cycles", "-1", cwd=tmp_path, home=home), "--cycles")
    assert list(tmp_path.iterdir()) == []


def usage_error_in_process(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``main(argv)`` expecting argparse's exit 2; returns stderr."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    return err


@pytest.mark.parametrize("value", ["abc", "1.5", ""])
def test_demo_other_bad_cycles(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert "--cycles" in usage_error_in_process(["demo", "--cycles", value], capsys)


def test_demo_out_into_missing_directory_is_a_clean_error(tmp_path: Path, home: Path) -> None:
    proc = run("demo", "--cycles", "0", "--out", "nodir/f.json", cwd=tmp_path, home=home)
    line = assert_clean_error(proc)
    assert "nodir" in line
    assert not (tmp_path / "nodir").exists()


def test_demo_out_onto_a_directory_is_an_expected_error(tmp_path: Path, home: Path) -> None:
    (tmp_path / "adir").mkdir()
    proc = run("demo", "--cycles", "0", "--out", "adir", cwd=tmp_path, home=home)
    line = assert_clean_error(proc)
    assert "unexpected" not in line


# -- encode ------------------------------------------------------------------------


def test_encode_two_documents(store_dir: Path) -> None:
    stdout = (store_dir / "encode-stdout.txt").read_text(encoding="utf-8")
    doc = json.loads((store_dir / "memory.json").read_text(encoding="utf-8"))
    entries = doc["entries"]
    lines = stdout.splitlines()
    assert lines[0] == f"Encoded {len(entries)} entries from 2 documents -> memory.json"
    counts: dict[str, int] = {}
    for e in entries:
        counts[e["kind"]] = counts.get(e["kind"], 0) + 1
    assert lines[1:] == [f"  {kind}: {n}" for kind, n in sorted(counts.items())]
    assert {"explicit", "entity"} <= set(counts)
    assert {s for e in entries for s in e["sources"]} == {"runbook", "notes"}


def test_encode_appends_to_an_existing_store(tmp_path: Path, home: Path) -> None:
    (tmp_path / "runbook.txt").write_text(RUNBOOK, encoding="utf-8")
    (tmp_path / "notes.txt").write_text(NOTES, encoding="utf-8")
    first = run("encode", "runbook.txt", "-o", "m.json", cwd=tmp_path, home=home)
    assert first.returncode == 0, first.stderr
    n1 = len(MemoryStore.load(tmp_path / "m.json"))
    second = run("encode", "notes.txt", "-o", "m.json", cwd=tmp_path, home=home)
    assert second.returncode == 0, second.stderr
    assert second.stdout.startswith("Encoded ")
    n2 = int(second.stdout.split()[1])
    assert len(MemoryStore.load(tmp_path / "m.json")) == n1 + n2


def test_encode_missing_file_is_a_clean_error(tmp_path: Path, home: Path) -> None:
    (tmp_path / "runbook.txt").write_text(RUNBOOK, encoding="utf-8")
    proc = run("encode", "runbook.txt", "nope.txt", cwd=tmp_path, home=home)
    line = assert_clean_error(proc)
    assert "nope.txt" in line
    assert proc.stdout == ""
    assert not (tmp_path / "memory.json").exists()


@pytest.mark.parametrize("target", ["binary", "directory"])
def test_encode_unreadable_document_is_a_clean_error(
    tmp_path: Path, home: Path, target: str
) -> None:
    if target == "binary":
        (tmp_path / "blob.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe" + bytes(range(256)))
        name = "blob.bin"
    else:
        (tmp_path / "docs").mkdir()
        name = "docs"
    proc = run("encode", name, cwd=tmp_path, home=home)
    line = assert_clean_error(proc)
    assert name in line and "UTF-8" in line
    assert proc.stdout == ""
    assert not (tmp_path / "memory.json").exists()


# -- query -------------------------------------------------------------------------


def test_query_answers_with_provenance(store_dir: Path, home: Path) -> None:
    proc = run("query", "memory.json", LOG_QUESTION, cwd=store_dir, home=home)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Old log files under logs/ may be deleted after seven days.")
    lines = proc.stdout.splitlines()
    decider = [ln for ln in lines if ln.startswith("deciding entry: ")]
    assert decider == [
        "deciding entry: [explicit] What is known about old log files under logs/ may?"
    ]
    assert "sources: runbook" in lines


def test_query_silent(store_dir: Path, home: Path) -> None:
    proc = run("query", "memory.json", "zebra quantum marmalade", cwd=store_dir, home=home)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == SILENT + "\n"


def test_query_kind_filter(store_dir: Path, home: Path) -> None:
    proc = run(
        "query", "memory.json", "Platform Team", "--kind", "entity", cwd=store_dir, home=home
    )
    assert proc.returncode == 0, proc.stderr
    assert "deciding entry: [entity] What do we know about Platform Team?" in proc.stdout
    # the log-file answer lives in an explicit entry: filtered to entities, memory is silent
    proc = run("query", "memory.json", LOG_QUESTION, "--kind", "entity", cwd=store_dir, home=home)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == SILENT + "\n"


def test_query_unknown_kind_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error_in_process(["query", "memory.json", "x", "--kind", "nonsense"], capsys)
    assert "--kind" in err


def test_query_source_and_half_life(store_dir: Path, home: Path) -> None:
    args = ["query", "memory.json", LOG_QUESTION, "--source", "runbook", "--half-life", "3"]
    proc = run(*args, cwd=store_dir, home=home)
    assert proc.returncode == 0, proc.stderr
    assert "sources: runbook" in proc.stdout
    proc = run("query", "memory.json", LOG_QUESTION, "--source", "notes", cwd=store_dir, home=home)
    assert proc.stdout == SILENT + "\n"


def test_query_zero_half_life_is_a_usage_error(store_dir: Path, home: Path) -> None:
    proc = run("query", "memory.json", "x", "--half-life", "0", cwd=store_dir, home=home)
    assert_usage_error(proc, "--half-life")


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "-inf", "soon"])
def test_query_other_bad_half_lives(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error_in_process(["query", "memory.json", "x", f"--half-life={value}"], capsys)
    assert "--half-life" in err


def test_query_too_long_through_argv_is_a_clean_error(store_dir: Path, home: Path) -> None:
    # 100,000 characters: over our limit, under the kernel's per-argument limit.
    proc = run("query", "memory.json", "a" * 100_000, cwd=store_dir, home=home)
    line = assert_clean_error(proc)
    assert f"{MAX_QUERY_CHARS:,}" in line
    assert proc.stdout == ""


def test_query_of_one_megabyte_is_a_clean_error(
    store_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A 1 MB argv element cannot be exec'd on Linux (E2BIG), so call main() directly.
    assert main(["query", str(store_dir / "memory.json"), "a" * 1_000_000]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "1,000,000" in err


def test_query_with_nul_is_a_clean_error(
    store_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # argv cannot carry a NUL byte, so call main() directly.
    assert main(["query", str(store_dir / "memory.json"), "old\x00log files"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "NUL" in err


# -- stats -------------------------------------------------------------------------


def test_stats(store_dir: Path, home: Path) -> None:
    store = MemoryStore.load(store_dir / "memory.json")
    proc = run("stats", "memory.json", cwd=store_dir, home=home)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"alive: {len(store)}  graveyard: 0"
    assert lines[1] == f"total energy: {store.total_energy():.3f}"
    assert "energy share by kind:" in lines
    assert any(ln.strip().startswith("explicit") for ln in lines)
    top = lines[lines.index("top entries:") + 1 :]
    assert len(top) == min(5, len(store))


def test_stats_reads_a_published_store(tmp_path: Path, home: Path) -> None:
    proc = run("stats", str(PUBLISHED / "store.json"), cwd=tmp_path, home=home)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("alive: 5  graveyard: 1\n")


# -- broken store files ------------------------------------------------------------

CORRUPT = {
    "empty": b"",
    "blank": b"  \n\t\n",
    "garbage": b"garbage !! not json\n",
    "truncated": b'{\n  "config": {"max_energy": 5.0, "upkeep": 0.05},\n'
    b'  "entries": [\n    {"question": "Is it',
    "not-an-object": b"[1, 2, 3]\n",
    "not-a-store": b'{"hello": "world"}\n',
    "bad-entry": b'{"entries": [{"id": 5, "question": "q", "answer": "a"}]}\n',
    "binary": b"\x89PNG\r\n\x1a\n\x00\xff",
}


# every command on the common damage; the rarer kinds through one command
COMMON = ("empty", "garbage", "truncated")
CASES = [(kind, command) for kind in COMMON for command in ("query", "stats", "encode")]
CASES += [(kind, "stats") for kind in sorted(CORRUPT) if kind not in COMMON]


@pytest.mark.parametrize(("kind", "command"), CASES)
def test_corrupt_store_is_a_clean_error_and_left_untouched(
    tmp_path: Path, home: Path, kind: str, command: str
) -> None:
    store = tmp_path / "memory.json"
    store.write_bytes(CORRUPT[kind])
    if command == "query":
        args = ["query", "memory.json", LOG_QUESTION]
    elif command == "stats":
        args = ["stats", "memory.json"]
    else:  # encoding into a damaged store must not overwrite it
        (tmp_path / "runbook.txt").write_text(RUNBOOK, encoding="utf-8")
        args = ["encode", "runbook.txt", "-o", "memory.json"]
    proc = run(*args, cwd=tmp_path, home=home)
    line = assert_clean_error(proc)
    assert "memory.json" in line
    assert "unexpected" not in line
    assert proc.stdout == ""
    assert store.read_bytes() == CORRUPT[kind]


@pytest.mark.parametrize("command", ["query", "stats"])
def test_missing_store_is_a_clean_error(tmp_path: Path, home: Path, command: str) -> None:
    args = [command, "missing.json"] + ([LOG_QUESTION] if command == "query" else [])
    line = assert_clean_error(run(*args, cwd=tmp_path, home=home))
    assert "missing.json" in line
    assert not (tmp_path / "missing.json").exists()


def test_truncated_store_message_reads_well(tmp_path: Path, home: Path) -> None:
    (tmp_path / "memory.json").write_bytes(CORRUPT["truncated"])
    line = assert_clean_error(run("stats", "memory.json", cwd=tmp_path, home=home))
    assert " at at " not in line


def test_stats_and_query_read_sqlite_stores(tmp_path: Path, home: Path) -> None:
    """The default backend: `stats` and `query` read a .db store (and change nothing)."""
    store = tmp_path / "lessons.db"
    added = run(
        "ledger", str(store), "add", "how do I restart the api?", "systemctl restart api",
        cwd=tmp_path, home=home,
    )  # fmt: skip
    assert added.returncode == 0, added.stdout + added.stderr
    before = store.read_bytes()
    stats = run("stats", str(store), cwd=tmp_path, home=home)
    assert stats.returncode == 0 and "alive: 1  graveyard: 0" in stats.stdout
    query = run("query", str(store), "restart the api", cwd=tmp_path, home=home)
    assert query.returncode == 0 and "systemctl restart api" in query.stdout
    assert "deciding entry: [experience] how do I restart the api?" in query.stdout
    assert store.read_bytes() == before


@pytest.mark.parametrize("command", ["stats", "query"])
def test_a_store_url_never_shows_its_password(command: str, tmp_path: Path, home: Path) -> None:
    url = "postgresql://agent:s3cr3t-pw@127.0.0.1:9/team?store=lessons"  # nothing listens
    args = [command, url] + (["restart the api"] if command == "query" else [])
    proc = run(*args, cwd=tmp_path, home=home)
    message = assert_clean_error(proc)
    assert "s3cr3t-pw" not in proc.stdout + proc.stderr
    assert "postgresql://agent@127.0.0.1:9/team" in message


@pytest.mark.parametrize("entry_point", [False, True])
def test_a_reader_that_closes_stdout_gets_no_traceback(
    tmp_path: Path, home: Path, entry_point: bool
) -> None:
    """`darwin-memo ledger ... | head -c0`: exit 1, nothing on stderr, the decide kept."""
    store = tmp_path / "s.db"
    add = run("ledger", str(store), "add", "how do I restart the api", "systemctl restart api",
              cwd=tmp_path, home=home)  # fmt: skip
    assert add.returncode == 0, add.stderr
    cmd = [str(ENTRY_POINT)] if entry_point else [sys.executable, "-m", "darwin_memo"]
    for args in (["ledger", str(store), "decide", "how do I restart the api"],
                 ["ledger", str(store), "stats"], ["stats", str(store)]):  # fmt: skip
        with subprocess.Popen(
            [*cmd, *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        ) as proc:
            assert proc.stdout is not None and proc.stderr is not None
            proc.stdout.close()  # before the command writes anything
            err = proc.stderr.read().decode()
            assert proc.wait(timeout=60) == 1, (args, err)
        assert err == "", (args, err)
    for args in (["ledger", str(store), "decide", "how do I restart the api"],
                 ["ledger", str(store), "stats"]):  # fmt: skip
        closed = subprocess.run(  # started with no stdout at all (`>&-`)
            [*cmd, *args], cwd=tmp_path, capture_output=False, stderr=subprocess.PIPE,
            preexec_fn=lambda: os.close(1), timeout=60,
        )  # fmt: skip
        assert closed.returncode == 1, (args, closed.stderr)
        assert closed.stderr == b"", (args, closed.stderr)
    stats = run("ledger", str(store), "stats", cwd=tmp_path, home=home)
    assert json.loads(stats.stdout)["pending_tickets"] == 2  # both decides were committed
