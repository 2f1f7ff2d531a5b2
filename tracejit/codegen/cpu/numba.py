"""Numba renderer: kernel IR -> Python source with a loop over the global index: serial or a `numba.prange`
loop over [0, tj_size), or a serial loop over one chunk [tj_start, tj_stop) of it (the runtime runs the
chunks on threads). The global size is always an argument, so kernels that differ only in it (a new batch
size of an elementwise or row-wise program) are one source and one compile.

Numba has no CPU float16: such buffers are passed as uint16 bit patterns and converted on load and store, with
arithmetic in float32. A kernel that can fault (kernel_ir.Fault: an index out of bounds, an integer to a negative
power) takes one more argument, `tj_error` (int64: code, value), where it records the fault for the runtime to
raise: prange loops cannot raise. Float32/float16 sums accumulate in float64, except rows of local accumulators
(contractions, column sums) over at most 4096 terms, which stay float32 like BLAS, and scans, which add in their own
dtype in order, as NumPy's cumsum does (long ones run in blocks). Float32 exp, tanh, log and erf, and float64 exp
and tanh, call tracejit's vectorisable versions (codegen/cpu/numba_math.py) instead of per-element libm.
"""

from __future__ import annotations

import os
import re
from collections import Counter

import numpy as np

from tracejit.ir.kernel_ir import INDEX, NEGATIVE_POWER, Instr, KOp, KernelIR, faults
from tracejit.ir.ops import ROUNDS_TO_FLOAT16
from tracejit.codegen.cpu import native as numba_native, powers
from tracejit.codegen.cpu.rows import BLOCKED_ROW_MAX, host_vector_bytes, row_loops, wide_accumulator  # noqa: F401 (BLOCKED_ROW_MAX: tests)
from tracejit.codegen.simt.mapping import ORDERED_BELOW, float16_totals, index_values

# op -> NumPy function numba compiles to the scalar libm call (float16 is computed in float32)
_F = {
    "erf": "math.erf",
    "abs": "abs",
    "rint": "np.rint",
    **{
        op: f"np.{op}"
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
            "arcsin",
            "arccos",
            "arctan",
            "sinh",
            "cosh",
            "tanh",
            "arcsinh",
            "arccosh",
            "arctanh",
            "floor",
            "ceil",
            "trunc",
            "isnan",
            "isinf",
            "signbit",
        )
    },
}
_F2 = {op: f"np.{op}" for op in ("arctan2", "hypot", "copysign", "fmod")}
_OPS = {
    "neg": "(-{0})",
    "recip": "({t}(1) / {0})",
    "invert": "(~{0})",
    # NumPy's sign: +0 for -0, NaN for NaN
    "sign": "({t}(1) if {0} > 0 else ({t}(-1) if {0} < 0 else ({t}(0) if {0} == 0 else {0})))",
    "add": "({0} + {1})",
    "sub": "({0} - {1})",
    "mul": "({0} * {1})",
    "div": "({0} / {1})",
    "idiv": "({0} // {1})",
    "mod": "({0} % {1})",
    "pow": "({0} ** {1})",
    "lt": "({0} < {1})",
    "le": "({0} <= {1})",
    "eq": "({0} == {1})",
    "ne": "({0} != {1})",
    "and": "({0} & {1})",
    "or": "({0} | {1})",
    "xor": "({0} ^ {1})",
    "where": "({1} if {0} else {2})",
    **{k: v + "({0})" for k, v in _F.items()},
    **{k: v + "({0}, {1})" for k, v in _F2.items()},
    "ldexp": "ldexp_f64({0}, {1})",
}
# Ops Numba computes in float32 when every operand is float32, as NumPy does: their result needs no
# np.float32(...) around it. Each such call was a call for Numba to type and lower: a float32 layernorm's
# kernel compiled in 214 ms without them, 247 ms with.
_FLOAT_CLOSED = frozenset({KOp.ADD, KOp.SUB, KOp.MUL, KOp.DIV, KOp.NEG})
# Integer ops whose Python/LLVM form differs from NumPy's: x // -1 and x % -1 overflow for the minimum
# (NumPy wraps, giving it back, and 0), sign of an unsigned value, C's truncating fmod, and shifts by
# the width or more (NumPy: 0, or -1 for >> of a negative value)
_SIGNED_OPS = {
    "idiv": "(-{0} if {1} == -1 else {0} // {1})",
    "mod": "(0 if {1} == -1 else {0} % {1})",
    "fmod": "int_fmod({0}, {1})",
}
_UNSIGNED_OPS = {"sign": "(1 if {0} > 0 else 0)", "fmod": "(0 if {1} == 0 else {0} % {1})"}
_SHIFTS = {
    "shl": "(({0} << {1}) if 0 <= {1} < {bits} else 0)",
    "shr": "(({0} >> {1}) if 0 <= {1} < {bits} else (-1 if {0} < 0 else 0))",
}
# NaN-propagating like np.maximum: a NaN in either operand wins.
# `|`, not `or`: both tests are evaluated, so the choice is a select LLVM vectorises, not a branch
_FLOAT_MINMAX = {
    "max": "({0} if ({0} > {1}) | ({0} != {0}) else {1})",
    "min": "({0} if ({0} < {1}) | ({0} != {0}) else {1})",
}
# float32 (and float16, computed in float32) versions that LLVM can vectorise
_F32_MATH = {"exp": "exp_f32", "tanh": "tanh_f32", "log": "log_f32", "erf": "erf_f32", "ldexp": "ldexp_f32"}
_F64_MATH = {"exp": "exp_f64", "tanh": "tanh_f64", "log": "log_f64"}  # float64: Numba's own are libm calls
_INT_MINMAX = {"max": "max({0}, {1})", "min": "min({0}, {1})"}
# int64 data arithmetic that wraps like NumPy (numba's own signed ops let LLVM assume no overflow);
# narrower ints are computed in int64 by numba and narrowed, and index arithmetic keeps numba's ops
_WRAPPING = {
    "add": "wrap_add({0}, {1})",
    "sub": "wrap_sub({0}, {1})",
    "mul": "wrap_mul({0}, {1})",
    "neg": "wrap_sub(0, {0})",
    "idiv": "(wrap_sub(0, {0}) if {1} == -1 else {0} // {1})",
}
_BOOL_OPS = {
    "max": "({0} or {1})",
    "min": "({0} and {1})",
    "invert": "(not {0})",
    "and": "({0} and {1})",
    "or": "({0} or {1})",
    "xor": "({0} != {1})",
    "add": "({0} or {1})",
    "mul": "({0} and {1})",
}


