"""The organic layer persisted in a store: ``OrganicMemory.open(ledger)``.

Links, activations and recall counts live in the store (SQLite tables of schema 17, a
JSON store's ``"organic"`` block), change in the transaction of the recall that causes
them, decay at each tick, and are cleaned up when entries die or merge.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from conftest import pg_url
from darwin_memo.ledger import Ledger
from darwin_memo.organic import OrganicMemory

LESSONS = [
    ("Are cache files safe to delete?", "Yes, cache/ is disposable."),
    ("Can I remove the cache directory?", "Yes, it is rebuilt on demand."),
    ("Who owns the payroll database?", "The finance team."),
    ("How do I rotate the signing key?", "Run rotate-key, then redeploy."),
]


def _store(path: Path) -> list[str]:
    with Ledger.open(path) as ledger:
        return [ledger.add(q, a).id for q, a in LESSONS]


@pytest.fixture(params=["s.db", "s.json", "postgres"])
def store_path(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A store: an SQLite file, a JSON file, or a fresh PostgreSQL store's URL."""
    if request.param == "postgres":
        return pg_url(request.getfixturevalue("pg_cluster"))
    return tmp_path / request.param


def _rows(store: Any) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """The store's organic rows as its backend reads them: links, recall counts."""
    with Ledger.open(store, create=False) as ledger:
        links, state = ledger.backend.organic_rows(ledger)  # type: ignore[union-attr]
    return sorted(links), {i: recalls for i, (recalls, _) in state.items()}


