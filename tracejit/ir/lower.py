"""Lowering one fused group to kernel IR: index math for views, loop structure, dimension merging.

A group computes one realized node `out`. Its output index is a set of variables; every node in the
group is reached with an index expressed in them (movement ops only rewrite the expressions).
A reduction reached inside the group becomes a loop nested in the same parallel index when its result
depends on nothing but that index (softmax, layernorm); otherwise `Realize` asks the scheduler to
write it to memory first. analysis.py finds what the group reads and reduces; this file emits it.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import replace

import numpy as np

from tracejit.errors import InternalError, UnsupportedError
from tracejit.ir.analysis import Analysis, Buffer, RowReduction, decided, source_index
from tracejit.ir.dtypes import identity
from tracejit.ir.gather import data_position, gathered_atoms, row_loop
from tracejit.ir.graph import ELEMENTWISE, Node, Op
from tracejit.ir import split_loops
from tracejit.ir.hoist import hoist
from tracejit.ir.merge_sort import POSITION, local_bytes
from tracejit.ir.kernel_ir import INDEX, Builder, Fault, KOp, KernelIR, Param
from tracejit.ir.layout import LayoutOptions, LoopPlan, plan_loops
from tracejit.ir.value_range import clamped_range
from tracejit.ir.symbolic import Clamp, DataIndex, Div, Expr, Mod, Var
from tracejit.ir.table import MAX_KERNEL_BYTES


def emit(
    name: str,
    group: list[Analysis],
    buffers: dict,
    out_buffers: list[Buffer],
    options: LayoutOptions = LayoutOptions(),
    other: dict[str, int] | None = None,
    extents: dict[str, int] | None = None,
    moving: frozenset[str] | None = None,
) -> tuple[KernelIR, list[Buffer]]:
    """Kernel IR for analysed groups sharing one iteration space (several only when elementwise and of
    one shape); returns the kernel and the buffers its params refer to, outputs first. `other`: the
    extent of each variable in this kernel of the program's twin (the same function traced at other
    sizes of its symbolic dimensions, issue 19): variables whose extent differs there are moving, and no
    layout choice depends on their extent (or `moving`: their names, known already). `extents`: filled with
    this kernel's variables' extents."""
    a = group[0]
    variables = {v.name: v.extent for v in (*a.out_vars, *(v for r in a.reduces for v in r.vars))}
    if extents is not None:
        extents.update(variables)
    if moving is None:
        moving = frozenset(k for k, n in variables.items() if other is not None and other.get(k, n) != n)
    offsets = [o for g in group for o in g.offsets]
    itemsizes = [s for g in group for s in g.itemsizes]
    if a.scans:
        rows = set(a.out_vars) - {a.scan_var}  # the scan variable is the write loop, walked in order
    elif a.reduces:
        rows = set().union(*(e.variables() for r in a.reduces for e in r.kept))
    else:
        rows = set(a.out_vars) - set(row_loop(a.out_vars, offsets) if options.gather_rows else ())
    sorts = any(r.node.op is Op.SORT for r in a.reduces)
    plan = plan_loops(
        a.out_vars,
        rows,
        [r.vars for r in a.reduces],
        offsets,
        options,
        itemsizes,
        plain=bool(a.scans) or sorts or a.update,
        moving=moving,
    )
    if a.scan_reversed:
        assert a.scan_var is not None  # a scan's direction is the direction of its variable
        plan = _walk_backwards(plan, a.scan_var)
    pvars, wvars, rgroups, tile = plan.pvars, plan.wvars, plan.rgroups, plan.tile

    loads = list(dict.fromkeys(b for g in group for b in g.loads))
    params = out_buffers + loads
    n_out = len(out_buffers)
    global_size = math.prod(v.extent for v in pvars)
    inner = sum(math.prod(v.extent for v in g) for g in rgroups) + math.prod(v.extent for v in wvars)
    if plan.row is not None:
        inner = plan.row.extent * (inner + 1)
    kernel = KernelIR(
        name,
        [Param(f"out{i}" if i < n_out else f"in{i - n_out}", b.dtype, b.size, i < n_out) for i, b in enumerate(params)],
        global_size=global_size,
        work=global_size * max(inner, 1) * len(group) * len(tile),
    )
    # the parallel variables come from the global index g, innermost fastest
    gvar = Var("g", global_size)
    unravel, rest = {}, Expr.of(gvar)
    for i, v in enumerate(reversed(pvars)):
        unravel[v] = rest if i == len(pvars) - 1 else rest % v.extent
        rest = rest // v.extent
    e = _Emitter(Builder(kernel), plan.subst, unravel, buffers, params)
    e.update = a.update
    e.var_ref[gvar] = e.b.emit(KOp.GLOBAL, INDEX, (), global_size)
    if plan.row is not None:
        _emit_row_accumulation(e, a, rgroups[0], plan.row, group)
        kernel = _check_tables(hoist(kernel))
        kernel.split_global = options.split_loops  # (see below)
        return kernel, params
    # a row of symbolic length stays out of local memory where its length is fixed in the source
    keeps = (
        a.reduces
        and wvars
        and len(tile) == 1
        and not (options.fixed_locals and any(v.name in moving for r in a.reduces for v in r.vars))
    )
    cached = _row_to_keep(a, group, options.keep_row_max) if keeps else None
    if keeps:
        e.keep_inputs(a.reduces[0], _inputs_to_keep(a, group, buffers, cached, options))
    n = 0
    for reds in _sharing_loops(a.reduces, rgroups, cached, e.inputs, options.share_reduce_loops):
        red: RowReduction = reds[0][0]
        rvars: list[Var] = reds[0][1]
        if red.node.op is Op.SORT:
            e.sorted[red.node] = _emit_sort(e, red, rvars, options.sort_bytes)
            n += 1
            continue
        accs = {
            r.node: [
                e.b.emit(KOp.ACC, r.node.dtype, (), (r.node.arg[0], identity(r.node.arg[0], r.node.dtype)))
                for _ in tile
            ]
            for r, _ in reds
        }
        kept_row = e.keep_row(red) if red is cached else None
        e.walking = (red if n == 0 else None, set(red.vars))
        opened = e.open_loops(rvars, "reduce")
        for _, its_vars in reds[1:]:  # (the loop's variables under each reduction's own names)
            e.var_ref.update((v, e.var_ref[w]) for v, w in zip(its_vars, rvars))
        for k, step in enumerate(tile):
            with e.unrolled(step):
                for r, _ in reds:
                    val = e.value(r.node.srcs[0], r.src_idx)
                    e.b.emit(KOp.UPDATE, None, (accs[r.node][k], val))
                    if kept_row is not None:
                        e.b.emit(KOp.STORE, None, (kept_row, e.index(e.row_position(r.src_idx)), val))
        e.close_loops(opened)
        e.reduced.update(accs)
        n += len(reds)
    e.row_vars = [v for v in a.out_vars if v not in rows]
    e.walking = (None, set(e.row_vars))
    scan_accs = [
        e.b.emit(KOp.ACC, sc.node.dtype, (), (sc.node.arg[0], identity(sc.node.arg[0], sc.node.dtype)))
        for sc in a.scans
    ]
    opened = e.open_loops(wvars, "scan" if a.scans else "loop")
    for k, step in enumerate(tile):
        with e.unrolled(step):
            e.unroll_index = k
            for sc, acc in zip(a.scans, scan_accs):  # one step of each scan, inner ones first
                e.reduced[sc.node] = [e.b.emit(KOp.UPDATE, sc.node.dtype, (acc, e.value(sc.node.srcs[0], sc.idx)))]
            for i, g in enumerate(group):
                val = e.value(g.out, g.out_idx, top=True)
                if g.update:
                    e.b.emit(KOp.ATOMIC, None, (e.params[i], e.index(g.offsets[-1]), val), g.out.arg)
                else:
                    e.b.emit(KOp.STORE, None, (e.params[i], e.index(g.offsets[-1]), val))
    e.close_loops(opened)
    split = options.split_loops and not moving  # (constant extents only: a moving one is an argument of the code)
    if split:
        kernel = split_loops.split(kernel)
    kernel = _check_tables(hoist(kernel))
    # (the global index's split is the renderer's, which computes its cut points from the code's size arguments)
    kernel.split_global = options.split_loops
    return kernel, params


def _sharing_loops(
    reduces: list[RowReduction], rgroups: list[list[Var]], cached, kept_inputs, share: bool = True
) -> list[list]:
    """The reductions in runs that share one loop, each with its loop variables: a reduction joins the run before
    it where its loops have the same extents and it reads none of the run's results (n-body's ax, ay and az, three
    sums over the same pairs: each pair's common terms, 1 / r**3, computed once instead of three times). Sorts,
    the row kept in local memory and the loads kept there (the first reduction stores them) stay alone, as does
    every reduction where the target does not `share` loops (LayoutOptions.share_reduce_loops)."""
    runs: list[list] = []
    for red, rvars in zip(reduces, rgroups):
        last = runs[-1] if runs else None
        if (
            share
            and last is not None
            and not kept_inputs
            and red.node.op is Op.REDUCE
            and last[0][0].node.op is Op.REDUCE
            and red is not cached
            and last[0][0] is not cached
            and [v.extent for v in rvars] == [v.extent for v in last[0][1]]
            and not _reads_any(red.node.srcs[0], {r.node for r, _ in last})
        ):
            last.append((red, rvars))
        else:
            runs.append([(red, rvars)])
    return runs


def _reads_any(node: Node, targets: set[Node]) -> bool:
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if n in targets:
            return True
        if n in seen:
            continue
        seen.add(n)
        stack.extend(n.srcs)
    return False


def _walk_backwards(plan: LoopPlan, var: Var) -> LoopPlan:
    """The output reads the scans at var's last position first (x[::-1].cumsum()[::-1]): the write loop
    counts the scan's steps instead, and var runs backwards over them."""
    step = Var(f"{var.name}s", var.extent)
    backwards = {var: Expr.of(var.extent - 1) - Expr.of(step)}
    subst = {**{k: e.substitute(backwards) for k, e in plan.subst.items()}, **backwards}
    return replace(plan, wvars=[step if v == var else v for v in plan.wvars], subst=subst)


