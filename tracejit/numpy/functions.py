"""The op namespace (tj.exp, tj.where, ...): NumPy semantics on traced tensors.

Result dtypes are NumPy's own: each function asks the matching NumPy ufunc what it would return
for the operands' dtypes (Python scalars passed as Python scalars, so NEP 50 applies).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np

from tracejit.errors import ScalarOverflowError, ShapeError, TraceError, UnsupportedError
from tracejit.ir import build
from tracejit.ir.dtypes import BOOL, check, is_narrow_float, is_float
from tracejit.ir.evaluate import constant_value
from tracejit.ir.graph import BINARY, PREDICATES, UNARY, Node, Op
from tracejit.ir.ops import OPS
from tracejit.numpy import int_comparisons
from tracejit.numpy.tensor import ArrayLike, Tensor, as_node, python_value

__all__ = [
    "abs",
    "broadcast_to",
    "ceil",
    "clip",
    "cos",
    "erf",
    "exp",
    "exp2",
    "floor",
    "isfinite",
    "isinf",
    "isnan",
    "log",
    "log2",
    "maximum",
    "minimum",
    "power",
    "reciprocal",
    "reshape",
    "rint",
    "sigmoid",
    "sign",
    "sin",
    "sqrt",
    "tan",
    "tanh",
    "transpose",
    "trunc",
    "where",
]

# --- dtype resolution through NumPy ----------------------------------------------------------------


_KIND_PROBE = {"b": True, "i": 1, "u": 1, "f": 1.0}


@functools.lru_cache(maxsize=4096)
def _numpy_result(ufunc: np.ufunc, operands: tuple) -> np.dtype:
    args = [v if weak else np.ones((), dt) for dt, weak, v in operands]
    try:
        with np.errstate(all="ignore"):
            return np.asarray(ufunc(*args)).dtype
    except OverflowError as e:  # a Python int the other operand's dtype cannot hold (NEP 50)
        raise ScalarOverflowError(f"np.{ufunc.__name__}: {e}") from None
    except ValueError:
        # NumPy raised computing the probe's value (an integer to a negative power), not resolving its
        # dtype: the kernel raises the same ValueError at run time if it computes such an element
        kinds = tuple((dt, weak, _KIND_PROBE[dt.kind] if weak else v) for dt, weak, v in operands)
        if kinds == operands:
            raise
        return _numpy_result(ufunc, kinds)
    except TypeError as e:
        types = ", ".join(("python " + type(v).__name__) if weak else str(dt) for dt, weak, v in operands)
        raise UnsupportedError(f"np.{ufunc.__name__} is not defined for ({types}) in NumPy: {e}") from None


def _probe(n: Node):
    if not n.weak:
        return (n.dtype, False, None)
    if n.op is Op.CONST:
        return (n.dtype, True, n.arg)
    return (n.dtype, True, _KIND_PROBE[n.dtype.kind])


def _result(ufunc, nodes) -> tuple[np.dtype, bool]:
    dt = _numpy_result(ufunc, tuple(_probe(n) for n in nodes))
    return check(dt, f"result of np.{ufunc.__name__}"), all(n.weak for n in nodes)


def _broadcast(nodes: list[Node]) -> list[Node]:
    shape = build.broadcast_shapes(*(n.shape for n in nodes))
    return [build.broadcast_to(n, shape) for n in nodes]


# --- elementwise ---------------------------------------------------------------------------------

# name -> (graph op, NumPy ufunc that defines the result dtype): the op table's rows under their ufunc's
# name, plus the other names NumPy has for them
_TABLE = {d.ufunc.__name__: (Op(d.name), d.ufunc) for d in OPS if d.ufunc is not None and d.arity < 3}
_UNARY = {**{n: v for n, v in _TABLE.items() if v[0] in UNARY}, "abs": (Op.ABS, np.absolute), "erf": (Op.ERF, np.exp)}
_BINARY = {
    **{n: v for n, v in _TABLE.items() if v[0] in BINARY},
    "true_divide": (Op.DIV, np.true_divide),
    "float_power": (Op.POW, np.float_power),
}
_INTEGER_IDENTITY = {Op.FLOOR, Op.CEIL, Op.TRUNC, Op.RINT}
_FALSE_FOR_INTEGERS = {Op.ISNAN, Op.ISINF}


def _unary(name: str, x) -> Tensor:
    op, ufunc = _UNARY[name]
    x = as_node(x)
    if op in _FALSE_FOR_INTEGERS and not is_float(x.dtype):
        return Tensor(build.const(False, BOOL, x.shape))
    if op is Op.SIGNBIT and not is_float(x.dtype):
        return Tensor(build.binary(Op.LT, x, build.const(0, x.dtype, x.shape)))
    dt, weak = _result(ufunc, (x,))
    if op in PREDICATES:
        return Tensor(build.unary(op, x))
    if op in _INTEGER_IDENTITY and not is_float(dt) or op is Op.ABS and x.dtype.kind in "bu":
        return Tensor(build.cast(x, dt, weak))
    if op is Op.RECIP and not is_float(dt):
        return Tensor(_integer_reciprocal(build.cast(x, dt, weak)))
    return Tensor(build.unary(op, build.cast(x, dt, weak)))


def _integer_reciprocal(x: Node) -> Node:
    """NumPy's integer reciprocal is C's (int)(1.0 / x): 1 and -1 are their own, everything else is 0,
    and 1/0 (inf) converts to what x86 gives for the type: INT_MIN for 32- and 64-bit ints, 0 below."""

    def c(v):
        return build.const(v, x.dtype, x.shape)

    at_zero = np.iinfo(x.dtype).min if x.dtype.kind == "i" and x.dtype.itemsize >= 4 else 0
    out = build.where(build.binary(Op.EQ, x, c(0)), c(at_zero), c(0))
    out = build.where(build.binary(Op.EQ, x, c(1)), c(1), out)
    if x.dtype.kind == "i":
        out = build.where(build.binary(Op.EQ, x, c(-1)), c(-1), out)
    return out


def _binary(name: str, a, b) -> Tensor:
    op, ufunc = _BINARY[name]
    a, b = as_node(a), as_node(b)
    dt, weak = _result(ufunc, (a, b))
    compute = dt
    if dt == BOOL and op in (Op.LT, Op.LE, Op.EQ, Op.NE):
        settled = _outside_int_range(ufunc, a, b)
        if settled is None:  # a Python-int argument: exact for whatever value a call passes
            settled = int_comparisons.compare(op, a, b)
        if settled is not None:
            return Tensor(settled)
        compute = _numpy_result(np.add, (_probe(a), _probe(b))) if not (a.dtype == b.dtype == BOOL) else BOOL
        compute = check(compute)
    if op is Op.POW and b.op is Op.CONST and b.shape == () and b.arg == 0.5 and a.shape and is_float(compute):
        # NumPy's array ** 0.5 (a scalar exponent) is np.sqrt: -0.0 stays -0.0 and -inf is NaN, where pow gives
        # +0.0 and +inf (a NumPy scalar's x[i] ** 0.5 is pow's, as the graph's POW)
        return Tensor(build.unary(Op.SQRT, build.cast(a, compute, weak)))
    a, b = _broadcast([build.cast(a, compute, weak), build.cast(b, compute, weak)])
    if op is Op.POW and b.op is Op.CONST and b.arg in (2, 3) and is_float(compute):
        narrow = is_narrow_float(compute)
        if narrow:  # in float32, where x*x*x of a bfloat16 x is exact, rounded once as ml_dtypes' pow
            a = build.cast(a, np.float32)
        out = build.binary(Op.MUL, a, a)  # exact for squares; NumPy special-cases them the same way
        out = build.binary(Op.MUL, out, a) if b.arg == 3 else out
        return Tensor(build.cast(out, compute, weak) if narrow else out)  # (a Python number's square stays weak)
    return Tensor(build.binary(op, a, b))


def _outside_int_range(ufunc, a: Node, b: Node) -> Node | None:
    """NumPy compares an integer array with a Python int beyond its dtype exactly (u8 > -1 is True
    everywhere): such a comparison is the same for every element, so it is a constant."""
    for const, other in ((a, b), (b, a)):
        if (
            const.op is Op.CONST
            and const.weak
            and const.dtype.kind == "i"
            and other.dtype.kind in "iu"
            and not other.weak
        ):
            info, number = np.iinfo(other.dtype), const.arg
            assert isinstance(number, int)  # a weak integer constant holds a Python int
            if not info.min <= number <= info.max:
                edge = int(info.min)  # any value of the dtype compares with the constant as its minimum does
                value = ufunc(number, edge) if const is a else ufunc(edge, number)
                return build.const(bool(value), BOOL, build.broadcast_shapes(a.shape, b.shape))
    return None


def where(condition: ArrayLike, x: ArrayLike | None = None, y: ArrayLike | None = None) -> Tensor:
    if x is None and y is None:  # the indices of the non-zero elements: how many depends on the data
        from tracejit.numpy.data_sizes import nonzero

        return nonzero(condition)  # type: ignore[return-value]
    if x is None or y is None:
        raise ValueError("either both or neither of x and y should be given")
    return _where(condition, x, y, keep_weak=False)  # (an array: np.where(c, True, 0) is int64, not weak)


def select_numbers(condition: ArrayLike, x: ArrayLike, y: ArrayLike) -> Tensor:
    """np.where(condition, x, y), except that where x and y are both Python numbers (weak) the result is too:
    Python's `x if c else y` (conditional_expressions.select) gives one of them, not an array."""
    return _where(condition, x, y, keep_weak=True)


