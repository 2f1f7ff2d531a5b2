"""The numba device's large results, in memory taken back when the caller drops them.

A result array of tens of megabytes, fresh from NumPy on every call, is memory the OS maps anew each time
(glibc maps allocations past 32 MiB on their own and unmaps them on free): the kernel's first write to each
page faults, and the OS zeroes the page first. On the development VM that cost as much as the arithmetic:
`2*x + 3*z + 1` on 16M float32 took 13.9 ms into a fresh array and 9.1 ms into one passed with `out=`;
GELU 18 against 12; `x.T + y` at 4096^2 38 against 34.

So a result of at least MIN_BYTES is a view of a block from this pool, made through a `Lease` of the block
(NumPy keeps it at the root of the result's chain of bases, so every view of the result keeps it alive);
when the last array that shares the memory is gone, the lease hands the block back, and the next result
of the same size reuses it, its pages already mapped. Results are NumPy arrays like any other, except
that they do not own their memory (`a.flags.owndata` is False), so `a.resize(...)` refuses them as it
refuses any view. The pool keeps at most `limit` bytes of blocks nobody uses (TRACEJIT_OUTPUT_POOL, 1 GiB unless set,
0 turns the pool off), dropping the oldest first; `release()` drops them all.
"""

from __future__ import annotations

import collections
import os
import threading

import numpy as np
from numpy._core import multiarray

MIN_BYTES = 1 << 20
DEFAULT_LIMIT = 1 << 30


class Lease:
    """One block lent to the arrays of a result: NumPy's base object of each of them."""

    __slots__ = ("block", "returned", "__array_interface__")

    def __init__(self, block: np.ndarray, returned: collections.deque):
        self.block, self.returned = block, returned
        self.__array_interface__ = block.__array_interface__

    def __del__(self):
        # deque.append is atomic: safe from any thread, and from a garbage collection that runs while the
        # pool itself is working on this thread (a lock here could deadlock against it)
        self.returned.append(self.block)


class OutputPool:
    """Blocks of memory for results, by exact size in bytes."""

    def __init__(self, limit: int | None = None):
        self.limit = _environment_limit() if limit is None else limit
        self._returned: collections.deque = collections.deque()  # blocks whose last array is gone
        self._kept: dict[int, np.ndarray] = {}  # id -> free block, oldest first
        self._sizes: dict[int, list[int]] = {}  # nbytes -> ids of free blocks
        self._held = 0
        self._lock = threading.Lock()

    @property
    def held_bytes(self) -> int:
        with self._lock:
            self._settle()
            return self._held

    def empty(self, shape: tuple, dtype: np.dtype) -> np.ndarray:
        """An uninitialised array like np.empty(shape, dtype) (C order), from a kept block where there is one
        of its size; below MIN_BYTES, or with the pool off, np.empty's own."""
        dtype = np.dtype(dtype)
        nbytes = dtype.itemsize
        for n in shape:
            nbytes *= n
        if nbytes < MIN_BYTES or not self.limit:
            return multiarray.empty(shape, dtype)
        block = None
        with self._lock:
            self._settle()
            ids = self._sizes.get(nbytes)
            if ids:
                block = self._kept.pop(ids.pop())
                self._held -= nbytes
        if block is None:
            block = multiarray.empty(nbytes, np.uint8)
        return np.asarray(Lease(block, self._returned)).view(dtype).reshape(shape)

    def release(self) -> int:
        """Drops every kept block (the memory goes back to the system); returns the bytes dropped."""
        with self._lock:
            self._settle()
            dropped, self._held = self._held, 0
            self._kept.clear()
            self._sizes.clear()
        return dropped

    def _settle(self) -> None:
        """Returned blocks join the free lists; the oldest go while more than `limit` bytes are kept.
        Called with the lock held."""
        while self._returned:
            block = self._returned.popleft()
            if block.nbytes > self.limit:
                continue
            self._kept[id(block)] = block
            self._sizes.setdefault(block.nbytes, []).append(id(block))
            self._held += block.nbytes
        while self._held > self.limit:
            key = next(iter(self._kept))
            block = self._kept.pop(key)
            self._sizes[block.nbytes].remove(key)
            self._held -= block.nbytes


def _environment_limit() -> int:
    from tracejit.runtime.device_stats import parse_bytes

    text = os.environ.get("TRACEJIT_OUTPUT_POOL", "").strip()
    return DEFAULT_LIMIT if not text else parse_bytes(text, "TRACEJIT_OUTPUT_POOL")
