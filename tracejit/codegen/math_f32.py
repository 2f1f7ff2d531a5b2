"""Float32 exp, tanh, log and erf (and float64 exp and tanh) built from arithmetic and selects only, so a
compiler can vectorise loops that use them: the coefficients (shared with the numba device's versions in
codegen/cpu/llvm_math.py) and the same algorithms as C for the C-style renderers. Renderers use them
where the platform's library calls are scalar (CPU OpenCL); each is within 1 ulp of NumPy (float64 tanh: 2)."""

from __future__ import annotations

import math

import numpy as np

# exp: Cephes expf. x = n*ln2 + r with |r| <= ln2/2, exp(r) by a degree-6 polynomial, times 2**n.
LOG2E = 1.44269504088896341
LN2_HI = 0.693359375  # few significant bits: n * LN2_HI is exact
LN2_LO = -2.12194440e-4  # ln2 - LN2_HI
EXP_HI = 89.0  # exp(89) overflows float32
EXP_LO = -104.0  # exp(-104) < 2**-150 rounds to 0
EXP_P = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)

# tanh: Cephes tanhf. An odd polynomial below 0.625, 1 - 2 / (exp(2|x|) + 1) above.
TANH_SPLIT = 0.625
TANH_P = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1)

# log: Cephes logf. x = m * 2**e with m in [sqrt(1/2), sqrt(2)), log(m) = f - f**2/2 + f**3 * P(f).
SQRT_HALF = 0.707106781186547524
LOG_P = (
    7.0376836292e-2,
    -1.1514610310e-1,
    1.1676998740e-1,
    -1.2420140846e-1,
    1.4249322787e-1,
    -1.6668057665e-1,
    2.0000714765e-1,
    -2.4999993993e-1,
    3.3333331174e-1,
)

# erf: two minimax fits made for tracejit. |x| <= 0.9: x + x * P(x**2); above, 1 - exp(Q(|x|)) with
# Q ~ log(erfc) on [0.9, 4]; beyond 4, erf rounds to +-1.
ERF_SPLIT = 0.9
ERF_CLAMP = 4.0
ERF_P = (-0.0006034459, 0.0050014905, -0.026772095, 0.11281961, -0.37612507, 0.12837915)
ERFC_Q = (0.00019718423, -0.0030556216, 0.022277115, -0.10403738, -0.63705975, -1.1277496, -0.00017749402)

# float64 exp and tanh, as the numba device's (codegen/cpu/llvm_math.py holds the same numbers): exp by its
# Taylor polynomial to degree 13 on |r| <= ln2/2 (fdlibm's two-part ln2), tanh by Cephes' rational function
# below 0.625
LOG2E_F64, LN2_HI_F64, LN2_LO_F64 = 1.4426950408889634, 6.93147180369123816490e-01, 1.90821492927058770002e-10
EXP_HI_F64, EXP_LO_F64 = 710.0, -746.0  # exp overflows above, rounds to 0 below
EXP_TAYLOR_F64 = tuple(1.0 / math.factorial(k) for k in range(13, 1, -1))  # 1/13!, ..., 1/2!
TANH_P_F64 = (-9.64399179425052238628e-1, -9.92877231001918586564e1, -1.61468768441708447952e3)
TANH_Q_F64 = (1.0, 1.12811678491632931402e2, 2.23548839060100448583e3, 4.84406305325125486048e3)

FUNCTIONS = ("exp", "tanh", "log", "erf")  # vectorisable versions, used where the library's are scalar calls
OWN = FUNCTIONS + ("expm1", "log1p", "cbrt", "hypot")  # also for targets whose library lacks them (Metal)
FUNCTIONS_F64 = ("exp", "tanh")


def _f(v: float) -> str:
    text = str(np.float32(v))
    return text + ("" if any(c in text for c in ".e") else ".0") + "f"


def _d(v: float) -> str:
    return repr(float(v))


def _horner(var: str, coefficients, acc: str = "p", ctype: str = "float", literal=_f) -> str:
    lines = [f"{ctype} {acc} = {literal(coefficients[0])};"]
    lines += [f"{acc} = {acc} * {var} + {literal(c)};" for c in coefficients[1:]]
    return "\n    ".join(lines)


