"""Views as NumPy has them: a traced array made by basic indexing, transpose, reshape, ... is its root
array plus the movement steps from the root to it. Its value is recomputed from the root's current value,
so it sees writes made through the root or another view; a write through it scatters the new values back
to the root through the inverted steps, with movement ops only, so everything stays fused."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from tracejit.ir import build
from tracejit.ir.dtypes import BOOL
from tracejit.ir.graph import MOVEMENT, Node, Op

Step = tuple[Op, object]  # (RESHAPE, shape) | (PERMUTE, perm) | (EXPAND, shape) | (SLICE, spec), as in the IR
Shape = tuple[int, ...]  # a step's arg for RESHAPE, PERMUTE and EXPAND
SliceSpec = tuple[tuple[int, int, int], ...]  # for SLICE: (start, step, length) per dimension

_PROBE = "view probe"  # the arg of the stand-in input that view functions are run on


def probe(shape: tuple[int, ...], dtype) -> Node:
    """A stand-in input node: a view function run on it returns the chain of movement ops it applies."""
    return Node.make(Op.INPUT, dtype, shape, (), _PROBE)


def steps_from(result: Node, start: Node) -> tuple[Step, ...] | None:
    """The movement steps that lead from `start` to `result`, or None when `result` is not start moved."""
    steps = []
    while result is not start:
        if result.op not in MOVEMENT or result.op is Op.PAD:
            return None
        steps.append((result.op, result.arg))
        result = result.srcs[0]
    return tuple(reversed(steps))


def apply(node: Node, steps: tuple[Step, ...]) -> Node:
    for op, arg in steps:
        node = _MOVE[op](node, arg)
    return node


# the arg each builder takes depends on the op (a shape, a permutation or a slice spec), as Node.arg does
_MOVE: dict[Op, Callable[[Node, Any], Node]] = {
    Op.RESHAPE: build.reshape,
    Op.PERMUTE: build.permute,
    Op.EXPAND: build.expand,
    Op.SLICE: build.slice_,
}


def shapes(shape: tuple[int, ...], steps: tuple[Step, ...]) -> list[tuple[int, ...]]:
    """The shape before each step, then the final one."""
    out = [tuple(shape)]
    for op, arg in steps:
        if op is Op.PERMUTE:
            out.append(tuple(out[-1][p] for p in cast(Shape, arg)))
        elif op is Op.SLICE:
            out.append(tuple(n for _, _, n in cast(SliceSpec, arg)))
        else:
            out.append(tuple(cast(Shape, arg)))
    return out


def read_only(steps: tuple[Step, ...]) -> bool:
    """NumPy's broadcast views (np.broadcast_to) are read-only: one element stands for many."""
    return any(op is Op.EXPAND for op, _ in steps)


# --- memory layout: whether NumPy could make the view without a copy ---------------------------------


def c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return tuple(reversed(out))


def strides_after(shape, strides, steps: tuple[Step, ...]) -> tuple[int, ...] | None:
    """Element strides of the view the steps make of an array with these strides; None where a reshape
    cannot be a view (NumPy copies there)."""
    strides = tuple(strides)
    for (op, arg), before in zip(steps, shapes(shape, steps)):
        if op is Op.PERMUTE:
            strides = tuple(strides[p] for p in cast(Shape, arg))
        elif op is Op.SLICE:
            strides = tuple(s * step for s, (_, step, _) in zip(strides, cast(SliceSpec, arg)))
        elif op is Op.EXPAND:
            strides = tuple(0 if a != b else s for s, a, b in zip(strides, before, cast(Shape, arg)))
        else:
            reshaped = _reshape_strides(before, strides, tuple(cast(Shape, arg)))
            if reshaped is None:
                return None
            strides = reshaped
    return strides


