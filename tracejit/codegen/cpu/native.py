"""Native renderer for the numba device: kernel IR -> LLVM IR, for the kernels whose every instruction it
knows (`unsupported` says why another is not: those stay with codegen/cpu/numba.py's Python source).

Numba still compiles the kernel, but only as a one-line Python function whose body is a call of this IR
(codegen/cpu/native_call.py links it into the function's code library): the dispatcher, its disk cache, the
launch and the threads stay as they are, and Numba's bytecode analysis, type inference and lowering of
the whole kernel body, half or more of a first call's compile, are skipped (softmax 4096x1024: ~400 ->
~200 ms). The IR computes what codegen/cpu/numba.py's source computes, operation for operation: the same
row-loop choices (codegen/cpu/rows.py), the same float32 math (codegen/cpu/llvm_math.py, as numba_math's
intrinsics), the same scalar operations (codegen/cpu/llvm_ops.py).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
from llvmlite import ir

from tracejit.ir.kernel_ir import ALU, NEGATIVE_POWER, Instr, KOp, KernelIR, faults, has_atomics
from tracejit.ir.index_ranges import divides_in_32_bits, index_ranges
from tracejit.ir.masked_ranges import masked_ranges
from tracejit.codegen.cpu import llvm_math, llvm_sort, powers
from tracejit.ir import split_loops
from tracejit.codegen.cpu.llvm_ops import (
    BOOL_OPS,
    F32,
    F64,
    FLOAT_OPS,
    FLOAT_TYPES,
    I1,
    I8,
    I64,
    INDEX_OPS,
    INT_OPS,
    LIBM,
    MATH,
    STRICT,
    bool_op,
    cast,
    combine,
    computed,
    constant,
    f16_function,
    float_op,
    index_op,
    int_op,
    int_power_function,
    memory_type,
    value_type,
)
from tracejit.codegen.cpu.llvm_values import defined
from tracejit.codegen.cpu.rows import BLOCKED_ROW_MAX, host_vector_bytes, row_loops, wide_accumulator
from tracejit.ir.ops import ROUNDS_TO_FLOAT16
from tracejit.codegen.simt.mapping import ORDERED_BELOW, float16_totals, index_values

FUNCTION = "tj_native"  # the IR function's name; codegen/cpu/native_call.py renames it per compile
# op -> the method of _Emitter that writes it; every ALU op: render_alu
STATEMENTS: dict[KOp, str] = {
    KOp.PARAM: "render_param",
    KOp.CONST: "render_const",
    KOp.GLOBAL: "render_global",
    KOp.RANGE: "render_range",
    KOp.ENDRANGE: "render_endrange",
    KOp.ACC: "render_acc",
    KOp.UPDATE: "render_update",
    KOp.LOCAL: "render_local",
    KOp.LOAD: "render_load",
    KOp.STORE: "render_store",
    KOp.CAST: "render_cast",
    KOp.BITCAST: "render_bitcast",
    KOp.TABLE: "render_table",
    KOp.BOUND: "render_bound",
    KOp.SORT: "render_sort",
}


def _supported_dtype(dt) -> bool:
    return dt is None or dt.kind in "biu" or dt in FLOAT_TYPES or dt == np.float16


def unsupported(kernel: KernelIR, loop: str, symbolic: dict | None = None, parallel: bool = False) -> str | None:
    """Why this kernel is rendered as Python for Numba instead (None: render() takes it). `parallel`: whether
    a kernel looped in parallel over its global index (prange) can be IR, which the runtime says: LLVM
    compiles it directly and its entry point runs it on OpenMP's threads (runtime/numba/llvm_jit.py)."""

    symbolic = symbolic or {}
    ins = kernel.instrs
    # (a prange loop calling the IR per index was no faster to compile and 30% slower to run)
    if loop == "prange" and not parallel:
        return "its global loop is Numba's prange"
    if has_atomics(kernel):
        return "it combines updates into memory"
    if any(not _supported_dtype(p.dtype) for p in kernel.params):
        return "a parameter's dtype"
    index = index_values(ins)
    for i, x in enumerate(ins):
        op = x.op
        if not _supported_dtype(x.dtype):
            return f"%{i} is {x.dtype}"
        if (
            op in (KOp.UPDATE, KOp.STORE)
            and ins[x.srcs[-1]].dtype != ins[x.srcs[0]].dtype
            or op == KOp.LOAD
            and x.dtype != ins[x.srcs[0]].dtype
        ):
            return f"%{i} converts between its value's and its memory's dtypes"
        if op in STATEMENTS:  # a structural instruction it writes
            continue
        if op not in ALU:
            return f"op {op}"
        if op not in _op_table(ins, i, index):
            return f"op {op} on {ins[x.srcs[-1]].dtype if x.srcs else x.dtype}"
        operands = [ins[s].dtype for s in x.srcs[1:]] if op == KOp.WHERE else [ins[s].dtype for s in x.srcs]
        if len(set(operands)) > 1:
            return f"%{i} mixes operand dtypes"
    return _escapes(ins)


