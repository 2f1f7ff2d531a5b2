"""Reductions and statistics (np.sum, np.var, np.argmax, np.nanmean, tj.logsumexp, ...) on traced tensors,
with NumPy's axis, keepdims, dtype, initial and where arguments and NumPy's result dtypes."""

from __future__ import annotations

import builtins
import math
import os
import sys
import warnings
from collections.abc import Sequence
from types import FrameType

import numpy as np
from numpy.typing import DTypeLike

from tracejit.errors import ShapeError, UnsupportedError
from tracejit.ir import build
from tracejit.ir.dtypes import BOOL, FLOAT64, INT64, check, identity, is_narrow_float, is_float, is_inexact, sum_dtype
from tracejit.ir.graph import Node, Op
from tracejit.numpy.functions import _axes, _axis, exp, isfinite, log, sqrt, subtract, true_divide, where as _where
from tracejit.numpy.statistic_log import Statistic, note
from tracejit.numpy.tensor import ArrayLike, Scalar, Tensor, as_node, python_value

__all__ = [
    "all",
    "amax",
    "amin",
    "any",
    "argmax",
    "argmin",
    "average",
    "count_nonzero",
    "logsumexp",
    "max",
    "mean",
    "min",
    "nanargmax",
    "nanargmin",
    "nanmax",
    "nanmean",
    "nanmin",
    "nanprod",
    "nanstd",
    "nansum",
    "nanvar",
    "prod",
    "ptp",
    "std",
    "sum",
    "var",
]

_COMBINE = {"sum": Op.ADD, "prod": Op.MUL, "max": Op.MAX, "min": Op.MIN}  # how `initial` joins a result


def _no_out(out, name: str) -> None:
    if out is not None:
        raise UnsupportedError(f"np.{name}(..., out=...) is not supported while tracing; use the returned value")


def _mask(where, shape) -> Node | None:
    """The `where=` argument as a bool node of `shape`, or None when every element takes part."""
    if where is True:
        return None
    m = as_node(where)
    if m.dtype != BOOL:
        m = build.binary(Op.NE, m, build.const(0, m.dtype, m.shape))
    return build.broadcast_to(m, shape)


def _squeeze(out: Node, axes: tuple[int, ...], keepdims: bool) -> Node:
    return out if keepdims else build.reshape(out, tuple(s for d, s in enumerate(out.shape) if d not in axes))


def _fill(x: Node, keep: Node | None, value) -> Node:
    """x where keep is True, else value (the identity that makes an element not count)."""
    if keep is None:
        return x
    return build.where(keep, x, build.const(value, x.dtype, x.shape))


def _count(mask: Node | None, shape, axes, dt) -> Node | float:
    """Elements taking part per reduced slice: a Python number, or a reduction of the mask."""
    if mask is None:
        return float(math.prod(shape[d] for d in axes))
    return build.reduce(build.cast(mask, dt), "sum", axes)


# --- sum, prod, max, min -------------------------------------------------------------------------


def _reduce(op: str, a, axis, keepdims: bool, dtype=None, initial=None, where=True, logical=False) -> Tensor:
    """`logical`: any/all, a max/min of bools whose identity (False/True) NumPy uses for empty slices."""
    a = as_node(a)
    axes = _axes(axis, len(a.shape))
    if op in ("max", "min") and initial is None and not logical:
        if builtins.any(a.shape[d] == 0 for d in axes):
            raise ShapeError(f"zero-size array (shape {a.shape}) to reduction operation {op} which has no identity")
        if where is not True:
            raise ShapeError(
                f"np.{op}(..., where=...) needs initial= (the value of a slice with no element selected), as in NumPy"
            )
    if dtype is not None:
        a = build.cast(a, check(dtype))
    elif op in ("sum", "prod"):
        a = build.cast(a, sum_dtype(a.dtype))
    a = _fill(a, _mask(where, a.shape), identity(op, a.dtype))
    out = build.reduce(a, op, axes) if axes else a
    if initial is not None:
        out = build.binary(_COMBINE[op], out, build.const(initial, out.dtype, out.shape))
    return Tensor(_squeeze(out, axes, keepdims))


def sum(
    a: ArrayLike,
    axis: int | Sequence[int] | None = None,
    dtype: DTypeLike | None = None,  # noqa: A001
    out: Tensor | None = None,
    keepdims: bool = False,
    initial: Scalar | None = None,
    where: ArrayLike = True,
) -> Tensor:
    _no_out(out, "sum")
    return _reduce("sum", a, axis, keepdims, dtype, initial, where)


