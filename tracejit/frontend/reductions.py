"""Reductions and statistics (tj.sum, np.mean, t.max(axis=...)): NumPy's axis, keepdims and dtype rules."""
from __future__ import annotations

import math

import numpy as np

from ..errors import ShapeError
from ..ir import build
from ..ir.dtypes import FLOAT64, check, is_float, sum_dtype
from .functions import _axes, true_divide
from .tensor import Tensor, as_node

__all__ = ["max", "mean", "min", "prod", "sum"]

# --- reductions ----------------------------------------------------------------------------------

def _reduce(op: str, a, axis, keepdims: bool, dtype=None) -> Tensor:
    a = as_node(a)
    axes = _axes(axis, len(a.shape))
    if op in ("max", "min") and any(a.shape[d] == 0 for d in axes) and a.size == 0:
        raise ShapeError(f"zero-size array (shape {a.shape}) to reduction operation {op} which has no identity")
    if dtype is not None:
        a = build.cast(a, check(dtype))
    elif op in ("sum", "prod"):
        a = build.cast(a, sum_dtype(a.dtype))
    out = build.reduce(a, op, axes) if axes else a
    if not keepdims:
        out = build.reshape(out, tuple(s for d, s in enumerate(out.shape) if d not in axes))
    return Tensor(out)


def sum(a, axis=None, dtype=None, keepdims=False) -> Tensor:  # noqa: A001
    return _reduce("sum", a, axis, keepdims, dtype)


def prod(a, axis=None, dtype=None, keepdims=False) -> Tensor:
    return _reduce("prod", a, axis, keepdims, dtype)


def max(a, axis=None, keepdims=False) -> Tensor:  # noqa: A001
    return _reduce("max", a, axis, keepdims)


def min(a, axis=None, keepdims=False) -> Tensor:  # noqa: A001
    return _reduce("min", a, axis, keepdims)


def mean(a, axis=None, dtype=None, keepdims=False) -> Tensor:
    a = as_node(a)
    axes = _axes(axis, len(a.shape))
    count = math.prod(a.shape[d] for d in axes)
    out_dt = check(dtype) if dtype is not None else (a.dtype if is_float(a.dtype) else FLOAT64)
    acc_dt = np.dtype("float32") if out_dt == np.float16 else out_dt
    total = _reduce("sum", build.cast(a, acc_dt), axis, keepdims)
    return Tensor(build.cast(true_divide(total, float(count) if count else math.nan)._node, out_dt))


NUMPY_FUNCTIONS = {np.sum: sum, np.prod: prod, np.max: max, np.min: min, np.mean: mean, np.amax: max, np.amin: min}