NARROW_LOCAL_MAX = 4096
# Scratch rows up to this many bytes live on the stack (numba_math.stack_empty), well inside any thread's
# stack (8 MB for Python's threads, 2 MB or more for OpenMP's); bigger ones are np.empty.
STACK_SCRATCH_MAX = 64 * 1024
MATH_INLINE_MAX = 4  # more calls than this of one math function: not inlined in Numba's IR


def _ctype(dt: np.dtype) -> str:
    """The NumPy scalar constructor numba computes this dtype in."""
    return "np.float32" if dt == np.float16 else f"np.{dt.name}"


def _literal(value, dt: np.dtype) -> str:
    if dt == np.bool_:
        return "True" if value else "False"
    if dt.kind == "f":
        v = float(value)
        text = "np.nan" if v != v else "np.inf" if v == np.inf else "-np.inf" if v == -np.inf else repr(v)
        return f"{_ctype(dt)}({text})"
    return str(int(value)) if dt == np.int64 else f"{_ctype(dt)}({int(value)})"


LOOPS = ("serial", "prange", "chunks")  # how the global index is looped over (runtime/numba/device.py)


# -- sizes as arguments ----------------------------------------------------------------------------
# The values in a kernel that a new shape changes (ir/sizes.py). The global size is an argument always.


def slot_argument(kernel: KernelIR, slot: tuple[int, int]) -> np.dtype | None:
    """The dtype of the argument a symbolic slot becomes; None for one that is only decided on (a local
    reduction's length: which accumulator width, which the source shows)."""
    i, j = slot
    x = kernel.instrs[i]
    if x.op == KOp.LOCAL and j == 2 or x.op == KOp.GLOBAL:  # the global size is an argument always (tj_size)
        return None
    if x.op == KOp.CONST:
        return np.dtype(np.float32) if x.dtype == np.float16 else x.dtype
    return INDEX


def render(kernel: KernelIR, loop: str = "serial", symbolic: dict[tuple[int, int], str] | None = None) -> str:
    """The Python source of one kernel function named kernel.name; `loop` one of LOOPS. `symbolic`: the
    sizes (ones slot_argument gives a dtype for) that are arguments instead of constants, by slot (the source
    then serves every kernel with its size-free key whose other sizes are equal and make the same choices here:
    accumulator widths, sum blocks, stack or heap scratch all show in the source)."""
    return _Source(kernel, loop, symbolic or {}).run()


