"""A throwaway PostgreSQL cluster on loopback, from the machine's server programs.

``PgCluster.start()`` runs ``initdb`` into a temporary folder and ``pg_ctl`` on a
free port (as the ``postgres`` user when the tests run as root: initdb refuses
root), with trust authentication on 127.0.0.1 only. ``stop()`` and ``start()``
restart it in place; ``destroy()`` stops it and removes the folder.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

__all__ = ["PgCluster", "find_bindir", "pgserver_bindir"]


def find_bindir() -> Path | None:
    explicit = os.environ.get("DARWIN_MEMO_PG_BINDIR")
    candidates = [explicit] if explicit else []
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(str(Path(on_path).parent))
    for c in candidates:
        if c and (Path(c) / "initdb").exists() and (Path(c) / "pg_ctl").exists():
            return Path(c)
    return None


def pgserver_bindir() -> Path | None:
    """The server programs of the ``pgserver`` wheel (PostgreSQL 16 with pgvector), if any.

    As root the cluster runs as ``postgres``, who may not reach a venv under a private
    home: the programs are then copied to a world-readable temporary folder first.
    """
    import atexit
    import importlib.util

    spec = importlib.util.find_spec("pgserver")
    if spec is None or spec.origin is None:
        return None
    install = Path(spec.origin).parent / "pginstall"
    if not (install / "bin" / "initdb").exists():
        return None
    if os.geteuid() != 0:
        return install / "bin"
    copy = Path(tempfile.mkdtemp(prefix="darwin-memo-pgserver-"))
    atexit.register(shutil.rmtree, copy, True)
    os.chmod(copy, 0o755)
    shutil.copytree(install, copy / "pgserver" / "pginstall", symlinks=True)
    libs = install.parent.parent / "pgserver.libs"  # the programs' RPATH: $ORIGIN/../../..
    if libs.is_dir():
        shutil.copytree(libs, copy / "pgserver.libs", symlinks=True)
    return copy / "pgserver" / "pginstall" / "bin"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgCluster:
    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="darwin-memo-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.as_user: str | None = None
        if os.geteuid() == 0:
            self.as_user = "postgres"
            shutil.chown(self.root, self.as_user)
        self.user = self.as_user or "postgres"

    def _run(self, *args: str, timeout: float = 120) -> None:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self.as_user:
            cmd = ["runuser", "-u", self.as_user, "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, timeout=timeout, cwd=self.root)

    def url(self, store: str) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres?store={store}"

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-U", self.user, "-A", "trust", "-E", "UTF8")
        conf = self.data / "postgresql.conf"
        with conf.open("a") as fh:
            fh.write(
                f"\nlisten_addresses = '127.0.0.1'\nport = {self.port}\n"
                f"unix_socket_directories = '{self.root}'\n"
                "fsync = off\nmax_connections = 100\nshared_buffers = 32MB\n"
            )

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-w", "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def destroy(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def start_or_skip(bindir: Path | None, missing: str) -> PgCluster:
    """A started cluster from ``bindir``; else skip the test (fail it when required).

    ``missing`` says why there is no server ("" when ``bindir`` is usable). Under
    ``DARWIN_MEMO_REQUIRE_POSTGRES=1`` (as ``.ci/run`` sets) a missing or failing
    server fails instead of skipping.
    """
    import pytest

    required = os.environ.get("DARWIN_MEMO_REQUIRE_POSTGRES") == "1"
    if missing or bindir is None:
        reason = missing or "no PostgreSQL server programs"
        if required:
            pytest.fail(reason)
        pytest.skip(reason)
    cluster = PgCluster(bindir)
    try:
        cluster.init()
        cluster.start()
    except Exception as exc:
        cluster.destroy()
        if required:
            raise
        pytest.skip(f"could not start a PostgreSQL cluster from {bindir}: {exc}")
    return cluster
