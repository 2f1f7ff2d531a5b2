"""A loop's store into one place of an array it carries, made in place (frontend/loop_stores.py): a history of
time steps (`hist[t + 1] = u`, `pos_save[:, :, i + 1] = pos`). Each program is compared with NumPy running the
same function, on every device (only the numba device stores in place; the others run the body as traced)."""
from __future__ import annotations

import logging

import numpy as np
import pytest

import tracejit as tj
from reference import run_kernel
from test_loops import check, float_dtype


def history_rows(h, u, steps):   # a time step's state saved as a row
    for t in range(steps):
        u = u * 0.5 + 1
        h[t + 1] = u
    return h


def history_columns(h, u, steps, dt):   # the n-body idiom: the last axis is time, the save an in-place procedure
    for i in range(steps):
        u += dt * np.roll(u, 1)
        h[:, :, i + 1] = u


def history_and_energy(h, e, u, steps):   # two histories, one a 1-d array of scalars (KE_save[i + 1] = KE)
    for i in range(steps):
        u = np.sqrt(u + 1.0)
        h[i + 1, :] = u
        e[i + 1] = (u ** 2).sum()
    return h, e


def history_read_back(h, u, steps):   # the body reads the history it stores into: not in place, still right
    for t in range(1, steps):
        u = 0.5 * (u + h[t - 1])
        h[t] = u
    return h, u


def history_from_the_end(h, u, steps):   # negative positions count from the end, as in NumPy
    for t in range(steps):
        u = u + 1
        h[t - steps] = u
    return h


def history_in_a_while(h, u, tol):
    k = 0
    while np.abs(u).max() > tol:
        u = u * 0.5
        h[k] = u
        k += 1
    return h, k


def history_int(h, u, steps):
    for t in range(steps):
        u = u * 3 + 1
        h[t] = u
    return h


def test_a_history_of_rows_matches_numpy(device, rng):
    dt = float_dtype(device)
    check(history_rows, (np.zeros((9, 5), dt), rng.random(5).astype(dt), 8), device)


def test_a_history_along_the_last_axis_written_into_an_argument_matches_numpy(device, rng):
    dt = float_dtype(device)
    check(history_columns, (np.zeros((4, 3, 12), dt), rng.random((4, 3)).astype(dt), 11, 0.01), device)


def test_two_histories_one_of_scalars_match_numpy(device, rng):
    dt = float_dtype(device)
    check(history_and_energy, (np.zeros((7, 3), dt), np.zeros(7, dt), rng.random(3).astype(dt), 6), device)


def test_a_history_the_body_reads_matches_numpy(device, rng):
    dt = float_dtype(device)
    check(history_read_back, (rng.random((6, 4)).astype(dt), rng.random(4).astype(dt), 6), device)


def test_negative_positions_match_numpy(device, rng):
    dt = float_dtype(device)
    check(history_from_the_end, (np.zeros((8, 3), dt), rng.random(3).astype(dt), 5), device)


def test_a_history_in_a_while_matches_numpy(device, rng):
    dt = float_dtype(device)
    check(history_in_a_while, (np.zeros((40, 3), dt), rng.random(3).astype(dt) + 1, 1e-3), device)


def test_an_integer_history_matches_numpy(device):
    check(history_int, (np.zeros((6, 2), np.int32), np.array([1, 2], np.int32), 6), device)


def test_a_position_past_the_end_raises_numpys_index_error(device):
    dt = float_dtype(device)
    with pytest.raises(IndexError):
        run_kernel(tj.kernel(history_rows), np.zeros((4, 3), dt), np.ones(3, dt), 5, device=device)


def test_the_first_value_is_not_changed_when_it_is_also_returned(device, rng):
    dt = float_dtype(device)

    def keeps_the_first(h, u, steps):
        first = h.copy()
        for t in range(steps):
            u = u + 1
            first[t] = u
        return first, h

    check(keeps_the_first, (np.zeros((5, 2), dt), rng.random(2).astype(dt), 5), device)


