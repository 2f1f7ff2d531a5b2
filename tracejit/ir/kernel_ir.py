"""Kernel IR: one fused kernel as a flat list of SSA instructions.

Shape of every kernel:  GLOBAL g (parallel) -> reduce loops (RANGE kind "reduce", ACC/UPDATE)
-> element loops (RANGE kind "loop", or "scan") -> STORE. A "scan" loop runs in order: its body UPDATEs
accumulators whose running value it reads (an UPDATE of an ACC with a dtype is also a value, the
accumulator after the update); since the operator is associative, a GPU renderer may still split it
over a work-group's items in chunks joined by a scan of their totals. LOCAL is memory private to one global index (arg:
(size, the reduction it accumulates or None, that reduction's length)); loads from it are not pure,
everything else is. TABLE is a constant array embedded in the kernel (arg: an ir.table.Table), read
with LOAD like a buffer. BOUND turns an index read from data into an offset (arg: (axis size, Fault)):
a negative value counts from the end, one outside the axis records the Fault for the runtime to raise
and reads element 0 instead. SORT (srcs: a LOCAL of keys, optionally a LOCAL of int32 positions; arg: n)
sorts their first n entries in place by key, NaN after every number, equal keys by position (and in any
order without positions); the rest of the arrays (padding to a power of two, keys that sort last) keeps
its place. ATOMIC (srcs: an output param, an int64 index, a value; arg: sum, prod, max or min) combines
the value into that element, every global index's update applied even where they hit one element:
atomics on SIMT targets (codegen/simt/atomics.py), a serial global loop on the CPU, in the global index's
order (see has_atomics). A CPU renderer maps GLOBAL to a parallel loop and
RANGEs to serial loops; a GPU renderer maps GLOBAL to work-groups or threads and may spread a
"reduce" range over a work-group (tree reduction) or a "loop" range over its work-items, because
the IR states which loops are reductions and with which operator.
"""
from __future__ import annotations

import builtins
import importlib
import zlib
from dataclasses import dataclass, field

import numpy as np

from tracejit.errors import InternalError
from tracejit.ir.ops import BINARY_NAMES, TERNARY_NAMES, UNARY_NAMES

INDEX = np.dtype("int64")
_ERRORS = importlib.import_module("tracejit.errors")   # the module a fault names its error class in

# ALU ops are the rows of ops.OPS, with the graph op names.
ALU_UNARY, ALU_BINARY, ALU_TERNARY = UNARY_NAMES, BINARY_NAMES, TERNARY_NAMES
ALU = ALU_UNARY | ALU_BINARY | ALU_TERNARY
# structural ops
STRUCTURAL = frozenset({"param", "global", "const", "cast", "load", "store", "range", "endrange", "acc",
                        "update", "local", "table", "bound", "sort", "atomic"})


@dataclass(frozen=True)
class Fault:
    """An error NumPy raises that a kernel can only find while it runs (an index out of bounds). The
    kernel records the first fault it meets (its code and the offending value) in an error record that
    the runtime reads after the launch and raises as `error` (a name in tracejit.errors or builtins)
    with `message`, whose {value} is that value."""
    error: str
    message: str

    @property
    def code(self) -> int:
        """The fault's number in error records: the same in every kernel, so kernels can share a record."""
        return zlib.crc32(f"{self.error}: {self.message}".encode()) & 0x7FFFFFFF or 1


NEGATIVE_POWER = Fault("ValueError", "Integers to negative integer powers are not allowed.")


def faults(kernel: "Kernel") -> list[Fault]:
    """The faults a kernel can record."""
    found = [x.arg[1] if x.op == "bound" else NEGATIVE_POWER for x in kernel.instrs
             if x.op == "bound" or x.op == "pow" and x.dtype.kind == "i"]
    return list(dict.fromkeys(found))


def has_atomics(kernel: Kernel) -> bool:
    """Whether the kernel combines updates into memory (ATOMIC): a CPU renderer runs its global loop in
    order, so the updates apply in NumPy's order, without atomics."""
    return any(x.op == "atomic" for x in kernel.instrs)


