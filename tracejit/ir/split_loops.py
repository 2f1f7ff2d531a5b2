"""Index-set splitting of a kernel's innermost loops: the part of a loop where every clamp of an index is no clamp
and every comparison of the index with a constant has one answer runs as a loop of its own, without them.

A stencil's `u[1:-1, 1:-1] = f(u[2:, 1:-1], u[:-2, 1:-1], ...)` is one kernel over the whole array whose every
point clamps its shifted reads into the array (`max(min(c - 1, 38), 0)`) and selects the interior (`1 <= c < 40`):
LLVM vectorises such a loop with gathers, if at all. Over the interior the clamps change nothing and the tests are
true, so the loop over columns is run as three loops, the columns before the interior, the interior, and the
columns after it; in the interior's loop the clamps are their operands and the tests constants, and its reads are
contiguous. The iterations run in the same order as before, so nothing else changes.

Only a loop whose body opens no loop is split, where its index reaches the clamps and comparisons through sums
and products with constants, and where the interior is most of it.
"""

from __future__ import annotations

import numpy as np

from tracejit.ir.kernel_ir import INDEX, Builder, KOp, KernelIR

_MIN_EXTENT = 8  # a shorter loop is left as it is
# a global range shorter than this is left as it is: its clamps cost less than compiling the body three times (a
# test suite of small arrays compiled 25% slower with every 1-d stencil split)
GLOBAL_MIN = 1024
_COMPARE = {KOp.LT: lambda x, c: x < c, KOp.LE: lambda x, c: x <= c}


def split(kernel: KernelIR) -> KernelIR:
    plans = {}
    instrs = kernel.instrs
    open_at: list[int] = []
    for i, x in enumerate(instrs):
        if x.op == KOp.RANGE:
            open_at.append(i)
        elif x.op == KOp.ENDRANGE:
            start = open_at.pop()
            if all(instrs[j].op != KOp.RANGE for j in range(start + 1, i)):
                plan = _plan(instrs, start, i)
                if plan is not None:
                    plans[start] = plan
    if not plans:
        return kernel
    out = KernelIR(kernel.name, kernel.params, [], kernel.global_size, kernel.work, kernel.contraction)
    b = Builder(out)
    new: dict[int, int] = {}
    i = 0
    while i < len(instrs):
        x = instrs[i]
        plan = plans.get(i)
        if plan is None:
            if x.op == KOp.RANGE:
                new[i] = b.open_range(*x.arg)
            elif x.op == KOp.ENDRANGE:
                b.close_range(new[x.srcs[0]])
            else:
                new[i] = b.emit(x.op, x.dtype, tuple(new[s] for s in x.srcs), x.arg)
            i += 1
            continue
        end, lo, hi, inside = plan
        extent, kind = x.arg
        parts: tuple[tuple[int, int, dict[int, int | bool]], ...] = ((0, lo, {}), (lo, hi, inside), (hi, extent, {}))
        for first, last, replaced in parts:
            if last <= first:
                continue
            r = b.open_range(last - first, kind)
            new[i] = r if first == 0 else b.emit(KOp.ADD, INDEX, (r, b.emit(KOp.CONST, INDEX, (), first)))
            for j in range(i + 1, end):
                y = instrs[j]
                if j in replaced:
                    what = replaced[j]
                    new[j] = b.emit(KOp.CONST, np.dtype(np.bool_), (), what) if isinstance(what, bool) else new[what]
                else:
                    new[j] = b.emit(y.op, y.dtype, tuple(new[s] for s in y.srcs), y.arg)
            b.close_range(r)
        i = end + 1
    return out


def global_plan(kernel: KernelIR, symbolic: frozenset[int] = frozenset()) -> tuple[dict[int, int | bool], list] | None:
    """(replacements, bounds) for the kernel's global index, or None: the same split for the loop a CPU renderer
    writes over the global index (a 1-d stencil's `u[1:-1] = f(u[2:], u[:-2])` has no inner loop to split), which
    it runs as three loops, over [0, lo), [lo, hi) and [hi, size), each part of the range a thread takes cut by
    them (codegen/cpu/native.py). The replacements hold in [lo, hi) where every bound holds: ("lo", c, d), lo >=
    constant c + d; ("hi", c, d), hi <= c + d, with c an instruction (a CONST). `symbolic`: constants that are
    arguments of the code (runtime/symbolic_sizes.py): the bounds are then computed where the kernel runs, from
    this kernel's sizes' choice of [lo, hi). Only where lower.LayoutOptions.split_loops allows it
    (KernelIR.split_global)."""
    found = [i for i, x in enumerate(kernel.instrs) if x.op == KOp.GLOBAL]
    if len(found) != 1 or not isinstance(kernel.global_size, int) or kernel.global_size < GLOBAL_MIN:
        return None
    plan = _plan(kernel.instrs, found[0], len(kernel.instrs), kernel.global_size, symbolic)
    if plan is None:
        return None
    _, lo, hi, inside = plan
    bounds = [
        bound
        for j, _, what, bound in _walk(kernel.instrs, found[0], len(kernel.instrs), (lo, hi), symbolic)
        if what is not None
    ]
    return inside, bounds


