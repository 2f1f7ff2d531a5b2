"""ir/float_facts.py proves signs, bounds and NaN-freedom of float nodes, and ir/simplify.py folds what it proves.
A wrong fact is a wrong answer, so hypothesis builds random graphs of the ops the facts know (and some they do not)
over special values (signed zeros, infinities, NaN, subnormals, the largest floats) and checks, with NumPy
evaluating every node: every element lies within its node's facts, and the simplified graph computes the same bits.
More examples: TRACEJIT_FUZZ_EXAMPLES=2000."""
from __future__ import annotations

import logging
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracejit as tj
from tracejit.ir import build
from tracejit.ir.evaluate import value_given
from tracejit.ir.float_facts import NEG, NZ, POS, PZ, FloatFacts
from tracejit.ir.graph import Node, Op, toposort
from tracejit.ir.simplify import simplify

EXAMPLES = int(os.environ.get("TRACEJIT_FUZZ_EXAMPLES", "0")) or 150
N = 24  # elements of every input
F64, F32 = np.dtype(np.float64), np.dtype(np.float32)
SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 709.0, 1e-300, -1e-310, 5e-324, 1e300, -1e308, 1.7e308, 3e38, 1e-45,
           math.inf, -math.inf, math.nan, 6.283185307179586, 0.0005]
CONSTANTS = [0.0, -0.0, 1.0, -1.0, 2.0, 0.0005, 709.0, -6.283185307179586, 1e-300, -1e-300, 1e300, 1.7e308, 3e38,
             -3e38, 1e-45, math.inf, -math.inf, math.nan, 8.218407461554972e307]


def _value(x: float) -> np.ndarray:
    return np.asarray(x, F64)


@st.composite
def programs(draw):
    """(output nodes, {input position: value}): a random graph of float64 and float32 nodes."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    inputs: dict[int, np.ndarray] = {}
    pool: list[Node] = []

    def float_input() -> Node:
        k = len(inputs)
        picks = rng.choice(len(SPECIAL), N)
        with np.errstate(all="ignore"):
            values = np.array([SPECIAL[i] for i in picks]) * np.where(rng.random(N) < 0.3, rng.standard_normal(N), 1)
        inputs[k] = values.astype(F64)
        return build.input_(k, F64, (N,))

    def int_input() -> Node:
        k = len(inputs)
        extremes = np.array([0, 1, -1, 2**62, -(2**63), 2**63 - 1, 1999], np.int64)
        inputs[k] = np.where(rng.random(N) < 0.5, rng.integers(-3000, 3000, N), rng.choice(extremes, N))
        node = build.input_(k, np.int64, (N,))
        if draw(st.booleans()):  # a loop's index: clamped by constants, whose range value_range proves
            lo = draw(st.integers(-5, 5))
            hi = lo + draw(st.integers(0, 3000))
            node = build.binary(Op.MIN, build.binary(Op.MAX, node, build.const(lo, np.int64, (N,))),
                                build.const(hi, np.int64, (N,)))
        return build.cast(node, F64)

    def const(dtype=F64) -> Node:
        with np.errstate(all="ignore"):
            return build.const(draw(st.sampled_from(CONSTANTS)), dtype, (N,))

    def operand(dtype=F64) -> Node:
        """Mostly what the facts know something of (constants, integers made floats, what is made of them), as a
        program's index arithmetic is; sometimes an argument, which they know nothing of."""
        choices = [n for n in pool if n.dtype == dtype]
        pick = draw(st.integers(0, 19))
        if choices and pick < 9:
            return draw(st.sampled_from(choices))
        if pick < 15 or dtype == F32:
            return const(dtype)
        return int_input() if pick < 19 else float_input()

    pool += [int_input()] + ([float_input()] if draw(st.booleans()) else [])
    bools: list[Node] = []
    for _ in range(draw(st.integers(2, 14))):
        kind = draw(st.sampled_from(["add", "sub", "mul", "div", "divc", "neg", "abs", "where", "cast", "exp", "sin",
                                     "cmp", "pred", "logic"]))
        dtype = draw(st.sampled_from([F64, F64, F64, F32]))
        if kind in ("add", "sub", "mul", "div"):
            op = {"add": Op.ADD, "sub": Op.SUB, "mul": Op.MUL, "div": Op.DIV}[kind]
            pool.append(build.binary(op, operand(dtype), operand(dtype)))
        elif kind == "divc":
            pool.append(build.binary(Op.DIV, operand(dtype), const(dtype)))
        elif kind in ("neg", "abs", "exp", "sin"):
            op = {"neg": Op.NEG, "abs": Op.ABS, "exp": Op.EXP, "sin": Op.SIN}[kind]
            pool.append(build.unary(op, operand(dtype)))
        elif kind == "cast":
            pool.append(build.cast(operand(dtype), F32 if dtype == F64 else F64))
        elif kind == "cmp":
            op = draw(st.sampled_from([Op.LT, Op.LE, Op.EQ, Op.NE]))
            bools.append(build.binary(op, operand(dtype), operand(dtype)))
        elif kind == "pred":
            bools.append(build.unary(draw(st.sampled_from([Op.ISNAN, Op.ISINF, Op.SIGNBIT])), operand(dtype)))
        elif kind == "logic" and bools:
            other = build.const(draw(st.booleans()), np.bool_, (N,)) if draw(st.booleans()) else draw(
                st.sampled_from(bools))
            bools.append(build.binary(draw(st.sampled_from([Op.AND, Op.OR])), draw(st.sampled_from(bools)), other))
        elif kind == "where" and bools:
            pool.append(build.where(draw(st.sampled_from(bools)), operand(dtype), operand(dtype)))
    return pool + bools, inputs