def _where(condition: ArrayLike, x: ArrayLike, y: ArrayLike, keep_weak: bool) -> Tensor:
    c, xn, yn = as_node(condition), as_node(x), as_node(y)
    if c.dtype != BOOL:
        c = build.binary(Op.NE, c, build.const(0, c.dtype, c.shape))
    dt, weak = _where_result(_probe(xn), _probe(yn)), keep_weak and xn.weak and yn.weak
    c, xn, yn = _broadcast([c, build.cast(xn, dt, weak), build.cast(yn, dt, weak)])
    return Tensor(build.where(c, xn, yn))


@functools.lru_cache(maxsize=1024)
def _where_result(x: tuple, y: tuple) -> np.dtype:
    """np.where's own result dtype, asked of the NumPy installed: before 2.5 a Python int it cannot hold
    wraps around (np.where(u32 > 0, u32, -1) is uint32), from 2.5 on it raises OverflowError as a ufunc does."""
    args = [v if weak else np.ones((), dt) for dt, weak, v in (x, y)]
    try:
        return check(np.where(True, *args).dtype, "result of np.where")
    except OverflowError as e:  # beyond the dtype (NumPy 2.5+) or beyond every integer dtype
        raise ScalarOverflowError(f"np.where: {e}") from None


def isfinite(x: ArrayLike) -> Tensor:
    x = as_node(x)
    if not is_float(x.dtype):
        return Tensor(build.const(True, BOOL, x.shape))
    return ~(_unary("isnan", x) | _unary("isinf", x))


