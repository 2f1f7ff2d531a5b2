"""Sizes that depend on the data (issue 47): `x[mask]` used as an array, np.nonzero, np.flatnonzero, np.argwhere,
np.where(cond), np.unique, np.compress, np.extract.

How many elements a mask selects is not known while tracing. The trace asks for it: the first time, the kernel
stops tracing there (NeedsSize), computes the count with what the trace made before it, reads it back to the host
(one synchronisation) and traces again with it known (frontend/sized.py). The count becomes the size of what comes
after, as any other size, so the code before and after fuses as usual and, once a size has taken two values, its
kernels take it as an argument (runtime/symbolic_sizes.py): another count compiles nothing, it only traces again.

In the graph the count is a SIZE node (a cut, as a loop is: frontend/staged.py runs the part before it, reads the
count, and checks that it is the one the plan was traced with; another raises SizeChanged, and the kernel goes on
with the plan of that count from where it stopped). A SIZE node's value is its payload's: the positions of the
selected elements in order (a running count of the mask places each one: a scan and a scatter, on every device),
the first `count` entries of an array of the mask's length; every value sized by the count reads them through it,
so it comes after the check.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Callable, Iterator

import numpy as np

from tracejit.errors import InvalidIndexError, ShapeError, UnsupportedError
from tracejit.ir import build, library
from tracejit.ir.dtypes import BOOL
from tracejit.ir.graph import Node, Op
from tracejit.numpy import user_frames
from tracejit.numpy.tensor import ArrayLike, Tensor, as_node, in_loop_body


class NeedsSize(Exception):
    """Not an error: the trace reached its data-dependent size number `index`, whose count it was not given. The
    kernel computes `count` (a 0-d int node of the graph traced so far), reads it back, and traces again with it."""

    def __init__(self, index: int, count: Node, where: str):
        super().__init__(index, where)
        self.index, self.count, self.where = index, count, where


class SizeChanged(Exception):
    """Not an error: a call found the count of data-dependent size number `index` to be `count`, not the one its
    plan was traced with. `values`: what the call computed before (graph node -> value), for the plan of that
    count to go on from."""

    def __init__(self, index: int, count: int, values: dict):
        super().__init__(index, count)
        self.index, self.count, self.values = index, count, values


class _Sizes:
    """The counts a trace is given (in the order the trace meets its sizes), and the SIZE nodes it made."""

    def __init__(self, counts: tuple[int, ...]):
        self.counts = counts
        self.nodes: dict[Node, Node] = {}  # payload -> its SIZE node (one check per selection, however often used)

    @property
    def used(self) -> tuple[int, ...]:
        return self.counts[: len(self.nodes)]


_CURRENT: contextvars.ContextVar[_Sizes | None] = contextvars.ContextVar("tracejit_data_sizes", default=None)


@contextlib.contextmanager
def known(counts: tuple[int, ...]) -> Iterator[_Sizes]:
    """Trace the block with these counts for its data-dependent sizes, in order; yields what it used."""
    sizes = _Sizes(tuple(counts))
    token = _CURRENT.set(sizes)
    try:
        yield sizes
    finally:
        _CURRENT.reset(token)


def probe(index: int, count: Node, where: str) -> Node:
    """The SIZE node of a plan that only computes the count of size `index` (the trace stopped there)."""
    return Node.make(Op.SIZE, count.dtype, (), (count,), (index, None, where))


def _sized(count: Node, payload: Node, what: str, where: str | None = None) -> tuple[int, Node]:
    """The count of a data-dependent size, known to this trace, and the payload through the SIZE node that checks
    it; NeedsSize where the trace was not given it."""
    sizes = _CURRENT.get()
    found = sizes.nodes.get(payload) if sizes is not None else None
    if found is not None:
        return found.arg[1], found
    node = sized_by(count, lambda n: payload, what, site_of_user() if where is None else where)
    return node.arg[1], node


def sized_by(count: Node, make: Callable[[int], Node], what: str, where: str) -> Node:
    """The SIZE node over the payload `make(n)` makes for the count n of this size (known to this trace, else
    NeedsSize): a fallback's result whose length the values decide (host_calls.py), `count` its length."""
    sizes = _CURRENT.get()
    if sizes is None:
        raise UnsupportedError(f"{what} has a size that depends on the data, which only a kernel's call can know")
    if in_loop_body():
        raise UnsupportedError(
            f"{where}: {what} has a size that depends on the data, which would be read back to the host at every "
            "step of a loop compiled as a loop"
        )
    index = len(sizes.nodes)
    if index >= len(sizes.counts):
        raise NeedsSize(index, count, where)
    n = sizes.counts[index]
    payload = make(n)
    node = Node.make(Op.SIZE, payload.dtype, payload.shape, (count, payload), (index, n, where))
    sizes.nodes[payload] = node
    return node


def site_of_user() -> str:
    """The user's file:line running now, as SIZE nodes and errors name it."""
    file, line = user_frames.user_site()
    return f"{os.path.basename(file)}:{line}"


