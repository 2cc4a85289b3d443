"""Evidence benchmarks (issue 7): worlds, arms, a runner, statistics, figures, the report.

Run from the repository root:

    .venv/bin/python -m bench.evidence.run            # writes bench/evidence/results/
    .venv/bin/python -m bench.evidence.report         # docs/benchmarks.md + figures
    .venv/bin/python -m bench.evidence.report --check # fails if doc or figures are stale
"""
