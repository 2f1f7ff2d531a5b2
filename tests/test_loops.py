"""Loops compiled as loops (numpy/loops.py, frontend/staged.py): the body traced once, its kernels run once per
step. Each program is written as NumPy code is written, run on every device, and compared with NumPy running the
same function; the compile counts show that the step count does not change what is compiled."""
from __future__ import annotations

import logging

import numpy as np
import pytest

import tracejit as tj
from reference import assert_close, run_kernel


def float_dtype(device: str):
    return np.float32 if device in ("webgpu", "metal") else np.float64


def tolerance(dt) -> float:
    return 1e-4 if dt == np.float32 else 1e-10


def check(f, args, device, rtol=None):
    """f run as a kernel on the device and by NumPy on copies of the same arguments: results and the arguments
    it assigned into, equal."""
    ours = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    theirs = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    got = run_kernel(tj.kernel(f), *ours, device=device)
    expected = f(*theirs)
    dts = [a.dtype for a in args if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    rtol = rtol if rtol is not None else tolerance(dts[0]) if dts else 1e-12
    if expected is None:
        assert got is None
    else:
        for g, e in zip(got if isinstance(expected, tuple) else (got,), expected if isinstance(expected, tuple) else (expected,)):
            g = np.asarray(g)
            assert g.dtype == np.asarray(e).dtype, (g.dtype, np.asarray(e).dtype)
            assert_close(g, e, rtol=rtol)
    for a, e in zip(ours, theirs):
        if isinstance(a, np.ndarray):
            assert_close(a, e, rtol=rtol)


def _loop_messages(caplog, f, *args) -> list[str]:
    """What TRACEJIT_DEBUG=1 says while f runs as a kernel on numba."""
    with caplog.at_level(logging.DEBUG, logger="tracejit"):
        run_kernel(tj.kernel(f), *args, device="numba")
    return [r.getMessage() for r in caplog.records]


# --- time steps ------------------------------------------------------------------------------------------------

def heat(u, steps, nu):   # a procedure: updates u in place, returns nothing
    for t in range(steps):
        u[1:-1] = u[1:-1] + nu * (u[2:] - 2 * u[1:-1] + u[:-2])


def wave(u, v, steps, dt):   # two arrays carried through in-place updates
    for n in range(steps):
        v[1:-1] += dt * (u[2:] - 2 * u[1:-1] + u[:-2])
        u[1:-1] += dt * v[1:-1]


def relax_copy(u, nt, c):   # CFD Python's idiom: a copy each step, the update reading the copy
    for n in range(nt):
        un = u.copy()
        u[1:] = un[1:] - c * (un[1:] - un[:-1])
    return u


def test_a_time_step_procedure_matches_numpy(device, rng):
    dt = float_dtype(device)
    check(heat, (rng.random(64).astype(dt), 200, 0.2), device)


def test_two_arrays_updated_in_place_each_step_match_numpy(device, rng):
    dt = float_dtype(device)
    check(wave, (rng.random(40).astype(dt), np.zeros(40, dt), 150, 0.1), device)


def test_a_copy_each_step_matches_numpy(device, rng):
    dt = float_dtype(device)
    check(relax_copy, (rng.random(50).astype(dt), 120, 0.3), device)


def test_10_and_10000_steps_compile_the_same_kernels():
    kernel = tj.kernel(heat)
    u = np.linspace(0, 1, 64)
    kernel(u.copy(), 10, 0.2)
    after_10 = kernel.cache_info()
    u2 = u.copy()
    kernel(u2, 10_000, 0.2)
    after_10000 = kernel.cache_info()
    assert after_10000["traces"] == after_10["traces"] == 1   # not specialised on the step count
    assert after_10000["compiles"] == after_10["compiles"]
    expected = u.copy()
    heat(expected, 10_000, 0.2)
    assert_close(u2, expected, rtol=1e-9)


def test_a_loop_compiled_as_a_loop_is_said_under_debug(caplog):
    tj.set_debug(1)
    try:
        with caplog.at_level(logging.DEBUG, logger="tracejit"):
            tj.kernel(heat)(np.ones(16), 100, 0.1)
    finally:
        tj.set_debug(0)
    assert any("compiled as a loop" in r.getMessage() and "test_loops.py" in r.getMessage() for r in caplog.records)


# --- element loops (the Numba idiom) ------------------------------------------------------------------------------

def edit_distance(a, b):
    n, m = a.shape[0], b.shape[0]
    D = np.zeros((n + 1, m + 1), np.int64)
    for i in range(n + 1):
        D[i, 0] = i
    for j in range(m + 1):
        D[0, j] = j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            D[i, j] = min(D[i - 1, j] + 1, D[i, j - 1] + 1, D[i - 1, j - 1] + cost)
    return D[n, m]


def recurrence(x, a, b):
    for i in range(1, x.shape[0]):
        x[i] = x[i - 1] * a[i] + b[i]
    return x


def dot_loop(x, y):   # an accumulator that starts as a Python number
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * y[i]
    return s


def count_positive(x):   # an int counter and a float sum in one loop
    k = 0
    total = 0.0
    for i in range(x.shape[0]):
        if x[i] > 0:
            k = k + 1
            total = total + x[i]
    return k, total


def test_an_edit_distance_table_matches_numpy(device, rng):
    a, b = rng.integers(0, 4, 9), rng.integers(0, 4, 11)
    if device in ("webgpu", "metal"):
        a, b = a.astype(np.int32), b.astype(np.int32)
        pytest.skip("np.int64's table (np.zeros(..., np.int64)) is not on this device")
    check(edit_distance, (a, b), device)


def test_a_first_order_recurrence_matches_numpy(device, rng):
    dt = float_dtype(device)
    check(recurrence, (rng.random(300).astype(dt), rng.random(300).astype(dt), rng.random(300).astype(dt)), device)


def test_an_accumulator_that_starts_as_a_python_number_matches_numpy(device, rng):
    dt = float_dtype(device)
    check(dot_loop, (rng.random(100).astype(dt), rng.random(100).astype(dt)), device)


def grid_sum(A):   # Numba's sum2d: a Python float that becomes float64 at the first step, in a loop nest
    result = 0.0
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            result += A[i, j]
    return result


def float32_products(x):   # s * x[i] computes in float32 while s is a Python float, in float64 once it is not
    s = 0.1
    for i in range(x.shape[0]):
        s = s + (x[i] * s).astype(np.float64)
    return s


def int8_counts(x):   # a Python int that becomes int8: wraps as int8 from the first step
    k = 0
    for i in range(x.shape[0]):
        k = k + x[i]
    return k


def test_a_python_float_accumulator_is_float64_from_the_first_step_of_a_loop_nest(device, rng, caplog):
    if device in ("webgpu", "metal"):
        pytest.skip("float64 results")
    check(grid_sum, (rng.random((6, 7)),), device)
    said = _loop_messages(caplog, grid_sum, rng.random((6, 7)))
    assert sum("is a loop over elements" in m for m in said) == 1, said   # (no first step of its own)


def test_a_python_number_that_promotion_treats_as_weak_keeps_its_first_step(device, rng):
    if device in ("webgpu", "metal"):
        pytest.skip("float64 and int64 values")
    x = rng.random(9).astype(np.float32)
    got = np.asarray(run_kernel(tj.kernel(float32_products), x.copy(), device=device))
    expected = float32_products(x.copy())
    assert got.dtype == np.float64 and got == expected, (got, expected)   # (bit for bit: the same operations)
    counts = np.array([100, 100, 3, -7], np.int8)
    with np.errstate(over="ignore"):
        expected = int8_counts(counts)
    got = np.asarray(run_kernel(tj.kernel(int8_counts), counts, device=device))
    assert got.dtype == expected.dtype == np.int8 and got == expected, (got, expected)


# --- loops of few steps: traced step by step (their steps fuse) unless a loop inside is compiled -------------------

def per_output_element(x, w):   # CS231n's conv_forward_naive's shape: short loops around loops over elements
    N, C, H, W = x.shape
    F, _, K, _ = w.shape
    out = np.zeros((N, F, H - K + 1, W - K + 1), x.dtype)
    for n in range(N):
        for f in range(F):
            for i in range(H - K + 1):
                for j in range(W - K + 1):
                    out[n, f, i, j] = np.sum(x[n, :, i:i + K, j:j + K] * w[f])
    return out


def stencil_taps(u, steps):   # short loops around a time loop, and short loops of taps inside it
    for k in range(2):
        for t in range(steps):
            v = np.zeros_like(u[1:-1])
            for d in range(3):
                v = v + u[d:u.shape[0] - 2 + d] * (d + k + 1)
            u[1:-1] = v / (6 + 3 * k)
    return u


def taps_of_taps(x):   # short loops in short loops: array work that fuses
    n = x.shape[0]
    acc = np.zeros(n - 2, x.dtype)
    for di in range(3):
        for dj in range(3):
            acc = acc + x[di:n - 2 + di] * (dj + 1)
    return acc


def test_a_short_loop_around_a_loop_over_elements_compiles_it_once(device, rng, caplog):
    dt = float_dtype(device)
    x, w = rng.random((2, 3, 8, 9)).astype(dt), rng.random((4, 3, 3, 3)).astype(dt)
    check(per_output_element, (x, w), device)
    said = _loop_messages(caplog, per_output_element, x, w)
    assert sum("is a loop over elements" in m for m in said) == 1, said   # (not one per step of n and f)
    assert sum("`for` compiled as a loop" in m for m in said) == 4, said


def test_a_short_loop_around_a_time_loop_compiles_as_a_loop_and_its_taps_fuse(device, rng, caplog):
    dt = float_dtype(device)
    check(stencil_taps, (rng.random(12).astype(dt), 5), device)
    said = _loop_messages(caplog, stencil_taps, rng.random(12), 5)
    assert sum("`for` compiled as a loop" in m for m in said) == 2, said   # k and t, not d


def test_short_loops_of_array_work_are_traced_step_by_step(device, rng, caplog):
    dt = float_dtype(device)
    check(taps_of_taps, (rng.random(10).astype(dt),), device)
    said = _loop_messages(caplog, taps_of_taps, rng.random(10))
    assert not any("`for` compiled as a loop" in m for m in said), said
    assert any("loop traced step by step (3 steps)" in m for m in said), said   # (di: its body holds a loop)


def test_a_short_loop_around_a_loop_on_its_index_is_traced_step_by_step(device, rng):
    def doubled(u):   # traced with k unknown, `u += 1` would be an error (the inner loop may run no step)
        for k in range(3):
            for _ in range(k + 1):
                u = u * 2
            u += 1
        return u
    check(doubled, (rng.random(5).astype(float_dtype(device)),), device)


def test_counters_and_sums_under_an_if_on_array_values_match_numpy(device, rng):
    dt = float_dtype(device)
    if device in ("webgpu", "metal"):
        pytest.skip("the counter is a Python int, int64 in NumPy: not on this device")
    check(count_positive, (rng.standard_normal(60).astype(dt),), device)


def bubble_sort(a):   # an `if` on array values whose branch assigns into the array
    n = a.shape[0]
    for i in range(n):
        for j in range(n - i - 1):
            if a[j] > a[j + 1]:
                a[j], a[j + 1] = a[j + 1], a[j]
    return a


def bellman_ford(n, src, dst, w, source):   # relaxations under an `if` on array values
    dist = np.full(n, np.inf)
    dist[source] = 0.0
    for _ in range(n - 1):
        for e in range(src.shape[0]):
            u, v = src[e], dst[e]
            if dist[u] + w[e] < dist[v]:
                dist[v] = dist[u] + w[e]
    return dist


def guarded_index(x, k):   # the untaken branch's index is out of bounds: NumPy never reads it
    i = k[0]
    if i < x.shape[0]:
        x[i] = -1.0
    else:
        x[0] = x[i - x.shape[0]] + 1
    return x


def test_a_bubble_sort_matches_numpy(device, rng):
    dt = float_dtype(device)
    check(bubble_sort, (rng.random(12).astype(dt),), device)


def test_bellman_ford_relaxations_match_numpy(device):
    if device in ("webgpu", "metal"):
        pytest.skip("np.full(n, np.inf) is float64")
    src, dst = np.array([0, 0, 1, 2, 3, 4, 1]), np.array([1, 2, 3, 3, 4, 5, 5])
    check(bellman_ford, (6, src, dst, np.array([1., 4., 2., 1., 3., 1., 9.]), 0), device)


def test_an_index_valid_only_in_the_branch_taken_raises_nothing(device):
    dt = float_dtype(device)
    for k in (2, 7):
        check(guarded_index, (np.arange(5, dtype=dt), np.array([k], np.int32)), device)


def guarded_expression(x, k):   # the side not taken would read outside the array: NumPy never reads it
    i = k[0]
    y = x[i] if i < x.shape[0] else -1.0
    return y + x[0]


def short_circuit(x, k):   # `and`/`or`: the right side runs only where Python would run it
    i = k[0]
    a = i < x.shape[0] and x[i] > 0.5
    b = i >= x.shape[0] or x[i] < 0.25
    return a, b


def count_while_and(x, t):   # a `while` whose test is an `and` that guards its index
    j = 0
    while j < x.shape[0] and x[j] < t:
        j += 1
    return j


def test_a_name_bound_only_in_a_branch_inside_a_loop_is_each_steps_own(device, rng):
    from corpus.loops import bubblesort   # Numba's example: `tmp` bound only in the branch, each step's own
    check(bubblesort, (rng.random(9).astype(float_dtype(device)),), device)


def test_a_conditional_expression_reads_only_the_side_taken(device):
    dt = float_dtype(device)
    for k in (2, 9):
        check(guarded_expression, (np.arange(5, dtype=dt) * 0.3, np.array([k], np.int32)), device)


def test_and_and_or_on_array_values_short_circuit_as_python(device):
    dt = float_dtype(device)
    x = np.array([0.1, 0.9, 0.3, 0.6], dt)
    for k in (0, 1, 3, 4, 7):
        check(short_circuit, (x, np.array([k], np.int32)), device)


def test_a_while_on_an_and_that_guards_its_index_matches_numpy(device, rng):
    if device in ("webgpu", "metal"):
        pytest.skip("the count is a Python int: int64")
    x = np.sort(rng.random(9))
    for t in (0.0, 0.5, 2.0):
        check(count_while_and, (x, t), device)


# --- bounds and tests read from arrays -------------------------------------------------------------------------------

def csr_matvec(indptr, indices, data, x):
    n = indptr.shape[0] - 1
    y = np.zeros(n, data.dtype)
    for i in range(n):
        for k in range(indptr[i], indptr[i + 1]):
            y[i] += data[k] * x[indices[k]]
    return y


def jacobi_until_converged(u, tol):
    err = 1.0
    while err > tol:
        un = u.copy()
        u[1:-1] = 0.5 * (un[2:] + un[:-2])
        err = np.abs(u - un).max()
    return u


def triangle(x):   # an inner bound that is the outer loop's index
    n = x.shape[0]
    out = np.zeros(n, x.dtype)
    for i in range(n):
        for j in range(i):
            out[i] += x[j]
    return out


def test_a_csr_matrix_vector_product_with_row_pointer_bounds_matches_numpy(device, rng):
    dense = rng.random((12, 10)) * (rng.random((12, 10)) < 0.3)
    indptr = np.concatenate([[0], np.cumsum((dense != 0).sum(1))]).astype(np.int32)
    indices = np.nonzero(dense)[1].astype(np.int32)
    dt = float_dtype(device)
    data = dense[dense != 0].astype(dt)
    x = rng.random(10).astype(dt)
    check(csr_matvec, (indptr, indices, data, x), device)
    assert_close(np.asarray(run_kernel(tj.kernel(csr_matvec), indptr, indices, data, x, device=device)),
                 dense.astype(dt) @ x, rtol=tolerance(dt))


def test_a_while_on_a_value_read_from_arrays_matches_numpy(device, rng):
    dt = float_dtype(device)
    u = np.zeros(20, dt)
    u[0], u[-1] = 1, 2
    check(jacobi_until_converged, (u, 1e-3), device)


def test_an_inner_bound_that_is_the_outer_index_matches_numpy(device, rng):
    dt = float_dtype(device)
    check(triangle, (rng.random(25).astype(dt),), device)


def test_a_zero_step_loop_with_bounds_from_an_array_leaves_its_values(device):
    def f(x, n):
        s = x * 1
        for i in range(n[0]):
            s = s + 1
        return s
    x = np.arange(4, dtype=np.float32)
    for count in (0, 3):
        got = run_kernel(tj.kernel(f), x, np.array([count], np.int32), device=device)
        assert_close(np.asarray(got), x + count)


# --- what a compiled loop must keep as Python would ------------------------------------------------------------------

def alias_update(u, steps):   # assigning through another name of the same array
    v = u
    for _ in range(steps):
        v[1:] = v[1:] + v[:-1]
    return u


def _update(a):
    a[:] = a * 0.5 + 1


def helper_mutates(u, steps):   # a helper that assigns into its argument
    for _ in range(steps):
        _update(u)
    return u


def index_after(x, n):
    for i in range(n):
        x = x + i
    return x, i


def grows_dtype(x, steps):   # an int array becomes float after the first step
    for _ in range(steps):
        x = x * 0.5
    return x


def test_assigning_through_an_alias_matches_numpy(device, rng):
    dt = float_dtype(device)
    check(alias_update, (rng.random(16).astype(dt), 7), device)


def test_a_helper_that_assigns_into_its_argument_matches_numpy(device, rng):
    dt = float_dtype(device)
    check(helper_mutates, (rng.random(16).astype(dt), 30), device)


def test_the_index_after_the_loop_is_its_last_value(device, rng):
    dt = float_dtype(device)
    if device in ("webgpu", "metal"):
        pytest.skip("the index is a Python int, int64 in NumPy: not on this device")
    check(index_after, (rng.random(5).astype(dt), 9), device)


def test_a_value_whose_dtype_changes_after_the_first_step_matches_numpy(device):
    if device in ("webgpu", "metal"):
        pytest.skip("float64 results")
    check(grows_dtype, (np.arange(6), 12), device)


def python_number_then_float32(x32, k):   # the first step meets float32 with what it computed from 0.0 in float64
    s = 0.0
    for i in range(k[0]):
        s = s * 0.5 + x32[i]
    return s


def python_number_compared_then_float32(x32, k):
    s = 0.1
    i = 0
    while i < k[0]:
        s = s + x32[i] if s > 0.1000000001 else s - x32[i]
        i += 1
    return s


def python_int_then_float(x, k):
    s = 0
    for i in range(k[0]):
        s = s + x[i:i + 2].sum()
    return s


def python_number_on_both_sides_of_an_if(u, v, k):   # test_fuzz_loops' find: either side is exact in float32
    s = 0.0
    for i in range(k[0]):
        if u[0] > v[0]:
            s = s + 1.0
        else:
            s = s - 0.5
        s = s + u.sum() * 0.01
    u += s


def test_a_python_number_a_loop_of_data_dependent_steps_makes_an_array_dtype_matches_numpy(device):
    """The loop's step count is read from arrays, so its first step cannot be traced apart: the Python number starts
    as the dtype its first step gives it, where that computes what NumPy computes (NEP 50)."""
    x32 = np.arange(1, 9, dtype=np.float32)
    k = np.array([5], np.int32)
    check(python_number_then_float32, (x32, k), device)
    check(python_number_compared_then_float32, (x32, k), device)
    dt = float_dtype(device)
    check(python_int_then_float, (np.arange(8).astype(dt), k), device)
    for u0 in (5.0, -5.0):
        u = np.arange(4, dtype=np.float32) + u0
        check(python_number_on_both_sides_of_an_if, (u, np.zeros(4, np.float32), k), device)


def test_a_python_number_whose_first_step_differs_in_the_arrays_dtype_is_a_clear_error():
    """s = 1e40, then s / 1e10 + x32[i]: NumPy computes 1e40 / 1e10 in float64 and meets float32 with 1e30;
    starting as float32 would give inf. Where the step count is known the first step is traced apart; where it is
    read from arrays, the loop is refused, naming the line and what to do, never a silent difference."""
    def far(x32, k):
        s = 1e40
        for i in range(k[0]):
            s = s / 1e10 + x32[i]
        return s

    x32 = np.ones(4, np.float32)
    with pytest.raises(tj.UnsupportedError, match=r"gives it that dtype.*np\.float32\(1e40\)"):
        tj.kernel(far)(x32, np.array([3]))
    check(lambda x32, n: far(x32, np.array([n])), (x32, 3), "numba")


def test_assigning_into_a_name_that_is_an_argument_or_a_new_array_by_the_data_is_an_error():
    """After a loop whose step count is read from arrays, `u` is the argument where it ran no step and a new
    array otherwise; after an `if` on array values, the same. NumPy's `u += 1` then changes the caller's array
    only sometimes: a clear error, never a silent difference."""
    def after_loop(u, k):
        for i in range(k[0]):
            u = u * 2
        u += 1

    def after_if(u, v):
        if v.sum() > 0:
            u = u * 2
        u += 1

    def chosen(u, v):
        w = u if v.sum() > 0 else v
        w[0] = 5
    with pytest.raises(tj.AssignmentError, match="`u` after the loop .* only sometimes"):
        tj.kernel(after_loop)(np.ones(3), np.array([0]))
    with pytest.raises(tj.AssignmentError, match="`u` after the `if`"):
        tj.kernel(after_if)(np.ones(3), np.ones(3))
    with pytest.raises(tj.AssignmentError, match="conditional expression"):
        tj.kernel(chosen)(np.ones(3), np.ones(3))

    def maybe_rebound(u, v, n):   # every step may `continue` before v is bound again (found by the fuzzer)
        for i in range(n):
            if v[1] < 0:
                continue
            v = v * 0.75 + u * 0.25
        v[::2] *= 0.5
    with pytest.raises(tj.AssignmentError, match="`v` after the loop .* may still be the array"):
        tj.kernel(maybe_rebound)(np.ones(8), -np.ones(8), 5)


def test_a_name_rebound_in_a_loop_of_known_steps_may_be_assigned_into_after_it(device, rng):
    def f(u, steps):
        for i in range(steps):
            u = u * 0.5
        u += 1
        return u
    dt = float_dtype(device)
    check(f, (rng.random(6).astype(dt), 9), device)


def test_a_loop_that_appends_to_a_list_is_traced_step_by_step(device, rng):
    def rnn(x, w, steps):
        states = []
        h = x
        for t in range(steps):
            h = np.tanh(h * w)
            states.append(h)
        return np.stack(states)
    dt = float_dtype(device)
    check(rnn, (rng.random(8).astype(dt), rng.random(8).astype(dt), 6), device)


def test_a_slice_bound_from_the_index_is_traced_step_by_step(device, rng):
    def forward_substitution(L, b):
        n = b.shape[0]
        x = np.zeros_like(b)
        for i in range(n):
            x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]
        return x
    dt = float_dtype(device)
    L = np.tril(rng.random((10, 10))).astype(dt) + np.eye(10, dtype=dt) * 2
    check(forward_substitution, (L, rng.random(10).astype(dt)), device, rtol=1e-3 if dt == np.float32 else 1e-9)


