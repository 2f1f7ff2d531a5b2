"""WGSL renderer: kernel IR -> one WebGPU compute shader, as a dialect of cstyle.py's instruction walk
(WGSL sets the statement spellings, its own types, literals and ALU, and the module around the kernel).
codegen/simt/mapping.py decides the launch shape (a thread per row, or a workgroup per long row with a var<workgroup>
tree and workgroupBarrier()).

WGSL has 32-bit scalars only (f16 with the shader-f16 feature): int64, uint64 and float64 raise a
DtypeError naming the device. bool, int8/16 and uint8/16 live in memory as one 32-bit word per
element (the runtime widens on upload and narrows on download) and are computed in i32/u32, wrapped
to their width after every operation that can leave it. Scalars passed by value sit in one uniform.
Inf and NaN come from bit patterns at run time (WGSL rejects them as constants), and NaN tests look at
the bits, since shader compilers may assume x == x. Constant tables are read-only storage buffers that
the runtime uploads once: a `const` array indexed at run time is copied into every invocation by naga.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tracejit.errors import DtypeError, UnsupportedError
from tracejit.ir.dtypes import is_narrow_float
from tracejit.ir.kernel_ir import INDEX, Instr, KOp, KernelIR
from tracejit.codegen.simt import atomics, wgsl_functions
from tracejit.codegen.simt.c_values import BOOL_OPS, COMPARISONS
from tracejit.codegen.simt.c_target import CStyle, Rendered
from tracejit.codegen.simt.cstyle import SIZE_PARAM, _Render
from tracejit.codegen.simt.mapping import index_values
from tracejit.codegen.simt.wgsl_floats import FLOAT_COMPARISONS, ONE, ZERO, FloatArithmetic
from tracejit.codegen.simt.wgsl_functions import f32_literal as _f32
from tracejit.codegen.simt.mapping import Launch, RenderOptions

TYPES = {
    np.dtype(k): v
    for k, v in {
        "bool": "bool",
        "int8": "i32",
        "int16": "i32",
        "int32": "i32",
        "uint8": "u32",
        "uint16": "u32",
        "uint32": "u32",
        "float16": "f16",
        "float32": "f32",
    }.items()
}
STORAGE = {
    np.dtype(k): np.dtype(v)
    for k, v in {  # a buffer's element type on the device
        "bool": "uint32",
        "int8": "int32",
        "int16": "int32",
        "int32": "int32",
        "uint8": "uint32",
        "uint16": "uint32",
        "uint32": "uint32",
        "float16": "float16",
        "float32": "float32",
    }.items()
}
BOOL_ORDER = {"lt": "(!{0} && {1})", "le": "(!{0} || {1})"}
WIDTH_BITS = {np.dtype("int8"): 8, np.dtype("int16"): 16, np.dtype("uint8"): 8, np.dtype("uint16"): 16}


@dataclass(frozen=True)
class WGSLOptions:
    device: str = "webgpu"
    f16: bool = False  # the adapter has shader-f16
    max_local_size: int = 256  # maxComputeInvocationsPerWorkgroup
    max_workgroups: int = 65535  # maxComputeWorkgroupsPerDimension
    max_storage_buffers: int = 8  # maxStorageBuffersPerShaderStage
    group_max_rows: int | None = None  # more rows than this run a row per invocation (CPU adapters)
    max_loop: int | None = None  # loop iterations an invocation may run in all (llvmpipe: 65535)
    private_max: int | None = None  # longer arrays of one invocation go to work-group memory (simt.RenderOptions)
    local_bytes: int = 16384  # maxComputeWorkgroupStorageSize
    scalars_in_storage: bool = False  # the scalars' struct in a read-only storage buffer, not a uniform (lavapipe)


@dataclass(frozen=True)
class WGSLRendered(Rendered):
    groups: tuple[int, int]  # dispatch_workgroups(x, y)
    buffers: tuple[int, ...]  # params bound as storage buffers, binding i = buffers[i]
    writable: tuple[bool, ...]  # per storage buffer: read_write (an output)
    scalars: tuple[int, ...]  # params in the uniform, in member order (binding len(buffers))
    tables: tuple = ()  # constant tables bound last, read-only, as table_words() gives them
    scalars_in_storage: bool = False  # the scalars' struct is a read-only storage buffer, not a uniform

    @property
    def uniform(self) -> bool:
        """Whether the kernel reads a uniform: its scalars, then its symbolic sizes (launch.symbolic), then
        the bounds check's limit (launch.size), then 1.0 and 0.0 (launch.identities)."""
        return (
            bool(self.scalars) or self.launch.size is not None or bool(self.launch.symbolic) or self.launch.identities
        )


