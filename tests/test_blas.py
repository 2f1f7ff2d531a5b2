"""The numba device's matrix products (runtime/numba/blas.py): MKL's cblas gemm where the mkl wheel is installed
(the dev extra installs it), NumPy's matmul otherwise; every layout either reads in place, or that NumPy
takes over, against np.matmul."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from tracejit.errors import DeviceError
from tracejit.runtime.numba import blas

LAYOUTS = {
    "contiguous": lambda x: x,
    "transposed": lambda x: np.ascontiguousarray(x.swapaxes(-1, -2)).swapaxes(-1, -2),
    "row_gaps": lambda x: np.pad(x, [(0, 0), (0, 0), (0, 3)])[..., :x.shape[-1]],
    "col_gaps": lambda x: np.pad(x, [(0, 0), (0, 0), (0, x.shape[-1])])[..., ::2][..., :x.shape[-1]],
    "broadcast_batch": lambda x: np.broadcast_to(x[:1], x.shape),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("left", LAYOUTS)
@pytest.mark.parametrize("right", ["contiguous", "transposed", "row_gaps", "broadcast_batch"])
@pytest.mark.parametrize("shape", [(1, 33, 17, 65), (3, 8, 40, 24), (2, 1, 9, 1), (1, 64, 1, 5)])
def test_every_layout_matches_numpy(rng, dtype, left, right, shape):
    b, m, k, n = shape
    a = LAYOUTS[left]((rng.standard_normal((b, m, k)) * 10).astype(dtype))
    c = LAYOUTS[right]((rng.standard_normal((b, k, n)) * 10).astype(dtype))
    out = np.full((b, m, n), np.nan if dtype != np.int64 else -1, dtype)
    blas.matmul(a, c, out)
    want = np.matmul(a, c)
    if blas.backend() == "mkl" and dtype != np.int64 and min(m, k, n) > 1:   # MKL reads these in place; NumPy the others
        in_place = {left, right} <= {"contiguous", "transposed", "row_gaps"} or b == 1 and "col_gaps" not in (left, right)
        assert blas._gemm(blas._load()[0], a, c, out) == in_place
    if dtype == np.int64:
        np.testing.assert_array_equal(out, want)
    else:
        np.testing.assert_allclose(out, want, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-3)


def test_an_output_with_row_gaps_is_written_in_place_and_nothing_else(rng):
    a, c = rng.standard_normal((2, 5, 7)), rng.standard_normal((2, 7, 6))
    base = np.full((2, 5, 9), 7.0)
    blas.matmul(a, c, base[..., :6])
    np.testing.assert_allclose(base[..., :6], a @ c, rtol=1e-12)
    assert (base[..., 6:] == 7.0).all()


def test_a_model_s_linear_layers_match_numpy_through_the_device(rng):
    """x @ w.T with a checkpoint's [out, in] weight, a batched attention product, float32 and float64."""
    def block(x, w, q, k):
        return np.tanh(x @ w.T) @ w, (q @ k.transpose(0, 2, 1)).max(axis=-1)

    for dtype in (np.float32, np.float64):
        args = [rng.standard_normal(s).astype(dtype) for s in ((64, 96), (128, 96), (4, 32, 16), (4, 32, 16))]
        f = tj.kernel(block)
        for got, want in zip(f(*args, device="numba"), block(*args)):
            assert got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=1e-4 if dtype == np.float32 else 1e-10, atol=1e-4)
        by = "by MKL's cblas gemm" if blas.backend() == "mkl" else "by numpy.matmul"
        assert sum("matmul (BLAS)" in k.source and by in k.source for k in f.lower(*args).kernels) == 3


@pytest.fixture
def fresh_blas(monkeypatch):
    monkeypatch.setattr(blas, "_loaded", None)
    yield
    blas._loaded = None   # the next use finds the process's own choice again


def test_the_choice_is_read_from_tracejit_blas(monkeypatch, fresh_blas):
    monkeypatch.setenv("TRACEJIT_BLAS", "numpy")
    assert blas.backend() == "numpy"
    blas._loaded = None
    monkeypatch.setenv("TRACEJIT_BLAS", "openblas")
    with pytest.raises(DeviceError, match="TRACEJIT_BLAS='openblas': use auto, mkl or numpy"):
        blas.backend()


