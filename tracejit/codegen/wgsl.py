"""WGSL renderer: kernel IR -> one WebGPU compute shader. simt.py decides the launch shape (a thread per
row, or a workgroup per long row with a var<workgroup> tree and workgroupBarrier()).

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

from ..errors import DtypeError, UnsupportedError
from ..ir.kernel_ir import INDEX, Kernel
from ..ir.ops import ROUNDS_TO_FLOAT16
from . import wgsl_functions
from .wgsl_functions import f32_literal as _f32
from .cstyle import BOOL_OPS, COMPARISONS
from .simt import Launch, Mapping, RenderOptions, positive_const

TYPES = {np.dtype(k): v for k, v in {
    "bool": "bool", "int8": "i32", "int16": "i32", "int32": "i32", "uint8": "u32", "uint16": "u32",
    "uint32": "u32", "float16": "f16", "float32": "f32"}.items()}
STORAGE = {np.dtype(k): np.dtype(v) for k, v in {   # a buffer's element type on the device
    "bool": "uint32", "int8": "int32", "int16": "int32", "int32": "int32", "uint8": "uint32",
    "uint16": "uint32", "uint32": "uint32", "float16": "float16", "float32": "float32"}.items()}
# float ops -> WGSL; tj_ functions come from wgsl_functions: WGSL's exp, log, tanh, the inverse and
# hyperbolic functions are accurate to thousands of ulps on some devices (or lose tiny values), it has
# no erf, expm1, log1p, log10, cbrt, hypot or copysign, and x / 0.0 may be 0 where it assumes no inf
FLOAT_OPS = {"neg": "(-{0})", "add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})",
             "div": "tj_div_f32({0}, {1})", "recip": "tj_div_f32(1.0f, {0})", "abs": "abs({0})",
             "rint": "round({0})", "sign": "select(select(sign({0}), 0.0f, {0} == 0.0f), {0}, tj_isnan_f32({0}))",   # NaN, +0 as NumPy
             **{op: op + "({0})" for op in ("floor", "ceil", "trunc", "sqrt", "exp2", "sin", "cos", "tan")},
             **{op: f"tj_{op}_f32({{0}})" for op in ("exp", "expm1", "log", "log2", "log1p", "log10", "tanh", "erf", "cbrt",
                                                      "arcsin", "arccos", "arctan", "sinh", "cosh", "arcsinh",
                                                      "arccosh", "arctanh")},
             **{op: f"tj_{op}_f32({{0}}, {{1}})" for op in ("hypot", "copysign", "arctan2", "ldexp")}}
FLOAT_COMPARISONS = {"lt": "({0} < {1})", "le": "({0} <= {1} && !tj_isnan_f32({0}) && !tj_isnan_f32({1}))",
                     "eq": "({0} == {1} && !tj_isnan_f32({0}) && !tj_isnan_f32({1}))",
                     "ne": "({0} != {1} || tj_isnan_f32({0}) || tj_isnan_f32({1}))"}
BOOL_ORDER = {"lt": "(!{0} && {1})", "le": "(!{0} || {1})"}
WIDTH_BITS = {np.dtype("int8"): 8, np.dtype("int16"): 16, np.dtype("uint8"): 8, np.dtype("uint16"): 16}


@dataclass(frozen=True)
class WGSLOptions:
    device: str = "webgpu"
    f16: bool = False                 # the adapter has shader-f16
    max_local_size: int = 256         # maxComputeInvocationsPerWorkgroup
    max_workgroups: int = 65535       # maxComputeWorkgroupsPerDimension
    max_storage_buffers: int = 8      # maxStorageBuffersPerShaderStage


@dataclass(frozen=True)
class WGSLRendered:
    name: str
    source: str
    launch: Launch
    groups: tuple[int, int]           # dispatch_workgroups(x, y)
    buffers: tuple[int, ...]          # params bound as storage buffers, binding i = buffers[i]
    writable: tuple[bool, ...]        # per storage buffer: read_write (an output)
    scalars: tuple[int, ...]          # params in the uniform, in member order (binding len(buffers))
    tables: tuple = ()                # constant tables bound last, read-only, as table_words() gives them


def storage_dtype(dt: np.dtype, options: WGSLOptions) -> np.dtype:
    """How an array of dt lives in a WebGPU buffer; DtypeError where WGSL has no such type."""
    dt = np.dtype(dt)
    if dt == np.float16 and not options.f16:
        raise DtypeError(f"float16 is not supported on {options.device}: the adapter lacks the shader-f16 feature "
                         "(Vulkan/lavapipe has it, OpenGL does not); compute in float32 (x.astype(np.float32))")
    if dt == np.uint64:
        raise DtypeError(f"uint64 is not supported on {options.device}: WGSL has no 64-bit types. NumPy sums and "
                         "multiplies uint8/16/32 into uint64; ask for uint32 (x.sum(dtype=np.uint32)), which wraps "
                         "past 2**32, or use another device")
    if dt not in STORAGE:
        raise DtypeError(f"{dt.name} is not supported on {options.device}: WGSL has no 64-bit types; use "
                         f"{'float32' if dt.kind == 'f' else 'int32' if dt.kind == 'i' else 'uint32'} "
                         f"(x.astype(np.{'float32' if dt.kind == 'f' else 'int32' if dt.kind == 'i' else 'uint32'}))")
    return STORAGE[dt]


def table_words(table) -> np.ndarray:
    """A constant table as the 32-bit words of its storage buffer: floats as the bits of their float32
    value (float16 is computed in f32), bools as 0/1, narrow integers widened."""
    v = table.values
    if table.dtype.kind == "f":
        return v.astype(np.float32).view(np.uint32)
    return v.astype(np.uint32 if table.dtype.kind in "bu" else np.int32)


def render(kernel: Kernel, options: WGSLOptions, by_value=frozenset()) -> WGSLRendered:
    return _Render(kernel, options, frozenset(i for i in by_value if not kernel.params[i].output)).run()


class _Render:
    def __init__(self, kernel: Kernel, options: WGSLOptions, by_value: frozenset[int]):
        self.k, self.o, self.ins, self.by_value = kernel, options, kernel.instrs, by_value
        m = Mapping(kernel, RenderOptions(device=options.device, fp64=False, max_local_size=options.max_local_size))
        self.nests, self.mode, self.local_size, self.global_items = m.nests, m.mode, m.local_size, m.global_items
        self.index, self.nonneg = m.index, m.nonneg
        self._check_dtypes()
        if m.index_bits != 32:
            raise UnsupportedError(f"kernel {kernel.name} indexes more than 2**30 elements, beyond WGSL's 32-bit "
                                   f"integers on {options.device}")
        self.names = [""] * len(self.ins)
        self.lines: list[str] = []
        self.module: list[str] = []           # var<workgroup> arrays
        self.helpers: dict[str, str] = {}
        self.depth = 1
        self.error_flag = any(x.op == "pow" and x.dtype.kind == "i" for x in self.ins)
        # a storage buffer each: naga copies a dynamically indexed `const` array into every invocation
        self.tables = tuple(dict.fromkeys(x.arg for x in self.ins if x.op == "table"))

    # -- dtypes --
    def _check_dtypes(self) -> None:
        """Every value and buffer must have a WGSL type (index arithmetic is i32; scalars by value arrive
        as 32-bit uniform members)."""
        for i, x in enumerate(self.ins):
            if x.dtype is not None and i not in self.index and not self._by_value_load(i) and x.op != "param":
                storage_dtype(x.dtype, self.o)
        for p_i, p in enumerate(self.k.params):
            if p_i not in self.by_value:
                storage_dtype(p.dtype, self.o)

    def _by_value_load(self, i: int) -> bool:
        x = self.ins[i]
        return x.op == "load" and self.ins[x.srcs[0]].op == "param" and self.ins[x.srcs[0]].arg in self.by_value

    def ctype(self, dt: np.dtype) -> str:
        dt = np.dtype(dt)
        if dt == np.float16:
            return "f32"          # stored as f16, computed in f32 like the other devices
        if dt == np.float64:
            return "f32"          # a by-value Python float next to float32 data
        if dt == INDEX or dt == np.int64:
            return "i32"
        return TYPES[dt]

    def vtype(self, i: int) -> str:
        return "i32" if i in self.index else self.ctype(self.ins[i].dtype)

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
            return f"{v}i" if v != -2 ** 31 else "(-2147483647i - 1i)"
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
    def combine(self, op: str, dt: np.dtype, a: str, b: str) -> str:
        if dt == np.bool_:
            return f"({a} || {b})" if op in ("sum", "max") else f"({a} && {b})"
        if op in ("sum", "prod"):
            return self.wrap(f"({a} {'+' if op == 'sum' else '*'} {b})", dt)
        return self.minmax(op, dt, a, b)

    def minmax(self, op: str, dt: np.dtype, a: str, b: str) -> str:
        if dt.kind == "f":   # NaN wins; each NaN test on its own, so no compiler can fold this into fmax
            cmp = ">" if op == "max" else "<"
            isnan = self._helper("tj_isnan_f32")
            return f"select(select(select({b}, {a}, {a} {cmp} {b}), {a}, {isnan}(f32({a}))), {b}, {isnan}(f32({b})))"
        if dt == np.bool_:
            return f"({a} || {b})" if op == "max" else f"({a} && {b})"
        return f"{op}({a}, {b})"

    def alu(self, i: int, op: str, a: list[str], dt: np.dtype) -> str:
        src = self.ins[self.ins[i].srcs[0]].dtype
        t = self.ctype(dt)
        if src == np.bool_ and op in BOOL_OPS:
            return BOOL_OPS[op].format(*a)
        if src == np.bool_ and op in BOOL_ORDER:    # WGSL orders no bools
            return BOOL_ORDER[op].format(*a)
        if op in COMPARISONS and src.kind == "f":   # shader compilers may assume no NaN: test the bits
            return self._call(FLOAT_COMPARISONS[op], a)
        if op in COMPARISONS:
            return f"({a[0]} {COMPARISONS[op]} {a[1]})"
        if op == "where":
            return f"select({a[2]}, {a[1]}, {a[0]})"
        if i in self.index and op in ("add", "sub", "mul"):
            return f"({a[0]} {dict(add='+', sub='-', mul='*')[op]} {a[1]})"
        if op in ("max", "min"):
            return self.minmax(op, src, a[0], a[1])
        if op in ("idiv", "mod"):
            if i in self.index and self.ins[i].srcs[0] in self.nonneg and positive_const(self.ins, self.ins[i].srcs[1]):
                return f"({a[0]} {'/' if op == 'idiv' else '%'} {a[1]})"
            return self.wrap(f"{self.helper(op, t)}({a[0]}, {a[1]})", dt)
        if op in ("isnan", "isinf", "signbit"):
            return f"{self._helper(f'tj_{op}_f32')}(f32({a[0]}))"
        if dt.kind in "iu":
            if op in ("add", "sub", "mul"):
                return self.wrap(f"({a[0]} {dict(add='+', sub='-', mul='*')[op]} {a[1]})", dt)
            if op == "neg":
                return self.wrap(f"(0{'i' if t == 'i32' else 'u'} - {a[0]})", dt)
            if op in ("and", "or", "xor"):
                return f"({a[0]} {dict(zip(('and', 'or', 'xor'), '&|^'))[op]} {a[1]})"
            if op == "invert":
                return self.wrap(f"(~{a[0]})", dt)
            if op == "abs":
                return self.wrap(f"abs({a[0]})", dt) if t == "i32" else a[0]
            if op == "sign":
                return f"sign({a[0]})" if t == "i32" else f"select(0u, 1u, {a[0]} > 0u)"
            if op in ("pow", "fmod"):
                return self.wrap(f"{self.helper(op, t)}({a[0]}, {a[1]})", dt)
            if op in ("shl", "shr"):
                return self.shift(op, a, dt)
            raise DtypeError(f"{op} is not defined for {dt.name}")
        if op in ("pow", "fmod"):
            return f"{self.helper(op, 'f32')}({a[0]}, {a[1]})"
        if op == "mul" and any(self._zero_const(j) for j in self.ins[i].srcs):
            # inf * 0 and NaN * 0 are NaN; shader compilers fold x * 0.0 to 0.0
            return self._call("select(({0} * {1}), tj_nan_f32(), !tj_isfinite_f32({0}) || !tj_isfinite_f32({1}))", a)
        if op in FLOAT_OPS:
            return self._call(FLOAT_OPS[op], a)
        raise UnsupportedError(f"{op} has no WGSL rendering")

    def _zero_const(self, j: int) -> bool:
        x = self.ins[j]
        return x.op == "const" and x.arg == 0

    def shift(self, op: str, a: list[str], dt: np.dtype) -> str:
        """NumPy's shifts: by the type's width or more (or a negative amount) 0, or -1 for >> of a
        negative value. WGSL shifts by a u32 and masks it, so the range is tested first."""
        t, bits = self.ctype(dt), 8 * dt.itemsize
        zero, minus = (("0i", "-1i") if t == "i32" else ("0u", "0u"))
        inside = f"(bitcast<u32>({a[1]}) < {bits}u)"
        amount = f"(bitcast<u32>({a[1]}) & 31u)"
        if op == "shl":
            return f"select({zero}, {self.wrap(f'({a[0]} << {amount})', dt)}, {inside})"
        over = f"select({zero}, {minus}, {a[0]} < {zero})" if t == "i32" else zero
        return f"select({over}, ({a[0]} >> {amount}), {inside})"

    def cast(self, v: str, src: np.dtype, dst: np.dtype) -> str:
        t = self.ctype(dst)
        if dst == np.bool_ and self.ctype(src) == "f32":   # NaN is true; compilers may assume no NaN
            return f"({v} != 0.0f || {self._helper('tj_isnan_f32')}({v}))"
        if dst == np.bool_:
            zero = "0i" if self.ctype(src) == "i32" else "0u"
            return v if src == np.bool_ else f"({v} != {zero})"
        if src == np.bool_:
            return f"select({self.literal(0, dst)}, {self.literal(1, dst)}, {v})"
        if dst == np.float16:   # round to half and back: the value a float16 array would hold
            return f"f32(f16({v}))" if self.ctype(src) == "f32" else f"f32(f16(f32({v})))"
        if t == "u32" and self.ctype(src) == "i32" or t == "i32" and self.ctype(src) == "u32":
            return self.wrap(f"bitcast<{t}>({v})", dst)    # integer conversions wrap, as in C and NumPy
        if t == "u32" and self.ctype(src) == "f32":        # through i32, so negative values wrap like C
            return self.wrap(f"bitcast<u32>(i32({v}))", dst)
        return self.wrap(f"{t}({v})", dst)

    def helper(self, op: str, t: str) -> str:
        """The WGSL function for `op` (mod, idiv, fmod, pow) on type t, emitted once with what it needs."""
        name = f"tj_{op}_{t}"
        if name not in self.helpers:
            text = wgsl_functions.arithmetic(op, t)
            for dep in dict.fromkeys(re.findall(r"\b(tj_\w+_f32)\(", text)):
                arith = re.fullmatch(r"tj_(mod|idiv|fmod|pow)_f32", dep)
                if dep != name:
                    self.helper(arith.group(1), "f32") if arith else self._helper(dep)
            self.helpers[name] = text
        return name

    # -- emission --
    def out(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def run(self) -> WGSLRendered:
        ins, group = self.ins, self.mode == "group"
        buffers = tuple(i for i in range(len(self.k.params)) if i not in self.by_value)
        scalars = tuple(sorted(self.by_value))
        total_buffers = len(buffers) + self.error_flag + len(self.tables)
        if total_buffers > self.o.max_storage_buffers:
            raise UnsupportedError(
                f"kernel {self.k.name} reads and writes {total_buffers} arrays, and {self.o.device} allows "
                f"{self.o.max_storage_buffers} storage buffers per shader stage; split the computation into "
                "calls with fewer array arguments, or use another device")
        decl = []
        for b, p_i in enumerate(buffers):
            p = self.k.params[p_i]
            st = TYPES[STORAGE[p.dtype]] if STORAGE[p.dtype] != np.float16 else "f16"
            access = "read_write" if p.output else "read"
            decl.append(f"@group(0) @binding({b}) var<storage, {access}> {p.name}: array<{st}>;")
        if scalars:
            members = ", ".join(f"{self.k.params[i].name}: {self._uniform_type(self.k.params[i].dtype)}" for i in scalars)
            decl.append(f"struct TjScalars {{ {members} }};")
            decl.append(f"@group(0) @binding({len(buffers)}) var<uniform> tj_scalars: TjScalars;")
        if self.error_flag:
            decl.append(f"@group(0) @binding({len(buffers) + bool(scalars)}) var<storage, read_write> tj_error: array<i32>;")
        first = len(buffers) + bool(scalars) + self.error_flag
        for b, t in enumerate(self.tables):
            elem = "i32" if table_words(t).dtype == np.int32 else "u32"
            decl.append(f"@group(0) @binding({first + b}) var<storage, read> {t.name}: array<{elem}>;")
        groups_total = self.k.global_size if group else self.global_items // self.local_size
        nx = min(groups_total, self.o.max_workgroups)
        ny = -(-groups_total // nx) if nx else 1
        if ny > self.o.max_workgroups:
            raise UnsupportedError(f"kernel {self.k.name} needs {groups_total} workgroups, more than {self.o.device} "
                                   "can dispatch")
        if group:
            # one tree per accumulator dtype (float16 and float32 sums share float32's)
            for adt in dict.fromkeys(self._acc_dtype(ins[a].dtype) for n in self.nests if n.kind == "reduce"
                                     for a in n.accs):
                self.module.append(f"var<workgroup> tj_red_{adt.name}: array<{self.ctype(adt)}, {self.local_size}>;")
            for i, x in enumerate(ins):
                if x.op == "local":
                    self.module.append(f"var<workgroup> v{i}: array<{self._local_type(x.dtype)}, {x.arg[0]}>;")
            self.out("let lid = i32(lid3.x);")
        self._body(group, nx)
        body = "\n".join(self.lines)
        # only a kernel that has float16 values enables f16: adapters without shader-f16 (OpenGL) reject it
        uses_f16 = any(x.dtype == np.float16 for x in ins) or any(p.dtype == np.float16 for p in self.k.params)
        enable = ["enable f16;"] if uses_f16 else []
        header = "\n".join(enable + decl + self.module)
        signature = (f"@compute @workgroup_size({self.local_size})\nfn {self.k.name}(@builtin(global_invocation_id) gid: "
                     "vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {")
        source = "\n\n".join([header, *self.helpers.values(), f"{signature}\n{body}\n}}\n"])
        launch = Launch(self.mode, self.local_size, self.global_items, scalars, self.error_flag)
        writable = tuple(self.k.params[p].output for p in buffers)
        return WGSLRendered(self.k.name, source, launch, (nx, ny), buffers, writable, scalars, self.tables)

    def _uniform_type(self, dt: np.dtype) -> str:
        return {"b": "u32", "i": "i32", "u": "u32", "f": "f32"}[np.dtype(dt).kind]

    def _local_type(self, dt: np.dtype) -> str:
        return "u32" if dt == np.bool_ else self.ctype(dt)

    def _acc_dtype(self, dt: np.dtype) -> np.dtype:
        return np.dtype("float32") if dt == np.float16 else dt

    def _body(self, group: bool, nx: int) -> None:
        ins = self.ins
        nest_at = {n.ranges[0]: n for n in self.nests}
        inner = {r for n in self.nests if group for r in n.ranges[1:]}
        closes = {n.end: n for n in self.nests}
        level = 0
        for i, x in enumerate(ins):
            op, s, dt = x.op, x.srcs, x.dtype
            a = [self.names[j] for j in s]
            name = self.names[i] = f"v{i}"
            if op == "param":
                self.names[i] = self.k.params[x.arg].name
            elif op == "const":
                self.names[i] = self.literal(x.arg, dt, i in self.index)
            elif op == "table":
                self.names[i] = x.arg.name
            elif op == "global":
                n = self.literal(self.k.global_size, INDEX, True)
                if group:
                    self.out(f"let {name}: i32 = i32(wid.x + wid.y * {nx}u);")
                    if nx * (-(-self.k.global_size // nx)) != self.k.global_size:
                        self.out(f"if ({name} >= {n}) {{ return; }}")   # uniform: the whole workgroup leaves
                else:
                    self.out(f"let {name}: i32 = i32(gid.x + gid.y * {nx * self.local_size}u);")
                    self.out(f"if ({name} >= {n}) {{ return; }}")
            elif op == "range":
                level += 1
                n = nest_at.get(i)
                if group and n is not None:
                    f = f"f{i}"
                    self.out(f"for (var {f}: i32 = lid; {f} < {self.literal(n.extent, INDEX, True)}; {f} += "
                             f"{self.local_size}i) {{")
                    self.depth += 1
                    stride = n.extent
                    for r, e in zip(n.ranges, n.extents):
                        stride //= e
                        expr = f if stride == 1 else f"({f} / {stride}i)"
                        if r != n.ranges[0]:
                            expr = f"({expr} % {e}i)"
                        self.out(f"let v{r}: i32 = {expr};")
                elif i not in inner:
                    self.out(f"for (var {name}: i32 = 0i; {name} < {self.literal(x.arg[0], INDEX, True)}; {name}++) {{")
                    self.depth += 1
            elif op == "endrange":
                level -= 1
                if s[0] not in inner:
                    self.depth -= 1
                    self.out("}")
                if group and i in closes:
                    self._after_nest(closes[i])
            elif op == "acc":
                adt = self._acc_dtype(dt)
                self.out(f"var {name}: {self.ctype(adt)} = {self.literal(x.arg[1], adt)};")
            elif op == "update":
                target = ins[s[0]]
                red = target.arg[0] if target.op == "acc" else target.arg[1]
                if target.op == "acc":
                    self.out(f"v{s[0]} = {self.combine(red, self._acc_dtype(target.dtype), f'v{s[0]}', a[-1])};")
                else:
                    ref = f"{a[0]}[{a[1]}]"
                    cur = f"({ref} != 0u)" if target.dtype == np.bool_ else ref
                    val = self.combine(red, self._acc_dtype(target.dtype), cur, a[-1])
                    self.out(f"{ref} = {self._to_local(val, target.dtype)};")
            elif op == "local":
                if not group:
                    self.out(f"var {name}: array<{self._local_type(dt)}, {x.arg[0]}>;")
            elif op == "load" and self._by_value_load(i):
                self.names[i] = self._scalar(s, dt)
            elif op == "load":
                self.out(f"let {name}: {self.ctype(dt)} = {self._load(s, dt)};")
            elif op == "store":
                guard = group and level == 0
                line = self._store(s, a)
                self.out(f"if (lid == 0i) {{ {line} }}" if guard else line)
                if guard and ins[s[0]].op == "local":
                    self.out("workgroupBarrier();")
            elif op == "cast":
                self.out(f"let {name}: {self.ctype(dt)} = {self.cast(a[0], ins[s[0]].dtype, dt)};")
            elif dt == np.float16 and op in ROUNDS_TO_FLOAT16:   # computed in f32, rounded like NumPy's loops
                self.out(f"let {name}: f32 = f32(f16({self.alu(i, op, a, dt)}));")
            else:
                self.out(f"let {name}: {self.vtype(i)} = {self.alu(i, op, a, dt)};")

    def _after_nest(self, n) -> None:
        stored_local = any(self.ins[j].op == "store" and self.ins[self.ins[j].srcs[0]].op == "local"
                           for j in range(n.ranges[0], n.end))
        if n.kind != "reduce" or not n.accs:
            if stored_local:
                self.out("workgroupBarrier();")
            return
        for acc in n.accs:
            dt = self._acc_dtype(self.ins[acc].dtype)
            red = self.ins[acc].arg[0]
            buf = f"tj_red_{dt.name}"
            self.out(f"{buf}[lid] = v{acc};")
            self.out("workgroupBarrier();")
            self.out(f"for (var s: i32 = {self.local_size // 2}i; s > 0i; s = s >> 1u) {{")
            self.out(f"    if (lid < s) {{ {buf}[lid] = {self.combine(red, dt, f'{buf}[lid]', f'{buf}[lid + s]')}; }}")
            self.out("    workgroupBarrier();")
            self.out("}")
            self.out(f"v{acc} = {buf}[0];")
            self.out("workgroupBarrier();")

    def _scalar(self, s, dt: np.dtype) -> str:
        p = self.k.params[self.ins[s[0]].arg]
        v = f"tj_scalars.{p.name}"
        if dt == np.bool_:
            return f"({v} != 0u)"
        return v

    def _load(self, s, dt: np.dtype) -> str:
        ptr, idx = self.names[s[0]], self.names[s[1]]
        if self.ins[s[0]].op == "table" and dt.kind == "f":
            return f"bitcast<f32>({ptr}[{idx}])"   # see table_words
        if dt == np.bool_:
            return f"({ptr}[{idx}] != 0u)"
        if dt == np.float16 and self.ins[s[0]].op != "local":
            return f"f32({ptr}[{idx}])"
        return f"{ptr}[{idx}]"

    def _to_local(self, val: str, dt: np.dtype) -> str:
        return f"select(0u, 1u, {val})" if dt == np.bool_ else val

    def _store(self, s, a) -> str:
        ptr, idx, val = a
        dt = self.ins[s[2]].dtype
        if dt == np.bool_:
            return f"{ptr}[{idx}] = select(0u, 1u, {val});"
        if dt == np.float16 and self.ins[s[0]].op != "local":
            return f"{ptr}[{idx}] = f16({val});"
        return f"{ptr}[{idx}] = {val};"