def test_the_numba_device_stores_in_place_and_says_so(caplog):
    tj.set_debug(1)
    try:
        with caplog.at_level(logging.DEBUG, logger="tracejit"):
            h = np.zeros((4, 3, 21))
            tj.kernel(history_columns)(h, np.ones((4, 3)), 20, 0.01, device="numba")
    finally:
        tj.set_debug(0)
    assert any("stores into 1 carried array(s) in place" in r.getMessage() for r in caplog.records)
    expected = np.zeros((4, 3, 21))
    history_columns(expected, np.ones((4, 3)), 20, 0.01)
    np.testing.assert_allclose(h, expected, rtol=1e-12)


def history_made(u, steps):
    h = np.zeros((steps + 1, u.shape[0]))
    for t in range(steps):
        u = u * 0.5 + 1
        h[t + 1] = u
    return h


def test_a_captured_call_stores_as_traced(rng):
    f = tj.kernel(history_made)
    u = rng.random(5)
    with tj.capture() as graph:
        out = f(u, 8, device="numba")
    graph.replay()
    np.testing.assert_allclose(np.asarray(out), history_made(u, 8), rtol=1e-12)
    np.testing.assert_allclose(f(u, 8, device="numba"), history_made(u, 8), rtol=1e-12)


def places_of_two_axes(out, x, w):   # a convolution's output place by place: out[:, i, j, :] in two loops
    for i in range(out.shape[1]):
        for j in range(out.shape[2]):
            out[:, i, j, :] = (x[:, i, j, :, None] * w[None]).sum(axis=1) + i - 2 * j
    return out


def places_from_the_end(out, x, steps):   # out[i - steps, :, j - 1] = ...: negative positions on two axes
    for i in range(steps):
        for j in range(out.shape[2]):
            out[i - steps, :, j - 1] = x[i] * (j + 1)
    return out


def test_stores_into_a_place_of_several_axes_match_numpy_and_run_in_place(device, rng, caplog):
    dt = float_dtype(device)
    with caplog.at_level(logging.DEBUG, logger="tracejit"):
        check(places_of_two_axes, (np.zeros((2, 6, 7, 3), dt), rng.random((2, 6, 7, 4)).astype(dt),
                                   rng.random((4, 3)).astype(dt)), device)
    check(places_from_the_end, (np.zeros((6, 3, 9), dt), rng.random((5, 3)).astype(dt), 5), device)
    if device == "numba":
        assert any("in place" in r.getMessage() for r in caplog.records)
    with pytest.raises(IndexError):   # (a place past the end of either axis: NumPy's error)
        run_kernel(tj.kernel(places_from_the_end), np.zeros((4, 3, 9), dt), rng.random((5, 3)).astype(dt), 5,
                   device=device)


# --- stores through slices whose bounds are read when the kernel runs (numpy/bounded_slices.py) ---------------------

def covariance_rows(M, data):   # npbench's covariance: a column and a row from the index on, one value
    cov = np.zeros((M, M), dtype=data.dtype)
    for i in range(M):
        cov[i:M, i] = cov[i, i:M] = data[:, i] @ data[:, i:M] / 3.0
    return cov


def correlation_rows(M, data):   # npbench's correlation: past the diagonal, onto np.eye
    corr = np.eye(M, dtype=data.dtype)
    for i in range(M - 1):
        corr[i + 1:M, i] = corr[i, i + 1:M] = data[:, i] @ data[:, i + 1:M]
    return corr


# (each body below sums the columns of B, a whole array: it runs its kernels step by step, where the numba device
# makes its stores in place; without it, a loop over elements would run it, which stores in place anyway)

def tails_updated(x, B):   # x[i:] += v: a range of one axis, nothing picked
    for i in range(x.shape[0]):
        x[i:] += B.sum(axis=0)[i]
    return x


def empty_at_the_end(x, B):   # x[i:M] with i == M: an empty slice stores nothing
    M = x.shape[0]
    for i in range(M + 1):
        x[i:M] = x[i:M] * 0.5 + B.sum(axis=0)[i % M] + i
    return x


