"""Stores from someone else (issue 33): planted links, crafted SQLite schemas, big stdin.

A store is often a file from elsewhere (a cloned repository, a shared folder), and so
is everything next to it. Each test here plants what an attacker would, with real
files, real symbolic links and real SQLite files, and runs the real command line in
a subprocess where the issue names a command. Each one failed before the fix.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from darwin_memo.backends.migrations import MIGRATIONS, SCHEMA_INDEXES, SCHEMA_TABLES, SCHEMA_VIEWS
from darwin_memo.backends.sqlite import SqliteBackend
from darwin_memo.errors import StoreError, StoreFormatError
from darwin_memo.ledger import Ledger
from darwin_memo.render import RenderError, render_store

BASHRC = b"# the victim's shell start-up file\nexport PATH=$HOME/bin:$PATH\n"


def cli(
    *args: str, cwd: Path, stdin: bytes | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "DARWIN_MEMO_DEBUG"}
    return subprocess.run(
        [sys.executable, "-m", "darwin_memo", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        timeout=timeout,
        env=env,
    )


def one_line_error(res: subprocess.CompletedProcess[bytes], *needles: str) -> None:
    """A refusal: exit 1, no traceback, one line (a JSON error or ``error: ...``)."""
    out = (res.stdout + res.stderr).decode("utf-8", "replace")
    assert res.returncode == 1, out
    assert "Traceback" not in out
    errors = [ln for ln in res.stderr.decode().splitlines() if ln.startswith("error: ")]
    if errors:  # the human commands: one ``error:`` line on stderr
        assert len(errors) == 1, res.stderr
        message = errors[0]
    else:  # ``ledger`` operations: one JSON error object on stdout
        message = json.loads(res.stdout)["error"]
        assert "\n" not in message
    for needle in needles:
        assert needle in message, message


# -- JSON stores: planted journal and lock links -----------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """``tmp/proj/memory.json`` (two entries, one settled ticket) and ``tmp/home/.bashrc``."""
    proj, home = tmp_path / "proj", tmp_path / "home"
    proj.mkdir()
    home.mkdir()
    (home / ".bashrc").write_bytes(BASHRC)
    with Ledger.open(proj / "memory.json") as ledger:
        ledger.add("How do I clear the nginx cache?", "Purge it with the cache manager.")
        ledger.add("Is the export job safe to skip?", "No: billing reads it nightly.")
        ticket = ledger.decide("clear the nginx cache")
        ledger.settle(ticket.id, 0.5, "worked")
    return proj


def plant_journal_link(proj: Path) -> None:
    """The attack of issue 33: a crafted ``journal_txn`` the journal lacks, and the
    journal a link to the victim's ``~/.bashrc``."""
    store = proj / "memory.json"
    payload = json.loads(store.read_text(encoding="utf-8"))
    payload["ledger"]["journal_txn"] = {
        "id": "0badc0de0badc0de",
        "events": [{"event": "tick", "tick": 9, "note": "\n$(touch PWNED)\n"}],
    }
    store.write_text(json.dumps(payload), encoding="utf-8")
    (proj / "memory.events.jsonl").unlink()
    (proj / "memory.events.jsonl").symlink_to("../home/.bashrc")


READ_LOOKING = [
    ["ledger", "memory.json", "stats"],
    ["ledger", "memory.json", "verify"],
    ["ledger", "memory.json", "obituary", "ID"],
    ["top", "memory.json"],
    ["why", "memory.json", "ID"],
    ["audit", "memory.json"],
    ["doctor", "memory.json"],
    ["stats", "memory.json"],
]


@pytest.mark.parametrize("argv", READ_LOOKING, ids=lambda a: " ".join(a[::2][:2]))
def test_a_read_looking_command_never_appends_through_a_planted_journal_link(
    project: Path, argv: list[str]
) -> None:
    plant_journal_link(project)
    store_before = (project / "memory.json").read_bytes()
    entry = json.loads(store_before)["entries"][0]["id"]
    res = cli(*[entry if a == "ID" else a for a in argv], cwd=project)
    home = project.parent / "home"
    assert (home / ".bashrc").read_bytes() == BASHRC
    assert (project / "memory.json").read_bytes() == store_before
    assert b"Traceback" not in res.stdout + res.stderr
    if res.returncode != 0:  # commands that read the journal refuse it, by name
        one_line_error(res, "memory.events.jsonl", "symbolic link")


def test_a_dashboard_view_never_appends_through_a_planted_journal_link(project: Path) -> None:
    from darwin_memo.dashboard.data import StoreView  # what `darwin-memo ui` serves from

    plant_journal_link(project)
    view = StoreView(project / "memory.json")
    try:
        assert view.version()
        with pytest.raises(StoreError, match=r"memory\.events\.jsonl is a symbolic link"):
            view.events()
    finally:
        view.close()
    assert (project.parent / "home" / ".bashrc").read_bytes() == BASHRC


