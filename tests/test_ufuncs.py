"""Every NumPy ufunc of issue 14 against NumPy on every device: values within the ulps the op table
states (ir/ops.py ulps, numpy/ufuncs.py ULPS) on special values (+-0, +-inf, NaN, subnormals, domain
edges) and random ones, for float16/32/64; result dtypes; integer semantics (shifts, fmod, reciprocal);
and the op-semantics wrong answers of issue 14 item 0, each pinned on every device."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from reference import FLOATS, INTS_AND_BOOL, assert_close, run_kernel
from tracejit.numpy import ufuncs
from tracejit.runtime import emulator

UNARY = ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "sin", "cos", "tan", "arcsin",
         "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "reciprocal", "degrees",
         "radians", "deg2rad", "rad2deg", "sinc", "square", "floor", "ceil", "trunc", "rint", "fix", "fabs",
         "absolute", "negative", "positive", "sign", "nan_to_num", "conjugate"]
BINARY = ["arctan2", "hypot", "power", "float_power", "logaddexp", "logaddexp2", "true_divide", "fmod", "copysign",
          "fmax", "fmin", "maximum", "minimum", "heaviside", "floor_divide", "remainder"]
TRIG = {"sin", "cos", "tan", "sinc"}     # WGSL's sin/cos/tan are stated for |x| < 1e4 only


def stated_ulps(name: str, device: str, dtype) -> int:
    """float16 is computed in float32 and rounded once: within 1 ulp of NumPy's (which does the same)."""
    if np.dtype(dtype) == np.float16:
        return 1
    cpu, gpu = ufuncs.stated_ulps(name)
    if device in ("cuda", "metal") and emulator.emulates(device):
        # the CPU emulator calls the C library's float functions, NumPy its own: each within its bound,
        # so the two may differ by one ulp more (glibc's log2f is the nearer one where seen)
        return cpu + 1
    return gpu if device in ("webgpu", "cuda", "metal") else cpu   # a GPU's own math library


# NumPy leaves which zero max(+0, -0) is unspecified: its SIMD and scalar loops (float16) differ
ZERO_SIGN_UNSPECIFIED = ("np.maximum", "np.minimum", "np.fmax", "np.fmin")


