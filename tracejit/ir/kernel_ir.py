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
from typing import TYPE_CHECKING, Any

import numpy as np

from tracejit.errors import InternalError
from tracejit.ir.ops import BINARY_NAMES, OPS, TERNARY_NAMES, UNARY_NAMES

if TYPE_CHECKING:  # contraction builds graphs, which kernel_ir does not import at run time
    from tracejit.ir.contraction import Contraction

INDEX = np.dtype("int64")
_ERRORS = importlib.import_module("tracejit.errors")  # the module a fault names its error class in


@dataclass(frozen=True)
class InstrDef:
    """A structural instruction: its name, whether it is pure, and what its sources and arg are."""

    name: str
    pure: bool  # a function of its sources: equal ones in one loop scope are one (Builder, hoist)
    meaning: str


STRUCTURE: tuple[InstrDef, ...] = (
    InstrDef("param", False, "arg: the parameter's index; a buffer, or a scalar passed by value"),
    InstrDef("global", False, "arg: the global size; the global index g, looped over in parallel"),
    InstrDef("const", True, "arg: the value"),
    InstrDef("cast", True, "srcs: (value,): converted to the dtype"),
    InstrDef("bitcast", True, "srcs: (value,): its bits read as the dtype, of the same size (float32 <-> uint32)"),
    InstrDef("load", True, "srcs: (param, LOCAL or TABLE, int64 index): its element; from a LOCAL not pure"),
    InstrDef("store", False, "srcs: (param or LOCAL, int64 index, value)"),
    InstrDef(
        "range",
        False,
        'arg: (extent, kind): a loop; kind "reduce", "loop" or "scan" (run in order: its '
        "body UPDATEs accumulators whose running value it reads; the operator being "
        "associative, a GPU renderer may still split it over a work-group's items in "
        "chunks joined by a scan of their totals)",
    ),
    InstrDef("endrange", False, "srcs: (range,): the loop's end"),
    InstrDef("acc", False, "arg: (sum/prod/max/min, identity): an accumulator"),
    InstrDef(
        "update",
        False,
        "srcs: (acc, value) or (LOCAL, index, value): combined into it; an UPDATE of an "
        "ACC with a dtype is also a value, the accumulator after the update",
    ),
    InstrDef(
        "local",
        False,
        "arg: (size, the reduction it accumulates or None, that reduction's length): memory "
        "private to one global index",
    ),
    InstrDef("table", True, "arg: an ir.table.Table: a constant array embedded in the kernel, read with LOAD"),
    InstrDef(
        "bound",
        True,
        "srcs: (index read from data,), arg: (axis size, Fault): an offset; a negative value "
        "counts from the end, one outside the axis records the Fault for the runtime to "
        "raise and reads element 0 instead",
    ),
    InstrDef(
        "sort",
        False,
        "srcs: (LOCAL of keys, optionally a LOCAL of int32 positions), arg: n: their first n "
        "entries sorted in place by key, NaN after every number, equal keys by position (in "
        "any order without positions); the rest (padding to a power of two, keys that sort "
        "last) keeps its place",
    ),
    InstrDef(
        "atomic",
        False,
        "srcs: (output param, int64 index, value), arg: sum/prod/max/min: combined into that "
        "element, every global index's update applied even where they hit one element: "
        "atomics on SIMT targets (codegen/simt/atomics.py), a serial global loop on the "
        "CPU, in the global index's order (see has_atomics)",
    ),
)


class KOp(str, Enum):
    """Every op of the kernel IR: STRUCTURE's rows, then ops.OPS's (KOp.LOAD is "load"; the ALU ops keep the graph
    op names: KOp.ADD is "add"), in the tables' order. Written out because a type checker knows only the members a
    class body names (an Enum built from the tables at run time had none for mypy); the check below the class
    keeps them equal to the tables. Renders as its name ("load"), as the bare strings did: printed IR, cache keys
    and sources are unchanged."""

    PARAM = "param"
    GLOBAL = "global"
    CONST = "const"
    CAST = "cast"
    BITCAST = "bitcast"
    LOAD = "load"
    STORE = "store"
    RANGE = "range"
    ENDRANGE = "endrange"
    ACC = "acc"
    UPDATE = "update"
    LOCAL = "local"
    TABLE = "table"
    BOUND = "bound"
    SORT = "sort"
    ATOMIC = "atomic"
    # elementwise: ops.OPS
    NEG = "neg"
    ABS = "abs"
    SIGN = "sign"
    INVERT = "invert"
    RECIP = "recip"
    EXP = "exp"
    EXP2 = "exp2"
    EXPM1 = "expm1"
    LOG = "log"
    LOG2 = "log2"
    LOG10 = "log10"
    LOG1P = "log1p"
    SQRT = "sqrt"
    CBRT = "cbrt"
    SIN = "sin"
    COS = "cos"
    TAN = "tan"
    ARCSIN = "arcsin"
    ARCCOS = "arccos"
    ARCTAN = "arctan"
    SINH = "sinh"
    COSH = "cosh"
    TANH = "tanh"
    ARCSINH = "arcsinh"
    ARCCOSH = "arccosh"
    ARCTANH = "arctanh"
    ERF = "erf"
    FLOOR = "floor"
    CEIL = "ceil"
    TRUNC = "trunc"
    RINT = "rint"
    ISNAN = "isnan"
    ISINF = "isinf"
    SIGNBIT = "signbit"
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    IDIV = "idiv"
    MOD = "mod"
    FMOD = "fmod"
    POW = "pow"
    MAX = "max"
    MIN = "min"
    ARCTAN2 = "arctan2"
    HYPOT = "hypot"
    COPYSIGN = "copysign"
    LDEXP = "ldexp"
    LT = "lt"
    LE = "le"
    EQ = "eq"
    NE = "ne"
    AND = "and"
    OR = "or"
    XOR = "xor"
    SHL = "shl"
    SHR = "shr"
    WHERE = "where"

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(self, spec)

    def __repr__(self) -> str:
        return str.__repr__(self)