def test_random_draws_in_a_loop_differ_from_step_to_step():
    @tj.kernel
    def draws(x, steps):
        out = np.zeros((steps, x.shape[0]))
        for t in range(steps):
            out[t] = x + np.random.random(x.shape[0])
        return out
    got = draws(np.zeros(4), 6)
    assert len({tuple(row) for row in got}) == 6


def converge(u, maxiter, tol):   # the convergence loop: a for over the iteration budget with a break
    for it in range(maxiter):
        un = u.copy()
        u[1:-1] = 0.5 * (un[2:] + un[:-2])
        if np.abs(u - un).max() < tol:
            break
    return u, it


def first_negative(x):   # a search: the index after the break
    found = -1
    for i in range(x.shape[0]):
        if x[i] < 0:
            found = i
            break
    return found


def positives(x):   # continue, and the loop's else (run when no break stopped it)
    s = x[0] * 0
    for i in range(x.shape[0]):
        if x[i] < 0:
            continue
        s = s + x[i]
    else:
        s = s * 2
    return s


def test_a_convergence_loop_with_break_compiles_and_stops_where_numpy_does(device):
    dt = float_dtype(device)
    u = np.zeros(16, dt)
    u[-1] = 1
    if device in ("webgpu", "metal"):
        pytest.skip("the iteration count is a Python int, int64 in NumPy: not on this device")
    check(converge, (u, 400, 1e-3), device)


