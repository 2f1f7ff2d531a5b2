"""What one fused group reads and computes, before any code: the buffers it reads through views (index
math), the reductions and scans reached inside it, and which nodes must be realized first (`Realize`:
a reduction whose result depends on more than the group's own index goes to memory before it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
import functools
from typing import Literal, NamedTuple

import numpy as np

from tracejit.ir.gather import data_position, tag
from tracejit.ir.graph import ELEMENTWISE, MOVEMENT, Node, Op
from tracejit.ir.merge_sort import local_bytes
from tracejit.ir.symbolic import DataIndex, Expr, Var


class Realize(Exception):
    """Raised during analysis: `node` must be materialised for the group to be a single kernel."""

    def __init__(self, node: Node):
        super().__init__(node)
        self.node = node


class BufferKey(NamedTuple):
    """Which memory a buffer is: argument `index` ("in"), returned value `index` ("out"), temporary
    `index` ("tmp"), or, while fusion decides what to write, the temporary of the node at topological
    position `index` ("pending": renamed "tmp" before the program is built). A tuple: ("in", 0) is the
    first argument's key."""

    kind: Literal["in", "out", "tmp", "pending"]
    index: int  # type: ignore[assignment]  # the field shadows tuple.index(), which nothing calls on a key

    @property
    def argument(self) -> bool:
        """Whether this is an argument's memory (read in place, never allocated)."""
        return self.kind == "in"


@dataclass(frozen=True)
class Buffer:
    """A memory region: `strides` and `offset` in elements locate the node's elements in it."""

    key: BufferKey | None  # None: a layout only (Buffer.contiguous's strides)
    dtype: np.dtype
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    size: int

    @staticmethod
    def contiguous(key: BufferKey | None, dtype, shape) -> Buffer:
        strides, acc = [], 1
        for s in reversed(shape):
            strides.append(acc if s != 1 else 0)
            acc *= s
        return Buffer(key, np.dtype(dtype), tuple(shape), tuple(reversed(strides)), 0, math.prod(shape))

    def offset_of(self, idx: tuple[Expr, ...]) -> Expr:
        out = Expr.of(self.offset)
        for e, st in zip(idx, self.strides):
            if st:
                out = out + e * st
        return out


@dataclass
class RowReduction:
    """A reduction, or a sort: a row walked whole before anything reads the result."""

    node: Node
    kept: tuple[Expr, ...]
    vars: list[Var]
    src_idx: tuple[Expr, ...]


@dataclass
class RowScan:
    node: Node
    idx: tuple[Expr, ...]  # where the group reads it: the scan variable along its axis


@dataclass
class Analysis:
    out: Node
    out_vars: list[Var]
    out_idx: tuple[Expr, ...]
    reduces: list[RowReduction] = field(default_factory=list)  # in dependency order
    offsets: list[Expr] = field(default_factory=list)
    itemsizes: list[int] = field(default_factory=list)  # the element size of each offset's array
    loads: list[Buffer] = field(default_factory=list)
    reads: dict = field(default_factory=dict)  # buffer key -> the offsets it is read at
    scans: list[RowScan] = field(default_factory=list)  # in dependency order
    scan_var: Var | None = None  # the output variable every scan steps along (a loop, in order)
    scan_reversed: bool = False  # the output walks it backwards: x[::-1].cumsum()[::-1]
    update: bool = False  # a SCATTER's second kernel: over its updates, combined in atomically


MIN_ROWS_FOR_ROW_KERNEL = 16  # fewer rows than this: reduce separately so the write loop is parallel
MIN_WRITE_FOR_SPLIT = 4096
# A computed value needed at more elements than MAX_RECOMPUTE per element written (at positions that vary per
# element or fixed ones alike), and costing at least MIN_RECOMPUTE_COST operations on loaded values, is written
# to memory first: a stencil of a stencil (iterated updates) would otherwise recompute it at every element of a
# growing neighbourhood, and the kernel would grow with each iteration; a 1-D FFT fused whole would read each
# stage at every one of n fixed positions. Cheaper values (a select between two reads: reflect padding, a roll)
# stay fused.
MAX_RECOMPUTE = 4
MIN_RECOMPUTE_COST = 4
# A computed value read along output axes it does not vary on (broadcast: a rotation's cosine per column of a
# matrix, read by each of its rows) is recomputed at each of their elements; where they number at least
# MIN_BROADCAST and it costs at least MIN_BROADCAST_COST operations, it is written to memory first (one pass over
# the smaller array) instead. Cheap ones (a reciprocal of a row's sum, a scale) stay fused.
MIN_BROADCAST = 8
MIN_BROADCAST_COST = 8


