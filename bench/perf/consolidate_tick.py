"""Time of one consolidating tick on a copy of an SQLite store, by phase.

    PYTHONPATH=src python bench/perf/consolidate_tick.py STORE.db [--profile N]

The store is copied to a temporary file (the original is never written), opened,
and ticked once with ``consolidate_every = 1``. It prints one JSON line: the tick's
wall seconds (``tick_wall_s``) and CPU seconds of every thread (``tick_cpu_s``,
``time.process_time``: the compiled join runs on a thread of its own); the CPU seconds
of the calling thread (``main_cpu_s``, ``time.thread_time``, so a loaded machine
inflates wall time, not these) and, within them, of reading the candidates
(``candidates``; ``alive`` and ``token_sets`` where the store reads entries whole),
of reading the members of the groups (``member_reads``) and of writing the merges
(``merge_writes``: the members buried, the heirs, the ``df`` changes and the token
lists); ``join_cpu_s``, what the other threads spent (the compiled join; 0 with the
Python join, which runs on the calling thread); the number of merges and a fingerprint
of the groups (sorted member ids), which must not change when the implementation
does. The member reads and the writes overlap the join: each batch of groups is read
and written while the join looks for the next. ``--profile N`` also prints the N
costliest functions (cProfile; it inflates the figures).
``--ticks N`` runs N consolidating ticks in a row, each from a freshly opened ledger,
and prints one line per tick (the fingerprint covers every merge so far): the first
consolidation of a store, then the ones after it. ``--similarity weighted`` ticks under
the rarity-weighted merge rule instead of the published one. With the compiled join
built (``darwin_memo._cjoin``), ``DARWIN_MEMO_PURE_PYTHON=1`` measures the Python join
instead (the fingerprint must not change).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any


def _timed(owner: Any, name: str, spent: dict[str, float], key: str) -> None:
    inner: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()  # this thread's: the join runs meanwhile on its own
        try:
            return inner(*args, **kwargs)
        finally:
            spent[key] = spent.get(key, 0.0) + time.thread_time() - start

    setattr(owner, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("store")
    parser.add_argument("--profile", type=int, default=0)
    parser.add_argument(
        "--ticks", type=int, default=1, help="consolidating ticks in a row, each reported"
    )
    parser.add_argument(
        "--similarity",
        choices=("jaccard", "weighted"),
        default="jaccard",
        help="the merge rule (SurvivalConfig.merge_similarity)",
    )
    args = parser.parse_args()

    from darwin_memo.backends import postings, sqlstore
    from darwin_memo.ledger import Ledger

    spent: dict[str, float] = {}
    _timed(sqlstore.SqlStore, "alive", spent, "alive")
    _timed(sqlstore.SqlStore, "token_sets", spent, "token_sets")
    _timed(sqlstore.SqlStore, "merge_candidates", spent, "candidates")
    _timed(sqlstore.SqlStore, "_entries_at", spent, "member_reads")
    for name in ("_write_buried", "_write_heirs"):
        _timed(sqlstore.SqlStore, name, spent, "merge_writes")
    for name in ("change_df", "apply_list_changes"):  # called by name from the module
        _timed(postings, name, spent, "merge_writes")

    with tempfile.TemporaryDirectory(prefix="consolidate-tick-") as tmp:
        path = os.path.join(tmp, "store.db")
        shutil.copy(args.store, path)
        ledger = Ledger.open(path, create=False)
        ledger.config.consolidate_every = 1
        ledger.config.merge_similarity = args.similarity
        profiler = None
        if args.profile:
            import cProfile

            profiler = cProfile.Profile()
        for tick in range(1, args.ticks + 1):
            if tick > 1:  # each tick from a freshly opened ledger, as one CLI call each
                ledger.close()
                ledger = Ledger.open(path, create=False)
                ledger.config.consolidate_every = 1
                ledger.config.merge_similarity = args.similarity
            spent.clear()
            if profiler is not None:
                profiler.enable()
            start, wall = time.process_time(), time.perf_counter()
            main_start = time.thread_time()
            result = ledger.tick()
            main = time.thread_time() - main_start
            cpu, wall = time.process_time() - start, time.perf_counter() - wall
            if profiler is not None:
                profiler.disable()
            groups: dict[str, list[str]] = {}
            for member, heir in ledger.store.conn.execute("SELECT member, heir FROM lineage"):  # type: ignore[attr-defined]
                groups.setdefault(heir, []).append(member)
            names: dict[str, str] = {}

            def name(
                entry_id: str,
                groups: dict[str, list[str]] = groups,
                names: dict[str, str] = names,
            ) -> str:
                """An heir by what it merged (its own id is random), others by id."""
                if entry_id not in groups:
                    return entry_id
                if entry_id not in names:
                    names[entry_id] = "(" + ",".join(sorted(map(name, groups[entry_id]))) + ")"
                return names[entry_id]

            digest = hashlib.sha256()
            for group in sorted(sorted(map(name, g)) for g in groups.values()):
                digest.update((",".join(group) + "\n").encode())
            out = {
                "store": os.path.basename(args.store),
                "tick": tick,
                "tick_wall_s": round(wall, 2),
                "tick_cpu_s": round(cpu, 2),
                "main_cpu_s": round(main, 2),
                **{k: round(v, 2) for k, v in sorted(spent.items()) if v},
                "join_cpu_s": round(cpu - main, 2),
                "merges": result["merges"],
                "population_after": result["population"],
                "groups_sha": digest.hexdigest()[:16],
            }
            print(json.dumps(out), flush=True)
        ledger.close()
    if profiler is not None:
        import pstats

        pstats.Stats(profiler).sort_stats("tottime").print_stats(args.profile)


if __name__ == "__main__":
    main()
