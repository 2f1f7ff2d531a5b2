"""Threads making the first call to a new kernel at once: one trace and one compile per signature, and
every thread gets NumPy's answer (a module half-imported by one thread was seen by another)."""
from __future__ import annotations

import os
import threading

import numpy as np

import tracejit as tj
from reference import assert_close

THREADS = 8
TRIALS = int(os.environ.get("TRACEJIT_THREAD_TRIALS", "3"))


def test_threads_calling_a_new_kernel_at_once_trace_it_once_and_agree_with_numpy(device, rng):
    x = rng.random((64, 300)).astype(np.float32)
    expected = np.exp(x - x.max(-1, keepdims=True)).sum(-1)
    for trial in range(TRIALS):
        # a new kernel (and a new generated module) per trial: the race is on the first call
        kernel = tj.kernel(eval(f"lambda x: np.exp(x - x.max(-1, keepdims=True)).sum(-1) + {trial} * 0"))
        barrier = threading.Barrier(THREADS)
        results: list = [None] * THREADS

        def call(i: int) -> None:
            barrier.wait()
            try:
                results[i] = np.asarray(kernel(x, device=device))
            except Exception as e:  # noqa: BLE001 - reported below, per thread
                results[i] = e

        threads = [threading.Thread(target=call, args=(i,)) for i in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for r in results:
            assert not isinstance(r, Exception), f"trial {trial}: a thread raised {r!r}"
            assert_close(r, expected)
        assert kernel.cache_info()["traces"] == 1, kernel.cache_info()


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
