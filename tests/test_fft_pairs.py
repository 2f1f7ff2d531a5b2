"""np.fft on complex arrays held as (re, im) pairs (tracejit/numpy/fft_pairs.py): every function against NumPy's on
plain NumPy pairs, norm-wise within 1e-13 (float64) and 1e-6 (float32) of NumPy's complex128/complex64 result; then
traced by tracejit and run on numba and opencl."""
import numpy as np
import pytest

import tracejit as tj
from conftest import AVAILABLE_DEVICES
from tracejit.numpy import fft_pairs

LENGTHS = [1, 2, 3, 4, 5, 7, 8, 12, 15, 16, 17, 30, 64, 97, 100, 128, 243, 1000, 1024, 4096, 2**16]
DTYPES = [np.float32, np.float64]
COMPLEX = {np.float32: np.complex64, np.float64: np.complex128}
TOLERANCE = {np.float32: 1e-6, np.float64: 1e-13}
NORMS = [None, "backward", "ortho", "forward"]


def relative_error(ours, expected) -> float:
    """max|ours - expected| / max|expected|: the norm-wise error an FFT's rounding is measured by."""
    ours, expected = np.asarray(ours), np.asarray(expected)
    assert ours.shape == expected.shape
    return float(np.abs(ours - expected).max(initial=0.0) / max(np.abs(expected).max(initial=0.0), 1e-300))


def assert_matches(ours, expected, dt) -> None:
    """ours (a pair, or one real array) against NumPy's complex (or real) result, in the input's dtype."""
    if isinstance(ours, tuple):
        assert ours[0].dtype == ours[1].dtype == dt
        ours = ours[0] + 1j * ours[1].astype(np.float64)
    else:
        assert ours.dtype == dt
    assert relative_error(ours, expected) <= TOLERANCE[dt]


def random_pair(rng, shape, dt):
    re, im = (rng.standard_normal(shape).astype(dt) for _ in range(2))
    return re, im, (re + 1j * im.astype(np.float64)).astype(COMPLEX[dt])


# --- on NumPy pairs ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("n", LENGTHS)
def test_fft_and_ifft_match_numpy_for_every_length(rng, n, dt):
    re, im, z = random_pair(rng, n, dt)
    assert_matches(fft_pairs.fft(re, im), np.fft.fft(z), dt)
    assert_matches(fft_pairs.ifft(re, im), np.fft.ifft(z), dt)
    assert_matches(fft_pairs.fft(re, im, inverse=True), np.fft.ifft(z), dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [(6, 10), (5, 7), (3, 4, 12), (2, 9, 5)])
