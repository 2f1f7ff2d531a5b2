"""WGSL functions the renderer emits on demand: float32 exp/tanh/log/erf (math_f32's algorithms), the
bit-level NaN/Inf helpers they and the renderer use, and NumPy-exact //, % and ** per type."""

from __future__ import annotations

import functools
import math

import numpy as np

from tracejit.ir.kernel_ir import NEGATIVE_POWER, KOp
from tracejit.codegen import math_f32


def f32_literal(v: float) -> str:
    """An f32 literal that reads back exactly."""
    text = str(np.float32(v))
    return text + ("" if any(c in text for c in ".e") else ".0") + "f"


_f32 = f32_literal


@functools.cache
def math_helpers() -> dict[str, str]:
    """tracejit's float32 exp/tanh/log/erf (math_f32's algorithms and coefficients) in WGSL: accurate to
    1 ulp where WGSL's builtins promise several, and tanh without exp's overflow at large |x|."""

    # (math.e, the same double as np.e, which NumPy's stubs delete: mypy 2.4 refuses to read it)
    log2_e, log10_e = _f32(np.log2(math.e)), _f32(np.log10(math.e))

    def horner(var, cs, acc="p"):
        return "\n    ".join([f"var {acc} = {_f32(cs[0])};"] + [f"{acc} = {acc} * {var} + {_f32(c)};" for c in cs[1:]])

    m = math_f32
    return {
        "tj_exp_f32": (
            "fn tj_exp_f32(x: f32) -> f32 {\n"
            f"    let xc = clamp(x, {_f32(m.EXP_LO)}, {_f32(m.EXP_HI)});\n"
            f"    let n = floor(xc * {_f32(m.LOG2E)} + 0.5f);\n"
            f"    var r = n * {_f32(-m.LN2_HI)} + xc;\n    r = n * {_f32(-m.LN2_LO)} + r;\n"
            f"    {horner('r', m.EXP_P)}\n"
            "    let y = (p * (r * r) + r) + 1.0f;\n    let n1 = floor(n * 0.5f);\n"
            "    let v = (y * exp2(n1)) * exp2(n - n1);\n"
            "    return select(v, x, tj_isnan_f32(x));\n}"
        ),
        "tj_tanh_f32": (
            "fn tj_tanh_f32(x: f32) -> f32 {\n    let a = abs(x);\n    let s = a * a;\n"
            f"    {horner('s', m.TANH_P)}\n"
            "    let small = (p * s) * a + a;\n    let large = 1.0f - 2.0f / (tj_exp_f32(a + a) + 1.0f);\n"
            f"    let t = select(large, small, a < {_f32(m.TANH_SPLIT)});\n"
            "    return select(tj_copysign_f32(t, x), x, tj_isnan_f32(x));\n}"
        ),
        "tj_log_f32": (
            "fn tj_log_f32(x: f32) -> f32 {\n"
            "    let sub = x < 1.17549435e-38f;\n    let xs = select(x, x * 8388608.0f, sub);\n"
            "    let bits = bitcast<i32>(xs);\n"
            "    var e = f32(bits >> 23u) - select(126.0f, 149.0f, sub);\n"
            "    let m = bitcast<f32>((bits & 0x007FFFFF) | 0x3F000000);\n"
            f"    let below = m < {_f32(m.SQRT_HALF)};\n    e = select(e, e - 1.0f, below);\n"
            "    let f = select(m, m + m, below) - 1.0f;\n    let z = f * f;\n"
            f"    {horner('f', m.LOG_P)}\n"
            f"    var y = (p * f) * z;\n    y = e * {_f32(m.LN2_LO)} + y;\n    y = -0.5f * z + y;\n"
            f"    var r = e * {_f32(m.LN2_HI)} + (f + y);\n"
            "    r = select(r, x, tj_isnan_f32(x) || x == tj_inf_f32());\n"
            "    r = select(r, -tj_inf_f32(), x == 0.0f);\n"
            "    return select(r, tj_nan_f32(), x < 0.0f);\n}"
        ),
        "tj_erf_f32": (
            "fn tj_erf_f32(x: f32) -> f32 {\n    let s = x * x;\n"
            f"    {horner('s', m.ERF_P)}\n"
            "    let small = p * x + x;\n    let a = abs(x);\n"
            f"    let t = min(a, {_f32(m.ERF_CLAMP)});\n"
            f"    {horner('t', m.ERFC_Q, 'q')}\n"
            "    let e = 1.0f - tj_exp_f32(q);\n"
            f"    return select(small, select(e, -e, x < 0.0f), a > {_f32(m.ERF_SPLIT)});\n}}"
        ),
        # as math_f32.from_library: Kahan's corrections, a Newton step after exp2/log2, a scaled hypot
        "tj_expm1_f32": (
            "fn tj_expm1_f32(x: f32) -> f32 {\n    let u = tj_exp_f32(x);\n    let um = u - 1.0f;\n"
            "    if (u == 1.0f) { return x; }\n    if (um == -1.0f) { return -1.0f; }\n"
            "    if (!tj_isfinite_f32(u)) { return u; }\n"
            # away from 0, u - 1 loses nothing, and Kahan's um * x would overflow before u does
            "    if (abs(x) > 0.5f) { return um; }\n    return um * x / tj_log_f32(u);\n}"
        ),
        # 2 atanh(x / (2 + x)) by its series near 0: Kahan's (u - 1) correction does not survive
        # shader compilers, which reassociate (1 + x) - 1 to x
        "tj_log1p_f32": (
            "fn tj_log1p_f32(x: f32) -> f32 {\n"
            "    if (x < -0.29289323f || x > 0.41421357f || tj_isnan_f32(x)) { return tj_log_f32(1.0f + x); }\n"
            "    let s = x / (2.0f + x);\n    let z = s * s;\n"
            "    let p = ((((z * 0.09090909f + 0.11111111f) * z + 0.14285715f) * z + 0.2f) * z + 0.33333334f) * z;\n"
            "    return select(2.0f * (s * p + s), x, x == 0.0f);\n}"
        ),
        "tj_log2_f32": (f"fn tj_log2_f32(x: f32) -> f32 {{\n    return tj_log_f32(x) * {log2_e};\n}}"),
        "tj_log10_f32": (f"fn tj_log10_f32(x: f32) -> f32 {{\n    return tj_log_f32(x) * {log10_e};\n}}"),
        "tj_cbrt_f32": (
            "fn tj_cbrt_f32(x: f32) -> f32 {\n    let a = abs(x);\n"
            "    if (a == 0.0f || !tj_isfinite_f32(a)) { return x + x; }\n"
            "    let tiny = a < 1e-30f;   // scaled by 2**72 (cbrt: 2**24), away from subnormals\n"
            "    let s = select(a, a * 4722366482869645213696.0f, tiny);\n"
            "    var y = exp2(tj_log_f32(s) * 0.48089835f);\n    y = y + (s / (y * y) - y) / 3.0f;\n"
            "    y = y + (s / (y * y) - y) / 3.0f;\n"
            "    return tj_copysign_f32(select(y, y * 5.9604645e-8f, tiny), x);\n}"
        ),
        # Cephes atanf (2 ulps) and the rest of the inverse and hyperbolic functions built on it, exp,
        # expm1 and log1p, so no result depends on the device's low-accuracy builtins
        "tj_arctan_f32": (
            "fn tj_arctan_f32(x0: f32) -> f32 {\n    var x = abs(x0);\n    var y = 0.0f;\n"
            "    if (x > 2.4142135f) { y = 1.5707964f; x = -1.0f / x; }\n"
            "    else if (x > 0.41421357f) { y = 0.7853982f; x = (x - 1.0f) / (x + 1.0f); }\n"
            "    let z = x * x;\n"
            "    y = y + ((((0.0805374449538f * z - 0.138776856032f) * z + 0.199777106478f) * z"
            " - 0.333329491539f) * z * x + x);\n"
            "    return select(tj_copysign_f32(y, x0), x0, tj_isnan_f32(x0));\n}"
        ),
        "tj_arctan2_f32": (
            "fn tj_arctan2_f32(y: f32, x: f32) -> f32 {\n"
            "    if (tj_isnan_f32(x) || tj_isnan_f32(y)) { return tj_nan_f32(); }\n"
            "    let ax = abs(x);\n    let ay = abs(y);\n    var r: f32;\n"
            "    if (tj_isinf_f32(ax) && tj_isinf_f32(ay)) { r = 0.7853982f; }\n"
            "    else if (ax == 0.0f && ay == 0.0f) { r = 0.0f; }\n"
            "    else { r = tj_arctan_f32(ay / ax); }\n"
            "    if (tj_signbit_f32(x)) { r = 3.1415927f - r; }\n"
            "    return tj_copysign_f32(r, y);\n}"
        ),
        "tj_arcsin_f32": (
            "fn tj_arcsin_f32(x: f32) -> f32 {\n    return tj_arctan2_f32(x, sqrt((1.0f - x) * (1.0f + x)));\n}"
        ),
        "tj_arccos_f32": (
            "fn tj_arccos_f32(x: f32) -> f32 {\n    return tj_arctan2_f32(sqrt((1.0f - x) * (1.0f + x)), x);\n}"
        ),
        "tj_sinh_f32": (
            "fn tj_sinh_f32(x: f32) -> f32 {\n    let a = abs(x);\n    var r: f32;\n"
            "    if (a > 88.0f) { let h = tj_exp_f32(0.5f * a); r = (0.5f * h) * h; }\n"
            "    else { let e = tj_expm1_f32(a); r = 0.5f * (e + e / (e + 1.0f)); }\n"
            "    return select(tj_copysign_f32(r, x), x, a == 0.0f || tj_isnan_f32(x));\n}"
        ),
        "tj_cosh_f32": (
            "fn tj_cosh_f32(x: f32) -> f32 {\n    let a = abs(x);\n"
            "    if (a > 88.0f) { let h = tj_exp_f32(0.5f * a); return (0.5f * h) * h; }\n"
            "    let e = tj_exp_f32(a);\n    return 0.5f * e + 0.5f / e;\n}"
        ),
        "tj_arcsinh_f32": (
            "fn tj_arcsinh_f32(x: f32) -> f32 {\n    let a = abs(x);\n    var r: f32;\n"
            "    if (a > 4096.0f) { r = tj_log_f32(a) + 0.6931472f; }\n"
            "    else { r = tj_log1p_f32(a + a * a / (1.0f + sqrt(1.0f + a * a))); }\n"
            "    return select(tj_copysign_f32(r, x), x, a == 0.0f || tj_isnan_f32(x));\n}"
        ),
        "tj_arccosh_f32": (
            "fn tj_arccosh_f32(x: f32) -> f32 {\n    if (x < 1.0f) { return tj_nan_f32(); }\n"
            "    if (x > 4096.0f) { return tj_log_f32(x) + 0.6931472f; }\n    let t = x - 1.0f;\n"
            "    return tj_log1p_f32(t + sqrt(2.0f * t + t * t));\n}"
        ),
        "tj_arctanh_f32": (
            "fn tj_arctanh_f32(x: f32) -> f32 {\n    let a = abs(x);\n"
            "    let r = 0.5f * tj_log1p_f32((a + a) / (1.0f - a));\n"
            "    return select(tj_copysign_f32(r, x), x, a == 0.0f || tj_isnan_f32(x));\n}"
        ),
        "tj_div_f32": (
            "fn tj_div_f32(a: f32, b: f32) -> f32 {\n    if ((bitcast<u32>(b) & 0x7fffffffu) != 0u) { return a / b; }\n"
            "    if (a == 0.0f || tj_isnan_f32(a)) { return tj_nan_f32(); }\n"
            "    return bitcast<f32>(((bitcast<u32>(a) ^ bitcast<u32>(b)) & 0x80000000u) | 0x7f800000u);\n}"
        ),
        "tj_hypot_f32": (
            "fn tj_hypot_f32(x: f32, y: f32) -> f32 {\n    let a = abs(x);\n    let b = abs(y);\n"
            "    if (tj_isinf_f32(a) || tj_isinf_f32(b)) { return tj_inf_f32(); }\n"
            "    if (tj_isnan_f32(a) || tj_isnan_f32(b)) { return tj_nan_f32(); }\n"
            "    let m = max(a, b);\n    let n = min(a, b);\n    if (m == 0.0f) { return m; }\n"
            "    let r = n / m;\n    return m * sqrt(1.0f + r * r);\n}"
        ),
    }


