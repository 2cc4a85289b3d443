"""CPU time of one consolidating tick on a copy of an SQLite store, by phase.

    PYTHONPATH=src python bench/perf/consolidate_tick.py STORE.db [--profile N]

The store is copied to a temporary file (the original is never written), opened,
and ticked once with ``consolidate_every = 1``. It prints one JSON line: the tick's
CPU seconds (``time.process_time``, so a loaded machine inflates wall time, not
these), the CPU seconds of reading the candidates (``alive``, ``token_sets``), of
finding the groups (``groups``, which includes the reads), of writing the merges
(``merge_writes``), the number of merges and a fingerprint of the groups (sorted
member ids), which must not change when the implementation does. ``--profile N``
also prints the N costliest functions (cProfile; it inflates the figures).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any


def _timed(owner: Any, name: str, spent: dict[str, float], key: str) -> None:
    inner: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[key] = spent.get(key, 0.0) + time.process_time() - start

    setattr(owner, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("store")
    parser.add_argument("--profile", type=int, default=0)
    args = parser.parse_args()

    import darwin_memo.consolidate  # noqa: F401  (the module, not the function)
    from darwin_memo.backends import sqlstore
    from darwin_memo.ledger import Ledger

    consolidate = sys.modules["darwin_memo.consolidate"]
    spent: dict[str, float] = {}
    _timed(sqlstore.SqlStore, "alive", spent, "alive")
    _timed(sqlstore.SqlStore, "token_sets", spent, "token_sets")
    if hasattr(sqlstore.SqlStore, "merge_candidates"):
        _timed(sqlstore.SqlStore, "merge_candidates", spent, "candidates")
    _timed(consolidate, "_groups", spent, "groups")
    for name in ("merge_many", "merge_into"):
        if hasattr(sqlstore.SqlStore, name):
            _timed(sqlstore.SqlStore, name, spent, "merge_writes")

    with tempfile.TemporaryDirectory(prefix="consolidate-tick-") as tmp:
        path = os.path.join(tmp, "store.db")
        shutil.copy(args.store, path)
        ledger = Ledger.open(path, create=False)
        ledger.config.consolidate_every = 1
        profiler = None
        if args.profile:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        start = time.process_time()
        result = ledger.tick()
        cpu = time.process_time() - start
        if profiler is not None:
            profiler.disable()
        groups: dict[str, list[str]] = {}
        for member, heir in ledger.store.conn.execute("SELECT member, heir FROM lineage"):  # type: ignore[attr-defined]
            groups.setdefault(heir, []).append(member)
        digest = hashlib.sha256()
        for group in sorted(sorted(g) for g in groups.values()):
            digest.update((",".join(group) + "\n").encode())
        ledger.close()
    out = {
        "store": os.path.basename(args.store),
        "tick_cpu_s": round(cpu, 2),
        **{k: round(v, 2) for k, v in sorted(spent.items())},
        "merges": result["merges"],
        "population_after": result["population"],
        "groups_sha": digest.hexdigest()[:16],
    }
    print(json.dumps(out))
    if profiler is not None:
        import pstats

        pstats.Stats(profiler).sort_stats("tottime").print_stats(args.profile)


if __name__ == "__main__":
    main()
