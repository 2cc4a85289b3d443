"""Fill the measured tables of ``docs/performance.md`` from the committed scale results.

    python bench/perf/report.py           # rewrite the generated blocks of the doc
    python bench/perf/report.py --check   # exit 1 if a block is stale

The doc's prose is written by hand; its two tables of measurements (issue 4's targets
and the whole scale table) sit between ``<!-- generated: NAME -->`` and
``<!-- end generated -->`` lines and are computed here, from ``RESULTS`` (the output of
``bench/perf/scale.py``, the latest full run) with ``scale.py``'s own ``table`` and
``targets``. ``tests/backends/test_reliability.py`` runs the check
(``test_performance_doc_tables_match_the_committed_results``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import scale  # noqa: E402

ROOT = HERE.parents[1]
DOC = ROOT / "docs" / "performance.md"
#: The latest run of ``scale.py`` (the only scale result kept in the repository).
RESULTS = HERE / "results-scale.json"

BLOCK = re.compile(
    r"(<!-- generated: (?P<name>[a-z-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.DOTALL
)

#: Issue 4's targets as the doc words them, in scale.targets()'s order.
TARGET_LABELS = [
    "in-process decide p50, realistic queries",
    "in-process decide, each adversarial query",
    "embedding decide p50, 256-dimension `HashingEmbedder`",
    "upkeep tick",
    "consolidating tick",
    "consolidating tick",
    "cold CLI `ledger decide`, wall",
    "cold CLI `ledger settle`, wall",
    "cold CLI `ledger decide`, wall",
    "cold CLI `ledger settle`, wall",
    "peak RSS of the `decide` process",
    "peak RSS of the `settle` process",
    "open a store and answer the first decide, in-process",
]


def _in_unit(value: float, label: str) -> str:
    if "RSS" in label:
        return f"{scale.fmt(value)} MB"
    return f"{scale.fmt(value / 1000)} s" if value >= 1000 else f"{scale.fmt(value)} ms"


def _measured(value: Any, limit: float, label: str) -> tuple[str, str]:
    """The limit and the measured figure, each in ms, s or MB as reads best."""
    shown_limit = _in_unit(limit, label).replace(".00 ", " ").replace(".0 ", " ")
    if isinstance(value, list):  # over the benchmark's cap
        return shown_limit, f"> {value[1]:g} s (cap)"
    return shown_limit, _in_unit(value, label)


def targets_table(results: dict[str, Any]) -> str:
    rows = scale.targets(results)
    lines = [
        '| target (issue 4, "Done when") | size | limit | measured | |',
        "|---|---:|---:|---:|---|",
    ]
    sized = [t for t in rows if "n" in t]
    assert len(sized) == len(TARGET_LABELS), "scale.targets() changed: update TARGET_LABELS"
    for label, t in zip(TARGET_LABELS, sized, strict=True):
        limit, measured = _measured(t["measured"], t["limit"], label)
        state = "not measured" if t["met"] is None else "met" if t["met"] else "**not met**"
        lines.append(f"| {label} | {scale._short(t['n'])} | {limit} | {measured} | {state} |")
    (overall,) = [t for t in rows if "n" not in t]
    state = "met" if overall["met"] else "**not met**: " + "; ".join(overall["not_better"])
    if not any(size.get(scale.REF) for size in results["sizes"]):
        state = "not measured (this run measured ours only)"
    lines.append(
        "| ours better than the published package on every row but the two build rows, "
        f"at every size | | | | {state} |"
    )
    return "\n".join(lines)


def blocks(results: dict[str, Any]) -> dict[str, str]:
    return {"targets": targets_table(results), "whole-table": scale.table(results)}


def load() -> dict[str, Any]:
    results: dict[str, Any] = json.loads(RESULTS.read_text(encoding="utf-8"))
    results["sizes"].sort(key=lambda s: s["n"])
    return results


def render(doc: str, results: dict[str, Any]) -> str:
    wanted = blocks(results)
    seen: list[str] = []

    def fill(m: re.Match[str]) -> str:
        name = m.group("name")
        if name not in wanted:
            raise SystemExit(f"docs/performance.md names an unknown generated block: {name}")
        seen.append(name)
        return f"{m.group(1)}{wanted[name]}\n{m.group(4)}"

    out = BLOCK.sub(fill, doc)
    missing = sorted(set(wanted) - set(seen))
    if missing:
        raise SystemExit(f"docs/performance.md lacks the generated blocks {missing}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--check", action="store_true", help="exit 1 if a generated block is stale")
    ns = p.parse_args(argv)
    doc = DOC.read_text(encoding="utf-8")
    new = render(doc, load())
    if ns.check:
        if new != doc:
            print("docs/performance.md is stale: run python bench/perf/report.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
