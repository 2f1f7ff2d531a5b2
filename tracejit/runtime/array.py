"""tj.Array: a device-resident array; on the numba device its memory is a NumPy array."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from tracejit.runtime import dlpack

# what computes on tj.Arrays: frontend/eager.py's Operations, set when tracejit is imported (the runtime layer
# cannot import the frontend)
EAGER: Any = None
NAMESPACE: Any = None  # the module tracejit.array_api, which sets it when imported (with tracejit)


class Array(NDArrayOperatorsMixin):
    """An array living on a tracejit device. Results stay on their device between kernel calls.

    It computes as a NumPy array does, on its device: operators (NumPy's ufuncs), indexing and assignment, the
    methods below, and NumPy's functions called on it (np.sum(a), np.concatenate([a, b])) each run as a small
    kernel there (frontend/eager.py), and their results are tj.Arrays on the same device. Nothing copies it to
    the host but np.asarray(a) and a.numpy() (and a NumPy function tracejit does not compile, which falls back
    with a tj.FallbackWarning as in any kernel). Indexing gives a view on the numba device, whose memory is a
    NumPy array, and a copy elsewhere (device buffers are contiguous); assignment writes in place everywhere.
    """

    __slots__ = ("_data", "device")

    def __init__(self, data, device):
        self._data = data
        self.device = device

    @property
    def shape(self) -> tuple[int, ...]:
        return self._data.shape

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def size(self) -> int:
        return self._data.size

    def numpy(self) -> np.ndarray:
        """A host NumPy array with the contents (a copy for device memory)."""
        data = self._data
        if type(data) is ComplexParts:
            return data.host(self.device.to_numpy(data.parts))
        return self.device.to_numpy(data)

    def __array__(self, dtype=None, copy=None):
        if copy is False and not isinstance(self._data, np.ndarray):
            raise ValueError(
                f"a tj.Array on {self.device.name} is in device memory: np.asarray(copy=False) cannot share it"
            )
        out = self.numpy()
        if copy and out is self._data:
            out = out.copy()
        return out if dtype is None else out.astype(dtype, copy=False)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """DLPack: in place on the numba device (host memory) and a cuda device; a copy on the host elsewhere
        (OpenCL, WebGPU and Metal memory have no DLPack device type NumPy or torch accept; copy=False refuses)."""
        if type(self._data) is ComplexParts:
            if self.device.dlpack_device(self._data.parts)[0] != dlpack.CPU:
                raise BufferError(f"a complex tj.Array on {self.device.name} has no DLPack export yet; use .numpy()")
            return dlpack.through_host(self.device.name, self.numpy(), stream, max_version, dl_device, copy)
        kwargs = {"stream": stream, "max_version": max_version, "dl_device": dl_device, "copy": copy}
        return self.device.dlpack(self._data, **{k: v for k, v in kwargs.items() if v is not None})

    def __dlpack_device__(self):
        return self.device.dlpack_device(self._data.parts if type(self._data) is ComplexParts else self._data)

    @property
    def __cuda_array_interface__(self) -> dict:
        """The CUDA Array Interface (v3) of an array on a cuda device: CuPy, PyTorch and Numba read it in
        place. Other devices have none (hasattr is False)."""
        get = getattr(self.device, "cuda_array_interface", None)
        if get is None:
            raise AttributeError(
                f"a tj.Array on {self.device.name} has no __cuda_array_interface__ (only arrays on a cuda device do)"
            )
        return get(self._data)

    def __len__(self) -> int:
        return len(self._data)

    # -- computing with it: frontend/eager.py --
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return EAGER.ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return EAGER.function(func, args, kwargs)

    def __array_namespace__(self, *, api_version: str | None = None):
        """The Python array API standard's namespace for tj.Arrays (tracejit.array_api)."""
        return NAMESPACE.namespace(api_version)

    def __getitem__(self, key):
        return EAGER.getitem(self, key)

    def __setitem__(self, key, value) -> None:
        EAGER.assign(self, key, value)

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def _scalar(self):
        if self.size != 1:
            raise TypeError(
                f"only an array of one element converts to a Python number; this one has shape {self.shape}"
            )
        return self.numpy().reshape(()).item()

    def __bool__(self) -> bool:
        return bool(self._scalar())

    def __float__(self) -> float:
        return float(self._scalar())

    def __int__(self) -> int:
        return int(self._scalar())

    def __complex__(self) -> complex:
        return complex(self._scalar())

    def __index__(self) -> int:
        if self.dtype.kind not in "iub":
            raise TypeError(f"only an integer array can be an index; this one is {self.dtype}")
        return int(self._scalar())

    def item(self):
        """The one element as a Python number (copied from the device)."""
        return self._scalar()

    def tolist(self):
        return self.numpy().tolist()

    @property
    def T(self) -> Array:
        return EAGER.method(self, "transpose", (), {})

    @property
    def mT(self) -> Array:
        return EAGER.apply(np.matrix_transpose, (self,), {})

    @property
    def real(self) -> Array:
        return EAGER.apply(np.real, (self,), {})

    @property
    def imag(self) -> Array:
        return EAGER.apply(np.imag, (self,), {})

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    def to_device(self, device, /, *, stream=None) -> Array:
        """This array on another device (the array API's spelling): a copy, or itself on its own device."""
        from tracejit.runtime import registry

        dev = device if not isinstance(device, str) else registry.device(device)
        if dev is self.device:
            return self
        return Array(dev.from_numpy(self.numpy()), dev)

    def __reduce__(self):
        # pickled (sent to a worker process) as its data, copied to the host, and its device's name
        return _from_host, (self.numpy(), self.device.name)

    def __repr__(self) -> str:
        return f"tj.Array({self.numpy()!r}, device={self.device.name!r})"


def _method(name: str):
    def method(self, *args, **kwargs):
        return EAGER.method(self, name, args, kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"NumPy's ndarray.{name}, computed on the array's device (a tj.Array)."
    return method


for _name in (
    "all any argmax argmin argsort astype clip conj conjugate copy cumprod cumsum diagonal dot flatten max mean min "
    "nonzero prod ravel repeat reshape round sort squeeze std sum swapaxes take trace transpose var"
).split():
    setattr(Array, _name, _method(_name))


class Shaped:
    """ndim and len() from a `shape` attribute, as NumPy's: a device's arrays (device_memory.Buffer), a complex
    array's parts (ComplexParts)."""

    __slots__ = ()
    shape: tuple[int, ...]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]


class ComplexParts(Shaped):
    """A complex array on a device that keeps it as its parts (frontend/complex_calls.py): `parts`, the device's
    array of the part dtype with a trailing axis of 2 (real, imaginary), the same bytes as NumPy's complex array."""

    __slots__ = ("parts", "shape", "dtype", "size", "strides")

    def __init__(self, parts, dtype):
        self.parts, self.dtype = parts, np.dtype(dtype)
        self.shape = tuple(parts.shape[:-1])
        self.size = parts.size // 2
        self.strides = tuple(parts.strides[:-1])

    def host(self, parts: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(parts).view(self.dtype)[..., 0]


def own_copy(device, a) -> Array:
    """A copy of `a` (a host array, or a tj.Array of any device) that `device` owns: what a captured
    graph keeps of its inputs on a device with its own memory."""
    if type(a) is Array and a.device is device and type(a._data) is not ComplexParts:
        return Array(device.clone(a._data), device)
    return Array(device.from_numpy(a.numpy() if type(a) is Array else np.asarray(a)), device)


def _from_host(data: np.ndarray, device: str) -> Array:
    """A pickled tj.Array made again on the device of that name in this process."""
    from tracejit.runtime import registry

    dev = registry.device(device)
    return Array(dev.from_numpy(data), dev)
