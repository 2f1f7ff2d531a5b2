"""Scatter against NumPy on every device: tj.set_at (the value of x[idx] = v, last write wins), np.add.at
and the other ufunc.at methods (every duplicate accumulated), np.bincount(minlength=), np.histogram and
np.digitize; out-of-bounds indices raise NumPy's IndexError. Small cases take the dense formulation, large
ones (more than scatter.DENSE_MAX positions x updates) the SCATTER op: atomics on SIMT targets, whose
order of float additions differs from NumPy's (a tolerance there; integers, max and min exact)."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from reference import assert_close, assert_kernel_matches_numpy, random_array, run_kernel

ROWS = np.array([2, -1, 0, 2, 3, -4, 2], np.int32)   # duplicates, negatives
COLS = np.array([[4, -5], [4, 1]], np.int32)


def _assigned(x, key, v):
    """NumPy's x[key] = v on a copy: the reference for set_at."""
    y = x.copy()
    y[key] = v
    return y


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool", "float64"])
def test_set_at_matches_numpy_assignment_with_last_write_winning(device, dtype, rng):
    x = random_array(rng, (5, 6), dtype)
    v = random_array(rng, (7, 6), dtype)
    w = random_array(rng, (5, 2, 2), dtype)
    f = tj.kernel(lambda x, r, c, v, w: (tj.set_at(x, r, v), tj.set_at(x, (slice(None), c), w),
                                         tj.set_at(x, (r, 1), v[:, 0]), tj.set_at(x, (slice(1, None, 2), c), 7),
                                         tj.set_at(x, (r[:2], c[0]), v[0, 0])))
    expected = (_assigned(x, ROWS, v), _assigned(x, (slice(None), COLS), w), _assigned(x, (ROWS, 1), v[:, 0]),
                _assigned(x, (slice(1, None, 2), COLS), 7), _assigned(x, (ROWS[:2], COLS[0]), v[0, 0]))
    assert_close(run_kernel(f, x, ROWS, COLS, v, w, device=device), expected)


def test_set_at_casts_values_to_the_target_dtype_as_setitem_does(device, rng):
    x = random_array(rng, (6,), "int32")
    v = np.array([2.7, -3.9, 1e3], np.float32)
    index = np.array([0, 5, -1], np.int32)
    out = run_kernel(tj.kernel(lambda x, i, v: tj.set_at(x, i, v)), x, index, v, device=device)
    assert_close(out, _assigned(x, index, v))


def _at_all(x, r, c, v, w):
    """Every supported ufunc.at, on copies of x, with the index on either axis."""
    results = []
    for ufunc in (np.add, np.subtract, np.multiply, np.maximum, np.minimum):
        y, z = x.copy(), x.copy()
        ufunc.at(y, r, v)
        ufunc.at(z, (slice(None), c), w)
        results += [y, z]
    return tuple(results)


@pytest.mark.parametrize("dtype", ["float32", "int32", "int8", "float64"])
def test_ufunc_at_accumulates_every_duplicate(device, dtype, rng):
    x = random_array(rng, (5, 6), dtype, low=-5, high=5)
    v = random_array(rng, (7, 6), dtype, low=-3, high=3)
    w = random_array(rng, (5, 2, 2), dtype, low=-3, high=3)
    assert_kernel_matches_numpy(_at_all, x, ROWS, COLS, v, w, device=device, rtol=1e-5)


def test_maximum_and_minimum_at_propagate_nan_as_numpy(device):
    x = np.array([1.0, np.nan, 3.0, 4.0], np.float32)
    index = np.array([0, 0, 2, 1, 3], np.int32)
    v = np.array([5.0, np.nan, -1.0, 2.0, 0.5], np.float32)

    def body(x, i, v):
        a, b, c = x.copy(), x.copy(), x.copy()
        np.maximum.at(a, i, v)
        np.minimum.at(b, i, v)
        np.add.at(c, i, 1)
        return a, b, c
    assert_kernel_matches_numpy(body, x, index, v, device=device, numpy_errors="ignore")


def test_add_at_on_bool_is_logical_or_and_scalar_values_broadcast(device):
    x = np.array([False, True, False, False])
    index = np.array([2, 2, -1], np.int32)

    def body(x, i):
        y, z = x.copy(), np.zeros_like(x, dtype=np.float32)
        np.add.at(y, i, True)
        np.add.at(z, i, 0.5)
        return y, z
    assert_kernel_matches_numpy(body, x, index, device=device)


