"""C functions a C-style kernel calls, each emitted once per kernel into the _Render's `helpers`: NumPy's
integer and float division and modulo, integer powers, the fault record's writer, the bounds check of an
index read from data, and math_f32's own float32 functions. Each takes the _Render `r` it emits for."""

from __future__ import annotations

import re

import numpy as np

from tracejit.ir.kernel_ir import INDEX, KOp
from tracejit.codegen import math_f32


def math_helper(r, name: str) -> None:
    """Emit math_f32's C function `name` once, after the tj_ functions it calls."""
    if name in r.helpers:
        return
    t = r.t
    sources = math_f32.c_source(t.helper_qualifier, t.as_float, t.as_int)
    if name.endswith("_f64"):
        sources = math_f32.c_source_f64(t.helper_qualifier, t.as_double, t.as_long)
    text = sources[name]
    defines = set(re.findall(r"(?:float|double) (tj_\w+)\(", text))
    for dep in dict.fromkeys(re.findall(r"\b(tj_\w+_f(?:32|64))\(", text)):
        if dep not in defines:
            math_helper(r, next(k for k, v in sources.items() if f" {dep}(" in v))
    r.helpers[name] = text


def arithmetic(r, op: str, dt: np.dtype) -> str:
    """NumPy's mod and floor division of floats, and of integers with their pow (a negative exponent
    faults, as NumPy raises), as a C function; returns its name."""
    t = r.ctype(dt)
    name = f"tj_{op}_{t.replace(' ', '_')}"
    if name in r.helpers:
        return name
    q = r.t.helper_qualifier
    if dt.kind == "f":
        body = {
            "mod": f"{t} m = fmod(a, b);\n    if (b == 0 || isnan(m)) return m;\n"
            f"    if (m != 0) {{ if ((b < 0) != (m < 0)) m += b; }} else m = copysign(({t})0, b);\n"
            "    return m;",
            # (an infinite or NaN a: NaN, returned before PoCL's compiler, given a constant infinite a,
            # folded the rest to b)
            "idiv": f"if (b == 0) return a / b;\n    {t} m = fmod(a, b);\n    if (isnan(m)) return m;\n"
            f"    {t} d = (a - m) / b;\n"
            "    if (m != 0 && ((b < 0) != (m < 0))) d -= 1;\n"
            f"    if (d != 0) {{ {t} f = floor(d); if (d - f > ({t})0.5) f += 1; return f; }}\n"
            f"    return copysign(({t})0, a / b);",
        }[op]
        r.helpers[name] = f"{q} {t} {name}({t} a, {t} b) {{\n    {body}\n}}"
        return name
    u = r.t.unsigned[max(4, dt.itemsize)]
    signed = dt.kind == "i"
    if op == KOp.POW:
        err = f", int code, {r.error_record} err" if signed else ""
        report = f"{fault(r)}(err, code, ({r.long})b)" if signed else ""
        neg = f"if (b < 0) {{ {report}; return 0; }}\n    " if signed else ""
        r.helpers[name] = (
            f"{q} {t} {name}({t} a, {t} b{err}) {{\n    {neg}{u} r = 1, x = ({u})a;\n"
            "    while (b) { if (b & 1) r *= x; x *= x; b >>= 1; }\n"
            f"    return ({t})r;\n}}"
        )
        return name
    minus_one = (
        ("    if (b == -1) return " + ("0;" if op == KOp.MOD else f"({t})(({u})0 - ({u})a);") + "\n") if signed else ""
    )
    fix = (
        (
            "    if (r != 0 && ((r < 0) != (b < 0))) r += b;\n    return r;"
            if op == KOp.MOD
            else "    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;\n    return q;"
        )
        if signed
        else ("    return r;" if op == KOp.MOD else "    return q;")
    )
    first = f"    {t} r = a % b;\n" if op == KOp.MOD else f"    {t} q = a / b;\n"
    r.helpers[name] = f"{q} {t} {name}({t} a, {t} b) {{\n    if (b == 0) return 0;\n{minus_one}{first}{fix}\n}}"
    return name


def fault(r) -> str:
    """tj_fault(err, code, value): the first fault of a launch (by the atomic count) keeps its code and
    value in the error record (int words: code, value's low and high halves, count)."""
    name, long = "tj_fault", r.long
    r.helpers.setdefault(
        name,
        (
            f"{r.t.helper_qualifier} void {name}({r.error_record} err, int code, {long} value) {{\n"
            f"    if ({r.t.fault_count.format('err')} == 0) {{ err[0] = code; err[1] = (int)value; "
            "err[2] = (int)(value >> 32); }\n}"
        ),
    )
    return name


def bound(r, i: int, v: str) -> str:
    """BOUND: an index read from data (of its own integer type) as an offset along its axis."""
    x = r.ins[i]
    dt, (size, kind) = r.ins[x.srcs[0]].dtype, x.arg
    t, long = r.ctype(dt), r.long
    name = f"tj_bound_{t.replace(' ', '_')}"
    if name not in r.helpers:
        outside = f"{{ {fault(r)}(err, code, ({long})v); return 0; }}"
        if dt.kind == "i":  # negative: from the end
            body = f"{long} w = (v < 0) ? ({long})v + n : ({long})v;\n    if (w < 0 || w >= n) {outside}"
        else:
            ulong = r.t.unsigned[8]
            body = f"{long} w = ({long})v;\n    if (({ulong})v >= ({ulong})n) {outside}"
        r.helpers[name] = (
            f"{r.t.helper_qualifier} {long} {name}({t} v, {long} n, int code, "
            f"{r.error_record} err) {{\n    {body}\n    return w;\n}}"
        )
    return f"(({r.idx}){name}({v}, {r.literal(size, INDEX)}, {kind.code}, tj_error))"
