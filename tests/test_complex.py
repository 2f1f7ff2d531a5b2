"""complex64 and complex128 in kernels (issue 48 item 1), against NumPy on values and dtypes on every device:
arguments and results, NumPy's promotion (Python complex weak, as NEP 50), arithmetic with NumPy's infinities and
NaNs, writes into complex arguments and their .real/.imag views, reductions and products, lexicographic order,
casts, arrays made in the kernel, complex tj.Arrays passed back in, and what is refused (complex128 where a device
has no float64). The elementary functions' accuracy: tests/test_complex_math.py and the ufunc table below."""
import warnings

import numpy as np
import pytest

import tracejit as tj
from reference import assert_close


def complex_dtype(device):
    return np.complex64 if device in ("webgpu", "metal") else np.complex128


def tolerance(dtype):
    return 2e-5 if np.dtype(dtype) in (np.complex64, np.float32) else 1e-12


def values(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def check(body, *args, device, rtol=None):
    """tracejit's results of body(*args) against NumPy's: dtypes, shapes, values (complex results come back as
    complex NumPy arrays on the CPU devices, complex tj.Arrays elsewhere)."""
    expected = body(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])   # (each its own copies: a
    got = tj.kernel(body)(*[a.copy() if isinstance(a, np.ndarray) else a for a in args], device=device)  # body may
    # assign into its arguments)
    if not isinstance(expected, tuple):
        got, expected = (got,), (expected,)
    for g, e in zip(got, expected):
        g, e = np.asarray(g), np.asarray(e)
        assert g.dtype == e.dtype, (g.dtype, e.dtype)
        assert g.shape == e.shape, (g.shape, e.shape)
        tol = rtol if rtol is not None else tolerance(e.dtype) if e.dtype.kind in "fc" else 0
        if e.dtype.kind == "c":
            assert_close(g.real, e.real, rtol=tol, atol=tol)
            assert_close(g.imag, e.imag, rtol=tol, atol=tol)
        else:
            assert_close(g, e, rtol=tol, atol=tol)


def arithmetic(z, w):
    return z + w, z - w, z * w, z / w, -z, z * 2.5, 3 - z, z ** 2, z ** 3, z ** -2, 1 / z, z * 1j, z.conj()


def parts(z, w):
    return z.real, z.imag, np.real(w), np.imag(w), np.abs(z), np.angle(z), np.angle(w, deg=True), np.conj(z) * z


def products(z, w):
    m = z.reshape(4, 6)
    return (m @ m.T, np.dot(z, w), np.vdot(z, w), np.einsum("ij,kj->ik", m, m), np.outer(z[:3], w[:2]),
            np.inner(z, w), np.kron(z[:2], w[:3]), m @ m.real.T, np.convolve(z[:5], w[:3]), np.correlate(z, w[:4]))


def reductions(z, w):
    m = z.reshape(4, 6)
    return (z.sum(), m.sum(axis=0), np.mean(m, axis=1), np.prod(m, axis=1), np.prod(z[:7]), np.cumsum(m, axis=1),
            np.trace(m[:, :4]), np.var(m, axis=0), np.std(z), np.diff(z))


def structure(z, w):
    m = z.reshape(4, 6)
    return (np.concatenate([z, w]), np.stack([z, w], axis=1), m.T[1:3], np.flip(m, 0), np.roll(z, 3),
            np.pad(m, 1), np.where(z.real > 0, z, 0), np.where(w.imag > 0, 1j, w), m[:, ::2], z[[0, 5, 3]],
            np.take(z, [1, 1, 2]), np.tile(w[:3], 2), np.repeat(z[:3], 2), np.triu(m), np.diagonal(m))


def order(z, w):
    m = z.reshape(4, 6)
    ties = np.concatenate([z[:4], z[:4].real + 0j, z[:2]])
    return (np.sort(m, axis=1), np.sort(ties), np.argsort(ties), np.argmax(m, axis=1), np.argmin(z), np.max(m, axis=0),
            np.min(z), z == w, z != z[0], z < w, z >= w, np.maximum(z, w), np.minimum(z, w[0]))


def predicates(z, w):
    return (np.isnan(z), np.isinf(w), np.isfinite(z), np.isclose(z, w + 1e-9), np.iscomplexobj(z), np.iscomplex(w),
            np.isreal(z.real + 0j), np.count_nonzero(z), np.any(z), np.all(w), np.logical_and(z, w), z.astype(bool))


@pytest.mark.parametrize("body", [arithmetic, parts, products, reductions, structure, order, predicates])
def test_complex_programs_match_numpy(device, body):
    dt = complex_dtype(device)
    if body in (order, reductions, predicates) and device == "webgpu":
        pytest.skip("argsort, argmax and np.count_nonzero give int64, which webgpu cannot hold")
    check(body, values(24, dt), values(24, dt, seed=1), device=device)


