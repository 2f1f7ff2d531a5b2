"""Kernel IR: one fused kernel as a flat list of SSA instructions, whose ops (KOp) are the rows of
STRUCTURE below and the elementwise rows of ops.OPS.

Shape of every kernel:  GLOBAL g (parallel) -> reduce loops (RANGE kind "reduce", ACC/UPDATE)
-> element loops (RANGE kind "loop", or "scan") -> STORE. A CPU renderer maps GLOBAL to a parallel loop and
RANGEs to serial loops; a GPU renderer maps GLOBAL to work-groups or threads and may spread a
"reduce" range over a work-group (tree reduction) or a "loop" range over its work-items, because
the IR states which loops are reductions and with which operator.
"""
from __future__ import annotations

import builtins
import importlib
import zlib
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from tracejit.errors import InternalError
from tracejit.ir.ops import BINARY_NAMES, OPS, TERNARY_NAMES, UNARY_NAMES

INDEX = np.dtype("int64")
_ERRORS = importlib.import_module("tracejit.errors")   # the module a fault names its error class in


@dataclass(frozen=True)
class InstrDef:
    """A structural instruction: its name, whether it is pure, and what its sources and arg are."""
    name: str
    pure: bool      # a function of its sources: equal ones in one loop scope are one (Builder, hoist)
    meaning: str


STRUCTURE: tuple[InstrDef, ...] = (
    InstrDef("param", False, "arg: the parameter's index; a buffer, or a scalar passed by value"),
    InstrDef("global", False, "arg: the global size; the global index g, looped over in parallel"),
    InstrDef("const", True, "arg: the value"),
    InstrDef("cast", True, "srcs: (value,): converted to the dtype"),
    InstrDef("load", True, "srcs: (param, LOCAL or TABLE, int64 index): its element; from a LOCAL not pure"),
    InstrDef("store", False, "srcs: (param or LOCAL, int64 index, value)"),
    InstrDef("range", False, 'arg: (extent, kind): a loop; kind "reduce", "loop" or "scan" (run in order: its '
                             "body UPDATEs accumulators whose running value it reads; the operator being "
                             "associative, a GPU renderer may still split it over a work-group's items in "
                             "chunks joined by a scan of their totals)"),
    InstrDef("endrange", False, "srcs: (range,): the loop's end"),
    InstrDef("acc", False, "arg: (sum/prod/max/min, identity): an accumulator"),
    InstrDef("update", False, "srcs: (acc, value) or (LOCAL, index, value): combined into it; an UPDATE of an "
                              "ACC with a dtype is also a value, the accumulator after the update"),
    InstrDef("local", False, "arg: (size, the reduction it accumulates or None, that reduction's length): memory "
                             "private to one global index"),
    InstrDef("table", True, "arg: an ir.table.Table: a constant array embedded in the kernel, read with LOAD"),
    InstrDef("bound", True, "srcs: (index read from data,), arg: (axis size, Fault): an offset; a negative value "
                            "counts from the end, one outside the axis records the Fault for the runtime to "
                            "raise and reads element 0 instead"),
    InstrDef("sort", False, "srcs: (LOCAL of keys, optionally a LOCAL of int32 positions), arg: n: their first n "
                            "entries sorted in place by key, NaN after every number, equal keys by position (in "
                            "any order without positions); the rest (padding to a power of two, keys that sort "
                            "last) keeps its place"),
    InstrDef("atomic", False, "srcs: (output param, int64 index, value), arg: sum/prod/max/min: combined into that "
                              "element, every global index's update applied even where they hit one element: "
                              "atomics on SIMT targets (codegen/simt/atomics.py), a serial global loop on the "
                              "CPU, in the global index's order (see has_atomics)"),
)


class _KOpEnum(str, Enum):
    """Renders as its name ("load"), as the bare strings did: printed IR, cache keys and sources are unchanged."""
    __str__ = str.__str__
    __format__ = str.__format__
    __repr__ = str.__repr__


# every op of the kernel IR (KOp.LOAD is "load"; the ALU ops keep the graph op names: KOp.ADD is "add")
KOp = _KOpEnum("KOp", [(n.upper(), n) for n in (*(d.name for d in STRUCTURE), *(d.name for d in OPS))],
               module=__name__)