def prod(
    a: ArrayLike,
    axis: int | Sequence[int] | None = None,
    dtype: DTypeLike | None = None,
    out: Tensor | None = None,
    keepdims: bool = False,
    initial: Scalar | None = None,
    where: ArrayLike = True,
) -> Tensor:
    _no_out(out, "prod")
    return _reduce("prod", a, axis, keepdims, dtype, initial, where)


def max(
    a: ArrayLike,
    axis: int | Sequence[int] | None = None,
    out: Tensor | None = None,
    keepdims: bool = False,  # noqa: A001
    initial: Scalar | None = None,
    where: ArrayLike = True,
) -> Tensor:
    _no_out(out, "max")
    return _reduce("max", a, axis, keepdims, None, initial, where)


def min(
    a: ArrayLike,
    axis: int | Sequence[int] | None = None,
    out: Tensor | None = None,
    keepdims: bool = False,  # noqa: A001
    initial: Scalar | None = None,
    where: ArrayLike = True,
) -> Tensor:
    _no_out(out, "min")
    return _reduce("min", a, axis, keepdims, None, initial, where)


amax, amin = max, min


def any(
    a: ArrayLike,
    axis: int | Sequence[int] | None = None,
    out: Tensor | None = None,
    keepdims: bool = False,
    *,  # noqa: A001
    where: ArrayLike = True,
) -> Tensor:
    _no_out(out, "any")
    return _reduce("max", _truth(a), axis, keepdims, where=where, logical=True)


def all(
    a: ArrayLike,
    axis: int | Sequence[int] | None = None,
    out: Tensor | None = None,
    keepdims: bool = False,
    *,  # noqa: A001
    where: ArrayLike = True,
) -> Tensor:
    _no_out(out, "all")
    return _reduce("min", _truth(a), axis, keepdims, where=where, logical=True)


def _truth(a) -> Node:
    a = as_node(a)
    return a if a.dtype == BOOL else build.binary(Op.NE, a, build.const(0, a.dtype, a.shape))


def count_nonzero(a: ArrayLike, axis: int | Sequence[int] | None = None, *, keepdims: bool = False) -> Tensor:
    return _reduce("sum", _truth(a), axis, keepdims, INT64)


def ptp(
    a: ArrayLike, axis: int | Sequence[int] | None = None, out: Tensor | None = None, keepdims: bool = False
) -> Tensor:
    _no_out(out, "ptp")
    return subtract(max(a, axis, keepdims=keepdims), min(a, axis, keepdims=keepdims))


# --- mean, var, std ------------------------------------------------------------------------------


def _float_dtypes(a: Node, dtype) -> tuple[np.dtype, np.dtype]:
    """(result dtype, accumulation dtype): NumPy's float64 for ints and bools; float16 sums in float32."""
    out_dt = check(dtype) if dtype is not None else (a.dtype if is_float(a.dtype) else FLOAT64)
    return out_dt, (np.dtype("float32") if out_dt == np.float16 else out_dt)


def mean(
    a: ArrayLike,
    axis: int | Sequence[int] | None = None,
    dtype: DTypeLike | None = None,
    out: Tensor | None = None,
    keepdims: bool = False,
    *,
    where: ArrayLike = True,
) -> Tensor:
    _no_out(out, "mean")
    a = as_node(a)
    out_dt, acc_dt = _float_dtypes(a, dtype)
    return Tensor(
        build.cast(_mean(build.cast(a, acc_dt), _axes(axis, len(a.shape)), keepdims, _mask(where, a.shape)), out_dt)
    )


def _warn_at_trace(message: str) -> None:
    """NumPy's RuntimeWarning for a statistic over no elements. Shapes are static, so it is known while
    tracing: it is given once, when the kernel is traced for that shape, not at every call."""
    warnings.warn(message, RuntimeWarning, stacklevel=_user_stacklevel())


def _user_stacklevel() -> int:
    """The stack level of the first frame outside tracejit and NumPy (the user's line)."""
    inside = (os.path.dirname(os.path.dirname(__file__)), os.path.dirname(np.__file__))
    frame: FrameType | None = sys._getframe(2)
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(inside):
        frame, level = frame.f_back, level + 1
    return level


