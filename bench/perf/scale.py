"""Scale curve: decide, settle, tick, open, memory and cold CLI, ours against darwin-memo 0.7.1.

    python bench/perf/scale.py --sizes 1000,10000,100000 [--include-1m]
        [--reference-venv /tmp/refvenv] [--out results.json]
    python bench/perf/scale.py --report results.json      # reprint a saved table

Run it with the interpreter of the environment where our ``darwin_memo`` is
installed (``.venv/bin/python``). The published package is installed from PyPI
into ``--reference-venv`` if that environment does not exist yet, and is only
ever called through its API (``bench/perf/_driver.py``, run by the reference
interpreter) and its CLI (``python -m darwin_memo ledger ...``).

For every size ``n`` the same seeded lessons (``bench/perf/lessons.py``) are
built into an in-memory ``MemoryStore`` and saved with ``Ledger.save`` (JSON);
ours is then copied to SQLite with ``darwin_memo.transfer.copy_store`` (what
``darwin-memo migrate`` does). Each measurement is a fresh process:

* open: ``Ledger.open(db)`` (ours) / ``Ledger.load(json)`` (published) plus the
  first ``decide``, and the peak RSS of that process (median of ``--open-runs``, 7; 1 at 1M);
* in-process: decide over the realistic queries (p50/p95, wall and CPU time;
  the first decide of the process is reported separately), ``store.retrieve``
  alone over the same queries (ranking without the ticket's transaction), each
  adversarial query (max), settle of the tickets, and ticks 1..4 (no
  consolidation), in one process;
* in memory (ours only; the published package has no other mode): the JSON file's
  ``Ledger.load``, then settles and ticks 1..4 as above, none of them durable
  until a ``Ledger.save``. The table compares settling in memory with the published
  package's settle, and settling durably (ours: one fsynced SQLite commit) with the
  published settle plus the ``Ledger.save`` that keeps it. When the published package
  runs at that size, this step runs after it, on the queries it decided within its
  time budget: both then settle the same tickets with the same deltas (the rankings
  are the same; ``same_tickets`` records that the deciding entries agree), where
  otherwise the published package's few slow decides at 100k and up would be compared
  with many more of ours;
* the consolidating tick (tick 5) on the store left at tick 4, in its own
  process, killed after ``--consolidation-cap`` seconds (reported as ``> cap``;
  a package that timed out at a smaller size is not run again at larger ones);
* cold CLI ``ledger FILE decide`` / ``settle`` / ``tick``: one untimed warm-up
  run, then the median of ``--cli-runs`` fresh processes (wall and CPU time;
  one run of the published package from ``--big-from``),
  with each process's own peak RSS; every ``tick`` run gets a fresh copy of the
  store at tick 0, so none of them consolidates;
* in-process decide with ``EmbeddingRetriever(HashingEmbedder())`` on an
  in-memory store: the first decide embeds every entry (reported as warm-up),
  then p50 over the following queries (sizes up to ``--embed-max-size``).

Fairness: both packages run from bytecode compiled before anything is timed
(``PYTHONPYCACHEPREFIX``, see ``clean_env``); peak RSS is read through GNU
``time`` when it is installed (see ``run_proc``); store copies are fsynced
before a measured process opens them.

Work on the published package is bounded at large sizes: in-process decides stop
after ``--decide-budget`` seconds (at least 5 queries), and from ``--big-from``
(1M) on there is one open run, one CLI run of each kind with no warm-up, only
``--ref-adversarial-1m`` adversarial queries for the published package, and no
embedding run (``--embed-max-size``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import lessons as gen  # noqa: E402

DRIVER = str(HERE / "_driver.py")
REFERENCE_VERSION = "0.7.1"

OURS, REF = "ours", "published"

# -- processes ------------------------------------------------------------------------


class Proc:
    """One finished child: exit status, output, wall time, its own peak RSS."""

    def __init__(self) -> None:
        self.rc: int | None = None
        self.out = ""
        self.err = ""
        self.wall_s = 0.0
        self.rss_mb = 0.0
        self.cpu_s = 0.0
        self.timed_out = False
        self.after_marker_s: float | None = None


def run_proc(
    cmd: list[str],
    *,
    timeout: float,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    marker: str | None = None,
    after_marker_timeout: float | None = None,
) -> Proc:
    """Run ``cmd``; wall time and peak RSS come from ``os.wait4`` on this very child.

    With ``marker``, the child is killed ``after_marker_timeout`` seconds after it
    prints that line (the setup before it runs under ``timeout`` alone).
    """
    res = Proc()
    rss_file = None
    if RSS_WRAPPER is not None:
        # Measure the peak RSS through a small intermediary: a child spawned directly
        # by this (larger) process inherits its high-water mark at exec (Linux records
        # the old mm's peak in the process's maxrss), which would floor every figure
        # at this process's own size.
        fd, rss_file = tempfile.mkstemp(prefix="rss-", suffix=".txt")
        os.close(fd)
        cmd = [*RSS_WRAPPER(rss_file), *cmd]
    t0 = time.perf_counter()
    p = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        text=True,
        start_new_session=True,  # its own process group: a timeout kills the wrapped command too
    )
    out_lines: list[str] = []
    err_buf: list[str] = []
    marker_at: list[float] = []
    killed = threading.Event()

    def kill() -> None:
        killed.set()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)

    def read_out() -> None:
        assert p.stdout is not None
        for line in p.stdout:
            out_lines.append(line)
            if marker is not None and line.strip() == marker and not marker_at:
                marker_at.append(time.perf_counter())
                if after_marker_timeout is not None:
                    later = threading.Timer(after_marker_timeout, kill)
                    later.daemon = True
                    later.start()
                    timers.append(later)

    def read_err() -> None:
        assert p.stderr is not None
        err_buf.append(p.stderr.read())

    timers: list[threading.Timer] = []
    overall = threading.Timer(timeout, kill)
    overall.daemon = True
    overall.start()
    timers.append(overall)
    readers = [threading.Thread(target=read_out), threading.Thread(target=read_err)]
    for r in readers:
        r.daemon = True
        r.start()
    _, status, usage = os.wait4(p.pid, 0)
    end = time.perf_counter()
    p.returncode = os.waitstatus_to_exitcode(status)
    for t in timers:
        t.cancel()
    for r in readers:
        r.join()
    res.rc = p.returncode
    res.out = "".join(out_lines)
    res.err = "".join(err_buf)
    res.wall_s = end - t0
    res.rss_mb = usage.ru_maxrss / 1024.0
    # CPU time of the command (and of the wrapper, ~1 ms): robust to a loaded machine,
    # where wall time also counts the time spent waiting for a core.
    res.cpu_s = usage.ru_utime + usage.ru_stime
    if rss_file is not None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            text = Path(rss_file).read_text().split()
            res.rss_mb = int(text[-1]) / 1024.0  # the wrapped command's own peak, KiB
        with contextlib.suppress(OSError):
            os.unlink(rss_file)
    res.timed_out = killed.is_set()
    if marker_at:
        res.after_marker_s = end - marker_at[0]
    return res


def _gnu_time() -> Any:
    path = shutil.which("time") or "/usr/bin/time"
    if not os.path.exists(path):
        return None
    try:
        r = subprocess.run(
            [path, "-f", "%M", "-o", os.devnull, "true"], capture_output=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0:
        return None
    return lambda out: [path, "-f", "%M", "-o", out]


#: ``wrapper(file) -> argv prefix`` writing the command's peak RSS (KiB) to ``file``,
#: or None (then ``os.wait4`` figures are floored at this process's own RSS).
RSS_WRAPPER = _gnu_time()


def last_json(proc: Proc) -> dict[str, Any]:
    for line in reversed(proc.out.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return dict(json.loads(line))
            except ValueError:
                break
    raise RuntimeError(
        f"no JSON result (rc={proc.rc}, timed_out={proc.timed_out}): "
        f"stdout={proc.out[-500:]!r} stderr={proc.err[-2000:]!r}"
    )


#: Where every measured interpreter keeps its bytecode (see ``clean_env``).
PYCACHE = Path(tempfile.gettempdir()) / "dm-perf-pycache"


def clean_env() -> dict[str, str]:
    """The environment of every measured process.

    Bytecode goes to one cache tree outside the source (``PYTHONPYCACHEPREFIX``),
    filled before anything is timed (``warm_bytecode``): with
    ``PYTHONDONTWRITEBYTECODE=1`` and an editable install, every cold CLI call
    would otherwise recompile the whole package (~100 ms), while the published
    package comes with the bytecode pip compiled at install time.
    """
    env = dict(os.environ)
    for key in (
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONSTARTUP",
        "PYTHONINSPECT",
        "PYTHONDONTWRITEBYTECODE",
    ):
        env.pop(key, None)
    env["PYTHONHASHSEED"] = "0"
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


def warm_bytecode(python: str) -> None:
    """Compile the package, the standard library and what the package imports lazily
    (numpy, for dense retrieval, where installed) into ``PYCACHE`` (untimed): otherwise
    the first measured process that imports numpy compiles it (about 150 ms)."""
    code = (
        "import compileall, os, sys, sysconfig, darwin_memo;"
        "compileall.compile_dir(os.path.dirname(darwin_memo.__file__), quiet=1);"
        "compileall.compile_dir(sysconfig.get_paths()['stdlib'], quiet=1, maxlevels=1)\n"
        "try:\n    import numpy\nexcept ImportError:\n    pass"
    )
    subprocess.run([python, "-c", code], env=clean_env(), cwd="/", capture_output=True, timeout=600)


def copy_store_file(src: Path, dest: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        s = Path(str(src) + suffix)
        d = Path(str(dest) + suffix)
        if d.exists():
            d.unlink()
        if s.exists():
            shutil.copyfile(s, d)
            # Write the copy back now: otherwise the first fsync of the measured process
            # (SQLite checkpoints on close) pays for flushing the whole copied file.
            fd = os.open(d, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def remove_store_file(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", ".lock", ".events.jsonl"):
        with contextlib.suppress(FileNotFoundError):
            Path(str(path) + suffix).unlink()


def loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover
        return []


# -- environments ----------------------------------------------------------------------


def ensure_reference(venv: Path) -> str:
    py = venv / "bin" / "python"
    if not py.exists():
        print(f"creating the reference environment {venv} (darwin-memo=={REFERENCE_VERSION})")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", f"darwin-memo=={REFERENCE_VERSION}"],
            check=True,
        )
    version = subprocess.run(
        [str(py), "-c", "import importlib.metadata as m; print(m.version('darwin-memo'))"],
        capture_output=True,
        text=True,
        env=clean_env(),
        cwd="/",
    ).stdout.strip()
    if version != REFERENCE_VERSION:
        raise SystemExit(f"{venv} has darwin-memo {version!r}, not {REFERENCE_VERSION}")
    return str(py)


def package_info(python: str) -> dict[str, Any]:
    code = (
        "import json, darwin_memo, importlib.metadata as m, sys;"
        "print(json.dumps({'version': darwin_memo.__version__ if hasattr(darwin_memo,"
        "'__version__') else m.version('darwin-memo'), 'file': darwin_memo.__file__,"
        "'python': sys.version.split()[0]}))"
    )
    r = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, env=clean_env(), cwd="/"
    )
    if r.returncode:
        raise SystemExit(f"{python} cannot import darwin_memo: {r.stderr}")
    return dict(json.loads(r.stdout))


def source_fingerprint(root: Path) -> dict[str, Any]:
    """Which code of ours was measured: HEAD plus a hash of the working tree of src/."""
    h = hashlib.sha256()
    src = root / "src"
    for p in sorted(src.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode())
        h.update(p.read_bytes())
    head = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain", "src"], capture_output=True, text=True
    ).stdout.strip()
    return {"head": head, "src_sha256": h.hexdigest()[:16], "src_dirty": bool(dirty)}


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
    }
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["mem_gb"] = round(int(line.split()[1]) / 1024 / 1024, 1)
    return info


# -- the workload ------------------------------------------------------------------------


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work = Path(args.workdir)
        self.work.mkdir(parents=True, exist_ok=True)
        self.env = clean_env()
        self.pythons = {OURS: args.our_python}
        if not args.skip_reference:
            self.pythons[REF] = ensure_reference(Path(args.reference_venv))
        self.consolidation_timed_out: dict[str, int] = {}
        for python in self.pythons.values():
            warm_bytecode(python)

    def log(self, msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')} load {loadavg()}] {msg}", flush=True)

    def driver(self, pkg: str, argv: list[str], timeout: float, **kw: Any) -> Proc:
        return run_proc(
            [self.pythons[pkg], DRIVER, *argv],
            timeout=timeout,
            env=self.env,
            cwd=str(self.work),
            **kw,
        )

    def cli(self, pkg: str, store: Path, argv: list[str], timeout: float) -> Proc:
        return run_proc(
            [self.pythons[pkg], "-m", "darwin_memo", "ledger", str(store), *argv],
            timeout=timeout,
            env=self.env,
            cwd=str(self.work),
        )

    # -- inputs ----------------------------------------------------------------------

    def lessons_file(self, n: int) -> Path:
        path = self.work / f"lessons-seed{self.args.seed}-{n}.jsonl"
        if path.exists():
            return path
        bigger = sorted(self.work.glob(f"lessons-seed{self.args.seed}-*.jsonl"))
        for p in bigger:
            if int(p.stem.rsplit("-", 1)[1]) >= n:
                return p  # a prefix of it is the store of n lessons
        self.log(f"generating {n:,} lessons")
        tmp = path.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            for row in gen.lessons(self.args.seed, n):
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        tmp.rename(path)
        return path

    def queries_file(self, n: int) -> tuple[Path, dict[str, list[str]]]:
        qs = gen.queries(self.args.seed, n, self.args.queries)
        path = self.work / f"queries-{n}.json"
        path.write_text(json.dumps(qs, ensure_ascii=False, indent=1))
        return path, qs

    # -- per package -------------------------------------------------------------------

    def run_size(self, n: int, lessons: Path, queries: Path, qs: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"n": n, "load_start": loadavg()}
        for pkg in self.pythons:
            self.log(f"n={n:,} {pkg}")
            try:
                out[pkg] = self.run_package(pkg, n, lessons, queries, qs)
            except Exception as exc:  # record and go on to the other package
                out[pkg] = {"error": str(exc)[-3000:]}
                self.log(f"n={n:,} {pkg}: ERROR {exc}")
        json_path = self.work / f"n{n}" / OURS / "built.json"
        if OURS in out and "json_inproc" not in out[OURS] and json_path.exists():
            try:  # 2c after the published package: the tickets it settled
                ref = out.get(REF, {}).get("inproc")
                out[OURS]["json_inproc"] = self.in_memory(json_path, queries, ref)
            except Exception as exc:
                out[OURS]["json_inproc_error"] = str(exc)[-3000:]
                self.log(f"n={n:,} {OURS} in memory: ERROR {exc}")
            finally:
                remove_store_file(json_path)
        out["load_end"] = loadavg()
        if OURS in out and REF in out:
            out["agreement"] = agreement(out[OURS], out[REF])
        return out

    def in_memory(self, json_path: Path, queries: Path, ref: dict[str, Any] | None) -> Any:
        """Ours on the JSON file in memory, as the published package runs: decides,
        settles and upkeep ticks without a durable commit (what ``Ledger.save`` later
        persists). With ``ref`` (the published package's in-process results at this
        size), on the same queries it decided, so both settle the same tickets."""
        a = self.args
        argv = ["inproc", str(json_path), "--mode", "load", "--queries", str(queries)]
        argv += ["--settles", str(a.settles)]
        if ref and ref.get("deciders"):
            argv += ["--budget-s", "1e9", "--realistic", str(len(ref["deciders"]))]
            argv += ["--adversarial", str(max(1, len(ref.get("adversarial_deciders", []))))]
        else:
            argv += ["--budget-s", str(min(2.0, a.decide_budget))]
            argv += ["--realistic", "60", "--adversarial", "1"]
        out = last_json(self.driver(OURS, argv, timeout=a.step_timeout))
        if ref and ref.get("deciders"):
            out["same_tickets"] = out.get("deciders") == ref["deciders"] and out.get(
                "adversarial_deciders"
            )[: len(ref.get("adversarial_deciders", []))] == ref.get("adversarial_deciders", [])
        self.log(
            f"  {OURS} in memory: settle p50 {out['settle'].get('p50_ms')} ms "
            f"(n={out['settle'].get('n')}, same tickets as published: "
            f"{out.get('same_tickets', '-')}), ticks {out['tick']['each_ms']}"
        )
        return out

    def run_package(
        self, pkg: str, n: int, lessons: Path, queries: Path, qs: dict[str, Any]
    ) -> dict[str, Any]:
        a = self.args
        big = n >= a.big_from
        d = self.work / f"n{n}" / pkg
        d.mkdir(parents=True, exist_ok=True)
        res: dict[str, Any] = {}
        mode = "open" if pkg == OURS else "load"
        pristine = d / ("pristine.db" if pkg == OURS else "pristine.json")
        suffix = pristine.suffix

        # 1. build
        json_path = d / "built.json"
        argv = ["build", str(lessons), str(json_path), "--limit", str(n)]
        if pkg == OURS:
            remove_store_file(pristine)
            argv += ["--sqlite", str(pristine)]
        r = self.driver(pkg, argv, timeout=a.step_timeout)
        b = last_json(r)
        res["build"] = b
        if pkg == REF:
            json_path.rename(pristine)
        res["file_bytes"] = b.get("sqlite_bytes") if pkg == OURS else b["json_bytes"]
        self.log(f"  built: {b}")

        # 2. open + first decide, fresh processes
        opens = []
        query0 = qs["realistic"][0]
        for _ in range(1 if big else a.open_runs):
            scratch = d / f"open{suffix}"
            copy_store_file(pristine, scratch)
            r = self.driver(
                pkg, ["open", str(scratch), "--mode", mode, "--query", query0], a.step_timeout
            )
            o = last_json(r)
            o["wall_ms"] = round(r.wall_s * 1000, 1)
            o["rss_mb"] = round(r.rss_mb, 1)
            o["cpu_ms"] = round(r.cpu_s * 1000, 1)
            opens.append(o)
            remove_store_file(scratch)
        res["open_runs"] = opens
        res["open"] = {
            key: statistics.median(o[key] for o in opens)
            for key in (
                "import_ms",
                "open_ms",
                "first_decide_ms",
                "open_and_first_decide_ms",
                "wall_ms",
                "rss_mb",
                "cpu_ms",
            )
        }
        self.log(f"  open: {res['open']}")

        # 2b. the same from the published JSON file: ``Ledger.load`` (ours: in memory)
        if pkg == REF:
            res["json_open"] = res["open"]  # the published package's only way to open
        else:
            loads = []
            for _ in range(1 if big else a.open_runs):
                r = self.driver(
                    pkg,
                    ["open", str(json_path), "--mode", "load", "--query", query0],
                    a.step_timeout,
                )
                o = last_json(r)
                o["wall_ms"] = round(r.wall_s * 1000, 1)
                o["rss_mb"] = round(r.rss_mb, 1)
                loads.append(o)
            res["json_open"] = {
                key: statistics.median(o[key] for o in loads)
                for key in ("open_ms", "first_decide_ms", "open_and_first_decide_ms", "rss_mb")
            }
            self.log(f"  JSON load: {res['json_open']}")

        # 2c. ours on that JSON file in memory (``in_memory``): after the published
        # package, where it runs at this size (``run_size``), on the tickets it settled
        if pkg == OURS and REF not in self.pythons:
            res["json_inproc"] = self.in_memory(json_path, queries, None)
            remove_store_file(json_path)

        # 3. in-process decide / settle / ticks 1..4
        work = d / f"work{suffix}"
        copy_store_file(pristine, work)
        argv = [
            "inproc",
            str(work),
            "--mode",
            mode,
            "--queries",
            str(queries),
            "--budget-s",
            str(a.decide_budget),
            "--settles",
            str(a.settles),
        ]
        if pkg == REF:
            argv.append("--save")  # the published in-memory ledger persists only on save
            if big:
                argv += ["--adversarial", str(a.ref_adversarial_1m)]
        r = self.driver(pkg, argv, timeout=a.step_timeout)
        ip = last_json(r)
        ip["process_rss_mb"] = round(r.rss_mb, 1)
        res["inproc"] = ip
        if pkg == REF:
            res["json_inproc"] = ip  # the published package's only way to run
        self.log(
            f"  in-process: decide {ip['decide']}, adversarial max "
            f"{ip['adversarial']['max_ms']} ms, settle p50 {ip['settle'].get('p50_ms')} ms, "
            f"ticks {ip['tick']['each_ms']}"
        )

        # 4. the consolidating tick (tick 5) on the store at tick 4
        skipped_at = self.consolidation_timed_out.get(pkg)
        if skipped_at is not None:
            res["consolidating_tick"] = {
                "timeout": True,
                "skipped": True,
                "cap_s": a.consolidation_cap,
                "reason": f"timed out at n={skipped_at:,}",
            }
        else:
            r = self.driver(
                pkg,
                ["tick", str(work), "--mode", mode],
                timeout=a.step_timeout + a.consolidation_cap,
                marker="START",
                after_marker_timeout=a.consolidation_cap,
            )
            if r.timed_out:
                res["consolidating_tick"] = {
                    "timeout": True,
                    "cap_s": a.consolidation_cap,
                    "killed_after_s": round(r.after_marker_s or 0, 1),
                }
                self.consolidation_timed_out[pkg] = n
            else:
                c = last_json(r)
                c["timeout"] = False
                c["rss_mb"] = round(r.rss_mb, 1)
                res["consolidating_tick"] = c
        self.log(f"  consolidating tick: {res['consolidating_tick']}")
        remove_store_file(work)

        # 5. cold CLI: decide, settle (the tickets of those decides), tick (fresh copies)
        # The published package takes minutes per call at the big sizes: one run there.
        runs = 1 if big and pkg == REF else a.cli_runs
        warm = 0 if big and pkg == REF else 1
        deciders = ip.get("deciders", [])
        answered = [q for q, dec in zip(qs["realistic"], deciders, strict=False) if dec]
        answered += [q for q in qs["realistic"] if q not in answered]
        cli_store = d / f"cli{suffix}"
        copy_store_file(pristine, cli_store)
        cli: dict[str, Any] = {}
        recs, tickets = [], []
        for i in range(warm + runs):
            r = self.cli(pkg, cli_store, ["decide", answered[i % len(answered)]], a.step_timeout)
            obj = last_json(r)
            if obj.get("ticket_id"):
                tickets.append(obj["ticket_id"])
            if i >= warm:
                recs.append(r)
        cli["decide"] = cli_summary(recs)
        recs = []
        for i in range(warm + runs):
            ticket = tickets[i % len(tickets)] if tickets else "0" * 12
            r = self.cli(
                pkg, cli_store, ["settle", ticket, "1.5", "--detail", "bench"], a.step_timeout
            )
            last_json(r)
            if i >= warm:
                recs.append(r)
        cli["settle"] = cli_summary(recs)
        cli["settled_tickets"] = len(tickets)
        remove_store_file(cli_store)
        recs = []
        for i in range(warm + runs):
            tick_store = d / f"tick{suffix}"
            copy_store_file(pristine, tick_store)
            r = self.cli(pkg, tick_store, ["tick"], a.step_timeout)
            last_json(r)
            if i >= warm:
                recs.append(r)
            remove_store_file(tick_store)
        cli["tick"] = cli_summary(recs)
        res["cli"] = cli
        self.log(f"  cli: {cli}")

        # 6. embedding retriever, in memory
        if n <= a.embed_max_size:
            r = self.driver(
                pkg,
                [
                    "embed",
                    str(lessons),
                    "--limit",
                    str(n),
                    "--queries",
                    str(queries),
                    "--budget-s",
                    str(a.decide_budget),
                ],
                timeout=a.step_timeout,
            )
            res["embed"] = last_json(r)
            self.log(
                f"  embed: {res['embed']['decide']}, warm-up "
                f"{res['embed']['warmup_first_decide_s']} s"
            )
        if not a.keep:
            remove_store_file(pristine)
        return res


def cli_summary(recs: list[Proc]) -> dict[str, Any]:
    walls = [r.wall_s * 1000 for r in recs]
    rss = [r.rss_mb for r in recs]
    cpus = [r.cpu_s * 1000 for r in recs]
    return {
        "runs": len(recs),
        "median_ms": round(statistics.median(walls), 1),
        "cpu_median_ms": round(statistics.median(cpus), 1),
        "min_ms": round(min(walls), 1),
        "max_ms": round(max(walls), 1),
        "rss_mb_max": round(max(rss), 1),
        "rss_mb_median": round(statistics.median(rss), 1),
        "failures": sum(1 for r in recs if r.rc != 0),
    }


def agreement(ours: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    """Did both packages pick the same deciding entry for the same queries?"""
    out: dict[str, Any] = {}
    for key in ("inproc", "embed"):
        a = (ours.get(key) or {}).get("deciders")
        b = (ref.get(key) or {}).get("deciders")
        if a and b:
            m = min(len(a), len(b))
            out[key] = {"compared": m, "same": sum(1 for i in range(m) if a[i] == b[i])}
    a = (ours.get("inproc") or {}).get("adversarial_deciders")
    b = (ref.get("inproc") or {}).get("adversarial_deciders")
    if a and b:
        out["adversarial"] = {
            "compared": len(a),
            "same": sum(x == y for x, y in zip(a, b, strict=False)),
        }
    return out


def template_overlap(seed: int, n: int = 1500, threshold: float = 0.55) -> dict[str, Any]:
    """How many pairs of the first ``n`` lessons the published merge rule calls duplicates.

    Every generated lesson is distinct (its own ids, numbers, names), so each such
    pair is a false duplicate: token-set Jaccard >= 0.55 from a shared template.
    """
    from darwin_memo.retrieval.lexical import tokenize

    rows = [gen._lesson(seed, i) for i in range(n)]
    sets = [frozenset(tokenize(q + " " + a)) for _, q, a, _, _, _ in rows]
    templ = [t for _, _, _, _, t, _ in rows]
    pairs = dup = dup_same_template = 0
    partnered: set[int] = set()
    for i in range(n):
        si = sets[i]
        for j in range(i + 1, n):
            sj = sets[j]
            inter = len(si & sj)
            pairs += 1
            if inter and inter / (len(si) + len(sj) - inter) >= threshold:
                dup += 1
                partnered.update((i, j))
                if templ[i] == templ[j] and templ[i] >= 0:
                    dup_same_template += 1
    return {
        "lessons": n,
        "pairs": pairs,
        "pairs_at_or_above_threshold": dup,
        "share": round(dup / pairs, 4) if pairs else 0.0,
        "of_which_same_template": dup_same_template,
        "lessons_with_a_duplicate": len(partnered),
        "templated_share": round(sum(1 for t in templ if t >= 0) / n, 3),
    }


# -- the table -----------------------------------------------------------------------

#: (label, unit, getter) for each row; every figure is "lower is better".
METRICS: list[tuple[str, str, Any]] = [
    ("file size", "MB", lambda r: r["file_bytes"] / 1e6 if r.get("file_bytes") else None),
    ("build: add entries in memory", "s", lambda r: r["build"]["add_s"]),
    ("build: Ledger.save JSON", "s", lambda r: r["build"]["save_json_s"]),
    ("open + first decide (fresh process)", "ms", lambda r: r["open"]["open_and_first_decide_ms"]),
    ("  of which open/load", "ms", lambda r: r["open"]["open_ms"]),
    (
        "  whole process wall (interpreter, imports, open, decide)",
        "ms",
        lambda r: r["open"]["wall_ms"],
    ),
    ("peak RSS, open + decide process", "MB", lambda r: r["open"]["rss_mb"]),
    (
        "JSON store file: Ledger.load + first decide (fresh process)",
        "ms",
        lambda r: r["json_open"]["open_and_first_decide_ms"],
    ),
    ("  of which Ledger.load", "ms", lambda r: r["json_open"]["open_ms"]),
    ("  peak RSS of that process", "MB", lambda r: r["json_open"]["rss_mb"]),
    ("decide p50 (realistic)", "ms", lambda r: r["inproc"]["decide"]["p50_ms"]),
    ("  decide p50, CPU time", "ms", lambda r: r["inproc"]["decide"]["cpu_p50_ms"]),
    (
        "  retrieval only p50 (store.retrieve, no ticket)",
        "ms",
        lambda r: r["inproc"]["retrieve"]["p50_ms"],
    ),
    ("decide p95 (realistic)", "ms", lambda r: r["inproc"]["decide"]["p95_ms"]),
    ("decide max (adversarial)", "ms", lambda r: r["inproc"]["adversarial"]["max_ms"]),
    # Settling in memory (both packages on a JSON file's ``Ledger.load``; kept only by a
    # later ``Ledger.save``), and settling durably: ours commits each settlement to SQLite
    # (fsynced); the published package keeps one only by saving the whole file.
    ("settle p50, in memory", "ms", lambda r: r["json_inproc"]["settle"]["p50_ms"]),
    (
        "settle p50, durable (ours: SQLite commit; published: + Ledger.save)",
        "ms",
        lambda r: r["inproc"]["settle"]["p50_ms"] + r["inproc"].get("save_ms", 0.0),
    ),
    (
        "persist in-process state (published: Ledger.save)",
        "ms",
        lambda r: r["inproc"].get("save_ms"),
    ),
    ("tick, no consolidation (median of 4)", "ms", lambda r: r["inproc"]["tick"]["p50_ms"]),
    ("  the same in memory (JSON file loaded)", "ms", lambda r: r["json_inproc"]["tick"]["p50_ms"]),
    ("consolidating tick (tick 5)", "s", lambda r: _consolidation(r)),
    ("cold CLI decide (median)", "ms", lambda r: r["cli"]["decide"]["median_ms"]),
    ("  cold CLI decide CPU time", "ms", lambda r: r["cli"]["decide"]["cpu_median_ms"]),
    ("cold CLI decide peak RSS", "MB", lambda r: r["cli"]["decide"]["rss_mb_max"]),
    ("cold CLI settle (median)", "ms", lambda r: r["cli"]["settle"]["median_ms"]),
    ("  cold CLI settle CPU time", "ms", lambda r: r["cli"]["settle"]["cpu_median_ms"]),
    ("cold CLI settle peak RSS", "MB", lambda r: r["cli"]["settle"]["rss_mb_max"]),
    ("cold CLI tick (median)", "ms", lambda r: r["cli"]["tick"]["median_ms"]),
    ("  cold CLI tick CPU time", "ms", lambda r: r["cli"]["tick"]["cpu_median_ms"]),
    ("cold CLI tick peak RSS", "MB", lambda r: r["cli"]["tick"]["rss_mb_max"]),
    ("embedding decide p50 (after warm-up)", "ms", lambda r: r["embed"]["decide"]["p50_ms"]),
    ("  embedding decide p50, CPU time", "ms", lambda r: r["embed"]["decide"]["cpu_p50_ms"]),
    ("embedding warm-up (first decide)", "s", lambda r: r["embed"]["warmup_first_decide_s"]),
]


def _consolidation(r: dict[str, Any]) -> Any:
    c = r.get("consolidating_tick") or {}
    if c.get("timeout"):
        return ("timeout", c["cap_s"])
    return c["tick_ms"] / 1000.0


def figure(r: dict[str, Any] | None, getter: Any) -> Any:
    if not r or "error" in r:
        return None
    try:
        return getter(r)
    except (KeyError, TypeError, IndexError):
        return None


def fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, tuple):
        return f"> {v[1]:g}"
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def ratio(ours: Any, ref: Any) -> str:
    if ours is None or ref is None:
        return "-"
    if isinstance(ours, tuple) and isinstance(ref, tuple):
        return "both > cap"
    if isinstance(ours, tuple):
        return f"< {ref / ours[1]:.2g}x"
    if isinstance(ref, tuple):
        return f"> {ref[1] / ours:.3g}x" if ours > 0 else "-"
    if ours <= 0:
        return "-"
    x = ref / ours
    return f"{x:.3g}x"


def table(results: dict[str, Any]) -> str:
    """One row per metric; for each size: ours, published, and published/ours."""
    sizes = results["sizes"]
    head = "| metric |" + "".join(
        f" {_short(s['n'])} ours | {_short(s['n'])} published | ratio |" for s in sizes
    )
    rows = [head, "|---|" + "---:|---:|---:|" * len(sizes)]
    for label, unit, getter in METRICS:
        cells = []
        for size in sizes:
            o = figure(size.get(OURS), getter)
            p = figure(size.get(REF), getter)
            cells.append(f" {fmt(o)} | {fmt(p)} | {ratio(o, p)} |")
        if all(c.startswith(" - | - |") for c in cells):
            continue
        name = label.strip()
        name = f"&nbsp;&nbsp;{name}" if label.startswith("  ") else name
        rows.append(f"| {name} ({unit}) |" + "".join(cells))
    return "\n".join(rows)


def _short(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return f"{n:,}"


# -- the targets ---------------------------------------------------------------


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each 'Done when' target of issue 4 that this run measured, met or not."""
    by_n = {s["n"]: s.get(OURS) or {} for s in results["sizes"]}
    checks: list[tuple[str, int, Any, float]] = [
        (
            "in-process decide p50 (lexical, realistic)",
            1_000_000,
            lambda r: r["inproc"]["decide"]["p50_ms"],
            2.0,
        ),
        (
            "in-process decide, each adversarial query",
            1_000_000,
            lambda r: r["inproc"]["adversarial"]["max_ms"],
            500.0,
        ),
        (
            "embedding decide p50 (256-d HashingEmbedder)",
            100_000,
            lambda r: r["embed"]["decide"]["p50_ms"],
            15.0,
        ),
        (
            "tick (upkeep, no consolidation)",
            1_000_000,
            lambda r: r["inproc"]["tick"]["p50_ms"],
            1000.0,
        ),
        ("consolidating tick", 100_000, _consolidation_ms, 5000.0),
        ("consolidating tick", 1_000_000, _consolidation_ms, 60000.0),
        ("cold CLI decide wall", 100_000, lambda r: r["cli"]["decide"]["median_ms"], 80.0),
        ("cold CLI settle wall", 100_000, lambda r: r["cli"]["settle"]["median_ms"], 80.0),
        ("cold CLI decide wall", 1_000_000, lambda r: r["cli"]["decide"]["median_ms"], 100.0),
        ("cold CLI settle wall", 1_000_000, lambda r: r["cli"]["settle"]["median_ms"], 100.0),
        (
            "cold CLI decide peak RSS (MB)",
            1_000_000,
            lambda r: r["cli"]["decide"]["rss_mb_max"],
            100.0,
        ),
        (
            "cold CLI settle peak RSS (MB)",
            1_000_000,
            lambda r: r["cli"]["settle"]["rss_mb_max"],
            100.0,
        ),
        (
            "open + first decide in-process",
            1_000_000,
            lambda r: r["open"]["open_and_first_decide_ms"],
            200.0,
        ),
    ]
    out = []
    for what, n, getter, limit in checks:
        if n not in by_n:
            out.append({"target": what, "n": n, "limit": limit, "measured": None, "met": None})
            continue
        v = figure(by_n[n], getter)
        met = None if v is None else (not isinstance(v, tuple) and v <= limit)
        out.append(
            {
                "target": what,
                "n": n,
                "limit": limit,
                "measured": list(v) if isinstance(v, tuple) else v,
                "met": met,
            }
        )
    # "At every size, our figure is better than the published package's."
    worse = []
    for size in results["sizes"]:
        for label, _unit, getter in METRICS:
            if label.startswith("build"):
                continue
            o = figure(size.get(OURS), getter)
            p = figure(size.get(REF), getter)
            if o is None or p is None:
                continue
            if isinstance(o, tuple) and isinstance(p, tuple):
                worse.append(f"{label} at n={size['n']:,}: both over the cap")
            elif isinstance(o, tuple) or (not isinstance(p, tuple) and o >= p):
                worse.append(f"{label} at n={size['n']:,}: ours {fmt(o)}, published {fmt(p)}")
    out.append(
        {
            "target": "ours better than published on every metric at every size",
            "met": not worse,
            "not_better": worse,
        }
    )
    return out


