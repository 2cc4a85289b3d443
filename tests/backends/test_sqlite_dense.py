"""A SQLite store's dense search keyed by rowid (``backends/sqldense.py``, issue 36 item 5).

The rowid path must return what the published scan (``SqlSearch._retrieve_scan``:
every living entry read, ranked by the retriever's ``rank``) returns, to the bit,
ties and their order included, while the store changes under it: entries added,
buried and merged by this handle, by another handle and by another process, and
operations rolled back. It reads whole only the entries it returns.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from darwin_memo.ledger import Ledger
from darwin_memo.records.entry import MemoryEntry
from darwin_memo.retrieval.embedding import HybridRetriever
from darwin_memo.retrieval.lexical import EmbeddingRetriever, HashingEmbedder

pytest.importorskip("numpy")

TESTS = Path(__file__).resolve().parent
WORDS = "cache disk server restart nginx memory leak python test flaky deploy token".split()


class TaggedHashing(HashingEmbedder):
    """A hashing embedder that names its model, so the store keeps its vectors."""

    model_id = "dense-test-hashing-32"

    def __init__(self) -> None:
        super().__init__(dims=32)
        self.calls = 0

    def __call__(self, text: str) -> list[float]:
        self.calls += 1
        return super().__call__(text)


def make_retriever(kind: str, alpha: float = 0.7) -> HybridRetriever | EmbeddingRetriever:
    if kind == "semantic":
        return EmbeddingRetriever(TaggedHashing(), min_similarity=0.2)
    return HybridRetriever(TaggedHashing(), alpha=alpha, min_similarity=0.2)


def text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 5)))


Hits = list[tuple[str, float]]


def searched(ledger: Ledger, query: str, k: int) -> Hits:
    """The store's search, its view first brought up to date (as a ``decide`` does)."""
    ledger.refresh()
    return [(e.id, s) for e, s in ledger.store.retrieve(query, k)]


def scanned(path: Path, make: Callable[[], object], query: str, k: int) -> Hits:
    """The published scan's answer, from a handle opened now."""
    with Ledger.open(path, retriever=make()) as fresh:  # type: ignore[arg-type]
        return [(e.id, s) for e, s in fresh.store._retrieve_scan(query, k)]


def mutate(ledger: Ledger, rng: random.Random) -> None:
    """A few changes of every kind: adds (duplicates among them: exact ties), burials,
    a merge, a settled decide (balances that differ)."""
    living = ledger.store.alive()
    for _ in range(rng.randint(0, 4)):
        # some questions asked again: entries that tie exactly
        question = text(rng) if rng.random() < 0.7 or not living else rng.choice(living).question
        ledger.add(question, f"answer {rng.randint(0, 9)}")
    for ticket in ledger.pending():
        ledger.abandon(ticket.id)
    living = [e.id for e in ledger.store.alive()]
    for victim in rng.sample(living, min(len(living), rng.randint(0, 2))):
        ledger.forget(victim)
    living = [e.id for e in ledger.store.alive()]
    if len(living) >= 4 and rng.random() < 0.5:
        members = rng.sample(living, 2)
        with ledger.operation():
            ledger.store.merge_into(MemoryEntry(question=text(rng), answer="merged"), members)
    ticket = ledger.decide(text(rng))
    if ticket.deciding_entry:
        ledger.settle(ticket.id, rng.choice([-0.5, 0.5, 1.0]))


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 10_000),
    kind=st.sampled_from(["hybrid", "semantic"]),
    alpha=st.sampled_from([0.0, 0.7, 1.0]),
    k=st.integers(1, 8),
)
def test_the_rowid_path_ranks_as_the_scan_while_the_store_changes(
    seed: int, kind: str, alpha: float, k: int
) -> None:
    rng = random.Random(seed)

    def make() -> HybridRetriever | EmbeddingRetriever:
        return make_retriever(kind, alpha)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.db"
        with Ledger.open(path, retriever=make()) as ledger:
            for i in range(rng.randint(5, 40)):
                ledger.add(text(rng), f"answer {i % 3}")
            other = Ledger.open(path, retriever=make())  # another writer of the file
            with other:
                for _ in range(4):
                    mutate(ledger if rng.random() < 0.5 else other, rng)
                    for _ in range(3):
                        query = text(rng)
                        found = searched(ledger, query, k)
                        assert found == scanned(path, make, query, k)
                        assert searched(other, query, k) == found
            assert ledger.store._dense_rows is not None  # (the rowid path was taken)