if [op.value for op in KOp] != [*(d.name for d in STRUCTURE), *(d.name for d in OPS)]:
    raise ImportError("kernel_ir.KOp's members must be STRUCTURE's and ops.OPS's rows, in order: add the new row's op")

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

    def exception(self, value: int) -> Exception:
        """The exception to raise for this fault with its offending value."""
        error = getattr(_ERRORS, self.error, None) or getattr(builtins, self.error)
        return error(self.message.format(value=value)) if self.message else error()  # (`assert x`: no message)


NEGATIVE_POWER = Fault("ValueError", "Integers to negative integer powers are not allowed.")


def faults(kernel: KernelIR) -> list[Fault]:
    """The faults a kernel can record."""
    found = [
        x.arg[1] if x.op == KOp.BOUND else NEGATIVE_POWER
        for x in kernel.instrs
        if x.op == KOp.BOUND or x.op == KOp.POW and x.value_dtype.kind == "i"
    ]
    return list(dict.fromkeys(found))


def has_atomics(kernel: KernelIR) -> bool:
    """Whether the kernel combines updates into memory (ATOMIC): a CPU renderer runs its global loop in
    order, so the updates apply in NumPy's order, without atomics."""
    return any(x.op == KOp.ATOMIC for x in kernel.instrs)


def fault_error(kernels: list[KernelIR], code: int, value: int) -> Exception:
    """The exception for the fault `code` that one of kernels recorded, with its offending value."""
    fault = next((f for k in kernels for f in faults(k) if f.code == code), None)
    if fault is None:  # the record was overwritten by something other than these kernels
        return InternalError(
            f"kernels {', '.join(k.name for k in kernels)} recorded an unknown fault (code {code}, value {value})"
        )
    return fault.exception(value)


@dataclass(frozen=True)
class Instr:
    """`op` with sources given as indices of earlier instructions; `dtype` is the result's dtype."""

    op: KOp
    dtype: np.dtype | None
    srcs: tuple[int, ...] = ()
    arg: Any = None  # what the op's row (STRUCTURE, or None for ALU ops) says: an int, a tuple, a Table, a value

    @property
    def value_dtype(self) -> np.dtype:
        """The dtype of an instruction that is a value (STORE, ENDRANGE, SORT, ATOMIC and an UPDATE not read as
        a value have None)."""
        assert self.dtype is not None, f"{self.op} is not a value"
        return self.dtype


@dataclass(frozen=True)
class Param:
    name: str
    dtype: np.dtype
    size: int  # elements the kernel may touch (the flat buffer length)
    output: bool


@dataclass
class KernelIR:
    name: str
    params: list[Param]
    instrs: list[Instr] = field(default_factory=list)
    global_size: int = 1
    work: int = 1  # element-operations per launch, a size hint for parallelisation
    # a matrix product SIMT targets may render as a tiled kernel instead of these instructions
    contraction: Contraction | None = None
    # a CPU renderer may run the global index's loop in parts without its clamps (ir/split_loops.global_plan)
    split_global: bool = False

    def format(self) -> str:
        lines = [
            f"kernel {self.name}("
            + ", ".join(f"{'out ' if p.output else ''}{p.name}: {p.dtype.name}[{p.size}]" for p in self.params)
            + ")"
        ]
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
            if known[0] is None:  # where(c, True, False) is c
                return srcs[0] if dtype == np.bool_ and known[1:] == [True, False] else None
            pick = srcs[1] if known[0] else srcs[2]
            return pick if ins[pick].dtype == dtype else None
        if dtype != np.bool_ or any(ins[s].dtype != np.bool_ for s in srcs):
            return None
        decisive = op == KOp.OR  # x or True is True, x and False is False; the other constant gives x
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