def _check_tables(kernel: KernelIR) -> KernelIR:
    tables = {x.arg for x in kernel.instrs if x.op == KOp.TABLE}
    nbytes = sum(len(t.data) for t in tables)
    if nbytes > MAX_KERNEL_BYTES:
        raise UnsupportedError(
            f"kernel {kernel.name} embeds {len(tables)} constant arrays of {nbytes} bytes in all, "
            f"more than the {MAX_KERNEL_BYTES} bytes of constant memory a GPU kernel has; pass "
            "the larger arrays to the kernel as arguments"
        )
    return kernel


def _emit_sort(e: _Emitter, red: RowReduction, fill: list[Var], sort_bytes: int | None) -> tuple[int, int | None]:
    """The row of a SORT copied into local memory (for argsort with each element's position), padded to a
    power of two with keys that sort last, then sorted in place by one `sort` instruction (numba: a merge
    sort, codegen/cpu/numba_math.py; SIMT targets: a bitonic network, codegen/simt/bitonic.py). Returns the local
    arrays (keys, positions or None)."""
    node = red.node
    src, axis = node.srcs[0], node.arg[0]
    n = src.shape[axis]
    size = 1 << (n - 1).bit_length()
    with_positions = node.arg[1] == "indices"
    e.sort_bytes += local_bytes(node)
    if sort_bytes is not None and e.sort_bytes > sort_bytes:  # fuse.py merges longer rows, analyze splits
        raise InternalError(
            f"kernel sorts rows of {e.sort_bytes} bytes in all, beyond the {sort_bytes} of a work-group's memory"
        )
    keys = e.b.emit(KOp.LOCAL, src.dtype, (), (size, None, size))
    # positions only for argsort: equal keys are indistinguishable in sorted values
    positions = e.b.emit(KOp.LOCAL, POSITION, (), (size, None, size)) if with_positions else None

    def put(at: int, key: int) -> None:
        e.b.emit(KOp.STORE, None, (keys, at, key))
        if positions is not None:
            e.b.emit(KOp.STORE, None, (positions, at, e.b.emit(KOp.CAST, POSITION, (at,))))

    opened = e.open_loops(fill, "loop")
    put(e.index(red.src_idx[axis]), e.value(src, red.src_idx))
    e.close_loops(opened)
    if size > n:
        pad = Var(f"pad{keys}", size - n)
        opened = e.open_loops([pad], "loop")
        put(e.index(Expr.of(pad) + n), e.const(_sorts_last(src.dtype), src.dtype))
        e.close_loops(opened)
    e.b.emit(KOp.SORT, None, (keys,) if positions is None else (keys, positions), n)
    return keys, positions


