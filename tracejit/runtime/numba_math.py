"""Vectorisable float32 exp, tanh, log and erf, float64 exp and tanh, and ldexp, for numba kernels: built from arithmetic and selects
only (no libm calls), so LLVM's loop vectoriser can vectorise a loop that calls them.
NaN, infinities, signed zeros and subnormals behave as in NumPy; results are within 2 ulp of it.
Also the other helpers generated kernels call: integer power and fmod, float16 conversions, a row sort."""
from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from ..codegen import (
    math_f32 as M,  # the coefficients, shared with the C-style renderers
)

f32 = np.float32
# The math functions are compiled once per process (per signature) and inlined by LLVM (forceinline:
# LLVM's alwaysinline), with their own fast-math flags. Numba's inline="always" re-typed them into its IR
# at every call site of every kernel instead: 70-90 ms of GELU's or softmax's compile. No CPython wrapper:
# only kernels call them. The two-line power-of-two helpers (_LEAF) are cheaper inlined into Numba's IR
# than compiled on their own.
_INLINE = dict(forceinline=True, no_cpython_wrapper=True, fastmath={"contract"})
_LEAF = dict(inline="always", fastmath={"contract"})

# ---------------------------------------------------------------------------------------------------
# Intrinsics. Inlined code is compiled with the *caller's* fast-math flags, and a caller may allow
# "reassoc" (tracejit's kernels do not: only their reduction steps, reassoc_add), which would undo
# Cody-Waite reductions and two-step scalings.
# Numba adds its flags only to instructions that carry none, so operations emitted here with
# "contract" alone keep their order (and may still fuse into FMAs).

_STRICT = ("contract",)


def _float_binary(name: str, emit):
    """An intrinsic of two operands of one float type (which also catches accidental float64 promotion),
    whose code is emit(builder, a, b)."""
    def typer(typingctx, a, b):
        if a == b and a in (types.float32, types.float64):
            return a(a, b), lambda context, builder, sig, args: emit(builder, *args)
        return None
    typer.__name__ = name
    return intrinsic(typer)


def _strict_binop(opname):
    return _float_binary(f"_strict_{opname}", lambda b, x, y: getattr(b, opname)(x, y, flags=_STRICT))


_add = _strict_binop("fadd")
_mul = _strict_binop("fmul")
_div = _strict_binop("fdiv")    # a plain `/` would get a ZeroDivisionError branch under error_model="python"


# A float sum's or product's accumulating step, the one operation of a kernel LLVM may reorder: the loop
# over a row then runs in vector lanes (layernorm 4096x1024 4x faster) while every other operation keeps
# NumPy's order ((x + 1) - 1 is not folded to x).
reassoc_add = _float_binary("reassoc_add", lambda b, x, y: b.fadd(x, y, flags=("reassoc", "contract")))
reassoc_mul = _float_binary("reassoc_mul", lambda b, x, y: b.fmul(x, y, flags=("reassoc", "contract")))


def _select_step(cmpop):
    """A float max/min reduction's step, `v if v > acc else acc`, for accumulators whose NaN is kept in
    a flag of their own (codegen.numba._nan_apart): the compare and select carry nnan and nsz, without
    which LLVM keeps the loop scalar (softmax's row max). Where v is NaN the step is poison, never read:
    every use of the accumulator selects NaN by the flag instead."""
    def emit(builder, acc, v):
        take = builder.fcmp_ordered(cmpop, v, acc, flags=("nnan", "nsz"))
        return builder.select(take, v, acc, flags=("nnan", "nsz"))
    return _float_binary(f"select_step_{'max' if cmpop == '>' else 'min'}", emit)


max_step = _select_step(">")
min_step = _select_step("<")


def _wrapping(opname):
    """int64 a op b that wraps like NumPy: Numba's own signed + - * carry LLVM's nsw flag (overflow
    cannot happen), so LLVM may fold (x + x) > 0 into x > 0 and change what a wrapped sum compares as."""
    def typer(typingctx, a, b):
        if not (isinstance(a, types.Integer) and isinstance(b, types.Integer)):
            return None

        def codegen(context, builder, sig, args):
            x, y = (context.cast(builder, v, t, types.int64) for v, t in zip(args, sig.args))
            return getattr(builder, opname)(x, y)
        return types.int64(a, b), codegen
    typer.__name__ = f"wrap_{opname}"
    return intrinsic(typer)


