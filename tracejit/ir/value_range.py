"""The least and greatest value an integer node can take, where the graph itself proves it: constants, iota, the
clamps min/max by constants (frontend/staged.py clamps a `for` loop's index to its bounds in the body's programs),
sums and differences of those, casts that keep every value, broadcasts and reshapes. Lowering reads it to drop the
bounds check of an index that cannot be out of its axis (ir/lower.py's _bound): a loop body's `A[:, k]` then has
no error record to read after each step."""

from __future__ import annotations

import numpy as np

from tracejit.ir.graph import Node, Op

_VIEWS = (Op.EXPAND, Op.RESHAPE, Op.PERMUTE)
_DEPTH = 32  # (index expressions are short; a deeper one is not proven)

Bound = tuple[int | None, int | None]  # (least, greatest); None: not proven on that side


def value_range(node: Node) -> tuple[int, int] | None:
    """(least, greatest) of every element of an integer node, or None where the graph does not prove both."""
    lo, hi = _bounds(node, 0)
    return None if lo is None or hi is None else (lo, hi)


def clamped_range(node: Node) -> tuple[int, int] | None:
    """value_range of a scalar input clamped by min/max by constants (a loop's index: frontend/staged.py), seen
    through views, casts and constant offsets, else None: what lowering drops a bounds check for. (Other proven
    values, an iota, a constant table, a clamp of an array, keep their check: the SIMT renderers read a checked
    index as index arithmetic, which is how WGSL holds an int64 index without int64.)"""
    root = node
    while True:
        if root.op in _VIEWS or root.op is Op.CAST:
            root = root.srcs[0]
        elif root.op in (Op.ADD, Op.SUB):  # (k + 1, k - 1: a clamped value and a constant)
            others = [s for s in root.srcs if s.op is not Op.CONST]
            if len(others) != 1:
                break
            root = others[0]
        else:
            break
    if root.op not in (Op.MIN, Op.MAX):
        return None
    leaf = root
    while leaf.op in (Op.MIN, Op.MAX):  # (down to the clamped value: a Python-int input, the loop's index)
        others = [s for s in leaf.srcs if s.op is not Op.CONST]
        if len(others) != 1:
            return None
        leaf = others[0]
    return value_range(node) if leaf.op is Op.INPUT and leaf.shape == () else None


def _bounds(node: Node, depth: int) -> Bound:
    if node.dtype.kind not in "iu" or depth > _DEPTH:
        return None, None
    if node.op is Op.CONST:
        value = np.asarray(node.arg)
        return (int(value.min()), int(value.max())) if value.size else (None, None)
    if node.op is Op.IOTA:
        return 0, max(node.shape[node.arg] - 1, 0)
    if node.op in _VIEWS:
        return _bounds(node.srcs[0], depth + 1)
    if node.op is Op.CAST:
        lo, hi = _bounds(node.srcs[0], depth + 1)
        info = np.iinfo(node.dtype)
        # (a cast that may wrap proves nothing)
        return (lo, hi) if lo is not None and hi is not None and info.min <= lo and hi <= info.max else (None, None)
    if node.op not in (Op.MAX, Op.MIN, Op.ADD, Op.SUB):
        return None, None
    (alo, ahi), (blo, bhi) = (_bounds(s, depth + 1) for s in node.srcs)
    if node.op is Op.MAX:  # at least either side's least; at most the greater of both sides' greatest
        lo = max((x for x in (alo, blo) if x is not None), default=None)
        return lo, (max(ahi, bhi) if ahi is not None and bhi is not None else None)
    if node.op is Op.MIN:
        hi = min((x for x in (ahi, bhi) if x is not None), default=None)
        return (min(alo, blo) if alo is not None and blo is not None else None), hi
    if None in (alo, ahi, blo, bhi):
        return None, None
    assert alo is not None and ahi is not None and blo is not None and bhi is not None
    lo, hi = (alo + blo, ahi + bhi) if node.op is Op.ADD else (alo - bhi, ahi - blo)
    info = np.iinfo(node.dtype)
    return (lo, hi) if info.min <= lo and hi <= info.max else (None, None)  # (no wrap-around)
