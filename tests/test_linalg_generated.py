"""np.linalg as generated kernels (issue 48 item 3, the GPU-API devices' part): on opencl, webgpu, cuda and metal,
where no LAPACK runs on the device, solve inv det slogdet cholesky qr (linalg_solvers.py), eigh eigvalsh svd
(linalg_jacobi.py) and pinv matrix_rank cond norm(2, -2, 'nuc') from them are kernels of their own, compiled loops
over the rows; matrix_power and multi_dot are matrix products on every device. Against NumPy on values and dtypes,
stacked matrices, pivoting, NumPy's LinAlgError, and no copy to the host (no warning)."""
import warnings

import numpy as np
import pytest

import tracejit as tj
from reference import assert_close
from tracejit.numpy import linalg_solvers

# (what emulated metal would check is the SIMT lowering emulated cuda runs, and its float32 path is webgpu's)
pytestmark = pytest.mark.slow_emulated("metal")


def float_dtype(device):
    return np.float32 if device in ("webgpu", "metal") else np.float64


def tolerance(dt, scale=1.0):
    return dict(rtol=2e-4 * scale, atol=2e-5 * scale) if dt == np.float32 else dict(rtol=1e-10 * scale, atol=1e-12 * scale)


def well_conditioned(rng, shape, dt):
    n = shape[-1]
    return (rng.standard_normal(shape) + n * np.eye(n)).astype(dt)


def spd(rng, n, dt, batch=()):
    a = rng.standard_normal((*batch, n, n))
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(dt)


