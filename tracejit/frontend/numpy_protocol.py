"""NumPy's __array_ufunc__ / __array_function__ protocols mapped onto the op namespace."""
from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from ..ir.dtypes import check
from . import functions as F
from . import (creation, einsum, indexing, joining, linalg, methods, movement, padding, reductions, scans,
               sorting, statistics, ufuncs)

UFUNCS = {**ufuncs.NUMPY_UFUNCS, np.matmul: linalg.matmul}
_REDUCE_UFUNCS = {np.add: F.sum, np.multiply: F.prod, np.maximum: F.max, np.minimum: F.min}

# Each frontend module lists the NumPy functions it implements (NUMPY_FUNCTIONS); this is their union.
FUNCTIONS = {
    np.where: F.where, np.clip: F.clip, np.transpose: F.transpose, np.reshape: F.reshape,
    np.broadcast_to: F.broadcast_to,
    **reductions.NUMPY_FUNCTIONS, **methods.NUMPY_FUNCTIONS, **creation.NUMPY_FUNCTIONS, **ufuncs.NUMPY_FUNCTIONS,
    **linalg.NUMPY_FUNCTIONS, **einsum.NUMPY_FUNCTIONS, **statistics.NUMPY_FUNCTIONS, **indexing.NUMPY_FUNCTIONS,
    **joining.NUMPY_FUNCTIONS, **movement.NUMPY_FUNCTIONS, **padding.NUMPY_FUNCTIONS, **scans.NUMPY_FUNCTIONS,
    **sorting.NUMPY_FUNCTIONS,
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
    if method == "__call__" and ufunc in UFUNCS and set(kwargs) <= {"dtype"}:
        return _call(ufunc, inputs, kwargs)
    if method == "reduce" and ufunc in _REDUCE_UFUNCS:
        kwargs.setdefault("axis", 0)  # ufunc.reduce's default, unlike np.sum's None
        return _REDUCE_UFUNCS[ufunc](inputs[0], **kwargs)  # dtype, keepdims, initial, where as np.sum has them
    if method == "accumulate" and ufunc in scans.ACCUMULATE and set(kwargs) <= {"axis", "dtype"}:
        return scans.accumulate(ufunc, *inputs, **kwargs)
    what = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    extra = f" with arguments {sorted(kwargs)}" if kwargs and ufunc in UFUNCS else ""
    raise UnsupportedError(f"{what}{extra} is not supported by tracejit")


def _call(ufunc, inputs, kwargs):
    """ufunc(*inputs) with NumPy's `dtype=` (the loop's dtype: operands are cast to it first)."""
    dtype = kwargs.get("dtype")
    if dtype is None:
        return UFUNCS[ufunc](*inputs)
    dtype = check(dtype, f"np.{ufunc.__name__}(dtype=...)")
    out = UFUNCS[ufunc](*(F.astype(x, dtype) for x in inputs))
    return out if isinstance(out, tuple) or out.dtype == np.bool_ else F.astype(out, dtype)


def array_function(func, args, kwargs):
    impl = FUNCTIONS.get(func) or sorting.REFUSED.get(func)
    if impl is None:
        raise UnsupportedError(f"{_name(func)} is not supported by tracejit; supported NumPy functions: "
                               + ", ".join(sorted({f.__name__ for f in FUNCTIONS})))
    try:
        return impl(*args, **kwargs)
    except TypeError as e:
        if "argument" in str(e):
            raise UnsupportedError(f"{_name(func)}: {e}") from None
        raise