def test_fft_along_every_axis_of_a_batch(rng, shape, dt):
    re, im, z = random_pair(rng, shape, dt)
    for axis in range(-len(shape), len(shape)):
        assert_matches(fft_pairs.fft(re, im, axis=axis), np.fft.fft(z, axis=axis), dt)
        assert_matches(fft_pairs.ifft(re, im, axis=axis), np.fft.ifft(z, axis=axis), dt)
        assert_matches(fft_pairs.rfft(re, axis=axis), np.fft.rfft(re, axis=axis), dt)
        assert_matches(fft_pairs.irfft(re, im, axis=axis), np.fft.irfft(z, axis=axis), dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("n", [1, 3, 8, 11, 16, 20, 33])
def test_n_crops_or_zero_pads_the_axis(rng, n, dt):
    re, im, z = random_pair(rng, (3, 16), dt)
    for axis in (0, 1):
        assert_matches(fft_pairs.fft(re, im, n, axis), np.fft.fft(z, n, axis), dt)
        assert_matches(fft_pairs.ifft(re, im, n, axis), np.fft.ifft(z, n, axis), dt)
        assert_matches(fft_pairs.rfft(re, n, axis), np.fft.rfft(re, n, axis), dt)
        assert_matches(fft_pairs.irfft(re, im, n, axis), np.fft.irfft(z, n, axis), dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("norm", NORMS)
def test_every_norm_scales_as_numpy(rng, norm, dt):
    re, im, z = random_pair(rng, (4, 30), dt)
    assert_matches(fft_pairs.fft(re, im, norm=norm), np.fft.fft(z, norm=norm), dt)
    assert_matches(fft_pairs.ifft(re, im, norm=norm), np.fft.ifft(z, norm=norm), dt)
    assert_matches(fft_pairs.rfft(re, norm=norm), np.fft.rfft(re, norm=norm), dt)
    assert_matches(fft_pairs.irfft(re, im, 57, norm=norm), np.fft.irfft(z, 57, norm=norm), dt)
    assert_matches(fft_pairs.fftn(re, im, norm=norm), np.fft.fftn(z, norm=norm), dt)
    assert_matches(fft_pairs.irfftn(re, im, norm=norm), np.fft.irfftn(z, norm=norm), dt)
    assert_matches(fft_pairs.hfft(re, im, norm=norm), np.fft.hfft(z, norm=norm), dt)
    assert_matches(fft_pairs.ihfft(re, norm=norm), np.fft.ihfft(re, norm=norm), dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("n", [1, 2, 6, 9, 34, 100, 194, 243, 1000, 1024, 4097])
def test_rfft_matches_numpy_for_even_and_odd_lengths(rng, n, dt):
    x = rng.standard_normal((2, n)).astype(dt)
    assert_matches(fft_pairs.rfft(x), np.fft.rfft(x), dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("n", [None, 1, 2, 7, 8, 13, 14, 30, 31, 194, 195])
def test_irfft_ignores_the_imaginary_parts_numpy_ignores(rng, n, dt):
    """Random spectra: the zero-frequency bin and, n even, the Nyquist bin have imaginary parts NumPy ignores."""
    re, im, z = random_pair(rng, (3, 15), dt)
    assert_matches(fft_pairs.irfft(re, im, n), np.fft.irfft(z, n), dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("n", [1, 6, 17, 120, 1000])
def test_inverse_round_trips(rng, n, dt):
    re, im, z = random_pair(rng, (2, n), dt)
    for norm in NORMS:
        assert_matches(fft_pairs.ifft(*fft_pairs.fft(re, im, norm=norm), norm=norm), z, dt)
        assert_matches(fft_pairs.irfft(*fft_pairs.rfft(re, norm=norm), n, norm=norm), re, dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("s, axes", [(None, None), (None, (0, 2)), ((5, 8), (1, 2)), ((3, 3, 4), (0, 1, 2)),
                                     ((7, 2), (2, 0)), ((-1, 9), (0, 1)), ((4,), None), (None, (1,))])
@pytest.mark.filterwarnings("ignore:`axes` should not be `None`:DeprecationWarning")  # NumPy 2's, for s without axes
def test_fftn_and_ifftn_take_numpys_s_and_axes(rng, s, axes, dt):
    re, im, z = random_pair(rng, (4, 6, 10), dt)
    assert_matches(fft_pairs.fftn(re, im, s, axes), np.fft.fftn(z, s, axes), dt)
    assert_matches(fft_pairs.ifftn(re, im, s, axes), np.fft.ifftn(z, s, axes), dt)
    assert_matches(fft_pairs.rfftn(re, s, axes), np.fft.rfftn(re, s, axes), dt)
    assert_matches(fft_pairs.irfftn(re, im, s, axes), np.fft.irfftn(z, s, axes), dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("s", [None, (6, 7), (3, 16)])
def test_fft2_and_ifft2_are_fftn_over_the_last_two_axes(rng, s, dt):
    re, im, z = random_pair(rng, (3, 5, 8), dt)
    assert_matches(fft_pairs.fft2(re, im, s), np.fft.fft2(z, s), dt)
    assert_matches(fft_pairs.ifft2(re, im, s), np.fft.ifft2(z, s), dt)
    assert_matches(fft_pairs.fft2(re, im, s, inverse=True), np.fft.ifft2(z, s), dt)
    assert_matches(fft_pairs.rfft2(re, s), np.fft.rfft2(re, s), dt)
    assert_matches(fft_pairs.irfft2(re, im, s), np.fft.irfft2(z, s), dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("n", [None, 9, 14])
def test_hfft_and_ihfft_match_numpy(rng, n, dt):
    re, im, z = random_pair(rng, (2, 8), dt)
    assert_matches(fft_pairs.hfft(re, im, n), np.fft.hfft(z, n), dt)
    assert_matches(fft_pairs.ihfft(re, n), np.fft.ihfft(re, n), dt)


def test_fftshift_and_ifftshift_roll_as_numpy(rng):
    x = rng.standard_normal((5, 6, 7))
    for axes in (None, 0, 2, (1,), (0, 2), (-1, -3)):
        np.testing.assert_array_equal(fft_pairs.fftshift(x, axes), np.fft.fftshift(x, axes))
        np.testing.assert_array_equal(fft_pairs.ifftshift(x, axes), np.fft.ifftshift(x, axes))
        np.testing.assert_array_equal(fft_pairs.ifftshift(fft_pairs.fftshift(x, axes), axes), x)


def test_fftfreq_and_rfftfreq_are_numpys():
    for n, d in ((1, 1.0), (8, 0.1), (9, 2.0)):
        np.testing.assert_array_equal(fft_pairs.fftfreq(n, d), np.fft.fftfreq(n, d))
        np.testing.assert_array_equal(fft_pairs.rfftfreq(n, d), np.fft.rfftfreq(n, d))


def test_bad_lengths_and_norms_raise_numpys_errors():
    x = np.ones(4)
    with pytest.raises(ValueError, match="Invalid number of FFT data points"):
        fft_pairs.fft(x, x, 0)
    with pytest.raises(ValueError, match="Invalid number of FFT data points"):
        fft_pairs.irfft(x[:1], x[:1])
    with pytest.raises(ValueError, match="Invalid norm value"):
        fft_pairs.fft(x, x, norm="unitary")
    with pytest.raises(ValueError, match="Shape and axes have different lengths"):
        fft_pairs.fftn(x, x, (4, 4), (0,))


# --- traced by tracejit --------------------------------------------------------------------------------------

DEVICES = [pytest.param(d, marks=pytest.mark.skipif(d not in AVAILABLE_DEVICES, reason=f"no {d} device here"))
           for d in ("numba", "opencl")]


def complex_of(pair) -> np.ndarray:
    return np.asarray(pair[0]) + 1j * np.asarray(pair[1]).astype(np.float64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [(3, 64), (2, 120), (17,)], ids=["radix-4", "radices-4-2-3-5", "bluestein-1d"])
def test_traced_fft_runs_on_the_device(rng, device, shape, dt):
    re, im, z = random_pair(rng, shape, dt)
    f = tj.kernel(lambda re, im: fft_pairs.fft(re, im))
    out = f(re, im, device=device)
    assert np.asarray(out[0]).dtype == np.asarray(out[1]).dtype == dt
    assert relative_error(complex_of(out), np.fft.fft(z)) <= TOLERANCE[dt]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dt", DTYPES)
def test_traced_real_and_nd_transforms_run_on_the_device(rng, device, dt):
    re, im, z = random_pair(rng, (4, 6, 10), dt)
    rfft = tj.kernel(lambda x: fft_pairs.rfft(x, 22, axis=1, norm="ortho"))
    expected = np.fft.rfft(re, 22, axis=1, norm="ortho")
    assert relative_error(complex_of(rfft(re, device=device)), expected) <= TOLERANCE[dt]
    irfft = tj.kernel(lambda re, im: fft_pairs.irfft(re, im, 15))
    assert relative_error(irfft(re, im, device=device), np.fft.irfft(z, 15)) <= TOLERANCE[dt]
    fftn = tj.kernel(lambda re, im: fft_pairs.fftn(re, im, (5, 8), (0, 2), inverse=True))
    assert relative_error(complex_of(fftn(re, im, device=device)), np.fft.ifftn(z, (5, 8), (0, 2))) <= TOLERANCE[dt]
