"""NumPy's products and norms on traced tensors: matmul (`@`), dot, vdot, inner, outer, tensordot,
each one labelled contraction (einsum.contract), and np.linalg.norm from elementwise ops and reductions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from tracejit.errors import ShapeError, UnsupportedError
from tracejit.ir import build
from tracejit.numpy import functions as F
from tracejit.numpy import reductions as R
from tracejit.numpy.einsum import contract, strong
from tracejit.numpy.functions import _axes
from tracejit.numpy.tensor import ArrayLike, Tensor, as_node

__all__ = ["dot", "inner", "matmul", "outer", "tensordot", "vdot"]


def _no_out(name: str, out) -> None:
    if out is not None:
        raise UnsupportedError(f"np.{name}(..., out=...) is not supported while tracing; use the returned value")


def _named(prefix: str, ndim: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{d}" for d in range(ndim))


def matmul(a: ArrayLike, b: ArrayLike) -> Tensor:
    """`a @ b`: stacks of matrices with NumPy's broadcasting of the leading (batch) axes; a 1-D
    operand is a row (left) or a column (right) whose axis leaves the result."""
    a, b = strong(a), strong(b)
    if not a.shape or not b.shape:
        raise ShapeError("matmul: input operand does not have enough dimensions (0-d); use * instead")
    k_b = -1 if len(b.shape) == 1 else -2
    if a.shape[-1] != b.shape[k_b]:
        raise ShapeError(
            f"matmul: shapes {a.shape} and {b.shape} do not align: {a.shape[-1]} (dim -1) != {b.shape[k_b]} (dim {k_b})"
        )
    try:
        batch = build.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ShapeError:
        raise ShapeError(
            f"matmul: the stacks of matrices of shapes {a.shape} and {b.shape} do not broadcast "
            f"together: leading (batch) shapes {a.shape[:-2]} and {b.shape[:-2]}"
        ) from None
    # batch axes are negative ints counted from the right, so they line up as in broadcasting
    a_labels = tuple(range(2 - len(a.shape), 0)) + ("m", "k")[2 - min(len(a.shape), 2) :]
    b_labels = tuple(range(2 - len(b.shape), 0)) + ("k", "n")[: min(len(b.shape), 2)]
    out = tuple(range(-len(batch), 0)) + ("m",) * (len(a.shape) > 1) + ("n",) * (len(b.shape) > 1)
    return Tensor(contract([(a, a_labels), (b, b_labels)], out, "matmul"))


def dot(a: ArrayLike, b: ArrayLike, out: Tensor | None = None) -> Tensor:
    """np.dot: a product for scalars, else a sum over a's last axis and b's second-to-last (its only
    axis if 1-D); the result's axes are a's others, then b's. Integers accumulate in their own dtype
    and bools with `or`, as NumPy does."""
    _no_out("dot", out)
    a, b = strong(a), strong(b)
    if not a.shape or not b.shape:
        return Tensor(
            contract(
                [(a, _named("a", len(a.shape))), (b, _named("b", len(b.shape)))],
                _named("a", len(a.shape)) + _named("b", len(b.shape)),
                "np.dot",
            )
        )
    k_b = max(len(b.shape) - 2, 0)
    if a.shape[-1] != b.shape[k_b]:
        raise ShapeError(
            f"shapes {a.shape} and {b.shape} not aligned: {a.shape[-1]} (dim {len(a.shape) - 1}) != "
            f"{b.shape[k_b]} (dim {k_b})"
        )
    a_free, b_free = _named("a", len(a.shape) - 1), _named("b", len(b.shape) - 1)
    b_labels = b_free[:k_b] + ("k",) + b_free[k_b:]
    return Tensor(contract([(a, a_free + ("k",)), (b, b_labels)], a_free + b_free, "np.dot"))


def inner(a: ArrayLike, b: ArrayLike) -> Tensor:
    """np.inner: a sum over the last axis of both (a product for scalars); a's other axes, then b's."""
    a, b = strong(a), strong(b)
    if a.shape and b.shape and a.shape[-1] != b.shape[-1]:
        raise ShapeError(
            f"shapes {a.shape} and {b.shape} not aligned: {a.shape[-1]} (dim {len(a.shape) - 1}) != "
            f"{b.shape[-1]} (dim {len(b.shape) - 1})"
        )
    k = ("k",) if a.shape and b.shape else ()
    a_free, b_free = _named("a", len(a.shape) - len(k)), _named("b", len(b.shape) - len(k))
    return Tensor(contract([(a, a_free + k), (b, b_free + k)], a_free + b_free, "np.inner"))


def vdot(a: ArrayLike, b: ArrayLike) -> Tensor:
    """np.vdot: both flattened, then their dot product (a 0-d result)."""
    a, b = strong(a), strong(b)
    if a.size != b.size:
        raise ShapeError(
            f"np.vdot: the operands have different sizes once flattened: shapes {a.shape} "
            f"({a.size} elements) and {b.shape} ({b.size} elements)"
        )
    return Tensor(
        contract([(build.reshape(a, (a.size,)), ("k",)), (build.reshape(b, (b.size,)), ("k",))], (), "np.vdot")
    )


def outer(a: ArrayLike, b: ArrayLike, out: Tensor | None = None) -> Tensor:
    """np.outer: both flattened, every product of an element of a with one of b."""
    _no_out("outer", out)
    a, b = strong(a), strong(b)
    return Tensor(
        contract([(build.reshape(a, (a.size,)), ("i",)), (build.reshape(b, (b.size,)), ("j",))], ("i", "j"), "np.outer")
    )


def tensordot(a: ArrayLike, b: ArrayLike, axes: int | Sequence[int] | Sequence[Sequence[int]] = 2) -> Tensor:
    """np.tensordot: a sum over `axes` (N: a's last N with b's first N; or a pair of axis sequences,
    paired in order); the result's axes are a's others, then b's."""
    a, b = strong(a), strong(b)
    a_axes, b_axes = _tensordot_axes(axes, len(a.shape), len(b.shape))
    for i, j in zip(a_axes, b_axes):
        if a.shape[i] != b.shape[j]:
            raise ShapeError(
                f"np.tensordot: shape-mismatch for sum: axis {i} of shape {a.shape} has "
                f"{a.shape[i]} elements, axis {j} of shape {b.shape} has {b.shape[j]}"
            )
    a_labels = tuple(("k", a_axes.index(d)) if d in a_axes else ("a", d) for d in range(len(a.shape)))
    b_labels = tuple(("k", b_axes.index(d)) if d in b_axes else ("b", d) for d in range(len(b.shape)))
    free = tuple(label for label in a_labels + b_labels if label[0] != "k")
    return Tensor(contract([(a, a_labels), (b, b_labels)], free, "np.tensordot"))


