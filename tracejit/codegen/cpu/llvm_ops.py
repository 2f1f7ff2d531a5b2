"""Scalar operations in LLVM IR with NumPy's semantics, as codegen/cpu/numba.py's Python source computes them
under Numba (Numba's "contract" flag alone on float operations, Python's comparisons, integers wrapping in
their dtype's width, index arithmetic rounding toward -inf): the pieces codegen/cpu/native.py's kernels
are made of, and the tables of what it renders itself."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from tracejit.codegen.cpu import llvm_math
from tracejit.codegen.cpu.llvm_values import defined
from tracejit.ir.kernel_ir import KOp

STRICT = ("contract",)  # runtime.numba_cache.FASTMATH: what Numba puts on every float operation of a kernel
I1, I8, I16, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(64)
F32, F64 = ir.FloatType(), ir.DoubleType()
FLOAT_TYPES = {np.dtype(np.float32): F32, np.dtype(np.float64): F64}

# float ops by dtype: the ones written here (their results are NumPy's bits, or the numba renderer's own
# math functions' bits, or Numba's lowering's: Python's // and % on floats)
FLOAT_OPS = frozenset(
    {
        KOp.NEG,
        KOp.ABS,
        KOp.RECIP,
        KOp.SQRT,
        KOp.FLOOR,
        KOp.CEIL,
        KOp.TRUNC,
        KOp.RINT,
        KOp.ISNAN,
        KOp.ISINF,
        KOp.SIGNBIT,
        KOp.SIGN,
        KOp.ADD,
        KOp.SUB,
        KOp.MUL,
        KOp.DIV,
        KOp.POW,
        KOp.MAX,
        KOp.MIN,
        KOp.COPYSIGN,
        KOp.LT,
        KOp.LE,
        KOp.EQ,
        KOp.NE,
        KOp.WHERE,
        KOp.IDIV,
        KOp.MOD,
        KOp.FMOD,
    }
)
MATH = {
    (np.dtype(np.float32), "exp"): "exp_f32",
    (np.dtype(np.float32), "tanh"): "tanh_f32",
    (np.dtype(np.float32), "log"): "log_f32",
    (np.dtype(np.float32), "erf"): "erf_f32",
    (np.dtype(np.float64), "exp"): "exp_f64",
    (np.dtype(np.float64), "tanh"): "tanh_f64",
    (np.dtype(np.float64), "log"): "log_f64",
    (np.dtype(np.float32), "ldexp"): "ldexp_f32",
    (np.dtype(np.float64), "ldexp"): "ldexp_f64",
}
# the C library's functions, by (dtype, op), for the ufuncs Numba computes with them (codegen/cpu/numba.py's
# np.sin(x) and the like on a scalar: Numba's lowering calls these, or LLVM intrinsics that become these
# calls): the same calls give the same bits (tests/test_numba_native.py compares them on special values;
# np.cbrt is not here: Numba computes it otherwise, and 12 of 96 float32 values differed by an ulp)
_C_NAMES = {
    "exp2": "exp2",
    "expm1": "expm1",
    "log2": "log2",
    "log10": "log10",
    "log1p": "log1p",
    "sin": "sin",
    "cos": "cos",
    "tan": "tan",
    "arcsin": "asin",
    "arccos": "acos",
    "arctan": "atan",
    "sinh": "sinh",
    "cosh": "cosh",
    "arcsinh": "asinh",
    "arccosh": "acosh",
    "arctanh": "atanh",
    "arctan2": "atan2",
    "hypot": "hypot",
}
LIBM: dict[tuple[np.dtype, str], str] = {
    **{(np.dtype(np.float32), op): c + "f" for op, c in _C_NAMES.items()},
    **{(np.dtype(np.float64), op): c for op, c in _C_NAMES.items()},
    (np.dtype(np.float64), "log"): "log",
    (np.dtype(np.float64), "erf"): "erf",
}
INT_OPS = frozenset(
    {
        KOp.NEG,
        KOp.INVERT,
        KOp.ADD,
        KOp.SUB,
        KOp.MUL,
        KOp.POW,
        KOp.IDIV,
        KOp.MOD,
        KOp.MAX,
        KOp.MIN,
        KOp.AND,
        KOp.OR,
        KOp.XOR,
        KOp.LT,
        KOp.LE,
        KOp.EQ,
        KOp.NE,
        KOp.WHERE,
        KOp.SHL,
        KOp.SHR,
        KOp.SIGN,
        KOp.FMOD,
    }
)
INDEX_OPS = frozenset(
    {KOp.ADD, KOp.SUB, KOp.MUL, KOp.IDIV, KOp.MOD, KOp.MIN, KOp.MAX, KOp.NEG, KOp.LT, KOp.LE, KOp.EQ, KOp.NE, KOp.WHERE}
)
BOOL_OPS = frozenset(
    {
        KOp.INVERT,
        KOp.AND,
        KOp.OR,
        KOp.XOR,
        KOp.MAX,
        KOp.MIN,
        KOp.ADD,
        KOp.MUL,
        KOp.LT,
        KOp.LE,
        KOp.EQ,
        KOp.NE,
        KOp.WHERE,
    }
)
INTRINSIC = {
    "abs": "llvm.fabs",
    "sqrt": "llvm.sqrt",
    "floor": "llvm.floor",
    "ceil": "llvm.ceil",
    "trunc": "llvm.trunc",
    "rint": "llvm.rint",
}
FCMP = {"lt": "<", "le": "<=", "eq": "==", "ne": "!="}


def value_type(dt: np.dtype) -> ir.Type:
    """A value's LLVM type: bool is i1 (i8 in memory, memory_type), float16 is computed in float32 (i16 bit
    patterns in memory, as codegen.numba's buffers)."""
    dt = np.dtype(dt)
    if dt == np.bool_:
        return I1
    if dt == np.float16:
        return F32
    return FLOAT_TYPES.get(dt) or ir.IntType(8 * dt.itemsize)


