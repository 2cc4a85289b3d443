"""Distillation's pure logic: which entries train a parametric memory, and how.

The seed README's last capability: fine-tune a small causal language model with LoRA on
the *surviving* question/answer pairs of a store, conditioning on the question only, so
that selection works as a data filter for a parametric memory. The training itself
(torch, transformers, peft: the ``[distill]`` extra) lives in ``distill.train``; this
module holds everything that needs none of them, so it is tested without them:

* ``select_entries``: the living entries that may decide (probationary imports have not
  earned trust, so they do not teach the model either), highest balance first;
* ``format_prompt`` / ``format_answer``: the text the model sees and must produce;
* ``label_ids``: the loss mask, so the loss falls on answer tokens only;
* ``contains_answer``: the containment score the ``distill`` benchmark uses;
* ``TrainSettings``, ``model_card`` and ``card_markdown``: the hyper-parameters and the
  record written beside every adapter (store, entries used with ids and balances).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import DarwinMemoError
from ..records.entry import MemoryEntry

__all__ = [
    "CARD_JSON",
    "CARD_MD",
    "IGNORE_INDEX",
    "DistillError",
    "Example",
    "TrainSettings",
    "card_markdown",
    "contains_answer",
    "examples_of",
    "format_answer",
    "format_prompt",
    "label_ids",
    "model_card",
    "normalize",
    "select_entries",
]

#: The label value the loss ignores (PyTorch's ``CrossEntropyLoss`` default).
IGNORE_INDEX = -100
#: The model card's file names, written beside the adapter.
CARD_JSON = "card.json"
CARD_MD = "CARD.md"


class DistillError(DarwinMemoError, ValueError):
    """Distillation cannot start: bad input, a missing extra, or an unusable model."""


@dataclass(frozen=True)
class Example:
    """One training pair taken from a living entry."""

    id: str
    question: str
    answer: str
    balance: float
    kind: str
    sources: tuple[str, ...]

    @property
    def prompt(self) -> str:
        return format_prompt(self.question)

    @property
    def target(self) -> str:
        return format_answer(self.answer)


def select_entries(living: Iterable[MemoryEntry]) -> list[MemoryEntry]:
    """The entries a store teaches: living, off probation, highest balance first.

    ``living`` is a store's population (``store.alive()``). An empty population and
    one made only of probationary imports are errors: neither can teach anything,
    and training on nothing would write an adapter that is just the base model.
    """
    alive = [e for e in living if e.alive]
    if not alive:
        raise DistillError("the store has no living entries: nothing to distill")
    trusted = [e for e in alive if e.may_decide]
    if not trusted:
        raise DistillError(
            f"every living entry ({len(alive)}) is on probation: imports teach nothing "
            "until they graduate"
        )
    return sorted(trusted, key=lambda e: (-e.energy, e.id))


def examples_of(entries: Iterable[MemoryEntry]) -> list[Example]:
    """Training pairs, one per entry, in the given order."""
    return [
        Example(
            id=e.id,
            question=e.question,
            answer=e.answer,
            balance=round(e.energy, 6),
            kind=e.kind.value,
            sources=tuple(e.sources),
        )
        for e in entries
    ]


def format_prompt(question: str) -> str:
    """What the model is conditioned on: the question, and the cue to answer."""
    return f"Question: {' '.join(question.split())}\nAnswer:"


def format_answer(answer: str) -> str:
    """What the model learns to produce after the prompt (the tokenizer adds the end)."""
    return " " + " ".join(answer.split())


def label_ids(
    prompt_ids: Sequence[int], answer_ids: Sequence[int], max_length: int | None = None
) -> tuple[list[int], list[int]]:
    """``(input_ids, labels)`` with the prompt masked out of the loss.

    A causal LM shifts labels by itself, so ``labels`` lines up with ``input_ids``:
    the prompt's positions hold ``IGNORE_INDEX`` and the answer's hold its token ids.
    ``max_length`` truncates from the end (the answer is cut, never the question);
    a prompt that leaves no room for a single answer token is an error.
    """
    if not answer_ids:
        raise DistillError("an answer must have at least one token")
    input_ids = [*prompt_ids, *answer_ids]
    labels = [IGNORE_INDEX] * len(prompt_ids) + list(answer_ids)
    if max_length is not None:
        if len(prompt_ids) >= max_length:
            raise DistillError(
                f"a question takes {len(prompt_ids)} tokens, at least the whole "
                f"max length {max_length}: raise --max-length"
            )
        input_ids, labels = input_ids[:max_length], labels[:max_length]
    return input_ids, labels


_SPACES = re.compile(r"\s+")


def normalize(text: str) -> str:
    """Case-folded, whitespace-collapsed text (containment ignores layout and case)."""
    return _SPACES.sub(" ", text.casefold()).strip()


def contains_answer(generated: str, answer: str) -> bool:
    """Whether ``generated`` reproduces ``answer``: its normalized text contains it.

    A trailing full stop is optional (a model may stop right before it); an empty
    answer is never "reproduced".
    """
    want = normalize(answer).rstrip(".").strip()
    return bool(want) and want in normalize(generated)


@dataclass(frozen=True)
class TrainSettings:
    """The hyper-parameters of one distillation run (all recorded in the card)."""

    epochs: int = 80
    lr: float = 5e-3
    rank: int = 16
    alpha: int = 32
    dropout: float = 0.0
    batch_size: int = 8
    max_length: int = 256
    seed: int = 0
    device: str = "auto"

    def __post_init__(self) -> None:
        if self.epochs < 1:
            raise DistillError(f"epochs must be >= 1, got {self.epochs}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise DistillError(f"lr must be a positive number, got {self.lr}")
        if self.rank < 1 or self.alpha < 1:
            raise DistillError(f"rank and alpha must be >= 1, got {self.rank}, {self.alpha}")
        if not 0.0 <= self.dropout < 1.0:
            raise DistillError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.batch_size < 1 or self.max_length < 2:
            raise DistillError("batch size must be >= 1 and max length >= 2")
        if self.device not in ("auto", "cpu", "cuda"):
            raise DistillError(f"device must be auto, cpu or cuda, got {self.device!r}")


def model_card(
    *,
    store: str,
    examples: Sequence[Example],
    settings: TrainSettings,
    base_model: str,
    base_built: Mapping[str, Any] | None = None,
    device: str | None = None,
    final_loss: float | None = None,
    wall_time_s: float | None = None,
    versions: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The record written beside an adapter: where it came from and how it was made.

    ``base_built`` describes a base model built from a configuration (no download)
    rather than read from a folder; ``versions`` names the libraries that trained it.
    """
    return {
        "store": store,
        "entries_used": len(examples),
        "entries": [
            {
                "id": ex.id,
                "balance": ex.balance,
                "kind": ex.kind,
                "sources": list(ex.sources),
                "question": ex.question,
            }
            for ex in examples
        ],
        "base_model": base_model,
        "base_built": dict(base_built) if base_built is not None else None,
        "hyper_parameters": asdict(settings),
        "device": device,
        "objective": "causal LM loss on answer tokens only, conditioned on the question",
        "prompt_format": format_prompt("{question}") + format_answer("{answer}"),
        "final_loss": None if final_loss is None else round(final_loss, 6),
        "wall_time_s": None if wall_time_s is None else round(wall_time_s, 1),
        "versions": dict(versions or {}),
    }


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def card_markdown(card: Mapping[str, Any]) -> str:
    """The card as Markdown (the same facts as ``card.json``)."""
    hp = card["hyper_parameters"]
    built = card.get("base_built")
    base = f"`{card['base_model']}`" + (
        " (built from a configuration, no download: "
        + ", ".join(f"{k} {v}" for k, v in built.items())
        + ")"
        if built
        else ""
    )
    fmt = card["prompt_format"].replace("\n", "\\n")  # the newline shown, not taken
    lines = [
        "# Distilled memory adapter",
        "",
        f"- store: `{card['store']}`",
        f"- base model: {base}",
        f"- objective: {card['objective']}",
        f"- prompt format: `{_cell(fmt)}`",
        "- hyper-parameters: " + ", ".join(f"{k} {v}" for k, v in hp.items()),
    ]
    if card.get("device"):
        lines.append(f"- device: {card['device']}")
    if card.get("final_loss") is not None:
        lines.append(f"- final epoch loss: {card['final_loss']}")
    if card.get("wall_time_s") is not None:
        lines.append(f"- training time: {card['wall_time_s']} s")
    if card.get("versions"):
        lines.append("- libraries: " + ", ".join(f"{k} {v}" for k, v in card["versions"].items()))
    lines += [
        "",
        f"## Entries used ({card['entries_used']})",
        "",
        "| id | balance | kind | sources | question |",
        "|---|---:|---|---|---|",
    ]
    for e in card["entries"]:
        lines.append(
            f"| `{_cell(e['id'])}` | {e['balance']:.3f} | {_cell(e['kind'])} | "
            f"{_cell(', '.join(e['sources']))} | {_cell(e['question'])} |"
        )
    return "\n".join(lines) + "\n"