def number(count: Node, what: str) -> int:
    """A 0-d int the code needs as a Python number that the data decides (np.histogram(bins="auto")'s number of
    bins): read back when the kernel runs, as a selection's count is."""
    assert count.shape == () and count.dtype.kind == "i", count
    n, _ = _sized(count, count, what)
    return n


def positions(mask: Node, what: str, where: str | None = None) -> Node:
    """The flat (C order) positions of the True elements of a bool mask, in order: an int32 array of the count's
    length (np.flatnonzero as int32)."""
    total = mask.size
    if total == 0:
        return build.const(0, np.int32, (0,))
    if total >= 2**31:
        raise UnsupportedError(f"{what} of {total} elements: tracejit selects from at most 2**31 - 1 elements")
    flat = build.reshape(mask, (total,))
    # each selected element's rank among them (a running count), where it is placed; the others all go to the one
    # place past the end, cut off (a scatter of distinct places: every device's atomics keep each value as it is)
    ones = build.cast(flat, np.int32)
    rank = build.binary(Op.SUB, build.scan(ones, "sum", 0), build.const(1, np.int32, (total,)))
    place = build.where(flat, rank, build.const(total, np.int32, (total,)))
    placed = build.scatter(build.const(0, np.int32, (total + 1,)), place, build.iota((total,), 0, np.int32), "sum")
    library.POSITIONED.add(flat)  # (numba: np.flatnonzero computes the same, ir/library.py)
    order = build.slice_(placed, [(0, 1, total)])
    # (a sum, not the scan's last entry: on numba the positions are np.flatnonzero's, and no scan runs)
    count = build.reshape(build.reduce(ones, "sum", (0,)), ())
    n, sized = _sized(count, order, what, where)
    if n == 0:  # (nothing reads the check's payload then; the call still checks the count: every SIZE node is a check)
        return build.const(0, np.int32, (0,))
    return build.slice_(sized, [(0, 1, n)])


def select(values: Node, mask: Node, where: str | None = None) -> Node:
    """x[mask] as an array: the elements (rows, for a mask over x's leading axes) the mask selects, in order;
    `where`: the user's line that selected them."""
    lead = len(mask.shape)
    trailing = values.shape[lead:]
    rows = build.reshape(values, (mask.size,) + trailing)
    return take_rows(rows, positions(mask, "x[mask]", where))


def take_rows(rows: Node, index: Node) -> Node:
    """rows[index] along axis 0 (index: 1-D, every entry inside)."""
    n, trailing = index.shape[0], rows.shape[1:]
    if n == 0 or rows.shape[0] == 0:
        return build.const(0, rows.dtype, (n,) + trailing, rows.weak)
    shape = (n,) + trailing
    spread = build.broadcast_to(build.reshape(index, (n,) + (1,) * len(trailing)), shape)
    return build.gather(
        build.expand(rows, (rows.shape[0],) + trailing), (spread,), (None,) + tuple(range(1, 1 + len(trailing)))
    )


def _as_mask(a: Node) -> Node:
    return a if a.dtype == BOOL else build.binary(Op.NE, a, build.const(0, a.dtype, a.shape))


def nonzero(a: ArrayLike) -> tuple[Tensor, ...]:
    """np.nonzero: the indices of the non-zero elements, one int64 array per axis, in C order."""
    node = as_node(a)
    if node.shape == ():
        raise ValueError(
            "Calling nonzero on 0d arrays is not allowed. Use np.atleast_1d(scalar).nonzero() instead. If the "
            "context of this error is of the form `arr[nonzero(cond)]`, just use `arr[cond]`."
        )
    flat = build.cast(positions(_as_mask(node), "np.nonzero"), np.int64)
    out = []
    stride = node.size
    for size in node.shape:
        stride //= size
        index = flat
        if stride > 1:
            index = build.binary(Op.IDIV, index, build.const(stride, np.int64, index.shape))
        if len(node.shape) > 1:
            index = build.binary(Op.MOD, index, build.const(size, np.int64, index.shape))
        out.append(Tensor(index))
    return tuple(out)


def flatnonzero(a: ArrayLike) -> Tensor:
    """np.flatnonzero: the flat positions of the non-zero elements, int64."""
    node = as_node(a)
    return Tensor(build.cast(positions(_as_mask(node), "np.flatnonzero"), np.int64))


def argwhere(a: ArrayLike) -> Tensor:
    """np.argwhere: the indices of the non-zero elements, one row (int64) per element."""
    node = as_node(a)
    if node.shape == ():  # (NumPy: as the 1-element array, with no columns)
        n = positions(_as_mask(build.reshape(node, (1,))), "np.argwhere").shape[0]
        return Tensor(build.const(0, np.int64, (n, 0)))
    columns = [as_node(c) for c in nonzero(node)]
    n = columns[0].shape[0]
    if n == 0:
        return Tensor(build.const(0, np.int64, (0, len(columns))))
    from tracejit.numpy.joining import stack

    return stack([Tensor(c) for c in columns], axis=1)


