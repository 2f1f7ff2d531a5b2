"""bfloat16 and float8 arguments and results of a kernel call (ir/narrow_floats.py says why the plan sees them as
bits): such an array is passed as its memory viewed as uint16 or uint8, without a copy, so the kernel's writes into it
reach the caller's array, and a result computed as bits is viewed as its type again (a tj.Array keeps its buffer)."""

from __future__ import annotations

import copy

import numpy as np

from tracejit.ir.dtypes import is_narrow_float
from tracejit.frontend.converting_plan import ConvertingPlan
from tracejit.runtime.array import Array


def retyped(data, dtype: np.dtype):
    """A device's array `data` (a NumPy array on numba, a device buffer elsewhere) read as `dtype` of the same
    itemsize, sharing its memory."""
    if type(data) is np.ndarray:
        return data.view(dtype)
    out = copy.copy(data)  # (the same memory and pool block; only the dtype it is read as differs)
    out.dtype = np.dtype(dtype)
    return out


def _bits_dtype(dt: np.dtype) -> np.dtype:
    return np.dtype(f"uint{dt.itemsize * 8}")


def bits(a):
    """A narrow float array (NumPy's or a tj.Array) as its bits; anything else as it is (so converting twice changes
    nothing)."""
    t = type(a)
    if t is np.ndarray:
        return a.view(_bits_dtype(a.dtype)) if is_narrow_float(a.dtype) else a
    if t is Array and is_narrow_float(a.dtype):
        return Array(retyped(a._data, _bits_dtype(a.dtype)), a.device)
    return a


def from_bits(r, dtype: np.dtype):
    """Bits computed by a kernel (a NumPy array or a tj.Array) as the narrow float array they are."""
    if type(r) is np.ndarray:
        return r.view(dtype)
    if type(r) is Array:
        return Array(retyped(r._data, dtype), r.device)
    raise TypeError(f"a {dtype} result of type {type(r).__name__}")


def wrapped(plan):
    """`plan` itself, or a NarrowFloatPlan around it where its call has narrow float arguments or results."""
    traced = plan.traced
    positions = tuple(
        i for i, info in enumerate(traced.infos) if info.dtype is not None and is_narrow_float(info.dtype)
    )
    results = {k: dt for k, dt in traced.narrow_outputs.items() if k < len(traced.results)}
    if not positions and not results:  # (assigned arguments are written through their bits)
        return plan
    return NarrowFloatPlan(plan, positions, results)


class NarrowFloatPlan(ConvertingPlan):
    """A plan of a call with narrow float arguments or results: the plan it wraps runs on their bits."""

    def argument(self, a):
        return bits(a)

    def result(self, r, dtype: np.dtype):
        return from_bits(r, dtype)