def _sorts_last(dt: np.dtype):
    """A key no element of the row sorts after (after a NaN of the row too: ties go by position)."""
    if dt.kind == "f":
        return math.nan
    return True if dt.kind == "b" else int(np.iinfo(dt).max)


def _row_to_keep(a: Analysis, group, keep_max: int) -> RowReduction | None:
    """The last reduction of a row kernel, when the write loop needs the very values it reduced
    (softmax's exp(x - max)): those are kept in local memory instead of being computed twice."""
    red = a.reduces[-1]
    src = red.node.srcs[0]
    if (
        red.node.op is Op.SORT
        or src.op in (Op.INPUT, Op.CONST, Op.IOTA, Op.TABLE)
        or math.prod(v.extent for v in red.vars) > keep_max
    ):
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


def _inputs_to_keep(a: Analysis, group, buffers, cached: RowReduction | None, options: LayoutOptions) -> list[Node]:
    """The arrays the first reduction of a row reads that later loops of the row read again (softmax's x,
    read for its max, its sum and its result), when the target keeps them (a GPU's work-group shares the
    row in local memory: one read from global memory instead of two or three) and local memory has room
    beside the kept reduction row. They are the loads reached from the reduction's input through
    elementwise operations only, so the first loop reads every element of their row at its own index."""
    first = a.reduces[0]
    n = math.prod(v.extent for v in first.vars)
    if (
        options.keep_inputs_min is None
        or n < options.keep_inputs_min
        or a.scans
        or a.update
        or any(r.node.op is Op.SORT for r in a.reduces)
        or any(first.src_idx[d] != Expr.of(v) for d, v in zip(first.node.arg[1], first.vars))
    ):
        return []
    room = options.keep_row_max * 8 - (0 if cached is None else n * cached.node.srcs[0].dtype.itemsize)
    later = [r.node.srcs[0] for r in a.reduces[1:]] + [g.out for g in group]
    read_later = _loads_reached(later, buffers, through_reductions=True)
    keep = []
    for node in _loads_reached([first.node.srcs[0]], buffers, through_reductions=False):
        if node in read_later and node.shape == first.node.srcs[0].shape and n * node.dtype.itemsize <= room:
            keep.append(node)
            room -= n * node.dtype.itemsize
    return keep


