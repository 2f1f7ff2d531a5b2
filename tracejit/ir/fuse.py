"""Fusion: decide which nodes are written to memory, then lower each group to one kernel.

Everything is fused by default; a node is materialised only when it is an output, or when keeping it
in a consumer's kernel would repeat a reduction (see analysis.Realize). Large reductions into few values
are split in two stages first, so their work spreads over all cores (or work-groups) and float sums
accumulate in short runs.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import replace, dataclass, field

import numpy as np

from tracejit.ir import build, contraction, library, merge_sort
from tracejit.ir.dtypes import identity
from tracejit.ir.graph import ELEMENTWISE, LEAVES, Node, Op, rewrite, toposort
from tracejit.ir.kernel_ir import KernelIR
from tracejit.ir.layout import LayoutOptions
from tracejit.ir.analysis import Analysis, Buffer, BufferKey, Realize, analyze
from tracejit.ir.lower import emit

SPLIT_MIN_REDUCE = 1 << 15  # reductions at least this long ...
SPLIT_MAX_OUTPUT = 64  # ... into fewer values than this run in two stages
SPLIT_CHUNK = 4096
SPLIT_MIN_SCAN = 1 << 14  # scans at least this long over fewer rows than SPLIT_MAX_OUTPUT run blocked
MAX_FUSED_DEPTH = 256  # dependent operations in one kernel at most (_deep_cuts)
MAX_INDEX_NESTING = 128  # reshapes and pads in a row in one kernel at most (_deep_cuts) ...
GATHER_NESTING = 4  # ... where a gather counts as this many


@dataclass(frozen=True)
class Program:
    """Kernels and the buffers between them; a target-neutral launch plan, built complete by schedule()."""

    kernels: list[KernelIR]
    launches: list[list[BufferKey]]  # per kernel, the buffer keys of its params
    buffers: dict[BufferKey, Buffer]  # key -> buffer; kinds "in", "out" and "tmp"
    outputs: list[BufferKey]  # buffer key per returned value
    int_scalars: list[tuple[int, np.dtype]]  # Python-int arguments narrowed to a smaller int dtype
    # per kernel, per value it writes: (its buffer key, the offset it is stored at, offsets read per buffer key)
    accesses: list[list[tuple[BufferKey, object, dict]]] = field(default_factory=list)
    # kernel index -> a matrix product or sort the plan may run as a NumPy call (LayoutOptions.library)
    library_calls: dict[int, library.Call] = field(default_factory=dict)
    # @tj.kernel(dynamic=...): None: sizes become arguments of a kernel once a second value is seen;
    # True: from the first compile; {"x": (0,)}: from the first compile for those axes (others as None);
    # False: every size its own compile, sizes as constants
    dynamic: bool | dict | None = None
    # the same program traced with other sizes of its symbolic dimensions: sizes that differ between a
    # kernel and its twin are arguments of its code from the first compile. Traced on first use, by
    # find_twin(this program) (only a kernel whose size-free key was not met before asks)
    find_twin: Callable[[Program], Program | None] | None = None
    every_loop: bool = False  # warming named dimensions: compile each loop kind their sizes can lead to
    ahead: bool = False  # compiled ahead of its calls (warming): compile what its calls would later
    # the graph as scheduled (long reductions split, sorts merged: what the kernels compute) and, per node,
    # the kernels that compute it (more than one where a cheap value is recomputed); inputs have none
    graph: list[Node] = field(default_factory=list)
    node_kernels: dict[Node, tuple[int, ...]] = field(default_factory=dict)
    # per kernel name, the extent of each of its loop variables before layout (lower.emit): what tells the
    # twin's lowering which variables follow a symbolic dimension
    extents: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def twin(self) -> Program | None:
        if "_twin" not in self.__dict__:  # (a cache: the one attribute set after construction)
            object.__setattr__(self, "_twin", None if self.find_twin is None else self.find_twin(self))
        return self.__dict__["_twin"]

    def writes_in_place(self, out_key, in_index: int) -> bool:
        """Whether output `out_key` may be written over the memory of argument `in_index` (in the layout of
        the output): the kernel that writes it reads that argument only at the very element it writes, no
        other value of that kernel and no later kernel reads the argument, so every read sees the old value."""
        in_key = BufferKey("in", in_index)
        writer = next(
            (k for k, values in enumerate(self.accesses) if any(key == out_key for key, _, _ in values)), None
        )
        if writer is None:
            return False
        read = self.buffers.get(in_key)
        contiguous = Buffer.contiguous(None, read.dtype, read.shape).strides if read is not None else None
        if read is not None and (read.offset or read.strides != contiguous):
            return False
        if any(in_key in launch for launch in self.launches[writer + 1 :]):
            return False
        return all(
            not reads.get(in_key) if key != out_key else all(o == store for o in reads.get(in_key, ()))
            for key, store, reads in self.accesses[writer]
        )


def schedule(
    outputs: list[Node],
    inputs: dict[Node, Buffer],
    options: LayoutOptions = LayoutOptions(),
    other: Program | None = None,
    moving: dict[str, frozenset] | None = None,
    *,
    dynamic: bool | dict | None = None,
    every_loop: bool = False,
    ahead: bool = False,
    find_twin: Callable[[Program], Program | None] | None = None,
) -> Program:
    """Partition the graph of `outputs` into kernels; `inputs` gives each argument's buffer, `options`
    the target's layout preferences. `other`: the same function scheduled at other sizes of its symbolic
    dimensions (issue 19): loop variables whose extent differs there get layouts that do not depend on it;
    or `moving`: those variables' names per kernel name, known from an earlier shape. The keywords are
    the Program's fields of the same names."""
    extents: dict[str, dict[str, int]] = {}
    stored: set[Node] = set()
    # products and sorts by the host's libraries (numba, an OpenCL CPU), unless products are tiled kernels (a GPU,
    # or a choice of the device's layout: autotune's, the tests')
    by_library = options.library and not options.tiled
    outputs = _merge_long_sorts(_split_scans(_split_reductions(outputs)), options.sort_bytes, stored, by_library)
    outputs, calls_for = (
        library.plan(outputs, stored)
        if by_library
        else contraction.plan(outputs, stored)
        if options.tiled
        else (outputs, {})
    )
    # a scatter is written to memory (its target copied in, then the updates combined)
    realized: set[Node] = set(outputs) | stored | {n for n in toposort(outputs) if n.op is Op.SCATTER}
    order = toposort(outputs)
    realized |= _deep_cuts(order, realized)
    budget = None if options.max_buffers is None else _read_budget(options.max_buffers)
    realizing = _Realizing(outputs, order, realized, inputs, options.sort_bytes, budget)
    analyses = realizing.run()
    reads, writes = _assign_buffers(outputs, realized, inputs, order)
    _rename_buffers(analyses, realizing.reads, reads)
    kernels: list[KernelIR] = []
    launches: list[list[BufferKey]] = []
    accesses: list[list[tuple[BufferKey, object, dict]]] = []
    calls: dict[int, library.Call] = {}
    node_kernels: dict[Node, tuple[int, ...]] = {}
    for group in _merge_elementwise(analyses, writes, budget):
        for a in group:
            for n in _computed(a.out, reads):
                if len(kernels) not in node_kernels.get(n, ()):
                    node_kernels[n] = node_kernels.get(n, ()) + (len(kernels),)
        what = calls_for.get(group[0].out)
        name = f"k{len(kernels)}_{'matmul' if isinstance(what, library.Gemm) else _describe(group[0])}"
        extents[name] = {}
        kernel, params = emit(
            name,
            group,
            reads,
            [writes[a.out] for a in group],
            # (a sort the host's library runs: its kernel IR, the reference, sorts the whole row in one piece)
            replace(options, sort_bytes=None) if by_library and isinstance(what, library.Sort) else options,
            None if other is None else other.extents.get(name),
            extents[name],
            None if moving is None else moving.get(name, frozenset()),
        )
        if options.tiled and isinstance(what, library.Gemm):
            kernel.contraction = contraction.describe(what, group[0].out, reads, writes[group[0].out], params)
        found = by_library and what and library.call(what, group[0].out, params, reads, writes[group[0].out].key)
        if found:
            calls[len(kernels)] = found
        kernels.append(kernel)
        launches.append([_key(p) for p in params])
        accesses.append([(_key(writes[a.out]), a.offsets[-1], a.reads) for a in group])
    used = {_key(b): b for b in [*reads.values(), *writes.values()]}
    return Program(
        kernels,
        launches,
        used,
        [_key(writes[o]) for o in outputs],
        _narrowed_int_scalars(outputs),
        accesses,
        calls,
        dynamic=dynamic,
        find_twin=find_twin,
        every_loop=every_loop,
        ahead=ahead,
        graph=list(outputs),
        node_kernels=node_kernels,
        extents=extents,
    )