def test_asking_for_mkl_without_it_is_a_clear_error(monkeypatch, fresh_blas):
    monkeypatch.setenv("TRACEJIT_BLAS", "mkl")
    monkeypatch.setattr(blas, "_find_mkl_rt", lambda: None)
    with pytest.raises(DeviceError, match=r"pip install 'tracejit\[mkl\]'"):
        blas.backend()
    monkeypatch.setenv("TRACEJIT_BLAS", "auto")
    blas._loaded = None
    assert blas.backend() == "numpy"
    a = np.arange(12.0).reshape(1, 3, 4)
    out = np.empty((1, 3, 3))
    blas.matmul(a, a.swapaxes(1, 2), out)
    np.testing.assert_array_equal(out, a @ a.swapaxes(1, 2))


needs_mkl = pytest.mark.skipif(blas.backend() != "mkl", reason="MKL is not installed (pip install 'tracejit[mkl]')")


def _products(x, w, q, k, v):
    """A linear layer both ways round, batched attention products, a product of a slice, a float64 one of
    float32 arrays, one of a constant, one of views with gaps between columns (NumPy's matmul)."""
    s = q @ k.transpose(0, 2, 1)
    return (x @ w + 1, x @ w.T, np.exp(s - s.max(axis=-1, keepdims=True)) @ v, x[3:40] @ w[:, :50],
            x.astype(np.float64) @ w, x @ np.arange(96 * 32, dtype=np.float32).reshape(96, 32),
            x[:, ::2] @ w[::2])


@needs_mkl
def test_later_calls_launch_mkl_from_compiled_code_and_match_numpy(rng, monkeypatch):
    """The first call of a plan works out MKL's arguments; later calls pass them to blas.DRIVER and never
    reach blas.matmul. Fresh inputs each call, read-only and non-contiguous ones among them. A product
    called once does not wait for the driver's compile."""
    shapes = ((64, 96), (96, 96), (4, 32, 16), (4, 32, 16), (4, 32, 24))
    f = tj.kernel(_products)
    calls = []
    matmul = blas.matmul
    monkeypatch.setattr(blas, "matmul", lambda *a: (calls.append(a), matmul(*a)))
    for n in range(5):
        args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        if n == 2:
            args[0].setflags(write=False)
        if n >= 3:   # the same shapes in views that are not contiguous: the same plan, whose flat views of
            # them are not either: products reading them go the first way (blas.matmul), and stay right
            args = [np.repeat(a, 2, axis=-1)[..., ::2] for a in args]
        calls.clear()
        got = f(*args, device="numba")
        for g, want in zip(got, _products(*args)):
            assert g.dtype == want.dtype
            # float32 sums of 96 terms: MKL and NumPy's BLAS round apart by a few ulps of the terms, and the
            # product with arange's terms (up to 3071) cancels down to results near 10 (AMD Zen 5: 2.5e-3 apart)
            np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))
        # the first call: every product by blas.matmul; the second, those whose driver (one per dtype) was
        # not in the disk cache (it compiles after them); the third: only the one MKL does not take
        if n in (0, 2):
            assert len(calls) == (8 if n == 0 else 1), n


@needs_mkl
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_driver_refuses_a_buffer_too_short_or_a_pointer_between_elements(rng, dtype):
    from tracejit.runtime.numba.device import NumbaDevice
    entry = NumbaDevice()._gemm_driver(dtype)
    a, c = rng.standard_normal(12).astype(dtype), rng.standard_normal(12).astype(dtype)
    out = np.zeros(9, dtype)
    views = (a.reshape(1, 3, 4), c.reshape(1, 4, 3), out.reshape(1, 3, 3))
    p = blas.driver_arguments((a, c, out), views)
    assert entry(a, c, out, p)
    np.testing.assert_allclose(views[2], views[0] @ views[1], rtol=1e-5)
    out[:] = 7
    for short in ((a[:11], c, out), (a, c[:11], out), (a, c, out[:8])):
        assert not entry(*short, p)
    shifted = p.copy()
    shifted[0] += 1   # one byte into the first element
    assert not entry(a, c, out, shifted)
    assert (out == 7).all()


@pytest.fixture
def driver_loads(monkeypatch) -> list[bool]:
    """Each load of the MKL launcher, as its `compile` argument (False: only from the disk cache)."""
    from tracejit.runtime.numba.device import NumbaDevice
    compiles = []
    load = NumbaDevice._gemm_driver
    monkeypatch.setattr(NumbaDevice, "_gemm_driver", lambda self, dtype, compile=True: (
        compiles.append(compile), load(self, dtype, compile))[1])
    return compiles