def _loads_reached(tops: list[Node], buffers, through_reductions: bool) -> list[Node]:
    """The nodes read from memory (inputs, realized values) that computing `tops` reaches: through
    elementwise operations only, or through anything but another kernel's output."""
    found, stack, seen = [], list(tops), set()
    while stack:
        x = stack.pop()
        if x in seen:
            continue
        seen.add(x)
        if x in buffers or x.op is Op.INPUT:
            found.append(x)
        elif x.op in ELEMENTWISE or x.op is Op.CAST or through_reductions and x.op not in (Op.SORT, Op.SCATTER):
            stack.extend(x.srcs)
    return found


def _emit_row_accumulation(e: _Emitter, a: Analysis, rvars: list[Var], row: Var, group) -> None:
    """i-k-j order: a local row of accumulators, the reduction loop outside, the row loop inside."""
    red = a.reduces[0]
    op, dt = red.node.arg[0], red.node.dtype
    length = math.prod(v.extent for v in rvars)
    acc = e.b.emit(KOp.LOCAL, dt, (), (row.extent, op, length))
    opened = e.open_loops([row], "loop")
    e.b.emit(KOp.STORE, None, (acc, e.var_ref[row], e.const(identity(op, dt), dt)))
    e.close_loops(opened)
    opened = e.open_loops(rvars, "reduce")
    inner = e.open_loops([row], "loop")
    e.b.emit(KOp.UPDATE, None, (acc, e.var_ref[row], e.value(red.node.srcs[0], red.src_idx)))
    e.close_loops(inner)
    e.close_loops(opened)
    opened = e.open_loops([row], "loop")
    e.reduced[red.node] = [e.b.emit(KOp.LOAD, dt, (acc, e.var_ref[row]))]
    for i, g in enumerate(group):
        e.b.emit(KOp.STORE, None, (e.params[i], e.index(g.offsets[-1]), e.value(g.out, g.out_idx, top=True)))
    e.close_loops(opened)


