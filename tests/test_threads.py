"""Threads making the first call to a new kernel at once: one trace and one compile per signature, and
every thread gets NumPy's answer (a module half-imported by one thread was seen by another). The device
runtimes' shared state under threads made to switch inside them (switching_threads)."""
from __future__ import annotations

import contextlib
import dis
import functools
import os
import random
import threading
import time

import numpy as np
import pytest

import tracejit as tj
import tracejit.runtime
from reference import assert_close

THREADS = 8
TRIALS = int(os.environ.get("TRACEJIT_THREAD_TRIALS", "3"))
RACES = int(os.environ.get("TRACEJIT_THREAD_RACES", "24"))   # rounds of the forced-switch tests
RUNTIME = os.path.dirname(tracejit.runtime.__file__)


def test_threads_calling_a_new_kernel_at_once_trace_it_once_and_agree_with_numpy(device, rng):
    x = rng.random((64, 300)).astype(np.float32)
    expected = np.exp(x - x.max(-1, keepdims=True)).sum(-1)
    for trial in range(TRIALS):
        # a new kernel (and a new generated module) per trial: the race is on the first call
        kernel = tj.kernel(eval(f"lambda x: np.exp(x - x.max(-1, keepdims=True)).sum(-1) + {trial} * 0"))
        for r in at_once(lambda i: np.asarray(kernel(x, device=device))):
            assert not isinstance(r, Exception), f"trial {trial}: a thread raised {r!r}"
            assert_close(r, expected)
        assert kernel.cache_info()["traces"] == 1, kernel.cache_info()


@contextlib.contextmanager
def switching_threads(seed: int, chance: float = 0.05, pause: float = 2e-3):
    """Threads started inside the block stop for `pause` seconds now and then, in tracejit's runtime and
    in pyopencl's generated argument setters, one at a time so that the others run on meanwhile: at a line
    with probability `chance`, and always right after the first store at each place into a table held in
    an attribute (`obj.attr[key] = value`: where what is made on first use is published, maybe before it
    is complete). A check-then-use of shared state that goes wrong once in a hundred test runs goes wrong
    within a few blocks here."""
    rnd = random.Random(seed)
    stopped = threading.Lock()
    published: set = set()   # (code, offset) where a thread has stopped after publishing

    def step(frame, event, arg):
        if event == "line":
            if rnd.random() < chance and stopped.acquire(blocking=False):
                try:
                    time.sleep(pause)
                finally:
                    stopped.release()
        elif event == "opcode" and frame.f_lasti in _after_publishing(frame.f_code):
            place = (frame.f_code, frame.f_lasti)
            if place not in published:
                published.add(place)
                with stopped:
                    time.sleep(pause)
        return step

    def call(frame, event, arg):
        name = frame.f_code.co_filename
        if name.startswith((RUNTIME, "<generated: 'pyopencl")):
            frame.f_trace_opcodes = True
            return step
        return None

    threading.settrace(call)
    try:
        yield
    finally:
        threading.settrace(None)


@functools.cache
def _after_publishing(code) -> frozenset[int]:
    """Offsets of the instructions right after `obj.attr[key] = value` (key a name, a constant or name.attr)."""
    found = [(i.opname, i.offset) for i in dis.get_instructions(code)]
    names = [op for op, _ in found]
    after = set()
    for k, op in enumerate(names[:-1]):
        if op != "STORE_SUBSCR":
            continue
        key = 1 if names[k - 1] in ("LOAD_FAST", "LOAD_CONST", "LOAD_GLOBAL", "LOAD_DEREF") else \
            2 if names[k - 1] == "LOAD_ATTR" and names[k - 2] == "LOAD_FAST" else 0
        if key and k - key - 2 >= 0 and names[k - key - 1] == "LOAD_ATTR" and names[k - key - 2] == "LOAD_FAST":
            after.add(found[k + 1][1])
    return frozenset(after)


def at_once(work, threads: int = THREADS) -> list:
    """work(i) in `threads` threads released together; what each returned, or the exception it raised."""
    barrier = threading.Barrier(threads)
    results: list = [None] * threads

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = work(i)
        except Exception as e:  # noqa: BLE001 - checked by the caller, per thread
            results[i] = e

    started = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in started:
        t.start()
    for t in started:
        t.join()
    return results


def test_threads_making_the_first_calls_of_new_plans_while_switching_often_all_get_numpys_answer(device, rng):
    """The runtime's shared state under threads that switch inside it. Each round compiles a new plan here,
    then 8 threads make its first calls at once. Races this found: webgpu published a plan's bounds-check
    uniform before writing it, and a thread submitting in between ran with a recycled uniform's limit (rows
    never written: 52 of 64 results were other memory); opencl threads set the arguments of the plan's one
    kernel object over each other's before enqueueing it; metal counted another thread's command buffer
    as complete and read results before they were; a buffer pool popped a list another thread had emptied."""
    tj.asarray(np.zeros(1, np.float32), device=device)   # the device open: lower() below compiles for it
    for race in range(RACES):
        # more rows each round (the same kernel source; rows enough for a row per thread on a many-core CPU
        # device, and never a multiple of a group size): a limit left from an earlier plan is too small
        xs = [rng.random((500 + 8 * race, 64)).astype(np.float32) for _ in range(THREADS)]   # one per thread
        kernel = tj.kernel(lambda x: np.exp(x - x.max(-1, keepdims=True)).sum(-1))
        kernel.lower(xs[0], device=device)   # compiled before the threads start: they race on its first calls
        with switching_threads(seed=race):
            results = at_once(lambda i, f=kernel, xs=xs: [np.asarray(f(xs[i], device=device)) for _ in range(3)])
        for i, got in enumerate(results):
            assert not isinstance(got, Exception), f"round {race}, thread {i} raised {got!r}"
            want = np.exp(xs[i] - xs[i].max(-1, keepdims=True)).sum(-1)
            for r in got:
                assert_close(r, want, what=f"round {race}, thread {i}")


