"""The people-facing commands: ``demo``, ``encode``, ``query``, ``stats``.

Stored text reaches the terminal through ``answer.fencing.for_terminal`` only (an answer
keeps its line breaks, nothing else does): a store is a file people get from
elsewhere, and its text must not drive the terminal.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..answer.fencing import for_terminal as shown
from ..records.entry import EntryKind
from .common import (
    DEMO_SEED,
    POISON_SOURCE,
    CliError,
    non_negative_int,
    positive_float,
    query_text,
)

if TYPE_CHECKING:
    from ..records.entry import MemoryEntry
    from ..sim.encode import Document

# Kept in step with darwin_memo.llm.MODEL_SPEC_HELP (not imported: the parser stays light).
MODEL_SPEC_HELP = "ollama:NAME[@URL], anthropic:NAME or openai:NAME@URL"

# -- demo ---------------------------------------------------------------------


def cmd_demo(args: argparse.Namespace) -> int:
    from ..answer.protocol import QueryProtocol
    from ..economy.config import SurvivalConfig
    from ..economy.lifecycle import death_cause
    from ..sim.encode import LocalEncoder, demo_corpus
    from ..sim.environments import StorageEnv
    from ..sim.survival import SurvivalLoop
    from ..store import MemoryStore

    if args.out:
        out = Path(args.out)
        if out.is_dir():
            raise CliError(f"--out {out} is a directory; name a file to write the store to")
        if not out.parent.is_dir():
            raise CliError(f"--out {out}: the directory {out.parent} does not exist")
    store = MemoryStore()
    for entry in LocalEncoder().encode(demo_corpus()):
        store.add(entry)
    poisoned = {e.id for e in store.alive() if POISON_SOURCE in e.sources}
    print(
        f"darwin-memo demo: {len(store)} entries encoded from the demo corpus "
        f"({len(poisoned)} from the poisoned forum post); seed {args.seed}, "
        f"{args.cycles} cycles of StorageEnv"
    )
    probe = "Is it safe to delete the file store-0.db (a database file under data/)?"
    before = QueryProtocol(store).answer(probe)
    print(f"\nBefore selection, memory is asked: {probe}")
    print(f"  it answers: {shown(before.text) or '(silent)'}")
    with StorageEnv(seed=args.seed) as env:
        loop = SurvivalLoop(store, env, config=SurvivalConfig(cycles=args.cycles))
        report = loop.run()
    print()
    print(report.summary())
    print("\nSurvivors:")
    for e in sorted(store.alive(), key=lambda e: -e.energy):
        print(f"  {e.energy:5.2f}  [{e.kind.value}] {shown(e.answer[:90])}")
    if not len(store):
        print("  (none)")
    print("\nGraveyard:")
    by_cause: dict[str, list[str]] = {"executed": [], "starved": [], "merged": []}
    for e in store.graveyard():
        cause = death_cause(e, poisoned, loop.merged_away)
        by_cause.setdefault(cause, []).append(e.answer)
    for cause, answers in by_cause.items():
        print(f"  {cause}: {len(answers)}")
        for text in answers[:4]:
            print(f"    - {shown(text[:86])}")
        if len(answers) > 4:
            print(f"    ... and {len(answers) - 4} more")
    after = QueryProtocol(store).answer(probe)
    print(
        f"\nAfter selection, the same question gets: "
        f"{shown(after.text) or '(silence: keep the file)'}"
    )
    if args.out:
        store.save(args.out)
        print(f"Survivor store written to {args.out}")
    alive_poison = sum(1 for e in store.alive() if POISON_SOURCE in e.sources)
    print(f"\nPoisoned entries still alive: {alive_poison}")
    return 0


# -- encode / query / stats ---------------------------------------------------


def cmd_encode(args: argparse.Namespace) -> int:
    from ..sim.encode import Document, LocalEncoder
    from ..store import MemoryStore

    docs = []
    for name in args.documents:
        path = Path(name)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise CliError(f"{path}: no such file") from None
        except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
            raise CliError(f"{path}: cannot read it as UTF-8 text ({type(exc).__name__})") from None
        docs.append(Document(path.stem, text))
    out = Path(args.out)
    store = MemoryStore.load(out) if out.exists() else MemoryStore()
    entries = _reflect(args.model, docs) if args.model else LocalEncoder().encode(docs)
    for entry in entries:
        store.add(entry)
    store.save(out)
    noun = "document" if len(docs) == 1 else "documents"
    print(f"Encoded {len(entries)} entries from {len(docs)} {noun} -> {shown(str(out))}")
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.kind.value] = counts.get(e.kind.value, 0) + 1
    for kind, n in sorted(counts.items()):
        print(f"  {kind}: {n}")
    return 0


def _reflect(spec: str, docs: list[Document]) -> list[MemoryEntry]:
    """Encode with a model, progress on stderr, skipped steps reported at the end."""
    import sys

    from ..answer.clients import client_from_spec
    from ..sim.reflection import Progress, ReflectionEncoder

    def show(p: Progress) -> None:
        mark = "" if p.ok else " (skipped)"
        print(
            f"  [{p.done}/{p.total}] {p.step} {shown('+'.join(p.doc_ids))}{mark}",
            file=sys.stderr,
            flush=True,
        )

    encoder = ReflectionEncoder(client_from_spec(spec), progress=show)
    entries = encoder.encode(docs)
    for skip in encoder.skipped:
        print(
            f"skipped {skip.step} for {shown('+'.join(skip.doc_ids))}: {shown(skip.reason)}",
            file=sys.stderr,
        )
    return entries


def cmd_query(args: argparse.Namespace) -> int:
    from ..answer.protocol import QueryProtocol
    from ..readonly import open_readonly

    question = query_text(args.question)
    client = None
    if args.model:
        from ..answer.clients import client_from_spec

        client = client_from_spec(args.model)
    # Any store: JSON, SQLite or a postgresql:// URL (named without its password).
    with open_readonly(args.memory) as ledger:
        store = ledger.store
        answer = QueryProtocol(store, client).answer(
            question, half_life=args.half_life, kind=args.kind, source=args.source
        )
        decider = store.get(answer.deciding_entry) if answer.deciding_entry else None
    if not answer.text:
        print("(memory is silent: no entry clears the relevance floor)")
        return 0
    print(shown(answer.annotated_text or answer.text, multiline=True))
    if decider is not None:
        print(f"\ndeciding entry: [{decider.kind.value}] {shown(decider.question)}")
        print(f"sources: {shown(', '.join(decider.sources)) or '(none)'}")
    elif answer.supporting_entries and not answer.deciding_entry:
        print(f"\ncited entries: {shown(', '.join(answer.supporting_entries))}")
    return 0


def _journal(memory: str, ledger: Any) -> list[dict[str, Any]] | None:
    """The store's event log, oldest first; None when it has none.

    A JSON store's log is the ``NAME.events.jsonl`` file next to it (read as the
    published ``read_events`` does, rotations included, without taking the lock);
    SQLite and PostgreSQL stores keep theirs in a table.
    """
    from ..backends import backend_kind
    from ..backends.journal import event_log_path, event_log_paths
    from ..observe import ledger_events, read_events

    if backend_kind(memory) == "json":
        log = event_log_path(memory)
        return read_events(log) if event_log_paths(log) else None
    return ledger_events(ledger) or None


def _economics_lines(econ: dict[str, Any]) -> list[str]:
    """The two event-log lines of ``stats``: what the world measured, what energy did."""
    resource, energy = econ["resource"], econ["energy"]
    decisions = resource["decides"]
    estimated = "" if energy["upkeep_exact"] else " (estimated)"
    return [
        f"resource delta: {resource['delta_total']:+g} over {decisions} "
        f"decision{'' if decisions == 1 else 's'} ({resource['silent']} silent, "
        f"{resource['settles']} settled)",
        f"energy net: {energy['net']:+.3f} from settlements against "
        f"{energy['upkeep_paid']:.3f} upkeep paid{estimated}",
    ]


def cmd_stats(args: argparse.Namespace) -> int:
    from ..observe import economics
    from ..readonly import open_readonly

    with open_readonly(args.memory) as ledger:  # JSON, SQLite or a postgresql:// URL
        store = ledger.store
        print(f"alive: {len(store)}  graveyard: {store.dead_count()}")
        print(f"total energy: {store.total_energy():.3f}")
        journal = _journal(args.memory, ledger)
        if journal is not None:
            print("\n".join(_economics_lines(economics(journal, store))))
        shares = store.energy_share_by_kind()
        alive = store.alive()
    if shares:
        print("energy share by kind:")
        for kind, share in sorted(shares.items(), key=lambda kv: -kv[1]):
            print(f"  {shown(kind):<13} {share:6.1%}")
    top = sorted(alive, key=lambda e: (-e.energy, e.id))[:5]
    if top:
        print("top entries:")
        for e in top:
            print(f"  {e.energy:6.3f}  {shown(e.id)}  [{e.kind.value}] {shown(e.question[:70])}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("demo", help="watch a poisoned entry go extinct (offline)")
    p.add_argument("--cycles", type=non_negative_int, default=30, help="cycles to run (30)")
    p.add_argument("--seed", type=int, default=DEMO_SEED, help=f"world seed ({DEMO_SEED})")
    p.add_argument("-o", "--out", help="write the survivor store to this file")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("encode", help="encode documents into a memory store")
    p.add_argument("documents", nargs="+", help="UTF-8 text files (doc id = file stem)")
    p.add_argument("-o", "--out", default="memory.json", help="store to write (memory.json)")
    p.add_argument("--model", metavar="SPEC", help=f"encode with a model: {MODEL_SPEC_HELP}")
    p.set_defaults(func=cmd_encode)

    kinds = [k.value for k in EntryKind]
    p = sub.add_parser("query", help="ask a store a question, with provenance")
    p.add_argument("memory", help="store file")
    p.add_argument("question")
    p.add_argument("--half-life", type=positive_float, help="recency half-life in ticks")
    p.add_argument("--kind", choices=kinds, help="only entries of this kind")
    p.add_argument("--source", help="only entries with this source")
    p.add_argument("--model", metavar="SPEC", help=f"answer with a model: {MODEL_SPEC_HELP}")
    p.set_defaults(func=cmd_query)

    p = sub.add_parser("stats", help="population, energy and the top entries of a store")
    p.add_argument("memory", help="store file")
    p.set_defaults(func=cmd_stats)
