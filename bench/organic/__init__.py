"""Benchmarks of the organic layer (``darwin_memo.organic``): scale and evidence."""
