"""Python's float(), int(), complex() and math's functions of 0-d values read from arrays, as the kernel function's code
calls them (numpy/source_rewrite.py routes its calls here through `helper`): the value computed in the kernel
as a Python number (weak float64 or int64, as NEP 50 makes Python numbers), no read back; what Python raises
for it (int() of NaN) raised when the kernel runs (faulting.check)."""

from __future__ import annotations

import math

import numpy as np

from tracejit.ir import build, faulting
from tracejit.ir.graph import Node, Op
from tracejit.ir.kernel_ir import Fault
from tracejit.numpy.complex_values import ComplexTensor
from tracejit.numpy.tensor import PythonBool, Tensor, as_node, python_value


def float_of(x=0.0, /):
    """float(x): of a 0-d value read from arrays, that value as a Python float (float64, weak), exactly as
    float() converts it; no read back."""
    if isinstance(x, Tensor) and x.shape == () and x.dtype.kind in "biuf":
        return Tensor(build.cast(as_node(x), np.dtype(np.float64), weak=True))
    return float(x)


def complex_of(real=0, imag=0):
    """complex(real, imag): of 0-d real values read from arrays (or computed from a loop's index), the Python
    complex they make (weak complex128), no read back. `complex(x, y)` of a pixel's coordinates starts Numba's
    Mandelbrot example; Python's own for Python numbers, strings and complex parts."""
    parts = (real, imag)
    if not any(isinstance(p, Tensor) for p in parts) or not all(
        isinstance(p, Tensor)
        and p.shape == ()
        and p.dtype.kind in "biuf"
        or isinstance(p, (int, float, np.integer, np.floating))
        for p in parts
    ):
        return complex(real, imag)  # (a traced complex part or array: Tensor.__float__'s TraceError)
    re, im = (Tensor(build.cast(as_node(p), np.dtype(np.float64), weak=True)) for p in parts)
    return ComplexTensor(re, im)


def int_of(x=0, /, *args):
    """int(x): of a 0-d value read from arrays, that value as a Python int (int64, weak). A float is truncated
    toward zero, and NaN, infinity and values beyond int64 raise when the kernel runs (Python's ValueError and
    OverflowError; a Python int beyond int64 is one tracejit cannot make)."""
    if not args and isinstance(x, Tensor) and x.shape == () and x.dtype.kind in "biu":
        if x.dtype == np.uint64:
            return int(x)  # (beyond int64: the error a traced value gives)
        return Tensor(build.cast(as_node(x), np.dtype(np.int64), weak=True))
    if not args and isinstance(x, Tensor) and x.shape == () and x.dtype.kind == "f":
        known = python_value(x, "int()")  # (made from the kernel's Python numbers: Python's int() of it)
        return int(known) if not isinstance(known, Tensor) else Tensor(checked_int(as_node(x)))
    return int(x, *args)


def bool_of(x=False, /):
    """bool(x): of a value read from arrays with one element, its truth (x != 0: NaN is true) as a Python bool
    (weak), no read back; of more elements or none, NumPy's ValueError."""
    if isinstance(x, Tensor):
        if x.size != 1:
            return bool(x)  # (NumPy's ValueError: Tensor.__bool__)
        known = python_value(x, "bool()")  # (made from the kernel's Python numbers: Python's bool() of it)
        if not isinstance(known, Tensor):
            return bool(known)
        node = build.reshape(as_node(x), ())
        if node.dtype != np.bool_:
            node = build.binary(Op.NE, node, build.const(0, node.dtype, ()))
        return PythonBool(build.cast(node, np.dtype(np.bool_), weak=True))
    return bool(x)


def not_(x):
    """`not x`: of a value read from arrays (bool_of), the traced negation; of anything else, Python's."""
    if isinstance(x, Tensor):
        truth = bool_of(x)
        if not isinstance(truth, Tensor):
            return not truth
        return PythonBool(build.cast(build.unary(Op.INVERT, as_node(truth)), np.dtype(np.bool_), weak=True))
    return not x


NAN_TO_INT = Fault("ValueError", "cannot convert float NaN to integer")
INFINITY_TO_INT = Fault("OverflowError", "cannot convert float infinity to integer")
BEYOND_INT64 = Fault(
    "OverflowError", "int() of a float beyond the int64 range: tracejit's Python ints are 64-bit integers"
)


def checked_int(x: Node) -> Node:
    """int(x) of a 0-d float value: truncated toward zero, int64, weak; NaN, infinity and values beyond int64
    raise when the kernel runs (faulting.check), as Python's int() raises."""
    f = build.cast(x, np.dtype(np.float64))
    size = build.unary(Op.ABS, f)
    finite_nan = build.binary(Op.EQ, f, f)  # (not NaN)
    not_inf = build.binary(Op.NE, size, build.const(np.inf, np.float64, ()))
    fits = build.binary(Op.LT, size, build.const(2.0**63, np.float64, ()))
    fits = build.binary(
        Op.OR, fits, build.binary(Op.OR, build.unary(Op.INVERT, finite_nan), build.unary(Op.INVERT, not_inf))
    )  # (NaN and infinity have errors of their own)
    value = build.cast(f, np.dtype(np.int64), weak=True)
    for ok, fault in ((finite_nan, NAN_TO_INT), (not_inf, INFINITY_TO_INT), (fits, BEYOND_INT64)):
        value = build.binary(Op.ADD, value, faulting.check(ok, fault))
    return value


def _rounding(name: str, op: Op):
    """math.floor, math.ceil, math.trunc: of a 0-d float value read from arrays, a Python int (checked_int)."""
    fn = getattr(math, name)

    def call(x):
        if isinstance(x, Tensor) and x.shape == () and x.dtype.kind == "f":
            known = python_value(x, f"math.{name}()")
            if not isinstance(known, Tensor):
                return fn(known)
            return Tensor(checked_int(build.unary(op, build.cast(as_node(x), np.dtype(np.float64)))))
        if isinstance(x, Tensor) and x.shape == () and x.dtype.kind in "biu":
            return int_of(x)
        return fn(x)

    call.__name__ = name
    return call


def _math(name: str, ufunc, arity: int):
    fn = getattr(math, name)

    def call(*args):
        if len(args) != arity or not any(isinstance(a, Tensor) for a in args):
            return fn(*args)
        values = [as_node(a) for a in args]
        for a in values:
            if a.shape != ():
                raise TypeError(f"only 0-d arrays can be converted to Python scalars (math.{name} of {a.shape})")
        out = ufunc(*(Tensor(build.cast(a, np.dtype(np.float64))) for a in values))
        return Tensor(build.cast(as_node(out), np.dtype(np.float64), weak=True))

    call.__name__ = name
    return call


MATH = {
    name: _math(name, ufunc, arity)
    for name, ufunc, arity in (
        *((n, getattr(np, n), 1) for n in ("sqrt", "exp", "log", "log10", "log2", "log1p", "expm1")),
        *((n, getattr(np, n), 1) for n in ("sin", "cos", "tan", "sinh", "cosh", "tanh")),
        *((n, getattr(np, "arc" + n[1:]), 1) for n in ("asin", "acos", "atan", "asinh", "acosh", "atanh")),
        ("fabs", np.abs, 1),
        ("atan2", np.arctan2, 2),
        ("hypot", np.hypot, 2),
        ("pow", np.power, 2),
        ("copysign", np.copysign, 2),
    )
}
MATH.update({name: _rounding(name, op) for name, op in (("floor", Op.FLOOR), ("ceil", Op.CEIL), ("trunc", Op.TRUNC))})