def _key(buffer: Buffer) -> BufferKey:
    """The key of a buffer a kernel reads or writes: each is memory, never a layout only."""
    assert buffer.key is not None, buffer
    return buffer.key


class _Realizing:
    """Which nodes are written to memory: the least fixpoint where every realized node's group analyses
    (analysis.analyze) without asking for another one, and no reduction or scan is fused into two kernels.

    The writes are analysed in topological order; an analysis that raises Realize adds its node and the walk
    resumes at the first write that could change: the new one, or one whose group held it. The others keep
    their analyses, so the outcome is that of re-analysing every write after each addition, in time about
    linear in the graph instead of quadratic (a loop of 250 reductions: 30,000 analyses before). Until
    the end, a temporary's buffer key names its node's topological position (its final number depends on
    how many temporaries come before it: _rename_buffers)."""

    def __init__(
        self, outputs: list[Node], order: list[Node], realized: set[Node], inputs: dict, sort_bytes, budget=None
    ):
        self.order, self.realized, self.sort_bytes, self.budget = order, realized, sort_bytes, budget
        self.position = {n: i for i, n in enumerate(order)}
        self.out_index: dict[Node, int] = {}
        for i, o in enumerate(outputs):
            self.out_index.setdefault(o, i)
        self.reads: dict[Node, Buffer] = dict(inputs)
        self.writes: list[Node] = []  # in topological order
        self.at: list[int] = []  # their topological positions
        self.done: dict[Node, list[Analysis]] = {}
        self.region: dict[Node, set[Node]] = {}  # write -> the nodes its analysis may look at
        self.held_by: dict[Node, set[Node]] = {}  # node -> the writes whose region holds it
        for n in sorted((n for n in realized if n in self.position), key=self.position.__getitem__):
            self._write(n)

    def _write(self, n: Node) -> None:
        if n.op is Op.INPUT and n not in self.out_index:
            return
        key = BufferKey("out", self.out_index[n]) if n in self.out_index else BufferKey("pending", self.position[n])
        buf = Buffer.contiguous(key, n.dtype, n.shape)
        if n.op is not Op.INPUT:
            self.reads[n] = buf
        k = bisect.bisect_left(self.at, self.position[n])
        self.writes.insert(k, n)
        self.at.insert(k, self.position[n])

    def _add(self, node: Node) -> int:
        """Realize node; returns the index of the first write to analyse again."""
        assert node not in self.realized, f"asked twice to realize {node}"
        self.realized.add(node)
        changed = self.held_by.pop(node, set())
        for w in changed:
            self.done.pop(w, None)
            for x in self.region.pop(w, ()):
                self.held_by.get(x, set()).discard(w)
        if node in self.position:
            self._write(node)
        first = [self.position[w] for w in changed] + ([self.position[node]] if node in self.position else [])
        return bisect.bisect_left(self.at, min(first)) if first else len(self.writes)

    def run(self) -> list[Analysis]:
        i = 0
        while True:
            while i < len(self.writes):
                n = self.writes[i]
                if n in self.done:
                    i += 1
                    continue
                try:
                    self.done[n] = _analyses(n, self.reads, self.sort_bytes)
                except Realize as r:
                    i = min(i, self._add(r.node))
                    continue
                if self.budget is not None and _buffers(self.done[n]) > self.budget:  # (a device's limit)
                    wide = [s for s in dict.fromkeys(n.srcs) if s not in self.realized and s.op not in LEAVES]
                    if wide:  # the values it computes from, written first: their kernels read what it read
                        del self.done[n]
                        i = min(i, *(self._add(s) for s in wide))
                        continue
                self.region[n] = region = _region(n, self.reads)
                for x in region:
                    self.held_by.setdefault(x, set()).add(n)
                i += 1
            analyses = [a for n in self.writes for a in self.done[n]]
            rows = (n for a in analyses for n in (*(r.node for r in a.reduces), *(s.node for s in a.scans)))
            fused_twice = [n for n, c in Counter(rows).items() if c > 1]
            if not fused_twice:
                return analyses
            i = min(self._add(n) for n in fused_twice)


