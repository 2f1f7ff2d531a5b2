"""How a kernel maps onto SIMT work-items, decided once per kernel from its IR and the device:

- thread mode: one work-item per global index, every loop serial inside it (short rows, elementwise,
  scans);
- group mode: one work-group per global index (long rows: softmax, layernorm, sums, sorts, scans). Loops
  directly under the global index are spread over the work-items, and so are a sort's pairs, step by
  step (bitonic.py); each reduction ends with a tree in local memory whose result every work-item then
  holds, so later loops of the row can use it; a scan's steps are split into chunks, one per work-item,
  joined by a scan across the group (group_scan.py).

Also: the work-group size, which values are index arithmetic and whether 32 bits hold them, which
index values are non-negative, and which accumulators widen to double.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tracejit.ir.kernel_ir import INDEX, KOp, KernelIR
from tracejit.ir.sizes import Slot
from tracejit.codegen.simt import bitonic

LANES = 8  # lanes of a laned max/min (Mapping._laned_extrema): a vector of float32 in AVX
WIDE_BLOCK = 64  # a work-item's wide float32 sum adds runs of this many in float (Mapping._blocked_sums)
GROUP_MIN_REDUCE = 128  # a reduction this long gets a work-group instead of one work-item
GROUP_MAX_LOCAL = 256
GROUP_MIN_SCAN = 256  # a scan this long gets a work-group instead of one work-item
SCAN_CHUNK = 16  # the steps of a scan each work-item of a group walks in order, per tile
THREAD_LOCAL = 256
THREAD_LOCAL_MIN_EXACT = 32  # smallest work-group that divides the size exactly, so no bounds check


@dataclass(frozen=True)
class RenderOptions:
    """What the device allows; part of the compiled artifact's identity."""

    device: str = ""  # for error messages
    fp64: bool = True
    fp16: bool = False  # half arithmetic; otherwise half is storage only, computed in float
    max_local_size: int = 256
    group_max_rows: int | None = None  # more rows than this run a row per work-item (CPU devices)
    wide_sums: bool = False  # a work-item's own long float32/float16 sums accumulate in double (CPU)
    own_math: bool = False  # float32 exp/tanh/log/erf from math_f32 (the library's are scalar: CPU)
    # a work-item's own long float max/min runs in LANES lanes, combined after the loop (CPU: LLVM
    # vectorises neither the NaN-propagating select nor fmax as a reduction; the lanes are independent)
    laned_extrema: bool = False
    atomics64: bool = True  # 64-bit compare-and-swap (OpenCL: cl_khr_int64_base_atomics), see atomics.py
    max_loop: int | None = None  # loop iterations one work-item may run in all (Mesa's llvmpipe: 65535)
    tensor_cores: bool = False  # CUDA sm_80+ on the GPU itself: float16 products through mma.sync (mma.py)
    # a row reduction's work-group grows to the row's length / group_stride work-items (a power of two, at
    # least group_min, at most GROUP_MAX_LOCAL): 1 gives each work-item one element while the group allows
    group_stride: int = 1
    group_min: int = 1
    # a work-item per index: a bounds check whatever the global size, so that one source serves every
    # size (off where exact divisors of the size pay: CPU OpenCL vectorises across work-items only
    # without a bounds check). The work-group size still follows the size at launch; where it is in
    # the source as a limit (CUDA's __launch_bounds__), the source names the largest allowed
    always_check: bool = False
    # ... and work-groups of the largest size allowed whatever the global size, for a target whose
    # source names the size itself (WGSL's @workgroup_size)
    fixed_local: bool = False
    # thread mode: a work-item's local arrays longer than this live in its own slice of a work-group array
    # (work-group memory of `local_bytes`, the work-group shrunk to fit), not in private memory. Mesa's
    # llvmpipe compiles an indexed private array in time growing with the square of its length (WGSL only)
    private_max: int | None = None
    local_bytes: int = 16384  # work-group memory a kernel may use (WebGPU's default limit)


def by_value_dtype(dt: np.dtype, options: RenderOptions) -> np.dtype:
    """The dtype a 0-d argument passed by value is declared and passed as: float64 without fp64 and
    float16 without half arithmetic come as float32 (OpenCL C takes no half by value; float holds it)."""
    if dt == np.float64 and not options.fp64 or dt == np.float16 and not options.fp16:
        return np.dtype("float32")
    return dt


