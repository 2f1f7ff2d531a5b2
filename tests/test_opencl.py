"""The opencl target: device discovery and selection, device-resident arrays, the caching allocator,
dtype rules by capability, build errors, and the two launch modes (thread per row, group per row)."""
import dataclasses
import os
import subprocess
import sys
import textwrap
from unittest import mock

import numpy as np
import pytest
from conftest import AVAILABLE_DEVICES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import assert_close
from test_fusion import ONE_KERNEL_PROGRAMS, make_kernel
from test_fuzz import check_random_program

import tracejit as tj
from tracejit.codegen.simt import opencl, mapping as simt
from tracejit.codegen.simt.mapping import RenderOptions
from tracejit.ir.kernel_ir import KOp

pytestmark = pytest.mark.skipif("opencl" not in AVAILABLE_DEVICES, reason="no OpenCL device here")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=REPO, **env), timeout=300)


def _lower_ir(fn, *args):
    """The kernel IR of a program, lowered for the opencl device's layout."""
    return tj.kernel(fn).lower(*args, device="opencl").executable.program.kernels


# ---- discovery and selection ----

def test_devices_lists_opencl_with_platform_and_device_names():
    info = next(i for i in tj.devices() if i.name == "opencl")
    assert info.available and "opencl:0" in info.description
    assert tj.device("opencl").description in info.description


def test_a_device_whose_compiler_cannot_build_is_not_offered(monkeypatch):
    from tracejit.runtime.opencl import discovery as opencl_devices
    listed = opencl_devices._listed()
    broken = listed[0]
    monkeypatch.setattr(opencl_devices, "_build_problems",
                        {broken.int_ptr: "its compiler cannot build a one-line kernel (unknown target CPU)"})
    assert broken not in opencl_devices.all_devices()
    assert any("unknown target CPU" in r for r in opencl_devices.refused_devices())
    if len(listed) == 1:   # nothing left: the device is unavailable, and says why and what to install
        available, reason, _ = tj.runtime.opencl_device.OpenCLDevice.probe()
        assert not available and "unknown target CPU" in reason and "pocl-opencl-icd" in reason


def test_numbered_device_names_address_the_listed_devices():
    assert tj.device("opencl:0").cl_device == tj.device("opencl").cl_device or \
        os.environ.get("TRACEJIT_OPENCL_DEVICE")
    with pytest.raises(tj.DeviceError, match="opencl:99"):
        tj.device("opencl:99")
    with pytest.raises(tj.DeviceError, match="device number"):
        tj.device("opencl:gpu")


def test_environment_variable_picks_the_opencl_device_by_number_or_name():
    code = """
        import tracejit as tj
        print(tj.device("opencl").description)
    """
    by_number = _run(code, TRACEJIT_OPENCL_DEVICE="0")
    assert by_number.returncode == 0, by_number.stderr
    name = by_number.stdout.strip().split(":")[1].split("(")[0].strip()
    by_name = _run(code, TRACEJIT_OPENCL_DEVICE=name.lower()[:6])
    assert by_name.stdout.strip() == by_number.stdout.strip(), by_name.stderr
    missing = _run("""
        import tracejit as tj
        print([i.reason for i in tj.devices() if i.name == "opencl"][0])
    """, TRACEJIT_OPENCL_DEVICE="no-such-opencl-device")
    assert "no-such-opencl-device" in missing.stdout and "matches no OpenCL device" in missing.stdout


# ---- device-resident arrays ----

def test_results_stay_on_the_device_and_chained_calls_upload_nothing(monkeypatch):
    dev = tj.device("opencl")
    uploads = []
    real = dev.upload_span
    monkeypatch.setattr(dev, "upload_span", lambda a, desc: uploads.append(a.shape) or real(a, desc))
    f = tj.kernel(lambda x: x * 2.0 + 1.0, device="opencl")
    g = tj.kernel(lambda x, y: (x * y).sum(axis=1), device="opencl")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = f(x)
    assert isinstance(y, tj.Array) and y.device is dev and y.shape == (3, 4) and y.dtype == np.float32
    assert uploads == [(3, 4)]
    z = g(y, y)
    assert uploads == [(3, 4)]            # y was already there
    assert_close(z.numpy(), ((x * 2 + 1) ** 2).sum(axis=1))
    assert_close(np.asarray(z), z.numpy())


