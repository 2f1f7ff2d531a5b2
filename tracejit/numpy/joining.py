"""Joining and splitting (np.concatenate, stack, hstack, vstack, dstack, column_stack, split, array_split,
hsplit, vsplit, dsplit) on traced tensors. A join reads each piece through a view shifted to its offset
and picks the piece by index range (`where` on an iota), a split is a slice: both are index arithmetic
fused into their consumers, so no piece is ever written to memory on its own."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from numpy.typing import DTypeLike

from tracejit.errors import ShapeError, TraceError, UnsupportedError
from tracejit.ir import build
from tracejit.ir.dtypes import check
from tracejit.ir.graph import Node, Op
from tracejit.numpy.functions import _axis
from tracejit.numpy.tensor import ArrayLike, Casting, Tensor, as_node, python_value

__all__ = [
    "append",
    "array_split",
    "column_stack",
    "concatenate",
    "dsplit",
    "dstack",
    "hsplit",
    "hstack",
    "split",
    "stack",
    "unstack",
    "vsplit",
    "vstack",
]


# --- views and the join ----------------------------------------------------------------------------


def tile_axis(x: Node, axis: int, reps: int) -> Node:
    """x repeated `reps` times end to end along axis: a broadcast over a new axis, merged into it."""
    shape = x.shape
    grown = build.reshape(x, shape[:axis] + (1,) + shape[axis:])
    grown = build.expand(grown, shape[:axis] + (reps,) + shape[axis:])
    return build.reshape(grown, shape[:axis] + (reps * shape[axis],) + shape[axis + 1 :])


def periodic(x: Node, axis: int, start: int, length: int) -> Node:
    """`length` elements of x's periodic extension along axis, the first being x[start % n]: element i
    is x[(start + i) % n]. A tile and a slice, so wrapping around is a modulo in the index, not a join."""
    n = x.shape[axis]
    start %= n
    reps = max(-(-(start + length) // n), 1)
    spec = [(0, 1, s) for s in x.shape]
    spec[axis] = (start, 1, length)
    return build.slice_(tile_axis(x, axis, reps), tuple(spec))


def slice_axis(x: Node, axis: int, start: int, step: int, length: int) -> Node:
    spec = [(0, 1, s) for s in x.shape]
    spec[axis] = (start if length else 0, step, length)
    return build.slice_(x, tuple(spec))


def join(nodes: list[Node], axis: int) -> Node:
    """Nodes of one dtype, equal in shape but along `axis`, end to end along it. Each piece is read
    through its periodic extension shifted to its offset (in bounds everywhere, no mask) and selected
    where the index along `axis` lies in its range: one load per piece, no piece materialised."""
    first = nodes[0]
    total = sum(n.shape[axis] for n in nodes)
    shape = first.shape[:axis] + (total,) + first.shape[axis + 1 :]
    pieces = [n for n in nodes if n.shape[axis]]
    if len(pieces) == 1:
        return pieces[0]
    if not pieces or 0 in shape:
        return build.const(0, first.dtype, shape)
    offsets = [sum(p.shape[axis] for p in pieces[:i]) for i in range(len(pieces))]
    placed = [periodic(p, axis, -start, total) for p, start in zip(pieces, offsets)]
    return _select(placed, offsets, build.iota(shape, axis, np.int32 if total < 2**31 else np.int64))


def _select(placed: list[Node], offsets: list[int], position: Node) -> Node:
    """The piece whose range holds `position`, by halving: a tree of `where`s, log2(pieces) deep."""
    if len(placed) == 1:
        return placed[0]
    mid = len(placed) // 2
    before = build.binary(Op.LT, position, build.const(offsets[mid], position.dtype, position.shape))
    return build.where(
        before, _select(placed[:mid], offsets[:mid], position), _select(placed[mid:], offsets[mid:], position)
    )


def as_array(x) -> Node:
    """as_node, with a Python scalar made an array as NumPy's functions make it (int64 / float64, not
    weak: np.stack([1.0, x32]) is float64)."""
    node = as_node(x)
    return build.cast(node, node.dtype)


def _sequence(arrays, what: str) -> list[Node]:
    if isinstance(arrays, (Tensor, np.ndarray)):
        arrays = list(arrays)  # NumPy iterates over the first axis of an array passed as the sequence
    nodes = [as_array(a) for a in arrays]
    if not nodes:
        raise ShapeError(f"need at least one array to {what}")
    return nodes


def _common_dtype(nodes: list[Node], dtype, casting: Casting, name: str) -> list[Node]:
    """The nodes cast to NumPy's result type of the join (or to `dtype`, checked against `casting`)."""
    if dtype is None:
        target = np.result_type(*(n.dtype for n in nodes))
    else:
        target = np.dtype(dtype)
        for n in nodes:
            if not np.can_cast(n.dtype, target, casting):
                raise UnsupportedError(
                    f"np.{name}: cannot cast array data from {n.dtype} to {target} according to "
                    f"the rule {casting!r} (NumPy refuses this too); pass casting='unsafe' or "
                    "cast the arrays with .astype() first"
                )
    target = check(target, f"result of np.{name}")
    return [build.cast(n, target) for n in nodes]


