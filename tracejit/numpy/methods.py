"""NumPy functions that mirror ndarray methods (np.squeeze, np.ravel, np.round, np.ndim, ...)
on traced tensors; Tensor's methods of the same names call these."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tracejit.errors import ShapeError, UnsupportedError
from tracejit.ir import build
from tracejit.ir.dtypes import BOOL, is_narrow_float
from tracejit.numpy import functions as F
from tracejit.numpy.functions import _axes, _axis
from tracejit.numpy.tensor import ArrayLike, Tensor, as_node

__all__ = ["around", "ravel", "round", "squeeze", "swapaxes"]


def squeeze(a: ArrayLike, axis: int | Sequence[int] | None = None) -> Tensor:
    a = as_node(a)
    if axis is None:
        return Tensor(build.reshape(a, tuple(s for s in a.shape if s != 1)))
    axes = _axes(axis, len(a.shape))
    if any(a.shape[d] != 1 for d in axes):
        raise ShapeError(
            f"cannot select an axis to squeeze out which has size not equal to one (shape {a.shape}, axis {axis})"
        )
    return Tensor(build.reshape(a, tuple(s for d, s in enumerate(a.shape) if d not in axes)))


def swapaxes(a: ArrayLike, axis1: int, axis2: int) -> Tensor:
    a = as_node(a)
    perm = list(range(len(a.shape)))
    i, j = _axis(axis1, len(perm)), _axis(axis2, len(perm))
    perm[i], perm[j] = perm[j], perm[i]
    return Tensor(build.permute(a, tuple(perm)))


def ravel(a: ArrayLike, order: str = "C") -> Tensor:
    """order 'C' (row-major) or 'F' (column-major). 'A' and 'K' follow the memory layout, which a traced
    value does not have: they are refused."""
    if order not in ("C", "F"):
        raise UnsupportedError(
            f"ravel(order={order!r}): order follows the memory layout, which a traced value "
            "does not have; use order='C' or 'F'"
        )
    a = as_node(a)
    if order == "F":
        a = build.permute(a, tuple(reversed(range(len(a.shape)))))
    return Tensor(build.reshape(a, (a.size,)))


def copy(a, order="K", subok=False) -> Tensor:
    # Traced values are never modified in place, and returned arguments are copied, so a copy is a no-op.
    return Tensor(as_node(a))


def round(a: ArrayLike, decimals: int = 0, out: Tensor | None = None) -> Tensor:  # noqa: A001
    """NumPy's algorithm: rint(x * 10**d) / 10**d for floats (x / 10**-d, rint, * 10**-d when d < 0);
    integers are unchanged for d >= 0 and rounded through float64 for d < 0."""
    if out is not None:
        raise UnsupportedError("np.round(..., out=...) is not supported while tracing; use the returned value")
    a = as_node(a)
    decimals = int(decimals)
    integer = a.dtype.kind in "iu"
    if integer and decimals >= 0:
        return Tensor(a)
    if decimals == 0:
        return F.rint(a)
    if a.dtype == BOOL:
        raise UnsupportedError(
            f"np.round of a bool array with decimals={decimals}: NumPy cannot cast the "
            "float result back to bool either; convert with .astype(float) first"
        )
    scale = float(10 ** abs(decimals))
    to, back = (F.multiply, F.true_divide) if decimals > 0 else (F.true_divide, F.multiply)
    if is_narrow_float(a.dtype):  # NumPy's steps write into a bfloat16 array (a Python float makes float32 of them)
        out = back(F.rint(F.astype(to(Tensor(a), scale), a.dtype)), scale)
        return F.astype(out, a.dtype)
    out = back(F.rint(to(Tensor(a), scale)), scale)
    return F.astype(out, a.dtype) if integer else out


around = round


def ndim(a) -> int:
    return len(as_node(a).shape)


def shape(a) -> tuple[int, ...]:
    return as_node(a).shape


def size(a, axis=None) -> int:
    a = as_node(a)
    return math.prod(a.shape) if axis is None else a.shape[_axis(axis, len(a.shape))]


def result_type(*arrays_and_dtypes) -> np.dtype:
    """NumPy's, from the traced values' dtypes (a Python number the kernel has as one is weak, as NEP 50 says)."""
    return np.result_type(*(_dtype_of(a) for a in arrays_and_dtypes))


def can_cast(from_, to, casting="safe") -> bool:
    return np.can_cast(_dtype_of(from_), to, casting)


def _dtype_of(a):
    if isinstance(a, Tensor):
        node = a._node
        return {"b": False, "i": 0, "u": 0, "f": 0.0}[node.dtype.kind] if node.weak else node.dtype
    if hasattr(a, "_tracejit_defer") and hasattr(a, "dtype"):  # (a complex value: its dtype)
        return a.dtype
    return a


NUMPY_FUNCTIONS = {
    np.result_type: result_type,
    np.can_cast: can_cast,
    np.squeeze: squeeze,
    np.swapaxes: swapaxes,
    np.ravel: ravel,
    np.copy: copy,
    np.round: round,
    np.around: round,
    np.ndim: ndim,
    np.shape: shape,
    np.size: size,
}
