"""The CUDA driver API (cuda.bindings.driver) as tracejit uses it: initialisation that reports why it
failed instead of raising, error checking, and device memory with a caching allocator."""

from __future__ import annotations

import functools
import math

import numpy as np

from tracejit.errors import DeviceError, OutOfMemoryError
from tracejit.runtime import emulator
from tracejit.runtime.device_memory import FreeLists, contiguous_strides

INSTALL_HINT = "pip install 'tracejit[cuda]' (cuda-python, nvidia-cuda-nvrtc 13.0, nvidia-cuda-runtime headers)"
GRANULE = 512  # allocations are rounded up to this many bytes, so blocks are reusable
LARGE = 1 << 20  # above this, to a multiple of LARGE_GRANULE
LARGE_GRANULE = 1 << 20


def driver():
    """cuda.bindings.driver, or the CPU emulator's driver under TRACEJIT_EMULATE=cuda."""
    if emulator.emulates("cuda"):
        from tracejit.runtime.emulator import cuda_driver as emulated

        return emulated.driver()
    from cuda.bindings import driver as d

    return d


@functools.cache
def initialise() -> tuple[bool, str | None]:
    """(True, None) when the driver works and sees a GPU, else (False, why). Never raises: a machine
    without a driver must still import tracejit and list its devices."""
    if emulator.problem():
        return False, emulator.problem()
    if emulator.emulates("cuda"):
        from tracejit.runtime.emulator import build

        reason = build.unavailable_reason()
        return reason is None, reason
    try:
        d = driver()
    except ImportError as e:
        return False, f"cuda-python is not importable ({e}); {INSTALL_HINT}"
    try:
        (err,) = d.cuInit(0)
    except Exception as e:  # no libcuda.so: cuda-pathfinder raises while loading it
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return False, f"no NVIDIA driver (libcuda.so) could be loaded: {first}"
    if err != d.CUresult.CUDA_SUCCESS:
        return False, f"the CUDA driver did not initialise: {error_text(err)}"
    err, count = d.cuDeviceGetCount()
    if err != d.CUresult.CUDA_SUCCESS or count == 0:
        return False, "the CUDA driver sees no GPU" + (f" ({error_text(err)})" if err else "")
    return True, None


def error_text(err) -> str:
    d = driver()
    try:
        _, text = d.cuGetErrorString(err)
        text = text.decode() if isinstance(text, bytes) else str(text)
    except Exception:
        text = ""
    name = getattr(err, "name", str(err))
    return f"{name}: {text}" if text else name


def check(result, what: str):
    """Unpack a driver call's (err, *values); a failure becomes a DeviceError naming the call."""
    err, *values = result
    if err != driver().CUresult.CUDA_SUCCESS:
        raise DeviceError(f"CUDA {what} failed: {error_text(err)}")
    return values[0] if len(values) == 1 else tuple(values) if values else None


def rounded(nbytes: int) -> int:
    step = GRANULE if nbytes <= LARGE else LARGE_GRANULE
    return max(step, -(-nbytes // step) * step)


class Block:
    """A block of device memory from the pool; back to the pool when nothing refers to it."""

    __slots__ = ("ptr", "nbytes", "pool", "__weakref__")

    def __init__(self, ptr: int, nbytes: int, pool: Pool):
        self.ptr, self.nbytes, self.pool = ptr, nbytes, pool

    def __del__(self):
        try:
            self.pool.release(self.ptr, self.nbytes)
        except Exception:  # interpreter shutdown: the driver frees the context's memory anyway
            pass


class Pool(FreeLists):
    """A caching allocator: freed blocks are kept by rounded size and handed out again. All work of a
    device is on its one stream, so a block freed after a queued kernel is reused only by work queued
    after it."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name

    def allocate(self, nbytes: int) -> Block:
        size = rounded(nbytes)
        self.admit(size, self.name)  # a kept block reused counts against the limit too
        ptr = self._take(size)
        if ptr is None:
            ptr = self._fresh(size)
        self._active(size)
        return Block(ptr, size, self)

    def _fresh(self, size: int) -> int:
        d = driver()
        err, ptr = d.cuMemAlloc(size)
        if err == d.CUresult.CUDA_ERROR_OUT_OF_MEMORY and self.held_blocks:
            self.free_held()  # blocks held for reuse may be what is in the way
            err, ptr = d.cuMemAlloc(size)
        if err != d.CUresult.CUDA_SUCCESS:
            raise OutOfMemoryError(
                f"{self.name} could not allocate {size} bytes ({error_text(err)}); "
                "free device arrays you no longer need"
            )
        return int(ptr)

    def release(self, ptr: int, size: int) -> None:
        self._keep(size, ptr)

    def free_held(self) -> None:
        d = driver()
        for blocks in self._drop().values():
            for ptr in blocks:
                d.cuMemFree(ptr)

    drop_held = free_held


class DeviceBuffer:
    """An array in CUDA device memory: a pool block of tracejit's own (C-contiguous), or a view of
    another library's memory (any strides, in bytes), kept alive through `owner`."""

    __slots__ = ("ptr", "shape", "dtype", "strides", "size", "owner", "readonly")

    def __init__(self, ptr: int, shape: tuple[int, ...], dtype: np.dtype, owner, strides=None, readonly=False):
        self.ptr, self.shape, self.dtype, self.owner, self.readonly = (
            ptr,
            tuple(shape),
            np.dtype(dtype),
            owner,
            readonly,
        )
        self.size = math.prod(self.shape)
        self.strides = tuple(strides) if strides is not None else contiguous_strides(self.shape, self.dtype.itemsize)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def contiguous(self) -> bool:
        return self.strides == contiguous_strides(self.shape, self.dtype.itemsize) or self.size <= 1

    def lowest(self) -> int:
        """The lowest address of the elements: ptr, less what negative strides reach below it."""
        return self.ptr + sum((n - 1) * s for n, s in zip(self.shape, self.strides) if s < 0) if self.size else self.ptr

    def span(self) -> tuple[int, int]:
        """(lowest address, bytes) of the memory the elements occupy."""
        if self.size == 0:
            return self.ptr, 0
        lo = sum(min(0, (n - 1) * s) for n, s in zip(self.shape, self.strides))
        hi = sum(max(0, (n - 1) * s) for n, s in zip(self.shape, self.strides)) + self.dtype.itemsize
        return self.ptr + lo, hi - lo

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]


def from_interface(obj, what: str = "argument") -> DeviceBuffer:
    """A view (no copy) of an object exposing __cuda_array_interface__ (CuPy, PyTorch, Numba...)."""
    cai = obj.__cuda_array_interface__
    try:
        dtype = np.dtype(cai["typestr"])
        shape = tuple(int(n) for n in cai["shape"])
        ptr, readonly = cai["data"]
    except (KeyError, TypeError, ValueError) as e:
        raise DeviceError(f"{what}: its __cuda_array_interface__ is malformed ({e})") from None
    if not dtype.isnative:
        raise DeviceError(f"{what}: device arrays in non-native byte order ({cai['typestr']}) are not supported")
    if cai.get("mask") is not None:
        raise DeviceError(f"{what}: masked device arrays are not supported")
    strides = cai.get("strides")
    if strides is not None and any(s % dtype.itemsize for s in strides):
        raise DeviceError(f"{what} has strides {tuple(strides)} that are not a multiple of its item size")
    return DeviceBuffer(int(ptr or 0), shape, dtype, obj, strides, bool(readonly))
