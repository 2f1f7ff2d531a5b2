"""The ufunc methods tracejit has no primitive for (issue 48 item 4): `reduce` and `accumulate` of any binary ufunc
(np.subtract.accumulate, np.logaddexp.reduce, np.bitwise_and.reduce), and `reduceat` of every one.

NumPy folds such a ufunc along the axis one element after another, and so does this: the ufunc applied to the
running value and the next slice, traced once per element (exactly NumPy's operations, in its order), up to
FOLD_MAX elements; an associative exact ufunc (the bitwise and logical ones on integers and bools) folds as a
tree of halves instead, at any length. `reduceat` with indices known while tracing is one reduction per segment
(NumPy's rules: a segment whose next index is not past its own is the element at its index), stacked along the
axis. np.add, np.multiply, np.maximum and np.minimum reduce and accumulate through tracejit's own reductions and
scans (numpy_protocol.py); their reduceat is segments of those."""

from __future__ import annotations

import functools

import numpy as np

from tracejit.errors import InvalidIndexError, ShapeError, UnsupportedError
from tracejit.numpy.tensor import Tensor, as_node, python_value

FOLD_MAX = 256  # elements a fold traces one by one
SEGMENTS_MAX = 1024  # segments of a reduceat
# exact and associative: any grouping gives NumPy's result, so these fold as a tree at any length
_ASSOCIATIVE = frozenset({np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.logical_and, np.logical_or, np.logical_xor})


@functools.lru_cache(maxsize=256)
def _numpy_folds(ufunc: np.ufunc, dtype: np.dtype, method: str) -> bool:
    """Whether NumPy's `method` of the ufunc is the left fold this module traces, asked of NumPy on a few values of
    the dtype (np.power.reduce([2.0, 3.0, 2.0]) is 4.0 in NumPy 2.4, not (2 ** 3) ** 2: such a method is refused,
    not guessed)."""
    sample = np.array(
        [1.5, 2.25, 0.5, 3.0]
        if dtype.kind == "f"
        else [7, 3, 2, 5]
        if dtype.kind in "iu"
        else [True, False, True, True]
    ).astype(dtype)
    try:
        with np.errstate(all="ignore"):
            running = [sample[0]]
            for value in sample[1:]:
                running.append(ufunc(running[-1], value))
            got = ufunc.reduce(sample) if method == "reduce" else ufunc.accumulate(sample)
    except Exception:  # noqa: BLE001 - (NumPy refuses the dtype: tracing it raises NumPy's error)
        return True
    want = running[-1] if method == "reduce" else np.array(running)
    return bool(np.array_equal(np.asarray(got), np.asarray(want).astype(np.asarray(got).dtype), equal_nan=True))


def _check_fold(ufunc: np.ufunc, dtype: np.dtype, method: str, name: str) -> None:
    if ufunc not in _ASSOCIATIVE and not _numpy_folds(ufunc, np.dtype(dtype), method):
        raise UnsupportedError(
            f"{name} of {np.dtype(dtype)}: NumPy's result is not the fold of the elements in order (np.power.reduce"
            "([2.0, 3.0, 2.0]) is 4.0 there), and tracejit does not guess it; write the fold"
        )


def _apply(ufunc: np.ufunc, a, b):
    from tracejit.numpy.numpy_protocol import array_ufunc

    return array_ufunc(ufunc, "__call__", (a, b), {})


