"""What the graph proves about a float node's every element: which signs it can have (negative, -0.0, +0.0,
positive), a bound on its magnitude (infinity: it may be infinite or the graph does not bound it), and whether it
can be NaN, under NumPy's arithmetic (each op rounded once, to nearest; no FMA, no flush of subnormals).

Simplification (ir/simplify.py) folds what this proves: a value that is always +0.0 (or always -0.0) becomes a
constant, `isinf` of a bounded value and `isnan` of a value that is never NaN become False, a comparison decided
by the bounds becomes its answer, and a unary op of a value that is only ever a zero becomes the constant both
zeros give. That is how promoting a real value to complex, (x, +0.0), stops costing the products of its zero
imaginary part: `-2j * np.pi * k * t / n` in a loop DFT multiplies the imaginary zero by finite values, and the
exponent's real part is +0.0 for every k and t, so `np.exp` of it is the constant 1.0 and its special cases go.

Every rule is the exact IEEE outcome or a superset of it: a node the rules do not know is TOP (anything)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tracejit.ir.graph import Node, Op
from tracejit.ir.value_range import value_range

NEG, NZ, PZ, POS = 1, 2, 4, 8  # x < 0, -0.0, +0.0, x > 0
ZEROS = NZ | PZ
ALL = NEG | NZ | PZ | POS
_DEPTH = 48  # (past this many sources down, a node is TOP: the rewrite that asks visits bottom-up anyway)


@dataclass(frozen=True)
class Facts:
    signs: int  # the sign classes an element may be in (NEG | NZ | PZ | POS); 0 when it is only ever NaN
    bound: float  # |x| <= bound for every element that is not NaN; math.inf: it may be infinite
    nan: bool  # whether an element may be NaN

    @property
    def zero(self) -> bool:
        """Every element is a zero (of the signs `signs` says)."""
        return not self.nan and self.signs != 0 and self.signs & ~ZEROS == 0

    @property
    def lo(self) -> float:
        return -self.bound if self.signs & NEG else 0.0

    @property
    def hi(self) -> float:
        return self.bound if self.signs & POS else 0.0


TOP = Facts(ALL, math.inf, True)


def _finite_bound(bound: float, dtype: np.dtype) -> float:
    """A computed bound widened by the rounding of the op (a few units in the last place of the dtype, and the
    smallest subnormal, which a tiny value may round up to), or infinity where the result may overflow the dtype."""
    info = np.finfo(dtype)
    widened = bound * (1 + 4 * float(info.eps)) + float(info.smallest_subnormal) if math.isfinite(bound) else math.inf
    return widened if widened <= float(info.max) else math.inf


def _negated(signs: int) -> int:
    return (
        (NEG if signs & POS else 0)
        | (POS if signs & NEG else 0)
        | (NZ if signs & PZ else 0)
        | (PZ if signs & NZ else 0)
    )


def _zero_of(nonzero: int) -> int:
    """The zero a nonzero class may round (underflow) to: -0.0 for a negative, +0.0 for a positive value."""
    return (NZ if nonzero & NEG else 0) | (PZ if nonzero & POS else 0)


def _classes(signs: int) -> list[int]:
    return [c for c in (NEG, NZ, PZ, POS) if signs & c]


def _sum_signs(a: int, b: int) -> int:
    """The signs of x + y, x of class a, y of class b, rounded to nearest."""
    if a & ZEROS and b & ZEROS:
        return NZ if a == NZ and b == NZ else PZ  # (-0) + (-0) is -0; any other sum of zeros +0
    if a & ZEROS:
        return b
    if b & ZEROS:
        return a
    if a == b:
        return a  # (same signs: no cancellation; an overflow keeps the sign)
    return NEG | PZ | POS  # opposite signs: either, or an exact cancellation to +0


def _product_signs(a: int, b: int) -> int:
    negative = bool(a & (NEG | NZ)) != bool(b & (NEG | NZ))
    if a & ZEROS or b & ZEROS:
        return NZ if negative else PZ
    return (NEG | NZ) if negative else (POS | PZ)  # (an underflow rounds to the zero of the product's sign)


def _combine(a: Facts, b: Facts, signs_of) -> int:
    return _union(signs_of(x, y) for x in _classes(a.signs) for y in _classes(b.signs))


def _union(classes) -> int:
    out = 0
    for c in classes:
        out |= c
    return out


class FloatFacts:
    """The facts of float nodes, memoised by node (nodes are interned: equal nodes are one object). `ranges`: the
    least and greatest value of integer nodes the graph does not bound itself (a loop's index in its body)."""

    def __init__(self, ranges: dict[Node, tuple[int, int]] | None = None) -> None:
        self._memo: dict[Node, Facts] = {}
        self._ranges = ranges or {}  # integer nodes' least and greatest values, known beside the graph (a loop's index)

    def __call__(self, n: Node, depth: int = 0) -> Facts:
        found = self._memo.get(n)
        if found is None:
            found = self._facts(n, depth) if n.dtype.kind == "f" and depth < _DEPTH else TOP
            self._memo[n] = found
        return found

    def _facts(self, n: Node, depth: int) -> Facts:
        op, dt = n.op, n.dtype
        if op is Op.CONST:
            v = float(n.arg)
            if v != v:
                return Facts(0, 0.0, True)
            sign = (NZ if math.copysign(1.0, v) < 0 else PZ) if v == 0 else (NEG if v < 0 else POS)
            return Facts(sign, abs(v), False)
        if op in (Op.EXPAND, Op.RESHAPE, Op.PERMUTE):
            return self(n.srcs[0], depth + 1)
        if op is Op.CAST:
            return self._cast(n, depth)
        if op is Op.NEG:
            a = self(n.srcs[0], depth + 1)
            return Facts(_negated(a.signs), a.bound, a.nan)
        if op is Op.ABS:
            a = self(n.srcs[0], depth + 1)
            return Facts((PZ if a.signs & ZEROS else 0) | (POS if a.signs & (NEG | POS) else 0), a.bound, a.nan)
        if op is Op.WHERE:
            b, c = self(n.srcs[1], depth + 1), self(n.srcs[2], depth + 1)
            return Facts(b.signs | c.signs, max(b.bound, c.bound), b.nan or c.nan)
        if op in (Op.ADD, Op.SUB):
            a, b = self(n.srcs[0], depth + 1), self(n.srcs[1], depth + 1)
            if op is Op.SUB:
                b = Facts(_negated(b.signs), b.bound, b.nan)  # (IEEE's x - y is x + (-y), zeros' signs included)
            both_infinite = math.isinf(a.bound) and math.isinf(b.bound)  # (inf + -inf is NaN)
            return Facts(
                _combine(a, b, _sum_signs), _finite_bound(a.bound + b.bound, dt), a.nan or b.nan or both_infinite
            )
        if op is Op.MUL:
            a, b = self(n.srcs[0], depth + 1), self(n.srcs[1], depth + 1)
            zero_times_inf = (math.isinf(a.bound) and b.signs & ZEROS) or (math.isinf(b.bound) and a.signs & ZEROS)
            bound = 0.0 if a.bound == 0 or b.bound == 0 else a.bound * b.bound
            if zero_times_inf:
                bound = math.inf
            return Facts(
                _combine(a, b, _product_signs), _finite_bound(bound, dt), a.nan or b.nan or bool(zero_times_inf)
            )
        if op is Op.DIV and n.srcs[1].op is Op.CONST:
            d = float(n.srcs[1].arg)
            if d != d or d == 0 or math.isinf(d):
                return TOP
            q = self(n.srcs[0], depth + 1)
            divisor = Facts(NEG if d < 0 else POS, abs(d), False)
            signs = _combine(q, divisor, _product_signs)  # (a quotient's signs are a product's, underflow included)
            return Facts(signs, _finite_bound(q.bound / abs(d), dt), q.nan)
        return TOP

    def _cast(self, n: Node, depth: int) -> Facts:
        src, dt = n.srcs[0], n.dtype
        if src.dtype.kind == "b":
            return Facts(PZ | POS, 1.0, False)
        if src.dtype.kind in "iu":
            found = self._ranges.get(src) or value_range(src)
            if found is None:
                info = np.iinfo(src.dtype)
                lo, hi = int(info.min), int(info.max)
            else:
                lo, hi = found
            signs = (NEG if lo < 0 else 0) | (PZ if lo <= 0 <= hi else 0) | (POS if hi > 0 else 0)
            return Facts(signs, _finite_bound(float(max(abs(lo), abs(hi))), dt), False)
        if src.dtype.kind == "f":
            a = self(src, depth + 1)
            narrowing = dt.itemsize < src.dtype.itemsize
            signs = a.signs | (_zero_of(a.signs) if narrowing else 0)  # (a narrowing may underflow to a zero)
            bound = _finite_bound(a.bound, dt) if narrowing else a.bound
            return Facts(signs, bound, a.nan)
        return TOP


def decided_comparison(op: Op, a: Facts, b: Facts) -> bool | None:
    """The value of `a op b` (LT, LE, EQ, NE) for every element, where the facts decide it; else None. NaN
    compares False (EQ, LT, LE) and True (NE), as in NumPy; -0.0 equals +0.0."""
    nan = a.nan or b.nan
    if a.signs == 0 or b.signs == 0:  # (only ever NaN)
        return op is Op.NE if nan else None
    if op is Op.LT:
        if a.lo >= b.hi:
            return False
        if not nan and a.hi < b.lo:
            return True
    elif op is Op.LE:
        if a.lo > b.hi:
            return False
        if not nan and a.hi <= b.lo:
            return True
    elif op in (Op.EQ, Op.NE):
        disjoint = a.hi < b.lo or b.hi < a.lo
        same_point = not nan and a.lo == a.hi == b.lo == b.hi  # (zeros of either sign included)
        if disjoint:
            return op is Op.NE
        if same_point:
            return op is Op.EQ
    return None
