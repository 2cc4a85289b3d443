"""Evidence benchmarks (issue 7): arms, a runner, statistics and the report.

Run from the repository root:

    .venv/bin/python -m bench.evidence.run            # writes bench/evidence/results/
    .venv/bin/python -m bench.evidence.report         # writes docs/benchmarks.md
    .venv/bin/python -m bench.evidence.report --check # fails if the doc is stale
"""