@needs_mkl
def test_a_product_called_once_does_not_compile_the_driver(rng, driver_loads):
    compiles = driver_loads
    f = tj.kernel(lambda x, w: x @ w)
    x, w = rng.standard_normal((64, 80)), rng.standard_normal((80, 96))
    np.testing.assert_allclose(f(x, w, device="numba"), x @ w, rtol=1e-12)
    assert compiles == [False]   # loaded only where the disk cache has it
    np.testing.assert_allclose(f(x, w, device="numba"), x @ w, rtol=1e-12)
    assert compiles in ([False], [False, True])   # the second call compiles it where it was not there


@needs_mkl
def test_warming_puts_the_driver_in_the_disk_cache(rng, driver_loads):
    """A deployment warmed ahead (tj.warm) does not compile the launcher on a product's second call."""
    x, w = rng.standard_normal((64, 80)).astype(np.float32), rng.standard_normal((80, 96)).astype(np.float32)
    tj.warm(tj.kernel(lambda x, w: np.tanh(x @ w)), x, w, devices=["numba"])
    assert driver_loads == [True]


@pytest.mark.parametrize("case", ["unset", "user_spin", "user_policy", "loaded", "numpy", "intel", "no_mkl"])
def test_openmp_spin_is_shortened_only_where_mkl_runs_on_a_libgomp_not_yet_started(monkeypatch, case):
    """GOMP_SPINCOUNT=1000 where MKL's GNU layer will run on libgomp, the user chose nothing and libgomp
    has not read its environment yet; nothing otherwise."""
    for name in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "TRACEJIT_BLAS", "MKL_THREADING_LAYER"):
        monkeypatch.setenv(name, "")   # so that the test's end restores what the process had
        monkeypatch.delenv(name)
    monkeypatch.setattr(blas, "_find_mkl_rt", lambda: "libmkl_rt.so")
    monkeypatch.setattr(blas, "_system_has_libgomp", lambda: True)
    monkeypatch.setattr(blas, "_libgomp_loaded", lambda: case == "loaded")
    user = {"user_spin": ("GOMP_SPINCOUNT", "5"), "user_policy": ("OMP_WAIT_POLICY", "active"),
            "numpy": ("TRACEJIT_BLAS", "numpy"), "intel": ("MKL_THREADING_LAYER", "INTEL")}.get(case)
    if user:
        monkeypatch.setenv(*user)
    if case == "no_mkl":
        monkeypatch.setattr(blas, "_find_mkl_rt", lambda: None)
    blas.settle_openmp()
    want = {"unset": "1000", "user_spin": "5"}.get(case)
    assert blas.os.environ.get("GOMP_SPINCOUNT") == want


@pytest.mark.parametrize("case, spins", [("settled", False), ("loaded_before", True), ("policy_active", True),
                                         ("short_count", False), ("long_count", True), ("infinite", True),
                                         ("numpy_blas", False), ("intel_layer", False)])
def test_products_spin_long_where_libgomp_keeps_its_threads_awake(monkeypatch, case, spins):
    for name in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "MKL_THREADING_LAYER"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.setattr(blas, "backend", lambda: "numpy" if case == "numpy_blas" else "mkl")
    monkeypatch.setattr(blas, "_system_has_libgomp", lambda: True)
    monkeypatch.setattr(blas, "SPINS_LONG", case == "loaded_before")
    env = {"settled": ("GOMP_SPINCOUNT", "1000"), "policy_active": ("OMP_WAIT_POLICY", "ACTIVE"),
           "short_count": ("GOMP_SPINCOUNT", "5000"), "long_count": ("GOMP_SPINCOUNT", "300000"),
           "infinite": ("GOMP_SPINCOUNT", "infinite"), "intel_layer": ("MKL_THREADING_LAYER", "intel")}.get(case)
    if env:
        monkeypatch.setenv(*env)
    assert blas.products_spin_long() is spins