def compress(condition: ArrayLike, a: ArrayLike, axis: int | None = None, out=None) -> Tensor:
    """np.compress: the slices of `a` along `axis` (of a flattened where None) that `condition` selects."""
    if out is not None:
        raise UnsupportedError("np.compress(..., out=...) is not supported while tracing; use the returned value")
    cond, node = _as_mask(as_node(condition)), as_node(a)
    if len(cond.shape) != 1:
        raise ShapeError("condition must be a 1-d array")
    if axis is None:
        node, axis = build.reshape(node, (node.size,)), 0
    axis = _axis(axis, len(node.shape), "np.compress")
    length = node.shape[axis]
    if cond.shape[0] > length:  # NumPy reads the condition's first `length` only where the rest is False
        raise InvalidIndexError(
            f"np.compress: the condition has {cond.shape[0]} entries for an axis of {length}; tracejit needs at "
            "most as many entries as the axis has"
        )
    index = positions(cond, "np.compress")
    moved = build.permute(node, (axis,) + tuple(d for d in range(len(node.shape)) if d != axis))
    taken = take_rows(moved, index)
    back = tuple(range(1, axis + 1)) + (0,) + tuple(range(axis + 1, len(node.shape)))
    return Tensor(build.permute(taken, back) if axis else taken)


def extract(condition: ArrayLike, arr: ArrayLike) -> Tensor:
    """np.extract: the elements of flattened `arr` where flattened `condition` is non-zero."""
    cond, node = _as_mask(as_node(condition)), as_node(arr)
    cond = build.reshape(cond, (cond.size,))
    if cond.size > node.size:
        raise InvalidIndexError(
            f"np.extract: a condition of {cond.size} elements for an array of {node.size}; tracejit needs at most "
            "as many"
        )
    return Tensor(take_rows(build.reshape(node, (node.size,)), positions(cond, "np.extract")))


def where(condition: ArrayLike) -> tuple[Tensor, ...]:
    """np.where(condition) with one argument: np.nonzero(condition)."""
    return nonzero(condition)


def unique(
    ar: ArrayLike,
    return_index: bool = False,
    return_inverse: bool = False,
    return_counts: bool = False,
    axis: int | None = None,
    *,
    equal_nan: bool = True,
    sorted: bool = True,
):
    """np.unique of the flattened array: its distinct values sorted (NaN last, one NaN where equal_nan), and as
    asked the position of each one's first occurrence, the inverse (the distinct value's number for every element,
    in the input's shape) and how often each occurs, all int64."""
    if axis is not None:
        raise UnsupportedError("np.unique(..., axis=...) is not supported while tracing; use axis=None")
    if not sorted:
        raise UnsupportedError("np.unique(..., sorted=False) is not supported while tracing; use sorted=True")
    node = as_node(ar)
    flat = build.reshape(node, (node.size,))
    total = flat.size
    extra = []
    if total == 0:
        values = build.const(0, node.dtype, (0,))
        empty = build.const(0, np.int64, (0,))
        extra = (
            [empty] * return_index + [build.const(0, np.int64, node.shape)] * return_inverse + [empty] * return_counts
        )
        return _unique_result(values, extra)
    ordered = build.sort(flat, 0)
    order = build.sort(flat, 0, indices=True)  # (stable: the first occurrence first)
    later, earlier = build.slice_(ordered, [(1, 1, total - 1)]), build.slice_(ordered, [(0, 1, total - 1)])
    differs = build.binary(Op.NE, later, earlier)
    if node.dtype.kind == "f" and equal_nan:  # NaN != NaN: one group for all NaNs (sorted last)
        both = build.binary(Op.AND, build.unary(Op.ISNAN, later), build.unary(Op.ISNAN, earlier))
        differs = build.binary(Op.AND, differs, build.binary(Op.EQ, both, build.const(False, BOOL, both.shape)))
    starts_mask = build.pad(differs, [(1, 0)], True)  # each group's first element, in sorted order
    starts = positions(starts_mask, "np.unique")
    n = starts.shape[0]
    values = take_rows(ordered, starts)
    if return_index:
        extra.append(build.cast(take_rows(order, starts), np.int64))
    if return_inverse:
        group = build.binary(
            Op.SUB, build.scan(build.cast(starts_mask, np.int64), "sum", 0), build.const(1, np.int64, (total,))
        )
        back = build.sort(order, 0, indices=True)  # the inverse of the sort's permutation
        extra.append(build.reshape(take_rows(group, back), node.shape))
    if return_counts:
        ends = (
            build.pad(build.slice_(starts, [(1, 1, n - 1)]), [(0, 1)], total)
            if n > 1
            else build.const(total, np.int32, (n,))
        )
        extra.append(build.cast(build.binary(Op.SUB, ends, starts), np.int64))
    return _unique_result(values, extra)


def _unique_result(values: Node, extra: list[Node]):
    return Tensor(values) if not extra else (Tensor(values), *(Tensor(e) for e in extra))


def _axis(axis: int, ndim: int, what: str) -> int:
    if not -ndim <= axis < ndim:
        raise ShapeError(f"{what}: axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


NUMPY_FUNCTIONS = {
    np.nonzero: nonzero,
    np.flatnonzero: flatnonzero,
    np.argwhere: argwhere,
    np.compress: compress,
    np.extract: extract,
    np.unique: unique,
}
