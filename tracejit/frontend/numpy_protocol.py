"""NumPy's __array_ufunc__ / __array_function__ protocols mapped onto the op namespace."""
from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from . import functions as F
from . import reductions

UFUNCS = {
    np.add: F.add, np.subtract: F.subtract, np.multiply: F.multiply, np.true_divide: F.true_divide,
    np.floor_divide: F.floor_divide, np.remainder: F.remainder, np.power: F.power,
    np.maximum: F.maximum, np.minimum: F.minimum, np.less: F.less, np.less_equal: F.less_equal,
    np.greater: F.greater, np.greater_equal: F.greater_equal, np.equal: F.equal, np.not_equal: F.not_equal,
    np.bitwise_and: F.bitwise_and, np.bitwise_or: F.bitwise_or, np.bitwise_xor: F.bitwise_xor,
    np.logical_and: lambda a, b: F.bitwise_and(F.not_equal(a, 0), F.not_equal(b, 0)),
    np.logical_or: lambda a, b: F.bitwise_or(F.not_equal(a, 0), F.not_equal(b, 0)),
    np.logical_not: F.logical_not, np.negative: F.negative, np.positive: F.positive,
    np.exp: F.exp, np.exp2: F.exp2, np.log: F.log, np.log2: F.log2, np.sqrt: F.sqrt, np.sin: F.sin,
    np.cos: F.cos, np.tan: F.tan, np.tanh: F.tanh, np.absolute: F.abs, np.sign: F.sign, np.floor: F.floor,
    np.ceil: F.ceil, np.trunc: F.trunc, np.rint: F.rint, np.invert: F.invert, np.reciprocal: F.reciprocal,
    np.isnan: F.isnan, np.isinf: F.isinf, np.isfinite: F.isfinite, np.matmul: F.matmul,
    np.square: F.square,
}
_REDUCE_UFUNCS = {np.add: F.sum, np.multiply: F.prod, np.maximum: F.max, np.minimum: F.min}

# Each frontend module lists the NumPy functions it implements (NUMPY_FUNCTIONS); this is their union.
FUNCTIONS = {
    np.where: F.where, np.clip: F.clip, np.transpose: F.transpose, np.reshape: F.reshape,
    np.broadcast_to: F.broadcast_to, np.matmul: F.matmul,
    **reductions.NUMPY_FUNCTIONS,
}


def _name(func) -> str:
    mod = getattr(func, "__module__", "numpy") or "numpy"
    mod = "np" if mod.startswith("numpy") and mod.count(".") <= 1 and "fft" not in mod and "linalg" not in mod \
        else mod.replace("numpy", "np")
    return f"{mod}.{func.__name__}"


def array_ufunc(ufunc, method, inputs, kwargs):
    if kwargs.get("out") is not None:
        raise UnsupportedError(f"np.{ufunc.__name__}(..., out=...) is not supported while tracing; "
                               "use the returned value")
    kwargs.pop("out", None)
    if method == "__call__" and ufunc in UFUNCS and not kwargs:
        return UFUNCS[ufunc](*inputs)
    if method == "reduce" and ufunc in _REDUCE_UFUNCS:
        return _REDUCE_UFUNCS[ufunc](inputs[0], axis=kwargs.get("axis", 0), keepdims=kwargs.get("keepdims", False))
    what = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    extra = f" with arguments {sorted(kwargs)}" if kwargs and ufunc in UFUNCS else ""
    raise UnsupportedError(f"{what}{extra} is not supported by tracejit")


def array_function(func, args, kwargs):
    impl = FUNCTIONS.get(func)
    if impl is None:
        raise UnsupportedError(f"{_name(func)} is not supported by tracejit; supported NumPy functions: "
                               + ", ".join(sorted({f.__name__ for f in FUNCTIONS})))
    try:
        return impl(*args, **kwargs)
    except TypeError as e:
        if "argument" in str(e):
            raise UnsupportedError(f"{_name(func)}: {e}") from None
        raise
