"""OpenCL's memory: pooled cl buffers, uploads and downloads, the memory limit and statistics, graph
capture's copies and shared intermediates."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from tracejit.errors import OutOfMemoryError
from tracejit.runtime.array import Array, own_copy
from tracejit.runtime.device_memory import Buffer, over_limit
from tracejit.runtime.sharing import plan_sharing
from tracejit.runtime.views import flat_view
from tracejit.runtime import dlpack

if TYPE_CHECKING:  # (imported where used: the device is opened on demand)
    import pyopencl as cl


class DeviceBuffer(Buffer):
    """A contiguous array in device memory (a pooled cl buffer, None when empty)."""

    __slots__ = ("buf",)

    def __init__(self, buf, shape: tuple[int, ...], dtype: np.dtype):
        super().__init__(shape, dtype)
        self.buf = buf


class OpenCLMemory:
    """The device's buffers (a role of OpenCLDevice, which sets the attributes below)."""

    name: str
    queue: cl.CommandQueue
    pool: Any  # pyopencl.tools.MemoryPool: not a PoolStats, so memory() and the limit are this class's own
    _limit: int | None
    _peak: int

    def allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> DeviceBuffer:
        nbytes = math.prod(shape) * dtype.itemsize
        return DeviceBuffer(self._allocate(nbytes) if nbytes else None, shape, dtype)

    def memory(self):
        """pyopencl's pool counts the bytes asked for in use and the rounded blocks it manages: their difference
        also holds the rounding of blocks in use, so with no block kept nothing is held (it read 626813 bytes
        after the pool was emptied, in the full suite); with some kept it is an upper bound."""
        pool = self.pool
        held = pool.managed_bytes - pool.active_bytes if pool.held_blocks else 0
        return pool.active_bytes, max(self._peak, pool.active_bytes), held

    def set_memory_limit(self, nbytes) -> None:
        self._limit = nbytes

    @property
    def memory_limit(self) -> int | None:
        return self._limit

    def _allocate(self, nbytes: int):
        import pyopencl as cl

        pool = self.pool
        if self._limit is not None:  # pyopencl's pool may reuse a kept block: counted as new, to be safe
            if pool.managed_bytes + nbytes > self._limit:
                pool.free_held()
            if pool.active_bytes + nbytes > self._limit:
                raise over_limit(self.name, nbytes, self._limit, pool.active_bytes)
        self._peak = max(self._peak, pool.active_bytes + nbytes)
        try:
            return self.pool.allocate(nbytes)
        except cl.Error as e:
            self.pool.free_held()  # blocks held for reuse may be what is in the way
            try:
                return self.pool.allocate(nbytes)
            except cl.Error:
                raise OutOfMemoryError(
                    f"{self.name} could not allocate {nbytes} bytes ({e}); free device arrays you no longer need"
                ) from None

    def from_numpy(self, a: np.ndarray) -> DeviceBuffer:
        """Upload a host array. The copy is queued, so the host data is first staged in a private copy
        the caller cannot change before the transfer happens."""
        import pyopencl as cl

        out = self.allocate(a.shape, a.dtype)
        if out.buf is not None:
            staged = np.array(a, order="C", copy=True)
            cl.enqueue_copy(self.queue, out.buf, staged, is_blocking=False)
        return out

    def upload_span(self, a, desc):
        """The cl buffer holding the memory span the kernel reads of a host argument (strided in place), of
        at least a byte (a kernel may read an element it then ignores). A cl buffer, not a DeviceBuffer: it
        lives for one call, and making a DeviceBuffer costs a call on the hot path a microsecond."""
        import pyopencl as cl

        staged = np.array(flat_view(a, desc), copy=True)
        buf = self._allocate(max(staged.nbytes, 1))
        if staged.nbytes:
            cl.enqueue_copy(self.queue, buf, staged, is_blocking=False)
        return buf

    def to_numpy(self, data: DeviceBuffer) -> np.ndarray:
        import pyopencl as cl

        host = np.empty(data.shape, data.dtype)
        if data.buf is not None:
            cl.enqueue_copy(self.queue, host, data.buf, is_blocking=True)
        return host

    def dlpack(self, data, *args, **kwargs):
        """OpenCL memory has no DLPack device type NumPy or torch accept: the export is a copy on the host."""
        return dlpack.through_host(self.name, self.to_numpy(data), *args, **kwargs)

    def dlpack_device(self, data) -> tuple[int, int]:
        return (dlpack.CPU, 0)

    # -- graph capture --
    def clone(self, data: DeviceBuffer) -> DeviceBuffer:
        import pyopencl as cl

        out = self.allocate(data.shape, data.dtype)
        if out.buf is not None:
            cl.enqueue_copy(self.queue, out.buf, data.buf)
        return out

    def own(self, a) -> Array:
        """A graph's own copy of an input, on this device."""
        return own_copy(self, a)

    def feed(self, owned: Array, a) -> None:
        import pyopencl as cl

        if owned._data.buf is None:
            return
        if type(a) is Array and a.device is self:
            cl.enqueue_copy(self.queue, owned._data.buf, a._data.buf)
        else:
            staged = np.array(a.numpy() if type(a) is Array else a, order="C", copy=True)
            cl.enqueue_copy(self.queue, owned._data.buf, staged, is_blocking=False)

    def memory_of(self, value) -> int:
        """The memory object behind a tj.Array or a DeviceBuffer of this device."""
        return id(value._data.buf if type(value) is Array else value.buf)

    def share_memory(self, launches, scratch: set[int]):
        """Intermediates whose lifetimes do not overlap share pooled blocks (see plan_sharing)."""
        import pyopencl as cl

        uses = [
            [(pos, a, a.size) for pos, a in enumerate(call) if isinstance(a, cl.MemoryObjectHolder)]
            for _, _, _, call in launches
        ]
        assignment, nbytes = plan_sharing(uses, scratch, self._allocate)
        out = []
        for (knl, g, local, call), used in zip(launches, uses):
            call = list(call)
            for pos, a, _ in used:
                if id(a) in assignment:
                    call[pos] = assignment[id(a)]
                    if g is not None:  # (None: a host call, which reads its list when replayed)
                        knl.set_arg(pos, call[pos])
            out.append((knl, g, local, call))
        return out, nbytes

    def memory_stats(self) -> dict[str, int]:
        """The caching allocator: blocks in use, blocks held for reuse, bytes managed."""
        return {
            "active_blocks": self.pool.active_blocks,
            "held_blocks": self.pool.held_blocks,
            "managed_bytes": self.pool.managed_bytes,
            "active_bytes": self.pool.active_bytes,
        }
