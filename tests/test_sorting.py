"""Sorting (np.sort, np.argsort, np.median, np.nanmedian, np.percentile, np.quantile, tj.topk) against NumPy:
values and dtypes per dtype, every axis form, NaNs last, stability of argsort with ties (rows short enough
for one work-item and long enough for a work-group's bitonic network), fusion of medians and percentiles
into the sorting kernel, and the clear errors for what is not supported."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tracejit as tj
from reference import assert_close, random_array, run_kernel


def with_ties(rng, shape, dtype):
    """Few distinct values (ties everywhere); floats also with NaN, infinities and signed zeros."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    values = rng.integers(-3, 4, size=shape)
    if dt.kind == "u":
        values = values + 3
    x = values.astype(dt)
    if dt.kind == "f":
        flat = x.reshape(-1)
        flat[rng.random(flat.size) < 0.1] = np.nan
        flat[:4] = [np.inf, -np.inf, -0.0, 0.0][: flat.size]
    return x


def assert_matches(body, *args, device, **kwargs):
    result = run_kernel(tj.kernel(body), *args, device=device, **kwargs)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)   # NumPy's all-NaN and empty-slice warnings
        expected = body(*args, **kwargs)
    assert_close(result, expected)


# =============================================================================================
# sort and argsort


def sorts(x):
    """argsort as int32, so webgpu (no int64) runs it too; the reference is NumPy's stable argsort."""
    return np.sort(x, axis=0), np.argsort(x, axis=1, kind="stable").astype(np.int32)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int64", "float16", "float32", "float64"])
def test_sort_and_stable_argsort_match_numpy(dtype, device, rng):
    assert_matches(sorts, with_ties(rng, (5, 12), dtype), device=device)


def test_long_rows_sort_stably_in_a_work_group(device, rng):
    """Rows of 128 or more get a work-group each on SIMT targets (a bitonic network over its items)."""
    assert_matches(lambda x: (np.sort(x[:, :300], axis=-1), np.argsort(x, axis=-1, kind="stable").astype(np.int32)),
                   with_ties(rng, (3, 1000), "float32"), device=device)


def axis_forms(x):
    return (np.sort(x, axis=-1), np.sort(x, axis=-3), np.sort(x[:, ::-1, ::2].T, axis=1),
            x.argsort(axis=None, kind="stable").astype(np.int32))


def test_every_axis_and_non_contiguous_views_sort_as_numpy(device, rng):
    assert_matches(axis_forms, with_ties(rng, (3, 4, 5), "float32"), device=device)


def test_zero_size_length_one_and_zero_d_inputs(device, rng):
    def body(empty, column, scalar):
        return (np.sort(empty, axis=1), np.sort(empty, axis=0), np.sort(column, axis=1),
                np.argsort(column, axis=1).astype(np.int32), np.argsort(scalar).astype(np.int32), np.sort(scalar, axis=None))
    assert_matches(body, np.zeros((3, 0), np.float32), with_ties(rng, (4, 1), "float32"), np.float32(2.5),
                   device=device)


def test_nan_sorts_last_and_argsort_keeps_equal_values_in_order(device):
    x = np.array([[np.nan, 1.0, np.nan, -np.inf, 1.0, 0.0, -0.0, np.inf, 1.0],
                  [np.nan] * 9, [2.0, 2.0, 2.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]], np.float32)
    assert_matches(lambda x: (np.sort(x), np.argsort(x, kind="stable").astype(np.int32)), x, device=device)


# =============================================================================================
# median, nanmedian, percentile, quantile


def medians(x):
    """Rows of 6 (even) and 5 (odd), a tuple of axes, all of it; nanmedian of rows with and without NaNs."""
    return (np.median(x, axis=-1), np.median(x[:, :-1], axis=(0, 2), keepdims=True), np.median(x),
            np.nanmedian(x, axis=-1), np.nanmedian(x[:, :-1], axis=(1, 2), keepdims=True))


