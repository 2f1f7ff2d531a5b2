"""How the numba renderer writes a kernel's row loops: which float sums may be reordered (and so add in
float32 blocks of a row, the block totals in float64), which rows loop block by block, and which loop
lengths are hidden from LLVM so that it vectorises the loop instead of unrolling it first (codegen/cpu/numba.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from tracejit.codegen.cpu.host import host_cpu
from tracejit.codegen.simt.mapping import reorderable_updates
from tracejit.ir.kernel_ir import KOp

# A float32/float16 sum over a row adds in float32 (LLVM's vector lanes, each summing a few of the row's
# elements) over blocks of up to BLOCKED_ROW_MAX elements, and the block totals in float64: as accurate as
# NumPy's pairwise sum and better, without a float64 conversion per element (softmax 4096x1024 on one core
# 4.3 -> 3.6 ms, row means 30% faster). A longer row is a loop over its blocks, each block's length hidden
# from LLVM (opaque_extent), which once unrolled a 16M sum's 4096-element chunks cut into blocks 2x slower.
BLOCKED_ROW_MAX = 1024


# Intel's first AVX-512 cores, which lower their clock while 512-bit instructions run (a frequency licence
# per core): LLVM's tuning for them and for every later Intel core (prefer-256-bit) vectorises loops with 256-bit
# registers. On later cores the clock barely moves and the 512-bit loop wins: kernels there are marked
# "prefer-vector-width"="512" (runtime.numba_math.wide_vectors). Measured on an Emerald Rapids VM, float32
# 4096x1024 on 2 cores: softmax 2.8 -> 1.8 ms (its exp is 16 lanes at a time), ahead of torch's AVX-512 kernel
# (2.0 ms; 256-bit loops left tracejit behind it). AMD's (znver4, znver5) vectorise with 512 bits unmarked.
WIDE_VECTORS_SLOW = ("skylake-avx512", "cascadelake", "cooperlake")


@functools.cache
def host_vector_bytes() -> int:
    """The widest float vector register tracejit's kernels are vectorised with on this CPU (16 without AVX):
    64 on AVX-512 cores but WIDE_VECTORS_SLOW."""
    cpu = host_cpu()
    if cpu.has("avx512f") and not cpu.name.startswith(WIDE_VECTORS_SLOW):
        return 64
    return 32 if cpu.has("avx") else 16


def _blocked_sums(ins, reorderable: set[int], scanned: set[int]) -> dict[int, list[int]]:
    """{range: the float64 sum accumulators updated directly inside it and declared just outside it}, the
    sums whose steps go through a float32 block accumulator (render)."""
    out: dict[int, list[int]] = {}
    open_ranges: list[int] = []
    depth_at: dict[int, int] = {}
    for i, x in enumerate(ins):
        if x.op == KOp.RANGE:
            open_ranges.append(i)
        elif x.op == KOp.ENDRANGE:
            open_ranges.pop()
        elif x.op == KOp.ACC:
            depth_at[i] = len(open_ranges)
        elif x.op == KOp.UPDATE and i in reorderable and open_ranges:
            acc = ins[x.srcs[0]]
            a = x.srcs[0]
            if (
                acc.op == KOp.ACC
                and acc.arg[0] == "sum"
                and wide_accumulator(acc.dtype, "sum")
                and a not in scanned
                and open_ranges
                and depth_at[a] == len(open_ranges) - 1
            ):
                accs = out.setdefault(open_ranges[-1], [])
                if a not in accs:
                    accs.append(a)
    return out


def wide_accumulator(dt: np.dtype, reduction) -> bool:
    """Float32/float16 sums and products accumulate in float64 on the CPU (render: float32 ones of fewer
    than 8 elements do not, and so give NumPy's bits)."""
    return dt.kind == "f" and dt.itemsize < 8 and reduction in ("sum", "prod")


# A row loop of a constant length in these ranges (by range kind) whose body calls no math function runs
# over range(opaque_extent(n)), a length LLVM cannot see, so that it is vectorised as a loop instead of
# being unrolled whole first. Unrolled first, a sum over 16-64 elements became a chain of scalar adds, an
# elementwise loop over 16-32 elements stayed scalar, and at 768-1024 one loop's loads were kept in
# registers for the next and spilled. Measured with sizes as constants (dynamic=False), float32 on 2 cores:
# layernorm and rmsnorm on rows of 1024 1.3x faster, on rows of 16-64 2-3x; softmax on rows of 16-32 2x.
# Rows of 8 were slower with an unknown length, and so were loops with an exp in them (their bodies are too
# big to be unrolled whole) and elementwise loops of 64 and more, which are vectorised as they are.
OPAQUE_EXTENTS = {"reduce": (16, 2048), "loop": (16, 63)}
_MATH_CALLS = frozenset(
    (
        "exp",
        "exp2",
        "expm1",
        "log",
        "log2",
        "log10",
        "log1p",
        "cbrt",
        "sin",
        "cos",
        "tan",
        "arcsin",
        "arccos",
        "arctan",
        "sinh",
        "cosh",
        "tanh",
        "arcsinh",
        "arccosh",
        "arctanh",
        "erf",
        "pow",
        "arctan2",
        "hypot",
    )
)


def _opaque_loops(ins) -> set[int]:
    """The ranges whose constant length render hides from LLVM (OPAQUE_EXTENTS)."""
    out, open_ranges, calling = set(), [], set()
    for i, x in enumerate(ins):
        if x.op == KOp.RANGE:
            open_ranges.append(i)
        elif x.op == KOp.ENDRANGE:
            r = open_ranges.pop()
            low, high = OPAQUE_EXTENTS.get(ins[r].arg[1], (1, 0))
            if r not in calling and low <= ins[r].arg[0] <= high:
                out.add(r)
        elif x.op in _MATH_CALLS:
            calling.update(open_ranges)
    return out


@dataclass(frozen=True)
class RowLoops:
    reorderable: set[int]  # sum and prod updates that may add in any order
    long_sums: set[int]  # their accumulators (a float32 sum shorter than 8 adds as NumPy's does)
    blocks: dict[int, list[int]]  # range -> the sums added in float32 blocks inside it (_blocked_sums)
    opaque: set[int]  # ranges whose constant length is hidden from LLVM (OPAQUE_EXTENTS)
    split: set[int]  # ranges looped over block by block
    ordered: set[int]  # ranges written twice: in order where their extent is below 8, else as long


def row_loops(ins, symbolic: dict, scanned: set[int], ordered_always: bool = False) -> RowLoops:
    """The row-loop choices of a kernel rendered with these symbolic sizes. A float32 sum over a
    loop whose extent is an argument is written as a long one, so that one source serves every length, and
    fewer than 8 elements still add in NumPy's order: where LLVM vectorises with 512 bits (host_vector_bytes)
    by itself (its shortest vector loop, the epilogue after 16 lanes, takes 8 float32; fewer go through its
    scalar loop, in order), elsewhere from a copy of the loop without reassociation that the kernel takes
    below 8 (`ordered`: with 256-bit vectors the epilogue's 4 lanes reorder sums of 4-7, measured). Such a
    row also loops block by block, whatever its length. `ordered_always`: the copy on every host (the native
    renderer's: it does not count on LLVM's choice of epilogue)."""
    reorderable = reorderable_updates(ins)
    argument_ranges = {i for (i, j) in symbolic if j == 0 and ins[i].op == KOp.RANGE}
    long = {
        u
        for u in reorderable_updates(ins, argument_ranges)
        if ins[ins[u].srcs[0]].arg[0] == "sum" and wide_accumulator(ins[ins[u].srcs[0]].dtype, "sum")
    }
    reorderable |= long
    ordered: set[int] = set()
    if (
        ordered_always or host_vector_bytes() < 64
    ):  # the sums that are short where the argument extents are (any extent alike)
        ones = [replace(x, arg=(1, *x.arg[1:])) if i in argument_ranges else x for i, x in enumerate(ins)]
        short = long - reorderable_updates(ones)
        ends = {x.srcs[0]: j for j, x in enumerate(ins) if x.op == KOp.ENDRANGE}
        ordered = {r for r in argument_ranges if any(r < u < ends[r] for u in short)}
    blocks = _blocked_sums(ins, reorderable, scanned)
    split = {r for r in blocks if ins[r].arg[0] > BLOCKED_ROW_MAX or r in argument_ranges}
    return RowLoops(reorderable, {ins[u].srcs[0] for u in reorderable}, blocks, _opaque_loops(ins), split, ordered)
