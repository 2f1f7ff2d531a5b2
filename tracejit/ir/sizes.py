"""A kernel's sizes: the values a new shape may change (issue 19), each at a Slot, and the key of the kernel
with them blanked. A renderer may take sizes as arguments of its code, symbolic sizes, so that one compile
serves every kernel with that key (runtime/symbolic_sizes.py decides which)."""

from __future__ import annotations

import numpy as np

from tracejit.ir.kernel_ir import KOp, KernelIR

# Where a size sits: (instruction index, position in its arg, or -1 for the whole arg). A size is a constant
# (a row length, 1/n of a mean, a stride), a loop's extent, a BOUND's axis size, a LOCAL's length, a SORT's
# length or the global size.
Slot = tuple[int, int]


def kernel_sizes(kernel: KernelIR) -> dict[Slot, object]:
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


def size_free_key(kernel: KernelIR, slots: dict | None = None) -> tuple:
    """The kernel with its sizes (kernel_sizes, given or found) blanked: kernels with one key differ only in
    those values. A constant table stands for itself by its digest."""
    slots = kernel_sizes(kernel) if slots is None else slots
    instrs = []
    for i, x in enumerate(kernel.instrs):
        arg = x.arg
        if (i, -1) in slots:
            arg = None
        elif isinstance(arg, tuple) and any((i, j) in slots for j in range(len(arg))):
            arg = tuple(None if (i, j) in slots else a for j, a in enumerate(arg))
        instrs.append(
            (x.op, None if x.dtype is None else x.dtype.str, x.srcs, arg.digest if x.op == KOp.TABLE else repr(arg))
        )
    params = tuple((p.name, p.dtype.str, p.output) for p in kernel.params)
    return kernel.name, params, tuple(instrs)
