"""np.linalg in kernels (issue 48 item 3): NumPy's own LAPACK calls on the host on the numba device, in the middle of
the kernel, with the code before and after compiled, and generated kernels on the GPU-API devices
(test_linalg_generated.py); on every device against NumPy, values and dtypes, stacked (batched) inputs, NumPy's
LinAlgError; they need no fallback (the suite runs with it off), warn nothing on numba, and warn on a GPU-API
device only for what still runs on the host there (qr's raw mode), whose values they copy to the host and back."""
import warnings

import numpy as np
import pytest

import tracejit as tj
from reference import assert_close


def float_dtype(device):
    return np.float32 if device in ("webgpu", "metal") else np.float64


def tolerance(dt):
    return dict(rtol=2e-3, atol=2e-4) if dt == np.float32 else dict(rtol=1e-9, atol=1e-11)


def spd(rng, n, dt, batch=()):
    a = rng.standard_normal((*batch, n, n))
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(dt)


PROGRAMS = {
    "solve": lambda a, b: np.linalg.solve(a * 2, b + 1) - 1,
    "inv": lambda a, b: np.linalg.inv(a) @ b,
    "det": lambda a, b: np.linalg.det(a) * b,
    "slogdet": lambda a, b: np.linalg.slogdet(a)[1] + b * np.linalg.slogdet(a).sign,
    "cholesky": lambda a, b: np.linalg.cholesky(a) @ b,
    "qr": lambda a, b: np.abs(np.linalg.qr(a).R) @ b,
    "eigh": lambda a, b: np.linalg.eigh(a).eigenvalues * b,
    "eigvalsh": lambda a, b: np.linalg.eigvalsh(a + 1) - b,
    "svd": lambda a, b: np.linalg.svd(a, compute_uv=False) + b,
    "pinv": lambda a, b: np.linalg.pinv(a[..., :, :-1]) @ b,
    "matrix_power": lambda a, b: np.linalg.matrix_power(a, 3) @ b,
    "matrix_rank": lambda a, b: np.linalg.matrix_rank(a) + b,
    "cond": lambda a, b: np.linalg.cond(a) * b,
    "multi_dot": lambda a, b: np.linalg.multi_dot([a, a, b]),
}


def quiet(kernel, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tj.FallbackWarning)
        return kernel(*args, **kwargs)


@pytest.mark.slow_emulated("metal")
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_each_function_matches_numpy_on_every_device(device, rng, name):
    dt = float_dtype(device)
    program = PROGRAMS[name]
    a, b = spd(rng, 5, dt), rng.standard_normal(5).astype(dt)
    expected = program(a, b)
    if device in ("webgpu", "metal") and expected.dtype.itemsize == 8:   # (matrix_rank: int64, and float64 after it)
        with pytest.raises(tj.DtypeError):
            quiet(tj.kernel(program), a, b, device=device)
        return
    got = quiet(tj.kernel(program), a, b, device=device)
    assert np.asarray(got).dtype == expected.dtype
    assert_close(np.asarray(got), expected, **tolerance(dt))


@pytest.mark.parametrize("name", ["solve", "inv", "det", "cholesky", "eigh", "svd"])
def test_stacked_matrices(rng, name):
    program = PROGRAMS[name]
    a, b = spd(rng, 4, np.float64, (3, 2)), rng.standard_normal((3, 2, 4))
    b = {"solve": b[..., None], "inv": b[..., None], "cholesky": b[..., None], "det": b[..., 0]}.get(name, b)
    assert_close(tj.kernel(program)(a, b), program(a, b), rtol=1e-9, atol=1e-11)


def test_lstsq_and_integer_input():
    def fit(A, y):
        x, residuals, rank, sv = np.linalg.lstsq(A * 1.0, y, rcond=None)
        return x, residuals, rank, sv
    A = np.vander(np.linspace(0, 1, 8), 3)
    y = np.sin(np.linspace(0, 1, 8))
    for got, expected in zip(tj.kernel(fit)(A, y), fit(A, y)):
        assert np.asarray(got).dtype == np.asarray(expected).dtype
        assert_close(np.asarray(got), np.asarray(expected), rtol=1e-9, atol=1e-12)
    ints = np.array([[2, 1], [1, 3]])
    got = tj.kernel(lambda m: np.linalg.inv(m) + np.linalg.det(m))(ints)
    assert got.dtype == np.float64
    assert_close(got, np.linalg.inv(ints) + np.linalg.det(ints), rtol=1e-12)


def test_numpys_linalg_error_for_singular_and_non_positive_definite_input(device):
    dt = float_dtype(device)
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        quiet(tj.kernel(lambda a: np.linalg.inv(a) * 2), np.ones((3, 3), dt), device=device)
    with pytest.raises(np.linalg.LinAlgError):
        quiet(tj.kernel(lambda a: np.linalg.cholesky(a - 10)), np.eye(3, dtype=dt), device=device)


def test_no_warning_on_numba_and_one_on_a_gpu_api_device_for_what_runs_there(rng):
    def solve(a, b):
        return np.linalg.solve(a, b)

    def householder(a, b):
        return np.linalg.qr(a, mode="raw")[1] * b   # (LAPACK's own layout of the reflections)
    a, b = spd(rng, 4, np.float32), np.ones(4, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", tj.FallbackWarning)
        tj.kernel(solve)(a, b, device="numba")
        tj.kernel(householder)(a, b, device="numba")
    if "opencl" not in {d.name for d in tj.devices() if d.available}:
        pytest.skip("opencl is not available here")
    with warnings.catch_warnings():  # (a generated kernel there: test_linalg_generated.py)
        warnings.simplefilter("error", tj.FallbackWarning)
        tj.kernel(solve)(a, b, device="opencl")
    with pytest.warns(tj.FallbackWarning, match=r"test_linalg_host.py:\d+: np.linalg.qr runs on the host .* on "
                                                r"opencl its values were copied"):
        tj.kernel(householder)(a, b, device="opencl")


def test_the_kernels_around_it_fuse_and_the_call_is_explained(rng):
    def whiten(x):
        c = (x - x.mean(axis=0)).T @ (x - x.mean(axis=0)) / x.shape[0]
        L = np.linalg.cholesky(c + 1e-3 * np.eye(x.shape[1]))
        return np.linalg.solve(L, (x - x.mean(axis=0)).T).T
    x = rng.standard_normal((50, 4))
    kernel = tj.kernel(whiten)
    assert_close(kernel(x), whiten(x), rtol=1e-9, atol=1e-11)
    text = kernel.explain(x)
    assert "np.linalg.cholesky" in text and "np.linalg.solve" in text, text