def assert_ulps(actual, expected, ulps: int, what: str, flush_subnormals: bool) -> None:
    """Same dtype; NaN, infinities and the sign of zeros exactly as NumPy; finite values within `ulps`
    units in the last place of NumPy's. flush_subnormals: a subnormal NumPy result may be a zero (GPUs
    flush them; the README says so)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype}, NumPy gives {expected.dtype}"
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    tiny = np.finfo(expected.dtype).tiny
    loose = (np.abs(e) < tiny) & flush_subnormals
    np.testing.assert_array_equal(np.isnan(a), np.isnan(e), err_msg=f"{what}: NaN where NumPy has none or not")
    inf = np.isinf(e)
    np.testing.assert_array_equal(a[inf], e[inf], err_msg=f"{what}: infinities")
    zero = (e == 0) & ~loose & (not what.startswith(ZERO_SIGN_UNSPECIFIED))
    np.testing.assert_array_equal(np.signbit(a[zero]), np.signbit(e[zero]), err_msg=f"{what}: sign of zero")
    finite = np.isfinite(e)
    with np.errstate(over="ignore"):
        spacing = np.spacing(np.abs(expected[finite])).astype(np.float64)
    err = np.abs(a[finite] - e[finite]) / spacing
    err[loose[finite] & (np.abs(a[finite]) < tiny)] = 0
    worst = int(np.argmax(err)) if err.size else 0
    assert not err.size or err[worst] <= ulps, (
        f"{what}: {err[worst]:.1f} ulps (stated {ulps}) at input #{np.flatnonzero(finite)[worst]}: "
        f"got {a[finite][worst]!r}, NumPy {e[finite][worst]!r}")


def special_and_random(dtype, rng, n=160) -> np.ndarray:
    f = np.finfo(dtype)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, f.smallest_subnormal, -f.smallest_subnormal, f.tiny, -f.tiny,
               1.0, -1.0, 0.5, -0.5, 2.0, f.max, -f.max, 1e-3, -1e-3, 0.99, -0.99]
    magnitudes = np.exp(rng.uniform(np.log(1e-4), np.log(3e3), n)) * rng.choice([-1.0, 1.0], n)
    return np.concatenate([np.array(special, dtype), rng.uniform(-3, 3, n).astype(dtype), magnitudes.astype(dtype)])


def _unary_body(x, names=tuple(UNARY)):
    moderate = np.where(np.abs(x) < 1e4, x, 0.5)
    return tuple(getattr(np, n)(moderate if n in TRIG else x) for n in names)


def _binary_body(x, y):
    return tuple(getattr(np, n)(x, y) for n in BINARY)


@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_ufuncs_within_stated_ulps_on_special_and_random_values(dtype, device, rng):
    x = special_and_random(dtype, rng)
    # Metal binds at most 31 buffers per kernel: there the outputs come from two kernels
    halves = [tuple(UNARY)] if device != "metal" else [tuple(UNARY[:20]), tuple(UNARY[20:])]
    kernel = tj.kernel(static=("names",))(_unary_body)
    result = [r for names in halves for r in run_kernel(kernel, x, names, device=device)]
    with np.errstate(all="ignore"):
        expected = _unary_body(x)
    for name, r, e in zip(UNARY, result, expected):
        assert_ulps(r, e, stated_ulps(name, device, dtype), f"np.{name}[{dtype}]", device != "numba")


@pytest.mark.parametrize("dtype", FLOATS)
def test_binary_ufuncs_within_stated_ulps_on_special_pairs_and_random_values(dtype, device, rng):
    x = special_and_random(dtype, rng)
    specials = x[:20]
    a = np.concatenate([np.repeat(specials, 20), x, x[::-1]])   # every pair of special values, then random
    b = np.concatenate([np.tile(specials, 20), x[::-1], rng.uniform(-4, 4, x.size).astype(dtype)])
    if device == "webgpu":   # subnormal operands are flushed to zero there (README); they lead to other results
        keep = (np.abs(a) >= np.finfo(dtype).tiny) | (a == 0) | ~np.isfinite(a)
        keep &= (np.abs(b) >= np.finfo(dtype).tiny) | (b == 0) | ~np.isfinite(b)
        a, b = a[keep], b[keep]
    result = run_kernel(tj.kernel(_binary_body), a, b, device=device)
    with np.errstate(all="ignore"):
        expected = _binary_body(a, b)
    for name, r, e in zip(BINARY, result, expected):
        ulps = stated_ulps(name, device, dtype) if name not in ("floor_divide", "remainder") else 0
        assert_ulps(r, e, ulps, f"np.{name}[{dtype}]", device != "numba")


def test_predicates_and_two_output_ufuncs_match_numpy(device):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -2.5, 3.0, 1e-3, -7.25], np.float32)

    def body(x):
        frac, whole = np.modf(x)
        q, r = divmod(x, 0.75)
        flags = (np.signbit(x), np.isposinf(x), np.isneginf(x), np.isclose(x, 1.5), np.isclose(x, x, equal_nan=True),
                 np.logical_and(x, x > 0), np.logical_or(x, 0), np.logical_xor(x, x < 0), np.logical_not(x))
        return (frac, whole, q, r, np.nan_to_num(x, nan=-1.0, posinf=9.0), np.heaviside(x, 0.5), *flags)

    result = run_kernel(tj.kernel(body), x, device=device)
    with np.errstate(all="ignore"):
        expected = body(x)
    for i, (r, e) in enumerate(zip(result, expected)):
        assert_ulps(r, e, 0, f"output {i}", False) if e.dtype.kind == "f" else assert_close(r, e, what=f"output {i}")


@pytest.mark.parametrize("dtype", INTS_AND_BOOL)
def test_ufuncs_of_integers_and_bools_follow_numpy_types_and_values(dtype, device, rng):
    """Result dtypes from NumPy's type resolution (int8 -> float16 for arctan2, square of bool is int8, ...)
    and NumPy's integer semantics: shifts past the width, C's fmod, (int)(1.0 / x) reciprocal, sign of
    unsigned values."""
    dt = np.dtype(dtype)
    if dt == np.bool_:
        x = np.array([True, False, True, True, False, False, True, False])
        y = np.array([True, True, False, False, True, False, True, True])
    else:
        info = np.iinfo(dt)
        x = np.array([info.min, info.max, 0, 1, -1 if dt.kind == "i" else 2, 5, 7, 3], dt)
        y = np.array([3, 2, 1, 0, 2 * dt.itemsize * 8, -1 if dt.kind == "i" else 9, 3, 8 * dt.itemsize - 1], dt)

    def same_kind(x, y):   # results of x's kind (no 64-bit value for 32-bit ints: they run on webgpu too)
        out = (np.square(x), np.heaviside(x, 0), np.fmax(x, y), np.fmin(x, y), np.nan_to_num(x), np.fix(x),
               np.signbit(x), np.logical_xor(x, y), np.isneginf(x))
        if x.dtype == np.bool_:
            return out
        return out + (np.left_shift(x, y), np.right_shift(x, y), x << 3, x >> 1, np.fmod(x, y), np.reciprocal(x),
                      np.sign(x), np.positive(x), np.remainder(x, y), np.floor_divide(x, y))

    def floats(x, y):      # NumPy's float type for x's: float16 for 8-bit, float32 for 16-bit, float64 above
        return (np.arctan2(x, 3), np.hypot(x, 2), np.logaddexp(x, 1), np.degrees(x), np.cbrt(x), np.sinc(x),
                np.log1p(x * 0 + 1), np.expm1(x * 0), np.isclose(x, 3), np.copysign(x, -1), np.float_power(x, 2))

    for body in (same_kind, floats):
        result = run_kernel(tj.kernel(body), x, y, device=device)
        with np.errstate(all="ignore"):
            expected = body(x, y)
        assert_close(result, expected, rtol=2e-3)


# ---------------------------------------------------------------------------------------------------
# issue 14, item 0: op-semantics wrong answers, each on every device

def test_unsigned_sign_uint32_power_and_integer_minimum_divided_by_minus_one(device):
    u16 = np.arange(5, dtype=np.uint16)
    u32 = np.uint32([4294967295, 3])
    i32 = np.int32([-2**31, -7, 7])

    def body(u16, u32, i32):
        return np.sign(u16 - 3), u32 ** u32, i32 // -1, i32 % -1, np.fmod(i32, -1)

    assert_close(run_kernel(tj.kernel(body), u16, u32, i32, device=device), body(u16, u32, i32))


def test_an_integer_power_that_wraps_to_zero_compares_as_zero(device):
    """70 ** 70 wraps to 0 (2 ** 70 divides it). Numba's signed `*` lets LLVM assume no overflow, and it
    folded (a ** b != 0) to (a != 0): True on numba (found by the dtype fuzzer)."""
    def body(a, b):
        return (a ** b) != 0, np.where(a ** b, a, 0), np.where(a ** a == 0, a, a + 1)

    for dtype in (np.int32, np.int8, np.uint8, np.uint32, np.int64):   # (webgpu: no int64, skipped there)
        a = np.array([70, 3, 64, 2, 6], dtype=dtype)
        b = np.array([70, 5, 11, 64, 40], dtype=dtype)
        with np.errstate(all="ignore"):
            expected = body(a, b)
        assert_close(run_kernel(tj.kernel(body), a, b, device=device), expected)
    a = np.array(70, dtype=np.int64)   # the fuzzer's 0-d case, where the power is computed once
    fuzzed = lambda a: np.where(a ** a, a, np.float16(2.5))   # noqa: E731
    assert_close(run_kernel(tj.kernel(fuzzed), a, device=device), fuzzed(a))


def test_int64_minimum_divided_by_minus_one_wraps_like_numpy(device):
    x = np.int64([-2**63, -7, 7])
    assert_close(run_kernel(tj.kernel(lambda x: (x // -1, x % -1)), x, device=device), (x // -1, x % -1))


def test_integer_reciprocal_truncates_like_numpy(device):
    x = np.int32([-2, 1, -1, 0, 5, 2])
    with np.errstate(all="ignore"):
        expected = np.reciprocal(x), np.reciprocal(x.astype(np.int16)), np.exp(np.reciprocal(x.astype(np.int8)))
    body = lambda x: (np.reciprocal(x), np.reciprocal(x.astype(np.int16)), np.exp(np.reciprocal(x.astype(np.int8))))  # noqa: E731
    assert_close(run_kernel(tj.kernel(body), x, device=device), expected)


def test_int64_reciprocal_stays_integer_inside_float_expressions(device):
    x = np.int64([2, 1])

    def body(x):
        return np.exp(np.reciprocal(x)), np.reciprocal(x) + 2**62 + 1

    assert_close(run_kernel(tj.kernel(body), x, device=device), body(x))


def test_floor_division_by_signed_zero_and_nan_constants(device):
    x = np.float32([1.5, -1.5, 0.0, np.nan])

    def body(x):
        return (x // -0.0, x // 0.0, np.float32(1.5) // x, float("nan") // (x + 1), np.exp(x * float("nan")),
                np.ceil(x.astype(np.float16) - np.nan), x * 0.0 + np.float32(np.inf) * 0.0)

    with np.errstate(all="ignore"):
        expected = body(x)
    for i, (r, e) in enumerate(zip(run_kernel(tj.kernel(body), x, device=device), expected)):
        assert_ulps(r, e, 0, f"output {i}", False)


def test_nan_is_true_unequal_to_itself_and_inf_times_zero_is_nan(device):
    x = np.float32([np.nan, 0.0, 1.0, np.inf])

    def body(x):
        h = x.astype(np.float16)
        return x.astype(bool), h != h, h == h, x <= x, x * 0.0, np.isnan(x * 0.0)

    with np.errstate(all="ignore"):
        expected = body(x)
    result = run_kernel(tj.kernel(body), x, device=device)
    assert_ulps(result[4], expected[4], 0, "x * 0.0", False)
    assert_close(result[:4] + result[5:], expected[:4] + expected[5:])


def test_ordered_comparisons_of_bools(device):
    x = np.float32([0, 2, 3])

    def body(x):
        return (x > 1) <= False, (x > 1) < True, (x > 1) >= (x > 2), (x > 1) > (x > 2)

    assert_close(run_kernel(tj.kernel(body), x, device=device), body(x))


def test_float16_intermediates_round_like_numpy(device):
    """Each float16 op rounds its float32 result to float16, as NumPy's loops do: 300 * 300 overflows."""
    x = np.float16([300, 2.5, 1e-4])
    body = lambda x: x * x / x  # noqa: E731
    assert_close(run_kernel(tj.kernel(body), x, device=device), body(x))