def test_median_and_nanmedian_match_numpy_with_nans_odd_and_even(device, rng):
    x = random_array(rng, (4, 5, 6), "float32")
    x[0, 1, 2] = x[1, :, 0] = x[3] = np.nan
    assert_matches(medians, x, device=device)


@pytest.mark.parametrize("dtype", ["bool", "int16", "int64", "float16", "float64"])
def test_median_dtypes_match_numpy(dtype, device, rng):
    assert_matches(lambda x: (np.median(x, axis=1), np.nanmedian(x[:, 1:], axis=0)), with_ties(rng, (4, 7), dtype),
                   device=device)


def percentiles(x):
    """q as Python numbers keeps float32 float32; a list of q makes the result float64, as in NumPy."""
    return (np.percentile(x, 30, axis=1), np.quantile(x, 1.0, axis=0, keepdims=True),
            np.quantile(x, np.float32(0.25), axis=1), np.percentile(x, 62.5, axis=(0, 1)))


def test_percentile_and_quantile_interpolate_as_numpy(device, rng):
    x = random_array(rng, (5, 8), "float32")
    x[4, 1] = np.nan
    assert_matches(percentiles, x, device=device)


def percentile_sequences(x):
    return (np.percentile(x, [10, 50, 90], axis=0), np.quantile(x, (0.0, 0.3, 1.0), axis=-1, keepdims=True),
            np.percentile((x * 10).astype(np.int32), [25, 75], axis=1), np.quantile((x * 10).astype(np.int64), 1, axis=1))


def test_percentile_of_several_q_and_of_ints_match_numpy(device, rng):
    assert_matches(percentile_sequences, random_array(rng, (6, 7), "float64"), device=device)


def test_percentile_of_infinities_gives_numpys_nan(device):
    x = np.array([[1.0, np.inf], [-np.inf, 2.0], [np.inf, np.inf]], np.float32)
    assert_matches(lambda x: (np.percentile(x, 50, axis=1), np.percentile(x, 100, axis=1)), x, device=device)


# =============================================================================================
# tj.topk


def topk_reference(x, k, axis=-1):
    """Largest first, equal values by lowest position, NaN above every number: NaNs, then a stable sort of -x."""
    nan = np.isnan(x.astype(np.float64))
    order = np.lexsort((np.where(nan, 0, -x.astype(np.float64)), ~nan), axis=axis)
    order = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, order, axis=axis), order


@pytest.mark.parametrize(("dtype", "axis"), [("int32", -1), ("float32", 0)])
def test_topk_gives_largest_first_with_ties_by_lowest_position(dtype, axis, device, rng):
    x = with_ties(rng, (40, 40), dtype)

    def top5(x):
        values, positions = tj.topk(x, 5, axis)
        return values, positions.astype(np.int32)   # webgpu has no int64

    values, positions = run_kernel(tj.kernel(top5), x, device=device)
    want_values, want_positions = topk_reference(x, 5, axis)
    assert_close((values, positions), (want_values, want_positions.astype(np.int32)))


def test_topk_returns_int64_positions_and_handles_k_of_zero_and_n(device, rng):
    x = random_array(rng, (3, 6), "float64")
    got = run_kernel(tj.kernel(lambda x: (*tj.topk(x, 6), *tj.topk(x, 0))), x, device=device)
    values, positions = topk_reference(x, 6)
    assert_close(got, (values, positions, values[:, :0], positions[:, :0]))


# =============================================================================================
# fusion


def robust_zscore(x):
    med = np.median(x, axis=-1, keepdims=True)
    mad = np.median(np.abs(x - med), axis=-1, keepdims=True)
    return (x - med) / (1.4826 * mad)


FUSED = {
    "np.sort(x * 2)": (lambda x: np.sort(x * 2, axis=-1), 1),
    "np.median over rows": (lambda x: np.median(x, axis=-1), 1),
    "three percentiles of rows": (lambda x: np.percentile(x, [5, 50, 95], axis=1), 1),
    "x - np.median(x, keepdims)": (lambda x: x - np.median(x, axis=1, keepdims=True), 1),
    "trimmed mean: np.sort(x)[:, 2:-2].mean(1)": (lambda x: np.sort(x, axis=1)[:, 2:-2].mean(axis=1), 1),
    "robust z-score (two medians)": (robust_zscore, 1),
}