def _region(out: Node, reads: dict) -> set[Node]:
    """The nodes an analysis of `out` can look at: those it computes and the ones it reads from memory."""
    seen, stack = {out}, [out]
    while stack:
        n = stack.pop()
        if n is not out and (n in reads or n.op is Op.INPUT):
            continue
        for s in n.srcs:
            if s not in seen:
                seen.add(s)
                stack.append(s)
    return seen


def _rename_buffers(analyses: list[Analysis], temporary: dict[Node, Buffer], final: dict[Node, Buffer]) -> None:
    """The final buffers in place of _Realizing's temporary ones (the very objects: a kernel's params are
    told apart by identity), in the analyses' loads and reads."""
    renamed = {b.key: final[n] for n, b in temporary.items() if final[n] is not b}
    for a in analyses:
        a.loads = [renamed.get(b.key, b) for b in a.loads]
        a.reads = {(renamed[k].key if k in renamed else k): v for k, v in a.reads.items()}


def _deep_cuts(order: list[Node], realized: set[Node]) -> set[Node]:
    """Values to write to memory so that no kernel computes a chain of more than MAX_FUSED_DEPTH operations
    (a Python loop of thousands of steps traces into one that long). LLVM's loop vectoriser takes time
    quadratic in a loop's body (numba, PoCL: 2,000 dependent operations 0.6 s, 10,000 about 12 s); cut every
    MAX_FUSED_DEPTH operations, a program's compile time grows linearly with its length, and one store and
    one load per few hundred operations cost next to nothing when the kernels run. Gathers nest their index
    expressions (p = nxt[p] in a loop: an index read at an index read at ...), and so do reshapes and
    pads where they do not cancel (np.roll in a loop: ((i + 49) % 50 + 49) % 50 ...): Python recursion over
    the nested expressions stays far from its limit with at most MAX_INDEX_NESTING of them."""
    depth: dict[Node, tuple[int, int]] = {}
    cuts: set[Node] = set()
    for n in order:
        d = max((depth[s][0] for s in n.srcs), default=0)
        g = max((depth[s][1] for s in n.srcs), default=0)
        if n.op in ELEMENTWISE or n.op is Op.GATHER:
            d += 1
            g += GATHER_NESTING if n.op is Op.GATHER else 0
        elif n.op in (Op.RESHAPE, Op.PAD):  # a division, modulo or clamp around the index: nested too
            g += 1
        # cut at a computed value where there is one: a loop of in-place assignments (a pad, then a where, per
        # step) cut at its pads read a buffer per cut in one kernel (64: past webgpu's 32); a view only where
        # no computed value comes to cut at (np.roll alone in a loop)
        computed = n.op in ELEMENTWISE or n.op is Op.GATHER
        if n.size and (
            computed
            and (d >= MAX_FUSED_DEPTH or g >= MAX_INDEX_NESTING)
            or n.op in (Op.RESHAPE, Op.PAD)
            and g >= 2 * MAX_INDEX_NESTING
        ):
            cuts.add(n)
        depth[n] = (0, 0) if n in cuts or n in realized else (d, g)
    return cuts


