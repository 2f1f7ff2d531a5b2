"""Vectorisable float32 exp, tanh, log and erf, float64 exp, tanh and log, ldexp and float16 conversions, as LLVM
IR (codegen/cpu/llvm_values.py): built from arithmetic and selects only (no libm calls), so LLVM's loop vectoriser can
vectorise a loop that calls them. NaN, infinities, signed zeros and subnormals behave as in NumPy; results
are within 2 ulp of it. codegen/cpu/numba_math.py makes them Numba intrinsics; codegen/cpu/native.py calls
them from the kernels it renders."""

from __future__ import annotations

import math

from tracejit.codegen import math_f32 as M  # the coefficients, shared with the C-style renderers
from tracejit.codegen.cpu.llvm_values import (
    F32,
    F64,
    I16,
    I32,
    I64,
    bitcast,
    convert,
    copysign,
    fabs,
    floor,
    fma,
    horner,
    host_scalef,
    scale,
    select,
    smax,
    smin,
)

# ---------------------------------------------------------------------------------------------------
# Powers of two and ldexp: x * 2**n rounded once, n an integral float within the frontend's clamp
# (+-320 for float32, +-2200 for float64). A libm call would keep the loop scalar.


def pow2_f32(n):
    """2**n for an integral float32 n in [-126, 127], built from its exponent bits."""
    return bitcast(convert(fma(n, float(1 << 23), float(127 << 23)), I32), F32)


def pow2_f64(k):
    """2**k for an int64 k in [-1022, 1023], built from its exponent bits."""
    return bitcast((k + 1023) << 52, F64)


def ldexp_f32(x, n):
    """float32 (float16 computed in float32): exact in float64, then rounded once to float32."""
    return convert(convert(x, F64) * pow2_f64(convert(n, I64)), F32)


def ldexp_f64(x, n):
    """musl's scalbn without branches: an n beyond the normal exponents is applied in steps that stay
    exact (a step down by 2**-969 leaves the last one at least 53 binades to round a subnormal once)."""
    k = convert(n, I64)
    for _ in range(2):
        big = k > 1023
        x = x * select(big, 2.0**1023, 1.0, F64)
        k = select(big, k - 1023, k)
    for _ in range(2):
        small = k < -1022
        x = x * select(small, 2.0**-969, 1.0, F64)
        k = select(small, k + 969, k)
    return x * pow2_f64(smin(smax(k, -1022), 1023))


# ---------------------------------------------------------------------------------------------------
# exp: Cephes expf. x = n*ln2 + r with |r| <= ln2/2, exp(r) by a degree-6 polynomial, times 2**n.


def exp_f32(x):
    """np.exp for a float32 scalar; at most 1 ulp off over all float32 inputs."""
    xc = select(x < M.EXP_HI, x, M.EXP_HI)  # NaN -> EXP_HI here (no NaN to int conversion); restored below
    xc = select(xc > M.EXP_LO, xc, M.EXP_LO)
    n = floor(fma(xc, M.LOG2E, 0.5))  # nearest integer to x / ln2, in [-150, 128]
    r = fma(n, -M.LN2_HI, xc)
    r = fma(n, -M.LN2_LO, r)
    y = fma(horner(r, M.EXP_P), r * r, r) + 1.0  # exp(r) in [0.7, 1.42]
    if host_scalef():  # y * 2**n rounded once, in one instruction: the same bits as the two factors below
        y = scale(y, convert(n, I32))
    else:  # 2**n in two factors, each a normal float32 even when 2**n is not: the result rounds once,
        n1 = floor(n * 0.5)  # also into the subnormal range, and overflows to inf by itself
        y = y * pow2_f32(n1) * pow2_f32(n - n1)
    return select(x == x, y, x)


# ---------------------------------------------------------------------------------------------------
# tanh: Cephes tanhf. An odd polynomial below 0.625, 1 - 2 / (exp(2|x|) + 1) above; both are
# computed for |x| and the sign copied from x (so tanh(-0) = -0).


def tanh_f32(x):
    """np.tanh for a float32 scalar; at most 1 ulp off over all float32 inputs."""
    a = fabs(x)
    s = a * a
    small = fma(horner(s, M.TANH_P) * s, a, a)
    large = 1.0 - 2.0 / (exp_f32(a + a) + 1.0)  # exp overflow to inf gives exactly 1
    return copysign(select(a < M.TANH_SPLIT, small, large), x)  # NaN takes the large path: NaN


# ---------------------------------------------------------------------------------------------------
# float64 exp and tanh: NumPy's default dtype. Numba's np.exp/np.tanh on float64 are libm calls, one
# element at a time (a float64 GELU of 64x3072 took 4.3 ms, 22 ns an element).
# exp: x = n*ln2 + r with |r| <= ln2/2 (fdlibm's two-part ln2: n * _LN2_HI_F64 is exact), exp(r) by its
# Taylor polynomial to degree 13 (the remainder is below 0.04 ulp), times 2**n in two normal factors.

