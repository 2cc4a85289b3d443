"""Write ``docs/reliability.md`` from the committed results in ``bench/reliability/results/``.

    python bench/reliability/report.py           # (re)write the doc from the results
    python bench/reliability/report.py --check   # exit 1 if the doc is stale
    python bench/reliability/report.py --run     # rerun the three harnesses at the
                                                 # committed size, save, rewrite the doc

Every figure in the doc is computed here from the three JSON summaries the harnesses
print (``concurrency.py``, ``kill9.py``, ``fuzz_cli.py``, run with the arguments in
``RUNS``); the prose around them is the only hand-written part. The committed results
are a reduced size of the full runs (which take 90 minutes and more on 2 cores), small
enough to rerun in a few minutes and to keep in git. ``tests/backends/test_reliability.py``
checks that the doc matches them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RESULTS = HERE / "results"
DOC = ROOT / "docs" / "reliability.md"

#: The committed results: file name -> the harness's arguments that produced it.
RUNS: dict[str, list[str]] = {
    "concurrency.json": ["concurrency.py", "--procs", "8", "--pairs", "25"],
    "kill9.json": ["kill9.py", "--runs", "40", "--keep", "none"],
    "fuzz_cli.json": ["fuzz_cli.py", "--cases", "300"],
}


def command(name: str) -> str:
    """The shell command that produced ``results/NAME``."""
    return "python bench/reliability/" + " ".join(RUNS[name])


def load() -> dict[str, dict[str, Any]]:
    return {name: json.loads((RESULTS / name).read_text(encoding="utf-8")) for name in RUNS}


def run_all() -> None:
    """Rerun each harness at the committed size and save its summary (minus local paths)."""
    RESULTS.mkdir(exist_ok=True)
    for name, argv in RUNS.items():
        print(f"running {command(name)}", file=sys.stderr, flush=True)
        proc = subprocess.run(
            [sys.executable, str(HERE / argv[0]), *argv[1:]],
            capture_output=True,
            text=True,
            check=False,
        )
        summary = json.loads(proc.stdout)
        summary.pop("workdir", None)
        summary["machine"].pop("darwin_memo_path", None)
        summary["command"] = command(name)
        (RESULTS / name).write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
        state = "ok" if summary["ok"] else "TARGETS FAILED"
        print(f"  exit {proc.returncode}: {state}", file=sys.stderr)


# -- formatting ------------------------------------------------------------------------


def n(value: Any) -> str:
    """An integer with thousands separators; floats to three significant figures."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "**no**"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.3g}" if value < 1000 else f"{value:,.0f}"


def bold_zero(value: int) -> str:
    """A failure count: bold, so a reader's eye lands on it."""
    return f"**{value:,}**"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def verdict(ok: bool) -> str:
    return "every target met" if ok else "**TARGETS FAILED**"


# -- the three sections ----------------------------------------------------------------


def machine_line(summary: dict[str, Any]) -> str:
    m = summary["machine"]
    when = m.get("date", "")
    return (
        f"darwin-memo {m['darwin_memo']}, Python {m['python']}, SQLite {m['sqlite']}, "
        f"{m['cpus']} cores, {m['platform']}" + (f", {when}" if when else "")
    )


def concurrency_section(s: dict[str, Any]) -> str:
    runs = s["runs"]
    label = {"plain": "plain", "holder": "with a long-lived holder"}
    backend = {"db": "SQLite", "json": "JSON", "pg": "PostgreSQL"}
    header = [""] + [f"{backend[r['backend']]}, {label[r['variant']]}" for r in runs]

    def row(title: str, cell: Callable[[dict[str, Any]], str]) -> list[str]:
        return [title] + [cell(r) for r in runs]

    def holder(r: dict[str, Any], fn: Callable[[dict[str, Any]], str]) -> str:
        return fn(r["holder"]) if "holder" in r else ""

    def lat(r: dict[str, Any], op: str) -> str:
        x = r["latency"].get(op)
        if not x:
            return "-"
        return " / ".join(f"{x[k] / 1000:.2f}" for k in ("p50_ms", "p95_ms", "max_ms"))

    lost = (
        "lost_settlements",
        "duplicated_settlements",
        "phantom_settlements",
        "settled_but_pending",
        "expired_instead_of_settled",
    )
    rows = [
        row("processes x decide+settle pairs", lambda r: f"{r['procs']} x {r['pairs']}"),
        row("CLI commands (each a fresh `python -m darwin_memo`)", lambda r: n(r["cli_commands"])),
        row("failed commands", lambda r: bold_zero(r["failed_commands"])),
        row(
            "tickets / acknowledged settlements",
            lambda r: f"{n(r['tickets'])} / {n(r['settled_true'])}",
        ),
        row(
            "lost, duplicated, phantom, settled-yet-pending, expired-instead",
            lambda r: bold_zero(sum(r[k] for k in lost)),
        ),
        row(
            "tickets without exactly one `decide` event", lambda r: n(r["tickets_not_decided_once"])
        ),
        row(
            "`verify()` problems (fresh open; long-lived handle)",
            lambda r: (
                n(len(r["verify"]))
                + holder(r, lambda h: f"; {n(len(h['verify_long_lived'] or []))}")
            ),
        ),
        row(
            "long-lived handle sees what a fresh open sees",
            lambda r: holder(r, lambda h: n(h["long_lived_view_matches_fresh_open"])),
        ),
        row(
            "holder: calls / ticks / failures",
            lambda r: holder(
                r, lambda h: f"{n(h['commands'])} / {n(h['ticks'])} / {n(h['failures'])}"
            ),
        ),
        row("decide latency p50 / p95 / max (s)", lambda r: lat(r, "decide")),
        row("settle latency p50 / p95 / max (s)", lambda r: lat(r, "settle")),
        row("wall time (s)", lambda r: n(r["wall_s"])),
        row("targets", lambda r: verdict(r["ok"])),
    ]
    return table(header, rows)


