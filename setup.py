"""The package's compiled modules (Cython): :mod:`psp.model._loops`, and on x86-64 its pooling loop
built for AVX2 as well (:mod:`psp.model._loops_avx2`, taken where the CPU has it). Everything else
about the package is in ``pyproject.toml``."""

from __future__ import annotations

import platform
import sys

from Cython.Build import cythonize
from setuptools import Extension, setup

# -O3 vectorises the pooling loop; no contraction into fused multiply-adds, so every CPU gives
# the same bits.
FLAGS = [] if sys.platform == "win32" else ["-O3", "-ffp-contract=off"]
EXTENSIONS = [Extension("psp.model._loops", ["psp/model/_loops.pyx"], extra_compile_args=FLAGS)]
if sys.platform != "win32" and platform.machine().lower() in ("x86_64", "amd64"):
    EXTENSIONS.append(
        Extension(
            "psp.model._loops_avx2",
            ["psp/model/_loops_avx2.pyx"],
            extra_compile_args=[*FLAGS, "-mavx2"],
        )
    )

setup(ext_modules=cythonize(EXTENSIONS, compiler_directives={"language_level": 3}))