def memory_type(dt: np.dtype) -> ir.Type:
    dt = np.dtype(dt)
    return I8 if dt == np.bool_ else I16 if dt == np.float16 else value_type(dt)


def computed(dt: np.dtype) -> np.dtype:
    """The dtype a value of dt is computed in: float32 for float16."""
    return np.dtype(np.float32) if np.dtype(dt) == np.float16 else np.dtype(dt)


def f16_function(module: ir.Module, name: str) -> ir.Function:
    """codegen/cpu/llvm_math.py's float16 conversion `name` (f16_to_f32, f32_to_f16, round_f16), inlined."""
    args, result = {"f16_to_f32": ((I16,), F32), "f32_to_f16": ((F32,), I16), "round_f16": ((F32,), F32)}[name]
    return defined(module, f"tracejit.{name}", getattr(llvm_math, name), args, result, True)


def int_power_function(module: ir.Module) -> ir.Function:
    """`i64 tracejit.int_power(i64 a, i64 e)` for e >= 0: a ** e by squaring, every product wrapping."""
    try:
        return module.get_global("tracejit.int_power")
    except KeyError:
        pass
    fn = ir.Function(module, ir.FunctionType(I64, [I64, I64]), "tracejit.int_power")
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    a, e = fn.args
    one, zero = ir.Constant(I64, 1), ir.Constant(I64, 0)
    b.cbranch(b.icmp_signed("!=", e, zero), loop, done)
    b.position_at_end(loop)
    r, x, k = b.phi(I64), b.phi(I64), b.phi(I64)
    r2 = b.select(b.icmp_signed("!=", b.and_(k, one), zero), b.mul(r, x), r)
    x2, k2 = b.mul(x, x), b.lshr(k, one)  # (a uint64 exponent may have its top bit set)
    for phi, start, step in ((r, one, r2), (x, a, x2), (k, e, k2)):
        phi.add_incoming(start, entry)
        phi.add_incoming(step, loop)
    b.cbranch(b.icmp_signed("!=", k2, zero), loop, done)
    b.position_at_end(done)
    result = b.phi(I64)
    result.add_incoming(one, entry)
    result.add_incoming(r2, loop)
    b.ret(result)
    return fn


def constant(value, dt: np.dtype) -> ir.Constant:
    dt = np.dtype(dt)
    if dt == np.bool_:
        return ir.Constant(I1, int(bool(value)))
    if dt.kind == "f":
        with np.errstate(over="ignore"):  # a float32 constant: the float rounded once, as np.float32 (to inf)
            return ir.Constant(value_type(dt), float(dt.type(value)))
    bits = 8 * dt.itemsize
    wrapped = int(value) % (1 << bits)  # as the dtype's bits, written signed
    return ir.Constant(value_type(dt), wrapped - (1 << bits) if wrapped >> (bits - 1) else wrapped)


