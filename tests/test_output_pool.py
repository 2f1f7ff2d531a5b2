"""Large results on the numba device reuse the memory of results the caller dropped (runtime/numba/output_pool.py):
never the memory of one still reachable, through any view."""
import gc
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import tracejit as tj
from tracejit.errors import ArgumentError
from tracejit.runtime.numba.output_pool import MIN_BYTES, OutputPool

N = MIN_BYTES // 4 * 2   # float32 elements: a result twice the pool's smallest


@tj.kernel
def affine(x, z):
    return 2 * x + 3 * z + 1


@tj.kernel
def exp_and_sum(x):
    y = np.exp(x)
    return y, y * 2


def test_a_dropped_result_s_memory_serves_the_next_result_and_values_stay_right(rng):
    x, z = rng.standard_normal(N, np.float32), rng.standard_normal(N, np.float32)
    expected = 2 * x + 3 * z + 1
    first = affine(x, z)
    address = first.ctypes.data
    assert not first.flags.owndata and first.flags.writeable and first.flags.c_contiguous
    del first
    second = affine(x, z)
    assert second.ctypes.data == address   # the same block, pages already mapped
    np.testing.assert_array_equal(second, expected)
    assert second.dtype == expected.dtype


def test_a_result_reachable_through_a_view_is_never_reused(rng):
    x, z = rng.standard_normal(N, np.float32), rng.standard_normal(N, np.float32)
    expected = 2 * x + 3 * z + 1
    view = affine(x, z)[::7]            # only a strided view of the result survives
    kept = view.copy()
    gc.collect()
    results = [affine(x, z * 0) for _ in range(3)]
    for r in results:
        assert not np.shares_memory(r, view)
    np.testing.assert_array_equal(view, kept)
    np.testing.assert_array_equal(view, expected[::7])
    assert len({r.ctypes.data for r in results}) == 3   # all alive at once: three blocks


def test_results_kept_in_a_list_never_share_memory(rng):
    x = rng.standard_normal(N, np.float32)
    outs = [exp_and_sum(x) for _ in range(4)]
    arrays = [a for pair in outs for a in pair]
    for i, a in enumerate(arrays):
        for b in arrays[i + 1:]:
            assert not np.shares_memory(a, b)
    y = np.exp(x)
    for a, b in outs:
        np.testing.assert_allclose(a, y, rtol=1e-6)
        np.testing.assert_allclose(b, y * 2, rtol=1e-6)


def test_small_results_are_numpy_s_own_arrays(rng):
    x = rng.standard_normal(1000, np.float32)
    assert affine(x, x).flags.owndata


def test_results_in_a_reference_cycle_come_back_when_collected(rng):
    pool = tj.device("numba").outputs
    x = rng.standard_normal(N, np.float32)
    gc.collect()
    pool.release()

    class Holder:
        pass
    h = Holder()
    h.me, h.result = h, affine(x, x)
    del h
    gc.collect()
    assert pool.held_bytes == N * 4
    assert tj.device("numba").stats()["pool_bytes"] == N * 4
    assert pool.release() == N * 4 and pool.held_bytes == 0


def test_the_pool_keeps_at_most_its_limit_dropping_the_oldest():
    pool = OutputPool(limit=3 * MIN_BYTES)
    arrays = [pool.empty((MIN_BYTES // 8,), np.float64) for _ in range(5)]
    addresses = [a.ctypes.data for a in arrays]
    while arrays:   # dropped in the order they were made (`del arrays` would drop the last first)
        arrays.pop(0)
    assert pool.held_bytes == 3 * MIN_BYTES            # the first two dropped
    again = [pool.empty((MIN_BYTES // 8,), np.float64) for _ in range(3)]
    assert sorted(a.ctypes.data for a in again) == sorted(addresses[2:])
    bigger = pool.empty((4 * MIN_BYTES,), np.uint8)     # larger than the limit: used, never kept
    del bigger
    assert pool.held_bytes == 0


def test_blocks_are_reused_by_size_in_bytes_whatever_the_shape_and_dtype():
    pool = OutputPool(limit=1 << 30)
    a = pool.empty((256, 1024), np.float32)
    address = a.ctypes.data
    del a
    b = pool.empty((512, 256), np.float64)
    assert b.ctypes.data == address and b.shape == (512, 256) and b.dtype == np.float64
    c = pool.empty((512, 256), np.float64)
    assert c.ctypes.data != address


def test_a_limit_of_zero_turns_the_pool_off(monkeypatch):
    monkeypatch.setenv("TRACEJIT_OUTPUT_POOL", "0")
    pool = OutputPool()
    a = pool.empty((MIN_BYTES,), np.uint8)
    assert a.flags.owndata
    del a
    assert pool.held_bytes == 0
    monkeypatch.setenv("TRACEJIT_OUTPUT_POOL", "64M")
    assert OutputPool().limit == 64 << 20


def test_a_bad_pool_size_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("TRACEJIT_OUTPUT_POOL", "lots")
    with pytest.raises(ArgumentError, match="TRACEJIT_OUTPUT_POOL='lots'.*512M"):
        OutputPool()


def test_threads_calling_at_once_get_results_of_their_own(rng):
    x = rng.standard_normal(N, np.float32)
    expected = 2 * x + 3 * x + 1
    failures = []

    def work(seed):
        z = np.full(N, seed, np.float32)
        for _ in range(20):
            r = affine(x, z)
            if not np.array_equal(r, 2 * x + 3 * z + 1):
                failures.append(seed)
    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    np.testing.assert_array_equal(affine(x, x), expected)


def test_the_pool_is_off_in_a_process_with_the_variable_set():
    code = ("import numpy as np, tracejit as tj\n"
            "x = np.ones(1 << 20, np.float32)\n"
            "f = tj.kernel(lambda x: x + 1)\n"
            "r = f(x); assert r.flags.owndata and (r == 2).all()\n"
            "del r; assert tj.device('numba').stats()['pool_bytes'] == 0\n")
    env = {**os.environ, "TRACEJIT_OUTPUT_POOL": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