def analyze(out: Node, buffers: dict, sort_bytes: int | None = None, update: bool = False) -> Analysis:
    """Walk the group of `out`; `buffers` maps realized nodes to their Buffer, `sort_bytes` is the local
    memory for the rows a kernel sorts (None: no limit). A SCATTER is two kernels: the first writes its
    target into the result; the second (update=True) walks the updates, each combined into the result
    at its position."""
    space = out.srcs[2].shape if update else out.shape
    out_vars = [Var(f"o{d}", s) for d, s in enumerate(space) if s != 1]
    it = iter(out_vars)
    out_idx = tuple(Expr.of(next(it)) if s != 1 else Expr() for s in space)
    a = Analysis(out, out_vars, out_idx, update=update)
    if math.prod(space) == 0:
        return a  # no kernel: the result is empty, or there are no updates
    seen: set = set()
    found: dict[Node, RowReduction] = {}
    allowed = set(out_vars)
    needed_at: dict[Node, int] = {}  # computed values: at how many indices that vary per element
    memory: dict[Node, bool] = {}  # whether a value loads anything

    scans: dict[Node, tuple[Expr, ...]] = {}

    # an explicit work stack, not recursion: a graph's depth is bounded by memory, not Python's recursion
    # limit (a Python loop of thousands of steps traces into a chain that deep). Entries are a visit
    # (node, idx, in_reduce) or a callable run once everything pushed above it is done; children are pushed
    # in reverse, so the walk and the order of what it records are a recursive pre-order walk's.
    stack: list = [(out, out_idx, False)]
    while stack:
        task = stack.pop()
        if callable(task):
            task()
            continue
        node, idx, in_reduce = task
        key = (node, idx, in_reduce)
        if key in seen:
            continue
        seen.add(key)
        if node in buffers and node is not out or node.op is Op.INPUT:
            buf = buffers[node]
            a.offsets.append(buf.offset_of(idx))
            a.itemsizes.append(buf.dtype.itemsize)
            a.reads.setdefault(buf.key, []).append(a.offsets[-1])
            if buf not in a.loads:
                a.loads.append(buf)
        elif node.op in (Op.CONST, Op.IOTA, Op.TABLE):
            continue
        elif node.op in ELEMENTWISE:
            if node is not out:  # (constant positions too: a value read at thousands of them, a fused FFT's, is stored)
                needed_at[node] = needed_at.get(node, 0) + 1
                if needed_at[node] > MAX_RECOMPUTE and _cost(node, buffers, memory) >= MIN_RECOMPUTE_COST:
                    raise Realize(node)
                if (
                    not in_reduce
                    and _broadcast_over(idx, out_vars) >= MIN_BROADCAST
                    and _elementwise_cost(node, buffers, memory) >= MIN_BROADCAST_COST
                ):
                    raise Realize(node)
            picked = decided(node.srcs[0], idx) if node.op is Op.WHERE else None
            if picked is not None:  # only the branch the index selects is read
                stack.append((node.srcs[1] if picked else node.srcs[2], idx, in_reduce))
            else:
                stack.extend((s, idx, in_reduce) for s in reversed(node.srcs))
        elif node.op is Op.SCAN:
            step = _scan_step(node, idx, allowed)
            if in_reduce or step is None or a.scan_var is not None and step != (a.scan_var, a.scan_reversed):
                raise Realize(node)  # not read in step with one loop of the output: computed once, stored
            if node in scans:
                if scans[node] != idx:
                    raise Realize(node)  # read at two positions: would scan twice
                continue
            scans[node] = idx
            a.scan_var, a.scan_reversed = step
            # post-order: a scan of a scan after the inner one
            stack.append(functools.partial(a.scans.append, RowScan(node, idx)))
            stack.append((node.srcs[0], idx, False))
        elif node.op in (Op.REDUCE, Op.SORT):  # a sort, like a reduction, walks whole rows first
            axes = node.arg[1] if node.op is Op.REDUCE else (node.arg[0],)
            kept = tuple(Expr() if d in axes else e for d, e in enumerate(idx))
            if any(not e.variables() <= allowed for e in kept):
                raise Realize(node)  # depends on another reduction's loop variable: recomputed per step
            if node in found:
                if found[node].kept != kept:
                    raise Realize(node)  # needed at two different indices: would reduce twice
                continue
            k = len(found)
            rvars = [Var(f"r{k}_{d}", node.srcs[0].shape[d]) for d in axes if node.srcs[0].shape[d] != 1]
            it_r = iter(rvars)
            src_idx = tuple(
                (Expr.of(next(it_r)) if node.srcs[0].shape[d] != 1 else Expr()) if d in axes else e
                for d, e in enumerate(idx)
            )
            found[node] = red = RowReduction(node, kept, rvars, src_idx)
            stack.append(lambda red=red: a.reduces.append(red))  # post-order: inner reductions first
            stack.append((node.srcs[0], src_idx, True))
        elif node.op is Op.GATHER:
            if node.srcs[0].size:  # an empty axis is never read: every index into it is an error
                stack.append((node.srcs[0], data_position(node, idx, buffers), in_reduce))
            stack.extend((s, idx, in_reduce) for s in reversed(node.srcs[1:]))
        elif node.op is Op.SCATTER:  # only as `out`: elsewhere it is read from its buffer
            if update:
                stack.append((node.srcs[2], idx, False))
                stack.append((node.srcs[1], idx[:1], False))
            else:
                stack.append((node.srcs[0], idx, False))
        else:
            src_idx, _ = source_index(node, idx)
            stack.append((node.srcs[0], src_idx, in_reduce))

    a.offsets.append(
        Buffer.contiguous(None, out.dtype, out.shape).offset_of(
            (_scatter_position(out, out_idx),) + out_idx[1:] if update else out_idx
        )
    )
    a.itemsizes.append(out.dtype.itemsize)
    if a.scans:
        rows = set(out_vars) - {a.scan_var}
        for r in a.reduces:
            if set().union(*(e.variables() for e in r.kept)) != rows:
                raise Realize(r.node)  # a reduction per step of the scan, or recomputed per row
    if a.reduces:
        deps = [set().union(*(e.variables() for e in r.kept)) for r in a.reduces]
        rows = set().union(*deps)
        for r, d in zip(a.reduces, deps):
            if d != rows:
                raise Realize(r.node)  # would be recomputed for every value of the other variables
        n_rows = math.prod(v.extent for v in rows)
        n_write = math.prod(v.extent for v in out_vars if v not in rows)
        last = a.reduces[-1].node
        if n_rows < MIN_ROWS_FOR_ROW_KERNEL and n_write >= MIN_WRITE_FOR_SPLIT and last.op is Op.REDUCE:
            raise Realize(last)
        sorts = [r.node for r in a.reduces if r.node.op is Op.SORT]
        if sort_bytes is not None and len(sorts) > 1 and sum(map(local_bytes, sorts)) > sort_bytes:
            raise Realize(sorts[0])  # each fits the work-group's memory, not all at once: one is stored
    return a


