"""onnxruntime's optimized graph of the embedding model, kept on disk between processes.

Building an ``InferenceSession`` for the MiniLM model costs about 250 ms, most of it
onnxruntime optimizing the graph: a one-shot ``darwin-memo ledger STORE decide`` pays
it every time. So the first process builds the session with ``ORT_ENABLE_EXTENDED``
and asks onnxruntime to save the optimized graph (``optimized_model_filepath``, its
weights in a separate file that onnxruntime maps into memory); later processes load
that graph with optimizations off: the session loads four to five times faster, and
with the checks of its files, which a process makes before trusting them, the model
loads about 2.5 times faster. The vectors are bit-identical to those of
the default session (``ORT_ENABLE_ALL``, as before): checked on LoCoMo turns,
non-ASCII, empty and over-long texts with each thread setting, and by
``tests/retrieval/test_graph_cache.py``; onnxruntime's lower optimization levels,
which would load as fast without a cache, change them.

Where: ``$DARWIN_MEMO_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/darwin-memo``, else
``~/.cache/darwin-memo``. Each entry is a directory named by the model file's sha256,
the onnxruntime version, the machine and the optimization level, so a new model or a
new onnxruntime never reads an old graph. It holds the graph (``model.onnx``, 54 kB),
its float32 weights (``weights.bin``, about 90 MB: the int8 weights of the model as
onnxruntime computes with them) and ``manifest.json`` with the sha256 of both and
their identity when sealed (device, inode, size, mtime and ctime).

The cache is untrusted input. An entry is written in a new private directory
(``mkdtemp``: mode 0700, a fresh name) and renamed into place whole, so a reader sees
a complete entry or none, and two processes building at once both succeed (the second
rename fails and its copy is dropped; what a killed build left is swept by a later
build after an hour). An entry is used only when it is a real
directory of this user that no one else may write, and its files (never followed
through a link, checked to be regular files) are the ones sealed: each still has the
identity the manifest records (any write moves a file's ctime, which no process can
set back), or else its bytes have the sha256 the manifest names (hashing the 90 MB
costs about 60 ms, so it is done only when the identity differs: a cache copied or
restored from elsewhere). onnxruntime then opens them by name, in that directory.
Otherwise a truncated, corrupt or replaced entry (a symlink included, never
followed) is moved aside and built again. Any error while reading or writing the
cache (a read-only home, a full disk) falls back to building the session as before:
the cache never makes embedding fail.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["CACHE_ENV", "cache_dir", "cached_session", "entry_name"]

#: Environment variable naming the cache directory (overrides the XDG default).
CACHE_ENV = "DARWIN_MEMO_CACHE_DIR"
GRAPH = "model.onnx"
WEIGHTS = "weights.bin"
MANIFEST = "manifest.json"
#: Bumped when the layout of an entry changes (2: the manifest records the files' identity;
#: an entry of format 1 is built again once, rather than hashed on every load).
FORMAT = 2
#: A staging directory older than this was left by a build that was killed.
STALE_SECONDS = 3600
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")


def cache_dir() -> Path:
    """The directory darwin-memo caches derived files in (nothing is created here)."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    # The XDG spec says a relative XDG_CACHE_HOME is invalid and must be ignored.
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "darwin-memo"


def entry_name(model_sha256: str, ort_version: str) -> str:
    """The entry's directory name: everything the saved graph depends on."""
    parts = ("minilm", model_sha256[:32], f"ort{ort_version}", platform.machine(), "extended")
    return _UNSAFE.sub("_", "-".join(parts))


def cached_session(
    ort: Any,
    read_model: Callable[[], bytes],
    model_sha256: str,
    options: Callable[[], Any],
    providers: list[str],
) -> Any:
    """An ``InferenceSession`` of the model whose sha256 is ``model_sha256``: from the
    cache when it holds a sound entry, else built from ``read_model()`` (which checks
    the file against that sha256, and whose errors propagate) and, when possible,
    saved there. ``options()`` makes fresh ``SessionOptions`` with the caller's thread
    settings. A hit does not read the model file: the entry was made from it, checked."""
    try:
        root = cache_dir()
        entry = root / entry_name(model_sha256, str(ort.__version__))
    except (OSError, RuntimeError):  # no home directory to default to
        return _plain(ort, read_model(), options, providers)
    try:
        found = _load(ort, entry, options, providers)
    except Exception:  # an entry onnxruntime cannot read is rebuilt like a corrupt one
        found = None
    if found is not None:
        return found
    model = read_model()
    try:
        return _build(ort, model, root, entry, options, providers)
    except Exception:  # the cache could not be written: build as without one
        return _plain(ort, model, options, providers)