wrap_add = _wrapping("add")
wrap_sub = _wrapping("sub")
wrap_mul = _wrapping("mul")


@intrinsic
def nonnegative_index(typingctx, i):
    """i, which LLVM may take as >= 0 (llvm.assume): a parallel kernel's loop runs over a chunk
    [start, stop) of its range, and without this LLVM keeps the wrap-around of negative indices on every
    load and store, which turns vector loads into gathers (GELU 3x slower)."""
    if i == types.int64:
        def codegen(context, builder, sig, args):
            assume = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [ir.IntType(1)]),
                                                    "llvm.assume")
            builder.call(assume, [builder.icmp_signed(">=", args[0], ir.Constant(args[0].type, 0))])
            return args[0]
        return types.int64(i), codegen
    return None


@intrinsic
def _fma(typingctx, a, b, c):
    """a * b + c, in that order; contractable to a single FMA instruction."""
    if a == b == c and a in (types.float32, types.float64):
        def codegen(context, builder, sig, args):
            return builder.fadd(builder.fmul(args[0], args[1], flags=_STRICT), args[2], flags=_STRICT)
        return a(a, b, c), codegen
    return None


@intrinsic
def _f32_from_bits(typingctx, bits):
    """Reinterpret an int32 bit pattern as a float32."""
    if bits == types.int32:
        return types.float32(bits), lambda context, builder, sig, args: builder.bitcast(args[0], ir.FloatType())
    return None


@intrinsic
def _bits_from_f32(typingctx, x):
    """Reinterpret a float32 as its int32 bit pattern."""
    if x == types.float32:
        return types.int32(x), lambda context, builder, sig, args: builder.bitcast(args[0], ir.IntType(32))
    return None


@intrinsic
def _f64_from_bits(typingctx, bits):
    """Reinterpret an int64 bit pattern as a float64."""
    if bits == types.int64:
        return types.float64(bits), lambda context, builder, sig, args: builder.bitcast(args[0], ir.DoubleType())
    return None


@numba.njit(**_LEAF)
def _pow2_f64(k):
    """2**k for an int64 k in [-1022, 1023], built from its exponent bits."""
    return _f64_from_bits((k + 1023) << 52)


# ---------------------------------------------------------------------------------------------------
# ldexp: x * 2**n rounded once, n an integral float within the frontend's clamp (+-320 for float32,
# +-2200 for float64). A libm call would keep the loop scalar.

@numba.njit(**_INLINE)
def ldexp_f32(x, n):
    """float32 (float16 computed in float32): exact in float64, then rounded once to float32."""
    return f32(_mul(np.float64(x), _pow2_f64(np.int64(n))))


@numba.njit(**_INLINE)
def ldexp_f64(x, n):
    """musl's scalbn without branches: an n beyond the normal exponents is applied in steps that stay
    exact (a step down by 2**-969 leaves the last one at least 53 binades to round a subnormal once)."""
    k = np.int64(n)
    y = _mul(x, _pow2_f64(1023) if k > 1023 else 1.0)
    k = k - 1023 if k > 1023 else k
    y = _mul(y, _pow2_f64(1023) if k > 1023 else 1.0)
    k = k - 1023 if k > 1023 else k
    y = _mul(y, _pow2_f64(-969) if k < -1022 else 1.0)
    k = k + 969 if k < -1022 else k
    y = _mul(y, _pow2_f64(-969) if k < -1022 else 1.0)
    k = k + 969 if k < -1022 else k
    return _mul(y, _pow2_f64(min(max(k, -1022), 1023)))


@numba.njit(**_LEAF)
def _pow2(n):
    """2**n for an integral float32 n in [-126, 127], built from its exponent bits."""
    return _f32_from_bits(np.int32(_fma(n, f32(1 << 23), f32(127 << 23))))


# ---------------------------------------------------------------------------------------------------
# exp: Cephes expf. x = n*ln2 + r with |r| <= ln2/2, exp(r) by a degree-6 polynomial, times 2**n.

_LOG2E, _LN2_HI, _LN2_LO = f32(M.LOG2E), f32(M.LN2_HI), f32(M.LN2_LO)   # n * _LN2_HI is exact
_EXP_HI, _EXP_LO = f32(M.EXP_HI), f32(M.EXP_LO)   # exp overflows above, rounds to 0 below
_EXP_P = tuple(map(f32, M.EXP_P))
_ZERO, _HALF, _ONE, _TWO = f32(0.0), f32(0.5), f32(1.0), f32(2.0)
_INF, _NAN = f32(np.inf), f32(np.nan)


