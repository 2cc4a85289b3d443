"""Talking to language models: the one small protocol every client speaks.

A client has one method, ``complete(prompt, system="") -> str``. Helpers here
clean up what models send back: reasoning blocks (``<think>...</think>``) are
stripped before anything is parsed, and JSON arrays are dug out of code fences
and surrounding prose.
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol, runtime_checkable

__all__ = ["DEFAULT_SYSTEM", "THINK_RE", "LLMClient", "parse_json_array", "strip_think"]

DEFAULT_SYSTEM = (
    "You are a precise knowledge-engineering assistant: answer only from what you are given."
)

THINK_RE = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)
_FENCE_RE = re.compile(r"```(?:json)?", re.IGNORECASE)


@runtime_checkable
class LLMClient(Protocol):
    """Anything that turns a prompt into text."""

    def complete(self, prompt: str, system: str = "") -> str: ...


def strip_think(text: str) -> str:
    """Remove reasoning blocks; an unterminated ``<think>`` hides everything after it."""
    text = THINK_RE.sub("", text)
    lowered = text.lower()
    start = lowered.find("<think>")
    if start >= 0:
        text = text[:start]
    return text


def parse_json_array(text: str) -> list[Any]:
    """The first JSON array in a model reply (fences and prose tolerated), else ``[]``."""
    cleaned = _FENCE_RE.sub("", strip_think(text))
    start = cleaned.find("[")
    end = cleaned.rfind("]")
    if start < 0 or end <= start:
        return []
    try:
        value = json.loads(cleaned[start : end + 1])
    except json.JSONDecodeError:
        return []
    return value if isinstance(value, list) else []