def c_source(qualifier: str, as_float: str, as_int: str) -> dict[str, str]:
    """C functions tj_exp_f32, tj_tanh_f32, tj_log_f32, tj_erf_f32 (and what they need), by name.
    `as_float`/`as_int` format a bit-pattern reinterpretation, e.g. "as_float({})". No library function
    is called, not even floor, fabs, copysign or mad: PoCL makes each a scalar call. `a * b + c` may
    still contract to an FMA (OpenCL C's default), as in the numba versions."""
    q = qualifier
    bits = {
        "abs": as_float.format(f"{as_int.format('{0}')} & 0x7FFFFFFF"),
        "copysign": as_float.format(f"({as_int.format('{0}')} & 0x7FFFFFFF) | ({as_int.format('{1}')} & 0x80000000)"),
    }
    # n = floor(xc*log2e + 0.5) and the scaling by 2**n in integers: fewer instructions per lane than in
    # float (a CPU OpenCL's exp loop is bound by them), the same bits. 2**n in two halves, as n reaches
    # -150 (a subnormal result) and 128; n >> 1 is floor(n / 2)
    exp = (
        f"{q} float tj_exp_f32(float x) {{\n"
        f"    float xc = x < {_f(EXP_HI)} ? x : {_f(EXP_HI)};\n"
        f"    xc = xc > {_f(EXP_LO)} ? xc : {_f(EXP_LO)};\n"
        f"    float t = xc * {_f(LOG2E)} + 0.5f;\n"
        "    int k = (int)t;\n"
        "    k = (float)k > t ? k - 1 : k;\n"
        "    float n = (float)k;\n"
        f"    float r = n * {_f(-LN2_HI)} + xc;\n"
        f"    r = n * {_f(-LN2_LO)} + r;\n"
        f"    {_horner('r', EXP_P)}\n"
        "    float y = (p * (r * r) + r) + 1.0f;\n"
        "    int k1 = k >> 1;\n"
        f"    y = (y * {as_float.format('(k1 + 127) << 23')}) * {as_float.format('(k - k1 + 127) << 23')};\n"
        "    return x == x ? y : x;\n}"
    )
    tanh = (
        f"{q} float tj_tanh_f32(float x) {{\n"
        f"    float a = {bits['abs'].format('x')};\n    float s = a * a;\n"
        f"    {_horner('s', TANH_P)}\n"
        "    float small = (p * s) * a + a;\n"
        "    float large = 1.0f - 2.0f / (tj_exp_f32(a + a) + 1.0f);\n"
        f"    float t = a < {_f(TANH_SPLIT)} ? small : large;\n"
        f"    return {bits['copysign'].format('t', 'x')};\n}}"
    )
    log = (
        f"{q} float tj_log_f32(float x) {{\n"
        "    int subnormal = x < 1.17549435e-38f;\n"
        "    float xs = subnormal ? x * 8388608.0f : x;\n"
        f"    int bits = {as_int.format('xs')};\n"
        "    float e = (float)(bits >> 23) - (subnormal ? 149.0f : 126.0f);\n"
        f"    float m = {as_float.format('(bits & 0x007FFFFF) | 0x3F000000')};\n"
        f"    int below = m < {_f(SQRT_HALF)};\n"
        "    e = below ? e - 1.0f : e;\n"
        "    float f = (below ? m + m : m) - 1.0f;\n"
        "    float z = f * f;\n"
        f"    {_horner('f', LOG_P)}\n"
        "    float y = (p * f) * z;\n"
        f"    y = e * {_f(LN2_LO)} + y;\n"
        "    y = -0.5f * z + y;\n"
        f"    float r = e * {_f(LN2_HI)} + (f + y);\n"
        "    r = x < INFINITY ? r : x;\n"
        "    r = x == 0.0f ? -INFINITY : r;\n"
        "    return x < 0.0f ? NAN : r;\n}"
    )
    erf = (
        f"{q} float tj_erf_f32(float x) {{\n"
        "    float s = x * x;\n"
        f"    {_horner('s', ERF_P)}\n"
        "    float small = p * x + x;\n"
        f"    float a = {bits['abs'].format('x')};\n"
        f"    float t = a < {_f(ERF_CLAMP)} ? a : {_f(ERF_CLAMP)};\n"
        f"    {_horner('t', ERFC_Q, 'q')}\n"
        "    float e = 1.0f - tj_exp_f32(q);\n"
        f"    float large = {bits['copysign'].format('e', 'x')};\n"
        f"    return a > {_f(ERF_SPLIT)} ? large : small;\n}}"
    )
    return {
        "tj_exp_f32": exp,
        "tj_tanh_f32": tanh,
        "tj_log_f32": log,
        "tj_erf_f32": erf,
        **from_library(q),
    }