def test_float64_to_float16_rounds_once_as_numpy(device):
    """NumPy rounds float64 to float16 once: 1 + 2**-11 + 2**-30 becomes 1 + 2**-10, where rounding to float32 first
    (LLVM's conversion on the CPU) loses the 2**-30 and then ties to 1. The same beside the subnormals and the
    largest value, for negative values, and in a float16 op's float64 operand."""
    if device in ("webgpu", "metal"):
        pytest.skip("no float64 on this device")
    d = np.array([1 + 2**-11 + 2**-30, -(1 + 2**-11 + 2**-40), 1 + 2**-11, 2**-25 + 2**-40, -(2**-25) - 2**-60, 2**-25,
                  65519.99, 65520.0, 1e300, -np.inf, np.nan, -0.0, 1e-60, 0.1], np.float64)
    h = np.float16([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14])
    body = lambda d, h: (d.astype(np.float16), h + d.astype(np.float16), np.float16(2) * d.astype(np.float16))  # noqa: E731
    assert_close(run_kernel(tj.kernel(body), d, h, device=device), body(d, h), rtol=0, atol=0)


def test_ufunc_keywords(device):
    x = np.float32([1.5, -2.0])

    def body(x):
        return np.add(x, 1, dtype=np.float64), np.negative(x, dtype=np.float64), np.sqrt(x * x, dtype=np.float64)

    assert_close(run_kernel(tj.kernel(body), x, device=device), body(x))
    y = x.copy()   # out= into an argument: written for the caller (test_assignment.py has more)
    assert_close(run_kernel(tj.kernel(lambda x: np.exp(x, out=x)), y, device=device), np.exp(x))
    assert_close(y, np.exp(x))
    with pytest.raises(tj.UnsupportedError, match="where"):
        tj.kernel(lambda x: np.exp(x, where=x > 0))(x, device=device)
    with pytest.raises(tj.UnsupportedError, match="np.gcd"):
        tj.kernel(lambda x: np.gcd(x, x))(x, device=device)