def _plan(instrs, start: int, end: int, global_size: int | None = None, symbolic: frozenset[int] = frozenset()):
    """(end, lo, hi, replacements in [lo, hi)) for the loop opened at `start` (or the global index, of
    `global_size`), or None: a replacement is the source a clamp leaves as it is there, or the answer a comparison
    gives there. [lo, hi) is the longest run of the index between the places where a clamp starts or stops
    clamping or a comparison changes its answer."""
    extent, kind = instrs[start].arg if global_size is None else (global_size, "loop")
    if kind != "loop" or not isinstance(extent, int) or extent < _MIN_EXTENT:
        return None
    cuts = {0, extent}
    for _, at, _, _ in _walk(instrs, start, end, None, symbolic):
        if 0 < at < extent:
            cuts.add(at)
    edges = sorted(cuts)
    lo, hi = max(zip(edges, edges[1:]), key=lambda e: e[1] - e[0])
    if hi - lo < max(_MIN_EXTENT, extent // 2):
        return None
    inside = {j: what for j, _, what, _ in _walk(instrs, start, end, (lo, hi), symbolic) if what is not None}
    return (end, lo, hi, inside) if inside else None


def _walk(instrs, start: int, end: int, segment: tuple[int, int] | None, symbolic: frozenset[int] = frozenset()):
    """The clamps and comparisons of the loop's index in its body: (instruction, the place where it changes, what
    it is in `segment`: its source where it clamps nothing there, its answer where a comparison has one there, else
    None; and the bound on the segment that answer needs, ("lo" or "hi", the constant, what is added to it)).
    Without a segment every clamp is taken to clamp nothing (to find the places). The index's offsets must be
    constants of the code; a clamp's or comparison's constant may be `symbolic`."""
    affine: dict[int, int] = {start: 0}  # instruction -> b, its value being the index plus b
    for j in range(start + 1, end):
        x = instrs[j]
        if x.op == KOp.CONST or x.dtype is None or x.dtype.kind not in "iu" and x.dtype != np.bool_:
            continue
        s = x.srcs
        k0, k1 = (_const(instrs, s[1], symbolic), _const(instrs, s[0], symbolic)) if len(s) == 2 else (None, None)
        c0, c1 = (_const(instrs, s[1]), _const(instrs, s[0])) if len(s) == 2 else (None, None)
        if x.op == KOp.ADD and len(s) == 2:
            if s[0] in affine and k0 is not None:
                affine[j] = affine[s[0]] + k0
            elif s[1] in affine and k1 is not None:
                affine[j] = affine[s[1]] + k1
        elif x.op == KOp.SUB and s[0] in affine and k0 is not None:
            affine[j] = affine[s[0]] - k0
        elif x.op == KOp.CAST and s[0] in affine and x.dtype.kind == "i" and x.dtype.itemsize >= 4:
            affine[j] = affine[s[0]]  # (index values this small fit every signed int of 4 bytes or more)
        elif x.op in (KOp.MIN, KOp.MAX) and s[0] in affine and c0 is not None:
            b, c = affine[s[0]], c0
            # min(index + b, c) clamps nothing below c - b + 1; max(index + b, c) nothing from c - b on
            at = c - b + 1 if x.op == KOp.MIN else c - b
            free = segment is None or (segment[1] <= at if x.op == KOp.MIN else segment[0] >= at)
            if free:
                affine[j] = b
            bound = ("hi", s[1], at - c) if x.op == KOp.MIN else ("lo", s[1], at - c)
            yield j, at, s[0] if free and segment is not None else None, bound
        elif x.op in _COMPARE and x.dtype == np.bool_:
            if s[0] in affine and c0 is not None:  # index + b < c: index < c - b
                b, c, ci = affine[s[0]], c0, s[1]
                at, below = (c - b if x.op == KOp.LT else c - b + 1), True
            elif s[1] in affine and c1 is not None:  # c < index + b: index >= c - b + 1
                b, c, ci = affine[s[1]], c1, s[0]
                at, below = (c - b + 1 if x.op == KOp.LT else c - b), False
            else:
                continue
            answer = None
            if segment is not None and not segment[0] < at < segment[1]:
                # `index < at` is true below `at`; `at <= index` from `at` on
                answer = (segment[1] <= at) if below else (segment[0] >= at)
            yield j, at, answer, ("hi" if segment is not None and segment[1] <= at else "lo", ci, at - c)


def _const(instrs, i: int, symbolic: frozenset[int] = frozenset()) -> int | None:
    x = instrs[i]
    if i in symbolic or x.op != KOp.CONST or x.dtype is None or isinstance(x.arg, bool):
        return None
    if x.dtype.kind in "iu":
        return int(x.arg)
    return None
