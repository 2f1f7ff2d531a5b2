"""ml_dtypes.bfloat16 in kernels (issue 49 item 2), against NumPy with ml_dtypes on every device: stored as bfloat16,
computed in float32, each op's result rounded to bfloat16 as ml_dtypes' loops round it, so elementwise programs
match NumPy bit for bit. NumPy's promotion with bfloat16 (taken from NumPy itself), casts in and out, arrays made
in the kernel, NaN, infinities, overflow, rounding ties and subnormals, writes into bfloat16 arguments, results
passed back in, products and reductions (which accumulate in float32 and round once, where NumPy with ml_dtypes
rounds every partial sum: see `exact_sum`), and what is refused. A hypothesis fuzzer of random elementwise
programs at the end (TRACEJIT_FUZZ_EXAMPLES scales it). float8: tests/test_float8.py."""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from numpy.exceptions import DTypePromotionError

import tracejit as tj

# make test's budget: emulated metal runs the SIMT lowering emulated cuda runs (its MSL is checked on numba's run)
pytestmark = pytest.mark.slow_emulated("metal")

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.float32
EXAMPLES = int(os.environ.get("TRACEJIT_FUZZ_EXAMPLES", "0")) or 15
AVAILABLE = [info.name for info in tj.devices() if info.available]


def host(r):
    return r if isinstance(r, np.ndarray) else np.asarray(r)


def ulps(a, b) -> np.ndarray:
    """The distance between two bfloat16 arrays in units in the last place (0 where both are NaN), through the
    ordered integer line of their bit patterns."""
    def line(v):
        bits = v.view(np.uint16).astype(np.int64)
        return np.where(bits & 0x8000, 0x8000 - bits, bits)
    a, b = np.asarray(a), np.asarray(b)
    both_nan = np.isnan(a.astype(F32)) & np.isnan(b.astype(F32))
    return np.where(both_nan, 0, np.abs(line(a) - line(b)))


def assert_bits(got, expected, what="result", max_ulps=0):
    """Same dtype and shape; bfloat16 values equal bit for bit (any NaN for NaN, as ml_dtypes' payloads are not
    NumPy's business), or within max_ulps units in the last place; other dtypes exactly equal."""
    got, expected = host(got), np.asarray(expected)
    assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype}, NumPy gives {expected.dtype}"
    assert got.shape == expected.shape, f"{what}: shape {got.shape}, NumPy gives {expected.shape}"
    if expected.dtype == BF16:
        far = ulps(got, expected)
        assert far.max(initial=0) <= max_ulps, (
            f"{what}: {int(far.max())} ulps apart at {np.argwhere(far > max_ulps)[:5].tolist()}: "
            f"{got[far > max_ulps][:5]} vs NumPy's {expected[far > max_ulps][:5]}")
    else:
        np.testing.assert_array_equal(got, expected, err_msg=what, strict=True)