def c_source_f64(qualifier: str, as_double: str, as_long: str) -> dict[str, str]:
    """C functions tj_exp_f64 and tj_tanh_f64, by name: c_source's rules, in double (the integer steps as
    tj_exp_f32's: n = floor(x*log2e + 0.5) as an int, 2**n from exponent bits in two halves)."""
    q = qualifier
    sign, magnitude = "0x8000000000000000L", "0x7FFFFFFFFFFFFFFFL"
    bits_x, bits_t = as_long.format("x"), as_long.format("t")
    half = as_double.format("(long)({} + 1023) << 52")  # 2**n for a normal exponent n
    exp = (
        f"{q} double tj_exp_f64(double x) {{\n"
        f"    double xc = x < {_d(EXP_HI_F64)} ? x : {_d(EXP_HI_F64)};\n"
        f"    xc = xc > {_d(EXP_LO_F64)} ? xc : {_d(EXP_LO_F64)};\n"
        f"    double t = xc * {_d(LOG2E_F64)} + 0.5;\n"
        "    int k = (int)t;\n"
        "    k = (double)k > t ? k - 1 : k;\n"
        "    double n = (double)k;\n"
        f"    double r = n * {_d(-LN2_HI_F64)} + xc;\n"
        f"    r = n * {_d(-LN2_LO_F64)} + r;\n"
        f"    {_horner('r', EXP_TAYLOR_F64, ctype='double', literal=_d)}\n"
        "    double y = (p * (r * r) + r) + 1.0;\n"
        "    int k1 = k >> 1;\n"
        f"    y = (y * {half.format('k1')}) * {half.format('k - k1')};\n"
        "    return x == x ? y : x;\n}"
    )
    tanh = (
        f"{q} double tj_tanh_f64(double x) {{\n"
        f"    double a = {as_double.format(f'{bits_x} & {magnitude}')};\n"
        "    double s = a * a;\n"
        f"    {_horner('s', TANH_P_F64, ctype='double', literal=_d)}\n"
        f"    {_horner('s', TANH_Q_F64, 'd', ctype='double', literal=_d)}\n"
        "    double small = a * (s * p / d) + a;\n"
        "    double large = 1.0 - 2.0 / (tj_exp_f64(a + a) + 1.0);\n"
        "    double t = a < 0.625 ? small : large;\n"
        f"    return {as_double.format(f'({bits_t} & {magnitude}) | ({bits_x} & {sign})')};\n}}"
    )
    return {"tj_exp_f64": exp, "tj_tanh_f64": tanh}


def from_library(q: str) -> dict[str, str]:
    """expm1, log1p, cbrt and hypot from exp, log, pow and sqrt, for libraries without them (Metal):
    Kahan's corrections of exp(x) - 1 and log(1 + x) (a few ulps), cbrt by pow and a Newton step,
    hypot scaled by its larger operand so nothing overflows."""
    return {
        "tj_expm1_f32": (
            f"{q} float tj_expm1_f32(float x) {{\n    float u = exp(x);\n"
            "    if (u == 1.0f) return x;\n    float um = u - 1.0f;\n"
            "    if (um == -1.0f) return -1.0f;\n    if (!(u < INFINITY)) return u;\n"
            "    return um * (x / log(u));\n}"
        ),  # x / log(u) first: um * x overflows near the top
        "tj_log1p_f32": (
            f"{q} float tj_log1p_f32(float x) {{\n    float u = 1.0f + x;\n"
            "    if (u == 1.0f) return x;\n    if (u == INFINITY) return u;\n"
            "    return log(u) * (x / (u - 1.0f));\n}"
        ),
        "tj_cbrt_f32": (
            f"{q} float tj_cbrt_f32(float x) {{\n    float a = fabs(x);\n"
            "    if (a == 0.0f || !(a < INFINITY)) return x + x;\n"
            "    float y = pow(a, 1.0f / 3.0f);\n    y = y + (a / (y * y) - y) / 3.0f;\n"
            "    return copysign(y, x);\n}"
        ),
        "tj_hypot_f32": (
            f"{q} float tj_hypot_f32(float x, float y) {{\n    float a = fabs(x), b = fabs(y);\n"
            "    if (a == INFINITY || b == INFINITY) return INFINITY;\n"
            "    if (a != a || b != b) return a + b;\n"
            "    float m = a > b ? a : b, n = a > b ? b : a;\n    if (m == 0.0f) return m;\n"
            "    float r = n / m;\n    return m * sqrt(1.0f + r * r);\n}"
        ),
    }