def test_break_at_the_first_step_and_at_none(device):
    if device in ("webgpu", "metal"):
        pytest.skip("the index is a Python int, int64 in NumPy: not on this device")
    dt = float_dtype(device)
    for x in ([-1, 2, 3], [3, -1, 2], [1, 2, 3]):
        check(first_negative, (np.array(x, dt),), device)


def test_continue_and_for_else_match_numpy(device, rng):
    dt = float_dtype(device)
    check(positives, (rng.standard_normal(10).astype(dt),), device)


def grow_until(x):   # a while with a break and an else
    c = np.zeros(1, np.int32)
    while c[0] < 10:
        c = c + 1
        if x[c[0] % 4] > 0.5:
            break
        x = x * 1.5
    else:
        x = x - 100
    return x, c


def test_a_while_with_break_and_else_matches_numpy(device):
    dt = float_dtype(device)
    for x in ([0.1, 0.2, 0.3, 0.4], [0.1, 0.9, 0.3, 0.4], [-1, -1, -1, -1]):
        check(grow_until, (np.array(x, dt),), device)


def test_a_break_in_a_loop_compiles_as_a_loop(caplog):
    tj.set_debug(1)
    try:
        with caplog.at_level(logging.DEBUG, logger="tracejit"):
            tj.kernel(converge)(np.zeros(8), 50, 1e-3)
    finally:
        tj.set_debug(0)
    assert any("compiled as a loop" in r.getMessage() for r in caplog.records)


