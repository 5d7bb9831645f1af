"""The minibatch step's two memory-bound loops, compiled with numba: the gradient of the pooled
rows and the row-sparse Adam update in place.

A P-SP minibatch touches a few thousand rows of the table. Done with torch ops, its update
gathers those rows of the table and of both moments (``index_select``, three random-row reads),
updates the gathered copies and scatters all three back: six passes over ~16 MB each, which were
most of a step's time. Here each row of the table and of both moments is read and written once,
where it lives, and the backward of mean pooling writes each gradient row once, so a step moves
about a third of the bytes. Both loops run on the calling thread (``nogil``): the trainer's
workers (:mod:`psp.train.parallel`) run them side by side on one shared table, updating rows in
place as fastText and word2vec do (Hogwild: a row two workers update at once may lose part of
one update, which sparse gradients make rare).

CPU only; on other devices :mod:`psp.train.optim` and :mod:`psp.train.step` use torch ops for
the same arithmetic.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import torch

_JIT = {"nogil": True, "cache": True, "error_model": "numpy"}


@numba.njit(**_JIT)
def _row_gradients(grad_emb, bag_lengths, local, n_rows):
    dim = grad_emb.shape[1]
    out = np.zeros((n_rows, dim), dtype=grad_emb.dtype)
    scaled = np.empty(dim, dtype=grad_emb.dtype)
    t = 0
    for b in range(grad_emb.shape[0]):
        length = bag_lengths[b]
        if length == 0:
            continue
        divisor = grad_emb.dtype.type(length)
        for j in range(dim):
            scaled[j] = grad_emb[b, j] / divisor
        for _ in range(length):
            row = out[local[t]]
            for j in range(dim):
                row[j] += scaled[j]
            t += 1
    return out


def row_gradients(
    grad_emb: torch.Tensor, local: torch.Tensor, offsets: torch.Tensor, n_rows: int
) -> torch.Tensor:
    """The gradient of mean pooling on the pooled rows: ``(n_rows, dim)``.

    Row ``r`` gets, for every token ``t`` with ``local[t] == r``, the output gradient of
    ``t``'s bag divided by the bag's length, summed in token order (the order, and so the bits,
    of a stable sort by row followed by ``embedding_bag(mode="sum")``).

    Args:
        grad_emb: ``(n_bags, dim)`` gradient of the bags' means.
        local: ``int64`` row of each token in ``[0, n_rows)``.
        offsets: ``n_bags + 1`` token offsets.
    """
    lengths = (offsets[1:] - offsets[:-1]).numpy()
    return torch.from_numpy(
        _row_gradients(grad_emb.detach().contiguous().numpy(), lengths, local.numpy(), n_rows)
    )


@numba.njit(**_JIT)
def _adam_rows(weight, exp_avg, exp_avg_sq, rows, grad, constants):
    grad_scale, step_size, avg_weight, beta2, sq_weight, bias2_sqrt, eps = constants
    dim = weight.shape[1]
    for k in range(rows.shape[0]):
        w, m, v, g = weight[rows[k]], exp_avg[rows[k]], exp_avg_sq[rows[k]], grad[k]
        for j in range(dim):
            gj = g[j] * grad_scale
            mj = m[j] + avg_weight * (gj - m[j])
            vj = v[j] * beta2 + sq_weight * gj * gj
            m[j] = mj
            v[j] = vj
            w[j] -= step_size * mj / (np.sqrt(vj) / bias2_sqrt + eps)


def adam_rows_(
    adam, rows: torch.Tensor, grad: torch.Tensor, *, grad_scale: float | torch.Tensor = 1.0
) -> None:
    """One Adam step of rows ``rows`` (unique) of a :class:`psp.train.optim.LazyAdam`'s table and
    moments, in place, at its step count ``adam.steps``.

    ``grad`` is ``(len(rows), dim)``, multiplied by ``grad_scale`` (gradient clipping) as it is
    read. The arithmetic is ``torch.optim.Adam``'s; the constants are formed in double
    precision, as torch forms them.
    """
    (beta1, beta2), step = adam.betas, adam.steps
    constants = np.array(
        [
            float(grad_scale),
            adam.lr / (1 - beta1**step),
            1 - beta1,
            beta2,
            1 - beta2,
            math.sqrt(1 - beta2**step),
            adam.eps,
        ],
        dtype=np.float32,
    )
    _adam_rows(
        adam.weight.numpy(),
        adam.exp_avg.numpy(),
        adam.exp_avg_sq.numpy(),
        rows.numpy(),
        grad.detach().contiguous().numpy(),
        constants,
    )


# -- Hardest negatives from a bfloat16 similarity block, made exact ---------------------------
#
# A bfloat16 product runs at about 4.5x the float32 rate on CPUs with AVX512-BF16 or AMX, but
# its entries are off by up to ``A + B |s|`` (inputs rounded to 8 significant bits, the float32
# sum, the output rounded again). The true maximum of a row therefore lies within ``TOLERANCE``
# (twice that bound) of the row's bfloat16 maximum; the kernels re-score those few candidates
# exactly in float32 and keep the best, so the negatives are those of the float32 product.

_BF16_UNIT = 2.0**-8


def candidate_tolerance(dim: int) -> float:
    """Gap below a bfloat16 row maximum within which the exact maximum can lie (unit rows).

    ``|s~ - s| <= (2u + u^2) + d 2^-24 + u |s~| / (1 - u)`` for the dot product ``s`` of two
    unit vectors of ``d`` floats and its bfloat16 product ``s~`` (``u = 2^-8``; inputs rounded,
    a float32 sum of ``d`` terms in any order, the output rounded); with ``|s~| <= 1.02``, twice
    the bound separates the true maximum from the bfloat16 one.
    """
    u = _BF16_UNIT
    per_entry = (2 * u + u * u) * 1.0001 + 1.01 * dim * 2.0**-24 + 1.02 * u / (1 - u)
    return 2 * per_entry


@numba.njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc", "contract"})
def _dot(a, b):
    total = np.float32(0.0)
    for k in range(a.shape[0]):
        total += a[k] * b[k]
    return total


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _keys(bits, out):
    """Order-preserving integer keys of bfloat16 values given as their ``int16`` bits (no NaN):
    the magnitude bits of negative values flipped, so that integer order is float order. Integer
    maxima and comparisons vectorise where float ones would not; the map is its own inverse."""
    for j in range(bits.shape[0]):
        b = bits[j]
        out[j] = b ^ ((b >> 15) & np.int16(0x7FFF))


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _value(key, scratch):
    """The float of a :func:`_keys` key (``scratch``: a float32 array of one, with its int32
    view)."""
    floats, ints = scratch
    bits = key ^ ((key >> 15) & np.int16(0x7FFF))
    ints[0] = np.int32(bits) << 16
    return floats[0]


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _key_below(value, scratch):
    """A key no greater than that of any bfloat16 value at or above ``value``: the key of
    ``value`` cut to bfloat16, less one (cutting rounds a negative value up)."""
    floats, ints = scratch
    floats[0] = value
    bits = np.int16(ints[0] >> 16)
    key = bits ^ ((bits >> 15) & np.int16(0x7FFF))
    return np.int16(max(np.int32(key) - 1, -32768))


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _hardest_of_rows(product, lo, src, tgt, tol, col_best, key, out):
    """Per row ``i`` of the bfloat16 block ``product`` (``src[lo:lo + len(product)] @ tgt.T``
    as ``int16`` bits, partners at ``-inf``): ``out[lo + i]``, the column of the exact maximum
    among the entries within ``tol`` of the row's maximum (ties to the lowest column); and the
    keys ``col_best`` raised to the block's column maxima."""
    scratch = (np.empty(1, np.float32), np.empty(1, np.int32))
    scratch = (scratch[0], scratch[0].view(np.int32))
    for i in range(product.shape[0]):
        _keys(product[i], key)
        best = np.int16(-32768)
        for j in range(key.shape[0]):
            best = max(best, key[j])
            col_best[j] = max(col_best[j], key[j])
        cut = _key_below(_value(best, scratch) - tol, scratch)
        best_exact, best_j = -np.inf, -1
        for j in range(key.shape[0]):
            if key[j] >= cut:
                exact = _dot(src[lo + i], tgt[j])
                if exact > best_exact:
                    best_exact, best_j = exact, j
        out[lo + i] = best_j


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _cuts(col_best, tol):
    """Per column, the key below which no entry can be within ``tol`` of the column's best."""
    scratch = (np.empty(1, np.float32), np.empty(1, np.int32))
    scratch = (scratch[0], scratch[0].view(np.int32))
    cuts = np.empty_like(col_best)
    for j in range(col_best.shape[0]):
        cuts[j] = _key_below(_value(col_best[j], scratch) - tol, scratch)
    return cuts


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _column_candidates(product, lo, col_best, tol, key):
    """The block's entries within ``tol`` of their column's maximum so far (``col_best``, this
    block's included): ``(rows, columns, keys)``. Entries kept from earlier blocks may no longer
    qualify: :func:`_columns_hardest` checks them against the final maxima."""
    cuts = _cuts(col_best, tol)
    count = 0
    for i in range(product.shape[0]):
        _keys(product[i], key)
        for j in range(key.shape[0]):
            count += key[j] >= cuts[j]
    rows = np.empty(count, dtype=np.int64)
    cols = np.empty(count, dtype=np.int64)
    keys = np.empty(count, dtype=np.int16)
    k = 0
    for i in range(product.shape[0]):
        _keys(product[i], key)
        for j in range(key.shape[0]):
            if key[j] >= cuts[j]:
                rows[k], cols[k], keys[k] = lo + i, j, key[j]
                k += 1
    return rows, cols, keys


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _columns_hardest(src, tgt, rows, cols, keys, col_best, tol, out):
    """``out[j]``: the row of the exact maximum of column ``j`` among its candidates (in
    increasing row order, so ties go to the lowest row)."""
    cuts = _cuts(col_best, tol)
    best_exact = np.full(out.shape[0], -np.inf, dtype=np.float32)
    for k in range(rows.shape[0]):
        j = cols[k]
        if keys[k] >= cuts[j]:
            exact = _dot(src[rows[k]], tgt[j])
            if exact > best_exact[j]:
                best_exact[j], out[j] = exact, rows[k]