def cast(b: ir.IRBuilder, v, src: np.dtype, dst: np.dtype):
    """codegen.numba's cast (np.<dtype>(v), bool as != 0; to float16 round_f16 of the value as float32). A
    float reaches an integer type only in range (ir.build's float-to-integer cast selects NumPy's answer for
    the others), where fptosi/fptoui are exact."""
    if src == dst:
        return v
    if dst == np.float16:
        return b.call(f16_function(b.module, "round_f16"), [cast(b, v, computed(src), np.dtype(np.float32))])
    src = computed(src)
    if src == dst:
        return v
    if dst == np.bool_:
        if src.kind == "f":
            return b.fcmp_unordered("!=", v, ir.Constant(v.type, 0.0))
        return b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))
    ty = value_type(dst)
    if dst.kind == "f":
        if src.kind == "f":
            return b.fpext(v, ty) if dst.itemsize > src.itemsize else b.fptrunc(v, ty)
        return b.uitofp(v, ty) if src.kind in "bu" else b.sitofp(v, ty)
    if src.kind == "f":
        return b.fptosi(v, ty) if dst.kind == "i" else b.fptoui(v, ty)
    width = v.type.width
    if ty.width < width:
        return b.trunc(v, ty)
    if ty.width == width:
        return v
    return b.zext(v, ty) if src.kind in "bu" else b.sext(v, ty)


def float_op(b: ir.IRBuilder, op: str, a: list, dt: np.dtype):
    dt = computed(dt)
    t = a[0].type
    if op in (KOp.ADD, KOp.SUB, KOp.MUL, KOp.DIV):
        return getattr(b, "f" + op)(a[0], a[1], flags=STRICT)
    if op == KOp.NEG:
        return b.fneg(a[0], flags=STRICT)
    if op == KOp.RECIP:
        return b.fdiv(ir.Constant(t, 1.0), a[0], flags=STRICT)
    if op in INTRINSIC:
        return b.call(b.module.declare_intrinsic(INTRINSIC[op], [t]), a)
    name = LIBM.get((np.dtype(dt), op))
    if name is not None:
        try:
            fn = b.module.get_global(name)
        except KeyError:
            fn = ir.Function(b.module, ir.FunctionType(t, [t] * len(a)), name)
        return b.call(fn, a)
    if op in (KOp.COPYSIGN, KOp.POW):  # (Numba's x ** y on floats: llvm.pow, libm's pow or powf)
        return b.call(b.module.declare_intrinsic(f"llvm.{op}", [t], ir.FunctionType(t, [t, t])), a)
    if op in (KOp.IDIV, KOp.MOD):
        return _float_divide(b, op, a[0], a[1])
    if op == KOp.FMOD:  # np.fmod: C's fmod (Numba's np_real_fmod_impl), NaN for a zero divisor
        return b.frem(a[0], a[1])
    if op == KOp.SIGN:  # codegen.numba's: 1, -1, +0 for either zero, a NaN itself
        x, zero = a[0], ir.Constant(t, 0.0)
        small = b.select(b.fcmp_ordered("==", x, zero), zero, x)
        return b.select(
            b.fcmp_ordered(">", x, zero),
            ir.Constant(t, 1.0),
            b.select(b.fcmp_ordered("<", x, zero), ir.Constant(t, -1.0), small),
        )
    if op in (KOp.MAX, KOp.MIN):  # codegen.numba's _FLOAT_MINMAX: a NaN in either operand wins
        take = b.or_(b.fcmp_ordered(">" if op == KOp.MAX else "<", a[0], a[1]), b.fcmp_unordered("!=", a[0], a[0]))
        return b.select(take, a[0], a[1])
    if op in FCMP:  # Python's: ordered, but != is true with a NaN
        compare = b.fcmp_unordered if op == KOp.NE else b.fcmp_ordered
        return compare(FCMP[op], a[0], a[1])
    if op == KOp.ISNAN:
        return b.fcmp_unordered("uno", a[0], a[0])
    if op == KOp.ISINF:
        fabs = b.call(b.module.declare_intrinsic("llvm.fabs", [t]), a)
        return b.fcmp_ordered("==", fabs, ir.Constant(t, float("inf")))
    if op == KOp.SIGNBIT:
        bits = ir.IntType(8 * dt.itemsize)
        return b.icmp_signed("<", b.bitcast(a[0], bits), ir.Constant(bits, 0))
    raise AssertionError(op)