def _no_out(out, name: str) -> None:
    if out is not None:
        raise UnsupportedError(f"np.{name}(..., out=...) is not supported while tracing; use the returned value")


# --- joining -------------------------------------------------------------------------------------


def concatenate(
    arrays: Sequence[ArrayLike],
    axis: int = 0,
    out: Tensor | None = None,
    *,
    dtype: DTypeLike | None = None,
    casting: Casting = "same_kind",
) -> Tensor:
    _no_out(out, "concatenate")
    nodes = _sequence(arrays, "concatenate")
    if axis is None:
        nodes = [build.reshape(n, (n.size,)) for n in nodes]
        axis = 0
    if any(not n.shape for n in nodes):
        raise ShapeError("zero-dimensional arrays cannot be concatenated")
    ndim = len(nodes[0].shape)
    axis = _axis(axis, ndim)
    for i, n in enumerate(nodes):
        if len(n.shape) != ndim:
            raise ShapeError(
                f"all the input arrays must have same number of dimensions, but the array at index 0 "
                f"has {ndim} dimension(s) and the array at index {i} has {len(n.shape)} dimension(s)"
            )
        for d, (a, b) in enumerate(zip(nodes[0].shape, n.shape)):
            if d != axis and a != b:
                raise ShapeError(
                    f"all the input array dimensions except for the concatenation axis must match "
                    f"exactly, but along dimension {d}, the array at index 0 has size {a} and the "
                    f"array at index {i} has size {b}"
                )
    return Tensor(join(_common_dtype(nodes, dtype, casting, "concatenate"), axis))


def stack(
    arrays: Sequence[ArrayLike],
    axis: int = 0,
    out: Tensor | None = None,
    *,
    dtype: DTypeLike | None = None,
    casting: Casting = "same_kind",
) -> Tensor:
    _no_out(out, "stack")
    nodes = _sequence(arrays, "stack")
    if any(n.shape != nodes[0].shape for n in nodes):
        raise ShapeError(
            "all input arrays must have the same shape (np.stack: " + ", ".join(str(n.shape) for n in nodes) + ")"
        )
    shape = nodes[0].shape
    axis = _axis(axis, len(shape) + 1)
    expanded = [build.reshape(n, shape[:axis] + (1,) + shape[axis:]) for n in nodes]
    return Tensor(join(_common_dtype(expanded, dtype, casting, "stack"), axis))


def at_least(nodes: list[Node], ndim: int) -> list[Node]:
    """np.atleast_2d / atleast_3d shapes: (1, N) and (1, N, 1) for 1-D, (M, N, 1) for 2-D."""

    def grow(n: Node) -> Node:
        s = n.shape
        if len(s) >= ndim:
            return n
        if ndim == 1 or not s:
            return build.reshape(n, (1,) * (ndim - len(s)) + s)
        shape = (1,) + s if len(s) == 1 else s
        return build.reshape(n, shape + (1,) * (ndim - len(shape)))

    return [grow(n) for n in nodes]


def hstack(tup: Sequence[ArrayLike], *, dtype: DTypeLike | None = None, casting: Casting = "same_kind") -> Tensor:
    nodes = at_least(_sequence(tup, "concatenate"), 1)
    return concatenate(nodes, axis=0 if len(nodes[0].shape) == 1 else 1, dtype=dtype, casting=casting)


def vstack(tup: Sequence[ArrayLike], *, dtype: DTypeLike | None = None, casting: Casting = "same_kind") -> Tensor:
    return concatenate(at_least(_sequence(tup, "concatenate"), 2), axis=0, dtype=dtype, casting=casting)


def dstack(tup: Sequence[ArrayLike]) -> Tensor:
    return concatenate(at_least(_sequence(tup, "concatenate"), 3), axis=2)


def column_stack(tup: Sequence[ArrayLike]) -> Tensor:
    """1-D arrays become columns (N, 1), 0-d ones (1, 1); the rest join along axis 1."""
    nodes = [build.reshape(n, (n.size, 1)) if len(n.shape) < 2 else n for n in _sequence(tup, "concatenate")]
    return concatenate(nodes, axis=1)


