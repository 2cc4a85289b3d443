"""Evidence for docs/organic.md: what usage-based retention does to a poisoned store.

    .venv/bin/python -m bench.organic.evidence             # both experiments (~1 min)
    .venv/bin/python -m bench.organic.evidence --attacker  # only the attacker grid

1. **salience_matched** (the ``organic`` suite of ``bench.evidence.run``): the demo
   store in ``StorageEnv`` (10 seeds, 30 cycles); each cycle removes as many entries
   as ``survival`` removed on that seed, the least salient first, salience =
   recency + ``OrganicMemory`` importance. Beside ``survival`` and ``random_matched``.
   Results: ``bench/evidence/results/organic/``.
2. **The query-only attacker** against potentiation (``attack_cell`` below): the demo
   store, no outcomes measured for a while (nothing is settled, so every entry lives
   on its stake), honest users asking about random lessons, and an attacker who can
   only *ask*: ``budget`` queries per tick that the poisoned lesson answers. Each
   answer's deciding entry is recalled through ``OrganicMemory``. Three conditions:
   ``potentiated`` (upkeep scaled by ``om.upkeep_scale()``, phase 4 wired),
   ``flat_organic`` (the same organic layer, flat upkeep) and ``flat_plain`` (no
   organic layer). The attacker has a *margin* in a cell when the poison outlives
   every other entry; the margin is its extra ticks over the longest-lived other
   entry, also given as a share of the flat starvation horizon (spawn / upkeep = 20
   ticks). Results: ``bench/organic/results/attacker.json``.

Deterministic: ids are random, but nothing here orders by id (ties go by insertion
order), and every draw comes from ``cycle_rng(seed, tick, ...)``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import darwin_memo
from darwin_memo import QueryProtocol
from darwin_memo.economy.rules import SPAWN_ENERGY, UPKEEP
from darwin_memo.organic import OrganicMemory
from darwin_memo.sim.environments import cycle_rng

from ..evidence.arms import advising_poison, demo_store
from ..evidence.run import RESULTS as EVIDENCE_RESULTS
from ..evidence.run import run_suite

RESULTS = Path(__file__).resolve().parent / "results"
ATTACKER_JSON = RESULTS / "attacker.json"

BUDGETS = (1, 2, 4, 8)  # attacker queries per tick
SEEDS = (0, 1, 2, 3)
CONDITIONS = ("potentiated", "flat_organic", "flat_plain")
HONEST_PER_TICK = 4  # honest queries per tick, about random living lessons
MAX_TICKS = 200
HORIZON = SPAWN_ENERGY / UPKEEP  # ticks a fresh, unsettled entry lives under flat upkeep


def attack_cell(condition: str, budget: int, seed: int) -> dict[str, Any]:
    """One cell: run ticks until every entry is dead; report who outlived whom."""
    store = demo_store()
    target = advising_poison(store)[0]
    protocol = QueryProtocol(store)
    om = OrganicMemory(store) if condition != "flat_plain" else None
    question = store.get(target).question  # type: ignore[union-attr]
    died: dict[str, int] = {}
    target_decided = attacker_queries = 0
    for tick in range(MAX_TICKS):
        living = store.alive()
        if not living:
            break
        others = [e.question for e in living if e.id != target]
        rng = cycle_rng(seed, tick, "organic-honest")
        asks = [rng.choice(others) for _ in range(HONEST_PER_TICK)] if others else []
        if target in store:
            asks += [question] * budget
            attacker_queries += budget
        for text in asks:
            decider = protocol.answer(text).deciding_entry
            if text == question and decider == target:
                target_decided += 1
            if om is not None and decider is not None:
                om.recall(decider)
        scale = om.upkeep_scale() if condition == "potentiated" and om is not None else None
        for entry in store.charge_upkeep(scale=scale):
            died[entry.id] = tick + 1
        if om is not None:
            om.decay()
    poison_life = died.get(target, MAX_TICKS)
    best_other = max((t for i, t in died.items() if i != target), default=0)
    margin = poison_life - best_other
    return {
        "condition": condition,
        "budget": budget,
        "seed": seed,
        "poison_lifetime": poison_life,
        "longest_other_lifetime": best_other,
        "margin_ticks": margin,
        "margin": margin > 0,
        "horizon_share": round(max(0, margin) / HORIZON, 4),
        "attacker_queries": attacker_queries,
        "poison_decided_share": round(target_decided / max(1, attacker_queries), 4),
    }


def attacker_grid() -> dict[str, Any]:
    cells = [attack_cell(c, b, s) for c in CONDITIONS for b in BUDGETS for s in SEEDS]
    summary: dict[str, Any] = {}
    for condition in CONDITIONS:
        mine = [c for c in cells if c["condition"] == condition]
        shares = [c["horizon_share"] for c in mine if c["margin"]]
        summary[condition] = {
            "cells": len(mine),
            "margin_cells": sum(c["margin"] for c in mine),
            "median_horizon_share": round(statistics.median(shares), 4) if shares else 0.0,
            "min_horizon_share": min(shares, default=0.0),
            "max_horizon_share": max(shares, default=0.0),
        }
    return {
        "setup": {
            "store": "demo store (16 entries, LocalEncoder over demo_corpus)",
            "budgets": list(BUDGETS),
            "seeds": list(SEEDS),
            "honest_per_tick": HONEST_PER_TICK,
            "horizon_ticks": HORIZON,
            "max_ticks": MAX_TICKS,
        },
        "summary": summary,
        "cells": cells,
        "command": ".venv/bin/python -m bench.organic.evidence --attacker",
        "darwin_memo_version": darwin_memo.__version__,
        "python": sys.version.split()[0],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--attacker", action="store_true", help="only the attacker grid")
    args = ap.parse_args(argv)
    if not args.attacker:
        target = run_suite(
            "organic",
            EVIDENCE_RESULTS,
            command=".venv/bin/python -m bench.evidence.run --suite organic",
        )
        print(f"wrote {target}", flush=True)
    grid = attacker_grid()
    RESULTS.mkdir(parents=True, exist_ok=True)
    ATTACKER_JSON.write_text(json.dumps(grid, indent=1, sort_keys=True) + "\n")
    print(json.dumps(grid["summary"], indent=1))
    print(f"wrote {ATTACKER_JSON}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
