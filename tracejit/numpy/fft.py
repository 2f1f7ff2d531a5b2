"""np.fft on traced values: NumPy's functions, dtypes and norm= modes, computed by fft_pairs.py's whole-array
Stockham and Bluestein transforms on the parts of complex values (complex_values.py), so a transform fuses with
the code before and after it and runs on every device. The result dtypes are NumPy's own, asked of NumPy on a
small stand-in (float32 and float16 give complex64, ints and float64 complex128; irfft gives the real dtype of
the same precision); float16 is transformed in float32."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tracejit.errors import UnsupportedError
from tracejit.ir import build
from tracejit.numpy import complex_values as C
from tracejit.numpy import creation, fft_pairs
from tracejit.numpy import functions as F
from tracejit.ir.table import MAX_ELEMENTS
from tracejit.numpy.complex_values import ComplexTensor
from tracejit.numpy.tensor import Tensor, as_node, python_value

# NumPy's function -> (fft_pairs' function, what it takes: "complex" | "real", what it returns: "complex" | "real",
# the 1-D NumPy function whose dtype rule it follows)
_TRANSFORMS: dict[Callable, tuple[Callable, str, str, Callable]] = {
    np.fft.fft: (fft_pairs.fft, "complex", "complex", np.fft.fft),
    np.fft.ifft: (fft_pairs.ifft, "complex", "complex", np.fft.fft),
    np.fft.fft2: (fft_pairs.fft2, "complex", "complex", np.fft.fft),
    np.fft.ifft2: (fft_pairs.ifft2, "complex", "complex", np.fft.fft),
    np.fft.fftn: (fft_pairs.fftn, "complex", "complex", np.fft.fft),
    np.fft.ifftn: (fft_pairs.ifftn, "complex", "complex", np.fft.fft),
    np.fft.rfft: (fft_pairs.rfft, "real", "complex", np.fft.rfft),
    np.fft.rfft2: (fft_pairs.rfft2, "real", "complex", np.fft.rfft),
    np.fft.rfftn: (fft_pairs.rfftn, "real", "complex", np.fft.rfft),
    np.fft.ihfft: (fft_pairs.ihfft, "real", "complex", np.fft.rfft),
    np.fft.irfft: (fft_pairs.irfft, "complex", "real", np.fft.irfft),
    np.fft.irfft2: (fft_pairs.irfft2, "complex", "real", np.fft.irfft),
    np.fft.irfftn: (fft_pairs.irfftn, "complex", "real", np.fft.irfft),
    np.fft.hfft: (fft_pairs.hfft, "complex", "real", np.fft.irfft),
}


def _result_dtype(rule: Callable, dtype: np.dtype) -> np.dtype:
    """NumPy's result dtype of the 1-D `rule` (np.fft.fft, rfft or irfft) for input of `dtype`."""
    return rule(np.ones(4 if rule is not np.fft.irfft else 3, dtype)).dtype


def _transform(name: str, pairs: Callable, takes: str, gives: str, rule: Callable):
    def transform(a, *args, **kwargs):
        kwargs.pop("out", None) if kwargs.get("out") is None else _no_out(name)
        if not isinstance(a, (Tensor, ComplexTensor)):
            a = Tensor(as_node(np.asarray(a))) if not C.is_complex(a) else C.lift(a)
        if takes == "real" and isinstance(a, ComplexTensor):
            raise UnsupportedError(f"np.fft.{name} takes a real array (NumPy refuses complex input); use np.fft.fft")
        out = _result_dtype(rule, a.dtype)
        part = np.dtype(np.float32) if out in (np.complex64, np.float32, np.float16) else np.dtype(np.float64)
        if takes == "real":
            result = pairs(_cast(a, part), *args, **kwargs)
        else:
            z = C.lift(a, C.COMPLEX[part])
            result = pairs(z.re, z.im, *args, **kwargs)
        if gives == "complex":
            return ComplexTensor(*result)
        return result if result.dtype == out else result.astype(out)

    transform.__name__ = name
    transform.__doc__ = f"np.fft.{name} (fft_pairs.py)."
    return transform


def _cast(t: Tensor, part: np.dtype) -> Tensor:
    return t if t.dtype == part else Tensor(build.cast(t._node, part))


def _no_out(name: str):
    raise UnsupportedError(f"np.fft.{name}(..., out=...): assign the result instead (out[...] = np.fft.{name}(x))")


def _shift(pairs_shift: Callable):
    def shift(x, axes=None):
        if isinstance(x, ComplexTensor):
            return ComplexTensor(pairs_shift(x.re, axes), pairs_shift(x.im, axes))
        return pairs_shift(x, axes)

    shift.__name__ = pairs_shift.__name__
    return shift


NUMPY_FUNCTIONS: dict[Callable, Callable] = {
    **{f: _transform(f.__name__, *spec) for f, spec in _TRANSFORMS.items()},
    np.fft.fftshift: _shift(fft_pairs.fftshift),
    np.fft.ifftshift: _shift(fft_pairs.ifftshift),
}


def while_tracing(name: str, original, args: tuple, kwargs: dict):
    """np.fft.fftfreq / rfftfreq called by the kernel function (numpy/allocation.py): NumPy's own where its result is
    small enough to embed as a constant, else NumPy's values (its integers times 1 / (n d)) as an index expression
    (float64, as NumPy's); d may be a traced value."""
    n = kwargs.get("n", args[0] if args else None)
    d = kwargs.get("d", args[1] if len(args) > 1 else 1.0)
    n = python_value(n, f"np.fft.{name}'s n")
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise TypeError(f"n should be an integer (np.fft.{name})")
    n = int(n)
    if n <= MAX_ELEMENTS:  # NumPy's own (a constant: folded into float32 where the code casts it, as on webgpu)
        return original(*args, **kwargs)
    k = creation.arange(n // 2 + 1 if name == "rfftfreq" else n)
    if name == "fftfreq":  # (NumPy's: 0 .. (n-1)//2, then -(n//2) .. -1)
        k = F.where(k < (n - 1) // 2 + 1, k, k - n)
    return k * (1.0 / (n * d))
