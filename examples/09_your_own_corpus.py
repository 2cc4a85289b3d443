"""09: your own documents instead of the demo's.

Point it at a directory of ``.txt`` / ``.md`` files (default: the small corpus in
``examples/corpus/``: backup, deploy and on-call notes). It encodes them, then
asks questions and shows, for each, what memory answers and why.

Read this one when the demo works and your own files do not. The usual reason is
the *relevance floor*: lexical retrieval stays silent unless an entry covers a
quarter of the question's weighted words (``LexicalRetriever(min_coverage=0.25)``).
A question phrased in structural words ("is it safe to remove these old ones?")
shares nothing specific with any document, so memory refuses it instead of
letting an entry that merely contains "old" decide a deletion it knows nothing
about. The script shows the entry that *would* have decided without the floor,
and the only words it shared.

    python examples/09_your_own_corpus.py
    python examples/09_your_own_corpus.py ~/notes --ask "Who owns the billing cron?"
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from darwin_memo import Document, LexicalRetriever, LocalEncoder, MemoryStore, QueryProtocol
from darwin_memo.retrieval import tokenize

BUNDLED = Path(__file__).resolve().parent / "corpus"
QUESTIONS = (
    "Can old container images in the staging registry be deleted?",
    "Who owns the checkout service pager rotation?",
    "Is it safe to remove these old ones?",
)


def read_corpus(folder: Path) -> list[Document]:
    """Every .txt and .md file under ``folder``; markdown heading lines are dropped."""
    docs = []
    for path in sorted(folder.rglob("*")):
        if path.suffix.lower() not in (".txt", ".md") or not path.is_file():
            continue
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        text = "\n".join(line for line in lines if not line.lstrip().startswith("#")).strip()
        if text:
            docs.append(Document(str(path.relative_to(folder)), text))
    return docs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", default=str(BUNDLED), help="a directory of notes")
    parser.add_argument("--ask", action="append", help="a question (repeatable)")
    args = parser.parse_args()

    folder = Path(args.folder).expanduser()
    if not folder.is_dir():
        print(f"error: {folder} is not a directory", file=sys.stderr)
        return 1
    docs = read_corpus(folder)
    if not docs:
        print(f"error: no .txt or .md files with text under {folder}", file=sys.stderr)
        return 1

    store = MemoryStore()  # the default: LexicalRetriever(min_coverage=0.25)
    for entry in LocalEncoder().encode(docs):
        store.add(entry)
    print(f"{folder}: {len(docs)} documents -> {len(store)} entries")
    for doc in docs:
        count = sum(1 for e in store.alive() if doc.doc_id in e.sources)
        print(f"  {doc.doc_id:20} {count:3} entries")

    # The same entries behind no floor at all: what memory would say if it had to guess.
    unfloored = MemoryStore(retriever=LexicalRetriever(min_coverage=0.0))
    for entry in store.alive():
        unfloored.add(entry)

    for question in args.ask or QUESTIONS:
        print(f"\nQ: {question}")
        print(f"   weighted words: {', '.join(tokenize(question)) or '(none)'}")
        answer = QueryProtocol(store).answer(question)
        if not answer.silent:
            decider = store.get(answer.deciding_entry or "")
            print(f"A: {answer.text}")
            print(f"   (from {', '.join(decider.sources) if decider else '?'})")
            continue
        print("A: (silent: no entry covers a quarter of the question's weighted words)")
        guess = QueryProtocol(unfloored).answer(question)
        if guess.silent:
            print("   even with no floor nothing matches: this corpus does not know")
            continue
        guesser = unfloored.get(guess.deciding_entry or "")
        shared = (
            sorted(set(tokenize(question)) & set(tokenize(guesser.question + " " + guesser.answer)))
            if guesser
            else []
        )
        print(f"   without the floor, this would have decided: {guess.text}")
        print(f"   on the strength of the shared words: {', '.join(shared)}")
        print("   -> ask in the documents' own words, or use an EmbeddingRetriever")

    print("\nSilence earns nothing, but it never acts on advice about something else.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
