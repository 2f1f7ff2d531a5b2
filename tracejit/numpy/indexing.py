"""Integer-array indexing (x[idx], x[:, i, j], a constant boolean mask) and the functions built on it:
np.take, np.take_along_axis, and np.searchsorted (a count of comparisons, no gather). Each indexing form
is one GATHER node (build.gather), which fuses with what produces and consumes it. An index outside its
axis raises IndexError as in NumPy: while tracing where the index is a constant, else when the kernel runs."""

from __future__ import annotations

import numpy as np

from tracejit.errors import (
    IndexOutOfBoundsError,
    InvalidIndexError,
    ShapeError,
    UnsupportedError,
)
from tracejit.ir import build
from tracejit.ir.dtypes import BOOL
from tracejit.ir.evaluate import constant_value
from tracejit.ir.graph import Node, Op
from tracejit.numpy import functions as F
from tracejit.numpy.functions import _axis
from tracejit.numpy.tensor import ArrayLike, Tensor, as_node, current_guard

__all__ = ["searchsorted", "take", "take_along_axis"]

# one element of an index as _entry reads it: (kind, value), the value a slice, an index array (a NumPy array
# while it is a constant, else a graph node), a constant boolean mask, or None (a new axis, the ellipsis)
Entry = tuple[str, slice | np.ndarray | Node | None]

_SEQUENCES = (np.ndarray, list, tuple, range)  # NumPy reads these as index arrays
_TAKE_MODES = ("raise", "wrap", "clip")
_VALID = (
    "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer or boolean arrays "
    "are valid indices"
)


def is_array_index(k) -> bool:
    """Whether k, an element of an index, makes the index advanced (NumPy's integer-array indexing)."""
    return isinstance(k, (Tensor, *_SEQUENCES))


def advanced_index(x: Node, key: tuple) -> Node:
    """x[key], where key holds at least one integer array or a constant boolean mask. As NumPy: the index
    arrays (ints among them) broadcast together; their dimensions replace the indexed axes where those
    are adjacent in the key, else they come first."""
    spec, indexed, layout = _read_index(x, _one_axis_each(x, [_entry(k) for k in key]))
    shape = _broadcast_indices([indexed[d].shape for d in sorted(indexed)])
    gathered: list[int] = []  # the result's shape without its new axes ...
    final: list[int] = []  # ... and with them
    source_axes: list[int | None] = [None] * len(x.shape)
    at = 0
    for kind, axis in layout:
        if kind == "indices":
            at = len(gathered)
            gathered += shape
            final += shape
        elif kind == "slice":
            assert axis is not None  # a slice's entry names its axis
            source_axes[axis] = len(gathered)
            gathered.append(spec[axis][2])
            final.append(spec[axis][2])
        else:  # a new axis
            final.append(1)
    tail = (1,) * (len(gathered) - at - len(shape))
    indices = [
        build.expand(build.reshape(build.broadcast_to(indexed[d], shape), (1,) * at + shape + tail), tuple(gathered))
        for d in sorted(indexed)
    ]
    guard = current_guard()
    if guard is not None:  # a branch of an `if` on array values: where it does not run, its indices may be any
        indices = [
            build.where(build.broadcast_to(guard, i.shape), i, build.const(0, i.dtype, i.shape)) for i in indices
        ]
    out = build.gather(build.slice_(x, tuple(spec)), tuple(indices), tuple(source_axes))
    return build.reshape(out, tuple(final))


