"""The elementwise op table: each op is one row (IR name, arity, NumPy ufunc, operand kinds, its NumPy
definition). The graph IR, kernel IR, interpreter, constant folding, the frontend and the docs read it;
each renderer keeps its own table from these names to target code."""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Callable

import numpy as np


@dataclass(frozen=True)
class OpDef:
    name: str  # the op in the graph IR and the kernel IR
    arity: int
    numpy: Callable  # what the op computes, on NumPy arrays of its operand dtype
    ufunc: np.ufunc | None  # NumPy's ufunc: its name is tj.<name>, its type resolution the result dtype
    kinds: str = "biuf"  # operand dtype kinds the IR op is defined for (the frontend casts first)
    predicate: bool = False  # result is bool whatever the operands
    ulps: tuple[int, int] = (0, 0)  # float32/float64 error against NumPy, measured on special and random
    # values: (numba and opencl, GPU math libraries: webgpu, and cuda
    # measured on an H200); 0 = the same value as NumPy
    rounds: bool = True  # representable operands can give an unrepresentable result: a float16
    # result computed in float32 is rounded to float16 after the op, as NumPy's loops do


def _shift(np_fn):
    """NumPy's shifts: a shift by the width or more (or a negative one) gives 0, or -1 for >> of a
    negative value; the operand dtype's width counts, not C's promoted int."""

    def f(a, b):
        bits = a.dtype.itemsize * 8
        big = (b.astype(np.int64) < 0) | (b.astype(np.int64) >= bits)
        with np.errstate(all="ignore"):
            out = np_fn(a, np.where(big, 0, b).astype(a.dtype))
        over = np.where(a < 0, -1, 0) if np_fn is np.right_shift else 0
        return np.where(big, np.asarray(over).astype(a.dtype), out).astype(a.dtype)

    return f


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _ldexp(x, n):
    """x * 2**n, n an integer held in x's dtype (the frontend clamps it to a range the dtype holds)."""
    return np.ldexp(x, n.astype(np.int32)).astype(x.dtype)


_F = "f"  # float operands only: the frontend casts ints as NumPy's type resolution says