@numba.njit(**_INLINE)
def exp_f32(x):
    """np.exp for a float32 scalar; at most 1 ulp off over all float32 inputs."""
    xc = x if x < _EXP_HI else _EXP_HI      # NaN -> _EXP_HI here (no NaN to int conversion); restored below
    xc = xc if xc > _EXP_LO else _EXP_LO
    n = np.floor(_fma(xc, _LOG2E, _HALF))   # nearest integer to x / ln2, in [-150, 128]
    r = _fma(n, -_LN2_HI, xc)
    r = _fma(n, -_LN2_LO, r)
    p = _fma(_EXP_P[0], r, _EXP_P[1])
    p = _fma(p, r, _EXP_P[2])
    p = _fma(p, r, _EXP_P[3])
    p = _fma(p, r, _EXP_P[4])
    p = _fma(p, r, _EXP_P[5])
    y = _add(_fma(p, r * r, r), _ONE)       # exp(r) in [0.7, 1.42]
    # 2**n in two factors, each a normal float32 even when 2**n is not: the result rounds once,
    # also into the subnormal range, and overflows to inf by itself.
    n1 = np.floor(n * _HALF)
    y = _mul(_mul(y, _pow2(n1)), _pow2(n - n1))
    return y if x == x else x


# ---------------------------------------------------------------------------------------------------
# tanh: Cephes tanhf. An odd polynomial below 0.625, 1 - 2 / (exp(2|x|) + 1) above; both are
# computed for |x| and the sign copied from x (so tanh(-0) = -0).

_TANH_SPLIT = f32(M.TANH_SPLIT)
_TANH_P = tuple(map(f32, M.TANH_P))


@numba.njit(**_INLINE)
def tanh_f32(x):
    """np.tanh for a float32 scalar; at most 1 ulp off over all float32 inputs."""
    a = np.abs(x)
    s = a * a
    p = _fma(_TANH_P[0], s, _TANH_P[1])
    p = _fma(p, s, _TANH_P[2])
    p = _fma(p, s, _TANH_P[3])
    p = _fma(p, s, _TANH_P[4])
    small = _fma(_mul(p, s), a, a)
    large = _ONE - _div(_TWO, _add(exp_f32(a + a), _ONE))   # exp overflow to inf gives exactly 1
    return np.copysign(small if a < _TANH_SPLIT else large, x)   # NaN takes the large path: NaN


# ---------------------------------------------------------------------------------------------------
# float64 exp and tanh: NumPy's default dtype. Numba's np.exp/np.tanh on float64 are libm calls, one
# element at a time (a float64 GELU of 64x3072 took 4.3 ms, 22 ns an element).
# exp: x = n*ln2 + r with |r| <= ln2/2 (fdlibm's two-part ln2: n * _LN2_HI_F64 is exact), exp(r) by its
# Taylor polynomial to degree 13 (the remainder is below 0.04 ulp), times 2**n in two normal factors.

_LOG2E_F64, _LN2_HI_F64, _LN2_LO_F64 = 1.4426950408889634, 6.93147180369123816490e-01, 1.90821492927058770002e-10
_EXP_HI_F64, _EXP_LO_F64 = 710.0, -746.0   # exp overflows above, rounds to 0 below
_EXP_TAYLOR_F64 = tuple(1.0 / math.factorial(k) for k in range(13, 1, -1))    # 1/13!, ..., 1/2!


@numba.njit(**_INLINE)
def exp_f64(x):
    """np.exp for a float64 scalar, within 1 ulp of the correctly rounded result."""
    xc = x if x < _EXP_HI_F64 else _EXP_HI_F64    # NaN -> _EXP_HI_F64 here; restored below
    xc = xc if xc > _EXP_LO_F64 else _EXP_LO_F64
    n = np.floor(_fma(xc, _LOG2E_F64, 0.5))       # nearest integer to x / ln2, in [-1076, 1025]
    r = _fma(n, -_LN2_HI_F64, xc)
    r = _fma(n, -_LN2_LO_F64, r)
    c = _EXP_TAYLOR_F64
    p = _fma(c[0], r, c[1])
    p = _fma(p, r, c[2])
    p = _fma(p, r, c[3])
    p = _fma(p, r, c[4])
    p = _fma(p, r, c[5])
    p = _fma(p, r, c[6])
    p = _fma(p, r, c[7])
    p = _fma(p, r, c[8])
    p = _fma(p, r, c[9])
    p = _fma(p, r, c[10])
    p = _fma(p, r, c[11])
    y = _add(_fma(p, _mul(r, r), r), 1.0)         # exp(r) in [0.7, 1.42]
    n1 = np.floor(n * 0.5)                        # 2**n as two normal factors: rounds once, also to subnormals
    y = _mul(_mul(y, _pow2_f64(np.int64(n1))), _pow2_f64(np.int64(n - n1)))
    return y if x == x else x


