"""bfloat16 and float8 arguments and results of a kernel call (ir/narrow_floats.py says why the plan sees them as
bits): such an array is passed as its memory viewed as uint16 or uint8, without a copy, so the kernel's writes into it
reach the caller's array, and a result computed as bits is viewed as its type again (a tj.Array keeps its buffer)."""

from __future__ import annotations

import copy

import numpy as np

from tracejit.ir.dtypes import is_narrow_float
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


class NarrowFloatPlan:
    """A plan (a Plan, or a SizedPlan's) of a call with narrow float arguments or results: runs the plan it wraps on
    their bits. Every entry point converts, idempotently (SizedPlan passes back in the arguments it converted once)."""

    def __init__(self, inner, positions: tuple[int, ...], results: dict[int, np.dtype]):
        self.inner, self._positions, self._outputs = inner, positions, results

    def __getattr__(self, name):  # traced, executable, kernels, device, runnable
        return getattr(self.inner, name)

    def _bits(self, args):
        return tuple(bits(a) for a in args) if self._positions else args

    @staticmethod
    def _out(out):
        if out is None:
            return None
        return tuple(bits(o) for o in out) if isinstance(out, tuple) else bits(out)

    def _results(self, result, out=None):
        if not self._outputs or result is None:
            return result
        outs = out if isinstance(out, tuple) else (out,) if out is not None else ()
        if isinstance(result, tuple):
            values = [self._one(k, r, outs) for k, r in enumerate(result)]
            return result._make(values) if hasattr(result, "_make") else tuple(values)  # (a named tuple stays one)
        return self._one(0, result, outs)

    def _one(self, k: int, r, outs):
        dtype = self._outputs.get(k)
        if dtype is None:
            return r
        if k < len(outs) and outs[k] is not None:
            return outs[k]  # (written through its bits: the caller's array itself)
        return from_bits(r, dtype)

    def __call__(self, *args, out=None):
        return self.call(args, args, out)

    def run(self, args):
        return self._results(self.inner.run(self._bits(args)))

    def call(self, args, originals, out=None):
        return self._results(self.inner.call(self._bits(args), self._bits(originals), self._out(out)), out)

    def timed(self, args, originals, out=None):
        return self._results(self.inner.timed(self._bits(args), self._bits(originals), self._out(out)), out)

    def _call(self, args, originals, out=None, seed=None):
        result = self.inner._call(self._bits(args), self._bits(originals), self._out(out), seed)
        return self._results(result, out)

    def _with_words(self, args):
        return self.inner._with_words(self._bits(args))

    def __repr__(self) -> str:
        return repr(self.inner)
