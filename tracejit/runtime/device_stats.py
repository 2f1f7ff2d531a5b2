"""What every device counts and limits: tj.device(name).stats() and tj.set_memory_limit.

A device counts its kernel launches (plain calls and replays of captured graphs) and the kernels it
compiled, keeps the last error a call on it raised, and reports its memory pool: bytes in arrays now,
the most ever at once, and bytes kept for reuse. The counts are plain integers, not locked: calls on
several threads at once may lose an increment. A memory limit caps the bytes a device's pool holds
(in use and kept); an allocation past it first empties the pool, then raises tj.OutOfMemoryError.
"""

from __future__ import annotations

import os
import re

from typing import TYPE_CHECKING, Protocol

from tracejit.errors import ArgumentError, UnsupportedError


class PoolStats(Protocol):
    """What the counters read of a device's pool (device_memory.FreeLists has it)."""

    limit: int | None

    @property
    def active_bytes(self) -> int: ...

    @property
    def peak_bytes(self) -> int: ...

    @property
    def held_bytes(self) -> int: ...


class DeviceStats:
    """The counters and the memory limit of a device (a base of each device class). A device whose
    arrays live in a FreeLists pool (`self.pool`) needs nothing more; others override memory() and
    set_memory_limit()."""

    launches = 0
    compiles = 0
    last_error: str | None = None
    has_memory_pool = True  # its arrays come from a pool tracejit keeps (numba's are NumPy's: False)

    if TYPE_CHECKING:  # set by the device as its own pool class; one without such a pool overrides what reads it

        @property
        def pool(self) -> PoolStats: ...

    def stats(self) -> dict:
        """launches, compiles, bytes_in_use, peak_bytes, pool_bytes (kept for reuse), last_error; a
        memory figure the device cannot know is None."""
        in_use, peak, held = self.memory()
        return {
            "launches": self.launches,
            "compiles": self.compiles,
            "bytes_in_use": in_use,
            "peak_bytes": peak,
            "pool_bytes": held,
            "last_error": self.last_error,
        }

    def memory(self) -> tuple[int | None, int | None, int | None]:
        """(bytes in use, peak bytes in use, bytes kept for reuse)."""
        pool = self.pool
        return pool.active_bytes, pool.peak_bytes, pool.held_bytes

    def set_memory_limit(self, nbytes: int | None) -> None:
        """Cap the bytes this device's pool holds (None: no cap)."""
        self.pool.limit = nbytes

    @property
    def memory_limit(self) -> int | None:
        """The cap set by tj.set_memory_limit or TRACEJIT_MEMORY_LIMIT, or None."""
        return self.pool.limit

    def apply_memory_limit(self) -> None:
        """At the device's creation: tj.set_memory_limit(n) for every device, else TRACEJIT_MEMORY_LIMIT."""
        limit = DEFAULT_LIMIT[0] if DEFAULT_LIMIT else environment_limit()
        if limit is not None:
            self.set_memory_limit(limit)

    def record_error(self, error: BaseException) -> None:
        self.last_error = f"{type(error).__name__}: {error}"


def failed(device, error: BaseException) -> None:
    """A call or compile on `device` raised `error`: its stats' last_error."""
    if isinstance(device, DeviceStats):
        device.record_error(error)


DEFAULT_LIMIT: list = []  # [limit] once tj.set_memory_limit(n) named no device


def checked_limit(nbytes) -> int | None:
    if nbytes is None:
        return None
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise ArgumentError(f"set_memory_limit({nbytes!r}): give a number of bytes (an int >= 0), or None for no limit")
    return int(nbytes)


_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def environment_limit() -> int | None:
    """TRACEJIT_MEMORY_LIMIT: bytes, or with a binary unit (512M, 2G, 1.5GiB)."""
    text = os.environ.get("TRACEJIT_MEMORY_LIMIT", "").strip()
    return parse_bytes(text, "TRACEJIT_MEMORY_LIMIT") if text else None


def parse_bytes(text: str, variable: str) -> int:
    """A size from an environment variable: bytes, or with a binary unit (512M, 2G, 1.5GiB)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?", text)
    if m is None:
        raise ArgumentError(f"{variable}={text!r}: give bytes, or a size such as 512M or 2GiB")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def no_pool(device: str):
    """set_memory_limit on a device whose arrays are NumPy's (numba): not something it can enforce."""
    raise UnsupportedError(
        f"{device} has no memory limit: its arrays are NumPy arrays in host memory, which "
        "tracejit does not allocate from a pool of its own; limit the process instead "
        "(ulimit -v, a container's memory limit)"
    )