def index_op(b: ir.IRBuilder, op: str, a: list):
    """Index arithmetic (simt.index_values): int64, never overflowing; // and % round toward -inf (Python's)."""
    if op in (KOp.ADD, KOp.SUB, KOp.MUL):
        return getattr(b, op)(a[0], a[1], flags=("nsw",))
    if op == KOp.NEG:
        return b.sub(ir.Constant(I64, 0), a[0], flags=("nsw",))
    if op in (KOp.IDIV, KOp.MOD):
        zero = ir.Constant(I64, 0)
        d = b.select(b.icmp_signed("==", a[1], zero), ir.Constant(I64, 1), a[1])  # (never 0: an axis size)
        q, r = b.sdiv(a[0], d), b.srem(a[0], d)
        fix = b.and_(
            b.icmp_signed("!=", r, zero), b.icmp_signed("!=", b.icmp_signed("<", r, zero), b.icmp_signed("<", d, zero))
        )
        if op == KOp.IDIV:
            return b.sub(q, b.zext(fix, I64))
        return b.add(r, b.select(fix, d, zero))
    return int_op(b, op, a, np.dtype(np.int64))


def int_op(b: ir.IRBuilder, op: str, a: list, dt: np.dtype):
    """Integer data ops in the dtype's width: they wrap like NumPy's (Numba computes narrow ones in int64 and
    narrows: the same low bits)."""
    t = a[0].type
    if op in (KOp.ADD, KOp.SUB, KOp.MUL):
        return getattr(b, op)(a[0], a[1])
    if op == KOp.NEG:
        return b.sub(ir.Constant(t, 0), a[0])
    if op == KOp.INVERT:
        return b.xor(a[0], ir.Constant(t, -1))
    if op in (KOp.AND, KOp.OR, KOp.XOR):
        return getattr(b, op + "_" if op != KOp.XOR else op)(a[0], a[1])
    if op in (KOp.IDIV, KOp.MOD, KOp.FMOD):
        return _int_divide(b, op, a[0], a[1], dt)
    compare = b.icmp_unsigned if dt.kind == "u" else b.icmp_signed
    zero = ir.Constant(t, 0)
    if op in (KOp.SHL, KOp.SHR):  # codegen.numba's _SHIFTS: by the width or more (or a negative count), 0 or -1
        inside = b.icmp_unsigned("<", a[1], ir.Constant(t, 8 * dt.itemsize))  # (a negative count is huge)
        count = b.select(inside, a[1], zero)  # LLVM's shift by the width or more is poison
        if op == KOp.SHL:
            return b.select(inside, b.shl(a[0], count), zero)
        if dt.kind == "u":
            return b.select(inside, b.lshr(a[0], count), zero)
        beyond = b.select(b.icmp_signed("<", a[0], zero), ir.Constant(t, -1), zero)
        return b.select(inside, b.ashr(a[0], count), beyond)
    if op == KOp.SIGN:
        one = b.select(compare(">", a[0], zero), ir.Constant(t, 1), zero)
        return one if dt.kind == "u" else b.select(b.icmp_signed("<", a[0], zero), ir.Constant(t, -1), one)
    if op in (KOp.MAX, KOp.MIN):
        return b.select(compare(">" if op == KOp.MAX else "<", a[0], a[1]), a[0], a[1])
    if op in FCMP:
        return compare(FCMP[op], a[0], a[1])
    raise AssertionError(op)


