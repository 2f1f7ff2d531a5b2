"""The Python array API standard's namespace for tj.Arrays: `xp = tracejit.array_api` (or `x.__array_namespace__()`),
so that libraries written for the standard (SciPy's and scikit-learn's array-API modes, array-api-compat users)
compute on a tracejit device.

Each function is NumPy 2's function of that name (NumPy's main namespace follows the standard) run as a small
kernel on the arrays' device (frontend/eager.py). Creation functions take device= (a name, a tracejit device, or
an array's .device); what they fill is made on the host and copied to the device once. Data-dependent sizes
(nonzero, unique_*) read a count back from the device, as in any kernel.
"""

from __future__ import annotations

import builtins
import functools
import sys
from collections.abc import Callable

import numpy as np

from tracejit.frontend.eager import OPERATIONS
from tracejit.runtime import registry
from tracejit.runtime import array as array_module
from tracejit.runtime.array import Array

__array_api_version__ = "2023.12"
VERSIONS = ("2021.12", "2022.12", "2023.12")

# the data types: NumPy's scalar types, as NumPy's own namespace gives them
bool = np.bool_  # noqa: A001  (the standard's name)
int8, int16, int32, int64 = np.int8, np.int16, np.int32, np.int64
uint8, uint16, uint32, uint64 = np.uint8, np.uint16, np.uint32, np.uint64
float32, float64 = np.float32, np.float64
complex64, complex128 = np.complex64, np.complex128
from numpy import e, inf, nan, pi  # noqa: E402,F401  (the standard's constants)

newaxis = None


def namespace(api_version: str | None = None):
    if api_version is not None and api_version not in VERSIONS:
        raise ValueError(
            f"tracejit.array_api implements the array API standard {', '.join(VERSIONS)}; not {api_version}"
        )
    return sys.modules[__name__]


def _device(device):
    if device is None:
        return registry.device(registry.default_device_name())
    return registry.device(device) if isinstance(device, str) else device


def _computed(func: Callable) -> Callable:
    @functools.wraps(func)
    def call(*args, **kwargs):
        return OPERATIONS.function(func, args, kwargs)

    return call


_WIDE = {np.dtype(np.float64): np.float32, np.dtype(np.int64): np.int32, np.dtype(np.complex128): np.complex64}


def _on(dev, host: np.ndarray, dtype_given: builtins.bool) -> Array:
    """host on dev; without a dtype asked for, NumPy's 64-bit defaults become 32-bit on a device without them
    (webgpu), as the standard's default dtypes are per device."""
    if not dtype_given and host.dtype in _WIDE and host.dtype.name not in dev.info.dtypes:
        host = host.astype(_WIDE[host.dtype])
    return Array(dev.from_numpy(host if host.flags.c_contiguous else np.ascontiguousarray(host)), dev)


def _created(func: Callable) -> Callable:
    @functools.wraps(func)
    def call(*args, device=None, **kwargs):
        return _on(_device(device), np.asarray(func(*args, **kwargs)), kwargs.get("dtype") is not None)

    return call


def asarray(obj, /, *, dtype=None, device=None, copy=None) -> Array:
    """obj as a tj.Array on `device` (obj's own device for a tj.Array, else the default one)."""
    if type(obj) is Array:
        dev = obj.device if device is None else _device(device)
        if copy is False and (dev is not obj.device or (dtype is not None and np.dtype(dtype) != obj.dtype)):
            raise ValueError("asarray(copy=False): the array would have to be copied (another device or dtype)")
        if dev is not obj.device:
            obj = obj.to_device(dev)
        elif copy:
            obj = OPERATIONS.apply(np.copy, (obj,), {})
        return obj if dtype is None or np.dtype(dtype) == obj.dtype else astype(obj, dtype)
    if copy is False and not isinstance(obj, np.ndarray):
        raise ValueError("asarray(copy=False): a tj.Array made from this object is a copy")
    return _on(_device(device), np.asarray(obj, dtype=dtype), dtype is not None)


def astype(x, dtype, /, *, copy: builtins.bool = True, device=None) -> Array:
    if device is not None:
        x = x.to_device(_device(device))
    if not copy and np.dtype(dtype) == x.dtype:
        return x
    return OPERATIONS.apply(np.astype, (x, dtype), {})


def from_dlpack(x, /, *, device=None, copy=None) -> Array:
    return asarray(np.from_dlpack(x), device=device, copy=copy)


def empty_like(x, /, *, dtype=None, device=None) -> Array:
    return zeros_like(x, dtype=dtype, device=device)


def zeros_like(x, /, *, dtype=None, device=None) -> Array:
    return full_like(x, 0, dtype=dtype, device=device)


def ones_like(x, /, *, dtype=None, device=None) -> Array:
    return full_like(x, 1, dtype=dtype, device=device)


def full_like(x, /, fill_value, *, dtype=None, device=None) -> Array:
    dev = x.device if device is None and type(x) is Array else _device(device)
    return full(x.shape, fill_value, dtype=dtype or x.dtype, device=dev)


def sort(x, /, *, axis: int = -1, descending: builtins.bool = False, stable: builtins.bool = True) -> Array:
    out = OPERATIONS.apply(np.sort, (x,), {"axis": axis, "stable": stable or None})
    return OPERATIONS.apply(np.flip, (out,), {"axis": axis}) if descending else out


