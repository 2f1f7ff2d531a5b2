"""`x ** c` of floats for a constant `c` that is a small whole or half number (`r2 ** -1.5`, `x ** 4`, `d ** -0.5`):
multiplications, a square root and a division instead of a call of the C library's `pow`.

NumPy computes these with `pow`, which LLVM can only call once per element: an n-body force loop spends most of its
time in it, where `1 / (r2 * sqrt(r2))`, what its authors write for Numba by hand, vectorises. The expansion keeps
`pow`'s results on the special values exactly (IEEE's `pow`: `(-0) ** -1.5` is +inf, `(-inf) ** 1.5` is +inf, a
negative base to a half power is NaN, `(-0) ** -3` is -inf) and its values within 2 units in the last place
(float64; `pow` is within 1): whole powers by squaring, a half power by one `sqrt`, a negative one from `1 / x`
(which keeps `x ** -3` finite where `x ** 3` would overflow; `x ** -0.5` is `1 / sqrt(x)`, finite for a
subnormal `x`). A float32 base is computed in float64 and rounded
once, so its result is `powf`'s but for rounding ties. Both numba renderers (native.py's LLVM, numba.py's Python)
take the expansion from here, so they agree to the bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

_F64 = ir.DoubleType()
_STRICT = ("contract",)  # (llvm_ops.STRICT: what Numba puts on every float operation of a kernel)
_LARGEST = 4  # |c| up to this: a fifth multiplication is no longer clearly cheaper than pow


@dataclass(frozen=True)
class Power:
    """c = ±(whole + 0.5 * half)."""

    whole: int
    half: bool
    negative: bool


def constant_power(c, dtype: np.dtype | None) -> Power | None:
    """The expansion of `x ** c` for a float32 or float64 `x` (after the graph made c's dtype x's), or None where
    `pow` is called: other exponents, other dtypes (float16 is computed in float32 and rounded, as NumPy does)."""
    if dtype not in (np.float32, np.float64) or isinstance(c, bool) or not isinstance(c, (int, float)):
        return None
    twice = 2 * c
    if not 0 < abs(twice) <= 2 * _LARGEST or twice != int(twice):  # (NaN and inf fail the first test: pow)
        return None
    whole, half = divmod(int(abs(twice)), 2)
    if not half and c in (1, 2, 3):
        return None  # (x ** 1 is x, squares and cubes the graph makes products already: functions._binary)
    return Power(whole, bool(half), c < 0)


def emit_llvm(b: ir.IRBuilder, x: ir.Value, p: Power) -> ir.Value:
    """The expansion in LLVM IR: x a float or double, the result of x's type."""
    wide = x.type == _F64
    v = x if wide else b.fpext(x, _F64)
    one, zero, inf = (ir.Constant(_F64, k) for k in (1.0, 0.0, float("inf")))
    sqrt = b.module.declare_intrinsic("llvm.sqrt", [_F64])
    if p.negative and p.whole == 0:  # x ** -0.5: 1 / sqrt(x) (1 / x overflows for a subnormal x, the power does not)
        out = b.fdiv(one, b.call(sqrt, [v]), flags=_STRICT)
    else:
        base = b.fdiv(one, v, flags=_STRICT) if p.negative else v
        out = _whole_llvm(b, base, p.whole)
        if p.half:
            root = b.call(sqrt, [base])
            out = root if out is None else b.fmul(out, root, flags=_STRICT)
    if p.half:
        # pow's special values where sqrt's differ: a zero base (sqrt keeps -0's sign), an infinite negative one
        at_zero, at_minus_inf = (inf, zero) if p.negative else (zero, inf)
        out = b.select(b.fcmp_ordered("==", v, ir.Constant(_F64, float("-inf"))), at_minus_inf, out)
        out = b.select(b.fcmp_ordered("==", v, zero), at_zero, out)
    assert out is not None  # (c is not 0)
    return out if wide else b.fptrunc(out, x.type)


def _whole_llvm(b: ir.IRBuilder, base: ir.Value, n: int) -> ir.Value | None:
    if n == 0:
        return None
    square = b.fmul(base, base, flags=_STRICT) if n >= 2 else None
    if n == 1:
        return base
    if n == 2:
        return square
    if n == 3:
        return b.fmul(square, base, flags=_STRICT)
    return b.fmul(square, square, flags=_STRICT)


def python_lines(name: str, x: str, p: Power, dtype: np.dtype) -> list[str]:
    """The expansion as lines of the Python source Numba compiles (codegen/cpu/numba.py), binding `name`."""
    v, base = f"{name}_v", f"{name}_b"
    lines = [f"{v} = np.float64({x})", f"{base} = 1.0 / {v}" if p.negative else f"{base} = {v}"]
    factors = {0: [], 1: [base], 2: [f"{base} * {base}"], 3: [f"{base} * {base} * {base}"]}.get(p.whole)
    if factors is None:  # (4: the square squared, as emit_llvm's)
        lines.append(f"{name}_s = {base} * {base}")
        factors = [f"{name}_s * {name}_s"]
    if p.half:
        factors = [f"({factors[0]})"] if factors else []
        factors.append(f"np.sqrt({base})")
    product = " * ".join(factors)
    if p.negative and p.whole == 0:  # (emit_llvm's 1 / sqrt(x))
        product = f"1.0 / np.sqrt({v})"
    lines.append(f"{name} = {product}")
    if p.half:
        at_zero, at_minus_inf = ("np.inf", "0.0") if p.negative else ("0.0", "np.inf")
        lines.append(f"{name} = {at_zero} if {v} == 0.0 else ({at_minus_inf} if {v} == -np.inf else {name})")
    if np.dtype(dtype) == np.float32:
        lines.append(f"{name} = np.float32({name})")
    return lines
