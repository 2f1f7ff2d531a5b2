"""The runtimes: numba's generated modules and parallel threshold; on every device, debug output and
argument handling (scalars, read-only, broadcast and byte-swapped inputs, array-likes)."""
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import tracejit as tj
from reference import assert_close, run_kernel

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("mode", ["0", "numba"])
def test_generated_module_is_a_real_file_in_the_cache_dir_and_in_sys_modules(tmp_path, monkeypatch, mode):
    """A kernel Numba compiles (rendered as Python, or as IR with TRACEJIT_NUMBA_NATIVE=numba) is a module file;
    one LLVM compiles directly is object code in the cache (test_numba_native)."""
    monkeypatch.setenv("TRACEJIT_NUMBA_NATIVE", mode)
    x = np.ones(7, np.float32)
    plan = tj.kernel(lambda a: a * 3 - 1).lower(x)
    from tracejit.runtime.cache.key import SHARED_NAME
    source = plan.kernels[0].source.replace(plan.kernels[0].name, SHARED_NAME)   # compiled under one name
    modules = [m for name, m in sys.modules.items() if name.startswith("_tracejit_numba_")
               and source == open(m.__file__).read()]
    assert modules, "the kernel's module is not registered in sys.modules"
    assert modules[0].__file__.startswith(os.environ["TRACEJIT_CACHE_DIR"])


@pytest.fixture(params=["chunks", "openmp"])
def big_kernels(request, monkeypatch) -> str:
    """Big kernels in chunks on tracejit's threads (as beside BLAS products, or where LLVM cannot compile
    them directly), or on OpenMP's threads through their entry point (numba_device._on_openmp)."""
    from tracejit.runtime.numba import compiler as numba_compile, device as numba_device
    if request.param == "chunks":
        monkeypatch.setattr(numba_device, "_on_openmp", lambda kernel: False)
    elif not numba_compile.parallel_entries():
        pytest.skip("no OpenMP entry points here (libgomp)")
    return request.param


def test_small_kernels_run_serial_middling_ones_prange_and_big_ones_in_chunks_on_threads(big_kernels):
    f = tj.kernel(lambda a: a * 2 + 1)
    small, middling, big = (f.lower(np.ones(n, np.float32)).kernels[0] for n in (16, 1 << 20, 1 << 22))
    assert not small.parallel and "prange" not in small.source and "tj_start" not in small.source
    # middling: Numba's prange loop, or, compiled by LLVM directly, its range in parts on OpenMP's threads
    assert middling.parallel and ("prange" in middling.source or "OpenMP's threads" in middling.source)
    if big_kernels == "chunks":
        assert big.parallel and "(tj_start, tj_stop" in big.source and "prange" not in big.source
    else:
        assert big.parallel and "OpenMP's threads" in big.source and "tj_start" not in big.source
    x = np.arange(1 << 22, dtype=np.float32)
    np.testing.assert_array_equal(f(x), x * 2 + 1)   # every chunk, its first and last element included
    for n in (1 << 16, (1 << 20) + 3, 999_999):   # each thread's part of a parallel loop, none left out
        y = np.arange(n, dtype=np.float32)
        np.testing.assert_array_equal(f(y), y * 2 + 1)


def test_a_kernel_run_in_chunks_takes_read_only_arrays_through_the_dispatcher():
    f = tj.kernel(lambda a: a * 2 + 1)
    x = np.arange(1 << 22, dtype=np.float32)
    x.flags.writeable = False   # the compiled entry point takes writable arrays: each chunk raises TypeError
    np.testing.assert_array_equal(f(x), x * 2 + 1)


def test_a_kernel_run_in_chunks_reports_a_fault_in_any_chunk_and_works_after(big_kernels):
    table = np.arange(10, dtype=np.float32)
    f = tj.kernel(lambda t, i: t[i] * 2)
    index = np.zeros(1 << 22, np.int64)
    source = f.lower(table, index).kernels[0].source
    assert ("tj_start" in source) == (big_kernels == "chunks")
    index[-1] = 10   # in the last chunk, which a pool thread runs (OpenMP's last thread)
    with pytest.raises(tj.IndexOutOfBoundsError, match="index 10 is out of bounds for axis 0 with size 10"):
        f(table, index)
    index[-1] = 9
    np.testing.assert_array_equal(f(table, index), table[index] * 2)