@dataclass(frozen=True)
class Launch:
    mode: str  # "group" | "thread"
    local_size: int
    global_items: int  # work-items in all
    by_value: tuple[int, ...]  # params passed as scalars, not buffers
    error_flag: bool  # a trailing int buffer the kernel sets (integer power, negative exponent)
    group_limit: int  # the largest work-group the source allows (thread mode: any size up to it)
    # the bounds check's limit, passed as a last by-value argument (of the kernel's index type, `size_bits`
    # wide) after the error flag, so that kernels differing only in their global size share one source
    # and one compile; None where the kernel has no bounds check
    size: int | None = None
    size_bits: int = 32
    # the symbolic sizes (issue 19: kernels differing only in them share one source), as
    # (dtype, value), passed by value in this order after the error record, before the bounds check's limit
    symbolic: tuple[tuple[str, object], ...] = ()
    # float32 1.0 and 0.0 after those (WGSL: values its compilers cannot see, codegen.wgsl's opaque)
    identities: bool = False

    def trailing(self) -> list:
        """The by-value arguments after the kernel's own parameters and error record, as NumPy scalars:
        the symbolic slots' values, the bounds check's limit, then 1.0 and 0.0 where the kernel takes them."""
        out = [np.dtype(dt).type(v) for dt, v in self.symbolic]
        return (
            out
            + ([] if self.size is None else [self.size_dtype.type(self.size)])
            + ([np.float32(1.0), np.float32(0.0)] if self.identities else [])
        )

    def trailing_dtypes(self) -> list[np.dtype]:
        return (
            [np.dtype(dt) for dt, _ in self.symbolic]
            + ([] if self.size is None else [self.size_dtype])
            + [np.dtype(np.float32)] * (2 * self.identities)
        )

    @property
    def size_dtype(self) -> np.dtype:
        return np.dtype(f"int{self.size_bits}")


@dataclass
class Nest:
    """Perfectly nested ranges of one kind directly under the global index, walked as one flat range."""

    ranges: list[int]
    extents: list[int]
    kind: str
    end: int  # index of the outermost endrange
    accs: list[int]  # accumulators updated inside
    symbolic: bool = False  # an extent is an argument of the code: decided on as a long loop

    @property
    def extent(self) -> int:
        return math.prod(self.extents)

    @property
    def long(self) -> int:
        """The extent that choices see: at least GROUP_MIN_REDUCE where it is symbolic."""
        return max(self.extent, GROUP_MIN_REDUCE) if self.symbolic else self.extent


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _thread_local_size(n: int, limit: int, fixed: bool = False) -> int:
    """A work-group size for n work-items: one that divides n when there is a reasonable one, since a
    bounds check in the kernel stops CPU implementations from vectorising across work-items; `fixed`:
    the largest allowed, whatever n (see RenderOptions.fixed_local)."""
    limit = 1 << (limit.bit_length() - 1)
    if fixed:
        return limit
    if n <= limit:
        return _pow2_at_least(n)
    exact = min(limit, n & -n)  # the largest power of two dividing n
    return exact if exact >= THREAD_LOCAL_MIN_EXACT else limit


def positive_const(ins, i: int) -> bool:
    return ins[i].op == KOp.CONST and ins[i].arg > 0


