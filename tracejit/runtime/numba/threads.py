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
from collections import deque
from queue import SimpleQueue

from tracejit.errors import ArgumentError

_lock = threading.Lock()
_work: SimpleQueue | None = None  # (function, start, stop, args, done) for the pool's threads
_pool_threads = 0  # threads serving _work
_requested: int | None = None  # tj.set_num_threads(n)


def thread_count() -> int:
    """Threads a parallel kernel runs on: tj.set_num_threads(n); else NUMBA_NUM_THREADS, like Numba's own
    parallel loops; else OMP_NUM_THREADS (its first number); else the cores this process may use (as Numba
    counts them). Read without importing Numba where it is not."""
    if _requested is not None:
        return _requested
    numba = sys.modules.get("numba")
    if "NUMBA_NUM_THREADS" in os.environ:
        if numba is not None:
            return max(1, numba.config.NUMBA_NUM_THREADS)
        try:
            return max(1, int(os.environ["NUMBA_NUM_THREADS"]))
        except ValueError:  # (Numba itself rejects a value that is not a number when imported)
            pass
    omp = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if omp.isdigit() and int(omp) > 0:
        return int(omp)
    if numba is not None:
        return max(1, numba.config.NUMBA_NUM_THREADS)
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


class ThreadCount:
    """What tj.set_num_threads returns. Used in a `with` block (`with tj.set_num_threads(1): ...`), it puts the
    setting from before the call back at the block's end: tracejit's own count, Numba's in this thread, and the
    BLAS and OpenMP pools' limits as threadpoolctl found them."""

    def __init__(self, previous: int | None, limiters: list) -> None:
        self.previous, self._limiters = previous, limiters

    def __enter__(self) -> ThreadCount:
        return self

    def __exit__(self, *exc) -> None:
        global _requested
        _requested = self.previous
        n = thread_count()
        llvm_jit = sys.modules.get("tracejit.runtime.numba.llvm_jit")
        if llvm_jit is not None:
            llvm_jit.set_omp_threads(n)
        numba = sys.modules.get("numba")
        if numba is not None:
            numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
        for limiter in reversed(self._limiters):
            limiter.restore_original_limits()


def set_num_threads(n: int) -> ThreadCount:
    """Run the CPU's parallel work on `n` threads from now on (or, in a `with` block, until its end): the numba
    device's parallel kernels (tracejit's chunks, OpenMP's parallel entry points, and Numba's own parallel loops in
    the calling thread, at most NUMBA_NUM_THREADS, since Numba keeps that number per thread), and the BLAS and
    OpenMP pools loaded in the process, found and limited by threadpoolctl (MKL's when it loads later too)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ArgumentError(f"set_num_threads({n!r}): give a number of threads, an int >= 1")
    global _requested
    previous, _requested = _requested, n
    llvm_jit = sys.modules.get("tracejit.runtime.numba.llvm_jit")
    if llvm_jit is not None:
        llvm_jit.set_omp_threads(n)
    limit_numba()
    return ThreadCount(previous, limit_pools())


def limit_numba() -> None:
    """Numba's parallel loops (prange) in this thread: tj.set_num_threads's number, at most Numba's pool
    (NUMBA_NUM_THREADS). Nothing where no number was set or Numba is not imported (a program LLVM compiles
    directly never imports it)."""
    numba = sys.modules.get("numba")
    if _requested is not None and numba is not None:
        numba.set_num_threads(min(_requested, numba.config.NUMBA_NUM_THREADS))


def limit_pools() -> list:
    """The BLAS and OpenMP thread pools loaded now, limited to tj.set_num_threads's number (none set:
    nothing); threadpoolctl's limiters, which can restore the limits found."""
    if _requested is None:
        return []
    from threadpoolctl import threadpool_limits

    # twice: asking MKL its count loads its threading layer (libgomp), which the first pass missed
    return [threadpool_limits(limits=_requested) for _ in range(2)]  # (kept: restored only by a `with` block)


@functools.cache
def openmp_layer() -> bool:
    """Whether Numba's parallel loops (prange) run on OpenMP (libgomp), as opposed to TBB or its own
    workqueue; starts Numba's threads to find out."""
    try:
        import numba
        from numba.np.ufunc import parallel

        parallel._launch_threads()
        return numba.threading_layer() == "omp"
    except Exception:  # noqa: BLE001 - an answer Numba cannot give is "no"
        return False