def _mean(x: Node, axes, keepdims: bool, mask: Node | None) -> Node:
    count = _count(mask, x.shape, axes, x.dtype)
    total = _reduce("sum", _fill(x, mask, 0), axes, True)._node
    if isinstance(count, float):  # a static count divides as a constant (the layernorm mean is this node)
        if not count:
            _warn_at_trace("Mean of empty slice.")
        out = true_divide(Tensor(total), count if count else math.nan)._node
    else:
        out = build.binary(Op.DIV, total, count)
    return _squeeze(out, axes, keepdims)


def var(
    a: ArrayLike,
    axis: int | Sequence[int] | None = None,
    dtype: DTypeLike | None = None,
    out: Tensor | None = None,
    ddof: float = 0,
    keepdims: bool = False,
    *,
    where: ArrayLike = True,
    mean: ArrayLike | None = None,
    correction: float | None = None,
) -> Tensor:
    """Two-pass variance: the mean, then the mean of squared deviations from it (as NumPy computes it)."""
    _no_out(out, "var")
    a = as_node(a)
    return Tensor(_var(a, axis, dtype, _ddof(ddof, correction, mean, "var"), keepdims, _mask(where, a.shape)))


def std(
    a: ArrayLike,
    axis: int | Sequence[int] | None = None,
    dtype: DTypeLike | None = None,
    out: Tensor | None = None,
    ddof: float = 0,
    keepdims: bool = False,
    *,
    where: ArrayLike = True,
    mean: ArrayLike | None = None,
    correction: float | None = None,
) -> Tensor:
    _no_out(out, "std")
    a = as_node(a)
    return Tensor(
        _var(a, axis, dtype, _ddof(ddof, correction, mean, "std"), keepdims, _mask(where, a.shape), root=True)
    )


def _ddof(ddof, correction, mean, name: str):
    ddof, correction = python_value(ddof, f"np.{name}'s ddof"), python_value(correction, f"np.{name}'s correction")
    if mean is not None:
        raise UnsupportedError(
            f"np.{name}(..., mean=...) is not supported; tracejit fuses the mean into the same kernel, so leave it out"
        )
    if correction is not None:
        if ddof != 0:
            raise ShapeError(f"np.{name}: ddof and correction can't be provided simultaneously")
        return correction
    return ddof


def _var(
    a: Node, axis, dtype, ddof, keepdims: bool, mask: Node | None, *, root: bool = False, nan_if_no_dof: bool = False
) -> Node:
    axes = _axes(axis, len(a.shape))
    out_dt, acc_dt = _float_dtypes(a, dtype)
    x = build.cast(a, acc_dt)
    m = build.broadcast_to(build.cast(_mean(x, axes, True, mask), acc_dt), x.shape)
    d = build.binary(Op.SUB, x, m)
    squares = _fill(build.binary(Op.MUL, d, d), mask, 0)
    total = build.reduce(squares, "sum", axes) if axes else squares
    bfloat16 = is_narrow_float(acc_dt)
    if bfloat16:  # divided by the count in float32 (in bfloat16 a count past 256 would round), then rounded
        total, acc_dt = build.cast(total, np.float32), np.dtype(np.float32)
    count = _count(mask, a.shape, axes, acc_dt)
    if isinstance(count, float) and count - ddof <= 0:
        _warn_at_trace("Degrees of freedom <= 0 for slice")
        # NumPy divides the sum of squares (>= 0) by max(count - ddof, 0) = 0: inf, or NaN for 0 and NaN.
        # Spelled out, since a division by a constant zero is where shader compilers take liberties
        # (std: the square root leaves inf and NaN as they are).
        positive = build.binary(Op.LT, build.const(0, acc_dt, total.shape), total)
        out = build.where(
            positive,
            build.const(math.nan if nan_if_no_dof else math.inf, acc_dt, total.shape),
            build.const(math.nan, acc_dt, total.shape),
        )
        return build.cast(_squeeze(out, axes, keepdims), out_dt)
    if isinstance(count, float):
        dof = build.const(count - ddof, acc_dt, total.shape)
    else:
        dof = build.binary(Op.SUB, count, build.const(ddof, acc_dt, count.shape))
        if nan_if_no_dof:  # NumPy's nanvar gives NaN where no degree of freedom is left
            dof = build.where(
                build.binary(Op.LE, dof, build.const(0, acc_dt, dof.shape)),
                build.const(math.nan, acc_dt, dof.shape),
                dof,
            )
        else:  # NumPy's var divides by max(count - ddof, 0)
            dof = build.binary(Op.MAX, dof, build.const(0, acc_dt, dof.shape))
    out = build.binary(Op.DIV, total, dof)
    if bfloat16:  # the variance a bfloat16, as NumPy's; std its square root, rounded again
        out = build.cast(out, out_dt)
    if root:
        out = sqrt(Tensor(out))._node
    if mask is None and axes:  # (a Dask array's var is combined from per-block moments: dask/plan.py)
        note(out, Statistic("std" if root else "var", a, axes, ddof))
    return build.cast(_squeeze(out, axes, keepdims), out_dt)


