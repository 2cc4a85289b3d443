"""Offline semantic retrieval with the real all-MiniLM-L6-v2 weights (the [embeddings] extra).

The extra is part of ``dev``, so CI runs these; they skip only where it is not
installed. The recall test runs bench/paraphrase/probe.py's measurement on the
committed probe set.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import pytest

from darwin_memo.records.entry import MemoryEntry
from darwin_memo.retrieval import embedding as semantic
from darwin_memo.retrieval.embedding import (
    MODEL_ID,
    EmbeddingsUnavailable,
    HybridRetriever,
    SentenceEmbedder,
    embeddings_available,
)
from darwin_memo.retrieval.lexical import EmbeddingRetriever, HashingEmbedder, LexicalRetriever
from darwin_memo.store import MemoryStore

pytestmark = pytest.mark.skipif(
    not embeddings_available(), reason="needs the [embeddings] extra (pip install -e '.[dev]')"
)

ROOT = Path(__file__).resolve().parents[2]


def load_probe() -> Any:
    spec = importlib.util.spec_from_file_location(
        "paraphrase_probe", ROOT / "bench/paraphrase/probe.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def embedder() -> SentenceEmbedder:
    return SentenceEmbedder()


class Counting:
    """Wraps an embedder and counts the texts it embeds."""

    def __init__(self, inner: SentenceEmbedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.texts: list[str] = []

    def __call__(self, text: str) -> list[float]:
        self.texts.append(text)
        return self.inner(text)

    def batch(self, texts: list[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return self.inner.batch(texts)


def cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_vectors_are_unit_384d_and_batch_equals_single(embedder: SentenceEmbedder) -> None:
    texts = ["Old logs may be deleted after seven days.", "Café naïve 東京", "x"]
    batch = embedder.batch(texts)
    for text, vec in zip(texts, batch, strict=True):
        assert len(vec) == 384
        assert math.isclose(math.fsum(x * x for x in vec), 1.0, rel_tol=1e-4)
        single = embedder(text)
        assert max(abs(a - b) for a, b in zip(single, vec, strict=True)) < 1e-4


def test_paraphrases_land_closer_than_unrelated_text(embedder: SentenceEmbedder) -> None:
    a, b, c = embedder.batch(
        [
            "Can I throw away the old application journals after a week?",
            "Old logs under logs/ may be deleted after seven days.",
            "The cafeteria rotates its menu every two weeks.",
        ]
    )
    assert cos(a, b) > 0.5
    assert cos(a, b) > cos(a, c) + 0.3


def test_semantic_recall_beats_hashing_and_lexical_on_paraphrases(
    embedder: SentenceEmbedder,
) -> None:
    probe = load_probe()
    corpus, probes = probe.load()
    assert len(probes) >= 40

    def recall(retriever: Any) -> float:
        value, _ = probe.recall(retriever, corpus, probes, 3, probe._warm)
        return float(value)

    lexical = recall(LexicalRetriever())
    hashing = recall(EmbeddingRetriever(HashingEmbedder()))
    dense = recall(EmbeddingRetriever(embedder))
    hybrid = recall(HybridRetriever(embedder))
    assert dense >= 0.85
    assert dense > max(lexical, hashing) + 0.5
    assert hybrid > max(lexical, hashing) + 0.5


def test_vectors_are_cached_in_the_store_and_tagged_with_the_model(
    tmp_path: Path, embedder: SentenceEmbedder
) -> None:
    counting = Counting(embedder)
    store = MemoryStore(retriever=EmbeddingRetriever(counting))
    for q, a in [("Who owns data/?", "The Platform Team."), ("Is cache/ disposable?", "Yes.")]:
        store.add(MemoryEntry(q, a))
    assert store.retrieve("which team is responsible for the data folder?", 1)
    path = tmp_path / "memory.json"
    store.save(path)
    saved = json.loads(path.read_text())["retriever"]
    assert saved["model"] == MODEL_ID
    assert len(saved["vectors"]) == 2

    again = Counting(embedder)
    reloaded = MemoryStore.load(path, retriever=EmbeddingRetriever(again))
    top = reloaded.retrieve("which team is responsible for the data folder?", 1)
    assert top[0][0].question == "Who owns data/?"
    assert again.texts == ["which team is responsible for the data folder?"]  # the query only

    class Other(Counting):
        pass

    other = Other(embedder)
    other.model_id = "some-other-model"
    MemoryStore.load(path, retriever=EmbeddingRetriever(other)).retrieve("data folder owner", 1)
    assert len(other.texts) == 3  # another model's vectors are not reused: both re-embedded


def test_hybrid_keeps_exact_identifiers_decisive_and_finds_paraphrases(
    embedder: SentenceEmbedder,
) -> None:
    store = MemoryStore(retriever=HybridRetriever(embedder))
    err = store.add(MemoryEntry("What does error E4471 mean?", "E4471: the upstream timed out."))
    store.add(MemoryEntry("What does error E4472 mean?", "E4472: the upstream refused us."))
    logs = store.add(MemoryEntry("How long are logs kept?", "Logs may be deleted after 7 days."))
    assert store.retriever.indexed == 3
    assert store.retrieve("E4471", 1)[0][0].id == err.id
    assert store.retrieve("when can I purge old journals?", 1)[0][0].id == logs.id
    # a kind filter takes the rank() path instead of the index: same answers
    assert store.retrieve("E4471", 1, kind="explicit")[0][0].id == err.id
    assert store.retrieve("when can I purge old journals?", 1, kind="explicit")[0][0].id == logs.id


def test_a_tampered_model_file_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(semantic, "MODEL_SHA256", "0" * 64)
    with pytest.raises(EmbeddingsUnavailable, match="not the pinned 0000000000000000"):
        SentenceEmbedder()("hello")


def test_preload_loads_in_the_background_and_embeds_the_same(embedder: SentenceEmbedder) -> None:
    texts = ["What did Melanie paint?", "journals purge policy", ""]
    loading = SentenceEmbedder()
    loading.preload()
    assert loading._loader is not None and loading._loader.name == "darwin-memo-model-load"
    loading.preload()  # a second call starts nothing
    assert loading.batch(texts) == embedder.batch(texts)  # waits for the load, same vectors
    loading._loader.join(5)
    assert not loading._loader.is_alive()


def test_a_failed_preload_is_raised_by_the_first_embedding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(semantic, "MODEL_SHA256", "0" * 64)
    loading = SentenceEmbedder(cache=False)
    loading.preload()  # fails in the background, quietly
    assert loading._loader is not None
    loading._loader.join(30)
    with pytest.raises(EmbeddingsUnavailable, match="not the pinned 0000000000000000"):
        loading("hello")


def test_a_dense_search_loads_the_model_while_it_reads_the_vectors(tmp_path: Path) -> None:
    from darwin_memo.ledger import Ledger

    path = tmp_path / "store.db"
    with Ledger.open(path, retriever="hybrid") as ledger:
        ledger.store.add(MemoryEntry("how do I purge old journals?", "journalctl --vacuum-size"))
    with Ledger.open(path) as ledger:
        embed = ledger.store.retriever.dense.embed
        assert embed._session is None and embed._loader is None
        found = ledger.store.retrieve("clear old systemd logs", 1)
        assert embed._loader is not None  # started before the rows were read
        assert [e.question for e, _ in found] == ["how do I purge old journals?"]


_TELEMETRY_CHILD = """
import sys
if sys.argv[1] == "plain":
    import onnxruntime
