"""tracejit.numpy.complex_math against NumPy's complex ufuncs: every pair of special values (+-0, a subnormal,
the smallest normal, +-1, +-2, pi, +-1e10, max/2, +-inf, NaN), random values spanning magnitudes and points near
the unit circle, +-1, +-i and the axes, within complex_math.ULPS; and traced through tracejit on numba and
opencl, where the same code must compile and give the same values."""

from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from tracejit.numpy import complex_math as cm

FLOATS = [np.float32, np.float64]
COMPLEX = {np.dtype(np.float32): np.complex64, np.dtype(np.float64): np.complex128}
UNARY = ["exp", "log", "log10", "log2", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh",
         "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "absolute", "angle", "sign", "reciprocal",
         "square"]
BINARY = ["multiply", "divide", "power"]
NUMPY = {"angle": np.angle}  # np.<name> otherwise


def special_values(dtype) -> np.ndarray:
    f = np.finfo(dtype)
    return np.array([0.0, -0.0, f.smallest_subnormal, f.tiny, 0.5, 1.0, -1.0, 2.0, -2.0, np.pi, 1e10, -1e10,
                     f.max / 2, np.inf, -np.inf, np.nan], dtype)


def special_pairs(dtype) -> tuple[np.ndarray, np.ndarray]:
    """Every (re, im) of two special values."""
    v = special_values(dtype)
    return np.repeat(v, v.size), np.tile(v, v.size)


def spanning(dtype, rng: np.random.Generator, n: int) -> np.ndarray:
    """Log-uniform magnitudes over 1e-30..1e30 (float32: 1e-15..1e15), either sign."""
    bound = 1e15 if np.dtype(dtype) == np.float32 else 1e30
    magnitude = np.exp(rng.uniform(-np.log(bound), np.log(bound), n))
    return (magnitude * rng.choice([-1.0, 1.0], n)).astype(dtype)