def test_operators_shift_divmod_and_unary_plus(device):
    x = np.int32([1, -8, 5])

    def body(x):
        q, r = divmod(x, 3)
        q2, r2 = divmod(7, x)
        return x << 2, 1 << x, x >> 1, 64 >> x, q, r, q2, r2, +x

    assert_close(run_kernel(tj.kernel(body), x, device=device), body(x))
    with pytest.raises(tj.UnsupportedError, match="positive"):
        tj.kernel(lambda x: +(x > 0))(x, device=device)


# =============================================================================================
# The float's own layout: nextafter, spacing, ldexp, frexp (exact: bit for bit as NumPy)


def _layout_body(x, y, n):
    mantissa, exponent = np.frexp(x)
    return np.nextafter(x, y), np.spacing(x), np.ldexp(x, n), mantissa, exponent


@pytest.mark.parametrize("dtype", FLOATS)
def test_nextafter_spacing_ldexp_frexp_are_exact_on_special_and_random_values(dtype, device, rng):
    f = np.finfo(dtype)
    x = special_and_random(dtype, rng, n=60)
    subnormal = np.array([f.smallest_subnormal * 3, -f.tiny / 2, f.tiny * 1.5, -f.tiny * 2, f.eps, 1 - f.epsneg], dtype)
    specials = np.concatenate([x[:20], subnormal])
    a = np.concatenate([np.repeat(specials, specials.size), x, -x])   # every special towards every special
    b = np.concatenate([np.tile(specials, specials.size), x[::-1], rng.uniform(-4, 4, x.size).astype(dtype)])
    if device == "webgpu":   # subnormal operands are flushed to zero there (README); they lead to other results
        keep = (np.abs(a) >= f.tiny) | (a == 0) | ~np.isfinite(a)
        a, b = a[keep], b[keep]
    bits = {"float16": 48, "float32": 320, "float64": 2200}[dtype]
    n = rng.integers(-bits, bits, a.size).astype(np.int32)
    result = run_kernel(tj.kernel(_layout_body), a, b, n, device=device)
    with np.errstate(all="ignore"):
        expected = _layout_body(a, b, n)
    for name, r, e in zip(("nextafter", "spacing", "ldexp", "frexp[0]", "frexp[1]"), result, expected):
        if e.dtype.kind == "f":
            assert_ulps(r, e, 0, f"np.{name}[{dtype}]", device == "webgpu")
        else:
            assert_close(r, e, what=f"np.{name}[{dtype}]")