_LOG2E_F64, _LN2_HI_F64, _LN2_LO_F64 = 1.4426950408889634, 6.93147180369123816490e-01, 1.90821492927058770002e-10
_EXP_HI_F64, _EXP_LO_F64 = 710.0, -746.0  # exp overflows above, rounds to 0 below
_EXP_TAYLOR_F64 = tuple(1.0 / math.factorial(k) for k in range(13, 1, -1))  # 1/13!, ..., 1/2!


def exp_f64(x):
    """np.exp for a float64 scalar, within 1 ulp of the correctly rounded result."""
    xc = select(x < _EXP_HI_F64, x, _EXP_HI_F64)  # NaN -> _EXP_HI_F64 here; restored below
    xc = select(xc > _EXP_LO_F64, xc, _EXP_LO_F64)
    n = floor(fma(xc, _LOG2E_F64, 0.5))  # nearest integer to x / ln2, in [-1076, 1025]
    r = fma(n, -_LN2_HI_F64, xc)
    r = fma(n, -_LN2_LO_F64, r)
    y = fma(horner(r, _EXP_TAYLOR_F64), r * r, r) + 1.0  # exp(r) in [0.7, 1.42]
    if host_scalef():  # y * 2**n rounded once, in one instruction (vscalefpd): the two factors' bits
        y = scale(y, convert(n, I32))
    else:
        n1 = floor(n * 0.5)  # 2**n as two normal factors: rounds once, also to subnormals
        y = y * pow2_f64(convert(n1, I64)) * pow2_f64(convert(n - n1, I64))
    return select(x == x, y, x)


_TANH_P_F64 = (-9.64399179425052238628e-1, -9.92877231001918586564e1, -1.61468768441708447952e3)
_TANH_Q_F64 = (1.0, 1.12811678491632931402e2, 2.23548839060100448583e3, 4.84406305325125486048e3)


def tanh_f64(x):
    """np.tanh for a float64 scalar (Cephes tanh: a rational function below 0.625, else
    1 - 2 / (exp(2|x|) + 1)); within 2 ulp of the correctly rounded result."""
    a = fabs(x)
    s = a * a
    small = fma(a, s * horner(s, _TANH_P_F64) / horner(s, _TANH_Q_F64), a)
    large = 1.0 - 2.0 / (exp_f64(a + a) + 1.0)  # exp overflow to inf gives exactly 1
    return copysign(select(a < 0.625, small, large), x)  # NaN takes the large path: NaN


# ---------------------------------------------------------------------------------------------------
# log: Cephes logf. x = m * 2**e with m in [sqrt(1/2), sqrt(2)), log(m) = f - f**2/2 + f**3 * P(f)
# for f = m - 1, plus e * ln2 in two parts.


def log_f32(x):
    """np.log for a float32 scalar; at most 1 ulp off over all float32 inputs."""
    subnormal = x < 2.0**-126  # below the smallest normal float32
    xs = select(subnormal, x * 2.0**23, x)
    bits = bitcast(xs, I32)
    # For positive finite xs: xs = m * 2**e with m in [0.5, 1) (other inputs are replaced below).
    e = convert(bits >> 23, F32) - select(subnormal, 126.0 + 23.0, 126.0, F32)
    m = bitcast((bits & 0x007FFFFF) | 0x3F000000, F32)
    below = m < M.SQRT_HALF
    e = select(below, e - 1.0, e)
    f = select(below, m + m, m) - 1.0  # exact
    z = f * f
    y = horner(f, M.LOG_P) * f * z
    y = fma(e, M.LN2_LO, y)
    y = fma(-0.5, z, y)
    r = fma(e, M.LN2_HI, f + y)
    r = select(x < math.inf, r, x)  # +inf and NaN
    r = select(x == 0.0, -math.inf, r)  # +-0
    return select(x < 0.0, math.nan, r)


# float64 log: fdlibm's __ieee754_log (FreeBSD's and musl's before 2018) without its branches. x = 2**k * m with m
# in [sqrt(2)/2, sqrt(2)) (its high word moved so that the exponent field splits there), f = m - 1, s = f / (2 + f),
# log(m) = f - f*f/2 + s * (f*f/2 + R(s*s)) with R a degree-14 even polynomial, plus k * ln2 in two parts. Numba's
# np.log on float64 is a libm call, one element at a time (numpy-benchmarks' log_likelihood: 100,000 logs and exps,
# 0.86 ms against NumPy's SIMD 0.82).

_LG_F64 = (
    6.666666666666735130e-01,
    3.999999999940941908e-01,
    2.857142874366239149e-01,
    2.222219843214978396e-01,
    1.818357216161805012e-01,
    1.531383769920937332e-01,
    1.479819860511658591e-01,
)


