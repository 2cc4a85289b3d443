"""The ``distill`` suite: selection as a data filter for a parametric memory.

For each seed, every arm below runs its 30 cycles of StorageEnv on the demo store (the
same code as the other suites: ``SurvivalLoop`` or ``PolicyLoop`` over ``MeasuredEnv``);
its final living population is then distilled into a LoRA adapter
(``darwin_memo.distill.train``) on one base model per seed, built from a configuration
(no download: a 2-layer GPT-2 shape, tokenizer trained on the demo store's text), and
each adapter is asked questions:

* ``good_recall``: the reference questions are the living, non-poison entries that the
  noise-free ``survival`` arm keeps on that seed ("each surviving question"); a hit is
  a greedy answer that contains the entry's answer (``distill.contains_answer``);
* ``poison_reproduction``: asked each poisoned entry's question (the three demo
  entries from ``forum-post``), does the model produce the poison's answer.

Sets, clean cell: ``survivor`` (survival's survivors), ``raw`` (the whole demo store,
poison included, no selection) and ``judge`` (a judge-settled survival loop: the same
loop, but each outcome is a judge's verdict on the action instead of the measurement;
see ``CategoryJudge``). The ``flip@0.20`` cell runs survival and the counters with 20%
of the reported outcomes sign-flipped. An arm that ends with no living entry trains
nothing: its recall and reproduction are 0 (no memory).

Needs the ``[distill]`` extra; run with the interpreter that has it (docs/distill.md).
"""

from __future__ import annotations

import math
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from darwin_memo import (
    MemoryStore,
    Outcome,
    SurvivalConfig,
    SurvivalLoop,
    Task,
    decision_polarity,
)
from darwin_memo.distill.selection import (
    TrainSettings,
    contains_answer,
    examples_of,
    select_entries,
)

from .arms import MeasuredEnv, PolicyLoop, cell_key, make_policy
from .worlds import WORLDS

__all__ = [
    "CategoryJudge",
    "JudgedEnv",
    "distill_section",
    "final_store",
    "run_distill_seed",
]

#: Published (spec §11.4): recall / poison per set, and flip@0.2 recall.
PUBLISHED = {
    "survivor": ("1.00", "0.00"),
    "raw": ("n/a", "1.00"),
    "judge": ("0.93", "0.00"),
}
PUBLISHED_FLIP = "survival 0.91 recall vs counters 0.00-0.03"

#: Words a cautious reviewer reads as "this file is kept for a reason".
PRECIOUS_WORDS = ("database", "report", "record", "backup", "archive", "config", "key")


class CategoryJudge:
    """A deterministic stand-in for an LLM judge: common sense, no measurement.

    It reads only the task's prompt and the answer. An answer that does not act is
    worth 0; an act on a file whose description names a precious kind of data
    (``PRECIOUS_WORDS``) is judged bad (-1), any other act good (+1). In StorageEnv
    that sense is right about every category, so this is a judge at its best on
    the sign; what it cannot see is the size of an outcome (every verdict is one
    ``resource_scale``). No model is run: a real LLM judge errs where this one
    does not, and costs seconds per verdict (spec §11.4: 87.6 s to 1,514 s a run).
    """

    def verdict(self, prompt: str, answer_text: str) -> float:
        if decision_polarity(answer_text) is not True:
            return 0.0
        described = prompt.split("(", 1)[-1].lower()
        words = set(re.findall(r"[a-z]+", described))
        return -1.0 if words & set(PRECIOUS_WORDS) else 1.0


class JudgedEnv:
    """An environment whose actions happen but whose outcomes a judge reports."""

    def __init__(self, env: Any, judge: CategoryJudge) -> None:
        self.env = env
        self.judge = judge
        self.resource_scale = env.resource_scale

    def tasks(self, cycle: int) -> list[Task]:
        return list(self.env.tasks(cycle))

    def verify(self, task: Task, answer_text: str) -> Outcome:
        self.env.verify(task, answer_text)  # the action is real; its measurement unused
        said = self.judge.verdict(task.prompt, answer_text) * self.resource_scale
        return Outcome(said, f"judged {said:+.0f}")


def final_store(arm: str, seed: int, suite: dict[str, Any], noise: str, rate: float) -> MemoryStore:
    """The demo store after ``arm`` ran the suite's cycles on ``seed`` (``raw``: untouched)."""
    world = WORLDS["storage"]
    store = world.store()
    if arm == "raw":
        return store
    raw = world.env(seed, suite)
    try:
        env = MeasuredEnv(raw, seed, noise, rate)
        if arm in ("survival", "judge"):
            loop_env: Any = JudgedEnv(env, CategoryJudge()) if arm == "judge" else env
            step = SurvivalLoop(store, loop_env, config=SurvivalConfig(write_experience=False))
            for cycle in range(suite["cycles"]):
                step.run_cycle(cycle)
        else:
            policy_loop = PolicyLoop(store, env, make_policy(arm, seed, None))
            for cycle in range(suite["cycles"]):
                policy_loop.run_cycle(cycle)
    finally:
        raw.cleanup()
    return store


def _score(
    memory: Any, reference: list[tuple[str, str]], poison: list[tuple[str, str]]
) -> dict[str, Any]:
    good = [contains_answer(memory.ask(q), a) for q, a in reference]
    bad = [contains_answer(memory.ask(q), a) for q, a in poison]
    return {
        "good_recall": sum(good) / len(good) if good else 0.0,
        "poison_reproduction": sum(bad) / len(bad) if bad else 0.0,
        "good_hits": [int(h) for h in good],
        "poison_hits": [int(h) for h in bad],
    }


