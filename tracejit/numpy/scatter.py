"""Scatter: integer-array assignment (set_at, the value of x[idx] = v), np.add.at and the other ufunc.at
methods, np.bincount. Two formulations; an index outside its axis raises IndexError in both, through a
gather of the update positions:
- dense, for few positions times updates (at most DENSE_MAX): every target position along the indexed axes
  is compared with every update's position (an (n, m) broadcast) and the matches are reduced, so it fuses
  with its producers and consumers;
- the SCATTER op beyond: the target written once, then each update combined into its position (atomics on
  SIMT targets, a serial loop on the CPU): O(n + m) work, two kernels."""

from __future__ import annotations

import math

import numpy as np

from tracejit.errors import DtypeError, IndexOutOfBoundsError, ShapeError, UnsupportedError
from tracejit.ir import build, faulting
from tracejit.ir.dtypes import identity
from tracejit.ir.graph import Node, Op
from tracejit.ir.kernel_ir import Fault
from tracejit.numpy import functions as F
from tracejit.numpy.functions import _result
from tracejit.numpy.indexing import _entry, _one_axis_each, advanced_index
from tracejit.numpy.tensor import ArrayLike, Tensor, as_node, in_loop_body, python_value

__all__ = ["bincount", "set_at"]

# Target positions x updates up to which the dense compare-and-reduce is used. Measured for np.add.at between
# elementwise ops (numba, 2 cores; PoCL): at 2**16 dense 7 us against 4 us for the scatter's two kernels on numba,
# 0.3 against 0.17 ms on PoCL; at 2**22 dense 0.8 ms against 5 us. Both are small up to here, where dense keeps
# one fused kernel and every dtype on every device (no atomics); beyond, its n * m work dominates.
DENSE_MAX = 2**16
# ufunc -> (reduction of the updates, the combining function); bool add/multiply are logical or/and
_AT: dict[np.ufunc, tuple[str, F.Binary]] = {
    np.add: ("sum", F.add),
    np.subtract: ("sum", F.subtract),
    np.multiply: ("prod", F.multiply),
    np.maximum: ("max", F.maximum),
    np.minimum: ("min", F.minimum),
}


