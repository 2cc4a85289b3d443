"""Turn documents into memory entries, offline and by rule.

``LocalEncoder`` needs no model. It reads each document as a list of
sentences and produces three kinds of question/answer entries:

1. **Sentences.** The text (newlines read as spaces) is split on whitespace
   that follows ``.``, ``!`` or ``?``; sentences of fewer than four words are
   dropped.
2. **Explicit entries.** Each sentence becomes an EXPLICIT entry asking
   ``What is known about <its first six words>?`` (trailing punctuation
   stripped, lowercased) and answering with the whole sentence. When another
   document holds the very same sentence, the existing entry gains that
   document as a source instead of being duplicated.
3. **Entities.** Runs of consecutive capitalized words, less a leading
   ``The``/``A``/``An``, are entity candidates. A candidate counts if it has
   two or more words, or if it was seen at least once away from the start of a
   sentence (a capitalized first word alone is just grammar).
4. **Entity entries.** Each entity gets an ENTITY entry ``What do we know
   about <entity>?`` answered by the first two distinct sentences mentioning
   it, sourced from every document that mentions it.
5. **Cross-document entries.** An entity mentioned in two or more documents
   also gets a CROSS_DOC entry answered by the first three distinct sentences.

Output order is fixed: explicit entries in document and sentence order, then
entity entries, then cross-document entries, each in order of first mention.
The same documents always give the same questions, answers and sources.

``demo_corpus()`` returns the three packaged demo documents, one of which is
deliberately wrong (see the survival-loop demo).

``ReflectionEncoder(client)``, the model-written encoding (five reflection steps),
lives in ``darwin_memo.sim.reflection`` and is importable from here; it is loaded on
first use, so the offline path never imports the HTTP clients.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any

from ..records.entry import EntryKind, MemoryEntry

if TYPE_CHECKING:
    from .reflection import ReflectionEncoder

__all__ = ["Document", "LocalEncoder", "ReflectionEncoder", "demo_corpus"]


def __getattr__(name: str) -> Any:
    if name == "ReflectionEncoder":
        from .reflection import ReflectionEncoder

        return ReflectionEncoder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Whitespace that ends a sentence: it follows a full stop, ``!`` or ``?``.
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")
#: A run of one or more capitalized words (capital letter, then lowercase letters).
_CAPITALIZED_RUN = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*\b")
#: Articles that open a run without being part of the name.
_LEADING_ARTICLE = re.compile(r"^(?:The|An|A)\s+")

MIN_SENTENCE_WORDS = 4
QUESTION_WORDS = 6
ENTITY_SENTENCES = 2
CROSS_DOC_SENTENCES = 3


@dataclass(frozen=True)
class Document:
    """One text to encode, named by ``doc_id`` (used as the entries' source)."""

    doc_id: str
    text: str


def demo_corpus() -> list[Document]:
    """The packaged demo documents, sorted by file name; each id is the file stem."""
    folder = resources.files("darwin_memo").joinpath("data").joinpath("demo_corpus")
    files = sorted(
        (item for item in folder.iterdir() if item.is_file() and item.name.endswith(".txt")),
        key=lambda item: item.name,
    )
    return [
        Document(doc_id=item.name[: -len(".txt")], text=item.read_text(encoding="utf-8"))
        for item in files
    ]


def split_sentences(text: str) -> list[str]:
    """Sentences of at least four words, in order (newlines count as spaces)."""
    flat = text.replace("\r\n", " ").replace("\r", " ").replace("\n", " ")
    sentences = (part.strip() for part in _SENTENCE_BREAK.split(flat))
    return [s for s in sentences if len(s.split()) >= MIN_SENTENCE_WORDS]


def _strip_trailing_punctuation(text: str) -> str:
    end = len(text)
    while end > 0 and unicodedata.category(text[end - 1]).startswith("P"):
        end -= 1
    return text[:end]


def explicit_question(sentence: str) -> str:
    """``What is known about <first six words, trailing punctuation stripped, lowercased>?``"""
    head = " ".join(sentence.split()[:QUESTION_WORDS])
    return f"What is known about {_strip_trailing_punctuation(head).lower()}?"


def find_entities(sentence: str) -> list[tuple[str, bool]]:
    """Entity candidates in one sentence, each with whether it stood mid-sentence.

    A candidate is a run of capitalized words with a leading article removed;
    it stands mid-sentence when it does not begin at the sentence's first word.
    """
    found: list[tuple[str, bool]] = []
    for match in _CAPITALIZED_RUN.finditer(sentence):
        run = match.group(0)
        article = _LEADING_ARTICLE.match(run)
        start = match.start()
        if article is not None:
            run = run[article.end() :]
            start += article.end()
        name = " ".join(run.split())
        found.append((name, sentence[:start].strip() != ""))
    return found


@dataclass
class _Entity:
    name: str
    counts: bool = False
    docs: set[str] = field(default_factory=set)
    sentences: list[str] = field(default_factory=list)

    def mention(self, doc_id: str, sentence: str, mid_sentence: bool) -> None:
        self.docs.add(doc_id)
        self.counts = self.counts or mid_sentence or " " in self.name
        if sentence not in self.sentences:
            self.sentences.append(sentence)


class LocalEncoder:
    """Rule-based, offline encoder: sentences, entities and cross-document links."""

    def encode(self, documents: Iterable[Document]) -> list[MemoryEntry]:
        """Entries for ``documents`` (explicit, then entity, then cross-document)."""
        explicit: dict[tuple[str, str], MemoryEntry] = {}
        entities: dict[str, _Entity] = {}
        for doc in documents:
            for sentence in split_sentences(doc.text):
                key = (explicit_question(sentence), sentence)
                entry = explicit.get(key)
                if entry is None:
                    explicit[key] = MemoryEntry(
                        question=key[0],
                        answer=sentence,
                        kind=EntryKind.EXPLICIT,
                        sources=[doc.doc_id],
                    )
                elif doc.doc_id not in entry.sources:
                    entry.sources.append(doc.doc_id)
                for name, mid_sentence in find_entities(sentence):
                    if not name:
                        continue
                    entity = entities.setdefault(name, _Entity(name))
                    entity.mention(doc.doc_id, sentence, mid_sentence)

        counted = [entity for entity in entities.values() if entity.counts]
        entity_entries = [
            MemoryEntry(
                question=f"What do we know about {entity.name}?",
                answer=" ".join(entity.sentences[:ENTITY_SENTENCES]),
                kind=EntryKind.ENTITY,
                sources=sorted(entity.docs),
            )
            for entity in counted
        ]
        cross_doc_entries = [
            MemoryEntry(
                question=f"Combining all sources, what is the full picture on {entity.name}?",
                answer=" ".join(entity.sentences[:CROSS_DOC_SENTENCES]),
                kind=EntryKind.CROSS_DOC,
                sources=sorted(entity.docs),
            )
            for entity in counted
            if len(entity.docs) >= 2
        ]
        return [*explicit.values(), *entity_entries, *cross_doc_entries]