def _op_table(ins, i: int, index: set[int]) -> frozenset[str]:
    x = ins[i]
    src = computed(ins[x.srcs[1] if x.op == KOp.WHERE else x.srcs[0]].dtype)
    if i in index:
        return INDEX_OPS
    if src == np.bool_:
        return BOOL_OPS
    if src.kind == "f":
        return FLOAT_OPS | {op for (dt, op) in (*MATH, *LIBM) if dt == src}
    return INT_OPS


def _escapes(ins) -> str | None:
    """A value computed inside a loop and read after it (Python keeps the last iteration's; an SSA value
    would not dominate the read): such kernels stay with Numba. Accumulators and scratch rows are memory."""
    scope_of: dict[int, tuple[int, ...]] = {}
    open_loops: list[int] = []
    for i, x in enumerate(ins):
        if x.op == KOp.ENDRANGE:
            open_loops.pop()
            continue
        for s in x.srcs:
            if ins[s].op in (KOp.ACC, KOp.LOCAL, KOp.PARAM, KOp.CONST, KOp.UPDATE, KOp.TABLE):
                continue
            scope = scope_of.get(s, ())
            if tuple(open_loops[: len(scope)]) != scope:
                return f"%{s} is read outside its loop"
        scope_of[i] = tuple(open_loops)
        if x.op in (KOp.GLOBAL, KOp.RANGE):
            open_loops.append(i)
            scope_of[i] = tuple(open_loops)
    return None


def signature(kernel: KernelIR, symbolic: dict | None = None) -> list[ir.Type]:
    """The IR function's parameters: [start, stop) of the global index, the size arguments (sorted by
    slot, as codegen.numba.render names them), then a pointer to each buffer's first element, and to the
    error record (int64: code, value) where the kernel can fault."""
    from tracejit.codegen.cpu.numba import slot_argument

    sizes = []
    for slot in sorted(symbolic or {}):
        dt = slot_argument(kernel, slot)
        assert dt is not None, slot  # a size is symbolic only where it can be an argument (SymbolicSizes)
        sizes.append(value_type(dt))
    record = [ir.PointerType(I64)] if faults(kernel) else []  # the error record (codegen.numba's tj_error)
    return [I64, I64, *sizes, *(ir.PointerType(memory_type(p.dtype)) for p in kernel.params), *record]


def render(kernel: KernelIR, loop: str, symbolic: dict | None = None) -> str:
    """The LLVM IR module of one kernel (unsupported() must be None): `void @tj_native(...)` (signature())."""
    module = ir.Module(name="tracejit")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), signature(kernel, symbolic)), FUNCTION)
    # called, not inlined: its external definition stays (the call resolves to it when Numba links the
    # modules), and an inlined copy would be optimised and turned into machine code a second time
    # (layernorm 4096x1024's LLVM time 128 -> ~75 ms; the call is once per chunk of rows)
    fn.attributes.add("noinline")
    fn.attributes.add("nounwind")
    if host_vector_bytes() == 64:  # runtime.numba_math.wide_vectors
        set.add(fn.attributes, '"prefer-vector-width"="512"')
    _Emitter(kernel, fn, symbolic or {}).run()
    return str(module)