def test_compile_times_count_each_moment_in_the_innermost_stage_only():
    from tracejit.runtime.debug import OTHER, CompileTimes
    clock = iter([0.0, 1.0, 3.0, 6.0, 10.0, 15.0])   # enter other, enter a, enter b, exit b, exit a, exit other
    times = CompileTimes()
    real = time.perf_counter
    time.perf_counter = lambda: next(clock)
    try:
        times.enter(OTHER)
        times.enter("a")
        times.enter("b")
        times.exit()
        times.exit()
        times.exit()
    finally:
        time.perf_counter = real
    assert times.seconds == {OTHER: 1.0 + 5.0, "a": 2.0 + 4.0, "b": 3.0}
    assert times.summary() == "a 6000, b 3000, other 6000 ms"


@pytest.mark.parametrize("mode", ["1", "0"])
def test_debug_level_1_prints_each_stage_of_a_compile(tmp_path, mode):
    """LLVM's compile of the kernel's IR (the default) or Numba's of its Python rendering: stages that add up."""
    out = _run("""
        import numpy as np, tracejit as tj
        f = tj.kernel(lambda a: np.exp(a - a.max(axis=-1, keepdims=True)))
        f(np.ones((512, 256), np.float32))
    """, TRACEJIT_DEBUG="1", TRACEJIT_CACHE_DIR=str(tmp_path), TRACEJIT_NUMBA_NATIVE=mode)   # an empty cache
    assert out.returncode == 0, out.stderr
    line = next(line for line in out.stderr.splitlines() if "kernel(s) for numba in" in line)
    total = float(line.split(" in ")[1].split(" ms")[0])
    stages = dict(part.rsplit(" ", 1) for part in line.split(" ms (", 1)[1].removesuffix(" ms)").split(", "))
    own = ("load object code",) if mode == "1" else ("numba frontend", "numba typing", "numba lowering")
    for name in ("device setup", "trace", "simplify", "schedule", "render", *own, "LLVM", "disk cache", "runner",
                 "other"):
        assert name in stages, (name, line)
    assert abs(sum(map(float, stages.values())) - total) <= 0.05 * total + 2, line   # they add up to the whole


def test_debug_level_1_times_render_and_compile_on_every_gpu_api_device(device, tmp_path):
    if device == "numba":
        pytest.skip("numba's own stages: the test above")
    out = _run(f"""
        import numpy as np, tracejit as tj
        f = tj.kernel(lambda a: np.exp(a - a.max(axis=-1, keepdims=True)))
        f(np.ones((64, 256), np.float32), device="{device}")
    """, TRACEJIT_DEBUG="1", TRACEJIT_CACHE_DIR=str(tmp_path))
    assert out.returncode == 0, out.stderr
    line = next(line for line in out.stderr.splitlines() if f"kernel(s) for {device} in" in line)
    stages = dict(part.rsplit(" ", 1) for part in line.split(" ms (", 1)[1].removesuffix(" ms)").split(", "))
    for name in ("device setup", "trace", "simplify", "verify", "schedule", "render", "compile", "other"):
        assert name in stages, (name, line)


def test_python_int_argument_out_of_range_for_array_dtype_raises_like_numpy(device):
    f = tj.kernel(lambda a, s: a + s, device=device)
    a = np.arange(4, dtype=np.int8)
    np.testing.assert_array_equal(f(a, -128), a + (-128))
    with pytest.raises(OverflowError):
        a + 300
    with pytest.raises(tj.ScalarOverflowError, match="300.*int8"):
        f(a, 300)
    with pytest.raises(tj.ScalarOverflowError, match="-1.*uint8"):
        f(a.astype(np.uint8), -1)


def test_python_scalar_argument_is_a_runtime_value_not_a_recompile(device):
    f = tj.kernel(lambda a, s: a * s, device=device)
    a = np.arange(5, dtype=np.float32)
    for s in (1.5, -2.0, 3.25):
        np.testing.assert_array_equal(f(a, s), a * s)
    assert f.cache_info()["traces"] == 1


def test_read_only_and_broadcast_inputs_work(device):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    a.flags.writeable = False
    f = tj.kernel(lambda x: x * 2, device=device)
    np.testing.assert_array_equal(f(np.ascontiguousarray(a)), a * 2)
    np.testing.assert_array_equal(f(a), a * 2)
    b = np.broadcast_to(np.arange(4, dtype=np.float32), (3, 4))
    np.testing.assert_array_equal(f(b), b * 2)