def test_threads_indexing_out_of_bounds_and_in_bounds_at_once_each_get_numpys_answer_or_its_error(device, rng):
    """A kernel that can fault writes a record the call reads back. The record was one buffer per device:
    a thread's call zeroed it after another's kernel had faulted (the fault lost, other memory read as
    values) or read the fault of another thread's call (an IndexError for indices in bounds)."""
    x = rng.random((50, 8)).astype(np.float32)
    good = rng.integers(-50, 50, 64).astype(np.int32)
    bad = good.copy()
    bad[17] = 50
    with pytest.raises(IndexError) as numpy_error:
        x[bad]
    take = tj.kernel(lambda x, i: x[i] + 1)
    double = tj.kernel(lambda x, i: x[i] * 2)   # another plan: calls of different plans run at once too
    take(x, good, device=device)
    double(x, good, device=device)

    def work(i: int) -> list:
        out = []
        for _ in range(3):
            if i % 2:
                out.append(np.asarray(double(x, good, device=device)))
            else:
                try:
                    take(x, bad, device=device)
                    out.append(None)   # no error
                except IndexError as e:
                    out.append(e)
        return out

    for race in range(RACES // 2):
        with switching_threads(seed=race):
            results = at_once(work)
        for i, got in enumerate(results):
            assert not isinstance(got, Exception), f"round {race}, thread {i} raised {got!r}"
            for r in got:
                if i % 2:
                    assert_close(r, x[good] * 2, what=f"round {race}, thread {i}")
                else:
                    assert isinstance(r, tj.IndexOutOfBoundsError), f"round {race}, thread {i}: no IndexError"
                    assert str(r) == str(numpy_error.value)


def run_in_threads(check, inputs, calls: int, threads: int = 4) -> None:
    """check(x) in `threads` threads at once, each cycling through `inputs` from its own start for `calls`
    calls; the first failure of any thread is raised here, in the test's own thread."""
    errors: list[BaseException] = []

    def work(k):
        try:
            for j in range(calls):
                check(inputs[(k + j) % len(inputs)])
        except BaseException as e:   # noqa: BLE001 - reported below
            errors.append(e)

    started = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in started:
        t.start()
    for t in started:
        t.join()
    assert not errors, errors[0]


def test_threads_cycling_through_more_shapes_than_the_plan_cache_holds_all_get_numpys_answer(monkeypatch):
    """Plans are evicted least recently used first while other threads are running them."""
    monkeypatch.setenv("TRACEJIT_PLAN_CACHE_SIZE", "2")
    f = tj.kernel(lambda x: x * 3 - 1)
    inputs = [np.arange(n, dtype=np.float32) for n in range(1, 6)]
    run_in_threads(lambda x: np.testing.assert_array_equal(f(x), x * 3 - 1), inputs, calls=40)
    assert f.cache_info()["plans"] <= 2


def test_numba_plans_reuse_their_temporaries_and_threads_running_one_plan_never_share_them(rng):
    """A plan keeps its temporaries (here x * 2, 512 KB, made before the BLAS product) for its next call
    instead of page-faulting fresh ones in; a second thread inside the same plan meanwhile gets its own."""
    def f(x, w):
        return np.tanh((x * 2) @ w)

    k = tj.kernel(f)
    w = rng.standard_normal((512, 64)).astype(np.float32) / 16
    inputs = [rng.standard_normal((256, 512)).astype(np.float32) for _ in range(4)]
    run_in_threads(lambda x: np.testing.assert_allclose(k(x, w, device="numba"), f(x, w), rtol=1e-4, atol=1e-5),
                   inputs, calls=25)
    pool = k.lower(inputs[0], w, device="numba").executable.run.__globals__["scratch_pool"]
    assert 1 <= len(pool) <= 4   # one set per thread that ran at once, at most
    kept = pool[-1]
    k(inputs[0], w, device="numba")
    assert any(a is b for a in pool[-1] for b in kept)   # the last call ran on a kept set


def test_shared_parts_each_run_once_and_a_thread_that_starts_late_takes_fewer():
    # (runtime/numba/threads.py's run_shared: loops over elements whose steps are independent)
    from tracejit.runtime.numba import threads as numba_threads

    taken: list[tuple[int, int]] = []
    lock = threading.Lock()
    caller = threading.get_ident()

    def part(start, stop, delay):
        if threading.get_ident() != caller and not taken:
            time.sleep(0.05)  # a pool thread the system wakes late: the caller takes the parts meanwhile
        time.sleep(delay)
        with lock:
            taken.append((start, threading.get_ident()))

    numba_threads.run_shared(part, [(k, k + 1, (0.005,)) for k in range(12)], threads=2)
    assert sorted(k for k, _ in taken) == list(range(12))
    assert sum(t == caller for _, t in taken) > 6


def test_an_exception_in_a_shared_part_is_raised_once_the_others_are_done():
    from tracejit.runtime.numba import threads as numba_threads

    done: list[int] = []

    def part(start, stop):
        if start == 3:
            raise TypeError("part 3")
        time.sleep(0.002)
        done.append(start)

    with pytest.raises(TypeError, match="part 3"):
        numba_threads.run_shared(part, [(k, k + 1, ()) for k in range(8)], threads=2)
    running = list(done)
    time.sleep(0.05)
    assert done == running  # (nothing still running after the raise)
    assert 3 not in done and len(done) < 8