_TANH_P_F64 = (-9.64399179425052238628e-1, -9.92877231001918586564e1, -1.61468768441708447952e3)
_TANH_Q_F64 = (1.12811678491632931402e2, 2.23548839060100448583e3, 4.84406305325125486048e3)   # after 1 * s**3


@numba.njit(**_INLINE)
def tanh_f64(x):
    """np.tanh for a float64 scalar (Cephes tanh: a rational function below 0.625, else
    1 - 2 / (exp(2|x|) + 1)); within 2 ulp of the correctly rounded result."""
    a = np.abs(x)
    s = _mul(a, a)
    p = _fma(_fma(_TANH_P_F64[0], s, _TANH_P_F64[1]), s, _TANH_P_F64[2])
    q = _fma(_fma(_add(s, _TANH_Q_F64[0]), s, _TANH_Q_F64[1]), s, _TANH_Q_F64[2])
    small = _fma(a, _div(_mul(s, p), q), a)
    large = 1.0 - _div(2.0, _add(exp_f64(a + a), 1.0))   # exp overflow to inf gives exactly 1
    return np.copysign(small if a < 0.625 else large, x)  # NaN takes the large path: NaN


# ---------------------------------------------------------------------------------------------------
# log: Cephes logf. x = m * 2**e with m in [sqrt(1/2), sqrt(2)), log(m) = f - f**2/2 + f**3 * P(f)
# for f = m - 1, plus e * ln2 in two parts.

_SQRT_HALF = f32(M.SQRT_HALF)
_TINY = f32(2.0 ** -126)              # smallest normal float32
_TWO_23 = f32(2.0 ** 23)
_LOG_P = tuple(map(f32, M.LOG_P))


@numba.njit(**_INLINE)
def log_f32(x):
    """np.log for a float32 scalar; at most 1 ulp off over all float32 inputs."""
    subnormal = x < _TINY
    xs = x * _TWO_23 if subnormal else x
    bits = _bits_from_f32(xs)
    # For positive finite xs: xs = m * 2**e with m in [0.5, 1) (other inputs are replaced below).
    e = np.float32(np.int32(bits >> np.int32(23))) - (f32(126.0 + 23.0) if subnormal else f32(126.0))
    m = _f32_from_bits(np.int32((bits & np.int32(0x007FFFFF)) | np.int32(0x3F000000)))
    below = m < _SQRT_HALF
    e = e - _ONE if below else e
    f = (m + m if below else m) - _ONE          # exact
    z = f * f
    p = _fma(_LOG_P[0], f, _LOG_P[1])
    p = _fma(p, f, _LOG_P[2])
    p = _fma(p, f, _LOG_P[3])
    p = _fma(p, f, _LOG_P[4])
    p = _fma(p, f, _LOG_P[5])
    p = _fma(p, f, _LOG_P[6])
    p = _fma(p, f, _LOG_P[7])
    p = _fma(p, f, _LOG_P[8])
    y = _mul(_mul(p, f), z)
    y = _fma(e, _LN2_LO, y)
    y = _fma(-_HALF, z, y)
    r = _fma(e, _LN2_HI, _add(f, y))
    r = r if x < _INF else x                    # +inf and NaN
    r = -_INF if x == _ZERO else r              # +-0
    return _NAN if x < _ZERO else r


# ---------------------------------------------------------------------------------------------------
# erf: two minimax fits made for tracejit (Lawson-weighted least squares against math.erf/erfc,
# coefficients rounded to float32 one at a time, refitting the rest). |x| <= 0.9: erf(x) = x + x * P(x**2);
# above, erf(|x|) = 1 - exp(Q(|x|)) with Q ~ log(erfc) on [0.9, 4]; beyond 4, erf rounds to +-1.

