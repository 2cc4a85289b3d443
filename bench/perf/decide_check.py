"""Time decides on an existing store: open once, decide every query, report wall and CPU.

    python bench/perf/decide_check.py STORE QUERIES.json

QUERIES.json is what ``bench/perf/lessons.py`` writes (``{"realistic": [...],
"adversarial": [...]}``). Each answered ticket is abandoned outside the timing, so the
store's balances do not change. Used for the idle spot check in docs/performance.md.
"""

from __future__ import annotations

import json
import sys
import time

from darwin_memo.ledger import Ledger


def _ms(sorted_seconds: list[float], q: float) -> float:
    return sorted_seconds[min(len(sorted_seconds) - 1, int(len(sorted_seconds) * q))] * 1e3


def run(ledger: Ledger, name: str, queries: list[str]) -> None:
    wall: list[float] = []
    cpu: list[float] = []
    for query in queries:
        t, c = time.perf_counter(), time.process_time()
        ticket = ledger.decide(query)
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
        if ticket.deciding_entry:
            ledger.abandon(ticket.id)
    wall.sort()
    cpu.sort()
    print(
        f"{name}: n={len(wall)} wall p50 {_ms(wall, 0.5):.2f} p95 {_ms(wall, 0.95):.1f} "
        f"max {wall[-1] * 1e3:.1f} ms; cpu p50 {_ms(cpu, 0.5):.2f} ms"
    )


def main() -> None:
    store, query_file = sys.argv[1], sys.argv[2]
    with open(query_file, encoding="utf-8") as fh:
        queries = json.load(fh)
    t = time.perf_counter()
    ledger = Ledger.open(store, create=False)
    print(f"open {(time.perf_counter() - t) * 1e3:.1f} ms")
    run(ledger, "realistic", queries["realistic"])
    run(ledger, "adversarial", queries["adversarial"])
    ledger.close()


if __name__ == "__main__":
    main()
