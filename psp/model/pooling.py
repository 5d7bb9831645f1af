"""Sentence vectors from a piece table, without torch: mean pooling, unit rows, cosines.

:func:`mean_pool` is the one inference pooling: ``psp.load(dir).embed`` (through
:meth:`psp.model.torch_model.PSPModel.pool`), ``psp embed`` and ``psp score`` (through
:class:`TableModel`) all call it, so the library and the command line give the same bits from the
same code.
:func:`normalize_rows` and :func:`row_cosines` are the one row normaliser and the one paired
cosine of the package (inference, the miner's shards, the evaluators). No torch here: importing
it costs about 2 s of CPU, as long as embedding 100,000 news sentences takes.

Pooling is one compiled loop (``psp.model._loops.pool``, built for AVX2 too) over the sentences: each sentence's
rows are added in order into its float32 output row, four at a pass, and divided by the piece
count. It gives the bits of
the sparse matrix product it replaced (scipy adds the rows in the same order) at 2.6 times its
rate. :meth:`SentenceEmbedder.embed` gives each thread chunks of its own to tokenise and pool.
Training pools with
:func:`psp.train.ops.pool` instead; its forward, ``F.embedding_bag(mode="mean")``, adds and
divides the same way and gives the same bits on the CPU (``tests/test_train_ops.py``), except that
training keeps the ``<unk>`` row of a sentence with no known piece where :func:`mean_pool` writes
zeros.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from psp.model import _loops
from psp.model.directory import ModelConfig, read_model_dir
from psp.model.piece_encoder import PieceEncoder

__all__ = [
    "TableModel",
    "SentenceEmbedder",
    "fresh_rows",
    "half_rows",
    "load_table_model",
    "mean_pool",
    "normalize_rows",
    "row_cosines",
]

#: Thread pools by size, kept across calls (starting threads per batch costs more than pooling).
_POOLS: dict[int, ThreadPoolExecutor] = {}
#: Sentences per task when pooling runs on several threads.
_TASK_SENTENCES = 2048


def _pool_loop():
    """The compiled pooling loop for this CPU: the AVX2 build where the CPU has it and it was
    built (x86-64), else the platform's baseline build. Both give the same bits."""
    if _loops.cpu_has_avx2():
        try:
            from psp.model import _loops_avx2
        except ImportError:
            pass
        else:
            return _loops_avx2.pool
    return _loops.pool


_POOL = _pool_loop()


def half_rows(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out[...] = x`` for float32 ``x`` and float16 ``out`` (both C-contiguous), the same bits
    as numpy's cast at 4-5 times its rate (numpy's cast took 5 ns a value here, as long as
    pooling the row it came from)."""
    flat = x.reshape(-1)
    _loops.half_bits(flat.view(np.uint32), flat, out.reshape(-1).view(np.uint16))
    return out


def mean_pool(
    table: np.ndarray,
    ids: np.ndarray,
    offsets: np.ndarray,
    *,
    out: np.ndarray,
    textless_ids: Sequence[int],
    threads: int = 1,
) -> np.ndarray:
    """Mean of ``table``'s rows for each encoded sentence, written into ``out`` and returned.

    Args:
        table: float32 ``(vocab_size, dim)`` piece embeddings (a float16 model file is
            widened when it is read).
        ids, offsets: :meth:`PieceEncoder.encode`'s layout: sentence ``i`` is
            ``ids[offsets[i]:offsets[i + 1]]``.
        out: ``(n, dim)`` float32 (or float64) array, ``n = len(offsets) - 1``.
        textless_ids: the pieces that carry no text (:attr:`PieceEncoder.textless_ids`, one or
            two): a sentence of nothing else pools to the zero vector. It has no meaning to
            embed, and the shared ``<unk>`` (or bare word-boundary) row would make any two such
            sentences a perfect match; a zero row has cosine 0 with everything.
        threads: sentences split into tasks run on this many threads (the loop releases the
            GIL).
    """
    n = len(offsets) - 1
    if out.dtype not in (np.float32, np.float64) or out.shape[0] < n:
        raise ValueError(f"out must be float32 with at least {n} rows, got {out.dtype} {out.shape}")
    if out.dtype != np.float32 or not out.flags.c_contiguous:
        # The sums are float32 whatever the output, in rows of their own.
        np.copyto(
            out[:n],
            mean_pool(
                table,
                ids,
                offsets,
                out=fresh_rows(n, out.shape[1]),
                textless_ids=textless_ids,
                threads=threads,
            ),
        )
        return out
    textless = np.resize(np.asarray(textless_ids, dtype=np.int64), 2)
    table = np.ascontiguousarray(table, dtype=np.float32)
    ids = np.ascontiguousarray(ids, dtype=np.int32)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    step = max(1, min(_TASK_SENTENCES, -(-n // max(threads, 1))))
    starts = range(0, n, step)

    def task(start: int) -> None:
        _POOL(table, ids, offsets, textless, out, start, min(start + step, n))

    if threads > 1 and len(starts) > 1:
        if threads not in _POOLS:
            _POOLS[threads] = ThreadPoolExecutor(threads, thread_name_prefix="pool")
        list(_POOLS[threads].map(task, starts))
    else:
        for start in starts:
            task(start)
    return out


def default_threads() -> int:
    """The CPUs this process may run on (its affinity mask, where the OS has one), capped by
    ``OMP_NUM_THREADS`` when that is set (a job pinned to fewer threads)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    pinned = os.environ.get("OMP_NUM_THREADS", "")
    return max(1, min(cpus or 1, int(pinned) if pinned.isdigit() else cpus or 1))