@pytest.mark.parametrize("spins", [False, True])
def test_kernels_beside_products_share_the_products_threads_only_where_those_spin_long(rng, monkeypatch, spins):
    """Beside products, a mid-sized kernel runs on tracejit's threads (chunks: its code takes the chunk's
    start and stop), or on OpenMP's threads where MKL's libgomp threads spin long after each product (Numba's
    prange loop, or the parallel entry point of a kernel LLVM compiles directly); its result is NumPy's
    either way."""
    from tracejit.runtime.numba import threads as numba_threads
    monkeypatch.setattr(blas, "products_spin_long", lambda: spins)
    monkeypatch.setattr(numba_threads, "openmp_layer", lambda: True)
    x, w = rng.standard_normal((256, 96)).astype(np.float32), rng.standard_normal((96, 512)).astype(np.float32)
    f = tj.kernel(lambda x, w: np.tanh(x @ w) * 2)
    plan = f.lower(x, w, device="numba")
    elementwise = [k for k in plan.kernels if "tanh" in k.name or "elementwise" in k.name]
    assert elementwise and all(("numba.prange" in k.source or "OpenMP's threads" in k.source) is spins
                               and ("tj_start" in k.source) is not spins for k in elementwise)
    # (x @ w sums 96 float32 terms of ~1: MKL and NumPy's BLAS a few ulps of 10 apart, tanh passes them on)
    np.testing.assert_allclose(f(x, w), np.tanh(x @ w) * 2, rtol=1e-5, atol=1e-4)


def test_libgomp_is_found_in_this_process_maps_by_file_name():
    import ctypes.util
    path = ctypes.util.find_library("gomp")
    if path is None:
        pytest.skip("no libgomp on this system")
    ctypes.CDLL(path)
    assert blas._libgomp_loaded()


@needs_mkl
def test_a_launcher_that_fails_to_build_leaves_the_products_right(rng, monkeypatch):
    """Whatever goes wrong building the launcher, the call that asked for it returns its result, with a
    warning, and the product keeps the ctypes way."""
    from tracejit.errors import CompileError
    from tracejit.runtime.cache import disk as disk_cache
    from tracejit.runtime.numba.device import NumbaDevice

    def broken(self, dtype, compile=True):
        raise CompileError("numba failed to compile kernel tj_gemm: (a test)")
    monkeypatch.setattr(NumbaDevice, "_gemm_driver", broken)
    monkeypatch.setattr(disk_cache, "_warned", set(), raising=False)
    f = tj.kernel(lambda x, w: x @ w * 2)
    x, w = rng.standard_normal((64, 72)).astype(np.float32), rng.standard_normal((72, 40)).astype(np.float32)
    with pytest.warns(UserWarning, match="launcher for matrix products could not be built"):
        for _ in range(3):
            np.testing.assert_allclose(f(x, w, device="numba"), x @ w * 2, rtol=1e-5, atol=1e-4)


def test_the_quick_lookups_of_a_first_call_agree_with_the_slow_ones():
    """What a fresh process's first call reads without a subprocess or a metadata scan: libgomp in the linker's cache
    (not `ldconfig -p`), a libgomp loaded (not threadpoolctl), Numba's version (not importlib.metadata), the memory
    available (not psutil)."""
    import ctypes.util
    from importlib import metadata

    import psutil
    from threadpoolctl import ThreadpoolController

    from tracejit.runtime.device_info import available_memory
    from tracejit.runtime.numba.cache import numba_version

    for name in ("gomp", "m", "c", "stdc++", "iomp5", "no_such_library_here"):
        assert blas.system_library(name) == ctypes.util.find_library(name), name
    loaded = any("libgomp" in c.filepath for c in ThreadpoolController().select(internal_api="openmp").lib_controllers)
    assert blas._libgomp_loaded() == loaded
    assert numba_version() == metadata.version("numba")
    assert abs(available_memory() - psutil.virtual_memory().available) < 2**30


@pytest.mark.parametrize("vendor", ["AuthenticAMD", "GenuineIntel", None])
def test_auto_takes_numpys_blas_on_a_cpu_that_is_not_intels(monkeypatch, fresh_blas, vendor):
    """MKL runs slower code on other vendors' CPUs (2x slower than OpenBLAS on an AMD EPYC): `auto` takes NumPy's
    matmul there, and says why; TRACEJIT_BLAS=mkl still takes MKL."""
    monkeypatch.setattr(blas, "_cpu_vendor", lambda: vendor)
    monkeypatch.setenv("TRACEJIT_BLAS", "auto")
    installed = blas._find_mkl_rt() is not None
    assert blas.backend() == ("mkl" if installed and vendor != "AuthenticAMD" else "numpy")
    if vendor == "AuthenticAMD" and installed:
        assert "slower than NumPy's BLAS on a AuthenticAMD CPU" in blas._load()[1]
        assert "TRACEJIT_BLAS=mkl uses it" in blas.describe()
        blas._loaded = None
        monkeypatch.setenv("TRACEJIT_BLAS", "mkl")
        assert blas.backend() == "mkl"
