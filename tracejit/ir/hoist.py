"""Loop-invariant code motion on kernel IR: each pure instruction moves out to the outermost loop
that still defines all of its sources, and duplicates that meet there are merged."""

from __future__ import annotations

from tracejit.ir.kernel_ir import IMPURE, Builder, KOp, KernelIR

# Loads from params move too: a kernel never stores to a buffer it loads from, and indices are always
# in bounds. Loads from local memory stay: stores to it change what they read.


def hoist(kernel: KernelIR) -> KernelIR:
    instrs = kernel.instrs
    level = [0] * len(instrs)  # loop depth an instruction has to stay at
    root: list = []
    bodies = [root]  # body lists of the open loops, outermost first
    for i, x in enumerate(instrs):
        if x.op == KOp.RANGE:
            level[i] = len(bodies)  # its variable lives one level deeper than the range itself
            body: list = []
            bodies[-1].append((i, body))
            bodies.append(body)
        elif x.op == KOp.ENDRANGE:
            bodies.pop()
            bodies[-1].append(i)
        elif x.op in IMPURE or x.op == KOp.LOAD and instrs[x.srcs[0]].op == KOp.LOCAL:
            level[i] = len(bodies) - 1
            bodies[-1].append(i)
        else:
            level[i] = max((level[s] for s in x.srcs), default=0)
            target = bodies[level[i]]
            if target is bodies[-1]:
                target.append(i)
            else:  # just before the loop at that level that is still open
                target.insert(len(target) - 1, i)
    out = KernelIR(kernel.name, kernel.params, [], kernel.global_size, kernel.work)
    b = Builder(out)
    new: dict[int, int] = {}

    def place(items):
        for item in items:
            if isinstance(item, tuple):
                i, body = item
                x = instrs[i]
                new[i] = b.open_range(*x.arg)
                place(body)
            elif instrs[item].op == KOp.ENDRANGE:
                b.close_range(new[instrs[item].srcs[0]])
            else:
                x = instrs[item]
                new[item] = b.emit(x.op, x.dtype, tuple(new[s] for s in x.srcs), x.arg)

    place(root)
    return out
