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