def _run(code: str, **env) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, PYTHONPATH=REPO, **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, timeout=300)


@pytest.mark.parametrize("level, expected", [("1", "kernel(s) for {device} in"), ("2", "GB/s"),
                                             ("3", "kernel k0_"), ("4", "k0_reduce_sum(")])
def test_debug_levels_print_compiles_launches_irs_and_source(level, expected, device):
    out = _run(f"""
        import numpy as np, tracejit as tj
        f = tj.kernel(lambda a: a.sum(axis=1))
        np.asarray(f(np.ones((8, 8), np.float32), device="{device}"))
    """, TRACEJIT_DEBUG=level)
    assert out.returncode == 0, out.stderr
    assert expected.format(device=device) in out.stderr


def test_tracejit_device_environment_variable_picks_the_default_device():
    out = _run("""
        import tracejit as tj
        from tracejit.runtime.registry import default_device_name
        print(default_device_name())
    """, TRACEJIT_DEVICE="numba")
    assert out.stdout.strip() == "numba", out.stderr
    bad = _run("""
        import numpy as np, tracejit as tj
        tj.kernel(lambda a: a + 1)(np.ones(3))
    """, TRACEJIT_DEVICE="no-such-device")
    assert "DeviceError" in bad.stderr and "no-such-device" in bad.stderr


def test_automatic_choice_on_a_linux_machine_without_gpu_device_files_loads_no_gpu_library():
    """No /dev/nvidia*, /dev/dri/renderD* or other GPU driver file: the automatic choice rules the GPU
    targets out without loading CUDA, importing pyopencl or creating a WebGPU adapter (0.1-0.2 s of a
    CPU-only process's first call), and still picks numba."""
    from tracejit.runtime import gpu_nodes
    if gpu_nodes.may_have_gpu():
        pytest.skip("this machine has a GPU driver's device file")
    out = _run("""
        import sys
        import tracejit as tj
        from tracejit.runtime.registry import default_device_name
        print(default_device_name(), any(m in sys.modules for m in ("pyopencl", "wgpu", "cuda.bindings.driver")))
    """, TRACEJIT_DEVICE="")
    assert out.stdout.split() == ["numba", "False"], out.stderr


def test_gpu_device_files_are_looked_for_by_pattern(tmp_path, monkeypatch):
    from tracejit.runtime import gpu_nodes
    monkeypatch.setattr(gpu_nodes.sys, "platform", "linux")
    assert not gpu_nodes.may_have_gpu((str(tmp_path / "renderD*"),))
    (tmp_path / "renderD128").touch()
    assert gpu_nodes.may_have_gpu((str(tmp_path / "renderD*"),))
    monkeypatch.setattr(gpu_nodes.sys, "platform", "win32")   # nothing to look at: maybe
    assert gpu_nodes.may_have_gpu((str(tmp_path / "nothing*"),))


def test_array_likes_are_converted_before_the_kernel_runs_and_share_one_plan(device):
    f = tj.kernel(lambda a: a * 2, device=device)
    for value in ([1.0, 2.0, 3.0], (4.0, 5.0, 6.0), np.float64(7.0)):
        got = run_kernel(f, value, device=device)   # Python floats become float64, which WGSL lacks
        assert type(got) is (np.ndarray if device == "numba" else tj.Array)
        np.testing.assert_array_equal(got, np.asarray(value) * 2)
    assert f.cache_info()["plans"] == 2  # the list and the tuple both became float64[3]


def test_lower_keeps_its_plan_so_the_first_call_compiles_nothing(device):
    tj.device(device)   # opened: before that, lower() on webgpu renders WGSL only (see compile_only)
    f = tj.kernel(lambda a: a + 1, device=device)
    f.lower(tj.spec((4, 5), "float32"))
    compiles = f.cache_info()["compiles"]
    np.testing.assert_array_equal(f(np.zeros((4, 5), np.float32)), np.ones((4, 5), np.float32))
    assert f.cache_info()["compiles"] == compiles


def test_non_native_byte_order_inputs_are_computed_like_numpy(device):
    x = np.arange(6, dtype=">f4").reshape(2, 3)
    f = tj.kernel(lambda a: a * 2 + 1, device=device)
    for _ in range(2):
        got = f(x)
        np.testing.assert_array_equal(got, x * 2 + 1)
        assert got.dtype == np.float32