def test_ufunc_at_refuses_an_unsafe_cast_into_the_target_as_numpy(device):
    def body(x, i):
        np.add.at(x, i, 0.5)
        return x
    with pytest.raises(TypeError, match="Cannot cast ufunc 'add' output from dtype\\('float64'\\) to dtype\\('int32'\\)"):
        tj.kernel(body)(np.zeros(4, np.int32), np.array([1], np.int32), device=device)


def test_out_of_bounds_indices_raise_index_error(device):
    x, v = np.zeros(4, np.float32), np.ones(3, np.float32)
    index = np.array([1, 4, 0], np.int32)
    with pytest.raises(IndexError, match="^index 4 is out of bounds for axis 0 with size 4$"):
        tj.kernel(lambda x, i, v: tj.set_at(x, i, v))(x, index, v, device=device)

    def body(x, i, v):
        np.add.at(x, (slice(None), i), v)
        return x
    with pytest.raises(IndexError, match="^index -5 is out of bounds for axis 1 with size 4$"):
        tj.kernel(body)(np.zeros((2, 4), np.float32), np.array([0, -5, 1], np.int32), v, device=device)
    with pytest.raises(IndexError, match="out of bounds for axis 0 with size 4"):
        tj.kernel(lambda x, v: tj.set_at(x, [0, 9, 1], v))(x, v, device=device)


def test_zero_size_updates_leave_the_target_unchanged(device, rng):
    x = random_array(rng, (4, 3), "float32")
    empty = np.zeros(0, np.int32)

    def body(x, e):
        y = x.copy()
        np.add.at(y, e, 1.0)
        return tj.set_at(x, e, 2.0) if isinstance(x, tj.Tensor) else x, y
    assert_kernel_matches_numpy(body, x, empty, device=device)


@pytest.mark.parametrize("dtype", ["int32", "uint8", "bool"])
def test_bincount_with_weights_and_minlength(device, dtype, rng):
    x = rng.integers(0, 2 if dtype == "bool" else 8, 50).astype(dtype)
    weights = random_array(rng, (50,), "float32")
    assert_kernel_matches_numpy(lambda x, w: (np.bincount(x, minlength=10), np.bincount(x, w, minlength=8)),
                                x, weights, device=device, rtol=1e-5)


def test_bincount_without_minlength_has_the_datas_length_and_with_it_raises_for_values_outside(device):
    if device == "webgpu":
        pytest.skip("np.bincount's counts are int64, which webgpu does not hold")
    f = tj.kernel(lambda x: np.bincount(x))
    for x in (np.array([0, 3, 1], np.int32), np.array([5, 5, 2, 9], np.int32), np.zeros(0, np.int32)):
        got = np.asarray(f(x, device=device))
        expected = np.bincount(x)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)
    with pytest.raises(ValueError, match="must have no negative elements"):
        run_kernel(f, np.array([0, -1, 1], np.int32), device=device)
    for bad in (np.array([0, 3, 4], np.int32), np.array([0, -1, 1], np.int32)):
        with pytest.raises(IndexError, match="out of bounds for axis 0 with size 4"):
            run_kernel(tj.kernel(lambda x: np.bincount(x, minlength=4)), bad, device=device)


@pytest.mark.parametrize("dtype", ["float32", "int32", "float64"])
def test_histogram_bins_rules_range_edges_weights_density(device, dtype, rng):
    a = random_array(rng, (8, 25), dtype, low=-3, high=12)
    a[0, :3] = [0, 10, 5]   # on the edges of range=(0, 10): the last bin is closed
    weights = random_array(rng, (8, 25), "float32")

    def body(a, w):
        h1, e1 = np.histogram(a, bins=5, range=(0, 10))
        h2, e2 = np.histogram(a, bins=[-2, 0, 0.5, 4, 10])
        h3, _ = np.histogram(a, bins=4, range=(0, 10), weights=w)
        h4, e4 = np.histogram(a, bins=[-2, 0, 0.5, 4, 10], density=True)
        h5, e5 = np.histogram(a, bins=7)   # range from the data
        return h1, e1, h2, e2, h3, h4, e4, h5, e5
    assert_kernel_matches_numpy(body, a, weights, device=device, rtol=1e-5)


def test_digitize_with_increasing_and_decreasing_bins(device, rng):
    x = random_array(rng, (30,), "float32", low=-1, high=5)
    x[:3] = [0.0, 1.0, 2.5]
    assert_kernel_matches_numpy(
        lambda x: (np.digitize(x, [0, 1, 2.5, 4]), np.digitize(x, [0, 1, 2.5, 4], right=True),
                   np.digitize(x, [4, 2.5, 1, 0]), np.digitize(x, [4, 2.5, 1, 0], right=True)), x, device=device)


