"""The webgpu target: WGSL without an adapter, its dtype rules, the adapter's limits (storage buffers per
stage, workgroups per dimension), validation errors, the buffer pool. The device-parametrised suite runs
on webgpu too (Vulkan/lavapipe or OpenGL/llvmpipe here)."""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import tracejit as tj
from tracejit.codegen.simt import wgsl
from tracejit.runtime.webgpu.compiler import WebGPUTarget

REPO = Path(__file__).resolve().parents[1]
INFO = {i.name: i for i in tj.devices()}["webgpu"]
needs_webgpu = pytest.mark.skipif(not INFO.available, reason=f"no WebGPU adapter here: {INFO.reason}")


@tj.kernel
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_lowering_gives_wgsl_without_creating_an_adapter():
    script = ("import sys, numpy as np, tracejit as tj\n"
              "@tj.kernel\ndef f(x):\n    return (x - x.max(axis=-1, keepdims=True)).sum(axis=-1)\n"
              "plan = f.lower(tj.spec((64, 1024), np.float32), device='webgpu')\n"
              "src = plan.kernels[0].source\n"
              "print('wgpu' in sys.modules, '@compute @workgroup_size(' in src, 'workgroupBarrier();' in src, "
              "'var<workgroup>' in src)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True", "True", "True"]


def test_64_bit_dtypes_fail_naming_the_dtype_the_device_and_what_to_use():
    options = wgsl.WGSLOptions(device="webgpu (test)")
    with pytest.raises(tj.DtypeError, match=r"float64 is not supported on webgpu \(test\).*float32"):
        wgsl.storage_dtype(np.dtype("float64"), options)
    with pytest.raises(tj.DtypeError, match=r"int64 .*int32"):
        wgsl.storage_dtype(np.dtype("int64"), options)
    with pytest.raises(tj.DtypeError, match="shader-f16"):
        wgsl.storage_dtype(np.dtype("float16"), options)
    assert wgsl.storage_dtype(np.dtype("float16"), replace(options, f16=True)) == np.float16
    assert wgsl.storage_dtype(np.dtype("bool"), options) == np.uint32      # one 32-bit word per element
    with pytest.raises(tj.DtypeError, match="float64"):
        softmax.lower(tj.spec((4, 8), np.float64), device="webgpu")


def _program(n_inputs: int, size: int):
    names = [f"a{i}" for i in range(n_inputs)]
    src = f"def f({', '.join(names)}):\n    return {' + '.join(names)}\n"
    namespace = {}
    exec(src, namespace)
    kernel = tj.kernel(namespace["f"])
    return kernel, [tj.spec((size,), np.float32)] * n_inputs


def test_more_inputs_than_storage_buffers_per_stage_fail_clearly():
    kernel, specs = _program(9, 64)
    traced = kernel.trace(*specs)
    program = traced.program(tj.device("numba").layout)
    (k,) = program.kernels
    with pytest.raises(tj.UnsupportedError, match="10 arrays.*allows 8 storage buffers per shader stage"):
        wgsl.render(k, wgsl.WGSLOptions(max_storage_buffers=8))
    assert wgsl.render(k, wgsl.WGSLOptions(max_storage_buffers=10)).buffers == tuple(range(10))


def test_more_workgroups_than_one_dimension_allows_dispatch_in_two():
    kernel, specs = _program(2, 300_000)
    (k,) = kernel.trace(*specs).program(tj.device("numba").layout).kernels
    r = wgsl.render(k, wgsl.WGSLOptions(max_workgroups=1000, max_local_size=64))
    x, y = r.groups
    local = r.launch.local_size
    assert x == 1000 and x * y * local >= 300_000 and f"gid.y * nwg.x * {local}u" in r.source
    assert r.launch.size == 300_000 and "tj_scalars.tj_items" in r.source   # the size is the uniform's


def test_loops_beyond_llvmpipes_limit_share_a_work_group_or_are_refused():
    """Mesa's llvmpipe stops an invocation's loops after 65535 iterations and goes on: a row of 200000
    summed by one invocation would silently sum 65535 of them. With the limit set (webgpu_device does on llvmpipe),
    such a row gets a work-group however many rows there are; a nest no group can share is refused."""
    long_rows = tj.kernel(lambda x: x.sum(axis=1)).trace(tj.spec((64, 200_000), "float32"))
    (k,) = long_rows.program(tj.device("numba").layout).kernels
    limited = wgsl.WGSLOptions(max_local_size=256, group_max_rows=32, max_loop=65535)
    assert "workgroupBarrier" in wgsl.render(k, limited).source
    assert "workgroupBarrier" not in wgsl.render(k, replace(limited, max_loop=None)).source
    scan_of_scan = tj.kernel(lambda x: np.cumsum(np.cumsum(x, axis=1), axis=1)).trace(tj.spec((64, 70_000), "float32"))
    (k,) = scan_of_scan.program(tj.device("numba").layout).kernels
    with pytest.raises(tj.UnsupportedError, match="65535"):
        wgsl.render(k, limited)