def _evaluate(nodes: list[Node], inputs: dict) -> list[np.ndarray]:
    out = []
    for n in nodes:
        found = value_given(n, inputs)
        assert found is not None
        out.append(np.broadcast_to(found[0], n.shape))
    return out


def _signs(values: np.ndarray) -> int:
    v = values[~np.isnan(values)]
    zero, negative = v == 0, np.signbit(v)
    return ((NEG if np.any(~zero & negative) else 0) | (NZ if np.any(zero & negative) else 0)
            | (PZ if np.any(zero & ~negative) else 0) | (POS if np.any(~zero & ~negative) else 0))


def _bits(values: np.ndarray) -> bytes:
    values = np.array(values)
    if values.dtype.kind == "f":
        values[np.isnan(values)] = np.nan  # (one NaN's payload is not an answer)
    return values.tobytes()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs())
def test_every_element_lies_within_its_facts_and_simplifying_keeps_the_bits(program) -> None:
    nodes, inputs = program
    facts = FloatFacts()
    everything = toposort(nodes)
    values = _evaluate(everything, inputs)
    for n, v in zip(everything, values):
        if n.dtype.kind != "f":
            continue
        f = facts(n)
        assert _signs(v) & ~f.signs == 0, (n, v, f)
        assert not np.isnan(v).any() or f.nan, (n, v, f)
        finite = v[~np.isnan(v)]
        assert finite.size == 0 or float(np.max(np.abs(finite))) <= f.bound, (n, v, f)
    simplified = simplify(nodes)
    for n, before, after in zip(nodes, _evaluate(nodes, inputs), _evaluate(simplified, inputs)):
        assert after.dtype == before.dtype and _bits(after) == _bits(before), (n, before, after)


def test_a_complex_exponent_of_a_real_index_has_a_real_part_of_zero_and_its_exp_folds() -> None:
    """-2j * pi * k * t / n as NumPy computes it, (x, +0) for each real operand: its real part is +-0 for every
    index, so exp of it is 1.0 and the glibc cexp's special cases fold away (a loop DFT's terms)."""
    k = build.cast(build.input_(0, np.int64, (N,)), F64)
    t = build.cast(build.input_(1, np.int64, (N,)), F64)
    zero = build.const(0.0, F64, (N,))

    def times(ar, ai, br, bi):
        return (build.binary(Op.SUB, build.binary(Op.MUL, ar, br), build.binary(Op.MUL, ai, bi)),
                build.binary(Op.ADD, build.binary(Op.MUL, ar, bi), build.binary(Op.MUL, ai, br)))

    re, im = times(build.const(-0.0, F64, (N,)), build.const(-2 * np.pi, F64, (N,)), k, zero)
    re, im = times(re, im, t, zero)
    re = build.binary(Op.MUL, re, build.const(1 / 2000, F64, (N,)))
    out = simplify([build.unary(Op.EXP, re), build.unary(Op.ISINF, re), re])
    assert out[0].op is Op.CONST and out[0].arg == 1.0
    assert out[1].op is Op.CONST and out[1].arg is False
    rng = np.random.default_rng(1)
    inputs = {0: rng.integers(-(2**40), 2**40, N), 1: rng.integers(0, 2000, N)}
    assert np.all(_evaluate([out[2]], inputs)[0] == 0)