def _ldexp_types_body(x, i16, u8, b):
    return (np.ldexp(x, i16), np.ldexp(x, u8), np.ldexp(x, b), np.ldexp(x.astype(np.float16), i16),
            np.ldexp(i16, 3), np.ldexp(b, b), np.ldexp(x, -130), np.frexp(i16)[0], np.frexp(b)[1],
            np.nextafter(x, 1), np.nextafter(1, x), np.nextafter(x.astype(np.float16), -np.inf),
            np.spacing(i16), np.spacing(b))


def _ldexp_wide_body(x, i64, i32):
    return np.ldexp(x, i64), np.ldexp(x.astype(np.float64), i64), np.ldexp(i32, i32), np.ldexp(2.5, i32), \
        np.nextafter(x, np.float64(2)), np.spacing(i64), np.frexp(1e300 * x.astype(np.float64))[1]


def test_ldexp_frexp_nextafter_spacing_result_dtypes_and_exponents_beyond_the_range(device):
    x = np.array([1.5, -0.75, 0.0, -0.0, np.inf, np.nan, 3e38, -1e-30], np.float32)
    i16 = np.array([-32768, 32767, -200, 200, 1, -1, 127, -150], np.int16)
    u8 = np.array([255, 0, 1, 200, 3, 128, 7, 64], np.uint8)
    b = np.array([True, False] * 4)
    for body, args in ((_ldexp_types_body, (x, i16, u8, b)),
                       (_ldexp_wide_body, (x, np.array([2**40, -2**40, 2**62, -2**63, 5, -5, 1100, -1100]),
                                           i16.astype(np.int32) * 3))):
        result = run_kernel(tj.kernel(body), *args, device=device)
        with np.errstate(all="ignore"):
            expected = body(*args)
        for i, (r, e) in enumerate(zip(result, expected)):
            if e.dtype.kind == "f":
                assert_ulps(r, e, 0, f"{body.__name__} output {i}", False)
            else:
                assert_close(r, e, what=f"{body.__name__} output {i}")


