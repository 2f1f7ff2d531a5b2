"""NumPy's __array_ufunc__ / __array_function__ protocols mapped onto the op namespace."""

from __future__ import annotations

import sys

import numpy as np

from tracejit.errors import UnsupportedError
from tracejit.ir.dtypes import check
from tracejit.ir.evaluate import constant_value
from tracejit.numpy import functions as F
from tracejit.numpy import (
    assign,
    creation,
    data_sizes,
    einsum,
    fft,
    histogram,
    host_calls,
    indexing,
    joining,
    linalg,
    linalg_solvers,
    methods,
    movement,
    numerical,
    padding,
    reductions,
    scans,
    scatter,
    sorting,
    standard,
    statistics,
    ufunc_methods,
    ufuncs,
)
from tracejit.numpy.tensor import Tensor, view_call

UFUNCS = {**ufuncs.NUMPY_UFUNCS, np.matmul: linalg.matmul}
_REDUCE_UFUNCS = {
    np.add: F.sum,
    np.multiply: F.prod,
    np.maximum: F.max,
    np.minimum: F.min,
    np.logical_and: reductions.all,
    np.logical_or: reductions.any,
}

# Each frontend module lists the NumPy functions it implements (NUMPY_FUNCTIONS); this is their union.
FUNCTIONS: dict = {
    np.where: F.where,
    np.clip: F.clip,
    np.transpose: F.transpose,
    np.reshape: F.reshape,
    np.broadcast_to: F.broadcast_to,
    **reductions.NUMPY_FUNCTIONS,
    **methods.NUMPY_FUNCTIONS,
    **creation.NUMPY_FUNCTIONS,
    **ufuncs.NUMPY_FUNCTIONS,
    **linalg.NUMPY_FUNCTIONS,
    **standard.NUMPY_FUNCTIONS,
    **einsum.NUMPY_FUNCTIONS,
    **statistics.NUMPY_FUNCTIONS,
    **numerical.NUMPY_FUNCTIONS,
    **indexing.NUMPY_FUNCTIONS,
    **joining.NUMPY_FUNCTIONS,
    **movement.NUMPY_FUNCTIONS,
    **padding.NUMPY_FUNCTIONS,
    **scatter.NUMPY_FUNCTIONS,
    **histogram.NUMPY_FUNCTIONS,
    **assign.NUMPY_FUNCTIONS,
    **scans.NUMPY_FUNCTIONS,
    **sorting.NUMPY_FUNCTIONS,
    **data_sizes.NUMPY_FUNCTIONS,
    **fft.NUMPY_FUNCTIONS,
}

# Functions whose result shape depends on the data: of arrays the kernel made from constants alone
# (np.where(np.arange(n) > k)) NumPy computes them while tracing, as it did before a trace.
DATA_DEPENDENT = frozenset({*data_sizes.NUMPY_FUNCTIONS, np.where})
# NumPy functions whose results are views of their first argument: writes through them reach it (views.py);
# np.ravel makes a view of contiguous data only
VIEW_FUNCTIONS = frozenset(
    {
        np.transpose,
        np.reshape,
        np.squeeze,
        np.swapaxes,
        np.moveaxis,
        np.expand_dims,
        np.broadcast_to,
        np.atleast_1d,
        np.atleast_2d,
        np.atleast_3d,
        np.flip,
        np.fliplr,
        np.flipud,
        np.rot90,
        np.split,
        np.array_split,
        np.hsplit,
        np.vsplit,
        np.dsplit,
        np.unstack,
        np.real,
        np.ravel,
    }
)
# out= of NumPy functions: (casting, whether out must have the result's shape rather than one it broadcasts
# to); the reductions, np.round, np.take & co. take the result's shape cast 'unsafe', as NumPy's
OUT_RULES = {np.clip: ("same_kind", False), np.concatenate: ("same_kind", True), np.einsum: ("safe", True)}


def _name(func) -> str:
    mod = getattr(func, "__module__", "numpy") or "numpy"
    mod = (
        "np"
        if mod.startswith("numpy") and mod.count(".") <= 1 and "fft" not in mod and "linalg" not in mod
        else mod.replace("numpy", "np")
    )
    return f"{mod}.{func.__name__}"


def array_ufunc(ufunc, method, inputs, kwargs):
    out = kwargs.pop("out", None)
    if out is not None:
        return _into(ufunc, method, inputs, kwargs, out if isinstance(out, tuple) else (out,))
    if method == "__call__" and ufunc in UFUNCS and set(kwargs) <= {"dtype"}:
        return _call(ufunc, inputs, kwargs)
    if method == "__call__" and ufunc in standard.GUFUNCS and set(kwargs) <= standard.GUFUNCS[ufunc][1]:
        return standard.GUFUNCS[ufunc][0](*inputs, **kwargs)
    if method == "reduce" and ufunc in _REDUCE_UFUNCS:
        kwargs.setdefault("axis", 0)  # ufunc.reduce's default, unlike np.sum's None
        return _REDUCE_UFUNCS[ufunc](inputs[0], **kwargs)  # dtype, keepdims, initial, where as np.sum has them
    if method == "outer" and ufunc in UFUNCS and ufunc is not np.matmul and set(kwargs) <= {"dtype"}:
        return _outer(ufunc, inputs, kwargs)
    if method == "at" and not kwargs:
        return scatter.ufunc_at(ufunc, *inputs)
    if method == "accumulate" and ufunc in scans.ACCUMULATE and set(kwargs) <= {"axis", "dtype"}:
        return scans.accumulate(ufunc, *inputs, **kwargs)
    if method in ("reduce", "accumulate", "reduceat") and ufunc in UFUNCS and ufunc.nin == 2 and ufunc.nout == 1:
        return getattr(ufunc_methods, method)(ufunc, *inputs, **kwargs)  # (NumPy's fold, traced: ufunc_methods.py)
    what = _ufunc_name(ufunc) + ("" if method == "__call__" else f".{method}")
    why = f"not with arguments {sorted(kwargs)}" if kwargs and ufunc in UFUNCS else "not implemented"
    return host_calls.fallback(getattr(ufunc, method), inputs, kwargs, what, why)


