"""An exclusive lock on a file (flock), held by one thread of one process at a time: for work on a cache
that is not safe to share (PoCL's kernel cache while two processes build one program)."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path
from collections.abc import Iterator

from tracejit.runtime.debug import log

try:
    import fcntl

    _FLOCK = True
except ImportError:  # Windows: no flock; the block runs unguarded
    _FLOCK = False

WAIT_S = 300.0  # a build holding it longer has hung: go on without it rather than hang too


@contextmanager
def held(path: Path, wait_s: float = WAIT_S) -> Iterator[bool]:
    """Run the block holding an exclusive flock on `path` (created as needed; an flock is per open file,
    so two threads of one process exclude each other too). Yields whether the lock is held: where the file
    cannot be made or locked (a read-only directory, no fcntl) or the wait runs out, the block runs
    without it."""
    fd = _open(path)
    if fd is None:
        yield False
        return
    try:
        locked = _acquire(fd, wait_s)
        if not locked:
            log(1, f"waited {wait_s:.0f} s for {path}; going on without it")
        yield locked
    finally:
        os.close(fd)  # closing releases the lock


def _open(path: Path) -> int | None:
    if not _FLOCK:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as e:
        log(1, f"cannot make the lock file {path} ({e}); going on without it")
        return None


def _acquire(fd: int, wait_s: float) -> bool:
    deadline, pause = time.monotonic() + wait_s, 0.002
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        except OSError:  # a file system without flock
            return False