def _plain(ort: Any, model: bytes, options: Callable[[], Any], providers: list[str]) -> Any:
    """The session as it is built without a cache (onnxruntime's default optimizations)."""
    return ort.InferenceSession(model, sess_options=options(), providers=providers)


def _private_dir(path: Path) -> bool:
    """True when ``path`` is a real directory (not a link) of this user, writable by no one else."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.getuid()
        and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


def _sha256(path: Path) -> str:
    """The sha256 of a regular file, opened without following a symlink."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(f"{path} is not a regular file")
        digest = hashlib.sha256()
        buffer = bytearray(1 << 20)
        view = memoryview(buffer)
        while True:
            size = handle.readinto(buffer)
            if not size:
                return digest.hexdigest()
            digest.update(view[:size])


def _identity(path: Path) -> list[int]:
    """What any write to the file changes: device, inode, size, mtime and ctime (in
    nanoseconds). A link is not followed (``lstat``), and a non-file has none."""
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        raise OSError(f"{path} is not a regular file")
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def _unchanged(path: Path, sha256: object, identity: object) -> bool:
    """True when the file is the one sealed: its identity is the one recorded then (no
    write since: a write moves its ctime, which no process can set back), else its
    bytes hash to the recorded sha256 (a copied or restored cache)."""
    if isinstance(identity, list) and identity == _identity(path):
        return True
    return sha256 == _sha256(path)


def _load(ort: Any, entry: Path, options: Callable[[], Any], providers: list[str]) -> Any:
    """The session of a sound entry, or None (no entry, or one that fails a check)."""
    if not _private_dir(entry):
        return None
    fd = os.open(entry / MANIFEST, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        manifest = json.loads(handle.read(65536))
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        return None
    expected, identities = manifest.get("sha256"), manifest.get("identity", {})
    if not isinstance(expected, dict) or not isinstance(identities, dict):
        return None
    for name in (GRAPH, WEIGHTS):
        if not _unchanged(entry / name, expected.get(name), identities.get(name)):
            return None
    settings = options()
    settings.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(entry / GRAPH), sess_options=settings, providers=providers)


def _build(
    ort: Any,
    model: bytes,
    root: Path,
    entry: Path,
    options: Callable[[], Any],
    providers: list[str],
) -> Any:
    """Build the session, saving its optimized graph as a new entry; returns the session.

    A damaged entry found at ``entry`` is set aside first. When the rename into place
    fails, another process put its entry there first: theirs stays, this one's copy
    goes, and both sessions are the same."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not _private_dir(root):
        return _plain(ort, model, options, providers)
    _set_aside(root, entry)
    _sweep(root)
    staging = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=root))
    try:
        settings = options()
        settings.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        settings.optimized_model_filepath = str(staging / GRAPH)
        settings.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", WEIGHTS
        )
        settings.add_session_config_entry(
            "session.optimized_model_external_initializers_min_size_in_bytes", "1024"
        )
        session = ort.InferenceSession(model, sess_options=settings, providers=providers)
        with contextlib.suppress(OSError, ValueError):
            _seal(staging)
            os.rename(staging, entry)
        return session
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _seal(staging: Path) -> None:
    """Write the manifest: the sha256 and identity of the files onnxruntime saved in
    ``staging`` (renaming the directory into place changes neither)."""
    names = (GRAPH, WEIGHTS)
    manifest = {
        "format": FORMAT,
        "sha256": {name: _sha256(staging / name) for name in names},
        "identity": {name: _identity(staging / name) for name in names},
    }
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    with os.fdopen(os.open(staging / MANIFEST, flags, 0o600), "w", encoding="utf-8") as handle:
        json.dump(manifest, handle)


def _sweep(root: Path) -> None:
    """Remove what killed builds left behind: staging and trash directories (their names
    start with a dot) not touched for ``STALE_SECONDS``; a live build's are younger."""
    now = time.time()
    with contextlib.suppress(OSError):
        for child in os.scandir(root):
            if not child.name.startswith("."):
                continue
            with contextlib.suppress(OSError):
                info = child.stat(follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode) and now - info.st_mtime > STALE_SECONDS:
                    shutil.rmtree(child.path, ignore_errors=True)


def _set_aside(root: Path, entry: Path) -> None:
    """Remove whatever occupies ``entry`` (a stale or damaged entry, a planted link or
    file), renaming it first so a link is never followed: the link goes, its target
    stays as it was."""
    if not os.path.lexists(entry):
        return
    trash = Path(tempfile.mkdtemp(prefix=".trash.", dir=root))
    with contextlib.suppress(OSError):
        os.rename(entry, trash / "old")
    with contextlib.suppress(OSError):
        old = trash / "old"
        if os.path.islink(old) or not os.path.isdir(old):
            os.unlink(old)
    shutil.rmtree(trash, ignore_errors=True)
