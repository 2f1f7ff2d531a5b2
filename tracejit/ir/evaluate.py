"""Graphs evaluated with NumPy where the frontend needs a value itself: a constant traced array (np.zeros(...)
made in a kernel, then written with constants), or a number computed from the kernel's Python-number arguments."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from tracejit.ir.graph import ELEMENTWISE, Node, Op, toposort
from tracejit.ir.ops import NUMPY_OPS

_REDUCE: dict[str, Callable[..., np.ndarray]] = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}


def constant_value(node: Node) -> np.ndarray | None:
    """The value of `node` as a NumPy array, or None when it depends on a kernel argument."""
    order = toposort([node])
    if any(n.op in (Op.INPUT, Op.LOOP, Op.HOST, Op.SIZE) for n in order):
        return None
    values: dict[Node, np.ndarray] = {}
    with np.errstate(all="ignore"):
        for n in order:
            values[n] = np.asarray(_evaluate(n, [values[s] for s in n.srcs]), n.dtype).reshape(n.shape)
    return values[node]


def value_given(node: Node, inputs: Mapping[int, object]) -> tuple[np.ndarray, frozenset[int]] | None:
    """The value of `node` where every kernel argument it depends on is among `inputs` (position -> value),
    with the positions it read; None when it depends on another argument."""
    order = toposort([node])
    read = frozenset(n.arg for n in order if n.op is Op.INPUT)
    if not read <= inputs.keys() or any(n.op in (Op.LOOP, Op.HOST, Op.SIZE) for n in order):
        return None
    values: dict[Node, np.ndarray] = {}
    with np.errstate(all="ignore"):
        for n in order:
            value = inputs[n.arg] if n.op is Op.INPUT else _evaluate(n, [values[s] for s in n.srcs])
            try:
                values[n] = np.asarray(value, n.dtype).reshape(n.shape)
            except (OverflowError, ValueError):  # a Python int past its traced dtype: not a value to use
                return None
    return values[node], read


def _evaluate(n: Node, srcs: list[np.ndarray]):
    if n.op is Op.CONST:
        return np.full(n.shape, n.arg, n.dtype)
    if n.op is Op.IOTA:
        index = np.arange(n.shape[n.arg]).reshape([-1 if d == n.arg else 1 for d in range(len(n.shape))])
        return np.broadcast_to(index, n.shape).astype(n.dtype)
    if n.op is Op.TABLE:
        return n.arg.values
    if n.op is Op.CAST:
        return srcs[0].astype(n.dtype)
    if n.op is Op.BITCAST:
        return np.ascontiguousarray(srcs[0]).view(n.dtype)
    if n.op in ELEMENTWISE:
        return NUMPY_OPS[n.op.value](*srcs)
    if n.op is Op.REDUCE:
        op, axes = n.arg
        return _REDUCE[op](srcs[0], axis=axes, keepdims=True)
    if n.op is Op.PAD:
        pads, fill = n.arg
        return np.pad(srcs[0], pads, constant_values=fill)
    if n.op is Op.GATHER:
        return _gather(n, srcs[0], srcs[1:])
    return view(n, srcs[0])


def _gather(n: Node, data: np.ndarray, indices: list[np.ndarray]) -> np.ndarray:
    """build.gather's value: an index outside its axis raises what the kernel would (IndexError, or a
    faulting.check's error)."""
    from tracejit.ir.faulting import fault_of

    grids = np.indices(n.shape, sparse=True) if n.shape else ()
    read = iter(indices)
    places = []
    for axis, (size, source) in enumerate(zip(data.shape, n.arg)):
        if source is not None:
            places.append(grids[source])
            continue
        index = np.asarray(next(read), np.int64)
        outside = (index < -size) | (index >= size)
        if outside.any():
            value = int(index[outside].flat[0])
            fault = fault_of(n)
            if fault is not None:
                raise fault.exception(value)
            raise IndexError(f"index {value} is out of bounds for axis {axis} with size {size}")
        places.append(np.where(index < 0, index + size, index))
    return data[tuple(places)]


def view(n: Node, x: np.ndarray) -> np.ndarray:
    """A reshape, permute, expand or slice `n` of x's value, as a NumPy view where NumPy can make one."""
    if n.op is Op.RESHAPE:
        return x.reshape(n.shape)
    if n.op is Op.PERMUTE:
        return x.transpose(n.arg)
    if n.op is Op.EXPAND:
        return np.broadcast_to(x, n.shape)
    assert n.op is Op.SLICE, f"no NumPy evaluation for {n.op}"
    return x[
        tuple(
            slice(start, start + step * count if start + step * count >= 0 else None, step)
            for start, step, count in n.arg
        )
    ]