@pytest.mark.parametrize("numerator", [np.inf, -np.inf, np.nan])
def test_a_constant_non_finite_numerator_floor_divides_and_mods_to_nan(numerator, device):
    """NumPy's floor_divide and remainder of an infinite or NaN dividend by a nonzero number are NaN. PoCL's
    compiler, given the infinite dividend as a constant, folded the C helper's floor division to the divisor."""
    for dtype in (np.float32, np.float64):
        for divisor in (2.0, -3.0, 0.5, np.inf):   # one element: the kernel PoCL misfolded
            x = np.array([[divisor]], dtype)
            body = lambda x: (np.floor_divide(numerator, x), np.remainder(numerator, x),  # noqa: E731
                              np.floor_divide(dtype(numerator), x))
            got = run_kernel(tj.kernel(body), x, device=device)
            with np.errstate(all="ignore"):
                assert_close(got, body(x))


# --- the ufunc methods: outer, and reduce of the logical ufuncs (issue 48, item 4) ----------------------------------

_OUTER = [*BINARY, "add", "subtract", "multiply", "equal", "less", "greater_equal", "logical_and", "logical_xor"]


def test_ufunc_outer_matches_numpy_for_every_binary_ufunc(device, rng):
    dt = np.float32 if device in ("webgpu", "metal") else np.float64
    x, y = rng.uniform(-3, 3, 5).astype(dt), rng.uniform(-3, 3, (2, 3)).astype(dt)

    def first(x, y):   # (two kernels: Metal binds at most 31 buffers)
        return tuple(getattr(np, n).outer(x, y) for n in _OUTER[:14])

    def second(x, y):
        return tuple(getattr(np, n).outer(y, x[1:3]) for n in _OUTER[14:])

    for body, names in ((first, _OUTER[:14]), (second, _OUTER[14:])):
        got = run_kernel(tj.kernel(body), x, y, device=device)
        with np.errstate(all="ignore"):
            expected = body(x, y)
        for name, g, e in zip(names, got, expected):
            if e.dtype.kind == "f":
                assert_ulps(g, e, stated_ulps(name, device, dt), f"np.{name}.outer", device != "numba")
            else:
                assert_close(g, e, what=f"np.{name}.outer")


def test_ufunc_outer_takes_numbers_lists_and_dtype_as_numpy(rng):
    x = rng.random(4)

    def f(x):
        return np.add.outer(x, 2.0), np.multiply.outer([1, 2], x, dtype=np.float32), np.maximum.outer(x[0], x)

    for g, e in zip(tj.kernel(f)(x), f(x)):
        assert_close(g, e)


def test_logical_reduce_matches_numpy(device, rng):
    x = rng.random((4, 5)).astype(np.float32)

    def f(x):
        return (np.logical_or.reduce(x > 0.9), np.logical_and.reduce(x > 0.05, axis=1), np.logical_or.reduce(x > 2, axis=None),
                np.logical_and.reduce(x, axis=(0, 1), keepdims=True))

    for g, e in zip(run_kernel(tj.kernel(f), x, device=device), f(x)):
        assert_close(g, e)