# op -> the method of _Source that writes it; every ALU op: render_alu
STATEMENTS: dict[KOp, str] = {
    KOp.PARAM: "render_param",
    KOp.CONST: "render_const",
    KOp.TABLE: "render_table",
    KOp.GLOBAL: "render_global",
    KOp.RANGE: "render_range",
    KOp.ENDRANGE: "render_endrange",
    KOp.ACC: "render_acc",
    KOp.UPDATE: "render_update",
    KOp.ATOMIC: "render_atomic",
    KOp.LOCAL: "render_local",
    KOp.LOAD: "render_load",
    KOp.SORT: "render_sort",
    KOp.STORE: "render_store",
    KOp.BOUND: "render_bound",
    KOp.CAST: "render_cast",
    KOp.BITCAST: "render_bitcast",
}


class _Source:
    """render's work: the instruction walk, each instruction by the method STATEMENTS names for its op."""

    def __init__(self, kernel: KernelIR, loop: str, symbolic: dict[tuple[int, int], str]):
        self.kernel, self.loop, self.symbolic = kernel, loop, symbolic
        self.ins = ins = kernel.instrs
        self.names: list[str] = [""] * len(ins)
        self.vectors512 = host_vector_bytes() == 64  # runtime.numba_math.wide_vectors
        self.acc_wide: dict[int, bool] = {}
        self.index = index_values(ins)
        self.params = [p.name for p in kernel.params] + (["tj_error"] if faults(kernel) else [])
        self.lines: list[str] = []
        self.depth = 1
        self.before = _before_global_loop(ins)
        # adds in order, as NumPy's
        self.scanned = {x.srcs[0] for x in ins if x.op == KOp.UPDATE and x.dtype is not None}
        self.totals16 = float16_totals(ins)
        self.rows = row_loops(ins, symbolic, self.scanned)
        self.ordered_at: dict[int, int] = {}  # a range of rows.ordered -> its first line
        self.blocked = {a for accs in self.rows.blocks.values() for a in accs}
        self.pre: list[str] = []  # loop-invariant values, computed once before the global loop
        self.at_global: int | None = None
        self.i = 0  # the instruction being written
        self.statements = {op: getattr(self, method) for op, method in STATEMENTS.items()}

    def out(self, text: str) -> None:
        if self.i in self.before:
            self.pre.append("    " + text)
        else:
            self.lines.append("    " * self.depth + text)

    def run(self) -> str:
        for i, x in enumerate(self.ins):
            self.i = i
            a = [self.names[j] for j in x.srcs]
            self.names[i] = f"v{i}"
            self.statements.get(x.op, self.render_alu)(i, x, a)
        lines, loop = self.lines, self.loop
        if self.pre and self.at_global is not None:
            lines[self.at_global : self.at_global] = self.pre
        if self.vectors512 and (loop != "prange" or self.at_global is None):
            lines.insert(0, "    wide_vectors()")
        src = "\n".join(_with_bodies(lines))
        lead = ["tj_start", "tj_stop"] if loop == "chunks" else ["tj_size"]  # see the global loop
        sizes = [name for _, name in sorted(self.symbolic.items())]
        header = f"def {self.kernel.name}({', '.join(lead + sizes + self.params)}):"
        return header + "\n" + src + "\n"

    def render_param(self, i: int, x: Instr, a: list[str]) -> None:
        self.names[i] = self.params[x.arg]

    def render_const(self, i: int, x: Instr, a: list[str]) -> None:
        self.names[i] = self.symbolic.get((i, -1)) or _literal(x.arg, x.value_dtype)

    def render_table(self, i: int, x: Instr, a: list[str]) -> None:
        self.names[i] = x.arg.name  # a module-level array (render_module), which numba freezes into the code

    def render_global(self, i: int, x: Instr, a: list[str]) -> None:
        name = self.names[i]
        self.at_global = len(self.lines)
        if self.loop == "chunks":  # one chunk of the range per call, the chunks on threads (runtime/numba/threads.py)
            self.out(f"for {name}_ in range(tj_start, tj_stop):")
            self.out(f"    {name} = nonnegative_index({name}_)")
        else:  # the size is an argument: one compile serves every size whose kernel body is the same
            self.out(f"for {name} in {'numba.prange' if self.loop == 'prange' else 'range'}(tj_size):")
            if self.vectors512 and self.loop == "prange":  # the loop's body is a function of its own (Numba's parfor)
                self.out("    wide_vectors()")
        self.depth += 1

    def render_range(self, i: int, x: Instr, a: list[str]) -> None:
        name, rows = self.names[i], self.rows
        extent = self.symbolic.get((i, 0)) or x.arg[0]
        if i in rows.ordered:
            self.ordered_at[i] = len(self.lines)
        if i in rows.split:  # blocks of the row, each summed in float32
            self.out(f"for {name}_at in range(0, {extent}, {BLOCKED_ROW_MAX}):")
            self.depth += 1
            extent = f"{name}_at, min({name}_at + opaque_extent({BLOCKED_ROW_MAX}), {extent})"
        elif i in rows.opaque and type(extent) is int:
            extent = f"opaque_extent({extent})"
        for acc in rows.blocks.get(i, ()):
            self.out(f"v{acc}_block = np.float32(0.0)")
        self.out(f"for {name} in range({extent}):")
        self.depth += 1

    def render_endrange(self, i: int, x: Instr, a: list[str]) -> None:
        r = x.srcs[0]
        self.depth -= 1
        for acc in self.rows.blocks.get(r, ()):
            self.out(f"v{acc} += np.float64(v{acc}_block)")
        if r in self.rows.split:
            self.depth -= 1
        if r in self.ordered_at:
            at = self.ordered_at[r]
            self.lines[at:] = _in_order_below(self.lines[at:], self.symbolic[(r, 0)], self.depth)

    def render_acc(self, i: int, x: Instr, a: list[str]) -> None:
        name, dt = self.names[i], x.value_dtype
        wide = (
            wide_accumulator(dt, x.arg[0]) and i not in self.scanned and (i in self.rows.long_sums or dt != np.float32)
        )
        self.acc_wide[i] = wide
        self.out(f"{name} = {_literal(x.arg[1], np.dtype('float64') if wide else dt)}")
        self.names[i] = f"{_ctype(dt)}({name})" if wide else name  # read back narrowed after the loop
        if i in self.totals16:
            self.names[i] = f"round_f16({self.names[i]})"  # a float16 total, as NumPy's loop stores it
        if _nan_apart(x, i in self.scanned):
            self.out(f"{name}_nan = False")
            self.names[i] = f"({name} if not {name}_nan else {_ctype(dt)}(np.nan))"

    def render_update(self, i: int, x: Instr, a: list[str]) -> None:  # (acc, value) or (local, index, value)
        s, ins = x.srcs, self.ins
        acc = ins[s[0]]
        red = acc.arg[0] if acc.op == KOp.ACC else acc.arg[1]
        adt = acc.value_dtype
        target = f"v{s[0]}" if acc.op == KOp.ACC else _element(a[0], ins[s[1]], a[1])
        v, a[0] = a[-1], target
        if s[0] in self.blocked:  # float32 lanes over one block of the row, added in float64 per block
            a[0] = f"{a[0]}_block"
        elif self.acc_wide[s[0]]:
            v = f"np.float64({v})"
        if acc.op == KOp.ACC and _nan_apart(acc, s[0] in self.scanned):
            self.out(f"{a[0]} = {red}_step({a[0]}, {v})")
            self.out(f"{a[0]}_nan |= {v} != {v}")
        elif i in self.rows.reorderable:
            self.out(f"{a[0]} = reassoc_{'add' if red == 'sum' else 'mul'}({a[0]}, {v})")
        elif adt == np.float16 and s[0] in self.scanned:  # each running total a float16, as NumPy's accumulate
            self.out(f"{a[0]} = round_f16({_combine(red, adt, a[0], v)})")
        else:
            self.out(f"{a[0]} = {_combine(red, adt, a[0], v)}")
        self.names[i] = self.names[s[0]]  # a scan's running value: the accumulator as read back

    def render_atomic(self, i: int, x: Instr, a: list[str]) -> None:
        # the global loop is serial (render_module's caller): updates in NumPy's order
        s, ins = x.srcs, self.ins
        ref, bdt = _element(a[0], ins[s[1]], a[1]), ins[s[0]].value_dtype
        if bdt == np.float16:
            self.out(f"{ref} = f32_to_f16({_combine(x.arg, bdt, f'f16_to_f32({ref})', a[2])})")
        else:
            self.out(f"{ref} = {_combine(x.arg, bdt, ref, a[2])}")

    def render_local(self, i: int, x: Instr, a: list[str]) -> None:
        name, dt = self.names[i], x.value_dtype
        # rows of accumulators for contractions: float32 up to NARROW_LOCAL_MAX terms, as BLAS does
        wide = wide_accumulator(dt, x.arg[1]) and x.arg[2] > NARROW_LOCAL_MAX
        self.acc_wide[i] = wide
        ctype = "np.float64" if wide else _ctype(dt)
        itemsize = np.dtype(ctype[3:]).itemsize
        size = self.symbolic.get((i, 0))
        if x.arg[0] * itemsize <= STACK_SCRATCH_MAX:  # a symbolic size: room for the largest on the stack
            scratch = f"{name} = stack_empty({x.arg[0] if size is None else STACK_SCRATCH_MAX // itemsize}, {ctype})"
        else:
            scratch = f"{name} = empty({size or x.arg[0]}, {ctype})"
        if self.loop != "prange" and self.at_global is not None:  # written before read: one per call, not per row
            self.pre.append("    " + scratch)
        else:  # prange's iterations run on several threads at once: one each
            self.out(scratch)

    def render_load(self, i: int, x: Instr, a: list[str]) -> None:
        s, ins, dt = x.srcs, self.ins, x.value_dtype
        val = _element(a[0], ins[s[1]], a[1])
        if ins[s[0]].op == KOp.LOCAL:
            val = f"{_ctype(dt)}({val})" if self.acc_wide[s[0]] else val
            if dt == np.float16 and ins[s[0]].arg[1] in ("sum", "prod"):  # a float16 total (contractions)
                val = f"round_f16({val})"
        elif dt == np.float16:
            val = f"f16_to_f32({val})"
        self.out(f"{self.names[i]} = {val}")

    def render_sort(self, i: int, x: Instr, a: list[str]) -> None:
        n = self.symbolic.get((i, -1)) or x.arg
        positions = a[1] if len(x.srcs) == 2 else None
        dt = self.ins[x.srcs[0]].value_dtype
        if (
            dt is not None and dt.kind in "iub" and dt.itemsize == 1
        ):  # (a counting sort: one pass to count, one to place)
            self.out(f"sort_row_bytes({a[0]}, {positions}, {n}, {0x80 if dt.kind == 'i' else 0})")
            return
        self.out(f"sort_row({a[0]}, {positions}, {n})")

    def render_store(self, i: int, x: Instr, a: list[str]) -> None:
        s, ins = x.srcs, self.ins
        val = a[2]
        if ins[s[0]].op == KOp.LOCAL:
            val = f"np.float64({val})" if self.acc_wide[s[0]] else val
        elif ins[s[2]].dtype == np.float16:
            val = f"f32_to_f16({val})"
        self.out(f"{_element(a[0], ins[s[1]], a[1])} = {val}")

    def render_bound(self, i: int, x: Instr, a: list[str]) -> None:
        size = self.symbolic.get((i, 0)) or x.arg[0]
        self.out(f"{self.names[i]} = bound_index({a[0]}, {size}, {x.arg[1].code}, tj_error)")

    def render_cast(self, i: int, x: Instr, a: list[str]) -> None:
        self.out(f"{self.names[i]} = {_cast(a[0], self.ins[x.srcs[0]].value_dtype, x.value_dtype)}")

    def render_bitcast(self, i: int, x: Instr, a: list[str]) -> None:
        self.out(f"{self.names[i]} = {_bitcast(a[0], x.value_dtype)}")

    def render_alu(self, i: int, x: Instr, a: list[str]) -> None:
        op, s, dt, ins, name = x.op, x.srcs, x.value_dtype, self.ins, self.names[i]
        power = (
            powers.constant_power(ins[s[1]].arg, ins[s[1]].dtype)
            if op == KOp.POW and ins[s[1]].op == KOp.CONST
            else None
        )
        if power is not None and dt != np.float16:
            for line in powers.python_lines(name, a[0], power, dt):
                self.out(line)
        elif op == KOp.POW and dt.kind == "i":  # NumPy raises for a negative exponent
            exponent = f"nonnegative_exponent({a[1]}, {NEGATIVE_POWER.code}, tj_error)"
            self.out(f"{name} = {_alu(op, [a[0], exponent], dt, ins[s[0]].value_dtype)}")
        elif dt == np.float16 and op in ROUNDS_TO_FLOAT16:  # computed in float32, rounded like NumPy
            self.out(f"{name} = {_cast(_alu(op, a, dt, ins[s[0]].value_dtype), np.dtype('float32'), dt)}")
        elif dt == np.int64 and op in _WRAPPING and i not in self.index:
            self.out(f"{name} = {_WRAPPING[op].format(*a)}")
        elif dt == np.float32 and op in _FLOAT_CLOSED and all(ins[j].dtype == np.float32 for j in s):
            self.out(f"{name} = {_OPS[op].format(*a)}")  # float32 in, float32 out: no np.float32(...) around it
        else:
            self.out(f"{name} = {_alu(op, a, dt, ins[s[0]].value_dtype)}")


