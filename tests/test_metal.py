"""The metal target where there is no Mac: MSL lowering anywhere, its errors, the MSL checker (generated
kernels pass it, broken ones fail it), and the runtime with its generated MSL running on the CPU emulator
(tracejit/runtime/emulator/metal.py, in PyObjC's Metal's shape). On macOS the device-parametrised suite
runs on the real `metal` device as well."""
from __future__ import annotations

import subprocess
import sys
from collections import OrderedDict

import numpy as np
import pytest
from reference import check_assigned_arguments, check_scatter_add

import tracejit as tj
from tracejit.codegen.simt import msl_check
from tracejit.runtime import emulator, registry
from tracejit.runtime.metal import device as metal_device
from tracejit.runtime.emulator import build
from tracejit.runtime.emulator import metal as emulated_metal

needs_clang = pytest.mark.skipif(msl_check.find_clang() is None,
                                 reason="clang++ is not installed (Debian: apt-get install clang)")


@tj.kernel
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@tj.kernel
def layernorm(x, w, eps):
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    return d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + eps) * w


@tj.kernel
def mixed(a, b, n):
    return tj.erf(a) * n + np.where(a > b, a, b), (a > 0).sum(axis=-1), a.astype(np.float16)


@tj.kernel
def int_ops(a, b):
    return a // b, a % b, a ** 2, (a & 7).max(axis=0), (a < b).sum()


@tj.kernel
def ipow(a, b):
    return a ** b


@tj.kernel
def lookup(table, i, a, b):
    return table[i] * 2, a ** b          # two kernels of one command buffer share the error record


# ---- lowering anywhere ----

def test_lower_gives_msl_without_a_mac_and_without_pyobjc():
    plan = softmax.lower(tj.spec((64, 1024), np.float32), device="metal")
    src = plan.kernels[0].source
    assert len(plan.kernels) == 1
    assert "kernel void" in src and "[[buffer(0)]]" in src and "[[threadgroup_position_in_grid]]" in src
    assert "threadgroup_barrier(mem_flags::mem_threadgroup)" in src and "simd_sum(" in src
    if sys.platform != "darwin":
        assert "Metal" not in sys.modules and "objc" not in sys.modules


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS has Metal")
@pytest.mark.skipif(emulator.emulates("metal"), reason="TRACEJIT_EMULATE=metal: metal runs on the CPU emulator")
def test_devices_reports_metal_unavailable_with_the_reason():
    info = next(i for i in tj.devices() if i.name == "metal")
    assert not info.available and "macOS" in info.reason and "lower" in info.reason
    with pytest.raises(tj.DeviceError, match="Metal needs macOS"):
        softmax(np.ones((4, 8), np.float32), device="metal")


def test_float64_is_refused_naming_dtype_device_and_a_fix():
    with pytest.raises(tj.DtypeError, match=r"float64 .* metal .*no 64-bit floating point.*float32"):
        softmax.lower(tj.spec((8, 256), np.float64), device="metal")


def test_a_float64_scalar_argument_arrives_as_float():
    plan = layernorm.lower(tj.spec((4, 300), np.float32), tj.spec((300,), np.float32), np.float32(1e-5),
                           device="metal")
    assert "double" not in plan.kernels[0].source


def test_more_arrays_than_metal_binds_are_split_into_kernels_that_fit():
    """A sum of 32 arguments fuses into one kernel of 33 buffers, past Metal's table of 31: the schedule writes
    partial sums first (LayoutOptions.max_buffers), so every kernel fits and the sum is NumPy's."""
    from tracejit.codegen.simt import metal

    names = ", ".join(f"a{i}" for i in range(32))
    ns: dict = {}
    exec(f"def many({names}):\n    return {' + '.join(f'a{i}' for i in range(32))}", ns)
    many = tj.kernel(ns["many"])
    plan = many.lower(*[tj.spec((16,), np.float32)] * 32, device="metal")
    assert len(plan.kernels) > 1
    assert all(len(k.ir.params) <= metal.MAX_BUFFERS for k in plan.kernels)
    if emulator.emulates("metal"):
        xs = [np.random.default_rng(i).random(16).astype(np.float32) for i in range(32)]
        np.testing.assert_allclose(np.asarray(many(*xs, device="metal")), sum(xs), rtol=1e-5)