def chunked(fn, size: int, chunks: int):
    """fn(start, stop, *args) as run(*args) over [0, size), in `chunks` near-equal parts (after
    tj.set_num_threads(n): n, at most `size`, read at each call): all but the first on the pool, the first
    on the calling thread. An exception (Numba's TypeError for arguments of other types, which every
    chunk raises alike) is raised after every chunk has finished."""
    parts: dict[int, tuple] = {}  # chunks -> (the first's bounds, the others')

    def split(chunks: int) -> tuple:
        bounds = [(size * c // chunks, size * (c + 1) // chunks) for c in range(chunks)]
        parts[chunks] = found = (bounds[0], bounds[1:])
        return found

    def run(*args):
        count = chunks if _requested is None else min(_requested, size)
        if count <= 1:
            return fn(0, size, *args)
        first, rest = parts.get(count) or split(count)
        run_parts(fn, [(*first, args)] + [(start, stop, args) for start, stop in rest])

    return run


def run_parts(fn, parts: list[tuple]) -> None:
    """fn(start, stop, *args) for each (start, stop, args) of `parts` at once: all but the first on the pool, the
    first on the calling thread. An exception is raised after every part has finished."""
    first, rest = parts[0], parts[1:]
    work, done = _queue(len(rest)), SimpleQueue[BaseException | None]()
    for start, stop, args in rest:
        work.put((fn, start, stop, args, done))
    error = None
    try:
        fn(first[0], first[1], *first[2])
    except BaseException as e:  # noqa: BLE001 - re-raised once the other parts are done with the arguments
        error = e
    for _ in rest:
        failed = done.get()
        error = error or failed
    if error is not None:
        raise error


def run_shared(fn, parts: list[tuple], threads: int) -> None:
    """fn(start, stop, *args) for each (start, stop, args) of `parts`, taken in order by the calling thread and
    `threads` - 1 of the pool's, each taking the next part no thread has taken yet: a thread the system wakes late
    (a sleeping vCPU takes 0.1-0.3 ms to wake on some VMs) takes fewer parts, where an even split left the caller
    waiting for it. An exception is raised after every taken part has finished; parts after it are not run."""
    queue: deque = deque(parts)
    failed: list[BaseException] = []

    def drain(*_) -> None:
        while not failed:
            try:
                start, stop, args = queue.popleft()  # (atomic: deque's popleft holds the GIL)
            except IndexError:
                return
            try:
                fn(start, stop, *args)
            except BaseException as e:  # noqa: BLE001 - re-raised by the calling thread
                failed.append(e)

    helpers = min(threads, len(parts)) - 1
    work, done = _queue(helpers), SimpleQueue[BaseException | None]()
    for _ in range(helpers):
        work.put((drain, 0, 0, (), done))
    drain()
    for _ in range(helpers):
        done.get()
    if failed:
        raise failed[0]


def _queue(threads: int) -> SimpleQueue:
    """The pool's queue, with at least `threads` threads serving it."""
    global _work, _pool_threads
    if _work is None or _pool_threads < threads:
        with _lock:
            if _work is None:
                _work, _pool_threads = SimpleQueue(), 0
            for i in range(_pool_threads, max(threads, thread_count() - 1)):
                threading.Thread(target=_serve, args=(_work,), name=f"tracejit numba {i}", daemon=True).start()
                _pool_threads = i + 1
    return _work


def _serve(work: SimpleQueue) -> None:
    while True:
        fn, start, stop, args, done = work.get()
        try:
            fn(start, stop, *args)
        except BaseException as e:  # noqa: BLE001 - handed to the launching thread
            done.put(e)
        else:
            done.put(None)
        del fn, args  # the arrays are not kept alive between launches


def _forget_pool() -> None:
    """A forked child has none of the parent's threads: it starts its own pool when it first needs one."""
    global _work, _lock, _pool_threads
    _work, _lock, _pool_threads = None, threading.Lock(), 0


os.register_at_fork(after_in_child=_forget_pool)