def test_a_bound_read_from_arrays_in_a_loop_that_cannot_be_compiled_is_a_clear_error():
    def f(x, n):
        for i in range(1, n[0]):
            x[i] = x[:i].mean()   # the slice's length as a number: only a loop traced step by step can do this
        return x
    with pytest.raises(tj.UnsupportedError, match="bounds are read from arrays.*length is not known"):
        tj.kernel(f)(np.ones(3), np.array([2]))


def test_a_slice_bounded_by_an_index_read_from_arrays_is_assigned_through(device, rng):
    def f(x, n):
        for i in range(n[0]):
            x[:i] += 1
            x[i:] *= 0.5
        return x
    dt = float_dtype(device)
    check(f, (rng.random(6).astype(dt), np.array([4], np.int32)), device)


def test_a_while_whose_carried_dtype_changes_is_a_clear_error():
    def f(x):
        y = np.arange(3)
        while x.sum() < 10:
            x = x + 1
            y = y * 0.5
        return x, y
    with pytest.raises(tj.UnsupportedError, match="changes the dtype or shape of `y`"):
        tj.kernel(f)(np.ones(3))


def test_a_kernel_with_a_compiled_loop_is_captured_step_by_step():   # (every device: test_capture.py)
    @tj.kernel
    def steps(u, n):
        for t in range(n):
            u = u * 0.5 + 1
        return u
    with tj.capture() as g:
        g.outputs = steps(np.ones(4), 20)
    u = np.arange(4.0)
    assert_close(g(u), steps.__wrapped__(u, 20))