def _issue15_hang(a0):
    v1 = np.mean(np.prod(a0, axis=-2), axis=0, keepdims=True)
    return np.mean((v1 // a0).sum(axis=1, keepdims=True), axis=(1,))


@pytest.mark.parametrize("rows", [17, 65])
def test_float16_prod_mean_floordiv_program_compiles_promptly(rows, device):
    """Issue 15 item 5: stalled in LLVM for over 100 s on numba (65 rows here; 17 in the issue): a loop
    repeating float16 round trips of one broadcast value. Such values are now computed before the loop."""
    import time
    a0 = np.broadcast_to(np.array([[0.7]], np.float16), (rows, 1))
    t0 = time.perf_counter()
    result = run_kernel(tj.kernel(_issue15_hang), a0, device=device)
    assert time.perf_counter() - t0 < 30
    assert_close(result, _issue15_hang(a0))


def test_a_numba_compile_past_the_time_limit_raises_compile_timeout_error_naming_the_kernel(tmp_path):
    """TRACEJIT_COMPILE_TIMEOUT: the caller gets a CompileError instead of a hang, the process can go on
    (a later compile waits for the abandoned one) and exits normally."""
    script = textwrap.dedent("""
        import os, numpy as np, tracejit as tj
        f = tj.kernel(lambda a: np.tanh(a) * 3 - 1)
        x = np.ones(5, np.float32)
        try:
            f(x)
        except tj.CompileTimeoutError as e:
            assert isinstance(e, tj.CompileError) and isinstance(e, TimeoutError)
            print("ERROR", e)
        else:
            raise SystemExit("no CompileTimeoutError")
        os.environ["TRACEJIT_COMPILE_TIMEOUT"] = "0"
        assert np.allclose(f(x), np.tanh(x) * 3 - 1)
        print("OK")
    """)
    env = dict(os.environ, TRACEJIT_COMPILE_TIMEOUT="0.001", TRACEJIT_CACHE_DIR=str(tmp_path))
    run = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    message = run.stdout.split("ERROR ", 1)[1]
    assert "k0_" in message and "within 0.001 s" in message and "TRACEJIT_COMPILE_TIMEOUT" in message
    assert run.stdout.rstrip().endswith("OK")


def test_kernels_that_differ_only_in_their_names_compile_once(device, rng):
    """picoGPT's attention, a softmax per head: the heads' kernels are one code under other names
    (k3_row_max_sum, k7_row_max_sum, ...), compiled once; each keeps its own name where it is shown.
    Every device but webgpu (cache_key.shared_source)."""
    if device == "webgpu":
        pytest.skip("webgpu compiles kernels under their own names: with one shared name, two test workers "
                    "compiling the same shader at once on lavapipe stalled for ~26 s")
    from corpus import transformer as T
    scale = 1.0 + (time.time_ns() % 10 ** 9) / 1e10   # inside each head's softmax: code no earlier run compiled

    def heads(q, k, v, n_head):
        parts = zip(*(np.split(t, n_head, axis=-1) for t in (q, k, v)))
        return np.hstack([T.softmax(qh @ kh.T * scale) @ vh for qh, kh, vh in parts])
    f = tj.kernel(heads, static=("n_head",))
    q, k, v = (rng.standard_normal((64, 256)).astype(np.float32) for _ in range(3))
    tj.device(device)   # open: lower() then builds, as a call does (webgpu's only renders WGSL before)
    softmaxes = [kern for kern in f.lower(q, k, v, n_head=4, device=device).kernels if "matmul" not in kern.name
                 and "max" in kern.name]
    assert len(softmaxes) == 4 and len({kern.name for kern in softmaxes}) == 4
    assert all(f"{kern.name}(" in kern.source for kern in softmaxes)
    codes = {kern.source.replace(kern.name, "K") for kern in softmaxes}
    # one code (in a full run, two: the symbolic sizes earlier tests left on the device rendered one head's
    # launch apart), each compiled once, the other heads reusing it
    assert len(codes) < len(softmaxes) and sum(not kern.cached for kern in softmaxes) == len(codes)
    np.testing.assert_allclose(np.asarray(f(q, k, v, n_head=4, device=device)), heads(q, k, v, n_head=4),
                               rtol=1e-4, atol=1e-5)