def test_a_host_array_passed_twice_is_uploaded_once(monkeypatch):
    dev = tj.device("opencl")
    uploads = []
    real = dev.upload_span
    monkeypatch.setattr(dev, "upload_span", lambda a, desc: uploads.append(1) or real(a, desc))
    x = np.arange(5, dtype=np.float32)
    assert_close(tj.kernel(lambda a, b: a * b)(x, x, device="opencl").numpy(), x * x)
    assert len(uploads) == 1


def test_changing_a_host_array_after_the_call_does_not_change_the_result():
    x = np.ones(1 << 16, np.float32)
    y = tj.kernel(lambda a: a + 1.0)(x, device="opencl")
    x[:] = 100.0                          # the upload is queued; the data was staged at the call
    assert_close(y.numpy(), np.full(1 << 16, 2.0, np.float32))


def test_arrays_move_between_devices_when_passed_to_another_device():
    x = np.arange(6, dtype=np.float32)
    on_cl = tj.asarray(x, device="opencl")
    on_numba = tj.kernel(lambda a: a * 3.0)(on_cl, device="numba")
    assert type(on_numba) is np.ndarray
    assert_close(on_numba, x * 3.0)
    back = tj.kernel(lambda a: a - 1.0)(tj.asarray(x, device="numba"), device="opencl")
    assert_close(back.numpy(), x - 1.0)


def test_empty_and_zero_dimensional_arrays_round_trip():
    f = tj.kernel(lambda a: a * 2.0, device="opencl")
    assert f(np.zeros((0, 3), np.float32)).numpy().shape == (0, 3)
    assert_close(f(np.float32(4.0)).numpy(), np.float32(8.0))
    assert_close(tj.kernel(lambda a: a.sum())(np.zeros((0,), np.float32), device="opencl").numpy(), np.float32(0))


def test_dlpack_exports_a_copy_on_the_host_and_refuses_copy_false():
    a = tj.asarray(np.arange(3, dtype=np.float32), device="opencl")
    assert a.__dlpack_device__() == (1, 0)
    assert np.from_dlpack(a).tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(BufferError, match="copy=False"):
        a.__dlpack__(copy=False)


def test_the_allocator_reuses_freed_blocks():
    dev = tj.device("opencl")
    f = tj.kernel(lambda a: a + 1.0, device="opencl")
    x = np.ones(3 << 15, np.float32)
    f(x).numpy()
    dev.synchronize()
    before = dev.memory_stats()
    assert before["held_blocks"] >= 1      # the result and the upload went back to the pool
    for _ in range(20):
        f(x).numpy()
    after = dev.memory_stats()
    assert after["managed_bytes"] - before["managed_bytes"] <= 2 * x.nbytes   # served from held blocks


# ---- dtype rules by capability ----

def test_float64_on_a_device_without_fp64_names_the_dtype_and_the_device():
    kernel = _lower_ir(lambda a: a * 2.0, np.ones(4, np.float64))[0]
    options = RenderOptions(device="opencl:0 (test device)", fp64=False)
    with pytest.raises(tj.DtypeError, match="float64.*opencl:0 \\(test device\\).*float32"):
        opencl.render(kernel, options)


def test_a_64_bit_scatter_on_a_device_without_int64_atomics_names_the_dtype_and_the_device():
    def body(x, i):
        np.add.at(x, i, 1)
        return x
    kernels = _lower_ir(body, np.zeros(1000, np.int64), np.arange(100, dtype=np.int32) % 7)
    update = next(k for k in kernels if any(x.op == KOp.ATOMIC for x in k.instrs))
    assert "atom_cmpxchg(" in opencl.render(update, RenderOptions()).source
    with pytest.raises(tj.DtypeError, match="int64 cannot run on opencl:0 \\(test device\\).*64-bit atomics.*int32"):
        opencl.render(update, RenderOptions(device="opencl:0 (test device)", atomics64=False))


