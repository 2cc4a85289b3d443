"""01: turn a corpus into reflection-QA memory.

MeMo's idea is that memory is made of self-contained question/answer pairs, written
by reading the documents once, so that nothing at query time has to re-read them.
This script encodes the bundled demo corpus (an ops runbook, platform notes, and one
poisoned forum post) and shows what came out: every entry's kind, the documents it
came from, and its question and answer. Every entry starts with 1.0 energy: from
here on it must earn its keep.

Offline it uses ``LocalEncoder`` (deterministic, no model: one entry per sentence,
one per named entity, one per entity two documents share). Given ``--model SPEC``
(``ollama:llama3.2``, ``openai:NAME@http://127.0.0.1:8080/v1``...) it runs the
five-step ``ReflectionEncoder`` instead: extraction, consolidation,
self-containment, entities, cross-document synthesis.

    python examples/01_encode_memory.py                 # offline
    python examples/01_encode_memory.py -o memory.json  # keep the store
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

from darwin_memo import LocalEncoder, MemoryEntry, MemoryStore, demo_corpus


def encode(model: str | None) -> list[MemoryEntry]:
    """The demo corpus as memory entries, by a model when one is named."""
    docs = demo_corpus()
    if model is None:
        return LocalEncoder().encode(docs)
    from darwin_memo import ReflectionEncoder
    from darwin_memo.llm import client_from_spec

    return ReflectionEncoder(client_from_spec(model)).encode(docs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--out", help="where to save the store (default: a temp dir)")
    parser.add_argument("--model", help="encode with a model: ollama:NAME, openai:NAME@URL")
    args = parser.parse_args()

    docs = demo_corpus()
    print(f"corpus: {len(docs)} documents")
    for doc in docs:
        print(f"  {doc.doc_id:15} {len(doc.text):5} characters")

    try:
        entries = encode(args.model)
    except Exception as exc:  # a model that is not there: one line, not a traceback
        print(f"error: {exc}", file=sys.stderr)
        return 1
    store = MemoryStore()
    for entry in entries:
        store.add(entry)

    kinds = Counter(e.kind.value for e in store.alive())
    made_by = (
        "LocalEncoder (offline)" if args.model is None else f"ReflectionEncoder ({args.model})"
    )
    print(f"\n{made_by} wrote {len(store)} entries: ", end="")
    print(", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items())))

    for entry in sorted(store.alive(), key=lambda e: (e.kind.value, e.sources, e.question)):
        print(
            f"\n[{entry.kind.value}] from {', '.join(entry.sources)}  (energy {entry.energy:.1f})"
        )
        print(f"  Q: {entry.question}")
        print(f"  A: {entry.answer}")

    poison = [e for e in store.alive() if "forum-post" in e.sources]
    print(f"\n{len(poison)} entries carry the forum post's poison; nothing marks them as such.")
    print("Retrieval cannot tell them apart: only measured outcomes will (examples/03).")

    if args.out:
        path = Path(args.out)
        store.save(path)
        print(
            f"\nsaved to {path}: try `darwin-memo query {path} 'Can cache chunk files be removed?'`"
        )
    else:
        with tempfile.TemporaryDirectory() as tmp:
            store.save(Path(tmp) / "memory.json")
            size = (Path(tmp) / "memory.json").stat().st_size
        print(f"\n(the store is {size} bytes of JSON; pass -o memory.json to keep it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