BASE_HELPERS = {
    # the first fault of a launch (by the count in word 3) keeps its code and value in the error record
    "tj_fault": (
        "fn tj_fault(code: i32, low: i32, high: i32) {\n"
        "    if (atomicAdd(&tj_error[3], 1i) == 0i) {\n"
        "        atomicStore(&tj_error[0], code);\n        atomicStore(&tj_error[1], low);\n"
        "        atomicStore(&tj_error[2], high);\n    }\n}"
    ),
    # an index read from data as an offset along an axis of n elements (kernel_ir's BOUND)
    "tj_bound_i32": (
        "fn tj_bound_i32(v: i32, n: i32, code: i32) -> i32 {\n"
        "    let w = select(v, v + n, v < 0i);\n"
        "    if (w < 0i || w >= n) { tj_fault(code, v, select(0i, -1i, v < 0i)); return 0i; }\n"
        "    return w;\n}"
    ),
    "tj_bound_u32": (
        "fn tj_bound_u32(v: u32, n: i32, code: i32) -> i32 {\n"
        "    if (v >= u32(n)) { tj_fault(code, bitcast<i32>(v), 0i); return 0i; }\n"
        "    return i32(v);\n}"
    ),
    "tj_isnan_f32": "fn tj_isnan_f32(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }",
    "tj_isinf_f32": "fn tj_isinf_f32(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }",
    "tj_inf_f32": "fn tj_inf_f32() -> f32 { var b = 0x7f800000u; return bitcast<f32>(b); }",
    "tj_nan_f32": "fn tj_nan_f32() -> f32 { var b = 0x7fc00000u; return bitcast<f32>(b); }",
    "tj_isfinite_f32": "fn tj_isfinite_f32(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) < 0x7f800000u; }",
    "tj_signbit_f32": "fn tj_signbit_f32(x: f32) -> bool { return (bitcast<u32>(x) >> 31u) == 1u; }",
    # WGSL's ldexp is indeterminate for an exponent above 128 and may give 0 below -126: three steps of
    # at most 107 each (the frontend clamps n to +-320); they move monotonically towards the result, so no
    # step overflows or underflows unless the result does
    "tj_ldexp_f32": (
        "fn tj_ldexp_f32(x: f32, n: f32) -> f32 {\n"
        "    let k = i32(n);\n    let a = k / 3;\n    let b = (k - a) / 2;\n"
        "    return ldexp(ldexp(ldexp(x, a), b), k - a - b);\n}"
    ),
    "tj_copysign_f32": (
        "fn tj_copysign_f32(x: f32, s: f32) -> f32 {\n"
        "    return bitcast<f32>((bitcast<u32>(x) & 0x7fffffffu) | (bitcast<u32>(s) & 0x80000000u));\n}"
    ),
}