class _Emitter:
    def __init__(self, kernel: KernelIR, fn: ir.Function, symbolic: dict):
        from tracejit.codegen.cpu.numba import _before_global_loop

        self.kernel, self.fn, self.ins = kernel, fn, kernel.instrs
        entry = fn.append_basic_block("entry")
        self.alloca = ir.IRBuilder(entry)
        self.b = ir.IRBuilder(fn.append_basic_block("start"))
        self.start, self.stop = fn.args[:2]
        slots = sorted(symbolic)
        self.sizes = dict(zip(slots, fn.args[2 : 2 + len(slots)]))
        self.buffers = fn.args[2 + len(slots) : 2 + len(slots) + len(kernel.params)]
        self.record = fn.args[-1] if faults(kernel) else None
        self.index = index_values(self.ins)
        self.scanned = {x.srcs[0] for x in self.ins if x.op == KOp.UPDATE and x.dtype is not None}
        self.totals16 = float16_totals(self.ins)  # float16 sums and products, rounded where read
        self.rows = row_loops(self.ins, symbolic, self.scanned, ordered_always=True)
        self.plain = False  # inside the in-order copy of a loop (rows.ordered): no step reassociates
        self.blocked = {a for accs in self.rows.blocks.values() for a in accs}
        self.before = _before_global_loop(self.ins)
        self.masked = masked_ranges(self.ins, symbolic)  # reduce loops whose steps outside bounds add +0
        self.ranges = index_ranges(self.ins, symbolic)  # bounds of index arithmetic
        self.values: dict[int, ir.Value] = {}
        self.slots: dict[int, ir.Value] = {}  # acc -> its memory; local -> its row
        self.heap: list[ir.Value] = []  # the rows malloc'd (render_local), freed at the end
        self.wide: dict[int, bool] = {}
        self.nan: dict[int, ir.Value] = {}  # acc -> its NaN flag (_nan_apart)
        self.block: dict[int, ir.Value] = {}  # acc -> its float32 block accumulator
        self.loops: dict[int, list] = {}  # range -> the loops it opened
        from tracejit.codegen.cpu.numba import MATH_INLINE_MAX

        calls = Counter(MATH.get((computed(self.ins[x.srcs[0]].value_dtype), x.op)) for x in self.ins if x.srcs)
        self.inline = {name: calls[name] <= MATH_INLINE_MAX for name in MATH.values()}
        self.statements = {op: getattr(self, method) for op, method in STATEMENTS.items()}
        self.symbolic_constants = frozenset(i for i, j in symbolic if j == -1)
        self.part: tuple = (None, None)  # the part of the global range being written: its bounds (ir values)
        self.replaced: dict[int, int | bool] = {}  # in it: instructions that are another's value, or constants

    # -- structure --
    def run(self) -> None:
        # (values anywhere: what is hoisted before the global loop reads them, a constant table's loads too; the
        # same set as codegen.numba._before_global_loop's `free`)
        free = {i for i, x in enumerate(self.ins) if x.op in (KOp.PARAM, KOp.CONST, KOp.TABLE)}
        for i in free:
            self.instr(i, self.ins[i])
        plan = self.kernel.split_global and split_loops.global_plan(self.kernel, self.symbolic_constants)
        if not plan:
            self.span(0, len(self.ins), free)
            self.close_global()
        else:  # the global index's loop as three, its clamps and tests gone in the middle one (split_loops)
            inside, bounds = plan
            lo, hi = self.cut("lo", bounds), self.cut("hi", bounds)
            if lo is not None and hi is not None:  # (where the sizes make hi < lo: no middle part)
                hi = self.b.select(self.b.icmp_signed("<", hi, lo), lo, hi)
            g = next(i for i, x in enumerate(self.ins) if x.op == KOp.GLOBAL)
            self.span(0, g, free)
            for first, last, replaced in ((None, lo, {}), (lo, hi, inside), (hi, None, {})):
                if (first, last) == (None, None):  # (an empty part: no bound cuts its side)
                    continue
                self.part = (first, last)
                self.replaced = replaced
                self.span(g, len(self.ins), free)
                self.close_global()
            self.replaced = {}
        for row in self.heap:  # (the rows render_local malloc'd)
            self.b.call(llvm_sort.declared(self.fn.module, "free"), [self.b.bitcast(row, ir.PointerType(I8))])
        self.b.ret_void()
        self.alloca.branch(self.fn.basic_blocks[1])

    def cut(self, side: str, bounds: list) -> ir.Value | None:
        """Where the middle part of the global range starts ("lo": the largest of its bounds) or stops ("hi":
        the smallest), from the constants (a size argument's value where it is one) and what is added to them;
        None where no bound cuts that side."""
        b, found = self.b, None
        for _, c, d in (x for x in bounds if x[0] == side):
            v = self.values[c]
            if v.type != I64:
                v = b.sext(v, I64) if v.type.width < 64 else b.trunc(v, I64)
            v = b.add(v, ir.Constant(I64, d))
            if found is not None:
                v = b.select(b.icmp_signed(">" if side == "lo" else "<", v, found), v, found)
            found = v
        return found

    def close_global(self) -> None:
        for state in self.loops.pop(next(iter(self.loops)), ()) if self.loops else ():  # the global loop's end
            self.close_loop(state)

    def span(self, start: int, stop: int, skip: set[int]) -> None:
        """Instructions start..stop-1; a loop of rows.ordered twice: in order where its extent is below 8,
        as written otherwise (codegen.numba's _in_order_below)."""
        ends = {x.srcs[0]: j for j, x in enumerate(self.ins) if x.op == KOp.ENDRANGE}
        i = start
        while i < stop:
            x = self.ins[i]
            if x.op == KOp.RANGE and i in self.rows.ordered and i != start:  # (start: this is its copy)
                b = self.b
                short, long, joined = (self.fn.append_basic_block(n) for n in ("short", "long", "joined"))
                b.cbranch(b.icmp_signed("<", self.extent(i), ir.Constant(I64, ORDERED_BELOW)), short, long)
                for block, plain in ((short, True), (long, False)):
                    b.position_at_end(block)
                    self.plain = plain
                    self.span(i, ends[i] + 1, skip)
                    b.branch(joined)
                self.plain = False
                b.position_at_end(joined)
                i = ends[i] + 1
                continue
            if i in self.replaced:  # (a clamp that clamps nothing here: its source; a test with one answer here)
                what = self.replaced[i]
                self.values[i] = constant(what, np.dtype(np.bool_)) if isinstance(what, bool) else self.values[what]
            elif i not in self.before and i not in skip:
                self.instr(i, x)
            i += 1

    def slot(self, ty: ir.Type, count: int = 1, align: int | None = None) -> ir.Value:
        out = self.alloca.alloca(ty, size=None if count == 1 else ir.Constant(I64, count))
        if align:
            out.align = align
        return out

    def open_loop(self, start, stop, step: int = 1):
        """A counted loop; returns (its variable, the state close_loop takes: its closing function)."""
        var, _, close = llvm_sort.counted_loop(self.b, start, stop, ir.Constant(I64, step), flags=("nsw",))
        return var, close

    def close_loop(self, state) -> None:
        state()

    def opaque(self, n) -> ir.Value:
        """n, hidden from LLVM (runtime.numba_math.opaque_extent)."""
        fnty = ir.FunctionType(I64, [I64])
        return self.b.asm(fnty, "", "=r,0", [n], False, "opaque_extent")

    def value(self, j: int) -> ir.Value:
        """Instruction j's value where it is read: an accumulator's current value is loaded there."""
        x = self.ins[j]
        if x.op == KOp.UPDATE:  # a scan's running value: its accumulator after the update
            return self.value(x.srcs[0])
        if x.op != KOp.ACC:
            return self.values[j]
        b, dt = self.b, x.value_dtype
        v = b.load(self.slots[j])
        if self.wide[j]:
            v = b.fptrunc(v, value_type(dt))
        if j in self.totals16:  # a float16 total, as NumPy's loop stores it
            v = self.round16(v)
        if j in self.nan:
            v = b.select(b.load(self.nan[j]), ir.Constant(value_type(dt), float("nan")), v)
        return v

    def extent(self, i: int):
        return self.sizes.get((i, 0)) or ir.Constant(I64, self.ins[i].arg[0])

    # -- instructions --
    def instr(self, i: int, x: Instr) -> None:
        """Instruction i, by the method STATEMENTS names for its op (render_alu for every ALU op)."""
        self.statements.get(x.op, self.render_alu)(i, x)

    def render_param(self, i: int, x: Instr) -> None:
        self.values[i] = self.buffers[x.arg]

    def render_const(self, i: int, x: Instr) -> None:
        self.values[i] = self.sizes.get((i, -1)) or constant(x.arg, x.value_dtype)

    def render_global(self, i: int, x: Instr) -> None:
        b = self.b
        first, last = self.part
        if first is None:  # loop-invariant values, once before the loop (codegen.numba)
            for j in sorted(self.before):
                self.instr(j, self.ins[j])
        start, stop = self.start, self.stop  # (a part of the range: the part of [start, stop) inside it)
        if first is not None:
            start = b.select(b.icmp_signed("<", start, first), first, start)
        if last is not None:
            stop = b.select(b.icmp_signed("<", last, stop), last, stop)
        var, state = self.open_loop(start, stop)
        assume = self.fn.module.declare_intrinsic("llvm.assume", fnty=ir.FunctionType(ir.VoidType(), [I1]))
        b.call(assume, [b.icmp_signed(">=", var, ir.Constant(I64, 0))])  # numba_math.nonnegative_index
        self.values[i] = var
        self.loops[i] = [state]

    def render_range(self, i: int, x: Instr) -> None:
        b, rows = self.b, self.rows
        extent, opened = self.extent(i), []
        start = ir.Constant(I64, 0)
        if i in self.masked and i not in rows.split:  # only the steps that may add something
            start, extent = self.masked_part(self.masked[i], extent)
        if i in rows.split:  # blocks of the row, each summed in float32
            at, state = self.open_loop(start, extent, BLOCKED_ROW_MAX)
            opened.append(state)
            end = b.add(at, self.opaque(ir.Constant(I64, BLOCKED_ROW_MAX)))
            start, extent = at, b.select(b.icmp_signed("<", end, extent), end, extent)
        elif i in rows.opaque and (i, 0) not in self.sizes:
            extent = self.opaque(extent)
        for acc in rows.blocks.get(i, ()):
            b.store(ir.Constant(F32, 0.0), self.block[acc])
        var, state = self.open_loop(start, extent)
        self.values[i] = var
        self.loops[i] = opened + [state]

    def masked_part(self, bounds, extent) -> tuple[ir.Value, ir.Value]:
        """[start, stop) of a range's steps that may add something (ir/masked_ranges.py), inside [0, extent)."""
        b = self.b
        start, stop = ir.Constant(I64, 0), extent
        for bound in bounds:
            v = ir.Constant(I64, bound.offset)
            if bound.base is not None and bound.scale:
                base = self.values[bound.base]
                base = b.sext(base, I64) if base.type.width < 64 else base
                v = b.add(b.mul(base, ir.Constant(I64, bound.scale)), v)
            v = b.select(b.icmp_signed("<", v, ir.Constant(I64, 0)), ir.Constant(I64, 0), v)
            v = b.select(b.icmp_signed("<", extent, v), extent, v)  # (clamped to [0, extent])
            if bound.side == "start":
                start = b.select(b.icmp_signed("<", start, v), v, start)
            else:
                stop = b.select(b.icmp_signed("<", v, stop), v, stop)
        return start, stop

    def render_endrange(self, i: int, x: Instr) -> None:
        b, r = self.b, x.srcs[0]
        opened = self.loops.pop(r)
        self.close_loop(opened.pop())
        for acc in self.rows.blocks.get(r, ()):
            total = b.fadd(b.load(self.slots[acc]), b.fpext(b.load(self.block[acc]), F64), flags=STRICT)
            b.store(total, self.slots[acc])
        for state in reversed(opened):
            self.close_loop(state)

    def render_acc(self, i: int, x: Instr) -> None:
        b, dt = self.b, x.value_dtype
        wide = (
            wide_accumulator(dt, x.arg[0]) and i not in self.scanned and (i in self.rows.long_sums or dt != np.float32)
        )
        self.wide[i] = wide
        ty = F64 if wide else value_type(dt)
        if i not in self.slots:
            self.slots[i] = self.slot(ty)
            if i in self.blocked:
                self.block[i] = self.slot(F32)
            if x.arg[0] in ("max", "min") and dt.kind == "f" and i not in self.scanned:
                self.nan[i] = self.slot(I1)
        b.store(constant(x.arg[1], np.dtype(np.float64) if wide else dt), self.slots[i])
        if i in self.nan:
            b.store(ir.Constant(I1, 0), self.nan[i])

    def render_local(self, i: int, x: Instr) -> None:
        from tracejit.codegen.cpu.numba import NARROW_LOCAL_MAX, STACK_SCRATCH_MAX

        dt = x.value_dtype
        wide = wide_accumulator(dt, x.arg[1]) and x.arg[2] > NARROW_LOCAL_MAX
        self.wide[i] = wide
        ty = F64 if wide else value_type(dt)  # (float16: float32 values, as codegen.numba's row)
        itemsize = 8 if wide else computed(dt).itemsize
        if x.arg[0] * itemsize <= STACK_SCRATCH_MAX:  # (a symbolic size: room for the largest, as codegen.numba's)
            count = STACK_SCRATCH_MAX // itemsize if (i, 0) in self.sizes else x.arg[0]
            self.slots[i] = self.slot(ty, count, align=64)
            return
        # a row past the stack's share (a sort of 10^5 elements): malloc'd once per call, freed at its end
        a = self.alloca
        count = self.sizes.get((i, 0)) or ir.Constant(I64, x.arg[0])
        if count.type != I64:
            count = a.sext(count, I64) if count.type.width < 64 else a.trunc(count, I64)
        memory = a.call(llvm_sort.declared(self.fn.module, "malloc"), [a.mul(count, ir.Constant(I64, itemsize))])
        row = a.bitcast(memory, ir.PointerType(ty))
        self.slots[i] = row
        self.heap.append(row)

    def render_load(self, i: int, x: Instr) -> None:
        b, s, dt = self.b, x.srcs, x.value_dtype
        v = b.load(self.element(s[0], s[1]))
        if self.ins[s[0]].op == KOp.LOCAL:
            if self.wide[s[0]]:
                v = b.fptrunc(v, value_type(dt))
            if dt == np.float16 and self.ins[s[0]].arg[1] in ("sum", "prod"):  # a float16 total (contractions)
                v = self.round16(v)
        elif dt == np.float16:
            v = b.call(f16_function(self.fn.module, "f16_to_f32"), [v])
        elif dt == np.bool_:
            v = b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
        self.values[i] = v

    def render_store(self, i: int, x: Instr) -> None:
        b, s = self.b, x.srcs
        ptr, v = self.element(s[0], s[1]), self.value(s[2])
        if self.ins[s[0]].op == KOp.LOCAL:
            if self.wide[s[0]]:
                v = b.fpext(v, F64)
        elif self.ins[s[2]].dtype == np.float16:
            v = b.call(f16_function(self.fn.module, "f32_to_f16"), [v])
        elif self.ins[s[2]].dtype == np.bool_:
            v = b.zext(v, I8)
        b.store(v, ptr)

    def render_sort(self, i: int, x: Instr) -> None:
        """A row sorted in place (its positions with it): codegen/cpu/llvm_sort.py's functions, numba_math's
        sort_row and sort_row_bytes as IR."""
        b, module = self.b, self.fn.module
        keys = self.slots[x.srcs[0]]
        positions = self.slots[x.srcs[1]] if len(x.srcs) == 2 else None
        n = self.sizes.get((i, -1))
        if n is None:
            n = ir.Constant(I64, x.arg)
        elif n.type != I64:
            n = b.sext(n, I64) if n.type.width < 64 else b.trunc(n, I64)
        dt = self.ins[x.srcs[0]].value_dtype
        pos_t = positions.type.pointee if positions is not None else None
        if dt.kind in "iub" and dt.itemsize == 1:  # (a counting sort: one pass to count, one to place)
            fn = llvm_sort.sort_row_bytes(module, keys.type.pointee, pos_t, 0x80 if dt.kind == "i" else 0)
        else:
            fn = llvm_sort.sort_row(module, keys.type.pointee, pos_t, dt.kind == "f", dt.kind == "i")
        b.call(fn, [keys, positions if positions is not None else ir.Constant(ir.PointerType(I8), None), n])

    def render_cast(self, i: int, x: Instr) -> None:
        self.values[i] = cast(self.b, self.value(x.srcs[0]), self.ins[x.srcs[0]].value_dtype, x.value_dtype)

    def render_bitcast(self, i: int, x: Instr) -> None:
        self.values[i] = self.b.bitcast(self.value(x.srcs[0]), value_type(x.value_dtype))

    def render_table(self, i: int, x: Instr) -> None:  # a constant array in the module, from its exact bytes
        data = bytearray(x.arg.data)
        table = ir.GlobalVariable(self.fn.module, ir.ArrayType(I8, len(data)), f"table.{x.arg.name}")
        table.initializer = ir.Constant(table.value_type, data)
        table.global_constant, table.linkage = True, "internal"
        table.align = 64
        self.values[i] = self.b.bitcast(table, ir.PointerType(memory_type(x.value_dtype)))

    def render_bound(self, i: int, x: Instr) -> None:
        s = x.srcs
        self.values[i] = self.bound(
            self.value(s[0]),
            self.ins[s[0]].value_dtype,
            self.sizes.get((i, 0)) or ir.Constant(I64, x.arg[0]),
            x.arg[1].code,
        )

    def render_alu(self, i: int, x: Instr) -> None:
        self.values[i] = self.alu(i, x)

    def element(self, buffer: int, index: int) -> ir.Value:
        base = self.slots[buffer] if self.ins[buffer].op == KOp.LOCAL else self.values[buffer]
        return self.b.gep(base, [self.value(index)], inbounds=True)

    def fault(self, ok, code: int, value) -> None:
        """Where `ok` is false, record the fault `code` with its value (codegen.numba's tj_error: the last wins)."""
        b = self.b
        record, after = self.fn.append_basic_block("fault"), self.fn.append_basic_block("checked")
        b.cbranch(ok, after, record)
        b.position_at_end(record)
        b.store(ir.Constant(I64, code), self.record)
        b.store(value, b.gep(self.record, [ir.Constant(I64, 1)], inbounds=True))
        b.branch(after)
        b.position_at_end(after)

    def bound(self, v, dt: np.dtype, size, code: int):
        """numba_math.bound_index: an index read from data as an offset along an axis of `size` elements (a
        negative one counts from the end); one outside the axis is recorded and gives 0."""
        b, zero = self.b, ir.Constant(I64, 0)
        if dt.kind == "u":  # compared as it is, not as an int64 it may not fit
            wide = v if v.type.width == 64 else b.zext(v, I64)
            ok = b.icmp_unsigned("<", wide, size)
            offset = wide
        else:
            wide = v if v.type.width == 64 else b.sext(v, I64)
            offset = b.select(b.icmp_signed("<", wide, zero), b.add(wide, size), wide)
            ok = b.and_(b.icmp_signed(">=", offset, zero), b.icmp_signed("<", offset, size))
        self.fault(ok, code, wide)
        return b.select(ok, offset, zero)

    def int_power(self, a, e, dt: np.dtype):
        """numba_math.int_power after nonnegative_exponent: a ** e by squaring in int64, wrapping, narrowed to
        dt; a negative exponent (signed types) is recorded and taken as 0."""
        b, zero = self.b, ir.Constant(I64, 0)
        wide_a = a if a.type.width == 64 else (b.zext if dt.kind == "u" else b.sext)(a, I64)
        wide_e = e if e.type.width == 64 else (b.zext if dt.kind == "u" else b.sext)(e, I64)
        if dt.kind == "i":
            ok = b.icmp_signed(">=", wide_e, zero)
            self.fault(ok, NEGATIVE_POWER.code, wide_e)
            wide_e = b.select(ok, wide_e, zero)
        fn = int_power_function(self.fn.module)
        out = b.call(fn, [wide_a, wide_e])
        return out if dt.itemsize == 8 else b.trunc(out, value_type(dt))

    def render_update(self, i: int, x: Instr) -> None:
        """An accumulator's step (codegen.numba's update): into its memory, or into a scratch row's element."""
        b, ins = self.b, self.ins
        acc = ins[x.srcs[0]]
        red, adt = (acc.arg[0], acc.value_dtype) if acc.op == KOp.ACC else (acc.arg[1], acc.value_dtype)
        ptr = self.slots[x.srcs[0]] if acc.op == KOp.ACC else self.element(x.srcs[0], x.srcs[1])
        v = self.value(x.srcs[-1])
        wide = self.wide[x.srcs[0]]
        if x.srcs[0] in self.blocked:
            ptr, wide = self.block[x.srcs[0]], False
        elif wide:
            v = b.fpext(v, F64)
        cur = b.load(ptr)
        if x.srcs[0] in self.nan:  # numba_math.max_step / min_step, and the NaN flag apart
            take = b.fcmp_ordered(">" if red == "max" else "<", v, cur, flags=("nnan", "nsz"))
            b.store(b.select(take, v, cur, flags=("nnan", "nsz")), ptr)
            flag = self.nan[x.srcs[0]]
            b.store(b.or_(b.load(flag), b.fcmp_unordered("!=", v, v)), flag)
            return
        if i in self.rows.reorderable and not self.plain:
            step = (b.fadd if red == "sum" else b.fmul)(cur, v, flags=("reassoc", "contract"))
        elif adt == np.float16 and x.srcs[0] in self.scanned:  # each running total a float16, as NumPy's accumulate
            step = self.round16(combine(b, red, adt, cur, v))
        else:
            step = combine(b, red, adt, cur, v)
        b.store(step, ptr)

    def round16(self, v) -> ir.Value:
        """A float32 value rounded to the nearest float16 (codegen.numba's round_f16)."""
        return self.b.call(f16_function(self.fn.module, "round_f16"), [v])

    def alu(self, i: int, x) -> ir.Value:
        b, op = self.b, x.op
        a = [self.value(j) for j in x.srcs]
        src = computed(self.ins[x.srcs[1] if op == KOp.WHERE else x.srcs[0]].dtype)
        if op == KOp.WHERE:
            return b.select(a[0], a[1], a[2])
        if src == np.bool_:
            return bool_op(b, op, a)
        power = self.constant_power(x)
        if power is not None:
            return powers.emit_llvm(b, a[0], power)
        if src.kind == "f":
            name = MATH.get((src, op))
            out = b.call(self.math(name, len(a)), a) if name is not None else float_op(b, op, a, src)
            if x.dtype == np.float16 and op in ROUNDS_TO_FLOAT16:  # computed in float32, rounded like NumPy
                out = self.round16(out)
            return out
        if i in self.index:
            if divides_in_32_bits(self.ins, self.ranges, x):  # (vectorises: ir/index_ranges.py)
                i32 = ir.IntType(32)
                n, d = b.trunc(a[0], i32), b.trunc(a[1], i32)
                return b.zext(b.udiv(n, d) if op == KOp.IDIV else b.urem(n, d), I64)
            return index_op(b, op, a)
        if op == KOp.POW:
            return self.int_power(a[0], a[1], src)
        return int_op(b, op, a, src)

    def constant_power(self, x: Instr) -> powers.Power | None:
        """The expansion of a float x ** c with c a constant powers.py expands, else None."""
        if x.op != KOp.POW or x.dtype == np.float16:
            return None
        c = self.ins[x.srcs[1]]
        return powers.constant_power(c.arg, c.dtype) if c.op == KOp.CONST else None

    def math(self, name: str, arity: int = 1) -> ir.Function:
        ty = F32 if name.endswith("f32") else F64
        symbol = f"tracejit.{name}" + ("" if self.inline[name] else ".called")
        return defined(self.fn.module, symbol, getattr(llvm_math, name), (ty,) * arity, ty, self.inline[name])
