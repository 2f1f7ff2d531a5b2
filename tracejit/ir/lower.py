"""Lowering one fused group to kernel IR: index math for views, loop structure, dimension merging.

A group computes one realized node `out`. Its output index is a set of variables; every node in the
group is reached with an index expressed in them (movement ops only rewrite the expressions).
A reduction reached inside the group becomes a loop nested in the same parallel index when its result
depends on nothing but that index (softmax, layernorm); otherwise `Realize` asks the scheduler to
write it to memory first.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import InternalError, UnsupportedError
from .dtypes import identity
from .gather import data_position, gathered_atoms, row_loop, tag
from .graph import ELEMENTWISE, Node, Op
from .hoist import hoist
from .merge_sort import POSITION, local_bytes
from .kernel_ir import INDEX, Builder, Fault, Kernel, Param
from .layout import LayoutOptions, LoopPlan, plan_loops
from .symbolic import DataIndex, Div, Expr, Mod, Var
from .table import MAX_KERNEL_BYTES


class Realize(Exception):
    """Raised during analysis: `node` must be materialised for the group to be a single kernel."""

    def __init__(self, node: Node):
        super().__init__(node)
        self.node = node


@dataclass(frozen=True)
class Buffer:
    """A memory region: `strides` and `offset` in elements locate the node's elements in it."""
    key: object
    dtype: np.dtype
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    size: int

    @staticmethod
    def contiguous(key, dtype, shape) -> "Buffer":
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
class _Reduce:
    """A reduction, or a sort: a row walked whole before anything reads the result."""
    node: Node
    kept: tuple[Expr, ...]
    vars: list[Var]
    src_idx: tuple[Expr, ...]


@dataclass
class _Scan:
    node: Node
    idx: tuple[Expr, ...]    # where the group reads it: the scan variable along its axis


@dataclass
class Analysis:
    out: Node
    out_vars: list[Var]
    out_idx: tuple[Expr, ...]
    reduces: list[_Reduce] = field(default_factory=list)  # in dependency order
    offsets: list[Expr] = field(default_factory=list)
    itemsizes: list[int] = field(default_factory=list)   # the element size of each offset's array
    loads: list[Buffer] = field(default_factory=list)
    reads: dict = field(default_factory=dict)   # buffer key -> the offsets it is read at
    scans: list[_Scan] = field(default_factory=list)      # in dependency order
    scan_var: Var | None = None      # the output variable every scan steps along (a loop, in order)
    scan_reversed: bool = False      # the output walks it backwards: x[::-1].cumsum()[::-1]
    update: bool = False             # a SCATTER's second kernel: over its updates, combined in atomically


