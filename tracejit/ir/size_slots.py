"""The values of a kernel that a new shape may change: its size slots (issue 19).

A slot is (instruction index, position in its arg, or -1 for the whole arg): a constant (a row length,
1/n of a mean, a stride), a loop's extent, a BOUND's axis size, a LOCAL's length, a SORT's length, the
global size. Kernels whose instructions are the same but for those values share a template; a renderer
that can take some slots as arguments of its code (codegen.numba.slot_argument, codegen.cstyle.
slot_argument) then serves every kernel of the template from one compile (runtime/size_templates.py).
"""
from __future__ import annotations

import numpy as np

from tracejit.ir.kernel_ir import KOp, Kernel

Slot = tuple[int, int]


def size_slots(kernel: Kernel) -> dict[Slot, object]:
    """{slot: value} for every value a new shape may change."""
    out: dict[Slot, object] = {}
    for i, x in enumerate(kernel.instrs):
        if x.op == KOp.CONST and x.dtype != np.bool_:
            out[(i, -1)] = x.arg
        elif x.op in (KOp.RANGE, KOp.BOUND):
            out[(i, 0)] = x.arg[0]
        elif x.op == KOp.LOCAL:
            out[(i, 0)], out[(i, 2)] = x.arg[0], x.arg[2]
        elif x.op in (KOp.SORT, KOp.GLOBAL):
            out[(i, -1)] = x.arg
    return out


def template(kernel: Kernel, slots: dict | None = None) -> tuple:
    """The kernel with its size slots (size_slots, given or found) blanked: kernels with one template
    differ only in those values. A constant table stands for itself by its digest."""
    slots = size_slots(kernel) if slots is None else slots
    instrs = []
    for i, x in enumerate(kernel.instrs):
        arg = x.arg
        if (i, -1) in slots:
            arg = None
        elif isinstance(arg, tuple) and any((i, j) in slots for j in range(len(arg))):
            arg = tuple(None if (i, j) in slots else a for j, a in enumerate(arg))
        instrs.append((x.op, None if x.dtype is None else x.dtype.str, x.srcs,
                       arg.digest if x.op == KOp.TABLE else repr(arg)))
    params = tuple((p.name, p.dtype.str, p.output) for p in kernel.params)
    return kernel.name, params, tuple(instrs)
