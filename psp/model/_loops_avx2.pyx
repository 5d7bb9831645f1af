# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The pooling loop of :mod:`psp.model._loops` built for CPUs with AVX2 (x86-64 only), which
:mod:`psp.model.pooling` takes where the CPU has it (:func:`psp.model._loops.cpu_has_avx2`).

Pooling reads four table rows and writes one output row per pass: eight floats per instruction
instead of the four of the platform's baseline build (SSE2) made it 20-35 % faster in one
measurement (``docs/benchmarks.md``). Same source (``_pool.pxi``), same bits.
"""

from libc.stdint cimport int32_t, int64_t
from libc.string cimport memset

include "_pool.pxi"