def _read_index(
    x: Node, entries: list[Entry]
) -> tuple[list[tuple[int, int, int]], dict[int, Node], list[tuple[str, int | None]]]:
    """Per axis of x its slice (start, step, length; all of it where an array indexes it), the index
    arrays' nodes by axis, and the result's axes in order: ("new", None), ("slice", axis), and once
    ("indices", None) where NumPy puts the broadcast index arrays' axes."""
    spec: list[tuple[int, int, int]] = []
    indexed: dict[int, Node] = {}
    layout: list[tuple[str, int | None]] = []
    positions: list[int] = []
    for position, (kind, value) in enumerate(entries):
        if kind == "new":
            layout.append(("new", None))
            continue
        axis, size = len(spec), x.shape[len(spec)]
        if isinstance(value, slice):
            start, stop, step = value.indices(size)
            n = len(range(start, stop, step))
            spec.append((start if n else 0, step, n))
            layout.append(("slice", axis))
        else:
            spec.append((0, 1, size))
            indexed[axis] = _index_node(value, size, axis)
            positions.append(position)
    adjacent = positions == list(range(positions[0], positions[0] + len(positions)))
    layout.insert(positions[0] if adjacent else 0, ("indices", None))  # no index array comes before the first
    return spec, indexed, layout


def _entry(k) -> Entry:
    """One element of an index as (kind, value): new (None), ellipsis, slice, index (an integer array,
    a NumPy one while it is a constant, or a graph node) or mask (a constant boolean array)."""
    if k is None:
        return "new", None
    if k is Ellipsis:
        return "ellipsis", None
    if isinstance(k, slice):
        return "slice", k
    if isinstance(k, (bool, np.bool_)):
        raise UnsupportedError(f"a boolean scalar index (x[{k}]) is not supported; x[None] adds an axis")
    if isinstance(k, (int, np.integer)):
        return "index", np.asarray(int(k))
    if isinstance(k, (list, tuple)):
        from tracejit.numpy import creation  # (creation's imports reach this module)

        if creation.holds_traced(k):  # x[[k, p]] with k, p traced: the index array of their values
            k = creation.stacked(k)
    if isinstance(k, Tensor) and k.dtype.kind in "iu":
        known = constant_value(k._node)
        if known is not None:  # made from constants (np.array([1, -5]) in the kernel): checked now, as NumPy's
            return _entry(known)
    if isinstance(k, Tensor):
        if k.dtype == BOOL:
            known = constant_value(k._node)
            if known is not None:  # made from constants alone (np.arange(n) % 3 == 0): its count is known
                return _entry(known)
            raise UnsupportedError(
                "indexing with a traced boolean mask (x[mask], x[x > 0]): the result's shape depends on the data. "
                "Keep the shape with np.where(mask, x, 0), or reduce only the selected elements with a where= "
                "argument (np.sum(x, where=mask), np.max(x, where=mask, initial=-np.inf))"
            )
        if k.dtype.kind not in "iu":
            raise InvalidIndexError(
                f"arrays used as indices must be of integer (or boolean) type, not {k.dtype}; "
                "index with k.astype(np.int64)"
            )
        return "index", k._node
    if isinstance(k, _SEQUENCES):
        a = np.asarray(k)
        if a.dtype == BOOL:
            return "mask", a
        if a.size == 0 and a.dtype.kind == "f":  # an empty list: NumPy takes it as integers
            a = a.astype(np.int64)
        if a.dtype.kind not in "iu":
            raise InvalidIndexError(f"arrays used as indices must be of integer (or boolean) type, not {a.dtype}")
        return "index", a
    raise InvalidIndexError(f"{_VALID}; got {type(k).__name__}")


def _one_axis_each(x: Node, entries: list[Entry]) -> list[Entry]:
    """The index with `...` written out, trailing axes taken whole and boolean masks turned into the
    integer arrays of their True positions: every entry but `new` then indexes one axis."""
    used = sum(_axes_read(entry) for entry in entries)
    if sum(kind == "ellipsis" for kind, _ in entries) > 1:
        raise ShapeError("an index can only have a single ellipsis ('...')")
    if used > len(x.shape):
        raise ShapeError(
            f"too many indices: array of shape {x.shape} is {len(x.shape)}-dimensional, but {used} were indexed"
        )
    whole = [("slice", slice(None))] * (len(x.shape) - used)
    kinds = [kind for kind, _ in entries]
    at = kinds.index("ellipsis") if "ellipsis" in kinds else len(entries)
    entries = entries[:at] + whole + entries[at + 1 :]
    out: list[Entry] = []
    axis = 0
    for kind, value in entries:
        if kind == "mask":
            assert isinstance(value, np.ndarray)  # a mask is a constant
            out += [("index", i) for i in _mask_positions(value, x.shape[axis : axis + value.ndim], axis)]
            axis += value.ndim
            continue
        out.append((kind, value))
        axis += kind != "new"
    return out


