"""The functions NumPy 2 added for the Python array API standard (np.vecdot, np.cumulative_sum, np.unique_values,
np.linalg.matrix_norm, ...), written with the NumPy functions tracejit already compiles: on traced arrays each call
below dispatches to tracejit's own implementation."""

from __future__ import annotations

from typing import Any

import numpy as np

from tracejit.errors import ShapeError
from tracejit.numpy.tensor import Tensor

_np: Any = np  # (NumPy's stubs type these functions for ndarrays; here they take traced arrays)


def astype(x: Tensor, dtype, /, *, copy: bool = True, device=None) -> Tensor:
    return x.astype(dtype)


def matrix_transpose(x: Tensor, /) -> Tensor:
    if x.ndim < 2:
        raise ShapeError(f"matrix_transpose: the array has {x.ndim} dimensions, and needs at least 2")
    return _np.swapaxes(x, -1, -2)


def vecdot(x1: Tensor, x2: Tensor, /, *, axis: int = -1) -> Tensor:
    """The dot product of vectors along `axis`, the first one conjugated, the others broadcast."""
    if _np.shape(x1)[axis] != _np.shape(x2)[axis]:
        raise ShapeError(
            f"vecdot: the arrays' lengths along axis {axis} differ ({_np.shape(x1)[axis]} and {_np.shape(x2)[axis]})"
        )
    dtype = np.result_type(*(getattr(x, "dtype", x) for x in (x1, x2)))  # uint8 . uint8 is uint8, as NumPy's
    return _np.sum(_np.conj(x1) * x2, axis=axis, dtype=dtype)


def matvec(x1: Tensor, x2: Tensor, /) -> Tensor:
    """Matrices times vectors (np.matvec), stacks broadcast."""
    return _np.matmul(x1, _np.expand_dims(x2, -1))[..., 0]


def vecmat(x1: Tensor, x2: Tensor, /) -> Tensor:
    """Vectors, conjugated, times matrices (np.vecmat), stacks broadcast."""
    return _np.matmul(_np.expand_dims(_np.conj(x1), -2), x2)[..., 0, :]


def _cumulative(scan, x: Tensor, axis, dtype, include_initial: bool, initial: int, name: str) -> Tensor:
    if axis is None:
        if x.ndim > 1:
            raise ShapeError(f"{name}: axis= is needed for an array of {x.ndim} dimensions")
        axis = 0
    out = scan(x, axis=axis, dtype=dtype)
    if not include_initial:
        return out
    shape = list(out.shape)
    shape[axis] = 1
    return _np.concatenate([_np.full(tuple(shape), initial, dtype=out.dtype), out], axis=axis)


def cumulative_sum(x: Tensor, /, *, axis=None, dtype=None, include_initial: bool = False) -> Tensor:
    return _cumulative(_np.cumsum, x, axis, dtype, include_initial, 0, "cumulative_sum")


def cumulative_prod(x: Tensor, /, *, axis=None, dtype=None, include_initial: bool = False) -> Tensor:
    return _cumulative(_np.cumprod, x, axis, dtype, include_initial, 1, "cumulative_prod")


def unique_values(x: Tensor, /) -> Tensor:
    return _np.unique(x, equal_nan=False)


def unique_counts(x: Tensor, /):
    values, counts = _np.unique(x, return_counts=True, equal_nan=False)
    return np.lib._arraysetops_impl.UniqueCountsResult(values, counts)


def unique_inverse(x: Tensor, /):
    values, inverse = _np.unique(x, return_inverse=True, equal_nan=False)
    return np.lib._arraysetops_impl.UniqueInverseResult(values, _np.reshape(inverse, x.shape))


def unique_all(x: Tensor, /):
    values, index, inverse, counts = _np.unique(
        x, return_index=True, return_inverse=True, return_counts=True, equal_nan=False
    )
    return np.lib._arraysetops_impl.UniqueAllResult(values, index, _np.reshape(inverse, x.shape), counts)