else:
    from darwin_memo.retrieval.embedding import SentenceEmbedder
    assert len(SentenceEmbedder(cache=False)("offline means offline")) == 384
"""


def test_onnxruntime_telemetry_is_off_unless_the_user_chose(tmp_path: Path) -> None:
    """onnxruntime's own builds record telemetry (a device id, the OS, the process)
    under ~/.cache/Microsoft and upload it; embedding must leave nothing there."""
    import os
    import subprocess
    import sys

    def run(how: str, home: Path, **extra: str) -> bool:
        env = {
            k: v
            for k, v in os.environ.items()
            # (onnxruntime stays quiet on CI machines by itself: look like a user's)
            if k not in {"CI", "GITHUB_ACTIONS", "GITLAB_CI", "CIRCLECI", "TF_BUILD"}
            and k != "ORT_DISABLE_TELEMETRY"
        }
        env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), **extra)
        env["PYTHONPATH"] = str(ROOT / "src")
        subprocess.run([sys.executable, "-c", _TELEMETRY_CHILD, how], check=True, env=env)
        return (home / ".cache" / "Microsoft").exists()

    recorded = run("plain", tmp_path / "plain")  # onnxruntime imported as it comes
    assert not run("ours", tmp_path / "ours")
    # A user's explicit choice stands (``0``: onnxruntime's default, telemetry on).
    assert run("ours", tmp_path / "chosen", ORT_DISABLE_TELEMETRY="0") == recorded


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="threads"):
        SentenceEmbedder(threads=0)
    with pytest.raises(ValueError, match="alpha"):
        HybridRetriever(HashingEmbedder(), alpha=1.5)
    with pytest.raises(TypeError):
        SentenceEmbedder().batch([b"bytes"])  # type: ignore[list-item]


def test_idle_onnxruntime_workers_wait_instead_of_spinning() -> None:
    options = SentenceEmbedder()._options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