def _axes_read(entry: Entry) -> int:
    """How many axes of the array one entry of the index reads."""
    kind, value = entry
    if kind == "mask":
        assert isinstance(value, np.ndarray)  # a mask is a constant
        return value.ndim
    return 1 if kind in ("slice", "index") else 0


def _mask_positions(mask: np.ndarray, shape: tuple[int, ...], axis: int) -> tuple[np.ndarray, ...]:
    """A constant boolean mask over axes axis... as the integer arrays of its True positions."""
    if mask.ndim == 0:
        raise UnsupportedError("a 0-d boolean array index is not supported; x[None] adds an axis")
    for d, (n, m) in enumerate(zip(shape, mask.shape)):
        if n != m:
            raise InvalidIndexError(
                f"boolean index did not match indexed array along axis {axis + d}; size of axis "
                f"is {n} but size of corresponding boolean axis is {m}"
            )
    return np.nonzero(mask)


def _index_node(index, size: int, axis: int) -> Node:
    """The graph node of an integer index array into an axis of `size` elements. A constant is checked
    now (NumPy's IndexError) and stored with negative values counted from the end."""
    if isinstance(index, Node):
        while (
            index.op is Op.CAST
            and index.srcs[0].dtype.kind in "iu"
            and index.dtype.kind in "iu"
            and np.can_cast(index.srcs[0].dtype, index.dtype, "safe")
        ):
            index = index.srcs[0]  # a widening cast changes no index (argmax's int64): WGSL has no int64
        return index
    bad = (index < -size) | (index >= size)
    if bad.any():
        raise IndexOutOfBoundsError(f"index {index[bad].flat[0]} is out of bounds for axis {axis} with size {size}")
    wrapped = np.where(index < 0, index.astype(np.int64) + size, index)
    return as_node(wrapped.astype(np.int32 if size <= 2**31 else np.int64))


