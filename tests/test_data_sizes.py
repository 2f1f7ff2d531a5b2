"""Sizes that depend on the data (issue 47): x[mask] as an array, np.nonzero, np.flatnonzero, np.argwhere,
np.where(cond), np.unique, np.compress, np.extract, x[mask] = one value per selected element. A call reads the
count back (one synchronisation) and goes on with it as a size; compared with NumPy on values and dtypes on every
device, with empty selections, everything selected, counts that change from call to call, and what comes before
the count neither computed nor written twice."""
import numpy as np
import pytest

import tracejit as tj
from reference import assert_close


def float_dtype(device):
    return np.float32 if device in ("webgpu", "metal") else np.float64


def int64_results(device):
    """Whether the device holds NumPy's int64 index results (webgpu has no 64-bit integers)."""
    return device != "webgpu"


def check(kernel, numpy_fn, *args, device, rtol=None):
    got = kernel(*args, device=device)
    expected = numpy_fn(*args)
    if not isinstance(expected, tuple):
        got, expected = (got,), (expected,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        g = np.asarray(g)
        assert g.dtype == e.dtype, (g.dtype, e.dtype)
        assert g.shape == e.shape, (g.shape, e.shape)
        if rtol is None:
            np.testing.assert_array_equal(g, e)
        else:
            assert_close(g, e, rtol=rtol, atol=rtol)


# -- the programs: written as their authors write them --

def selected_scaled(x, threshold):
    y = np.sqrt(np.abs(x)) * 2
    z = y[y > threshold]
    return z * 3 + 1


def rows_selected(a, lo):
    keep = a[:, 0] > lo
    return a[keep] - a[keep].mean(axis=0)


def indices_of(a, t):
    return np.nonzero(a > t)


def flat_and_arg(a, t):
    return np.flatnonzero(a > t), np.argwhere(a > t), np.where(a > t)[0]


def distinct(a):
    return np.unique(a, return_index=True, return_inverse=True, return_counts=True)


def compressed(a, t):
    rows = a[:, 0] > t
    return np.compress(rows, a, axis=0), np.compress(a[0] > t, a, axis=1), np.compress(a.ravel() > t, a), \
        np.extract(a > t, a)


def sorted_selection(x, t):
    s = np.sort(x[x > t])
    return s, np.median(x[x > t]), np.concatenate([x[x > t], x[:2]])


def each_selected_gets_a_value(x, t):
    x = x.copy()
    m = x > t
    x[m] = np.sort(x[m])[::-1]
    return x


def two_masks(x, y):
    return x[x > 0] * 2, np.concatenate([x[x > 0], y[y > 0.5]])


def lennard_jones(pos, cutoff):   # the pairs within the cutoff, as a new user writes it
    d = pos[:, None, :] - pos[None, :, :]
    r2 = (d ** 2).sum(axis=-1)
    r2 = r2[r2 > 0]
    r2 = r2[r2 < cutoff ** 2]
    inv6 = (1.0 / r2) ** 3
    return 2.0 * (inv6 ** 2 - inv6).sum(), r2.size


def azimuthal_bins(image, center, nbins):   # pixels binned by radius, empty bins dropped
    ny, nx = image.shape
    y, x = np.indices((ny, nx))
    r = np.sqrt((x - center[0]) ** 2 + (y - center[1]) ** 2)
    bins = np.minimum((r / r.max() * nbins).astype(np.int64), nbins - 1)
    total = np.bincount(bins.ravel(), image.ravel(), minlength=nbins)
    count = np.bincount(bins.ravel(), minlength=nbins)
    filled = count > 0
    return total[filled] / count[filled]


def group_by_key(keys, values):   # sums per distinct key
    uniq, inverse = np.unique(keys, return_inverse=True)
    sums = np.zeros(uniq.shape[0])
    np.add.at(sums, inverse, values)
    return uniq, sums


def test_a_selection_used_as_an_array_matches_numpy_for_counts_that_change(device, rng):
    dt = float_dtype(device)
    kernel = tj.kernel(selected_scaled)
    for t in (0.5, 1.0, 1.5, 0.5, 3.0, -1.0):   # (3.0: none selected; -1.0: all)
        x = rng.standard_normal(1000).astype(dt)
        check(kernel, selected_scaled, x, t, device=device, rtol=1e-6 if dt == np.float32 else 1e-13)


def test_another_count_compiles_nothing(device):
    # (odd counts of one magnitude: a SIMT kernel has a variant without the bounds check for a size that is a
    # multiple of its work-group, compiled once, as for any size)
    dt = float_dtype(device)
    kernel = tj.kernel(selected_scaled)
    x = np.arange(5000, dtype=dt)
    thresholds = [2 * float(np.sqrt(5000 - count - 0.5)) for count in (3001, 3003, 3005, 3007)]
    kernel(x, thresholds[0], device=device)
    compiled = kernel.cache_info()["compiles"]
    for t, count in zip(thresholds[1:], (3003, 3005, 3007)):
        got = np.asarray(kernel(x, t, device=device))
        assert got.shape == (count,)
    assert kernel.cache_info()["compiles"] == compiled


@pytest.mark.parametrize("flag", [True, False])
def test_a_zero_d_mask_selects_all_of_x_on_a_new_axis_or_nothing(device, rng, flag):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    got = np.asarray(tj.kernel(lambda a, m: a[m] * 2)(x, np.array(flag), device=device))
    want = x[np.array(flag)] * 2
    assert got.shape == want.shape == ((1,) if flag else (0,)) + x.shape
    assert_close(got, want)


def test_rows_selected_by_a_mask_over_the_leading_axis(device, rng):
    dt = float_dtype(device)
    a = rng.standard_normal((40, 3)).astype(dt)
    check(tj.kernel(rows_selected), rows_selected, a, 0.2, device=device, rtol=1e-5 if dt == np.float32 else 1e-12)


@pytest.mark.parametrize("shape", [(50,), (7, 9), (3, 4, 5)])
def test_nonzero_flatnonzero_argwhere_and_where_of_one_argument(device, rng, shape):
    a = rng.random(shape).astype(float_dtype(device))
    if not int64_results(device):
        with pytest.raises(tj.DtypeError, match="int64"):
            tj.kernel(indices_of)(a, 0.5, device=device)
        return
    check(tj.kernel(indices_of), indices_of, a, 0.5, device=device)
    check(tj.kernel(flat_and_arg), flat_and_arg, a, 0.5, device=device)
    check(tj.kernel(flat_and_arg), flat_and_arg, a, 2.0, device=device)   # none
    check(tj.kernel(flat_and_arg), flat_and_arg, a, -1.0, device=device)  # all


@pytest.mark.parametrize("dtype", ["float", "int32", "bool"])
def test_unique_with_every_flag_matches_numpy(device, rng, dtype):
    if not int64_results(device):
        pytest.skip("np.unique's index results are int64, which webgpu does not hold")
    if dtype == "float":
        a = rng.integers(0, 6, (7, 9)).astype(float_dtype(device))
        a[0, 0] = a[3, 4] = a[6, 8] = np.nan   # (one NaN in NumPy's result: equal_nan)
    elif dtype == "int32":
        a = rng.integers(-3, 4, 40).astype(np.int32)
    else:
        a = rng.random(12) > 0.5
    got = tj.kernel(distinct)(a, device=device)
    for g, e in zip(got, distinct(a)):
        g = np.asarray(g)
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_array_equal(g, e)
    assert_close(np.asarray(tj.kernel(np.unique)(a, device=device)), np.unique(a))


def test_unique_of_one_value_repeated_and_of_distinct_values(device):
    if not int64_results(device):
        pytest.skip("np.unique's index results are int64, which webgpu does not hold")
    for a in (np.full(10, 3, np.int32), np.arange(10, dtype=np.int32)[::-1].copy()):
        got = tj.kernel(distinct)(a, device=device)
        for g, e in zip(got, distinct(a)):
            np.testing.assert_array_equal(np.asarray(g), e)


def test_compress_and_extract(device, rng):
    a = rng.standard_normal((6, 8)).astype(float_dtype(device))
    check(tj.kernel(compressed), compressed, a, 0.1, device=device)


def test_a_selection_sorted_reduced_joined_and_stored_back(device, rng):
    x = rng.standard_normal(300).astype(float_dtype(device))
    check(tj.kernel(sorted_selection), sorted_selection, x, 0.3, device=device)
    check(tj.kernel(each_selected_gets_a_value), each_selected_gets_a_value, x, 0.3, device=device)
    y = rng.random(200).astype(float_dtype(device))
    check(tj.kernel(two_masks), two_masks, x, y, device=device)


# -- a selection written in place: NumPy's x[mask] is a new array, and writes into it are seen by every name
# bound to it and every later use (a ufunc's out=, an augmented assignment, a method of its array) --

def squared_in_place(x, c):
    m = abs(x) > 0.7
    y = x[m]
    np.multiply(y, y, y)            # at the selected places
    np.add(y, c[m], out=y)
    return y + 1, y.sum()


def written_through_its_array(x, c):
    m = abs(x) > 0.7
    y = x[m]
    alias = y
    np.add(y, np.linspace(0, 1, y.size, dtype=x.real.dtype), y)  # one value per selected element: as its array
    y *= 2
    return alias * c[m], y.max() if x.dtype.kind != "c" else y.sum()


def sorted_then_scaled(x, c):
    m = abs(x) > 0.7
    y = x[m]
    y.sort()
    np.cumsum(y, out=y)
    return y * 2 + c[m]


def augmented_alias(x, c):
    m = abs(x) > 0.7
    y = x[m]
    z = y
    y *= c[m]
    x[m] = y
    return z, x


@pytest.mark.parametrize("program", [squared_in_place, written_through_its_array, sorted_then_scaled, augmented_alias])
@pytest.mark.parametrize("kind", ["real", "complex"])
def test_a_selection_written_in_place_is_seen_by_every_later_use(device, rng, program, kind):
    dt = float_dtype(device)
    x, c = rng.standard_normal(60).astype(dt), rng.standard_normal(60).astype(dt)
    if kind == "complex":
        cdt = np.complex64 if dt == np.float32 else np.complex128
        x, c = (x + 1j * rng.standard_normal(60)).astype(cdt), (c - 1j * rng.standard_normal(60)).astype(cdt)
    got, expected = tj.kernel(program)(x.copy(), c, device=device), program(x.copy(), c)  # (x is written)
    for g, e in zip(got, expected):
        g = np.asarray(g)
        assert (g.dtype, g.shape) == (e.dtype, e.shape)
        assert_close(g, e, rtol=1e-4 if dt == np.float32 else 1e-12, atol=1e-4 if dt == np.float32 else 1e-12)


def test_a_selection_written_with_a_value_it_cannot_hold_raises_numpys_casting_error(device, rng):
    def scaled(x):
        y = (x * 10).astype(np.int32)[x > 0.3]
        np.multiply(y, 1.5, y)
        return y

    x = rng.random(20).astype(float_dtype(device))
    with pytest.raises(TypeError, match="same_kind"):
        scaled(x)
    with pytest.raises(TypeError, match="same_kind"):
        tj.kernel(scaled)(x, device=device)


def test_lennard_jones_over_the_pairs_within_a_cutoff(device, rng):
    if device in ("webgpu", "metal"):
        pytest.skip("cutoff ** 2 of a Python float is float64 arithmetic, which webgpu and metal do not have")
    dt = float_dtype(device)
    pos = (rng.random((60, 3)) * 3).astype(dt)
    got = tj.kernel(lennard_jones)(pos, 1.2, device=device)
    expected = lennard_jones(pos, 1.2)
    assert int(np.asarray(got[1])) == expected[1]
    assert_close(np.asarray(got[0]), expected[0], rtol=1e-4 if dt == np.float32 else 1e-12)


def test_azimuthal_integration_and_grouping_by_key(device, rng):
    if device in ("webgpu", "metal"):
        pytest.skip("float64 radii (np.indices is int64): webgpu and metal hold neither")
    image = rng.random((40, 50))
    got = np.asarray(tj.kernel(azimuthal_bins, static="nbins")(image, (20.5, 14.0), 40, device=device))
    assert_close(got, azimuthal_bins(image, (20.5, 14.0), 40), rtol=1e-5)
    keys = rng.integers(0, 7, 100)
    values = rng.random(100)
    got = tj.kernel(group_by_key)(keys, values, device=device)
    expected = group_by_key(keys, values)
    np.testing.assert_array_equal(np.asarray(got[0]), expected[0])
    assert_close(np.asarray(got[1]), expected[1], rtol=1e-12)


def assign_then_select(x):
    x *= 2.0        # written into the caller's array once, whatever the count
    return x[x > 1.0]


def test_what_comes_before_the_count_is_written_once_when_the_count_changes(device, rng):
    dt = float_dtype(device)
    kernel = tj.kernel(assign_then_select)
    for scale in (1.0, 0.5, 2.0, 0.5):   # (each a different count: the plan changes mid-call)
        x = (rng.random(500) * scale).astype(dt)
        expected_x = x * 2
        got = kernel(x, device=device)
        np.testing.assert_array_equal(np.asarray(x), expected_x)
        np.testing.assert_array_equal(np.asarray(got), expected_x[expected_x > 1.0])


def draw_and_select(rng, x):
    u = rng.random(x.shape[0], dtype=np.float32)
    return x[u < 0.5], u


def test_random_draws_before_a_count_are_the_ones_the_selection_reads(device):
    dt = float_dtype(device)
    kernel = tj.kernel(draw_and_select)
    x = np.arange(400, dtype=dt)
    g = np.random.default_rng(7)
    for _ in range(4):   # (each call's count differs: the plan that goes on keeps the call's words)
        picked, u = kernel(g, x, device=device)
        np.testing.assert_array_equal(np.asarray(picked), x[np.asarray(u) < 0.5])


def test_a_selection_in_a_loop_is_traced_step_by_step(device, rng):
    def body(x):
        total = 0.0
        for k in range(3):
            y = x[x > k * 0.3]
            total = total + np.sort(y)[: 2].sum()
        return total
    x = rng.random(50).astype(float_dtype(device))
    assert_close(np.asarray(tj.kernel(body)(x, device=device)), body(x), rtol=1e-5)


def test_errors_name_what_is_wrong(device):
    x = np.arange(6, dtype=np.float32)
    with pytest.raises(ValueError, match="cannot assign 2 input values to the 3 output values"):
        tj.kernel(lambda x: x.__setitem__(x > 2, np.ones(2, np.float32)) or x)(x.copy(), device=device)
    with pytest.raises(ValueError, match="nonzero on 0d arrays"):
        tj.kernel(lambda x: np.nonzero(x.sum()))(x, device=device)
    with pytest.raises(tj.UnsupportedError, match="axis"):
        tj.kernel(lambda x: np.unique(x, axis=0))(x, device=device)
    with pytest.raises(IndexError, match="condition has 7 entries"):
        tj.kernel(lambda x: np.compress(np.ones(7, bool), x))(x, device=device)


def test_a_captured_graph_refuses_a_count_read_back():
    x = np.arange(10.0)
    kernel = tj.kernel(selected_scaled)
    with pytest.raises(tj.UnsupportedError, match="size that depends on the data.*captured graph"):
        with tj.capture() as graph:
            kernel(x, 0.5)
        graph.replay()


def test_explain_shows_the_count_read_back():
    text = tj.kernel(selected_scaled).explain(np.arange(10.0), 1.5)
    assert "synchronisation: the count of the selection at test_data_sizes.py" in text
    assert "(9 in this call)" in text


def test_sorting_masks_as_bytes_on_numba_matches_numpy(rng):
    # (the stable sort of a mask: the generated counting sort for short rows, NumPy's positions for long ones)
    for n in (100, 70_000):
        m = rng.random(n) > 0.4
        got = tj.kernel(lambda m: np.argsort(~m, kind="stable"))(m)
        np.testing.assert_array_equal(got, np.argsort(~m, kind="stable"))
    for dt in (np.int8, np.uint8):
        v = rng.integers(-100 if dt == np.int8 else 0, 100, (4, 300)).astype(dt)
        got = tj.kernel(lambda v: (np.sort(v, axis=1), np.argsort(v, axis=1, kind="stable")))(v)
        np.testing.assert_array_equal(got[0], np.sort(v, axis=1))
        np.testing.assert_array_equal(got[1], np.argsort(v, axis=1, kind="stable"))


def histogram_of_computed_edges(x):
    edges = np.linspace(x.min(), x.max(), 11)
    return (*np.histogram(x, bins=edges), *np.histogram(x, bins=8, range=(x.min(), x.mean())))


@pytest.mark.parametrize("bins", ["auto", "fd", "doane", "scott", "rice", "sturges", "sqrt"])
def test_histogram_with_a_number_of_bins_estimated_from_the_data(device, rng, bins):
    if device in ("webgpu", "metal"):
        pytest.skip("NumPy estimates bin widths in float64, which webgpu and metal do not have")
    kernel = tj.kernel(lambda x: np.histogram(x, bins=bins))
    for x in (rng.standard_normal(500), rng.integers(0, 40, 300), rng.standard_normal(200) * 3):
        got, expected = kernel(x, device=device), np.histogram(x, bins=bins)
        for g, e in zip(got, expected):
            g = np.asarray(g)
            assert g.dtype == e.dtype and g.shape == e.shape
            assert_close(g, e, rtol=1e-12)
    x = rng.standard_normal(400)
    got = tj.kernel(lambda x: np.histogram(x, bins=bins, range=(-1.0, 1.5)))(x, device=device)
    np.testing.assert_array_equal(np.asarray(got[0]), np.histogram(x, bins=bins, range=(-1.0, 1.5))[0])


def test_histogram_with_edges_and_range_computed_in_the_kernel(device, rng):
    x = rng.standard_normal(600).astype(float_dtype(device))
    if not int64_results(device):
        pytest.skip("a histogram's counts are int64, which webgpu does not hold")
    got = tj.kernel(histogram_of_computed_edges)(x, device=device)
    expected = histogram_of_computed_edges(x)
    for k in (0, 2):   # (counts, edges) twice
        np.testing.assert_array_equal(np.asarray(got[k]), expected[k])
        assert_close(np.asarray(got[k + 1]), expected[k + 1], rtol=1e-6 if x.dtype == np.float32 else 1e-14)
    with pytest.raises(ValueError, match="must increase monotonically"):
        tj.kernel(lambda x: np.histogram(x, bins=x[:5]))(np.array([3.0, 1, 2, 5, 4], x.dtype), device=device)
    with pytest.raises(ValueError, match="max must be larger than min"):
        tj.kernel(lambda x: np.histogram(x, bins=4, range=(x.max(), x.min())))(x, device=device)


def test_a_large_selection_on_numba_takes_numpys_positions(rng):
    # (np.flatnonzero in place of the scan and scatter from 2**14 elements: ir/library.py's Positions)
    kernel = tj.kernel(selected_scaled)
    x = rng.standard_normal(50_000)
    for t in (0.5, -1.0, 10.0, 1.5):   # (some, all, none)
        got, expected = kernel(x, t), selected_scaled(x, t)
        assert got.shape == expected.shape
        assert_close(got, expected, rtol=1e-15)
    assert "run by a library" in kernel.explain(x, 0.5)