def test_a_writing_command_refuses_a_planted_journal_link_before_writing(project: Path) -> None:
    plant_journal_link(project)
    store_before = (project / "memory.json").read_bytes()
    for argv in (["add", "A new question?", "A new answer."], ["tick"]):
        res = cli("ledger", "memory.json", *argv, cwd=project)
        one_line_error(res, "memory.events.jsonl is a symbolic link")
    assert (project.parent / "home" / ".bashrc").read_bytes() == BASHRC
    assert (project / "memory.json").read_bytes() == store_before


def test_a_rotated_journal_planted_as_a_link_is_not_read(project: Path) -> None:
    secret = project.parent / "home" / "secret.jsonl"
    secret.write_text('{"event": "add", "entry": "leaked", "question": "secret"}\n')
    (project / "memory.events.jsonl.1").symlink_to(secret)
    res = cli("audit", "memory.json", "--json", cwd=project)
    one_line_error(res, "memory.events.jsonl.1 is a symbolic link")
    assert b"secret" not in res.stdout


def test_a_planted_lock_link_is_refused_and_its_target_never_created(project: Path) -> None:
    target = project.parent / "home" / "created-by-the-lock"
    (project / "memory.json.lock").unlink()
    (project / "memory.json.lock").symlink_to(target)
    store_before = (project / "memory.json").read_bytes()
    res = cli("ledger", "memory.json", "add", "A new question?", "A new answer.", cwd=project)
    one_line_error(res, "memory.json.lock is a symbolic link")
    assert not target.exists() and not target.is_symlink()
    assert (project / "memory.json").read_bytes() == store_before
    # Readers take the lock too (as the published package does): refused the same way.
    res = cli("top", "memory.json", cwd=project)
    one_line_error(res, "memory.json.lock is a symbolic link")
    assert not target.exists()


def test_a_lock_that_is_a_fifo_is_refused_at_once(project: Path) -> None:
    (project / "memory.json.lock").unlink()
    os.mkfifo(project / "memory.json.lock")
    res = cli("ledger", "memory.json", "tick", cwd=project, timeout=30)
    one_line_error(res, "memory.json.lock is not a regular file")


def test_a_temporary_file_name_planted_as_a_link_is_removed_not_followed(project: Path) -> None:
    target = project.parent / "home" / ".bashrc"
    planted = project / "memory.json.planted.tmp"
    planted.symlink_to(target)
    res = cli("ledger", "memory.json", "add", "A new question?", "A new answer.", cwd=project)
    assert res.returncode == 0, res.stdout + res.stderr
    assert not planted.is_symlink()  # cleared as a stale temporary file: the link, not its target
    assert target.read_bytes() == BASHRC
    assert not (project / "memory.json").is_symlink()


def _drop_last_journal_txn(proj: Path) -> bytes:
    """What a writer killed between its two writes leaves: the store holds the last
    transaction, the journal does not."""
    journal = proj / "memory.events.jsonl"
    store = json.loads((proj / "memory.json").read_text(encoding="utf-8"))
    txn = store["ledger"]["journal_txn"]["id"]
    kept = [
        line
        for line in journal.read_text(encoding="utf-8").splitlines(keepends=True)
        if f'"txn": "{txn}"' not in line
    ]
    journal.write_text("".join(kept), encoding="utf-8")
    return journal.read_bytes()


def test_read_only_commands_report_an_unjournaled_transaction_and_a_writer_recovers_it(
    project: Path,
) -> None:
    journal = project / "memory.events.jsonl"
    lagging = _drop_last_journal_txn(project)
    for argv in (["ledger", "memory.json", "verify"], ["audit", "memory.json"]):
        res = cli(*argv, cwd=project)
        assert res.returncode == 0, res.stdout + res.stderr
        notes = [ln for ln in res.stderr.decode().splitlines() if "journal" in ln]
        assert len(notes) == 1 and "not in memory.events.jsonl yet" in notes[0], res.stderr
        assert journal.read_bytes() == lagging  # shown from the store, not written
    assert json.loads(cli("ledger", "memory.json", "verify", cwd=project).stdout)["ok"] is True
    # The next write appends it, then its own transaction.
    res = cli("ledger", "memory.json", "tick", cwd=project)
    assert res.returncode == 0
    assert journal.read_bytes().startswith(lagging) and len(journal.read_bytes()) > len(lagging)
    res = cli("ledger", "memory.json", "verify", cwd=project)
    assert json.loads(res.stdout)["ok"] is True and b"journal" not in res.stderr


# -- render: memory files that are links -------------------------------------------------------


