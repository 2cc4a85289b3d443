"""03: the survival loop, the headline demo in library calls.

Memory answers, a real environment acts on the answer and *measures* what that
did, and the measured delta flows back along the answer's provenance. Here the
environment is ``StorageEnv``: a temporary directory of real files. Deleting a
disposable file frees its size; deleting a protected database file costs three
times its size to restore. Nothing grades an answer; the filesystem responds.

Every cycle each entry pays 0.05 upkeep. The poisoned forum post decides
database deletions, the measured damage drains it, and it is *executed*;
trivia nobody needs *starves* around cycle 20; near-duplicates *merge*.

    python examples/03_survival_loop.py            # 30 cycles, seed 11
    python examples/03_survival_loop.py --seed 3 --cycles 40
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

from darwin_memo import (
    LocalEncoder,
    MemoryStore,
    QueryProtocol,
    StorageEnv,
    SurvivalConfig,
    SurvivalLoop,
    death_cause,
    demo_corpus,
)

PROBE = "Is it safe to delete the file store-0.db (a database file under data/)?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=11, help="world seed (11)")
    parser.add_argument("--cycles", type=int, default=30, help="cycles to run (30)")
    parser.add_argument("-o", "--out", help="save the survivors to this store file")
    args = parser.parse_args()

    store = MemoryStore()  # upkeep 0.05 per cycle, energy cap 5.0
    for entry in LocalEncoder().encode(demo_corpus()):
        store.add(entry)
    poisoned = {e.id for e in store.alive() if "forum-post" in e.sources}
    print(f"{len(store)} entries, {len(poisoned)} of them from the poisoned forum post")
    print(f"before selection: {PROBE}\n  -> {QueryProtocol(store).answer(PROBE).text}\n")

    with StorageEnv(seed=args.seed) as env:  # real files; removed on exit
        loop = SurvivalLoop(store, env, config=SurvivalConfig(cycles=args.cycles))
        report = loop.run()
    print(report.summary())

    # What the poison's decisions measured, cycle by cycle: the evidence that killed it.
    damage: dict[int, list[float]] = defaultdict(list)
    for t in report.trajectories:
        if t.deciding_entry in poisoned and t.outcome.delta != 0:
            damage[t.cycle].append(t.outcome.delta)
    print("\nactions the poison decided, and what the disk measured:")
    for cycle, deltas in sorted(damage.items()):
        shown = ", ".join(f"{d:+,.0f} bytes" for d in deltas)
        print(f"  cycle {cycle:2}: {shown}")
    if not damage:
        print("  (none: it never decided an action in this world)")

    causes: dict[str, list[str]] = defaultdict(list)
    for entry in store.graveyard():
        causes[death_cause(entry, poisoned, loop.merged_away)].append(entry.answer)
    print("\ngraveyard:")
    for cause in ("executed", "starved", "merged"):
        print(f"  {cause:8} {len(causes[cause]):2}")
        for answer in causes[cause][:3]:
            print(f"           - {answer[:80]}")

    print("\nsurvivors:")
    for entry in sorted(store.alive(), key=lambda e: -e.energy):
        print(f"  {entry.energy:4.2f}  {entry.answer[:80]}")

    after = QueryProtocol(store).answer(PROBE)
    print(f"\nafter selection: {PROBE}\n  -> {after.text or '(silence: the file is kept)'}")
    alive_poison = sum(1 for e in store.alive() if "forum-post" in e.sources)
    print(f"\nPoisoned entries still alive: {alive_poison}")
    if args.out:
        store.save(args.out)
        print(f"survivors saved to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
