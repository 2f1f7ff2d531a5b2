"""np.fft in kernels (issue 48 item 2) against NumPy on every device: every function, NumPy's result dtypes, all
norm= modes, lengths of radix 2, 3 and 5 and primes (Bluestein), n= crop and pad, batches along every axis, s= and
axes=, transforms fused with the code around them; within 1e-13 (complex128) and 1e-6 (complex64) of NumPy's,
norm-wise. The transforms themselves: tests/test_fft_pairs.py."""
import numpy as np
import pytest

import tracejit as tj


def dtypes(device):
    return ("float32",) if device in ("webgpu", "metal") else ("float32", "float64")


def signal(shape, dtype, complex_=True, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    if not complex_:
        return x
    return (x + 1j * rng.standard_normal(shape).astype(dtype)).astype(np.result_type(x, np.complex64))


def check(body, *args, device):
    got = tj.kernel(body)(*args, device=device)
    expected = body(*args)
    got, expected = (got, expected) if isinstance(expected, tuple) else ((got,), (expected,))
    for g, e in zip(got, expected):
        g = np.asarray(g)
        assert g.dtype == e.dtype, (g.dtype, e.dtype)
        assert g.shape == e.shape, (g.shape, e.shape)
        tol = 2e-6 if e.dtype in (np.complex64, np.float32) else 1e-13
        scale = max(float(np.max(np.abs(e))), np.finfo(np.float32).tiny) if e.size else 1.0
        assert float(np.max(np.abs(g - e), initial=0.0)) <= tol * scale, float(np.max(np.abs(g - e)) / scale)


@pytest.mark.parametrize("n", [1, 12, 17, 64])
def test_fft_and_ifft_of_every_length_kind(device, n):
    for dt in dtypes(device):
        z = signal((3, n), dt)
        check(lambda z: (np.fft.fft(z), np.fft.ifft(z, axis=0, norm="ortho")), z, device=device)


@pytest.mark.slow_emulated("metal")
@pytest.mark.parametrize("norm", [None, "forward"])
def test_real_transforms_and_norms(device, norm):
    for dt in dtypes(device):
        x = signal((4, 30), dt, complex_=False)

        def body(x):
            spectrum = np.fft.rfft(x, norm=norm)
            return (spectrum, np.fft.irfft(spectrum, n=29, norm=norm), np.fft.rfft(x, n=16, axis=0, norm=norm),
                    np.fft.hfft(spectrum[:, :9], norm=norm), np.fft.ihfft(x[:, :8], norm=norm))

        check(body, x, device=device)


@pytest.mark.slow_emulated("metal")
def test_multidimensional_transforms_with_shapes_and_axes(device):
    for dt in dtypes(device):
        z = signal((4, 6, 8), dt)
        x = z.real.copy()

        def body(z, x):
            return (np.fft.fft2(z), np.fft.ifft2(z, s=(5, 8)), np.fft.fftn(z, axes=(0, 2)), np.fft.rfftn(x),
                    np.fft.irfftn(np.fft.rfftn(x), s=x.shape, axes=(0, 1, 2)), np.fft.irfft2(np.fft.rfft2(x, axes=(0, 1))))

        check(body, z, x, device=device)


def test_shifts_frequencies_and_real_inputs_follow_numpy(device):
    for dt in dtypes(device):
        x = signal(20, dt, complex_=False)

        def body(x):
            f = np.fft.fftfreq(x.size, d=0.1).astype(x.dtype)
            spectrum = np.fft.fft(x)
            return np.fft.fftshift(spectrum), np.fft.ifftshift(f) * x[0], np.abs(spectrum) ** 2

        check(body, x, device=device)
    ints = np.arange(12, dtype=np.int32) % 5
    if device not in ("webgpu", "metal"):
        check(lambda k: np.fft.fft(k), ints, device=device)  # (ints: complex128, as NumPy)


def test_a_spectral_filter_fuses_with_the_code_around_it(device):
    """A low-pass filter through the spectrum: the transforms, the mask and the scaling in one kernel graph,
    no fallback (the suite runs with it off)."""
    dt = dtypes(device)[-1]
    x = signal((8, 64), dt, complex_=False)

    def low_pass(x, keep):
        spectrum = np.fft.rfft(x - x.mean(axis=-1, keepdims=True))
        spectrum[..., keep:] = 0
        return np.fft.irfft(spectrum, n=x.shape[-1]) * 2.0

    check(low_pass, x, 6, device=device)


def test_complex_input_to_a_real_transform_is_refused_as_numpy_refuses_it(device):
    with pytest.raises(tj.UnsupportedError, match="real array"):
        tj.kernel(lambda z: np.fft.rfft(z))(signal(8, "float32"), device=device)


def test_frequencies_of_any_length_in_a_kernel_follow_numpy(device):
    """np.fft.fftfreq / rfftfreq inside a kernel are index expressions (no constant of n elements to embed), with
    a spacing read from the data; np.where of such values stays traced too."""
    if device in ("webgpu", "metal"):
        pytest.skip("NumPy's frequencies are float64")
    dt = dtypes(device)[0]
    x = np.linspace(0, 1, 8192).astype(dt)

    def body(x):
        d = x[1] - x[0]
        f = np.fft.fftfreq(x.size, d=d).astype(x.dtype)
        g = np.fft.rfftfreq(x.size, 0.5).astype(x.dtype)
        return f * x, np.where(np.abs(f) > 100, f, 0).astype(x.dtype), g[:5] + x[:5]

    got = tj.kernel(body)(x, device=device)
    for g, e in zip(got, body(x)):
        np.testing.assert_allclose(np.asarray(g), e, rtol=1e-6)
