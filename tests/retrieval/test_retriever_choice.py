"""A store remembers its retriever (issue 36, item 4), across real processes.

One process records the choice (``ledger STORE --retriever hybrid ...``), another
opens the store without naming one and ranks the same way; a different explicit
choice is a one-line error that changes nothing; ``set-retriever`` switches. Over
SQLite, the published JSON file and PostgreSQL (when a server is on the machine).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from darwin_memo.ledger import Ledger
from darwin_memo.retrieval.embedding import HybridRetriever, embeddings_available
from darwin_memo.retrieval.lexical import EmbeddingRetriever, HashingEmbedder, LexicalRetriever
from darwin_memo.retrieval.named import (
    RETRIEVER_NAMES,
    RetrieverMismatch,
    make_retriever,
    retriever_name,
)

pytestmark = pytest.mark.skipif(
    not embeddings_available(), reason="needs the [embeddings] extra (pip install -e '.[dev]')"
)

QUESTION = "How do I restart the web server?"
ANSWER = "Run systemctl restart nginx."
#: Shares no word with the lesson: only the dense side of a retriever finds it.
PARAPHRASE = "bring the website back up"


def run(*args: str, cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "darwin_memo", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        timeout=120,
    )


def ledger(store: str, *args: str, cwd: Path) -> tuple[dict, int, str]:
    proc = run("ledger", store, *args, cwd=cwd)
    assert b"Traceback" not in proc.stdout + proc.stderr
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == 1, proc.stdout
    return json.loads(lines[0]), proc.returncode, proc.stderr.decode()


@pytest.fixture(params=["lessons.db", "lessons.json", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        from conftest import pg_url

        return pg_url(request.getfixturevalue("pg_cluster"))
    return str(tmp_path / request.param)


def _opened(store: str) -> tuple[type, str | None]:
    with Ledger.open(store, create=False) as led:
        return type(led.store.retriever), getattr(led.backend, "recorded_retriever", None)


def _state(store: str, tmp_path: Path) -> tuple[dict, bytes | None]:
    """What a mismatch must leave as it was: the stats, and a file store's bytes."""
    stats, code, _ = ledger(store, "stats", cwd=tmp_path)
    assert code == 0
    path = Path(store)
    return stats, (path.read_bytes() if path.suffix == ".json" else None)


def test_the_choice_travels_between_processes(store: str, tmp_path: Path) -> None:
    out, code, _ = ledger(store, "--retriever", "hybrid", "add", QUESTION, ANSWER, cwd=tmp_path)
    assert code == 0 and "entry_id" in out
    # Another process, naming no retriever, ranks with the recorded one.
    decided, code, _ = ledger(store, "decide", PARAPHRASE, cwd=tmp_path)
    assert code == 0 and decided["silent"] is False
    assert decided["answer"].startswith(ANSWER)
    assert _opened(store) == (HybridRetriever, "hybrid")
    # The same text in a store that recorded nothing is searched lexically: silent.
    control = str(tmp_path / "control.db")
    ledger(control, "add", QUESTION, ANSWER, cwd=tmp_path)
    decided, _, _ = ledger(control, "decide", PARAPHRASE, cwd=tmp_path)
    assert decided["silent"] is True
    assert _opened(control) == (LexicalRetriever, None)  # reading records nothing


def test_a_different_choice_is_a_one_line_error_and_changes_nothing(
    store: str, tmp_path: Path
) -> None:
    ledger(store, "--retriever", "hybrid", "add", QUESTION, ANSWER, cwd=tmp_path)
    before = _state(store, tmp_path)
    out, code, _ = ledger(store, "--retriever", "lexical", "add", "Other?", "Other.", cwd=tmp_path)
    assert code == 1 and out["code"] == "bad_input"
    assert "\n" not in out["error"]
    assert "hybrid" in out["error"] and "set-retriever lexical" in out["error"]
    assert _state(store, tmp_path) == before
    with pytest.raises(RetrieverMismatch, match="set-retriever semantic"):
        Ledger.open(store, retriever="semantic")
    # The same choice again is fine.
    out, code, _ = ledger(store, "--retriever", "hybrid", "stats", cwd=tmp_path)
    assert code == 0 and out["alive"] == 1


