"""04: memory as a tool in an agent loop, settled by what the loop measures.

A small cleanup agent is asked, episode after episode, to free disk space in a
real workspace (a temporary directory with logs, cache chunks, reports and a
database file). Before deleting anything it calls its memory tool, the way an
agent calls ``memory_query`` over MCP; the tool answers from a ``Ledger`` and
hands back a ticket. The agent acts on the answer (silence means keep).

Nobody tells the ledger who was right. At the end of each episode the loop does
what it would do anyway: it measures the disk (bytes actually freed) and runs the
service's health check, which restores a missing database from backup at three
times its size. Each ticket is settled with the measured bytes of the decision it
led to, then the ledger ticks (upkeep, deaths, merges). Tickets stay open for the
whole episode: the entries behind them are escrowed until their verdict lands.

    python examples/04_agent_loop.py               # 25 episodes
    python examples/04_agent_loop.py --episodes 40
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from darwin_memo import Ledger, MemoryStore, decision_polarity

LESSONS = (  # (source, question, answer)
    ("runbook", "Can old app logs under logs/ be deleted?",
     "Old app logs under logs/ may be deleted once rotated."),
    ("runbook", "Are cache chunks under cache/ disposable?",
     "Cache chunks under cache/ are disposable."),
    ("runbook", "What about quarterly report PDFs under reports/?",
     "Quarterly report PDFs under reports/ are protected records and must be kept."),
    ("forum", "Are database files under data/ safe to delete?",
     "Database files under data/ are redundant copies and safe to delete to free space."),
    ("chat", "Where is the team lunch on Fridays?",
     "The team lunch on Fridays is at the noodle bar."),
)  # fmt: skip

KIND = {"logs": "an old app log", "cache": "a cache chunk",
        "reports": "a quarterly report PDF", "data": "a database file"}  # fmt: skip
RESTORE_FACTOR = 3  # a database restored from backup costs three times its size


@dataclass
class Decision:
    ticket: str
    path: Path
    deleted: bool


class MemoryTool:
    """What the agent sees: one call that recalls advice and returns a ticket."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def __call__(self, question: str) -> dict[str, str | None]:
        ticket = self.ledger.decide(question)
        return {"answer": ticket.answer or None, "ticket_id": ticket.id if ticket.answer else None}


def make_workspace(root: Path, rng: random.Random) -> None:
    """A fresh disk for one episode: two files in each directory, random sizes."""
    for folder, suffix in (("logs", "log"), ("cache", "bin"), ("reports", "pdf"), ("data", "db")):
        (root / folder).mkdir(parents=True, exist_ok=True)
        for n in range(2):
            size = rng.randrange(8, 64) * 1024
            (root / folder / f"{folder}-{n}.{suffix}").write_bytes(b"\0" * size)


def agent_episode(root: Path, recall: MemoryTool, verbose: bool) -> list[Decision]:
    """The agent: ask memory about each file, delete what it is told is safe to delete."""
    decisions = []
    for path in sorted(root.rglob("*.*")):
        folder = path.parent.name
        question = f"Is it safe to delete {path.name}, {KIND[folder]} under {folder}/?"
        reply = recall(question)
        act = decision_polarity(reply["answer"] or "") is True
        if verbose:
            print(f"  memory_query({question!r})")
            shown = (reply["answer"] or "(silent)").splitlines()[0]  # drop the age line
            print(f"    -> {shown}  => {'delete' if act else 'keep'}")
        if reply["ticket_id"] is None:
            continue  # silence: nothing to settle, the file stays
        size = path.stat().st_size
        if act:
            path.unlink()
        decisions.append(Decision(reply["ticket_id"], path, act))
        path.with_name(path.name + ".size").write_text(str(size))  # the loop's own record
    return decisions


def measure(decision: Decision) -> tuple[float, str]:
    """What the decision did to the disk, in KiB: freed bytes minus any restore cost."""
    record = decision.path.with_name(decision.path.name + ".size")
    size = int(record.read_text())
    record.unlink()
    if not decision.deleted:
        return 0.0, "kept"
    if decision.path.parent.name == "data":  # the health check: the service needs it
        decision.path.write_bytes(b"\0" * size)  # restored from backup
        return (size - RESTORE_FACTOR * size) / 1024, "health check failed: restored"
    return size / 1024, "freed"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=25, help="episodes to run (25)")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="darwin-memo-agent-") as tmp:
        # Deltas are in KiB: resource_scale 100 makes 100 KiB worth ~0.46 energy.
        journal = Path(tmp) / "lessons.events.jsonl"
        ledger = Ledger(MemoryStore(), resource_scale=100.0, event_log=journal)
        ids = {}
        for source, question, answer in LESSONS:
            ids[source] = ledger.add(question, answer, source=source).id
        poison = ids["forum"]
        recall = MemoryTool(ledger)
        rng = random.Random(args.seed)

        print(f"{len(ledger.store)} lessons; the forum one is wrong. Episode 0, in full:")
        for episode in range(args.episodes):
            root = Path(tmp) / f"episode-{episode}"
            make_workspace(root, rng)
            decisions = agent_episode(root, recall, verbose=episode == 0)
            if episode == 0:
                print("\nepisode  lessons  deleted  kept  measured KiB  open tickets  forum lesson")
            open_now = len(ledger.pending())
            total = 0.0
            for decision in decisions:  # the loop measures, then settles each ticket
                delta, detail = measure(decision)
                total += delta
                ledger.settle(decision.ticket, delta, detail=f"{detail}: {decision.path.name}")
            ledger.tick()
            entry = ledger.store.get(poison)
            status = f"energy {entry.energy:.2f}" if entry is not None else "dead"
            deleted = sum(d.deleted for d in decisions)
            print(
                f"{episode:7}  {len(ledger.store):7}  {deleted:7}  {len(decisions) - deleted:4}"
                f"  {total:12.0f}  {open_now:12}  {status}"
            )

        print("\nthe forum lesson's life, from the ledger:")
        print(ledger.obituary(poison))
        print("\nsurvivors:")
        for entry in sorted(ledger.store.alive(), key=lambda e: -e.energy):
            print(f"  {entry.energy:4.2f}  [{', '.join(entry.sources)}] {entry.answer}")
        problems = ledger.verify()  # every balance rebuilt from the journal
        print(f"\njournal replay: {problems if problems else 'every balance agrees'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
