"""`x ** c` for a constant whole or half number c (codegen/cpu/powers.py): multiplications, a square root and a
division instead of pow on the numba device. Compared with NumPy's pow: the special values exactly (signed zeros,
infinities, NaN, negative bases), the rest within a few units in the last place (float32 within one: computed
in float64), both numba renderers giving the same bits; and NumPy's `array ** 0.5`, which is np.sqrt."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from reference import run_kernel
from test_numba_native import _both, _same_bits

EXPONENTS = (0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.5, -3.5, -1, -2, -3, 4, -4, 5.5, 4.5, np.nan, np.inf, -np.inf)
ULPS = {np.float64: 4, np.float32: 1}


def _values(dtype) -> np.ndarray:
    info = np.finfo(dtype)
    rng = np.random.default_rng(7)
    special = [np.nan, 0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, -2.0, info.tiny, info.smallest_subnormal, info.max,
               -info.max, -info.smallest_subnormal]
    spread = np.exp(rng.uniform(np.log(info.smallest_subnormal), np.log(info.max), 4000))
    return np.concatenate([np.array(special, dtype), spread.astype(dtype), rng.standard_normal(500).astype(dtype)])


def _ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The distance between two float arrays in units in the last place, through the ordered line of their bits
    (0 where both are NaN)."""
    bits = np.int64 if a.dtype == np.float64 else np.int32
    def ordered(x):
        i = x.view(bits).astype(object if bits is np.int64 else np.int64)
        return np.where(i < 0, np.iinfo(bits).min - i, i)
    far = np.abs(ordered(a) - ordered(b))
    far[np.isnan(a) & np.isnan(b)] = 0
    return far.astype(np.float64)


@pytest.mark.parametrize("dtype", (np.float32, np.float64))
@pytest.mark.parametrize("c", EXPONENTS)
def test_a_constant_power_matches_numpy(dtype, c, monkeypatch):
    x = _values(dtype)
    with np.errstate(all="ignore"):
        expected = x ** c
        native, python = _both(monkeypatch, lambda x: x ** c, x)
    _same_bits(native, python)
    assert native.dtype == expected.dtype
    far = _ulps(native, expected)
    at = far.argmax()
    assert far.max() <= ULPS[dtype], f"{far.max()} ulps at {x[at]}: {native[at]} vs NumPy's {expected[at]}"
    inexact = ~np.isfinite(expected) | (expected == 0)
    np.testing.assert_array_equal(np.signbit(native[inexact]), np.signbit(expected[inexact]))


def test_a_power_whose_exponent_folds_to_nan_or_inf_is_pow(device):
    """An exponent the graph folds to a constant NaN or inf (`x + np.nan`: the dtype fuzzer's program) is pow's, as in
    NumPy; the numba device raised Python's `cannot convert float NaN to integer` while choosing an expansion."""
    b, x = np.array([[False, True]]), np.float32([0.5, 2.0])
    body = lambda b, x: (np.power(b, b + np.float32(np.nan)), x ** np.inf, x ** -np.inf, x ** np.float32(np.nan))  # noqa: E731
    with np.errstate(all="ignore"):
        expected = body(b, x)
        got = run_kernel(tj.kernel(body), b, x, device=device)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype
        np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("dtype", (np.float32, np.float64))
def test_an_element_to_a_half_power_is_pow_and_an_array_is_sqrt_as_in_numpy(dtype, device):
    if device == "webgpu" and dtype == np.float64:
        pytest.skip("webgpu has no float64")
    x = np.array([-0.0, -np.inf, 4.0, 2.0, np.nan, -1.0], dtype)
    with np.errstate(all="ignore"):
        got = run_kernel(tj.kernel(lambda x: x ** 0.5), x, device=device)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(x ** 0.5))
        np.testing.assert_allclose(got, x ** 0.5, rtol=1e-6)
        pick = run_kernel(tj.kernel(lambda x: x[0] ** 0.5 + x[1] ** 0.5), x, device=device)
        expected = x[0] ** 0.5 + x[1] ** 0.5   # NumPy scalars: pow's +0.0 and +inf
        assert np.isinf(expected) and pick == expected


def test_an_n_body_force_sums_each_pair_once_and_matches_numpy(monkeypatch):
    """Mocz's getAcc: three sums over the same pairs share one loop (ir/lower.py), r ** -1.5 expanded."""
    rng = np.random.default_rng(3)
    pos, mass = rng.standard_normal((64, 3)), rng.random((64, 1))

    def acc(pos, mass):
        x, y, z = pos[:, 0:1], pos[:, 1:2], pos[:, 2:3]
        dx, dy, dz = x.T - x, y.T - y, z.T - z
        inv_r3 = dx ** 2 + dy ** 2 + dz ** 2 + 0.01
        inv_r3[inv_r3 > 0] = inv_r3[inv_r3 > 0] ** (-1.5)
        return np.hstack(((dx * inv_r3) @ mass, (dy * inv_r3) @ mass, (dz * inv_r3) @ mass))

    native, python = _both(monkeypatch, acc, pos, mass)
    _same_bits(native, python)
    np.testing.assert_allclose(native, acc(pos, mass), rtol=1e-12)
    (source,) = [k.source for k in tj.kernel(acc).lower(pos, mass, device="numba").kernels if "row" in k.name]
    assert "llvm.pow" not in source
