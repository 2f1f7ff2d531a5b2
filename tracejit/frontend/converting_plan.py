"""A plan whose call passes some values in another form than the caller's: complex values as their parts
(complex_calls.py), bfloat16 and float8 values as their bits (narrow_float_calls.py). The plan it wraps runs on that
form; the results computed in it come back as the caller's type."""

from __future__ import annotations

import abc

import numpy as np


class ConvertingPlan(abc.ABC):
    """A plan (a Plan, or a SizedPlan's) run on another form of some arguments and results: a subclass says how an
    argument goes in (`argument`) and how a result computed in that form comes back (`result`). Every entry point
    converts, idempotently (SizedPlan passes back in the arguments it converted once)."""

    def __init__(self, inner, positions: tuple[int, ...], outputs: dict[int, np.dtype]):
        self.inner, self._positions, self._outputs = inner, positions, outputs

    def __getattr__(self, name):  # traced, executable, kernels, device, runnable
        return getattr(self.inner, name)

    @abc.abstractmethod
    def argument(self, a):
        """An argument (or an out= array) as the wrapped plan takes it; anything else as it is."""
        ...

    @abc.abstractmethod
    def result(self, r, dtype: np.dtype):
        """A result the wrapped plan computed in the other form, as the `dtype` array it is."""
        ...

    def _in(self, args):
        return tuple(self.argument(a) for a in args) if self._positions else args

    def _out(self, out):
        if out is None:
            return None
        return tuple(self.argument(o) for o in out) if isinstance(out, tuple) else self.argument(out)

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
            return outs[k]  # (written through its other form: the caller's array itself)
        return self.result(r, dtype)

    def __call__(self, *args, out=None):
        return self.call(args, args, out)

    def run(self, args):
        return self._results(self.inner.run(self._in(args)))

    def call(self, args, originals, out=None):
        return self._results(self.inner.call(self._in(args), self._in(originals), self._out(out)), out)

    def timed(self, args, originals, out=None):
        return self._results(self.inner.timed(self._in(args), self._in(originals), self._out(out)), out)

    def _call(self, args, originals, out=None, seed=None):
        return self._results(self.inner._call(self._in(args), self._in(originals), self._out(out), seed), out)

    def _with_words(self, args):
        return self.inner._with_words(self._in(args))

    def __repr__(self) -> str:
        return repr(self.inner)