def test_another_process_changes_the_store_between_searches(tmp_path: Path) -> None:
    """A long-lived handle (a ``serve``) searches while another process adds, buries and
    merges: each search after a change reads only what changed and ranks as the scan."""
    path = tmp_path / "s.db"
    rng = random.Random(7)
    writer = f"""
import random, sys
sys.path.insert(0, {str(TESTS)!r})
from pathlib import Path
from test_sqlite_dense import make_retriever, mutate
from darwin_memo.ledger import Ledger
rng = random.Random(11)
with Ledger.open(Path({str(path)!r}), retriever=make_retriever("hybrid")) as ledger:
    for line in sys.stdin:
        mutate(ledger, rng)
        print("done", flush=True)
"""
    with Ledger.open(path, retriever=make_retriever("hybrid")) as ledger:
        for i in range(30):
            ledger.add(text(rng), f"answer {i % 4}")
        with subprocess.Popen(
            [sys.executable, "-c", writer],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        ) as proc:
            assert proc.stdin is not None and proc.stdout is not None
            for _ in range(6):
                proc.stdin.write("go\n")
                proc.stdin.flush()
                assert proc.stdout.readline().strip() == "done"
                for _ in range(4):
                    query, k = text(rng), rng.randint(1, 6)
                    found = searched(ledger, query, k)
                    assert found == scanned(path, lambda: make_retriever("hybrid"), query, k)
            proc.stdin.close()
            proc.wait(timeout=60)
        assert proc.returncode == 0


def test_a_rolled_back_operation_leaves_the_search_as_the_store(tmp_path: Path) -> None:
    """Rows an operation wrote are read again after it: a rollback undoes them here too."""
    path = tmp_path / "s.db"
    with Ledger.open(path, retriever=make_retriever("hybrid")) as ledger:
        kept = ledger.add("restart the nginx server", "systemctl restart nginx")
        ledger.add("disk cache leak", "drop caches")
        query = "restart nginx server"
        assert searched(ledger, query, 3)[0][0] == kept.id

        class Boom(Exception):
            pass

        with pytest.raises(Boom), ledger.operation():
            added = ledger.store.add(
                MemoryEntry(question="restart nginx server now", answer="reload")
            )
            ledger.store.bury(kept.id)
            inside = searched(ledger, query, 3)
            assert inside[0][0] == added.id and kept.id not in dict(inside)
            raise Boom
        after = searched(ledger, query, 3)
        assert after[0][0] == kept.id and added.id not in dict(after)
        assert after == scanned(path, lambda: make_retriever("hybrid"), query, 3)


def test_rows_written_in_a_rolled_back_transaction_are_read_again(tmp_path: Path) -> None:
    """Below the ledger (which reads a failed operation's store anew): a handle that
    searched inside a transaction that rolled back reads those rows again."""
    path = tmp_path / "s.db"
    with Ledger.open(path, retriever=make_retriever("hybrid")) as ledger:
        kept = ledger.add("restart the nginx server", "systemctl restart nginx")
        ledger.add("disk cache leak", "drop caches")
        query = "restart nginx server"
        ledger.decide(query)  # the vectors stored
        store, backend = ledger.store, ledger.backend
        assert backend is not None
        assert searched(ledger, query, 3)[0][0] == kept.id
        store.conn.execute("BEGIN IMMEDIATE")
        backend.txn_version = backend._seen + 1  # what a write transaction does
        added = store.add(MemoryEntry(question="restart nginx server now", answer="reload"))
        store.bury(kept.id)
        inside = [(e.id, s) for e, s in store.retrieve(query, 3)]
        assert inside[0][0] == added.id and kept.id not in dict(inside)
        store.conn.execute("ROLLBACK")
        store.forget_cached()
        after = [(e.id, s) for e, s in store.retrieve(query, 3)]
        assert after[0][0] == kept.id and added.id not in dict(after)
        assert after == scanned(path, lambda: make_retriever("hybrid"), query, 3)
        held = store._dense_rows
        assert held is not None and sorted(held.ids[s] or "" for s in held.slot_of.values()) == (
            sorted(e.id for e in store.alive())
        )


def test_an_entry_added_outside_a_ledger_operation_is_found(tmp_path: Path) -> None:
    """A library caller's ``store.add`` writes no new version: the living count says."""
    path = tmp_path / "s.db"
    with Ledger.open(path, retriever=make_retriever("hybrid")) as ledger:
        ledger.add("disk cache leak", "drop caches")
        assert searched(ledger, "restart nginx", 3) == []
        added = ledger.store.add(MemoryEntry(question="restart nginx", answer="reload"))
        found = [(e.id, s) for e, s in ledger.store.retrieve("restart nginx", 3)]
        assert found[0][0] == added.id
        assert found == [(e.id, s) for e, s in ledger.store._retrieve_scan("restart nginx", 3)]