OPS: tuple[OpDef, ...] = (
    # unary
    OpDef("neg", 1, np.negative, np.negative, "iuf", rounds=False),
    OpDef("abs", 1, np.absolute, np.absolute, "iuf", rounds=False),
    OpDef("sign", 1, np.sign, np.sign, "iuf", rounds=False),
    OpDef("invert", 1, lambda x: np.logical_not(x) if x.dtype == bool else np.invert(x), np.invert, "biu"),
    OpDef("recip", 1, np.reciprocal, np.reciprocal, _F, ulps=(0, 0)),
    OpDef("exp", 1, np.exp, np.exp, _F, ulps=(2, 2)),
    OpDef("exp2", 1, np.exp2, np.exp2, _F, ulps=(1, 3)),
    OpDef("expm1", 1, np.expm1, np.expm1, _F, ulps=(2, 2)),
    OpDef("log", 1, np.log, np.log, _F, ulps=(2, 2)),
    OpDef("log2", 1, np.log2, np.log2, _F, ulps=(1, 2)),
    OpDef("log10", 1, np.log10, np.log10, _F, ulps=(2, 2)),
    OpDef("log1p", 1, np.log1p, np.log1p, _F, ulps=(1, 2)),
    OpDef("sqrt", 1, np.sqrt, np.sqrt, _F, ulps=(0, 1)),
    OpDef("cbrt", 1, np.cbrt, np.cbrt, _F, ulps=(2, 2)),
    OpDef("sin", 1, np.sin, np.sin, _F, ulps=(1, 2)),
    OpDef("cos", 1, np.cos, np.cos, _F, ulps=(1, 2)),
    OpDef("tan", 1, np.tan, np.tan, _F, ulps=(2, 4)),
    OpDef("arcsin", 1, np.arcsin, np.arcsin, _F, ulps=(2, 2)),
    OpDef("arccos", 1, np.arccos, np.arccos, _F, ulps=(1, 2)),
    OpDef("arctan", 1, np.arctan, np.arctan, _F, ulps=(1, 2)),
    OpDef("sinh", 1, np.sinh, np.sinh, _F, ulps=(2, 2)),
    OpDef("cosh", 1, np.cosh, np.cosh, _F, ulps=(2, 2)),
    OpDef("tanh", 1, np.tanh, np.tanh, _F, ulps=(2, 2)),
    OpDef("arcsinh", 1, np.arcsinh, np.arcsinh, _F, ulps=(1, 2)),
    OpDef("arccosh", 1, np.arccosh, np.arccosh, _F, ulps=(2, 2)),
    OpDef("arctanh", 1, np.arctanh, np.arctanh, _F, ulps=(1, 2)),
    OpDef("erf", 1, _erf, None, _F, ulps=(2, 2)),
    OpDef("floor", 1, np.floor, np.floor, _F, rounds=False),
    OpDef("ceil", 1, np.ceil, np.ceil, _F, rounds=False),
    OpDef("trunc", 1, np.trunc, np.trunc, _F, rounds=False),
    OpDef("rint", 1, np.rint, np.rint, _F, rounds=False),
    OpDef("isnan", 1, np.isnan, np.isnan, _F, predicate=True),
    OpDef("isinf", 1, np.isinf, np.isinf, _F, predicate=True),
    OpDef("signbit", 1, np.signbit, np.signbit, _F, predicate=True),
    # binary
    OpDef("add", 2, np.add, np.add),
    OpDef("sub", 2, np.subtract, np.subtract, "iuf"),
    OpDef("mul", 2, np.multiply, np.multiply),
    OpDef("div", 2, np.true_divide, np.true_divide, _F, ulps=(0, 0)),
    OpDef("idiv", 2, np.floor_divide, np.floor_divide, "iuf"),
    OpDef("mod", 2, np.remainder, np.remainder, "iuf"),
    OpDef("fmod", 2, np.fmod, np.fmod, "iuf", rounds=False),
    OpDef("pow", 2, np.power, np.power, "iuf", ulps=(1, 64)),
    OpDef("max", 2, np.maximum, np.maximum, rounds=False),
    OpDef("min", 2, np.minimum, np.minimum, rounds=False),
    OpDef("arctan2", 2, np.arctan2, np.arctan2, _F, ulps=(2, 2)),
    OpDef("hypot", 2, np.hypot, np.hypot, _F, ulps=(1, 2)),
    OpDef("copysign", 2, np.copysign, np.copysign, _F, rounds=False),
    OpDef("ldexp", 2, _ldexp, None, _F),  # np.ldexp, frexp, nextafter and spacing are built on it
    OpDef("lt", 2, np.less, np.less, predicate=True),
    OpDef("le", 2, np.less_equal, np.less_equal, predicate=True),
    OpDef("eq", 2, np.equal, np.equal, predicate=True),
    OpDef("ne", 2, np.not_equal, np.not_equal, predicate=True),
    OpDef("and", 2, np.bitwise_and, np.bitwise_and, "biu"),
    OpDef("or", 2, np.bitwise_or, np.bitwise_or, "biu"),
    OpDef("xor", 2, np.bitwise_xor, np.bitwise_xor, "biu"),
    OpDef("shl", 2, _shift(np.left_shift), np.left_shift, "iu"),
    OpDef("shr", 2, _shift(np.right_shift), np.right_shift, "iu"),
    # ternary
    OpDef("where", 3, np.where, None, rounds=False),
)

BY_NAME: dict[str, OpDef] = {d.name: d for d in OPS}
UNARY_NAMES = frozenset(d.name for d in OPS if d.arity == 1)
BINARY_NAMES = frozenset(d.name for d in OPS if d.arity == 2)
TERNARY_NAMES = frozenset(d.name for d in OPS if d.arity == 3)
PREDICATE_NAMES = frozenset(d.name for d in OPS if d.predicate)
NUMPY_OPS: dict[str, Callable] = {d.name: d.numpy for d in OPS}
ROUNDS_TO_FLOAT16 = frozenset(d.name for d in OPS if d.rounds and "f" in d.kinds and not d.predicate)
