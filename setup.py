"""The optional compiled helpers (everything else is in pyproject.toml).

``darwin_memo._cjoin`` runs the published merge rule's first consolidation of a large
store in C; ``darwin_memo._ctext`` counts ``HashingEmbedder``'s n-grams in C. Both are
optional: where no C compiler is found the install goes on without them and the same
results come from Python (``darwin_memo.native``).
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
        ),
        Extension(
            "darwin_memo._ctext",
            ["src/darwin_memo/_ctext.c"],
            optional=True,
            extra_compile_args=FLAGS,
        ),
    ]
)