def _ufunc_name(ufunc) -> str:
    """A ufunc as its user wrote it: np.<name> for NumPy's, the library's own module path for another's
    (scipy.special.gamma, not np.gamma)."""
    name = str(getattr(ufunc, "__name__", ufunc))
    if getattr(np, name, None) is ufunc:
        return f"np.{name}"
    for module in ("scipy.special",):
        found = sys.modules.get(module)
        if found is not None and getattr(found, name, None) is ufunc:
            return f"{module}.{name}"
    return name


def _into(ufunc, method, inputs, kwargs, outs: tuple):
    """ufunc(..., out=outs): computed as without out=, then stored into each given output (cast with
    `casting`, default 'same_kind'; only where `where=` is true). Returns the outputs, as NumPy does."""
    casting, where = kwargs.pop("casting", "same_kind"), kwargs.pop("where", True)
    results = array_ufunc(ufunc, method, inputs, kwargs)
    results = results if isinstance(results, tuple) else (results,)
    if len(outs) != len(results):
        raise UnsupportedError(f"np.{ufunc.__name__} has {len(results)} output(s); out= gave {len(outs)}")
    if method != "__call__":
        casting = "unsafe" if "casting" not in kwargs else casting
    written = tuple(
        r if o is None else assign.write_out(o, r, casting, where, ufunc.__name__) for o, r in zip(outs, results)
    )
    return written if len(written) > 1 else written[0]


def _outer(ufunc, inputs, kwargs):
    """ufunc.outer(a, b): ufunc(a[..., None, ...], b), a's axes first (b.ndim new axes after them)."""
    if len(inputs) != 2:
        raise TypeError(f"{ufunc.__name__}.outer() takes exactly 2 arguments ({len(inputs)} given)")
    a, b = inputs
    shape = np.shape(a) + (1,) * np.ndim(b)
    return _call(ufunc, (F.reshape(a, shape) if isinstance(a, Tensor) else np.reshape(a, shape), b), kwargs)


def _call(ufunc, inputs, kwargs):
    """ufunc(*inputs) with NumPy's `dtype=` (the loop's dtype: operands are cast to it first)."""
    dtype = kwargs.get("dtype")
    if dtype is None:
        return UFUNCS[ufunc](*inputs)
    dtype = check(dtype, f"np.{ufunc.__name__}(dtype=...)")
    out = UFUNCS[ufunc](*(F.astype(x, dtype) for x in inputs))
    return out if isinstance(out, tuple) or out.dtype == np.bool_ else F.astype(out, dtype)


def array_function(func, args, kwargs):
    impl = FUNCTIONS.get(func)
    if impl is None:
        constants = _constant_arguments((args, kwargs))
        if constants is not None:  # arrays the kernel made from constants: NumPy computes it, as before a trace
            args, kwargs = constants
            return func(*args, **kwargs)
        if func in host_calls.LINALG_ON_HOST:  # generated kernels, or NumPy's LAPACK on the host (linalg_solvers)
            result = linalg_solvers.generated(func, args, kwargs)
            if result is not NotImplemented:
                return result
            return host_calls.fallback(func, args, kwargs, _name(func), "LAPACK", library=True)
        return host_calls.fallback(func, args, kwargs, _name(func), "not implemented")
    sized = func in DATA_DEPENDENT and not (func is np.where and len(args) + len(kwargs) > 1)  # (np.where(c, x, y): no)
    constants = _constant_arguments((args, kwargs)) if sized else None
    if constants is not None:  # np.nonzero(np.arange(n) > k): known while tracing, so NumPy computes it
        return func(*constants[0], **constants[1])
    out = kwargs.pop("out", None)
    try:
        if func in VIEW_FUNCTIONS and args:
            result = view_call(impl, *args, contiguous_only=func is np.ravel, **kwargs)
        else:
            result = _fresh(impl(*args, **kwargs), args)
    except TypeError as e:
        if "argument" in str(e):
            raise UnsupportedError(f"{_name(func)}: {e}") from None
        raise
    if out is None:
        return result
    casting, exact = OUT_RULES.get(func, ("unsafe", True))
    return assign.write_out(out, result, casting, name=func.__name__, exact=exact)


def _constant_arguments(value):
    """`value` (nested tuples, lists and dicts) with every traced array replaced by its NumPy value, or None
    when one of them depends on a kernel argument."""
    if isinstance(value, Tensor):
        return constant_value(value._node)
    if isinstance(value, (tuple, list)):
        items = [_constant_arguments(v) for v in value]
        if any(i is None and isinstance(v, (Tensor, tuple, list, dict)) for i, v in zip(items, value)):
            return None
        return type(value)(i if isinstance(v, (Tensor, tuple, list, dict)) else v for i, v in zip(items, value))
    if isinstance(value, dict):
        items = _constant_arguments(list(value.items()))
        return None if items is None else dict(items)
    return value


def _fresh(result, args):
    """A function that is not a view returns a new array, even where its implementation handed back an
    argument unchanged: writing into the result must not change the argument."""
    if isinstance(result, Tensor) and any(result is a for a in args):
        return Tensor(result._node)
    return result
