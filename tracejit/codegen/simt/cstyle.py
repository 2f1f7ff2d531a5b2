"""C-style renderer base: kernel IR -> one C-family compute kernel. OpenCL C, CUDA C and MSL share it
and set only their strings (qualifiers, thread ids, barrier, type names) and a few hooks; WGSL (wgsl.py)
reuses the same instruction walk with its own statement spellings and ALU. codegen/simt/mapping.py decides how the
kernel maps onto work-items (thread or group mode).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from tracejit.errors import DtypeError
from tracejit.ir.kernel_ir import INDEX, Instr, KOp, KernelIR, faults
from tracejit.ir.ops import ROUNDS_TO_FLOAT16
from tracejit.codegen.simt import atomics, bitonic, c_helpers, group_scan, mma, tiled
from tracejit.codegen.simt.c_values import CValues
from tracejit.ir.sizes import Slot
from tracejit.codegen.simt.c_target import CStyle, Rendered
from tracejit.codegen.simt.mapping import (
    LANES,
    ORDERED_BELOW,
    WIDE_BLOCK,
    Launch,
    Mapping,
    Nest,
    RenderOptions,
    by_value_dtype,
    float16_totals,
    long_loops,
    ordered_loops,
    reorderable_updates,
)


SIZE_PARAM = "tj_items"  # the bounds check's limit (Launch.size)

# op -> the method of _Render that writes it (a dialect may override any of them); every ALU op: render_alu
STATEMENTS: dict[KOp, str] = {
    KOp.PARAM: "render_param",
    KOp.CONST: "render_const",
    KOp.TABLE: "render_table",
    KOp.GLOBAL: "render_global",
    KOp.RANGE: "render_range",
    KOp.ENDRANGE: "render_endrange",
    KOp.ACC: "render_acc",
    KOp.UPDATE: "render_update",
    KOp.LOCAL: "render_local",
    KOp.SORT: "render_sort",
    KOp.LOAD: "render_load",
    KOp.STORE: "render_store",
    KOp.ATOMIC: "render_atomic",
    KOp.BOUND: "render_bound",
    KOp.CAST: "render_cast",
    KOp.BITCAST: "render_bitcast",
}


def render(t: CStyle, kernel: KernelIR, options: RenderOptions, by_value, lanes, aligned, name, symbolic) -> Rendered:
    """CStyle.render's work: the instruction walk in the target's spelling."""
    return _Render(t, kernel, options, by_value, lanes, aligned, name, symbolic).run()


class _Render(CValues):
    def __init__(
        self,
        t: CStyle,
        kernel: KernelIR,
        options: RenderOptions,
        by_value,
        lanes=1,
        aligned=(),
        name=None,
        symbolic=None,
    ):
        self.t, self.k, self.o = t, kernel, options
        self.statements = {op: getattr(self, method) for op, method in STATEMENTS.items()}
        self.symbolic: dict[Slot, str] = {}  # a symbolic size's slot -> the name of its argument
        self.lanes, self.aligned, self.name = lanes, aligned, name or kernel.name
        self.ins = kernel.instrs
        self.by_value = frozenset(i for i in by_value if not kernel.params[i].output)
        self.names: list[str] = [""] * len(self.ins)
        self.lines: list[str] = []
        self.helpers: dict[str, str] = {}
        self.depth = 1
        self._check_dtypes()
        assert kernel.global_size % lanes == 0
        self.symbolic = {slot: n for slot, n in (symbolic or {}).items() if self.takes(slot)}
        # a kernel whose sizes move (some are arguments), on a target that checks the global index only where
        # its work-groups do not divide the size (PoCL: an early return stops it vectorising across
        # work-items): the padding work-items compute as the last one (their index clamped) and store nothing,
        # so that every size shares one source. Not with atomics or fault records, whose updates a padding
        # work-item would make: those check.
        self.clamped = (
            bool(symbolic)
            and not options.always_check
            and not faults(kernel)
            and not any(x.op == KOp.ATOMIC for x in kernel.instrs)
        )
        self.live = ""  # the condition under which a clamped work-item stores
        long_ranges = long_loops(self.ins, self.symbolic)
        ordered = ordered_loops(self.ins, long_ranges)
        shape = kernel if lanes == 1 else replace(kernel, global_size=kernel.global_size // lanes)
        m = Mapping(shape, options, long_ranges)
        if m.mode == "group":  # a row of several loops shared by a group has no extent to branch on
            unhandled = {r for n in m.nests if len(n.ranges) > 1 for r in n.ranges} & ordered
            if unhandled:  # such a short sum gets a source of its own (one more compile where it grows)
                long_ranges, ordered = long_ranges - unhandled, ordered - unhandled
                m = Mapping(shape, options, long_ranges)
        self.mapping = m
        # loops whose extent below ORDERED_BELOW takes NumPy's order at run time: a group's row in its first
        # work-item (group_ordered), any other loop written twice, in order and as a long loop (twice)
        self.group_ordered = {n.ranges[0] for n in m.nests if n.ranges[0] in ordered} if m.mode == "group" else set()
        self.twice = ordered - self.group_ordered
        self.in_order = False  # rendering a loop's in-order copy
        self.nests, self.mode, self.local_size, self.global_items = m.nests, m.mode, m.local_size, m.global_items
        self.index, self.nonneg, self.wide, self.blocked, self.laned = m.index, m.nonneg, m.wide, m.blocked, m.laned
        ends = {x.srcs[0]: j for j, x in enumerate(self.ins) if x.op == KOp.ENDRANGE}
        self.ends = ends
        self.float16_totals = float16_totals(self.ins)
        self.reorderable = reorderable_updates(self.ins, long_ranges) - {
            j for r in self.group_ordered for j in range(r, ends[r])
        }  # a work-item's part of a group's row: in order
        self.index_bits, self.idx = m.index_bits, t.index_type(m.index_bits)
        self.error_flag = bool(faults(kernel))
        self.size_checked = False  # set by the walk where it checks the global index against the size
        self.tile = tiled.plan(kernel, options, self.by_value) if lanes == 1 else None
        if self.tile is not None:  # a matrix product: a work-group per tile of the result
            self.k = replace(kernel, global_size=tiled.groups(kernel, self.tile))
            self.mode, self.local_size = "group", self.tile.threads
            self.global_items = self.k.global_size * self.local_size

    # -- analysis --
    def _check_dtypes(self) -> None:
        for i, x in enumerate(self.ins):
            dt = x.dtype
            by_value = self._by_value_load(i) or x.op == KOp.PARAM and x.arg in self.by_value
            if dt == np.float64 and not self.o.fp64 and not by_value:
                raise DtypeError(
                    f"float64 is not supported on {self.o.device or 'this device'}: {self.t.no_fp64}; "
                    "compute in float32 (x.astype(np.float32)) or use another device"
                )
            if dt is not None and dt not in self.t.types and not by_value:
                raise DtypeError(f"{dt.name} is not supported on {self.o.device or 'this device'}")
        if not self.o.fp64:
            self._check_float64_scalars(self.o.device, self.t.no_fp64)

    def _check_float64_scalars(self, device: str | None, why: str) -> None:
        """A float64 scalar argument arrives as float on a device without double; that is exact only where
        it is cast to float32 (a Python float next to float32 data, as NumPy casts it); cast to float16 (or a
        narrow float) it rounds twice, which differs from NumPy's one rounding only for a value within float32's
        precision of a halfway point (build.float32_rounded_to_odd). Any other use (a comparison with
        a float64 constant, a cast to bool or an integer) would compute with a value NumPy does not have:
        -5e-324 cast to bool is True in NumPy and False through float."""
        loaded = {i for i in range(len(self.ins)) if self._by_value_load(i) and self.ins[i].dtype == np.float64}
        for x in self.ins:
            used = [j for j in x.srcs if j in loaded]
            if used and not (x.op == KOp.CAST and x.dtype in (np.float32, np.float16)):
                use = x.op if x.dtype is None else f"{x.op} to {x.dtype.name}"
                raise DtypeError(
                    f"float64 is not supported on {device or 'this device'}: {why}, and a float64 "
                    f"scalar argument is used as float64 here ({use}), which float cannot compute as "
                    "NumPy does; pass it as np.float32 or use another device"
                )

    def _by_value_load(self, i: int) -> bool:
        x = self.ins[i]
        return x.op == KOp.LOAD and self.ins[x.srcs[0]].op == KOp.PARAM and self.ins[x.srcs[0]].arg in self.by_value

    # -- types and literals --
    def ctype(self, dt: np.dtype) -> str:
        """The type a value of dt is computed in."""
        if dt == np.float16 and not self.o.fp16:
            return "float"
        return self.t.types[dt]

    def vtype(self, i: int) -> str:
        return self.idx if i in self.index else self.ctype(self.ins[i].value_dtype)

    def storage(self, dt: np.dtype) -> str:
        """The element type of a buffer (bool as a byte)."""
        return self.t.types[np.dtype("uint8")] if dt == np.bool_ else self.t.types[dt]

    def local_storage(self, dt: np.dtype) -> str:
        return self.t.types[np.dtype("uint8")] if dt == np.bool_ else self.ctype(dt)

    def bound(self, i: int, v: str) -> str:
        """BOUND: an index read from data as an offset along its axis (WGSL has its own)."""
        return c_helpers.bound(self, i, v)

    @property
    def long(self) -> str:
        return self.t.types[INDEX]

    @property
    def error_record(self) -> str:
        """The type of the error record's parameter."""
        return f"{self.t.global_qualifier} int*".strip()

    # -- emission --
    def out(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def run(self) -> Rendered:
        t = self.t
        params = []
        for p_i, p in enumerate(self.k.params):
            if p_i in self.by_value:
                ty = self.storage(by_value_dtype(p.dtype, self.o))
                params.append(t.value_param(p_i, ty, p.name))
            else:
                const = "" if p.output else "const "
                params.append(t.buffer_param(p_i, f"{const}{self.storage(p.dtype)}", p.name))
        if self.error_flag:
            params.append(t.buffer_param(len(params), "int", "tj_error"))
        self.walk()
        symbolic = self.symbolic_arguments()
        for (_, name), (dt, _) in zip(sorted(self.symbolic.items()), symbolic):
            params.append(t.value_param(len(params), self.storage(np.dtype(dt)), name))
        if self.size_checked:  # the bounds check's limit: an argument, so the size stays out of the source
            params.append(t.value_param(len(params), self.idx, SIZE_PARAM))
        if t.max_params is not None and len(params) > t.max_params and self.symbolic:
            # its sizes as arguments pass what the target binds (a tiled product's many extents on Metal):
            # this kernel is compiled for its own sizes instead (its source names them; no other size shares it)
            return _Render(t, self.k, self.o, self.by_value, self.lanes, self.aligned, self.name, None).run()
        if self.lanes > 1:
            self.depth -= 1
            self.out("}")
            for p_i in self.aligned:
                p = self.k.params[p_i]
                const = "" if p.output else "const "
                self.lines.insert(
                    0,
                    "    " + t.assume_aligned(p.name, f"{const}{self.storage(p.dtype)}", self.lanes * p.dtype.itemsize),
                )
        launch = Launch(
            self.mode,
            self.local_size,
            self.global_items,
            tuple(sorted(self.by_value)),
            self.error_flag,
            self.mapping.group_limit if self.mode == "thread" and self.tile is None else self.local_size,
            self.k.global_size if self.size_checked else None,
            self.index_bits,
            symbolic,
        )
        body = "\n".join(self.lines)
        # the parameters too: a kernel that only stores float16 still names the half type there
        head = t.preamble(", ".join(params) + body + "\n".join(self.helpers.values()), self.o)
        pieces = (
            *(p for p in (head, *self.helpers.values()) if p),
            f"{t.signature(self.name, params, launch)} {{\n{body}\n}}\n",
        )
        return Rendered(self.name, "\n\n".join(pieces), launch, pieces=pieces)

    def shared(self, line: str) -> None:
        """A work-group array's declaration (C: at the top of the kernel body)."""
        self.out(line)

    def size_value(self) -> str:
        """The bounds check's limit, the kernel's global size, read from its argument."""
        return SIZE_PARAM

    def global_index(self) -> tuple[str, int]:
        """The expression of a work-item's (thread mode) or work-group's (group mode) global index, and
        how many such indices the launch covers."""
        if self.mode == "group":
            return f"({self.idx}){self.t.group_id}", self.k.global_size
        return f"({self.idx}){self.t.global_id}", self.global_items

    def tree_storage(self, dt: np.dtype) -> str:
        """The element type of a work-group reduction tree."""
        return self.local_storage(dt)

    def local_value(self, ref: str, dt: np.dtype) -> str:
        """A work-item array element as a value (C converts a bool byte implicitly)."""
        return ref

    def local_stored(self, val: str, dt: np.dtype) -> str:
        return val

    def walk(self) -> None:
        """The instruction walk shared by every C-style target, in the target's spelling. In group mode
        a scan's nest is walked by the whole work-group (group_scan.py)."""
        ins, t, group = self.ins, self.t, self.mode == "group"
        i32 = np.dtype("int32")
        if self.tile is not None:
            (mma.render if self.tile.mma else tiled.render)(self, self.tile)
            return
        if group:
            # one tree per accumulator dtype (float16 and float32 sums share float32's); scans use it too
            for dt in dict.fromkeys(
                self.acc_dtype(ins[a].value_dtype) for n in self.nests if n.kind in ("reduce", "scan") for a in n.accs
            ):
                self.shared(t.array(f"tj_red_{dt.name}", self.tree_storage(dt), self.local_size, True))
            for i, x in enumerate(ins):
                if x.op == KOp.LOCAL:
                    self.shared(t.array(f"v{i}", self.local_storage(x.value_dtype), x.arg[0], True))
            self.out(t.let("lid", t.types[i32], t.local_id))
        self.nest_at = {n.ranges[0]: n for n in self.nests}
        self.inner = {r for n in self.nests if group for r in n.ranges[1:]}
        self.closes = {n.end: n for n in self.nests}
        self.level = 0
        self.walk_span(0, len(ins))

    def walk_span(self, i: int, end: int) -> None:
        """Instructions i..end-1; a loop in `twice` as `if (extent < ORDERED_BELOW) {in order} else {long}`."""
        group = self.mode == "group"
        while i < end:
            nest = self.nest_at.get(i)
            if group and nest is not None and nest.kind == "scan":
                group_scan.render(self, nest)
                i = nest.end + 1
            elif i in self.twice and not self.in_order:
                last = self.ends[i] + 1
                extent = self.slot(i, 0, self.ins[i].arg[0], INDEX, True)
                self.out(f"if ({extent} < {self.literal(ORDERED_BELOW, INDEX, True)}) {{")
                self.depth += 1
                self.in_order = True
                self.walk_span(i, last)
                self.in_order = False
                self.depth -= 1
                self.out("} else {")
                self.depth += 1
                self.instr(i)
                self.walk_span(i + 1, last)
                self.depth -= 1
                self.out("}")
                i = last
            else:
                self.instr(i)
                i += 1

    def instr(self, i: int) -> None:
        """Instruction i in the target's spelling, by the method STATEMENTS names for its op (render_alu for
        every ALU op)."""
        x = self.ins[i]
        a = [self.names[j] for j in x.srcs]
        self.names[i] = f"v{i}"
        self.statements.get(x.op, self.render_alu)(i, x, a)

    def render_param(self, i: int, x: Instr, a: list[str]) -> None:
        self.names[i] = self.k.params[x.arg].name

    def render_const(self, i: int, x: Instr, a: list[str]) -> None:
        self.names[i] = self.slot(i, -1, x.arg, x.value_dtype, i in self.index)

    def render_table(self, i: int, x: Instr, a: list[str]) -> None:
        self.names[i] = x.arg.name
        self.declare_table(x.arg)

    def render_global(self, i: int, x: Instr, a: list[str]) -> None:
        t, name = self.t, self.names[i]
        if self.lanes > 1:
            items = self.k.global_size // self.lanes
            self.out(f"const {self.idx} tj_item = ({self.idx}){t.global_id};")
            if self.global_items != items or self.o.always_check:
                self.size_checked = True
                self.out(f"if (tj_item >= {self.size_value()} / {self.lanes}) return;")
            self.out("#pragma unroll")
            self.out(f"for (int tj_lane = 0; tj_lane < {self.lanes}; tj_lane++) {{")
            self.depth += 1
            self.out(f"const {self.idx} {name} = {self.lanes} * tj_item + tj_lane;")
        elif self.clamped and self.mode == "thread":
            expr, _ = self.global_index()
            self.size_checked = True  # (the size argument: the clamp's limit)
            self.out(t.let("tj_item", self.idx, expr))
            self.live = f"tj_item < {self.size_value()}"
            last = f"{self.size_value()} - {self.literal(1, INDEX, True)}"
            self.out(t.let(name, self.idx, self.select(self.live, "tj_item", last)))
        else:
            expr, launched = self.global_index()
            self.out(t.let(name, self.idx, expr))
            # in group mode the whole work-group leaves; with a fixed work-group size every kernel has the
            # check, so that sizes its groups divide share the source of those they do not
            if launched != self.k.global_size or self.o.always_check and self.mode == "thread":
                self.size_checked = True
                self.out(t.guard(f"{name} >= {self.size_value()}", "return;"))

    def render_range(self, i: int, x: Instr, a: list[str]) -> None:
        t, name, i32 = self.t, self.names[i], np.dtype("int32")
        self.level += 1
        n = self.nest_at.get(i)
        if self.mode == "group" and n is not None:
            f = f"f{i}"
            extent = (
                self.slot(i, 0, n.extent, INDEX, True) if len(n.ranges) == 1 else self.literal(n.extent, INDEX, True)
            )
            start, step = "lid", self.literal(self.local_size, i32)
            if i in self.group_ordered:  # a short row: its first work-item adds it in order, the others nothing
                short = f"{extent} < {self.literal(ORDERED_BELOW, INDEX, True)}"
                first = f"lid == {self.literal(0, i32)}"
                start = self.select(short, self.select(first, self.literal(0, INDEX, True), extent), "lid")
                step = self.select(short, self.literal(1, i32), step)
            self.out(t.loop(f, self.idx, start, f"{f} < {extent}", f"{f} += {step}"))
            self.depth += 1
            stride = n.extent
            for r, e in zip(n.ranges, n.extents):
                stride //= e
                expr = f
                if stride > 1:
                    expr = f"({expr} / {self.literal(stride, i32)})"
                if r != n.ranges[0]:
                    expr = f"({expr} % {self.literal(e, i32)})"
                self.out(t.let(f"v{r}", self.idx, expr))
        elif i in self.laned:  # LANES elements at a time, each into a lane of its own
            acc = self.laned[i]
            adt = self.acc_dtype(self.ins[acc].value_dtype)
            extent = self.slot(i, 0, x.arg[0], INDEX, True)
            lane, lanes = f"{name}_j", self.literal(LANES, i32)
            self.out(t.array(f"v{acc}_lane", self.ctype(adt), LANES, False))
            self.out(t.loop(lane, self.ctype(i32), self.literal(0, i32), f"{lane} < {lanes}", f"{lane}++"))
            self.out(f"    v{acc}_lane[{lane}] = v{acc};")
            self.out("}")
            self.out(
                t.loop(f"{name}_b", self.idx, self.literal(0, i32), f"{name}_b < {extent}", f"{name}_b += {lanes}")
            )
            self.depth += 1
            self.out(t.loop(lane, self.ctype(i32), self.literal(0, i32), f"{lane} < {lanes}", f"{lane}++"))
            self.depth += 1
            at = f"{name}_b + {lane}"
            if i in self.mapping.long_ranges or x.arg[0] % LANES:  # the last again past the end (a select:
                last = f"{extent} - {self.literal(1, INDEX, True)}"  # PoCL's min() kept the loop scalar)
                at = self.select(f"({at}) < {last}", f"({at})", last)
            self.out(t.let(name, self.idx, at))
        elif i in self.blocked:  # runs of WIDE_BLOCK added in float, each run's total in double
            acc, block = self.blocked[i], self.literal(WIDE_BLOCK, i32)
            extent = self.slot(i, 0, x.arg[0], INDEX, True)
            self.out(
                t.loop(f"{name}_b", self.idx, self.literal(0, i32), f"{name}_b < {extent}", f"{name}_b += {block}")
            )
            self.depth += 1
            self.out(t.var(f"v{acc}_run", self.ctype(np.dtype("float32")), self.literal(0.0, np.dtype("float32"))))
            # an extent that is an argument may end in a shorter run
            end = f"min({name}_b + {block}, {extent})" if i in self.mapping.long_ranges else f"{name}_b + {block}"
            for line in t.interleaved():
                self.out(line)
            self.out(t.loop(name, self.idx, f"{name}_b", f"{name} < {end}", f"{name}++"))
            self.depth += 1
        elif i not in self.inner:
            self.out(
                t.loop(
                    name,
                    self.idx,
                    self.literal(0, i32),
                    f"{name} < {self.slot(i, 0, x.arg[0], INDEX, True)}",
                    f"{name}++",
                )
            )
            self.depth += 1

    def render_endrange(self, i: int, x: Instr, a: list[str]) -> None:
        t, r, i32 = self.t, x.srcs[0], np.dtype("int32")
        self.level -= 1
        if r not in self.inner:
            self.depth -= 1
            self.out("}")
        if r in self.laned:
            acc = self.laned[r]
            self.depth -= 1
            self.out("}")
            lane = f"v{r}_j"
            step = self.combine(
                self.ins[acc].arg[0], self.acc_dtype(self.ins[acc].value_dtype), f"v{acc}", f"v{acc}_lane[{lane}]"
            )
            self.out(
                t.loop(lane, self.ctype(i32), self.literal(0, i32), f"{lane} < {self.literal(LANES, i32)}", f"{lane}++")
            )
            self.out(f"    v{acc} = {step};")
            self.out("}")
        if r in self.blocked:
            acc = self.blocked[r]
            self.out(f"v{acc} = v{acc} + ({self.ctype(np.dtype('float64'))})v{acc}_run;")
            self.depth -= 1
            self.out("}")
        if self.mode == "group" and i in self.closes:
            self._after_nest(self.closes[i])

    def render_acc(self, i: int, x: Instr, a: list[str]) -> None:
        name, dt = self.names[i], x.value_dtype
        adt = np.dtype("float64") if i in self.wide else self.acc_dtype(dt)
        self.out(self.t.var(name, self.ctype(adt), self.literal(x.arg[1], adt)))
        if i in self.wide:  # read back narrowed after the loop, as the numba device does
            self.names[i] = f"(({self.ctype(dt)}){name})"
        if i in self.float16_totals:  # a float16 total, as NumPy's loop stores it
            self.names[i] = self.cast(self.names[i], np.dtype("float32"), dt)

    def render_update(self, i: int, x: Instr, a: list[str]) -> None:
        t, s = self.t, x.srcs
        target = self.ins[s[0]]
        red = target.arg[0] if target.op == KOp.ACC else target.arg[1]
        adt = np.dtype("float64") if s[0] in self.wide else self.acc_dtype(target.value_dtype)
        if target.op == KOp.ACC and s[0] in self.laned.values():
            lane = f"v{next(r for r, a in self.laned.items() if a == s[0])}_j"
            self.out(f"v{s[0]}_lane[{lane}] = {self.combine(red, adt, f'v{s[0]}_lane[{lane}]', a[-1])};")
            self.names[i] = self.names[s[0]]
        elif target.op == KOp.ACC and s[0] in self.blocked.values():
            run = f"v{s[0]}_run"
            step = f"{run} = {self.combine(red, np.dtype('float32'), run, a[-1])};"
            for line in t.reassociable(step) if i in self.reorderable and not self.in_order else [step]:
                self.out(line)
            self.names[i] = self.names[s[0]]
        elif target.op == KOp.ACC and self.in_order and s[0] in self.wide:  # rounded each step, as NumPy's
            narrow = self.acc_dtype(target.value_dtype)
            total = self.combine(red, narrow, self.cast(f"v{s[0]}", adt, narrow), a[-1])
            if target.dtype == np.float16:
                total = self.cast(total, narrow, target.dtype)
            self.out(f"v{s[0]} = {self.cast(total, narrow, adt)};")
            self.names[i] = self.names[s[0]]
        elif target.op == KOp.ACC and target.dtype == np.float16 and x.dtype is not None:
            # a float16 scan: each running total a float16, as NumPy's accumulate stores it
            total = self.cast(self.combine(red, adt, f"v{s[0]}", a[-1]), adt, target.dtype)
            self.out(f"v{s[0]} = {self.cast(total, target.dtype, adt)};")
            self.names[i] = self.names[s[0]]
        elif target.op == KOp.ACC:
            step = f"v{s[0]} = {self.combine(red, adt, f'v{s[0]}', a[-1])};"
            for line in t.reassociable(step) if i in self.reorderable and not self.in_order else [step]:
                self.out(line)
            self.names[i] = self.names[s[0]]  # a scan's running value: the accumulator as read back
        else:
            ref = f"{a[0]}[{a[1]}]"
            val = self.combine(red, adt, self.local_value(ref, target.value_dtype), a[-1])
            self.out(f"{ref} = {self.local_stored(val, target.value_dtype)};")

    def render_local(self, i: int, x: Instr, a: list[str]) -> None:
        if self.mode != "group":  # (in group mode a work-group array, declared by walk)
            self.out(self.t.array(self.names[i], self.local_storage(x.value_dtype), x.arg[0], False))

    def render_sort(self, i: int, x: Instr, a: list[str]) -> None:
        s = x.srcs
        for line in bitonic.network(
            self, i, a[0], a[1] if len(s) == 2 else None, self.ins[s[0]].arg[0], self.ins[s[0]].value_dtype
        ):
            self.out(line)

    def render_load(self, i: int, x: Instr, a: list[str]) -> None:
        if self._by_value_load(i):
            self.names[i] = self._load(x.srcs, x.value_dtype)  # a scalar argument, declared in the signature
        else:
            self.out(self.t.let(self.names[i], self.ctype(x.value_dtype), self._load(x.srcs, x.value_dtype)))

    def render_store(self, i: int, x: Instr, a: list[str]) -> None:
        t, s, group = self.t, x.srcs, self.mode == "group"
        line = self._store(s, a)
        if self.live and self.ins[s[0]].op == KOp.PARAM:  # a padding work-item stores nothing
            line = t.guard(self.live, line)
        if group and self.level == 0:  # one work-item of the group stores
            line = t.guard(f"lid == {self.literal(0, np.dtype('int32'))}", line)
        self.out(line)
        if group and self.level == 0 and self.ins[s[0]].op == KOp.LOCAL:
            self.out(t.barrier)

    def render_atomic(self, i: int, x: Instr, a: list[str]) -> None:
        lines = atomics.render(self, i, a)
        if self.mode == "group" and self.level == 0:  # one work-item of the group updates, as it stores
            first = f"lid == {self.literal(0, np.dtype('int32'))}"
            lines = [f"if ({first}) {{", *("    " + line for line in lines), "}"]
        for line in lines:
            self.out(line)

    def render_bound(self, i: int, x: Instr, a: list[str]) -> None:
        self.out(self.t.let(self.names[i], self.idx, self.bound(i, a[0])))

    def render_cast(self, i: int, x: Instr, a: list[str]) -> None:
        if i in self.index:  # an int32 limit (lower._limit): widened implicitly if at all
            self.out(self.t.let(self.names[i], self.idx, a[0]))
        else:
            value = self.cast(a[0], self.ins[x.srcs[0]].value_dtype, x.value_dtype)
            self.out(self.t.let(self.names[i], self.ctype(x.value_dtype), value))

    def render_bitcast(self, i: int, x: Instr, a: list[str]) -> None:
        self.out(self.t.let(self.names[i], self.ctype(x.value_dtype), self.bitcast(a[0], x.value_dtype)))

    def render_alu(self, i: int, x: Instr, a: list[str]) -> None:
        op, dt = x.op, x.value_dtype
        value = self.alu(i, op, a, dt)
        if dt == np.float16 and op in ROUNDS_TO_FLOAT16 and not self.o.fp16:  # rounded like NumPy's loops
            value = self.cast(value, np.dtype("float32"), dt)
        self.out(self.t.let(self.names[i], self.vtype(i), value))

    def acc_dtype(self, dt: np.dtype) -> np.dtype:
        """float16 accumulates in float32."""
        return np.dtype("float32") if dt == np.float16 else dt

    def _after_nest(self, n: Nest) -> None:
        """Group mode: combine the work-items' partial accumulators; every work-item gets the total.
        A loop that filled local memory is followed by a barrier before anyone reads it."""
        t = self.t
        stored_local = any(
            self.ins[j].op == KOp.STORE and self.ins[self.ins[j].srcs[0]].op == KOp.LOCAL
            for j in range(n.ranges[0], n.end)
        )
        if n.kind != "reduce" or not n.accs:
            if stored_local:
                self.out(t.barrier)
            return
        for acc in n.accs:
            dt = self.acc_dtype(self.ins[acc].value_dtype)
            for line in t.group_reduce(
                self, f"v{acc}", f"tj_red_{dt.name}", self.ins[acc].arg[0], dt, self.ins[acc].arg[1]
            ):
                self.out(line)
