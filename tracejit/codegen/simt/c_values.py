"""How the C-style renderers (cstyle.py: OpenCL C, CUDA C, MSL; WGSL in part) spell values: literals, NumPy's
integer and float arithmetic, comparisons, selects and casts, from per-op tables a target can replace, and
the loads and stores of buffers, local arrays and constant tables."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from tracejit.errors import DtypeError
from tracejit.ir.kernel_ir import NEGATIVE_POWER, Instr, KOp
from tracejit.ir.sizes import Slot
from tracejit.codegen.simt import c_helpers
from tracejit.codegen import math_f32
from tracejit.codegen.simt.mapping import RenderOptions, positive_const

if TYPE_CHECKING:  # c_target reads this module's FLOAT_OPS
    from tracejit.codegen.simt.c_target import CStyle

# bool operands (NumPy: + is or, * is and) and comparisons, as C, OpenCL, CUDA, MSL and WGSL all write them
BOOL_OPS = {
    "add": "({0} || {1})",
    "max": "({0} || {1})",
    "or": "({0} || {1})",
    "mul": "({0} && {1})",
    "min": "({0} && {1})",
    "and": "({0} && {1})",
    "xor": "({0} != {1})",
    "invert": "(!{0})",
}
COMPARISONS = {"lt": "<", "le": "<=", "eq": "==", "ne": "!="}
# float ops -> C (C99, OpenCL C, CUDA and MSL all have these; a target lists what it lacks in own_functions)
FLOAT_OPS = {
    "neg": "(-{0})",
    "add": "({0} + {1})",
    "sub": "({0} - {1})",
    "mul": "({0} * {1})",
    "div": "({0} / {1})",
    "pow": "pow({0}, {1})",
    "abs": "fabs({0})",
    "signbit": "(signbit({0}) != 0)",
    "arcsin": "asin({0})",
    "arccos": "acos({0})",
    "arctan": "atan({0})",
    "arcsinh": "asinh({0})",
    "arccosh": "acosh({0})",
    "arctanh": "atanh({0})",
    "arctan2": "atan2({0}, {1})",
    "ldexp": "ldexp({0}, (int)({1}))",
    **{op: op + "({0}, {1})" for op in ("hypot", "copysign", "fmod")},
    **{
        op: op + "({0})"
        for op in (
            "exp",
            "exp2",
            "expm1",
            "log",
            "log2",
            "log10",
            "log1p",
            "sqrt",
            "cbrt",
            "sin",
            "cos",
            "tan",
            "sinh",
            "cosh",
            "tanh",
            "erf",
            "floor",
            "ceil",
            "trunc",
            "rint",
        )
    },
}


class CValues:
    """Mixed into cstyle._Render: the expression of each value (a size's too: its argument or its literal),
    given the renderer's target strings (self.t), options (self.o), instructions (self.ins), symbolic sizes
    (self.symbolic) and index facts (self.index, self.nonneg)."""

    # what the renderer holds (set in _Render.__init__; declared here, where they are read)
    t: CStyle
    o: RenderOptions
    ins: list[Instr]
    symbolic: dict[Slot, str]  # a symbolic size's slot -> its argument's name
    index: set[int]  # instructions computed in the index type
    nonneg: set[int]  # instructions known not to be negative
    index_bits: int
    idx: str  # the index type's name
    by_value: frozenset[int]  # parameters passed by value
    names: list[str]  # each instruction's variable, once written
    helpers: dict[str, str]  # helper functions the source needs, by name
    ctype: Callable[[np.dtype], str]  # the type a value of a dtype is computed in
    storage: Callable[[np.dtype], str]  # a buffer's element type

    def symbolic_arguments(self) -> tuple[tuple[str, object], ...]:
        """(dtype, value) of each symbolic slot's argument, in the order of their slots: an index value
        (a loop's extent, a constant of index arithmetic) in the kernel's index type."""
        out = []
        for slot, _ in sorted(self.symbolic.items()):
            i = slot[0]
            x = self.ins[i]
            index = x.op == KOp.RANGE or i in self.index
            out.append(
                (f"int{self.index_bits}" if index else x.value_dtype.name, x.arg[0] if x.op == KOp.RANGE else x.arg)
            )
        return tuple(out)

    def takes(self, slot: Slot) -> bool:
        """Whether this target takes a symbolic slot as an argument (the others stay literals)."""
        return True

    def slot(self, i: int, j: int, value, dt: np.dtype, index: bool = False) -> str:
        """The size at a slot in the source: its argument where it is symbolic, else the literal."""
        name = self.symbolic.get((i, j))
        return self.literal(value, dt, index) if name is None else self.argument(name)

    def argument(self, name: str) -> str:
        """How the kernel reads a by-value argument of its own (a symbolic slot) by name."""
        return name

    def literal(self, value, dt: np.dtype, index: bool = False) -> str:
        if dt == np.bool_:
            return "true" if value else "false"
        if dt.kind == "f":
            v = float(value)
            if v != v or v in (math.inf, -math.inf):
                if v != v and dt == np.float64:
                    return self.t.nan64
                text = self.t.nan if v != v else self.t.infinity if v > 0 else f"(-{self.t.infinity})"
                return text if dt != np.float64 else f"(double){text}"
            text = repr(v) if dt == np.float64 else str(np.float32(v))  # shortest text that reads back exactly
            text += "" if any(c in text for c in ".e") else ".0"
            if dt == np.float64:
                return text
            text += "f"
            return text if dt == np.float32 or not self.o.fp16 else f"(half){text}"
        v = int(value)
        if index and self.idx == self.t.types[np.dtype("int32")]:
            dt = np.dtype("int32")
        if dt == np.int64:
            return f"{v}{self.t.long_suffix}" if v != -(2**63) else f"(-9223372036854775807{self.t.long_suffix} - 1)"
        if dt == np.int32:
            return str(v) if v != -(2**31) else "(-2147483647 - 1)"
        if dt == np.uint32:
            return f"{v}u"
        if dt == np.uint64:  # NumPy's sums of uint8/16/32
            return f"{v}U{self.t.long_suffix}"
        return f"(({self.t.types[dt]}){v})"

    # -- expressions --
    def wrap_int(self, op: str, a: str, b: str, dt: np.dtype) -> str:
        """Integer + - * that wraps like NumPy: computed unsigned, where overflow is defined."""
        u = self.t.unsigned[max(4, dt.itemsize)]
        return f"(({self.t.types[dt]})(({u}){a} {op} ({u}){b}))"

    def combine(self, op: str, dt: np.dtype, a: str, b: str) -> str:
        """A reduction step: a combined with b by sum/prod/max/min."""
        if dt == np.bool_:
            return f"({a} || {b})" if op in ("sum", "max") else f"({a} && {b})"
        if op in ("sum", "prod"):
            sym = "+" if op == "sum" else "*"
            return self.wrap_int(sym, a, b, dt) if dt.kind in "iu" else f"({a} {sym} {b})"
        return self.minmax(op, dt, a, b)

    def minmax(self, op: str, dt: np.dtype, a: str, b: str) -> str:
        cmp = ">" if op == KOp.MAX else "<"
        if dt.kind == "f":  # NaN-propagating, like np.maximum
            # no call: PoCL's isnan is one; `|`, not `||`: no branch, so a select the compiler can vectorise
            return f"((({a}) {cmp} ({b}) | ({a}) != ({a})) ? ({a}) : ({b}))"
        if dt == np.bool_:
            return f"({a} || {b})" if op == KOp.MAX else f"({a} && {b})"
        return f"((({a}) {cmp} ({b})) ? ({a}) : ({b}))"

    def index_or_order(self, i: int, op: str, a: list[str], src: np.dtype) -> str | None:
        """What every target writes alike: index arithmetic (plain operators: no wrapping or floor rules on
        values that cannot overflow or be negative) and max/min; None for anything else."""
        if i in self.index and op in (KOp.ADD, KOp.SUB, KOp.MUL):
            return f"({a[0]} {dict(add='+', sub='-', mul='*')[op]} {a[1]})"
        if op in (KOp.MAX, KOp.MIN):
            return self.minmax(op, src, a[0], a[1])
        if (
            op in (KOp.IDIV, KOp.MOD)
            and i in self.index
            and self.ins[i].srcs[0] in self.nonneg
            and positive_const(self.ins, self.ins[i].srcs[1])
        ):
            return f"({a[0]} {'/' if op == KOp.IDIV else '%'} {a[1]})"
        return None

    def alu(self, i: int, op: str, a: list[str], dt: np.dtype) -> str:
        src = self.ins[self.ins[i].srcs[0]].value_dtype
        t = self.ctype(dt)
        if src == np.bool_ and op in BOOL_OPS:
            return BOOL_OPS[op].format(*a)
        if op in COMPARISONS:
            return f"({a[0]} {COMPARISONS[op]} {a[1]})"
        if op == KOp.WHERE:
            return f"({a[0]} ? {a[1]} : {a[2]})"
        plain = self.index_or_order(i, op, a, src)
        if plain is not None:
            return plain
        if op in (KOp.IDIV, KOp.MOD):
            return f"{c_helpers.arithmetic(self, op, dt)}({a[0]}, {a[1]})"
        if op == KOp.ISNAN or op == KOp.ISINF:
            if src.kind != "f":
                return "false"
            return (
                f"({a[0]} != {a[0]})"
                if op == KOp.ISNAN
                else f"({a[0]} == {self.t.infinity} || {a[0]} == -{self.t.infinity})"
            )
        if dt.kind in "iu":
            if op in (KOp.ADD, KOp.SUB, KOp.MUL):
                return self.wrap_int({"add": "+", "sub": "-", "mul": "*"}[op], a[0], a[1], dt)
            if op == KOp.NEG:
                return self.wrap_int("-", self.literal(0, dt), a[0], dt)
            if op in (KOp.AND, KOp.OR, KOp.XOR):
                return f"(({t})({a[0]} {dict(zip(('and', 'or', 'xor'), '&|^'))[op]} {a[1]}))"
            if op == KOp.INVERT:
                return f"(({t})(~{a[0]}))"
            if op == KOp.ABS:
                return (
                    f"(({t})({a[0]} < 0 ? {self.wrap_int('-', self.literal(0, dt), a[0], dt)} : {a[0]}))"
                    if dt.kind == "i"
                    else a[0]
                )
            if op == KOp.SIGN:
                return f"(({t})(({a[0]} > 0) - ({a[0]} < 0)))"
            if op == KOp.POW:
                fault = f", {NEGATIVE_POWER.code}, tj_error" if dt.kind == "i" else ""
                return f"{c_helpers.arithmetic(self, 'pow', dt)}({a[0]}, {a[1]}{fault})"
            if op == KOp.FMOD:  # C's %, as NumPy's integer fmod; x % -1 overflows for the minimum
                minus_one = f" || ({a[1]}) == -1" if dt.kind == "i" else ""
                return f"(({a[1]}) == 0{minus_one} ? ({t})0 : ({t})({a[0]} % {a[1]}))"
            if op in (KOp.SHL, KOp.SHR):
                return self.shift(op, a, dt)
            raise DtypeError(f"{op} is not defined for {dt.name}")
        # floating point (float16 without half arithmetic is computed in float)
        one = self.literal(1, dt)
        if op == KOp.RECIP:
            return f"({one} / {a[0]})"
        if op == KOp.SIGN:
            return f"({a[0]} > 0 ? {one} : ({a[0]} < 0 ? -{one} : ({a[0]} == 0 ? {self.literal(0, dt)} : {a[0]})))"
        own = self.o.own_math and op in math_f32.FUNCTIONS or op in self.t.own_functions
        if own and dt in (np.float32, np.float16) and op in math_f32.OWN:
            c_helpers.math_helper(self, f"tj_{op}_f32")
            return f"tj_{op}_f32({', '.join(a)})"
        if self.o.own_math and dt == np.float64 and op in math_f32.FUNCTIONS_F64:
            c_helpers.math_helper(self, f"tj_{op}_f64")
            return f"tj_{op}_f64({a[0]})"
        return self.t.float_ops[op].format(*a)

    def shift(self, op: str, a: list[str], dt: np.dtype) -> str:
        """NumPy's shifts: by the width or more (or a negative amount, seen unsigned) 0, or -1 for >> of
        a negative value; << computed unsigned, where shifting into the sign bit is defined."""
        t, u, bits = self.ctype(dt), self.t.unsigned[max(4, dt.itemsize)], 8 * dt.itemsize
        inside = f"(({u}){a[1]} < {bits}u)"
        if op == KOp.SHL:
            return f"({inside} ? ({t})(({u}){a[0]} << {a[1]}) : ({t})0)"
        over = f"({a[0]} < 0 ? ({t})-1 : ({t})0)" if dt.kind == "i" else f"({t})0"
        return f"({inside} ? ({t})({a[0]} >> {a[1]}) : {over})"

    def select(self, cond: str, a: str, b: str) -> str:
        """a where cond, else b."""
        return f"({cond} ? {a} : {b})"

    def is_nan(self, v: str) -> str:
        return f"({v} != {v})"

    def bitcast(self, v: str, dst: np.dtype) -> str:
        """v's 32 bits read as dst: float32 from uint32, or uint32 from float32 (the kernel IR's BITCAST)."""
        if dst == np.float32:
            return self.t.as_float.format(v)
        return f"(({self.ctype(dst)}){self.t.as_int.format(v)})"

    def cast(self, v: str, src: np.dtype, dst: np.dtype) -> str:
        if dst == np.bool_:
            return f"({v} != 0)"
        if dst == np.float16 and not self.o.fp16:
            if src == np.float16:
                return v
            self.helpers["round_half"] = self.t.round_half_helpers()
            if src == np.float64 and self.o.fp64:
                return f"tj_round_half_d((double){v})"
            return f"tj_round_half((float){v})"  # without fp64, a float64 scalar arrives as float
        if src == np.bool_:
            return f"(({self.ctype(dst)})({v} ? 1 : 0))"
        return f"(({self.ctype(dst)}){v})"

    # -- loads and stores --
    def declare_table(self, table) -> None:
        self.helpers.setdefault(table.name, self._table(table))

    def _table(self, table) -> str:
        """A table at program scope. Floats are stored as bit patterns (float16 widened to float32), so
        NaN payloads, infinities and -0.0 survive and no initializer needs a non-constant expression."""
        dt, values = table.dtype, table.values
        if dt.kind == "f":
            bits = values.astype(np.float64 if dt == np.float64 else np.float32)
            bits = bits.view(np.uint64 if dt == np.float64 else np.uint32)
            elem = self.t.unsigned[bits.dtype.itemsize]
            suffix = "U" + self.t.long_suffix if dt == np.float64 else "u"
            items = [f"{hex(int(v))}{suffix}" for v in bits]
        else:
            elem = self.storage(dt)
            items = [str(int(v)) if dt == np.bool_ else self.literal(v, dt) for v in values]
        return f"{self.t.table_qualifier} {elem} {table.name}[{len(items)}] = {{{', '.join(items)}}};"

    def _table_load(self, ptr: str, idx: str, dt: np.dtype) -> str:
        v = f"{ptr}[{idx}]"
        if dt == np.bool_:
            return f"({v} != 0)"
        if dt == np.float64:
            return self.t.as_double.format(v)
        if dt.kind == "f":
            return (
                self.t.as_float.format(v)
                if self.ctype(dt) == "float"
                else f"(({self.ctype(dt)}){self.t.as_float.format(v)})"
            )
        return v

    def _load(self, s, dt: np.dtype) -> str:
        ptr, idx = self.names[s[0]], self.names[s[1]]
        src = self.ins[s[0]]
        if src.op == KOp.TABLE:
            return self._table_load(ptr, idx, dt)
        if src.op == KOp.LOCAL:
            return f"({ptr}[{idx}] != 0)" if dt == np.bool_ else f"{ptr}[{idx}]"
        if src.arg in self.by_value:
            return f"({ptr} != 0)" if dt == np.bool_ else ptr
        return self.read(ptr, idx, dt)

    def read(self, ptr: str, idx: str, dt: np.dtype) -> str:
        """Element idx of buffer ptr (of dt) as a value."""
        if dt == np.bool_:
            return f"({ptr}[{idx}] != 0)"
        if dt == np.float16 and not self.o.fp16:
            return self.t.load_half(ptr, idx)
        return f"{ptr}[{idx}]"

    def _store(self, s, a) -> str:
        ptr, idx, val = a
        if self.ins[s[0]].op == KOp.LOCAL:
            return f"{ptr}[{idx}] = {val};"
        return self.write(ptr, idx, val, self.ins[s[2]].dtype)

    def write(self, ptr: str, idx: str, val: str, dt: np.dtype) -> str:
        """The statement storing value val of dt at element idx of buffer ptr."""
        if dt == np.bool_:
            return f"{ptr}[{idx}] = ({self.storage(dt)}){val};"
        if dt == np.float16 and not self.o.fp16:
            return self.t.store_half(ptr, idx, val) + ";"
        return f"{ptr}[{idx}] = {val};"