BINS, UPDATES = 10_000, 100_000   # far above the dense limit: the scatter op
AVAILABLE = [info.name for info in tj.devices() if info.available]


def _large_updates(rng, dtype):
    index = rng.integers(-BINS, BINS, UPDATES).astype(np.int32)   # duplicates, negatives
    values = random_array(rng, (UPDATES,), dtype, low=-50, high=50)
    return index, values


def _ufuncs_at(x, i, v):
    outs = []
    for ufunc in (np.add, np.subtract, np.maximum, np.minimum):
        y = x.copy()
        ufunc.at(y, i, v)
        outs.append(y)
    return tuple(outs)


@pytest.mark.parametrize("dtype", ["int32", "float32", "float64"])
def test_large_ufunc_at_accumulates_every_update_through_the_scatter_op(device, dtype, rng):
    x = random_array(rng, (BINS,), dtype, low=-50, high=50)
    index, values = _large_updates(rng, dtype)
    f = tj.kernel(_ufuncs_at)
    out = run_kernel(f, x, index, values, device=device)
    expected = _ufuncs_at(x, index, values)
    for got, want in zip(out, expected):   # float sums in another order: a tolerance; max/min exact
        assert_close(got, want, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-3 if dtype == "float32" else 1e-9)
    assert_close(out[2:], expected[2:], rtol=0, atol=0)
    assert any("scatter" in k.name for k in f.lower(x, index, values, device=device).kernels)


def test_large_maximum_at_propagates_nan_and_multiply_at_multiplies_every_duplicate(device, rng):
    x = random_array(rng, (BINS,), "float32")
    index, values = _large_updates(rng, "float32")
    values[::997] = np.nan
    ints = rng.integers(-3, 4, UPDATES).astype(np.int32)

    def body(x, i, v, k):
        y, n = x.copy(), np.ones(BINS, np.int32)
        with np.errstate(invalid="ignore"):   # NumPy's reference warns of the NaN
            np.maximum.at(y, i, v)
        np.multiply.at(n, i % 97, k)   # int32 products wrap as in NumPy
        return y, n
    assert_kernel_matches_numpy(body, x, index, values, ints, device=device)