def kill9_section(s: dict[str, Any]) -> str:
    res = s["results"]
    backend = {"db": "SQLite `.db`", "json": "JSON `.json`"}
    header = [""] + [backend[r["backend"]] for r in res]

    def row(title: str, cell: Callable[[dict[str, Any]], str]) -> list[str]:
        return [title] + [cell(r) for r in res]

    def fails(key: str) -> Callable[[dict[str, Any]], str]:
        return lambda r: bold_zero(r["failures_by_target"][key])

    rows = [
        row(
            "runs (with migrate / with one long-lived handle)",
            lambda r: f"{n(r['runs'])} ({n(r['migrate_runs'])} / {n(r['handle_runs'])})",
        ),
        row("failed runs", lambda r: bold_zero(r["failed_runs"])),
        row("store fails to open", fails("open")),
        row("`verify()` not `[]` on the first open after the kill", fails("verify_on_open")),
        row("decided != settled + pending (half-applied)", fails("half_applied")),
        row("acknowledged decide / settle / tick lost", fails("lost_acks")),
        row("migrate destination present but incomplete", fails("migrate_dest")),
        row("post-mortem migrate of the killed store fails to verify", fails("postmortem_migrate")),
        row(
            "`verify()` not `[]` after one more write",
            lambda r: n(r["verify_after_write_failures"]),
        ),
        row(
            "runs whose open finished an interrupted JSON journal append",
            lambda r: n(r["unjournaled_txn_at_open"]) if r["backend"] == "json" else "-",
        ),
        row(
            "migrate destinations attempted / present / acknowledged",
            lambda r: " / ".join(
                n(r["migrate"][k]) for k in ("attempted", "present", "acknowledged")
            ),
        ),
        row(
            "operations before the kill: median (max)",
            lambda r: f"{n(r['ops_before_kill']['median'])} ({n(r['ops_before_kill']['max'])})",
        ),
        row(
            "runs killed before the first operation completed",
            lambda r: n(r["ops_before_kill"]["runs_killed_before_first_op"]),
        ),
        row("temporary files left by killed migrations", lambda r: n(r["tmp_leftovers"])),
        row("targets", lambda r: verdict(r["ok"])),
    ]
    return table(header, rows) + f"\n\nWall time, both backends: {n(s['total_wall_s'])} s."