def test_set_retriever_switches_and_reembeds(store: str, tmp_path: Path) -> None:
    ledger(store, "--retriever", "hybrid", "add", QUESTION, ANSWER, cwd=tmp_path)
    ledger(store, "add", "Where do logs go?", "Logs go to /var/log/app.", cwd=tmp_path)
    out, code, err = ledger(store, "set-retriever", "semantic", cwd=tmp_path)
    assert code == 0
    assert out == {"retriever": "semantic", "previous": "hybrid", "alive": 2, "embedded": 2}
    assert "embedding 2/2 entries" in err
    assert _opened(store) == (EmbeddingRetriever, "semantic")
    if store.endswith(".json"):  # the vectors travel in the published retriever block
        block = json.loads(Path(store).read_text())["retriever"]
        assert block["name"] == "semantic" and len(block["vectors"]) == 2
    out, code, _ = ledger(store, "--retriever", "hybrid", "stats", cwd=tmp_path)
    assert code == 1 and "set-retriever hybrid" in out["error"]
    decided, code, _ = ledger(store, "--retriever", "semantic", "decide", PARAPHRASE, cwd=tmp_path)
    assert code == 0 and decided["answer"].startswith(ANSWER)
    out, code, err = ledger(store, "set-retriever", "lexical", cwd=tmp_path)
    assert out["previous"] == "semantic" and out["embedded"] == 0 and err == ""
    decided, _, _ = ledger(store, "decide", PARAPHRASE, cwd=tmp_path)
    assert decided["silent"] is True  # now ranked by word overlap


def test_set_retriever_on_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    out, code, _ = ledger(str(tmp_path / "none.db"), "set-retriever", "hybrid", cwd=tmp_path)
    assert code == 1 and out["code"] == "store_not_found"
    assert not (tmp_path / "none.db").exists()


def test_serve_passes_the_choice_through(tmp_path: Path) -> None:
    store = str(tmp_path / "served.json")
    requests = [["add", QUESTION, ANSWER], ["decide", PARAPHRASE], ["set-retriever", "lexical"]]
    stdin = "".join(json.dumps(r) + "\n" for r in requests).encode()
    proc = run("ledger", store, "--retriever", "hybrid", "serve", cwd=tmp_path, stdin=stdin)
    assert proc.returncode == 0, proc.stderr
    replies = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert "entry_id" in replies[0]
    assert replies[1]["answer"].startswith(ANSWER)
    assert replies[2]["retriever"] == "lexical"
    assert _opened(store) == (LexicalRetriever, "lexical")


def test_mcp_server_refuses_a_mismatch_in_one_line(tmp_path: Path) -> None:
    store = str(tmp_path / "mcp.db")
    ledger(store, "--retriever", "hybrid", "add", QUESTION, ANSWER, cwd=tmp_path)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "darwin_memo.mcp_server",
            "--memory",
            store,
            "--retriever",
            "lexical",
        ],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
    )
    err = proc.stderr.decode()
    assert proc.returncode == 1 and proc.stdout == b""
    assert err.count("\n") == 1 and "set-retriever lexical" in err, err


def test_library_choices(tmp_path: Path) -> None:
    assert RETRIEVER_NAMES == ("lexical", "hybrid", "semantic")
    with pytest.raises(ValueError, match="unknown retriever 'dense'"):
        Ledger.open(tmp_path / "x.db", retriever="dense")
    assert not (tmp_path / "x.db").exists()  # refused before the store was opened
    # An object of a named kind is recorded by that name, with its options.
    with Ledger.open(tmp_path / "o.db", retriever=HybridRetriever(context=0.5)) as led:
        assert led.store.retriever.context == 0.5  # type: ignore[attr-defined]
    assert _opened(str(tmp_path / "o.db")) == (HybridRetriever, "hybrid")
    # An object over another embedder is neither recorded nor checked.
    with Ledger.open(tmp_path / "h.db", retriever=EmbeddingRetriever(HashingEmbedder())) as led:
        led.add(QUESTION, ANSWER)
    assert retriever_name(HybridRetriever(HashingEmbedder())) is None
    assert _opened(str(tmp_path / "h.db")) == (LexicalRetriever, None)
    with Ledger.open(tmp_path / "h.db", retriever="semantic") as led:  # free to choose
        assert led.backend.recorded_retriever == "semantic"  # type: ignore[union-attr]
    assert isinstance(make_retriever("lexical"), LexicalRetriever)