@pytest.mark.parametrize("name", list(FUSED))
def test_sorts_fuse_with_producers_and_consumers(name, device, rng):
    body, kernels = FUSED[name]
    x = random_array(rng, (16, 33), "float32")
    try:
        plan = tj.kernel(body).lower(x, device=device)
    except tj.DtypeError as e:   # a list of percentiles is float64, which webgpu lacks
        pytest.skip(str(e))
    assert len(plan.kernels) == kernels
    assert_matches(body, x, device=device)


# =============================================================================================
# limits and errors


def test_rows_longer_than_a_work_group_holds_are_sorted_in_blocks_then_merged(device, rng):
    """Beyond one work-group's memory (SIMT targets) a row is sorted in blocks, then merged pass by pass,
    stably; numba sorts any row in one go."""
    x = with_ties(rng, (2, 20_000), "float32")

    def body(x):
        return np.argsort(x, axis=1, kind="stable").astype(np.int32), np.median(x[:, 1:], axis=1)

    passes = len(tj.kernel(body).lower(x, device=device).kernels)
    assert passes == 2 if device == "numba" else passes > 3
    assert_matches(body, x, device=device)


# =============================================================================================
# sizes beyond the devices' limits: rows longer than a work-group (and than llvmpipe lets one invocation
# sort: 2048 padded is 67584 loop steps), more rows than a CPU device gives a work-group each, rows past
# a work-group's memory (sorted in blocks, then merged)


def sorts_and_topk(x):
    """Along the rows and along the columns: sorted, argsorted (int32: webgpu has no int64), the top 5."""
    out = []
    for axis in (-1, 0):
        values, positions = tj.topk(x, 5, axis)
        out += [np.sort(x, axis=axis), np.argsort(x, axis=axis, kind="stable").astype(np.int32), values,
                positions.astype(np.int32)]
    return tuple(out)


def assert_sorts_and_topk_match_numpy(x, device):
    """Exactly NumPy's values (NaNs last), its stable argsort (tracejit's argsort is always stable) and the
    top 5 of topk_reference."""
    got = run_kernel(tj.kernel(sorts_and_topk), x, device=device)
    want = []
    for axis in (-1, 0):
        values, positions = topk_reference(x, 5, axis)
        want += [np.sort(x, axis=axis), np.argsort(x, axis=axis, kind="stable").astype(np.int32), values,
                 positions.astype(np.int32)]
    for i, (g, w) in enumerate(zip(got, want)):
        what = f"{('sort', 'argsort', 'topk values', 'topk positions')[i % 4]} along axis {(-1, 0)[i // 4]}"
        np.testing.assert_array_equal(np.asarray(g), w, err_msg=what, strict=True)


@pytest.mark.slow_emulated("metal")
@pytest.mark.parametrize(("shape", "dtype"), [((300, 1025), "float32"), ((300, 1025), "int32"),
                                              ((40, 2000), "float32"), ((40, 2000), "int32"), ((40, 9000), "float32")],
                         ids=str)
def test_many_long_rows_sort_argsort_and_topk_as_numpy(shape, dtype, device, rng):
    """300x1025 and 40x2000: more rows than a CPU's work-groups take (webgpu on llvmpipe and PoCL run a
    row per work-item past 16 per core), rows longer than a work-group and padded to 2048; their columns
    (1025 of 300) are rows too. 40x9000: past a work-group's memory, sorted in blocks and merged. Every
    row was wrong on llvmpipe, whose loop budget cut one invocation's network short."""
    assert_sorts_and_topk_match_numpy(with_ties(rng, shape, dtype), device)


def sorts_and_topk_of_rows(x):
    values, positions = tj.topk(x, 5)
    return np.sort(x, axis=-1), np.argsort(x, axis=-1).astype(np.int32), values, positions.astype(np.int32)