def test_python_float_scalars_need_no_fp64_when_the_array_is_float32():
    f = tj.kernel(lambda a, s: a * s)
    plan = f.lower(np.ones(4, np.float32), 0.1, device="opencl")
    (compiled,) = plan.kernels
    source = opencl.render(compiled.ir, RenderOptions(fp64=False), frozenset(compiled.launch.by_value)).source
    assert "double" not in source and "const float in1" in source


def test_float16_is_storage_only_without_cl_khr_fp16_and_arithmetic_with_it():
    kernel = _lower_ir(lambda a, b: a * b + 1, np.ones(4, np.float16), np.ones(4, np.float16))[0]
    storage = opencl.render(kernel, RenderOptions(fp16=False)).source
    assert "vload_half" in storage and "vstore_half_rte" in storage and "cl_khr_fp16" not in storage
    arithmetic = opencl.render(kernel, RenderOptions(fp16=True)).source
    assert "#pragma OPENCL EXTENSION cl_khr_fp16 : enable" in arithmetic and "const half" in arithmetic
    assert "vload_half" not in arithmetic


def test_cpu_devices_use_tracejits_vectorisable_float32_math_and_gpus_the_builtins():
    kernel = _lower_ir(lambda a: np.tanh(a) + np.exp(a) + np.log(a) + tj.erf(a), np.ones(8, np.float32))[0]
    own = opencl.render(kernel, RenderOptions(own_math=True)).source
    assert all(f"tj_{f}_f32(" in own for f in ("exp", "tanh", "log", "erf"))
    assert not any(call in own for call in ("floor(", "mad(", "copysign(", "fabs("))  # PoCL: scalar calls
    builtin = opencl.render(kernel, RenderOptions(own_math=False)).source
    assert "tj_exp_f32" not in builtin and "tanh(" in builtin
    dev = tj.device("opencl")
    assert dev.options.own_math == (not dev.cl_device.type & 4)   # CL_DEVICE_TYPE_GPU


@pytest.mark.parametrize("fn", ["exp", "tanh", "log", "erf"])
def test_own_float32_math_is_within_one_ulp_of_the_correctly_rounded_result(fn):
    if not tj.device("opencl").options.own_math:
        pytest.skip("this device's own exp/tanh/log/erf are used (OpenCL allows them a few ulp)")
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.integers(0, 2 ** 32, 1 << 18, dtype=np.uint64).astype(np.uint32).view(np.float32),
                        rng.standard_normal(1 << 16).astype(np.float32) * 4,
                        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 88.7, 89.0, -103.9, 0.625, 0.9,
                                  4.0], np.float32)])
    f = tj.kernel(lambda a: getattr(tj, fn)(a), device="opencl")
    with np.errstate(all="ignore"):
        got = f(x).numpy()
        if fn == "erf":
            import math
            x = x[::16]
            got = got[::16]
            exact = np.array([math.erf(v) for v in x.astype(np.float64)]).astype(np.float32)
        else:
            exact = getattr(np, fn)(x.astype(np.float64)).astype(np.float32)
    assert np.array_equal(np.isnan(got), np.isnan(exact))
    ordered = [np.where(v.view(np.int32) < 0, -(v.view(np.int32) & 0x7FFFFFFF), v.view(np.int32)).astype(np.int64)
               for v in (got, exact)]
    assert np.abs(ordered[0] - ordered[1])[~np.isnan(exact)].max() <= 1