def hardest_negatives_bfloat16(
    src: torch.Tensor, tgt: torch.Tensor, block: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`psp.train.negatives.mine_negatives` through bfloat16 products (CPU).

    Each block of rows is one bfloat16 ``src @ tgt.T`` product into a reused buffer (a fresh
    one costs more in page faults than the product), partners set to ``-inf``. The kernels read
    it a row at a time as integer keys (:func:`_keys`) and re-score the row and column
    candidates within :func:`candidate_tolerance` of the maxima as float32 dot products of the
    given rows.
    """
    n, dim = src.shape
    tol = np.float32(candidate_tolerance(dim))
    src_np, tgt_np = src.contiguous().numpy(), tgt.contiguous().numpy()
    s16, t16 = src.bfloat16(), tgt.bfloat16()
    neg_tgt = np.empty(n, dtype=np.int64)
    neg_src = np.empty(n, dtype=np.int64)
    col_best = np.full(n, -32768, dtype=np.int16)
    key = np.empty(n, dtype=np.int16)
    product = torch.empty(min(block, n), n, dtype=torch.bfloat16)
    candidates = []
    for lo in range(0, n, block):
        hi = min(n, lo + block)
        sims = torch.mm(s16[lo:hi], t16.T, out=product[: hi - lo])
        sims.diagonal(offset=lo).fill_(-np.inf)
        bits = sims.view(torch.int16).numpy()
        _hardest_of_rows(bits, lo, src_np, tgt_np, tol, col_best, key, neg_tgt)
        candidates.append(_column_candidates(bits, lo, col_best, tol, key))
    rows, cols, keys = (np.concatenate(part) for part in zip(*candidates))
    _columns_hardest(src_np, tgt_np, rows, cols, keys, col_best, tol, neg_src)
    return torch.from_numpy(neg_tgt), torch.from_numpy(neg_src)
