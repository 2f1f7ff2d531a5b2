"""The same graph at other sizes along some of its axes: how a program written for whole arrays runs on one
block of them (dask/stages.py). Constants keep their values, so a mean still divides by the count of
the whole axis it was written for."""

from __future__ import annotations

import math
from collections.abc import Callable

from tracejit.errors import InternalError
from tracejit.ir.axis_reads import reshape_map
from tracejit.ir.graph import ELEMENTWISE, Node, Op

Shape = tuple[int, ...]


def resize(
    targets: list[tuple[Node, Shape]], leaf: Callable[[Node, Shape], Node | None], size_of: Callable[[Node, int], int]
) -> list[Node]:
    """Each target node rebuilt at its new shape. leaf(node, shape): the node that stands for an input (or for
    a value computed elsewhere) at that shape, None for a node to rebuild from its sources; size_of(node, axis):
    the new size of an axis that a reduction removes (nothing above it says)."""
    memo: dict[tuple[Node, Shape], Node] = {}
    for node, shape in targets:
        stack = [(node, tuple(shape), False)]
        while stack:  # iterative: graphs can be deeper than Python's recursion limit
            n, shape, ready = stack.pop()
            if (n, shape) in memo:
                continue
            stand_in = leaf(n, shape)
            if stand_in is not None:
                memo[(n, shape)] = stand_in
                continue
            needs, arg = _sources_at(n, shape, size_of)
            if ready or all(s in memo for s in needs):
                memo[(n, shape)] = Node.make(n.op, n.dtype, shape, tuple(memo[s] for s in needs), arg, n.weak)
            else:
                stack.append((n, shape, True))
                stack.extend((s, ss, False) for s, ss in needs if (s, ss) not in memo)
    return [memo[(node, tuple(shape))] for node, shape in targets]


def _sources_at(n: Node, shape: Shape, size_of) -> tuple[list[tuple[Node, Shape]], object]:
    """(source, its new shape) for each source of n at `shape`, and n's argument at that shape."""
    op, srcs, arg = n.op, n.srcs, n.arg
    if op is Op.CONST or op is Op.IOTA and shape[arg] == n.shape[arg] or op is Op.TABLE and shape == n.shape:
        return [], arg
    if op in ELEMENTWISE or op is Op.SCAN or op is Op.SORT:
        _unchanged(n, shape, [arg[1]] if op is Op.SCAN else [arg[0]] if op is Op.SORT else [])
        return [(s, shape) for s in srcs], arg
    if not srcs:  # a leaf at a shape it cannot take
        raise InternalError(f"resize: {op.value} {n.shape} cannot be computed at shape {shape}")
    src = srcs[0]
    if op is Op.EXPAND:
        return [(src, tuple(1 if s == 1 else new for s, new in zip(src.shape, shape)))], shape
    if op is Op.PERMUTE:
        return [(src, tuple(shape[arg.index(d)] for d in range(len(shape))))], arg
    if op is Op.RESHAPE:
        follows = reshape_map(src.shape, n.shape)
        new = tuple(shape[r] if isinstance(r, int) else s for r, s in zip(follows, src.shape))
        if math.prod(new) != math.prod(shape):
            raise InternalError(f"resize: reshape {src.shape} -> {n.shape} cannot become {new} -> {shape}")
        return [(src, new)], shape
    if op is Op.SLICE:
        spec: list[tuple[int, int, int]] = []
        sizes: list[int] = []
        for d, ((start, step, count), s) in enumerate(zip(arg, src.shape)):
            if shape[d] == n.shape[d]:
                spec.append((start, step, count))
                sizes.append(s)
            else:
                _whole(n, d, (start, step, count) == (0, 1, s))
                spec.append((0, 1, shape[d]))
                sizes.append(shape[d])
        return [(src, tuple(sizes))], tuple(spec)
    if op is Op.PAD:
        for d, p in enumerate(arg[0]):
            _whole(n, d, p == (0, 0) or shape[d] == n.shape[d])
        return [(src, tuple(new if p == (0, 0) else s for new, p, s in zip(shape, arg[0], src.shape)))], arg
    if op is Op.REDUCE:
        return [(src, tuple(size_of(src, d) if d in arg[1] else new for d, new in enumerate(shape)))], arg
    if op is Op.GATHER:
        x = tuple(s if a is None else shape[a] for a, s in zip(arg, src.shape))
        return [(src, x)] + [(i, shape) for i in srcs[1:]], arg
    if op is Op.SCATTER:
        positions, values = srcs[1], srcs[2]
        return [(src, shape), (positions, positions.shape), (values, values.shape[:1] + shape[1:])], arg
    raise InternalError(f"resize: {op.value} {n.shape} cannot be computed at shape {shape}")


def _unchanged(n: Node, shape: Shape, axes) -> None:
    for d in axes:
        _whole(n, d, shape[d] == n.shape[d])


def _whole(n: Node, axis: int, ok: bool) -> None:
    if not ok:  # the planner keeps such axes whole (ir/axis_reads.py says which)
        raise InternalError(f"resize: {n.op.value} {n.shape} needs all of axis {axis}")
