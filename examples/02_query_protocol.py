"""02: interrogate memory, with provenance.

Every answer names the entries behind it: the one that *decided* it and the ones
that *supported* it. That provenance is the whole point: when the environment
later measures what acting on the answer did, the delta flows to exactly these
ids and to no one else.

This script encodes the demo corpus (or loads ``--memory FILE``, e.g. the one
``01_encode_memory.py -o`` wrote), asks it a few questions and prints, for each,
the answer, the deciding entry and where it came from, the supporters, and the
age line a host shows an agent. Note the database question: before any selection
pressure exists the poisoned forum post answers it, confidently. A question that
shares no real vocabulary with the corpus gets silence, not a guess.

Offline, the protocol answers with the best-ranked entry. With ``--model SPEC``
it runs the three-stage protocol (grounding, entities, answer seeking) and the
model's citations decide the provenance.

    python examples/02_query_protocol.py
    python examples/02_query_protocol.py "Who owns retention for reports/?"
"""

from __future__ import annotations

import argparse
import sys

from darwin_memo import LocalEncoder, MemoryStore, QueryProtocol, demo_corpus

QUESTIONS = (
    "Are cache chunk files under cache/ safe to remove?",
    "Can the database store files under data/ be removed?",
    "Who owns retention for reports/?",
    "What should I do about this?",
)


def load(path: str | None) -> MemoryStore:
    if path is not None:
        return MemoryStore.load(path)
    store = MemoryStore()
    for entry in LocalEncoder().encode(demo_corpus()):
        store.add(entry)
    return store


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("questions", nargs="*", help="questions to ask (default: four)")
    parser.add_argument("--memory", help="a store file to ask (default: the demo corpus)")
    parser.add_argument("--model", help="answer with a model: ollama:NAME, openai:NAME@URL")
    args = parser.parse_args()

    try:
        store = load(args.memory)
        client = None
        if args.model:
            from darwin_memo.llm import client_from_spec

            client = client_from_spec(args.model)
    except Exception as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    protocol = QueryProtocol(store, client)
    mode = "local: the best-ranked entry decides" if client is None else f"model {args.model}"
    print(f"{len(store)} entries; protocol mode: {mode}")

    for question in args.questions or QUESTIONS:
        print(f"\nQ: {question}")
        answer = protocol.answer(question)
        if answer.silent:
            print("   memory is silent: no entry clears the relevance floor")
            print(
                "   (silence earns nothing, but it never decides an action it knows nothing about)"
            )
            continue
        print(f"A: {answer.text}")
        decider = store.get(answer.deciding_entry) if answer.deciding_entry else None
        if decider is not None:
            sources = ", ".join(decider.sources)
            print(f"   decided by {decider.id} [{decider.kind.value}] from {sources}")
        for supporter_id in answer.supporting_entries:
            entry = store.get(supporter_id)
            if entry is not None:
                sources = ", ".join(entry.sources)
                print(f"   supported by {entry.id} from {sources}: {entry.answer[:60]}...")
        print(f"   an outcome credits {answer.deciding_entry} in full and each supporter a quarter")
        print("   what a host shows the agent:")
        for line in answer.annotated_text.splitlines():
            print(f"     | {line}")

    print("\nThe database answer came from the forum post: nothing has been measured yet.")
    print("examples/03_survival_loop.py lets a real disk settle who was right.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