class _Scatter:
    """A target x and an index key split the NumPy way: the indexed axes (their broadcast index shape B,
    m updates each), and the other axes with their slices. The updates' values are arranged as
    (m, L...) and the target's affected region as (n, L...), n the positions along the indexed axes."""

    def __init__(self, x: Node, key, what: str):
        key = key if isinstance(key, tuple) else (key,)
        entries = _slice_as_indices(x, _one_axis_each(x, [_entry(k) for k in key]))
        self.x, self.what = x, what
        self.indexed: list[tuple[int, np.ndarray | Node]] = []  # (axis, its index array)
        self.specs: dict[int, tuple[int, int, int]] = {}  # the sliced axes' (start, step, length)
        layout: list[tuple[str, int | None]] = []  # per entry of the key: (kind, axis; None for a new axis)
        axis = 0
        for kind, value in entries:
            if kind == "new":
                layout.append(("new", None))
                continue
            if kind == "slice":
                start, stop, step = value.indices(x.shape[axis])
                n = len(range(start, stop, step))
                self.specs[axis] = (start if n else 0, step, n)
                layout.append(("slice", axis))
            else:
                self.indexed.append((axis, value))
                layout.append(("index", axis))
            axis += 1
        if not self.indexed:
            raise UnsupportedError(f"{what} needs an index into at least one axis of an array of shape {x.shape}")
        self.axes = [a for a, _ in self.indexed]
        self.others = [a for a in range(len(x.shape)) if a not in self.axes]
        self.shape_d = tuple(x.shape[a] for a in self.axes)
        self.lengths = tuple(self.specs[a][2] for a in self.others)
        self.positions = self._update_positions()
        self.result_layout = self._result_layout(layout)

    def _update_positions(self) -> Node:
        """Each update's flat position along the indexed axes (m,), read through a gather of those positions
        so that an index outside its axis raises IndexError as x[idx] does."""
        x = self.x
        full = tuple(x.shape[a] if a in self.axes else 1 for a in range(len(x.shape)))
        flat = build.reshape(build.flat_positions(self.shape_d), full)
        for axis, index in self.indexed:
            if x.shape[axis] == 0 and math.prod(_shape(index)) != 0:
                raise IndexOutOfBoundsError(f"index 0 is out of bounds for axis {axis} with size 0")
        if math.prod(self.shape_d) == 0:
            return build.const(0, flat.dtype, (0,))
        key = tuple(self._key(a) for a in range(len(x.shape)))
        gathered = advanced_index(flat, key)
        return build.reshape(gathered, (gathered.size,))

    def _key(self, axis: int):
        if axis not in self.axes:
            return slice(0, 1)
        value = dict(self.indexed)[axis]
        return Tensor(value) if isinstance(value, Node) else value

    def _result_layout(self, layout: list[tuple[str, int | None]]) -> list[tuple[str, int | None]]:
        """x[key]'s axes in NumPy's order: ("slice", axis), ("new", None), and ("indices", None) once, where
        the broadcast index arrays' axes go (in place when the index arrays are adjacent, else first)."""
        at = [i for i, (kind, _) in enumerate(layout) if kind == "index"]
        adjacent = at == list(range(at[0], at[0] + len(at)))
        rest = [e for e in layout if e[0] != "index"]
        position = at[0] if adjacent else 0  # no index array comes before the first
        return rest[:position] + [("indices", None)] + rest[position:]

    @property
    def m(self) -> int:
        return self.positions.size

    @property
    def n(self) -> int:
        return math.prod(self.shape_d)

    @property
    def dense(self) -> bool:
        """Whether the dense compare-and-reduce is cheap enough (it fuses; the SCATTER op does not)."""
        return self.n * self.m <= DENSE_MAX

    def values(self, v: Node, dtype) -> Node:
        """v broadcast to x[key]'s shape, cast to dtype, arranged as (m, L...)."""
        shape = [
            n
            for kind, a in self.result_layout
            for n in (self._index_shape() if kind == "indices" else (1,) if kind == "new" else (self._slice_length(a),))
        ]
        try:
            v = build.broadcast_to(v, tuple(shape))
        except ShapeError:
            raise ShapeError(
                f"{self.what}: shape mismatch: value array of shape {v.shape} could not be broadcast "
                f"to indexing result of shape {tuple(shape)}"
            ) from None
        v = build.cast(v, dtype)
        squeezed = [
            ("indices", None) if kind == "indices" else (kind, a) for kind, a in self.result_layout if kind != "new"
        ]
        v = build.reshape(v, tuple(self.m if kind == "indices" else self._slice_length(a) for kind, a in squeezed))
        first = [i for i, (kind, _) in enumerate(squeezed) if kind == "indices"]
        return build.permute(v, tuple(first + [i for i in range(len(squeezed)) if i not in first]))

    def _slice_length(self, axis: int | None) -> int:
        assert axis is not None  # a slice's entry in the layout names its axis
        return self.specs[axis][2]

    def _index_shape(self) -> tuple[int, ...]:
        """The index arrays' broadcast shape (advanced_index checked that they broadcast)."""
        return build.broadcast_shapes(*(_shape(value) for _, value in self.indexed))

    def region(self) -> Node:
        """The target's positions that updates can reach, as (n, L...)."""
        x = build.permute(self.x, tuple(self.axes + self.others))
        spec = tuple((0, 1, n) for n in self.shape_d) + tuple(self.specs[a] for a in self.others)
        return build.reshape(build.slice_(x, spec), (self.n,) + self.lengths)

    def matches(self) -> Node:
        """(n, m): whether update k goes to position j."""
        dt = self.positions.dtype
        positions = build.expand(build.reshape(self.positions, (1, self.m)), (self.n, self.m))
        return build.binary(Op.EQ, build.iota((self.n, self.m), 0, dt), positions)

    def put_back(self, region: Node) -> Node:
        """x with its region (n, L...) replaced."""
        x = self.x
        region = build.reshape(region, self.shape_d + self.lengths)
        order = self.axes + self.others
        if all(self.specs[a] == (0, 1, x.shape[a]) for a in self.others):
            return build.permute(region, tuple(np.argsort(order)))
        source_axes: list[int | None] = [None] * len(order)  # None: an axis the gather's indices give
        indices, inside = [], build.const(True, np.bool_, x.shape)
        for i, a in enumerate(order):
            if a in self.axes:
                source_axes[i] = a
                continue
            row, ok = _slice_rows(x.shape[a], *self.specs[a])
            indices.append(_along(row._node, a, x.shape))
            inside = build.binary(Op.AND, inside, _along(ok._node, a, x.shape))
        return build.where(inside, build.gather(region, tuple(indices), tuple(source_axes)), x)