def matrix_norm(x: Tensor, /, *, keepdims: bool = False, ord="fro") -> Tensor:
    return _np.linalg.norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def vector_norm(x: Tensor, /, *, axis=None, keepdims: bool = False, ord=2) -> Tensor:
    """The p-norm of the vectors along `axis` (an int, a tuple of axes, or None: all of them)."""
    axes = tuple(range(x.ndim)) if axis is None else (axis,) if isinstance(axis, int) else tuple(axis)
    a = _np.abs(x)
    if a.dtype.kind not in "fc":
        a = a.astype(np.float64)
    if ord == np.inf:
        out = _np.max(a, axis=axes, keepdims=keepdims)
    elif ord == -np.inf:
        out = _np.min(a, axis=axes, keepdims=keepdims)
    elif ord == 0:
        out = _np.sum(a != 0, axis=axes, keepdims=keepdims).astype(a.dtype)
    elif ord == 1:
        out = _np.sum(a, axis=axes, keepdims=keepdims)
    elif ord == 2:
        out = _np.sqrt(_np.sum(a * a, axis=axes, keepdims=keepdims))
    else:
        p = float(ord)
        out = _np.sum(a**p, axis=axes, keepdims=keepdims) ** (1.0 / p)
    return out


def svdvals(x: Tensor, /) -> Tensor:
    return _np.linalg.svd(x, compute_uv=False)


def linalg_diagonal(x: Tensor, /, *, offset: int = 0) -> Tensor:
    return _np.diagonal(x, offset=offset, axis1=-2, axis2=-1)


def linalg_trace(x: Tensor, /, *, offset: int = 0, dtype=None) -> Tensor:
    return _np.trace(x, offset=offset, axis1=-2, axis2=-1, dtype=dtype)


def linalg_outer(x1: Tensor, x2: Tensor, /) -> Tensor:
    if _np.ndim(x1) != 1 or _np.ndim(x2) != 1:
        raise ShapeError("np.linalg.outer: both arrays must have one dimension")
    return _np.outer(x1, x2)


def linalg_cross(x1: Tensor, x2: Tensor, /, *, axis: int = -1) -> Tensor:
    if _np.shape(x1)[axis] != 3 or _np.shape(x2)[axis] != 3:
        raise ShapeError("np.linalg.cross: the vectors must have 3 components along the axis")
    return _np.cross(x1, x2, axis=axis)


# NumPy's generalized ufuncs (np.vecdot is one since NumPy 2.0, np.matvec and np.vecmat since 2.2): name -> (its
# traced function, the keyword arguments it takes)
GUFUNCS = {
    getattr(np, name): (fn, keywords)
    for name, fn, keywords in (("vecdot", vecdot, {"axis"}), ("matvec", matvec, set()), ("vecmat", vecmat, set()))
    if isinstance(getattr(np, name, None), np.ufunc)
}

NUMPY_FUNCTIONS: dict = {
    np.astype: astype,
    np.matrix_transpose: matrix_transpose,
    np.linalg.matrix_transpose: matrix_transpose,
    np.vecdot: vecdot,
    np.linalg.vecdot: vecdot,
    np.cumulative_sum: cumulative_sum,
    np.cumulative_prod: cumulative_prod,
    np.unique_values: unique_values,
    np.unique_counts: unique_counts,
    np.unique_inverse: unique_inverse,
    np.unique_all: unique_all,
    np.linalg.matrix_norm: matrix_norm,
    np.linalg.vector_norm: vector_norm,
    np.linalg.svdvals: svdvals,
    np.linalg.diagonal: linalg_diagonal,
    np.linalg.trace: linalg_trace,
    np.linalg.outer: linalg_outer,
    np.linalg.cross: linalg_cross,
    np.linalg.tensordot: lambda x1, x2, /, *, axes=2: _np.tensordot(x1, x2, axes=axes),
    np.linalg.matmul: lambda x1, x2, /: _np.matmul(x1, x2),
}