_REASSOC_STEP = re.compile(r"^(\s*)(\w+) = reassoc_(add|mul)\(\2, (.*)\)$")


def _in_order_below(loop: list[str], extent: str, depth: int) -> list[str]:
    """A loop's lines as `if extent < ORDERED_BELOW:` the loop with every reassociable step a plain one (NumPy
    adds fewer than 8 elements in order), `else:` the loop as written (codegen.numba_rows' `ordered`)."""

    def plain(line: str) -> str:
        m = _REASSOC_STEP.match(line)
        return line if m is None else f"{m[1]}{m[2]} = ({m[2]} {'+' if m[3] == 'add' else '*'} {m[4]})"

    pad = "    " * depth
    return [
        f"{pad}if {extent} < {ORDERED_BELOW}:",
        *("    " + plain(line) for line in loop),
        f"{pad}else:",
        *("    " + line for line in loop),
    ]


def _element(buffer: str, index: Instr, text: str) -> str:
    """`buffer[index]` with the index unsigned. Every index a kernel computes is in bounds, but a signed
    one makes Numba test it for a negative value to wrap, per element: the test stops LLVM from proving a
    row's accesses contiguous, and a row loop inside numba.prange (whose variable LLVM knows nothing
    about) became gathers and scatters, 6-10x slower than contiguous loads (measured at 4096x1024)."""
    if index.op == KOp.CONST:
        return f"{buffer}[{text}]"
    return f"{buffer}[numba.uint64({text})]"