ALU_UNARY = frozenset(KOp(n) for n in UNARY_NAMES)
ALU_BINARY = frozenset(KOp(n) for n in BINARY_NAMES)
ALU_TERNARY = frozenset(KOp(n) for n in TERNARY_NAMES)
ALU = ALU_UNARY | ALU_BINARY | ALU_TERNARY
STRUCTURAL = frozenset(KOp(d.name) for d in STRUCTURE)
IMPURE = frozenset(KOp(d.name) for d in STRUCTURE if not d.pure)


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


def faults(kernel: "KernelIR") -> list[Fault]:
    """The faults a kernel can record."""
    found = [x.arg[1] if x.op == KOp.BOUND else NEGATIVE_POWER for x in kernel.instrs
             if x.op == KOp.BOUND or x.op == KOp.POW and x.dtype.kind == "i"]
    return list(dict.fromkeys(found))


def has_atomics(kernel: KernelIR) -> bool:
    """Whether the kernel combines updates into memory (ATOMIC): a CPU renderer runs its global loop in
    order, so the updates apply in NumPy's order, without atomics."""
    return any(x.op == KOp.ATOMIC for x in kernel.instrs)


def fault_error(kernels: "list[KernelIR]", code: int, value: int) -> Exception:
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
    op: KOp
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
class KernelIR:
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
            if ins.op == KOp.ENDRANGE:
                depth -= 1
            srcs = ", ".join(f"%{s}" for s in ins.srcs)
            arg = "" if ins.arg is None else f" {ins.arg!r}"
            ty = f" : {ins.dtype.name}" if ins.dtype is not None else ""
            lines.append(f"{'  ' * depth}%{i} = {ins.op}{arg}({srcs}){ty}")
            if ins.op == KOp.RANGE:
                depth += 1
        return "\n".join(lines)

    __str__ = format


class Builder:
    """Appends instructions, sharing identical pure ones within the current loop scope."""

    def __init__(self, kernel: KernelIR):
        self.kernel = kernel
        self._scopes: list[dict] = [{}]

    def emit(self, op: KOp, dtype, srcs=(), arg=None) -> int:
        if op in (KOp.WHERE, KOp.AND, KOp.OR) and srcs:
            folded = self._fold(op, np.dtype(dtype), srcs)
            if folded is not None:
                return folded
        ins = Instr(op, None if dtype is None else np.dtype(dtype), tuple(srcs), arg)
        pure = op not in IMPURE and not (op == KOp.LOAD and self.kernel.instrs[srcs[0]].op == KOp.LOCAL)
        # -0.0 == 0.0 and NaN != NaN: a float constant is shared by its bits, not by ==
        key = (ins, np.float64(arg).tobytes()) if op == KOp.CONST and isinstance(arg, float) else ins
        if pure:
            for scope in reversed(self._scopes):
                if key in scope:
                    return scope[key]
        self.kernel.instrs.append(ins)
        idx = len(self.kernel.instrs) - 1
        if pure:
            self._scopes[-1][key] = idx
        return idx

    def _fold(self, op: KOp, dtype: np.dtype, srcs) -> int | None:
        """A select or logical operation that a constant operand decides: the operand it gives (an element
        read at fixed positions in a Python loop made chains of where(True, a, b) otherwise)."""
        ins = self.kernel.instrs
        known = [bool(ins[s].arg) if ins[s].op == KOp.CONST and ins[s].dtype == np.bool_ else None for s in srcs]
        if op == KOp.WHERE:
            if known[0] is None:   # where(c, True, False) is c
                return srcs[0] if dtype == np.bool_ and known[1:] == [True, False] else None
            pick = srcs[1] if known[0] else srcs[2]
            return pick if ins[pick].dtype == dtype else None
        if dtype != np.bool_ or any(ins[s].dtype != np.bool_ for s in srcs):
            return None
        decisive = op == KOp.OR   # x or True is True, x and False is False; the other constant gives x
        for k, value in enumerate(known):
            if value is decisive:
                return srcs[k]
            if value is not None:
                return srcs[1 - k]
        return None

    def open_range(self, extent: int, kind: str) -> int:
        r = self.emit(KOp.RANGE, INDEX, (), (extent, kind))
        self._scopes.append({})
        return r

    def close_range(self, r: int) -> None:
        self._scopes.pop()
        self.emit(KOp.ENDRANGE, None, (r,))