BUFFERS_SPARE = 4  # of a kernel's buffers (LayoutOptions.max_buffers), kept for the error flag, tables, sizes


def _read_budget(max_buffers: int) -> int:
    return max(2, max_buffers - BUFFERS_SPARE)


def _computed(out: Node, reads: dict) -> list[Node]:
    """The nodes a kernel writing `out` computes: `out` and what it uses, up to values read from memory."""
    seen, stack = {out}, [out]
    while stack:
        n = stack.pop()
        for s in n.srcs:
            if s not in seen and s not in reads and s.op is not Op.INPUT:
                seen.add(s)
                stack.append(s)
    return list(seen)


def _analyses(node: Node, reads: dict, sort_bytes: int | None) -> list[Analysis]:
    """The kernels that write a realized node: one, or for a SCATTER the copy of its target, then its
    updates (analysis.analyze)."""
    first = analyze(node, reads, sort_bytes)
    return [first, analyze(node, reads, sort_bytes, update=True)] if node.op is Op.SCATTER else [first]


def _narrowed_int_scalars(outputs) -> list[tuple[int, np.dtype]]:
    """NumPy (NEP 50) raises when a Python int does not fit the array's dtype; the plan checks these."""
    checks, ints, unsigned = set(), set(), set()
    for n in toposort(outputs):
        if n.op is Op.INPUT and n.weak and n.dtype.kind == "i" and n.shape == ():  # (a weak array read by a part
            ints.add(n.arg)  # of a staged program is no Python int)
        if n.op is not Op.CAST:
            continue
        src = n.srcs[0]
        if (
            src.op is Op.INPUT
            and src.weak
            and src.shape == ()
            and src.dtype.kind == "i"
            and n.dtype.kind in "iu"
            and (n.dtype.itemsize < 8 or n.dtype.kind == "u")
        ):
            checks.add((src.arg, n.dtype))
            if n.dtype == np.uint64:
                unsigned.add(src.arg)
    # every Python int travels as a 64-bit integer: one beyond int64 (and, cast to uint64, beyond uint64)
    # is an OverflowError of ours, not the device binding's (OverflowError on numba, bad_cast on opencl)
    checks |= {(pos, np.dtype(np.int64)) for pos in ints - unsigned}
    return sorted(checks, key=lambda t: (t[0], t[1].str))


