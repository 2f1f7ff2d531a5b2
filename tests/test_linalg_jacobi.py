"""np.linalg.eigh, eigvalsh and svd by Jacobi's methods (tracejit/numpy/linalg_jacobi.py): on plain NumPy arrays
against NumPy's, values within 50 * eps * n * ||A|| and vectors through properties that do not depend on their
signs (A V = V diag(w), V^T V = I, U S Vh = A, U^T U = I); then traced by tracejit and run on numba, opencl and
webgpu."""
import logging

import numpy as np
import pytest

import tracejit as tj
from conftest import AVAILABLE_DEVICES
from tracejit.numpy import linalg_jacobi as J

DTYPES = [np.float32, np.float64]
SIDES = [1, 2, 3, 5, 8, 33, 100]


def bound(a, dt) -> float:
    """50 * eps * n * ||A||_F: what the values may differ from NumPy's by, and the residuals may be."""
    a = np.asarray(a, dtype=np.float64)
    n = max(a.shape[-2:]) if a.size else 1
    largest = np.abs(a).max(initial=0.0)
    norm = largest * np.linalg.norm(a.reshape(-1) / largest) if largest > 0 else 0.0  # (no under- or overflow)
    return 50 * np.finfo(dt).eps * n * max(float(norm), 1e-300)


def symmetric(rng, shape, dt):
    x = rng.standard_normal(shape)
    return (x + np.swapaxes(x, -1, -2)).astype(dt)


def assert_orthonormal_columns(q, dt):
    q = np.asarray(q, dtype=np.float64)
    k = q.shape[-1]
    gram = np.swapaxes(q, -1, -2) @ q
    assert np.abs(gram - np.eye(k)).max(initial=0.0) <= 50 * np.finfo(dt).eps * max(q.shape[-2], 1)


def assert_eigh(a, w, v, dt, uplo="L"):
    """(w, v) of eigh(a, uplo) against NumPy's."""
    w_np, v_np = np.linalg.eigh(a, uplo)
    assert w.dtype == w_np.dtype == dt and v.dtype == v_np.dtype == dt
    assert w.shape == w_np.shape and v.shape == v_np.shape
    a64 = np.asarray(a, np.float64)
    if uplo == "U":
        a64 = np.swapaxes(a64, -1, -2)
    a64 = np.tril(a64) + np.swapaxes(np.tril(a64, -1), -1, -2)  # the matrix NumPy reads
    tolerance = bound(a64, dt)
    w64, v64 = w.astype(np.float64), v.astype(np.float64)
    assert np.abs(w64 - np.linalg.eigvalsh(a64)).max(initial=0.0) <= tolerance
    assert np.all(np.diff(w, axis=-1) >= 0)
    assert np.abs(a64 @ v64 - v64 * w64[..., None, :]).max(initial=0.0) <= tolerance
    assert_orthonormal_columns(v, dt)


def assert_svd(a, u, s, vh, dt, full_matrices=True):
    """(u, s, vh) of svd(a, full_matrices) against NumPy's."""
    u_np, s_np, vh_np = np.linalg.svd(a, full_matrices=full_matrices)
    assert (u.dtype, s.dtype, vh.dtype) == (u_np.dtype, s_np.dtype, vh_np.dtype) == (dt, dt, dt)
    assert (u.shape, s.shape, vh.shape) == (u_np.shape, s_np.shape, vh_np.shape)
    tolerance = bound(a, dt)
    s64 = s.astype(np.float64)
    assert np.abs(s64 - np.linalg.svd(a.astype(np.float64), compute_uv=False)).max(initial=0.0) <= tolerance
    assert np.all(np.diff(s, axis=-1) <= 0) and np.all(s >= 0)
    k = s.shape[-1]
    product = (u[..., :, :k].astype(np.float64) * s64[..., None, :]) @ vh[..., :k, :].astype(np.float64)
    assert np.abs(product - a).max(initial=0.0) <= tolerance
    assert_orthonormal_columns(u, dt)
    assert_orthonormal_columns(np.swapaxes(vh, -1, -2), dt)