def _ordered_bits(v: np.ndarray) -> np.ndarray:
    """Integers in the floats' order, one apart for adjacent floats (ulps between two values)."""
    bits, top = (v.view(np.int64), 0x7FFFFFFFFFFFFFFF) if v.dtype == np.float64 else (v.view(np.int32), 0x7FFFFFFF)
    return np.where(bits < 0, -(bits & top), bits).astype(np.int64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn", ["exp", "tanh"])
def test_own_exp_and_tanh_give_the_numba_devices_bits_and_float64_is_within_two_ulp(fn, dtype):
    """A CPU device's exp and tanh (float64 too: its library's are scalar calls) are the numba device's
    algorithms, integer steps and all: the same bits on every input, NaN, infinities, subnormal results."""
    if not tj.device("opencl").options.own_math:
        pytest.skip("this device's own exp/tanh are used (OpenCL allows them a few ulp)")
    rng = np.random.default_rng(11)
    width = np.uint64 if dtype == np.float64 else np.uint32
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 0.625, -0.625, 19.1, -19.1, 88.72, 88.73, -87.4, -103.9,
               709.78, 709.79, 710.0, -745.1, -745.2, -746.0, 5e-324, -5e-324]
    x = np.concatenate([rng.integers(0, np.iinfo(width).max, 1 << 16, dtype=width).view(dtype),
                        np.linspace(-800, 800, 1 << 14, dtype=dtype), np.linspace(-1, 1, 1 << 12, dtype=dtype),
                        np.array(special, dtype)])
    f = tj.kernel(lambda a: getattr(np, fn)(a))
    assert f"tj_{fn}_f{8 * np.dtype(dtype).itemsize}(" in f.lower(x, device="opencl").kernels[0].source
    with np.errstate(all="ignore"):
        got, numba_device, exact = f(x, device="opencl").numpy(), f(x, device="numba"), getattr(np, fn)(x)
    assert np.array_equal(np.isnan(got), np.isnan(exact))
    finite = ~np.isnan(exact)
    np.testing.assert_array_equal(_ordered_bits(got)[finite], _ordered_bits(numba_device)[finite])
    if dtype == np.float64:
        assert np.abs(_ordered_bits(got) - _ordered_bits(exact))[finite].max() <= (1 if fn == "exp" else 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("width", [1, 7, 63, 64, 65, 200, 1024])
def test_row_kernels_of_a_cpu_device_match_numpy_at_every_row_length_with_nan_and_inf(width, dtype):
    """Softmax and layernorm on many rows: a row per work-item, runs of 64 (four vectors at a time) where the
    length is a multiple of 64; a NaN or an infinity in a row reaches that row's results only."""
    rng = np.random.default_rng(width)
    x = (rng.standard_normal((300, width)) * 3).astype(dtype)
    x[5, 0], x[7, -1], x[9, width // 2] = np.nan, np.inf, -np.inf

    @tj.kernel
    def rows(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        m = x.mean(axis=-1, keepdims=True)
        return e / e.sum(axis=-1, keepdims=True), (x - m) / np.sqrt(((x - m) ** 2).mean(axis=-1, keepdims=True) + 1e-5)

    with np.errstate(all="ignore"):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        m = x.mean(axis=-1, keepdims=True)
        expected = e / e.sum(axis=-1, keepdims=True), (x - m) / np.sqrt(((x - m) ** 2).mean(axis=-1, keepdims=True) + 1e-5)
        got = rows(x, device="opencl")
    for g, want in zip(got, expected):
        assert g.dtype == want.dtype
        assert_close(g.numpy(), want, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6 if dtype == np.float32 else 1e-13)


def test_device_capabilities_are_queried_not_assumed():
    dev = tj.device("opencl")
    extensions = dev.cl_device.extensions.split()
    assert dev.options.fp64 == ("cl_khr_fp64" in extensions)
    assert dev.options.fp16 == ("cl_khr_fp16" in extensions)
    assert dev.options.max_local_size == dev.cl_device.max_work_group_size


# ---- build errors ----

def test_a_build_error_shows_the_compiler_message_and_the_generated_line():
    dev = tj.device("opencl")
    source = "__kernel void broken(__global float* out) {\n    out[0] = undefined_name;\n}\n"
    with pytest.raises(tj.CompileError) as caught:
        dev._build("broken", source)
    message = str(caught.value)
    assert "undefined_name" in message and "generated line 2: out[0] = undefined_name;" in message
    assert "broken" in message and "opencl" in message


# ---- a program's kernels built together ----

def _standardised_sorted_summed(x):
    m = x.mean(axis=0)
    return (x - m) / x.std(axis=0) * 1.0625, np.sort(x * 3.0625, axis=1), np.cumsum(x * 5.0625, axis=1)


def _programs_of(plan) -> set:
    from tracejit.runtime.cache.key import shared_source
    dev = tj.device("opencl")
    return {id(dev._programs[shared_source(k.source, k.name)][0]) for k in plan.kernels}


def test_the_kernels_of_a_plan_are_one_opencl_program():
    """A driver pays a cost per program besides its kernels' code (PoCL: about 110 ms of clang reading OpenCL's
    headers): a plan's kernels are built, cached and loaded as one program. (Constants of this test's own: a kernel
    this worker built before would be left out.)"""
    x = np.random.default_rng(0).random((40, 23))
    f = tj.kernel(_standardised_sorted_summed)
    assert_close(f(x, device="opencl"), _standardised_sorted_summed(x))
    plan = f.lower(x, device="opencl")
    assert len(plan.kernels) >= 3 and len(_programs_of(plan)) == 1
    assert not any(k.cached for k in plan.kernels) or all(k.cached for k in plan.kernels)


def test_kernels_whose_helpers_clash_are_built_one_by_one(monkeypatch):
    """Two helpers of one name that differ cannot share a program: it fails to build, and each kernel is built alone
    (and computes NumPy's answer)."""
    render = opencl.render

    def clashing(*args, **kwargs):
        r = render(*args, **kwargs)  # (the same kernel's helper the same each time: build() finds what was built)
        pieces = (f"inline int tj_test_helper(void) {{ return {len(r.source)}; }}", *r.pieces)
        return dataclasses.replace(r, source="\n\n".join(pieces), pieces=pieces)

    monkeypatch.setattr(opencl, "render", clashing)
    x = np.random.default_rng(1).random((40, 23))
    body = lambda x: _standardised_sorted_summed(x * 0.5)  # noqa: E731
    f = tj.kernel(body)
    assert_close(f(x, device="opencl"), body(x))
    plan = f.lower(x, device="opencl")
    assert len(_programs_of(plan)) == len(plan.kernels) >= 3, (len(_programs_of(plan)), len(plan.kernels))


# ---- launch modes ----

def test_long_rows_get_a_work_group_and_short_rows_a_work_item():
    # dynamic=False: sizes as constants (a row length that is an argument runs one work-item per row on a
    # CPU whatever the length, and a kernel another test met at other sizes may have made it so)
    long_rows = tj.kernel(lambda x: x.sum(axis=1), dynamic=False).lower(np.ones((8, 4096), np.float32),
                                                                        device="opencl")
    short_rows = tj.kernel(lambda x: x.sum(axis=1), dynamic=False).lower(np.ones((4096, 8), np.float32),
                                                                         device="opencl")
    (group,), (thread,) = long_rows.kernels, short_rows.kernels
    assert group.launch.mode == "group" and group.launch.global_items == 8 * group.launch.local_size
    assert "barrier(CLK_LOCAL_MEM_FENCE)" in group.source and "__local" in group.source
    assert thread.launch.mode == "thread" and "barrier" not in thread.source


def test_softmax_rows_are_kept_in_local_memory_in_group_mode():
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    # dynamic=False: the row length a constant (where it is an argument, a CPU device runs a row per
    # work-item and keeps nothing in local memory; another test may have met this kernel at other sizes)
    (kernel,) = tj.kernel(softmax, dynamic=False).lower(np.ones((4, 1024), np.float32), device="opencl").kernels
    assert kernel.launch.mode == "group"
    body = kernel.source.split("__kernel void")[-1]   # after any helper functions
    assert "__local float" in body and body.count("exp") == 1


REDUCTIONS = {
    "sum": (lambda x: x.sum(axis=1), "float32"),
    "mean_and_var": (lambda x: (x.mean(axis=1), ((x - x.mean(axis=1, keepdims=True)) ** 2).mean(axis=1)), "float64"),
    "max_with_nan": (lambda x: np.maximum(x, 0.25).max(axis=1), "float32"),
    "int_sum_prod": (lambda x: ((x * 7).astype(np.int32).sum(axis=1), ((x > 0.5) + 1).prod(axis=0)), "float32"),
    "bool_any_all": (lambda x: ((x > 0.9).max(axis=1), (x > 0.1).min(axis=0)), "float32"),
    "float16": (lambda x: x.sum(axis=1) + x.max(axis=1), "float16"),
}


@pytest.mark.parametrize("name", list(REDUCTIONS) + list(ONE_KERNEL_PROGRAMS))
def test_group_mode_matches_numpy_for_every_reduction(name, monkeypatch, rng):
    """Every row kernel forced into group mode (a work-group and tree reduction even for short rows)."""
    monkeypatch.setattr(simt, "GROUP_MIN_REDUCE", 2)
    if name in REDUCTIONS:
        fn, dtype = REDUCTIONS[name]
        x = rng.random((5, 37)).astype(dtype)
        if name == "max_with_nan":
            x[2, 7] = np.nan
        got = tj.kernel(fn, dynamic=False)(x, device="opencl")   # (sizes as constants: see above)
        expected = fn(x)
        modes = [k.launch.mode for k in tj.kernel(fn, dynamic=False).lower(x, device="opencl").kernels]
    else:
        program, make_inputs = ONE_KERNEL_PROGRAMS[name]
        inputs = make_inputs(rng)
        got = make_kernel(program)(*inputs, device="opencl")
        expected = program(*inputs, ns=np)
        modes = [k.launch.mode for k in make_kernel(program).lower(*inputs, device="opencl").kernels]
    if isinstance(expected, tuple):
        got = tuple(np.asarray(g) for g in got)
    assert_close(got if isinstance(got, tuple) else np.asarray(got), expected, atol=1e-5)
    assert "group" in modes or name in ONE_KERNEL_PROGRAMS


def test_an_allocation_the_device_cannot_make_is_a_device_error():
    dev = tj.device("opencl")
    too_big = dev.cl_device.max_mem_alloc_size * 4
    with pytest.raises(tj.DeviceError, match="could not allocate"):
        dev.allocate((too_big,), np.dtype("float32"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
@given(data=st.data())
def test_random_programs_match_numpy_with_every_reduction_in_group_mode(data):
    """The fuzzer's programs are small, so they normally run a row per work-item: force work-groups."""
    with mock.patch.object(simt, "GROUP_MIN_REDUCE", 2):
        check_random_program(data, "opencl")


def test_a_work_group_limit_that_is_not_a_power_of_two_still_gives_a_whole_tree(monkeypatch, rng):
    dev = tj.device("opencl")
    monkeypatch.setattr(dev, "options", dataclasses.replace(dev.options, max_local_size=200, group_max_rows=None))
    x = rng.random((3, 1000)).astype(np.float32)
    f = tj.kernel(lambda a: a.sum(axis=1), device="opencl")
    (kernel,) = f.lower(x).kernels
    assert kernel.launch.mode == "group" and kernel.launch.local_size == 128
    assert_close(f(x).numpy(), x.sum(axis=1), rtol=1e-6)


def test_index_arithmetic_is_32_bit_until_a_buffer_needs_more():
    f = tj.kernel(lambda a: a * 2.0)
    small = f.lower(tj.spec((1 << 20,), "float32"), device="opencl").kernels[0].source
    large = f.lower(tj.spec((1 << 31,), "float32"), device="opencl").kernels[0].source
    assert "const int v" in small and "long" not in small
    assert "const long v" in large


def test_unwritable_home_names_pocl_cache_dir_not_a_missing_platform(tmp_path):
    """PoCL lists no device when it cannot create its cache directory (a service user's HOME): the
    reason says so, and how to fix it, instead of suggesting to install OpenCL."""
    blocker = tmp_path / "a_file"
    blocker.write_text("")            # a path under a regular file cannot be created, even by root
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "POCL_CACHE_DIR")}
    env.update(HOME=str(blocker / "home"), PYTHONPATH=REPO)
    code = """
        import tracejit as tj
        info = next(i for i in tj.devices() if i.name == "opencl")
        print("AVAILABLE" if info.available else "REASON " + info.reason)
        try:
            tj.kernel(lambda x: x + 1, device="opencl")(1.0)
        except tj.DeviceError as e:
            print("ERROR " + str(e))
    """
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                         timeout=300).stdout
    if "AVAILABLE" in out:
        pytest.skip("this OpenCL platform needs no writable cache directory")
    reason = next(line for line in out.splitlines() if line.startswith("REASON "))
    error = next(line for line in out.splitlines() if line.startswith("ERROR "))
    for text in (reason, error):
        assert "POCL_CACHE_DIR" in text and "cache directory" in text and "pip install" not in text, text


@pytest.mark.parametrize("n", [1024, 1000, 4096])
def test_cpu_row_sums_add_runs_of_64_in_float_and_the_runs_in_double(n):
    """A CPU device's work-item sums its float32 row in double (as accurate as NumPy's pairwise sum); in
    runs of 64 floats added in double it costs no conversion per element (PoCL softmax 5.9 -> 4.3 ms).
    A row that is no multiple of 64 keeps the double accumulator, unless the row length is an argument of
    the kernel (another size of this kernel was met first): then its last run is shorter."""
    if tj.device("opencl").cl_device.type & 4:   # CL_DEVICE_TYPE_GPU: rows get work-groups there
        pytest.skip("a GPU reduces long rows in work-groups")
    rng = np.random.default_rng(n)
    x = (rng.standard_normal((64, n)) * 1000 + 3).astype(np.float32)
    f = tj.kernel(lambda x: (np.exp(x / 1000) * x).sum(axis=-1))
    lowered = f.lower(x, device="opencl").kernels[0]
    assert ("_run = " in lowered.source) == (n % simt.WIDE_BLOCK == 0 or bool(lowered.launch.symbolic))
    exact = (np.exp(x.astype(np.float64) / 1000) * x).sum(-1)
    ours = np.asarray(f(x, device="opencl")).astype(np.float64)
    numpy_error = np.abs((np.exp(x / 1000) * x).sum(-1).astype(np.float64) - exact).max()
    assert np.abs(ours - exact).max() <= max(numpy_error, 1e-6 * np.abs(exact).max())


# ---- products and sorts by the host's libraries on a CPU device (runtime/opencl/host_calls.py) ----

def _cpu_device() -> bool:
    return not tj.device("opencl").layout.tiled


@pytest.mark.skipif("opencl" not in AVAILABLE_DEVICES or not _cpu_device(), reason="an OpenCL GPU renders its products")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_on_a_cpu_device_run_by_blas_on_the_mapped_buffers(dtype, rng):
    """A product of device arrays, of a transposed view, beside fused element-wise work before and after it, and a
    batched one: BLAS on the buffers mapped into the host (no generated product), values as NumPy's."""
    a, b = rng.standard_normal((96, 200)).astype(dtype), rng.standard_normal((200, 72)).astype(dtype)
    bias, w = rng.standard_normal(72).astype(dtype), rng.standard_normal((72, 200)).astype(dtype)
    da, db = tj.asarray(a, device="opencl"), tj.asarray(b, device="opencl")
    linear = tj.kernel(lambda a, b, bias: np.tanh((a * 2) @ b + bias))
    plan = linear.lower(da, db, bias, device="opencl")
    assert any("BLAS" in k.source for k in plan.kernels), [k.source[:80] for k in plan.kernels]
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(np.asarray(linear(da, db, bias, device="opencl")), np.tanh((a * 2) @ b + bias), rtol=tol,
                               atol=tol)
    transposed = tj.kernel(lambda a, w: a @ w.T)
    np.testing.assert_allclose(np.asarray(transposed(a, w, device="opencl")), a @ w.T, rtol=tol, atol=tol)
    x, y = rng.standard_normal((3, 40, 50)).astype(dtype), rng.standard_normal((3, 50, 30)).astype(dtype)
    np.testing.assert_allclose(np.asarray(tj.kernel(np.matmul)(x, y, device="opencl")), x @ y, rtol=tol, atol=tol)


@pytest.mark.skipif("opencl" not in AVAILABLE_DEVICES or not _cpu_device(), reason="an OpenCL GPU renders its products")
def test_host_products_in_a_chain_each_see_the_kernels_before_them(rng):
    """Products by the host between kernels, one buffer passed twice (mapped once), each waiting on one
    event for the kernels before it: every product reads what the kernel before it wrote, on every call."""
    a = rng.standard_normal((64, 96)).astype(np.float32)

    @tj.kernel
    def chain(a):
        g = np.tanh(a) @ np.tanh(a).T      # the same buffer on both sides
        h = np.exp(g * 0.01) @ (a * 2)     # a kernel, then a product of two kernels' results
        return np.maximum(h, 0) @ a.T + 1

    assert sum("BLAS" in k.source for k in chain.lower(a, device="opencl").kernels) == 3
    t = np.tanh(a)
    expected = np.maximum(np.exp(t @ t.T * 0.01) @ (a * 2), 0) @ a.T + 1
    da = tj.asarray(a, device="opencl")
    for _ in range(3):
        np.testing.assert_allclose(chain(da, device="opencl").numpy(), expected, rtol=1e-4, atol=1e-3)


@pytest.mark.skipif("opencl" not in AVAILABLE_DEVICES or not _cpu_device(), reason="an OpenCL GPU renders its sorts")
def test_a_long_sort_on_a_cpu_device_is_numpys_on_the_mapped_buffer_and_chains_with_kernels(rng):
    x = rng.standard_normal(200_000).astype(np.float32)
    f = tj.kernel(lambda x: np.sort(np.abs(x))[::-1][:10] * 2)
    assert any("numpy" in k.source and k.source.startswith("# run as") for k in f.lower(x, device="opencl").kernels)
    np.testing.assert_array_equal(np.asarray(f(x, device="opencl")), np.sort(np.abs(x))[::-1][:10] * 2)


@pytest.mark.skipif("opencl" not in AVAILABLE_DEVICES or not _cpu_device(), reason="an OpenCL GPU renders its products")
def test_host_calls_replay_in_a_captured_graph_and_show_in_a_profile(rng):
    a, b = rng.standard_normal((64, 64)).astype(np.float32), rng.standard_normal((64, 64)).astype(np.float32)
    f = tj.kernel(lambda a, b: np.maximum(a @ b, 0))
    da, db = tj.asarray(a, device="opencl"), tj.asarray(b, device="opencl")
    with tj.capture() as g:
        out = g.outputs = f(da, db, device="opencl")
    g.replay()
    np.testing.assert_allclose(np.asarray(out), np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)
    a2 = rng.standard_normal((64, 64)).astype(np.float32)
    out2 = g(tj.asarray(a2, device="opencl"), db)
    np.testing.assert_allclose(np.asarray(out2), np.maximum(a2 @ b, 0),
                               rtol=1e-4, atol=1e-4)
    with tj.profile() as p:
        f(da, db, device="opencl")
    assert any("matmul" in e.name and e.clock == "wall" for e in p.launches), [e.name for e in p.launches]


def test_the_queues_are_finished_before_the_interpreter_exits():
    """A call returns with its kernels enqueued; PoCL may still be compiling one on its own thread when the
    script ends, and the exit then destroyed LLVM under it (a segmentation fault after the last line, in about
    one round of fifteen of six processes started at once). tracejit waits for every opened queue at exit."""
    out = _run("""
        import numpy as np, tracejit as tj
        f = tj.kernel(lambda a: np.exp(a - a.max(axis=-1, keepdims=True)))
        dev = tj.device("opencl")
        f(np.ones((64, 256), np.float32), device=dev)
        dev.synchronize = lambda: print("finished at exit")
        print("last line")
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["last", "line", "finished", "at", "exit"]


def test_a_device_that_built_the_check_kernel_is_not_checked_again_in_a_later_process(tmp_path):
    """Each device builds a one-line kernel before it is offered (discovery._build_problem); the cache directory
    records that it built on this driver and CPU, so a later process skips that build (45 ms a device). A
    damaged record is no record."""
    code = """
        import tracejit.runtime.opencl.discovery as discovery
        checks, build = [], discovery.build_program
        def counted(context, d, source, options):
            checks.extend([source] if source == discovery._CHECK_SOURCE else [])
            return build(context, d, source, options)
        discovery.build_program = counted
        import tracejit as tj
        tj.device("opencl")
        print(len(discovery.all_devices()), len(checks))
    """
    first = _run(code, TRACEJIT_CACHE_DIR=str(tmp_path))
    assert first.returncode == 0, first.stderr
    devices, checked = map(int, first.stdout.split())
    assert checked == devices >= 1
    records = sorted((tmp_path / "host").glob("opencl-*"))
    assert len(records) == devices
    second = _run(code, TRACEJIT_CACHE_DIR=str(tmp_path))
    assert second.stdout.split() == [str(devices), "0"], second.stderr
    records[0].write_bytes(b"garbage")
    third = _run(code, TRACEJIT_CACHE_DIR=str(tmp_path))
    assert third.stdout.split() == [str(devices), "1"], third.stderr
