"""CUDA's memory: pooled device allocations, uploads and downloads on the device's stream, another library's
arrays taken in place (__cuda_array_interface__), DLPack export, graph capture's copies and shared intermediates."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tracejit.errors import DeviceError
from tracejit.runtime import dlpack
from tracejit.runtime.cuda import driver as cu
from tracejit.runtime.array import Array, own_copy
from tracejit.runtime.sharing import plan_sharing
from tracejit.runtime.views import flat_view


class CUDAMemory:
    """The device's buffers (a role of CUDADevice, which sets these attributes)."""

    name: str
    ordinal: int
    stream: Any  # the driver's CUstream
    stream_handle: int
    pool: cu.Pool
    _make_current: Callable[[], None]

    def allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> cu.DeviceBuffer:
        dtype = np.dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        self._make_current()
        # an empty array still gets memory: a kernel may read an element it then ignores (the load of a
        # loop that runs zero times can be hoisted out of it), and a null pointer would fault
        block = self.pool.allocate(max(nbytes, 1))
        return cu.DeviceBuffer(block.ptr, shape, dtype, block)

    def from_numpy(self, a: np.ndarray) -> cu.DeviceBuffer:
        """Upload a host array (queued; the driver has staged pageable memory when the call returns)."""
        host = np.ascontiguousarray(a).reshape(np.shape(a))  # (ascontiguousarray makes a 0-d array 1-d)
        out = self.allocate(host.shape, host.dtype)
        if out.nbytes:
            cu.check(
                cu.driver().cuMemcpyHtoDAsync(out.ptr, host.ctypes.data, out.nbytes, self.stream), "cuMemcpyHtoDAsync"
            )
        return out

    def upload_span(self, a, desc) -> cu.DeviceBuffer:
        """The memory span the kernel reads of a host argument (strided arrays in place)."""
        return self.from_numpy(np.ascontiguousarray(flat_view(a, desc)))

    def to_numpy(self, data: cu.DeviceBuffer) -> np.ndarray:
        self._make_current()
        lo, nbytes = data.span()
        raw = np.empty(nbytes, np.uint8)
        if nbytes:
            d = cu.driver()
            cu.check(d.cuMemcpyDtoHAsync(raw.ctypes.data, lo, nbytes, self.stream), "cuMemcpyDtoHAsync")
            cu.check(d.cuStreamSynchronize(self.stream), "cuStreamSynchronize")
        if data.contiguous:
            return raw.view(data.dtype).reshape(data.shape)
        start = data.ptr - lo
        view = np.lib.stride_tricks.as_strided(raw[start:].view(data.dtype), data.shape, data.strides)
        return np.array(view)

    def import_foreign(self, obj, what: str = "argument") -> Array:
        """A CUDA array of another library (__cuda_array_interface__) as a tj.Array, without a copy. Work
        queued on the stream the producer names is waited for first."""
        buf = cu.from_interface(obj, what)
        self._make_current()
        d = cu.driver()
        err, ptr_device = (
            d.cuPointerGetAttribute(d.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, buf.ptr)
            if buf.ptr
            else (d.CUresult.CUDA_SUCCESS, self.ordinal)
        )
        if err == d.CUresult.CUDA_SUCCESS and int(ptr_device) != self.ordinal:
            raise DeviceError(
                f"{what} lives on GPU {int(ptr_device)}, and this call runs on {self.name}; "
                f"pass device='cuda:{int(ptr_device)}' or move the array"
            )
        stream = obj.__cuda_array_interface__.get("stream")
        if stream:  # CAI v3: the producer's stream may still be writing it
            self._wait_for(int(stream))
        if not buf.size:  # an empty array may have no memory at all: kernels get a valid address anyway
            return Array(self.allocate(buf.shape, buf.dtype), self)
        return Array(buf, self)

    def _wait_for(self, stream: int) -> None:
        d = cu.driver()
        event = cu.check(d.cuEventCreate(d.CUevent_flags.CU_EVENT_DISABLE_TIMING.value), "cuEventCreate")
        cu.check(d.cuEventRecord(event, stream), "cuEventRecord")
        cu.check(d.cuStreamWaitEvent(self.stream, event, 0), "cuStreamWaitEvent")
        d.cuEventDestroy(event)

    def cuda_array_interface(self, data: cu.DeviceBuffer) -> dict:
        return {
            "shape": data.shape,
            "typestr": data.dtype.str,
            "data": (data.ptr, data.readonly),
            "strides": None if data.contiguous else data.strides,
            "version": 3,
            "stream": self.stream_handle,
        }

    def dlpack(self, data: cu.DeviceBuffer, stream=None, **kwargs):
        """A DLPack capsule; the consumer's `stream` (None: the legacy default stream, -1: none) waits
        for this device's queued work first."""
        self._make_current()
        if stream != -1:
            consumer = 1 if stream is None else int(stream)
            event_stream = self.stream
            d = cu.driver()
            event = cu.check(d.cuEventCreate(d.CUevent_flags.CU_EVENT_DISABLE_TIMING.value), "cuEventCreate")
            cu.check(d.cuEventRecord(event, event_stream), "cuEventRecord")
            cu.check(d.cuStreamWaitEvent(consumer, event, 0), "cuStreamWaitEvent")
            d.cuEventDestroy(event)
        return dlpack.export(data.ptr, data.shape, data.strides, data.dtype, dlpack.CUDA, self.ordinal, data)

    def dlpack_device(self, data) -> tuple[int, int]:
        return (dlpack.CUDA, self.ordinal)

    def memory_stats(self) -> dict[str, int]:
        """The caching allocator: blocks in use, blocks held for reuse, bytes managed."""
        return self.pool.stats()

    # -- graph capture --
    def clone(self, data: cu.DeviceBuffer) -> cu.DeviceBuffer:
        out = self.allocate(data.shape, data.dtype)
        if out.nbytes:
            if not data.contiguous:
                return self.from_numpy(self.to_numpy(data))
            cu.check(cu.driver().cuMemcpyDtoDAsync(out.ptr, data.ptr, out.nbytes, self.stream), "cuMemcpyDtoDAsync")
        return out

    def own(self, a) -> Array:
        """A graph's own copy of an input, on this GPU."""
        return own_copy(self, a)

    def feed(self, owned: Array, a) -> None:
        dst = owned._data
        if not dst.nbytes:
            return
        d = cu.driver()
        self._make_current()
        if type(a) is Array and a.device is self and a._data.contiguous:
            cu.check(d.cuMemcpyDtoDAsync(dst.ptr, a._data.ptr, dst.nbytes, self.stream), "cuMemcpyDtoDAsync")
        else:
            host = np.ascontiguousarray(a.numpy() if type(a) is Array else a, dtype=dst.dtype)
            cu.check(d.cuMemcpyHtoDAsync(dst.ptr, host.ctypes.data, dst.nbytes, self.stream), "cuMemcpyHtoDAsync")

    def memory_of(self, value) -> int:
        """The allocation behind a tj.Array or a DeviceBuffer of this device."""
        data = value._data if type(value) is Array else value
        return id(data.owner)

    def share_memory(self, launches, scratch: set[int]):
        """Intermediates whose lifetimes do not overlap share pooled blocks (see plan_sharing)."""
        uses = [[(pos, buf.owner, buf.nbytes) for pos, buf in launch.buffers.items()] for launch in launches]
        assignment, nbytes = plan_sharing(uses, scratch, lambda n: self.pool.allocate(n))
        for launch, used in zip(launches, uses):
            for pos, owner, _ in used:
                block = assignment.get(id(owner))
                if block is not None:
                    launch.set_pointer(pos, block.ptr, block)
        return launches, nbytes
