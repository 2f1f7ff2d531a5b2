"""Rearranging and tiling (np.flip, fliplr, flipud, rot90, roll, tile, repeat), axes (moveaxis,
expand_dims, atleast_1d/2d/3d, broadcast_arrays), np.diff and np.trapezoid on traced tensors: views made
of reshape, permute, expand and slice, so they are index arithmetic inside the kernels that read them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np

from tracejit.errors import ShapeError, TraceError, UnsupportedError
from tracejit.ir import build
from tracejit.ir.dtypes import BOOL
from tracejit.ir.evaluate import constant_value
from tracejit.ir.graph import Node
from tracejit.numpy import functions as F
from tracejit.numpy.functions import _axes, _axis
from tracejit.numpy.joining import as_array, at_least, concatenate, join, periodic, slice_axis
from tracejit.numpy.tensor import ArrayLike, MAX_UNROLL, Tensor

__all__ = [
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "broadcast_arrays",
    "diff",
    "expand_dims",
    "flip",
    "fliplr",
    "flipud",
    "moveaxis",
    "repeat",
    "roll",
    "rot90",
    "tile",
    "trapezoid",
]


def _static(value, what: str):
    """A value that sets the result's shape: plain, or traced but made from constants alone (np.arange(n)
    % 2 + 1 in the kernel's code), whose value is known while tracing."""
    if isinstance(value, (list, tuple)):
        return type(value)(_static(v, what) for v in value)
    if not isinstance(value, Tensor):
        return value
    known = value._known(what) if not value.shape else constant_value(value._node)
    if known is None:
        raise TraceError(
            f"{what} is a traced value; it sets the result's shape, so it must be a plain Python "
            "value (name a kernel parameter static to pass it)"
        )
    return known.item() if known.ndim == 0 else known


# --- flips and rotations -------------------------------------------------------------------------


def flip(m: ArrayLike, axis: int | Sequence[int] | None = None) -> Tensor:
    node = as_array(m)
    axes = _axes(axis, len(node.shape))
    spec = tuple((s - 1 if d in axes and s else 0, -1 if d in axes else 1, s) for d, s in enumerate(node.shape))
    return Tensor(build.slice_(node, spec))


def fliplr(m: ArrayLike) -> Tensor:
    if len(as_array(m).shape) < 2:
        raise ShapeError("Input must be >= 2-d.")
    return flip(m, 1)


def flipud(m: ArrayLike) -> Tensor:
    if len(as_array(m).shape) < 1:
        raise ShapeError("Input must be >= 1-d.")
    return flip(m, 0)


def rot90(m: ArrayLike, k: int = 1, axes: Sequence[int] = (0, 1)) -> Tensor:
    """As np.rot90: k quarter turns from the first axis towards the second."""
    node = as_array(m)
    axes = tuple(axes)
    if len(axes) != 2:
        raise ShapeError("len(axes) must be 2.")
    ndim = len(node.shape)
    if axes[0] == axes[1] or abs(axes[0] - axes[1]) == ndim:
        raise ShapeError("Axes must be different.")
    if not (-ndim <= axes[0] < ndim and -ndim <= axes[1] < ndim):
        raise ShapeError(f"Axes={axes} out of range for array of ndim={ndim}.")
    k = int(k) % 4
    if k == 0:
        return Tensor(node)
    if k == 2:
        return flip(flip(node, axes[0]), axes[1])
    perm = list(range(ndim))
    perm[axes[0]], perm[axes[1]] = perm[axes[1]], perm[axes[0]]
    if k == 1:
        return F.transpose(flip(node, axes[1]), perm)
    return flip(F.transpose(node, perm), axes[1])


# --- rolling, tiling, repeating ------------------------------------------------------------------


def roll(a: ArrayLike, shift: int | Sequence[int], axis: int | Sequence[int] | None = None) -> Tensor:
    """As np.roll: elements shifted along the axes (all of them flattened when axis is None), wrapping
    around; a shift is a modulo in the index."""
    node = as_array(a)
    shift = _static(shift, "np.roll's shift")
    if axis is None:
        return F.reshape(roll(build.reshape(node, (node.size,)), shift, 0), node.shape)
    pairs = np.broadcast(shift, axis)
    if pairs.ndim > 1:
        raise ShapeError("'shift' and 'axis' should be scalars or 1D sequences")
    shifts = {d: 0 for d in range(len(node.shape))}
    for sh, ax in pairs:
        shifts[_axis(ax, len(node.shape))] += int(sh)
    for d, sh in shifts.items():
        n = node.shape[d]
        if n and sh % n:
            node = periodic(node, d, -sh, n)
    return Tensor(node)