# --- eigh and eigvalsh on NumPy arrays ------------------------------------------------------------------------------


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("n", SIDES)
def test_eigh_matches_numpy(rng, n, dt):
    a = symmetric(rng, (n, n), dt)
    w, v = J.eigh(a)
    assert_eigh(a, w, v, dt)
    w_only = J.eigvalsh(a)
    assert w_only.dtype == dt and w_only.shape == (n,)
    assert np.abs(w_only.astype(np.float64) - np.linalg.eigvalsh(a.astype(np.float64))).max() <= bound(a, dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("n", [5, 33])
def test_eigh_vectors_are_numpys_up_to_sign_where_the_values_are_apart(rng, n, dt):
    a = symmetric(rng, (n, n), dt)
    w, v = J.eigh(a)
    w_np, v_np = np.linalg.eigh(a.astype(np.float64))
    gaps = np.minimum(np.abs(np.diff(w_np, prepend=-np.inf)), np.abs(np.diff(w_np, append=np.inf)))
    norm = np.linalg.norm(a.astype(np.float64), 2)
    apart = gaps > 1e-3 * norm
    assert apart.sum() >= n // 2
    overlap = np.abs(np.sum(v.astype(np.float64) * v_np, axis=0))
    assert np.all(np.abs(overlap - 1)[apart] <= 50 * n * np.finfo(dt).eps * norm / gaps[apart])


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("n", [4, 5])
def test_eigh_of_stacked_matrices(rng, n, dt):
    a = symmetric(rng, (2, 3, n, n), dt)
    w, v = J.eigh(a)
    assert_eigh(a, w, v, dt)
    assert np.array_equal(J.eigvalsh(a).shape, (2, 3, n))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_reads_only_the_uplo_triangle(rng, uplo, dt):
    a = rng.standard_normal((2, 7, 7)).astype(dt)  # not symmetric: the other triangle must be ignored
    w, v = J.eigh(a, UPLO=uplo)
    assert_eigh(a, w, v, dt, uplo)
    w_np = np.linalg.eigvalsh(a.astype(np.float64), UPLO=uplo)
    assert np.abs(J.eigvalsh(a, UPLO=uplo) - w_np).max() <= bound(a, dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize(
    "a",
    [np.eye(6), np.diag([2.0, -1.0, 2.0, 3.0, -1.0, 2.0, 0.0]), np.zeros((5, 5)), np.ones((4, 4)), np.eye(3) * 1e-30],
    ids=["identity", "diagonal-with-duplicates", "zero", "rank-one", "tiny"],
)
def test_eigh_of_repeated_eigenvalues(a, dt):
    a = a.astype(dt)
    w, v = J.eigh(a)
    assert_eigh(a, w, v, dt)
    if not a.any():
        assert np.array_equal(w, np.zeros(a.shape[0], dt))


def test_eigh_of_a_badly_scaled_matrix(rng):
    d = np.diag(10.0 ** rng.uniform(-150, 150, 6))
    q, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    a = q @ d @ q.T
    a = (a + a.T) / 2
    w, v = J.eigh(a)
    assert_eigh(a, w, v, np.float64)


def test_eigh_arguments_as_numpy():
    assert J.eigvalsh(np.array([[2, 1], [1, 2]])).dtype == np.float64  # integers: float64
    assert np.allclose(J.eigvalsh([[2.0, 1.0], [1.0, 2.0]]), [1.0, 3.0])
    w, v = J.eigh(np.zeros((3, 0, 0)))
    assert w.shape == (3, 0) and v.shape == (3, 0, 0)
    with pytest.raises(np.linalg.LinAlgError, match="must be square"):
        J.eigh(np.ones((3, 4)))
    with pytest.raises(np.linalg.LinAlgError, match="at least two-dimensional"):
        J.eigvalsh(np.ones(3))
    with pytest.raises(ValueError, match="UPLO"):
        J.eigh(np.eye(2), UPLO="X")
    with pytest.raises(TypeError):
        J.eigh(np.eye(2, dtype=np.complex128))


# --- svd on NumPy arrays ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("full_matrices", [True, False])
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (3, 3), (5, 5), (8, 8), (33, 33), (100, 100), (7, 3), (3, 7),
                                   (40, 33), (33, 40), (1, 6), (6, 1)])