def _broadcast_indices(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    try:
        return build.broadcast_shapes(*shapes)
    except ShapeError:
        raise InvalidIndexError(
            "shape mismatch: indexing arrays could not be broadcast together with shapes "
            + " ".join(str(tuple(s)) for s in shapes)
        ) from None


def take(
    a: ArrayLike, indices: ArrayLike, axis: int | None = None, out: Tensor | None = None, mode: str = "raise"
) -> Tensor:
    """np.take: elements at `indices` along `axis` (of the flattened array for None); mode 'raise'
    (IndexError outside the axis), 'wrap' (modulo its length) or 'clip' (to its ends, negatives to 0)."""
    if out is not None:
        raise UnsupportedError("np.take(..., out=...) is not supported while tracing; use the returned value")
    if mode not in _TAKE_MODES:
        raise UnsupportedError(f"np.take(mode={mode!r}): the mode is one of 'raise', 'wrap' or 'clip'")
    a = as_node(a)
    a, axis = (build.reshape(a, (a.size,)), 0) if axis is None else (a, _axis(axis, len(a.shape)))
    kind, index = _entry(indices)
    if kind == "mask":  # np.take reads booleans as the integers 0 and 1
        assert isinstance(index, np.ndarray)  # a mask is a constant
        kind, index = "index", index.astype(np.int64)
    if kind != "index":
        raise InvalidIndexError(f"np.take: indices must be integers or an integer array, not {indices!r}")
    assert isinstance(index, (np.ndarray, Node))  # an index array
    if mode != "raise":
        n = a.shape[axis]
        if n == 0 and index.size:
            raise InvalidIndexError("cannot do a non-empty take from an empty axes.")
        index = _wrap_or_clip(index, n, mode)
    key = (slice(None),) * axis + (index if isinstance(index, np.ndarray) else Tensor(index),)
    return Tensor(advanced_index(a, key))


def _wrap_or_clip(index: np.ndarray | Node, n: int, mode: str) -> np.ndarray | Node:
    """np.take's 'wrap' (floor modulo n) and 'clip' (into [0, n - 1]) of integer indices."""
    if isinstance(index, np.ndarray):
        wide = index.astype(np.int64)
        return np.mod(wide, max(n, 1)) if mode == "wrap" else np.clip(wide, 0, max(n - 1, 0))
    fits = np.can_cast(index.dtype, np.int32) and n <= 2**31
    i = F.astype(Tensor(index), np.int32 if fits else np.int64)
    return (F.remainder(i, max(n, 1)) if mode == "wrap" else F.clip(i, 0, max(n - 1, 0)))._node


def take_along_axis(arr: ArrayLike, indices: ArrayLike, axis: int = -1) -> Tensor:
    """np.take_along_axis: out[..., j, ...] = arr[..., indices[..., j, ...], ...] along `axis`, the other
    axes of arr and indices broadcast together (None: along the flattened arr, indices 1-D)."""
    a = as_node(arr)
    kind, index = _entry(indices)
    if kind != "index":
        raise InvalidIndexError("`indices` must be an integer array")
    assert isinstance(index, (np.ndarray, Node))  # an index array
    ndim = len(index.shape)
    if axis is None:
        if ndim != 1:
            raise ShapeError("when axis=None, `indices` must have a single dimension.")
        a, axis = build.reshape(a, (a.size,)), 0
    axis = _axis(axis, len(a.shape))
    if ndim != len(a.shape):
        raise ShapeError("`indices` and `arr` must have the same number of dimensions")
    index = _index_node(index, a.shape[axis], axis)
    kept = tuple(1 if d == axis else n for d, n in enumerate(a.shape))
    shape = list(_broadcast_indices([kept, index.shape]))
    data_shape = tuple(a.shape[axis] if d == axis else n for d, n in enumerate(shape))
    source_axes = tuple(None if d == axis else d for d in range(len(shape)))
    return Tensor(build.gather(build.expand(a, data_shape), (build.expand(index, tuple(shape)),), source_axes))


def searchsorted(a: ArrayLike, v: ArrayLike, side: str = "left", sorter: ArrayLike | None = None) -> Tensor:
    """np.searchsorted on a sorted 1-D `a` (or one sorted by `sorter`): for each value of v, how many
    elements of a come before it, NaN last as in NumPy's sort. Computed as that count, a reduction over
    a for every value: no binary search, so the work is len(a) * v.size."""
    if side not in ("left", "right"):
        raise UnsupportedError(f"np.searchsorted(side={side!r}): side must be 'left' or 'right'")
    a = as_node(a) if sorter is None else take(a, sorter)._node
    if len(a.shape) != 1:
        raise ShapeError(
            f"np.searchsorted needs a 1-D array to search, not one of shape {a.shape} (NumPy: "
            "object too deep for desired array)"
        )
    v = as_node(v)
    count = np.dtype(np.int32) if a.size < 2**31 else np.dtype(np.int64)
    if a.size == 0:
        return Tensor(build.const(0, np.int64, v.shape))
    rows = Tensor(build.reshape(a, (1,) * len(v.shape) + a.shape))
    values = Tensor(build.reshape(v, v.shape + (1,)))
    nan_a, nan_v = F.isnan(rows), F.isnan(values)
    if side == "left":  # a[i] sorts before v
        before = F.less(rows, values) | (nan_v & ~nan_a)
    else:  # v does not sort before a[i]
        before = ~(F.less(values, rows) | (nan_a & ~nan_v))
    total = build.reduce(build.broadcast_to(build.cast(before._node, count), v.shape + a.shape), "sum", (len(v.shape),))
    return Tensor(build.cast(build.reshape(total, v.shape), np.int64))


NUMPY_FUNCTIONS = {np.take: take, np.take_along_axis: take_along_axis, np.searchsorted: searchsorted}
