"""What the GPU-API runtimes share: contiguous device arrays, a caching pool of API buffers, the by-value
parameters of a launch, and the plan of a target that only renders."""

from __future__ import annotations

import math
import threading
import weakref
from dataclasses import dataclass
from collections.abc import Callable

import numpy as np

from tracejit.errors import DeviceError, OutOfMemoryError
from tracejit.ir.fuse import Program
from tracejit.runtime.array import Shaped


def contiguous_strides(shape, itemsize: int) -> tuple[int, ...]:
    out, acc = [], itemsize
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return tuple(reversed(out))


class Buffer(Shaped):
    """A C-contiguous array in device memory; a runtime adds where the memory is."""

    __slots__ = ("shape", "dtype", "size", "strides")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.size = math.prod(self.shape)
        self.strides = contiguous_strides(self.shape, self.dtype.itemsize)


class Block:
    """A pooled API buffer; back to its pool when nothing refers to the block. weakref.finalize keeps the
    buffer itself alive until then (a __del__ could run after a garbage cycle had released it). `tag`:
    what the pool's stamp() said when the buffer was last released (None for a new one)."""

    __slots__ = ("buffer", "nbytes", "tag", "__weakref__")

    def __init__(self, buffer, nbytes: int, tag, pool: BlockPool):
        self.buffer, self.nbytes, self.tag = buffer, nbytes, tag
        weakref.finalize(self, pool.release, buffer, nbytes)


def over_limit(device: str, size: int, limit: int, in_use: int) -> OutOfMemoryError:
    return OutOfMemoryError(
        f"{device}: allocating {size} bytes would pass the memory limit of {limit} bytes ({in_use} bytes in use "
        "after emptying the pool); free device arrays you no longer need, or raise the limit "
        "(tj.set_memory_limit, TRACEJIT_MEMORY_LIMIT)"
    )


class FreeLists:
    """What a caching allocator keeps: freed buffers by rounded size, and the counts its stats report.
    Threads share a pool: the lists and counts change under a lock, reentrant because a block's release
    can run inside the pool's own critical section (a garbage collection there finalizes a block)."""

    def __init__(self) -> None:
        self.free: dict[int, list] = {}
        self.active_blocks = self.active_bytes = self.held_blocks = self.held_bytes = 0
        self.peak_bytes = 0
        self.limit: int | None = None  # tj.set_memory_limit: bytes the pool may hold, in use and kept
        self._lock = threading.RLock()

    def admit(self, size: int, device: str) -> None:
        """Before handing out a buffer of `size` bytes (new or kept): within the memory limit, first by
        letting go of the kept buffers, else tj.OutOfMemoryError naming the request and the limit."""
        limit = self.limit
        if limit is None:
            return
        if self.active_bytes + self.held_bytes + size > limit and self.held_blocks:
            self.drop_held()
        if self.active_bytes + size > limit:
            raise over_limit(device, size, limit, self.active_bytes)

    def drop_held(self) -> None:
        """Let go of the buffers kept for reuse (when an allocation fails, they may be what is in the way)."""
        self._drop()

    def _take(self, size: int):
        """A kept buffer of this size (whatever the pool stored for it), or None."""
        with self._lock:
            held = self.free.get(size)
            found = held.pop() if held else None
            if found is not None:
                self.held_blocks -= 1
                self.held_bytes -= size
            return found

    def _active(self, size: int) -> None:
        """Count a buffer of this size handed out (kept or new)."""
        with self._lock:
            self.active_blocks += 1
            self.active_bytes += size
            self.peak_bytes = max(self.peak_bytes, self.active_bytes)

    def _keep(self, size: int, entry) -> None:
        with self._lock:
            self.active_blocks -= 1
            self.active_bytes -= size
            self.free.setdefault(size, []).append(entry)
            self.held_blocks += 1
            self.held_bytes += size

    def _drop(self) -> dict[int, list]:
        """Forget the kept buffers; returns them."""
        with self._lock:
            held, self.free = self.free, {}
            self.held_blocks = self.held_bytes = 0
        return held

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "active_blocks": self.active_blocks,
                "held_blocks": self.held_blocks,
                "managed_bytes": self.active_bytes + self.held_bytes,
                "active_bytes": self.active_bytes,
            }


class BlockPool(FreeLists):
    """API buffers kept by rounded size and handed out again. `create(nbytes)` makes a new one (raising
    DeviceError when it cannot); `stamp()` labels a buffer as it is released (metal: how much work had
    been committed, so a host write waits only when that work may still use it)."""

    def __init__(
        self,
        create: Callable[[int], object],
        align: int,
        stamp: Callable[[], object] = lambda: None,
        device: str = "the device",
    ):
        super().__init__()
        self.create, self.align, self.stamp, self.device = create, align, stamp, device

    def allocate(self, nbytes: int) -> Block:
        size = max(self.align, -(-nbytes // self.align) * self.align)
        self.admit(size, self.device)  # a kept buffer reused counts against the limit too
        found = self._take(size)
        buffer, tag = found if found is not None else (self.create(size), None)
        self._active(size)
        return Block(buffer, size, tag, self)

    def release(self, buffer, nbytes: int) -> None:
        self._keep(nbytes, (buffer, self.stamp()))


def by_value_params(program: Program, keys) -> frozenset[int]:
    """The params of a launch passed by value: 0-d inputs."""
    return frozenset(j for j, key in enumerate(keys) if key.argument and program.buffers[key].shape == ())


@dataclass
class RenderedOnly:
    """The plan of a target that renders source without its device (lower() anywhere): it cannot run."""

    kernels: list
    refusal: str

    def __call__(self, args, into=None):
        raise DeviceError(self.refusal)

    bind = __call__
