"""Big parallel numba kernels: a serial `nogil` kernel over one chunk [start, stop) of its global range,
the chunks run at once on a small pool of threads. Numba's own parallel loops (parallel=True, prange)
cost several tenths of a second more to compile per kernel (parfor passes and a second compiled
function), most of a new kernel's first call; its OpenMP threads start faster, which matters only
for small kernels (numba_device.CHUNKS_MIN_WORK)."""
from __future__ import annotations

import functools
import os
import sys
import threading
from queue import SimpleQueue

_lock = threading.Lock()
_work: SimpleQueue | None = None   # (function, start, stop, args, done) for the pool's threads


def thread_count() -> int:
    """Threads a parallel kernel runs on: NUMBA_NUM_THREADS, like Numba's own parallel loops (default: the
    cores this process may use, as Numba counts them); read without importing Numba where it is not."""
    numba = sys.modules.get("numba")
    if numba is not None:
        return max(1, numba.config.NUMBA_NUM_THREADS)
    try:
        return max(1, int(os.environ["NUMBA_NUM_THREADS"]))
    except (KeyError, ValueError):   # (Numba itself rejects a value that is not a number when imported)
        return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


@functools.cache
def openmp_layer() -> bool:
    """Whether Numba's parallel loops (prange) run on OpenMP (libgomp), as opposed to TBB or its own
    workqueue; starts Numba's threads to find out."""
    try:
        import numba
        from numba.np.ufunc import parallel
        parallel._launch_threads()
        return numba.threading_layer() == "omp"
    except Exception:   # noqa: BLE001 - an answer Numba cannot give is "no"
        return False


def chunked(fn, size: int, chunks: int):
    """fn(start, stop, *args) as run(*args) over [0, size), in `chunks` near-equal parts: all but the first
    on the pool, the first on the calling thread. An exception (Numba's TypeError for arguments of other
    types, which every chunk raises alike) is raised after every chunk has finished."""
    bounds = [(size * c // chunks, size * (c + 1) // chunks) for c in range(chunks)]
    if chunks == 1:
        return lambda *args: fn(0, size, *args)
    first, rest = bounds[0], bounds[1:]

    def run(*args):
        work, done = _queue(), SimpleQueue()
        for start, stop in rest:
            work.put((fn, start, stop, args, done))
        error = None
        try:
            fn(*first, *args)
        except BaseException as e:   # noqa: BLE001 - re-raised once the other chunks are done with the arguments
            error = e
        for _ in rest:
            failed = done.get()
            error = error or failed
        if error is not None:
            raise error
    return run


def _queue() -> SimpleQueue:
    global _work
    if _work is None:
        with _lock:
            if _work is None:
                work = SimpleQueue()
                for i in range(thread_count() - 1):
                    threading.Thread(target=_serve, args=(work,), name=f"tracejit numba {i}", daemon=True).start()
                _work = work
    return _work


def _serve(work: SimpleQueue) -> None:
    while True:
        fn, start, stop, args, done = work.get()
        try:
            fn(start, stop, *args)
        except BaseException as e:   # noqa: BLE001 - handed to the launching thread
            done.put(e)
        else:
            done.put(None)
        del fn, args   # the arrays are not kept alive between launches


def _forget_pool() -> None:
    """A forked child has none of the parent's threads: it starts its own pool when it first needs one."""
    global _work, _lock
    _work, _lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)
