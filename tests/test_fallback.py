"""Fallback to NumPy (issue 47): a call tracejit does not compile runs with NumPy on the host in the middle of the
kernel, on every device, with NumPy's values and dtypes; what comes before and after still compiles; one
tj.FallbackWarning per call site; refused where fallback is off (the rest of the suite runs that way), where the
result's shape depends on the data, where the call works in place, and inside a captured graph."""
import os
import warnings

import numpy as np
import pytest

import tracejit as tj
from tracejit.numpy import linalg_solvers
from reference import assert_close


def float_dtype(device):
    return np.float32 if device in ("webgpu", "metal") else np.float64


def tolerance(dt):
    return dict(rtol=1e-4, atol=1e-5) if dt == np.float32 else dict(rtol=1e-10, atol=1e-12)


def quiet(kernel, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tj.FallbackWarning)
        return kernel(*args, **kwargs)


def solve_then_scale(a, b):
    x = np.linalg.solve(a * 2.0, b + 1.0)   # before: fused kernels; the solve: NumPy's LAPACK (test_linalg_host.py)
    return x * x.sum() + 1.0                # after: kernels reading the solve's result


def eigen_parts(x):
    w, v = np.linalg.eigh(x @ x.T)          # a named tuple of two arrays
    q, r = np.linalg.qr(x)
    return w.sum() + np.abs(v[0]) * 2, np.abs(q).sum(axis=0) + np.diag(r)  # (eigenvectors' signs: arbitrary)


def unwrap_by(x, period):
    return np.unwrap(x * 2, period=period) + period   # a Python number passed as one


def gcd_of(a, b):
    return np.gcd(a * 2, b) + 1                       # a ufunc tracejit does not implement


@pytest.mark.parametrize("program", [solve_then_scale, eigen_parts])
def test_linear_algebra_falls_back_on_every_device(device, rng, program):
    dt = float_dtype(device)
    a = rng.standard_normal((5, 5)).astype(dt) + 5 * np.eye(5, dtype=dt)
    args = (a, rng.standard_normal(5).astype(dt)) if program is solve_then_scale else (a,)
    got = quiet(tj.kernel(program, fallback=True), *args, device=device)
    expected = program(*args)
    for g, e in zip(got if isinstance(got, tuple) else (got,), expected if isinstance(expected, tuple) else (expected,)):
        assert np.asarray(g).dtype == e.dtype
        assert_close(np.asarray(g), e, **tolerance(dt))


def test_a_function_and_a_ufunc_fall_back_with_python_numbers_as_numbers(device, rng):
    dt = float_dtype(device)
    x = (rng.standard_normal(20) * 3).astype(dt)
    got = quiet(tj.kernel(unwrap_by, fallback=True), x, 4.0, device=device)
    assert np.asarray(got).dtype == unwrap_by(x, 4.0).dtype
    assert_close(np.asarray(got), unwrap_by(x, 4.0), **tolerance(dt))
    a, b = rng.integers(1, 50, 12).astype(np.int32), rng.integers(1, 50, 12).astype(np.int32)
    got = quiet(tj.kernel(gcd_of, fallback=True), a, b, device=device)
    assert np.asarray(got).dtype == np.int32
    np.testing.assert_array_equal(np.asarray(got), gcd_of(a, b))


def test_the_call_inside_a_compiled_loop_runs_at_every_step(rng):
    def power_iteration(A, v, steps: int):
        for _ in range(steps):
            v = np.linalg.solve(A, v)
            v = v / np.sqrt(v @ v)
        return v
    A = rng.standard_normal((6, 6)) + 6 * np.eye(6)
    v = rng.standard_normal(6)
    assert_close(quiet(tj.kernel(power_iteration, fallback=True), A, v, 30), power_iteration(A, v, 30), rtol=1e-10)


def test_one_warning_per_call_site_naming_the_users_line(rng):
    def twice(a):
        b = np.i0(a)        # two sites, two warnings
        return b + np.i0(a * 2)
    kernel = tj.kernel(twice, fallback=True)
    a = rng.standard_normal((3, 3))
    with pytest.warns(tj.FallbackWarning) as caught:
        kernel(a)
    said = [str(w.message) for w in caught if issubclass(w.category, tj.FallbackWarning)]
    assert len(said) == 2 and all("test_fallback.py:" in m and "np.i0" in m for m in said), said
    assert all(w.filename == __file__ for w in caught)
    with warnings.catch_warnings():
        warnings.simplefilter("error", tj.FallbackWarning)   # (the second call warns no more)
        assert_close(kernel(a), twice(a), rtol=1e-12)


def spectrum_of(x, z):
    power = np.abs(np.fft.rfft(x * 2)) ** 2        # a real argument, a complex result
    w = np.linalg.inv(z @ z.conj().T + np.eye(3, dtype=x.dtype))   # complex arguments and a complex result
    return power + 1, w.T * 2j


