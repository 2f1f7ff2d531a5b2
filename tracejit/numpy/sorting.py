"""Sorting along an axis on traced tensors: np.sort, np.argsort (stable), np.median, np.nanmedian,
np.percentile / np.quantile (linear interpolation, q known while tracing) and tj.topk, with NumPy's
axis, keepdims and result dtypes. Each sorted row is one graph SORT node; medians and percentiles read it
at positions known while tracing, so they fuse into the sorting kernel. Functions whose result shape
depends on the data (np.unique, np.nonzero) are refused with the alternative."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np

from tracejit.errors import ArgumentValueError, ShapeError, TraceError, UnsupportedError
from tracejit.ir import build
from tracejit.ir.dtypes import BOOL, INT64, is_float, is_inexact
from tracejit.ir.evaluate import constant_value
from tracejit.ir.graph import Node, Op
from tracejit.numpy import reductions as R
from tracejit.numpy.functions import _axes, _axis
from tracejit.numpy.tensor import ArrayLike, Tensor, as_node, python_value

__all__ = ["argsort", "median", "nanmedian", "percentile", "quantile", "sort", "topk"]


def sort(
    a: ArrayLike,
    axis: int = -1,
    kind: str | None = None,
    order: str | Sequence[str] | None = None,
    *,
    stable: bool | None = None,
) -> Tensor:
    """A sorted copy along axis (None: of the flattened array); NaNs last. Every kind is stable here."""
    x, ax = _row_axis(a, axis, order, "sort")
    return Tensor(build.sort(x, ax))


def argsort(
    a: ArrayLike,
    axis: int = -1,
    kind: str | None = None,
    order: str | Sequence[str] | None = None,
    *,
    stable: bool | None = None,
) -> Tensor:
    """Positions that sort a along axis (int64), always stable: equal values keep their order, as
    kind="stable" in NumPy (which NumPy's default quicksort does not promise)."""
    x = as_node(a)
    x, ax = _row_axis(x, None if not x.shape else axis, order, "argsort")
    return Tensor(build.cast(build.sort(x, ax, indices=True), INT64))


def topk(x: ArrayLike, k: int, axis: int = -1) -> tuple[Tensor, Tensor]:
    """The k largest values along axis, largest first, and their positions (int64). Equal values come
    in order of position, lowest first; NaN counts as larger than every number (np.sort puts it last)."""
    node = as_node(x)
    k = python_value(k, "tj.topk's k")
    if isinstance(k, Tensor):
        raise TraceError("tj.topk: k is a traced value; k must be a Python int (name it static)")
    ax = _axis(axis, len(node.shape))
    n, k = node.shape[ax], int(k)
    if not 0 <= k <= n:
        raise ShapeError(f"tj.topk: k={k} is out of range for an axis of length {n}")
    first_k = _along(ax, len(node.shape), (n - 1, -1, k), node.shape)  # the last k, largest first
    values = build.slice_(build.sort(node, ax), first_k) if k else _empty(node, ax, node.dtype)
    if not k:
        return Tensor(values), Tensor(_empty(node, ax, INT64))
    # ties by lowest position: a stable sort of the reversed row, read backwards, counts positions from the end
    backwards = build.slice_(node, _along(ax, len(node.shape), (n - 1, -1, n), node.shape))
    from_end = build.slice_(build.sort(backwards, ax, indices=True), first_k)
    positions = build.binary(Op.SUB, build.const(n - 1, np.int32, from_end.shape), from_end)
    return Tensor(values), Tensor(build.cast(positions, INT64))


def median(
    a: ArrayLike,
    axis: int | Sequence[int] | None = None,
    out: Tensor | None = None,
    overwrite_input: bool = False,
    keepdims: bool = False,
) -> Tensor:
    """The middle of each sorted row (the mean of the two middle values for an even length, with np.mean's
    dtype: float64 for ints); NaN where the row has a NaN, as in NumPy."""
    _no_out(out, "median")
    x, ax, shape = _rows(a, axis, keepdims)
    n = x.shape[ax]
    if n == 0:  # NumPy warns (mean of an empty slice) and gives NaN
        return Tensor(
            build.const(math.nan, np.result_type(x.dtype, np.float16) if is_inexact(x.dtype) else np.float64, shape)
        )
    s = build.sort(x, ax)
    middle = build.slice_(s, _along(ax, len(x.shape), (n // 2 - (n % 2 == 0), 1, 2 - n % 2), x.shape))
    result = R.mean(Tensor(middle), axis=ax, keepdims=True)._node
    return Tensor(build.reshape(_nan_if_any(s, ax, result), shape))


def nanmedian(
    a: ArrayLike,
    axis: int | Sequence[int] | None = None,
    out: Tensor | None = None,
    overwrite_input: bool = False,
    keepdims: bool = False,
) -> Tensor:
    """median ignoring NaNs: the middle of the numbers of each row (NaN for a row of NaNs, as NumPy, which
    warns)."""
    _no_out(out, "nanmedian")
    node = as_node(a)
    if not is_inexact(node.dtype):
        return median(node, axis, keepdims=keepdims)
    x, ax, shape = _rows(node, axis, keepdims)
    n = x.shape[ax]
    if n == 0:
        return Tensor(build.const(math.nan, x.dtype, shape))
    s = build.sort(x, ax)  # the numbers first, then the NaNs
    count = build.reduce(build.cast(build.unary(Op.ISNAN, x), np.int32), "sum", (ax,))
    count = build.binary(Op.SUB, build.const(n, np.int32, count.shape), count)
    dt = np.dtype(np.float32) if x.dtype == np.float16 else x.dtype  # np.mean's accumulator

    def int32(value) -> Node:
        return build.const(value, np.int32, count.shape)

    low, high = (
        _at_position(s, ax, build.binary(Op.IDIV, build.binary(Op.SUB, count, int32(d)), int32(2)), dt) for d in (1, 0)
    )
    mean = build.binary(Op.DIV, build.binary(Op.ADD, low, high), build.const(2, dt, low.shape))
    odd = build.binary(Op.EQ, build.binary(Op.MOD, count, int32(2)), int32(1))
    result = build.cast(build.where(odd, high, mean), x.dtype)
    none = build.binary(Op.EQ, count, int32(0))
    return Tensor(build.reshape(build.where(none, build.const(math.nan, x.dtype, result.shape), result), shape))


def percentile(
    a: ArrayLike,
    q: ArrayLike,
    axis: int | Sequence[int] | None = None,
    out: Tensor | None = None,
    overwrite_input: bool = False,
    method: str = "linear",
    keepdims: bool = False,
    *,
    weights: ArrayLike | None = None,
    interpolation: str | None = None,
) -> Tensor:
    """q-th percentiles (q in [0, 100], a number or a short sequence known while tracing) by linear
    interpolation between the sorted values, with NumPy's arithmetic and result dtype."""
    _check_quantile_args(out, method, weights, interpolation, "percentile")
    q_values = _static_q(q, "percentile")
    if not np.all((q_values >= 0) & (q_values <= 100)):
        raise ArgumentValueError(f"np.percentile: percentiles must be in the range [0, 100], got {q!r}")
    return _quantiles(a, q, np.true_divide(q_values, 100), axis, keepdims, "percentile")


def quantile(
    a: ArrayLike,
    q: ArrayLike,
    axis: int | Sequence[int] | None = None,
    out: Tensor | None = None,
    overwrite_input: bool = False,
    method: str = "linear",
    keepdims: bool = False,
    *,
    weights: ArrayLike | None = None,
    interpolation: str | None = None,
) -> Tensor:
    """q-th quantiles (q in [0, 1]); see percentile."""
    _check_quantile_args(out, method, weights, interpolation, "quantile")
    q_values = _static_q(q, "quantile")
    if not np.all((q_values >= 0) & (q_values <= 1)):
        raise ArgumentValueError(f"np.quantile: quantiles must be in the range [0, 1], got {q!r}")
    return _quantiles(a, q, q_values, axis, keepdims, "quantile")


# --- the pieces ----------------------------------------------------------------------------------


def _row_axis(a, axis, order, name: str) -> tuple[Node, int]:
    if order is not None:
        raise UnsupportedError(f"np.{name}(order=...) sorts structured arrays, which tracejit does not have")
    x = as_node(a)
    if axis is None:
        return build.reshape(x, (x.size,)), 0
    return x, _axis(axis, len(x.shape))


def _rows(a, axis, keepdims: bool) -> tuple[Node, int, tuple[int, ...]]:
    """a with the axes to reduce moved last and merged into one, that axis, and the result's shape."""
    x = as_node(a)
    axes = _axes(axis, len(x.shape))
    kept = tuple(d for d in range(len(x.shape)) if d not in axes)
    shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape)) if keepdims else tuple(x.shape[d] for d in kept)
    rows = tuple(x.shape[d] for d in kept)
    x = build.reshape(build.permute(x, kept + axes), (*rows, math.prod(x.shape[d] for d in axes)))
    return x, len(rows), shape


def _along(ax: int, ndim: int, spec: tuple[int, int, int], shape) -> tuple[tuple[int, int, int], ...]:
    """A slice spec taking `spec` (start, step, length) along ax and everything elsewhere."""
    return tuple(spec if d == ax else (0, 1, shape[d]) for d in range(ndim))


def _empty(x: Node, ax: int, dtype) -> Node:
    return build.const(0, dtype, tuple(0 if d == ax else s for d, s in enumerate(x.shape)))


def _nan_if_any(s: Node, ax: int, result: Node) -> Node:
    """NaN where the sorted row s ends in a NaN (it has one), as NumPy's median and percentile give."""
    if not is_float(s.dtype):
        return result
    n = s.shape[ax]
    last = build.slice_(s, _along(ax, len(s.shape), (n - 1, 1, 1), s.shape))
    has_nan = build.broadcast_to(build.unary(Op.ISNAN, last), result.shape)
    return build.where(has_nan, build.const(math.nan, result.dtype, result.shape), result)


def _at_position(s: Node, ax: int, position: Node, dt) -> Node:
    """s's element at a position that depends on the data (one per row), as a reduction that picks it."""
    at = build.binary(Op.EQ, build.iota(s.shape, ax, np.int32), build.broadcast_to(position, s.shape))
    picked = build.where(at, build.cast(s, dt), build.const(-math.inf, dt, s.shape))
    return build.reduce(picked, "max", (ax,))


def _static_q(q, name: str) -> np.ndarray:
    q = python_value(q, f"np.{name}'s q")
    if isinstance(q, Tensor) and constant_value(q._node) is not None:  # np.linspace(0, 100, 5) in the code
        q = constant_value(q._node)
    if isinstance(q, Tensor):
        raise TraceError(
            f"np.{name}: q is a traced value; tracejit needs the quantiles while tracing (a "
            "number, a list or a NumPy array in the kernel's code, or a static argument)"
        )
    values = np.asanyarray(q)
    if values.ndim > 1:
        raise ArgumentValueError(f"np.{name}: q must be a scalar or 1d")
    return values


def _check_quantile_args(out, method, weights, interpolation, name: str) -> None:
    _no_out(out, name)
    if method != "linear" or interpolation is not None:
        raise UnsupportedError(
            f"np.{name}(method={method!r}): tracejit implements method='linear', NumPy's "
            "default (interpolation between the two nearest sorted values)"
        )
    if weights is not None:
        raise UnsupportedError(f"np.{name}(weights=...) is not supported by tracejit")


def _quantiles(a, q, fractions: np.ndarray, axis, keepdims: bool, name: str) -> Tensor:
    """NumPy's linear quantiles: at virtual index (n - 1) * q between the sorted neighbours, a + (b - a) * t
    below t = 0.5 and b - (b - a) * (1 - t) from it, computed in the dtype NumPy gives the result."""
    node = as_node(a)
    dt = _result_dtype(node.dtype, q, name)
    x, ax, shape = _rows(node, axis, keepdims)
    n = x.shape[ax]
    if n == 0:
        raise ShapeError(
            f"np.{name} of an empty axis (shape {node.shape}, axis {axis}): there is no value to "
            "interpolate; NumPy raises IndexError"
        )
    s = build.sort(x, ax)
    with np.errstate(all="ignore"):
        virtual = np.asanyarray((n - 1) * fractions)
    results = [
        _interpolate(s, ax, float(v) if virtual.dtype.kind == "f" else int(v), n, dt, shape)
        for v in virtual.reshape(-1)
    ]
    return Tensor(_stack(results) if virtual.ndim else results[0])


def _interpolate(s: Node, ax: int, virtual, n: int, dt: np.dtype, shape) -> Node:
    def at(i: int) -> Node:
        return build.slice_(s, _along(ax, len(s.shape), (i, 1, 1), s.shape))

    if isinstance(virtual, int):  # an integer quantile index: the value itself, as NumPy takes it
        return build.reshape(_nan_if_any(s, ax, build.cast(at(virtual), dt)), shape)
    if virtual >= n - 1:  # both neighbours are the last value: NumPy's b - (b - b) * (1 - t) is b, or NaN for inf
        last = build.cast(at(n - 1), dt)
        if is_float(dt):
            last = build.where(build.unary(Op.ISINF, last), build.const(math.nan, dt, last.shape), last)
        return build.reshape(_nan_if_any(s, ax, last), shape)
    lo = math.floor(virtual)
    hi, t = lo + 1, virtual - lo
    diff = build.cast(build.binary(Op.SUB, at(hi), at(lo)), dt)  # NumPy subtracts in the input's dtype
    a, b = build.cast(at(lo), dt), build.cast(at(hi), dt)
    if t >= 0.5:
        value = build.binary(Op.SUB, b, build.binary(Op.MUL, diff, build.const(1 - t, dt, diff.shape)))
    else:
        value = build.binary(Op.ADD, a, build.binary(Op.MUL, diff, build.const(t, dt, diff.shape)))
    return build.reshape(_nan_if_any(s, ax, value), shape)


def _result_dtype(dt: np.dtype, q, name: str) -> np.dtype:
    """The dtype NumPy's np.percentile / np.quantile gives for this input dtype and this q (a Python number
    keeps float32 input float32; a list or float64 array makes it float64)."""
    if dt == BOOL:
        raise UnsupportedError(
            f"np.{name} of a bool array: NumPy cannot subtract bools and refuses it too; "
            "convert with .astype(np.float64) first"
        )
    probe = np.zeros(2, dt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(np, name)(probe, q).dtype


def _stack(results: list[Node]) -> Node:
    """Results of one shape stacked along a new first axis, as index-selected reads (never materialised)."""
    m, shape = len(results), results[0].shape
    which = build.iota((m, *shape), 0, np.int32)
    out = None
    for i, r in enumerate(results):
        placed = build.pad(build.reshape(r, (1, *shape)), ((i, m - 1 - i), *((0, 0),) * len(shape)), 0)
        if out is None:
            out = placed
        else:
            chosen = build.binary(Op.EQ, which, build.const(i, np.int32, which.shape))
            out = build.where(chosen, placed, out)
    assert out is not None  # callers stack at least one result
    return out


def _no_out(out, name: str) -> None:
    if out is not None:
        raise UnsupportedError(f"np.{name}(..., out=...) is not supported while tracing; use the returned value")


NUMPY_FUNCTIONS = {
    np.sort: sort,
    np.argsort: argsort,
    np.median: median,
    np.nanmedian: nanmedian,
    np.percentile: percentile,
    np.quantile: quantile,
}
