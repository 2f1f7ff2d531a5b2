"""WGSL functions the renderer emits on demand: float32 exp/tanh/log/erf (math_f32's algorithms), the
bit-level NaN/Inf helpers they and the renderer use, and NumPy-exact //, % and ** per type."""
from __future__ import annotations

import functools

import numpy as np

from . import math_f32


def f32_literal(v: float) -> str:
    """An f32 literal that reads back exactly."""
    text = str(np.float32(v))
    return text + ("" if any(c in text for c in ".e") else ".0") + "f"


_f32 = f32_literal


@functools.cache
def math_helpers() -> dict[str, str]:
    """tracejit's float32 exp/tanh/log/erf (math_f32's algorithms and coefficients) in WGSL: accurate to
    1 ulp where WGSL's builtins promise several, and tanh without exp's overflow at large |x|."""
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
            "    return select(v, x, tj_isnan_f32(x));\n}"),
        "tj_tanh_f32": (
            "fn tj_tanh_f32(x: f32) -> f32 {\n    let a = abs(x);\n    let s = a * a;\n"
            f"    {horner('s', m.TANH_P)}\n"
            "    let small = (p * s) * a + a;\n    let large = 1.0f - 2.0f / (tj_exp_f32(a + a) + 1.0f);\n"
            f"    let t = select(large, small, a < {_f32(m.TANH_SPLIT)});\n"
            "    return select(select(t, -t, x < 0.0f), x, tj_isnan_f32(x));\n}"),
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
            "    return select(r, tj_nan_f32(), x < 0.0f);\n}"),
        "tj_erf_f32": (
            "fn tj_erf_f32(x: f32) -> f32 {\n    let s = x * x;\n"
            f"    {horner('s', m.ERF_P)}\n"
            "    let small = p * x + x;\n    let a = abs(x);\n"
            f"    let t = min(a, {_f32(m.ERF_CLAMP)});\n"
            f"    {horner('t', m.ERFC_Q, 'q')}\n"
            "    let e = 1.0f - tj_exp_f32(q);\n"
            f"    return select(small, select(e, -e, x < 0.0f), a > {_f32(m.ERF_SPLIT)});\n}}"),
    }


BASE_HELPERS = {
    "tj_isnan_f32": "fn tj_isnan_f32(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }",
    "tj_isinf_f32": "fn tj_isinf_f32(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }",
    "tj_inf_f32": "fn tj_inf_f32() -> f32 { var b = 0x7f800000u; return bitcast<f32>(b); }",
    "tj_nan_f32": "fn tj_nan_f32() -> f32 { var b = 0x7fc00000u; return bitcast<f32>(b); }",
}



def arithmetic(op: str, t: str) -> str:
    """`fn tj_{op}_{t}(a, b)`: floor division, modulo or power of f32, i32 or u32 as NumPy defines them
    (i32 power sets tj_error for a negative exponent)."""
    name = f"tj_{op}_{t}"
    if t == "f32":
        body = {
            "mod": "if (b == 0.0f) { return tj_nan_f32(); }\n    var m = a - b * trunc(a / b);\n"
                   "    if (m != 0.0f && ((b < 0.0f) != (m < 0.0f))) { m = m + b; }\n    return m;",
            "idiv": "if (b == 0.0f) { return a / b; }\n    return floor(a / b);",
            "pow": "if (b == 0.0f) { return 1.0f; }\n"
                   "    let ab = abs(a);\n    var r = exp2(b * log2(ab));\n"
                   "    if (ab == 0.0f) { r = select(tj_inf_f32(), 0.0f, b > 0.0f); }\n"
                   "    if (a < 0.0f) {\n        if (trunc(b) != b) { return tj_nan_f32(); }\n"
                   "        if (abs(b) < 16777216.0f && (i32(abs(b)) & 1) == 1) { r = -r; }\n    }\n"
                   "    return r;"}[op]
        return f"fn {name}(a: f32, b: f32) -> f32 {{\n    {body}\n}}"
    zero, one = ("0i", "1i") if t == "i32" else ("0u", "1u")
    if op == "pow":
        neg = "if (b < 0i) { tj_error[0] = 1i; return 0i; }\n    " if t == "i32" else ""
        return (f"fn {name}(a: {t}, b0: {t}) -> {t} {{\n    var b = b0;\n    {neg}"
                f"var r = {one};\n    var x = a;\n"
                f"    loop {{ if (b == {zero}) {{ break; }} if ((b & {one}) == {one}) {{ r = r * x; }}"
                f" x = x * x; b = b >> 1u; }}\n    return r;\n}}")
    if t == "i32":   # on magnitudes: GLSL, which WGSL may run as, leaves / and % of negatives undefined
        body = ("    let ua = select(bitcast<u32>(a), 0u - bitcast<u32>(a), a < 0i);\n"
                "    let ub = select(bitcast<u32>(b), 0u - bitcast<u32>(b), b < 0i);\n"
                "    let uq = ua / ub;\n    let ur = ua - uq * ub;\n")
        if op == "idiv":
            body += ("    var q = bitcast<i32>(uq);\n"
                     "    if ((a < 0i) != (b < 0i)) { q = 0i - q; if (ur != 0u) { q = q - 1i; } }\n    return q;")
        else:
            body += ("    var r = select(bitcast<i32>(ur), 0i - bitcast<i32>(ur), a < 0i);\n"
                     "    if (r != 0i && ((r < 0i) != (b < 0i))) { r = r + b; }\n    return r;")
    else:
        body = "    return a % b;" if op == "mod" else "    return a / b;"
    return f"fn {name}(a: {t}, b: {t}) -> {t} {{\n    if (b == {zero}) {{ return {zero}; }}\n{body}\n}}"