def test_the_graph_ir_prints_each_loop_body():
    text = str(tj.kernel(heat).trace(np.ones(8), 50, 0.1))
    assert "loop (for@test_loops.py" in text and "body of the for loop" in text


def test_np_ndarray_of_a_shape_allocates_as_np_empty(device, rng):
    def rows(x, n):
        out = np.ndarray((n, x.shape[0]), dtype=x.dtype)
        for i in range(n):
            out[i] = x * i
        return out
    dt = float_dtype(device)
    check(rows, (rng.random(5).astype(dt), 7), device)


def test_lower_without_the_hardware_renders_the_parts_and_bodies():
    """f.lower(..., device="cuda") on a machine without a GPU (and tj.warm): each part and loop body rendered."""
    plan = tj.kernel(heat).lower(tj.spec((64,), np.float32), 100, 0.1, device="cuda")
    assert plan.kernels and all("__global__" in k.source for k in plan.kernels)


# --- slices bounded by the loop's index ------------------------------------------------------------------------------

def trisolv(L, x, b):   # npbench's: the row's slice up to the index, a dot product of two such slices
    for i in range(x.shape[0]):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]


def lu_inner(A):   # npbench's LU: slices bounded by both loops' indices
    for i in range(A.shape[0]):
        for j in range(i):
            A[i, j] -= A[i, :j] @ A[:j, j]
            A[i, j] /= A[j, j]
        for j in range(i, A.shape[0]):
            A[i, j] -= A[i, :i] @ A[:i, j]


def right_looking(A):   # an LU written with column slices below the pivot, updated in place
    n = A.shape[0]
    for k in range(n - 1):
        A[k + 1:, k] /= A[k, k]
        A[k + 1:, k + 1:] -= np.outer(A[k + 1:, k], A[k, k + 1:])
    return A


def prefix_means(x):   # a use whose value depends on the slice's length: the loop is traced step by step
    out = np.zeros_like(x)
    for i in range(1, x.shape[0]):
        out[i] = x[:i].mean()
    return out