def check(body, *args, device, max_ulps=0):
    got = tj.kernel(body)(*args, device=device)
    with np.errstate(all="ignore"):
        expected = body(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    if not isinstance(expected, tuple):
        got, expected = (got,), (expected,)
    assert len(got) == len(expected)
    for k, (g, e) in enumerate(zip(got, expected)):
        assert_bits(g, e, f"{body.__name__}[{k}]", max_ulps)


def values(shape, seed=0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(BF16)


def positive(shape, seed=0):
    return np.random.default_rng(seed).uniform(0.5, 2.0, shape).astype(BF16)


# ---- elementwise: bit for bit -----------------------------------------------------------------------------------


def arithmetic(x, y):
    return (x + y, x - y, x * y, x / y, -x, np.abs(y), x * 2, 3 + x, x * True, np.maximum(x, y), np.minimum(x, y),
            np.where(x > y, x, y), x ** 2, x ** 3, np.square(y), np.floor(x * 4), np.ceil(y), np.rint(x * 8),
            np.sign(x), np.copysign(x, y), np.fmod(x, y), x % y, x // y, x > y, x == y, np.isfinite(x / y))


def test_arithmetic_is_bit_exact(device):
    check(arithmetic, values(64), values(64, 1), device=device)


def math_functions(x, p):
    return (np.sqrt(p), np.exp(x), np.log(p), np.tanh(x), np.sin(x), np.cos(x), np.exp2(x), np.log2(p),
            np.log1p(p), np.expm1(x), np.arctan(x), np.arctan2(x, p), np.hypot(x, p), np.cbrt(x), 1 / p,
            np.reciprocal(p), np.logaddexp(x, p), np.sinh(x), np.arcsinh(x), 1 / (1 + np.exp(-x)))


def test_math_functions_round_once_as_ml_dtypes(device):
    """Computed in float32 and rounded once, as ml_dtypes' loops: equal to NumPy's result, except where the float32
    function's own error (a few float32 ulps: ops.py's `ulps`) moves the value across a bfloat16 rounding boundary,
    which can change it by at most one bfloat16 ulp."""
    x, p = values(256, 2, 2.0), positive(256, 3)
    check(math_functions, x, p, device=device, max_ulps=1)
    check(lambda x, p: (np.sqrt(p), x / p, x * p), x, p, device=device)  # correctly rounded in float32: exact


def test_special_values_nan_inf_overflow_ties_and_subnormals(device):
    ties = [1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, -(1 + 2**-8), 3.3895313e38, 3.4e38, 1e-39, 2**-133,
            2**-134, 3 * 2**-134]
    t = np.array(ties + [np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 1e-45], F32)
    x = t.astype(BF16)
    one = np.ones_like(x)
    check(lambda t: t.astype(BF16), t, device=device)  # float32 -> bfloat16: ties to even, overflow to inf
    check(lambda x, one: (x + one, x * 2, x + x, x / (one * 0), x - x, x * 0, np.maximum(x, one),
                          np.isnan(x), np.isinf(x), np.signbit(x), x.astype(F32)), x, one, device=device)
    big = np.array([3.38e38, -3.38e38, 1e38], F32).astype(BF16)
    check(lambda b: (b * 2, b + b, b * b, -b * 4), big, device=device)  # past bfloat16's largest: inf


# ---- promotion ----------------------------------------------------------------------------------------------------

PARTNERS = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.float16, np.float32, np.float64, np.int64]


@pytest.mark.parametrize("other", PARTNERS, ids=lambda t: np.dtype(t).name)
def test_promotion_with_arrays_is_numpys(device, other):
    """bfloat16 with bool, int8 and uint8 stays bfloat16; with int16, uint16 and float16 it is float32, with int32,
    int64 and float64 float64 (np.add with ml_dtypes imported; np.result_type itself refuses some of them)."""
    x = values(16)
    y = np.arange(16).astype(other)
    if np.dtype(np.result_type(np.add(x[:1], y[:1]))).itemsize == 8 and device in ("webgpu", "metal"):
        with pytest.raises(tj.DtypeError, match="64"):  # no float64 there: said, with the dtype
            tj.kernel(lambda x, y: x + y)(x, y, device=device)
        return
    check(lambda x, y: (x + y, y * x, x > y), x, y, device=device)


def test_promotion_with_scalars_is_numpys(device):
    """Python ints and bools are weak (bfloat16), a Python float gives float32 (ml_dtypes' loops, not NEP 50's
    weak float: NumPy's own answer), NumPy scalars are strong."""
    x = values(16)
    check(lambda x: (x + 1, x * True, 2 * x, x + 2.5, x * np.float32(0.1), x + np.float16(1.5), x - np.int8(3)),
          x, device=device)
    if device not in ("webgpu", "metal"):
        check(lambda x: (x * np.float64(0.1), x + np.int32(7)), x, device=device)


def test_scalar_arguments_with_bfloat16_arrays(device):
    x = values(16)
    check(lambda x, s, n: (x * s, x + n), x, 0.3, 3, device=device)


# ---- casts and arrays made in the kernel ------------------------------------------------------------------------


def test_astype_in_and_out_and_arrays_made_in_the_kernel(device):
    f = np.random.default_rng(4).standard_normal(32).astype(F32) * 300
    i = np.arange(-16, 16, dtype=np.int32) * 1001
    x = values(32, 5, 100.0)
    check(lambda f, i, x: (f.astype(BF16), i.astype(BF16), x.astype(F32), x.astype(np.int32), x.astype(np.uint8),
                           x.astype(np.int16), x.astype(np.bool_), (f * 2).astype(BF16) + x,
                           np.zeros(4, dtype=BF16), np.ones((2, 3), BF16) * 0.1, np.full(5, 0.1, dtype=BF16),
                           np.zeros_like(x) + 1, np.asarray(x, dtype=F32), np.arange(8, dtype=np.int32).astype(BF16) / 3,
                           np.linspace(0, 1, 7, dtype=BF16), np.sum(x, dtype=F32) * 0, x.astype(BF16)),
          f, i, x, device=device)


def test_float64_and_wide_integers_round_once_as_ml_dtypes(device):
    """ml_dtypes (0.7 and later) rounds float64 and integers to bfloat16 once: 1 + 2**-8 + 2**-30 becomes 1 + 2**-7,
    where rounding to float32 first would lose the 2**-30 and then tie to 1; the same beside the subnormals, past
    float32's range, and for integers float32 cannot hold (int32, uint32, int64, uint64)."""
    if device in ("webgpu", "metal"):
        pytest.skip("no float64 on this device")
    d = np.array([1 + 2**-8 + 2**-30, 3.0, -2.5e-3, 1e300, -1e300, 3.3895e38, -(1 + 2**-8 + 2**-40), 2**-134 + 2**-160,
                  -(2**-134) - 2**-170, 2**-134, 1e-60, np.inf, -0.0, np.nan], np.float64)
    n = np.array([2**24 + 2**16 + 1, -(2**40) - 1, 7, 2**60 + 2**52 + 1, -(2**60) - 2**52 - 1, 2**63 - 1, -(2**63)],
                 np.int64)
    m = np.array([2**24 + 2**16 + 1, -(2**24) - 2**16 - 1, 2**31 - 1, -(2**31), 5], np.int32)
    u = np.array([2**24 + 2**16 + 1, 2**32 - 1, 2**31 + 2**23 + 1], np.uint32)
    check(lambda d, n, m, u: (d.astype(BF16), n.astype(BF16), m.astype(BF16), u.astype(BF16)), d, n, m, u,
          device=device)


def test_wide_integers_round_once_without_float64(device):
    """int32 and uint32 round once on devices without float64 too (webgpu, metal)."""
    m = np.array([2**24 + 2**16 + 1, -(2**24) - 2**16 - 1, 2**31 - 1, -(2**31), 5, 2**30 + 2**22 + 2**20], np.int32)
    u = np.array([2**24 + 2**16 + 1, 2**32 - 1, 2**31 + 2**23 + 1, 0], np.uint32)
    check(lambda m, u: (m.astype(BF16), u.astype(BF16), (m // 3).astype(BF16)), m, u, device=device)


def test_conversion_to_integers_is_zero_outside_the_type_as_ml_dtypes(device):
    """ml_dtypes (0.7 and later) truncates a bfloat16 toward zero and gives 0 where that is not a value of the
    integer type: NaN, the infinities, -1 for unsigned types, 300 for int8; -0.5 is 0 everywhere."""
    x = np.array([-0.5, -1, -0.99, 0.99, 127.5, 128, -128, -129, 255, 256, -32768, 32768, 65280, 65536, 2.1e9,
                  -2.1e9, 2.2e9, 4.3e9, 9.2e18, 9.3e18, 1.8e19, 1.9e19, np.inf, -np.inf, np.nan], F32).astype(BF16)
    small = (np.uint8, np.int8, np.int16, np.uint16, np.int32, np.uint32, np.bool_)
    check(lambda x: tuple(x.astype(t) for t in small), x, device=device)
    if device != "webgpu":  # (no 64-bit integers)
        check(lambda x: (x.astype(np.int64), x.astype(np.uint64)), x, device=device)


def test_nan_functions_treat_bfloat16_as_numpy_does(device):
    """bfloat16 is no np.inexact: NumPy's nansum, nanmean, nanvar, nancumsum, nanargmax and nan_to_num treat it as
    they treat integers (its NaN propagates, nan_to_num leaves it), while nanmax and nanmin (np.fmax.reduce) skip
    its NaN. tracejit gives the same; sorting and NaN-free selection as NumPy's (with a NaN, NumPy's sort of bfloat16
    is no order at all: ml_dtypes' comparison; tracejit puts NaN last, as for float32)."""
    x = np.array([[1.5, np.nan, -2, 0], [3, 1, 2, np.nan], [4, -1, 0.5, 2]], F32).astype(BF16)
    check(lambda x: (np.nansum(x, axis=1), np.nanmean(x, axis=1), np.nanvar(x, axis=1), np.nancumsum(x, axis=1),
                     np.nanmax(x, axis=1), np.nanmin(x, axis=0), np.nan_to_num(x)), x, device=device)
    if device != "webgpu":  # (int64 indices)
        check(lambda x: (np.nanargmax(x, axis=1), np.argmax(x, axis=1)), x, device=device)
    y = values((3, 9), 16)
    check(lambda y: (np.sort(y, axis=1), np.median(y, axis=1), y[y > 0.5]), y, device=device)


# ---- writes and device arrays -----------------------------------------------------------------------------------


def test_assignment_into_a_bfloat16_argument_reaches_the_caller(device):
    @tj.kernel
    def scale(x):
        x[...] = x * 2

    @tj.kernel
    def patch(x):
        x[2:5] = 0
        x += 1

    x = values(12)
    a = x.copy()
    assert scale(a, device=device) is None
    assert_bits(a, x * 2)
    b, e = x.copy(), x.copy()
    patch(b, device=device)
    e[2:5] = 0
    e += 1
    assert_bits(b, e)


def test_results_stay_on_the_device_and_pass_back_in(device):
    f = tj.kernel(lambda x: x * 3 + 1)
    x = values(10)
    r = f(x, device=device)
    assert r.dtype == BF16
    again = f(r, device=device)
    assert_bits(again, (x * 3 + 1) * 3 + 1)
    d = tj.asarray(x, device=device)
    assert d.dtype == BF16
    assert_bits(f(d, device=device), x * 3 + 1)
    out = np.empty_like(x)
    assert f(x, out=out, device=device) is out
    assert_bits(out, x * 3 + 1)


def test_strided_arguments_are_read_and_written_in_place(device):
    a = values((6, 8), 17)
    check(lambda p, q, r, s: (p * 2, q + 1, r - 1, s * s), a.T, a[:, ::2], a[::-1], a[1:4, 2:7], device=device)
    b = a.copy()
    tj.kernel(lambda v: v.__setitem__(Ellipsis, v * 3))(b[:, ::2], device=device)
    e = a.copy()
    e[:, ::2] *= 3
    assert_bits(b, e)


def test_numpy_scalars_as_arguments(device):
    x = values(8)
    check(lambda x, s: x * s, x, ml_dtypes.bfloat16(2.5), device=device)
    check(lambda x, s: x * s, x, np.float32(0.1), device=device)


def test_a_captured_graph_refuses_bfloat16_with_the_reason(device):
    g = tj.kernel(lambda x: x * 2)
    with pytest.raises(tj.UnsupportedError, match="bfloat16"):
        with tj.capture():
            g(values(4), device=device)


def test_the_trace_sees_bfloat16_and_the_kernels_do_not(device):
    @tj.kernel
    def same(x):
        assert x.dtype == BF16
        return (x * 2).astype(x.dtype)

    x = values(8)
    assert_bits(same(x, device=device), x * 2)
    source = same.lower(x, device=device).kernels[0].source
    assert "bfloat16" not in source and "bf16" not in source
    assert same.lower(tj.spec((8,), "bfloat16"), device=device).kernels  # (a manifest's spec names it so)


# ---- products and reductions ------------------------------------------------------------------------------------


def exact_sum(x, axis=None, keepdims=False):
    """A sum of bfloat16 values as tracejit computes it: in float32, rounded once to bfloat16. NumPy with ml_dtypes
    adds in bfloat16, rounding every partial sum in order (np.sum of 1000 ones is 256 there: 256 + 1 rounds to 256);
    tracejit does not reproduce that order, so a reduction is compared with this instead."""
    return x.astype(np.float64).sum(axis=axis, keepdims=keepdims).astype(F32).astype(BF16)


def test_sums_accumulate_in_float32_and_round_once(device):
    """Positive values: the float32 sums of tracejit's order and of float64 differ by far less than half a
    bfloat16 ulp, so the rounded results agree except where the float64 sum lies within that of a tie (one ulp)."""
    x = positive((8, 96), 6)
    got = tj.kernel(lambda x: (x.sum(), x.sum(axis=1), np.mean(x, axis=0), x.max(axis=1), x.min(),
                               np.argmin(x, axis=1) if device != "webgpu" else x.max(axis=1) < 0,  # (int64)
                               x.sum(dtype=F32)))(x, device=device)
    assert_bits(got[0], exact_sum(x), "sum", max_ulps=1)
    assert_bits(got[1], exact_sum(x, axis=1), "sum(axis=1)", max_ulps=1)
    mean = (exact_sum(x, axis=0).astype(F32) / F32(8)).astype(BF16)
    assert_bits(got[2], mean, "mean", max_ulps=1)
    assert_bits(got[3], x.max(axis=1), "max")
    assert_bits(got[4], x.min(), "min")
    assert_bits(got[5], np.argmin(x, axis=1) if device != "webgpu" else x.max(axis=1) < 0, "argmin")
    np.testing.assert_allclose(host(got[6]), x.astype(np.float64).sum(), rtol=1e-6)  # float32 sum, as NumPy's
    assert host(got[6]).dtype == F32
    seq = np.ones(1000, BF16)
    assert np.sum(seq) == 256 and exact_sum(seq) == 1000  # the difference stated above is real: NumPy's sum stalls
    assert_bits(tj.kernel(lambda s: s.sum())(seq, device=device), exact_sum(seq), max_ulps=1)


def test_matmul_is_float32_and_dot_rounds_once(device):
    """NumPy's matmul of bfloat16 gives float32 (products, exact in float32, and sums in float32): within the
    float32 bound of a k-term sum in any order, k * 2**-24 * sum |a_i b_i|. np.dot gives bfloat16, its float32 sum
    rounded once (ml_dtypes' dot): of positive values (no cancellation) within one ulp of the exact sum rounded."""
    a, b = values((6, 24), 7), values((24, 5), 8)
    p, q = positive((6, 24), 7), positive((24, 5), 8)
    got = tj.kernel(lambda a, b, p, q: (a @ b, np.dot(p[0], q[:, 0]), np.dot(p, q), np.outer(a[0], b[0])))(
        a, b, p, q, device=device)
    expected = a @ b
    assert host(got[0]).dtype == expected.dtype == F32
    exact = a.astype(np.float64) @ b.astype(np.float64)
    bound = 24 * 2.0**-24 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    assert (np.abs(host(got[0]) - exact) <= bound).all() and (np.abs(expected - exact) <= bound).all()
    rounded = (p.astype(np.float64) @ q.astype(np.float64)).astype(F32).astype(BF16)
    assert_bits(got[1], rounded[0, 0], "dot", max_ulps=1)
    assert_bits(got[2], rounded, "dot 2-d", max_ulps=1)
    assert_bits(got[3], np.outer(a[0], b[0]), "outer")  # one product each: exact


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    s = e.sum(axis=-1, keepdims=True)
    return e / s, s


def layernorm(x, w, b):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5).astype(x.dtype) * w + b, mean, var


def test_softmax_and_layernorm_as_users_write_them(device):
    """The kernels also return their reductions, each compared with the sum taken in float32 and rounded once
    (exact_sum, positive terms: within one ulp); the rest of the program is then NumPy's, op by op, on them.
    Softmax's exp may be one ulp from NumPy's (test_math_functions...), which moves a quotient by up to two."""
    x = values((4, 64), 9, 2.0)
    p, s = tj.kernel(softmax)(x, device=device)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    assert_bits(s, exact_sum(e, axis=-1, keepdims=True), "softmax's sum", max_ulps=1)
    assert_bits(p, e / host(s), "softmax", max_ulps=2)
    x, w, b = positive((4, 64), 12), positive(64, 10), values(64, 11)
    out, mean, var = tj.kernel(layernorm)(x, w, b, device=device)
    mean, var = host(mean), host(var)
    n = F32(64)
    assert_bits(mean, (exact_sum(x, -1, True).astype(F32) / n).astype(BF16), "mean", max_ulps=1)
    assert_bits(var, (exact_sum((x - mean) ** 2, -1, True).astype(F32) / n).astype(BF16), "variance", max_ulps=1)
    assert_bits(out, (x - mean) / np.sqrt(var + 1e-5).astype(BF16) * w + b, "layernorm")


# ---- refused, with the reason --------------------------------------------------------------------------------


def carried(x, n):
    s = x * 0
    for i in range(n):
        s = s * x + 1
    return s


def growing(x):
    s = x
    while np.abs(s).max() < 100:  # (a test of the data: a loop)
        s = s + s * np.array(0.25, BF16)
    return s


def inside(x, n):
    t = x.astype(F32)
    for i in range(n):
        t = (t.astype(BF16) * 3).astype(F32) - t
    return t


def test_loops_compiled_as_loops_carry_bfloat16(device):
    """A loop's bfloat16 values pass between its steps as their bits (ir/narrow_floats.py), each step rounding as
    NumPy's does: bit for bit."""
    x = values(12, 13)
    for body, args in ((carried, (x, 40)), (growing, (x,)), (inside, (x, 40))):
        f = tj.kernel(body)
        assert "body of the" in str(f.trace(*args))  # (a loop, not unrolled)
        assert_bits(f(*args, device=device), body(*args), body.__name__)


def test_a_loop_over_bfloat16_elements(device):
    @tj.kernel
    def axpy(x, y):
        for i in range(x.shape[0]):
            y[i] = x[i] * 3 + y[i]

    x, y = values(9, 14), values(9, 15)
    e = y.copy()
    for i in range(9):
        e[i] = x[i] * 3 + e[i]
    axpy(x, y, device=device)
    assert_bits(y, e)


def test_linalg_of_bfloat16_is_refused_with_the_reason(device):
    """NumPy's np.linalg converts bfloat16 to float64 (a dtype webgpu and metal lack); tracejit refuses it, as it
    refuses float16: convert first (x.astype(np.float32))."""
    a = (np.eye(3) * 2).astype(BF16)
    with pytest.raises((tj.UnsupportedError, TypeError), match="bfloat16"):
        tj.kernel(np.linalg.inv)(a, device=device)


# ---- random elementwise programs --------------------------------------------------------------------------------

_EXACT_UNARY = {"neg": np.negative, "abs": np.absolute, "sqrt": lambda a: np.sqrt(np.abs(a)), "square": np.square,
                "floor": np.floor, "rint": np.rint}
# not correctly rounded in float32: only at the root of a program, where one ulp is the bound
_ROUGH_UNARY = {"exp": np.exp, "tanh": np.tanh, "sin": np.sin, "log1p": lambda a: np.log1p(np.abs(a))}
_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide, "max": np.maximum,
           "min": np.minimum, "where": lambda a, b: np.where(a < b, a, b), "scaled": lambda a, b: a * 3 - b}


def _program(draw):
    """A random expression over the inputs x, y (depth <= 3) of ops correctly rounded in float32, perhaps under one
    op that is not: (text, function, the ulps it may be off)."""
    def node(depth):
        kind = draw(st.sampled_from(["leaf"] * (depth == 0) + ["leaf", "unary", "binary", "binary"]))
        if kind == "leaf":
            name = draw(st.sampled_from(["x", "y", "c"]))
            if name == "c":
                c = draw(st.sampled_from([2, -1, 3]))
                return str(c), (lambda x, y, c=c: c)
            return name, (lambda x, y, n=name: x if n == "x" else y)
        if kind == "unary":
            name = draw(st.sampled_from(sorted(_EXACT_UNARY)))
            text, f = node(depth - 1)
            if text.lstrip("-").isdigit():  # (NumPy's np.abs(2) is a strong int64: the program would leave bfloat16)
                return text, f
            return f"{name}({text})", (lambda x, y: _EXACT_UNARY[name](f(x, y)))
        name = draw(st.sampled_from(sorted(_BINARY)))
        (ta, fa), (tb, fb) = node(depth - 1), node(depth - 1)

        def both(x, y):
            a, b = fa(x, y), fb(x, y)
            if np.isscalar(a) and np.isscalar(b):
                a = x * 0 + a
            return _BINARY[name](a, b)

        return f"{name}({ta}, {tb})", both

    text, f = node(3)
    rough = draw(st.sampled_from([None, None, *sorted(_ROUGH_UNARY)]))
    if rough is None:
        return text, f, 0
    return f"{rough}({text})", (lambda x, y: _ROUGH_UNARY[rough](f(x, y))), 1


SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 3.38e38, -1.5, 0.5, 1 + 2**-7, 2**-130], F32).astype(BF16)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, phases=[p for p in Phase if p is not Phase.explain],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_random_elementwise_programs_match_numpy_with_ml_dtypes(data):
    """numba and opencl (the other devices share the lowering, ir/narrow_floats.py, and are checked above): bit for bit
    where every op is correctly rounded in float32, else (a rough op at the root) within one ulp."""
    text, f, max_ulps = _program(data.draw)
    device = data.draw(st.sampled_from([d for d in ("numba", "opencl") if d in AVAILABLE]))
    seed = data.draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    x, y = (rng.standard_normal(12) * 4).astype(BF16), (rng.standard_normal(12) * 4).astype(BF16)
    x[:4], y[6:10] = rng.choice(SPECIALS, 4), rng.choice(SPECIALS, 4)
    try:
        with np.errstate(all="ignore"):
            expected = np.asarray(f(x, y) + x * 0)  # (+ x * 0: an array)
    except DTypePromotionError:  # np.where(c, 2, x) of bfloat16 x: NumPy cannot promote a Python int there
        assume(False)
    got = host(tj.kernel(lambda x, y: f(x, y) + x * 0)(x, y, device=device))
    assert_bits(got, expected, f"{text} on {device}", max_ulps)