def _merge_elementwise(analyses: list[Analysis], writes, budget: int | None = None) -> list[list[Analysis]]:
    """Put independent elementwise groups of one shape in one kernel (one pass over the index space).

    A group joins an earlier kernel only if everything it reads is an argument or written by a kernel
    before that one, so no kernel reads what it writes and the order stays valid, and (budget) the kernel
    reads and writes no more than `budget` arrays."""
    kernels: list[list[Analysis]] = []
    position: dict[object, int] = {}
    for a in analyses:
        if a.out.size == 0 or a.update and a.out.srcs[1].size == 0:
            continue
        target = None
        if not a.reduces and not a.scans and not a.update:
            for i, group in enumerate(kernels):
                if (
                    not group[0].reduces
                    and not group[0].scans
                    and not group[0].update
                    and group[0].out.shape == a.out.shape
                    and all(_key(b).argument or position.get(b.key, i) < i for b in a.loads)
                    and (budget is None or _buffers([*group, a]) <= budget)
                ):
                    target = i
                    break
        if target is None:
            kernels.append([a])
            target = len(kernels) - 1
        else:
            kernels[target].append(a)
        position[writes[a.out].key] = target
    return kernels


def _buffers(group: list[Analysis]) -> int:
    """The arrays a kernel of these groups reads and writes."""
    return len({_key(b) for a in group for b in a.loads}) + len(group)


def _assign_buffers(outputs, realized, inputs, order: list[Node]) -> tuple[dict[Node, Buffer], dict[Node, Buffer]]:
    """Where each realized node is read from and, for those a kernel computes, written to (in order)."""
    reads: dict[Node, Buffer] = dict(inputs)
    writes: dict[Node, Buffer] = {}
    out_index: dict[Node, int] = {}
    for i, o in enumerate(outputs):
        out_index.setdefault(o, i)
    tmp = 0
    for n in order:
        if n.op is Op.INPUT and n not in out_index or n not in realized:
            continue
        if n in out_index:
            # an argument returned unchanged is copied, so results never alias the caller's arrays
            writes[n] = Buffer.contiguous(BufferKey("out", out_index[n]), n.dtype, n.shape)
        else:
            writes[n] = Buffer.contiguous(BufferKey("tmp", tmp), n.dtype, n.shape)
            tmp += 1
        if n.op is not Op.INPUT:
            reads[n] = writes[n]
    return reads, writes


def _describe(a: Analysis) -> str:
    """elementwise / reduce (one value per row) / row (a reduction written back over its rows) / scan /
    scatter (updates combined in)."""
    if a.update:
        return f"scatter_{a.out.arg}"
    if a.scans:
        return f"scan_{'_'.join(sorted({s.node.arg[0] for s in a.scans}))}"
    if any(r.node.op is Op.SORT for r in a.reduces):
        return "sort"
    if not a.reduces:
        return "elementwise"
    rows = set().union(*(e.variables() for r in a.reduces for e in r.kept))
    kind = "row" if any(v not in rows for v in a.out_vars) else "reduce"
    return f"{kind}_{'_'.join(sorted({r.node.arg[0] for r in a.reduces}))}"


def _split_reductions(outputs: list[Node]) -> list[Node]:
    """Rewrite long reductions into few values as reduce(reduce(x viewed as (chunks, chunk)))."""

    def split_if_long(n: Node) -> Node:
        if n.op is Op.REDUCE and n.size < SPLIT_MAX_OUTPUT and n.srcs[0].size // max(n.size, 1) >= SPLIT_MIN_REDUCE:
            return _split(n)
        return n

    return rewrite(outputs, split_if_long)