def _slice_as_indices(x: Node, entries: list) -> list:
    """A basic index (slices only: ints are index arrays already) with its first slice written as the
    index array of the positions it selects: the same elements in the same layout, so one scatter serves."""
    kinds = [kind for kind, _ in entries]
    if "index" in kinds or "slice" not in kinds:
        return entries
    at = kinds.index("slice")
    axis = sum(kind != "new" for kind in kinds[:at])
    positions = np.arange(*entries[at][1].indices(x.shape[axis]), dtype=np.int64)
    return entries[:at] + [("index", positions)] + entries[at + 1 :]


def _slice_rows(size: int, start: int, step: int, n: int) -> tuple[Tensor, Tensor]:
    """For each position j along an axis of `size`: which element of the slice (start, step, n) it is
    (0 where none) and whether it is one. Index arithmetic on non-negative distances only."""
    dt = np.int32 if size < 2**31 else np.int64
    distance = F.multiply(F.subtract(Tensor(build.iota((size,), 0, dt)), start), 1 if step > 0 else -1)
    stride = abs(step)
    ok = F.less_equal(0, distance) & F.equal(F.remainder(distance, stride), 0) & F.less(distance, stride * n)
    row = F.minimum(F.floor_divide(F.maximum(distance, 0), stride), max(n - 1, 0))
    return row, ok


def _shape(index) -> tuple[int, ...]:
    """The shape of an index array: a graph node, or a NumPy array while it is a constant."""
    return index.shape if isinstance(index, Node) else np.shape(index)


def _along(values: Node, axis: int, shape: tuple[int, ...]) -> Node:
    """A 1-D node laid along `axis` of shape and broadcast over the rest."""
    return build.expand(build.reshape(values, tuple(n if d == axis else 1 for d, n in enumerate(shape))), shape)


def _empty(s: _Scatter) -> bool:
    return s.m == 0 or 0 in s.lengths


def set_at(target: ArrayLike, indices: ArrayLike, values: ArrayLike) -> Tensor:
    """The value of `target[indices] = values` for integer-array indices (NumPy's forms, with slices,
    None, ... and negative indices), as a new array: values broadcast to target[indices]'s shape and cast
    to target's dtype; where indices repeat, the last write wins (NumPy's behaviour)."""
    x = as_node(target)
    s = _Scatter(x, indices, "x[indices] = values")
    v = s.values(as_node(values), x.dtype)
    if _empty(s):
        return Tensor(x)
    value = as_node(values)
    if s.m == 1 and not s.others and value.shape == ():  # one element, x[i, j] = v: a point store
        return Tensor(build.store_element(x, build.reshape(s.positions, ()), build.cast(value, x.dtype)))
    if s.m == 1 and in_loop_body() and all(s.specs[a][1] == 1 or s.specs[a][2] <= 1 for a in s.others):
        return Tensor(_slab(s, v))  # Q[:, k] = v in a loop: the form a loop over elements reads back as a store
    last = _last_update(s)
    dt = last.dtype
    written = build.binary(Op.LT, build.const(-1, dt, (s.n,)), last)
    rows = build.binary(Op.MAX, last, build.const(0, dt, (s.n,)))
    out_shape = (s.n,) + s.lengths
    rows = build.expand(build.reshape(rows, (s.n,) + (1,) * len(s.lengths)), out_shape)
    picked = build.gather(v, (rows,), (None,) + tuple(range(1, len(out_shape))))
    written = build.expand(build.reshape(written, (s.n,) + (1,) * len(s.lengths)), out_shape)
    return Tensor(s.put_back(build.where(written, picked, s.region())))