def test_special_values_follow_numpy(device):
    """Infinities and NaNs come out of the product and the quotient as NumPy's (the full product, Smith's
    quotient with NumPy's branches: the same values bit for bit)."""
    dt = complex_dtype(device)
    special = [0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan]
    grid = np.array([complex(a, b) for a in special for b in special], dt)
    z, w = np.repeat(grid, len(grid)), np.tile(grid, len(grid))

    def body(z, w):
        return z * w, z / w, z + w, z == w, z * 2.0, np.maximum(z, w), np.fmin(z, w), z < w

    with np.errstate(all="ignore"):
        expected = body(z, w)
    got = tj.kernel(body)(z, w, device=device)
    for g, e in zip(got, expected):
        g = np.asarray(g)
        assert g.dtype == e.dtype
        if e.dtype.kind == "c":
            for gp, ep in ((g.real, e.real), (g.imag, e.imag)):
                np.testing.assert_array_equal(np.isnan(gp), np.isnan(ep))
                both = ~np.isnan(ep)
                # (the numba device may fuse a product into an FMA, which NumPy's scalar quotient does not:
                # where the terms cancel, the last bits differ)
                np.testing.assert_allclose(gp[both], ep[both], rtol=tolerance(dt), atol=4 * np.finfo(gp.dtype).eps)
        else:
            np.testing.assert_array_equal(g, e)


def test_promotion_follows_numpy(device):
    """NumPy's result dtypes of mixes: float32 * 1j is complex64, int8 + 1j complex128, a Python complex argument is
    weak; complex64 with float64 is complex128 (not on webgpu or metal)."""
    x32 = np.linspace(-1, 1, 8, dtype=np.float32)
    z64 = values(8, np.complex64)
    check(lambda x: x * 1j, x32, device=device)
    check(lambda z, x: z * x + 2, z64, x32, device=device)
    check(lambda z, c: z * c, z64, np.complex64(2 - 1j), device=device)
    check(lambda z: z.astype(np.complex64) + np.float32(1.5), z64, device=device)
    check(lambda z, c: z * c, z64, 0.5 + 2j, device=device)  # (weak: complex64, on webgpu and metal too)
    if device in ("webgpu", "metal"):
        return
    check(lambda x: x + 1j, np.arange(5, dtype=np.int8), device=device)
    check(lambda z, x: z + x, z64, np.linspace(0, 1, 8), device=device)
    check(lambda x: np.exp(1j * x), np.linspace(0, 3, 8), device=device)
    check(lambda x: x.astype(complex) * 2, np.arange(4, dtype=np.int32), device=device)


def test_assignment_writes_the_callers_complex_array(device):
    dt = complex_dtype(device)

    def update(z, w):
        z[1] = 5 + 2j
        z.imag[0] = -1.0
        z[2:4] *= w[:2]
        z.real[4:] += 1.0
        z += w.conj() * 0.5

    z, w = values(8, dt), values(8, dt, seed=2)
    expected = z.copy()
    update(expected, w)
    tj.kernel(update)(z, w, device=device)
    assert_close(z.real, expected.real, rtol=tolerance(dt), atol=tolerance(dt))
    assert_close(z.imag, expected.imag, rtol=tolerance(dt), atol=tolerance(dt))


def test_arrays_made_in_the_kernel(device):
    dt = complex_dtype(device)
    real = np.float32 if dt == np.complex64 else np.float64

    def made(z):
        out = np.zeros(z.shape, dtype=z.dtype)
        out[::2] = z[::2] * 2
        full = np.full(3, z[0])
        ones = np.ones_like(z)
        stacked = np.array([z[0], z[1] + 1])
        return out, full, ones, stacked, np.zeros_like(z.real, dtype=z.dtype) + z

    check(made, values(6, dt), device=device)
    check(lambda x: np.full(x.shape, real(1.0) + x * 1j, dtype=dt), np.linspace(0, 1, 4).astype(real), device=device)

    def sized(z, n):   # shapes from a Python-int argument (the plan specialised on it, as for real arrays)
        return np.zeros(n, dt) + z[0], np.ones((n, 2), dt), np.full(n, z[1])

    check(sized, values(6, dt), 4, device=device)