def _tensordot_axes(axes, a_ndim: int, b_ndim: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if not 0 <= n <= min(a_ndim, b_ndim):
            raise ShapeError(
                f"np.tensordot: axes={n} needs 0 <= axes <= {min(a_ndim, b_ndim)} (the operands "
                f"have {a_ndim} and {b_ndim} dimensions)"
            )
        return tuple(range(a_ndim - n, a_ndim)), tuple(range(n))
    a_axes, b_axes = axes
    a_axes = _axes(a_axes, a_ndim) if isinstance(a_axes, (int, np.integer)) or len(a_axes) else ()
    b_axes = _axes(b_axes, b_ndim) if isinstance(b_axes, (int, np.integer)) or len(b_axes) else ()
    if len(a_axes) != len(b_axes):
        raise ShapeError(
            f"np.tensordot: shape-mismatch for sum: {len(a_axes)} axes of a ({axes[0]}) but "
            f"{len(b_axes)} of b ({axes[1]})"
        )
    return a_axes, b_axes


def norm(x, ord=None, axis=None, keepdims=False) -> Tensor:  # noqa: A002  (NumPy's name)
    """np.linalg.norm: vector norms over one axis, matrix norms over two (ord None/'fro', 1, -1, inf,
    -inf, and 2, -2, 'nuc' from the singular values); integers are computed in float64 as in NumPy."""
    x = Tensor(as_node(x))
    if x.dtype.kind != "f":
        x = x.astype(np.float64)
    ndim = x.ndim
    if axis is None and ord is None:  # the 2-norm of everything flattened, as NumPy does
        out = F.sqrt(R.sum(x * x))
        return out.reshape((1,) * ndim) if keepdims else out
    axes = _axes(tuple(range(ndim)) if axis is None else axis, ndim)
    if len(axes) == 1:
        return _vector_norm(x, ord, axes[0], keepdims)
    if len(axes) == 2:
        return _matrix_norm(x, ord, axes, keepdims)
    raise ShapeError(
        f"np.linalg.norm: improper number of dimensions to norm ({len(axes)}; give one axis for a "
        "vector norm or two for a matrix norm)"
    )


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
    return R.sum(a**ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)


def _matrix_norm(x: Tensor, ord, axes: tuple[int, int], keepdims: bool) -> Tensor:
    row, col = axes
    if row == col:
        raise ShapeError("np.linalg.norm: duplicate axes given")
    a = F.abs(x)
    if ord is None or ord == "fro":
        out = F.sqrt(R.sum(x * x, axis=axes))
    elif ord in (1, -1):  # the largest (smallest) column sum
        sums = R.sum(a, axis=row, keepdims=True)
        out = (R.max if ord == 1 else R.min)(sums, axis=axes)
    elif ord in (np.inf, -np.inf):  # the largest (smallest) row sum
        sums = R.sum(a, axis=col, keepdims=True)
        out = (R.max if ord == np.inf else R.min)(sums, axis=axes)
    elif ord in (2, -2, "nuc"):  # the largest, smallest, sum of the singular values (as the device computes them)
        s = np.linalg.svd(cast(Any, np.moveaxis)(x, axes, (-2, -1)), compute_uv=False)
        out = R.max(s, axis=-1) if ord == 2 else R.min(s, axis=-1) if ord == -2 else R.sum(s, axis=-1)
    else:
        raise ShapeError(f"np.linalg.norm: invalid norm order {ord!r} for matrices")
    if keepdims:
        shape = list(x.shape)
        shape[row] = shape[col] = 1
        out = out.reshape(tuple(shape))
    return out


NUMPY_FUNCTIONS = {
    np.matmul: matmul,
    np.dot: dot,
    np.inner: inner,
    np.vdot: vdot,
    np.outer: outer,
    np.tensordot: tensordot,
    np.linalg.norm: norm,
}