class Mapping:
    """The launch shape of one kernel and the facts about its values that rendering needs."""

    def __init__(self, kernel: KernelIR, options: RenderOptions, long_ranges: frozenset[int] = frozenset()):
        """`long_ranges`: loops whose extent is an argument of the code (issue 19): the work-group, the
        accumulators' widths and the sums' blocks are those of a long loop, whatever its extent here, so
        that one source serves every extent."""
        self.k, self.o, self.ins = kernel, options, kernel.instrs
        self.long_ranges = long_ranges
        self.nests = self._nests()
        self.mode = self._mode()
        # work-items a group's widest loop can use: a reduction's elements over group_stride, half a sort's,
        # a scan's chunks
        big = max(
            [
                GROUP_MAX_LOCAL if n.symbolic else -(-n.extent // options.group_stride)
                for n in self.nests
                if n.kind == "reduce"
            ]
            + [size // 2 for size in self._sorts()]
            + [GROUP_MAX_LOCAL if n.symbolic else -(-n.extent // SCAN_CHUNK) for n in self.nests if n.kind == "scan"],
            default=1,
        )
        self.sliced: frozenset[int] = frozenset()
        if self.mode == "group":
            fit = min(options.max_local_size, GROUP_MAX_LOCAL)
            want = max(options.group_min, _pow2_at_least(big))
            self.local_size = min(1 << (fit.bit_length() - 1), want)  # a power of two: the tree halves it
            self.global_items = kernel.global_size * self.local_size
            self.group_limit = self.local_size
        else:
            limit = min(options.max_local_size, THREAD_LOCAL)
            self.sliced = self._sliced_locals()
            if self.sliced:  # the source declares the group's slices: its work-group has that size
                limit = min(limit, options.local_bytes // sum(self._local_bytes(i) for i in self.sliced))
            self.local_size = _thread_local_size(kernel.global_size, limit, options.fixed_local or bool(self.sliced))
            self.global_items = -(-kernel.global_size // self.local_size) * self.local_size
            self.group_limit = 1 << (limit.bit_length() - 1)  # any size up to this: see Launch.group_limit
        self.index = self._index_values()
        self.index_bits = self._index_bits()
        self.nonneg = self._nonneg()
        self.wide = self._wide_accumulators()
        self.blocked = self._blocked_sums()
        self.laned = self._laned_extrema()

    def _nests(self) -> list[Nest]:
        ins, nests, depth, i = self.ins, [], 0, 0
        ends = {x.srcs[0]: j for j, x in enumerate(ins) if x.op == KOp.ENDRANGE}
        while i < len(ins):
            x = ins[i]
            if x.op == KOp.RANGE and depth == 0:
                ranges, cur = [i], i
                while True:  # extend through perfectly nested ranges of the same kind
                    j = cur + 1
                    while (
                        j < ends[cur]
                        and ins[j].op not in (KOp.RANGE, KOp.ACC, KOp.LOCAL, KOp.STORE, KOp.UPDATE)
                        and not (ins[j].op == KOp.LOAD and ins[ins[j].srcs[0]].op == KOp.LOCAL)
                    ):
                        j += 1
                    if ins[j].op == KOp.RANGE and ins[j].arg[1] == x.arg[1] and ends[j] + 1 == ends[cur]:
                        ranges.append(j)
                        cur = j
                    else:
                        break
                end = ends[i]
                accs = sorted(
                    {
                        ins[j].srcs[0]
                        for j in range(i, end)
                        if ins[j].op == KOp.UPDATE and ins[ins[j].srcs[0]].op == KOp.ACC
                    }
                )
                nests.append(
                    Nest(
                        ranges,
                        [ins[r].arg[0] for r in ranges],
                        x.arg[1],
                        end,
                        accs,
                        any(r in self.long_ranges for r in ranges),
                    )
                )
                depth += 1
            elif x.op == KOp.RANGE:
                depth += 1
            elif x.op == KOp.ENDRANGE:
                depth -= 1
            i += 1
        return nests

    def _mode(self) -> str:
        reduces = [n for n in self.nests if n.kind == "reduce"]
        if any(x.op == KOp.LOCAL and x.arg[1] is not None for x in self.ins):
            return "thread"  # rows of accumulators belong to one work-item
        too_long = self.o.max_loop is not None and self.loop_iterations("thread") > self.o.max_loop
        few_rows = self.o.group_max_rows is None or self.k.global_size <= self.o.group_max_rows or too_long
        if any(x.op == KOp.RANGE and x.arg[1] == "scan" for x in self.ins):
            scans = [n for n in self.nests if n.kind == "scan"]
            fits = len(scans) == 1 and self._one_step_scan(scans[0]) and all(len(n.accs) <= 1 for n in reduces)
            # a scan's steps run in order, in one work-item, unless a group can share the row (by the extent
            # at hand even where it is symbolic: a short scan is much faster in one work-item, so a scan whose
            # length grows past the threshold compiles once more)
            return "group" if few_rows and fits and scans[0].extent >= GROUP_MIN_SCAN else "thread"
        long_sort = any(size >= GROUP_MIN_REDUCE for size in self._sorts())
        # a row of symbolic length: a work-group on a GPU (long rows need one, short ones lose little); one
        # work-item on a CPU, which serves every length (a CPU's work-group is for a few long rows only,
        # and the few rows are the batch, which changes too)
        cpu = self.o.group_max_rows is not None
        if (
            few_rows
            and (
                long_sort
                or any((0 if cpu and n.symbolic and not too_long else n.long) >= GROUP_MIN_REDUCE for n in reduces)
            )
            and all(len(n.accs) <= 1 for n in reduces)
        ):
            return "group"
        return "thread"

    def loop_iterations(self, mode: str | None = None) -> int:
        """The loop iterations one work-item runs in all, as Mesa's llvmpipe counts them against its budget
        (max_loop): every loop of the kernel draws on one budget per invocation, each iteration of each
        level and each entry into a loop taking one (measured). A group shares its nest's outer loop (a scan
        walking each step twice); a sort is the three loops of its network (bitonic.py)."""
        group = (mode or self.mode) == "group"
        shared = {n.ranges[0]: n for n in self.nests} if group else {}
        merged = {r for n in shared.values() for r in n.ranges[1:]}
        items = self.local_size if group else 1
        total, stack = 0, [1]  # stack: how often the innermost enclosing loop's body runs
        for i, x in enumerate(self.ins):
            if x.op == KOp.RANGE:
                n = shared.get(i)
                count = (
                    1
                    if i in merged
                    else x.arg[0]
                    if n is None
                    else -(-n.extent // self.local_size) * (2 if n.kind == "scan" else 1)
                )
                total += 0 if i in merged else stack[-1] * (count + 1)
                stack.append(count * stack[-1])
            elif x.op == KOp.ENDRANGE:
                stack.pop()
            elif x.op == KOp.SORT:
                total += stack[-1] * bitonic.loop_iterations(self.ins[x.srcs[0]].arg[0], items)
        return total

    def _sliced_locals(self) -> frozenset[int]:
        """Thread mode: the local arrays longer than private_max, each work-item's in its slice of a work-group
        array (all of them, or none where their slices do not fit local_bytes for one work-item)."""
        if self.o.private_max is None:
            return frozenset()
        long = frozenset(i for i, x in enumerate(self.ins) if x.op == KOp.LOCAL and x.arg[0] > self.o.private_max)
        return long if sum(self._local_bytes(i) for i in long) <= self.o.local_bytes else frozenset()

    def _local_bytes(self, i: int) -> int:
        """A local array's bytes (elements of 4 bytes at least: WGSL's narrowest type)."""
        return self.ins[i].arg[0] * max(4, self.ins[i].value_dtype.itemsize)

    def _one_step_scan(self, nest: Nest) -> bool:
        """Whether a scan nest is one loop updating one accumulator: what group_scan.py splits over a
        work-group (a scan of a scan needs the inner one's prefix across the group first: in order)."""
        body = self.ins[nest.ranges[0] + 1 : nest.end]
        return (
            len(nest.ranges) == 1
            and not any(x.op == KOp.RANGE for x in body)
            and sum(x.op == KOp.UPDATE for x in body) == 1
            and len(nest.accs) == 1
        )

    def _sorts(self) -> list[int]:
        """The length of every row the kernel sorts (a power of two)."""
        return [self.ins[x.srcs[0]].arg[0] for x in self.ins if x.op == KOp.SORT]

    def _wide_accumulators(self) -> set[int]:
        """Accumulators summing a long row serially in one work-item: in double where the device is a CPU
        with fp64, like the numba device (a group's tree keeps its partial sums short anyway)."""
        if not (self.o.wide_sums and self.o.fp64 and self.mode == "thread"):
            return set()
        return {
            n.accs[0]
            for n in self.nests
            if n.kind == "reduce"
            and len(n.accs) == 1
            and n.long >= GROUP_MIN_REDUCE
            and self.ins[n.accs[0]].arg[0] in ("sum", "prod")
            and self.ins[n.accs[0]].dtype in (np.float32, np.float16)
        }

    def _blocked_sums(self) -> dict[int, int]:
        """{range: accumulator}: wide float32 sums over one range of a multiple of WIDE_BLOCK elements add
        each block in float, then the block's total in double: as accurate as NumPy's pairwise sum (which
        adds runs of 16 in float32), without a conversion per element (PoCL softmax 5.9 -> 4.3 ms)."""
        return {
            n.ranges[0]: n.accs[0]
            for n in self.nests
            if n.kind == "reduce"
            and len(n.ranges) == 1
            and len(n.accs) == 1
            and n.accs[0] in self.wide
            and self.ins[n.accs[0]].arg[0] == "sum"
            and self.ins[n.accs[0]].dtype == np.float32
            and (n.extent % WIDE_BLOCK == 0 or n.symbolic)
        }  # symbolic: a shorter last run (cstyle)

    def _laned_extrema(self) -> dict[int, int]:
        """{range: accumulator}: a float max or min over one long range in one work-item, the loop's body
        loads and arithmetic only, runs in LANES lanes (cstyle): the range is walked LANES elements at a
        time, each into its own lane, the last index repeated past the end (max and min are unchanged by an
        element seen twice), and the lanes are combined after the loop. PoCL's softmax row max went from a
        scalar loop to vector registers: 4096x1024 8.4 -> 2.8 ms with the sum after it."""
        if not (self.o.laned_extrema and self.mode == "thread"):
            return {}
        out = {}
        for n in self.nests:
            if n.kind != "reduce" or len(n.ranges) != 1 or len(n.accs) != 1 or n.long < GROUP_MIN_REDUCE:
                continue
            acc = self.ins[n.accs[0]]
            body = self.ins[n.ranges[0] + 1 : n.end]
            if (
                acc.arg[0] in ("max", "min")
                and acc.value_dtype.kind == "f"
                and n.accs[0] not in self.wide
                and not any(
                    x.op in (KOp.RANGE, KOp.STORE, KOp.ATOMIC, KOp.SORT, KOp.LOCAL)
                    or x.op == KOp.UPDATE
                    and x.srcs[0] != n.accs[0]
                    for x in body
                )
            ):
                out[n.ranges[0]] = n.accs[0]
        return out

    def _index_bits(self) -> int:
        biggest = max(
            [self.global_items, *(p.size for p in self.k.params), *(n.extent for n in self.nests)]
            + [x.arg[0] for x in self.ins if x.op == KOp.RANGE]
            + [abs(int(self.ins[i].arg)) for i in self.index if self.ins[i].op == KOp.CONST]
        )
        return 32 if biggest < 2**30 else 64

    def _index_values(self) -> set[int]:
        return index_values(self.ins)

    def _nonneg(self) -> set[int]:
        """Index values known to be >= 0, where C's / and % agree with the IR's floor semantics."""
        out = set()
        for i, x in enumerate(self.ins):
            if i not in self.index:
                continue
            if x.op in (KOp.GLOBAL, KOp.RANGE, KOp.BOUND) or x.op == KOp.CONST and x.arg >= 0:
                out.add(i)
            elif x.op in (KOp.ADD, KOp.MUL, KOp.MIN) and all(s in out for s in x.srcs):
                out.add(i)
            elif x.op in (KOp.IDIV, KOp.MOD) and x.srcs[0] in out and positive_const(self.ins, x.srcs[1]):
                out.add(i)
            elif x.op == KOp.MAX and any(s in out for s in x.srcs):
                out.add(i)
        return out


def index_values(instrs) -> set[int]:
    """Index arithmetic: int64 values computed from the global index, loop counters, constants and
    bounded indices read from data (BOUND: within an axis) only. C-style targets give them a narrower
    type when every size allows; numba keeps its own (non-wrapping) arithmetic for them."""
    out = set()
    for i, x in enumerate(instrs):
        if x.op in (KOp.GLOBAL, KOp.RANGE, KOp.BOUND) or x.op == KOp.CONST and x.dtype == INDEX and abs(x.arg) < 2**31:
            out.add(i)
        elif (
            x.op == KOp.CAST
            and x.dtype == INDEX
            and instrs[x.srcs[0]].op == KOp.CONST
            and instrs[x.srcs[0]].dtype == np.int32
        ):  # a limit that follows a symbolic extent (lower._limit)
            out.add(i)
        elif (
            x.dtype == INDEX
            and x.op in (KOp.ADD, KOp.SUB, KOp.MUL, KOp.IDIV, KOp.MOD, KOp.MIN, KOp.MAX, KOp.NEG)
            and all(j in out for j in x.srcs)
        ):
            out.add(i)
    return out


def float16_totals(instrs) -> set[int]:
    """The float16 sum and product accumulators (not scans) of a kernel: computed in float32 or wider, their
    totals are rounded to float16 where they are read, as NumPy's loops store them (a scan rounds each
    running total as it makes it)."""
    scanned = {x.srcs[0] for x in instrs if x.op == KOp.UPDATE and x.dtype is not None}
    return {
        i
        for i, x in enumerate(instrs)
        if x.op == KOp.ACC and x.dtype == np.float16 and x.arg[0] in ("sum", "prod") and i not in scanned
    }


# NumPy adds fewer than 8 elements one after another (its pairwise sum unrolls by 8 from there on), so a
# float reduction that short keeps that order exactly; a longer one may be reordered (vectorised lanes).
ORDERED_BELOW = 8


def slot_argument(kernel: KernelIR, slot: Slot) -> np.dtype | None:
    """Whether the size at a slot (ir/sizes.py) can be an argument of the C-style kernel, as a dtype (the
    index type, int64, stands for the kernel's own: Launch.symbolic has the one passed), else None. A
    constant of a 32- or 64-bit type and a loop's extent can; a local array's length (C arrays have
    constant lengths), a sort's and a bounded index's axis size stay constants. A source with symbolic
    sizes is right for the kernel it was rendered from; another kernel with its size-free key shares its
    compile only where its source is the same text (every choice taken from the values alike)."""
    i, j = slot
    x = kernel.instrs[i]
    if x.op == KOp.CONST and x.dtype in SLOT_DTYPES:
        return x.dtype
    if x.op == KOp.RANGE and j == 0:
        return INDEX
    return None


SLOT_DTYPES = tuple(np.dtype(t) for t in ("int32", "uint32", "int64", "uint64", "float32", "float64"))


def long_loops(instrs, symbolic) -> frozenset[int]:
    """The loops whose extent is an argument (`symbolic`: slot -> name): every choice about them is the
    one for long loops, so that the source is the same text for every extent (issue 19). A float sum or
    product shorter than NumPy's pairwise block adds in order: the renderer branches on the extent at run
    time for those (ordered_loops)."""
    return frozenset(i for i, j in symbolic if j == 0 and instrs[i].op == KOp.RANGE)


def ordered_loops(instrs, long_ranges) -> frozenset[int]:
    """The long loops (long_loops) around a float sum's or product's step: where their extent is below
    ORDERED_BELOW at run time, the source adds in NumPy's order (a work-item's loop without reassociation,
    a work-group's row in its first work-item), else as a long loop."""
    return frozenset(long_ranges & order_sensitive_ranges(instrs))


def order_sensitive_ranges(instrs) -> set[int]:
    """The loops around an update of a float sum or product: NumPy adds fewer than ORDERED_BELOW such
    steps in order, so their length decides the code (a max or min does not care)."""
    out: set[int] = set()
    open_ranges: list[int] = []
    for i, x in enumerate(instrs):
        if x.op == KOp.RANGE:
            open_ranges.append(i)
        elif x.op == KOp.ENDRANGE:
            open_ranges.pop()
        elif x.op == KOp.UPDATE and x.dtype is None:
            acc = instrs[x.srcs[0]]
            if acc.op == KOp.ACC and acc.arg[0] in ("sum", "prod") and acc.dtype.kind == "f":
                out.update(open_ranges)
    return out


def reorderable_updates(instrs, long_ranges=frozenset()) -> set[int]:
    """The float sum and prod accumulator updates (not scans) whose loops, counted from the accumulator
    inward, run at least ORDERED_BELOW times: the only steps a target may reassociate. `long_ranges`:
    loops counted as long whatever their extent (numba: extents that are arguments)."""
    out: set[int] = set()
    open_ranges: list[int] = []  # extents of the loops open at each instruction
    depth_at_acc: dict[int, int] = {}
    for i, x in enumerate(instrs):
        if x.op == KOp.RANGE:
            open_ranges.append(max(x.arg[0], ORDERED_BELOW) if i in long_ranges else x.arg[0])
        elif x.op == KOp.ENDRANGE:
            open_ranges.pop()
        elif x.op == KOp.ACC:
            depth_at_acc[i] = len(open_ranges)
        elif x.op == KOp.UPDATE and x.dtype is None:
            acc = instrs[x.srcs[0]]
            if acc.op == KOp.ACC and acc.arg[0] in ("sum", "prod") and acc.dtype.kind == "f":
                if math.prod(open_ranges[depth_at_acc[x.srcs[0]] :]) >= ORDERED_BELOW:
                    out.add(i)
    return out
