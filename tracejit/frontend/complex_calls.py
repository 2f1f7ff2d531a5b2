"""Complex arguments and results of a kernel call (numpy/complex_values.py says why the trace sees complex arrays as
their parts). A complex array argument is passed to the plan as its memory viewed as the part dtype with a trailing
axis of 2, without a copy, so the kernel's writes into it reach the caller's array; a Python complex as a 2-element
float64 array (weak in the trace, as NEP 50 has Python scalars); a complex result comes back as such an array and
is viewed as complex again (a tj.Array of a device keeps its parts' buffer: runtime/array.py ComplexParts)."""

from __future__ import annotations

import contextvars

import numpy as np

from tracejit.errors import DtypeError
from tracejit.frontend.converting_plan import ConvertingPlan
from tracejit.runtime.array import Array, ComplexParts

# the dtype a Python complex argument's parts are passed in while a plan is lowered for a device: float64, or
# float32 where the device has no float64 (webgpu, metal: a weak Python complex with complex64 values is rounded
# to complex64 by NumPy too); None outside a lowering (f.trace): float64
SCALAR_PARTS: contextvars.ContextVar[np.dtype | None] = contextvars.ContextVar("tracejit_scalar_parts", default=None)

PART: dict[np.dtype, np.dtype] = {
    np.dtype(np.complex64): np.dtype(np.float32),
    np.dtype(np.complex128): np.dtype(np.float64),
}


def has_complex(args) -> bool:
    return any(_is_complex_argument(a) for a in args)


def _is_complex_argument(a) -> bool:
    t = type(a)
    if t is np.ndarray:
        return a.dtype.kind == "c"
    if t is complex:
        return True
    return t is Array and type(a._data) is ComplexParts


def check_device(kernel, args, device) -> None:
    """DtypeError naming the argument, before any tracing, for a complex128 argument (float64 parts) on a device
    without float64 (webgpu, metal)."""
    for i, a in enumerate(args):
        t = type(a)
        if not ((t is np.ndarray or t is Array) and a.dtype == np.complex128):
            continue
        if device.computes_float64:
            return
        names = kernel._names
        which = names[i] if i < len(names) else f"argument {i}"
        raise DtypeError(
            f"{kernel.__name__}: its argument {which} is complex128; float64 is not supported on {device.name}: "
            "pass complex64 (x.astype(np.complex64))"
        )


def scalar_parts(device) -> np.dtype:
    """The dtype of a Python complex argument's parts on `device` (SCALAR_PARTS)."""
    return np.dtype(np.float64 if device.computes_float64 else np.float32)


def parts_view(a: np.ndarray) -> np.ndarray:
    """A complex ndarray's memory as its part dtype, shape + (2,): [..., 0] the real parts, [..., 1] the imaginary."""
    return a[..., None].view(PART[a.dtype])


_FLOAT64 = np.dtype(np.float64)


def real_form(a, scalar: np.dtype = _FLOAT64):
    """A complex argument as the plan takes it (a Python complex as parts of `scalar`); anything else as it is (so
    converting twice changes nothing)."""
    t = type(a)
    if t is np.ndarray:
        return parts_view(a) if a.dtype.kind == "c" else a
    if t is complex:
        return np.array((a.real, a.imag), scalar)
    if t is Array and type(a._data) is ComplexParts:
        return Array(a._data.parts, a.device)
    return a


def complex_form(r, dtype: np.dtype):
    """A result computed as parts (shape + (2,)) as the complex array it is."""
    if type(r) is np.ndarray:
        if r.strides[-1] == r.itemsize:
            try:
                return r.view(dtype)[..., 0]
            except ValueError:  # (the other axes' strides are no multiple of the complex item: copied below)
                pass
        out = np.empty(r.shape[:-1], dtype)
        out.real, out.imag = r[..., 0], r[..., 1]
        return out
    if type(r) is Array:
        return Array(ComplexParts(r._data, dtype), r.device)
    raise TypeError(f"a complex result of type {type(r).__name__}")


class ComplexPlan(ConvertingPlan):
    """A plan of a call with complex arguments or results: the plan it wraps runs on their real form (their parts)."""

    def __init__(self, inner, positions: tuple[int, ...], outputs: dict[int, np.dtype]):
        super().__init__(inner, positions, outputs)
        self._scalar = scalar_parts(inner.device)

    def argument(self, a):
        return real_form(a, self._scalar)

    def result(self, r, dtype: np.dtype):
        return complex_form(r, dtype)