def near_edges(dtype, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Where the functions are delicate: |z| near 1 (log's cancellation), z near +-1 and +-i (branch points),
    z near the axes (branch cuts), each quarter of n."""
    k = n // 4
    closest = 1e-7 if np.dtype(dtype) == np.float32 else 1e-15

    def log_uniform(lo, hi):
        return np.exp(rng.uniform(np.log(lo), np.log(hi), k)) * rng.choice([-1.0, 1.0], k)

    theta = rng.uniform(-np.pi, np.pi, k)
    radius = 1 + log_uniform(closest, 0.1)
    off_one = (rng.choice([-1.0, 1.0], k) * (1 + log_uniform(closest, 0.1)), log_uniform(1e-30, 0.1))
    off_axis = (log_uniform(1e-3, 1e3), log_uniform(1e-35 if np.dtype(dtype) == np.float32 else 1e-300, 1e-6))
    re = np.concatenate([radius * np.cos(theta), off_one[0], off_one[1], off_axis[0], off_axis[1]])
    im = np.concatenate([radius * np.sin(theta), off_one[1], off_one[0], off_axis[1], off_axis[0]])
    return re.astype(dtype), im.astype(dtype)


def numpy_result(name: str, *parts: np.ndarray) -> tuple[np.ndarray, ...]:
    """NumPy's complex ufunc on the complex numbers the pairs of parts make, as real parts."""
    zs = []
    for re, im in zip(parts[::2], parts[1::2]):
        z = np.empty(re.shape, COMPLEX[re.dtype])
        z.real, z.imag = re, im
        zs.append(z)
    with np.errstate(all="ignore"):
        out = NUMPY.get(name, getattr(np, name))(*zs)
    return (out.real.copy(), out.imag.copy()) if np.iscomplexobj(out) else (out,)


def ours(name: str, *parts, device: str | None = None) -> tuple[np.ndarray, ...]:
    """complex_math's function on ndarrays (device None) or traced on a device."""
    fn = getattr(cm, name)
    with np.errstate(all="ignore"):
        out = fn(*parts) if device is None else tj.kernel(lambda *p: fn(*p))(*parts, device=device)
    return tuple(np.asarray(o) for o in (out if isinstance(out, tuple) else (out,)))


def ulps_off(got: tuple[np.ndarray, ...], expected: tuple[np.ndarray, ...], normwise: bool) -> list[np.ndarray]:
    """Each part's error in ulps of NumPy's, as complex_math.ULPS states it: in ulps of the part itself but not
    finer than those of max(|re|, |im|) / 1024, or (normwise) in ulps of max(|re|, |im|); 0 where NumPy's part
    is not finite (assert_matches_numpy checks those)."""
    dtype = expected[0].dtype
    with np.errstate(invalid="ignore"):
        scale = np.max([np.where(np.isfinite(e), np.abs(e), 0).astype(np.float64) for e in expected], axis=0)
    errors = []
    for g, e in zip(got, expected):
        e64 = e.astype(np.float64)
        floor = scale if normwise else np.maximum(np.abs(e64), scale / 1024)
        with np.errstate(all="ignore"):
            err = np.abs(g.astype(np.float64) - e64) / np.spacing(floor.astype(dtype)).astype(np.float64)
        errors.append(np.where(np.isfinite(e), err, 0.0))
    return errors


def assert_matches_numpy(name: str, parts: tuple[np.ndarray, ...], got: tuple[np.ndarray, ...], what: str,
                         zero_signs: bool = True, noise: np.ndarray | None = None) -> None:
    """Same dtype; per part NaN where NumPy has NaN, its infinities, its sign of a zero; finite values within
    complex_math.ULPS. Rows in `noise` (NumPy's result not determined to its last bits by the inputs) are held
    to NaN-ness only."""
    expected = numpy_result(name, *parts)
    dtype = parts[0].dtype
    noise = np.zeros(parts[0].shape, bool) if noise is None else noise
    for i, (g, e) in enumerate(zip(got, expected)):
        part = f"{what} part {i}"
        assert g.dtype == e.dtype == dtype, f"{part}: dtype {g.dtype}, NumPy gives {e.dtype}"
        for check, message in ((np.isnan(g) != np.isnan(e), "NaN where NumPy has none or not"),
                               (np.isinf(e) & (g != e) & ~noise, "not NumPy's infinity"),
                               ((e == 0) & (np.signbit(g) != np.signbit(e)) & zero_signs & ~noise, "sign of zero")):
            if check.any():
                k = np.flatnonzero(check)[0]
                raise AssertionError(f"{part}: {message} at input {[p[k] for p in parts]}: got {g[k]!r}, "
                                     f"NumPy {e[k]!r} ({check.sum()} such)")
    stated = cm.ULPS[name][0 if dtype == np.float32 else 1]
    for i, err in enumerate(ulps_off(got, expected, name in cm.NORMWISE)):
        err = np.where(noise, 0.0, err)
        k = int(np.argmax(err))
        assert err[k] <= stated, (f"{what} part {i}: {err[k]:.1f} ulps (stated {stated}) at input "
                                  f"{[p[k] for p in parts]}: got {got[i][k]!r}, NumPy {expected[i][k]!r}")


def power_noise(parts: tuple[np.ndarray, ...]) -> np.ndarray:
    """Where NumPy's a ** b = exp(w), w = b log a, is not determined to its last bits by a and b: |w| > 100 (an
    ulp of log a times b moves it by more than the stated ulps, and may take it past the overflow threshold),
    or w's phase is within a few of its ulps of an axis, where the sign of a part that underflows to zero or
    overflows rests on how the C library rounds log a (glibc's float atan2 is not NumPy's)."""
    ar, ai, br, bi = (p.astype(np.float64) for p in parts)
    with np.errstate(all="ignore"):
        la, phase = np.log(np.hypot(ar, ai)), np.arctan2(ai, ar)
        wr, wi = br * la - bi * phase, br * phase + bi * la
        tol = 8 * np.finfo(parts[0].dtype).eps * np.maximum(1.0, np.abs(wi))
        on_axis = (np.abs(np.cos(wi)) < tol) | (np.abs(np.sin(wi)) < tol)
        size = np.maximum(np.abs(wr), np.abs(wi))
    return np.isfinite(size) & ((size > 100) | on_axis)


def integer_power_leaves_range(parts: tuple[np.ndarray, ...]) -> np.ndarray:
    """Rows of a ** n, n a real integer below 100 in size (NumPy's repeated multiplication), where |a|**|n|
    overflows or underflows the dtype: there a device that fuses a*b - c*d into one FMA (numba) meets inf - inf
    as -inf where NumPy has NaN, and its roundings, doubled by each squaring, are not NumPy's."""
    ar, ai, br, bi = (p.astype(np.float64) for p in parts)
    f = np.finfo(parts[0].dtype)
    with np.errstate(all="ignore"):
        integer = (bi == 0) & (np.abs(br) < 100) & (np.trunc(br) == br)
        size = np.abs(br) * np.abs(np.log(np.hypot(ar, ai)))
    return integer & ~(size < np.log(f.max) - 1)


def _available(device: str) -> bool:
    return any(info.name == device and info.available for info in tj.devices())


def binary_special_parts(dtype) -> tuple[np.ndarray, ...]:
    re, im = special_pairs(dtype)
    n = re.size
    return np.repeat(re, n), np.repeat(im, n), np.tile(re, n), np.tile(im, n)


def binary_random_parts(name: str, dtype, rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    if name != "power":
        return tuple(spanning(dtype, rng, n) for _ in range(4))
    # |b log a| < 100 (the error grows with it, in NumPy's result as in ours), and integer exponents
    base = tuple((np.exp(rng.uniform(np.log(1e-3), np.log(1e3), n)) * rng.choice([-1.0, 1.0], n)).astype(dtype)
                 for _ in range(2))
    br, bi = rng.uniform(-4, 4, n).astype(dtype), rng.uniform(-4, 4, n).astype(dtype)
    integer = rng.random(n) < 0.25
    br = np.where(integer, rng.integers(-99, 100, n), br).astype(dtype)
    return base + (br, np.where(integer, 0, bi).astype(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", UNARY)
def test_unary_function_matches_numpy_on_every_pair_of_special_values(name, dtype):
    parts = special_pairs(dtype)
    assert_matches_numpy(name, parts, ours(name, *parts), f"{name}[{dtype.__name__}] on special values")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", UNARY)
def test_unary_function_within_stated_ulps_on_random_and_delicate_values(name, dtype, rng):
    re, im = spanning(dtype, rng, 20000), spanning(dtype, rng, 20000)
    edge_re, edge_im = near_edges(dtype, rng, 4000)
    parts = np.concatenate([re, edge_re]), np.concatenate([im, edge_im])
    assert_matches_numpy(name, parts, ours(name, *parts), f"{name}[{dtype.__name__}] on random values")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", BINARY)
def test_binary_function_matches_numpy_on_every_pair_of_special_values(name, dtype):
    parts = binary_special_parts(dtype)
    assert_matches_numpy(name, parts, ours(name, *parts), f"{name}[{dtype.__name__}] on special values",
                         noise=power_noise(parts) if name == "power" else None)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", BINARY)
def test_binary_function_within_stated_ulps_on_random_values(name, dtype, rng):
    parts = binary_random_parts(name, dtype, rng, 20000)
    assert_matches_numpy(name, parts, ours(name, *parts), f"{name}[{dtype.__name__}] on random values",
                         noise=power_noise(parts) if name == "power" else None)


@pytest.mark.parametrize("dtype", FLOATS)
def test_division_and_integer_powers_give_numpys_bits_on_ndarrays(dtype, rng):
    """NumPy's loops are followed operation by operation: Smith's division, the reciprocal, and the repeated
    multiplication of a power with a real integer exponent below 100."""
    a = spanning(dtype, rng, 2000), spanning(dtype, rng, 2000)
    b = spanning(dtype, rng, 2000), spanning(dtype, rng, 2000)
    n = rng.integers(-99, 100, 2000).astype(dtype), np.zeros(2000, dtype)
    base = tuple(p * np.asarray(1e-14 if dtype == np.float64 else 1e-7, dtype) for p in a)  # not all overflow
    for name, parts in (("divide", a + b), ("reciprocal", a), ("power", base + n)):
        for g, e in zip(ours(name, *parts), numpy_result(name, *parts)):
            bits, number = f"u{e.itemsize}", ~np.isnan(e)
            np.testing.assert_array_equal(np.isnan(g), ~number, err_msg=f"{name}[{e.dtype}]: NaNs")
            np.testing.assert_array_equal(g.view(bits)[number], e.view(bits)[number], err_msg=f"{name}[{e.dtype}]")


def test_parts_broadcast_and_keep_their_dtype():
    re = np.linspace(-2, 2, 3, dtype=np.float32)[:, None]
    im = np.linspace(-1, 1, 4, dtype=np.float32)
    out_re, out_im = cm.exp(re, im)
    assert out_re.shape == out_im.shape == (3, 4) and out_re.dtype == out_im.dtype == np.float32
    expected = np.exp((re + 1j * im).astype(np.complex64))
    np.testing.assert_allclose(out_re + 1j * out_im, expected, rtol=1e-6)


@pytest.mark.parametrize("device", ["numba", "opencl"])
def test_traced_parts_broadcast_and_keep_their_dtype(device):
    if not _available(device):
        pytest.skip(f"{device} is not available here")
    re = np.linspace(0.5, 2, 3, dtype=np.float32)[:, None]
    im = np.linspace(-1, 1, 4, dtype=np.float32)
    out_re, out_im = (np.asarray(o) for o in tj.kernel(lambda re, im: cm.sqrt(re, im))(re, im, device=device))
    assert out_re.shape == out_im.shape == (3, 4) and out_re.dtype == out_im.dtype == np.float32
    np.testing.assert_allclose(out_re + 1j * out_im, np.sqrt((re + 1j * im).astype(np.complex64)), rtol=1e-6)


def test_parts_of_different_dtypes_are_refused():
    with pytest.raises(TypeError, match="one real float dtype"):
        cm.exp(np.zeros(2, np.float32), np.zeros(2, np.float64))
    with pytest.raises(TypeError, match="one real float dtype"):
        cm.sqrt(np.zeros(2, np.int64), np.zeros(2, np.int64))


def test_stated_ulps_cover_every_function():
    assert set(cm.ULPS) == set(UNARY) | set(BINARY)
    assert cm.NORMWISE <= set(cm.ULPS)


# numba contracts a*b + c into one FMA: where such a product underflows, the sign of the zero may differ
CONTRACTED = {"divide", "power"}
# (not log1p and expm1: NumPy's own formulas cancel, so an ulp of difference in a device's hypot or cos is not
# bounded by ULPS on every input)
TRACED = ["exp", "log", "sqrt", "sin", "cosh", "tanh", "arcsin", "arccos", "arccosh", "arctanh", "sign",
          "reciprocal", "multiply", "divide", "power"]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("device", ["numba", "opencl"])
@pytest.mark.parametrize("name", TRACED)
def test_traced_function_matches_numpy(name, device, dtype, rng):
    """The functions trace (no branch on a value, no in-place write, float32 kept float32) and give NumPy's
    values on the device: special values and random ones. numba contracts a*b + c into one FMA, so where
    divide's products underflow to a zero its sign may differ there (stated in complex_math.ULPS)."""
    if not _available(device):
        pytest.skip(f"{device} is not available here")
    if name in BINARY:
        special = binary_special_parts(dtype)
        keep = np.arange(special[0].size) % 7 == 0  # a seventh of the 65536 quadruples
        randoms = binary_random_parts(name, dtype, rng, 3000)
        parts = tuple(np.concatenate([s[keep], r]) for s, r in zip(special, randoms))
        if name == "power" and device == "numba":
            parts = tuple(p[~integer_power_leaves_range(parts)] for p in parts)
    else:
        randoms = spanning(dtype, rng, 3000), spanning(dtype, rng, 3000)
        parts = tuple(np.concatenate(p) for p in zip(special_pairs(dtype), randoms, near_edges(dtype, rng, 1000)))
    got = ours(name, *parts, device=device)
    assert_matches_numpy(name, parts, got, f"{name}[{dtype.__name__}] on {device}",
                         zero_signs=not (device == "numba" and name in CONTRACTED),
                         noise=power_noise(parts) if name == "power" else None)
