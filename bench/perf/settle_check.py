"""Settle in memory on the same tickets, for either package (stdlib + ``darwin_memo``).

    python bench/perf/settle_check.py STORE.json QUERIES.json [--decides 150] [--settles 120]

Loads a published-format JSON store with ``Ledger.load`` (in memory, as both packages
can), decides the first ``--decides`` realistic queries of a ``scale.py`` queries file,
then settles up to ``--settles`` of the tickets that named a deciding entry, each with
a delta from a fixed pseudo-random mix of gains and losses, and prints one JSON line:
how many settles were timed and their median and mean milliseconds. Run it with each
package's interpreter on the same store and queries: both settle the same tickets
(same rankings), which ``scale.py``'s row cannot promise at 100k and up, where the
published package's decides are too slow to open as many tickets in its time budget.
"""

from __future__ import annotations

import argparse
import json
import statistics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("store")
    parser.add_argument("queries")
    parser.add_argument("--decides", type=int, default=150)
    parser.add_argument("--settles", type=int, default=120)
    args = parser.parse_args()

    from _driver import settle_timed  # this directory: the scale curve's own settling

    from darwin_memo.ledger import Ledger

    with open(args.queries, encoding="utf-8") as fh:
        queries = json.load(fh)["realistic"][: args.decides]
    ledger = Ledger.load(args.store)
    tickets = [t for t in (ledger.decide(q) for q in queries) if t.deciding_entry]
    times = settle_timed(ledger, tickets[: args.settles])
    print(
        json.dumps(
            {
                "settles": len(times),
                "p50_ms": round(statistics.median(times) * 1000, 4) if times else None,
                "mean_ms": round(statistics.mean(times) * 1000, 4) if times else None,
                "deciders": [t.deciding_entry for t in tickets[: args.settles]][:5],
            }
        )
    )


if __name__ == "__main__":
    main()