def _axis(axis, ndim: int, name: str) -> int:
    if not -ndim <= axis < ndim:
        raise ShapeError(f"{name}: axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


def _take(t: Tensor, axis: int, k) -> Tensor:
    return t[(slice(None),) * axis + (k,)]


def _checked_binary(ufunc: np.ufunc, method: str) -> None:
    if ufunc.nin != 2 or ufunc.nout != 1:
        raise ValueError(f"{method} only supported for binary functions")


def reduce(ufunc: np.ufunc, array, axis=0, dtype=None, keepdims=False, initial=np._NoValue, where=True) -> Tensor:
    """ufunc.reduce of a binary ufunc tracejit has no reduction for: NumPy's fold along one axis."""
    _checked_binary(ufunc, "reduce")
    name = f"np.{ufunc.__name__}.reduce"
    if where is not True:
        raise UnsupportedError(f"{name}(where=...) is not supported while tracing; use np.where before reducing")
    t = Tensor(as_node(array))
    if dtype is not None:
        t = t.astype(dtype)
    if axis is None and t.ndim == 1:
        axis = 0
    if axis is None or isinstance(axis, tuple):
        axis = tuple(range(t.ndim)) if axis is None else axis
        if len(axis) != 1 and ufunc not in _ASSOCIATIVE:
            raise ValueError(
                f"reduction operation '{ufunc.__name__}' is not reorderable, so at most one axis may be specified"
            )
        if len(axis) != 1:  # (an associative ufunc: over the axes together)
            keep = [d for d in range(t.ndim) if d not in {_axis(a, t.ndim, name) for a in axis}]
            t = t.transpose(keep + [d for d in range(t.ndim) if d not in keep])
            t = t.reshape(tuple(t.shape[: len(keep)]) + (-1,))
            if keepdims:
                raise UnsupportedError(f"{name}(keepdims=True) over several axes is not supported while tracing")
            axis = len(keep)
        else:
            axis = axis[0]
    axis = _axis(axis, t.ndim, name)
    n = t.shape[axis]
    _check_fold(ufunc, t.dtype, "reduce", name)
    if ufunc in _ASSOCIATIVE and n > 1:  # (a tree of halves, each level one operation on whole slices)
        t = _halved(ufunc, t, axis, n)
        n = 1
    items = [_take(t, axis, k) for k in range(n)] if n <= FOLD_MAX else None
    if items is None:
        raise UnsupportedError(
            f"{name} over {n} elements: tracejit folds {ufunc.__name__}, which has no reduction of its own, element "
            f"by element up to {FOLD_MAX}; reduce a shorter axis, or write the fold with a loop"
        )
    if initial is not np._NoValue:  # (the fold's first value, spread over the result's shape)
        from tracejit.numpy.functions import broadcast_to

        shape = t.shape[:axis] + t.shape[axis + 1 :]
        items.insert(0, broadcast_to(Tensor(as_node(initial)).astype(t.dtype), shape))
    if not items:
        raise ValueError(f"zero-size array to reduction operation {ufunc.__name__} which has no identity")
    if ufunc in _ASSOCIATIVE:
        while len(items) > 1:  # (a tree: pairs, then pairs of pairs)
            items = [
                _apply(ufunc, items[k], items[k + 1]) if k + 1 < len(items) else items[k]
                for k in range(0, len(items), 2)
            ]
        result = items[0]
    else:
        result = items[0]
        for item in items[1:]:
            result = _apply(ufunc, result, item)
    expected = ufunc.reduce(np.ones((2,), t.dtype)).dtype if n else t.dtype
    result = Tensor(as_node(result)).astype(expected) if Tensor(as_node(result)).dtype != expected else result
    return Tensor(as_node(result)).reshape(result.shape[:axis] + (1,) + result.shape[axis:]) if keepdims else result


def _halved(ufunc: np.ufunc, t: Tensor, axis: int, n: int) -> Tensor:
    """t folded along `axis` to length 1 by an associative and commutative ufunc: its first half with its second,
    level by level (log2(n) operations on slices, where element by element a long axis traced n of them; an odd
    element waits at the end for the next level)."""
    from tracejit.numpy.joining import concatenate

    def part(start: int, stop: int) -> Tensor:
        return t[(slice(None),) * axis + (slice(start, stop),)]

    while n > 1:
        half = n // 2
        folded = Tensor(as_node(_apply(ufunc, part(0, half), part(half, 2 * half))))
        t = folded if n % 2 == 0 else concatenate([folded, part(2 * half, n)], axis=axis)
        n -= half
    return t


def accumulate(ufunc: np.ufunc, array, axis=0, dtype=None) -> Tensor:
    """ufunc.accumulate of a binary ufunc tracejit has no scan for: NumPy's running fold along the axis."""
    _checked_binary(ufunc, "accumulate")
    name = f"np.{ufunc.__name__}.accumulate"
    t = Tensor(as_node(array))
    if not t.ndim:
        raise ShapeError(f"{name}: cannot accumulate on a scalar (a 0-d array), as in NumPy")
    if dtype is not None:
        t = t.astype(dtype)
    if axis is None:
        if t.ndim > 1:
            raise ShapeError(f"{name}: accumulate does not allow multiple axes; flatten first with .ravel()")
        axis = 0
    axis = _axis(axis, t.ndim, name)
    n = t.shape[axis]
    _check_fold(ufunc, t.dtype, "accumulate", name)
    if n > FOLD_MAX:
        raise UnsupportedError(
            f"{name} over {n} elements: tracejit folds {ufunc.__name__}, which has no scan of its own, element by "
            f"element up to {FOLD_MAX}; accumulate a shorter axis, or write the fold with a loop"
        )
    if n == 0:
        return t
    running = [_take(t, axis, 0)]
    for k in range(1, n):
        running.append(Tensor(as_node(_apply(ufunc, running[-1], _take(t, axis, k)))))
    dt = np.result_type(*(r.dtype for r in running[1:])) if n > 1 else t.dtype
    from tracejit.numpy.joining import stack

    return stack([r.astype(dt) for r in running], axis=axis)


def reduceat(ufunc: np.ufunc, array, indices, axis=0, dtype=None) -> Tensor:
    """ufunc.reduceat(array, indices, axis): for each index, the reduction from it to the next (or the element at
    it where the next is not past it; the last to the end), with indices known while tracing."""
    _checked_binary(ufunc, "reduceat")
    name = f"np.{ufunc.__name__}.reduceat"
    index = python_value(indices, f"{name}'s indices")
    if isinstance(index, Tensor):
        raise UnsupportedError(f"{name} with indices read from arrays is not supported; pass them as a list or array")
    index = np.asarray(index)
    if index.ndim != 1 or index.dtype.kind not in "iu":
        raise ValueError(f"{name}: indices must be a 1-d sequence of integers")
    t = Tensor(as_node(array))
    if dtype is not None:
        t = t.astype(dtype)
    axis = _axis(axis, t.ndim, name)
    n = t.shape[axis]
    if len(index) > SEGMENTS_MAX:
        raise UnsupportedError(f"{name} of {len(index)} segments: tracejit reduces at most {SEGMENTS_MAX} at once")
    for i in index:
        if not 0 <= i < n:
            raise InvalidIndexError(f"index {i} out-of-bounds in {ufunc.__name__}.reduceat [0, {n})")
    from tracejit.numpy.joining import stack
    from tracejit.numpy.numpy_protocol import array_ufunc

    expected = ufunc.reduceat(np.ones((2,), t.dtype), [0]).dtype
    parts = []
    for k, start in enumerate(index):
        stop = index[k + 1] if k + 1 < len(index) else n
        if stop > start:
            piece = t[(slice(None),) * axis + (slice(int(start), int(stop)),)]
            part = array_ufunc(ufunc, "reduce", (piece,), {"axis": axis})
        else:
            part = _take(t, axis, int(start))
        parts.append(Tensor(as_node(part)).astype(expected))
    return stack(parts, axis=axis)