def test_a_triangular_solve_with_index_bounded_slices_is_one_compiled_loop(device, rng, caplog):
    dt = float_dtype(device)
    L = np.tril(rng.random((20, 20))).astype(dt) + 20 * np.eye(20, dtype=dt)
    check(trisolv, (L, np.zeros(20, dt), rng.random(20).astype(dt)), device)


def test_lu_with_index_bounded_slices_matches_numpy(device, rng):
    dt = float_dtype(device)
    check(lu_inner, (rng.random((9, 9)).astype(dt) + 9 * np.eye(9, dtype=dt),), device)


def test_a_use_that_needs_the_slice_length_is_traced_step_by_step(device, rng):
    dt = float_dtype(device)
    check(prefix_means, (rng.random(12).astype(dt),), device)
    check(right_looking, (rng.random((7, 7)).astype(dt) + 7 * np.eye(7, dtype=dt),), device)


def masked_elimination(A):   # the loop index compared with an int32 array (np.where on the rows below k)
    n = A.shape[0]
    for k in range(n - 1):
        A = A - np.outer(np.where(np.arange(n, dtype=np.int32) > k, A[:, k] / A[k, k], 0), A[k])
    return A


def test_the_index_compared_with_an_int32_array_stays_a_compiled_loop_on_every_device(device, rng, caplog):
    # (its bounds are known while tracing: the comparison is made in int32, which webgpu and metal have)
    dt = float_dtype(device)
    with caplog.at_level(logging.DEBUG, logger="tracejit"):
        check(masked_elimination, (rng.random((12, 12)).astype(dt) + 12 * np.eye(12, dtype=dt),), device)
    said = [r.getMessage() for r in caplog.records]
    assert any("compiled as a loop" in m for m in said) and not any("step by step" in m for m in said), said


def test_slice_bounds_do_not_specialise_the_kernel():
    kernel = tj.kernel(trisolv)
    for n in (30, 31):   # (a new shape: a new plan; the loop is one compiled loop each time)
        L = np.tril(np.ones((n, n))) + n * np.eye(n)
        x, expected = np.zeros(n), np.zeros(n)
        kernel(L, x, np.ones(n))
        trisolv(L, expected, np.ones(n))
        assert_close(x, expected, rtol=1e-12)
    assert kernel.cache_info()["traces"] == 2


# --- loops over an array itself: its rows or elements, enumerate and zip of them (loops.for_each) -----------------

def columns_scaled(A):   # for over A.T: its columns
    out = np.zeros(A.shape[1])
    for j, col in enumerate(A.T, start=1):
        out[j - 1] = col.max() * j
    return out


def pairs_with_a_range(x, y):   # zip of a range and two arrays
    s = 0.0
    for i, a, b in zip(range(3, 100), x, y):
        s += i * a - b
    return s


def zip_with_a_list(x):   # a Python list cannot be read at a traced position: the steps are traced one by one
    weights = [0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5]
    s = 0.0
    for w, v in zip(weights, x):
        s = s + w * v
    return s


def last_item(x):   # the item's name read after the loop: the last item
    s = 0.0
    for v in x:
        s += v
    return s + v


def over_a_dict(x):   # any other iterable: Python iterates it
    for name, scale in {"a": 2.0, "b": 0.5, "c": 3.0}.items():
        x = x * scale + (name == "b")
    return x


def first_negative_row(A):   # a break in a loop over rows
    found = -1
    for i, row in enumerate(A):
        if row.min() < 0:
            found = i
            break
    return found


def skip_rows(A, x):   # a continue in a loop over zip of rows and elements
    total = np.zeros(A.shape[1], A.dtype)
    for row, v in zip(A, x):
        if v < 0.5:
            continue
        total += row * v
    return total


@pytest.mark.parametrize(
    "program",
    [columns_scaled, pairs_with_a_range, zip_with_a_list, last_item, over_a_dict, first_negative_row, skip_rows],
)
def test_loops_over_arrays_enumerate_and_zip_match_numpy(device, rng, program):
    dt = np.float32 if device in ("webgpu", "metal") else np.float64
    args = (rng.random((9, 6)).astype(dt),) if program is columns_scaled else (rng.random(12).astype(dt),)
    if program is pairs_with_a_range:
        args = (rng.random(12).astype(dt), rng.random(12).astype(dt))
    if program is first_negative_row:
        args = (rng.random((12, 4)).astype(dt),)
        args[0][7, 2] = args[0][9, 0] = -1.0   # (rows 7 and 9: the break at 7)
    if program is skip_rows:
        args = (rng.random((12, 4)).astype(dt), rng.random(12).astype(dt))
    try:
        check(program, args, device)
    except tj.DtypeError:   # (the Python-int counter or float64 total: webgpu and metal have no 64-bit types)
        assert device in ("webgpu", "metal")


def test_a_loop_over_an_array_compiles_as_a_loop(caplog, rng):
    with caplog.at_level(logging.DEBUG, logger="tracejit"):
        check(columns_scaled, (rng.random((30, 40)),), "numba")
    said = [r.getMessage() for r in caplog.records]
    assert any("compiled as a loop" in m for m in said) and not any("step by step" in m for m in said), said


# --- loops over np.ndindex: the positions of a shape in C order, compiled as nested range loops are ---------------

def each_position(a, w):   # an index tuple into arrays, its parts as numbers
    out = np.empty_like(a)
    for pos in np.ndindex(a.shape):
        out[pos] = a[pos] * w[pos[-1]] + sum(pos)
    return out


def neighbours_in_a_box(a, w):   # positions of two shapes, nested; a tuple of wrapped indices
    result = np.zeros_like(a)
    for pos in np.ndindex(*a.shape):
        for offset in np.ndindex((3, 3)):
            at = tuple((p + o - 1) % n for p, o, n in zip(pos, offset, a.shape))
            result[pos] += a[at] * w[offset[0]]
    return result