def tile(A: ArrayLike, reps: int | Sequence[int]) -> Tensor:
    node = as_array(A)
    given = _static(reps, "np.tile's reps")
    reps = tuple(int(r) for r in given) if np.ndim(given) else (int(given),)
    if any(r < 0 for r in reps):
        raise ShapeError("negative dimensions are not allowed")
    ndim = max(len(reps), len(node.shape))
    node = build.reshape(node, (1,) * (ndim - len(node.shape)) + node.shape)
    reps = (1,) * (ndim - len(reps)) + reps
    shape = node.shape
    interleaved = build.reshape(node, tuple(d for s in shape for d in (1, s)))
    interleaved = build.expand(interleaved, tuple(d for r, s in zip(reps, shape) for d in (r, s)))
    return Tensor(build.reshape(interleaved, tuple(r * s for r, s in zip(reps, shape))))


def _repeat_each(x: Node, axis: int, count: int) -> Node:
    """Every element along axis `count` times in a row: a broadcast over a new axis after it, merged."""
    shape = x.shape
    grown = build.reshape(x, shape[: axis + 1] + (1,) + shape[axis + 1 :])
    grown = build.expand(grown, shape[: axis + 1] + (count,) + shape[axis + 1 :])
    return build.reshape(grown, shape[:axis] + (shape[axis] * count,) + shape[axis + 1 :])


def repeat(a: ArrayLike, repeats: ArrayLike, axis: int | None = None) -> Tensor:
    """As np.repeat, with an int count or a static count per element. Per-element counts are joined from
    runs of equal counts (one piece per run, at most MAX_UNROLL runs)."""
    node = as_array(a)
    repeats = _static(repeats, "np.repeat's repeats")
    if axis is None:
        node, axis = build.reshape(node, (node.size,)), 0
    else:
        axis = _axis(axis, len(node.shape))
    counts = np.asarray(repeats).astype(np.intp)  # NumPy truncates float counts too
    if counts.ndim > 1:
        raise ShapeError(f"np.repeat: repeats must be an int or a 1-D sequence, not of shape {counts.shape}")
    if counts.size == 1:
        if counts.item() < 0:
            raise ShapeError("negative dimensions are not allowed")
        return Tensor(_repeat_each(node, axis, int(counts.item())))
    n = node.shape[axis]
    if counts.size != n:
        raise ShapeError(f"operands could not be broadcast together with shape ({n},) ({counts.size},)")
    if (counts < 0).any():
        raise ShapeError("repeats may not contain negative values.")
    runs = _runs(counts)
    if len(runs) > MAX_UNROLL:
        raise UnsupportedError(
            f"np.repeat with per-element counts forming {len(runs)} runs of equal counts: "
            f"tracejit joins one piece per run and supports at most {MAX_UNROLL}. Use an int "
            "count, or counts that change less often"
        )
    pieces = [_repeat_each(slice_axis(node, axis, start, 1, length), axis, count) for start, length, count in runs]
    return Tensor(join(pieces, axis)) if pieces else Tensor(slice_axis(node, axis, 0, 1, 0))


def _runs(counts: np.ndarray) -> list[tuple[int, int, int]]:
    """(start, length, count) for each run of equal nonzero counts."""
    runs, start = [], 0
    for i in range(1, len(counts) + 1):
        if i == len(counts) or counts[i] != counts[start]:
            if counts[start]:
                runs.append((start, i - start, int(counts[start])))
            start = i
    return runs


# --- axes ----------------------------------------------------------------------------------------


def _axis_tuple(axis, ndim: int, argument: str) -> tuple[int, ...]:
    axes = tuple(_axis(a, ndim) for a in ((axis,) if np.ndim(axis) == 0 else axis))
    if len(set(axes)) != len(axes):
        raise ShapeError(f"repeated axis in {argument}".rstrip())
    return axes


def moveaxis(a: ArrayLike, source: int | Sequence[int], destination: int | Sequence[int]) -> Tensor:
    node = as_array(a)
    ndim = len(node.shape)
    source = _axis_tuple(source, ndim, "`source` argument")
    destination = _axis_tuple(destination, ndim, "`destination` argument")
    if len(source) != len(destination):
        raise ShapeError("`source` and `destination` arguments must have the same number of elements")
    order = [d for d in range(ndim) if d not in source]
    for dest, src in sorted(zip(destination, source)):
        order.insert(dest, src)
    return Tensor(build.permute(node, tuple(order)))