MIN_ROWS_FOR_ROW_KERNEL = 16   # fewer rows than this: reduce separately so the write loop is parallel
MIN_WRITE_FOR_SPLIT = 4096
# A computed value needed at more elements than MAX_RECOMPUTE per element written, and costing at least
# MIN_RECOMPUTE_COST operations on loaded values, is written to memory first: a stencil of a stencil (iterated
# updates) would otherwise recompute it at every element of a growing neighbourhood, and the kernel would grow
# with each iteration. Cheaper values (a select between two reads: reflect padding, a roll) stay fused.
MAX_RECOMPUTE = 4
MIN_RECOMPUTE_COST = 4


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
    found: dict[Node, _Reduce] = {}
    allowed = set(out_vars)
    needed_at: dict[Node, int] = {}     # computed values: at how many indices that vary per element
    memory: dict[Node, bool] = {}      # whether a value loads anything

    scans: dict[Node, tuple[Expr, ...]] = {}

    def visit(node: Node, idx: tuple[Expr, ...], in_reduce: bool = False) -> None:
        key = (node, idx, in_reduce)
        if key in seen:
            return
        seen.add(key)
        if node in buffers and node is not out or node.op is Op.INPUT:
            buf = buffers[node]
            a.offsets.append(buf.offset_of(idx))
            a.itemsizes.append(buf.dtype.itemsize)
            a.reads.setdefault(buf.key, []).append(a.offsets[-1])
            if buf not in a.loads:
                a.loads.append(buf)
        elif node.op in (Op.CONST, Op.IOTA, Op.TABLE):
            return
        elif node.op in ELEMENTWISE:
            if node is not out and any(e.variables() for e in idx):
                needed_at[node] = needed_at.get(node, 0) + 1
                if needed_at[node] > MAX_RECOMPUTE and _cost(node, buffers, memory) >= MIN_RECOMPUTE_COST:
                    raise Realize(node)
            for s in node.srcs:
                visit(s, idx, in_reduce)
        elif node.op is Op.SCAN:
            step = _scan_step(node, idx, allowed)
            if in_reduce or step is None or a.scan_var is not None and step != (a.scan_var, a.scan_reversed):
                raise Realize(node)  # not read in step with one loop of the output: computed once, stored
            if node in scans:
                if scans[node] != idx:
                    raise Realize(node)  # read at two positions: would scan twice
                return
            scans[node] = idx
            a.scan_var, a.scan_reversed = step
            visit(node.srcs[0], idx)
            a.scans.append(_Scan(node, idx))  # post-order: a scan of a scan after the inner one
        elif node.op in (Op.REDUCE, Op.SORT):   # a sort, like a reduction, walks whole rows first
            axes = node.arg[1] if node.op is Op.REDUCE else (node.arg[0],)
            kept = tuple(Expr() if d in axes else e for d, e in enumerate(idx))
            if any(not e.variables() <= allowed for e in kept):
                raise Realize(node)  # depends on another reduction's loop variable: recomputed per step
            if node in found:
                if found[node].kept != kept:
                    raise Realize(node)  # needed at two different indices: would reduce twice
                return
            k = len(found)
            rvars = [Var(f"r{k}_{d}", node.srcs[0].shape[d]) for d in axes if node.srcs[0].shape[d] != 1]
            it_r = iter(rvars)
            src_idx = tuple((Expr.of(next(it_r)) if node.srcs[0].shape[d] != 1 else Expr()) if d in axes
                            else e for d, e in enumerate(idx))
            found[node] = red = _Reduce(node, kept, rvars, src_idx)
            visit(node.srcs[0], src_idx, True)
            a.reduces.append(red)  # post-order: inner reductions first
        elif node.op is Op.GATHER:
            for s in node.srcs[1:]:
                visit(s, idx, in_reduce)
            if node.srcs[0].size:   # an empty axis is never read: every index into it is an error
                visit(node.srcs[0], data_position(node, idx), in_reduce)
        elif node.op is Op.SCATTER:   # only as `out`: elsewhere it is read from its buffer
            if update:
                visit(node.srcs[1], idx[:1])
                visit(node.srcs[2], idx)
            else:
                visit(node.srcs[0], idx)
        else:
            src_idx, _ = source_index(node, idx)
            visit(node.srcs[0], src_idx, in_reduce)

    visit(out, out_idx)
    a.offsets.append(Buffer.contiguous(None, out.dtype, out.shape).offset_of(
        (_scatter_position(out, out_idx),) + out_idx[1:] if update else out_idx))
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
            raise Realize(sorts[0])   # each fits the work-group's memory, not all at once: one is stored
    return a


def _scatter_position(node: Node, idx: tuple[Expr, ...]) -> Expr:
    """The row of a SCATTER's result that update idx[0] combines into, read from its positions."""
    positions = node.srcs[1]
    return Expr.of(DataIndex(positions, idx[:1], node.shape[0], 0, tag(positions)))


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
    """Whether computing node loads anything."""
    stack, order = [node], []
    while stack:
        n = stack.pop()
        if n in memo:
            continue
        if n.op is Op.INPUT or n in buffers:
            memo[n] = True
            continue
        order.append(n)
        stack.extend(s for s in n.srcs if s not in memo)
    for n in reversed(order):
        memo.setdefault(n, any(memo.get(s, False) for s in n.srcs))
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
        out = [None] * len(idx)
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


def c_strides(shape) -> list[int]:
    """The element strides of a C-contiguous array of this shape."""
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return out[::-1]


# ---- emission ----

