"""WGSL's float arithmetic with NumPy's answers (codegen/simt/wgsl.py's float ALU).

WGSL lets the shader compiler treat float arithmetic as algebra, and Mesa's does, whatever the values: it
folded x - x, x + -x and 0 / x to 0 (NaN for inf and NaN in NumPy), x * 0.0 to 0, (x + 1e8) - 1e8 to x,
(x * 1e30) * 1e-30 to x, (a + b) < a to b < 0, and contracted a * b + c. WGSL has no way to forbid it, so
each arithmetic result passes through an identity the compiler cannot see (opaque), and the folds of one
value with itself or with a zero constant are written out with their special cases.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tracejit.ir.kernel_ir import Instr, KOp

# float ops -> WGSL; tj_ functions come from wgsl_functions: WGSL's exp, log, tanh, the inverse and
# hyperbolic functions are accurate to thousands of ulps on some devices (or lose tiny values), it has
# no erf, expm1, log1p, log10, cbrt, hypot or copysign, and x / 0.0 may be 0 where it assumes no inf
FLOAT_OPS = {
    "neg": "(-{0})",
    "add": "({0} + {1})",
    "sub": "({0} - {1})",
    "mul": "({0} * {1})",
    "div": "tj_div_f32({0}, {1})",
    "recip": "tj_div_f32(1.0f, {0})",
    "abs": "abs({0})",
    "rint": "round({0})",
    "sign": "select(select(sign({0}), 0.0f, {0} == 0.0f), {0}, tj_isnan_f32({0}))",  # NaN, +0 as NumPy
    **{op: op + "({0})" for op in ("floor", "ceil", "trunc", "sqrt", "exp2", "sin", "cos", "tan")},
    **{
        op: f"tj_{op}_f32({{0}})"
        for op in (
            "exp",
            "expm1",
            "log",
            "log2",
            "log1p",
            "log10",
            "tanh",
            "erf",
            "cbrt",
            "arcsin",
            "arccos",
            "arctan",
            "sinh",
            "cosh",
            "arcsinh",
            "arccosh",
            "arctanh",
        )
    },
    **{op: f"tj_{op}_f32({{0}}, {{1}})" for op in ("hypot", "copysign", "arctan2", "ldexp")},
}
FLOAT_COMPARISONS = {
    "lt": "({0} < {1})",
    "le": "({0} <= {1} && !tj_isnan_f32({0}) && !tj_isnan_f32({1}))",
    "eq": "({0} == {1} && !tj_isnan_f32({0}) && !tj_isnan_f32({1}))",
    "ne": "({0} != {1} || tj_isnan_f32({0}) || tj_isnan_f32({1}))",
}
ONE, ZERO = "tj_scalars.tj_one", "tj_scalars.tj_zero"  # uniforms 1.0 and 0.0 (Launch.identities): opaque


class FloatArithmetic:
    """The float part of _WGSLRender.alu (its instructions `ins`, helper calls `_call`, `_arith`)."""

    ins: list[Instr]  # declared here, set and defined by _WGSLRender
    _call: Callable[[str, list[str]], str]
    _arith: Callable[[str, str], str]

    uses_identities = False  # whether the source reads the uniforms 1.0 and 0.0 (opaque)

    def float_alu(self, i: int, op: str, a: list[str]) -> str | None:
        """Float op `op` of instruction i on the rendered operands `a`; None for an op not rendered here."""
        if op in (KOp.POW, KOp.FMOD):
            return f"{self._arith(op, 'f32')}({a[0]}, {a[1]})"
        if op == KOp.MUL and any(self._zero_const(j) for j in self.ins[i].srcs):
            # inf * 0 and NaN * 0 are NaN; shader compilers fold x * 0.0 to 0.0
            return self._call("select(({0} * {1}), tj_nan_f32(), !tj_isfinite_f32({0}) || !tj_isfinite_f32({1}))", a)
        if op in (KOp.ADD, KOp.SUB) and self._cancels(i, op):
            # x - x and x + -x: 0, or NaN where x is not finite; shader compilers fold them to 0
            return self._call("select(0.0f, tj_nan_f32(), !tj_isfinite_f32({0}))", a)
        if op == KOp.DIV and self._zero_const(self.ins[i].srcs[0]):
            # 0 / x keeps x's sign and is NaN for NaN and 0: a zero the compiler cannot see (it folds 0 * 1/x to 0)
            zero = self.opaque("0.0f")
            a = [f"(-{zero})" if np.signbit(self.ins[self.ins[i].srcs[0]].arg) else zero, a[1]]
        if op in FLOAT_OPS:
            value = self._call(FLOAT_OPS[op], a)
            return self.opaque(value, op) if op in (KOp.ADD, KOp.SUB, KOp.MUL, KOp.DIV, KOp.RECIP) else value
        return None

    def opaque(self, value: str, op: str = "") -> str:
        """`value` as an expression the shader compiler cannot combine with its neighbours: the result of a
        sum or difference times the uniform tj_one (1.0), of a product or quotient minus the uniform tj_zero
        (0.0), each exact for every float (NaN and -0 too), and each of the other kind, so that no chain of
        like ops reaches through it. "0.0f" alone: tj_zero itself."""
        self.uses_identities = True
        if value == "0.0f":
            return ZERO
        return f"({value} * {ONE})" if op in (KOp.ADD, KOp.SUB) else f"({value} - {ZERO})"

    def _cancels(self, i: int, op: str) -> bool:
        """x - x, x + (-x) or (-x) + x: one value cancelled by itself."""
        a, b = self.ins[i].srcs
        if op == KOp.SUB:
            return a == b
        return any(self.ins[n].op == KOp.NEG and self.ins[n].srcs[0] == m for n, m in ((b, a), (a, b)))

    def _zero_const(self, j: int) -> bool:
        x = self.ins[j]
        return x.op == KOp.CONST and x.arg == 0