def fuzz_section(s: dict[str, Any]) -> tuple[str, str]:
    res = s["results"]
    backend = {"db": "SQLite `.db`", "json": "JSON `.json`"}
    header = [""] + [backend[r["backend"]] for r in res]

    def row(title: str, cell: Callable[[dict[str, Any]], str]) -> list[str]:
        return [title] + [cell(r) for r in res]

    def target(key: str) -> Callable[[dict[str, Any]], str]:
        return lambda r: bold_zero(r["failing_by_target"].get(key, 0))

    rows = [
        row(
            "commands (in-process / real processes)",
            lambda r: (
                f"{n(r['commands'])} ({n(r['via'].get('inprocess', 0))} / "
                f"{n(r['via'].get('subprocess', 0))})"
            ),
        ),
        row(
            "refused / soft refusals / accepted",
            lambda r: " / ".join(
                n(r["outcomes"].get(k, 0)) for k in ("refused", "soft_refusal", "ok")
            ),
        ),
        row(
            "codes: `usage` / `bad_input` / `store_corrupt`",
            lambda r: " / ".join(
                n(r["codes"].get(k, 0)) for k in ("usage", "bad_input", "store_corrupt")
            ),
        ),
        row("tracebacks", target("no_traceback")),
        row(
            'failures that are not one `{"error", "code"}` object',
            target("failures_are_json_errors"),
        ),
        row('`"code": "internal"`', target("no_internal_errors")),
        row(
            "refused commands that changed the store",
            target("refused_commands_leave_store_unchanged"),
        ),
        row("bad inputs accepted", target("bad_inputs_refused")),
        row("writes through a planted link", target("no_writes_through_links")),
        row("the live store fails `verify()`", target("live_store_verifies")),
        row("wall time (s)", lambda r: n(r["wall_s"])),
        row("targets", lambda r: verdict(r["ok"])),
    ]
    main = table(header, rows)
    cats: list[str] = []
    for r in res:
        cats += [c for c in r["by_category"] if c not in cats]
    outcome_names = ("refused", "soft_refusal", "ok", "help", "verify_failed")
    by_cat = []
    for cat in cats:
        cells = []
        for r in res:
            counts = r["by_category"].get(cat, {})
            shown = [
                f"{n(counts[k])} {k.replace('_', ' ')}" for k in outcome_names if counts.get(k)
            ]
            cells.append(", ".join(shown) or "-")
        by_cat.append([f"`{cat}`", *cells])
    return main, table(["category", *header[1:]], by_cat)


# -- the document ----------------------------------------------------------------------

INTRO = """\
# Reliability: concurrency, crashes and hostile input

<!-- Generated by bench/reliability/report.py from bench/reliability/results/*.json:
     edit the prose there, not here (tests/backends/test_reliability.py checks the two agree). -->

Three harnesses in `bench/reliability/` (standard library plus `darwin_memo`) put a store
under many writers at once, `kill -9` at random moments and hostile input. Each has a
docstring and `--help`, prints one JSON summary and exits 1 when any target fails in any
command or run: no failure is tolerated, and none is labelled as known. The summaries
below are the committed results in `bench/reliability/results/`, at a reduced size that
reruns in minutes (`python bench/reliability/report.py --run`, then this page is rewritten
from them); the full sizes are the scripts' defaults. Smaller versions run with the test
suite (`tests/backends/test_reliability.py`).

Wall times and latencies come from a shared 2-core machine and are not performance
figures (see [performance.md](performance.md) for those).
"""

CONCURRENCY = """\
## 1. Many writers: `bench/reliability/concurrency.py`

Each backend's store is seeded with 20 entries (`How do I clear the nginx cache safely?`
and 19 like it). Worker processes each run decide + settle pairs through the real CLI:
every command is a fresh `python -m darwin_memo ledger STORE ...` process. The query
always matches, so no decide is silent; the delta is uniform in [-0.2, 1.0]. Workers
start together (a ready/go barrier) and record every ticket and every
`{"settled": true}`. Afterwards the store is opened with `Ledger.open` and its journal
checked: every acknowledged settlement is exactly one `settle` event, none an expiry,
none still pending, none unacknowledged; every ticket has exactly one `decide` event;
`verify()` is `[]`. The `holder` variant adds one long-lived process (an MCP server, in
effect) that keeps one `Ledger.open` for the whole run and loops decide, settle and a
`tick` every 20th round; at the end its handle must verify and see exactly what a fresh
open sees.
"""

CONCURRENCY_AFTER = """\
Latency is mostly waiting for a core: each CLI command costs about 0.05 s of CPU to
start the interpreter and import the package, and the workers share 2 cores. The holder
variant's latency rows pool the CLI commands with the holder's in-process calls. The
full size is 16 processes x 200 pairs (`python bench/reliability/concurrency.py`: 16 times
the commands above, about two hours for the four runs on 2 cores). `--backends pg
--pg-url postgresql://...` runs the same checks on a PostgreSQL store (its results are
not committed; `tests/backends/test_postgres.py` races 6 processes on one store on every test
run).
"""

