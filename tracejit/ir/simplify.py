"""Graph simplification: constant folding, algebraic identities, and what ir/float_facts.py proves of float values
(a value that is always one zero, a comparison its bounds decide); dead code never survives a rewrite."""

from __future__ import annotations

import itertools

import numpy as np

from tracejit.ir import build
from tracejit.ir.dtypes import is_float
from tracejit.ir.float_facts import NEG, NZ, POS, PZ, FloatFacts, decided_comparison
from tracejit.ir.graph import BINARY, ELEMENTWISE, Node, Op, rewrite
from tracejit.ir.ops import NUMPY_OPS
from tracejit.ir.kernel_ir import ALU


def simplify(outputs: list[Node], ranges: dict[Node, tuple[int, int]] | None = None) -> list[Node]:
    """`ranges`: the least and greatest value of integer nodes (a loop's index), for the float facts."""
    facts = FloatFacts(ranges)
    return rewrite(outputs, lambda n: _by_facts(_simplify_node(n), facts))


def _simplify_node(n: Node) -> Node:
    if n.op in ELEMENTWISE and n.srcs and all(s.op is Op.CONST for s in n.srcs):
        return _fold(n)
    if n.op in BINARY:
        a, b = n.srcs
        if n.op in _NAN_WINS and (_is_nan(a) or _is_nan(b)):
            # folded here, not left to the device compiler: PoCL's library folds exp(x * NaN) to garbage
            return build.const(_NAN_WINS[n.op], n.dtype, n.shape, n.weak)
        if n.dtype != a.dtype:
            return n  # comparisons: nothing to simplify by identity
        # x + 0.0 is not x for x = -0.0; x + (-0.0) and x - 0.0 are x for every x
        if n.op in (Op.ADD, Op.OR, Op.XOR) and _is_zero(a, negative=True):
            return b
        if n.op in (Op.ADD, Op.OR, Op.XOR) and _is_zero(b, negative=True) or n.op is Op.SUB and _is_zero(b):
            return a
        if n.op is Op.MUL and _is(a, 1):
            return b
        if n.op in (Op.MUL, Op.DIV, Op.POW) and _is(b, 1):
            return a
        if n.op is Op.MUL and n.dtype.kind in "iu" and (_is(a, 0) or _is(b, 0)):
            return build.const(0, n.dtype, n.shape)  # x*0 is 0 for integers only (NaN*0 is NaN)
    if n.op is Op.CAST and n.srcs[0].op is Op.CAST and np.can_cast(n.srcs[0].srcs[0].dtype, n.srcs[0].dtype, "safe"):
        # through an exact widening (argmax's int32 index made int64, then .astype(np.int32)): one cast
        return build.cast(n.srcs[0].srcs[0], n.dtype, n.weak)
    if n.op is Op.NEG and n.srcs[0].op is Op.NEG:
        return n.srcs[0].srcs[0]
    if n.op is Op.WHERE and n.srcs[0].op is Op.CONST:
        return n.srcs[1] if n.srcs[0].arg else n.srcs[2]
    if n.op in (Op.AND, Op.OR) and n.dtype == np.bool_:
        for x, y in ((n.srcs[0], n.srcs[1]), (n.srcs[1], n.srcs[0])):
            if x.op is Op.CONST:  # x & False, x | True: the constant; x & True, x | False: x
                return x if bool(x.arg) == (n.op is Op.OR) else y
    return n


_DECIDED = (Op.LT, Op.LE, Op.EQ, Op.NE)


def _by_facts(n: Node, facts: FloatFacts) -> Node:
    """`n` folded where the float facts of it or its operands decide its value for every element."""
    if n.op not in ELEMENTWISE or n.op is Op.CONST or n.op is Op.BITCAST:
        return n
    if is_float(n.dtype):
        found = facts(n)
        if found.zero and found.signs in (NZ, PZ):  # always the one zero: -2j * k's real part, (x, 0) * (y, 0)'s imag
            return build.const(-0.0 if found.signs == NZ else 0.0, n.dtype, n.shape, n.weak)
    if not n.srcs or not all(is_float(s.dtype) for s in n.srcs):
        return n
    operands = [facts(s) for s in n.srcs]
    if n.op is Op.ISNAN and not operands[0].nan:
        return build.const(False, n.dtype, n.shape, n.weak)
    if n.op is Op.ISINF and operands[0].bound < np.inf:
        return build.const(False, n.dtype, n.shape, n.weak)
    if n.op is Op.SIGNBIT and not operands[0].nan and operands[0].signs:
        if operands[0].signs & (PZ | POS) == 0:
            return build.const(True, n.dtype, n.shape, n.weak)
        if operands[0].signs & (NZ | NEG) == 0:
            return build.const(False, n.dtype, n.shape, n.weak)
    if n.op in _DECIDED and len(operands) == 2:
        decided = decided_comparison(n.op, operands[0], operands[1])
        if decided is not None:
            return build.const(decided, n.dtype, n.shape, n.weak)
    return _zero_operand_folded(n, operands)


def _zero_operand_folded(n: Node, operands: list) -> Node:
    """An op whose every operand is a constant or a value that is only ever a zero, and whose result is the same
    bits for either zero (exp(+-0) is 1.0, 709 < +-0 is False): that constant."""
    choices = []
    for s, f in zip(n.srcs, operands):
        if s.op is Op.CONST:
            choices.append([s.arg])
        elif f.zero:
            choices.append([z for sign, z in ((NZ, -0.0), (PZ, 0.0)) if f.signs & sign])
        else:
            return n
    if n.op in (Op.WHERE, Op.CAST) or n.op.value not in NUMPY_OPS:
        return n
    results = set()
    with np.errstate(all="ignore"):
        for values in itertools.product(*choices):
            args = [np.asarray(v, s.dtype) for v, s in zip(values, n.srcs)]
            results.add(np.asarray(NUMPY_OPS[n.op.value](*args)).astype(n.dtype).tobytes())
    if len(results) != 1:
        return n
    return build.const(np.frombuffer(results.pop(), n.dtype)[0].item(), n.dtype, n.shape, n.weak)


# binary ops whose result is the same for every x once an operand is NaN
_NAN_WINS = {
    **{
        op: float("nan")
        for op in (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.IDIV, Op.MOD, Op.FMOD, Op.MAX, Op.MIN, Op.ARCTAN2)
    },
    Op.LT: False,
    Op.LE: False,
    Op.EQ: False,
    Op.NE: True,
}


def _is_nan(n: Node) -> bool:
    return n.op is Op.CONST and is_float(n.dtype) and n.arg != n.arg


def _is_zero(n: Node, negative: bool = False) -> bool:
    """A zero constant; of a float dtype, one with the sign bit `negative` (or +0.0 for SUB's)."""
    if not _is(n, 0):
        return False
    return not is_float(n.dtype) or np.signbit(n.arg) == negative


def _is(n: Node, value) -> bool:
    return n.op is Op.CONST and n.arg == value


def _fold(n: Node) -> Node:
    if n.op is Op.CAST:
        value = np.asarray(n.srcs[0].arg, n.srcs[0].dtype).astype(n.dtype)
    elif n.op is Op.BITCAST:
        value = np.asarray(n.srcs[0].arg, n.srcs[0].dtype).view(n.dtype)
    else:
        assert n.op.value in ALU
        args = [np.asarray(s.arg, s.dtype) for s in n.srcs]
        with np.errstate(all="ignore"):
            value = np.asarray(NUMPY_OPS[n.op.value](*args)).astype(n.dtype)
    return build.const(value.item(), n.dtype, n.shape, n.weak)