def emit(name: str, group: list[Analysis], buffers: dict, out_buffers: list[Buffer],
         options: LayoutOptions = LayoutOptions()) -> tuple[Kernel, list[Buffer]]:
    """Kernel IR for analysed groups sharing one iteration space (several only when elementwise and of
    one shape); returns the kernel and the buffers its params refer to, outputs first."""
    a = group[0]
    offsets = [o for g in group for o in g.offsets]
    itemsizes = [s for g in group for s in g.itemsizes]
    if a.scans:
        rows = set(a.out_vars) - {a.scan_var}   # the scan variable is the write loop, walked in order
    elif a.reduces:
        rows = set().union(*(e.variables() for r in a.reduces for e in r.kept))
    else:
        rows = set(a.out_vars) - set(row_loop(a.out_vars, offsets) if options.gather_rows else ())
    sorts = any(r.node.op is Op.SORT for r in a.reduces)
    plan = plan_loops(a.out_vars, rows, [r.vars for r in a.reduces], offsets, options, itemsizes,
                      plain=bool(a.scans) or sorts or a.update)
    if a.scan_reversed:
        plan = _walk_backwards(plan, a.scan_var)
    pvars, wvars, rgroups, tile = plan.pvars, plan.wvars, plan.rgroups, plan.tile

    loads = list(dict.fromkeys(b for g in group for b in g.loads))
    params = out_buffers + loads
    n_out = len(out_buffers)
    global_size = math.prod(v.extent for v in pvars)
    inner = sum(math.prod(v.extent for v in g) for g in rgroups) + math.prod(v.extent for v in wvars)
    if plan.row is not None:
        inner = plan.row.extent * (inner + 1)
    kernel = Kernel(name, [Param(f"out{i}" if i < n_out else f"in{i - n_out}", b.dtype, b.size, i < n_out)
                           for i, b in enumerate(params)], global_size=global_size,
                    work=global_size * max(inner, 1) * len(group) * len(tile))
    # the parallel variables come from the global index g, innermost fastest
    gvar = Var("g", global_size)
    unravel, rest = {}, Expr.of(gvar)
    for i, v in enumerate(reversed(pvars)):
        unravel[v] = rest if i == len(pvars) - 1 else rest % v.extent
        rest = rest // v.extent
    e = _Emitter(Builder(kernel), plan.subst, unravel, buffers, params)
    e.update = a.update
    e.var_ref[gvar] = e.b.emit("global", INDEX, (), global_size)
    if plan.row is not None:
        _emit_row_accumulation(e, a, rgroups[0], plan.row, group)
        return _check_tables(hoist(kernel)), params
    cached = _row_to_keep(a, group, options.keep_row_max) if a.reduces and wvars and len(tile) == 1 else None
    for red, rvars in zip(a.reduces, rgroups):
        if red.node.op is Op.SORT:
            e.sorted[red.node] = _emit_sort(e, red, rvars, options.sort_bytes)
            continue
        op = red.node.arg[0]
        accs = [e.b.emit("acc", red.node.dtype, (), (op, identity(op, red.node.dtype))) for _ in tile]
        if red is cached:
            e.keep_row(red)
        opened = e.open_loops(rvars, "reduce")
        for acc, step in zip(accs, tile):
            with e.unrolled(step):
                val = e.value(red.node.srcs[0], red.src_idx)
                e.b.emit("update", None, (acc, val))
                if red is cached:
                    e.b.emit("store", None, (e.row[1], e.index(e.row_position(red.src_idx)), val))
        e.close_loops(opened)
        e.reduced[red.node] = accs
    e.row_vars = [v for v in a.out_vars if v not in rows]
    scan_accs = [e.b.emit("acc", sc.node.dtype, (), (sc.node.arg[0], identity(sc.node.arg[0], sc.node.dtype)))
                 for sc in a.scans]
    opened = e.open_loops(wvars, "scan" if a.scans else "loop")
    for k, step in enumerate(tile):
        with e.unrolled(step):
            e.unroll_index = k
            for sc, acc in zip(a.scans, scan_accs):   # one step of each scan, inner ones first
                e.reduced[sc.node] = [e.b.emit("update", sc.node.dtype, (acc, e.value(sc.node.srcs[0], sc.idx)))]
            for i, g in enumerate(group):
                val = e.value(g.out, g.out_idx, top=True)
                if g.update:
                    e.b.emit("atomic", None, (e.params[i], e.index(g.offsets[-1]), val), g.out.arg)
                else:
                    e.b.emit("store", None, (e.params[i], e.index(g.offsets[-1]), val))
    e.close_loops(opened)
    return _check_tables(hoist(kernel)), params


