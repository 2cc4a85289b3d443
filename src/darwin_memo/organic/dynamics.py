"""Phase 3 of the organic layer: spreading activation and Hebbian links.

A recall of an entry activates it fully and spreads one hop: each of its effective
neighbours is raised to ``spread * relatedness``, and every link the recall travels is
strengthened. Learned strength fades with ``decay``. ``OrganicMemory`` is the facade
over the four phases; it reads the store and never writes it, so phases 1-3 leave
every balance as it was, and phase 4 (``upkeep_scale``) changes upkeep only when the
caller passes its result to ``MemoryStore.charge_upkeep(scale=...)``.

Relatedness as ``OrganicMemory.related`` sees it, for a candidate ``o`` of entry ``e``::

    clamp01(cosine(e, o) + learned(e, o) + 0.2 * importance(o))

over the cosine top ``2k`` plus every entry ``e`` has a learned link to (a learned
neighbour outside the cosine top ``2k`` counts cosine 0), where importance leaves
centrality out (``EarnedImportance.scores`` without it). Ties go by the graph's
insertion order, never by id.
"""

from __future__ import annotations

import math
import statistics

from ..records.entry import MemoryEntry
from .activation import BUMP_TO, DECAY_FACTOR, ActivationState, surface
from .associative import AssociativeGraph, Backend, Embedder, build_graph
from .importance import EarnedImportance, clamp01

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..backends.interface import Population
    from ..ledger import Ledger

__all__ = [
    "HEBB_DECAY",
    "HEBB_INCREMENT",
    "IMPORTANCE_BIAS",
    "SPREAD_FACTOR",
    "HebbianWeights",
    "OrganicMemory",
]

#: ``HebbianWeights.strengthen`` adds this per traversal (links cap at 1.0).
HEBB_INCREMENT = 0.25
#: ``HebbianWeights.decay`` multiplies every link by this.
HEBB_DECAY = 0.9
#: How much an entry's importance lifts it in ``OrganicMemory.related``.
IMPORTANCE_BIAS = 0.2
#: A recall raises each neighbour to this fraction of its relatedness.
SPREAD_FACTOR = 0.5
#: Links that decay below this are forgotten.
PRUNE_BELOW = 1e-3
#: Neighbours that ``centrality`` averages over.
CENTRALITY_K = 5


def _checked(value: float, name: str, upper: float | None) -> float:
    number = float(value)
    ok = math.isfinite(number) and number >= 0.0 and (upper is None or number <= upper)
    if not ok:
        bound = f"in [0, {upper:g}]" if upper is not None else ">= 0"
        raise ValueError(f"{name} must be a number {bound}, got {value!r}")
    return number


