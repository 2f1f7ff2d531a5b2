"""A `for` loop's steps run from launches bound once on the numba device (frontend/bound_loops.py): the same
results as NumPy for carried arrays and Python numbers, an error raised from the step where it happens, stores in
place, and the steps run one by one where binding does not apply (few steps, a profile, a break)."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from test_loops import check, float_dtype


def relax(u, b, steps):   # arrays carried, one read unchanged, a Python number carried
    s = 0.0
    for t in range(steps):
        un = u.copy()
        u[1:-1] = 0.5 * (un[2:] + un[:-2]) - 0.1 * b[1:-1]
        u[0] = u[1]
        s = s + u.sum() * t
    return u, s


def picks(x, idx, steps):   # the index picks a value that another array says: checked at each step
    acc = np.zeros(3)
    for t in range(steps):
        acc = acc + x[idx[t]]
    return acc


def index_math(a, steps):   # the index itself in the arithmetic, and a history stored in place
    h = np.zeros((steps, a.shape[0]))
    for i in range(steps):
        a = a * 0.9 + i
        h[i] = a
    return h, a


def stops(u, steps):
    for t in range(steps):
        u = u * 0.5
        if u.max() < 0.01:
            break
    return u


@pytest.mark.parametrize("steps", (0, 1, 7, 8, 9, 40))
def test_steps_run_bound_match_numpy(device, rng, steps):
    dt = float_dtype(device)
    check(relax, (rng.random(30).astype(dt), rng.random(30).astype(dt), steps), device)
    check(index_math, (rng.random(4).astype(dt), steps), device)


def test_an_error_from_a_step_is_numpys(device, rng):
    x = rng.random((5, 3))
    idx = np.arange(20) % 5
    check(picks, (x, idx, 20), device)
    idx[13] = 7
    with pytest.raises(IndexError):
        picks(x, idx, 20)
    with pytest.raises(IndexError):
        tj.kernel(picks)(x, idx, 20, device=device)


def test_a_break_and_a_profile_run_the_steps_one_by_one(rng):
    check(stops, (rng.random(10) + 1, 30), "numba")
    f = tj.kernel(relax)
    u, b = rng.random(30), rng.random(30)
    with tj.profile() as prof:
        got = f(u.copy(), b, 20, device="numba")
    expected = relax(u.copy(), b, 20)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-12)
    assert prof is not None


def test_the_index_of_a_narrow_int_loop_fits(rng):
    # a loop past int32's range: the kernels take the index as int64, the steps run bound or one by one alike
    def shifted(a, start, stop):
        for i in range(start, stop):
            a = a + (i - start)
        return a

    check(shifted, (np.zeros(3), 2**31 - 5, 2**31 + 10), "numba")


def test_the_numba_device_runs_these_loops_bound(monkeypatch, rng):
    from tracejit.frontend import bound_loops

    ran = []
    original = bound_loops.run

    def counting(*args):
        out = original(*args)
        ran.append(out is not None)
        return out

    monkeypatch.setattr(bound_loops, "run", counting)
    check(relax, (rng.random(30), rng.random(30), 40), "numba")
    check(index_math, (rng.random(4), 40), "numba")   # (its history stored in place, as a launch of its own)
    assert ran == [True, True]


def inner_runs(u, b, outer, inner):   # an inner loop run again at each outer step, from new first values
    total = np.zeros_like(u)
    for t in range(outer):
        v = u * (t + 1)
        for q in range(inner):
            v = 0.5 * (np.roll(v, 1) + np.roll(v, -1)) + b * q
        total += v
    return total


def test_an_inner_loop_run_at_every_outer_step_matches_numpy(device, rng):
    dt = float_dtype(device)
    check(inner_runs, (rng.random(16).astype(dt), rng.random(16).astype(dt), 6, 12), device)


def test_calls_on_several_threads_each_get_their_own_steps(rng):
    import threading

    f = tj.kernel(inner_runs)
    inputs = [(rng.random(16), rng.random(16)) for _ in range(6)]
    f(*inputs[0], 3, 12, device="numba")
    results: dict = {}

    def call(k):
        for _ in range(20):
            results[k] = f(*inputs[k], 5, 12, device="numba")

    threads = [threading.Thread(target=call, args=(k,)) for k in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, (u, b) in enumerate(inputs):
        np.testing.assert_allclose(results[k], inner_runs(u, b, 5, 12), rtol=1e-12)
