"""Hand-written Numba peers for bench.py: what a skilled Numba user writes for each row.

One row per `prange` iteration, float32 accumulators and float32 constants (a float literal or a float64
accumulator would promote the work to float64), outputs preallocated once and passed in (`into`), and
reductions compiled with `fastmath={"reassoc"}`: reassociation lets LLVM split a sum into vector lanes
(tracejit reassociates reductions too) without the flags that change NaN and Inf results.
Accuracy against NumPy: see benchmarks/README.md ("numba" column).
"""
from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np
from numba import prange

F32 = np.float32
ZERO, ONE, TWO, THREE = F32(0), F32(1), F32(2), F32(3)
HALF, GELU_C, GELU_K = F32(0.5), F32(0.7978845608028654), F32(0.044715)
LAYERNORM_EPS, RMSNORM_EPS = F32(1e-5), F32(1e-6)
REASSOC = {"reassoc"}
SUM_BLOCK = 4096           # float32 partial sums of this many elements, combined in float64
TILE_ROWS, TILE_COLS = 16, 8   # transpose tiles: 16x8 beat 32x32 on the development machine (issue 18)


def into(kernel: Callable, out_shape: Callable[..., tuple] = lambda x, *rest: x.shape) -> Callable:
    """`kernel(*inputs, out)` called with an output allocated once per input shape, outside the timed
    calls, as a user who calls a kernel in a loop would do."""
    outs: dict[tuple, np.ndarray] = {}

    def call(*inputs):
        key = tuple(x.shape for x in inputs)
        if key not in outs:
            outs[key] = np.empty(out_shape(*inputs), dtype=inputs[0].dtype)
        kernel(*inputs, outs[key])
        return outs[key]
    return call


@numba.njit(parallel=True)
def gelu(x, out):
    for i in prange(x.size):
        v = x[i]
        out[i] = HALF * v * (ONE + np.tanh(GELU_C * (v + GELU_K * v * v * v)))


@numba.njit(parallel=True)
def axpbz(x, z, out):
    for i in prange(x.size):
        out[i] = TWO * x[i] + THREE * z[i] + ONE


# Each row's loops are a separate function: Numba applies `fastmath` to the loops of a plain function, but
# the same loops written inside a `prange` body stay scalar (measured: rmsnorm 1.07 -> 0.48 ms, sum 7.4 ->
# 1.3 ms at the full sizes).

@numba.njit(fastmath=REASSOC)
def softmax_row(row, dst):
    """The max is a select, not a NaN test: a NaN in the row still makes every output NaN, through the sum.
    (LLVM vectorises the sum but not this max: a vector max needs the no-NaN flag.)"""
    m = row[0]
    for j in range(1, row.size):
        v = row[j]
        m = v if v > m else m   # noqa: FURB136 (the select the docstring means)
    s = ZERO
    for j in range(row.size):
        e = np.exp(row[j] - m)
        dst[j] = e
        s += e
    inv = ONE / s
    for j in range(row.size):
        dst[j] *= inv


@numba.njit(fastmath=REASSOC)
def layernorm_row(row, dst):
    n = F32(row.size)
    s = ZERO
    for j in range(row.size):
        s += row[j]
    mean = s / n
    ss = ZERO
    for j in range(row.size):
        d = row[j] - mean
        ss += d * d
    inv = ONE / np.sqrt(ss / n + LAYERNORM_EPS)
    for j in range(row.size):
        dst[j] = (row[j] - mean) * inv


@numba.njit(fastmath=REASSOC)
def rmsnorm_row(row, dst):
    ss = ZERO
    for j in range(row.size):
        ss += row[j] * row[j]
    inv = ONE / np.sqrt(ss / F32(row.size) + RMSNORM_EPS)
    for j in range(row.size):
        dst[j] = row[j] * inv


@numba.njit(fastmath=REASSOC)
def block_sum(v):
    s = ZERO
    for j in range(v.size):
        s += v[j]
    return s


@numba.njit(parallel=True)
def softmax(x, out):
    for i in prange(x.shape[0]):
        softmax_row(x[i], out[i])


@numba.njit(parallel=True)
def layernorm(x, out):
    for i in prange(x.shape[0]):
        layernorm_row(x[i], out[i])


@numba.njit(parallel=True)
def rmsnorm(x, out):
    for i in prange(x.shape[0]):
        rmsnorm_row(x[i], out[i])


@numba.njit(parallel=True)
def total(x):
    """Blocks of SUM_BLOCK summed in float32 lanes, the block sums in float64: about as accurate as
    NumPy's pairwise sum, at float32 speed."""
    s = 0.0
    for b in prange((x.size + SUM_BLOCK - 1) // SUM_BLOCK):
        s += np.float64(block_sum(x[b * SUM_BLOCK:(b + 1) * SUM_BLOCK]))
    return F32(s)


@numba.njit(parallel=True)
def transpose_add(x, y, out):
    rows, cols = out.shape
    for tile in prange((rows + TILE_ROWS - 1) // TILE_ROWS):
        i0 = tile * TILE_ROWS
        for j0 in range(0, cols, TILE_COLS):
            for i in range(i0, min(i0 + TILE_ROWS, rows)):
                for j in range(j0, min(j0 + TILE_COLS, cols)):
                    out[i, j] = x[j, i] + y[i, j]


@numba.njit(parallel=True)
def matmul(a, b, out):
    for i in prange(a.shape[0]):   # i-k-j order: the inner loop is unit-stride and vectorises
        dst = out[i]
        dst[:] = ZERO
        for k in range(a.shape[1]):
            aik = a[i, k]
            for j in range(b.shape[1]):
                dst[j] += aik * b[k, j]


@numba.njit(parallel=True)
def bias_gelu(h, b, out):
    for i in prange(h.shape[0]):
        for j in range(h.shape[1]):
            v = h[i, j] + b[j]
            out[i, j] = HALF * v * (ONE + np.tanh(GELU_C * (v + GELU_K * v * v * v)))


def linear_gelu(x, w, b, out):
    """NumPy's BLAS for the product (Numba's own np.dot needs SciPy), then bias and GELU in one loop."""
    h = np.matmul(x, w, out=out)
    bias_gelu(h, b, out)


@numba.njit(parallel=True)
def scale_shift(x, out):
    for i in prange(x.size):
        out[i] = x[i] * TWO + ONE


def transposed_shape(x, y) -> tuple:
    return (x.shape[1], x.shape[0])


def product_shape(a, b, *rest) -> tuple:
    return (a.shape[0], b.shape[1])


PEERS: dict[str, Callable] = {
    "gelu": into(gelu),
    "axpbz": into(axpbz),
    "softmax": into(softmax),
    "layernorm": into(layernorm),
    "rmsnorm": into(rmsnorm),
    "sum": total,
    "transpose_add": into(transpose_add, transposed_shape),
    "matmul": into(matmul, product_shape),
    "linear_gelu": into(linear_gelu, product_shape),
    "dispatch": into(scale_shift),
}
