"""Every Python example in the README runs, and the set-up commands stay in step with CI."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)


def test_readme_starts_with_the_two_setup_commands() -> None:
    first_block = re.search(r"```bash\n(.*?)```", README, flags=re.DOTALL)
    assert first_block is not None
    lines = [ln.split("#")[0].strip() for ln in first_block.group(1).strip().splitlines()]
    assert lines[0] == "pip install . && darwin-memo demo"
    assert lines[1] == 'pip install -e ".[dev]" && pytest'
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert lines[1] in ci


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_example_runs(
    index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code = compile(BLOCKS[index], f"README.md python block {index + 1}", "exec")
    exec(code, {"__name__": f"readme_example_{index}"})


def test_readme_has_examples() -> None:
    assert len(BLOCKS) >= 4