def test_casts_and_complex_warning(device):
    dt = complex_dtype(device)
    z = values(5, dt)
    f = tj.kernel(lambda z: z.astype(np.float32))
    with pytest.warns(np.exceptions.ComplexWarning):
        got = f(z, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        assert_close(np.asarray(got), z.astype(np.float32))
    check(lambda z: z.astype(np.complex64), z, device=device)


def test_complex_results_pass_back_in_and_out(device):
    """A complex result is a complex tj.Array on a device with its own memory: np.asarray reads it, another kernel
    takes it as it is; out= writes a caller's complex array."""
    dt = complex_dtype(device)
    z = values(6, dt)
    square = tj.kernel(lambda z: z * z)
    r = square(square(z, device=device), device=device)
    r = np.asarray(r)
    assert r.dtype == dt
    expected = (z * z) * (z * z)
    assert_close(r.real, expected.real, rtol=tolerance(dt), atol=tolerance(dt))
    assert_close(r.imag, expected.imag, rtol=tolerance(dt), atol=tolerance(dt))
    out = np.zeros(6, dt)
    assert square(z, device=device, out=out) is out
    assert_close(out.real, (z * z).real, rtol=tolerance(dt), atol=tolerance(dt))
    assert_close(out.imag, (z * z).imag, rtol=tolerance(dt), atol=tolerance(dt))


def test_complex_views_of_strided_and_transposed_arguments(device):
    dt = complex_dtype(device)
    m = values((5, 6), dt)
    check(lambda a: a * (1 + 1j) + a.real, m[::2, 1::2], device=device)
    check(lambda a: a.sum(axis=1), m.T, device=device)


def test_what_is_refused_says_why(device):
    z = values(4, complex_dtype(device))
    with pytest.raises(tj.UnsupportedError, match="not defined for complex"):
        tj.kernel(lambda z: z // 2)(z, device=device)
    with pytest.raises(tj.UnsupportedError, match="casting rule"):
        tj.kernel(lambda x: x.__iadd__(1j))(np.ones(3, np.float32), device=device)
    with pytest.raises(IndexError, match="integer"):
        tj.kernel(lambda z: z[z])(z, device=device)
    if device in ("webgpu", "metal"):
        with pytest.raises(tj.DtypeError, match="complex128"):
            tj.kernel(lambda z: z * 2)(values(4, np.complex128), device=device)


def test_clongdouble_is_refused():
    with pytest.raises(tj.DtypeError, match="complex64 and complex128"):
        tj.kernel(lambda z: z * 2)(np.ones(3, np.clongdouble), device="numba")


UNARY_FUNCTIONS = ["exp", "log", "log10", "log2", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "sinh", "cosh",
                   "tanh", "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "square", "reciprocal",
                   "sign", "absolute"]


def test_every_complex_ufunc_within_its_stated_ulps(device):
    """Each complex ufunc on values spanning magnitudes and every angle, within the ulps complex_math.ULPS states
    (measured normwise here: |ours - NumPy's| / |NumPy's|), a few more on the GPUs, whose real functions differ."""
    from tracejit.numpy.complex_math import ULPS

    dt = complex_dtype(device)
    rng = np.random.default_rng(5)
    radius = 10.0 ** rng.uniform(-2, 2, 400)
    angle = rng.uniform(-np.pi, np.pi, 400)
    z = (radius * np.exp(1j * angle)).astype(dt)
    names = [n for n in UNARY_FUNCTIONS if n not in ("log1p", "expm1")]  # (NumPy's own formulas cancel: normwise)

    def body(z):
        return tuple(getattr(np, name)(z) for name in names)

    got = tj.kernel(body)(z, device=device)
    with np.errstate(all="ignore"):
        expected = body(z)
    eps = np.finfo(np.float32 if dt == np.complex64 else np.float64).eps
    for name, g, e in zip(names, got, expected):
        g = np.asarray(g)
        assert g.dtype == e.dtype, name
        finite = np.isfinite(e) if e.dtype.kind == "f" else np.isfinite(e.real) & np.isfinite(e.imag)
        for part in ("real", "imag"):
            gp, ep = getattr(g, part)[~finite], getattr(e, part)[~finite]
            np.testing.assert_array_equal(gp, ep, err_msg=f"np.{name} where NumPy's result is not finite")
        g, e = g[finite], e[finite]
        err = np.abs(g - e) / np.maximum(np.abs(e), np.finfo(eps.dtype).tiny) / eps
        stated = ULPS[name][0 if dt == np.complex64 else 1]
        bound = stated + 1 if device in ("numba", "opencl") else 4 * stated + 8
        assert np.max(err) <= bound, f"np.{name}[{dt.__name__}] on {device}: {np.max(err):.1f} ulps (stated {stated})"


def test_a_captured_graph_refuses_complex_values_naming_the_kernel():
    square = tj.kernel(lambda z: z * z)
    with pytest.raises(tj.UnsupportedError, match="complex values, which a captured graph"):
        with tj.capture():
            square(values(4, np.complex128), device="numba")


def test_trace_lower_explain_and_specs_take_complex_arguments():
    f = tj.kernel(lambda z: z * z + 1)
    z = values(4, np.complex128)
    assert "float64[4x2]" in str(f.trace(z))  # (the parts' array)
    assert f.lower(tj.spec(4, "complex64")).kernels
    assert "0 synchronisation" in f.explain(z)


def test_selections_masked_updates_and_linear_algebra_of_complex_values(device):
    """x[mask] of complex values used as an array (its count read back), masked assignment into a complex argument,
    and np.linalg.solve / det of complex matrices (NumPy's LAPACK on the host, as for real ones)."""
    dt = complex_dtype(device)
    z = values(10, dt, seed=3)

    def selected(z):
        big = z[np.abs(z) > 1]
        return big * 2, np.sum(big)

    check(selected, z, device=device)

    def update(z):
        z[z.real < 0] = 0
        z[np.abs(z) > 1] *= 1j

    mine, theirs = z.copy(), z.copy()
    tj.kernel(update)(mine, device=device)
    update(theirs)
    np.testing.assert_allclose(mine, theirs, rtol=tolerance(dt), atol=tolerance(dt))
    a = values((3, 3), dt, seed=4) + 3 * np.eye(3, dtype=dt)
    check(lambda a, b: (np.linalg.solve(a, b), np.linalg.det(a)), a, z[:3], device=device, rtol=1e-4)


def test_masked_selections_of_complex_values_stay_at_their_places(device):
    """z[mask] of complex values in elementwise arithmetic and stored back with the same mask is a where() on each
    part, so it needs no count (NPBench's mandelbrot1: inside a loop compiled as a loop); a real selection stored
    into a complex one, z[mask] op= v, .real/.imag, sums and means of the selection, and anything else (a
    selection of another mask, one returned) as NumPy has it."""
    dt = complex_dtype(device)
    z, c = values(40, dt, seed=5), values(40, dt, seed=6)
    x = np.random.default_rng(7).standard_normal(40).astype(np.float32 if dt == np.complex64 else np.float64)

    def once(z, c, x):
        inside = np.abs(z) < 1.2
        z[inside] = z[inside] ** 2 + c[inside] * 0.5
        z[z.real > 1] = x[z.real > 1]
        z[z.imag < -1] *= 1j
        m = np.abs(c) > 1
        return z, z[m].sum(), z[m].mean(), z[m].real * 2 + np.abs(c[m]), c[m].conj()

    check(once, z, c, x, device=device)

    counted = np.int32 if device == "webgpu" else np.int64   # (WGSL has no int64)

    def escape(z, c, steps):   # the vectorised escape-time loop, as mandelbrot1 writes it
        counts = np.zeros(z.shape, counted)
        for n in range(steps):
            inside = np.less(abs(z), 2.0)
            counts[inside] = n
            z[inside] = z[inside] ** 2 + c[inside]
        return z, counts

    check(escape, (z * 0.3).astype(dt), (c * 0.4).astype(dt), 12, device=device)
    mine, theirs = (z * 0.3).astype(dt), (z * 0.3).astype(dt)   # the argument itself is written back
    tj.kernel(escape)(mine, c, 12, device=device)
    escape(theirs, c, 12)
    np.testing.assert_allclose(np.asarray(mine), theirs, rtol=tolerance(dt) * 100, atol=tolerance(dt))

    def walk(z, w, n):   # a complex argument assigned into one element a step, in a loop compiled as a loop
        for i in range(1, n):
            z[i] = z[i - 1] * w[i] + 1j
        return z

    check(walk, (z * 0.3).astype(dt), (c * 0.3).astype(dt), 40, device=device)

    def blocks(s, a, n):   # s[k, j] += (a block product) with both indices traced, under an `if` on them
        for k in range(n):
            for j in range(s.shape[1]):
                if k - j >= 0:
                    s[k, j] += a[j] @ a[j]
        return s

    a = values((6, 2, 2), dt, seed=8)
    check(blocks, np.zeros((7, 6, 2, 2), dt), a, 7, device=device)


def test_new_arrays_are_new_and_views_write_through(device):
    """z.conj(), +z and z.astype(z.dtype) are new arrays (writing into them leaves the argument alone, as in NumPy;
    they shared its parts before), while z.real, z.T and z[1:] are views that write it."""
    dt = complex_dtype(device)

    def body(z):
        w = z.conj()
        w.real[0] = 100
        v = +z
        v[1] = 7
        u = z.astype(z.dtype)
        u[2] = 9
        z.real[3] = -5
        z[1:][0] += 1j
        return w, v, u

    mine = values(6, dt)
    theirs = mine.copy()
    got = tj.kernel(body)(mine, device=device)
    expected = body(theirs)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(np.asarray(g), e, rtol=tolerance(dt))
    np.testing.assert_allclose(mine, theirs, rtol=tolerance(dt))