def _walk_backwards(plan: LoopPlan, var: Var) -> LoopPlan:
    """The output reads the scans at var's last position first (x[::-1].cumsum()[::-1]): the write loop
    counts the scan's steps instead, and var runs backwards over them."""
    step = Var(f"{var.name}s", var.extent)
    backwards = {var: Expr.of(var.extent - 1) - Expr.of(step)}
    subst = {**{k: e.substitute(backwards) for k, e in plan.subst.items()}, **backwards}
    return replace(plan, wvars=[step if v == var else v for v in plan.wvars], subst=subst)


def _check_tables(kernel: Kernel) -> Kernel:
    tables = {x.arg for x in kernel.instrs if x.op == "table"}
    nbytes = sum(len(t.data) for t in tables)
    if nbytes > MAX_KERNEL_BYTES:
        raise UnsupportedError(f"kernel {kernel.name} embeds {len(tables)} constant arrays of {nbytes} bytes in all, "
                               f"more than the {MAX_KERNEL_BYTES} bytes of constant memory a GPU kernel has; pass "
                               "the larger arrays to the kernel as arguments")
    return kernel


def _emit_sort(e: _Emitter, red: _Reduce, fill: list[Var], sort_bytes: int | None) -> tuple[int, int | None]:
    """The row of a SORT copied into local memory (for argsort with each element's position), padded to a
    power of two with keys that sort last, then sorted in place by one `sort` instruction (numba: a merge
    sort, runtime/numba_math.py; SIMT targets: a bitonic network, codegen/bitonic.py). Returns the local
    arrays (keys, positions or None)."""
    node = red.node
    src, axis = node.srcs[0], node.arg[0]
    n = src.shape[axis]
    size = 1 << (n - 1).bit_length()
    with_positions = node.arg[1] == "indices"
    e.sort_bytes += local_bytes(node)
    if sort_bytes is not None and e.sort_bytes > sort_bytes:   # fuse.py merges longer rows, analyze splits
        raise InternalError(f"kernel sorts rows of {e.sort_bytes} bytes in all, beyond the {sort_bytes} of "
                            "a work-group's memory")
    keys = e.b.emit("local", src.dtype, (), (size, None, size))
    # positions only for argsort: equal keys are indistinguishable in sorted values
    positions = e.b.emit("local", POSITION, (), (size, None, size)) if with_positions else None

    def put(at: int, key: int) -> None:
        e.b.emit("store", None, (keys, at, key))
        if positions is not None:
            e.b.emit("store", None, (positions, at, e.b.emit("cast", POSITION, (at,))))

    opened = e.open_loops(fill, "loop")
    put(e.index(red.src_idx[axis]), e.value(src, red.src_idx))
    e.close_loops(opened)
    if size > n:
        pad = Var(f"pad{keys}", size - n)
        opened = e.open_loops([pad], "loop")
        put(e.index(Expr.of(pad) + n), e.const(_sorts_last(src.dtype), src.dtype))
        e.close_loops(opened)
    e.b.emit("sort", None, (keys,) if positions is None else (keys, positions), n)
    return keys, positions


def _sorts_last(dt: np.dtype):
    """A key no element of the row sorts after (after a NaN of the row too: ties go by position)."""
    if dt.kind == "f":
        return math.nan
    return True if dt.kind == "b" else int(np.iinfo(dt).max)


def _row_to_keep(a: Analysis, group, keep_max: int) -> "_Reduce | None":
    """The last reduction of a row kernel, when the write loop needs the very values it reduced
    (softmax's exp(x - max)): those are kept in local memory instead of being computed twice."""
    red = a.reduces[-1]
    src = red.node.srcs[0]
    if red.node.op is Op.SORT or src.op in (Op.INPUT, Op.CONST, Op.IOTA, Op.TABLE) \
            or math.prod(v.extent for v in red.vars) > keep_max:
        return None
    stack, seen = [g.out for g in group], set()
    while stack:
        n = stack.pop()
        if n is src:
            return red
        if n in seen or n.op is Op.REDUCE:
            continue
        seen.add(n)
        stack.extend(n.srcs)
    return None


