"""A NumPy interpreter of the kernel IR: the executable definition of what each instruction means.

It runs every global index at once (values are arrays over g) and loops in Python, so it is slow
but obvious; tests run renderers' output against it. Faults (kernel_ir.Fault) are raised, or written
to an error record as the SIMT targets keep it.
"""

from __future__ import annotations

import numpy as np

from tracejit.ir.kernel_ir import NEGATIVE_POWER, Fault, KOp, KernelIR, fault_error
from tracejit.ir.ops import NUMPY_OPS

_COMBINE = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}


def run(kernel: KernelIR, buffers: list[np.ndarray], error: np.ndarray | None = None) -> None:
    """Execute kernel on flat buffers (one per param, outputs written in place). A fault is raised, or
    with `error` (int32 words: code, the value's low and high halves, count of faults) recorded there:
    the first one met, unless one is recorded already."""
    n = kernel.global_size

    def fault(which: Fault, failed: np.ndarray, value: np.ndarray) -> None:
        if not failed.any():
            return
        v = value[np.argmax(failed)]
        if error is None:
            raise fault_error([kernel], which.code, int(v))
        if error[3] == 0:
            error[:3] = [which.code, *np.array([v]).astype(np.int64).view(np.int32)]  # little-endian halves
        error[3] += int(failed.sum())

    rows = np.arange(n)
    vals: list = [None] * len(kernel.instrs)
    loops: list[list[int]] = []  # [range instr index, current iteration]
    pc = 0
    with np.errstate(all="ignore"):
        while pc < len(kernel.instrs):
            ins = kernel.instrs[pc]
            op, s = ins.op, ins.srcs
            if op == KOp.PARAM:
                vals[pc] = buffers[ins.arg]
            elif op == KOp.GLOBAL:
                vals[pc] = np.arange(n, dtype=np.int64)
            elif op == KOp.CONST:
                vals[pc] = np.full(n, ins.arg, dtype=ins.dtype)
            elif op == KOp.CAST:
                vals[pc] = vals[s[0]].astype(ins.dtype)
            elif op == KOp.BITCAST:
                vals[pc] = np.ascontiguousarray(vals[s[0]]).view(ins.value_dtype)
            elif op == KOp.TABLE:
                vals[pc] = ins.arg.values
            elif op == KOp.BOUND:
                size, f = ins.arg
                v = vals[s[0]]
                w = v.astype(np.int64) + np.where(v < 0, size, 0) if v.dtype.kind == "i" else v.astype(np.uint64)
                inside = (w >= 0) & (w < size)
                fault(f, ~inside, v)
                vals[pc] = np.where(inside, w, 0).astype(np.int64)
            elif op == KOp.POW and ins.value_dtype.kind == "i":
                b = vals[s[1]]
                fault(NEGATIVE_POWER, b < 0, b)
                vals[pc] = np.power(vals[s[0]], np.maximum(b, 0)).astype(ins.dtype)
            elif op == KOp.LOCAL:  # one private array per global index: rows of a 2-D array
                vals[pc] = np.zeros((n, ins.arg[0]), dtype=ins.dtype)
            elif op == KOp.LOAD:
                buf = vals[s[0]]
                vals[pc] = buf[rows, vals[s[1]]] if buf.ndim == 2 else buf[vals[s[1]]]
            elif op == KOp.STORE:
                buf = vals[s[0]]
                if buf.ndim == 2:
                    buf[rows, vals[s[1]]] = vals[s[2]]
                else:
                    buf[vals[s[1]]] = vals[s[2]]
            elif op == KOp.ATOMIC:  # every update applied, in the global index's order (np.ufunc.at)
                buf = vals[s[0]]
                _COMBINE[ins.arg].at(buf, vals[s[1]], vals[s[2]].astype(buf.dtype))
            elif op == KOp.ACC:
                vals[pc] = np.full(n, ins.arg[1], dtype=ins.dtype)
            elif op == KOp.UPDATE:  # (acc, value) or (local, index, value)
                target = kernel.instrs[s[0]]
                acc = vals[s[0]]
                if target.op == KOp.ACC:
                    acc[...] = _COMBINE[target.arg[0]](acc, vals[s[1]]).astype(acc.dtype)
                    vals[pc] = acc.copy()  # the running value (scans read it); later updates change acc
                else:
                    idx = vals[s[1]]
                    acc[rows, idx] = _COMBINE[target.arg[1]](acc[rows, idx], vals[s[2]]).astype(acc.dtype)
            elif op == KOp.SORT:  # by key (NaN last, as NumPy sorts), then by position
                length = ins.arg
                arrays = [vals[j][:, :length] for j in s]
                order = np.lexsort(arrays[::-1], axis=-1)
                for j, a in zip(s, arrays):
                    vals[j][:, :length] = np.take_along_axis(a, order, axis=-1)
            elif op == KOp.RANGE:
                extent = ins.arg[0]
                if extent == 0:
                    pc = _matching_end(kernel, pc) + 1
                    continue
                loops.append([pc, 0])
                vals[pc] = np.zeros(n, dtype=np.int64)
            elif op == KOp.ENDRANGE:
                loop = loops[-1]
                loop[1] += 1
                if loop[1] < kernel.instrs[loop[0]].arg[0]:
                    vals[loop[0]] = np.full(n, loop[1], dtype=np.int64)
                    pc = loop[0] + 1
                    continue
                loops.pop()
            else:
                out = NUMPY_OPS[op](*(vals[i] for i in s))
                vals[pc] = np.asarray(out).astype(ins.dtype, copy=False)
            pc += 1


def _matching_end(kernel: KernelIR, start: int) -> int:
    for i in range(start + 1, len(kernel.instrs)):
        ins = kernel.instrs[i]
        if ins.op == KOp.ENDRANGE and ins.srcs[0] == start:
            return i
    raise ValueError(f"range %{start} has no endrange")