def no_host_copies(kernel, *args, device):
    """The call, failing where any np.linalg call ran on the host (a FallbackWarning says so)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", tj.FallbackWarning)
        return kernel(*args, device=device)


@pytest.mark.parametrize("n", [1, 5, 33])
def test_solve_inv_det_slogdet_match_numpy_stacked(device, rng, n):
    dt = float_dtype(device)

    def program(a, b):
        sign, logabs = np.linalg.slogdet(a)
        return np.linalg.solve(a, b), np.linalg.inv(a), np.linalg.det(a), sign, logabs

    a, b = well_conditioned(rng, (2, 3, n, n), dt), rng.standard_normal((2, 3, n, 2)).astype(dt)
    got = no_host_copies(tj.kernel(program), a, b, device=device)
    expected = program(a, b)
    scale = 10.0 if n > 8 else 1.0
    for g, e in zip(got, expected):
        assert_close(np.asarray(g), e, **tolerance(dt, scale))


def test_solve_with_a_vector_and_broadcast_stacks(device, rng):
    dt = float_dtype(device)

    def program(a, v, B):
        return np.linalg.solve(a[0], v), np.linalg.solve(a, B)

    a, v, B = well_conditioned(rng, (3, 4, 4), dt), rng.standard_normal(4).astype(dt), rng.standard_normal((4, 3)).astype(dt)
    got = no_host_copies(tj.kernel(program), a, v, B, device=device)
    for g, e in zip(got, program(a, v, B)):
        assert_close(np.asarray(g), e, **tolerance(dt))


def test_pivoting_zero_diagonal_and_the_sign_of_the_determinant(device):
    dt = float_dtype(device)
    a = np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]], dt)  # a cyclic permutation: every pivot needs a swap
    b = np.array([[0.0, 2.0], [1e-3, 1.0]], dt)  # a tiny first pivot: partial pivoting swaps the rows

    def program(a, b):
        return np.linalg.det(a), np.linalg.inv(a), np.linalg.solve(b, b[:, 0]), np.linalg.det(b)

    got = no_host_copies(tj.kernel(program), a, b, device=device)
    for g, e in zip(got, program(a, b)):
        assert_close(np.asarray(g), e, **tolerance(dt))


def test_singular_matrices_raise_numpys_linalg_error_and_det_is_zero(device):
    dt = float_dtype(device)
    singular = np.array([[1, 2], [2, 4]], dt)
    stack = np.stack([np.eye(2, dtype=dt), singular])  # one singular matrix in a stack: NumPy raises
    for f in (lambda a: np.linalg.inv(a), lambda a: np.linalg.solve(a, a[..., 0])):
        with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
            no_host_copies(tj.kernel(f), stack, device=device)
    got = no_host_copies(tj.kernel(lambda a: (np.linalg.det(a), *np.linalg.slogdet(a))), stack, device=device)
    for g, e in zip(got, (np.linalg.det(stack), *np.linalg.slogdet(stack))):
        assert_close(np.asarray(g), e)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_reads_the_lower_triangle_and_raises_for_non_positive_definite(device, rng, upper):
    dt = float_dtype(device)
    a = spd(rng, 6, dt, (2,))
    messy = a + np.triu(np.full((6, 6), 7.0, dt), 1).swapaxes(0, upper)  # (the other triangle is not read)
    got = no_host_copies(tj.kernel(lambda m: np.linalg.cholesky(m, upper=upper)), messy, device=device)
    assert_close(np.asarray(got), np.linalg.cholesky(messy, upper=upper), **tolerance(dt))
    for bad in (np.diag(np.array([1, -1, 1], dt)), np.array([[1, 2], [2, 1]], dt)):
        with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
            no_host_copies(tj.kernel(lambda m: np.linalg.cholesky(m)), bad, device=device)
    nan = np.array([[np.nan, 0], [0, 1]], dt)  # (NumPy's LAPACK carries NaN on)
    assert_close(np.asarray(no_host_copies(tj.kernel(lambda m: np.linalg.cholesky(m)), nan, device=device)),
                 np.linalg.cholesky(nan))


@pytest.mark.parametrize("shape", [(7, 3), (3, 6), (2, 4, 4)])
def test_qr_matches_numpys_signs_in_every_mode(device, rng, shape):
    dt = float_dtype(device)
    a = rng.standard_normal(shape).astype(dt)

    def program(a):
        q, r = np.linalg.qr(a)
        qc, rc = np.linalg.qr(a, mode="complete")
        return q, r, qc, rc, np.linalg.qr(a, mode="r")

    got = no_host_copies(tj.kernel(program), a, device=device)
    for g, e in zip(got, program(a)):
        assert_close(np.asarray(g), e, **tolerance(dt, 10))


def test_qr_of_columns_already_zero_below_the_diagonal(device):
    dt = float_dtype(device)
    a = np.triu(np.arange(1, 17, dtype=dt).reshape(4, 4))  # (geqrf leaves such a column as it is: tau 0)
    a[1, 1] = -a[1, 1]
    got = no_host_copies(tj.kernel(lambda m: tuple(np.linalg.qr(m))), a, device=device)
    assert_close(tuple(np.asarray(g) for g in got), tuple(np.linalg.qr(a)), **tolerance(dt))


def test_matrix_power_on_every_device(device, rng):
    dt = float_dtype(device)
    a = well_conditioned(rng, (2, 4, 4), dt) / 4
    powers = (0, 1, 2, 3, 6, -1, -3)
    kernel = tj.kernel(lambda m: tuple(np.linalg.matrix_power(m, p) for p in powers))
    for got, p in zip(no_host_copies(kernel, a, device=device), powers):
        assert_close(np.asarray(got), np.linalg.matrix_power(a, p), **tolerance(dt, 10))
    ints = np.array([[1, 2], [3, 4]], np.int32)  # integers stay integers
    kernel = tj.kernel(lambda m: tuple(np.linalg.matrix_power(m, p) for p in powers if p >= 0))
    for got, p in zip(no_host_copies(kernel, ints, device=device), (0, 1, 2, 3, 6)):
        assert_close(np.asarray(got), np.linalg.matrix_power(ints, p))


def test_multi_dot_in_numpys_order_with_vector_ends(device, rng):
    dt = float_dtype(device)
    arrays = [rng.standard_normal(s).astype(dt) for s in [(10,), (10, 3), (3, 20), (20, 2), (2, 7), (7,)]]
    for chain in (arrays[1:5], arrays[:3], arrays[1:], arrays[:4], arrays):
        kernel = tj.kernel(lambda *xs: np.linalg.multi_dot(list(xs)))
        assert_close(np.asarray(no_host_copies(kernel, *chain, device=device)), np.linalg.multi_dot(chain), **tolerance(dt, 10))


def test_tensorsolve_and_tensorinv(device, rng):
    dt = float_dtype(device)
    a = (rng.standard_normal((6, 2, 3)) + 3 * np.eye(6).reshape(6, 2, 3)).astype(dt)
    b = rng.standard_normal(6).astype(dt)
    t = (np.eye(6) * 2 + 0.1 * rng.standard_normal((6, 6))).reshape(2, 3, 6).astype(dt)

    def program(a, b, t):
        return np.linalg.tensorsolve(a, b), np.linalg.tensorinv(t, ind=2), np.linalg.tensorsolve(
            np.transpose(a, (1, 2, 0)), b, axes=(0, 1))

    got = no_host_copies(tj.kernel(program), a, b, t, device=device)
    for g, e in zip(got, program(a, b, t)):
        assert_close(np.asarray(g), e, **tolerance(dt, 10))


def test_cond_for_each_order(device, rng):
    dt = float_dtype(device)
    a = well_conditioned(rng, (2, 5, 5), dt)
    singular = np.array([[1, 2], [2, 4]], dt)
    for p in (1, -1, np.inf, -np.inf, "fro"):
        kernel = tj.kernel(lambda m: np.linalg.cond(m, p))
        assert_close(np.asarray(no_host_copies(kernel, a, device=device)), np.linalg.cond(a, p), **tolerance(dt, 10))
        with np.errstate(all="ignore"):
            expected = np.linalg.cond(singular, p)
        assert_close(np.asarray(no_host_copies(kernel, singular, device=device)), expected)


def test_integer_matrices_compute_in_float64(device):
    if device in ("webgpu", "metal"):
        pytest.skip("float64 results: not on this device")
    ints = np.array([[2, 1], [1, 3]])
    got = no_host_copies(tj.kernel(lambda m: (np.linalg.inv(m), np.linalg.det(m))), ints, device=device)
    for g, e in zip(got, (np.linalg.inv(ints), np.linalg.det(ints))):
        assert_close(np.asarray(g), e, rtol=1e-12)


def test_numpys_errors_for_shapes_and_dtypes_while_tracing():
    with pytest.raises(np.linalg.LinAlgError, match="square"):
        tj.kernel(lambda m: np.linalg.inv(m))(np.ones((2, 3)), device="opencl")
    with pytest.raises(np.linalg.LinAlgError, match="two-dimensional"):
        tj.kernel(lambda m: np.linalg.det(m))(np.ones(3), device="opencl")
    with pytest.raises(TypeError, match="float16"):
        tj.kernel(lambda m: np.linalg.inv(m))(np.eye(2, dtype=np.float16), device="opencl")


def test_a_time_step_loop_solving_a_system_each_step(device):
    dt = float_dtype(device)
    n = 16
    lap = (np.diag(np.full(n, -2.0)) + np.diag(np.ones(n - 1), 1) + np.diag(np.ones(n - 1), -1)).astype(dt)

    def implicit_heat(u, lap, steps):  # backward Euler: (I - nu L) u' = u, one solve per step
        A = np.eye(u.shape[0], dtype=u.dtype) - 0.4 * lap
        for _ in range(steps):
            u = np.linalg.solve(A, u)
        return u

    u = np.sin(np.linspace(0, np.pi, n)).astype(dt)
    got = no_host_copies(tj.kernel(implicit_heat), u, lap, 12, device=device)
    assert_close(np.asarray(got), implicit_heat(u, lap, 12), **tolerance(dt, 10))


def test_beyond_the_largest_size_lapack_runs_on_the_host(monkeypatch, rng):
    if "opencl" not in {d.name for d in tj.devices() if d.available}:
        pytest.skip("opencl is not available here")
    monkeypatch.setattr(linalg_solvers, "LARGEST", 4)
    a = well_conditioned(rng, (5, 5), np.float64)
    with pytest.warns(tj.FallbackWarning, match="np.linalg.inv runs on the host"):
        got = tj.kernel(lambda m: np.linalg.inv(m) * 2)(a, device="opencl")
    assert_close(np.asarray(got), np.linalg.inv(a) * 2, rtol=1e-12)


def test_eigh_and_svd_through_np_linalg_with_numpys_named_results(device, rng):
    dt = float_dtype(device)
    a = spd(rng, 6, dt, (2,))
    x = rng.standard_normal((2, 7, 4)).astype(dt)

    def program(a, x):
        e = np.linalg.eigh(a)
        u, s, vh = np.linalg.svd(x, full_matrices=False)
        return (e.eigenvalues, np.linalg.eigvalsh(a, UPLO="U"), np.abs(e.eigenvectors[..., 0, :]),
                np.linalg.svd(x).S, s, np.abs((u * s[..., None, :]) @ vh - x).max())

    got = no_host_copies(tj.kernel(program), a, x, device=device)
    expected = program(a, x)
    for g, e in zip(got[:-1], expected[:-1]):
        assert_close(np.asarray(g), e, **tolerance(dt, 100))
    assert float(np.asarray(got[-1])) < 100 * np.finfo(dt).eps * np.abs(x).max()


def test_pinv_matrix_rank_and_the_condition_number_from_singular_values(device, rng):
    dt = float_dtype(device)
    x = rng.standard_normal((2, 6, 4)).astype(dt)
    low_rank = (rng.standard_normal((5, 2)) @ rng.standard_normal((2, 5))).astype(dt)

    ranks = device not in ("webgpu", "metal")  # (matrix_rank's result is int64: not there)

    def program(x, low_rank):
        found = (np.linalg.pinv(x), np.linalg.pinv(low_rank, rtol=1e-5), np.linalg.cond(x[..., :4, :]),
                 np.linalg.cond(x[..., :4, :], -2))
        return found + ((np.linalg.matrix_rank(low_rank), np.linalg.matrix_rank(x)) if ranks else ())

    got = no_host_copies(tj.kernel(program), x, low_rank, device=device)
    for g, e in zip(got, program(x, low_rank)):
        assert_close(np.asarray(g), e, **tolerance(dt, 1000))


def test_beyond_the_jacobi_size_eigh_runs_on_the_host(monkeypatch, rng):
    if "opencl" not in {d.name for d in tj.devices() if d.available}:
        pytest.skip("opencl is not available here")
    from tracejit.numpy import linalg_jacobi
    monkeypatch.setattr(linalg_jacobi, "LARGEST", 4)
    a = spd(rng, 5, np.float64)
    with pytest.warns(tj.FallbackWarning, match="np.linalg.eigvalsh runs on the host"):
        got = tj.kernel(lambda m: np.linalg.eigvalsh(m) * 2)(a, device="opencl")
    assert_close(np.asarray(got), np.linalg.eigvalsh(a) * 2, rtol=1e-12)


@pytest.mark.parametrize("shape", [(30, 3), (4, 6)])
def test_lstsq_with_the_residuals_numpy_gives(device, rng, shape):
    dt = float_dtype(device)
    a = rng.standard_normal(shape).astype(dt)
    b = rng.standard_normal((shape[0], 2)).astype(dt)

    def program(a, b):
        x, residuals, rank, s = np.linalg.lstsq(a, b)
        y, one, _, _ = np.linalg.lstsq(a, b[:, 0])
        return x, residuals, rank, s, y, one

    got = no_host_copies(tj.kernel(program), a, b, device=device)
    expected = program(a, b)
    for g, e in zip(got, expected):
        g = np.asarray(g)
        assert g.shape == np.shape(e) and g.dtype == np.asarray(e).dtype
        assert_close(g, np.asarray(e), **tolerance(dt, 100))


def test_lstsq_of_a_rank_deficient_matrix_has_no_residuals(device, rng):
    dt = float_dtype(device)
    a = rng.standard_normal((20, 3)).astype(dt)
    a = np.concatenate([a, a[:, :1] * 2], axis=1)  # rank 3 of 4 columns
    b = rng.standard_normal(20).astype(dt)
    rcond = None if dt == np.float64 else 1e-5  # (float32 on webgpu and metal: computed in float32)
    got = no_host_copies(tj.kernel(lambda a, b: np.linalg.lstsq(a, b, rcond=rcond)), a, b, device=device)
    expected = np.linalg.lstsq(a, b, rcond=rcond)
    assert np.asarray(got[1]).shape == (0,) and int(np.asarray(got[2])) == 3 == expected[2]
    assert_close(np.asarray(got[0]), expected[0], **tolerance(dt, 100))
