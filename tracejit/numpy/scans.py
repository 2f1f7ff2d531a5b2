"""Scans on traced tensors: np.cumsum, np.cumprod, their NaN-ignoring forms and the ufuncs' accumulate
(np.add.accumulate, np.maximum.accumulate, ...), with NumPy's axis (None flattens), dtype= and result
dtypes. Each is one graph SCAN node; fusion decides how it runs (per row, or blocked when long)."""

from __future__ import annotations

import numpy as np
from numpy.typing import DTypeLike

from tracejit.errors import ShapeError, UnsupportedError
from tracejit.ir import build
from tracejit.ir.dtypes import check, is_inexact, sum_dtype
from tracejit.ir.graph import Node, Op
from tracejit.numpy.functions import _axis
from tracejit.numpy.tensor import ArrayLike, Tensor, as_node

__all__ = ["cumprod", "cumsum", "nancumprod", "nancumsum"]


def cumsum(a: ArrayLike, axis: int | None = None, dtype: DTypeLike | None = None, out: Tensor | None = None) -> Tensor:
    """Running sums along axis (None: of the flattened array). Ints and bools sum in int64 (uint64 for
    unsigned), as np.sum does."""
    _no_out(out, "cumsum")
    return _scan("sum", as_node(a), axis, dtype, "cumsum")


def cumprod(a: ArrayLike, axis: int | None = None, dtype: DTypeLike | None = None, out: Tensor | None = None) -> Tensor:
    _no_out(out, "cumprod")
    return _scan("prod", as_node(a), axis, dtype, "cumprod")


def nancumsum(
    a: ArrayLike, axis: int | None = None, dtype: DTypeLike | None = None, out: Tensor | None = None
) -> Tensor:
    """cumsum with NaNs counted as zero (a leading run of NaNs gives zeros, as in NumPy)."""
    _no_out(out, "nancumsum")
    return _scan("sum", _nan_as(as_node(a), 0), axis, dtype, "nancumsum")


def nancumprod(
    a: ArrayLike, axis: int | None = None, dtype: DTypeLike | None = None, out: Tensor | None = None
) -> Tensor:
    """cumprod with NaNs counted as one."""
    _no_out(out, "nancumprod")
    return _scan("prod", _nan_as(as_node(a), 1), axis, dtype, "nancumprod")


# the ufuncs whose .accumulate is a scan, with its reduction; add and multiply widen ints as cumsum does
ACCUMULATE: dict[np.ufunc, str] = {np.add: "sum", np.multiply: "prod", np.maximum: "max", np.minimum: "min"}


def accumulate(ufunc: np.ufunc, array, axis=0, dtype=None) -> Tensor:
    """ufunc.accumulate(array, axis=0, dtype=None): like cumsum, but along axis 0 by default."""
    a = as_node(array)
    name = f"np.{ufunc.__name__}.accumulate"
    if not a.shape:
        raise ShapeError(f"{name}: cannot accumulate on a scalar (a 0-d array), as in NumPy")
    if axis is None and len(a.shape) > 1:
        raise ShapeError(
            f"{name}: accumulate does not allow multiple axes (axis=None of a {len(a.shape)}-d "
            "array); flatten first with .ravel()"
        )
    return _scan(ACCUMULATE[ufunc], a, 0 if axis is None else axis, dtype, name[3:])


def _scan(op: str, a: Node, axis, dtype, name: str) -> Tensor:
    if axis is None or not a.shape:  # NumPy scans a 0-d array as one of shape (1,)
        a = build.reshape(a, (a.size,))
    ax = _axis(0 if axis is None else axis, len(a.shape))
    if dtype is not None:
        dt = check(dtype, f"np.{name}(dtype=...)")
    else:
        dt = sum_dtype(a.dtype) if op in ("sum", "prod") else a.dtype
    return Tensor(build.scan(build.cast(a, dt), op, ax))


def _nan_as(a: Node, value) -> Node:
    if not is_inexact(a.dtype):  # (NumPy's nancumsum of bfloat16 is its cumsum)
        return a
    return build.where(build.unary(Op.ISNAN, a), build.const(value, a.dtype, a.shape), a)


def _no_out(out, name: str) -> None:
    if out is not None:
        raise UnsupportedError(f"np.{name}(..., out=...) is not supported while tracing; use the returned value")


NUMPY_FUNCTIONS = {np.cumsum: cumsum, np.cumprod: cumprod, np.nancumsum: nancumsum, np.nancumprod: nancumprod}