def _int_divide(b: ir.IRBuilder, op: str, x, y, dt: np.dtype):
    """NumPy's integer // and % on data, as codegen.numba's source computes them under Numba's error model:
    rounding toward -inf, a zero divisor giving 0, x // -1 wrapping (-x of the minimum is itself) and
    x % -1 giving 0; np.fmod ("fmod") is C's %, the sign of x, 0 for a zero divisor and -1. The divisor LLVM
    sees is never 0 or -1, which trap on x86."""
    t = x.type
    zero, one = ir.Constant(t, 0), ir.Constant(t, 1)
    if dt.kind == "u":
        by_zero = b.icmp_unsigned("==", y, zero)
        d = b.select(by_zero, one, y)
        return b.select(by_zero, zero, b.udiv(x, d) if op == KOp.IDIV else b.urem(x, d))  # (fmod: % unsigned)
    by_zero, by_minus_one = b.icmp_signed("==", y, zero), b.icmp_signed("==", y, ir.Constant(t, -1))
    special = b.or_(by_zero, by_minus_one)
    d = b.select(special, one, y)
    q, r = b.sdiv(x, d), b.srem(x, d)
    if op == KOp.FMOD:
        return b.select(special, zero, r)
    fix = b.and_(
        b.icmp_signed("!=", r, zero), b.icmp_signed("!=", b.icmp_signed("<", r, zero), b.icmp_signed("<", d, zero))
    )
    if op == KOp.IDIV:
        q = b.sub(q, b.zext(fix, t))
        return b.select(by_zero, zero, b.select(by_minus_one, b.sub(zero, x), q))
    return b.select(special, zero, b.select(fix, b.add(r, d), r))


def _float_divide(b: ir.IRBuilder, op: str, x, y):
    """Python's float // and % as Numba lowers them (real_floordiv_impl, real_mod_impl: CPython's float_divmod,
    which is NumPy's npy_divmod too), without branches: fmod, the quotient of what is left, the remainder moved
    to the divisor's side, the quotient snapped to an integer; by a zero divisor, x / y and fmod."""
    t = x.type
    zero, one = ir.Constant(t, 0.0), ir.Constant(t, 1.0)
    mod = b.frem(x, y)
    if op == KOp.MOD:
        by_zero = mod  # fmod(x, 0) is NaN, which Numba returns
    else:
        by_zero = b.fdiv(x, y)
    div = b.fdiv(b.fsub(x, mod), y)
    mod_true = b.fcmp_unordered("!=", mod, zero)
    y_neg = b.fcmp_ordered("<", y, zero)
    fix = b.and_(mod_true, b.icmp_unsigned("!=", y_neg, b.fcmp_ordered("<", mod, zero)))
    if op == KOp.MOD:
        moved = b.select(fix, b.fadd(mod, y), mod)
        result = b.select(mod_true, moved, b.select(y_neg, ir.Constant(t, -0.0), zero))
    else:
        div = b.select(fix, b.fsub(div, one), div)
        floor = b.call(b.module.declare_intrinsic("llvm.floor", [t]), [div])
        snapped = b.select(b.fcmp_ordered(">", b.fsub(div, floor), ir.Constant(t, 0.5)), b.fadd(floor, one), floor)
        signed_zero = b.fdiv(b.fmul(b.fmul(div, div), x), y)  # 0 with the sign of x / y (NaN stays NaN)
        result = b.select(b.fcmp_ordered("!=", div, zero), snapped, signed_zero)
    return b.select(b.fcmp_ordered("==", y, zero), by_zero, result)


def bool_op(b: ir.IRBuilder, op: str, a: list):
    if op in (KOp.MAX, KOp.OR, KOp.ADD):
        return b.or_(a[0], a[1])
    if op in (KOp.MIN, KOp.AND, KOp.MUL):
        return b.and_(a[0], a[1])
    if op == KOp.XOR:
        return b.xor(a[0], a[1])
    if op == KOp.INVERT:
        return b.xor(a[0], ir.Constant(I1, 1))
    return b.icmp_unsigned(FCMP[op], a[0], a[1])


def combine(b: ir.IRBuilder, red: str, adt: np.dtype, cur, v):
    """codegen.numba's combine: cur combined with v as NumPy computes it in adt."""
    if adt == np.bool_:
        return bool_op(b, "add" if red == "sum" else "mul" if red == "prod" else red, [cur, v])
    if adt.kind == "f":
        if red == "sum":
            return b.fadd(cur, v, flags=STRICT)
        if red == "prod":
            return b.fmul(cur, v, flags=STRICT)
        return float_op(b, red, [v, cur], adt)
    op = {"sum": "add", "prod": "mul"}.get(red, red)
    return int_op(b, op, [v, cur] if op in (KOp.MAX, KOp.MIN) else [cur, v], adt)