# --- argmax, argmin ------------------------------------------------------------------------------


def argmax(a: ArrayLike, axis: int | None = None, out: Tensor | None = None, *, keepdims: bool = False) -> Tensor:
    _no_out(out, "argmax")
    return _arg("max", a, axis, keepdims, "argmax")


def argmin(a: ArrayLike, axis: int | None = None, out: Tensor | None = None, *, keepdims: bool = False) -> Tensor:
    _no_out(out, "argmin")
    return _arg("min", a, axis, keepdims, "argmin")


def _arg(op: str, a, axis, keepdims: bool, name: str, skip_nan: bool = False) -> Tensor:
    """Index of the first extreme element: two reductions over one row, fused into one kernel.

    m = max(x); result = min over i of (i where x == m else n). NaN wins as in NumPy: max propagates
    it, and then the first NaN is the first hit. With skip_nan (nanargmax) NaNs take no part and an
    all-NaN slice gives -1 (NumPy raises there, which a kernel cannot do; JAX also returns -1).
    """
    a = as_node(a)
    ndim = len(a.shape)
    x, ax = (build.reshape(a, (a.size,)), 0) if axis is None else (a, _axis(axis, ndim))
    n = x.shape[ax]
    if n == 0:
        raise ShapeError(f"attempt to get {name} of an empty sequence")
    nan = build.unary(Op.ISNAN, x) if is_float(x.dtype) else None
    skip_nan = skip_nan and is_inexact(x.dtype)  # (NumPy's nanargmax of bfloat16 is its argmax)
    valid = build.binary(Op.EQ, nan, build.const(False, BOOL, x.shape)) if skip_nan and nan is not None else None
    m = build.broadcast_to(build.reduce(_fill(x, valid, identity(op, x.dtype)), op, (ax,)), x.shape)
    hit = build.binary(Op.EQ, x, m)
    if valid is not None:
        hit = build.binary(Op.AND, hit, valid)
    elif nan is not None:
        hit = build.binary(Op.OR, hit, nan)
    # the index is int32 where it fits, so `.astype(np.int32)` of the int64 result runs without 64-bit types
    idx_dt = np.dtype(np.int32) if n < 2**31 else INT64
    index = build.where(hit, build.iota(x.shape, ax, idx_dt), build.const(n, idx_dt, x.shape))
    out = build.reduce(index, "min", (ax,))
    if not skip_nan:  # (a Dask array's argmax is combined from per-block (value, index): dask/plan.py)
        note(out, Statistic(name, a, None if axis is None else (ax,)))
    if valid is not None:  # no valid element: -1
        out = build.where(
            build.binary(Op.EQ, out, build.const(n, idx_dt, out.shape)), build.const(-1, idx_dt, out.shape), out
        )
    out = build.reshape(out, (1,) * ndim if keepdims else ()) if axis is None else _squeeze(out, (ax,), keepdims)
    return Tensor(build.cast(out, INT64))


def nanargmax(a: ArrayLike, axis: int | None = None, out: Tensor | None = None, *, keepdims: bool = False) -> Tensor:
    """argmax ignoring NaNs; an all-NaN slice gives -1 (NumPy raises ValueError)."""
    _no_out(out, "nanargmax")
    return _arg("max", a, axis, keepdims, "nanargmax", skip_nan=True)


def nanargmin(a: ArrayLike, axis: int | None = None, out: Tensor | None = None, *, keepdims: bool = False) -> Tensor:
    """argmin ignoring NaNs; an all-NaN slice gives -1 (NumPy raises ValueError)."""
    _no_out(out, "nanargmin")
    return _arg("min", a, axis, keepdims, "nanargmin", skip_nan=True)


# --- NaN-ignoring reductions ---------------------------------------------------------------------