def test_svd_matches_numpy(rng, shape, full_matrices, dt):
    a = rng.standard_normal(shape).astype(dt)
    u, s, vh = J.svd(a, full_matrices=full_matrices)
    assert_svd(a, u, s, vh, dt, full_matrices)
    s_only = J.svd(a, compute_uv=False)
    assert s_only.dtype == dt and s_only.shape == (min(shape),)
    s_np = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    assert np.abs(s_only.astype(np.float64) - s_np).max() <= bound(a, dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("full_matrices", [True, False])
@pytest.mark.parametrize("shape", [(4, 4), (6, 3), (3, 6), (5, 8)])
def test_svd_of_stacked_matrices(rng, shape, full_matrices, dt):
    a = rng.standard_normal((2, 3, *shape)).astype(dt)
    u, s, vh = J.svd(a, full_matrices=full_matrices)
    assert_svd(a, u, s, vh, dt, full_matrices)


def rank_deficient(rng, m, n, rank, dt):
    return (rng.standard_normal((m, rank)) @ rng.standard_normal((rank, n))).astype(dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("full_matrices", [True, False])
@pytest.mark.parametrize("case", ["rank-2-tall", "rank-2-wide", "rank-3-square", "zero-rows", "zero-columns", "zero",
                                  "rank-one-stack"])
def test_svd_of_rank_deficient_matrices(rng, case, full_matrices, dt):
    if case == "rank-2-tall":
        a = rank_deficient(rng, 9, 6, 2, dt)
    elif case == "rank-2-wide":
        a = rank_deficient(rng, 5, 11, 2, dt)
    elif case == "rank-3-square":
        a = rank_deficient(rng, 10, 10, 3, dt)
    elif case == "zero-rows":
        a = rng.standard_normal((7, 4)).astype(dt)
        a[[1, 2, 5, 6]] = 0  # rank 3, s exactly 0 where NumPy's is
    elif case == "zero-columns":
        a = rng.standard_normal((5, 6)).astype(dt)
        a[:, [0, 2, 3]] = 0
    elif case == "zero":
        a = np.zeros((6, 4), dt)
    else:
        a = np.ones((2, 3, 5, 4), dt) * np.arange(1, 5, dtype=dt)
    u, s, vh = J.svd(a, full_matrices=full_matrices)
    assert_svd(a, u, s, vh, dt, full_matrices)


@pytest.mark.parametrize("dt", DTYPES)
def test_svd_hermitian(rng, dt):
    a = symmetric(rng, (2, 6, 6), dt)
    a[1] = a[1] @ a[1]  # positive semi-definite
    a[1, :, 0] = a[1, 0, :] = 0  # and singular
    u, s, vh = J.svd(a, hermitian=True)
    assert_svd(a, u, s, vh, dt)
    s_np = np.linalg.svd(a, hermitian=True, compute_uv=False)
    s_only = J.svd(a, compute_uv=False, hermitian=True)
    assert s_only.dtype == s_np.dtype == dt
    assert np.abs(s_only.astype(np.float64) - s_np).max() <= bound(a, dt)


@pytest.mark.parametrize("scale", [1e-200, 1e200])
def test_svd_of_huge_and_tiny_matrices(rng, scale):
    a = rng.standard_normal((6, 4)) * scale  # (scaled to 1 first: the squares neither over- nor underflow)
    u, s, vh = J.svd(a)
    assert_svd(a, u, s, vh, np.float64)


def test_svd_arguments_as_numpy():
    assert J.svd(np.array([[3, 0], [0, 4]]), compute_uv=False).tolist() == [4.0, 3.0]
    u, s, vh = J.svd(np.zeros((2, 3, 0)))
    assert (u.shape, s.shape, vh.shape) == ((2, 3, 3), (2, 0), (2, 0, 0))
    u, s, vh = J.svd(np.zeros((3, 0)), full_matrices=False)
    assert (u.shape, s.shape, vh.shape) == ((3, 0), (0,), (0, 0))
    with pytest.raises(np.linalg.LinAlgError, match="at least two-dimensional"):
        J.svd(np.ones(3))
    with pytest.raises(np.linalg.LinAlgError, match="must be square"):
        J.svd(np.ones((2, 3)), hermitian=True)


def test_largest_is_a_side():
    assert isinstance(J.LARGEST, int) and J.LARGEST >= 100


# --- traced by tracejit -----------------------------------------------------------------------------------------------

DEVICES = [pytest.param(d, marks=pytest.mark.skipif(d not in AVAILABLE_DEVICES, reason=f"no {d} device here"))
           for d in ("numba", "opencl")]


@pytest.mark.parametrize("device", DEVICES)
def test_traced_eigh_runs_on_the_device_with_its_loops_compiled(rng, device, caplog):
    a = symmetric(rng, (2, 7, 7), np.float64)
    caplog.set_level(logging.DEBUG, logger="tracejit.compile")
    w, v = tj.kernel(lambda a: J.eigh(a))(a, device=device)
    w, v = np.asarray(w), np.asarray(v)
    assert_eigh(a, w, v, np.float64)
    assert "linalg_jacobi.eigh round: `for` compiled as a loop" in caplog.text
    assert "linalg_jacobi.eigh sweep: `while` compiled as a loop" in caplog.text
    assert "step by step" not in caplog.text


@pytest.mark.parametrize("device", DEVICES)
def test_traced_svd_runs_on_the_device(rng, device):
    a = rank_deficient(rng, 6, 9, 3, np.float32)  # wide, rank 3: u is completed
    u, s, vh = (np.asarray(x) for x in tj.kernel(lambda a: J.svd(a))(a, device=device))
    assert_svd(a, u, s, vh, np.float32)
    b = rng.standard_normal((2, 8, 5))
    s = np.asarray(tj.kernel(lambda b: J.svd(b, compute_uv=False))(b, device=device))
    assert s.dtype == np.float64
    assert np.abs(s - np.linalg.svd(b, compute_uv=False)).max() <= bound(b, np.float64)


@pytest.mark.skipif("webgpu" not in AVAILABLE_DEVICES, reason="no webgpu device here")
def test_traced_eigh_and_svd_run_on_webgpu_in_float32(rng):
    a = symmetric(rng, (5, 5), np.float32)
    w, v = (np.asarray(x) for x in tj.kernel(lambda a: J.eigh(a))(a, device="webgpu"))
    assert_eigh(a, w, v, np.float32)
    b = rng.standard_normal((7, 4)).astype(np.float32)
    u, s, vh = (np.asarray(x) for x in tj.kernel(lambda b: J.svd(b, full_matrices=False))(b, device="webgpu"))
    assert_svd(b, u, s, vh, np.float32, full_matrices=False)