def _consolidation_ms(r: dict[str, Any]) -> Any:
    v = _consolidation(r)
    return v if isinstance(v, tuple) else v * 1000.0


def targets_text(rows: list[dict[str, Any]]) -> str:
    lines = []
    for t in rows:
        if "n" not in t:
            lines.append(f"- {t['target']}: {'met' if t['met'] else 'NOT met'}")
            for w in t.get("not_better", []):
                lines.append(f"    - {w}")
            continue
        m = t["measured"]
        state = "not measured" if t["met"] is None else "met" if t["met"] else "NOT met"
        shown = f"> {m[1]:g} s (cap)" if isinstance(m, list) else fmt(m)
        lines.append(
            f"- {t['target']} at n={t['n']:,}: {shown} (target <= {t['limit']:g}) -> {state}"
        )
    return "\n".join(lines)


# -- main ----------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sizes", default="1000,10000,100000")
    p.add_argument("--include-1m", action="store_true", help="also run n=1,000,000")
    p.add_argument("--reference-venv", default="/tmp/refvenv")
    p.add_argument("--skip-reference", action="store_true", help="measure ours only")
    p.add_argument("--our-python", default=sys.executable)
    p.add_argument("--out", default="results.json")
    p.add_argument("--workdir", default="/tmp/dm-perf")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--queries", type=int, default=200, help="realistic queries (200)")
    p.add_argument("--cli-runs", type=int, default=9)
    p.add_argument("--open-runs", type=int, default=7)
    p.add_argument("--settles", type=int, default=50, help="settlements timed in-process")
    p.add_argument(
        "--decide-budget",
        type=float,
        default=20.0,
        help="seconds of realistic in-process decides per package and size",
    )
    p.add_argument("--consolidation-cap", type=float, default=120.0)
    p.add_argument("--step-timeout", type=float, default=900.0)
    p.add_argument("--embed-max-size", type=int, default=100_000)
    p.add_argument("--keep", action="store_true", help="keep the built stores")
    p.add_argument(
        "--big-from",
        type=int,
        default=1_000_000,
        help="sizes from which work is sampled: 1 open run, 1 CLI run, no warm-up (1M)",
    )
    p.add_argument(
        "--report",
        nargs="+",
        metavar="RESULTS",
        help="only print the table of saved results (several files: sizes merged)",
    )
    p.add_argument(
        "--ref-adversarial-1m",
        type=int,
        default=2,
        help="adversarial queries run on the published package at 1M (2)",
    )
    return p.parse_args(argv)