def test_the_loop_dft_matches_numpy_and_its_exponent_is_not_computed(caplog) -> None:
    # (numpy/loops.py simplifies a loop's body before the values it reads from the loop around become its inputs)
    sys.path.insert(0, str(Path(__file__).parent))
    from corpus.complex_numbers import dft_loops

    rng = np.random.default_rng(0)
    x = rng.standard_normal(64) + 1j * rng.standard_normal(64)
    with caplog.at_level(logging.DEBUG - 3, logger="tracejit"):
        got = tj.kernel(dft_loops, device="numba")(x)
    np.testing.assert_allclose(got, dft_loops(x), rtol=1e-12, atol=1e-12)
    (source,) = [r.getMessage() for r in caplog.records if "def tj_element_loop(" in r.getMessage()]
    assert "exp" not in source and "isinf" not in source, source
    # (t >= 0, its range(n) says: 0.0 * t is +0.0, and so are the sums of such zeros)
    assert "np.float64(0.0) *" not in source and "* np.float64(0.0)" not in source, source


@pytest.mark.parametrize("value", [0.0, -0.0])
def test_a_zero_of_one_sign_is_not_folded_as_the_other(value) -> None:
    x = build.input_(0, F64, (N,))
    y = build.binary(Op.MUL, build.binary(Op.MUL, x, build.const(0.0, F64, (N,))), build.const(value, F64, (N,)))
    out = simplify([y])[0]
    assert out.op is not Op.CONST  # x may be negative, infinite or NaN: not a zero of one sign


def _leaves() -> list[Node]:
    """Nodes whose values span the facts' cases: each constant, two constants picked per element (a zero of either
    sign, a NaN beside a number, a tiny and a huge value), and integers made floats over clamped ranges."""
    pick = build.input_(0, np.bool_, (N,))
    out = [build.const(v, F64, (N,)) for v in CONSTANTS]
    pairs = [(-0.0, 0.0), (0.0, 1e-300), (-1e-300, 1.0), (math.nan, 2.0), (math.inf, 1.0), (-math.inf, -1.0),
             (-0.0, -1.0), (0.0, 1.7e308), (-709.0, 709.0), (1e-45, 3e38)]
    out += [build.where(pick, build.const(a, F64, (N,)), build.const(b, F64, (N,))) for a, b in pairs]
    index = build.input_(1, np.int64, (N,))
    for lo, hi in ((0, 0), (-3, 5), (0, 1999), (1, 7)):
        clamped = build.binary(Op.MIN, build.binary(Op.MAX, index, build.const(lo, np.int64, (N,))),
                               build.const(hi, np.int64, (N,)))
        out.append(build.cast(clamped, F64))
    out.append(build.cast(index, F64))
    out.append(build.cast(_LOOP_INDEX, F64))  # (a loop's index: its range given beside the graph, _RANGES)
    return out


_LOOP_INDEX = build.input_(2, np.int64, (N,))
_RANGES = {_LOOP_INDEX: (0, 1999)}
_LEAF_INPUTS = {0: np.arange(N) % 2 == 0,
                1: np.array([0, 1, -1, 2, 5, 1999, 2**62, -(2**63), 2**63 - 1, -3, 7, 1000] * (N // 12), np.int64),
                2: np.array([0, 1, 1999, 7, 1000, 3] * (N // 6), np.int64)}
_UNARY = (Op.NEG, Op.ABS, Op.EXP, Op.SIN, Op.COS, Op.SQRT, Op.ISNAN, Op.ISINF, Op.SIGNBIT)
_BINARY = (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.LT, Op.LE, Op.EQ, Op.NE, Op.MAX, Op.COPYSIGN)


def _check(n: Node, facts: FloatFacts) -> None:
    (value,) = _evaluate([n], _LEAF_INPUTS)
    if n.dtype.kind == "f":
        f = facts(n)
        assert _signs(value) & ~f.signs == 0, (n, value, f)
        assert not np.isnan(value).any() or f.nan, (n, value, f)
        finite = value[~np.isnan(value)]
        assert finite.size == 0 or float(np.max(np.abs(finite))) <= f.bound, (n, value, f)
    (folded,) = _evaluate(simplify([n], _RANGES), _LEAF_INPUTS)
    assert _bits(folded) == _bits(value), (n, value, folded)


def test_every_rule_on_every_pair_of_cases() -> None:
    """The facts' rules one op at a time over every pair of the cases they distinguish: each element within its
    node's facts, and simplifying keeps its bits."""
    facts = FloatFacts(_RANGES)
    leaves = _leaves()
    with np.errstate(all="ignore"):
        for a in leaves:
            _check(build.cast(a, F32), facts)
            for op in _UNARY:
                _check(build.unary(op, a), facts)
            for b in leaves:
                for op in _BINARY:
                    _check(build.binary(op, a, b), facts)