def test_recall_persists_across_processes_and_matches_memory(store_path: Path) -> None:
    ids = _store(store_path)
    with Ledger.open(store_path) as ledger:
        om = OrganicMemory.open(ledger)
        om.recall(ids[0], k=2)
        om.recall(ids[0], k=2)
        # The in-memory layer over the same entries does exactly the same.
        mem = OrganicMemory(ledger.store)
        mem.recall(ids[0], k=2)
        mem.recall(ids[0], k=2)
        expected = {
            "links": {o: mem.hebbian.weight(ids[0], o) for o in ids[1:]},
            "levels": mem.state.levels(),
            "related": mem.related(ids[0], 3),
        }
    code = textwrap.dedent(
        f"""
        import json, sys
        from darwin_memo.ledger import Ledger
        from darwin_memo.organic import OrganicMemory
        ids = {ids!r}
        with Ledger.open(sys.argv[1], create=False) as ledger:
            om = OrganicMemory.open(ledger)
            print(json.dumps({{
                "links": {{o: om.hebbian.weight(ids[0], o) for o in ids[1:]}},
                "levels": om.state.levels(),
                "recalls": om.earned.recalls(ids[0]),
                "related": om.related(ids[0], 3),
            }}))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(store_path)], capture_output=True, text=True, check=True
    )
    seen = json.loads(out.stdout)
    assert seen["recalls"] == 2
    assert seen["links"] == pytest.approx(expected["links"])
    assert seen["links"][ids[1]] == pytest.approx(0.5)  # the cache twin, strengthened twice
    assert seen["levels"] == pytest.approx(expected["levels"])
    assert [p[0] for p in seen["related"]] == [p[0] for p in expected["related"]]
    assert [p[1] for p in seen["related"]] == pytest.approx([p[1] for p in expected["related"]])


def test_recall_is_one_transaction_with_an_event(store_path: Path) -> None:
    ids = _store(store_path)
    with Ledger.open(store_path) as ledger:
        before = len(list(ledger.events()))
        OrganicMemory.open(ledger).recall(ids[0], k=1)
        events = list(ledger.events())[before:]
        assert [e["event"] for e in events] == ["recall"]
        assert events[0]["entry"] == ids[0] and events[0]["strengthened"] == [[ids[1], 0.25]]
        assert ledger.verify() == []  # the journal's replay ignores recalls
        OrganicMemory.open(ledger).recall("no-such-entry")  # nothing written
        assert len(list(ledger.events())) == before + 1


def test_tick_decays_in_its_transaction(store_path: Path) -> None:
    ids = _store(store_path)
    with Ledger.open(store_path) as ledger:
        om = OrganicMemory.open(ledger)
        om.recall(ids[0], k=1)
        ledger.tick()
        om.sync()
        assert om.hebbian.weight(ids[0], ids[1]) == pytest.approx(0.25 * 0.9)
        assert om.state.level(ids[0]) == pytest.approx(0.5)
        assert om.earned.recalls(ids[0]) == 1  # counts do not decay
        for entry_id in ids:  # (pinned: they outlive the 60 ticks)
            ledger.pin(entry_id)
        for _ in range(60):  # 0.25 * 0.9**n < 1e-3 from n = 53: the link is forgotten
            ledger.tick(expire_after=None)
        om.sync()
        assert om.hebbian.links() == 0 and om.state.levels() == {}
        assert om.earned.recalls(ids[0]) == 1


def test_organic_decay_is_an_operation(store_path: Path) -> None:
    ids = _store(store_path)
    with Ledger.open(store_path) as ledger:
        om = OrganicMemory.open(ledger)
        om.recall(ids[0], k=1)
        om.decay()
        assert om.hebbian.weight(ids[0], ids[1]) == pytest.approx(0.225)
    with Ledger.open(store_path) as ledger:
        assert OrganicMemory.open(ledger).hebbian.weight(ids[0], ids[1]) == pytest.approx(0.225)


def test_death_removes_the_rows(store_path: Path) -> None:
    ids = _store(store_path)
    with Ledger.open(store_path) as ledger:
        om = OrganicMemory.open(ledger)
        om.recall(ids[0], k=3)
        om.recall(ids[1], k=3)
        assert ledger.forget(ids[1]) == "buried"
    if isinstance(store_path, str):  # PostgreSQL
        rows, state = _rows(store_path)
    elif store_path.suffix == ".db":
        conn = sqlite3.connect(store_path)
        rows = conn.execute("SELECT a, b FROM organic_links").fetchall()
        state = dict(conn.execute("SELECT entry_id, recalls FROM organic_state").fetchall())
        conn.close()
    else:
        block = json.loads(store_path.read_text())["organic"]
        rows = [tuple(link[:2]) for link in block["links"]]
        state = {i: v[0] for i, v in block["entries"].items()}
    assert rows and all(ids[1] not in pair for pair in rows)
    assert ids[1] not in state and state[ids[0]] == 1


def test_merge_moves_links_to_the_heir_and_sums_recalls(store_path: Path) -> None:
    with Ledger.open(store_path) as ledger:
        twins = [
            ledger.add("How do I drain node 7 before an upgrade?", f"Cordon node-7. ({i})").id
            for i in range(2)
        ]
        other = ledger.add("Who owns the payroll database?", "The finance team.").id
        far = ledger.add("How do I rotate the signing key?", "Run rotate-key.").id
        om = OrganicMemory.open(ledger)
        om.recall(twins[0], k=3)
        om.recall(twins[1], k=3)
        om.recall(twins[1], k=3)
        om.recall(other, k=3)
        w_other = max(om.hebbian.weight(t, other) for t in twins)
        w_far = max(om.hebbian.weight(t, far) for t in twins)
        ledger.config.consolidate_every = 1
        merged = sum(ledger.tick()["merges"] for _ in range(3))
        assert merged == 1
        heir = ledger.heir_of(twins[0])
        assert heir is not None and heir.alive
        om.sync()
        ticks = 3  # each tick decayed the links once; the merge came in the first
        assert om.earned.recalls(heir.id) == 3
        assert all(om.earned.recalls(t) == 0 for t in twins)
        assert om.hebbian.weight(heir.id, other) == pytest.approx(w_other * 0.9**ticks)
        assert om.hebbian.weight(heir.id, far) == pytest.approx(w_far * 0.9**ticks)
        assert all(om.hebbian.neighbors(t) == {} for t in twins)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_two_processes_recalling_at_once_lose_nothing(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    """Each process recalls every entry once (k=1), in its own order, all at once.

    Each recall strengthens one link by 0.25 and a link has two ends recalled twice
    each, so no link reaches the cap: the weights sum to 0.25 per recall made, and
    the counts to 2 per entry, only if no process overwrote another's strengthening.
    """
    path: Any = tmp_path / "s.db"
    if kind == "postgres":
        path = pg_url(request.getfixturevalue("pg_cluster"))
    with Ledger.open(path) as ledger:
        ids = [
            ledger.add(f"How do I restart service {n} safely?", f"Drain service-{n} first.").id
            for n in range(16)
        ]
    go = tmp_path / "go"
    code = textwrap.dedent(
        """
        import sys, time
        from pathlib import Path
        from darwin_memo.ledger import Ledger
        from darwin_memo.organic import OrganicMemory
        path, go, order = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
        with Ledger.open(path, create=False) as ledger:
            om = OrganicMemory.open(ledger)
            while not go.exists():
                time.sleep(0.005)
            for entry_id in order:
                om.recall(entry_id, k=1)
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(path), str(go), *order])
        for order in (ids, ids[::-1])
    ]
    go.touch()
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    if kind == "postgres":
        with Ledger.open(path, create=False) as ledger:
            links, state = ledger.backend.organic_rows(ledger)  # type: ignore[union-attr]
            events = sum(1 for e in ledger.events() if e["event"] == "recall")
        assert events == 2 * len(ids)
        assert {i: r for i, (r, _) in state.items()} == {i: 2 for i in ids}
        assert sum(links.values()) == pytest.approx(0.25 * 2 * len(ids))
        assert max(links.values()) <= 1.0
        return
    conn = sqlite3.connect(path)
    total = conn.execute("SELECT SUM(weight), MAX(weight) FROM organic_links").fetchone()
    recalls = dict(conn.execute("SELECT entry_id, recalls FROM organic_state").fetchall())
    events = conn.execute("SELECT COUNT(*) FROM events WHERE event = 'recall'").fetchone()[0]
    conn.close()
    assert events == 2 * len(ids)
    assert recalls == {i: 2 for i in ids}
    assert total[0] == pytest.approx(0.25 * 2 * len(ids)) and total[1] <= 1.0


