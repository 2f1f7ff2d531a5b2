"""ml_dtypes' float8_e4m3fn and float8_e5m2 in kernels, against NumPy with ml_dtypes on every device: stored as bytes,
computed in float32, each op's result rounded as ml_dtypes rounds float32 (ties to even; e5m2 overflows to inf,
e4m3fn, which has no inf, to NaN; subnormals). Every code widens exactly, a sweep of float32 values rounds as
ml_dtypes, and every pair of values adds, subtracts, multiplies and divides bit for bit; promotion is NumPy's, sums
accumulate in float32 and round once (tests/test_bfloat16.py says why and how that differs from NumPy's)."""
import numpy as np
import pytest

import tracejit as tj

# make test's budget: emulated metal runs the SIMT lowering emulated cuda runs (its MSL is checked on numba's run)
pytestmark = pytest.mark.slow_emulated("metal")

ml_dtypes = pytest.importorskip("ml_dtypes")
F32 = np.float32
TYPES = [np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)]


def host(r):
    return r if isinstance(r, np.ndarray) else np.asarray(r)


def ulps(a, b) -> np.ndarray:
    """Distance in units in the last place through the ordered line of the codes (0 where both are NaN)."""
    def line(v):
        code = v.view(np.uint8).astype(np.int64)
        return np.where(code & 0x80, 0x80 - code, code)
    both_nan = np.isnan(a.astype(F32)) & np.isnan(b.astype(F32))
    return np.where(both_nan, 0, np.abs(line(a) - line(b)))


def assert_codes(got, expected, what="result", max_ulps=0):
    got, expected = host(got), np.asarray(expected)
    assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype}, NumPy gives {expected.dtype}"
    assert got.shape == expected.shape, f"{what}: shape {got.shape}, NumPy gives {expected.shape}"
    if expected.dtype in TYPES:
        far = ulps(got, expected)
        bad = far > max_ulps
        assert not bad.any(), f"{what}: {got[bad][:5]} where NumPy gives {expected[bad][:5]} ({int(far.max())} ulps)"
    else:
        np.testing.assert_array_equal(got, expected, err_msg=what, strict=True)


def codes(dt):
    return np.arange(256, dtype=np.uint8).view(dt)


def sweep(dt) -> np.ndarray:
    """float32 values around every value of dt (halfway points, just either side of them), beyond its range, in its
    subnormal range and at float32's specials."""
    values = codes(dt).astype(F32)
    values = values[np.isfinite(values)]
    scales = F32([1, 1 + 2**-6, 1 + 2**-5, 1 + 2**-4, 1 + 3 * 2**-5, 1 + 3 * 2**-4, 1 - 2**-7, 1 + 2**-20])
    rng = np.random.default_rng(0)
    wide = (rng.standard_normal(2000) * 10.0 ** rng.integers(-8, 6, 2000)).astype(F32)
    special = F32([np.inf, -np.inf, np.nan, 1e6, -1e6, 464, 470, 480, 57344, 61440, 61439, 2**-17, 3 * 2**-17,
                   2**-10, 3 * 2**-11, 1e-45, -0.0, 3.4e38])
    return np.concatenate([(values[:, None] * scales).ravel(), wide, special]).astype(F32)


@pytest.mark.parametrize("dt", TYPES, ids=lambda t: t.name)
def test_every_code_widens_and_float32_values_round_as_ml_dtypes(device, dt):
    assert_codes(tj.kernel(lambda c: c.astype(F32))(codes(dt), device=device), codes(dt).astype(F32))
    f = sweep(dt)
    assert_codes(tj.kernel(lambda v: v.astype(dt))(f, device=device), f.astype(dt), "float32 -> " + dt.name)


@pytest.mark.parametrize("dt", TYPES, ids=lambda t: t.name)
def test_arithmetic_of_every_pair_of_values_is_bit_exact(device, dt):
    a, b = (v.ravel() for v in np.meshgrid(codes(dt), codes(dt)))

    def ops(a, b):
        return a + b, a - b, a * b, a / b, np.maximum(a, b), a * 2, 3 - a, np.sqrt(np.abs(a)), a > b, np.floor(a)

    got = tj.kernel(ops)(a, b, device=device)
    with np.errstate(all="ignore"):
        expected = ops(a, b)
    for k, (g, e) in enumerate(zip(got, expected)):
        assert_codes(g, e, f"{dt.name} op {k}")


@pytest.mark.parametrize("dt", TYPES, ids=lambda t: t.name)
def test_promotion_and_math_functions_are_numpys(device, dt):
    """With bool and int8 a float8 stays itself; with int16, float16, bfloat16, the other float8 and a Python float
    it is float32 (NumPy's answer with ml_dtypes imported). Math functions in float32, rounded once: within one ulp."""
    other = TYPES[1] if dt == TYPES[0] else TYPES[0]
    x = (np.random.default_rng(1).standard_normal(32) * 2).astype(dt)

    def promoted(x):
        return (x + np.ones(32, np.int8), x * True, x + 1, x + np.ones(32, np.int16), x + np.ones(32, ml_dtypes.bfloat16),
                x + np.ones(32, other), x * 2.5, x.astype(ml_dtypes.bfloat16), (x.astype(ml_dtypes.bfloat16) * 3).astype(dt),
                np.zeros(4, dt), np.clip(x, 0, 1), np.round(x, 1), x ** 3)

    got = tj.kernel(promoted)(x, device=device)
    for k, (g, e) in enumerate(zip(got, promoted(x))):
        assert_codes(g, e, f"promoted[{k}]")
    got = tj.kernel(lambda x: (np.exp(x), np.tanh(x), np.logaddexp(x, x * 2)))(x, device=device)
    with np.errstate(all="ignore"):
        expected = (np.exp(x), np.tanh(x), np.logaddexp(x, x * 2))
    for k, (g, e) in enumerate(zip(got, expected)):
        assert_codes(g, e, f"math[{k}]", max_ulps=1)


@pytest.mark.parametrize("dt", TYPES, ids=lambda t: t.name)
def test_products_reductions_and_writes(device, dt):
    """matmul is float32 (exact products; sums within the float32 bound of any order); sums of positive values within
    one ulp of the exact sum rounded; a write into a float8 argument reaches the caller; results pass back in."""
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((4, 16)).astype(dt), rng.standard_normal((16, 3)).astype(dt)
    p = rng.uniform(0.5, 2, (4, 16)).astype(dt)
    mm, total, top = tj.kernel(lambda a, b, p: (a @ b, p.sum(axis=1), a.max(axis=0)))(a, b, p, device=device)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert host(mm).dtype == (a @ b).dtype == F32
    assert (np.abs(host(mm) - exact) <= 16 * 2.0**-24 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))).all()
    assert_codes(total, p.astype(np.float64).sum(axis=1).astype(F32).astype(dt), "sum", max_ulps=1)
    assert_codes(top, a.max(axis=0), "max")
    f = tj.kernel(lambda x: x * 2)
    r = f(a, device=device)
    assert r.dtype == dt
    assert_codes(f(r, device=device), a * 2 * 2)
    w = a.copy()
    tj.kernel(lambda x: x.__setitem__(Ellipsis, x + 1))(w, device=device)
    assert_codes(w, a + 1, "written")


def test_other_ml_dtypes_types_are_refused_with_the_supported_list(device):
    x = np.ones(4, ml_dtypes.float8_e4m3b11fnuz)
    with pytest.raises(tj.DtypeError, match="float8_e4m3fn"):
        tj.kernel(lambda x: x * 2)(x, device=device)