def _slab(s: _Scatter, v: Node) -> Node:
    """x[i, a:b, j] = v for 0-d indices i, j and slices of step 1: where(iota_0 == i & iota_2 == j & a <= iota_1
    < b, v placed, x), one test of each indexed axis's place against its (checked, nonnegative) index, which a
    loop over elements (ir/element_loops.py) runs as a loop over the slices' places only."""
    x = s.x
    mask: Node | None = None
    pads = []
    for axis in range(len(x.shape)):
        start, _, length = s.specs.get(axis, (0, 1, x.shape[axis]))
        pads.append((start, x.shape[axis] - start - length))
        if axis in s.axes or length == x.shape[axis]:
            continue
        place = build.iota(x.shape, axis, np.int64)
        inside = build.binary(
            Op.AND,
            build.binary(Op.LE, build.const(start, np.int64, x.shape), place),
            build.binary(Op.LT, place, build.const(start + length, np.int64, x.shape)),
        )
        mask = inside if mask is None else build.binary(Op.AND, mask, inside)
    position = build.reshape(s.positions, ())  # (flat along the indexed axes; read through a checked gather)
    stride = 1
    for axis in reversed(s.axes):
        n = x.shape[axis]
        at = position
        if len(s.axes) > 1:
            at = build.binary(Op.IDIV, at, build.const(stride, at.dtype, ())) if stride > 1 else at
            at = build.binary(Op.MOD, at, build.const(n, at.dtype, ()))
        stride *= n
        test = build.binary(Op.EQ, build.iota(x.shape, axis, at.dtype), build.broadcast_to(at, x.shape))
        mask = test if mask is None else build.binary(Op.AND, test, mask)
    assert mask is not None  # (s.axes is never empty)
    lengths = tuple(1 if a in s.axes else s.specs[a][2] for a in range(len(x.shape)))
    placed = build.pad(build.reshape(v, lengths), [(0, 0) if a in s.axes else p for a, p in enumerate(pads)], 0)
    return build.where(mask, build.expand(placed, x.shape), x)


def _last_update(s: _Scatter) -> Node:
    """For each target position (n,), the number of the last update written there, -1 where none is."""
    if s.dense:
        dt = s.positions.dtype
        order = build.iota((s.n, s.m), 1, dt)
        last = build.reduce(build.where(s.matches(), order, build.const(-1, dt, (s.n, s.m))), "max", (1,))
        return build.reshape(last, (s.n,))
    dt = np.dtype(np.int32 if max(s.m, s.n) < 2**31 else np.int64)
    return build.scatter(build.const(-1, dt, (s.n,)), s.positions, build.iota((s.m,), 0, dt), "max")


def ufunc_at(ufunc: np.ufunc, a, indices, b=None) -> None:
    """np.add.at(a, indices, b) and subtract/multiply/maximum/minimum: every update applied, duplicates
    accumulated, into `a` (rebound to the new value)."""
    name = f"np.{ufunc.__name__}.at"
    if ufunc not in _AT:
        raise UnsupportedError(
            f"{name} is not supported by tracejit; the supported ufunc.at methods are "
            + ", ".join(f"np.{u.__name__}.at" for u in _AT)
        )
    if b is None:
        raise UnsupportedError(f"{name} needs the values argument b")
    if not isinstance(a, Tensor):
        raise UnsupportedError(
            f"{name} into a NumPy array that is not traced cannot be updated in place inside "
            "a kernel; make the array from a traced one (np.zeros_like(x)) or with tj.zeros"
        )
    x, v = a._node, as_node(b)
    loop, _ = _result(ufunc, [x, v])
    if not np.can_cast(loop, x.dtype, "same_kind"):
        raise DtypeError(
            f"{name}: Cannot cast ufunc '{ufunc.__name__}' output from {loop!r} to {x.dtype!r} with "
            "casting rule 'same_kind'"
        )
    _rebind(a, _accumulate(ufunc, x, indices, v, loop, name))


def _accumulate(ufunc: np.ufunc, x: Node, indices, v: Node, loop: np.dtype, what: str) -> Node:
    s = _Scatter(x, indices, what)
    values = s.values(v, loop)
    if _empty(s):
        return x
    reduction, combine = _AT[ufunc]
    if loop.kind == "b":
        reduction = {"sum": "max", "prod": "min"}.get(reduction, reduction)
    if not s.dense:
        if ufunc is np.subtract:  # x - v1 - v2 == x + -v1 + -v2, exactly (integers wrap alike)
            values = build.unary(Op.NEG, values)
        updated = build.scatter(build.cast(s.region(), loop), s.positions, values, reduction)
        return s.put_back(build.cast(updated, x.dtype))
    shape = (s.n,) + s.lengths + (s.m,)
    k = len(s.lengths)
    hits = build.expand(build.reshape(s.matches(), (s.n,) + (1,) * k + (s.m,)), shape)
    spread = build.expand(
        build.reshape(build.permute(values, tuple(range(1, k + 1)) + (0,)), (1,) + s.lengths + (s.m,)), shape
    )
    picked = build.where(hits, spread, build.const(identity(reduction, loop), loop, shape))
    total = build.reshape(build.reduce(picked, reduction, (k + 1,)), (s.n,) + s.lengths)
    merged = combine(Tensor(build.cast(s.region(), loop)), Tensor(total))
    return s.put_back(build.cast(merged._node, x.dtype))