def _same(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    """Whether two cache keys match: the same objects, and equal values."""
    return len(a) == len(b) and all(x is y or x == y for x, y in zip(a, b, strict=True))


class HebbianWeights:
    """Symmetric learned link strengths in [0, 1] ("fire together, wire together")."""

    def __init__(self) -> None:
        # entry id -> {neighbour id -> weight}; every link is stored in both directions.
        self._links: dict[str, dict[str, float]] = {}

    def strengthen(self, a: str, b: str, by: float = HEBB_INCREMENT) -> None:
        """Add ``by`` to the link a-b (capped at 1.0); a link to itself is ignored."""
        amount = _checked(by, "by", None)
        if a == b:
            return
        weight = min(1.0, self.weight(a, b) + amount)
        self._links.setdefault(a, {})[b] = weight
        self._links.setdefault(b, {})[a] = weight

    def weight(self, a: str, b: str) -> float:
        """The learned strength of a-b (0.0 when never strengthened)."""
        return self._links.get(a, {}).get(b, 0.0)

    def neighbors(self, entry_id: str) -> dict[str, float]:
        """Every entry linked to ``entry_id``, with the link's strength (a copy)."""
        return dict(self._links.get(entry_id, {}))

    def decay(self, factor: float = HEBB_DECAY) -> None:
        """Scale every link by ``factor``; links that fall below 1e-3 are dropped."""
        f = _checked(factor, "factor", 1.0)
        kept: dict[str, dict[str, float]] = {}
        for a, row in self._links.items():
            faded = {b: w * f for b, w in row.items() if w * f >= PRUNE_BELOW}
            if faded:
                kept[a] = faded
        self._links = kept

    def forget(self, entry_id: str) -> None:
        """Drop every link of ``entry_id`` (its entry died)."""
        for other in self._links.pop(entry_id, {}):
            row = self._links.get(other)
            if row is not None:
                row.pop(entry_id, None)
                if not row:
                    del self._links[other]

    def links(self) -> int:
        """How many links are stored (each a-b counted once)."""
        return sum(len(row) for row in self._links.values()) // 2


class OrganicMemory:
    """The organic layer over one store: graph, activation, links and importance.

    Parts: ``graph`` (``AssociativeGraph``), ``state`` (``ActivationState``; also
    ``activation``), ``hebbian`` (``HebbianWeights``), ``earned``
    (``EarnedImportance``). ``importance(id)`` is a method, as published. State lives
    in this object only: a new process starts from a fresh graph and no history.
    Every read path calls ``sync()`` first, so entries that died since are gone and
    entries added since are linked.
    """

    def __init__(
        self, store: Population, embedder: Embedder | None = None, backend: Backend | None = None
    ) -> None:
        self.store = store
        self.graph: AssociativeGraph = build_graph(store, embedder, backend)
        self.state = ActivationState()
        self.hebbian = HebbianWeights()
        self.earned = EarnedImportance()
        #: The durable ledger this layer reads and writes through (``open``), or None.
        self.ledger: Ledger | None = None
        # The store version whose rows ``_load`` last read (None: not read yet).
        self._rows_version: object | None = None
        # The store ``sync`` last followed and its mark then (``_mark``): a read of a
        # store that has not moved since costs no pass over the population.
        self._synced_store: Population | None = store
        self._synced_mark: object | None = self._mark()
        # The importance peaks (``EarnedImportance.peaks``) and what they were computed
        # from: (store, mark, recall counts, their change count), kept while none moves.
        self._peaks: tuple[int, float] | None = None
        self._peaks_of: tuple[object, ...] | None = None

    @classmethod
    def open(
        cls, ledger: Ledger, embedder: Embedder | None = None, backend: Backend | None = None
    ) -> OrganicMemory:
        """The organic layer of a durable ledger's store (SQLite, PostgreSQL or JSON), persisted.

        Links, activations and recall counts live in the store: every read loads them
        as the store holds them now, ``recall`` and ``decay`` are ledger operations (one
        transaction and one event each; the backend applies them as increments, so
        recalls in other processes at the same moment all count), each ``tick`` decays
        them, and deaths and merges clean them up (``backends.organic_rows``). The graph
        itself (embeddings) is rebuilt in each process, as it is derived.
        """
        if ledger.backend is None or not hasattr(ledger.backend, "organic_rows"):
            raise ValueError(
                "OrganicMemory.open needs a ledger opened on a store (Ledger.open(path)); "
                "for an in-memory store use OrganicMemory(store)"
            )
        ledger.backend.organic_rows(ledger)  # refuses a backend that keeps none
        ledger.refresh()
        om = cls(ledger.store, embedder, backend)
        om.ledger = ledger
        om._synced_mark = om._mark()  # the graph was built from the store as of this mark
        om._load()
        return om

    def _load(self, force: bool = False) -> None:
        """Replace the learned state by the store's (a persisted layer; call in a read).

        The rows are read again only when the store's version moved since the last
        read (``organic_rows.rows_version``), so a read of an unchanged store costs
        no O(rows) reload; ``force`` reads them regardless.
        """
        from ..backends.organic_rows import rows_version

        ledger = self.ledger
        assert ledger is not None and ledger.backend is not None
        self.store = ledger.store  # a reload may have given the ledger a new store object
        version = rows_version(ledger.backend)
        if not force and version is not None and version == self._rows_version:
            return
        self._rows_version = version
        links, levels = ledger.backend.organic_rows(ledger)  # type: ignore[attr-defined]
        self.hebbian = HebbianWeights()
        for (a, b), weight in links.items():
            self.hebbian.strengthen(a, b, weight)
        self.state = ActivationState()
        self.earned = EarnedImportance()
        for entry_id, (recalls, level) in levels.items():
            if level > 0:
                self.state.bump(entry_id, min(1.0, level))
            self.earned.set_recalls(entry_id, recalls)

    @property
    def activation(self) -> ActivationState:
        """The activation state (the same object as ``state``)."""
        return self.state

    def sync(self) -> None:
        """Align the graph with the store's population; forget what died.

        A persisted layer (``open``) first sees what other processes wrote. The cost
        follows what changed since the last ``sync``, not the store's size: nothing
        when the store has not moved, the entries that joined or left when the store
        can list them (``MemoryStore.population_since``; an SQL store's rows written
        since, ``organic_rows.entries_written_since``), and one pass over the
        population only when it cannot (a JSON store that moved, a store followed
        through a backend without ``open``, or more changes than the store remembers).
        """
        if self.ledger is not None and not self.ledger._in_op():
            self.ledger.refresh()
            self._load()
        store = self.store
        mark = self._mark()
        if store is self._synced_store and mark is not None and mark == self._synced_mark:
            return
        changed = self._changed_since(store, self._synced_mark, mark)
        if changed is None:
            self._walk()
        else:
            self._follow(changed)
        self._synced_store, self._synced_mark = store, mark

    def _mark(self) -> object | None:
        """A value that moves whenever the store may have changed (None: no such value).

        A persisted layer's store: the backend's version (``organic_rows.rows_version``).
        An in-memory store: its ``version``. A store kept by a backend but followed
        without ``open`` has none (other processes change it unseen).
        """
        if self.ledger is not None:
            from ..backends.organic_rows import rows_version

            return rows_version(self.ledger.backend)
        if getattr(self.store, "backend", None) is not None:
            return None
        version = getattr(self.store, "version", None)
        return version if isinstance(version, int) else None

    def _changed_since(
        self, store: Population, since: object | None, mark: object | None
    ) -> list[str] | None:
        """Ids that may have joined or left ``store`` since ``since``; None: walk it."""
        if store is not self._synced_store or since is None or mark is None:
            return None
        if self.ledger is not None:
            from ..backends.organic_rows import entries_written_since

            return entries_written_since(self.ledger.backend, since)
        assert isinstance(since, int)
        population_since = getattr(store, "population_since", None)  # ``MemoryStore``'s
        return population_since(since) if population_since is not None else None

    def _follow(self, changed: list[str]) -> None:
        """Apply joins and departures: each id is looked up in the store once."""
        graph, store = self.graph, self.store
        born: list[MemoryEntry] = []
        seen: set[str] = set()
        for entry_id in changed:
            if entry_id in seen:
                continue
            seen.add(entry_id)
            entry = store.get(entry_id)
            if entry is None:
                if entry_id in graph:
                    self._forget(entry_id)
            elif entry_id not in graph:
                born.append(entry)
        if born:
            graph.add_many(born)

    def _walk(self) -> None:
        """Align with the whole population (one pass over it)."""
        living = self.store.alive()
        graph = self.graph
        born = [e for e in living if e.id not in graph]
        if len(graph) + len(born) != len(living):  # some entry in the graph died
            alive_ids = {e.id for e in living}
            for gone in graph.ids - alive_ids:
                self._forget(gone)
        if born:
            graph.add_many(born)

    def _forget(self, entry_id: str) -> None:
        """An entry died: it leaves the graph with its activation, links and recalls."""
        self.graph.remove(entry_id)
        self.state.forget(entry_id)
        self.hebbian.forget(entry_id)
        self.earned.forget(entry_id)

    def _importance_peaks(self) -> tuple[int, float]:
        """``EarnedImportance.peaks`` of the store, recomputed only when something moved.

        The credit peak is a pass over the population: it is kept while the store (its
        mark) stays as it was. The recall peak is a pass over the recalled entries: it
        is kept while the recall counts stay as they were too. A store with no mark
        gets both computed at every read.
        """
        mark = self._synced_mark
        store_key = (self.store, mark)
        recall_key = (self.earned, self.earned.changes)
        peaks, cached = self._peaks, self._peaks_of
        if mark is None or peaks is None or cached is None or not _same(cached[:2], store_key):
            peaks = self.earned.peaks(self.store)
        elif not _same(cached[2:], recall_key):
            peaks = (self.earned.peak_recalls(self.store), peaks[1])
        self._peaks, self._peaks_of = peaks, store_key + recall_key
        return peaks

    def related(self, entry_id: str, k: int = 5) -> list[tuple[str, float]]:
        """Up to ``k`` entries by effective relatedness (the module docstring's formula)."""
        self.sync()
        return self._related(entry_id, k)

    def _related(self, entry_id: str, k: int) -> list[tuple[str, float]]:
        graph = self.graph
        if entry_id not in graph or k <= 0:
            return []
        cosines = dict(graph.related(entry_id, 2 * k))
        # A learned neighbour outside the cosine top 2k counts its link alone.
        for other in self.hebbian.neighbors(entry_id):
            if other not in cosines and other in graph:
                cosines[other] = 0.0
        importance = self.earned.scores(self.store, ids=cosines, peaks=self._importance_peaks())
        scored = [
            (
                other,
                clamp01(
                    cos
                    + self.hebbian.weight(entry_id, other)
                    + IMPORTANCE_BIAS * importance.get(other, 0.0)
                ),
            )
            for other, cos in cosines.items()
        ]
        scored.sort(key=lambda pair: (-pair[1], graph.ordinal(pair[0])))
        return scored[:k]

    def centrality(self, k: int = CENTRALITY_K) -> dict[str, float]:
        """Each entry's mean ``min(1, cosine + learned)`` over its cosine top ``k``."""
        self.sync()
        return {entry_id: self._centrality_of(entry_id, k) for entry_id in self._graph_order()}

    def _graph_order(self) -> list[str]:
        graph = self.graph
        return sorted(graph.ids, key=graph.ordinal)

    def _centrality_of(self, entry_id: str, k: int) -> float:
        neighbours = self.graph.related(entry_id, k)
        if not neighbours:
            return 0.0
        return statistics.fmean(
            min(1.0, cos + self.hebbian.weight(entry_id, other)) for other, cos in neighbours
        )

    def importance(self, entry_id: str, centrality: dict[str, float] | None = None) -> float:
        """The entry's earned importance in [0, 1] (0.0 for an entry not alive).

        Without ``centrality`` the entry's own centrality is computed (importance is
        not normalized by a peak centrality, so the others' are not needed).
        """
        self.sync()
        if entry_id not in self.graph:
            return 0.0
        if centrality is None:
            centrality = {entry_id: self._centrality_of(entry_id, CENTRALITY_K)}
        scores = self.earned.scores(
            self.store, centrality, ids=[entry_id], peaks=self._importance_peaks()
        )
        return scores.get(entry_id, 0.0)

    def upkeep_scale(self) -> dict[str, float]:
        """Per-entry upkeep multipliers, for ``store.charge_upkeep(scale=...)``.

        ``max(0.25, 1 - 0.5 * importance)``. Opt-in: nothing in the package passes
        this to ``charge_upkeep``; read docs/organic.md before you do.
        """
        return self.earned.upkeep_scale(self.store, self.centrality())

    def recall(self, entry_id: str, k: int = 5, spread: float = SPREAD_FACTOR) -> None:
        """Recall ``entry_id``: count it, activate it, spread one hop, strengthen links.

        Only ``entry_id``'s recall is counted. Each of its ``k`` effective neighbours
        is raised to ``spread * relatedness`` and its link to ``entry_id`` strengthened
        by 0.25. An entry that is not alive is not recalled (nothing changes).
        """
        factor = _checked(spread, "spread", 1.0)
        if self.ledger is not None:
            self._recall_persisted(entry_id, k, factor)
            return
        self.sync()
        if entry_id not in self.graph:
            return
        self.earned.record_recall(entry_id)
        self.state.bump(entry_id, BUMP_TO)
        for other, relatedness in self._related(entry_id, k):
            self.state.bump(other, factor * relatedness)
            self.hebbian.strengthen(entry_id, other)

    def _recall_persisted(self, entry_id: str, k: int, factor: float) -> None:
        """``recall`` as one ledger operation: computed from the store's state inside
        the write, recorded as a ``recall`` event that the backend applies."""
        ledger = self.ledger
        assert ledger is not None
        with ledger.operation() as record:
            self._load()  # as the store holds it now, under the write lock
            self.sync()
            if entry_id not in self.graph:
                return
            neighbours = self._related(entry_id, k)
            record(
                "recall",
                entry=entry_id,
                level=BUMP_TO,
                activated=[[other, factor * relatedness] for other, relatedness in neighbours],
                strengthened=[[other, HEBB_INCREMENT] for other, _ in neighbours],
            )
        self._load()

    def decay(self) -> None:
        """One step of forgetting: activation x0.5, learned links x0.9.

        A persisted layer decays in the store, as one ledger operation (each ``tick``
        also decays it).
        """
        if self.ledger is not None:
            ledger = self.ledger
            with ledger.operation() as record:
                record("organic_decay")
            self._load()
            return
        self.state.decay(DECAY_FACTOR)
        self.hebbian.decay(HEBB_DECAY)

    def surface(self, entry: MemoryEntry) -> str:
        """``surface(entry, self.state)``: gist, or full detail when active."""
        return surface(entry, self.state)