def test_a_kernel_whose_sizes_as_arguments_pass_metals_table_is_compiled_for_its_sizes():
    """A tiled product has dozens of sizes; once they change (symbolic_sizes) they are arguments
    on OpenCL, and on Metal, whose table binds 31, the kernel is rendered for its own sizes instead of
    refused (found by the layout fuzzer: a@b refused after other products had run in the process)."""
    from tracejit.codegen.simt import metal, opencl
    from tracejit.codegen.simt.mapping import RenderOptions
    from tracejit.ir.sizes import kernel_sizes
    plan = tj.kernel(lambda a, b: a @ b).lower(tj.spec((16, 64), np.float32), tj.spec((64, 128), np.float32),
                                              device="metal")
    k = plan.kernels[0].ir
    every = {slot: f"tj_s{n}" for n, slot in enumerate(sorted(kernel_sizes(k)))}
    assert len(every) > metal.MAX_BUFFERS
    assert len(opencl.render(k, RenderOptions(), frozenset(), every).launch.symbolic) == len(every)
    r = metal.render(k, RenderOptions(), frozenset(), every)
    assert r.launch.symbolic == () and r.source == metal.render(k, RenderOptions()).source


def test_warm_for_metal_renders_everywhere():
    report = tj.warm(layernorm, tj.spec((8, 512), np.float32), tj.spec((512,), np.float32), 1e-5,
                     devices=["metal"])
    assert report.ok and report[0].kernels


# ---- the MSL checker ----

@needs_clang
def test_generated_kernels_pass_the_check():
    plans = [softmax.lower(tj.spec((64, 1024), np.float32), device="metal"),
             layernorm.lower(tj.spec((300, 24), np.float32), tj.spec((24,), np.float32), 1e-5, device="metal"),
             mixed.lower(tj.spec((32, 500), np.float32), tj.spec((32, 500), np.float32), 3, device="metal"),
             mixed.lower(tj.spec((32, 500), np.float16), tj.spec((32, 500), np.float16), 3, device="metal"),
             int_ops.lower(tj.spec((200, 300), np.int8), tj.spec((200, 300), np.int8), device="metal"),
             int_ops.lower(tj.spec((200, 300), np.int64), tj.spec((200, 300), np.int64), device="metal"),
             ipow.lower(tj.spec((100,), np.int32), tj.spec((100,), np.int32), device="metal")]
    sources = {f"{k.name}_{i}": k.source for i, p in enumerate(plans) for k in p.kernels}
    assert len(sources) >= 10
    msl_check.check_many(sources)
    for name, source in sources.items():
        msl_check.check(source, name)


GOOD = """#include <metal_stdlib>
using namespace metal;

kernel void k(
        device float* out0 [[buffer(0)]],
        device const float* in0 [[buffer(1)]],
        constant float& s [[buffer(2)]],
        uint tj_gid [[thread_position_in_grid]]) {
    out0[tj_gid] = exp(in0[tj_gid]) * s;
}
"""

BROKEN = {
    "a function Metal lacks": ("exp(in0[tj_gid])", "erf(in0[tj_gid])", r"erf"),
    "double": ("out0[tj_gid] =", "double d = 1.0; out0[tj_gid] = (float)d +", r"no_double"),
    "address space": ("out0[tj_gid] = exp", "float* p = out0; p[0] = exp", r"'float \*' with .* 'device float \*'"),
    "duplicate buffer index": ("[[buffer(2)]]", "[[buffer(1)]]", r"buffer index 1 is also used by in0"),
    "unknown attribute": ("[[thread_position_in_grid]]", "[[thread_position_in_grd]]", r"unknown attribute"),
    "wrong builtin type": ("uint tj_gid", "float tj_gid", r"needs one of uint.*not `float`"),
    "buffer not a pointer": ("constant float& s", "float s", r"must be a device or constant pointer"),
    "index above 30": ("[[buffer(2)]]", "[[buffer(31)]]", r"above Metal's 30"),
}


@pytest.fixture(params=["libclang", "clang++"])
def clang(request):
    """Who checks: libclang in this process (check()'s default where its bindings are installed, as in the
    dev extra), or a clang++ process (its default elsewhere, and TRACEJIT_CLANG's): the same verdicts."""
    if request.param == "libclang":
        if msl_check._index() is None:
            pytest.skip("libclang's Python bindings are not installed (pip install libclang)")
        return None
    if msl_check.find_clang() is None:
        pytest.skip("clang++ is not installed (Debian: apt-get install clang)")
    return msl_check.find_clang()