def _scatter_position(node: Node, idx: tuple[Expr, ...]) -> Expr:
    """The row of a SCATTER's result that update idx[0] combines into, read from its positions."""
    positions = node.srcs[1]
    return Expr.of(DataIndex(positions, idx[:1], node.shape[0], 0, tag(positions)))


def _broadcast_over(idx: tuple[Expr, ...], out_vars: list[Var]) -> int:
    """How many elements of the output read a value at the same index idx: the product of the extents of the
    output's variables idx does not depend on."""
    used = set().union(*(e.variables() for e in idx)) if idx else set()
    return math.prod(v.extent for v in out_vars if v not in used)


def _elementwise_cost(node: Node, buffers: dict, memo: dict) -> int:
    """How many elementwise operations on loaded values computing node takes, counting through views and
    gathers only (a reduction, a sort or a scan feeding it is its own work, in its own loop; what is computed
    from constants and indices alone is free, as in _cost)."""
    seen, stack, count = set(), [node], 0
    while stack:
        n = stack.pop()
        if n in seen or n in buffers and n is not node:
            continue
        seen.add(n)
        if n.op in ELEMENTWISE:
            count += _reads_memory(n, buffers, memo)
        elif n.op not in MOVEMENT and n.op is not Op.GATHER:
            continue
        stack.extend(n.srcs)
    return count


