"""``bench/perf/file_floor.py``: the leaner layouts it measures rank as they should."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from darwin_memo.ledger import Ledger

ROOT = Path(__file__).resolve().parents[2]


def test_file_floor_reports_each_layout(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with Ledger.open(path) as ledger:
        for i in range(300):
            ledger.add(
                f"why does job {i} of the nightly build fail on runner r{i % 17}?",
                f"the cache of runner r{i % 17} is stale: clear /var/cache/ci-{i} and rerun",
            )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "perf" / "file_floor.py"), str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout)
    assert report["entries"] == 300
    sizes = {k: v for k, v in report.items() if k.endswith("(bytes/entry)")}
    assert set(sizes) == {
        "store (bytes/entry)",
        "compact (bytes/entry)",
        "compact+toks (bytes/entry)",
        "compact+zlib (bytes/entry)",
        "separate lists (bytes/entry)",
    }
    # Keeping the token text costs bytes, deflating the text saves some, and every
    # layout is smaller than the store itself (which also has tickets, events, ...).
    assert sizes["compact+toks (bytes/entry)"] > sizes["compact (bytes/entry)"]
    assert sizes["compact+zlib (bytes/entry)"] < sizes["compact (bytes/entry)"]
    assert max(sizes.values()) == sizes["store (bytes/entry)"]