def test_the_hand_written_reference_passes(clang):
    msl_check.check(GOOD, clang=clang)


@pytest.mark.parametrize("what", BROKEN)
def test_a_broken_kernel_fails_the_check_with_the_line(what, clang):
    old, new, message = BROKEN[what]
    source = GOOD.replace(old, new)
    assert source != GOOD
    with pytest.raises(tj.CompileError, match=message) as info:
        msl_check.check(source, "k", clang)
    assert "generated line" in str(info.value)
    with pytest.raises(tj.CompileError, match=message):   # a failing batch names the failing kernel
        msl_check.check_many({"good": GOOD, "broken": source}, clang)


@needs_clang
def test_the_checker_runs_on_files(tmp_path):
    good, bad = tmp_path / "good.metal", tmp_path / "bad.metal"
    good.write_text(GOOD)
    bad.write_text(GOOD.replace("exp(", "erf("))
    done = subprocess.run([sys.executable, "-m", "tracejit.codegen.simt.msl_check", str(good), str(bad)],
                          capture_output=True, text=True)
    assert done.returncode == 1
    assert f"{good}: ok" in done.stdout and "erf" in done.stderr


# ---- the runtime, on the CPU emulator in PyObjC's shape (the generated MSL runs) ----

@pytest.fixture
def emulated(monkeypatch):
    """The emulator's Metal device behind PyObjC's module names, as the metal runtime imports them on macOS."""
    if build.unavailable_reason() is not None:
        pytest.skip(build.unavailable_reason())
    monkeypatch.delenv("TRACEJIT_EMULATE", raising=False)   # through the modules below, as on macOS
    device = emulated_metal.Device()
    for name, module in emulated_metal.modules(device).items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(registry, "_auto", registry.default_device_name())   # never chosen automatically
    monkeypatch.setattr(metal_device, "_system_device", lambda: (device, None))
    monkeypatch.setattr(metal_device, "_OPEN", [])
    monkeypatch.setattr(registry, "_instances", {})
    for k in (softmax, layernorm, mixed, int_ops, ipow, lookup):   # plans of an earlier test hold its device
        monkeypatch.setattr(k, "_plans", OrderedDict())
    return device


def test_runtime_runs_kernels_and_keeps_results_on_the_device(emulated, rng):
    x = rng.standard_normal((64, 1024)).astype(np.float32)
    y = softmax(x, device="metal")
    assert isinstance(y, tj.Array) and y.device.name == "metal"
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(y.numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)
    w = rng.standard_normal(24).astype(np.float32)
    z = rng.standard_normal((300, 48)).astype(np.float32)[:, ::2]          # strided, read in place
    got = layernorm(z, w, 1e-5, device="metal").numpy()
    d = z - z.mean(-1, keepdims=True)
    np.testing.assert_allclose(got, d / np.sqrt((d * d).mean(-1, keepdims=True) + 1e-5) * w, rtol=1e-4, atol=1e-5)
    assert "emulated on the CPU" in tj.device("metal").description
    with pytest.raises(tj.DeviceError, match="one device"):
        tj.device("metal:1")


