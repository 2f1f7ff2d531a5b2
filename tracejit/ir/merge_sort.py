"""Sorting rows longer than one work-group's memory holds (SIMT targets): the row is cut into blocks
that a work-group sorts, then pairs of sorted runs are merged, pass after pass, until one run is left.

A merge pass is gathers and elementwise ops only: output position k of two runs A and B takes i elements
from A, where i (the co-rank of k) is found by a branchless binary search of log2(run) steps, each
comparing A[i - 1] with B[k - i]; equal keys take A first, so the merge is stable. Every step reads the
runs at positions computed from data (graph GATHERs of the previous pass' runs, which are stored: read
inside the search they would be recomputed per step), so each pass is one kernel, and a consumer that
reads a few positions of the last pass (a median) searches only for those.
"""

from __future__ import annotations

import math

import numpy as np

from tracejit.ir import build
from tracejit.ir.graph import Node, Op

POSITION = np.dtype(np.int32)


def local_bytes(node: Node, length: int | None = None) -> int:
    """The local memory a SORT's row (or a row of `length`) takes: padded to a power of two, its keys and,
    for positions, an int32 each. A float16 key is held as a float32 there (the renderers compute float16 in
    float32): counted as 4 bytes, or a row of 8,192 float16 keys with positions took 64 KiB of CUDA's 48."""
    src = node.srcs[0]
    size = 1 << ((length or src.shape[node.arg[0]]) - 1).bit_length()
    key = max(src.dtype.itemsize, 4) if src.dtype.kind == "f" else src.dtype.itemsize
    return size * (key + (POSITION.itemsize if node.arg[1] == "indices" else 0))


def block_length(node: Node, sort_bytes: int | None) -> int | None:
    """The longest block (a power of two) a work-group sorts for this SORT, or None when the whole row
    fits (or there is no limit)."""
    if sort_bytes is None or local_bytes(node) <= sort_bytes:
        return None
    return max(2, 1 << ((sort_bytes // local_bytes(node, 1)).bit_length() - 1))


def merge_sorted(node: Node, block: int, stored: set[Node]) -> Node:
    """`node` (a SORT) computed by sorting blocks of `block` elements and merging them; adds to `stored`
    the runs every pass but the last writes to memory."""
    x, (axis, what) = node.srcs[0], node.arg
    n = x.shape[axis]
    kept = tuple(d for d in range(len(x.shape)) if d != axis)
    rows = tuple(x.shape[d] for d in kept)
    runs = 1 << (-(-n // block) - 1).bit_length()  # a power of two of blocks
    flat = build.reshape(build.permute(x, kept + (axis,)), (*rows, n))
    padded = build.pad(flat, [(0, 0)] * len(rows) + [(0, runs * block - n)], _sorts_last(x.dtype))
    blocks = build.reshape(padded, (*rows, runs, block))
    with_positions, length = what == "indices", runs * block
    if with_positions:  # positions in the row: in the block, plus the block's offset
        positions = build.sort(blocks, len(rows) + 1, indices=True)
        keys = _take(blocks, positions)
        first = build.iota(positions.shape, len(rows), np.int32)
        positions = build.binary(Op.ADD, positions, build.binary(Op.MUL, first, _const(block, positions)))
    else:
        keys, positions = build.sort(blocks, len(rows) + 1), None
    while runs > 1:
        stored.update(n for n in (keys, positions) if n is not None)
        keys, positions = _merge_pass(keys, positions)
        runs //= 2
    out = keys if positions is None else positions  # positions: there when with_positions
    out = build.slice_(build.reshape(out, (*rows, length)), [(0, 1, s) for s in rows] + [(0, 1, n)])
    inverse = tuple(sorted(range(len(x.shape)), key=lambda d: (kept + (axis,))[d]))
    return build.permute(out, inverse)


def _merge_pass(keys: Node, positions: Node | None) -> tuple[Node, Node | None]:
    """(..., runs, m) sorted runs -> (..., runs / 2, 2m): each pair of neighbours merged."""
    *rows, runs, m = keys.shape
    pairs = (*rows, runs // 2, 2, m)

    def half(x: Node, h: int) -> Node:
        x = build.reshape(x, pairs)
        return build.reshape(
            build.slice_(x, [(0, 1, s) for s in (*rows, runs // 2)] + [(h, 1, 1), (0, 1, m)]), (*rows, runs // 2, m)
        )

    def halves(x: Node) -> tuple[Node, Node]:
        return half(x, 0), half(x, 1)

    a, b = halves(keys)
    out_shape = (*rows, runs // 2, 2 * m)
    k = build.iota(out_shape, len(out_shape) - 1, np.int32)
    lo = build.binary(Op.MAX, build.binary(Op.SUB, k, _const(m, k)), _const(0, k))
    hi = build.binary(Op.MIN, k, _const(m, k))
    taken = lo  # elements taken from A: the largest i in [lo, hi] with A[i - 1] <= B[k - i]
    step = 1 << m.bit_length()
    while step >= 1:
        candidate = build.binary(Op.ADD, taken, _const(step, taken))
        inside = build.binary(Op.LE, candidate, hi)
        a_last = _take(a, _clip(build.binary(Op.SUB, candidate, _const(1, k)), m))
        b_next = _take(b, _clip(build.binary(Op.SUB, k, candidate), m))
        go = build.binary(Op.AND, inside, _not_after(a_last, b_next))
        taken = build.where(go, candidate, taken)
        step //= 2
    from_b = build.binary(Op.SUB, k, taken)
    i, j = _clip(taken, m), _clip(from_b, m)
    a_i, b_j = _take(a, i), _take(b, j)
    # A's next element goes first unless A is used up, or B's is strictly smaller (ties: A first)
    use_a = build.binary(
        Op.AND,
        build.binary(Op.LT, taken, _const(m, taken)),
        build.binary(Op.OR, build.binary(Op.LE, _const(m, from_b), from_b), _not_after(a_i, b_j)),
    )
    merged = build.where(use_a, a_i, b_j)
    if positions is None:
        return merged, None
    pa, pb = halves(positions)
    return merged, build.where(use_a, _take(pa, i), _take(pb, j))


def _not_after(a: Node, b: Node) -> Node:
    """a sorts no later than b: b < a is false, NaN being larger than every number."""
    after = build.binary(Op.LT, b, a)
    if a.dtype.kind == "f":
        a_nan, b_nan = build.unary(Op.ISNAN, a), build.unary(Op.ISNAN, b)
        after = build.binary(Op.OR, after, build.binary(Op.AND, a_nan, build.unary(Op.INVERT, b_nan)))
    return build.unary(Op.INVERT, after)


def _take(x: Node, at: Node) -> Node:
    """x[..., at] along the last axis, at of x's shape but the last axis (an in-range int32 position)."""
    return build.gather(x, (at,), tuple(range(len(x.shape) - 1)) + (None,))


def _clip(i: Node, m: int) -> Node:
    return build.binary(Op.MIN, build.binary(Op.MAX, i, _const(0, i)), _const(m - 1, i))


def _const(value: int, like: Node) -> Node:
    return build.const(value, like.dtype, like.shape)


def _sorts_last(dt: np.dtype):
    if dt.kind == "f":
        return math.nan
    return True if dt.kind == "b" else int(np.iinfo(dt).max)