def sigmoid(x: ArrayLike) -> Tensor:
    x = as_node(x)
    dt, weak = _result(np.exp, (x,))
    x = Tensor(build.cast(x, dt, weak))
    return 1.0 / (1.0 + exp(-x))


def clip(a: ArrayLike, a_min: ArrayLike | None = None, a_max: ArrayLike | None = None) -> Tensor:
    if is_narrow_float(as_node(a).dtype):  # NumPy's clip has no bfloat16 loop: it clips in float32 (or wider)
        a = astype(a, np.float32)
    if as_node(a).dtype.kind in "iu":
        # as NumPy: a Python int bound beyond the integer dtype bounds nothing (np.clip(u8, -3, 300) is u8)
        info = np.iinfo(as_node(a).dtype)
        a_min = None if type(a_min) is int and a_min <= info.min else a_min
        a_max = None if type(a_max) is int and a_max >= info.max else a_max
    out = Tensor(as_node(a)) if a_min is None else maximum(a, a_min)
    return out if a_max is None else minimum(out, a_max)


Unary = Callable[[ArrayLike], Tensor]
Binary = Callable[[ArrayLike, ArrayLike], Tensor]


def _make_unary(name: str) -> Unary:
    def f(x: ArrayLike) -> Tensor:
        return _unary(name, x)

    f.__name__ = name
    f.__doc__ = f"Elementwise {name}, as numpy.{name}."
    return f


def _make_binary(name: str) -> Binary:
    def f(a: ArrayLike, b: ArrayLike) -> Tensor:
        return _binary(name, a, b)

    f.__name__ = name
    f.__doc__ = f"Elementwise {name}, as numpy.{name}."
    return f