def arithmetic(op: str, t: str) -> str:
    """`fn tj_{op}_{t}(a, b)`: floor division, modulo or power of f32, i32 or u32 as NumPy defines them
    (i32 power records a fault for a negative exponent)."""
    name = f"tj_{op}_{t}"
    if t == "f32":
        body = {
            # NumPy's npy_divmod: from fmod, the remainder with the divisor's sign (a zero one too)
            "mod": "let m = tj_fmod_f32(a, b);\n    if (b == 0.0f || tj_isnan_f32(m)) { return m; }\n"
            "    if (m != 0.0f) { return select(m, m + b, (b < 0.0f) != (m < 0.0f)); }\n"
            "    return tj_copysign_f32(0.0f, b);",
            # by zero: NaN for 0 or NaN, else an infinity signed by both operands (a / b is 0 on lavapipe);
            # else NumPy's npy_floor_divide: (a - fmod(a, b)) / b, rounded to the integer it is
            "idiv": "if (b == 0.0f) {\n        if (a == 0.0f || tj_isnan_f32(a)) { return tj_nan_f32(); }\n"
            "        return bitcast<f32>(((bitcast<u32>(a) ^ bitcast<u32>(b)) & 0x80000000u) | 0x7f800000u);\n"
            "    }\n    let m = tj_fmod_f32(a, b);\n    if (tj_isnan_f32(m)) { return m; }\n    var d = (a - m) / b;\n"
            "    if (m != 0.0f && ((b < 0.0f) != (m < 0.0f))) { d = d - 1.0f; }\n"
            "    if (d != 0.0f) { var f = floor(d); if (d - f > 0.5f) { f = f + 1.0f; } return f; }\n"
            "    return tj_copysign_f32(0.0f, a / b);",
            # C's fmod, exact: long division by |b| scaled to |r|'s exponent, each subtraction exact
            # (Sterbenz), at most one step per binade between a and b
            "fmod": "if (b == 0.0f || !tj_isfinite_f32(a) || tj_isnan_f32(b)) { return tj_nan_f32(); }\n"
            "    let d = abs(b);\n    var r = abs(a);\n    if (tj_isinf_f32(b) || r < d) { return a; }\n"
            "    let ed = frexp(d).exp;\n"
            "    loop {\n        if (r < d) { break; }\n"
            "        var s = ldexp(d, frexp(r).exp - ed);\n        if (s > r) { s = s * 0.5f; }\n"
            "        r = r - s;\n    }\n"
            "    return tj_copysign_f32(r, a);",
            # C's pow: 1 ** y and x ** 0 are 1 even for NaN; (-1) ** inf is 1; -inf to an odd power is -inf
            "pow": "if (b == 0.0f || a == 1.0f) { return 1.0f; }\n"
            "    if (tj_isnan_f32(a) || tj_isnan_f32(b)) { return tj_nan_f32(); }\n"
            "    let ab = abs(a);\n    if (ab == 1.0f && tj_isinf_f32(b)) { return 1.0f; }\n"
            "    var r = tj_exp_f32(b * tj_log_f32(ab));\n"
            "    if (ab == 0.0f) { r = select(tj_inf_f32(), 0.0f, b > 0.0f); }\n"
            "    if (tj_signbit_f32(a)) {\n"
            "        if (trunc(b) != b && ab != 0.0f && !tj_isinf_f32(a)) { return tj_nan_f32(); }\n"
            "        if (abs(b) < 16777216.0f && trunc(b) == b && (i32(abs(b)) & 1) == 1) { r = -r; }\n    }\n"
            "    return r;",
        }[op]
        return f"fn {name}(a: f32, b: f32) -> f32 {{\n    {body}\n}}"
    zero, one = ("0i", "1i") if t == "i32" else ("0u", "1u")
    if op == KOp.POW:
        neg = f"if (b < 0i) {{ tj_fault({NEGATIVE_POWER.code}i, b, -1i); return 0i; }}\n    " if t == "i32" else ""
        return (
            f"fn {name}(a: {t}, b0: {t}) -> {t} {{\n    var b = b0;\n    {neg}"
            f"var r = {one};\n    var x = a;\n"
            f"    loop {{ if (b == {zero}) {{ break; }} if ((b & {one}) == {one}) {{ r = r * x; }}"
            f" x = x * x; b = b >> 1u; }}\n    return r;\n}}"
        )
    if op == KOp.FMOD:  # C's %: the sign of a (on magnitudes, for GLSL as below); x % -1 is 0
        if t == "u32":
            return f"fn {name}(a: u32, b: u32) -> u32 {{\n    if (b == 0u) {{ return 0u; }}\n    return a % b;\n}}"
        return (
            f"fn {name}(a: i32, b: i32) -> i32 {{\n    if (b == 0i || b == -1i) {{ return 0i; }}\n"
            "    let ua = select(bitcast<u32>(a), 0u - bitcast<u32>(a), a < 0i);\n"
            "    let ub = select(bitcast<u32>(b), 0u - bitcast<u32>(b), b < 0i);\n"
            "    let r = bitcast<i32>(ua % ub);\n    return select(r, 0i - r, a < 0i);\n}"
        )
    if t == "i32":  # on magnitudes: GLSL, which WGSL may run as, leaves / and % of negatives undefined
        body = (
            "    let ua = select(bitcast<u32>(a), 0u - bitcast<u32>(a), a < 0i);\n"
            "    let ub = select(bitcast<u32>(b), 0u - bitcast<u32>(b), b < 0i);\n"
            "    let uq = ua / ub;\n    let ur = ua - uq * ub;\n"
        )
        if op == KOp.IDIV:
            body += (
                "    var q = bitcast<i32>(uq);\n"
                "    if ((a < 0i) != (b < 0i)) { q = 0i - q; if (ur != 0u) { q = q - 1i; } }\n    return q;"
            )
        else:
            body += (
                "    var r = select(bitcast<i32>(ur), 0i - bitcast<i32>(ur), a < 0i);\n"
                "    if (r != 0i && ((r < 0i) != (b < 0i))) { r = r + b; }\n    return r;"
            )
    else:
        body = "    return a % b;" if op == KOp.MOD else "    return a / b;"
    return f"fn {name}(a: {t}, b: {t}) -> {t} {{\n    if (b == {zero}) {{ return {zero}; }}\n{body}\n}}"