def _split(node: Node) -> Node:
    x = node.srcs[0]
    op, axes = node.arg
    kept = [d for d in range(len(x.shape)) if d not in axes]
    kept_shape = [x.shape[d] for d in kept]
    length = math.prod(x.shape[d] for d in axes)
    chunks = -(-length // SPLIT_CHUNK)
    chunk = -(-length // chunks)
    v = build.reshape(build.permute(x, tuple(kept) + tuple(axes)), (*kept_shape, length))
    v = build.pad(v, [(0, 0)] * len(kept) + [(0, chunks * chunk - length)], identity(op, x.dtype))
    v = build.reshape(v, (*kept_shape, chunks, chunk))
    partial = build.reduce(v, op, (len(kept) + 1,))
    total = build.reduce(partial, op, (len(kept),))
    return build.reshape(total, node.shape)


def _merge_long_sorts(
    outputs: list[Node], sort_bytes: int | None, stored: set[Node], by_library: bool = False
) -> list[Node]:
    """Rows too long for one work-group's memory are sorted in blocks, then merged (merge_sort.py); the
    runs between passes go to `stored`. `by_library`: a sort the host's library will run (library.find) stays
    whole."""

    def merge_if_long(n: Node) -> Node:
        if n.op is not Op.SORT or by_library and library.find(n) is not None:
            return n
        block = merge_sort.block_length(n, sort_bytes)
        return n if block is None else merge_sort.merge_sorted(n, block, stored)

    return rewrite(outputs, merge_if_long)


def _split_scans(outputs: list[Node]) -> list[Node]:
    """Rewrite long scans over few rows into blocks scanned in parallel (see _blocked_scan)."""

    def split_if_long(n: Node) -> Node:
        if n.op is Op.SCAN and n.shape[n.arg[1]] >= SPLIT_MIN_SCAN and n.size // n.shape[n.arg[1]] < SPLIT_MAX_OUTPUT:
            return _blocked_scan(n)
        return n

    return rewrite(outputs, split_if_long)


_COMBINE = {"sum": Op.ADD, "prod": Op.MUL, "max": Op.MAX, "min": Op.MIN}


def _blocked_scan(node: Node) -> Node:
    """A scan of length n as about sqrt(n) blocks of about sqrt(n): every block scanned on its own, in
    parallel; the blocks' totals (their last elements) scanned; each block's elements combined with the
    running total of the blocks before it, elementwise, fused with the scan's consumers. Three kernels,
    none walking more than about sqrt(n) elements in order; float sums add in short runs, as NumPy's
    pairwise sum does."""
    x = node.srcs[0]
    op, axis = node.arg
    n = x.shape[axis]
    kept = tuple(d for d in range(len(x.shape)) if d != axis)
    rows = tuple(x.shape[d] for d in kept)
    chunk = 1 << math.isqrt(n - 1).bit_length()  # a power of two, at least sqrt(n)
    chunks = -(-n // chunk)
    ident = identity(op, x.dtype)
    whole = [(0, 1, s) for s in rows]
    v = build.reshape(build.permute(x, kept + (axis,)), (*rows, n))
    v = build.reshape(build.pad(v, [(0, 0)] * len(rows) + [(0, chunks * chunk - n)], ident), (*rows, chunks, chunk))
    blocks = build.scan(v, op, len(rows) + 1)
    totals = build.reshape(build.slice_(blocks, [*whole, (0, 1, chunks), (chunk - 1, 1, 1)]), (*rows, chunks))
    running = build.scan(totals, op, len(rows))
    before = build.pad(build.slice_(running, [*whole, (0, 1, chunks - 1)]), [(0, 0)] * len(rows) + [(1, 0)], ident)
    before = build.expand(build.reshape(before, (*rows, chunks, 1)), (*rows, chunks, chunk))
    out = build.reshape(build.binary(_COMBINE[op], before, blocks), (*rows, chunks * chunk))
    out = build.slice_(out, [*whole, (0, 1, n)])
    inverse = tuple(sorted(range(len(x.shape)), key=lambda d: (kept + (axis,))[d]))
    return build.permute(out, inverse)


def input_buffer(index: int, node: Node, strides: tuple[int, ...]) -> Buffer:
    """The buffer of a kernel argument read in place through its element strides."""
    offset = sum((n - 1) * -s for n, s in zip(node.shape, strides) if s < 0)
    span = 1 + sum((n - 1) * abs(s) for n, s in zip(node.shape, strides)) if node.size else 0
    strides = tuple(0 if n == 1 else s for n, s in zip(node.shape, strides))
    return Buffer(BufferKey("in", index), np.dtype(node.dtype), node.shape, strides, offset, span)