def test_complex_arguments_and_results_fall_back_on_every_device(device, rng):
    dt = float_dtype(device)
    cdt = np.complex64 if dt == np.float32 else np.complex128
    x = rng.standard_normal(16).astype(dt)
    z = (rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))).astype(cdt)
    got = quiet(tj.kernel(spectrum_of, fallback=True), x, z, device=device)
    for g, e in zip(got, spectrum_of(x, z)):
        assert np.asarray(g).dtype == e.dtype
        assert_close(np.asarray(g), e, **tolerance(dt))


def test_fallback_off_refuses_at_the_users_line(rng, monkeypatch):
    def inverse(a):
        return np.i0(a) * 2
    a = np.eye(3)
    with pytest.raises(tj.UnsupportedError, match=r"test_fallback.py:\d+: np.i0 is not supported by tracejit"):
        tj.kernel(inverse, fallback=False)(a)
    assert os.environ["TRACEJIT_FALLBACK"] == "0"   # (conftest: the suite runs with fallback off)
    with pytest.raises(tj.UnsupportedError, match="np.i0 is not supported"):
        tj.kernel(inverse)(a)
    monkeypatch.setenv("TRACEJIT_FALLBACK", "1")
    assert_close(quiet(tj.kernel(inverse), a), inverse(a))


def test_what_a_fallback_cannot_follow_is_refused_with_the_reason(rng):
    def fill(a):
        np.fill_diagonal(a, 0.0)                    # works in place
        return a

    def eigenvalues(x):
        return np.linalg.eig(x)[0]                  # real or complex as the values decide
    cases = [(fill, "works in place"), (eigenvalues, "depends on the values")]
    for program, why in cases:
        with pytest.raises(tj.UnsupportedError, match=why):
            quiet(tj.kernel(program, fallback=True), rng.standard_normal((4, 4)))


def test_a_captured_graph_refuses_a_fallback_naming_its_line(rng):
    kernel = tj.kernel(solve_then_scale, fallback=True)
    with pytest.raises(tj.UnsupportedError, match=r"test_fallback.py:\d+: np.linalg.solve runs with NumPy"):
        with tj.capture():
            quiet(kernel, np.eye(3), np.ones(3))


def set_operations(a, b):   # lengths the values decide: read back when the call runs (data_sizes.py)
    return np.setdiff1d(a * 2, b) + 1, np.intersect1d(a, b).sum(), np.trim_zeros(np.where(a > 5, a, 0)) * 2


def test_a_fallback_whose_result_length_depends_on_the_values_follows_it(device, rng):
    kernel = tj.kernel(set_operations, fallback=True)
    for _ in range(4):   # (another length each call: the plan of that length goes on)
        a, b = rng.integers(0, 20, 30).astype(np.int32), rng.integers(0, 20, 10).astype(np.int32)
        if device == "webgpu":
            pytest.skip("np.intersect1d's sum is int64 in NumPy, which webgpu does not hold")
        got, expected = quiet(kernel, a, b, device=device), set_operations(a, b)
        for g, e in zip(got, expected):
            g = np.asarray(g)
            assert g.dtype == e.dtype and g.shape == e.shape
            np.testing.assert_array_equal(g, e)


def test_explain_lists_kernels_loops_breaks_and_synchronisations(rng):
    def program(a, b, steps: int):
        x = np.linalg.qr(a * 2.0, mode="raw")[1] * (b + 1.0)  # (LAPACK on the host on every device)
        for t in range(steps):
            x = 0.5 * (x + np.roll(x, 1))
        while x.max() > 1.0:
            x = x * 0.5
        return x * x.sum()
    kernel = tj.kernel(program, fallback=True)
    a, b = 3 * np.eye(4), np.ones(4)
    text = kernel.explain(a, b, 10)
    assert text.startswith("program(float64[4, 4], float64[4], int64 (a Python number)) on numba:")
    assert "1 break(s)" in text and "break at test_fallback.py:" in text and "np.linalg.qr" in text
    assert "for loop at test_fallback.py:" in text and "while loop at test_fallback.py:" in text
    assert "synchronisation: its test, read after every step" in text
    # on a GPU-API device the break also copies its values to the host (not a wait on numba)
    if "opencl" in {d.name for d in tj.devices() if d.available}:
        on_gpu = kernel.explain(a, b, 10, device="opencl")
        assert "synchronisation: the values it reads are copied to the host" in on_gpu
        assert "(host memory on numba: no wait)" not in on_gpu
    assert_close(quiet(kernel, a, b, 10), program(a, b, 10))   # (what it explained runs)