@pytest.mark.slow_emulated
@pytest.mark.parametrize("shape", [(1000, 2000), (70_000, 65)], ids=str)
def test_large_sorts_and_topk_of_rows_as_numpy(shape, device, rng):
    """1000x2000: topk gave positions -1..-5 and NaN on llvmpipe, after a first call of 3.6 minutes. 70000
    rows of 65 (a bitonic network of 128: a work-group each on a GPU): more work-groups than one dispatch
    dimension takes (65535 on WebGPU)."""
    x = with_ties(rng, shape, "float32")
    values, positions = topk_reference(x, 5)
    want = (np.sort(x, axis=-1), np.argsort(x, axis=-1, kind="stable").astype(np.int32), values,
            positions.astype(np.int32))
    for g, w in zip(run_kernel(tj.kernel(sorts_and_topk_of_rows), x, device=device), want):
        np.testing.assert_array_equal(np.asarray(g), w, strict=True)


def test_ndarray_sort_sorts_in_place_for_the_caller_as_numpy(device, rng):
    def body(x, y):
        x.sort(axis=0)
        y[1:].sort()   # a view: the rest of y stays
        return x * 2

    x, y = random_array(rng, (4, 5), "float32"), random_array(rng, (3, 6), "int32")
    expected_x, expected_y = x.copy(), y.copy()
    want = body(expected_x, expected_y)
    args = (x, y) if device == "numba" else (tj.asarray(x, device=device), tj.asarray(y, device=device))
    got = tj.kernel(body)(*args, device=device)
    assert_close((got, *args), (want, expected_x, expected_y))


def test_two_sorts_that_together_overflow_a_work_group_store_one(device, rng):
    x = random_array(rng, (3, 1500), "float32")
    assert_matches(robust_zscore, x, device=device)


@pytest.mark.parametrize(("body", "error", "match"), [
    (lambda x: np.percentile(x, 50, method="nearest"), tj.UnsupportedError, "method='linear'"),
    (lambda x: np.percentile(x, 150), tj.ArgumentValueError, r"\[0, 100\]"),
    (lambda x: np.quantile(x, x[0]), tj.TraceError, "traced value"),
    (lambda x: tj.topk(x, 9), tj.ShapeError, "out of range"),
    (lambda x: np.sort(x, axis=2), tj.ShapeError, "out of bounds"),
], ids=["percentile method", "percentile range", "traced q", "topk k",
        "axis"])
def test_unsupported_sorting_uses_raise_clear_errors(body, error, match, device):
    with pytest.raises(error, match=match):
        tj.kernel(body)(np.ones((2, 8), np.float32), device=device)


# =============================================================================================
# numba: large sorts are NumPy's own (ir/library.py)

LARGE = {   # name -> (body, kernels on numba, of which NumPy sorts)
    "np.sort": (lambda x: np.sort(x, axis=-1), 1, 1),
    "np.sort along axis 0": (lambda x: np.sort(x, axis=0), 1, 1),
    "stable argsort": (lambda x: np.argsort(x, axis=-1, kind="stable"), 2, 1),
    "median of a product": (lambda x: np.median(x * 2 - 1, axis=-1), 3, 1),
    "percentiles": (lambda x: np.percentile(x, [5, 50, 95], axis=1), 2, 1),
}


@pytest.mark.parametrize("name", list(LARGE))
@pytest.mark.parametrize("dtype", ["float32", "int16", "float16"])
def test_large_sorts_on_numba_are_numpys_sort_with_its_ties_nan_and_zeros(name, dtype, rng):
    body, kernels, calls = LARGE[name]
    x = with_ties(rng, (64, 1200), dtype)
    if dtype != "int16":
        x[3, 5], x[7, :4] = np.nan, [0.0, -0.0, 0.0, -0.0]
    plan = tj.kernel(body).lower(x, device="numba")
    assert (len(plan.kernels), sum("numpy." in k.source for k in plan.kernels)) == (kernels, calls)
    got, want = tj.kernel(body)(x), body(x)
    assert got.dtype == want.dtype
    if "sort" in name:   # the very values and positions NumPy gives, the sign of each zero included
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    else:
        assert_close(got, want)