_STAYS = frozenset(
    {
        KOp.PARAM,
        KOp.CONST,
        KOp.TABLE,
        KOp.GLOBAL,
        KOp.RANGE,
        KOp.ENDRANGE,
        KOp.ACC,
        KOp.UPDATE,
        KOp.LOCAL,
        KOp.STORE,
        KOp.SORT,
    }
)


def _before_global_loop(ins) -> set[int]:
    """Instructions in the global loop, outside any inner loop, that depend on no loop variable or
    accumulator: they are computed once before the loop. Besides saving the work, this keeps LLVM
    from stalling: a 65-iteration loop repeating a float16 round trip of one broadcast value took it
    over 100 s to optimise (issue 15), and under a second with the value computed before the loop.
    Only where the loop runs at least once, so nothing is computed that the kernel would not."""
    glob = next((i for i, x in enumerate(ins) if x.op == KOp.GLOBAL), None)
    if glob is None or not isinstance(ins[glob].arg, int) or ins[glob].arg < 1:
        return set()
    free = {i for i, x in enumerate(ins) if x.op in (KOp.PARAM, KOp.CONST, KOp.TABLE)}
    before: set[int] = set()
    inner = 0
    for i in range(glob + 1, len(ins)):
        x = ins[i]
        if x.op == KOp.RANGE:
            inner += 1
        elif x.op == KOp.ENDRANGE:
            inner -= 1
        elif (
            inner == 0
            and x.op not in _STAYS
            and not (x.op == KOp.LOAD and ins[x.srcs[0]].op == KOp.LOCAL)
            and all(s in free or s in before for s in x.srcs)
        ):
            before.add(i)
    return before


