"""The package's one compiled module, :mod:`psp.model._loops` (Cython); everything else about the
package is in ``pyproject.toml``."""
from __future__ import annotations

import sys

from Cython.Build import cythonize
from setuptools import Extension, setup

# -O3 vectorises the pooling loop; no contraction into fused multiply-adds, so every CPU gives
# the same bits.
FLAGS = [] if sys.platform == "win32" else ["-O3", "-ffp-contract=off"]

setup(
    ext_modules=cythonize(
        [Extension("psp.model._loops", ["psp/model/_loops.pyx"], extra_compile_args=FLAGS)],
        compiler_directives={"language_level": 3},
    )
)