KILL9 = """\
## 2. Crash safety: `bench/reliability/kill9.py`

Each run copies a seeded store (20 entries, 30 open tickets) into a fresh folder and
starts a child that loops as fast as it can: settle a random open ticket (delta uniform
in [-1, 1.5], so entries also die), tick, decide, now and then abandon. Even runs keep
one `Ledger.open` handle; odd runs go through `darwin_memo.cli.main` per operation (open,
operate, close, as the CLI does). Every third run the loop also runs `darwin-memo
migrate STORE NEW_PATH` every few operations, alternately into the other format and the
same one. Once the child says `ready`, the driver sleeps a random 0 to 300 ms and sends
SIGKILL. Then:

* the store must open and `verify()` must be `[]` straight away;
* the decided tickets (journal `decide` events) must be exactly the settled ones
  (`settle` events, once each) plus the pending ones (`ledger.pending()`);
* every ticket the child saw decided, every settle/abandon that returned true, and the
  last tick it saw must be in the store;
* each `migrate` destination must be absent, or open, verify, and match the counts that
  `migrate` printed when it finished;
* the killed store, copied as it lies with `migrate` into the other format, must give a
  destination that verifies;
* after one more write (a `tick`) the store must still verify.
"""

KILL9_AFTER = """\
A killed `migrate` may leave its temporary file beside the destination (named
`DEST.XXXXXXXX.tmp`, with `-wal`/`-shm` companions for SQLite); the destination path
itself is always absent or complete, and the source is never touched. A JSON store
killed between replacing its file and appending its journal has its journal finished on
the next open (the row "interrupted JSON journal append" counts those runs: each one
verified). The full size is 200 runs per backend (`python bench/reliability/kill9.py`,
about 3 minutes).
"""

FUZZ = """\
## 3. Hostile input: `bench/reliability/fuzz_cli.py`

Per backend: a fixed corpus of bad inputs and random argv mutations, one in ten of them
run as a real process. The corpus: 27 non-finite or non-numeric deltas (`nan`, `-inf`,
`1e309`, `abc`, `""`, `1,5`, `0x10`, `∞`, ...) against a live ticket, and odd but finite
ones (`٣`, `1_000`); unknown, empty, 100 KB, path-like and already-settled tickets and
entries; empty, whitespace, 1 MiB, 64 KiB + 1, invalid UTF-8, overlong, NUL and BOM text
on stdin `-`; a NUL byte in each of 11 argument positions (in-process, since argv cannot
carry NUL); invalid UTF-8 bytes in the same positions (real processes, three with a
strict `PYTHONIOENCODING=utf-8` stdout); 13 usage errors; every operation against broken
stores (`broken_store`: truncated, empty, random bytes, zeroed header, scribbled middle,
wrong JSON shape, NaN energy, invalid UTF-8, 100,000-deep nesting, an SQLite schema from
a newer version, unreadable SQLite rows, a dropped table); and every operation against
hostile stores (`hostile_store`, issue 33): a JSON store whose journal, lock or rotated
journal is a planted symbolic link (with a crafted `journal_txn` that the journal lacks),
and SQLite stores with a crafted schema (a trigger, a recursive view in place of a table,
a virtual table, a table and an expression index of nobody's, a planted `-wal` link).
Random mutations start from 14 valid commands and replace, insert, delete, duplicate,
swap or garble one to three tokens with hostile values (flags, numbers, NUL, lone
surrogates, bidi marks, emoji, a 70,000-character string, operation names, paths).

After every command: no "Traceback" in stdout or stderr; stdout is exactly one JSON
object in valid UTF-8; a non-zero exit carries `"error"` and `"code"`; after a refused
command the JSON store's bytes (store and journal), or every row of the SQLite store,
are unchanged; after a soft refusal (`{"settled": false}` and the like) balances,
liveness, open tickets and tick are unchanged; inputs that must be refused are; nothing
is written through a planted link and a missing link target is not created. The live
store must still verify after each stretch of 100 random commands.
"""

FUZZ_BY_CATEGORY = """\
What each category of input got (a `verify failed` outcome is `ledger verify` reporting
unsound books of a broken store as its documented `{"ok": false, "problems": [...]}`
verdict, which is what it must do):
"""

FUZZ_AFTER = """\
The full size is 1,000 random mutations per backend (`python
bench/reliability/fuzz_cli.py`, about 2 minutes).
"""