@pytest.mark.parametrize("kind", ["hybrid", "semantic"])
def test_an_add_and_a_burial_outside_a_ledger_operation_are_both_seen(
    tmp_path: Path, kind: str
) -> None:
    """Together they leave the living count as it was: the handle reads again the rows
    it wrote itself, whatever their version says."""
    path = tmp_path / "s.db"
    with Ledger.open(path, retriever=make_retriever(kind)) as ledger:
        victim = ledger.add("disk cache leak", "drop caches")
        ledger.add("python test flaky", "pin the seed")
        assert searched(ledger, "restart nginx", 3) == []
        added = ledger.store.add(MemoryEntry(question="restart nginx", answer="reload"))
        ledger.store.bury(victim.id)
        found = [(e.id, s) for e, s in ledger.store.retrieve("restart nginx", 3)]
        assert [entry_id for entry_id, _ in found] == [added.id]
        assert found == [(e.id, s) for e, s in ledger.store._retrieve_scan("restart nginx", 3)]
        assert victim.id not in [entry_id for entry_id, _ in searched(ledger, "disk cache leak", 3)]


def test_a_search_reads_whole_only_the_entries_it_returns(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    rng = random.Random(3)
    with Ledger.open(path, retriever=make_retriever("hybrid")) as ledger:
        ledger.import_entries(
            [MemoryEntry(question=f"{text(rng)} {i}", answer=str(i)) for i in range(300)],
            source="test",
            probation=0,
        )
        ledger.decide("restart the server")  # embeds every entry, stores the vectors
    embedder = TaggedHashing()
    with Ledger.open(path, retriever=HybridRetriever(embedder, min_similarity=0.2)) as ledger:
        found = ledger.store.retrieve("nginx memory leak", 3)
        assert len(found) == 3
        assert embedder.calls == 1  # the query; every entry's vector read from the store
        assert len(ledger.store._population) <= 10  # not the 300 living entries
        assert [(e.id, s) for e, s in found] == scanned(
            path, lambda: make_retriever("hybrid"), "nginx memory leak", 3
        )


def test_the_published_scan_ranks_a_reordered_cache_in_rowid_order(tmp_path: Path) -> None:
    """Equal scores and balances rank in insertion order, however this handle came to
    hold the entries (one read before the others, one dropped and read again)."""
    path = tmp_path / "s.db"
    with Ledger.open(path, retriever=make_retriever("hybrid")) as ledger:
        same = [ledger.add("restart the nginx server", "same answer") for _ in range(4)]
        ledger.store.forget_cached()
        ledger.store.get(same[2].id)  # held first
        found = [(e.id, s) for e, s in ledger.store._retrieve_scan("restart nginx", 4)]
        assert [i for i, _ in found] == [e.id for e in same]
        assert len({s for _, s in found}) == 1


def test_the_shipped_retrievers_other_options_still_scan(tmp_path: Path) -> None:
    """``context``, a recency half-life and filters rank every entry: the scan."""
    path = tmp_path / "s.db"
    retriever = HybridRetriever(TaggedHashing(), min_similarity=0.2, context=0.5)
    with Ledger.open(path, retriever=retriever) as ledger:
        for word in WORDS:
            ledger.add(f"restart the {word} server", word)
        ledger.store.retrieve("restart nginx", 3)
        assert ledger.store._dense_rows is None
        ledger.store.retrieve("restart nginx", 3, half_life=5.0)
        assert ledger.store._dense_rows is None


def test_dense_and_scan_agree_on_a_json_of_results(tmp_path: Path) -> None:
    """The figures a host prints (``decide``'s consult) are those of the scan."""
    path = tmp_path / "s.db"
    rng = random.Random(5)
    with Ledger.open(path, retriever=make_retriever("hybrid")) as ledger:
        for i in range(40):
            ledger.add(text(rng), f"answer {i}")
        ticket = ledger.decide("restart the nginx server")
        dense = json.dumps([ticket.deciding_entry, ticket.supporting_entries, ticket.answer])
    with Ledger.open(path, retriever=make_retriever("hybrid")) as ledger:
        ledger.store._retrieve_dense = lambda query, k: None  # type: ignore[method-assign]
        ticket = ledger.decide("restart the nginx server")
        scan = json.dumps([ticket.deciding_entry, ticket.supporting_entries, ticket.answer])
    assert dense == scan
