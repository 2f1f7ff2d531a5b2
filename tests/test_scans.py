"""Scans (np.cumsum, np.cumprod, np.nancumsum, np.nancumprod, ufunc.accumulate) against NumPy: values and
result dtypes per dtype, every axis form, NaNs, zero-size and length-1 axes, fusion with producers and
consumers (kernel counts), and the blocked form of long scans with its float32 accuracy."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from tracejit.ir import fuse
from reference import assert_close, random_array, run_kernel


def sample(rng, shape, dtype):
    """Floats in [-2, 2) (products of a few stay in range), ints in [-100, 100] (products wrap, as in NumPy)."""
    if np.dtype(dtype).kind == "f":
        return random_array(rng, shape, dtype, low=-2.0, high=2.0)
    return random_array(rng, shape, dtype)


def assert_scans_match(body, *args, device, **kwargs):
    """tracejit against NumPy; float results within a few roundings of the largest running total (NumPy
    adds in order; tracejit may accumulate wider or in blocks)."""
    result = run_kernel(tj.kernel(body), *args, device=device, **kwargs)
    with np.errstate(all="ignore"):
        expected = body(*args, **kwargs)
    outputs = expected if isinstance(expected, tuple) else (expected,)
    atol = max((8 * np.finfo(e.dtype).eps * max(np.abs(e).max(initial=1), 1) * max(e.shape, default=1)
                for e in map(np.asarray, outputs) if e.dtype.kind == "f" and np.isfinite(e).all()), default=None)
    assert_close(result, expected, rtol=0 if atol else None, atol=atol)


# =============================================================================================
# dtypes: scans that keep the dtype (every device), then NumPy's widening ones (int64: not on webgpu)


def kept_dtype_scans(x):
    return (np.maximum.accumulate(x, axis=1), np.minimum.accumulate(x), np.cumsum(x, axis=-1, dtype=x.dtype))


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int32", "float16", "float32", "float64"])
def test_scans_keeping_the_dtype_match_numpy(dtype, device, rng):
    assert_scans_match(kept_dtype_scans, sample(rng, (3, 6), dtype), device=device)


def widening_scans(x):
    """cumsum/cumprod of bools and ints are int64 (uint64 for unsigned), as np.sum; add.accumulate too."""
    return (np.cumsum(x), x.cumprod(axis=0), np.add.accumulate(x, axis=-1), np.multiply.accumulate(x))


@pytest.mark.parametrize("dtype", ["bool", "int8", "int32", "int64", "uint8", "float16", "float32", "float64"])
def test_widening_scans_match_numpy_values_and_dtypes(dtype, device, rng):
    assert_scans_match(widening_scans, sample(rng, (4, 5), dtype), device=device)


# =============================================================================================
# axis forms and edge shapes


def axis_forms(x):
    return (np.cumsum(x, axis=0), x.cumsum(axis=1), np.cumsum(x, axis=-1), np.cumprod(x, axis=-2),
            x.cumsum(), np.maximum.accumulate(x, axis=2), np.cumsum(x[:, ::-2, 1:], axis=1))


@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_every_axis_and_axis_none_match_numpy(dtype, device, rng):
    assert_scans_match(axis_forms, sample(rng, (3, 5, 4), dtype).astype(dtype), device=device)


def test_scans_of_non_contiguous_inputs_read_them_in_place(device, rng):
    base = sample(rng, (8, 12), "float32")
    assert_scans_match(lambda x: (np.cumsum(x, axis=1), np.cumprod(x, axis=0)), base.T[::2], device=device)
    assert_scans_match(lambda x: np.cumsum(x, axis=-1), base[::-1, ::3], device=device)


def edge_shapes(scalar, row, column, empty):
    return (np.cumsum(scalar), np.cumsum(scalar, axis=0), np.cumprod(row, axis=0), np.cumsum(column, axis=1),
            np.cumsum(empty, axis=1), np.cumsum(empty), np.maximum.accumulate(row, axis=1))


def test_zero_size_zero_d_and_length_one_axes_match_numpy(device, rng):
    assert_scans_match(edge_shapes, np.float32(1.5), sample(rng, (1, 5), "float32"),
                       sample(rng, (4, 1), "float32"), np.zeros((2, 0, 3), np.float32), device=device)


def test_dtype_argument_casts_before_scanning_as_numpy(device, rng):
    x = sample(rng, (3, 7), "float32") * 3
    assert_scans_match(lambda x: (np.cumsum(x, axis=1, dtype=np.int32), np.cumprod(x > 0, axis=0, dtype=np.int32),
                                  np.maximum.accumulate(x, axis=1, dtype=np.float64)), x, device=device)


def test_nan_scans_count_nan_as_zero_or_one_and_max_propagates_it(device):
    x = np.array([[np.nan, 1.5, np.nan, 2.0, -np.inf], [3.0, np.nan, np.inf, np.nan, -1.0]], np.float32)
    assert_scans_match(lambda x: (np.nancumsum(x, axis=1), np.nancumprod(x, axis=1), np.nancumsum(x),
                                  np.maximum.accumulate(x, axis=1), np.minimum.accumulate(x, axis=0),
                                  np.cumsum(x, axis=1)), x, device=device)
    ints = np.arange(-3, 9, dtype=np.int32).reshape(3, 4)
    assert_scans_match(lambda x: (np.nancumsum(x, axis=0), np.nancumprod(x, axis=1)), ints, device=device)


# =============================================================================================
# fusion: per-row scans absorb producers and consumers


FUSED = {
    "cumsum(x * 2, axis=-1) / n": lambda x: np.cumsum(x * 2, axis=-1) / x.shape[-1],
    "empirical CDF of rows": lambda x: np.cumsum(x, axis=1) / x.sum(axis=1, keepdims=True),
    "cumulative softmax": lambda x: np.cumsum(np.exp(x - x.max(axis=-1, keepdims=True)), axis=-1),
    "reverse cumsum x[:, ::-1].cumsum(1)[:, ::-1]": lambda x: np.cumsum(x[:, ::-1], axis=1)[:, ::-1],
    "cumsum of cumsum": lambda x: np.cumsum(np.cumsum(x, axis=0), axis=0) - x,
    "columns: cumsum(x, axis=0) * x": lambda x: np.cumsum(x, axis=0) * x,
}


@pytest.mark.parametrize("name", list(FUSED))
def test_a_scan_fuses_with_its_producers_and_consumers_into_one_kernel(name, device, rng):
    body = FUSED[name]
    x = sample(rng, (24, 40), "float32")
    assert len(tj.kernel(body).lower(x, device=device).kernels) == 1
    assert_scans_match(body, x, device=device)


def test_a_scan_read_at_shifted_positions_is_stored_once_then_read(device, rng):
    def moving_sum(x):
        c = np.cumsum(x, axis=-1)
        return c[:, 3:] - c[:, :-3]
    x = sample(rng, (6, 50), "float32")
    assert len(tj.kernel(moving_sum).lower(x, device=device).kernels) == 2
    assert_scans_match(moving_sum, x, device=device)


def test_scans_along_different_axes_each_get_their_own_kernel(device, rng):
    def body(x):
        return np.cumsum(np.cumsum(x, axis=0), axis=1)
    x = sample(rng, (9, 11), "float32")
    assert len(tj.kernel(body).lower(x, device=device).kernels) == 2
    assert_scans_match(body, x, device=device)


# =============================================================================================
# long scans: blocks scanned in parallel, then their totals, then one elementwise pass


def test_a_long_scan_runs_blocked_in_parallel_and_is_as_accurate_as_numpy(device, rng):
    x = rng.random(1_000_000, dtype=np.float32)
    k = tj.kernel(lambda x: np.cumsum(x) / x.size)
    assert [kk.name.split("_", 1)[1] for kk in k.lower(x, device=device).kernels] == \
        ["scan_sum", "scan_sum", "elementwise"]
    got = np.asarray(run_kernel(k, x, device=device)).astype(np.float64)
    exact = np.cumsum(x.astype(np.float64)) / x.size
    numpy_error = np.abs(np.cumsum(x) / np.float32(x.size) - exact).max()
    assert np.abs(got - exact).max() <= numpy_error


def test_long_integer_and_max_scans_in_blocks_are_exact(device, rng):
    x = random_array(rng, (3, 40_000), "int32", full_range=True)
    assert_scans_match(lambda x: (np.cumsum(x, axis=1, dtype=np.int32), np.maximum.accumulate(x[:, ::-1], axis=1)),
                       x, device=device)
    assert_scans_match(lambda x: np.cumsum(x, axis=0), x.T.astype(np.float32), device=device)


# =============================================================================================
# work-group scans (SIMT targets): each work-item scans a chunk, the chunks' totals are scanned across the
# group, a tile at a time. numba runs the same rows serially; cuda and metal are compiled (conftest checks).


def launch_mode(kernel) -> str | None:
    """How a lowered kernel runs on a SIMT device ("group" or "thread"); None on numba."""
    launch = getattr(kernel, "launch", None) or getattr(getattr(kernel, "rendered", None), "launch", None)
    return None if launch is None else launch.mode


def assert_group_scan(body, x, device, kernels: int = 1):
    """The kernel count is pinned and, on a SIMT device, the scan takes the group path (a dtype the device
    lacks skips the test, as run_kernel does)."""
    plan = run_kernel(tj.kernel(body).lower, x, device=device)
    assert len(plan.kernels) == kernels
    assert all(launch_mode(k) in (None, "group") for k in plan.kernels)


def four_scans(x):
    """add, multiply, maximum, minimum, each in the input's dtype (products of values near 1 stay finite)."""
    return (np.cumsum(x, axis=1, dtype=x.dtype), np.cumprod(x, axis=-1, dtype=x.dtype),
            np.maximum.accumulate(x, axis=1), np.minimum.accumulate(x, axis=1))