def _reshape_strides(old_shape, old_strides, new_shape) -> tuple[int, ...] | None:
    """NumPy's _attempt_nocopy_reshape (C order): the new strides, or None where a copy is needed."""
    if math.prod(old_shape) == 0:
        return c_strides(new_shape)
    dims = [(n, s) for n, s in zip(old_shape, old_strides) if n != 1]
    olddims, oldstrides = [n for n, _ in dims], [s for _, s in dims]
    newstrides = [0] * len(new_shape)
    oi, oj, ni, nj = 0, 1, 0, 1
    while ni < len(new_shape) and oi < len(olddims):
        np_, op = new_shape[ni], olddims[oi]
        while np_ != op:
            if np_ < op:
                np_ *= new_shape[nj]
                nj += 1
            else:
                op *= olddims[oj]
                oj += 1
        for ok in range(oi, oj - 1):
            if oldstrides[ok] != olddims[ok + 1] * oldstrides[ok + 1]:
                return None
        newstrides[nj - 1] = oldstrides[oj - 1]
        for nk in range(nj - 1, ni, -1):
            newstrides[nk - 1] = newstrides[nk] * new_shape[nk]
        ni, oi = nj, oj
        nj, oj = nj + 1, oj + 1
    last = newstrides[ni - 1] if ni >= 1 else 1
    for nk in range(ni, len(new_shape)):
        newstrides[nk] = last
    return tuple(newstrides)


def is_c_contiguous(shape, strides) -> bool:
    """NumPy's flag: size-1 dimensions' strides do not matter, an empty array is contiguous."""
    if math.prod(shape) == 0:
        return True
    return all(s == c or n == 1 for n, s, c in zip(shape, strides, c_strides(shape)))


# --- writes: values in a view's index space brought to its root's ------------------------------------


def scatter(value: Node, steps: tuple[Step, ...], root_shape) -> tuple[Node, Node | None]:
    """`value` (shaped as the view) placed where the view's elements live in the root: (values, mask),
    mask None when the view covers every element of the root. Elements outside the view are filler."""
    covers_all = value.size == math.prod(root_shape)  # the steps of a view never repeat an element
    mask = None if covers_all else build.const(True, BOOL, value.shape)
    for (op, arg), shape in reversed(list(zip(steps, shapes(root_shape, steps)))):
        value = _invert(op, arg, shape, value, 0)
        if mask is not None:
            mask = _invert(op, arg, shape, mask, False)
    return value, mask


def _invert(op: Op, arg, shape, x: Node, fill) -> Node:
    """x, shaped as the result of one movement step, brought back to the step's source `shape`."""
    assert op is not Op.EXPAND, "writes through a broadcast view are refused before"
    if op is Op.RESHAPE:
        return build.reshape(x, shape)
    if op is Op.PERMUTE:
        inverse = tuple(int(i) for i in np.argsort(arg))
        if x.op is Op.CONST:  # an all-true mask: nothing to move
            return build.const(x.arg, x.dtype, shape)
        return build.permute(x, inverse)
    return _unslice(x, arg, shape, fill)


def _unslice(x: Node, spec, shape, fill) -> Node:
    """The inverse of slice_(., spec) on an array of `shape`: element i of x goes to start + i * step;
    the other elements are `fill`. Negative steps flip first; steps > 1 interleave fillers (dilation)."""
    if any(step < 0 for _, step, _ in spec):
        x = build.slice_(x, tuple((n - 1, -1, n) if step < 0 else (0, 1, n) for _, step, n in spec))
    pads = []
    for d, ((start, step, n), size) in enumerate(zip(spec, shape)):
        if step < 0:  # the flipped values go up from the lowest position the slice reaches
            start, step = start + (n - 1) * step, -step
        if step > 1 and n > 1:
            x = _dilate(x, d, step, fill)
        span = (n - 1) * step + 1 if n else 0
        pads.append((start, size - start - span))
    return build.pad(x, tuple(pads), fill)


def _dilate(x: Node, axis: int, step: int, fill) -> Node:
    """step - 1 fillers between neighbours along axis: length n becomes (n - 1) * step + 1."""
    n = x.shape[axis]
    split = x.shape[:axis] + (n, 1) + x.shape[axis + 1 :]
    x = build.reshape(x, split)
    x = build.pad(x, tuple((0, step - 1) if d == axis + 1 else (0, 0) for d in range(len(split))), fill)
    x = build.reshape(x, x.shape[:axis] + (n * step,) + x.shape[axis + 2 :])
    return build.slice_(x, tuple((0, 1, (n - 1) * step + 1) if d == axis else (0, 1, s) for d, s in enumerate(x.shape)))