def windows_from_the_end(x, B):   # x[i - 3:i]: a negative start counts from the end (x[-2:1] is empty), as in NumPy
    for i in range(x.shape[0] + 2):
        x[i - 3:i] += B.sum(axis=0)[i % 2]
    return x


def clamped_past_the_end(x, B, n):   # x[i:i + n] reaches past the end: clamped, as NumPy clamps a slice
    for i in range(x.shape[0]):
        x[i:i + n] = x[i:i + n] + x[i] + B.sum(axis=0)[i]
    return x


def every_other(x, B):   # a step: not one of these stores (bounded_slices refuses it), still right
    for i in range(x.shape[0]):
        x[i::2] = x[i::2] + B.sum(axis=0)[i]
    return x


def columns_on(A, B):   # A[:, i:]: the range along the last axis, the first whole; a 0-d value broadcast
    for i in range(A.shape[1]):
        A[:, i:] -= B.sum(axis=0)[i]
        A[i, :i] = A[i, i] * 0.5
    return A


def row_read_after_column(A, B):   # the row read after the column was stored: read at its places, as stored
    for i in range(A.shape[0]):
        A[i:, i] = (B + i).sum(axis=0)[i:]
        A[i, i:] = A[i, i:] + A[i, :].sum()
    return A


def test_covariance_and_correlation_rows_match_numpy(device, rng):
    dt = float_dtype(device)
    data = rng.random((7, 6)).astype(dt)
    check(covariance_rows, (6, data), device)
    check(correlation_rows, (6, data), device)
    data = rng.random((11, 10)).astype(dt)  # (ten steps: on numba, bound once and run, frontend/bound_loops.py)
    check(covariance_rows, (10, data), device)
    check(correlation_rows, (10, data), device)


def test_a_range_of_one_axis_matches_numpy(device, rng):
    dt = float_dtype(device)
    check(tails_updated, (rng.random(9).astype(dt), rng.random((3, 9)).astype(dt)), device)
    check(tails_updated, (rng.random(5).astype(dt), rng.random((3, 5)).astype(dt)), device)  # (fewer steps than bound)
    check(tails_updated, (np.arange(9, dtype=np.int32), np.arange(27, dtype=np.int32).reshape(3, 9) - 3), device)


def test_empty_negative_and_clamped_ranges_match_numpy(device, rng):
    dt = float_dtype(device)
    check(empty_at_the_end, (rng.random(8).astype(dt), rng.random((2, 8)).astype(dt)), device)
    check(windows_from_the_end, (np.zeros(9, dt), rng.random((2, 9)).astype(dt)), device)
    check(windows_from_the_end, (np.zeros(9, np.int32), np.ones((2, 9), np.int32)), device)
    check(clamped_past_the_end, (rng.random(9).astype(dt), rng.random((2, 9)).astype(dt), 3), device)


def test_a_range_with_a_step_matches_numpy(device, rng):
    dt = float_dtype(device)
    check(every_other, (rng.random(7).astype(dt), rng.random((2, 7)).astype(dt)), device)


def test_ranges_along_either_axis_with_broadcast_values_match_numpy(device, rng):
    dt = float_dtype(device)
    check(columns_on, (rng.random((10, 9)).astype(dt), rng.random((2, 9)).astype(dt)), device)
    check(row_read_after_column, (rng.random((9, 9)).astype(dt), rng.random((2, 9)).astype(dt)), device)
    check(row_read_after_column, (rng.random((5, 5)).astype(dt), rng.random((2, 5)).astype(dt)), device)


def test_covariance_rows_are_stored_in_place_on_numba(rng, caplog):
    data = rng.random((9, 8))
    tj.set_debug(1)
    try:
        with caplog.at_level(logging.DEBUG, logger="tracejit"):
            got = tj.kernel(covariance_rows)(8, data, device="numba")
    finally:
        tj.set_debug(0)
    assert any("carried array(s) in place (2 stores)" in r.getMessage() for r in caplog.records)
    np.testing.assert_allclose(got, covariance_rows(8, data), rtol=1e-12)
