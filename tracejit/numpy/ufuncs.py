"""Every NumPy ufunc on traced tensors: the op table's rows as tj.<ufunc name>, and the ufuncs NumPy
defines in terms of others (logaddexp, degrees, heaviside, fmax, ...) built here from those primitives,
with NumPy's result dtypes and its special cases (NaN, infinities, signed zeros)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from tracejit.ir import build
from tracejit.ir.dtypes import BOOL, check, finfo, is_float, is_inexact, is_narrow_float, narrow_float
from tracejit.ir.graph import Op
from tracejit.ir.ops import BY_NAME
from tracejit.numpy import functions as F
from tracejit.numpy.functions import _BINARY, _UNARY, _broadcast, _result, _unary, _binary
from tracejit.numpy.tensor import ArrayLike, Tensor, as_node


def _primitive(name: str, arity: int) -> Callable[..., Tensor]:
    def f(*args: ArrayLike) -> Tensor:
        if len(args) != arity:
            raise TypeError(f"{name}() takes {arity} positional argument{'s' * (arity > 1)} ({len(args)} given)")
        return _unary(name, *args) if arity == 1 else _binary(name, *args)

    f.__name__ = name
    f.__doc__ = f"Elementwise {name}, as numpy.{name}."
    return f


# tj.<name> for every row of the op table, under NumPy's name for it
PRIMITIVES = {**{n: _primitive(n, 1) for n in _UNARY}, **{n: _primitive(n, 2) for n in _BINARY}}


def _in(ufunc: np.ufunc, *xs) -> list[Tensor]:
    """The operands cast to the dtype NumPy's `ufunc` returns for them (so a composite computes in it)."""
    nodes = [as_node(x) for x in xs]
    dt, weak = _result(ufunc, nodes)
    return [Tensor(build.cast(n, dt, weak)) for n in nodes]


def _in_loop(ufunc: np.ufunc, *xs) -> tuple[list[Tensor], np.dtype]:
    """As _in, but float16 and bfloat16 operands become float32: NumPy's float16 loops (and ml_dtypes' bfloat16
    ones) compute in float32 and round once at the end, and a composite must too (its constants and steps would
    round each time)."""
    ts = _in(ufunc, *xs)
    dt = ts[0].dtype
    return ([F.astype(t, np.float32) for t in ts] if dt == np.float16 or is_narrow_float(dt) else ts), dt


def _const(value, like: Tensor) -> Tensor:
    return Tensor(build.const(value, like.dtype, (), like._node.weak))