def test_runtime_scalars_small_ints_bools_and_float16(emulated, rng):
    a = rng.standard_normal((32, 500)).astype(np.float16)
    b = rng.standard_normal((32, 500)).astype(np.float16)
    y, count, h = mixed(a, b, 3, device="metal")
    from math import erf
    want = np.vectorize(erf)(a.astype(np.float32)).astype(np.float16) * np.float16(3) + np.where(a > b, a, b)
    np.testing.assert_allclose(y.numpy().astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)
    np.testing.assert_array_equal(count.numpy(), (a > 0).sum(-1))
    np.testing.assert_array_equal(h.numpy(), a)
    i, j = rng.integers(-100, 100, (200, 300), dtype=np.int8), rng.integers(1, 100, (200, 300), dtype=np.int8)
    for got, want in zip(int_ops(i, j, device="metal"), (i // j, i % j, i ** 2, (i & 7).max(0), (i < j).sum())):
        np.testing.assert_array_equal(got.numpy(), want)


def test_runtime_one_command_buffer_per_call_and_pooled_buffers(emulated, rng):
    x = rng.standard_normal((64, 1024)).astype(np.float32)
    softmax(x, device="metal").numpy()
    before_cbs, before_buffers = emulated.command_buffers, emulated.buffers
    for _ in range(5):
        softmax(x, device="metal")
    tj.synchronize("metal")
    assert emulated.command_buffers == before_cbs + 5
    assert emulated.buffers <= before_buffers + 2          # freed results and uploads go back to the pool
    stats = tj.device("metal").memory_stats()
    assert stats["held_blocks"] >= 1 and stats["managed_bytes"] > 0


def test_runtime_device_arrays_feed_later_calls_without_a_copy(emulated, rng):
    x = tj.asarray(rng.standard_normal((16, 256)).astype(np.float32), device="metal")
    y = softmax(softmax(x, device="metal"), device="metal")
    e = np.exp(x.numpy() - x.numpy().max(-1, keepdims=True))
    s = e / e.sum(-1, keepdims=True)
    e2 = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(y.numpy(), e2 / e2.sum(-1, keepdims=True), rtol=1e-5)


def test_runtime_integer_power_to_a_negative_exponent_raises(emulated):
    a = np.arange(1, 11, dtype=np.int32)
    np.testing.assert_array_equal(ipow(a, np.full(10, 3, np.int32), device="metal").numpy(), a ** 3)
    with pytest.raises(ValueError, match="negative integer powers"):
        ipow(a, np.full(10, -1, np.int32), device="metal")


def test_runtime_an_index_out_of_bounds_raises_numpys_index_error_and_the_next_call_works(emulated):
    table, a = np.arange(12.0, dtype=np.float32).reshape(4, 3), np.arange(1, 3, dtype=np.int32)
    with pytest.raises(tj.IndexOutOfBoundsError, match="^index -5 is out of bounds for axis 0 with size 4$"):
        lookup(table, np.array([3, -5], np.int32), a, a, device="metal")
    with pytest.raises(ValueError, match="negative integer powers"):
        lookup(table, np.array([3, 0], np.int32), a, -a, device="metal")
    got, power = lookup(table, np.array([3, -4], np.int32), a, a, device="metal")
    np.testing.assert_array_equal(got.numpy(), table[[3, -4]] * 2)
    np.testing.assert_array_equal(power.numpy(), a ** a)


def test_runtime_fewer_threads_per_pipeline_renders_smaller_threadgroups(emulated, rng):
    emulated.pipeline_threads = 64
    x = rng.standard_normal((8, 4096)).astype(np.float32)
    y = softmax(x, device="metal")
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(y.numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5)


def test_runtime_capture_replays_one_command_buffer(emulated, rng):
    x = rng.standard_normal((16, 512)).astype(np.float32)
    w = np.ones(512, np.float32)
    with tj.capture() as g:
        g.outputs = layernorm(softmax(x, device="metal"), w, 1e-5, device="metal")
    x2 = rng.standard_normal((16, 512)).astype(np.float32)
    before = emulated.command_buffers
    y = g(x2, w)
    assert emulated.command_buffers == before + 1
    s = np.exp(x2 - x2.max(-1, keepdims=True))
    s /= s.sum(-1, keepdims=True)
    d = s - s.mean(-1, keepdims=True)
    np.testing.assert_allclose(y.numpy(), d / np.sqrt((d * d).mean(-1, keepdims=True) + 1e-5), rtol=1e-4, atol=1e-5)


def test_runtime_compile_errors_name_the_kernel(emulated, monkeypatch):
    original = emulated.newLibraryWithSource_options_error_
    monkeypatch.setattr(emulated, "newLibraryWithSource_options_error_",
                        lambda src, opts, err: (None, emulated_metal.Error("program_source:5:9: error: nope")))
    with pytest.raises(tj.CompileError, match=r"rejected generated kernel [\s\S]*nope[\s\S]*generated line 5"):
        softmax(np.ones((4, 300), np.float32), device="metal")
    monkeypatch.setattr(emulated, "newLibraryWithSource_options_error_", original)


def test_runtime_scatter_add_accumulates_duplicates_and_an_index_out_of_bounds_raises(emulated):
    check_scatter_add("metal")


def test_assigned_arguments_and_out_are_written_on_metal(emulated, rng):
    f, hx, hy = check_assigned_arguments("metal", rng)
    out = tj.asarray(np.zeros(16, np.float32), device="metal")
    assert f(hx, hy, out=out, device="metal") is out