class _Emitter:
    def __init__(self, b: Builder, subst, unravel, buffers, params):
        # an index in the analysis' variables -> merged/tiled variables -> (unrolled copy) -> global index
        self.b, self.subst, self.unravel, self.buffers = b, subst, unravel, buffers
        self.params = [b.emit(KOp.PARAM, p.dtype, (), i) for i, p in enumerate(params)]
        self.buffer_param = {id(p): self.params[i] for i, p in enumerate(params)}
        self.var_ref: dict[Var, int] = {}
        self.reduced: dict[Node, list[int]] = {}
        self.sorted: dict[Node, tuple[int, int | None]] = {}  # a sort's local arrays: (keys, positions)
        self.sort_bytes = 0  # their size in all
        self.row: tuple[RowReduction, int] | None = None  # (reduction, local row) whose input values are kept
        self.row_vars: list[Var] = []  # set while emitting the write loop: where kept values are read
        # loads of the row kept in local memory (_inputs_to_keep): node -> its local row, and those stored
        self.inputs: dict[Node, int] = {}
        self.inputs_stored: set[Node] = set()
        self.first: RowReduction | None = None
        # the loop being emitted: (the first reduction while it stores the kept loads, else None; its variables)
        self.walking: tuple[RowReduction | None, set[Var]] = (None, set())
        self.unroll_index = 0
        self.update = False  # emitting a SCATTER's update kernel
        self._unroll: dict = {}
        self._memo: list[dict] = [{}]
        # pure functions of their arguments, asked again by every unrolled copy of a register tile (the values'
        # memo is per copy): a node's source index, and an index after `subst`
        self._sources: dict = {}
        self._substituted: dict[Expr, Expr] = {}

    def keep_row(self, red: RowReduction) -> int:
        """Keeps red's input values in a local row, which it returns."""
        size = math.prod(v.extent for v in red.vars)
        self.row = (red, self.b.emit(KOp.LOCAL, red.node.srcs[0].dtype, (), (size, None, size)))
        return self.row[1]

    def keep_inputs(self, first: RowReduction, nodes: list[Node]) -> None:
        self.first = first
        size = math.prod(v.extent for v in first.vars)
        self.inputs = {n: self.b.emit(KOp.LOCAL, n.dtype, (), (size, None, size)) for n in nodes}

    def _kept_input(self, node: Node, idx) -> int | None:
        """A kept load: in the first reduction's loop read from memory and stored in its local row; in
        the loops after it read back from there, where the index stays in the same row."""
        local = self.inputs.get(node)
        storing, loop_vars = self.walking
        if local is None:
            return None
        assert self.first is not None  # set with the inputs (keep_inputs)
        if storing is not None:
            if idx != storing.src_idx:
                return None
            buf = self.buffers[node]
            val = self.b.emit(KOp.LOAD, node.dtype, (self.buffer_param[id(buf)], self.index(buf.offset_of(idx))))
            self.b.emit(KOp.STORE, None, (local, self.index(self.row_position(idx, self.first)), val))
            self.inputs_stored.add(node)
            return val
        axes = self.first.node.arg[1]
        if (
            node not in self.inputs_stored
            or not loop_vars
            or any((e.variables() - loop_vars) if d in axes else e != self.first.src_idx[d] for d, e in enumerate(idx))
        ):
            return None
        return self.b.emit(KOp.LOAD, node.dtype, (local, self.index(self.row_position(idx, self.first))))

    def row_position(self, idx, red: RowReduction | None = None) -> Expr:
        """Where element idx of the kept reduction input (or of a kept load, in `red`'s row) lives in the
        local row."""
        if red is None:
            assert self.row is not None, "a row position of no kept row"
            red = self.row[0]
        _, axes = red.node.arg
        src_shape = red.node.srcs[0].shape
        pos, stride = Expr(), 1
        for d in reversed(axes):
            pos = pos + idx[d] * stride
            stride *= src_shape[d]
        return pos

    def _kept_value(self, node: Node, idx) -> int | None:
        assert self.row is not None  # asked only where a row is kept
        red, local = self.row
        _, axes = red.node.arg
        same_row = all(e == k for d, (e, k) in enumerate(zip(idx, red.src_idx)) if d not in axes)
        if (
            node is not red.node.srcs[0]
            or not same_row
            or any(not (e.variables() <= set(self.row_vars)) for d, e in enumerate(idx) if d in axes)
        ):
            return None
        return self.b.emit(KOp.LOAD, node.dtype, (local, self.index(self.row_position(idx))))

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
        return self.b.emit(KOp.CONST, dtype, (), np.dtype(dtype).type(value).item())

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
        done = self._substituted.get(expr)
        if done is None:
            done = self._substituted[expr] = expr.substitute(self.subst)
        expr = done
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
                    ref = self.b.emit(KOp.IDIV if isinstance(atom, Div) else KOp.MOD, INDEX, (x, self.const(atom.d)))
                else:
                    ref = self.b.emit(
                        KOp.MAX, INDEX, (self.b.emit(KOp.MIN, INDEX, (x, self._limit(atom))), self.const(atom.lo))
                    )
            terms.append(ref if c == 1 else self.b.emit(KOp.MUL, INDEX, (ref, self.const(c))))
        if expr.const or not terms:
            terms.append(self.const(expr.const))
        out = terms[0]
        for t in terms[1:]:
            out = self.b.emit(KOp.ADD, INDEX, (out, t))
        return out

    def _limit(self, atom: Clamp) -> int:
        """A clamp's upper limit. A kept clamp's follows a symbolic extent (layout.register_tile): it is an
        int32 constant of its own, cast, so that it is never one instruction with an index constant that
        happens to have its value at some size (the tile's factor, a row length), which would make the
        kernel's code depend on the size."""
        if atom.kept and atom.hi < 2**31:
            return self.b.emit(KOp.CAST, INDEX, (self.b.emit(KOp.CONST, np.dtype(np.int32), (), atom.hi),))
        return self.const(atom.hi)

    def _bound(self, atom: DataIndex) -> int:
        """An index read from data, as an offset along its axis (see BOUND in kernel_ir); where the graph proves
        it inside the axis (ir/value_range.py: a loop's index, clamped to its bounds), the value, with no check."""
        known = clamped_range(atom.source)
        if known is not None and 0 <= known[0] and known[1] < atom.size and atom.fault is None:
            return self.b.emit(KOp.CAST, INDEX, (self.value(atom.source, atom.at),))
        fault = atom.fault or Fault(
            "IndexOutOfBoundsError", f"index {{value}} is out of bounds for axis {atom.axis} with size {atom.size}"
        )
        return self.b.emit(KOp.BOUND, INDEX, (self.value(atom.source, atom.at),), (atom.size, fault))

    def _known(self, key) -> int | None:
        for memo in reversed(self._memo):
            ref = memo.get(key)
            if ref is not None:
                return ref
        return None

    def value(self, node: Node, idx: tuple[Expr, ...], top: bool = False) -> int:
        """The instruction computing node at idx. A work stack of _value generators, not recursion: each
        yields the (node, idx) of a source it needs and is sent that source's instruction, so the
        instructions come out in a recursive walk's order while the graph's depth is bounded by memory,
        not Python's recursion limit."""
        key = (node, idx)
        ref = self._known(key)
        if ref is not None:
            return ref
        stack = [(key, self._value(node, idx, top))]
        ref = None  # None: the generator on top is new, started with next()
        while stack:
            key, steps = stack[-1]
            try:
                need = next(steps) if ref is None else steps.send(ref)
            except StopIteration as done:
                stack.pop()
                ref = self._memo[-1][key] = done.value
                continue
            ref = self._known(need)
            if ref is None:
                stack.append((need, self._value(*need, False)))
        assert ref is not None  # the first generator's result
        return ref

    def _value(self, node: Node, idx, top: bool) -> Generator[tuple[Node, tuple[Expr, ...]], int, int]:
        """A generator: yields (node, idx) for each source value it needs, returns node's instruction."""
        if self.inputs and not top:
            kept = self._kept_input(node, idx)
            if kept is not None:
                return kept
        if self.row is not None and self.row_vars:
            kept = self._kept_value(node, idx)
            if kept is not None:
                return kept
        if (node in self.buffers and not top) or node.op is Op.INPUT:
            buf = self.buffers[node]
            return self.b.emit(KOp.LOAD, node.dtype, (self.buffer_param[id(buf)], self.index(buf.offset_of(idx))))
        if node.op is Op.CONST:
            return self.const(node.arg, node.dtype)
        if node.op is Op.IOTA:
            return self.b.emit(KOp.CAST, node.dtype, (self.index(idx[node.arg]),))
        if node.op is Op.TABLE:
            table = self.b.emit(KOp.TABLE, node.dtype, (), node.arg)
            position = Buffer.contiguous(None, node.dtype, node.shape).offset_of(idx)
            return self.b.emit(KOp.LOAD, node.dtype, (table, self.index(position)))
        if node.op in (Op.REDUCE, Op.SCAN):
            return self.reduced[node][self.unroll_index]
        if node.op is Op.SORT:
            keys, positions = self.sorted[node]
            local = positions if node.arg[1] == "indices" else keys
            return self.b.emit(KOp.LOAD, node.dtype, (local, self.index(idx[node.arg[0]])))
        if node.op is Op.CAST:
            return self.b.emit(KOp.CAST, node.dtype, ((yield node.srcs[0], idx),))
        if node.op is Op.BITCAST:
            return self.b.emit(KOp.BITCAST, node.dtype, ((yield node.srcs[0], idx),))
        if node.op is Op.WHERE:
            picked = decided(node.srcs[0], idx)
            if picked is not None:  # as analysis walks it: only the branch the index selects
                return (yield node.srcs[1] if picked else node.srcs[2], idx)
        if node.op in ELEMENTWISE:
            srcs = []
            for s in node.srcs:
                srcs.append((yield s, idx))
            return self.b.emit(KOp(node.op.value), node.dtype, tuple(srcs))
        if node.op is Op.SCATTER:  # the value written at idx: the target's, or (update kernel) an update's
            return (yield node.srcs[2] if self.update else node.srcs[0], idx)
        if node.op is Op.GATHER:
            for atom in gathered_atoms(node, idx, self.buffers):  # every index checked, used by the offset or not
                self.index(Expr.of(atom))
            if node.srcs[0].size == 0:
                return self.const(0, node.dtype)
            return (yield node.srcs[0], data_position(node, idx, self.buffers))
        key = (node, idx)
        found = self._sources.get(key)
        if found is None:
            found = self._sources[key] = source_index(node, idx)
        src_idx, valid = found
        # a padded position's test, decided here where the index's bounds decide it: an element read at a
        # fixed position (x[i] in a Python loop) tested every pad of the loop at run time, O(n^2) code
        tests = []
        for expr, lo, hi in valid:
            least, most = expr.bounds()
            if most < lo or least >= hi:  # always in the padding
                return self.const(node.arg[1], node.dtype)
            if least < lo or most >= hi:
                tests.append((expr, lo, hi))
        val = yield node.srcs[0], src_idx
        if not tests:
            return val
        cond = None
        for expr, lo, hi in tests:
            i = self.index(expr)
            for c in (
                self.b.emit(KOp.LE, np.bool_, (self.const(lo), i)),
                self.b.emit(KOp.LT, np.bool_, (i, self.const(hi))),
            ):
                cond = c if cond is None else self.b.emit(KOp.AND, np.bool_, (cond, c))
        return self.b.emit(KOp.WHERE, node.dtype, (cond, val, self.const(node.arg[1], node.dtype)))
