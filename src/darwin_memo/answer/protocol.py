"""The query protocol: an answer to act on, and the provenance credit will follow.

In local mode (no model) the best-ranked entry that may decide answers, the
other hits support it, and the consult text carries age lines and conflict
groups. Probationary imports never decide: if no hit may decide, memory is
silent. When nothing clears the relevance floor memory is silent too: better to
say nothing than to guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..economy.merge import DEFAULT_MERGE_THRESHOLD
from ..records.entry import EntryKind
from ..retrieval.temporal import render_consult

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..backends.interface import Population

__all__ = ["ProtocolAnswer", "QueryProtocol"]


@dataclass
class ProtocolAnswer:
    """An answer with its provenance. ``text == ""`` means memory is silent.

    ``attribution`` says how the provenance was found, so a host (and the ledger's
    journal) can tell credit a model pointed at from credit spread for want of it:

    * ``"local"``: no model; the best-ranked entry that may decide (the default);
    * ``"cited"``: the model's SOURCES line named the snippets it used;
    * ``"none"``: the model's SOURCES line said it used none (no provenance);
    * ``"fallback"``: no SOURCES line could be read, so every consulted entry shares;
    * ``"unparsed"``: no SOURCES line could be read and the protocol was built with
      ``refuse_unparseable=True``: the answer is refused rather than spread.
    """

    text: str
    deciding_entry: str | None = None
    supporting_entries: list[str] = field(default_factory=list)
    annotated_text: str = ""
    refused: bool = False
    attribution: str = "local"

    @property
    def provenance(self) -> list[str]:
        """Supporters then the decider: every id an outcome will credit."""
        ids = list(self.supporting_entries)
        if self.deciding_entry is not None:
            ids.append(self.deciding_entry)
        return ids

    @property
    def silent(self) -> bool:
        return not self.text or (self.deciding_entry is None and not self.supporting_entries)


class QueryProtocol:
    """Answers queries from a store, with provenance."""

    def __init__(
        self,
        store: Population,
        client: object | None = None,
        conflict_threshold: float = DEFAULT_MERGE_THRESHOLD,
        refuse_unparseable: bool = False,
    ) -> None:
        self.store = store
        self.client = client
        self.conflict_threshold = conflict_threshold
        self.refuse_unparseable = refuse_unparseable

    def answer(
        self,
        query: str,
        k: int = 3,
        *,
        half_life: float | None = None,
        now_cycle: int | None = None,
        kind: EntryKind | str | None = None,
        source: str | None = None,
    ) -> ProtocolAnswer:
        if self.client is not None:
            from .model_protocol import answer_with_model

            return answer_with_model(
                self, query, half_life=half_life, now_cycle=now_cycle, kind=kind, source=source
            )
        hits = self.store.retrieve(
            query, k, half_life=half_life, now_cycle=now_cycle, kind=kind, source=source
        )
        entries = [entry for entry, _ in hits]
        decider = next((e for e in entries if e.may_decide), None)
        if decider is None:
            return ProtocolAnswer(text="")
        ordered = [decider] + [e for e in entries if e.id != decider.id]
        return ProtocolAnswer(
            text=decider.answer,
            deciding_entry=decider.id,
            supporting_entries=[e.id for e in ordered[1:]],
            annotated_text=render_consult(ordered, self.store.similarity, self.conflict_threshold),
        )