_ERF_SPLIT, _ERF_CLAMP = f32(M.ERF_SPLIT), f32(M.ERF_CLAMP)
_ERF_P = tuple(map(f32, M.ERF_P))
_ERFC_Q = tuple(map(f32, M.ERFC_Q))


@numba.njit(**_INLINE)
def erf_f32(x):
    """math.erf for a float32 scalar; at most 1 ulp (7e-8) off over all float32 inputs."""
    s = x * x
    p = _fma(_ERF_P[0], s, _ERF_P[1])
    p = _fma(p, s, _ERF_P[2])
    p = _fma(p, s, _ERF_P[3])
    p = _fma(p, s, _ERF_P[4])
    p = _fma(p, s, _ERF_P[5])
    small = _fma(p, x, x)                       # keeps the sign of -0
    a = np.abs(x)
    t = a if a < _ERF_CLAMP else _ERF_CLAMP     # +-inf -> 4
    q = _fma(_ERFC_Q[0], t, _ERFC_Q[1])
    q = _fma(q, t, _ERFC_Q[2])
    q = _fma(q, t, _ERFC_Q[3])
    q = _fma(q, t, _ERFC_Q[4])
    q = _fma(q, t, _ERFC_Q[5])
    q = _fma(q, t, _ERFC_Q[6])
    large = np.copysign(_ONE - exp_f32(q), x)
    return large if a > _ERF_SPLIT else small   # NaN takes the small path: NaN


# ---------------------------------------------------------------------------------------------------
# Faults NumPy raises for, recorded in the kernel's error record (int64: code, value) for the runtime to
# raise after the call: a prange loop cannot raise. The result is then any valid value.

@numba.njit(inline="always")
def nonnegative_exponent(b, code, error):
    """An integer exponent; a negative one (NumPy raises) is recorded and taken as 0."""
    if b < 0:
        error[0] = code
        error[1] = b
        return b - b
    return b


@numba.njit(inline="always")
def bound_index(v, size, code, error):
    """An index read from data as an offset along an axis of `size` elements: a negative one counts from
    the end; one outside the axis (NumPy raises IndexError) is recorded and gives 0."""
    if v < 0:
        if v >= -size:
            return np.int64(v) + size
    elif v < size:   # an unsigned index is compared as it is, not as an int64 it may not fit
        return np.int64(v)
    error[0] = code
    error[1] = v
    return np.int64(0)


@numba.njit(inline="always")
def int_power(a, b):
    """a ** b for b >= 0 by squaring, wrapping like NumPy (numba's ** goes through float for some integer types)."""
    r = a - a + 1
    while b:
        if b & 1:
            r = r * a
        a = a * a
        b = b >> 1
    return r


@numba.njit(inline="always")
def int_fmod(a, b):
    """C's % (sign of the dividend), which NumPy's integer fmod is; 0 for b == 0 and b == -1."""
    if b == 0 or b == -1:
        return a - a
    r = a % b
    return r - b if r != 0 and (r < 0) != (a < 0) else r


# ---------------------------------------------------------------------------------------------------
# float16 storage. Numba has no CPU float16: kernels keep such arrays as uint16 bit patterns and
# convert on load and store (round to nearest even, as NumPy's astype), computing in float32.

@numba.njit(**_INLINE)
def f16_to_f32(h):
    """binary16 bits (uint16) -> float32; exact for every input."""
    h = np.int64(h)
    sign = (h & 0x8000) << 16
    exp = (h >> 10) & 0x1F
    man = h & 0x3FF
    normal = _f32_from_bits(np.int32(sign | ((exp + 112) << 23) | (man << 13)))
    special = _f32_from_bits(np.int32(sign | 0x7F800000 | (man << 13)))      # inf, NaN (payload kept)
    tiny = f32(man) * f32(2.0 ** -24)                                         # subnormal, exact
    tiny = -tiny if sign else tiny
    return tiny if exp == 0 else (special if exp == 31 else normal)


