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