def near_one(rng, shape, dtype):
    """Floats in [0.99, 1.01) with a few NaNs, ints in [-3, 3] (products wrap, as in NumPy)."""
    if np.dtype(dtype).kind != "f":
        return random_array(rng, shape, dtype, low=-3, high=3)
    x = random_array(rng, shape, dtype, low=0.99, high=1.01)
    x[0, shape[1] // 3] = x[-1, shape[1] - 2] = np.nan
    return x


@pytest.mark.parametrize("dtype", ["int32", "float32", "float64", "int64"])
def test_long_rows_scan_in_a_work_group_for_every_op_and_dtype(dtype, device, rng):
    x = near_one(rng, (3, 4099), dtype)    # two tiles of 256 work-items, the second ragged
    assert_group_scan(four_scans, x, device, kernels=4)
    assert_scans_match(four_scans, x, device=device)


# a tile is 16 steps per work-item, up to 256 work-items: one ragged tile (300), one whole tile (1024), three
# tiles of the largest group (9000; two, the second ragged, above)
@pytest.mark.parametrize("length", [300, 1024, 9000])
def test_group_scans_match_numpy_below_at_and_above_one_tile(length, device, rng):
    x = near_one(rng, (2, length), "float32")
    body = lambda x: (np.cumsum(x, axis=1), np.maximum.accumulate(x, axis=1))  # noqa: E731
    assert_group_scan(body, x, device, kernels=2)
    assert_scans_match(body, x, device=device)


def test_scans_shorter_than_the_group_threshold_stay_one_per_work_item(device, rng):
    x = sample(rng, (3, 40), "float32")
    plan = tj.kernel(lambda x: np.cumsum(x, axis=1)).lower(x, device=device)
    assert launch_mode(plan.kernels[0]) in (None, "thread")


GROUP_FUSED = {
    "cumsum(x * 2) / row sum": lambda x: np.cumsum(x * 2, axis=-1) / x.sum(axis=1, keepdims=True),
    "cumulative softmax": lambda x: np.cumsum(np.exp(x - x.max(axis=-1, keepdims=True)), axis=-1),
    "reverse cumsum x[:, ::-1].cumsum(1)[:, ::-1]": lambda x: np.cumsum(x[:, ::-1], axis=1)[:, ::-1],
    "reverse running max": lambda x: np.maximum.accumulate(x[:, ::-1], axis=1)[:, ::-1] - x,
    "columns: cumsum(x.T, axis=0)": lambda x: np.cumsum(x.T, axis=0) * 2,
    "cumsum of cumsum": lambda x: np.cumsum(np.cumsum(x, axis=1), axis=1) - x,
}


@pytest.mark.parametrize("name", list(GROUP_FUSED))
def test_a_group_scan_fuses_with_its_producers_and_consumers_into_one_kernel(name, device, rng):
    body = GROUP_FUSED[name]
    x = sample(rng, (5, 2001), "float32")
    plan = tj.kernel(body).lower(x, device=device)
    assert len(plan.kernels) == 1
    # a scan of a scan needs the inner one's prefix across the group first: it stays one per work-item
    assert launch_mode(plan.kernels[0]) in (None, "thread" if name == "cumsum of cumsum" else "group")
    assert_scans_match(body, x, device=device)


def test_many_long_rows_and_an_axis_other_than_the_last_match_numpy(device, rng):
    x = sample(rng, (300, 3, 257), "float32")
    assert_scans_match(lambda x: (np.cumsum(x, axis=-1), np.cumsum(x, axis=0)), x, device=device)
    ints = sample(rng, (1500, 2), "int32")
    assert_group_scan(lambda x: np.cumsum(x, axis=0, dtype=np.int32), ints, device)
    assert_scans_match(lambda x: (np.cumsum(x, axis=0, dtype=np.int32), np.minimum.accumulate(x[::-1], axis=0)),
                       ints, device=device)


def test_bool_and_float16_rows_scan_in_a_work_group(device, rng):
    flags = sample(rng, (2, 700), "bool")
    assert_scans_match(lambda b: (np.minimum.accumulate(b, axis=1), np.cumsum(b, axis=1, dtype=np.int32)), flags,
                       device=device)
    halves = random_array(rng, (2, 700), "float16", low=0.0, high=1.0)
    assert_scans_match(lambda h: np.cumsum(h, axis=1, dtype=np.float32), halves, device=device)


def test_a_million_long_row_in_one_work_group_is_more_accurate_than_numpy(device, rng, monkeypatch):
    if device == "numba":
        pytest.skip("numba walks a row in order, as NumPy does")
    monkeypatch.setattr(fuse, "SPLIT_MIN_SCAN", 1 << 30)   # not blocked: one work-group walks the whole row
    x = rng.random(1_000_000, dtype=np.float32)
    assert_group_scan(lambda x: np.cumsum(x), x, device)
    exact = np.cumsum(x.astype(np.float64))
    got = np.asarray(run_kernel(tj.kernel(lambda x: np.cumsum(x)), x, device=device)).astype(np.float64)
    # chunks of 16 joined by a tree: max error 0.24 where NumPy's serial float32 sum is off by 9.5
    assert np.abs(got - exact).max() <= np.abs(np.cumsum(x) - exact).max() / 10


@pytest.mark.parametrize("target", ["cuda", "metal"])
def test_cuda_and_metal_lower_long_rows_to_a_work_group_scan(target):
    plan = tj.kernel(lambda x: np.cumsum(x * x, axis=1)).lower(tj.spec((8, 5000), np.float32), device=target)
    (k,) = plan.kernels
    assert k.launch.mode == "group" and k.launch.local_size == 256
    barrier = "__syncthreads();" if target == "cuda" else "threadgroup_barrier(mem_flags::mem_threadgroup);"
    assert k.source.count(barrier) == 4     # Hillis-Steele: after each read and write, before and after
    assert k.source.count("in0[") == 1      # read once: the second walk of a chunk takes the kept values


# =============================================================================================
# errors


def test_out_writes_the_scan_into_the_given_array(device, rng):
    def body(x):
        out = np.empty_like(x)
        np.cumsum(x, axis=1, out=out)
        np.maximum.accumulate(x, axis=0, out=x)   # into the input itself: the caller's array changes
        return out

    x = sample(rng, (3, 7), "float32")
    expected_x = x.copy()
    want = body(expected_x)
    arg = x if device == "numba" else tj.asarray(x, device=device)
    assert_close((tj.kernel(body)(arg, device=device), arg), (want, expected_x))


def test_unsupported_scan_arguments_raise_clear_errors(device):
    x = np.ones((2, 3), np.float32)
    with pytest.raises(tj.ShapeError, match="multiple axes"):
        tj.kernel(lambda x: np.add.accumulate(x, axis=None))(x, device=device)
    with pytest.raises(tj.ShapeError, match="scalar"):
        tj.kernel(lambda x: np.maximum.accumulate(x.sum()))(x, device=device)
    with pytest.raises(tj.UnsupportedError, match="np.subtract.accumulate over 300 elements"):   # (folded: 256)
        tj.kernel(lambda x: np.subtract.accumulate(x))(np.ones(300, np.float32), device=device)
    with pytest.raises(tj.ShapeError, match="out of bounds"):
        tj.kernel(lambda x: np.cumsum(x, axis=2))(x, device=device)