@numba.njit(**_INLINE)
def f32_to_f16(f):
    """float32 (or any number, via float32) -> binary16 bits (uint16), rounding to nearest even, with
    selects only so it vectorises. A float64 goes through float32 first, which can round twice."""
    x = np.int64(_bits_from_f32(f32(f))) & 0xFFFFFFFF
    sign = (x >> 16) & 0x8000
    exp = (x >> 23) & 0xFF
    man = x & 0x7FFFFF
    e = exp - 112                                    # the binary16 exponent field, if it were normal
    base = (e << 10) | (man >> 13)
    rest = man & 0x1FFF
    normal = base + ((rest > 0x1000) | ((rest == 0x1000) & (base & 1 == 1)))   # a carry may give inf
    shift = min(max(14 - e, 1), 31)                  # subnormal result: shift the full mantissa
    full = man | 0x800000
    half = np.int64(1) << (shift - 1)
    sub = full >> shift
    rest_s = full & ((half << 1) - 1)
    subnormal = sub + ((rest_s > half) | ((rest_s == half) & (sub & 1 == 1)))
    nan_or_inf = 0x7C00 | (0x200 if man != 0 else 0)
    out = nan_or_inf if exp == 255 else (0x7C00 if e >= 31 else (normal if e > 0 else (0 if e < -10 else subnormal)))
    return np.uint16(sign | out)


@numba.njit(**_INLINE)
def round_f16(f):
    """float32 -> the nearest float16 value, as float32: the result of a float16 op, rounded as NumPy's loops do."""
    return f16_to_f32(f32_to_f16(f))


# The same functions without forceinline, for kernels calling one more than codegen.numba's
# MATH_INLINE_MAX times: LLVM inlines them where it pays instead of every copy (a register-tiled kernel
# applies tanh to 32 accumulators; re-typed into Numba's IR at each call site, as they once were, it took
# 230 s to compile, 3.6 s with these).
exp_f32_called = numba.njit(fastmath={"contract"})(exp_f32.py_func)
tanh_f32_called = numba.njit(fastmath={"contract"})(tanh_f32.py_func)
exp_f64_called = numba.njit(fastmath={"contract"})(exp_f64.py_func)
tanh_f64_called = numba.njit(fastmath={"contract"})(tanh_f64.py_func)
log_f32_called = numba.njit(fastmath={"contract"})(log_f32.py_func)
erf_f32_called = numba.njit(fastmath={"contract"})(erf_f32.py_func)
ldexp_f32_called = numba.njit(fastmath={"contract"})(ldexp_f32.py_func)
round_f16_called = numba.njit(fastmath={"contract"})(round_f16.py_func)


# The kernel IR's sort: a stable merge sort written for kernels. Not inlined (it is called once per row)
# and plain loops only, so numba compiles it in a fraction of the time its generic np.sort/np.argsort take.
SORT_RUN = 16   # runs this long are sorted by insertion first


@numba.njit(inline="always")
def _sorts_before(a, b):
    """a goes strictly before b: the smaller number; every number before NaN (NumPy's order)."""
    return a < b or (np.isnan(b) and not np.isnan(a))


@numba.njit
def sort_row(keys, positions, n):
    """The first n keys in order, NaN last, equal keys keeping their order (stable); positions (None: not
    kept) move with their keys."""
    for start in range(0, n, SORT_RUN):
        for i in range(start + 1, min(start + SORT_RUN, n)):
            key = keys[i]
            j = i - 1
            if positions is not None:
                position = positions[i]
            while j >= start and _sorts_before(key, keys[j]):
                keys[j + 1] = keys[j]
                if positions is not None:
                    positions[j + 1] = positions[j]
                j -= 1
            keys[j + 1] = key
            if positions is not None:
                positions[j + 1] = position
    if n <= SORT_RUN:
        return
    src_keys, dst_keys = keys, np.empty_like(keys)
    src_pos, dst_pos = positions, (None if positions is None else np.empty_like(positions))
    width = SORT_RUN
    while width < n:
        for lo in range(0, n, 2 * width):
            mid, hi = min(lo + width, n), min(lo + 2 * width, n)
            i, j = lo, mid
            for out in range(lo, hi):
                take_right = i >= mid or (j < hi and _sorts_before(src_keys[j], src_keys[i]))
                at = j if take_right else i
                dst_keys[out] = src_keys[at]
                if positions is not None:
                    dst_pos[out] = src_pos[at]
                if take_right:
                    j += 1
                else:
                    i += 1
        src_keys, dst_keys = dst_keys, src_keys
        if positions is not None:
            src_pos, dst_pos = dst_pos, src_pos
        width *= 2
    if src_keys is not keys:
        keys[:n] = src_keys[:n]
        if positions is not None:
            positions[:n] = src_pos[:n]