def started_already(a, w):   # an ndindex Python has started iterating: the rest, as Python iterates it
    it = np.ndindex(a.shape)
    first = next(it)
    total = a[first] * 0
    for pos in it:
        total = total + a[pos]
    return total


def until_a_negative(a, w):   # a break
    found = (-1, -1)
    for pos in np.ndindex(a.shape):
        if a[pos] < 0:
            found = pos
            break
    return np.array(found)


@pytest.mark.parametrize("program", [each_position, neighbours_in_a_box, started_already, until_a_negative])
def test_loops_over_ndindex_match_numpy(device, rng, program):
    dt = np.float32 if device in ("webgpu", "metal") else np.float64
    a, w = rng.random((5, 4)).astype(dt) - 0.1, rng.random(4).astype(dt)
    try:
        check(program, (a, w), device)
    except tj.DtypeError:   # (an array of the index tuple's Python ints is int64, which webgpu cannot hold)
        assert device == "webgpu" and program is until_a_negative


def test_a_loop_over_ndindex_compiles_as_a_loop(caplog, rng):
    with caplog.at_level(logging.DEBUG, logger="tracejit"):
        check(neighbours_in_a_box, (rng.random((30, 40)), rng.random(3)), "numba")
    said = [r.getMessage() for r in caplog.records]
    assert any("compiled as a loop" in m for m in said) and not any("step by step" in m for m in said), said
    assert np.ndindex is not tj.numpy.allocation.NDIndex   # (NumPy's own again after the trace)


def test_a_loop_over_an_empty_array_leaves_its_name_unbound_as_python_does():
    def program(x):
        for v in x:
            pass
        return x + v

    with pytest.raises(NameError):   # (UnboundLocalError in Python: a NameError)
        tj.kernel(program)(np.zeros(0))
    with pytest.raises(NameError):
        program(np.zeros(0))


def test_a_loop_over_a_0d_array_raises_pythons_type_error():
    def program(x):
        s = x * 0
        for v in x.sum():
            s = s + v
        return s

    with pytest.raises(TypeError, match="0-d"):
        tj.kernel(program)(np.ones(3))


# --- windows: slices along several axes whose bounds move with the index but whose lengths are constants -----------

def local_means(A):   # a 3 x 3 window around each interior point (bounded_slices.windows)
    n, m = A.shape
    out = np.zeros((n - 2, m - 2), A.dtype)
    for i in range(1, n - 1):
        for j in range(1, m - 1):
            out[i - 1, j - 1] = A[i - 1:i + 2, j - 1:j + 2].mean()
    return out


def test_windows_that_move_with_the_loop_indices_match_numpy(device, rng):
    A = rng.random((9, 7)).astype(np.float32 if device in ("webgpu", "metal") else np.float64)
    try:
        check(local_means, (A,), device)
    except tj.DtypeError:   # (the loops' Python-int indices: int64, which webgpu and metal lack)
        assert device in ("webgpu", "metal")


def test_a_window_past_the_end_of_an_axis_is_a_clear_error(rng):
    def whole(A):
        out = np.zeros(A.shape)
        for i in range(A.shape[0]):
            for j in range(A.shape[1]):
                out[i, j] = A[i - 1:i + 2, j - 1:j + 2].sum()   # NumPy: shorter windows at the edges
        return out

    with pytest.raises(IndexError, match="reaches past the ends of an axis"):
        tj.kernel(whole)(rng.random((6, 6)))


def neighbour_columns(A):   # the loop index and its neighbours pick columns and rows
    n = A.shape[0]
    s = np.zeros(n, A.dtype)
    for k in range(1, n - 1):
        s = s + A[:, k - 1] * A[k + 1] - A[:, k]
    return s


def one_column_too_far(A):
    s = np.zeros(A.shape[0], A.dtype)
    for k in range(A.shape[1]):
        s = s + A[:, k + 1]   # k + 1 reaches the axis's size at the last step: NumPy's IndexError
    return s


def test_picks_by_the_loop_index_inside_the_axis_are_not_checked_and_others_still_raise(device, rng):
    # (the index is clamped to its bounds in the body's programs, so lowering proves k - 1, k, k + 1 inside the
    # axis: no error record to read after each step; webgpu, without int64 to clamp in, keeps the checks)
    dt = float_dtype(device)
    A = rng.standard_normal((12, 12)).astype(dt)
    check(neighbour_columns, (A,), device)
    text = tj.kernel(neighbour_columns).explain(A, device=device)
    if device != "webgpu":
        assert "0 synchronisation(s)" in text and "for loop at test_loops.py:" in text, text
    with pytest.raises(IndexError, match="index 12 is out of bounds for axis 1 with size 12"):
        run_kernel(tj.kernel(one_column_too_far), A, device=device)


def smooth_then_project(u, w, b, steps):   # a time loop, then a dense layer whose weight is broadcast over rows
    for _ in range(steps):
        u = 0.5 * u + 0.25 * (np.roll(u, 1, axis=1) + np.roll(u, -1, axis=1))
    return np.maximum(u, 0).reshape(u.shape[0], -1) @ w.T + b, (u[:, :, None] * w.T[None]).sum(1)


def test_a_product_after_a_loop_reads_its_weight_as_a_view_not_a_broadcast_copy(device, rng):
    """What the part after a loop reads of the part before it (w.T broadcast over the rows of u) is the weight
    itself, viewed there: on numba the product is a BLAS call, not a sum over a copied 3-d broadcast."""
    dt = float_dtype(device)
    args = (rng.standard_normal((64, 64)).astype(dt), rng.standard_normal((32, 64)).astype(dt),
            rng.standard_normal(32).astype(dt), 12)   # (131,072 multiply-adds: a BLAS call on numba)
    check(smooth_then_project, args, device)
    if device == "numba":
        names = [k.name for k in tj.kernel(smooth_then_project).lower(*args, device="numba").kernels]
        assert sum("matmul" in n for n in names) == 2, names


