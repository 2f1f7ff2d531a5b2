"""Reductions and statistics against NumPy computed in the test: values and result dtypes per dtype,
axis / keepdims / dtype / initial / where, NaN and infinity positions, zero-size inputs, accuracy.
Each test packs many reductions into one kernel's tuple of outputs, so it costs one compile."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tracejit as tj
from tracejit.ir.kernel_ir import KOp
from reference import ALL_DTYPES, FLOATS, NO_FLOAT64, assert_close, random_array, run_kernel, with_edge_values


def sample(rng, shape, dtype):
    """Floats in [-3, 3) (float16 sums of squares stay finite) with signed zeros in front; ints in [-100, 100]."""
    if np.dtype(dtype).kind == "f":
        return with_edge_values(random_array(rng, shape, dtype, low=-3.0, high=3.0))
    return random_array(rng, shape, dtype)


def assert_matches(body, *args, device, rtol=None, atol=None, **kwargs):
    """Run body through tracejit and on NumPy (its warnings about empty or all-NaN slices silenced)."""
    result = run_kernel(tj.kernel(body), *args, device=device, **kwargs)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = body(*args, **kwargs)
    assert_close(result, expected, rtol=rtol, atol=atol)


# =============================================================================================
# Every dtype (few outputs: each reduction is a kernel of its own), then the axis forms on two dtypes


def every_dtype(x):
    """Results every device can hold for every input dtype: argmax as int32 (webgpu has no int64)."""
    out = (np.max(x, axis=-1), x.any(axis=0), np.argmax(x, axis=-1).astype(np.int32))
    if x.dtype != np.bool_:  # NumPy cannot subtract bools
        out += (np.ptp(x, axis=1),)
    if x.dtype.kind == "f":
        out += (np.mean(x, axis=-1), x.var(axis=-1), np.std(x))
    return out


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_reductions_of_every_dtype_match_numpy(dtype, device, rng):
    assert_matches(every_dtype, sample(rng, (3, 4, 5), dtype), device=device)


def integer_statistics(x):
    """float64 statistics and int64 indices and counts of ints and bools; int64/uint64 sums."""
    out = (np.mean(x, axis=1), x.var(axis=-1), np.std(x, ddof=1), np.argmin(x), np.count_nonzero(x, axis=(0, 2)),
           np.count_nonzero(x, axis=1, keepdims=True), np.mean(x, axis=0, dtype=np.float32),
           np.sum(x, axis=-1, dtype=np.int32), np.average(x, axis=0))
    if x.dtype.kind in "bi":  # (unsigned sums are uint64, which the CUDA renderer lacks today)
        out += (x.sum(axis=1), np.prod(x, axis=0))
    return out


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int64"])
def test_integer_statistics_match_numpy(dtype, device, rng):
    assert_matches(integer_statistics, sample(rng, (3, 4, 5), dtype), device=device)


def axis_forms(x):
    return (x.min(axis=0), np.amax(x, axis=(0, 2)), np.amin(x, axis=-1, keepdims=True), np.max(x),
            x.all(axis=(0, -1), keepdims=True), np.any(x > 0), np.ptp(x, axis=(0, 2), keepdims=True),
            np.argmax(x).astype(np.int32), x.argmin(axis=1, keepdims=True).astype(np.int32),
            np.argmax(x, axis=0, keepdims=True).astype(np.int32),
            x.var(axis=(0, 1)), np.std(x, axis=2, keepdims=True), np.sum(x, axis=(-1, 0)), x.prod(axis=0))


@pytest.mark.parametrize("dtype", ["int16", "float32"])
def test_axis_and_keepdims_forms_match_numpy(dtype, device, rng):
    assert_matches(axis_forms, sample(rng, (3, 4, 5), dtype), device=device)


def test_argmax_and_argmin_pick_the_first_of_equal_values(device):
    x = np.array([[1, 3, 3, 0], [0, 0, -1, -1], [-0.0, 0.0, 0.0, -0.0], [2, 2, 2, 2]], np.float32)

    def body(x):
        return np.argmax(x, axis=1), np.argmin(x, axis=1), x.argmax(axis=0), np.argmin(x)
    assert_matches(body, x, device=device)


# =============================================================================================
# NaN, infinities, the nan* family


def with_nans(dtype):
    """Rows: NaN first, NaN last, NaN between infinities, all NaN, no NaN, -inf only, +inf and NaN."""
    nan, inf = np.nan, np.inf
    return np.array([[nan, 1, 5, 2], [3, 1, 0.5, nan], [-inf, nan, inf, 1], [nan, nan, nan, nan],
                     [2, -1, 4, 4], [-inf, -inf, -inf, -inf], [inf, nan, -inf, inf]], dtype)


def nan_reductions(x):
    out = (np.max(x, axis=1), np.argmax(x, axis=1).astype(np.int32), np.nansum(x, axis=1), np.nanmax(x, axis=1),
           np.nanmean(x, axis=1), np.nanvar(x, axis=1))
    if x.dtype == np.float32:
        out += (x.min(axis=1), np.argmin(x, axis=1).astype(np.int32), np.sum(x, axis=1), np.nanprod(x, axis=1),
                np.nanmin(x, axis=1), np.nanstd(x, axis=1, keepdims=True), np.nanmax(x), np.nansum(x, axis=0),
                np.nanvar(x, axis=1, ddof=3))
    return out


@pytest.mark.parametrize("dtype", FLOATS)
def test_nan_and_infinity_positions_match_numpy(dtype, device):
    assert_matches(nan_reductions, with_nans(dtype), device=device)


@pytest.mark.parametrize("dtype", FLOATS)
def test_nanargmax_and_nanargmin_skip_nan(dtype, device):
    x = np.delete(with_nans(dtype), 3, axis=0)  # NumPy raises on the all-NaN row; tested below

    def body(x):
        return np.nanargmax(x, axis=1), np.nanargmin(x, axis=0, keepdims=True)
    assert_matches(body, x, device=device)


def test_nanargmax_of_an_all_nan_slice_is_minus_one(device):
    # NumPy raises ValueError; a kernel cannot raise on data, so tracejit returns -1 (as JAX does)
    x = with_nans(np.float32)
    with pytest.raises(ValueError, match="All-NaN"):
        np.nanargmax(x, axis=1)
    kernel = tj.kernel(lambda x: (np.nanargmax(x, axis=1), np.nanargmin(x, axis=1)))
    got_max, got_min = (np.asarray(r) for r in run_kernel(kernel, x, device=device))
    assert got_max.dtype == got_min.dtype == np.int64
    assert got_max[3] == got_min[3] == -1
    rows = [0, 1, 2, 4, 5, 6]
    np.testing.assert_array_equal(got_max[rows], np.nanargmax(x[rows], axis=1))
    np.testing.assert_array_equal(got_min[rows], np.nanargmin(x[rows], axis=1))


@pytest.mark.parametrize("dtype", ["int16", "bool"])
def test_nan_functions_of_integers_are_the_plain_reductions(dtype, device, rng):
    x = random_array(rng, (4, 6), dtype)

    def body(x):
        out = (np.nansum(x, axis=1), np.nanprod(x, axis=0), np.nanmax(x), np.nanmin(x, axis=1),
               np.nanmean(x, axis=1), np.nanvar(x, axis=0), np.nanstd(x), np.nanargmax(x, axis=1))
        return out
    assert_matches(body, x, device=device)


# =============================================================================================
# where= and initial=, axis forms, keepdims, dtype=, ddof


def masked_reductions(x, m):
    return (np.sum(x, axis=1, where=m), x.prod(axis=0, where=m, initial=2), np.max(x, axis=-1, where=m, initial=-5),
            x.min(axis=(0, 1), initial=0.5, where=m), np.sum(x, initial=10), np.max(x, axis=0, initial=100),
            np.mean(x, axis=1, where=m), x.var(axis=0, where=m), np.std(x, axis=(0, 1), where=m, ddof=1),
            np.any(x > 1, axis=1, where=m), x.all(axis=0, where=m), np.nansum(x, axis=1, where=m),
            np.nanmean(x, axis=0, where=m), np.mean(x, axis=1, where=m[0]))


def test_where_and_initial_match_numpy(device, rng):
    x = random_array(rng, (4, 5), "float32", low=-3, high=3)
    x[1, 2] = np.nan
    m = rng.random((4, 5)) < 0.6
    m[:, 0] = True
    assert_matches(masked_reductions, x, m, device=device)


def test_max_with_where_needs_initial_as_in_numpy():
    kernel = tj.kernel(lambda x, m: np.max(x, where=m))
    with pytest.raises(ValueError, match="initial"):
        np.max(np.ones(3), where=np.ones(3, bool))
    with pytest.raises(tj.ShapeError, match="initial"):
        kernel.trace(np.ones(3), np.ones(3, bool))


def test_var_ddof_dtype_and_correction_match_numpy(device, rng):
    x = random_array(rng, (3, 4), "float32")

    def body(x):
        return (np.var(x, axis=1, ddof=1), np.std(x, axis=0, ddof=2), x.var(axis=0, ddof=3),  # ddof = n: inf/nan
                np.var(x, axis=1, ddof=5), np.var(x.astype(np.float16), axis=1, dtype=np.float32),
                np.std(x, correction=1), np.var(x, axis=()))
    assert_matches(body, x, device=device)


def test_variance_of_a_long_float32_row_is_as_accurate_as_numpy(device, rng):
    # the two-pass variance of a row with a large mean: a one-pass sum of squares would lose most digits
    x = (rng.standard_normal((1, 1_000_000)) * 3 + 1000).astype(np.float32)
    exact = np.var(x.astype(np.float64))
    got = float(np.asarray(run_kernel(tj.kernel(lambda x: np.var(x)), x, device=device)))
    numpy_error = abs(float(np.var(x)) - exact) / exact
    assert abs(got - exact) / exact <= max(2 * numpy_error, 1e-6)


def test_long_float32_sums_are_at_least_as_accurate_as_numpys(device, rng):
    """The numba device adds a float32 row in blocks of up to 1024 elements in vector lanes and the
    blocks' sums in float64 (no conversion per element); checked against float64, as NumPy's pairwise
    sum is.
    Metal and WGSL have no double and add in float32 (webgpu a 1024-element row serially in one
    work-item: about 11 ulp where NumPy is 1; the README says so). A block's lanes are added in float32:
    with AVX2's 8 lanes a row of 1024 comes within 10% of NumPy's error (measured over 5 seeds, 0.8-1.09x),
    hence the 1.1."""
    eps = np.finfo(np.float32).eps
    slack = {"metal": 8 * eps, "webgpu": 16 * eps}.get(device, 1.1 * eps)
    rows = {"long rows, large mean": (rng.standard_normal((4, 100_003)) + 100).astype(np.float32),
            "softmax-like rows": rng.random((64, 1024)).astype(np.float32),
            "one short block": (rng.standard_normal((16, 200)) + 10).astype(np.float32)}
    for what, a in rows.items():
        exact = a.astype(np.float64).sum(axis=1)
        got = np.asarray(run_kernel(tj.kernel(lambda a: a.sum(axis=1)), a, device=device))
        assert got.dtype == np.float32
        ours = np.max(np.abs(got.astype(np.float64) - exact) / exact)
        numpys = np.max(np.abs(a.sum(axis=1).astype(np.float64) - exact) / exact)
        assert ours <= max(1.1 * numpys, slack), f"{what}: error {ours:.2e}, NumPy's {numpys:.2e}"


def test_zero_size_reductions_match_numpy(device):
    x = np.zeros((0, 3), np.float32)

    def body(x):
        return (np.sum(x, axis=0), x.prod(axis=0), np.max(x, axis=0, initial=-1.0), np.any(x, axis=0),
                np.all(x, axis=0), np.mean(x, axis=0), np.var(x, axis=0), np.nansum(x, axis=0),
                np.max(x, axis=1), np.argmax(x, axis=1).astype(np.int32))
    assert_matches(body, x, device=device)


def test_max_and_argmax_of_an_empty_slice_raise_value_error():
    with pytest.raises(ValueError, match="zero-size"):
        tj.kernel(lambda x: np.max(x, axis=1)).trace(np.zeros((3, 0), np.float32))
    with pytest.raises(ValueError, match="empty sequence"):
        tj.kernel(lambda x: np.argmax(x)).trace(np.zeros((0,), np.float32))


# =============================================================================================
# average, ptp, logsumexp


def test_average_matches_numpy(device, rng):
    x = random_array(rng, (4, 5), "float32", low=0, high=3)
    w_row = random_array(rng, (5,), "float32", low=0.5, high=2)
    w_full = random_array(rng, (4, 5), "float32", low=0.5, high=2)

    def body(x, w_row, w_full):
        avg, scale = np.average(x, axis=0, weights=w_full, returned=True)
        return (np.average(x), np.average(x, axis=1, weights=w_row), np.average(x, weights=w_full), avg, scale,
                np.average(x, axis=1, keepdims=True), np.average(x, axis=1, returned=True)[1])
    assert_matches(body, x, w_row, w_full, device=device)


def test_average_takes_one_axis_in_a_sequence_with_1d_weights_as_numpy_does(device, rng):
    x = random_array(rng, (4, 5), "float32", low=0, high=3)
    w_row = random_array(rng, (5,), "float32", low=0.5, high=2)
    assert_matches(lambda x, w: np.average(x, axis=(1,), weights=w), x, w_row, device=device)
    with pytest.raises(ValueError, match="consistent with shape of a"):   # NumPy's own refusal of two axes
        tj.kernel(lambda x, w: np.average(x, axis=(0, 1), weights=w)).trace(x, w_row)


def logsumexp_reference(x, axis):
    """In float64, shifted by a fixed constant rather than by the maximum (rows here lie within ~100 of it)."""
    x64 = x.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (np.log(np.exp(x64 - 1000.0).sum(axis=axis)) + 1000.0).astype(x.dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_logsumexp_is_stable_and_handles_infinite_rows(dtype, device):
    x = np.array([[1000, 1000, 990], [990, 950, 999], [-np.inf] * 3, [np.inf, 1000, 999], [np.nan, 1000, 3]], dtype)

    @tj.kernel
    def kernel(x):
        return tj.logsumexp(x, axis=-1), tj.logsumexp(x, axis=1, keepdims=True), tj.logsumexp(x[:2])

    rows, rows_kept, total = run_kernel(kernel, x, device=device)
    expected = logsumexp_reference(x, -1)
    expected[3] = np.inf   # exp(inf - 1000) overflows in the reference as in the function: inf
    assert_close(rows, expected)
    assert_close(rows_kept, expected[:, None])
    assert_close(total, logsumexp_reference(x[:2], None))


def test_logsumexp_of_integers_is_float64(rng):
    x = random_array(rng, (3, 4), "int32", low=-5, high=5)
    got = tj.kernel(lambda x: tj.logsumexp(x, axis=0))(x, device="numba")
    assert_close(got, np.log(np.exp(x.astype(np.float64)).sum(axis=0)))


# =============================================================================================
# Errors


def test_reduction_out_must_have_the_result_shape_as_in_numpy():
    with pytest.raises(ValueError):
        np.var(np.ones(3, np.float32), out=np.ones(3, np.float32))
    with pytest.raises(tj.ShapeError, match=r"np\.var\(\.\.\., out=\.\.\.\): out has shape \(3,\)"):
        tj.kernel(lambda x: np.var(x, out=x)).trace(np.ones(3, np.float32))
    x, s = np.arange(6, dtype=np.float32).reshape(2, 3), np.zeros(3, np.float32)
    tj.kernel(lambda x, s: np.var(x, axis=0, out=s))(x, s)
    np.testing.assert_allclose(s, np.var(x, axis=0))


def test_bad_axis_raises_shape_error_naming_it():
    with pytest.raises(tj.ShapeError, match="axis 2 is out of bounds"):
        tj.kernel(lambda x: np.var(x, axis=2)).trace(np.ones((2, 2), np.float32))
    with pytest.raises(tj.ShapeError, match="duplicate"):
        tj.kernel(lambda x: np.std(x, axis=(0, -2))).trace(np.ones((2, 2), np.float32))


def test_ptp_of_bool_is_refused_as_in_numpy():
    with pytest.raises(TypeError):
        np.ptp(np.ones(3, bool))
    with pytest.raises(TypeError):
        tj.kernel(lambda x: np.ptp(x)).trace(np.ones(3, bool))


def test_int_sums_are_exact_beyond_float_precision(device):
    x = np.array([2**53, 1, 1, -(2**53)], np.int64)
    got = run_kernel(tj.kernel(lambda x: (np.sum(x), np.argmax(x), np.ptp(x[:3]))), x, device=device)
    assert_close(got, (np.sum(x), np.argmax(x), np.ptp(x[:3])))


def test_ufunc_reduce_honours_dtype_initial_and_where(device, rng):
    x = random_array(rng, (3, 4), "int16")
    m = rng.random((3, 4)) < 0.5

    def body(x, m):
        return (np.add.reduce(x, where=m), np.multiply.reduce(x, axis=1, dtype=np.int32, initial=2),
                np.maximum.reduce(x, axis=None, initial=-1000, where=m), np.minimum.reduce(x, keepdims=True))
    assert_matches(body, x, m, device=device)


# ---- reductions over nothing: the identity, with NumPy's dtype (issue 15, item 4) ----

ZERO_SIZE_CASES = {
    "sum of an empty product": (lambda a: (a @ a.T).sum(), ((0, 1), np.float16)),
    "mean of empty slices, then a sum": (lambda a: a.mean(axis=(2, 1)).sum(0, keepdims=True), ((0, 1, 1024), np.float32)),
    "mean over an empty axis": (lambda a: a.mean(axis=(2, 1)), ((3, 0, 4), np.float32)),
    "empty contraction": (lambda a: a @ a.T, ((2, 0), np.float32)),
    "prod over an empty axis": (lambda a: a.prod(axis=0), ((0, 3), np.int32)),
    "sum of nothing": (lambda a: a.sum(), ((0,), np.int8)),
}


@pytest.mark.parametrize("case", list(ZERO_SIZE_CASES))
def test_reductions_over_zero_elements_give_numpys_identity(device, case):
    body, (shape, dtype) = ZERO_SIZE_CASES[case]
    a = np.zeros(shape, dtype)
    result = run_kernel(tj.kernel(body), a, device=device)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # NumPy warns on the mean of an empty slice
        expected = body(a)
    assert np.asarray(result).dtype == expected.dtype
    assert_close(result, expected)


def test_zero_size_mean_on_float64_like_the_issue(device):
    if device in NO_FLOAT64:
        pytest.skip(NO_FLOAT64[device])
    a = np.zeros((0, 1, 1024))
    result = tj.kernel(lambda a: a.mean(axis=(2, 1)).sum(0, keepdims=True), device=device)(a)
    assert np.asarray(result).dtype == np.float64 and np.asarray(result).tolist() == [0.0]


# =============================================================================================
# GPUs keep the arrays a row's first reduction reads in local memory for the loops after it


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, g, b):
    m = x.mean(axis=-1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-5) * g + b


def global_loads(kernel) -> dict[int, int]:
    """How many load instructions of the kernel IR read each parameter (global memory)."""
    ins = kernel.ir.instrs
    counts: dict[int, int] = {}
    for x in ins:
        if x.op == KOp.LOAD and ins[x.srcs[0]].op == KOp.PARAM:
            counts[ins[x.srcs[0]].arg] = counts.get(ins[x.srcs[0]].arg, 0) + 1
    return counts


@pytest.mark.parametrize("target", ["cuda:sm_90", "metal"])
def test_gpu_row_kernels_read_each_row_from_global_memory_once(target):
    x, g = tj.spec((64, 1024), "float32"), tj.spec((1024,), "float32")
    for body, args in ((softmax, (x,)), (layernorm, (x, g, g))):
        try:
            (k,) = tj.kernel(body).lower(*args, device=target).kernels
        except tj.DeviceError as e:
            pytest.skip(f"{target} cannot compile here: {e}")
        assert set(global_loads(k).values()) == {1}, (body.__name__, global_loads(k))


def test_the_numba_device_reads_rows_again_from_its_caches():
    (k,) = tj.kernel(softmax).lower(tj.spec((64, 1024), "float32"), device="numba").kernels
    assert 2 in global_loads(k).values()


def row_programs(x, y):
    """Rows read by later loops in every way: again at the same element, reversed, through a second
    array, inside a second reduction, over a middle axis and over two axes at once."""
    out = (softmax(x), x / np.abs(x).sum(axis=-1, keepdims=True), x - np.log(np.exp(x).sum(axis=-1, keepdims=True)),
           x[..., ::-1] - x.mean(axis=-1, keepdims=True), (x * y).sum(axis=-1, keepdims=True) + x - y,
           x.var(axis=-1, keepdims=True) * y + x.max(axis=-1, keepdims=True))
    z, w = x.reshape(x.shape[0], -1, 2), y.reshape(y.shape[0], -1, 2)
    out += (z - z.mean(axis=1, keepdims=True) * w.max(axis=1, keepdims=True),
            z / np.abs(z).sum(axis=(1, 2), keepdims=True))
    return out


@pytest.mark.parametrize("dtype, n", [("float32", 130), ("float32", 1024), ("float16", 1024), ("float64", 130)])
def test_rows_kept_in_local_memory_match_numpy(n, dtype, device, rng):
    """Rows of a work-group and a remainder (130 on 128 work-items) and of several elements per work-item."""
    x, y = (sample(rng, (5, n), dtype) for _ in range(2))
    tol = {"float16": 2e-2, "float32": 1e-5, "float64": 1e-12}[dtype]   # absolute: sums of n products cancel
    assert_matches(row_programs, x, y, device=device, rtol=tol, atol=tol * n ** 0.5)


@pytest.mark.parametrize("body", [lambda v: np.sum(v, axis=-1).astype(np.float32),
                                  lambda v: np.prod(v, axis=-1).astype(np.float32),
                                  lambda v: np.cumsum(v, axis=-1) * np.float16(1),
                                  lambda v: v / v.sum(axis=-1, keepdims=True)],
                         ids=["sum", "prod", "cumsum", "normalise"])
def test_a_float16_total_is_rounded_to_float16_before_the_operations_after_it(body, device):
    """A float16 total is a float16 value: NumPy's loops accumulate a float16 sum or product in float32 and
    store the total as float16, and a float16 cumsum stores every running total. Kernels computed in
    float32 handed the unrounded total to the operations after it (stored results were right)."""
    v = (np.random.default_rng(3).standard_normal((16, 5)) * 10).astype(np.float16)
    got = np.asarray(run_kernel(tj.kernel(body), v, device=device))
    with np.errstate(all="ignore"):
        want = body(v)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
