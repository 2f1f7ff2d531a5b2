"""Scalar LLVM IR written as Python arithmetic: `x * y + 1.0` on Values appends an fmul and an fadd to the
function being built. The math functions of codegen/cpu/llvm_math.py are written with it; codegen/cpu/numba_ir.py
makes them Numba intrinsics, and codegen/cpu/native.py calls them from the kernels it renders.

Every float operation carries the "contract" flag alone, so Numba's fast-math pass leaves it as written
and no caller's flags (a reduction's "reassoc") can undo a Cody-Waite reduction or a two-step scaling:
the order written is the order computed. Selects replace branches, so loops that call these vectorise."""

from __future__ import annotations

from llvmlite import ir

from tracejit.codegen.cpu.host import host_cpu

STRICT = ("contract",)
F32, F64 = ir.FloatType(), ir.DoubleType()
I1, I16, I32, I64 = ir.IntType(1), ir.IntType(16), ir.IntType(32), ir.IntType(64)
_FLOATS = (ir.FloatType, ir.DoubleType)


class Value:
    """An LLVM value inside the function being built; Python numbers mixed with it become constants of
    its type. Integers are signed (shifts right are arithmetic); comparisons give an i1 Value, which
    select() takes. A Value has no truth value: `a if c else b` would not be code, so it raises."""

    __slots__ = ("b", "v")

    def __init__(self, builder: ir.IRBuilder, value):
        self.b, self.v = builder, value

    @property
    def is_float(self) -> bool:
        return isinstance(self.v.type, _FLOATS)

    def __bool__(self):
        raise TypeError("a Value is computed at run time: use select(condition, a, b), not if/else")

    def _binary(self, other, float_op: str, int_op: str | None, swap: bool = False) -> Value:
        a, c = self.v, lift(other, self.v.type)
        if swap:
            a, c = c, a
        if self.is_float:
            return Value(self.b, getattr(self.b, float_op)(a, c, flags=STRICT))
        if int_op is None:
            raise TypeError(f"{float_op} is for floats; got {self.v.type}")
        return Value(self.b, getattr(self.b, int_op)(a, c))

    def __add__(self, o):
        return self._binary(o, "fadd", "add")

    def __radd__(self, o):
        return self._binary(o, "fadd", "add", swap=True)

    def __sub__(self, o):
        return self._binary(o, "fsub", "sub")

    def __rsub__(self, o):
        return self._binary(o, "fsub", "sub", swap=True)

    def __mul__(self, o):
        return self._binary(o, "fmul", "mul")

    def __rmul__(self, o):
        return self._binary(o, "fmul", "mul", swap=True)

    def __truediv__(self, o):
        return self._binary(o, "fdiv", None)

    def __rtruediv__(self, o):
        return self._binary(o, "fdiv", None, swap=True)

    def __and__(self, o):
        return self._int(o, "and_")

    def __or__(self, o):
        return self._int(o, "or_")

    def __rshift__(self, o):
        return self._int(o, "ashr")

    def __lshift__(self, o):
        return self._int(o, "shl")

    def __rlshift__(self, o):
        return Value(self.b, self.b.shl(lift(o, self.v.type), self.v))

    def _int(self, other, op: str) -> Value:
        if self.is_float:
            raise TypeError(f"{op} is for integers; got {self.v.type}")
        return Value(self.b, getattr(self.b, op)(self.v, lift(other, self.v.type)))

    def __neg__(self):
        return Value(self.b, self.b.fneg(self.v, flags=STRICT) if self.is_float else self.b.neg(self.v))

    def _compare(self, other, op: str) -> Value:
        c = lift(other, self.v.type)
        if self.is_float:  # ordered (false with a NaN), but != is unordered (true with a NaN), as in C
            compare = self.b.fcmp_unordered if op == "!=" else self.b.fcmp_ordered
            return Value(self.b, compare(op, self.v, c, flags=STRICT))
        return Value(self.b, self.b.icmp_signed(op, self.v, c))

    def __lt__(self, o):
        return self._compare(o, "<")

    def __le__(self, o):
        return self._compare(o, "<=")

    def __gt__(self, o):
        return self._compare(o, ">")

    def __ge__(self, o):
        return self._compare(o, ">=")

    def __eq__(self, o):
        return self._compare(o, "==")  # noqa: PLR0124 - x == x is the NaN test

    def __ne__(self, o):
        return self._compare(o, "!=")

    __hash__ = None  # type: ignore[assignment]  # unhashable, as == builds a comparison (typeshed: a method)