def _not_nan(a: Node, where, bfloat16: bool = False) -> Node | None:
    """Elements that take part: not NaN (NumPy's inexact dtypes only, and bfloat16 where `bfloat16`: nanmax's
    fmax ignores its NaN, nansum's NaN replacement does not) and selected by where."""
    mask = _mask(where, a.shape)
    if not (is_inexact(a.dtype) or bfloat16 and is_float(a.dtype)):
        return mask
    keep = build.binary(Op.EQ, build.unary(Op.ISNAN, a), build.const(False, BOOL, a.shape))
    return keep if mask is None else build.binary(Op.AND, keep, mask)


def nansum(
    a: ArrayLike,
    axis: int | Sequence[int] | None = None,
    dtype: DTypeLike | None = None,
    out: Tensor | None = None,
    keepdims: bool = False,
    initial: Scalar | None = None,
    where: ArrayLike = True,
) -> Tensor:
    _no_out(out, "nansum")
    a = as_node(a)
    return _reduce("sum", _fill(a, _not_nan(a, True), 0), axis, keepdims, dtype, initial, where)


def nanprod(
    a: ArrayLike,
    axis: int | Sequence[int] | None = None,
    dtype: DTypeLike | None = None,
    out: Tensor | None = None,
    keepdims: bool = False,
    initial: Scalar | None = None,
    where: ArrayLike = True,
) -> Tensor:
    _no_out(out, "nanprod")
    a = as_node(a)
    return _reduce("prod", _fill(a, _not_nan(a, True), 1), axis, keepdims, dtype, initial, where)


def _nan_extreme(op: str, a, axis, keepdims, initial, where) -> Tensor:
    """max/min ignoring NaNs; a slice with no number is NaN (NumPy warns), or `initial` if given."""
    a = as_node(a)
    if not is_float(a.dtype):
        return _reduce(op, a, axis, keepdims, None, initial, where)
    keep = _not_nan(a, where, bfloat16=True)
    assert keep is not None  # a float array: never None, its NaNs are left out
    result = _reduce(op, _fill(a, keep, identity(op, a.dtype)), axis, keepdims, None, initial)._node
    if initial is not None:
        return Tensor(result)
    none = _reduce(
        "min", build.binary(Op.EQ, keep, build.const(False, BOOL, a.shape)), axis, keepdims, logical=True
    )._node
    return Tensor(build.where(none, build.const(math.nan, a.dtype, result.shape), result))


def nanmax(
    a: ArrayLike,
    axis: int | Sequence[int] | None = None,
    out: Tensor | None = None,
    keepdims: bool = False,
    initial: Scalar | None = None,
    where: ArrayLike = True,
) -> Tensor:
    _no_out(out, "nanmax")
    return _nan_extreme("max", a, axis, keepdims, initial, where)


def nanmin(
    a: ArrayLike,
    axis: int | Sequence[int] | None = None,
    out: Tensor | None = None,
    keepdims: bool = False,
    initial: Scalar | None = None,
    where: ArrayLike = True,
) -> Tensor:
    _no_out(out, "nanmin")
    return _nan_extreme("min", a, axis, keepdims, initial, where)


def nanmean(
    a: ArrayLike,
    axis: int | Sequence[int] | None = None,
    dtype: DTypeLike | None = None,
    out: Tensor | None = None,
    keepdims: bool = False,
    *,
    where: ArrayLike = True,
) -> Tensor:
    _no_out(out, "nanmean")
    a = as_node(a)
    if not is_inexact(a.dtype):
        return mean(a, axis, dtype, keepdims=keepdims, where=where)
    out_dt, acc_dt = _float_dtypes(a, dtype)
    keep = _not_nan(a, where)
    return Tensor(build.cast(_mean(build.cast(a, acc_dt), _axes(axis, len(a.shape)), keepdims, keep), out_dt))


def nanvar(
    a: ArrayLike,
    axis: int | Sequence[int] | None = None,
    dtype: DTypeLike | None = None,
    out: Tensor | None = None,
    ddof: float = 0,
    keepdims: bool = False,
    *,
    where: ArrayLike = True,
    mean: ArrayLike | None = None,
    correction: float | None = None,
) -> Tensor:
    _no_out(out, "nanvar")
    a = as_node(a)
    ddof = _ddof(ddof, correction, mean, "nanvar")
    if not is_inexact(a.dtype):
        return Tensor(_var(a, axis, dtype, ddof, keepdims, _mask(where, a.shape)))
    return Tensor(_var(a, axis, dtype, ddof, keepdims, _not_nan(a, where), nan_if_no_dof=True))


