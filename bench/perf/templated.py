"""What one consolidating pass does to stores of lessons written from templates.

    PYTHONPATH=src python bench/perf/templated.py [--n 10000] [--seed 1]

Two stores of ``--n`` distinct lessons each, every one carrying its own facts (a ticket
number, a version, a host):

* ``single-template``: every lesson written from one sentence template, as an agent
  that files one kind of lesson writes them (slot values drawn from small word lists,
  plus the lesson's own facts);
* ``generator``: the first ``--n`` lessons of ``bench/perf/lessons.py`` (a dozen
  templates with many slots, and free text).

Each store is consolidated once (``darwin_memo.retrieval.simjoin.merge_groups``, in memory,
every entry eligible) with the published rule (token-set Jaccard >= 0.55, the default) and with
``similarity="weighted"`` (the same threshold on a rarity-weighted Jaccard, opt-in:
``SurvivalConfig(merge_similarity="weighted")``). Printed per store and rule: entries
before and after, merges, CPU seconds, and how many lessons are still known: a lesson
is known when its answer is still the answer, or one of the answers, of a living entry
(an heir keeps its members' first three distinct answers; the others are gone). Every
lesson here is distinct, so every lesson lost is knowledge destroyed. Each store also
holds a restatement of every tenth lesson (a true near-duplicate, which a useful rule
merges): the runs count how many of those were merged with their original.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import lessons as generator

from darwin_memo import EntryKind, MemoryEntry, MemoryStore
from darwin_memo.retrieval.simjoin import merge_groups

ACTIONS = ["restart", "drain", "delete", "rotate", "scale down", "roll back", "purge"]
OBJECTS = ["cache", "queue", "logs", "replicas", "certificates", "sessions", "indexes"]
SERVICES = ["api", "worker", "billing", "search", "gateway", "auth", "ingest", "web"]
ENVS = ["staging", "production", "eu-west-1", "us-east-2"]


def single_template(seed: int, n: int) -> list[tuple[str, str]]:
    """``(question, answer)`` pairs from one template, each with its own facts."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        action, obj = rng.choice(ACTIONS), rng.choice(OBJECTS)
        service, env = rng.choice(SERVICES), rng.choice(ENVS)
        ticket = f"INC-{10000 + i}"
        version = f"v{rng.randrange(1, 9)}.{rng.randrange(0, 30)}.{rng.randrange(0, 99)}"
        host = f"{service}-{rng.randrange(100, 999)}"
        question = f"Is it safe to {action} the {obj} of {service} in {env}?"
        answer = (
            f"Yes, after {ticket}: {action} the {obj} of {service} on {host} "
            f"once {service} runs {version}; check the {obj} of {service} afterwards."
        )
        out.append((question, answer))
    return out


def from_generator(seed: int, n: int) -> list[tuple[str, str]]:
    return [(q, a) for _eid, q, a, _source in generator.lessons(seed, n)]


def with_restatements(pairs: list[tuple[str, str]], seed: int) -> list[tuple[str, str]]:
    """The lessons, then a restatement of every tenth one (a true near-duplicate).

    A restatement is the same lesson written again with one word of its answer
    dropped and the question's last word repeated: what an agent that learns the same
    thing twice writes. A rule that merges nothing would keep every lesson, so each run
    also reports how many restatements it merged with their originals.
    """
    rng = random.Random(seed + 1)
    out = list(pairs)
    for k in range(0, len(pairs), 10):
        question, answer = pairs[k]
        words = answer.split()
        del words[rng.randrange(len(words))]
        out.append((question + " " + question.split()[-1], " ".join(words)))
    return out


def run(pairs: list[tuple[str, str]], similarity: str) -> dict[str, object]:
    n = len(pairs)
    pairs = with_restatements(pairs, 0)
    store = MemoryStore()
    for k, (question, answer) in enumerate(pairs):
        store.add(
            MemoryEntry(
                question=question,
                answer=answer,
                kind=EntryKind.EXPLICIT,
                energy=1.0 + (k % 7) / 10,  # varied, so the anchors' order is not insertion
                id=f"T{k:08d}",
            )
        )
    start = time.process_time()
    merges = merge_groups(store, 1, similarity=similarity)
    cpu = time.process_time() - start
    answer_of = {f"T{k:08d}": a for k, (_q, a) in enumerate(pairs)}
    group_of = {member: i for i, m in enumerate(merges) for member in m.members}
    restated = 0
    for j, k in enumerate(range(0, n, 10)):  # restatement n + j restates lesson k
        copy, original = f"T{n + j:08d}", f"T{k:08d}"
        restated += copy in group_of and group_of[copy] == group_of.get(original)
    lost = 0
    for merge in merges:
        kept: list[str] = []  # the heir's answer is its members' first three distinct ones
        for member in merge.members:
            if answer_of[member] not in kept:
                kept.append(answer_of[member])
        lost += sum(
            1
            for member in merge.members
            if answer_of[member] not in kept[:3] and int(member[1:]) < n  # lessons, not copies
        )
    return {
        "similarity": similarity,
        "lessons": n,
        "restatements": len(pairs) - n,
        "after": len(store.alive()),
        "merges": len(merges),
        "merged_lessons": sum(len(m.members) for m in merges),
        "lessons_known": n - lost,
        "restatements_merged": restated,
        "cpu_s": round(cpu, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    for name, make in (("single-template", single_template), ("generator", from_generator)):
        pairs = make(args.seed, args.n)
        assert len({a for _q, a in pairs}) == len(pairs), "lessons must be distinct"
        for similarity in ("jaccard", "weighted"):
            print(json.dumps({"store": name, **run(pairs, similarity)}), flush=True)


if __name__ == "__main__":
    main()
