"""Whether the compiles in progress are ahead of time: tj.warm and `python -m tracejit warm`. Where a device's disk
cache entry may be either the build itself or a note of where its driver keeps the build (PoCL, see
runtime/opencl/discovery.py's pocl_record), a warm stores the build: fetching it costs more compile time, which is
what warming pays up front, and loading it costs a later process less (3-5 ms a program on PoCL, against 35-50 ms
from PoCL's own cache)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

_AHEAD = contextvars.ContextVar("tracejit_compiling_ahead", default=False)


def compiling_ahead() -> bool:
    return _AHEAD.get()


@contextlib.contextmanager
def ahead_of_time() -> Iterator[None]:
    """The compiles inside the block are a warm's (in this thread: a compile another thread runs for it stores
    what a call's compile stores, which is still correct, only slower to load)."""
    token = _AHEAD.set(True)
    try:
        yield
    finally:
        _AHEAD.reset(token)