def report(paths: list[str], out: str | None) -> int:
    """Print the table and the targets of saved results (several files: sizes merged)."""
    merged: dict[str, Any] | None = None
    for path in paths:
        data = json.loads(Path(path).read_text())
        if merged is None:
            merged = data
            continue
        have = {s["n"] for s in merged["sizes"]}
        merged["sizes"] += [s for s in data["sizes"] if s["n"] not in have]
        merged.setdefault("merged_from", [paths[0]]).append(path)
    assert merged is not None
    merged["sizes"].sort(key=lambda s: s["n"])
    merged["targets"] = targets(merged)
    print(table(merged))
    print()
    print("Issue 4 targets (ours):")
    print(targets_text(merged["targets"]))
    if out:
        Path(out).write_text(json.dumps(merged, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report:
        return report(args.report, args.out if args.out != "results.json" else None)
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    if args.include_1m and 1_000_000 not in sizes:
        sizes.append(1_000_000)
    sizes.sort()
    root = HERE.parent.parent
    bench = Bench(args)
    results: dict[str, Any] = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine_info(),
        "load_start": loadavg(),
        "seed": args.seed,
        "packages": {pkg: package_info(py) for pkg, py in bench.pythons.items()},
        "source": source_fingerprint(root),
        "settings": {k: v for k, v in vars(args).items() if k not in ("out",)},
        "sizes": [],
    }
    base = run_proc([args.our_python, "-c", "pass"], timeout=60)
    base2 = [run_proc([args.our_python, "-c", "pass"], timeout=60) for _ in range(5)]
    results["interpreter_start_ms"] = round(statistics.median(r.wall_s for r in base2) * 1000, 1)
    results["interpreter_rss_mb"] = round(base.rss_mb, 1)
    lessons = bench.lessons_file(max(sizes))
    results["template_overlap"] = template_overlap(args.seed)
    t_all = time.perf_counter()
    for n in sizes:
        queries, qs = bench.queries_file(n)
        t = time.perf_counter()
        size = bench.run_size(n, lessons, queries, qs)
        size["wall_s"] = round(time.perf_counter() - t, 1)
        results["sizes"].append(size)
        Path(args.out).write_text(json.dumps(results, indent=1))  # partial results survive
        bench.log(f"n={n:,} done in {size['wall_s']} s")
    results["wall_s"] = round(time.perf_counter() - t_all, 1)
    results["load_end"] = loadavg()
    end_source = source_fingerprint(root)
    if end_source != results["source"]:
        results["source_changed_during_run"] = end_source
    results["targets"] = targets(results)
    Path(args.out).write_text(json.dumps(results, indent=1))
    print()
    print(table(results))
    print()
    print("Issue 4 targets (ours):")
    print(targets_text(results["targets"]))
    if "source_changed_during_run" in results:
        print("\nWARNING: src/ changed while the benchmark ran; figures mix two versions.")
    print(f"\nwrote {args.out} ({results['wall_s']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