def nanstd(
    a: ArrayLike,
    axis: int | Sequence[int] | None = None,
    dtype: DTypeLike | None = None,
    out: Tensor | None = None,
    ddof: float = 0,
    keepdims: bool = False,
    *,
    where: ArrayLike = True,
    mean: ArrayLike | None = None,
    correction: float | None = None,
) -> Tensor:
    _no_out(out, "nanstd")
    a = as_node(a)
    ddof = _ddof(ddof, correction, mean, "nanstd")
    if not is_inexact(a.dtype):
        return Tensor(_var(a, axis, dtype, ddof, keepdims, _mask(where, a.shape), root=True))
    return Tensor(_var(a, axis, dtype, ddof, keepdims, _not_nan(a, where), root=True, nan_if_no_dof=True))


# --- weighted average, logsumexp -----------------------------------------------------------------


def average(
    a: ArrayLike,
    axis: int | Sequence[int] | None = None,
    weights: ArrayLike | None = None,
    returned: bool = False,
    *,
    keepdims: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """np.average; a zero sum of weights gives inf/NaN (NumPy raises ZeroDivisionError)."""
    a = as_node(a)
    if weights is None:
        avg = mean(a, axis, keepdims=keepdims)
        count = a.size // builtins.max(avg.size, 1) if a.size else 0
        scale = build.const(count, avg.dtype, avg.shape)
        return (avg, Tensor(scale)) if returned else avg
    w = as_node(weights)
    dt = np.result_type(a.dtype, w.dtype, *((FLOAT64,) if a.dtype.kind in "biu" else ()))
    dt = check(dt, "result of np.average")
    if w.shape != a.shape:
        if axis is None:
            raise ShapeError("np.average: axis must be specified when shapes of a and weights differ")
        if len(w.shape) != 1:
            raise ShapeError("np.average: 1D weights expected when shapes of a and weights differ")
        axes = _axes(axis, len(a.shape))  # an int, or a sequence (NumPy's: of one axis for 1-D weights)
        if len(axes) != 1:
            raise ShapeError("np.average: shape of weights must be consistent with shape of a along specified axis")
        ax = axes[0]
        if w.shape[0] != a.shape[ax]:
            raise ShapeError(
                f"np.average: length of weights ({w.shape[0]}) differs from that of a along axis {axis} ({a.shape[ax]})"
            )
        w = build.reshape(w, tuple(s if d == ax else 1 for d, s in enumerate(a.shape)))
    w = build.broadcast_to(build.cast(w, dt), a.shape)
    scale = _reduce("sum", w, axis, keepdims, dt)._node
    total = _reduce("sum", build.binary(Op.MUL, build.cast(a, dt), w), axis, keepdims, dt)._node
    avg = Tensor(build.binary(Op.DIV, total, scale))
    return (avg, Tensor(scale)) if returned else avg


def logsumexp(x: ArrayLike, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
    """log(sum(exp(x))) shifted by the maximum so it neither overflows nor underflows; a slice of -inf
    gives -inf, as scipy.special.logsumexp. Result dtype: np.exp's for x (float64 for ints)."""
    x = as_node(x)
    x = build.cast(x, _float_dtypes(x, None)[0])
    axes = _axes(axis, len(x.shape))
    if builtins.any(x.shape[d] == 0 for d in axes):
        raise ShapeError(f"logsumexp of a zero-size array (shape {x.shape}) along axis {axis}")
    m = max(Tensor(x), axis, keepdims=True)
    shift = _where(isfinite(m), m, 0.0)
    total = sum(exp(Tensor(x) - shift), axis, keepdims=True)
    return Tensor(_squeeze((log(total) + shift)._node, axes, keepdims))


NUMPY_FUNCTIONS = {
    np.sum: sum,
    np.prod: prod,
    np.max: max,
    np.min: min,
    np.amax: max,
    np.amin: min,
    np.mean: mean,
    np.any: any,
    np.all: all,
    np.count_nonzero: count_nonzero,
    np.ptp: ptp,
    np.var: var,
    np.std: std,
    np.argmax: argmax,
    np.argmin: argmin,
    np.nanargmax: nanargmax,
    np.nanargmin: nanargmin,
    np.nansum: nansum,
    np.nanprod: nanprod,
    np.nanmax: nanmax,
    np.nanmin: nanmin,
    np.nanmean: nanmean,
    np.nanvar: nanvar,
    np.nanstd: nanstd,
    np.average: average,
}
