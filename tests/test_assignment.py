"""Assignment inside kernels (issue 16 item 3): t[key] = v, augmented operators, boolean masks, views that
write through to their base, arguments changed for the caller, aliasing hazards, ufunc out=. Each body runs
once through tracejit and once as NumPy on copies of the same arguments; the result and every argument
afterwards must agree, values and dtypes."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from reference import assert_close, random_array, run_kernel

import tracejit as tj


def check_writes(body, *args, device, **static):
    """body as a kernel and as NumPy, each on its own copies of args: the results and the arguments after
    the call must match (NumPy arrays are written back on every device)."""
    mine = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    theirs = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    result = run_kernel(tj.kernel(body, static=tuple(static)), *mine, device=device, **static)
    expected = body(*theirs, **static)
    assert_close(_host(result), expected)
    for i, (m, t) in enumerate(zip(mine, theirs)):
        if isinstance(t, np.ndarray):
            assert_close(m, t, what=f"argument {i} after the call")
    return result


def _host(result):
    if isinstance(result, tuple):
        return tuple(_host(r) for r in result)
    return result.numpy() if isinstance(result, tj.Array) else result


# ---- basic indices: ints, slices with steps (negative too), None, ... --------------------------------

def stores(x, v):
    out = np.empty_like(x)
    out[...] = 0
    out[0] = v[0]                  # a row
    out[1, ::2] = 7                # a scalar over a strided slice
    out[1, 1::2] = v[1, ::-2]      # negative step on the right-hand side
    out[2, ::-1] = v[2]            # a reversed destination
    out[-1, -3:] = v[0, :3] * 2    # negative indices
    out[2:, None, 1] = v[2:, 0, None]   # None in both
    out[..., 0] += 1               # ... and an augmented store
    return out


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8", "int64", "float16"])
def test_basic_index_stores_match_numpy(device, rng, dtype):
    x = random_array(rng, (4, 6), dtype, low=0, high=50)
    check_writes(stores, x, random_array(rng, (4, 6), dtype, low=0, high=50), device=device)


def test_stores_with_steps_larger_than_one_in_two_dimensions(device, rng):
    def body(x, v):
        out = np.zeros((7, 9), x.dtype)
        out[1::3, ::-4] = v           # a (2, 3) region: steps 3 and -4
        out[::2, 1:8:3] += x[:4, :3]
        return out
    check_writes(body, rng.random((4, 3), np.float32), rng.random((2, 3), np.float32), device=device)


@pytest.mark.parametrize("flag", [True, False])
def test_a_zero_d_boolean_mask_stores_everywhere_or_nowhere(device, rng, flag):
    """x[np.True_] = v writes all of x, x[np.False_] = v none of it (a 0-d mask, as the array API's tests use)."""
    def body(x, m, v):
        x[m] = v
        x[0][m] = -1.0
        return x * 2

    x = rng.standard_normal((3, 4)).astype(np.float32)
    check_writes(body, x, np.array(flag), rng.standard_normal(4).astype(np.float32), device=device)


def test_values_broadcast_and_cast_as_numpy_setitem(device):
    def body(i, f):
        i[0] = 2.7                 # a Python float into ints truncates
        i[1] = f[1]                # float array values too
        i[2, :] = [1, 2, 3]        # a list broadcast
        i[3] = np.ones((1, 1, 3))  # leading length-1 axes are dropped
        f[:, 0] = True
        return i, f
    check_writes(body, np.zeros((4, 3), np.int32), np.linspace(-2.5, 2.5, 12, dtype=np.float32).reshape(4, 3),
                 device=device)


def test_zero_size_regions_and_zero_d_arrays(device):
    def body(x, s, e):
        x[2:2] = 7                 # an empty region: nothing happens
        s[...] = x.sum()           # a 0-d argument written
        e[:] = 1                   # an empty argument
        return s * 2
    check_writes(body, np.arange(5, dtype=np.float32), np.array(3, np.float32), np.zeros((0, 2), np.float32),
                 device=device)


# ---- augmented operators: NumPy's in-place ufuncs, cast back 'same_kind' -------------------------------

def test_augmented_operators_on_regions_of_integers(device):
    def body(a, b):
        a[1:, ::2] += b[:-1, ::2]
        a[0] *= 3
        a[:, -1] -= 1
        a[1] //= 3
        a[2] %= 4
        a[3, 1:] **= 2
        a[:, 1] &= 6
        a[:, 2] |= 1
        a[:, 0] ^= 5
        a[1:3] <<= 1
        a[2:] >>= 1
        return a
    a = np.arange(1, 21, dtype=np.int32).reshape(4, 5)
    check_writes(body, a, (a * 7 + 3) % 11, device=device)


def test_augmented_operators_on_floats_and_matmul(device, rng):
    def body(x, w):
        x[::2] /= 4
        x -= x.mean()
        x[1] **= 2
        x @= w
        return x
    check_writes(body, rng.random((4, 4), np.float32), rng.random((4, 4), np.float32), device=device)


def test_a_float_result_into_an_int_array_is_a_casting_type_error():
    with pytest.raises(tj.CastingError, match="same_kind") as e:
        tj.kernel(lambda a: a[1:].__iadd__(1.5)).trace(np.zeros(3, np.int64))
    assert isinstance(e.value, TypeError)

    def body(a):
        a[1:] += 1.5
        return a
    with pytest.raises(TypeError):   # NumPy: UFuncTypeError, a TypeError too
        body(np.zeros(3, np.int64))
    with pytest.raises(tj.CastingError, match="Cannot cast ufunc 'add' output from dtype\\('float64'\\)"):
        tj.kernel(body)(np.zeros(3, np.int64))


# ---- views: written through to their base, and they see writes into it -------------------------------

def test_views_write_through_to_the_argument_and_see_its_writes(device):
    def body(x):
        row = x[0]
        row[:] = 5                 # changes x
        later = x[1:]              # a view taken now, read after the writes below
        x.T[-1] = 7                # through a transpose
        x.reshape(-1)[1] = 9       # through a reshape (a view of contiguous data)
        flat = x.T.reshape(-1)     # NumPy copies here: writing it leaves x alone
        flat[0] = 100
        x[2] += 1
        return later + 1, flat, row * 1
    check_writes(body, np.arange(12, dtype=np.float32).reshape(3, 4), device=device)


def test_views_of_arrays_made_in_the_kernel_and_views_of_views(device):
    def body(a):
        out = np.zeros((4, 6), a.dtype)
        inner = out[1:-1, 1:-1]
        corner = inner[:1, ::-1]
        corner[...] = a[0, :4]
        inner += 1
        col = out[:, 2]
        col *= 3
        return out, corner + 0, np.swapaxes(out, 0, 1)[0]
    check_writes(body, np.arange(8, dtype=np.float32).reshape(2, 4), device=device)


def test_numpy_functions_that_return_views_write_through(device):
    def body(x):
        a, b = np.unstack(x)
        a[0] = 5
        c, d = np.split(x, 2, axis=1)
        d[...] = -1
        np.moveaxis(x, 0, 1)[0, 1] = 9
        np.flip(x, axis=1)[0, 0] = 3
        np.expand_dims(x, 0)[0, 1, 1] = 4
        return x * 1, c + 0
    check_writes(body, np.arange(8, dtype=np.float32).reshape(2, 4), device=device)


def test_an_element_read_by_index_is_a_copy_and_a_zero_d_view_is_not(device):
    def body(x):
        e = x[0, 1]                # a NumPy scalar: a copy
        e += 10
        v = x[0, 1, ...]           # a 0-d view
        v += 100
        return e, x
    check_writes(body, np.arange(6, dtype=np.float32).reshape(2, 3), device=device)


def test_writing_a_broadcast_view_is_refused_as_numpy_refuses():
    def body(x):
        b = np.broadcast_to(x, (3, 4))
        b[0] = 1
        return b
    with pytest.raises(ValueError, match="read-only"):
        body(np.zeros(4))
    with pytest.raises(tj.AssignmentError, match="read-only.*broadcast"):
        tj.kernel(body).trace(np.zeros(4))


# ---- arguments changed for the caller; aliasing hazards --------------------------------------------

def test_assigned_arguments_change_for_the_caller_and_later_reads_see_it(device, rng):
    def body(x, y):
        x[1:] += 1
        y *= 2                     # all of y, elementwise: written in place
        return x.sum() + y[0]
    check_writes(body, rng.random(6, np.float32), rng.random((2, 3), np.float32), device=device)


def test_reads_of_elements_that_are_written_see_the_old_values(device):
    def body(x, y, z):
        x[1:] = x[:-1]             # NumPy copies the right-hand side first
        y[::-1] = y
        z[...] = z.T               # a transposed read of the array written
        return x
    check_writes(body, np.arange(6, dtype=np.int32), np.arange(5, dtype=np.float32),
                 np.arange(9, dtype=np.float32).reshape(3, 3), device=device)


def test_non_contiguous_arguments_are_written_through_their_strides(device):
    def body(x, y):
        x[:] = x * 10
        y[0] = -1
        return x
    base = np.arange(12, dtype=np.float32)
    tbase = base.reshape(3, 4).copy()
    mine_x, mine_y = base.copy(), tbase.copy()
    run_kernel(tj.kernel(body), mine_x[::2], mine_y.T[::-1], device=device)
    body(base[::2], tbase.T[::-1])
    assert_close(mine_x, base)
    assert_close(mine_y, tbase)


def test_device_arrays_are_updated_in_place(device, rng):
    if device == "numba":
        pytest.skip("tj.Arrays on numba are NumPy arrays: the other tests cover them")

    def body(x):
        x[::2] = -x[::2]
        x += 1
        return x * 2
    host = rng.random(8, np.float32)
    arr = tj.asarray(host, device=device)
    result = run_kernel(tj.kernel(body), arr, device=device)
    expected = body(host)
    assert_close(result.numpy(), expected)
    assert_close(arr.numpy(), host)


def test_a_read_only_argument_is_refused_as_numpy_refuses(device):
    def body(x):
        x[0] = 1
        return x + 1
    ro = np.zeros(3, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        body(ro)
    f = tj.kernel(body)
    with pytest.raises(tj.AssignmentError, match="read-only"):     # while tracing, at the line
        f(ro, device=device)
    run_kernel(f, np.zeros(3, np.float32), device=device)
    with pytest.raises(tj.AssignmentError, match="read-only"):     # a compiled plan checks it too
        f(ro, device=device)


def test_an_assigned_argument_sharing_memory_with_another_is_refused():
    def body(x, y):
        x[...] = 1
        return y + 0
    a = np.zeros(4, np.float32)
    with pytest.raises(tj.UnsupportedError, match="shares memory"):
        tj.kernel(body)(a, a[::-1])
    tj.kernel(body)(a[:2], a[2:])   # disjoint parts of one array are fine
    np.testing.assert_array_equal(a, [1, 1, 0, 0])


# ---- boolean masks -----------------------------------------------------------------------------------

def test_boolean_mask_assignment(device, rng):
    def body(x, y, z):
        x[x < 0] = 0                       # ReLU
        m = y > 0.5
        y[m] += 1
        y[~m] = y[~m] ** 2 + 1             # a function of the same selection
        z[z[:, 0] > 0] = [7, 8, 9]         # a mask of the leading axis, one row of values
        z[np.array([True, False, True, False])] *= 2
        return x
    check_writes(body, rng.standard_normal(7).astype(np.float32), rng.random((3, 4), np.float32),
                 rng.standard_normal((4, 3)).astype(np.float32), device=device)


def masked_reductions(x, m, rows):   # mask-and-reduce over the selected particles, as it is written
    return (x[m].sum(), x[m].mean(), np.max(x[m]), x[m].min(), x[m].std(ddof=1), (x[m] > 1).any(),
            np.mean(x[rows], axis=0), x[rows].max(axis=0, keepdims=True), x[m].sum() / x[m].size,
            (x * 10).astype(np.int32)[m].sum())


def test_reductions_of_a_masked_selection_match_numpy(device, rng):
    dt = np.float32 if device in ("webgpu", "metal") else np.float64
    x = rng.standard_normal((9, 4)).astype(dt)
    m, rows = x > 0.3, x[:, 0] > -0.5
    got = run_kernel(tj.kernel(masked_reductions), x, m, rows, device=device)
    for g, e in zip(got, masked_reductions(x, m, rows)):
        if device in ("webgpu", "metal") and np.asarray(e).dtype.itemsize == 8:
            continue   # (the int32 sum is int64 in NumPy: not held there)
        assert np.asarray(g).dtype == np.asarray(e).dtype
        assert_close(np.asarray(g), np.asarray(e), rtol=1e-5 if dt == np.float32 else 1e-12)


def test_the_max_of_an_empty_selection_raises_numpys_error(device):
    x = np.arange(6, dtype=np.float32)
    with pytest.raises(ValueError, match="zero-size array to reduction operation maximum which has no identity"):
        run_kernel(tj.kernel(lambda x: x[x > 10].max()), x, device=device)
    assert np.isnan(np.asarray(run_kernel(tj.kernel(lambda x: x[x > 10].mean()), x, device=device)))


def test_a_graph_whose_sizes_the_data_decides_is_refused_by_trace_alone():
    # (a call reads the count: tests/test_data_sizes.py)
    x = np.arange(6.0)
    with pytest.raises(tj.UnsupportedError, match="depends on the data.*call it"):
        tj.kernel(lambda x: x[x > 2].cumsum()).trace(x)
    with pytest.raises(tj.UnsupportedError, match="depends on the data"):
        tj.kernel(lambda x: x[x[:, 0] > 2].sum(axis=1)).trace(x.reshape(3, 2))
    with pytest.raises(tj.UnsupportedError, match="depends on the data"):
        tj.kernel(lambda x, v: x.__setitem__(x > 2, v) or x).trace(x, np.ones(3))
    with pytest.raises(IndexError, match="boolean index did not match"):
        tj.kernel(lambda x: x.__setitem__(np.ones(5, bool), 0) or x).trace(x)


def test_integer_array_indices_in_assignments_and_ufunc_at_write_through(device, rng):
    def body(x, y, i):
        x[i] = 7                    # a repeated index: its last write
        x[i[:2]] += 1               # buffered, as NumPy: a repeated index adds once
        row = y[1]
        row[i] = -1                 # through a view
        np.add.at(y[0], i, 10)      # every duplicate, into a view of an argument
        return x.sum()
    i = np.array([0, 3, 3, 1], np.int32)
    check_writes(body, rng.random(5, np.float32), rng.random((2, 5), np.float32), i, device=device)


def test_values_numpy_refuses_to_store_are_refused_the_same_way():
    with pytest.raises(OverflowError):
        tj.kernel(lambda x: x.__setitem__(0, 300) or x).trace(np.zeros(3, np.uint8))
    with pytest.raises(ValueError, match="NaN"):
        tj.kernel(lambda x: x.__setitem__(0, float("nan")) or x).trace(np.zeros(3, np.int32))
    with pytest.raises(ValueError, match="could not broadcast input array from shape \\(2,\\) into shape \\(3,\\)"):
        tj.kernel(lambda x, v: x.__setitem__(slice(None), v) or x).trace(np.zeros(3), np.zeros(2))


# ---- arrays made in the kernel, out= of ufuncs, copyto, fill ----------------------------------------

def test_arrays_made_with_np_zeros_take_traced_values(device, rng):
    def body(a):
        n = a.shape[0]
        u = np.zeros((n + 2, n + 2), dtype=np.float32)
        inner = u[1:-1, 1:-1]
        inner[:] = 1.0
        u[n // 2 - 1:n // 2 + 1, :2] = 0.5
        inner += 0.25 * a
        t = np.full((n,), a[0, 0])
        t.fill(3)
        e = np.empty(3)        # what np.empty holds is unspecified: filled before it is read, as real code does
        e[:] = 2.5
        return u, t, np.ones(3) + e
    check_writes(body, rng.random((4, 4), np.float32), device=device)


def test_ufunc_out_writes_into_arrays_and_views(device, rng):
    def body(a, b, c):
        np.add(a, b, out=c)
        np.multiply(a[1:-1], 2, out=c[1:-1])
        np.negative(a, out=a, where=a > 0.5)
        np.copyto(b, 1.5, where=b < 0.5)
        d = np.empty_like(a)
        np.subtract(a, b, out=d)
        return d
    check_writes(body, rng.random(6, np.float32), rng.random(6, np.float32), np.zeros(6, np.float32), device=device)


def test_out_of_numpy_functions(device, rng):
    def body(a, s, c, j):
        np.sum(a, axis=0, out=s)                   # reductions: out of the result's shape
        np.clip(a[0], 0.25, 0.75, out=c)
        np.concatenate([a[0], a[1]], out=j)
        a.max(axis=1, out=c[:2])
        return a
    check_writes(body, rng.random((2, 3), np.float32), np.zeros(3, np.float32), np.zeros(3, np.float32),
                 np.zeros(6, np.float32), device=device)


def test_ufunc_out_follows_numpys_casting_rule():
    with pytest.raises(tj.CastingError, match="same_kind"):
        tj.kernel(lambda a, c: np.add(a, 1.5, out=c)).trace(np.zeros(3), np.zeros(3, np.int32))
    with pytest.raises(tj.UnsupportedError, match="out= must be a traced array"):
        table = np.zeros(3)
        tj.kernel(lambda a: np.add(a, 1, out=table)).trace(np.zeros(3))


# ---- fusion ----------------------------------------------------------------------------------------

def test_stores_into_a_new_array_are_one_kernel(device, rng):
    def interleave(a, b):
        out = np.empty_like(a)
        out[..., ::2] = a[..., ::2] * 2
        out[..., 1::2] = b[..., 1::2] + 1
        return out
    a, b = rng.random((8, 16), np.float32), rng.random((8, 16), np.float32)
    assert len(tj.kernel(interleave).lower(a, b, device=device).kernels) == 1
    check_writes(interleave, a, b, device=device)


def test_iterated_stencil_updates_are_one_kernel_per_step(rng):
    def steps(u, n):
        for _ in range(n):
            u[1:-1, 1:-1] += 0.1 * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4 * u[1:-1, 1:-1])
        return u.sum()
    f = tj.kernel(steps, static=("n",))
    u = rng.random((16, 16), np.float32)
    assert len(f.lower(u, n=5).kernels) <= 6   # each step reads its predecessor at 5 places: one buffer per step
    check_writes(steps, u, device="numba", n=5)


# ---- capture ------------------------------------------------------------------------------------------

def test_capture_refuses_kernels_that_assign_into_their_arguments(device):
    f = tj.kernel(lambda x: x.__iadd__(1))
    with pytest.raises(tj.UnsupportedError, match="capture"), tj.capture():
        f(np.zeros(3, np.float32), device=device)


def test_np_zeros_is_numpys_own_outside_the_tracing_thread():
    started, checked, seen = threading.Event(), threading.Event(), {}
    original = np.zeros

    def body(x):
        started.set()
        checked.wait(10)
        u = np.zeros(3)
        seen["inside"] = type(u)
        u[0] = x[0]
        return u

    def elsewhere():
        started.wait(10)
        seen["other thread"] = type(np.zeros(3))
        checked.set()

    thread = threading.Thread(target=elsewhere)
    thread.start()
    traced = tj.kernel(body).trace(np.ones(3))
    thread.join()
    assert seen == {"inside": tj.Tensor, "other thread": np.ndarray}
    assert np.zeros is original
    assert "value 1 is written into argument" not in str(traced)


def test_the_printed_graph_and_warm_name_the_arguments_written():
    def body(x, y):
        y[0] = x.sum()
        return x * 2
    f = tj.kernel(body)
    assert "value 1 is written into argument 1" in str(f.trace(np.ones(3), np.zeros(2)))
    assert tj.warm(f, tj.spec((3,), "float32"), tj.spec((2,), "float32")).ok


def test_an_argument_of_another_device_is_written_back_to_it():
    others = [d.name for d in tj.devices() if d.available and d.name != "numba"]
    if not others:
        pytest.skip("needs a second device")

    def body(x):
        x[::2] = 7
        return x * 1
    host = np.arange(6, dtype=np.float32)
    arr = tj.asarray(host, device=others[0])
    tj.kernel(body)(arr, device="numba")             # computed on numba from a host copy, written back
    body(host)
    assert_close(arr.numpy(), host)


def test_a_python_loop_over_fixed_positions_lowers_to_code_linear_in_its_length(device):
    """numpy-benchmarks' exponential smoothing: every s[i] = ... tested each earlier store's padding at
    run time, O(n^2) code that took Numba 20 s to compile at n = 20. Positions known at trace time are
    decided there now."""
    def smoothing(x, alpha):
        s = x.copy()
        for i in range(1, len(x)):
            s[i] = alpha * x[i] + (1 - alpha) * s[i - 1]
        return s

    x, alpha = np.random.default_rng(3).random(48).astype(np.float32), np.float32(0.4)
    f = tj.kernel(smoothing)
    assert_close(run_kernel(f, x, alpha, device=device), smoothing(x, alpha))
    lines = sum(len(k.source.splitlines()) for k in f.lower(x, alpha, device=device).kernels)
    assert lines < 12 * len(x), lines


# --- x[i] for a traced i: NumPy's view, a copy in the trace ----------------------------------------------------------

def through_a_picked_row(force, which, plunk):   # the wave benchmark's `force[which][1] += plunk`
    force[which][1] += plunk
    return force


def row_update(x, k, v):   # x[i] -= v, i read from an array: Python stores the result back into x[i]
    x[k[0]] -= v
    return x


def through_a_row_read_from_data(x, k):
    x[k[0]][1] = 5.0
    return x


def test_a_write_through_x_i_for_an_int_argument_i_changes_x(device, rng):
    f = rng.random((5, 2)).astype(np.float32)
    expected = through_a_picked_row(f.copy(), 3, 2.0)
    assert_close(np.asarray(run_kernel(tj.kernel(through_a_picked_row), f.copy(), 3, 2.0, device=device)), expected)


def test_an_augmented_assignment_to_x_i_for_an_index_read_from_data_matches_numpy(device, rng):
    x, v = rng.random((4, 3)).astype(np.float32), rng.random(3).astype(np.float32)
    k = np.array([2], np.int32)
    assert_close(np.asarray(run_kernel(tj.kernel(row_update), x.copy(), k, v, device=device)),
                 row_update(x.copy(), k, v))


def test_a_write_into_x_i_for_an_index_read_from_data_changes_x(device, rng):
    """NumPy's x[i][1] = 5 writes into x through the view x[i]: so does the kernel (x[i, 1] = 5)."""
    x = rng.random((4, 3)).astype(np.float32)
    k = np.array([1], np.int32)
    expected = through_a_row_read_from_data(x.copy(), k)
    assert_close(np.asarray(run_kernel(tj.kernel(through_a_row_read_from_data), x.copy(), k, device=device)), expected)


def row_then_array(A):   # row = A[i]; A changes; row shows the change (a view), and row's writes reach A
    n = A.shape[0]
    out = np.zeros(n, A.dtype)
    for i in range(n):
        row = A[i]
        A[i, 2] = 5.0
        row[0] = row[2] + 1
        out[i] = row[2] + A[i, 0]
    return out, A


def each_row(A):   # for row in A: row[j] = ... writes into A
    for row in A:
        row[0] = row[1] * 2 + row[0]
    return A


@pytest.mark.parametrize("program", [row_then_array, each_row])
def test_a_row_picked_by_a_loop_index_is_a_view_both_ways(device, rng, program):
    if device in ("webgpu", "metal"):
        pytest.skip("the loop's index is a Python int: int64")
    A = rng.random((7, 3))
    expected, ours = program(A.copy()), run_kernel(tj.kernel(program), A.copy(), device=device)
    for e, g in zip(expected if isinstance(expected, tuple) else (expected,), ours if isinstance(ours, tuple) else (ours,)):
        assert_close(np.asarray(g), e)


def drift(pos, vel, dt, steps):   # row = pos[i]; row += ...: NumPy's row is a view, so pos changes
    for _ in range(steps):
        for i in range(pos.shape[0]):
            p = pos[i]
            p += vel[i] * dt
    return pos


def test_an_in_place_update_of_a_row_picked_by_a_loop_index_changes_the_array(device, rng):
    """The loop index is traced, so pos[i] is a copy in the trace; its in-place update is written back into
    pos (it was lost: the result was pos unchanged)."""
    dt = np.float32 if device in ("webgpu", "metal") else np.float64
    if device in ("webgpu", "metal"):
        pytest.skip("the loop's index is a Python int: int64")
    pos, vel = rng.random((6, 3)).astype(dt), rng.random((6, 3)).astype(dt)
    expected = drift(pos.copy(), vel, 0.1, 4)
    assert_close(np.asarray(run_kernel(tj.kernel(drift), pos.copy(), vel, 0.1, 4, device=device)), expected)
