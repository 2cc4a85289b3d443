"""Layer 2, the economy: the rules of energy as pure functions and one config dataclass.

* ``rules``: spawn stake, upkeep, the credit curve (``gain * tanh(delta / scale)``),
  the cap, and ``Books`` (the running totals every energy movement is checked against);
* ``lifecycle``: paying an outcome along provenance, probation and juvenile counters,
  death causes;
* ``merge``: what a group of near-duplicates becomes (the heir);
* ``config``: ``SurvivalConfig``, the knobs of all of the above.

No I/O: the store and ledger call these rules and record what they did.
"""
