"""Distillation: fine-tune a small model on a store's survivors (``darwin-memo distill``).

``selection``: which entries teach the model, the prompt and answer text, the loss mask
and the model card (needs nothing beyond the standard library); ``train``: the training
itself (the ``[distill]`` extra: torch, transformers, peft), imported only when used.
The names of ``selection`` are importable from ``darwin_memo.distill``, as before.
"""

from .selection import (
    CARD_JSON,
    CARD_MD,
    IGNORE_INDEX,
    DistillError,
    Example,
    TrainSettings,
    card_markdown,
    contains_answer,
    examples_of,
    format_answer,
    format_prompt,
    label_ids,
    model_card,
    normalize,
    select_entries,
)

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
