"""WebGPU's memory: pooled storage buffers (arrays in their storage type), uploads and downloads, constant
tables, graph capture's copies and shared intermediates."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tracejit.codegen.simt import wgsl
from tracejit.errors import OutOfMemoryError
from tracejit.ir.dtypes import is_narrow_float
from tracejit.runtime.array import Array, own_copy
from tracejit.runtime.device_memory import Block, BlockPool, Buffer
from tracejit.runtime.sharing import plan_sharing
from tracejit.runtime.views import flat_view
from tracejit.runtime import dlpack


class DeviceBuffer(Buffer):
    """An array in a WebGPU buffer: `dtype` is what the array holds, `storage` its element type in the
    buffer (wider for bool and 8/16-bit integers). `block` is a pooled buffer."""

    __slots__ = ("block", "storage")

    def __init__(self, block: Block, shape, dtype, storage):
        super().__init__(shape, dtype)
        self.block, self.storage = block, np.dtype(storage)


class WebGPUMemory:
    """The device's buffers (a role of WebGPUDevice, which sets these attributes)."""

    name: str
    device: Any  # wgpu's GPUDevice
    options: wgsl.WGSLOptions
    pool: BlockPool
    max_binding: int
    _tables: dict

    # -- memory --
    def _new_buffer(self, usage, nbytes: int):
        try:
            return self.device.create_buffer(size=nbytes, usage=usage)
        except Exception as e:
            raise OutOfMemoryError(
                f"webgpu could not allocate {nbytes} bytes ({e}); free device arrays you no longer need"
            ) from None

    def allocate(self, shape, dtype) -> DeviceBuffer:
        storage = wgsl.storage_dtype(dtype, self.options)
        nbytes = math.prod(shape) * storage.itemsize
        if nbytes > self.max_binding:
            raise OutOfMemoryError(
                f"an array of {nbytes} bytes is larger than {self.name} can bind to a kernel "
                f"({self.max_binding} bytes); split the work, or use a device without "
                f"this limit (numba, opencl)"
            )
        return DeviceBuffer(self.pool.allocate(max(nbytes, 4)), shape, dtype, storage)

    def _upload(self, host: np.ndarray, shape, dtype) -> DeviceBuffer:
        out = self.allocate(shape, dtype)
        self._write(out, host)
        return out

    def _write(self, out: DeviceBuffer, host) -> None:
        """Host values into an array, as its storage type, padded to whole words (WebGPU writes those)."""
        host = np.asarray(host)
        if is_narrow_float(host.dtype):  # (its bits, widened as uint16's and uint8's are)
            host = host.view(f"uint{host.itemsize * 8}")
        raw = np.ascontiguousarray(host, dtype=out.storage).reshape(-1).view(np.uint8)
        if raw.nbytes % 4:
            raw = np.concatenate([raw, np.zeros(4 - raw.nbytes % 4, np.uint8)])
        if raw.nbytes:
            self.device.queue.write_buffer(out.block.buffer, 0, raw)

    def _copy(self, src: DeviceBuffer, dst: DeviceBuffer) -> None:
        enc = self.device.create_command_encoder()
        enc.copy_buffer_to_buffer(src.block.buffer, 0, dst.block.buffer, 0, dst.block.nbytes)
        self.device.queue.submit([enc.finish()])

    def from_numpy(self, a: np.ndarray) -> DeviceBuffer:
        return self._upload(a, a.shape, a.dtype)

    def upload_span(self, a, desc) -> DeviceBuffer:
        flat = flat_view(a, desc)
        if desc.dtype == np.float16:
            flat = flat.view(np.float16)
        return self._upload(flat, flat.shape, desc.dtype)

    def to_numpy(self, data: DeviceBuffer) -> np.ndarray:
        nbytes = data.size * data.storage.itemsize
        if not nbytes:
            return np.empty(data.shape, data.dtype)
        raw = self.device.queue.read_buffer(data.block.buffer, 0, -(-nbytes // 4) * 4)
        held = np.frombuffer(raw, dtype=data.storage, count=data.size)
        if is_narrow_float(data.dtype):  # (its bits, widened as uint16's and uint8's are)
            return held.astype(f"uint{data.dtype.itemsize * 8}").view(data.dtype).reshape(data.shape)
        return held.astype(data.dtype).reshape(data.shape)

    def dlpack(self, data, *args, **kwargs):
        """WebGPU memory has no DLPack device type NumPy or torch accept: the export is a copy on the host."""
        return dlpack.through_host(self.name, self.to_numpy(data), *args, **kwargs)

    def dlpack_device(self, data) -> tuple[int, int]:
        return (dlpack.CPU, 0)

    def memory_stats(self) -> dict[str, int]:
        return self.pool.stats()

    # -- graph capture --
    def clone(self, data: DeviceBuffer) -> DeviceBuffer:
        out = DeviceBuffer(self.pool.allocate(data.block.nbytes), data.shape, data.dtype, data.storage)
        self._copy(data, out)
        return out

    def own(self, a) -> Array:
        return own_copy(self, a)

    def feed(self, owned: Array, a) -> None:
        if type(a) is Array and a.device is self:
            self._copy(a._data, owned._data)
        else:
            self._write(owned._data, a.numpy() if type(a) is Array else a)

    def memory_of(self, value) -> int:
        data = value._data if type(value) is Array else value
        return id(data.block)

    def share_memory(self, launches, scratch: set[int]):
        uses = [
            [
                (pos, buf.block, buf.block.nbytes)
                for pos, buf in enumerate(launch.buffers)
                if isinstance(buf, DeviceBuffer)
            ]
            for launch in launches
        ]
        assignment, nbytes = plan_sharing(uses, scratch, self.pool.allocate)
        for launch, used in zip(launches, uses):
            changed = False
            for pos, block, _ in used:
                shared = assignment.get(id(block))
                if shared is not None:
                    old = launch.buffers[pos]
                    launch.buffers[pos] = DeviceBuffer(shared, old.shape, old.dtype, old.storage)
                    changed = True
            if changed:
                launch.bind(self)
        return launches, nbytes

    def table_buffer(self, table):
        """The storage buffer of a constant table, uploaded once per device and kept. Written before it
        is published: another thread finding it in the table submits after the write."""
        block = self._tables.get(table)
        if block is None:
            words = wgsl.table_words(table)
            block = self.pool.allocate(words.nbytes)
            self.device.queue.write_buffer(block.buffer, 0, words)
            block = self._tables.setdefault(table, block)
        return block