LLVMPIPE = wgsl.WGSLOptions(max_local_size=1024, group_max_rows=32, max_loop=65535, private_max=256,
                            local_bytes=32768)


def _kernel(body, *specs):
    (k,) = tj.kernel(body).trace(*specs).program(WebGPUTarget.layout).kernels
    return k


def test_every_loop_of_an_invocation_and_a_sorts_network_count_against_llvmpipes_budget():
    """llvmpipe's budget is one per invocation, not per loop nest (measured: a loop of 40000 after one of
    40000 ran 25534 times), and a sort's bitonic network is loops too: a softmax row of 30000 is three
    loops of 30000, a row of 2000 sorted by one invocation is 67584 steps. Both ran in one invocation per
    row past 32 rows, silently wrong; they get a work-group each."""
    softmax_rows = _kernel(softmax.fn, tj.spec((64, 30_000), "float32"))
    sort_rows = _kernel(lambda x: np.sort(x, axis=1), tj.spec((64, 2000), "float32"))
    short_sort_rows = _kernel(lambda x: np.sort(x, axis=1), tj.spec((64, 1000), "float32"))
    for k, mode in [(softmax_rows, "group"), (sort_rows, "group"), (short_sort_rows, "thread")]:
        assert wgsl.render(k, LLVMPIPE).launch.mode == mode, k.name
        assert wgsl.render(k, replace(LLVMPIPE, max_loop=None)).launch.mode == "thread", k.name


def test_long_arrays_of_an_invocation_live_in_its_slice_of_work_group_memory():
    """llvmpipe compiles an indexed private array in time growing with the square of its length (a sort's
    row of 1024: 25 s at the first launch; 2048: about 100 s): past private_max, each invocation's keys and
    positions are its slice of a work-group array, the work-group as large as the memory holds them."""
    k = _kernel(lambda x: np.argsort(x, axis=1).astype(np.int32), tj.spec((64, 1000), "float32"))
    r = wgsl.render(k, LLVMPIPE)
    assert r.launch.mode == "thread" and r.launch.local_size == 4 and "@workgroup_size(4)" in r.source
    assert r.source.count(", 1024>, 4>;") == 2 and "var<workgroup>" in r.source and "array<f32, 1024>;" not in r.source
    private = wgsl.render(k, replace(LLVMPIPE, private_max=None)).source
    assert "var<workgroup>" not in private and "array<f32, 1024>;" in private and "@workgroup_size(256)" in private
    short = wgsl.render(_kernel(lambda x: np.sort(x, axis=1), tj.spec((64, 200), "float32")), LLVMPIPE).source
    assert "var<workgroup>" not in short and "array<f32, 256>;" in short


@needs_webgpu
@pytest.mark.parametrize(("shape", "mode"), [((40, 2000), "group"), ((300, 300), "thread")], ids=str)
def test_many_long_rows_sort_on_this_adapter_in_two_dimensional_dispatches(shape, mode, monkeypatch, rng):
    """Past its work-groups' rows (set to 4 here, whatever the cores) and past a dispatch dimension (set to 7
    work-groups): rows of 2000 each get a work-group (one invocation's network passes llvmpipe's budget),
    rows of 300 an invocation each, with their arrays in slices of work-group memory on llvmpipe."""
    dev = tj.device("webgpu")
    monkeypatch.setattr(dev, "options", replace(dev.options, group_max_rows=4, max_workgroups=7))
    x = rng.integers(-20, 20, shape).astype(np.float32)
    x[rng.random(shape) < 0.05] = np.nan

    def body(x):
        values, positions = tj.topk(x, 3)
        return np.sort(x, axis=1), np.argsort(x, axis=1).astype(np.int32), values, positions.astype(np.int32)

    kernel = tj.kernel(body)
    launches = [k.rendered for k in kernel.lower(x, device="webgpu").kernels if "sort" in k.name]
    assert len(launches) == 3 and all(r.groups[1] > 1 for r in launches)
    if dev.options.max_loop is not None:   # llvmpipe
        assert {r.launch.mode for r in launches} == {mode}
    got = [np.asarray(g) for g in kernel(x, device="webgpu")]
    nan = np.isnan(x)
    order = np.lexsort((np.where(nan, 0, -x), ~nan), axis=1)[:, :3]
    for g, w in zip(got, (np.sort(x, axis=1), np.argsort(x, axis=1, kind="stable"),
                          np.take_along_axis(x, order, 1), order)):
        np.testing.assert_array_equal(g, w)