def test_render_refuses_a_memory_file_linked_outside_its_directory(project: Path) -> None:
    (project / "CLAUDE.md").symlink_to("../home/.bashrc")
    res = cli("render", "memory.json", "-o", "CLAUDE.md", cwd=project)
    one_line_error(res, "CLAUDE.md is a symbolic link to", "outside")
    assert (project.parent / "home" / ".bashrc").read_bytes() == BASHRC
    # The default file name too (nobody named it).
    (project / "MEMORY.md").symlink_to("../home/.bashrc")
    with pytest.raises(RenderError, match="outside"):
        render_store(project / "memory.json", project / "MEMORY.md")
    assert (project.parent / "home" / ".bashrc").read_bytes() == BASHRC


def test_render_still_writes_through_a_link_within_its_directory(project: Path) -> None:
    (project / "docs").mkdir()
    (project / "docs" / "AGENTS.md").write_text("# Agents\n", encoding="utf-8")
    (project / "CLAUDE.md").symlink_to("docs/AGENTS.md")
    res = cli("render", "memory.json", "-o", "CLAUDE.md", cwd=project)
    assert res.returncode == 0, res.stderr
    assert (project / "CLAUDE.md").is_symlink()
    assert "darwin-memo:begin" in (project / "docs" / "AGENTS.md").read_text(encoding="utf-8")


# -- SQLite stores: crafted schemas ------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "s.db"
    with Ledger.open(path) as ledger:
        ledger.add("How do I clear the nginx cache?", "Purge it with the cache manager.")
        ledger.add("Is the export job safe to skip?", "No: billing reads it nightly.")
    return path