def test_cli_related(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    ids = _store(path)
    with Ledger.open(path) as ledger:
        OrganicMemory.open(ledger).recall(ids[0], k=1)

    def related(*argv: str) -> tuple[dict[str, object], int]:
        out = subprocess.run(
            [sys.executable, "-m", "darwin_memo", "ledger", str(path), "related", *argv],
            capture_output=True,
            text=True,
        )
        return json.loads(out.stdout), out.returncode

    got, code = related(ids[0], "--k", "2")
    assert code == 0 and got["entry_id"] == ids[0] and got["alive"] is True
    items = got["related"]
    assert isinstance(items, list) and len(items) == 2
    assert items[0]["entry_id"] == ids[1] and items[0]["link"] == 0.25
    assert items[0]["question"] == LESSONS[1][0]
    assert related("nope")[0] == {"entry_id": "nope", "alive": False, "related": []}
    bad, code = related(ids[0], "--k", "0")
    assert code == 1 and bad["code"] == "bad_input"


def test_open_refuses_an_in_memory_ledger() -> None:
    from darwin_memo.store import MemoryStore

    with pytest.raises(ValueError, match=r"Ledger\.open"):
        OrganicMemory.open(Ledger(MemoryStore()))


def test_stores_without_recalls_get_no_block(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    _store(path)
    with Ledger.open(path) as ledger:
        ledger.tick()
    assert "organic" not in json.loads(path.read_text())


def test_reads_reload_the_rows_only_when_the_store_moved(store_path: Path) -> None:
    ids = _store(store_path)
    with Ledger.open(store_path) as ledger, Ledger.open(store_path) as other:
        om = OrganicMemory.open(ledger)
        backend: Any = ledger.backend
        reads: list[int] = []
        original = backend.organic_rows

        def counted(led: Ledger) -> Any:
            reads.append(1)
            return original(led)

        backend.organic_rows = counted  # counts the real reads; the rows are the store's
        for _ in range(3):
            om.related(ids[0], 2)
            om.importance(ids[0])
        assert reads == []  # nothing written since open: no reload
        assert om.hebbian.weight(ids[0], ids[1]) == 0.0

        OrganicMemory.open(other).recall(ids[0], k=2)  # another ledger (as another process)
        om.related(ids[0], 2)
        assert len(reads) == 1  # the store moved: read once
        assert om.hebbian.weight(ids[0], ids[1]) == pytest.approx(0.25)
        assert om.earned.recalls(ids[0]) == 1
        om.related(ids[0], 2)
        assert len(reads) == 1

        other.add("An unrelated lesson?", "Yes.")  # any write moves the version
        om.related(ids[0], 2)
        assert len(reads) == 2

        om.recall(ids[0], k=2)  # its own recall: read under the write, then after it
        assert om.hebbian.weight(ids[0], ids[1]) == pytest.approx(0.5)
        assert om.earned.recalls(ids[0]) == 2
        reads_after = len(reads)
        om.related(ids[0], 2)
        assert len(reads) == reads_after


def test_reads_follow_other_writers_by_the_rows_they_wrote(store_path: Any) -> None:
    ids = _store(store_path)
    with Ledger.open(store_path) as ledger, Ledger.open(store_path) as other:
        om = OrganicMemory.open(ledger)
        walks: list[int] = []
        walk = om._walk

        def counted() -> None:
            walks.append(1)
            walk()

        om._walk = counted  # type: ignore[method-assign]  # counts the real passes
        om.recall(ids[0], k=2)
        before = om.related(ids[0], 3)
        assert before[0][0] == ids[1]
        walks.clear()  # (a JSON store walked after its own recall)
        # Another writer buries the cache twin and adds a closer one.
        assert other.forget(ids[1]) == "buried"
        twin = other.add("Are cache files safe to delete?", "Yes, cache/ is disposable.")
        other.tick()
        after = om.related(ids[0], 3)
        assert after[0][0] == twin.id and ids[1] not in {i for i, _ in after}
        assert ids[1] not in om.graph and om.hebbian.neighbors(ids[0]).get(ids[1]) is None
        assert sorted(om.graph.ids) == sorted(e.id for e in ledger.store.alive())
        # SQL stores list the rows written since (their version index): no walk.
        # A JSON file that moved is read whole anyway, and walked.
        sql = not str(store_path).endswith(".json")
        assert walks == ([] if sql else [1])


def _all_rows(store: Any) -> Any:
    """Links with their weights and per-entry (recalls, activation), as the backend reads them."""
    with Ledger.open(store, create=False) as ledger:
        return ledger.backend.organic_rows(ledger)  # type: ignore[union-attr]


KINDS = ["sqlite", "json", "postgres"]


@pytest.mark.parametrize("dest_kind", KINDS)
@pytest.mark.parametrize("src_kind", KINDS)
def test_migrate_carries_the_organic_rows(
    request: pytest.FixtureRequest, tmp_path: Path, src_kind: str, dest_kind: str
) -> None:
    from darwin_memo.transfer import copy_store

    def place(kind: str, name: str) -> Any:
        if kind == "postgres":
            return pg_url(request.getfixturevalue("pg_cluster"))
        return tmp_path / f"{name}.{'db' if kind == 'sqlite' else 'json'}"

    src, dest = place(src_kind, "src"), place(dest_kind, "dest")
    ids = _store(src)
    with Ledger.open(src) as ledger:
        om = OrganicMemory.open(ledger)
        om.recall(ids[0], k=2)
        om.recall(ids[0], k=2)
        om.recall(ids[2], k=1)
        ledger.tick()  # activations halved, links x0.9: values no fresh recall gives
        om.recall(ids[3], k=1)
        assert ledger.forget(ids[1]) == "buried"  # its rows go with it
        expected = om.related(ids[0], 3)
    links, state = _all_rows(src)
    assert links and state and ids[1] not in state

    summary = copy_store(src, dest)
    assert (summary["organic_links"], summary["organic_entries"]) == (len(links), len(state))
    got_links, got_state = _all_rows(dest)
    assert got_links == pytest.approx(links)
    assert {i: r for i, (r, _) in got_state.items()} == {i: r for i, (r, _) in state.items()}
    assert {i: a for i, (_, a) in got_state.items()} == pytest.approx(
        {i: a for i, (_, a) in state.items()}
    )
    with Ledger.open(dest, create=False) as copy:
        assert copy.verify() == []
        om = OrganicMemory.open(copy)
        seen = om.related(ids[0], 3)
        assert [i for i, _ in seen] == [i for i, _ in expected]
        assert [s for _, s in seen] == pytest.approx([s for _, s in expected])
        assert om.earned.recalls(ids[0]) == 2
        om.recall(ids[0], k=2)  # the copy keeps learning where the source left off
    assert _all_rows(dest)[1][ids[0]][0] == 3
    if dest_kind == "sqlite":  # the block became rows; it is not kept as an unknown key too
        conn = sqlite3.connect(dest)
        (extra,) = conn.execute("SELECT value FROM meta WHERE key = 'payload_extra'").fetchone()
        conn.close()
        assert "organic" not in json.loads(extra)