@needs_webgpu
def test_rows_whose_loops_together_pass_llvmpipes_budget_are_right(monkeypatch, rng):
    dev = tj.device("webgpu")
    monkeypatch.setattr(dev, "options", replace(dev.options, group_max_rows=4))
    x = rng.standard_normal((16, 30_000)).astype(np.float32)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(tj.kernel(softmax.fn)(x, device="webgpu").numpy(), e / e.sum(axis=-1, keepdims=True),
                               rtol=1e-5, atol=1e-9)


@needs_webgpu
def test_long_rows_on_this_adapter_are_summed_whole(rng):
    x = rng.random((64, 200_000), dtype=np.float32)
    got = tj.kernel(lambda a: a.sum(axis=1))(x, device="webgpu").numpy()
    np.testing.assert_allclose(got, x.astype(np.float64).sum(axis=1), rtol=1e-5)


@needs_webgpu
def test_two_dimensional_dispatch_computes_every_element(monkeypatch, rng):
    dev = tj.device("webgpu")
    monkeypatch.setattr(dev, "options", replace(dev.options, max_workgroups=7))
    x = rng.standard_normal(10_000).astype(np.float32)
    y = rng.standard_normal(10_000).astype(np.float32)
    f = tj.kernel(lambda a, b: a * 2 + b)
    plan = f.lower(x, y, device="webgpu")
    assert plan.kernels[0].rendered.groups[1] > 1
    np.testing.assert_allclose(f(x, y, device="webgpu").numpy(), x * 2 + y, rtol=1e-6)


@needs_webgpu
def test_a_wgsl_validation_error_names_the_message_and_the_generated_line():
    dev = tj.device("webgpu")
    # sizes as constants: a work-group per row of 300 (a row length that is an argument, as another test may
    # have made this kernel's, runs a work-item per row on a CPU adapter)
    rows = tj.kernel(softmax.fn, dynamic=False)
    good = rows.lower(tj.spec((4, 300), np.float32), device="webgpu").kernels[0].rendered
    broken = replace(good, source=good.source.replace("workgroupBarrier();", "workgroupBarrier(;", 1))
    with pytest.raises(tj.CompileError) as e:
        dev._pipeline(broken)
    text = str(e.value)
    assert "WebGPU rejected generated WGSL kernel" in text and "generated line" in text and "workgroupBarrier(;" in text


@needs_webgpu
def test_small_integers_and_bools_round_trip_and_wrap_at_their_width(rng):
    a = rng.integers(-128, 128, 500).astype(np.int8)
    b = rng.integers(0, 256, 500).astype(np.uint8)
    f = tj.kernel(lambda a, b: (a * 3 + 100, b * 7, a > 0, (a // 3) % 5))
    got = [np.asarray(g) for g in f(a, b, device="webgpu")]
    with np.errstate(all="ignore"):
        expected = [a * np.int8(3) + np.int8(100), b * np.uint8(7), a > 0, (a // 3) % 5]
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype
        np.testing.assert_array_equal(g, e)


@needs_webgpu
def test_the_buffer_pool_reuses_freed_buffers():
    dev = tj.device("webgpu")
    a = tj.asarray(np.ones(4096, np.float32), device="webgpu")
    before = dev.memory_stats()["managed_bytes"]
    del a
    b = tj.asarray(np.ones(4096, np.float32), device="webgpu")
    assert dev.memory_stats()["managed_bytes"] == before and b.numpy()[0] == 1


_LEAK = """
import gc, sys, numpy as np, psutil, tracejit as tj
@tj.kernel
def softmax(a):
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
rng, shapes = np.random.default_rng(0), [(1, 7), (16, 33), (64, 300)]
def calls(n):
    for _ in range(n):
        np.asarray(softmax(rng.standard_normal(shapes[rng.integers(3)]).astype(np.float32), device="webgpu"))
calls(300); gc.collect(); before = psutil.Process().memory_info().rss
calls(1000); gc.collect()
print((psutil.Process().memory_info().rss - before) // 1000)
"""


@pytest.mark.skipif(not tj.devices() or not any(d.name == "webgpu" and d.available for d in tj.devices()),
                    reason="no webgpu adapter")
def test_calls_of_one_kernel_in_random_shape_order_keep_no_memory():
    # lavapipe recompiled the (1, 7) kernel at each of its calls with its uniform's values inlined and kept the
    # code (~88 KB a call, 2.9 ms instead of 0.3); its scalars now sit in a storage buffer there (webgpu/device.py)
    done = subprocess.run([sys.executable, "-c", _LEAK], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) < 4096, f"{done.stdout.split()[-1]} bytes kept per call"
