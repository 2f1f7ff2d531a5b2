"""The steps of a kernel's reduce loop that add nothing, found from the kernel IR: a sum of a value masked by
its place (`np.sum(np.triu(d, 1))`, `np.tril(x).sum(axis=1)`, a band's `np.where(lo <= j - i, x, 0)`) adds a
zero for every element the mask removes. Where every update of a "reduce" RANGE adds `where(test, x, 0)`
(or `where(test, 0, x)`) and the test keeps an interval of the range's index that moves with an outer index
(`j > i + k`), the CPU renderer runs the range over that interval only: Mocz's N-body energy sums the upper
triangle of its pair matrix, half the square, as a hand-written loop does.

Exact, not a tolerance: the masked value is still selected in the steps that run, so a bound found too wide
changes nothing, and the steps left out are those whose update is the constant zero whatever `x` is (a NaN of `x`
there is never seen, as NumPy's `where` never shows it; a step that may raise is never left out). Adding a zero
changes no sum that starts at +0.0: -0.0 added to any float leaves it as it is, and +0.0 leaves all but -0.0,
which such a running sum never is (round to nearest gives -0.0 only for -0.0 + -0.0). Integer sums wrap, and 0
leaves them alike."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracejit.ir.kernel_ir import KOp

# Index arithmetic in the test is in the dtype it was traced in (int32 for a small array's iota): the interval is
# solved in int64, which agrees while no sum of two indices or an index and the constant can wrap there.
_EXACT_BELOW = 1 << 30

_PLAIN = {KOp.LT: "<", KOp.LE: "<="}
_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}


@dataclass(frozen=True)
class Bound:
    """One end of the steps that may add something: the range's index j runs from `start` ("start": j >= the
    bound) or up to `stop` ("stop": j < the bound), the bound being `scale * value(base) + offset` (base None:
    the offset alone), clamped to [0, extent] by the renderer."""

    side: str
    base: int | None
    scale: int
    offset: int


def masked_ranges(ins, symbolic: dict | None = None) -> dict[int, tuple[Bound, ...]]:
    """{the index of a "reduce" RANGE: the bounds of its steps that may add something}, for the ranges whose every
    step outside those bounds adds a zero to a sum that starts at +0 (the module's docstring). `symbolic`: the
    renderer's symbolic sizes (keyed (instruction, 0) for an extent, (instruction, -1) for a constant); a range or
    test that reads one is left alone (its traced size says nothing of the size it runs with)."""
    symbolic = symbolic or {}
    ends = {x.srcs[0]: j for j, x in enumerate(ins) if x.op == KOp.ENDRANGE}
    out: dict[int, tuple[Bound, ...]] = {}
    for r, x in enumerate(ins):
        if x.op != KOp.RANGE or x.arg[1] != "reduce" or (r, 0) in symbolic or not _small(x.arg[0]):
            continue
        bounds = _range_bounds(ins, r, ends, symbolic)
        if bounds:
            out[r] = bounds
    return out


def _small(extent) -> bool:
    return isinstance(extent, (int, np.integer)) and bool(0 <= extent < _EXACT_BELOW)


def _range_bounds(ins, r: int, ends: dict[int, int], symbolic: dict) -> tuple[Bound, ...] | None:
    body = range(r + 1, ends[r])
    updated = {ins[i].srcs[0] for i in body if ins[i].op == KOp.UPDATE}
    found = None
    for i in body:
        x = ins[i]
        if x.op in (KOp.RANGE, KOp.ACC, KOp.STORE, KOp.ATOMIC, KOp.SORT, KOp.LOCAL, KOp.BOUND):
            return None  # (a loop, a write or a fault in a step: each step must be there)
        reads = x.srcs[1:] if x.op == KOp.UPDATE else x.srcs
        if any(s in updated or ins[s].op == KOp.UPDATE for s in reads):
            return None  # (a running total read in a step: a scan, whatever its kind says)
        if x.op != KOp.UPDATE:
            continue
        if len(x.srcs) != 2 or ins[x.srcs[0]].op != KOp.ACC or x.srcs[0] in body:
            return None  # (an update of a local row, or of an accumulator of the step)
        red, identity = ins[x.srcs[0]].arg
        if red != "sum" or not _plus_zero(identity):
            return None
        kept = _kept_test(ins, x.srcs[1])
        if kept is None or found not in (None, kept):
            return None  # (every update masked by the same test)
        found = kept
    if found is None:
        return None
    test, negated = found
    return _solve(ins, r, test, negated, ends, symbolic)


def _plus_zero(value) -> bool:
    """value is 0 of an integer or bool, or +0.0 (not -0.0) of a float."""
    v = np.asarray(value)
    if v.dtype.kind == "c":
        return bool(v == 0) and not np.signbit(v.real) and not np.signbit(v.imag)
    if v.dtype.kind not in "biuf":
        return False
    return bool(v == 0) and not (v.dtype.kind == "f" and np.signbit(v))


def _kept_test(ins, v: int) -> tuple[int, bool] | None:
    """(test, negated) where the value v is where(test, x, 0) (the steps the test holds in add x) or where(test,
    0, x) (negated: those where it does not), else None."""
    x = ins[v]
    if x.op != KOp.WHERE:
        return None
    test, a, b = x.srcs
    if _zero_const(ins, b):
        return test, False
    if _zero_const(ins, a):
        return test, True
    return None


def _zero_const(ins, i: int) -> bool:
    """A constant 0, +0.0 or -0.0 (-0.0 added to any float leaves it as it is)."""
    x = ins[i]
    if x.op != KOp.CONST:
        return False
    v = np.asarray(x.arg)
    return v.dtype.kind in "biufc" and bool(v == 0)


def _solve(ins, r: int, test: int, negated: bool, ends: dict[int, int], symbolic: dict) -> tuple[Bound, ...] | None:
    """The bounds on r's index under which `test` (negated: its negation) may hold: a comparison of sums of r's
    index, an outer index and constants, or (not negated) an `and` of such comparisons."""
    x = ins[test]
    while x.value_dtype == np.bool_:  # (not t: an `invert`, or where(t, False, True))
        if x.op == KOp.INVERT:
            negated, test = not negated, x.srcs[0]
        elif x.op == KOp.WHERE and _bool_consts(ins, x.srcs[1:]) in ((False, True), (True, False)):
            negated, test = negated == _bool_consts(ins, x.srcs[1:])[0], x.srcs[0]
        else:
            break
        x = ins[test]
    if x.op == KOp.AND and x.value_dtype == np.bool_ and not negated:
        found: list[Bound] = []
        for s in x.srcs:
            part = _solve(ins, r, s, False, ends, symbolic)
            if part is None:
                return None
            found += part
        return tuple(found)
    if x.op not in _PLAIN:
        return None
    left, right = (_affine(ins, s, r, ends, symbolic) for s in x.srcs)
    if left is None or right is None:
        return None
    terms = dict(left)  # left - right <order> 0
    for key, coefficient in right.items():
        terms[key] = terms.get(key, 0) - coefficient
    s, c = terms.pop(r, 0), terms.pop(None, 0)
    terms = {key: u for key, u in terms.items() if u}
    if s not in (1, -1) or len(terms) > 1 or any(u not in (1, -1) for u in terms.values()) or abs(c) >= _EXACT_BELOW:
        return None
    (base, u), *_ = [*terms.items(), (None, 0)]
    order = _PLAIN[x.op]
    if negated:
        order = _NEGATED[order]
    if s == -1:  # -j + u*base + c <order> 0: j <flipped order> u*base + c
        order, scale, offset = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[order], u, c
    else:  # j <order> -u*base - c
        scale, offset = -u, -c
    if order == "<=":
        return (Bound("stop", base, scale, offset + 1),)
    if order == "<":
        return (Bound("stop", base, scale, offset),)
    if order == ">=":
        return (Bound("start", base, scale, offset),)
    return (Bound("start", base, scale, offset + 1),)


def _bool_consts(ins, srcs) -> tuple:
    return tuple(bool(ins[s].arg) if ins[s].op == KOp.CONST else None for s in srcs)


def _int_const(ins, i: int, symbolic: dict) -> int | None:
    x = ins[i]
    if x.op != KOp.CONST or (i, -1) in symbolic or x.value_dtype.kind not in "iu":
        return None
    value = int(x.arg)
    return value if abs(value) < _EXACT_BELOW else None


def _signed(ins, i: int) -> bool:
    dt = ins[i].dtype
    return dt is not None and dt.kind == "i" and dt.itemsize >= 4


def _index(ins, i: int, symbolic: dict) -> int | None:
    """The RANGE or GLOBAL instruction whose index i is (through casts to signed integers of 32 bits or more), or
    None."""
    while ins[i].op == KOp.CAST and _signed(ins, i):
        i = ins[i].srcs[0]
    x = ins[i]
    if x.op == KOp.RANGE and _small(x.arg[0]) and (i, 0) not in symbolic:
        return i
    if x.op == KOp.GLOBAL and _small(x.arg) and (i, 0) not in symbolic:
        return i
    return None


def _affine(ins, e: int, r: int, ends: dict[int, int], symbolic: dict, depth: int = 0) -> dict | None:
    """e as {index instruction: coefficient, None: constant}: sums and differences of r's index, the indices of
    the loops around r (a GLOBAL, an enclosing RANGE) and integer constants, in signed integers of 32 bits or
    more; else None."""
    if not _signed(ins, e) or depth > 4:
        return None
    k = _int_const(ins, e, symbolic)
    if k is not None:
        return {None: k}
    index = _index(ins, e, symbolic)
    if index is not None:
        return {index: 1} if index == r or _encloses(ins, index, r, ends) else None
    x = ins[e]
    if x.op not in (KOp.ADD, KOp.SUB):
        return None
    a, b = (_affine(ins, s, r, ends, symbolic, depth + 1) for s in x.srcs)
    if a is None or b is None:
        return None
    sign = 1 if x.op == KOp.ADD else -1
    out = dict(a)
    for key, coefficient in b.items():
        out[key] = out.get(key, 0) + sign * coefficient
    return out


def _encloses(ins, base: int, r: int, ends: dict[int, int]) -> bool:
    """Whether the index `base` has its value for the whole of range r: the kernel's GLOBAL, or a RANGE open
    around r."""
    if ins[base].op == KOp.GLOBAL:
        return True
    return base < r and ends.get(base, -1) > r
