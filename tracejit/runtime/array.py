"""tj.Array: a device-resident array; on the numba device its memory is a NumPy array."""

from __future__ import annotations

import numpy as np


class Array:
    """An array living on a tracejit device. Results stay on their device between kernel calls."""

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
        out = self.numpy()
        return out if dtype is None else out.astype(dtype, copy=False)

    def __dlpack__(self, *args, **kwargs):
        if type(self._data) is ComplexParts:
            raise BufferError("a complex tj.Array has no DLPack export yet; use .numpy()")
        return self.device.dlpack(self._data, *args, **kwargs)

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

    def __reduce__(self):
        # pickled (sent to a worker process) as its data, copied to the host, and its device's name
        return _from_host, (self.numpy(), self.device.name)

    def __repr__(self) -> str:
        return f"tj.Array({self.numpy()!r}, device={self.device.name!r})"


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