def storage_dtype(dt: np.dtype, options: WGSLOptions) -> np.dtype:
    """How an array of dt lives in a WebGPU buffer; DtypeError where WGSL has no such type."""
    dt = np.dtype(dt)
    if is_narrow_float(dt):  # its bits (ir/narrow_floats.py), widened to a word as uint16 and uint8 are
        return STORAGE[np.dtype(f"uint{dt.itemsize * 8}")]
    if dt == np.float16 and not options.f16:
        raise DtypeError(
            f"float16 is not supported on {options.device}: the adapter lacks the shader-f16 feature "
            "(Vulkan/lavapipe has it, OpenGL does not); compute in float32 (x.astype(np.float32))"
        )
    if dt == np.uint64:
        raise DtypeError(
            f"uint64 is not supported on {options.device}: WGSL has no 64-bit types. NumPy sums and "
            "multiplies uint8/16/32 into uint64; ask for uint32 (x.sum(dtype=np.uint32)), which wraps "
            "past 2**32, or use another device"
        )
    if dt not in STORAGE:
        raise DtypeError(
            f"{dt.name} is not supported on {options.device}: WGSL has no 64-bit types; use "
            f"{'float32' if dt.kind == 'f' else 'int32' if dt.kind == 'i' else 'uint32'} "
            f"(x.astype(np.{'float32' if dt.kind == 'f' else 'int32' if dt.kind == 'i' else 'uint32'}))"
        )
    return STORAGE[dt]


def table_words(table) -> np.ndarray:
    """A constant table as the 32-bit words of its storage buffer: floats as the bits of their float32
    value (float16 is computed in f32), bools as 0/1, narrow integers widened."""
    v = table.values
    if table.dtype.kind == "f":
        return v.astype(np.float32).view(np.uint32)
    return v.astype(np.uint32 if table.dtype.kind in "bu" else np.int32)


class WGSL(CStyle):
    """WGSL's spelling of the C-style walk: `let`/`var` declarations, braces on every `if`, arrays as
    array<T, n>, work-group arrays at module scope."""

    types = TYPES
    barrier = "workgroupBarrier();"
    local_id = "i32(lid3.x)"
    halve = "{0} = {0} >> 1u"
    atomic_dialect = "wgsl"

    def let(self, name: str, ctype: str, expr: str) -> str:
        return f"let {name}: {ctype} = {expr};"

    def var(self, name: str, ctype: str, expr: str) -> str:
        return f"var {name}: {ctype} = {expr};"

    def loop(self, name: str, ctype: str, start: str, cond: str, step: str) -> str:
        return f"for (var {name}: {ctype} = {start}; {cond}; {step}) {{"

    def guard(self, cond: str, statement: str) -> str:
        return f"if ({cond}) {{ {statement} }}"

    def array(self, name: str, ctype: str, n: int, shared: bool) -> str:
        return f"var{'<workgroup>' if shared else ''} {name}: array<{ctype}, {n}>;"

    def index_type(self, bits: int) -> str:
        return "i32"  # a kernel with 64-bit indices is refused once its dtypes are checked


def render(kernel: KernelIR, options: WGSLOptions, by_value=frozenset(), symbolic=None) -> WGSLRendered:
    return _WGSLRender(kernel, options, by_value, symbolic).run()


