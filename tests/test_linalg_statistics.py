"""np.outer, np.linalg.norm, np.cov and np.corrcoef inside kernels, against NumPy: values and dtypes."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from reference import assert_close, run_kernel


def norms(x, v):
    return (np.linalg.norm(x), np.linalg.norm(x, axis=1), np.linalg.norm(x, ord=1, axis=0, keepdims=True),
            np.linalg.norm(x, np.inf), np.linalg.norm(x, "fro", keepdims=True), np.linalg.norm(x, -1),
            np.linalg.norm(v, 3), np.linalg.norm(v, 0), np.linalg.norm(v, -np.inf), np.outer(v, x[0]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_norms_and_outer_match_numpy(dtype, device, rng):
    x = rng.normal(size=(5, 7)).astype(dtype)
    v = rng.normal(size=(6,)).astype(dtype)
    assert_close(run_kernel(tj.kernel(norms), x, v, device=device), norms(x, v))


def test_norm_of_integers_is_float64_like_numpy(device, rng):
    i = rng.integers(-5, 5, (4, 3))
    assert_close(run_kernel(tj.kernel(lambda i: np.linalg.norm(i, axis=0)), i, device=device),
                 np.linalg.norm(i, axis=0))


def test_the_spectral_norm_of_a_matrix_is_its_largest_singular_value():
    x = np.arange(9.0).reshape(3, 3)
    assert_close(tj.kernel(lambda x: np.linalg.norm(x, 2))(x), np.linalg.norm(x, 2), rtol=1e-12)


def statistics(x):
    return (np.cov(x), np.cov(x, rowvar=False), np.cov(x, bias=True), np.cov(x[0]), np.cov(x, ddof=0),
            np.corrcoef(x), np.corrcoef(x, rowvar=False), np.corrcoef(x[1]))


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_cov_and_corrcoef_match_numpy_in_float64(dtype, device, rng):
    """np.cov computes in float64 at least, whatever the input (float32 data gives float64)."""
    x = (rng.normal(size=(4, 9)) * 5).astype(dtype)
    assert_close(run_kernel(tj.kernel(statistics), x, device=device), statistics(x))


def test_cov_and_corrcoef_of_two_variables_match_numpy(device, rng):
    x, y = rng.normal(size=8).astype(np.float32), rng.normal(size=8)

    def body(x, y):
        return np.cov(x, y), np.corrcoef(x, y)[0, 1], np.cov(x.reshape(4, 2), y.reshape(4, 2), rowvar=False)

    assert_close(run_kernel(tj.kernel(body), x, y, device=device), body(x, y))


def test_cov_with_weights_is_refused_with_the_alternative():
    with pytest.raises(tj.UnsupportedError, match="np.average"):
        tj.kernel(lambda x: np.cov(x, fweights=x))(np.ones(4))