def _emit_row_accumulation(e: "_Emitter", a: Analysis, rvars: list[Var], row: Var, group) -> None:
    """i-k-j order: a local row of accumulators, the reduction loop outside, the row loop inside."""
    red = a.reduces[0]
    op, dt = red.node.arg[0], red.node.dtype
    length = math.prod(v.extent for v in rvars)
    acc = e.b.emit("local", dt, (), (row.extent, op, length))
    opened = e.open_loops([row], "loop")
    e.b.emit("store", None, (acc, e.var_ref[row], e.const(identity(op, dt), dt)))
    e.close_loops(opened)
    opened = e.open_loops(rvars, "reduce")
    inner = e.open_loops([row], "loop")
    e.b.emit("update", None, (acc, e.var_ref[row], e.value(red.node.srcs[0], red.src_idx)))
    e.close_loops(inner)
    e.close_loops(opened)
    opened = e.open_loops([row], "loop")
    e.reduced[red.node] = [e.b.emit("load", dt, (acc, e.var_ref[row]))]
    for i, g in enumerate(group):
        e.b.emit("store", None, (e.params[i], e.index(g.offsets[-1]), e.value(g.out, g.out_idx, top=True)))
    e.close_loops(opened)


class _Emitter:
    def __init__(self, b: Builder, subst, unravel, buffers, params):
        # an index in the analysis' variables -> merged/tiled variables -> (unrolled copy) -> global index
        self.b, self.subst, self.unravel, self.buffers = b, subst, unravel, buffers
        self.params = [b.emit("param", p.dtype, (), i) for i, p in enumerate(params)]
        self.buffer_param = {id(p): self.params[i] for i, p in enumerate(params)}
        self.var_ref: dict[Var, int] = {}
        self.reduced: dict[Node, list[int]] = {}
        self.sorted: dict[Node, tuple[int, int | None]] = {}   # a sort's local arrays: (keys, positions)
        self.sort_bytes = 0                                     # their size in all
        self.row: tuple | None = None   # (reduction, local row) whose input values are kept
        self.row_vars: list[Var] = []   # set while emitting the write loop: where kept values are read
        self.unroll_index = 0
        self.update = False             # emitting a SCATTER's update kernel
        self._unroll: dict = {}
        self._memo: list[dict] = [{}]

    def keep_row(self, red: _Reduce) -> None:
        size = math.prod(v.extent for v in red.vars)
        self.row = (red, self.b.emit("local", red.node.srcs[0].dtype, (), (size, None, size)))

    def row_position(self, idx) -> Expr:
        """Where element idx of the kept reduction input lives in the local row."""
        red = self.row[0]
        _, axes = red.node.arg
        src_shape = red.node.srcs[0].shape
        pos, stride = Expr(), 1
        for d in reversed(axes):
            pos = pos + idx[d] * stride
            stride *= src_shape[d]
        return pos

    def _kept_value(self, node: Node, idx) -> int | None:
        red, local = self.row
        _, axes = red.node.arg
        same_row = all(e == k for d, (e, k) in enumerate(zip(idx, red.src_idx)) if d not in axes)
        if node is not red.node.srcs[0] or not same_row or any(
                not (e.variables() <= set(self.row_vars)) for d, e in enumerate(idx) if d in axes):
            return None
        return self.b.emit("load", node.dtype, (local, self.index(self.row_position(idx))))

    @contextmanager
    def unrolled(self, step: dict):
        """Emit one unrolled copy: the tiled variables take this copy's values. Values are not shared
        between copies through the memo (their indices differ); identical instructions still are."""
        self._unroll = step
        self.unroll_index = 0
        self._memo.append({})
        try:
            yield
        finally:
            self._memo.pop()
            self._unroll = {}

    def const(self, value, dtype=INDEX) -> int:
        return self.b.emit("const", dtype, (), np.dtype(dtype).type(value).item())

    def open_loops(self, vars_, kind):
        opened = []
        for v in vars_:
            r = self.b.open_range(v.extent, kind)
            self.var_ref[v] = r
            self._memo.append({})
            opened.append(r)
        return opened

    def close_loops(self, opened):
        for r in reversed(opened):
            self._memo.pop()
            self.b.close_range(r)

    def index(self, expr: Expr) -> int:
        expr = expr.substitute(self.subst)
        if self._unroll:
            expr = expr.substitute(self._unroll)
        return self._index(expr.substitute(self.unravel))

    def _index(self, expr: Expr) -> int:
        terms = []
        for atom, c in expr.terms:
            if isinstance(atom, Var):
                ref = self.var_ref[atom]
            elif isinstance(atom, DataIndex):
                ref = self._bound(atom)
            else:
                x = self._index(atom.x)
                if isinstance(atom, (Div, Mod)):
                    ref = self.b.emit("idiv" if isinstance(atom, Div) else "mod", INDEX, (x, self.const(atom.d)))
                else:
                    ref = self.b.emit("max", INDEX, (self.b.emit("min", INDEX, (x, self.const(atom.hi))),
                                                     self.const(atom.lo)))
            terms.append(ref if c == 1 else self.b.emit("mul", INDEX, (ref, self.const(c))))
        if expr.const or not terms:
            terms.append(self.const(expr.const))
        out = terms[0]
        for t in terms[1:]:
            out = self.b.emit("add", INDEX, (out, t))
        return out

    def _bound(self, atom: DataIndex) -> int:
        """An index read from data, as an offset along its axis (see BOUND in kernel_ir)."""
        fault = Fault("IndexOutOfBoundsError",
                      f"index {{value}} is out of bounds for axis {atom.axis} with size {atom.size}")
        return self.b.emit("bound", INDEX, (self.value(atom.source, atom.at),), (atom.size, fault))

    def value(self, node: Node, idx: tuple[Expr, ...], top: bool = False) -> int:
        key = (node, idx)
        for memo in reversed(self._memo):
            if key in memo:
                return memo[key]
        ref = self._value(node, idx, top)
        self._memo[-1][key] = ref
        return ref

    def _value(self, node: Node, idx, top: bool) -> int:
        if self.row is not None and self.row_vars:
            kept = self._kept_value(node, idx)
            if kept is not None:
                return kept
        if (node in self.buffers and not top) or node.op is Op.INPUT:
            buf = self.buffers[node]
            return self.b.emit("load", node.dtype, (self.buffer_param[id(buf)], self.index(buf.offset_of(idx))))
        if node.op is Op.CONST:
            return self.const(node.arg, node.dtype)
        if node.op is Op.IOTA:
            return self.b.emit("cast", node.dtype, (self.index(idx[node.arg]),))
        if node.op is Op.TABLE:
            table = self.b.emit("table", node.dtype, (), node.arg)
            position = Buffer.contiguous(None, node.dtype, node.shape).offset_of(idx)
            return self.b.emit("load", node.dtype, (table, self.index(position)))
        if node.op in (Op.REDUCE, Op.SCAN):
            return self.reduced[node][self.unroll_index]
        if node.op is Op.SORT:
            keys, positions = self.sorted[node]
            local = positions if node.arg[1] == "indices" else keys
            return self.b.emit("load", node.dtype, (local, self.index(idx[node.arg[0]])))
        if node.op is Op.CAST:
            return self.b.emit("cast", node.dtype, (self.value(node.srcs[0], idx),))
        if node.op in ELEMENTWISE:
            return self.b.emit(node.op.value, node.dtype, tuple(self.value(s, idx) for s in node.srcs))
        if node.op is Op.SCATTER:   # the value written at idx: the target's, or (update kernel) an update's
            return self.value(node.srcs[2] if self.update else node.srcs[0], idx)
        if node.op is Op.GATHER:
            for atom in gathered_atoms(node, idx):   # every index is checked, used by the data's offset or not
                self.index(Expr.of(atom))
            if node.srcs[0].size == 0:
                return self.const(0, node.dtype)
            return self.value(node.srcs[0], data_position(node, idx))
        src_idx, valid = source_index(node, idx)
        # a padded position's test, decided here where the index's bounds decide it: an element read at a
        # fixed position (x[i] in a Python loop) tested every pad of the loop at run time, O(n^2) code
        tests = []
        for expr, lo, hi in valid:
            least, most = expr.bounds()
            if most < lo or least >= hi:   # always in the padding
                return self.const(node.arg[1], node.dtype)
            if least < lo or most >= hi:
                tests.append((expr, lo, hi))
        val = self.value(node.srcs[0], src_idx)
        if not tests:
            return val
        cond = None
        for expr, lo, hi in tests:
            i = self.index(expr)
            for c in (self.b.emit("le", np.bool_, (self.const(lo), i)), self.b.emit("lt", np.bool_, (i, self.const(hi)))):
                cond = c if cond is None else self.b.emit("and", np.bool_, (cond, c))
        return self.b.emit("where", node.dtype, (cond, val, self.const(node.arg[1], node.dtype)))