def products_along_kept_axes(A, B, x, out, rows):   # one operand sliced along an axis the product keeps, per step
    n = A.shape[0]
    for i in range(n):
        out[0, i:n] = x @ A[:, i:n]
        out[1, :i] = A[:i, :] @ x
        out[2, i:] = 2.0 * (x @ A[:, i:]) + out[2, i:]
        rows[i:, :] = A[i:, :] @ B + rows[i:, :] * 0.5
    return out, rows


def test_a_product_of_a_slice_along_a_kept_axis_and_a_whole_array_compiles_and_matches_numpy(device, rng, caplog):
    dt = float_dtype(device)
    args = (rng.standard_normal((12, 12)).astype(dt), rng.standard_normal((12, 4)).astype(dt),
            rng.standard_normal(12).astype(dt), np.zeros((3, 12), dt), np.ones((12, 4), dt))
    with caplog.at_level(logging.DEBUG, logger="tracejit"):
        check(products_along_kept_axes, args, device)
    assert any("compiled as a loop" in r.getMessage() for r in caplog.records)


def flips_of_bounded_slices(x, A, out, rows):   # np.flip of slices the index bounds, along their axis and others
    n = x.shape[0]
    for k in range(1, n):
        out[:k] += np.flip(x[:k]) * 0.5
        out[k] = np.dot(np.flip(x[k - 1:n - 1]), out[k - 1:n - 1]) * 0.01
        rows[:, k:] = np.flip(A[:, k:], axis=0) + np.flip(rows[:, k:], axis=-1) * 0.25 + np.flip(A[:, k:]) * 0.5
    return out, rows


def test_np_flip_of_a_slice_the_index_bounds_compiles_and_matches_numpy(device, rng, caplog):
    dt = float_dtype(device)
    args = (rng.standard_normal(11).astype(dt), rng.standard_normal((4, 11)).astype(dt), np.zeros(11, dt),
            np.ones((4, 11), dt))
    with caplog.at_level(logging.DEBUG, logger="tracejit"):
        check(flips_of_bounded_slices, args, device)
    assert any("compiled as a loop" in r.getMessage() for r in caplog.records)


def gather_by_row_columns(indptr, indices, data, x):   # spmv: a row's columns a slice, x gathered by them
    y = np.zeros(indptr.shape[0] - 1, data.dtype)
    for i in range(indptr.shape[0] - 1):
        cols = indices[indptr[i]:indptr[i + 1]]
        y[i] = data[indptr[i]:indptr[i + 1]] @ x[cols] + x[cols].sum()
    return y


def test_an_array_indexed_by_a_slice_of_positions_compiles_matches_numpy_and_raises_as_numpy(device, rng):
    dt = float_dtype(device)
    indptr = np.array([0, 2, 2, 5, 9], np.int64)
    indices = rng.integers(-6, 6, 9)   # (negative positions count from the end, as NumPy's)
    data, x = rng.standard_normal(9).astype(dt), rng.standard_normal(6).astype(dt)
    check(gather_by_row_columns, (indptr, indices, data, x), device)
    bad = indices.copy()
    bad[6] = 6   # (a row's column outside x)
    with pytest.raises(IndexError):
        gather_by_row_columns(indptr, bad, data, x)
    with pytest.raises(IndexError):
        run_kernel(tj.kernel(gather_by_row_columns), indptr, bad, data, x, device=device)


def windows_with_new_axes(x, w):   # npbench's conv2d: windows of two axes the indices move, a new axis after them
    K = w.shape[0]
    out = np.empty((x.shape[0], x.shape[1] - K + 1, x.shape[2] - K + 1, w.shape[3]), dtype=x.dtype)
    for i in range(x.shape[1] - K + 1):
        for j in range(x.shape[2] - K + 1):
            out[:, i, j, :] = np.sum(x[:, i:i + K, j:j + K, :, np.newaxis] * w[np.newaxis, :, :, :], axis=(1, 2, 3))
    return out + x[None, :, 1:2, 0, None, None].sum()


def test_windows_the_indices_move_with_new_axes_compile_and_match_numpy(device, rng, caplog):
    dt = float_dtype(device)
    args = (rng.standard_normal((3, 9, 8, 2)).astype(dt), rng.standard_normal((3, 3, 2, 4)).astype(dt))
    with caplog.at_level(logging.DEBUG, logger="tracejit"):
        check(windows_with_new_axes, args, device)
    assert sum("compiled as a loop" in r.getMessage() for r in caplog.records) >= 2


# --- windows of constant length from the index -------------------------------------------------------------------


def windowed(E, w, os, n):   # numpy-benchmarks' cma_pt: X = E[:, i*os:i*os+ntaps], times whole arrays
    out = np.zeros(n, (E[:1, :1] * w[:1, :1]).dtype)
    for i in range(n):
        X = E[:, i * os:i * os + w.shape[1]]
        out[i] = np.sum(X * np.conj(w))
        w = w + 0.01 * X
    return out, w


@pytest.mark.parametrize("kind", ["real", "complex"])
def test_windows_inside_the_axis_for_every_step_compile_with_whole_arrays(device, rng, caplog, kind):
    """A slice of constant length whose start the index makes, inside its axis for every step the loop takes
    (known while tracing), is that many places: arithmetic with whole arrays (and complex values) takes it as an
    array of known shape, so the loop compiles (its last step ends exactly at the axis' end)."""
    dt = float_dtype(device)
    E, w = rng.random((2, 45)).astype(dt), rng.random((2, 5)).astype(dt)
    if kind == "complex":
        cdt = np.complex64 if dt == np.float32 else np.complex128
        E, w = (E + 1j * rng.random(E.shape)).astype(cdt), (w - 0.5j).astype(cdt)
    check(windowed, (E, w, 2, 21), device, rtol=1e-4 if dt == np.float32 else 1e-9)
    said = _loop_messages(caplog, windowed, E, w, 2, 21)
    assert any("`for` compiled as a loop" in m for m in said), said
    # (the first trace meets `os` as a slice bound: it is traced again with `os` a number before the loop would run
    # step by step, python_numbers.Specialise)
    assert not any("loop traced step by step (21 steps)" in m for m in said), said