def argsort(x, /, *, axis: int = -1, descending: builtins.bool = False, stable: builtins.bool = True) -> Array:
    if not descending:
        return OPERATIONS.apply(np.argsort, (x,), {"axis": axis, "stable": stable or None})
    return OPERATIONS.apply(_descending_order, (x, axis), {})


def _descending_order(x, axis):
    """The order that sorts x largest first, ties in their first-come order (stable), as the standard asks: the
    stable ascending order of x reversed, read from the reversed array's positions."""
    n = x.shape[axis]
    return n - 1 - np.flip(np.argsort(np.flip(x, axis=axis), axis=axis, stable=True), axis=axis)


def clip(x, /, min=None, max=None) -> Array:  # noqa: A002  (the standard's names)
    return OPERATIONS.apply(np.clip, (x, min, max), {})


def meshgrid(*arrays, indexing: str = "xy") -> list:
    return list(OPERATIONS.apply(np.meshgrid, arrays, {"indexing": indexing}))


def broadcast_arrays(*arrays) -> list:
    return list(OPERATIONS.apply(np.broadcast_arrays, arrays, {}))


empty = _created(np.empty)
zeros = _created(np.zeros)
ones = _created(np.ones)
full = _created(np.full)
arange = _created(np.arange)
linspace = _created(np.linspace)
eye = _created(np.eye)
isdtype = np.isdtype


class finfo:  # noqa: N801  (the standard's name)
    """The standard's finfo: NumPy's, its numbers as Python floats, of a dtype or an array's."""

    def __init__(self, type, /) -> None:  # noqa: A002
        info = np.finfo(type.dtype if isinstance(type, (Array, np.ndarray)) else type)
        self.bits, self.dtype = int(info.bits), info.dtype
        self.eps, self.max, self.min = float(info.eps), float(info.max), float(info.min)
        self.smallest_normal = float(info.smallest_normal)


def iinfo(type, /):  # noqa: A002
    return np.iinfo(type.dtype if isinstance(type, (Array, np.ndarray)) else type)


# computed on the arrays' device
_COMPUTED = (
    "abs acos acosh add all any argmax argmin asin asinh atan atan2 atanh bitwise_and bitwise_invert "
    "bitwise_left_shift bitwise_or bitwise_right_shift bitwise_xor broadcast_to can_cast ceil "
    "concat conj copysign cos cosh count_nonzero cumulative_prod cumulative_sum diff divide equal exp expand_dims "
    "expm1 flip floor floor_divide greater greater_equal hypot imag isfinite isinf isnan less less_equal log log1p "
    "log2 log10 "
    "logaddexp logical_and logical_not logical_or logical_xor matmul matrix_transpose max maximum mean min "
    "minimum moveaxis multiply negative nextafter nonzero not_equal permute_dims positive pow prod real reciprocal "
    "remainder repeat reshape result_type roll round searchsorted sign signbit sin sinh sqrt square squeeze stack "
    "std subtract sum take take_along_axis tan tanh tensordot tile tril triu trunc unique_all unique_counts "
    "unique_inverse unique_values unstack var vecdot where"
).split()
for _name in _COMPUTED:
    if hasattr(np, _name):
        globals()[_name] = _computed(getattr(np, _name))


class _Extension:
    """An extension's namespace (linalg, fft): NumPy's functions of those names, computed on the device."""

    fftfreq: Callable
    rfftfreq: Callable

    def __init__(self, module, names: str) -> None:
        for name in names.split():
            if hasattr(module, name):
                setattr(self, name, _computed(getattr(module, name)))


def _frequencies(func):
    def frequencies(n: int, /, *, d: float = 1.0, dtype=None, device=None) -> Array:
        host = func(n, d)
        return _on(_device(device), host if dtype is None else host.astype(dtype), dtype is not None)

    frequencies.__name__ = func.__name__
    return frequencies


linalg = _Extension(
    np.linalg,
    "cholesky cross det diagonal eigh eigvalsh inv matmul matrix_norm matrix_power matrix_rank matrix_transpose "
    "outer pinv qr slogdet solve svd svdvals tensordot trace vecdot vector_norm",
)
fft = _Extension(np.fft, "fft ifft fftn ifftn rfft irfft rfftn irfftn hfft ihfft fftshift ifftshift")
fft.fftfreq, fft.rfftfreq = _frequencies(np.fft.fftfreq), _frequencies(np.fft.rfftfreq)


class _Info:
    """__array_namespace_info__(): what this namespace offers."""

    def capabilities(self) -> dict:
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self):
        return _device(None)

    def default_dtypes(self, *, device=None) -> dict:
        kinds = {"real floating": np.float64, "complex floating": np.complex128, "integral": np.int64}
        have = _device(device).info.dtypes
        out = {k: np.dtype(t if np.dtype(t).name in have else _WIDE[np.dtype(t)]) for k, t in kinds.items()}
        return {**out, "indexing": out["integral"]}

    def devices(self) -> list:
        return [registry.device(d.name) for d in registry.devices() if d.available]

    def dtypes(self, *, device=None, kind=None) -> dict:
        """The standard's dtypes the device computes (webgpu: no 64-bit types and no complex; nowhere uint64)."""
        dev = _device(device)
        have = set(dev.info.dtypes)
        if dev.name != "webgpu":
            have |= {f"complex{2 * int(t[5:])}" for t in have if t in ("float32", "float64")}
        every = np.__array_namespace_info__().dtypes(kind=kind)
        return {name: t for name, t in every.items() if name in have}


def __array_namespace_info__() -> _Info:
    return _Info()


array_module.NAMESPACE = sys.modules[__name__]