def _cost(node: Node, buffers: dict, memo: dict) -> int:
    """How many elementwise operations on loaded values computing node once takes (shared ones once;
    index arithmetic and constants are free, loads and reductions end the count)."""
    seen, stack, count = set(), [node], 0
    while stack:
        n = stack.pop()
        if n in seen or n.op is Op.INPUT or n in buffers and n is not node or n.op is Op.REDUCE:
            continue
        seen.add(n)
        if n.op in ELEMENTWISE and _reads_memory(n, buffers, memo):
            count += 1
        stack.extend(n.srcs)
    return count


def _reads_memory(node: Node, buffers: dict, memo: dict) -> bool:
    """Whether computing node loads anything (a post-order walk: each node of the DAG once, however many
    paths reach it; syrk's triangular updates made a walk per path take minutes)."""
    stack, seen = [(node, False)], set()
    while stack:
        n, srcs_done = stack.pop()
        if n in memo:
            continue
        if srcs_done:
            memo[n] = any(memo[s] for s in n.srcs)
        elif n.op is Op.INPUT or n in buffers:
            memo[n] = True
        elif n not in seen:
            seen.add(n)
            stack.append((n, True))
            stack.extend((s, False) for s in n.srcs if s not in memo)
    return memo[node]


def _scan_step(node: Node, idx: tuple[Expr, ...], allowed: set[Var]) -> tuple[Var, bool] | None:
    """(output variable, reversed) when the scan is read at that variable along its axis, forwards or
    backwards over its whole extent, and at row variables elsewhere; None when it is read otherwise."""
    _, axis = node.arg
    e = idx[axis]
    var = next((atom for atom, _ in e.terms if isinstance(atom, Var)), None)
    if var is None or var not in allowed or e not in (Expr.of(var), Expr.of(var.extent - 1) - Expr.of(var)):
        return None
    others = set().union(*(f.variables() for d, f in enumerate(idx) if d != axis))
    if var in others or not others <= allowed:
        return None
    return var, e != Expr.of(var)


def source_index(node: Node, idx: tuple[Expr, ...]):
    """Index into node.srcs[0] for a movement op, and for PAD the (expr, lo, hi) validity ranges."""
    src = node.srcs[0]
    if node.op is Op.PERMUTE:
        out: list[Expr | None] = [None] * len(idx)  # each filled: arg is a permutation
        for k, p in enumerate(node.arg):
            out[p] = idx[k]
        return tuple(out), ()
    if node.op is Op.EXPAND:
        return tuple(Expr() if s == 1 else e for s, e in zip(src.shape, idx)), ()
    if node.op is Op.SLICE:
        return tuple(e * step + start for e, (start, step, _) in zip(idx, node.arg)), ()
    if node.op is Op.RESHAPE:
        if src.size == 0:  # nothing is ever read: the loops around this have no iterations
            return tuple(Expr() for _ in src.shape), ()
        lin = Expr()
        for e, st in zip(idx, c_strides(node.shape)):
            lin = lin + e * st
        return tuple(Expr() if s == 1 else (lin // st) % s for s, st in zip(src.shape, c_strides(src.shape))), ()
    if node.op is Op.PAD:
        pads, _ = node.arg
        out, valid = [], []
        for e, (before, _after), n in zip(idx, pads, src.shape):
            lo, hi = e.bounds()
            if lo < before or hi >= before + n:
                valid.append((e, before, before + n))
            out.append((e - before).clamp(0, n - 1))
        return tuple(out), tuple(valid)
    raise AssertionError(f"not a movement op: {node.op}")


def decided(node: Node, idx: tuple[Expr, ...]) -> bool | None:
    """The value of the boolean `node` at idx where the index alone decides it (a constant seen through
    movement ops), else None. `x[i] = v` in a Python loop writes where(pad(True), pad(v), x): read at a
    fixed position, each step's mask is known, and only one branch is walked; walking both made the group of
    an n-step recurrence n**2 nodes."""
    while True:
        if node.op is Op.CONST:
            return bool(node.arg)
        if node.op not in MOVEMENT:
            return None
        if node.op is Op.PAD:
            pads, fill = node.arg
            ranges = [(e.bounds(), before, n) for e, (before, _), n in zip(idx, pads, node.srcs[0].shape)]
            if any(hi < before or lo >= before + n for (lo, hi), before, n in ranges):
                return bool(fill)  # always in the padding
            if any(lo < before or hi >= before + n for (lo, hi), before, n in ranges):
                return None  # in it for some values of the index only
        idx, _ = source_index(node, idx)
        node = node.srcs[0]


def c_strides(shape) -> list[int]:
    """The element strides of a C-contiguous array of this shape."""
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return out[::-1]


# ---- emission ----