def expand_dims(a: ArrayLike, axis: int | Sequence[int]) -> Tensor:
    node = as_array(a)
    axes = _axis_tuple(axis, len(node.shape) + (1 if np.ndim(axis) == 0 else len(cast("Sequence[int]", axis))), "")
    rest = iter(node.shape)
    shape = tuple(1 if d in axes else next(rest) for d in range(len(node.shape) + len(axes)))
    return Tensor(build.reshape(node, shape))


def _atleast(ndim: int, arys):
    out = tuple(Tensor(n) for n in at_least([as_array(a) for a in arys], ndim))
    return out[0] if len(out) == 1 else out


def atleast_1d(*arys: ArrayLike) -> Tensor | list[Tensor]:
    return _atleast(1, arys)


def atleast_2d(*arys: ArrayLike) -> Tensor | list[Tensor]:
    return _atleast(2, arys)


def atleast_3d(*arys: ArrayLike) -> Tensor | list[Tensor]:
    return _atleast(3, arys)


def broadcast_arrays(*args: ArrayLike, subok: bool = False) -> tuple[Tensor, ...]:
    nodes = [as_array(a) for a in args]
    shape = build.broadcast_shapes(*(n.shape for n in nodes))
    return tuple(Tensor(build.broadcast_to(n, shape)) for n in nodes)


# --- differences ---------------------------------------------------------------------------------

_NO_VALUE = np._NoValue


def diff(
    a: ArrayLike,
    n: int = 1,
    axis: int = -1,
    prepend: object = _NO_VALUE,  # (object: an array, or left out)
    append: object = _NO_VALUE,
) -> Tensor:
    """As np.diff: the n-th forward difference along axis (`!=` for bools), after joining prepend and
    append (a scalar is broadcast to one slice) as NumPy does, with its dtype promotion."""
    n = int(_static(n, "np.diff's n"))
    if n < 0:
        raise ShapeError(f"order must be non-negative but got {n}")
    node = as_array(a)
    if n == 0:
        return Tensor(node)
    if not node.shape:
        raise ShapeError("diff requires input that is at least one dimensional")
    axis = _axis(axis, len(node.shape))
    parts = [node]
    if prepend is not _NO_VALUE:
        parts.insert(0, _edge_slice(prepend, node.shape, axis))
    if append is not _NO_VALUE:
        parts.append(_edge_slice(append, node.shape, axis))
    out = concatenate(parts, axis) if len(parts) > 1 else Tensor(node)
    for _ in range(n):
        length = max(out.shape[axis] - 1, 0)
        later = Tensor(slice_axis(out._node, axis, 1 if length else 0, 1, length))
        earlier = Tensor(slice_axis(out._node, axis, 0, 1, length))
        out = F.not_equal(later, earlier) if out.dtype == BOOL else F.subtract(later, earlier)
    return out


def _edge_slice(value, shape: tuple[int, ...], axis: int) -> Node:
    """np.diff's prepend/append: an array as given, a 0-d value broadcast to one slice along axis."""
    node = as_array(value)
    if node.shape:
        return node
    return build.broadcast_to(node, shape[:axis] + (1,) + shape[axis + 1 :])


def trapezoid(y: ArrayLike, x: ArrayLike | None = None, dx: float = 1.0, axis: int = -1) -> Tensor:
    """As np.trapezoid, computed as NumPy writes it: (d * (y[1:] + y[:-1]) / 2.0).sum(axis)."""
    y = Tensor(as_array(y))
    d: float | Tensor
    if x is None:
        d = dx
    else:
        x = Tensor(as_array(x))
        if x.ndim == 1:
            d = diff(x)
            shape = [1] * y.ndim
            shape[axis] = d.shape[0]
            d = d.reshape(shape)
        else:
            d = diff(x, axis=axis)
    later, earlier = [slice(None)] * y.ndim, [slice(None)] * y.ndim
    later[axis], earlier[axis] = slice(1, None), slice(None, -1)
    return (d * (y[tuple(later)] + y[tuple(earlier)]) / 2.0).sum(axis)


NUMPY_FUNCTIONS = {
    np.flip: flip,
    np.fliplr: fliplr,
    np.flipud: flipud,
    np.rot90: rot90,
    np.roll: roll,
    np.tile: tile,
    np.repeat: repeat,
    np.moveaxis: moveaxis,
    np.expand_dims: expand_dims,
    np.atleast_1d: atleast_1d,
    np.atleast_2d: atleast_2d,
    np.atleast_3d: atleast_3d,
    np.broadcast_arrays: broadcast_arrays,
    np.diff: diff,
    np.trapezoid: trapezoid,
}