def _rebind(tensor: Tensor, node: Node) -> None:
    """Write `node` into `tensor`: NumPy updates the array in place (np.add.at), so a view writes into its
    base and an argument changes for the caller (assign.store)."""
    from tracejit.numpy.assign import check_writeable, store

    check_writeable(tensor, "output array is read-only")
    store(tensor._root(), tensor._steps, node)


def bincount(x: ArrayLike, weights: ArrayLike | None = None, minlength: int = 0) -> Tensor:
    """np.bincount. Without minlength the output's length is max(x) + 1, a size that depends on the data (read back
    when the kernel runs: numpy/data_sizes.py); with minlength= it is that many bins, fused with no read-back, and
    a value of x outside [0, minlength) raises IndexError when the kernel runs (NumPy would grow the output)."""
    minlength = python_value(minlength, "np.bincount's minlength")
    if isinstance(minlength, Tensor) or minlength < 0:
        raise UnsupportedError("np.bincount's minlength must be a non-negative Python int, known while tracing")
    if not minlength:
        minlength = _length_of_data(as_node(x))
        if not minlength:
            return Tensor(build.const(0, np.float64 if weights is not None else np.int64, (0,)))
    x = as_node(x)
    if len(x.shape) != 1:
        raise ShapeError(f"np.bincount: object too deep for desired array (x has shape {x.shape}, needs 1-D)")
    if x.dtype.kind not in "iub":
        raise DtypeError(
            f"np.bincount: Cannot cast array data from {x.dtype!r} to dtype('int64') according to the rule 'safe'"
        )
    index = Tensor(x) if x.dtype.kind != "b" else F.astype(Tensor(x), np.int32)  # False, True: bins 0 and 1
    if x.dtype.kind == "i":  # a negative value is out of bounds, not counted from the end
        index = F.where(F.less(index, 0), F.subtract(index, minlength), index)
    if weights is None:  # counted in int32 (exact: at most x.size), returned as NumPy's int64: 32-bit atomics
        count = np.int32 if x.size < 2**31 else np.int64
        counts, v = build.const(0, count, (minlength,)), build.const(1, count, x.shape)
    else:
        v = build.cast(as_node(weights), np.float64)
        counts = build.const(0, np.float64, (minlength,))
    if v.shape != x.shape:
        raise ShapeError(f"np.bincount: The weights and list don't have the same length ({v.shape} vs {x.shape})")
    return Tensor(
        build.cast(
            _accumulate(np.add, counts, index, v, counts.dtype, "np.bincount"),
            counts.dtype if weights is not None else np.int64,
        )
    )


_NEGATIVE = Fault("ValueError", "'list' argument must have no negative elements")


def _length_of_data(x: Node) -> int:
    """np.bincount's length without minlength: max(x) + 1 (0 for no x), read back when the kernel runs; a negative
    value raises NumPy's ValueError there."""
    if x.size == 0:
        return 0
    if x.dtype.kind not in "iub" or len(x.shape) != 1:
        return 1  # (bincount's own checks raise NumPy's errors)
    from tracejit.numpy import data_sizes

    dt = np.dtype(np.int32 if x.dtype.itemsize < 4 or x.dtype == np.int32 else np.int64)  # (webgpu: no int64)
    values = build.cast(x, dt)
    low = build.reshape(build.reduce(values, "min", (0,)), ())
    top = build.reshape(build.reduce(values, "max", (0,)), ())
    check = build.cast(faulting.check(build.binary(Op.LE, build.const(0, dt, ()), low), _NEGATIVE), dt)
    length = build.binary(Op.ADD, build.binary(Op.ADD, top, build.const(1, dt, ())), check)
    return data_sizes.number(length, "np.bincount(x) without minlength")


NUMPY_FUNCTIONS = {np.bincount: bincount}