def test_large_scatter_raises_index_error_for_an_index_out_of_bounds(device, rng):
    index, values = _large_updates(rng, "float32")
    index[UPDATES // 2] = BINS

    def body(x, i, v):
        np.add.at(x, i, v)
        return x
    with pytest.raises(IndexError, match=f"index {BINS} is out of bounds for axis 0 with size {BINS}"):
        np.asarray(tj.kernel(body)(np.zeros(BINS, np.float32), index, values, device=device))


def test_large_set_at_lets_the_last_duplicate_win_exactly(device, rng):
    x = random_array(rng, (BINS, 3), "float32")
    index, _ = _large_updates(rng, "float32")
    values = random_array(rng, (UPDATES, 3), "float32")
    def body(x, i, v):
        y = x.copy()
        y[i] += v   # x[i] + v, the last duplicate's written
        return tj.set_at(x, i, v), y
    out = run_kernel(tj.kernel(body), x, index, values, device=device)
    assert_close(out, (_assigned(x, index, values), _assigned(x, index, x[index] + values)), rtol=0, atol=0)


def test_large_bincount_and_histogram_count_through_the_scatter_op(device, rng):
    data = random_array(rng, (300, 400), "float32", low=-1, high=257)
    data[0, :5] = [0, 256, 255.5, np.nan, -0.5]   # edges, NaN and outside the range: NumPy's rules
    weights = random_array(rng, (300, 400), "float32")
    labels = rng.integers(0, 1000, UPDATES).astype(np.int32)

    def body(a, w, k):
        return (np.histogram(a, bins=256, range=(0, 256))[0], np.histogram(a, bins=[0, 1, 10, 100, 200, 255])[0],
                np.histogram(a, bins=256, range=(0, 256), weights=w)[0], np.bincount(k, minlength=1000))
    out = run_kernel(tj.kernel(body), data, weights, labels, device=device)
    expected = body(data, weights, labels)
    assert_close(out[:2] + out[3:], expected[:2] + expected[3:], rtol=0, atol=0)
    assert_close(out[2], expected[2], rtol=1e-4, atol=1e-3)


def test_large_histogram_with_the_range_from_the_data(device, rng):
    data = random_array(rng, (200_000,), "float32", low=-3, high=7)
    assert_kernel_matches_numpy(lambda a: np.histogram(a, bins=100), data, device=device)


def _add_at(x, i, v):
    np.add.at(x, i, v)
    return x


@pytest.mark.parametrize("dtype", ["int8", "float16"])
def test_a_scatter_of_a_dtype_without_atomics_is_refused_on_simt_and_runs_on_numba(dtype, rng):
    x = np.zeros(BINS, dtype)
    index, values = _large_updates(rng, dtype)
    values = (values % 3).astype(dtype)
    expected = _add_at(x.copy(), index, values)
    np.testing.assert_array_equal(tj.kernel(_add_at)(x.copy(), index, values, device="numba"), expected)
    for device in ("opencl", "webgpu"):
        if device in AVAILABLE:
            with pytest.raises(tj.DtypeError, match=f"scatter .* of {dtype} cannot run on .*Cast to"):
                tj.kernel(_add_at)(x.copy(), index, values, device=device)


@pytest.mark.parametrize(("device_name", "dtype", "spelling"), [
    ("opencl", "int32", "atomic_add("), ("opencl", "float32", "atomic_cmpxchg("),
    ("opencl", "float64", "atom_cmpxchg("),
    ("webgpu", "int32", "atomicAdd("), ("webgpu", "float32", "atomicCompareExchangeWeak(")])
def test_kernel_sources_show_atomics(device_name, dtype, spelling, rng):
    if device_name not in AVAILABLE:
        pytest.skip(f"{device_name} is not available here")
    index, values = _large_updates(rng, dtype)
    plan = tj.kernel(_add_at).lower(np.zeros(BINS, dtype), index, values, device=device_name)
    assert spelling in plan.kernels[-1].source


def test_set_at_gives_numpys_augmented_assignment_without_accumulating_duplicates(device, rng):
    x = random_array(rng, (6, 4), "float32")[::2, ::-1]   # non-contiguous
    v = random_array(rng, (5, 4), "float32")
    index = np.array([0, 2, 0, -1, 1], np.int32)
    expected = x.copy()
    expected[index] += v   # x[index] = x[index] + v: the last duplicate's sum wins
    out = run_kernel(tj.kernel(lambda x, i, v: tj.set_at(x, i, x[i] + v)), x, index, v, device=device)
    assert_close(out, expected)


def test_ufunc_at_into_an_array_made_in_the_body_works_and_into_a_closed_over_one_is_refused():
    def body(i):
        counts = np.zeros(5)   # a traced array while the body is traced (test_assignment.py)
        np.add.at(counts, i, 1)
        return counts
    i = np.array([0, 2, 2, 4], np.int32)
    np.testing.assert_array_equal(tj.kernel(body)(i), body(i))
    table = np.zeros(5)
    with pytest.raises(tj.UnsupportedError, match="np.add.at into a NumPy array that is not traced"):
        tj.kernel(lambda i: np.add.at(table, i, 1) or i).trace(tj.spec((3,), "int32"))


def test_scatters_fuse_into_one_kernel():
    def embedding_backward(dout, x, W):
        dW = np.zeros_like(W)
        np.add.at(dW, x, dout)
        return dW
    plan = tj.kernel(embedding_backward).lower(tj.spec((4, 6, 8), "float32"), tj.spec((4, 6), "int32"),
                                               tj.spec((10, 8), "float32"), device="numba")
    assert len(plan.kernels) == 1
    plan = tj.kernel(lambda x, i, v: tj.set_at(x, (slice(1, None, 2), i), v) * 2).lower(
        tj.spec((6, 5), "float32"), tj.spec((3,), "int32"), tj.spec((3, 3), "float32"), device="numba")
    assert len(plan.kernels) == 1


def test_ufunc_at_and_set_at_take_basic_indices_too(device, rng):
    x = random_array(rng, (5, 4), "float32")

    def body(x):
        y, z = x.copy(), x.copy()
        np.add.at(y, slice(1, None, 2), 1.5)
        np.maximum.at(z, (Ellipsis, -1), 0.0)
        return y, z
    assert_kernel_matches_numpy(body, x, device=device)
    out = run_kernel(tj.kernel(lambda x: tj.set_at(x, (slice(None, None, -2), 1), 3.0)), x, device=device)
    assert_close(out, _assigned(x, (slice(None, None, -2), 1), 3.0))


def test_a_long_axis_sliced_with_a_negative_step_beside_the_indexed_one(device, rng):
    x = random_array(rng, (5000, 3), "float32")
    index = np.array([2, 0, 2], np.int32)

    def body(x, i):
        y = x.copy()
        np.add.at(y, (slice(4000, 10, -7), i), 1.0)
        return y
    assert_kernel_matches_numpy(body, x, index, device=device)
