"""The least and greatest value of a kernel's index arithmetic, where the kernel IR proves it: the global index and
the loops' indices within their sizes, constants, and sums, differences, products, clamps, floor divisions and
remainders of those. The CPU renderer divides an index known to lie in [0, 2**31) by a constant in 32 bits: LLVM
has no vector form of a 64-bit division and leaves a loop that divides scalar (numpy-benchmarks' `mandelbrot`, whose
step reads a constant table at `i // 100` and `i % 100`: 4.6 ns an element), where a 32-bit one vectorises."""

from __future__ import annotations

import numpy as np

from tracejit.ir.kernel_ir import KOp

Range = tuple[int, int]


def index_ranges(ins, symbolic: dict | None = None) -> dict[int, Range]:
    """{instruction: (least, greatest)} for the integer instructions whose values the IR bounds. `symbolic`: the
    renderer's symbolic sizes (keyed (instruction, 0) for an extent, (instruction, -1) for a constant), whose traced
    values say nothing of the sizes the code runs with: left unbounded."""
    symbolic = symbolic or {}
    out: dict[int, Range] = {}
    for i, x in enumerate(ins):
        found = _range(ins, i, x, out, symbolic)
        if found is not None:
            out[i] = found
    return out


def _range(ins, i: int, x, known: dict[int, Range], symbolic: dict) -> Range | None:
    if x.dtype is None or x.dtype.kind not in "iu":
        return None
    if x.op == KOp.GLOBAL:
        size = x.arg
        return (0, int(size) - 1) if _count(size) and (i, 0) not in symbolic else None
    if x.op == KOp.RANGE:
        extent = x.arg[0]
        return (0, int(extent) - 1) if _count(extent) and (i, 0) not in symbolic else None
    if x.op == KOp.CONST:
        return (int(x.arg), int(x.arg)) if (i, -1) not in symbolic and np.ndim(x.arg) == 0 else None
    srcs: list[Range] = [known[s] for s in x.srcs if s in known]
    if not srcs or len(srcs) != len(x.srcs):
        return None
    if x.op == KOp.CAST:
        (a,) = srcs
        info = np.iinfo(x.dtype)
        return a if info.min <= a[0] and a[1] <= info.max else None
    if len(srcs) != 2:
        return None
    (lo0, hi0), (lo1, hi1) = srcs
    if x.op == KOp.ADD:
        return _fits(x.dtype, lo0 + lo1, hi0 + hi1)
    if x.op == KOp.SUB:
        return _fits(x.dtype, lo0 - hi1, hi0 - lo1)
    if x.op == KOp.MUL:
        corners = (lo0 * lo1, lo0 * hi1, hi0 * lo1, hi0 * hi1)
        return _fits(x.dtype, min(corners), max(corners))
    if x.op == KOp.MIN:
        return (min(lo0, lo1), min(hi0, hi1))
    if x.op == KOp.MAX:
        return (max(lo0, lo1), max(hi0, hi1))
    if x.op in (KOp.IDIV, KOp.MOD) and lo1 > 0:  # (floor division by a positive divisor, as Python's)
        if x.op == KOp.MOD:
            return (0, hi1 - 1)
        quotients = (lo0 // lo1, lo0 // hi1, hi0 // lo1, hi0 // hi1)
        return (min(quotients), max(quotients))
    return None


def _count(n) -> bool:
    return isinstance(n, (int, np.integer)) and bool(n > 0)


def _fits(dt: np.dtype, lo: int, hi: int) -> Range | None:
    """(lo, hi) where the dtype holds both (the arithmetic did not wrap), else None."""
    info = np.iinfo(dt)
    return (lo, hi) if info.min <= lo and hi <= info.max else None


def divides_in_32_bits(ins, ranges: dict[int, Range], x) -> bool:
    """Whether IDIV or MOD instruction x divides an index in [0, 2**31) by a constant in [1, 2**31): its floor
    division is then an unsigned 32-bit one."""
    if x.op not in (KOp.IDIV, KOp.MOD):
        return False
    a, d = (ranges.get(s) for s in x.srcs)
    limit = 2**31 - 1
    return (
        a is not None
        and d is not None
        and ins[x.srcs[1]].op == KOp.CONST
        and 0 <= a[0]
        and a[1] <= limit
        and 1 <= d[0]
        and d[1] <= limit
    )
