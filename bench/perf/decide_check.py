"""Time decides on an existing store: open once, decide every query, report wall and CPU.

    python bench/perf/decide_check.py STORE QUERIES.json

QUERIES.json is what ``bench/perf/lessons.py`` writes (``{"realistic": [...],
"adversarial": [...]}``). Each answered ticket is abandoned outside the timing, so the
store's balances do not change. Used for the idle spot check in docs/performance.md.
"""

import json
import sys
import time

from darwin_memo.ledger import Ledger

path, qfile = sys.argv[1], sys.argv[2]
qs = json.load(open(qfile))
t = time.perf_counter()
L = Ledger.open(path, create=False)
t_open = time.perf_counter() - t


def run(name, queries):
    w = []
    c = []
    for q in queries:
        t = time.perf_counter()
        p = time.process_time()
        tk = L.decide(q)
        w.append(time.perf_counter() - t)
        c.append(time.process_time() - p)
        if tk.deciding_entry:
            L.abandon(tk.id)
    w.sort()
    c.sort()
    print(
        f"{name}: n={len(w)} wall p50 {w[len(w) // 2] * 1e3:.2f} p95 {w[int(len(w) * 0.95)] * 1e3:.1f} max {w[-1] * 1e3:.1f} ms; cpu p50 {c[len(c) // 2] * 1e3:.2f} ms"
    )


print(f"open {t_open * 1e3:.1f} ms")
run("realistic", qs["realistic"])
run("adversarial", qs["adversarial"])
