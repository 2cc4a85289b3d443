"""The on-disk cache of onnxruntime's optimized MiniLM graph (retrieval/graphcache.py).

A session loaded from the cache must give the vectors of a session built as before,
to the bit; the cache is untrusted input (a truncated, corrupt or planted entry is
rebuilt, a symlink never followed); and a cache that cannot be written never stops
embedding. Each test points ``DARWIN_MEMO_CACHE_DIR`` at its own ``tmp_path``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from darwin_memo.retrieval import graphcache
from darwin_memo.retrieval.embedding import MODEL_SHA256, SentenceEmbedder, embeddings_available

pytestmark = pytest.mark.skipif(
    not embeddings_available(), reason="needs the [embeddings] extra (pip install -e '.[dev]')"
)

ROOT = Path(__file__).resolve().parents[2]

#: Varied inputs: prose, identifiers, non-ASCII scripts, emoji, empty-ish, and texts
#: past the 256-token truncation (batched together, so padding differs by row).
TEXTS = [
    "Caroline went to the LGBTQ support group yesterday and found it really powerful.",
    "What did Melanie paint last week?",
    "ERROR 0x8007000E: not enough memory at /usr/lib/python3.11/site-packages/foo.py:123",
    "Ünïcödé straße, café, naïve façade",
    "日本語のテキストです。東京で会いましょう。",
    "Привет, как дела? Всё хорошо.",
    "مرحبا بالعالم",
    "emoji 😀🎉👍 party",
    "",
    " ",
    "?",
    "a",
    "word " * 600,
    "x" * 5000,
    " ".join(f"token{i}" for i in range(400)),
]


def _embed(embedder: SentenceEmbedder) -> list[list[float]]:
    return [*embedder.batch(TEXTS), embedder(TEXTS[1]), embedder(TEXTS[8])]


@pytest.fixture(scope="module")
def reference() -> dict[int | None, list[list[float]]]:
    """The vectors of the session built as before the cache (no cache involved)."""
    return {
        threads: _embed(SentenceEmbedder(threads=threads, cache=False)) for threads in (None, 1)
    }


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "cache"
    monkeypatch.setenv(graphcache.CACHE_ENV, str(where))
    return where


def _entry(cache: Path) -> Path:
    import onnxruntime

    return cache / graphcache.entry_name(MODEL_SHA256, onnxruntime.__version__)


def _loaded_from_cache(embedder: SentenceEmbedder) -> bool:
    import onnxruntime

    level = embedder._session.get_session_options().graph_optimization_level
    return bool(level == onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL)


def _sound(entry: Path) -> bool:
    manifest = json.loads((entry / "manifest.json").read_text())
    return all(
        graphcache._sha256(entry / name) == digest for name, digest in manifest["sha256"].items()
    )


@pytest.mark.parametrize("threads", [None, 1])
def test_cached_vectors_are_the_uncached_ones_to_the_bit(
    cache: Path, reference: dict[int | None, list[list[float]]], threads: int | None
) -> None:
    building = SentenceEmbedder(threads=threads)
    assert _embed(building) == reference[threads]
    assert not _loaded_from_cache(building)
    entry = _entry(cache)
    assert sorted(p.name for p in entry.iterdir()) == ["manifest.json", "model.onnx", "weights.bin"]
    assert _sound(entry)
    assert oct(cache.stat().st_mode & 0o777) == "0o700"
    assert oct(entry.stat().st_mode & 0o777) == "0o700"
    loaded = SentenceEmbedder(threads=threads)
    assert _embed(loaded) == reference[threads]
    assert _loaded_from_cache(loaded)
    # Nothing else was left behind (no staging directory).
    assert [p.name for p in cache.iterdir()] == [entry.name]


@pytest.mark.parametrize(
    "damage",
    [
        "truncated weights",
        "flipped byte in the weights",  # loads fine: only the sha256 check can catch it
        "flipped byte in the graph",
        "garbage manifest",
        "missing manifest",
    ],
)
def test_a_damaged_entry_is_rebuilt_never_trusted(
    cache: Path, reference: dict[int | None, list[list[float]]], damage: str
) -> None:
    SentenceEmbedder()._load()
    entry = _entry(cache)
    if damage == "truncated weights":
        with open(entry / "weights.bin", "r+b") as handle:
            handle.truncate(1000)
    elif damage.startswith("flipped byte"):
        name = "weights.bin" if damage.endswith("weights") else "model.onnx"
        data = bytearray((entry / name).read_bytes())
        data[len(data) // 2] ^= 0x40
        (entry / name).write_bytes(bytes(data))
    elif damage == "garbage manifest":
        (entry / "manifest.json").write_text("{not json")
    else:
        (entry / "manifest.json").unlink()
    if "manifest" not in damage:
        assert not _sound(entry)
    again = SentenceEmbedder()
    assert _embed(again) == reference[None]
    assert not _loaded_from_cache(again)
    assert _sound(entry)
    third = SentenceEmbedder()
    third._load()
    assert _loaded_from_cache(third)


def test_a_sealed_entry_loads_without_hashing_and_any_write_is_caught(
    cache: Path, monkeypatch: pytest.MonkeyPatch, reference: dict[int | None, list[list[float]]]
) -> None:
    SentenceEmbedder()._load()
    entry = _entry(cache)
    hashed: list[str] = []
    real = graphcache._sha256
    monkeypatch.setattr(graphcache, "_sha256", lambda path: hashed.append(path.name) or real(path))
    fast = SentenceEmbedder()
    assert _embed(fast) == reference[None]
    assert _loaded_from_cache(fast) and hashed == []  # the identity matched: no 90 MB hash
    # A write that puts the modification time back still moves the ctime: hashed, caught.
    weights = entry / "weights.bin"
    info = weights.stat()
    with open(weights, "r+b") as handle:
        handle.seek(info.st_size // 2)
        byte = handle.read(1)
        handle.seek(info.st_size // 2)
        handle.write(bytes([byte[0] ^ 0x40]))
    os.utime(weights, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert weights.stat().st_mtime_ns == info.st_mtime_ns and weights.stat().st_size == info.st_size
    again = SentenceEmbedder()
    assert _embed(again) == reference[None]
    assert not _loaded_from_cache(again) and "weights.bin" in hashed
    assert _sound(entry)


def test_an_entry_of_the_first_format_is_built_again_once(cache: Path) -> None:
    SentenceEmbedder()._load()
    entry = _entry(cache)
    manifest = json.loads((entry / "manifest.json").read_text())
    (entry / "manifest.json").write_text(json.dumps({"format": 1, "sha256": manifest["sha256"]}))
    rebuilt = SentenceEmbedder()
    rebuilt._load()
    assert not _loaded_from_cache(rebuilt)
    assert json.loads((entry / "manifest.json").read_text())["format"] == graphcache.FORMAT
    again = SentenceEmbedder()
    again._load()
    assert _loaded_from_cache(again)


def test_a_copied_cache_is_checked_by_its_hashes_and_used(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    SentenceEmbedder()._load()
    copy = tmp_path / "restored"
    copy.mkdir(mode=0o700)
    shutil.copytree(_entry(cache), _entry(copy))  # other inodes and ctimes, same bytes
    monkeypatch.setenv(graphcache.CACHE_ENV, str(copy))
    hashed: list[str] = []
    real = graphcache._sha256
    monkeypatch.setattr(graphcache, "_sha256", lambda path: hashed.append(path.name) or real(path))
    embedder = SentenceEmbedder()
    embedder._load()
    assert _loaded_from_cache(embedder)
    assert sorted(hashed) == ["model.onnx", "weights.bin"]


def test_a_symlink_planted_at_the_entry_is_not_followed(
    cache: Path, tmp_path: Path, reference: dict[int | None, list[list[float]]]
) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    cache.mkdir(mode=0o700)
    entry = _entry(cache)
    entry.symlink_to(target, target_is_directory=True)
    embedder = SentenceEmbedder()
    assert _embed(embedder) == reference[None]
    assert sorted(p.name for p in target.iterdir()) == ["keep.txt"]
    assert (target / "keep.txt").read_text() == "mine"
    assert not entry.is_symlink() and _sound(entry)


def test_a_symlink_planted_inside_the_entry_is_not_followed(
    cache: Path, tmp_path: Path, reference: dict[int | None, list[list[float]]]
) -> None:
    SentenceEmbedder()._load()
    entry = _entry(cache)
    outside = tmp_path / "weights-elsewhere.bin"
    (entry / "weights.bin").rename(outside)
    before = outside.read_bytes()
    (entry / "weights.bin").symlink_to(outside)
    embedder = SentenceEmbedder()
    assert _embed(embedder) == reference[None]
    assert not _loaded_from_cache(embedder)
    assert outside.read_bytes() == before
    assert not (entry / "weights.bin").is_symlink() and _sound(entry)


def test_an_entry_others_may_write_is_not_trusted(cache: Path) -> None:
    SentenceEmbedder()._load()
    entry = _entry(cache)
    entry.chmod(0o777)
    embedder = SentenceEmbedder()
    embedder._load()
    assert not _loaded_from_cache(embedder)
    assert oct(entry.stat().st_mode & 0o777) == "0o700"


def test_an_unwritable_cache_still_embeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reference: dict[int | None, list[list[float]]]
) -> None:
    # A path under a regular file cannot be created, whoever runs this (root included).
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(graphcache.CACHE_ENV, str(blocker / "cache"))
    assert _embed(SentenceEmbedder()) == reference[None]
    assert blocker.read_text() == "not a directory"
    if os.geteuid() != 0:  # permissions bind only other users than root
        readonly = tmp_path / "readonly"
        readonly.mkdir(mode=0o500)
        monkeypatch.setenv(graphcache.CACHE_ENV, str(readonly / "cache"))
        assert _embed(SentenceEmbedder()) == reference[None]
        assert list(readonly.iterdir()) == []


def test_the_cache_directory_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv(graphcache.CACHE_ENV, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert graphcache.cache_dir() == tmp_path / "home" / ".cache" / "darwin-memo"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/is/ignored")
    assert graphcache.cache_dir() == tmp_path / "home" / ".cache" / "darwin-memo"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert graphcache.cache_dir() == tmp_path / "xdg" / "darwin-memo"
    monkeypatch.setenv(graphcache.CACHE_ENV, str(tmp_path / "mine"))
    assert graphcache.cache_dir() == tmp_path / "mine"
    SentenceEmbedder()._load()
    assert _sound(_entry(tmp_path / "mine"))
    assert not (tmp_path / "xdg").exists() and not (tmp_path / "home").exists()


def test_a_build_sweeps_what_killed_builds_left(cache: Path) -> None:
    cache.mkdir(mode=0o700)
    stale = cache / f".{_entry(cache).name}.killed"
    stale.mkdir()
    (stale / "weights.bin").write_bytes(b"partial")
    old = stale.stat().st_mtime - graphcache.STALE_SECONDS - 60
    os.utime(stale, (old, old))
    live = cache / f".{_entry(cache).name}.building-now"
    live.mkdir()
    SentenceEmbedder()._load()
    assert not stale.exists()
    assert live.exists()


def test_the_entry_name_holds_what_the_graph_depends_on() -> None:
    name = graphcache.entry_name("ab" * 32, "1.32.0")
    other = graphcache.entry_name("cd" * 32, "1.32.0")
    newer = graphcache.entry_name("ab" * 32, "1.33.0")
    assert len({name, other, newer}) == 3
    assert "/" not in graphcache.entry_name("ab" * 32, "1.0/../../x")


_CHILD = """
import json, sys
from darwin_memo.retrieval.embedding import SentenceEmbedder
print(json.dumps(SentenceEmbedder().batch(sys.argv[1:])))
"""


def test_two_processes_building_at_once_both_succeed(
    cache: Path, reference: dict[int | None, list[list[float]]]
) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    texts = TEXTS[:4]
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, *texts], stdout=subprocess.PIPE, env=env, text=True
        )
        for _ in range(2)
    ]
    outputs = [child.communicate(timeout=120)[0] for child in children]
    assert [child.returncode for child in children] == [0, 0]
    for output in outputs:
        assert json.loads(output) == reference[None][:4]
    entry = _entry(cache)
    assert [p.name for p in cache.iterdir()] == [entry.name]
    assert _sound(entry)