def _nan_apart(acc: Instr, scanned: bool) -> bool:
    """A float max/min reduction keeps its NaN in a flag of its own: the accumulator takes the plain
    comparison's select, which LLVM vectorises, where a NaN test in the same select kept the loop scalar
    (2.2 vs 6.0 ms for the row maxima of 4096x1024 float32 on one core). A scan's every prefix is read,
    so it keeps the NaN in the value."""
    return acc.arg[0] in ("max", "min") and acc.value_dtype.kind == "f" and not scanned


def _combine(red: str, adt: np.dtype, cur: str, v: str) -> str:
    """An accumulator's new value: cur combined with v by sum/prod/max/min, as NumPy computes it in adt
    (a NaN propagates through max and min, integers wrap)."""
    if red in ("sum", "prod"):
        sym = "+" if red == "sum" else "*"
        expr = (
            _BOOL_OPS["add" if red == "sum" else "mul"].format(cur, v)
            if adt == np.bool_
            else _WRAPPING["add" if red == "sum" else "mul"].format(cur, v)
            if adt == np.int64
            else f"{cur} {sym} {v}"
        )
    else:
        table = _BOOL_OPS if adt == np.bool_ else _FLOAT_MINMAX if adt.kind == "f" else _INT_MINMAX
        expr = table[red].format(v, cur)
    if adt.kind in "iu" and adt.itemsize < 8:
        expr = f"{_ctype(adt)}({expr})"
    return expr


