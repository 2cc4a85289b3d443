"""Reflection encoding: a model reads documents and writes question/answer lessons.

``ReflectionEncoder(client)`` runs MeMo's reflection-QA synthesis in five steps,
each one model call whose reply is a JSON array:

1. **Fact extraction** (per document): the facts the text states (``explicit``)
   and the ones a careful reader can infer from it (``inferred``).
2. **Consolidation** (per document): duplicates merged, related facts combined
   into multi-fact answers.
3. **Self-containment verification** (per document): every question rewritten
   so it can be understood with no document at hand (no "it", "the text", "the
   author"), and items the document does not support removed. A local check
   then drops any question that still points at "the document".
4. **Entity surfacing** (per document): the named things the text is about, each
   with questions in both directions ("What does the Platform Team own?" and
   "Who owns retention for data/?"); these become ENTITY entries.
5. **Cross-document synthesis** (per unordered pair of documents): answers that
   need both documents, or ``[]`` when they do not meet; CROSS_DOC entries
   sourced from both.

Model output is not trusted to be well formed. A reply is read leniently (think
blocks, code fences and prose around the array are ignored; a reply cut off
mid-array keeps its complete objects), and an item needs a non-empty question
and answer. A reply with nothing usable is asked again, with a reminder of the
format, up to ``retries`` more times; after that the step is skipped with a
logged reason (``encoder.skipped``), and the document keeps what the earlier
steps produced. A failing model call (``LLMError``) skips the same way: one bad
document never sinks the batch. Only when every call failed does ``encode``
raise, since then there is nothing to return but the error.

Documents run concurrently on ``max_workers`` threads, each through its steps
in order; the output order is fixed (documents in input order, each one's
consolidated then entity entries, then cross-document entries pair by pair),
and identical lessons from two documents become one entry with both sources.
``progress`` is called after every model call with how far the run has got.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from ..answer.clients import LLMClient, strip_think
from ..errors import LLMError
from ..records.entry import EntryKind, MemoryEntry

__all__ = [
    "CONSOLIDATE_PROMPT",
    "CROSS_DOC_PROMPT",
    "ENTITY_PROMPT",
    "EXTRACT_PROMPT",
    "STEPS",
    "VERIFY_PROMPT",
    "Progress",
    "ReflectionEncoder",
    "Skip",
    "parse_items",
]

log = logging.getLogger("darwin_memo.reflection")  # the published path's name, kept

STEPS = ("extract", "consolidate", "verify", "entities", "cross_doc")
#: Characters of a document shown to the model (longer texts are cut, and logged).
MAX_DOC_CHARS = 12_000

SYSTEM = (
    "You are a precise knowledge-engineering assistant. You reply with one JSON array "
    "and nothing else."
)


def _format(kinds: str) -> str:
    """The reply-format line (braces doubled: the prompts go through ``str.format``)."""
    return (
        'Reply with a JSON array of objects {{"question": "...", "answer": "...", '
        f'"kind": "{kinds}"}}}} and nothing else.'
    )


EXTRACT_PROMPT = (
    "Read the document and write question/answer pairs for every fact it states "
    '(kind "explicit") and every fact a careful reader can infer from it (kind '
    '"inferred"). Each question must make sense on its own; each answer must be a '
    "complete sentence.\n" + _format("explicit|inferred") + "\n\n"
    'Document "{doc_id}":\n{text}'
)

CONSOLIDATE_PROMPT = (
    "Here are question/answer pairs taken from one document. Merge pairs that say the "
    "same thing, and combine closely related facts into one pair whose answer states "
    "all of them. Keep every distinct fact; keep each pair's kind.\n"
    + _format("explicit|inferred")
    + "\n\nPairs:\n{items}"
)

VERIFY_PROMPT = (
    "Check each question/answer pair against the document. Rewrite every question so "
    "that someone who has never seen the document understands it: name the subject "
    'instead of writing "it", "they", "the document" or "the author". Remove pairs '
    "the document does not support.\n"
    + _format("explicit|inferred")
    + '\n\nDocument "{doc_id}":\n{text}\n\nPairs:\n{items}'
)

ENTITY_PROMPT = (
    "List the named entities the document is about (teams, people, places, systems, "
    "dates). For each one write two question/answer pairs, one in each direction: "
    "what the document says about the entity, and a question whose answer is the "
    "entity.\n"
    'Reply with a JSON array of objects {{"entity": "...", "question": "...", '
    '"answer": "..."}} and nothing else; [] if there are none.\n\n'
    'Document "{doc_id}":\n{text}'
)

CROSS_DOC_PROMPT = (
    "Read the two documents. Write question/answer pairs that can only be answered by "
    "combining facts from both (where they agree, complete or contradict each other). "
    "If they share nothing, reply [].\n"
    'Reply with a JSON array of objects {{"question": "...", "answer": "..."}} and '
    'nothing else.\n\nDocument "{a_id}":\n{a_text}\n\nDocument "{b_id}":\n{b_text}'
)


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """A reply schema: an object wrapping one array of items (what structured-output
    APIs accept at the top level; ``parse_items`` reads it like a bare array)."""
    item = {"type": "object", "properties": properties, "required": required}
    return {
        "type": "object",
        "properties": {"items": {"type": "array", "items": item}},
        "required": ["items"],
    }


_TEXT = {"type": "string", "minLength": 1}
QA_SCHEMA = _schema(
    {
        "question": _TEXT,
        "answer": _TEXT,
        "kind": {"type": "string", "enum": ["explicit", "inferred"]},
    },
    ["question", "answer", "kind"],
)
ENTITY_SCHEMA = _schema(
    {"entity": _TEXT, "question": _TEXT, "answer": _TEXT}, ["entity", "question", "answer"]
)
CROSS_DOC_SCHEMA = _schema({"question": _TEXT, "answer": _TEXT}, ["question", "answer"])

RETRY_NOTE = (
    "\n\nYour previous reply could not be used ({why}). Reply again with only the "
    "JSON array, no other text."
)

_FENCE = re.compile(r"```(?:json)?", re.IGNORECASE)
_DANGLING = re.compile(
    r"\b(?:th(?:is|e) (?:document|text|passage|article|excerpt|snippet|memo|post))\b"
    r"|\b(?:the author|mentioned above|as stated above|the above)\b",
    re.IGNORECASE,
)
_KINDS = {"explicit": EntryKind.EXPLICIT, "inferred": EntryKind.INFERRED}


@dataclass(frozen=True)
class Skip:
    """A step that produced nothing usable, and why."""

    step: str
    doc_ids: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class Progress:
    """How far an ``encode`` run has got (passed to the ``progress`` callback)."""

    done: int
    total: int
    step: str
    doc_ids: tuple[str, ...]
    ok: bool


@dataclass
class _Item:
    question: str
    answer: str
    kind: EntryKind
    sources: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, str]:
        return {"question": self.question, "answer": self.answer, "kind": self.kind.value}


def parse_items(text: str) -> list[dict[str, Any]] | None:
    """The objects of the JSON array in a model reply, or ``None`` when there is none.

    Think blocks, code fences and prose around the array are ignored. An array cut
    off mid-way (a reply that hit its token limit) keeps its complete objects. A
    reply that is a single object, or an object wrapping one array, counts too.
    ``[]`` is a valid, empty answer.
    """
    cleaned = _FENCE.sub("", strip_think(text)).strip()
    start = cleaned.find("[")
    end = cleaned.rfind("]")
    if start >= 0 and end > start:
        try:
            value = json.loads(cleaned[start : end + 1])
        except json.JSONDecodeError:
            pass
        else:
            if isinstance(value, list):
                return [v for v in value if isinstance(v, dict)]
    if start < 0:
        try:
            whole = json.loads(cleaned[cleaned.find("{") :]) if "{" in cleaned else None
        except json.JSONDecodeError:
            whole = None
        if isinstance(whole, dict):
            lists = [v for v in whole.values() if isinstance(v, list)]
            if len(lists) == 1:
                return [v for v in lists[0] if isinstance(v, dict)]
            return [whole]
    # Salvage complete objects one by one (truncated or slightly broken arrays).
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    pos = cleaned.find("{", max(start, 0))
    while pos >= 0:
        try:
            value, stop = decoder.raw_decode(cleaned, pos)
        except json.JSONDecodeError:
            pos = cleaned.find("{", pos + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        pos = cleaned.find("{", stop)
    return found or None


def _text(value: Any) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""


def _items(raw: list[dict[str, Any]], default: EntryKind) -> list[_Item]:
    out: list[_Item] = []
    for obj in raw:
        question, answer = _text(obj.get("question")), _text(obj.get("answer"))
        if not question or not answer:
            continue
        kind = _KINDS.get(_text(obj.get("kind")).lower(), default)
        out.append(_Item(question, answer, kind))
    return out


def _listing(items: Sequence[_Item]) -> str:
    return json.dumps([i.as_json() for i in items], ensure_ascii=False, indent=1)


def _clip(doc_id: str, text: str) -> str:
    if len(text) <= MAX_DOC_CHARS:
        return text
    log.info("reflection: document %s cut to its first %d characters", doc_id, MAX_DOC_CHARS)
    return text[:MAX_DOC_CHARS]


class ReflectionEncoder:
    """Documents -> reflection-QA entries, written by a model (see the module docstring).

    ``client`` is any object with ``complete(prompt, system="") -> str`` (the
    clients in ``darwin_memo.llm``). ``retries``: how many more times a step is
    asked after an unusable reply. ``progress``: called with a ``Progress`` after
    every model call. After ``encode``, ``skipped`` lists what was skipped and why.
    """

    def __init__(
        self,
        client: LLMClient,
        max_workers: int = 4,
        *,
        retries: int = 2,
        progress: Callable[[Progress], None] | None = None,
    ) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        self.client = client
        self.max_workers = max_workers
        self.retries = retries
        self.progress = progress
        self.skipped: list[Skip] = []
        self.calls = 0
        self._lock = threading.Lock()
        self._done = 0
        self._total = 0
        self._ok = 0
        self._first_error: LLMError | None = None

    def __repr__(self) -> str:
        return f"ReflectionEncoder(client={self.client!r})"

    # -- one step: ask, read, ask again -------------------------------------------

    def _ask(
        self,
        step: str,
        doc_ids: tuple[str, ...],
        prompt: str,
        default: EntryKind,
        *,
        allow_empty: bool = True,
        schema: dict[str, Any] = QA_SCHEMA,
    ) -> list[_Item] | None:
        """The usable items of one step, or ``None`` when it is skipped.

        ``allow_empty=False`` (consolidation, verification: steps given items to work
        on) reads an empty array as a failed reply, so a lazy ``[]`` cannot erase facts.
        """
        why = ""
        for attempt in range(self.retries + 1):
            asked = prompt if attempt == 0 else prompt + RETRY_NOTE.format(why=why)
            try:
                reply = self._complete(asked, schema)
            except LLMError as exc:
                with self._lock:
                    self._first_error = self._first_error or exc
                self._skip(step, doc_ids, f"model call failed: {exc}")
                return None
            with self._lock:
                self.calls += 1
            raw = parse_items(reply)
            if raw is None:
                why = "no JSON array found"
            else:
                items = _items(raw, default)
                if items or (not raw and allow_empty):
                    self._advance(step, doc_ids, True)
                    return items
                why = "an empty array" if not raw else "no object had both a question and an answer"
            log.info(
                "reflection: %s for %s: %s (attempt %d of %d)",
                step, ", ".join(doc_ids), why, attempt + 1, self.retries + 1,
            )  # fmt: skip
        self._skip(step, doc_ids, f"{why} after {self.retries + 1} attempts")
        return None

    def _complete(self, prompt: str, schema: dict[str, Any]) -> str:
        """One call; a client with ``complete_json`` is asked for schema-constrained JSON."""
        complete_json = getattr(self.client, "complete_json", None)
        if callable(complete_json):
            return str(complete_json(prompt, SYSTEM, schema))
        return self.client.complete(prompt, system=SYSTEM)

    def _skip(self, step: str, doc_ids: tuple[str, ...], reason: str) -> None:
        log.warning("reflection: skipped %s for %s: %s", step, ", ".join(doc_ids), reason)
        with self._lock:
            self.skipped.append(Skip(step, doc_ids, reason))
        self._advance(step, doc_ids, False)

    def _advance(self, step: str, doc_ids: tuple[str, ...], ok: bool) -> None:
        with self._lock:
            self._done += 1
            self._ok += ok
            report = Progress(self._done, self._total, step, doc_ids, ok)
        if self.progress is not None:
            self.progress(report)

    # -- the steps ------------------------------------------------------------------

    def _document(self, doc_id: str, text: str) -> tuple[list[_Item], list[_Item]]:
        ids = (doc_id,)
        shown = _clip(doc_id, text)
        facts = self._ask(
            "extract", ids, EXTRACT_PROMPT.format(doc_id=doc_id, text=shown), EntryKind.EXPLICIT
        )
        if facts:
            merged = self._ask(
                "consolidate",
                ids,
                CONSOLIDATE_PROMPT.format(items=_listing(facts)),
                EntryKind.EXPLICIT,
                allow_empty=False,
            )
            facts = merged or facts
            checked = self._ask(
                "verify",
                ids,
                VERIFY_PROMPT.format(doc_id=doc_id, text=shown, items=_listing(facts)),
                EntryKind.EXPLICIT,
                allow_empty=False,
            )
            facts = checked or facts
        else:
            # nothing to consolidate or verify: those two steps are done, empty
            if facts is not None:
                self._advance("consolidate", ids, True)
                self._advance("verify", ids, True)
            else:
                self._skip("consolidate", ids, "no facts were extracted")
                self._skip("verify", ids, "no facts were extracted")
            facts = []
        kept = []
        for item in facts:
            if _DANGLING.search(item.question):
                log.info("reflection: dropped %r (%s): not self-contained", item.question, doc_id)
                continue
            kept.append(item)
        entities = self._ask(
            "entities",
            ids,
            ENTITY_PROMPT.format(doc_id=doc_id, text=shown),
            EntryKind.ENTITY,
            schema=ENTITY_SCHEMA,
        )
        for item in entities or []:
            item.kind = EntryKind.ENTITY
        return kept, [e for e in entities or [] if not _DANGLING.search(e.question)]

    def _pair(self, a_id: str, a_text: str, b_id: str, b_text: str) -> list[_Item]:
        prompt = CROSS_DOC_PROMPT.format(
            a_id=a_id, a_text=_clip(a_id, a_text), b_id=b_id, b_text=_clip(b_id, b_text)
        )
        found = (
            self._ask(
                "cross_doc", (a_id, b_id), prompt, EntryKind.CROSS_DOC, schema=CROSS_DOC_SCHEMA
            )
            or []
        )
        for item in found:
            item.kind = EntryKind.CROSS_DOC
        return found

    # -- the run --------------------------------------------------------------------

    def encode(self, documents: Iterable[Any]) -> list[MemoryEntry]:
        """Entries for ``documents`` (objects with ``doc_id`` and ``text``)."""
        docs = [(str(d.doc_id), str(d.text)) for d in documents]
        seen: set[str] = set()
        for doc_id, _ in docs:
            if doc_id in seen:
                raise ValueError(f"two documents share the id {doc_id!r}")
            seen.add(doc_id)
        pairs = list(combinations(range(len(docs)), 2))
        with self._lock:
            self.skipped = []
            self.calls = 0
            self._done = self._ok = 0
            self._first_error = None
            self._total = 4 * len(docs) + len(pairs)
        if not docs:
            return []
        with ThreadPoolExecutor(max_workers=self.max_workers) as pool:
            per_doc = list(pool.map(lambda d: self._document(*d), docs))
            cross = list(pool.map(lambda p: self._pair(*docs[p[0]], *docs[p[1]]), pairs))
        if self._ok == 0 and self._first_error is not None:
            raise self._first_error
        out: dict[tuple[str, str], MemoryEntry] = {}

        def add(items: Sequence[_Item], sources: Sequence[str]) -> None:
            for item in items:
                key = (item.question, item.answer)
                entry = out.get(key)
                if entry is None:
                    out[key] = MemoryEntry(
                        question=item.question,
                        answer=item.answer,
                        kind=item.kind,
                        sources=list(sources),
                    )
                else:
                    entry.sources.extend(s for s in sources if s not in entry.sources)

        for (doc_id, _), (facts, entities) in zip(docs, per_doc, strict=True):
            add(facts, [doc_id])
            add(entities, [doc_id])
        for (i, j), found in zip(pairs, cross, strict=True):
            add(found, [docs[i][0], docs[j][0]])
        return list(out.values())