def lift(x, ty: ir.Type):
    """x's LLVM value: a Value's own, or a Python number as a constant of type `ty` (a float32 constant
    is the float rounded to float32 once, as np.float32(x))."""
    if isinstance(x, Value):
        if x.v.type != ty:
            raise TypeError(f"operands of two types, {x.v.type} and {ty}: convert() one first")
        return x.v
    return ir.Constant(ty, float(x) if isinstance(ty, _FLOATS) else int(x))


def _first(*xs) -> Value:
    return next(x for x in xs if isinstance(x, Value))


def select(condition: Value, a, b, ty: ir.Type | None = None) -> Value:
    """a where condition else b, without a branch; of type `ty` where both are Python numbers."""
    ty = ty or _first(a, b).v.type
    return Value(condition.b, condition.b.select(condition.v, lift(a, ty), lift(b, ty)))


def fma(a, b, c) -> Value:
    """a * b + c, in that order, rounded twice or (contracted by LLVM into an FMA instruction) once."""
    like = _first(a, b, c)
    t, builder = like.v.type, like.b
    product = builder.fmul(lift(a, t), lift(b, t), flags=STRICT)
    return Value(builder, builder.fadd(product, lift(c, t), flags=STRICT))


def horner(x: Value, coefficients) -> Value:
    """The polynomial c[0] x**(n-1) + ... + c[n-1] by Horner's rule, an FMA a step."""
    p = fma(coefficients[0], x, coefficients[1])
    for c in coefficients[2:]:
        p = fma(p, x, c)
    return p


def _unary_intrinsic(name: str, x: Value) -> Value:
    fn = x.b.module.declare_intrinsic(name, [x.v.type])
    return Value(x.b, x.b.call(fn, [x.v]))


def floor(x: Value) -> Value:
    return _unary_intrinsic("llvm.floor", x)


def fabs(x: Value) -> Value:
    return _unary_intrinsic("llvm.fabs", x)


def copysign(magnitude: Value, sign: Value) -> Value:
    t = magnitude.v.type
    fn = magnitude.b.module.declare_intrinsic("llvm.copysign", [t], ir.FunctionType(t, [t, t]))
    return Value(magnitude.b, magnitude.b.call(fn, [magnitude.v, sign.v]))


def smin(a: Value, b) -> Value:
    return select(a < b, a, b)


def smax(a: Value, b) -> Value:
    return select(a > b, a, b)


def convert(x: Value, ty: ir.Type, unsigned: bool = False) -> Value:
    """x as type `ty`, as NumPy's astype does: floats round, floats to integers truncate toward zero,
    integers widen by sign (or by zeros, `unsigned`) or keep their low bits."""
    b, v = x.b, x.v
    src_float, dst_float = x.is_float, isinstance(ty, _FLOATS)
    if v.type == ty:
        return x
    if src_float and dst_float:
        out = b.fpext(v, ty) if isinstance(ty, ir.DoubleType) else b.fptrunc(v, ty)
    elif src_float:
        out = b.fptosi(v, ty)
    elif dst_float:
        out = b.uitofp(v, ty) if unsigned else b.sitofp(v, ty)
    elif ty.width > v.type.width:
        out = b.zext(v, ty) if unsigned else b.sext(v, ty)
    else:
        out = b.trunc(v, ty)
    return Value(b, out)


def scale(x: Value, k: Value) -> Value:
    """x * 2**k for an integer k, rounded once (LLVM's ldexp: vscalefps/pd on AVX-512, where it vectorises;
    elsewhere a libm call per lane, so callers use it only where host_scalef says)."""
    fn = x.b.module.declare_intrinsic(
        "llvm.ldexp", [x.v.type, k.v.type], ir.FunctionType(x.v.type, [x.v.type, k.v.type])
    )
    return Value(x.b, x.b.call(fn, [x.v, k.v]))


def host_scalef() -> bool:
    """Whether this CPU scales vectors by powers of two in one instruction (AVX-512's vscalefps); the object
    code's cache key includes the CPU."""
    cpu = host_cpu()
    return cpu.has("avx512f") and cpu.has("avx512vl")


def bitcast(x: Value, ty: ir.Type) -> Value:
    """The same bits read as type `ty` (float32 <-> int32, float64 <-> int64)."""
    return Value(x.b, x.b.bitcast(x.v, ty))


def defined(module: ir.Module, symbol: str, body, params, result, inline: bool) -> ir.Function:
    """The module's internal function `symbol`, built from body on first use."""
    try:
        return module.get_global(symbol)
    except KeyError:
        pass
    fn = ir.Function(module, ir.FunctionType(result, params), symbol)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    if inline:
        fn.attributes.add("alwaysinline")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    values = [Value(builder, a) for a in fn.args]
    builder.ret(lift(body(*values), result))
    return fn