def _alu(op: str, a: list[str], dt: np.dtype, src_dt: np.dtype) -> str:
    if src_dt == np.bool_ and op in _BOOL_OPS:
        return _BOOL_OPS[op].format(*a)
    if op in (KOp.MAX, KOp.MIN):
        expr = (_FLOAT_MINMAX if src_dt.kind == "f" else _INT_MINMAX)[op].format(*a)
    elif op in _F32_MATH and dt in (np.float32, np.float16):
        return f"{_F32_MATH[op]}({', '.join(a)})"
    elif op in _F64_MATH and dt == np.float64:
        return f"{_F64_MATH[op]}({', '.join(a)})"
    elif op == KOp.POW and dt.kind in "iu":
        expr = f"int_power({a[0]}, {a[1]})"
    elif op in _SHIFTS:
        expr = _SHIFTS[op].format(*a, bits=8 * dt.itemsize)
    elif op in _SIGNED_OPS and dt.kind == "i":
        expr = _SIGNED_OPS[op].format(*a)
    elif op in _UNSIGNED_OPS and src_dt.kind == "u":
        expr = _UNSIGNED_OPS[op].format(*a)
    else:
        expr = _OPS[op].format(*a, t=_ctype(dt))
    if dt == np.bool_ or dt in (np.float64, np.int64):
        return expr
    return f"{_ctype(dt)}({expr})"


def _bitcast(v: str, dst: np.dtype) -> str:
    """v's 32 bits read as dst: float32 from uint32, or uint32 from float32 (numba_math's intrinsics)."""
    return f"bits_f32(np.int32({v}))" if dst == np.float32 else f"np.uint32(f32_bits({v}))"


def _cast(v: str, src: np.dtype, dst: np.dtype) -> str:
    if dst == np.bool_:
        return f"({v} != 0)"
    if dst == np.float16:
        return f"round_f16({v})"  # round to half precision, keep computing in float32
    if src == np.bool_:
        return f"{_ctype(dst)}(1 if {v} else 0)"
    return f"{_ctype(dst)}({v})"


def _table(t) -> str:
    """A constant table as a module global, from its exact bytes (float16 as bit patterns, like buffers)."""
    dt = np.dtype("<u2") if t.dtype == np.float16 else t.dtype.newbyteorder("<")
    return f"{t.name} = np.frombuffer(bytes.fromhex('{t.data.hex()}'), np.dtype('{dt.str}'))"


def native_mode() -> str:
    """TRACEJIT_NUMBA_NATIVE: "1" (the default) renders the kernels the native renderer takes as LLVM IR that
    LLVM compiles directly (runtime/numba/llvm_jit.py); "numba" renders them so but has Numba compile them
    (codegen/cpu/native_call.py); "0" renders every kernel as Python for Numba."""
    mode = os.environ.get("TRACEJIT_NUMBA_NATIVE", "1").strip().lower()
    return mode if mode in ("0", "numba") else "1"


def native_enabled() -> bool:
    """Whether kernels the native renderer takes are rendered as LLVM IR (TRACEJIT_NUMBA_NATIVE=0: never)."""
    return native_mode() != "0"


def native_ir(source: str) -> str | None:
    """The LLVM IR of a natively rendered kernel's module (_native_module), else None."""
    if _NATIVE_IMPORT not in source:
        return None
    return source.split("r'''", 1)[1].split("'''", 1)[0]