def logaddexp(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """log(exp(a) + exp(b)) without overflow, as NumPy: equal operands (infinities too) give a + log(2)."""
    (a, b), dt = _in_loop(np.logaddexp, x1, x2)
    d = a - b
    m = F.maximum(a, b)
    tail = m + PRIMITIVES["log1p"](F.exp(-F.abs(d)))
    return F.astype(F.where(a == b, a + _const(math.log(2), a), F.where(F.isnan(d), d, tail)), dt)


def logaddexp2(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    (a, b), dt = _in_loop(np.logaddexp2, x1, x2)
    d = a - b
    m = F.maximum(a, b)
    tail = m + _const(1 / math.log(2), a) * PRIMITIVES["log1p"](F.exp2(-F.abs(d)))
    return F.astype(F.where(a == b, a + _const(1.0, a), F.where(F.isnan(d), d, tail)), dt)


def _scaled(ufunc: np.ufunc, factor: float) -> F.Unary:
    def f(x: ArrayLike) -> Tensor:
        (x,), dt = _in_loop(ufunc, x)
        return F.astype(x * _const(factor, x), dt)  # by the factor rounded to the loop's dtype, as NumPy

    f.__name__ = ufunc.__name__
    f.__doc__ = f"Elementwise {ufunc.__name__}, as numpy.{ufunc.__name__}."
    return f


degrees, rad2deg = _scaled(np.degrees, 180 / math.pi), _scaled(np.rad2deg, 180 / math.pi)
radians, deg2rad = _scaled(np.radians, math.pi / 180), _scaled(np.deg2rad, math.pi / 180)


def heaviside(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    x, h0 = _in(np.heaviside, x1, x2)
    step = F.where(x < 0, _const(0, x), _const(1, x))
    return F.where(F.isnan(x), x, F.where(x == 0, h0, step))


def _nan_ignoring(ufunc: np.ufunc, pick: F.Binary) -> F.Binary:
    def f(x1: ArrayLike, x2: ArrayLike) -> Tensor:
        a, b = _in(ufunc, x1, x2)
        if not is_float(a.dtype):
            return pick(a, b)
        return F.where(F.isnan(b), a, F.where(F.isnan(a), b, pick(a, b)))

    f.__name__ = ufunc.__name__
    f.__doc__ = f"Elementwise {ufunc.__name__}, as numpy.{ufunc.__name__}: a NaN loses to a number."
    return f


fmax, fmin = _nan_ignoring(np.fmax, F.maximum), _nan_ignoring(np.fmin, F.minimum)


def square(x: ArrayLike) -> Tensor:
    (x,) = _in(np.square, x)
    return x * x


def positive(x: ArrayLike) -> Tensor:
    (x,) = _in(np.positive, x)  # NumPy refuses bool
    return x


def conjugate(x: ArrayLike) -> Tensor:
    (x,) = _in(np.conjugate, x)  # real dtypes only: the value itself
    return x


conj = conjugate


def real(val: ArrayLike) -> Tensor:
    return Tensor(as_node(val))


def imag(val: ArrayLike) -> Tensor:
    x = as_node(val)
    return Tensor(build.const(0, x.dtype, x.shape))


def fabs(x: ArrayLike) -> Tensor:
    (x,) = _in(np.fabs, x)
    return F.abs(x)


def fix(x: ArrayLike) -> Tensor:
    """Round towards zero; integers stay integers."""
    return F.trunc(x)


def isposinf(x: ArrayLike) -> Tensor:
    x = as_node(x)
    return Tensor(build.const(False, BOOL, x.shape)) if not is_float(x.dtype) else Tensor(x) == math.inf


def isneginf(x: ArrayLike) -> Tensor:
    x = as_node(x)
    return Tensor(build.const(False, BOOL, x.shape)) if not is_float(x.dtype) else Tensor(x) == -math.inf


def _truth(x) -> Tensor:
    x = as_node(x)
    return Tensor(x) if x.dtype == BOOL else F.not_equal(Tensor(x), 0)


def logical_and(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    return F.bitwise_and(_truth(x1), _truth(x2))


def logical_or(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    return F.bitwise_or(_truth(x1), _truth(x2))


def logical_xor(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    return F.bitwise_xor(_truth(x1), _truth(x2))


def logical_not(x: ArrayLike) -> Tensor:
    return F.invert(_truth(x))


def divmod_(x1: ArrayLike, x2: ArrayLike) -> tuple[Tensor, Tensor]:
    return F.floor_divide(x1, x2), F.remainder(x1, x2)


divmod_.__name__ = "divmod"


def modf(x: ArrayLike) -> tuple[Tensor, Tensor]:
    """(fractional part, integral part), both with x's sign; modf(inf) is (0, inf)."""
    (x,) = _in(np.modf, x)
    whole = F.trunc(x)
    frac = F.where(F.isinf(x), _const(0.0, x), x - whole)
    return PRIMITIVES["copysign"](frac, x), whole


def nan_to_num(
    x: ArrayLike, copy: bool = True, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None
) -> Tensor:
    x = Tensor(as_node(x))
    if not is_inexact(x.dtype):  # (NumPy leaves bfloat16 as it is, as it leaves integers)
        return x
    info = np.finfo(x.dtype)
    big = float(info.max) if posinf is None else posinf
    small = float(info.min) if neginf is None else neginf
    out = F.where(F.isnan(x), _const(nan, x), x)
    out = F.where(x == math.inf, _const(big, x), out)
    return F.where(x == -math.inf, _const(small, x), out)


def isclose(a: ArrayLike, b: ArrayLike, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """NumPy's formula: |a - b| <= atol + rtol * |b|, finite b, or a == b (b made inexact first)."""
    yn = as_node(b)
    if not yn.weak:
        yn = build.cast(yn, check(np.result_type(yn.dtype, 1.0)))
    elif yn.dtype.kind in "bi" and yn.op is Op.CONST:
        assert isinstance(yn.arg, int)  # a weak bool or int constant holds a Python bool or int
        yn = build.const(float(yn.arg), np.float64, (), True)
    elif yn.dtype.kind in "bi":
        yn = build.cast(yn, np.float64, True)
    x, y = Tensor(as_node(a)), Tensor(yn)
    out = F.less_equal(F.abs(x - y), atol + rtol * F.abs(y)) & F.isfinite(y) | (x == y)
    if equal_nan:
        out = out | (F.isnan(x) & F.isnan(y))
    return out


def sinc(x: ArrayLike) -> Tensor:
    """sin(pi x) / (pi x), 1 at 0: NumPy's own steps (pi * x, then 0 replaced by the dtype's eps)."""
    scaled: Tensor = Tensor(as_node(x)) * math.pi
    y = F.where(scaled, scaled, _const(finfo(scaled.dtype).eps, scaled))
    return F.sin(y) / y


# --- the float's own layout: ldexp, frexp, nextafter, spacing -------------------------------------
# float dtype -> (significand bits, exponent of the smallest subnormal, an |n| at which ldexp(x, n) is
# already 0 or inf for every x of the dtype: exponents are clamped to it, so the dtype holds them exactly)
_LAYOUT = {
    np.dtype(np.float16): (11, -24, 48),
    np.dtype(np.float32): (24, -149, 320),
    np.dtype(np.float64): (53, -1074, 2200),
}


def _layout(dt: np.dtype) -> tuple[int, int, int]:
    narrow = narrow_float(dt)  # (bfloat16, float8: ml_dtypes' types, computed in float32)
    if narrow is not None:
        return narrow.mantissa + 1, 1 - narrow.bias - narrow.mantissa, 320
    return _LAYOUT[np.dtype(dt)]


def _scale(x: Tensor, n: Tensor) -> Tensor:
    """x * 2**n rounded once; n integral, of x's dtype, within _LAYOUT's clamp."""
    return Tensor(build.binary(Op.LDEXP, *_broadcast([x._node, n._node])))


def ldexp(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """x1 * 2**x2 as NumPy: the float dtype of NumPy's loop; an integer exponent beyond the dtype's range
    gives 0 or inf (with x1's sign)."""
    x, n = as_node(x1), as_node(x2)
    dt, _ = _result(np.ldexp, (x, n))
    if n.dtype == BOOL:
        n = build.cast(n, np.int8)
    limit = _layout(dt)[2]
    exponent = Tensor(n)
    info = np.iinfo(exponent.dtype)
    if info.max > limit:
        exponent = F.minimum(exponent, limit)
    if info.min < -limit:
        exponent = F.maximum(exponent, -limit)
    return _scale(Tensor(build.cast(x, dt)), Tensor(build.cast(exponent._node, dt)))


def _frexp(x: Tensor) -> tuple[Tensor, Tensor]:
    """(m, e) with x = m * 2**e, 0.5 <= |m| < 1, e of x's dtype; (x, 0) for 0, inf and NaN. e is log2's
    floor corrected by the exactly scaled m, so log2's last-bit error cannot move it."""
    ok = F.isfinite(x) & F.not_equal(x, 0)
    a = F.where(ok, F.abs(x), _const(1.0, x))
    e = F.floor(PRIMITIVES["log2"](a)) + _const(1.0, x)
    m = _scale(a, -e)
    e = e + F.where(m >= 1, _const(1.0, x), _const(0.0, x)) - F.where(m < 0.5, _const(1.0, x), _const(0.0, x))
    e = F.where(ok, e, _const(0.0, x))
    return _scale(x, -e), e


def frexp(x: ArrayLike) -> tuple[Tensor, Tensor]:
    """(mantissa, exponent) as NumPy: the mantissa in [0.5, 1) with x's sign (x itself for 0, inf, NaN),
    the exponent int32 (0 for those)."""
    node = as_node(x)
    probe = node.arg if node.weak and node.op is Op.CONST else np.ones((), node.dtype)
    assert isinstance(probe, (int, float, np.ndarray))  # a weak constant holds a Python number
    dt = check(np.frexp(probe)[0].dtype)
    t = F.astype(Tensor(node), np.float32 if dt == np.float16 or is_narrow_float(dt) else dt)  # (exact in float32)
    m, e = _frexp(t)
    return F.astype(m, dt), F.astype(e, np.int32)


def _step(x: Tensor, e: Tensor, shrink: Tensor, dt: np.dtype) -> Tensor:
    """The distance from x (exponent e, of float dtype dt) to its neighbour away from zero, or towards
    zero where `shrink`: half of it below a power of two, never below the smallest subnormal."""
    bits, tiniest, _ = _layout(dt)
    k = e - _const(float(bits), e) - F.where(shrink, _const(1.0, e), _const(0.0, e))
    return _scale(_const(1.0, x), F.maximum(k, _const(float(tiniest), e)))


# NumPy's own float16 nextafter returned x1 for x1 == x2 (so nextafter(0, -0) was +0) until 2.5, which returns
# x2 as C's nextafter does; tracejit follows the NumPy it runs beside
_FLOAT16_NEXTAFTER_KEEPS_X = not np.signbit(np.nextafter(np.float16(0.0), np.float16(-0.0)))


def nextafter(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """The next float after x1 towards x2, as NumPy (C's nextafter; its own float16 loop) on every float
    dtype: x1 plus its step, exactly (float16 steps are float16's, computed in float32)."""
    (x, y), dt = _in_loop(np.nextafter, x1, x2)
    info = finfo(dt)
    m, e = _frexp(x)
    up = y > x
    shrink = F.not_equal(up, x > 0) & F.equal(F.abs(m), 0.5)
    step = _step(x, e, shrink, dt)
    out = PRIMITIVES["copysign"](x + F.where(up, step, -step), x)  # -tiny towards 0 is -0
    out = F.where(F.equal(x, 0), PRIMITIVES["copysign"](_const(float(info.smallest_subnormal), x), y), out)
    out = F.where(F.isinf(x), PRIMITIVES["copysign"](_const(float(info.max), x), x), out)
    out = F.where(F.equal(x, y), x if dt == np.float16 and _FLOAT16_NEXTAFTER_KEEPS_X else y, out)  # +-0
    return F.astype(F.where(F.isnan(x) | F.isnan(y), x + y, out), dt)


def spacing(x: ArrayLike) -> Tensor:
    """The distance from x to its neighbour away from zero, signed like x, as NumPy; spacing(+-0) is the
    smallest subnormal, of +-inf and NaN NaN. float16 follows NumPy's own loop: the positive distance to
    |x|'s neighbour towards zero for negative x."""
    (x,), dt = _in_loop(np.spacing, x)
    info = finfo(dt)
    m, e = _frexp(x)
    big = _const(math.inf, x)
    if dt == np.float16:
        out = _step(x, e, (x < 0) & F.equal(m, -0.5), dt)
        out = F.where(F.equal(x, float(info.max)), big, out)
    else:
        out = PRIMITIVES["copysign"](_step(x, e, Tensor(build.const(False, BOOL, x.shape)), dt), x)
        out = F.where(F.equal(F.abs(x), float(info.max)), PRIMITIVES["copysign"](big, x), out)
    tiniest = _const(float(info.smallest_subnormal), x)
    if is_narrow_float(dt):  # ml_dtypes' loop: signed like x at zero too
        tiniest = PRIMITIVES["copysign"](tiniest, x)
    out = F.where(F.equal(x, 0), tiniest, out)
    return F.astype(F.where(F.isfinite(x), out, _const(math.nan, x)), dt)


_COMPOSITE_UFUNCS = {
    np.logaddexp: logaddexp,
    np.logaddexp2: logaddexp2,
    np.degrees: degrees,
    np.rad2deg: rad2deg,
    np.radians: radians,
    np.deg2rad: deg2rad,
    np.heaviside: heaviside,
    np.fmax: fmax,
    np.fmin: fmin,
    np.square: square,
    np.positive: positive,
    np.conjugate: conjugate,
    np.fabs: fabs,
    np.logical_and: logical_and,
    np.logical_or: logical_or,
    np.logical_xor: logical_xor,
    np.logical_not: logical_not,
    np.divmod: divmod_,
    np.modf: modf,
    np.ldexp: ldexp,
    np.frexp: frexp,
    np.nextafter: nextafter,
    np.spacing: spacing,
    np.greater: F.greater,
    np.greater_equal: F.greater_equal,
    np.isfinite: F.isfinite,
}
# every ufunc tracejit implements -> its implementation
NUMPY_UFUNCS = {
    **{ufunc: PRIMITIVES[n] for n, (_, ufunc) in {**_UNARY, **_BINARY}.items() if n != "erf"},
    **_COMPOSITE_UFUNCS,
}
NUMPY_FUNCTIONS = {
    np.real: real,
    np.imag: imag,
    np.fix: fix,
    np.isposinf: isposinf,
    np.isneginf: isneginf,
    np.nan_to_num: nan_to_num,
    np.isclose: isclose,
    np.sinc: sinc,
}

_OWN = {n: f for n, f in PRIMITIVES.items() if not hasattr(F, n)}
globals().update(_OWN)
add, subtract, multiply, divide, true_divide = F.add, F.subtract, F.multiply, F.true_divide, F.true_divide
floor_divide, remainder, mod, negative = F.floor_divide, F.remainder, F.remainder, F.negative
less, less_equal, greater, greater_equal, equal, not_equal = (
    F.less,
    F.less_equal,
    F.greater,
    F.greater_equal,
    F.equal,
    F.not_equal,
)
bitwise_and, bitwise_or, bitwise_xor, invert, absolute = F.bitwise_and, F.bitwise_or, F.bitwise_xor, F.invert, F.abs
__all__ = sorted(
    {
        *_OWN,
        "add",
        "subtract",
        "multiply",
        "divide",
        "true_divide",
        "floor_divide",
        "remainder",
        "mod",
        "negative",
        "less",
        "less_equal",
        "greater",
        "greater_equal",
        "equal",
        "not_equal",
        "bitwise_and",
        "bitwise_or",
        "bitwise_xor",
        "invert",
        "absolute",
        "logaddexp",
        "logaddexp2",
        "degrees",
        "rad2deg",
        "radians",
        "deg2rad",
        "heaviside",
        "fmax",
        "fmin",
        "square",
        "positive",
        "conjugate",
        "conj",
        "real",
        "imag",
        "fabs",
        "fix",
        "isposinf",
        "isneginf",
        "logical_and",
        "logical_or",
        "logical_xor",
        "logical_not",
        "modf",
        "nan_to_num",
        "ldexp",
        "frexp",
        "nextafter",
        "spacing",
        "isclose",
        "sinc",
    }
)

# float32/float64 error against NumPy of the composites whose steps round (numba and opencl, GPUs: webgpu and
# cuda), as measured on special and random values; the rest are exact. logaddexp's error near a zero result is in
# ulps of that result, where the cancellation of max(x1, x2) against log1p(...) magnifies its steps'
ULPS = {
    "logaddexp": (16, 64),
    "logaddexp2": (64, 128),
    "degrees": (2, 2),
    "rad2deg": (2, 2),
    "radians": (2, 2),
    "deg2rad": (2, 2),
    "sinc": (2, 2),
    "isclose": (0, 0),
}


def stated_ulps(name: str) -> tuple[int, int]:
    """The stated error of ufunc `name` (numba and opencl, GPUs): its op table row's, or a composite's."""
    if name in _UNARY or name in _BINARY:
        return BY_NAME[(_UNARY.get(name) or _BINARY[name])[0].value].ulps
    return ULPS.get(name, (0, 0))
