"""np.outer and np.linalg.norm on traced tensors, built from elementwise ops, reductions and movement."""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError, UnsupportedError
from . import functions as F
from . import reductions as R
from .functions import _axes
from .tensor import Tensor, as_node

__all__ = ["outer"]


def outer(a, b, out=None) -> Tensor:
    if out is not None:
        raise UnsupportedError("np.outer(..., out=...) is not supported while tracing; use the returned value")
    a, b = Tensor(as_node(a)), Tensor(as_node(b))
    return a.reshape(-1)[:, None] * b.reshape(-1)[None, :]


def norm(x, ord=None, axis=None, keepdims=False) -> Tensor:  # noqa: A002  (NumPy's name)
    """np.linalg.norm: vector norms over one axis, matrix norms over two (ord None/'fro', 1, -1, inf,
    -inf); integers are computed in float64 as in NumPy. Norms that need an SVD (2, -2, 'nuc') are
    refused."""
    x = Tensor(as_node(x))
    if x.dtype.kind != "f":
        x = x.astype(np.float64)
    ndim = x.ndim
    if axis is None and ord is None:   # the 2-norm of everything flattened, as NumPy does
        out = F.sqrt(R.sum(x * x))
        return out.reshape((1,) * ndim) if keepdims else out
    axes = _axes(tuple(range(ndim)) if axis is None else axis, ndim)
    if len(axes) == 1:
        return _vector_norm(x, ord, axes[0], keepdims)
    if len(axes) == 2:
        return _matrix_norm(x, ord, axes, keepdims)
    raise ShapeError(f"np.linalg.norm: improper number of dimensions to norm ({len(axes)}; give one axis for a "
                     "vector norm or two for a matrix norm)")


def _vector_norm(x: Tensor, ord, axis: int, keepdims: bool) -> Tensor:
    a = F.abs(x)
    if ord is None or ord == 2:
        return F.sqrt(R.sum(x * x, axis=axis, keepdims=keepdims))
    if ord == np.inf:
        return R.max(a, axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return R.min(a, axis=axis, keepdims=keepdims)
    if ord == 0:
        return R.sum((x != 0).astype(x.dtype), axis=axis, keepdims=keepdims)
    if ord == 1:
        return R.sum(a, axis=axis, keepdims=keepdims)
    if isinstance(ord, str):
        raise ShapeError(f"np.linalg.norm: invalid norm order {ord!r} for vectors")
    return R.sum(a ** ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)


def _matrix_norm(x: Tensor, ord, axes: tuple[int, int], keepdims: bool) -> Tensor:
    row, col = axes
    if row == col:
        raise ShapeError("np.linalg.norm: duplicate axes given")
    a = F.abs(x)
    if ord is None or ord == "fro":
        out = F.sqrt(R.sum(x * x, axis=axes))
    elif ord in (1, -1):      # the largest (smallest) column sum
        sums = R.sum(a, axis=row, keepdims=True)
        out = (R.max if ord == 1 else R.min)(sums, axis=axes)
    elif ord in (np.inf, -np.inf):   # the largest (smallest) row sum
        sums = R.sum(a, axis=col, keepdims=True)
        out = (R.max if ord == np.inf else R.min)(sums, axis=axes)
    elif ord in (2, -2, "nuc"):
        raise UnsupportedError(f"np.linalg.norm(ord={ord!r}) needs singular values, which tracejit does not "
                               "compute; use ord='fro', 1 or np.inf, or compute it outside the kernel")
    else:
        raise ShapeError(f"np.linalg.norm: invalid norm order {ord!r} for matrices")
    if keepdims:
        shape = list(x.shape)
        shape[row] = shape[col] = 1
        out = out.reshape(tuple(shape))
    return out


NUMPY_FUNCTIONS = {np.outer: outer, np.linalg.norm: norm}