def test_a_refusal_names_what_compiles_instead_where_there_is_one(rng):
    def kth(x):
        return np.argpartition(x, 3)
    with pytest.raises(tj.UnsupportedError, match=r"test_fallback.py:\d+: np.argpartition .*what compiles instead: "
                                                  r"tj.topk"):
        tj.kernel(kth, fallback=False)(rng.standard_normal(8))


def _lacking():
    """Every function of np, np.linalg and np.fft dispatched through __array_function__ that tracejit does not
    implement, and every ufunc it does not: what falls back."""
    from tracejit.numpy.numpy_protocol import FUNCTIONS, UFUNCS
    found = []
    for module in (np, np.linalg, np.fft):
        for name in sorted(dir(module)):
            f = getattr(module, name)
            if isinstance(f, np.ufunc):
                if f not in UFUNCS and module is np:
                    found.append(f)
            elif type(f).__name__ == "_ArrayFunctionDispatcher" and f not in FUNCTIONS:
                found.append(f)
    return found


@pytest.mark.parametrize("device", ["numba", "opencl"])
def test_every_numpy_function_tracejit_lacks_runs_as_numpy_or_is_refused_with_the_reason(device):
    if device not in {d.name for d in tj.devices() if d.available}:
        pytest.skip(f"{device} is not available here")
    rng = np.random.default_rng(7)
    samples = [rng.standard_normal(6), rng.standard_normal((4, 4)) + 4 * np.eye(4), rng.integers(1, 9, 6)]
    ran, refused = [], []
    for f in _lacking():
        if f in linalg_solvers.EVERYWHERE or device != "numba" and f in linalg_solvers.GENERATED:  # (np.linalg as generated kernels)
            continue
        for x in samples:
            args = (x, x) if isinstance(f, np.ufunc) and f.nin == 2 else (x,)
            try:
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    expected = f(*args)
            except Exception:   # (not NumPy's function of this input)
                continue
            try:
                got = quiet(tj.kernel(lambda *a: f(*a), fallback=True), *args, device=device)
            except tj.TracejitError as e:   # said, with the reason, never a crash
                assert "test_fallback.py:" in str(e) or "depends on the data" in str(e) or "traced" in str(e), str(e)
                refused.append(f.__name__)
                break
            got = got if isinstance(got, tuple) else (got,)
            expected = expected if isinstance(expected, tuple) else (expected,)
            assert len(got) == len(expected), f.__name__
            for g, e in zip(got, expected):
                assert np.asarray(g).dtype == np.asarray(e).dtype, (f.__name__, np.asarray(g).dtype)
                np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-12, atol=1e-12, equal_nan=True,
                                           err_msg=f.__name__)
            ran.append(f.__name__)
            break
    # (what tracejit lacks shrinks as it grows: NumPy 2's array-API functions compile since numpy/standard.py)
    assert len(ran) >= 25 and "gcd" in ran and "i0" in ran, (ran, refused)


def test_a_python_number_that_sets_the_results_shape_specialises_the_kernel(rng):
    def tiled(x, n):
        return np.resize(x, n) * 2      # (np.resize is not compiled: its count sets the shape)
    kernel = tj.kernel(tiled, fallback=True)
    x = rng.standard_normal(3)
    for n in (2, 5):
        assert_close(quiet(kernel, x, n), tiled(x, n))


def test_scipy_is_named_as_scipy_at_the_users_line(rng):
    special = pytest.importorskip("scipy.special")

    def gamma_twice(x):
        return special.gamma(x) * 2        # a SciPy ufunc tracejit lacks: it falls back

    def log_total(x):
        return special.logsumexp(x) + 1    # a SciPy function converting its argument: no fallback can run it
    x = rng.uniform(0.5, 3, 6)
    with pytest.warns(tj.FallbackWarning, match=r"test_fallback.py:\d+: scipy.special.gamma is not compiled"):
        assert_close(tj.kernel(gamma_twice, fallback=True)(x), gamma_twice(x), rtol=1e-12)
    with pytest.raises(tj.TraceError, match=r"test_fallback.py:\d+: scipy.special.logsumexp converts a traced value"
                                            r".*what compiles instead: tj.logsumexp"):
        tj.kernel(log_total, fallback=True)(x)


def test_a_call_leaves_no_reference_cycle_holding_its_arrays():
    # (a closure that called itself held a fallback's arrays until Python's collector ran: a fresh 16 MB
    # result, page-faulted, every call)
    import gc

    kernel = tj.kernel(lambda x: np.unwrap(x * 2.0) + 1.0, fallback=True)
    selection = tj.kernel(lambda x: np.sort(x[x > 0.5]) * 2)
    x = np.random.default_rng(0).random(1000)
    quiet(kernel, x)
    selection(x)
    selection(x * 0.9)   # (another count: the plan changes mid-call; a new count traces, which makes cycles)
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        quiet(kernel, x)
        selection(x)
        selection(x * 0.9)
        assert gc.collect() == 0
    finally:
        if was:
            gc.enable()