def fault_error(kernels: "list[Kernel]", code: int, value: int) -> Exception:
    """The exception for the fault `code` that one of kernels recorded, with its offending value."""
    fault = next((f for k in kernels for f in faults(k) if f.code == code), None)
    if fault is None:   # the record was overwritten by something other than these kernels
        return InternalError(f"kernels {', '.join(k.name for k in kernels)} recorded an unknown fault "
                                    f"(code {code}, value {value})")
    error = getattr(_ERRORS, fault.error, None) or getattr(builtins, fault.error)
    return error(fault.message.format(value=value))


@dataclass(frozen=True)
class Instr:
    """`op` with sources given as indices of earlier instructions; `dtype` is the result's dtype."""
    op: str
    dtype: np.dtype | None
    srcs: tuple[int, ...] = ()
    arg: object = None


@dataclass(frozen=True)
class Param:
    name: str
    dtype: np.dtype
    size: int          # elements the kernel may touch (the flat buffer length)
    output: bool


@dataclass
class Kernel:
    name: str
    params: list[Param]
    instrs: list[Instr] = field(default_factory=list)
    global_size: int = 1
    work: int = 1      # element-operations per launch, a size hint for parallelisation
    # a matrix product SIMT targets may render as a tiled kernel instead of these instructions
    contraction: object = None   # ir.contraction.Contraction

    def format(self) -> str:
        lines = [f"kernel {self.name}(" + ", ".join(
            f"{'out ' if p.output else ''}{p.name}: {p.dtype.name}[{p.size}]" for p in self.params) + ")"]
        if self.contraction is not None:
            lines.append(f"  # {self.contraction}")
        depth = 1
        for i, ins in enumerate(self.instrs):
            if ins.op == "endrange":
                depth -= 1
            srcs = ", ".join(f"%{s}" for s in ins.srcs)
            arg = "" if ins.arg is None else f" {ins.arg!r}"
            ty = f" : {ins.dtype.name}" if ins.dtype is not None else ""
            lines.append(f"{'  ' * depth}%{i} = {ins.op}{arg}({srcs}){ty}")
            if ins.op == "range":
                depth += 1
        return "\n".join(lines)

    __str__ = format


class Builder:
    """Appends instructions, sharing identical pure ones within the current loop scope."""

    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self._scopes: list[dict] = [{}]

    def emit(self, op: str, dtype, srcs=(), arg=None) -> int:
        if op in ("where", "and", "or") and srcs:
            folded = self._fold(op, np.dtype(dtype), srcs)
            if folded is not None:
                return folded
        ins = Instr(op, None if dtype is None else np.dtype(dtype), tuple(srcs), arg)
        pure = op not in ("store", "range", "endrange", "acc", "update", "param", "global", "local", "sort",
                          "atomic") and not (
            op == "load" and self.kernel.instrs[srcs[0]].op == "local")
        # -0.0 == 0.0 and NaN != NaN: a float constant is shared by its bits, not by ==
        key = (ins, np.float64(arg).tobytes()) if op == "const" and isinstance(arg, float) else ins
        if pure:
            for scope in reversed(self._scopes):
                if key in scope:
                    return scope[key]
        self.kernel.instrs.append(ins)
        idx = len(self.kernel.instrs) - 1
        if pure:
            self._scopes[-1][key] = idx
        return idx

    def _fold(self, op: str, dtype: np.dtype, srcs) -> int | None:
        """A select or logical operation that a constant operand decides: the operand it gives (an element
        read at fixed positions in a Python loop made chains of where(True, a, b) otherwise)."""
        ins = self.kernel.instrs
        known = [bool(ins[s].arg) if ins[s].op == "const" and ins[s].dtype == np.bool_ else None for s in srcs]
        if op == "where":
            if known[0] is None:   # where(c, True, False) is c
                return srcs[0] if dtype == np.bool_ and known[1:] == [True, False] else None
            pick = srcs[1] if known[0] else srcs[2]
            return pick if ins[pick].dtype == dtype else None
        if dtype != np.bool_ or any(ins[s].dtype != np.bool_ for s in srcs):
            return None
        decisive = op == "or"   # x or True is True, x and False is False; the other constant gives x
        for k, value in enumerate(known):
            if value is decisive:
                return srcs[k]
            if value is not None:
                return srcs[1 - k]
        return None

    def open_range(self, extent: int, kind: str) -> int:
        r = self.emit("range", INDEX, (), (extent, kind))
        self._scopes.append({})
        return r

    def close_range(self, r: int) -> None:
        self._scopes.pop()
        self.emit("endrange", None, (r,))
