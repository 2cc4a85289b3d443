"""Layer 6, the loops and environments: selection runs, deterministic under a seed.

* ``survival``: ``SurvivalLoop`` and ``SurvivalReport`` (ask memory, let the environment
  act and measure, pay credit, upkeep, bury, merge);
* ``environments`` and ``testsuite_env``: worlds that measure outcomes;
* ``encode`` and ``reflection``: documents and trajectories turned into entries;
* ``diagnose``: findings about a run or a store (why selection did or did not work).
"""