HISTORY = """\
## History: what these harnesses found

The first full-size round found seven problems, all fixed; each has a regression test
named after it in `tests/backends/test_reliability.py` (KB1 to KB6) or
`tests/backends/test_jsonfile.py` (KB7), and the harnesses no longer tolerate any
failure. The first round's full tables are in git history (this file before the change
that generated it).

* **KB1**, arguments that are not valid UTF-8: ticket ids, entry ids and `--source`
  reached the journal and stdout unchecked (`internal` errors, stdout that was not
  UTF-8, one traceback with a strict stdout). Argument text is now validated up front
  and the CLI's output escapes undecodable bytes.
* **KB2**, a NUL byte in the store path was an `internal` error; now `bad_input`.
* **KB3**, a deeply nested JSON store was an `internal` error (RecursionError); now
  `store_corrupt`, even in a process that raised the interpreter's recursion limit.
* **KB4**, an SQLite `meta` or `tickets` row that is not JSON was an `internal` error;
  now `store_corrupt`.
* **KB5**, a one-byte `.db` file was taken by SQLite for an empty database and silently
  re-initialised; a non-SQLite file is now refused untouched.
* **KB6**, a JSON store killed between replacing its file and appending its journal left
  the journal one transaction behind until the next write (`verify` failed, `migrate`
  copied the short journal); the append is now finished when the store is opened.
* **KB7**, JSON writers under many concurrent processes gave up on the lock
  (`store_locked`, about 1 % of commands): the lock was polled with sleeps, so a waiter
  lost almost every race. A waiter now blocks in the kernel's lock queue (`flock`,
  bounded by a one-shot `SIGALRM` timer) and is woken at every release.

Found since, outside these scripts: a second handle on an SQLite store in the same
process could drop the first one's locks; and a long-lived process whose SQLite store a
newer darwin-memo migrates meanwhile now stops at its next operation with
`store_corrupt` instead of running its statements on a schema it does not know (it reads
SQLite's schema cookie once per operation; a PostgreSQL store is checked when it opens).

Smaller findings, by design: `verify` on unsound books exits 1 with
`{"ok": false, "problems": [...]}`, not an `{"error", "code"}` object, so a host that
parses failures generically needs to know; and `darwin_memo.cli.common._stdin_used` is
process state, so a second in-process `main([... "-" ...])` refuses a second use of
stdin (only in-process callers are affected; the harnesses reset it).
"""

RERUN = """\
## Rerunning

```bash
python bench/reliability/report.py --run     # the committed sizes (minutes), then this page
python bench/reliability/concurrency.py      # 16 x 200 per backend and variant: about 2 h
python bench/reliability/kill9.py            # 200 runs per backend: about 3 min
python bench/reliability/fuzz_cli.py         # corpus + 1,000 random per backend: about 2 min
```

`kill9.py --keep all --workdir DIR` keeps every run folder (store, journal and the
child's side log) for inspection. The fast versions, `pytest tests/backends/test_reliability.py`
(under a minute on 2 cores), run 4 processes x 15 pairs in-process, 10 kill runs and the
fuzz corpus plus 100 random mutations per backend, and assert every target.
"""


def render(results: dict[str, dict[str, Any]]) -> str:
    conc, kill, fuzz = (results[k] for k in RUNS)
    fuzz_main, fuzz_cats = fuzz_section(fuzz)
    parts = [
        INTRO,
        CONCURRENCY,
        f"```bash\n{command('concurrency.json')}\n```\n",
        f"Committed result ({machine_line(conc)}): {verdict(conc['ok'])}.\n",
        concurrency_section(conc) + "\n",
        CONCURRENCY_AFTER,
        KILL9,
        f"```bash\n{command('kill9.json')}\n```\n",
        f"Committed result ({machine_line(kill)}): {verdict(kill['ok'])}.\n",
        kill9_section(kill) + "\n",
        KILL9_AFTER,
        FUZZ,
        f"```bash\n{command('fuzz_cli.json')}\n```\n",
        f"Committed result ({machine_line(fuzz)}, seed {fuzz['seed']}, "
        f"{n(fuzz['random_cases_per_backend'])} random mutations per backend): "
        f"{verdict(fuzz['ok'])}.\n",
        fuzz_main + "\n",
        FUZZ_BY_CATEGORY,
        fuzz_cats + "\n",
        FUZZ_AFTER,
        HISTORY,
        RERUN,
    ]
    return "\n".join(parts)


def check() -> list[str]:
    """Why the doc does not match the committed results (empty when it does)."""
    problems = []
    for name in RUNS:
        if not (RESULTS / name).exists():
            problems.append(f"bench/reliability/results/{name} is missing")
    if problems:
        return problems
    results = load()
    for name, summary in results.items():
        if not summary["ok"]:
            problems.append(f"results/{name}: a target failed")
        if summary.get("command") != command(name):
            problems.append(f"results/{name} was not made by `{command(name)}`")
    if DOC.read_text(encoding="utf-8") != render(results):
        problems.append(f"{DOC.relative_to(ROOT)} is stale: run python bench/reliability/report.py")
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--check", action="store_true", help="exit 1 if the doc is stale")
    p.add_argument("--run", action="store_true", help="rerun the harnesses, save, rewrite")
    ns = p.parse_args(argv)
    if ns.check:
        problems = check()
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    if ns.run:
        run_all()
    DOC.write_text(render(load()), encoding="utf-8")
    print(f"wrote {DOC.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