def log_f64(x):
    """np.log for a float64 scalar; within 1 ulp of the correctly rounded result."""
    subnormal = x < 2.0**-1022  # (and 0, and negatives, replaced below)
    xs = select(subnormal, x * 2.0**54, x)
    ix = bitcast(xs, I64)
    hx = (ix >> 32) + (0x3FF00000 - 0x3FE6A09E)
    k = (hx >> 20) - 0x3FF - select(subnormal, 54, 0, I64)
    m = bitcast((((hx & 0x000FFFFF) + 0x3FE6A09E) << 32) | (ix & 0xFFFFFFFF), F64)
    f = m - 1.0
    hfsq = 0.5 * f * f
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    lg1, lg2, lg3, lg4, lg5, lg6, lg7 = _LG_F64
    r = z * horner(w, (lg7, lg5, lg3, lg1)) + w * horner(w, (lg6, lg4, lg2))
    dk = convert(k, F64)
    y = dk * _LN2_HI_F64 - ((hfsq - (s * (hfsq + r) + dk * _LN2_LO_F64)) - f)
    y = select(x < math.inf, y, x)  # +inf and NaN
    y = select(x == 0.0, -math.inf, y)  # +-0
    return select(x < 0.0, math.nan, y)


# ---------------------------------------------------------------------------------------------------
# erf: two minimax fits made for tracejit (Lawson-weighted least squares against math.erf/erfc,
# coefficients rounded to float32 one at a time, refitting the rest). |x| <= 0.9: erf(x) = x + x * P(x**2);
# above, erf(|x|) = 1 - exp(Q(|x|)) with Q ~ log(erfc) on [0.9, 4]; beyond 4, erf rounds to +-1.


def erf_f32(x):
    """math.erf for a float32 scalar; at most 1 ulp (7e-8) off over all float32 inputs."""
    small = fma(horner(x * x, M.ERF_P), x, x)  # keeps the sign of -0
    a = fabs(x)
    t = select(a < M.ERF_CLAMP, a, M.ERF_CLAMP)  # +-inf -> 4
    large = copysign(1.0 - exp_f32(horner(t, M.ERFC_Q)), x)
    return select(a > M.ERF_SPLIT, large, small)  # NaN takes the small path: NaN


# ---------------------------------------------------------------------------------------------------
# float16 storage: numba kernels keep such arrays as uint16 bit patterns and convert on load and store
# (round to nearest even, as NumPy's astype), computing in float32; with selects only, so they vectorise.


def f16_to_f32(bits16):
    """binary16 bits (uint16) -> float32; exact for every input."""
    h = convert(bits16, I32, unsigned=True)
    sign = (h & 0x8000) << 16
    exp = (h >> 10) & 0x1F
    man = h & 0x3FF
    normal = bitcast(sign | ((exp + 112) << 23) | (man << 13), F32)
    special = bitcast(sign | 0x7F800000 | (man << 13), F32)  # inf, NaN (payload kept)
    tiny = convert(man, F32) * 2.0**-24  # subnormal, exact
    tiny = select(sign != 0, -tiny, tiny)
    return select(exp == 0, tiny, select(exp == 31, special, normal))


def f32_to_f16(f):
    """float32 (or any number, via float32) -> binary16 bits (uint16), rounding to nearest even, with
    selects only so it vectorises. A float64 goes through float32 first, which can round twice."""
    x = convert(bitcast(f, I32), I64, unsigned=True)
    sign = (x >> 16) & 0x8000
    exp = (x >> 23) & 0xFF
    man = x & 0x7FFFFF
    e = exp - 112  # the binary16 exponent field, if it were normal
    base = (e << 10) | (man >> 13)
    rest = man & 0x1FFF
    normal = base + _one_if((rest > 0x1000) | ((rest == 0x1000) & ((base & 1) == 1)))  # a carry may give inf
    shift = smin(smax(14 - e, 1), 31)  # subnormal result: shift the full mantissa
    full = man | 0x800000
    half = 1 << (shift - 1)
    sub = full >> shift
    rest_s = full & ((half << 1) - 1)
    subnormal = sub + _one_if((rest_s > half) | ((rest_s == half) & ((sub & 1) == 1)))
    nan_or_inf = select(man != 0, 0x7E00, 0x7C00, I64)
    out = select(exp == 255, nan_or_inf, select(e >= 31, 0x7C00, select(e > 0, normal, select(e < -10, 0, subnormal))))
    return convert(sign | out, I16)


def _one_if(condition):
    """1 where condition holds, else 0 (int64)."""
    return convert(condition, I64, unsigned=True)


def round_f16(f):
    """float32 -> the nearest float16 value, as float32: the result of a float16 op, rounded as NumPy's loops do."""
    return f16_to_f32(f32_to_f16(f))
