"""``bench/perf/templated.py``: the published merge rule against the weighted one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "perf" / "templated.py"


def test_the_weighted_rule_keeps_templated_lessons_and_merges_restatements() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--n", "1000"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    rows = {(r["store"], r["similarity"]): r for r in map(json.loads, proc.stdout.splitlines())}
    assert len(rows) == 4
    for store in ("single-template", "generator"):
        weighted = rows[store, "weighted"]
        assert weighted["lessons_known"] == weighted["lessons"] == 1000
        assert weighted["restatements"] == 100
        assert weighted["restatements_merged"] >= 98
    published = rows["single-template", "jaccard"]
    # One template: the published rule merges unrelated lessons and loses most of them.
    assert published["lessons_known"] < 1000 // 2
    assert published["after"] < 1000 // 2