class _WGSLRender(FloatArithmetic, _Render):
    """The shared walk with WGSL's types, literals and ALU (32-bit values, NaN tested on the bits), and
    its module: storage buffers with bindings, one uniform struct for the scalars, 2-D dispatch."""

    def __init__(self, kernel: KernelIR, options: WGSLOptions, by_value, symbolic=None):
        super().__init__(
            WGSL(),
            kernel,
            RenderOptions(
                device=options.device,
                fp64=False,
                max_local_size=options.max_local_size,
                group_max_rows=options.group_max_rows,
                max_loop=options.max_loop,
                always_check=True,
                fixed_local=True,
                private_max=options.private_max,
                local_bytes=options.local_bytes,
            ),
            by_value,
            symbolic=symbolic,
        )
        self.wo = options
        self._check_storage()
        iterations = self.mapping.loop_iterations()
        if options.max_loop is not None and iterations > options.max_loop:
            raise UnsupportedError(
                f"kernel {kernel.name} would run {iterations} loop iterations in one invocation; "
                f"{options.device} stops an invocation's loops after {options.max_loop} in all (Mesa's llvmpipe "
                "limit), which would "
                "give a wrong answer. Split the work (smaller arrays, or a reduction over fewer elements per "
                "row), or run it on another device"
            )
        if self.index_bits != 32:
            raise UnsupportedError(
                f"kernel {kernel.name} indexes more than 2**30 elements, beyond WGSL's 32-bit "
                f"integers on {options.device}"
            )
        self.module: list[str] = []  # var<workgroup> arrays
        # a storage buffer each: naga copies a dynamically indexed `const` array into every invocation
        self.tables = tuple(dict.fromkeys(x.arg for x in self.ins if x.op == KOp.TABLE))
        self.buffers = tuple(i for i in range(len(kernel.params)) if i not in self.by_value)
        total_buffers = len(self.buffers) + self.error_flag + len(self.tables)
        self.total_buffers = total_buffers
        self.scalars_in_storage = False  # decided with the declarations (run)
        if total_buffers > options.max_storage_buffers:
            raise UnsupportedError(
                f"kernel {kernel.name} reads and writes {total_buffers} arrays, and {options.device} allows "
                f"{options.max_storage_buffers} storage buffers per shader stage; split the computation into "
                "calls with fewer array arguments, or use another device"
            )
        groups_total = self.global_items // self.local_size
        self.nx = min(groups_total, options.max_workgroups)
        self.ny = -(-groups_total // self.nx) if self.nx else 1
        if self.ny > options.max_workgroups:
            raise UnsupportedError(
                f"kernel {kernel.name} needs {groups_total} workgroups, more than {options.device} can dispatch"
            )

    # -- dtypes --
    def _check_dtypes(self) -> None:
        """Checked by _check_storage, once the index values are known."""

    def _check_storage(self) -> None:
        """Every value and buffer must have a WGSL type (index arithmetic is i32; scalars by value arrive
        as 32-bit uniform members)."""
        for i, x in enumerate(self.ins):
            if x.dtype is not None and i not in self.index and not self._by_value_load(i) and x.op != KOp.PARAM:
                storage_dtype(x.dtype, self.wo)
        for p_i, p in enumerate(self.k.params):
            if p_i not in self.by_value:
                storage_dtype(p.dtype, self.wo)
        self._check_float64_scalars(self.wo.device, "WGSL has no 64-bit types")

    def ctype(self, dt: np.dtype) -> str:
        dt = np.dtype(dt)
        if dt == np.float16:
            return "f32"  # stored as f16, computed in f32 like the other devices
        if dt == np.float64:
            return "f32"  # a by-value Python float next to float32 data
        if dt == INDEX or dt == np.int64:
            return "i32"
        return TYPES[dt]

    def literal(self, value, dt: np.dtype, index: bool = False) -> str:
        dt = np.dtype(dt)
        if dt == np.bool_:
            return "true" if value else "false"
        if dt.kind == "f":
            v = float(value)
            if v != v:
                self._helper("tj_nan_f32")
                return "tj_nan_f32()"
            if v in (float("inf"), float("-inf")):
                self._helper("tj_inf_f32")
                return "tj_inf_f32()" if v > 0 else "(-tj_inf_f32())"
            return _f32(v)
        v = int(value)
        if index or self.ctype(dt) == "i32":
            return f"{v}i" if v != -(2**31) else "(-2147483647i - 1i)"
        return f"{v}u"

    def wrap(self, expr: str, dt: np.dtype) -> str:
        """An int8/16 or uint8/16 value computed in 32 bits, brought back to its width."""
        bits = WIDTH_BITS.get(np.dtype(dt))
        if bits is None:
            return expr
        if dt.kind == "i":
            return f"(({expr} << {32 - bits}u) >> {32 - bits}u)"
        return f"({expr} & {hex((1 << bits) - 1)}u)"

    def _helper(self, name: str) -> str:
        """Emit WGSL function `name` from wgsl_functions once, after the tj_ functions it calls."""
        if name not in self.helpers:
            text = wgsl_functions.BASE_HELPERS.get(name) or wgsl_functions.math_helpers()[name]
            for dep in dict.fromkeys(re.findall(r"\b(tj_\w+)\(", text)):
                if dep != name:
                    self._helper(dep)
            self.helpers[name] = text
        return name

    def _call(self, template: str, a: list[str]) -> str:
        for name in re.findall(r"\b(tj_\w+)\(", template):
            self._helper(name)
        return template.format(*a)

    # -- expressions --
    def wrap_int(self, op: str, a: str, b: str, dt: np.dtype) -> str:
        return self.wrap(f"({a} {op} {b})", dt)  # i32/u32 arithmetic wraps in WGSL

    def minmax(self, op: str, dt: np.dtype, a: str, b: str) -> str:
        if dt.kind == "f":  # NaN wins; each NaN test on its own, so no compiler can fold this into fmax
            cmp = ">" if op == KOp.MAX else "<"
            isnan = self._helper("tj_isnan_f32")
            return f"select(select(select({b}, {a}, {a} {cmp} {b}), {a}, {isnan}(f32({a}))), {b}, {isnan}(f32({b})))"
        if dt == np.bool_:
            return f"({a} || {b})" if op == KOp.MAX else f"({a} && {b})"
        return f"{op}({a}, {b})"

    def alu(self, i: int, op: str, a: list[str], dt: np.dtype) -> str:
        src = self.ins[self.ins[i].srcs[0]].value_dtype
        t = self.ctype(dt)
        if src == np.bool_ and op in BOOL_OPS:
            return BOOL_OPS[op].format(*a)
        if src == np.bool_ and op in BOOL_ORDER:  # WGSL orders no bools
            return BOOL_ORDER[op].format(*a)
        if op in COMPARISONS and src.kind == "f":  # shader compilers may assume no NaN: test the bits
            return self._call(FLOAT_COMPARISONS[op], a)
        if op in COMPARISONS:
            return f"({a[0]} {COMPARISONS[op]} {a[1]})"
        if op == KOp.WHERE:
            return f"select({a[2]}, {a[1]}, {a[0]})"
        plain = self.index_or_order(i, op, a, src)
        if plain is not None:
            return plain
        if op in (KOp.IDIV, KOp.MOD):
            return self.wrap(f"{self._arith(op, t)}({a[0]}, {a[1]})", dt)
        if op in (KOp.ISNAN, KOp.ISINF, KOp.SIGNBIT):
            return f"{self._helper(f'tj_{op}_f32')}(f32({a[0]}))"
        if dt.kind in "iu":
            if op in (KOp.ADD, KOp.SUB, KOp.MUL):
                return self.wrap_int(dict(add="+", sub="-", mul="*")[op], a[0], a[1], dt)
            if op == KOp.NEG:
                return self.wrap_int("-", self.literal(0, dt), a[0], dt)
            if op in (KOp.AND, KOp.OR, KOp.XOR):
                return f"({a[0]} {dict(zip(('and', 'or', 'xor'), '&|^'))[op]} {a[1]})"
            if op == KOp.INVERT:
                return self.wrap(f"(~{a[0]})", dt)
            if op == KOp.ABS:
                return self.wrap(f"abs({a[0]})", dt) if t == "i32" else a[0]
            if op == KOp.SIGN:
                return f"sign({a[0]})" if t == "i32" else f"select(0u, 1u, {a[0]} > 0u)"
            if op in (KOp.POW, KOp.FMOD):
                return self.wrap(f"{self._arith(op, t)}({a[0]}, {a[1]})", dt)
            if op in (KOp.SHL, KOp.SHR):
                return self.shift(op, a, dt)
            raise DtypeError(f"{op} is not defined for {dt.name}")
        value = self.float_alu(i, op, a)
        if value is not None:
            return value
        raise UnsupportedError(f"{op} has no WGSL rendering")

    def select(self, cond: str, a: str, b: str) -> str:
        return f"select({b}, {a}, {cond})"

    def is_nan(self, v: str) -> str:
        return f"{self._helper('tj_isnan_f32')}(f32({v}))"

    def shift(self, op: str, a: list[str], dt: np.dtype) -> str:
        """NumPy's shifts: by the type's width or more (or a negative amount) 0, or -1 for >> of a
        negative value. WGSL shifts by a u32 and masks it, so the range is tested first."""
        t, bits = self.ctype(dt), 8 * dt.itemsize
        zero, minus = ("0i", "-1i") if t == "i32" else ("0u", "0u")
        inside = f"(bitcast<u32>({a[1]}) < {bits}u)"
        amount = f"(bitcast<u32>({a[1]}) & 31u)"
        if op == KOp.SHL:
            return f"select({zero}, {self.wrap(f'({a[0]} << {amount})', dt)}, {inside})"
        over = f"select({zero}, {minus}, {a[0]} < {zero})" if t == "i32" else zero
        return f"select({over}, ({a[0]} >> {amount}), {inside})"

    def bitcast(self, v: str, dst: np.dtype) -> str:
        return f"bitcast<{self.ctype(dst)}>({v})"

    def cast(self, v: str, src: np.dtype, dst: np.dtype) -> str:
        t = self.ctype(dst)
        if dst == np.bool_ and self.ctype(src) == "f32":  # NaN is true; compilers may assume no NaN
            return f"({v} != 0.0f || {self._helper('tj_isnan_f32')}({v}))"
        if dst == np.bool_:
            zero = "0i" if self.ctype(src) == "i32" else "0u"
            return v if src == np.bool_ else f"({v} != {zero})"
        if src == np.bool_:
            return f"select({self.literal(0, dst)}, {self.literal(1, dst)}, {v})"
        if dst == np.float16:  # round to half and back: the value a float16 array would hold
            return f"f32(f16({v}))" if self.ctype(src) == "f32" else f"f32(f16(f32({v})))"
        if t == "u32" and self.ctype(src) == "i32" or t == "i32" and self.ctype(src) == "u32":
            return self.wrap(f"bitcast<{t}>({v})", dst)  # integer conversions wrap, as in C and NumPy
        if t == "u32" and self.ctype(src) == "f32":  # through i32, so negative values wrap like C
            return self.wrap(f"bitcast<u32>(i32({v}))", dst)
        return self.wrap(f"{t}({v})", dst)

    def _arith(self, op: str, t: str) -> str:
        """The WGSL function for `op` (mod, idiv, fmod, pow) on type t, emitted once with what it needs."""
        name = f"tj_{op}_{t}"
        if name not in self.helpers:
            text = wgsl_functions.arithmetic(op, t)
            for dep in dict.fromkeys(re.findall(r"\b(tj_\w+)\(", text)):
                arith = re.fullmatch(r"tj_(mod|idiv|fmod|pow)_f32", dep)
                if dep != name:
                    self._arith(arith.group(1), "f32") if arith else self._helper(dep)
            self.helpers[name] = text
        return name

    def render_local(self, i: int, x: Instr, a: list[str]) -> None:
        if i in self.mapping.sliced:  # this invocation's slice of a work-group array, through a pointer
            name = self.names[i]
            self.shared(
                f"var<workgroup> {name}: array<array<{self.local_storage(x.value_dtype)}, {x.arg[0]}>, "
                f"{self.local_size}>;"
            )
            self.out(f"let {name}_p = &{name}[lid3.x];")
            self.names[i] = f"(*{name}_p)"
            return
        super().render_local(i, x, a)

    def bound(self, i: int, v: str) -> str:
        dt, (size, fault) = self.ins[self.ins[i].srcs[0]].value_dtype, self.ins[i].arg
        return f"{self._helper('tj_bound_' + self.ctype(dt))}({v}, {self.literal(size, INDEX, True)}, {fault.code}i)"

    # -- the module around the shared walk --
    def shared(self, line: str) -> None:
        self.module.append(line)

    def global_index(self) -> tuple[str, int]:
        if self.mode == "group":
            return "i32(wid.x + wid.y * nwg.x)", self.nx * self.ny
        # the dispatch's width comes from num_workgroups, the size from the uniform: neither is in the source
        return f"i32(gid.x + gid.y * nwg.x * {self.local_size}u)", self.nx * self.ny * self.local_size

    def size_value(self) -> str:
        return f"tj_scalars.{SIZE_PARAM}"

    def declare_table(self, table) -> None:
        """Tables are storage buffers bound after the others (see table_words)."""

    def local_storage(self, dt: np.dtype) -> str:
        return "u32" if dt == np.bool_ else self.ctype(dt)

    def tree_storage(self, dt: np.dtype) -> str:
        return self.ctype(dt)

    def local_value(self, ref: str, dt: np.dtype) -> str:
        return f"({ref} != 0u)" if dt == np.bool_ else ref

    def local_stored(self, val: str, dt: np.dtype) -> str:
        return f"select(0u, 1u, {val})" if dt == np.bool_ else val

    def run(self) -> WGSLRendered:
        buffers, scalars = self.buffers, tuple(sorted(self.by_value))
        self.walk()
        decl = []
        updated = atomics.updated_params(self.k)
        for b, p_i in enumerate(buffers):
            p = self.k.params[p_i]
            st = TYPES[STORAGE[p.dtype]] if STORAGE[p.dtype] != np.float16 else "f16"
            if p_i in updated:
                atomics.check("wgsl", p.dtype, self.wo.device)
                st = atomics.wgsl_element(p.dtype)
            access = "read_write" if p.output else "read"
            decl.append(f"@group(0) @binding({b}) var<storage, {access}> {p.name}: array<{st}>;")
        symbolic = self.symbolic_arguments()
        uniform = bool(scalars) or self.size_checked or bool(symbolic) or self.uses_identities
        if uniform:
            members = [f"{self.k.params[i].name}: {self._uniform_type(self.k.params[i].dtype)}" for i in scalars]
            members += [
                f"{name}: {self._uniform_type(dt)}"
                for (_, name), (dt, _) in zip(sorted(self.symbolic.items()), symbolic)
            ]
            members += [f"{SIZE_PARAM}: i32"] if self.size_checked else []
            members += [f"{ONE.split('.')[1]}: f32", f"{ZERO.split('.')[1]}: f32"] if self.uses_identities else []
            decl.append(f"struct TjScalars {{ {', '.join(members)} }};")
            # (where the storage buffers are all taken, a uniform: lavapipe may recompile such a kernel)
            self.scalars_in_storage = self.wo.scalars_in_storage and self.total_buffers < self.wo.max_storage_buffers
            space = "storage, read" if self.scalars_in_storage else "uniform"
            decl.append(f"@group(0) @binding({len(buffers)}) var<{space}> tj_scalars: TjScalars;")
        if self.error_flag:  # the error record (see tj_fault)
            decl.append(
                f"@group(0) @binding({len(buffers) + uniform}) var<storage, read_write> tj_error: array<atomic<i32>>;"
            )
        first = len(buffers) + uniform + self.error_flag
        for b, t in enumerate(self.tables):
            elem = "i32" if table_words(t).dtype == np.int32 else "u32"
            decl.append(f"@group(0) @binding({first + b}) var<storage, read> {t.name}: array<{elem}>;")
        body = "\n".join(self.lines)
        # only a kernel that has float16 values enables f16: adapters without shader-f16 (OpenGL) reject it
        uses_f16 = any(x.dtype == np.float16 for x in self.ins) or any(p.dtype == np.float16 for p in self.k.params)
        enable = ["enable f16;"] if uses_f16 else []
        header = "\n".join(enable + decl + self.module)
        signature = (
            f"@compute @workgroup_size({self.local_size})\nfn {self.k.name}(@builtin(global_invocation_id) gid: "
            "vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, "
            "@builtin(num_workgroups) nwg: vec3<u32>) {"
        )
        source = "\n\n".join([header, *self.helpers.values(), f"{signature}\n{body}\n}}\n"])
        launch = Launch(
            self.mode,
            self.local_size,
            self.global_items,
            scalars,
            self.error_flag,
            self.local_size,
            self.k.global_size if self.size_checked else None,
            symbolic=symbolic,
            identities=self.uses_identities,
        )
        writable = tuple(self.k.params[p].output for p in buffers)
        return WGSLRendered(
            self.k.name,
            source,
            launch,
            (self.nx, self.ny),
            buffers,
            writable,
            scalars,
            self.tables,
            self.scalars_in_storage,
        )

    def takes(self, slot) -> bool:
        """32-bit uniform members only: an index value, or a constant of a 32-bit type (or float64, a
        weak scalar computed in f32)."""
        x = self.ins[slot[0]]
        if x.op == KOp.RANGE or x.dtype.kind == "f" or x.dtype.itemsize == 4:
            return True
        if not hasattr(self, "_index_slots"):  # (asked before the Mapping, which has them too, exists)
            self._index_slots = index_values(self.ins)
        return slot[0] in self._index_slots

    def argument(self, name: str) -> str:
        return f"tj_scalars.{name}"

    def _uniform_type(self, dt: np.dtype | str) -> str:  # a dtype or its name (symbolic_arguments')
        return {"b": "u32", "i": "i32", "u": "u32", "f": "f32"}[np.dtype(dt).kind]

    def _scalar(self, s, dt: np.dtype) -> str:
        p = self.k.params[self.ins[s[0]].arg]
        v = f"tj_scalars.{p.name}"
        if dt == np.bool_:
            return f"({v} != 0u)"
        return v

    def _load(self, s, dt: np.dtype) -> str:
        if self.ins[s[0]].op == KOp.PARAM and self.ins[s[0]].arg in self.by_value:
            return self._scalar(s, dt)
        ptr, idx = self.names[s[0]], self.names[s[1]]
        if self.ins[s[0]].op == KOp.TABLE and dt.kind == "f":
            return f"bitcast<f32>({ptr}[{idx}])"  # see table_words
        if dt == np.float16 and self.ins[s[0]].op == KOp.LOCAL:
            return f"{ptr}[{idx}]"
        return self.read(ptr, idx, dt)

    def read(self, ptr: str, idx: str, dt: np.dtype) -> str:
        if dt == np.bool_:
            return f"({ptr}[{idx}] != 0u)"
        if dt == np.float16:
            return f"f32({ptr}[{idx}])"
        return f"{ptr}[{idx}]"

    def _store(self, s, a) -> str:
        ptr, idx, val = a
        dt = self.ins[s[2]].dtype
        if dt == np.float16 and self.ins[s[0]].op == KOp.LOCAL:
            return f"{ptr}[{idx}] = {val};"
        return self.write(ptr, idx, val, dt)

    def write(self, ptr: str, idx: str, val: str, dt: np.dtype) -> str:
        if dt == np.bool_:
            return f"{ptr}[{idx}] = select(0u, 1u, {val});"
        if dt == np.float16:
            return f"{ptr}[{idx}] = f16({val});"
        return f"{ptr}[{idx}] = {val};"