def append(arr: ArrayLike, values: ArrayLike, axis: int | None = None) -> Tensor:
    """As np.append: both flattened when axis is None, else a concatenate along axis."""
    arr, values = as_array(arr), as_array(values)
    if axis is None:
        arr, values, axis = build.reshape(arr, (arr.size,)), build.reshape(values, (values.size,)), 0
    return concatenate([arr, values], axis=axis)


# --- splitting -----------------------------------------------------------------------------------


def _pieces(node: Node, bounds: list[int], axis: int) -> list[Tensor]:
    """node[..., start:stop, ...] along axis for consecutive bounds, with Python's slice rules."""
    lead = (slice(None),) * axis
    return [Tensor(node)[lead + (slice(start, stop),)] for start, stop in itertools.pairwise(bounds)]


def _static_split(indices_or_sections, name: str):
    indices_or_sections = python_value(indices_or_sections, f"np.{name}'s sections or indices")
    if isinstance(indices_or_sections, Tensor):
        raise TraceError(
            f"np.{name}: the sections or indices are a traced value; they set the pieces' shapes, "
            "so they must be plain Python values (name a kernel parameter static to pass them)"
        )
    return indices_or_sections


def array_split(ary: ArrayLike, indices_or_sections: int | Sequence[int], axis: int = 0) -> list[Tensor]:
    """As np.array_split: a count (the first `n % count` pieces one longer) or a list of split points."""
    node = as_array(ary)
    axis = _axis(axis, len(node.shape))
    length = node.shape[axis]
    spec = _static_split(indices_or_sections, "array_split")
    try:
        points = list(spec)
    except TypeError:  # not a sequence: a count
        sections = int(spec)
        if sections <= 0:
            raise ShapeError("number sections must be larger than 0.") from None
        each, extras = divmod(length, sections)
        sizes = [each + 1] * extras + [each] * (sections - extras)
        return _pieces(node, [sum(sizes[:i]) for i in range(sections + 1)], axis)
    return _pieces(node, [0, *points, length], axis)


def split(ary: ArrayLike, indices_or_sections: int | Sequence[int], axis: int = 0) -> list[Tensor]:
    """As np.split: a count must divide the axis evenly (ValueError otherwise), or a list of split points."""
    node = as_array(ary)
    spec = _static_split(indices_or_sections, "split")
    try:
        len(spec)
    except TypeError:
        sections, length = spec, node.shape[_axis(axis, len(node.shape))]
        if length % sections:
            raise ShapeError(
                f"array split does not result in an equal division ({length} elements into {sections} sections)"
            ) from None
    return array_split(node, spec, axis)


def hsplit(ary: ArrayLike, indices_or_sections: int | Sequence[int]) -> list[Tensor]:
    node = as_array(ary)
    if not node.shape:
        raise ShapeError("hsplit only works on arrays of 1 or more dimensions")
    return split(node, indices_or_sections, 1 if len(node.shape) > 1 else 0)


def vsplit(ary: ArrayLike, indices_or_sections: int | Sequence[int]) -> list[Tensor]:
    node = as_array(ary)
    if len(node.shape) < 2:
        raise ShapeError("vsplit only works on arrays of 2 or more dimensions")
    return split(node, indices_or_sections, 0)


def dsplit(ary: ArrayLike, indices_or_sections: int | Sequence[int]) -> list[Tensor]:
    node = as_array(ary)
    if len(node.shape) < 3:
        raise ShapeError("dsplit only works on arrays of 3 or more dimensions")
    return split(node, indices_or_sections, 2)


def unstack(x: ArrayLike, /, *, axis: int = 0) -> tuple[Tensor, ...]:
    """As np.unstack: the slices along axis, each without that axis."""
    node = as_array(x)
    if not node.shape:
        raise ShapeError("Input array must be at least 1-d.")
    axis = _axis(axis, len(node.shape))
    shape = node.shape[:axis] + node.shape[axis + 1 :]
    return tuple(Tensor(build.reshape(slice_axis(node, axis, i, 1, 1), shape)) for i in range(node.shape[axis]))


NUMPY_FUNCTIONS = {
    np.concatenate: concatenate,
    np.stack: stack,
    np.hstack: hstack,
    np.vstack: vstack,
    np.dstack: dstack,
    np.column_stack: column_stack,
    np.split: split,
    np.array_split: array_split,
    np.hsplit: hsplit,
    np.vsplit: vsplit,
    np.dsplit: dsplit,
    np.append: append,
    np.unstack: unstack,
}