# one line each, annotated: Tensor's operators use them while this module and tensor.py import each other
exp: Unary = _make_unary("exp")
exp2: Unary = _make_unary("exp2")
log: Unary = _make_unary("log")
log2: Unary = _make_unary("log2")
sqrt: Unary = _make_unary("sqrt")
sin: Unary = _make_unary("sin")
cos: Unary = _make_unary("cos")
tan: Unary = _make_unary("tan")
tanh: Unary = _make_unary("tanh")
erf: Unary = _make_unary("erf")
abs: Unary = _make_unary("abs")  # noqa: A001
sign: Unary = _make_unary("sign")
floor: Unary = _make_unary("floor")
ceil: Unary = _make_unary("ceil")
trunc: Unary = _make_unary("trunc")
rint: Unary = _make_unary("rint")
reciprocal: Unary = _make_unary("reciprocal")
isnan: Unary = _make_unary("isnan")
isinf: Unary = _make_unary("isinf")
negative: Unary = _make_unary("negative")
invert: Unary = _make_unary("invert")
maximum: Binary = _make_binary("maximum")
minimum: Binary = _make_binary("minimum")
power: Binary = _make_binary("power")
add: Binary = _make_binary("add")
subtract: Binary = _make_binary("subtract")
multiply: Binary = _make_binary("multiply")
true_divide: Binary = _make_binary("true_divide")
floor_divide: Binary = _make_binary("floor_divide")
remainder: Binary = _make_binary("remainder")
less: Binary = _make_binary("less")
less_equal: Binary = _make_binary("less_equal")
equal: Binary = _make_binary("equal")
not_equal: Binary = _make_binary("not_equal")
bitwise_and: Binary = _make_binary("bitwise_and")
bitwise_or: Binary = _make_binary("bitwise_or")
bitwise_xor: Binary = _make_binary("bitwise_xor")


def greater(a: ArrayLike, b: ArrayLike) -> Tensor:
    return less(b, a)


def greater_equal(a: ArrayLike, b: ArrayLike) -> Tensor:
    return less_equal(b, a)


def logical_not(x: ArrayLike) -> Tensor:
    return equal(x, False) if as_node(x).dtype == BOOL else equal(x, 0)


# --- movement ------------------------------------------------------------------------------------


def reshape(a: ArrayLike, shape: int | Sequence[int], order: str = "C") -> Tensor:
    if order != "C":
        raise UnsupportedError(f"reshape(order={order!r}): only order='C' is supported")
    a = as_node(a)
    shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
    if shape.count(-1) > 1:
        raise ShapeError(f"can only specify one unknown dimension in reshape to {shape}")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or a.size % known:
            raise ShapeError(f"cannot reshape an array of shape {a.shape} (size {a.size}) into shape {shape}")
        shape = tuple(a.size // known if s == -1 else s for s in shape)
    return Tensor(build.reshape(a, shape))


def transpose(a: ArrayLike, axes: Sequence[int] | None = None) -> Tensor:
    a = as_node(a)
    axes = tuple(reversed(range(len(a.shape)))) if axes is None else tuple(_axis(x, len(a.shape)) for x in axes)
    return Tensor(build.permute(a, axes))


def broadcast_to(a: ArrayLike, shape: int | Sequence[int]) -> Tensor:
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return Tensor(build.broadcast_to(as_node(a), shape))


def _axis(axis: int | Tensor, ndim: int) -> int:
    axis = python_value(axis, "an axis")
    if isinstance(axis, Tensor) and (axis.ndim or constant_value(axis._node) is None):
        raise TraceError(
            "an axis argument is a traced value; axes must be plain Python ints. If it is a "
            "parameter of the kernel, name it static: @tj.kernel(static=('axis',))"
        )
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise ShapeError(f"axis {axis} is out of bounds for an array of dimension {ndim}")
    return axis % ndim


def _axes(axis, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = tuple(_axis(a, ndim) for a in ((axis,) if isinstance(axis, (int, Tensor)) else axis))
    if len(set(axes)) != len(axes):
        raise ShapeError(f"duplicate value in axis {axis}")
    return axes


def astype(a, dtype) -> Tensor:
    return Tensor(build.cast(as_node(a), check(dtype, "astype target")))


from tracejit.numpy.reductions import max, mean, min, prod, sum  # noqa: E402,F401  (reductions use the functions above)