def _with_bodies(lines: list[str]) -> list[str]:
    """The lines with `pass` in each block left empty (a loop whose every statement is loop-invariant, moved before
    it: a kernel of one element)."""
    out: list[str] = []
    for k, line in enumerate(lines):
        out.append(line)
        if line.rstrip().endswith(":"):
            depth = len(line) - len(line.lstrip())
            after = lines[k + 1] if k + 1 < len(lines) else ""
            if not after.strip() or len(after) - len(after.lstrip()) <= depth:
                out.append(" " * (depth + 4) + "pass")
    return out


def render_module(kernels: list[tuple[KernelIR, str]], symbolic: dict | None = None, parallel: bool = False) -> str:
    """A whole importable module: imports, float16 helpers when needed, constant tables, then each kernel
    (`symbolic`: see render; for a module of one kernel). A module of one kernel that codegen/cpu/native.py
    renders is that kernel's LLVM IR and a Python function of one line that calls it."""
    if len(kernels) == 1 and native_enabled() and numba_native.unsupported(*kernels[0], symbolic, parallel) is None:
        return _native_module(*kernels[0], symbolic or {})
    body = "\n\n".join(render(k, loop, symbolic) for k, loop in kernels)
    tables = {x.arg.name: _table(x.arg) for k, _ in kernels for x in k.instrs if x.op == KOp.TABLE}
    parts = [
        '"""Generated by tracejit from kernel IR; do not edit."""',
        "import math",
        "",
        "import numba",
        "import numpy as np",
        "",
    ]
    own = (*_F32_MATH.values(), *_F64_MATH.values(), "round_f16")
    called = Counter(re.findall(r"\b(\w+)\(", body))  # whole names: exp_f64( is also the end of ldexp_f64(
    for f in own:
        if called[f] > MATH_INLINE_MAX:  # unrolled copies: see numba_math's *_called
            body = re.sub(rf"\b{f}\(", f + "_called(", body)
            called[f + "_called"] += called.pop(f)
    helpers = (
        "f16_to_f32",
        "f32_to_f16",
        "f32_bits",
        "bits_f32",
        "int_power",
        "nonnegative_exponent",
        "bound_index",
        "int_fmod",
        "ldexp_f64",
        "sort_row",
        "sort_row_bytes",
        "wrap_add",
        "wrap_sub",
        "wrap_mul",
        "reassoc_add",
        "reassoc_mul",
        "max_step",
        "min_step",
        "nonnegative_index",
        "stack_empty",
        "opaque_extent",
        "wide_vectors",
    )
    used = [f for f in (*own, *(f + "_called" for f in own), *helpers) if called.get(f)]
    if used:
        parts += [f"from tracejit.codegen.cpu.numba_math import {', '.join(used)}", ""]
    if "empty(" in body:
        # NumPy's own function, not the np.empty name, which is a wrapper while another thread traces a kernel
        # (numpy/allocation.py) and would not type in Numba
        parts += ["from numpy._core.multiarray import empty", ""]
    if tables:
        parts += [*tables.values(), ""]
    parts.append(body)
    return "\n".join(parts)


_NATIVE_IMPORT = "from tracejit.codegen.cpu.native_call import native"


def _native_module(kernel: KernelIR, loop: str, symbolic: dict) -> str:
    """The module of a natively rendered kernel: its IR, and `kernel.name(...)` with render's arguments
    calling it (serial: over the whole global range; chunks: over [tj_start, tj_stop))."""
    ir_text = numba_native.render(kernel, loop, symbolic)
    sizes = [name for _, name in sorted(symbolic.items())]
    params = [p.name for p in kernel.params] + (["tj_error"] if faults(kernel) else [])
    lead, start = (["tj_start", "tj_stop"], "tj_start, tj_stop") if loop == "chunks" else (["tj_size"], "0, tj_size")
    return "\n".join(
        [
            '"""Generated by tracejit from kernel IR; do not edit. The kernel is the LLVM IR below',
            "(codegen/cpu/native.py): LLVM compiles it with an entry point taking the function's arguments",
            "(runtime/numba/llvm_jit.py), or, with TRACEJIT_NUMBA_NATIVE=numba, "
            'Numba compiles the function after it."""',
            _NATIVE_IMPORT,
            "",
            f"tj_native = native(r'''{ir_text}''', {2 + len(sizes) + len(params)})",
            "",
            "",
            f"def {kernel.name}({', '.join(lead + sizes + params)}):",
            *(
                ["    # over parts of [0, tj_size) at once on OpenMP's threads (runtime/numba/llvm_jit.py)"]
                if loop == "prange"
                else []
            ),
            f"    tj_native({', '.join([start, *sizes, *params])})",
            "",
        ]
    )