def fresh_rows(n: int, dim: int) -> np.ndarray:
    """A new ``(n, dim)`` float32 array in plain 4 KiB pages of private anonymous memory.

    numpy asks for transparent huge pages on a large array: their first touch is fast where the
    kernel has free huge pages (0.08 s for 465 MB on one host) and slow where it must compact
    memory first (1.0 s on another, against 0.15 s for small pages); small private pages cost
    the same everywhere (0.2-0.26 s here). A shared mapping (``mmap``'s default) costs more per
    page (0.29-0.34 s).
    """
    if n * dim == 0:
        return np.zeros((n, dim), dtype=np.float32)
    private = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    return np.frombuffer(mmap.mmap(-1, 4 * n * dim, flags=private), dtype=np.float32).reshape(
        n, dim
    )


class SentenceEmbedder:
    """``embed``, for a model with ``dim``, ``encoder`` and ``pool``: :class:`TableModel` and
    :class:`psp.model.torch_model.PSPModel` embed through this one loop, so they give the same
    bits."""

    def default_threads(self) -> int:
        """Threads of an ``embed`` call without ``num_threads``."""
        return default_threads()

    def embed_context(self, threads: int):
        """The context an ``embed`` call runs in (torch's threads, for a torch model)."""
        return contextlib.nullcontext()

    def embed(
        self,
        sentences: Sequence[str] | str,
        batch_size: int = 8192,
        *,
        show_progress: bool | None = None,
        num_threads: int | None = None,
        normalize: bool = False,
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        """Embed sentences; float32 ``(n, dim)`` in input order, or ``(dim,)`` for a lone string.

        Args:
            sentences: raw text (lowercasing and tokenisation happen here).
            batch_size: sentences per tokeniser call; large batches keep the per-call overhead
                negligible.
            show_progress: tqdm bar; ``None`` shows it only on a terminal and for more than one
                batch.
            num_threads: CPU threads for tokenising and pooling; ``None``:
                :meth:`default_threads` (the CPUs this process may use; for a torch model,
                torch's setting).
            normalize: scale each row to unit L2 norm (cosine becomes a dot product).
            out: write the rows into this ``(n, dim)`` float array (a reused buffer or an
                ``np.memmap``) instead of a new one (:func:`fresh_rows`); it is also returned.
        """
        from psp.model.progress import progress

        threads = num_threads or self.default_threads()
        single = isinstance(sentences, str)
        if single:
            sentences = [sentences]
        n = len(sentences)
        if out is None:
            out = fresh_rows(n, self.dim)
        elif out.shape != (n, self.dim) or out.dtype not in (np.float32, np.float64):
            raise ValueError(
                f"out must be a float array of shape {(n, self.dim)}, got {out.shape} {out.dtype}"
            )
        # tqdm's disable=None means "only on a terminal"; a single batch never gets a bar.
        disable = (None if n > batch_size else True) if show_progress is None else not show_progress
        # Each thread tokenises and pools chunks of its own: the word cache's lookups and the
        # pooling run without the GIL, so the threads share nothing but the cache's growth.
        chunk = max(1, min(batch_size, -(-n // threads)))
        starts = range(0, n, chunk)
        inner = 1 if len(starts) > 1 else threads

        def embed_chunk(start: int) -> int:
            stop = min(start + chunk, n)
            ids, offsets = self.encoder.encode(sentences[start:stop], num_threads=inner)
            self.pool(ids, offsets, out[start:stop], 1)
            return stop - start

        with self.embed_context(threads), progress(total=n, unit="sent", disable=disable) as bar:
            if threads == 1 or len(starts) == 1:
                for start in starts:
                    bar.update(embed_chunk(start))
            else:
                with ThreadPoolExecutor(threads, thread_name_prefix="embed") as pool:
                    for done in pool.map(embed_chunk, starts):
                        bar.update(done)
        if normalize:
            normalize_rows(out, out=out)
        return out[0] if single else out


class TableModel(SentenceEmbedder):
    """A model for inference only: tokenizer, float32 table and :func:`mean_pool`, no torch."""

    def __init__(self, config: ModelConfig, encoder: PieceEncoder, table: np.ndarray):
        self.config = config
        self.encoder = encoder
        self.table = table

    @property
    def dim(self) -> int:
        return self.config.dim

    def pool(
        self, ids: np.ndarray, offsets: np.ndarray, out: np.ndarray, threads: int = 1
    ) -> np.ndarray:
        """:func:`mean_pool` of encoded sentences (:meth:`PieceEncoder.encode`'s layout)."""
        textless = self.encoder.textless_ids
        return mean_pool(self.table, ids, offsets, out=out, textless_ids=textless, threads=threads)


def load_table_model(path: str | os.PathLike) -> TableModel:
    """:class:`TableModel` of a model directory (checked as :func:`read_model_dir` does), its
    float32 table mapped from the file, read-only."""
    return TableModel(*read_model_dir(path, map_table=True))


def normalize_rows(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Rows of ``x`` scaled to unit L2 norm (into ``out``, which may be ``x``; else a new
    array); an all-zero row stays zero, so it has cosine 0 with everything."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    np.maximum(norms, 1e-12, out=norms)
    return np.divide(x, norms, out=out)


def row_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of ``a[i]`` and ``b[i]`` for every row (``a`` and ``b`` are left as they are); a
    zero row scores 0."""
    return np.einsum("ij,ij->i", normalize_rows(a), normalize_rows(b))
