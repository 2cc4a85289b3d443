"""The optional compiled helper (everything else is in pyproject.toml).

``darwin_memo._cjoin`` runs the published merge rule's consolidation join in C: a
consolidating tick of a 100k store takes seconds instead of half a minute. It is
optional: where no C compiler is found the install goes on without it and the same
groups come from Python (``darwin_memo.native``). It uses only the stable ABI
(``Py_LIMITED_API``, Python 3.10 and later), so a wheel is built once per platform
(``abi3``), not once per Python version.
"""

import sys

from setuptools import Extension, setup

# No fused multiply-add: the bounds are computed as Python computes them.
FLAGS = [] if sys.platform == "win32" else ["-O2", "-ffp-contract=off"]

setup(
    ext_modules=[
        Extension(
            "darwin_memo._cjoin",
            ["src/darwin_memo/_cjoin.c"],
            optional=True,
            extra_compile_args=FLAGS,
            py_limited_api=True,
        ),
    ],
    # Wheels are tagged cp310-abi3: one serves Python 3.10 and every later version.
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
