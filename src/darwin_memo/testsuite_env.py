"""Compatibility path: this module moved to ``darwin_memo.sim.testsuite_env``.

``darwin_memo.testsuite_env`` is a published module path, so it stays importable; code inside
the package imports from the new home.
"""

from .sim.testsuite_env import (
    DEFECTS,
    TEST_NAMES,
    TEST_SOURCE,
    RentedTestSuiteEnv,
    TestSuiteEnv,
    app_source,
    run_suite,
    run_suite_detail,
)

__all__ = [
    "DEFECTS",
    "TEST_NAMES",
    "TEST_SOURCE",
    "RentedTestSuiteEnv",
    "TestSuiteEnv",
    "app_source",
    "run_suite",
    "run_suite_detail",
]