def craft(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(path)
    try:
        for sql in statements:
            conn.execute(sql)
        conn.commit()
    finally:
        conn.close()


def dump(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def test_every_connection_runs_with_an_untrusted_schema(db: Path) -> None:
    backend = SqliteBackend(db, create=False)
    try:
        assert backend.conn.execute("PRAGMA trusted_schema").fetchone()[0] == 0
    finally:
        backend.close()


def test_a_planted_trigger_is_refused_before_it_can_fire(db: Path) -> None:
    # With the schema trusted, this trigger ran in the victim's process at the next
    # write (and could call our SQL functions); every balance became 5.
    craft(
        db,
        "CREATE TRIGGER boost AFTER INSERT ON events BEGIN "
        "UPDATE entries SET energy = 5 WHERE darwin_row_tokens(toks, question) IS NOT NULL; END",
    )
    before = dump(db)
    for argv in (["add", "A new question?", "A new answer."], ["stats"], ["verify"]):
        res = cli("ledger", str(db), *argv, cwd=db.parent)
        one_line_error(res, "trigger 'boost'", "never creates")
    assert dump(db) == before


def test_a_recursive_view_cannot_keep_a_command_spinning(db: Path) -> None:
    craft(
        db,
        "DROP TABLE tickets",
        "CREATE VIEW tickets (id, open, born_tick, data, version) AS "
        "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) "
        "SELECT x, 1, 0, '{}', 0 FROM r",
    )
    for argv in (["stats"], ["add", "A new question?", "A new answer."], ["decide", "nginx"]):
        started = time.monotonic()
        res = cli("ledger", str(db), *argv, cwd=db.parent, timeout=30)
        assert time.monotonic() - started < 20
        one_line_error(res, "view 'tickets'")
    res = cli("top", str(db), cwd=db.parent, timeout=30)
    one_line_error(res, "view 'tickets'")


@pytest.mark.parametrize(
    ("sql", "named"),
    [
        ("CREATE TABLE exfil (x)", "table 'exfil'"),
        ("CREATE INDEX sneaky ON entries(energy * 2)", "index 'sneaky'"),
        ("CREATE VIEW v AS SELECT 1", "view 'v'"),
        ("CREATE VIRTUAL TABLE search USING fts5(body)", "virtual table 'search'"),
        ("CREATE TRIGGER \"t\x1b]0;pwned\x07\" AFTER DELETE ON notes BEGIN SELECT 1; END",
         "trigger 't\\x1b]0;pwned\\x07'"),
    ],
)  # fmt: skip
def test_schema_objects_we_never_create_are_refused_by_name(db: Path, sql: str, named: str) -> None:
    craft(db, sql)
    with pytest.raises(StoreFormatError) as err:
        Ledger.open(db, create=False)
    assert named in str(err.value) and "\x1b" not in str(err.value)


def test_a_plain_index_of_someone_else_is_left_alone(db: Path) -> None:
    craft(db, "CREATE INDEX mine ON entries(kind, energy DESC)")
    with Ledger.open(db, create=False) as ledger:
        assert len(ledger.store) == 2


def test_a_trigger_added_while_a_handle_is_open_stops_its_next_operation(db: Path) -> None:
    with Ledger.open(db, create=False) as ledger:
        assert len(ledger.store) == 2
        craft(db, "CREATE TRIGGER late AFTER INSERT ON events BEGIN DELETE FROM entries; END")
        with pytest.raises(StoreFormatError, match="trigger 'late'"):
            ledger.add("A new question?", "A new answer.")
    craft(db, "DROP TRIGGER late")
    with Ledger.open(db, create=False) as ledger:
        assert len(ledger.store) == 2


def test_every_statement_runs_under_a_deadline(db: Path) -> None:
    backend = SqliteBackend(db, create=False)
    try:
        backend.conn.deadline.limit = 0.3
        spin = (
            "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT count(*) FROM r"
        )
        started = time.monotonic()
        with pytest.raises(sqlite3.OperationalError) as err:
            backend.conn.execute(spin).fetchone()
        assert time.monotonic() - started < 5
        error = backend.translate(err.value)
        assert isinstance(error, StoreFormatError)
        assert re.search(r"ran past 0\.3 s", str(error))
        # The next statement has its own time again.
        assert backend.conn.execute("SELECT count(*) FROM entries").fetchone()[0] == 2
    finally:
        backend.close()


def test_the_schema_inventory_names_what_the_migrations_create() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    seen: set[tuple[str, str]] = set()
    conn.execute(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
        "applied_at TEXT NOT NULL)"
    )
    for _version, _name, fn in MIGRATIONS:
        conn.execute("BEGIN")
        fn(conn)
        conn.execute("COMMIT")
        seen |= {
            (kind, name)
            for kind, name in conn.execute("SELECT type, name FROM sqlite_master")
            if not name.startswith("sqlite_autoindex_")
        }
    assert {n for k, n in seen if k == "table"} == SCHEMA_TABLES
    assert {n for k, n in seen if k == "index"} == SCHEMA_INDEXES
    assert {n for k, n in seen if k == "view"} == set(SCHEMA_VIEWS)
    assert {k for k, _ in seen} == {"table", "index", "view"}


def test_a_planted_wal_link_is_named(db: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(BASHRC)
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    Path(str(db) + "-wal").symlink_to(victim)
    res = cli("ledger", str(db), "add", "A new question?", "A new answer.", cwd=tmp_path)
    one_line_error(res, "s.db-wal is a symbolic link")
    assert victim.read_bytes() == BASHRC


# -- store files others can change -------------------------------------------------------------


@pytest.mark.parametrize("name", ["memory.json", "s.db"])
def test_a_world_writable_store_is_used_with_one_warning(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    with Ledger.open(path) as ledger:
        ledger.add("How do I clear the nginx cache?", "Purge it with the cache manager.")
    os.chmod(path, 0o666)
    res = cli("ledger", name, "stats", cwd=tmp_path)
    assert res.returncode == 0
    warnings = [ln for ln in res.stderr.decode().splitlines() if "warning" in ln]
    assert len(warnings) == 1 and "writable by every user" in warnings[0], res.stderr
    # A long-lived process warns once, however often it reopens the store.
    script = textwrap.dedent(
        f"""
        from darwin_memo.ledger import Ledger
        for _ in range(3):
            with Ledger.open({str(path)!r}, create=False) as ledger:
                ledger.add("q {{}}?".format(_), "a.")
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.decode().count("writable by every user") == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file another user's takes root")
def test_a_store_owned_by_another_user_is_used_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "memory.json"
    with Ledger.open(path) as ledger:
        ledger.add("How do I clear the nginx cache?", "Purge it with the cache manager.")
    os.chown(path, 65534, 65534)
    res = cli("top", "memory.json", cwd=tmp_path)
    assert res.returncode == 0
    assert "owned by another user (uid 65534)" in res.stderr.decode()


# -- stdin ----------------------------------------------------------------------------------------

FEED = """
import resource, subprocess, sys, threading
proc = subprocess.Popen([sys.executable, "-m", "darwin_memo", *sys.argv[2:]],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
def feed():
    chunk = b"a" * (1 << 20)
    try:
        for _ in range(int(sys.argv[1])):
            proc.stdin.write(chunk)
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass
threading.Thread(target=feed, daemon=True).start()
out, err = proc.communicate() if False else (proc.stdout.read(), proc.stderr.read())
proc.wait()
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.stdout.flush()
sys.stderr.write(out.decode() + err.decode())
"""


def test_stdin_is_read_only_up_to_the_limit(tmp_path: Path) -> None:
    store = tmp_path / "s.json"
    proc = subprocess.run(
        [sys.executable, "-c", FEED, "160", "ledger", str(store), "add", "A question?", "-"],
        capture_output=True,
        timeout=120,
    )
    peak_kib = int(proc.stdout.split()[0])
    reply = proc.stderr.decode()
    assert '"code": "bad_input"' in reply and "stdin is over" in reply, reply
    assert peak_kib < 80 * 1024, f"peak RSS {peak_kib} KiB for a 160 MiB stdin"
    assert not store.exists()
