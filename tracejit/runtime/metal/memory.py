"""Metal's memory: pooled buffers in shared storage mode (the host reads and writes them once the work using
them is done), uploads and downloads, graph capture's copies and shared intermediates."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tracejit.errors import OutOfMemoryError
from tracejit.runtime.array import Array, own_copy
from tracejit.runtime.device_memory import Block, BlockPool, Buffer
from tracejit.runtime.sharing import plan_sharing
from tracejit.runtime.views import flat_view
from tracejit.runtime import dlpack


class DeviceBuffer(Buffer):
    """An array in a pooled Metal buffer (`block`)."""

    __slots__ = ("block",)

    def __init__(self, block: Block, shape, dtype):
        super().__init__(shape, dtype)
        self.block = block


class MetalMemory:
    """The device's buffers (a role of MetalDevice, which sets these attributes and _wait())."""

    name: str
    Metal: Any  # PyObjC's Metal module, or the emulator's
    mtl: Any  # the MTLDevice
    pool: BlockPool
    _completed: int
    _wait: Callable[[], None]

    def _new_buffer(self, nbytes: int):
        buffer = self.mtl.newBufferWithLength_options_(nbytes, self.Metal.MTLResourceStorageModeShared)
        if buffer is None:
            self.pool.drop_held()  # buffers held for reuse may be what is in the way
            buffer = self.mtl.newBufferWithLength_options_(nbytes, self.Metal.MTLResourceStorageModeShared)
        if buffer is None:
            raise OutOfMemoryError(f"metal could not allocate {nbytes} bytes; free device arrays you no longer need")
        return buffer

    @staticmethod
    def _memory(block, nbytes: int) -> np.ndarray:
        """The block's shared memory as bytes NumPy can read and write."""
        return np.frombuffer(block.buffer.contents().as_buffer(block.nbytes), np.uint8, count=nbytes)

    def allocate(self, shape, dtype) -> DeviceBuffer:
        dtype = np.dtype(dtype)
        return DeviceBuffer(self.pool.allocate(max(math.prod(shape) * dtype.itemsize, 1)), shape, dtype)

    def _write(self, block: Block, data: np.ndarray) -> None:
        """Host bytes into a block, once no committed work can still be using it."""
        if block.tag is not None and block.tag > self._completed:
            self._wait()
        raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        if raw.nbytes:
            self._memory(block, raw.nbytes)[:] = raw

    def from_numpy(self, a: np.ndarray) -> DeviceBuffer:
        out = self.allocate(a.shape, a.dtype)
        self._write(out.block, np.ascontiguousarray(a))
        return out

    def upload_span(self, a, desc) -> DeviceBuffer:
        flat = flat_view(a, desc)
        out = self.allocate(flat.shape, flat.dtype)
        self._write(out.block, flat)
        return out

    def to_numpy(self, data: DeviceBuffer) -> np.ndarray:
        self._wait()
        nbytes = data.size * data.dtype.itemsize
        return self._memory(data.block, nbytes).copy().view(data.dtype).reshape(data.shape)

    def dlpack(self, data, *args, **kwargs):
        """Metal memory has no DLPack device type NumPy or torch accept: the export is a copy on the host."""
        return dlpack.through_host(self.name, self.to_numpy(data), *args, **kwargs)

    def dlpack_device(self, data) -> tuple[int, int]:
        return (dlpack.CPU, 0)

    def memory_stats(self) -> dict[str, int]:
        return self.pool.stats()

    # -- graph capture --
    def clone(self, data: DeviceBuffer) -> DeviceBuffer:
        out = self.allocate(data.shape, data.dtype)
        self._wait()
        nbytes = data.size * data.dtype.itemsize
        self._memory(out.block, nbytes)[:] = self._memory(data.block, nbytes)
        return out

    def own(self, a) -> Array:
        return own_copy(self, a)

    def feed(self, owned: Array, a) -> None:
        """New data into a captured input: waits for replays that may read it, then copies (shared memory)."""
        dst = owned._data
        self._wait()
        host = a._data if type(a) is Array and a.device is self else None
        nbytes = dst.size * dst.dtype.itemsize
        if host is not None:
            self._memory(dst.block, nbytes)[:] = self._memory(host.block, nbytes)
        else:
            self._write(dst.block, np.ascontiguousarray(a.numpy() if type(a) is Array else a, dtype=dst.dtype))

    def memory_of(self, value) -> int:
        data = value._data if type(value) is Array else value
        return id(data.block)

    def share_memory(self, launches, scratch: set[int]):
        uses = [
            [(pos, b.block, b.block.nbytes) for pos, b in enumerate(launch.buffers) if isinstance(b, DeviceBuffer)]
            for launch in launches
        ]
        assignment, nbytes = plan_sharing(uses, scratch, self.pool.allocate)
        for launch, used in zip(launches, uses):
            for pos, block, _ in used:
                shared = assignment.get(id(block))
                if shared is not None:
                    old = launch.buffers[pos]
                    launch.buffers[pos] = DeviceBuffer(shared, old.shape, old.dtype)
        return launches, nbytes