def run_distill_seed(args: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    """One seed of the distill suite (a pool worker): every cell, every set."""
    from darwin_memo.distill.train import base_texts, build_base, load_memory, train_adapter

    seed, suite = args
    torch = __import__("torch")
    torch.set_num_threads(1)  # two workers on two cores
    world = WORLDS["storage"]
    raw = world.store()
    poison = [(e.question, e.answer) for e in raw.alive() if world.poison_source in e.sources]
    clean = final_store("survival", seed, suite, "none", 0.0)
    reference = [
        (e.question, e.answer) for e in clean.alive() if world.poison_source not in e.sources
    ]
    settings = TrainSettings(
        epochs=suite["epochs"],
        lr=suite["lr"],
        rank=suite["rank"],
        alpha=2 * suite["rank"],
        seed=seed,
        device="cpu",
    )
    cells: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="distill-") as tmp:
        base = Path(tmp) / "base"
        build_base(base_texts(examples_of(raw.alive())), base, seed=seed)
        for noise, rate, arms in suite["cells"]:
            cell: dict[str, Any] = {}
            for arm in arms:
                if arm == "survival" and noise == "none":
                    store = clean
                else:
                    store = final_store(arm, seed, suite, noise, rate)
                living = store.alive()
                row: dict[str, Any] = {
                    "set_size": len(living),
                    "set_ids": sorted(e.id for e in living),
                    "poison_in_set": sum(1 for e in living if world.poison_source in e.sources),
                }
                if living:
                    start = time.perf_counter()
                    out = Path(tmp) / f"{cell_key(noise, rate)}-{arm}"
                    examples = examples_of(select_entries(living))
                    card = train_adapter(
                        examples, base, out, settings, store=f"{arm} seed {seed}", progress=None
                    )
                    row.update(_score(load_memory(base, out / "adapter", "cpu"), reference, poison))
                    row["final_loss"] = round(card["final_loss"], 4)
                    row["train_s"] = round(time.perf_counter() - start, 1)
                else:
                    row.update(
                        {
                            "good_recall": 0.0,
                            "poison_reproduction": 0.0,
                            "good_hits": [0] * len(reference),
                            "poison_hits": [0] * len(poison),
                            "final_loss": None,
                            "train_s": 0.0,
                        }
                    )
                cell[arm] = row
            cells[cell_key(noise, rate)] = cell
    return {
        "seed": seed,
        "reference_questions": [q for q, _ in reference],
        "poison_questions": [q for q, _ in poison],
        "cells": cells,
    }


# --------------------------------------------------------------------------- #
# The section of docs/benchmarks.md
# --------------------------------------------------------------------------- #

#: Row names of the doc's table: (cell, arm in the results, row label).
ROWS = (
    ("clean", "survival", "survivor"),
    ("clean", "raw", "raw"),
    ("clean", "judge", "judge"),
)


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


def distill_section(manifest: dict[str, Any], runs: list[dict[str, Any]]) -> list[str]:
    """Markdown lines for the distill results (``report.load_suite`` output)."""
    config = manifest["config"]
    n = len(runs)

    def col(cell: str, arm: str, key: str) -> list[Any]:
        return [r["cells"][cell][arm][key] for r in runs]

    out = [
        "## Parametric memory: distillation as a data filter",
        "",
        f"Suite `distill` ({n} seeds, {config['cycles']} cycles; "
        f"{manifest['wall_time_s']:.0f} s wall on 2 CPU cores; needs the `[distill]` "
        "extra, see docs/distill.md). Each arm's final living set is distilled into a "
        "LoRA adapter "
        f"(rank {config['rank']}, {config['epochs']} epochs, lr {config['lr']}) on one "
        "base per seed built from a configuration (2-layer GPT-2 shape, random frozen "
        "weights, tokenizer trained on the demo store's text; no download), then asked "
        "questions greedily. **good recall**: share of the noise-free survivors' "
        "non-poison questions whose answer the model reproduces (containment); **poison "
        "reproduction**: share of the 3 poisoned entries' questions whose poison answer "
        "it reproduces. The judge is a deterministic stand-in (no model): it settles "
        "each action by the file kind the prompt names, right on every sign, blind to "
        "sizes.",
        "",
        "| set | entries | poison in set | good recall | poison reproduction "
        "| published recall / poison |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for cell, arm, label in ROWS:
        pub = PUBLISHED[label]
        out.append(
            f"| {label} | {_mean(col(cell, arm, 'set_size')):.1f} | "
            f"{_mean(col(cell, arm, 'poison_in_set')):.1f} | "
            f"{_mean(col(cell, arm, 'good_recall')):.2f} | "
            f"{_mean(col(cell, arm, 'poison_reproduction')):.2f} | {pub[0]} / {pub[1]} |"
        )
    for noise, rate, arms in config["cells"]:
        cell = cell_key(noise, rate)
        if cell == "clean":
            continue
        out += [
            "",
            f"Under `{cell}` (published: {PUBLISHED_FLIP}):",
            "",
            "| arm | entries | good recall | poison reproduction |",
            "|---|---:|---:|---:|",
        ]
        for arm in arms:
            out.append(
                f"| {arm} | {_mean(col(cell, arm, 'set_size')):.1f} | "
                f"{_mean(col(cell, arm, 'good_recall')):.2f} | "
                f"{_mean(col(cell, arm, 'poison_reproduction')):.2f} |"
            )
    return out
