"""The cuda runtime's host side on a machine without a GPU, twice: on tests/fake_cuda.py, a stand-in for the
driver that takes the real PTX from NVRTC (launches run by the kernel-IR interpreter), and on the CPU
emulator's driver (tracejit/runtime/emulator/cuda_driver.py), where the generated CUDA C itself runs.
Checks uploads (strided ones too), argument packing (buffers and scalars by value), the float4 variant's
alignment choice and launch shape, results on the device, the allocator, foreign arrays, capture into a
CUDA graph. The same code on a real GPU is covered by the device-parametrised suite and tests/test_cuda.py."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
from reference import check_assigned_arguments, check_scatter_add

import tracejit as tj
from tracejit.codegen.simt import nvrtc
from tracejit.runtime.cuda import compiler as cuda_compiler, driver as cuda_driver
from tracejit.runtime import registry
from tracejit.runtime.cache.key import SHARED_NAME
from tracejit.runtime.emulator import build as emulator_build
from tracejit.runtime.emulator import cuda_driver as emulated_cuda

try:
    nvrtc.version()
    NO_NVRTC = None
except tj.DeviceError as e:
    NO_NVRTC = f"NVRTC is not installed: {e}"


def _stand_in(monkeypatch):
    """The stand-in driver, told about each kernel the compiler builds (its PTX is not executed)."""
    if NO_NVRTC:
        pytest.skip(NO_NVRTC)
    from fake_cuda import FakeDriver  # imports cuda.bindings
    monkeypatch.delenv("TRACEJIT_EMULATE", raising=False)
    driver = FakeDriver()
    build = cuda_compiler.CudaCompiler.build

    def build_and_register(self, kernel, by_value, options=None, symbolic=None):
        c = build(self, kernel, by_value, options, symbolic)
        driver.register(c, by_value)
        return c
    monkeypatch.setattr(cuda_compiler.CudaCompiler, "build", build_and_register)
    return driver


def _emulator(monkeypatch):
    if emulator_build.unavailable_reason():
        pytest.skip(emulator_build.unavailable_reason())
    monkeypatch.setenv("TRACEJIT_EMULATE", "cuda")
    return emulated_cuda.Driver(memory_limit=1 << 30)


@pytest.fixture(params=[_stand_in, _emulator], ids=["stand-in", "emulator"])
def fake(request, monkeypatch):
    monkeypatch.setattr(registry, "_auto", registry.default_device_name())   # never chosen automatically
    driver = request.param(monkeypatch)
    monkeypatch.setattr(cuda_driver, "driver", lambda: driver)
    cuda_driver.initialise.cache_clear()
    monkeypatch.setattr(registry, "_instances", {})
    for k in [v for v in globals().values() if hasattr(v, "_plans")]:   # plans of an earlier test hold its device
        monkeypatch.setattr(k, "_plans", OrderedDict())
    yield driver
    cuda_driver.initialise.cache_clear()


def is_vector_variant(fn, compiled) -> bool:
    """Whether a launched function is the float4 variant of `compiled` (every kernel's entry point has one
    name, cache_key.SHARED_NAME: the module tells them apart)."""
    ptx = compiled.vector[2]
    if isinstance(fn, tuple):   # the stand-in driver's (entry name, PTX)
        return fn[1] == (ptx.decode() if isinstance(ptx, bytes) else ptx)
    return fn.module is emulator_build.load(ptx, SHARED_NAME)   # the emulator's module of that image


@tj.kernel
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@tj.kernel
def affine(x, a, b):
    return x * a + b


@tj.kernel
def mixed(x, n, flag):
    return (x // n + (x % 3), (x > n) & flag, x.astype(np.float16) * 2)


def softmax_ref(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_the_stand_in_and_the_emulator_are_cuda_devices(fake):
    assert {i.name: i for i in tj.devices()}["cuda"].available
    dev = tj.device("cuda")
    assert dev.compiler.arch == "sm_80" and ("Fake GPU" in dev.description or "emulated on the CPU" in dev.description)


def test_a_call_uploads_launches_and_keeps_results_on_the_device(fake, rng):
    x = rng.standard_normal((64, 300)).astype(np.float32)
    y = softmax(x, device="cuda")
    assert isinstance(y, tj.Array) and y.device.name == "cuda"
    np.testing.assert_allclose(y.numpy(), softmax_ref(x), rtol=1e-5)
    z = softmax(y, device="cuda")                      # the result is an input without leaving the device
    np.testing.assert_allclose(np.asarray(z), softmax_ref(softmax_ref(x)), rtol=1e-5)
    cai = z.__cuda_array_interface__
    assert cai["data"][0] == z._data.ptr and cai["shape"] == (64, 300) and cai["stream"] == 4242


def test_scalars_by_value_and_every_dtype_of_the_arguments_are_packed_as_declared(fake, rng):
    x = rng.integers(-50, 50, (40, 16)).astype(np.int32)
    q, gt, h = mixed(x, 7, True, device="cuda")
    np.testing.assert_array_equal(q.numpy(), x // 7 + x % 3)
    np.testing.assert_array_equal(gt.numpy(), x > 7)
    np.testing.assert_array_equal(h.numpy(), x.astype(np.float16) * np.float16(2))
    a = rng.standard_normal(1000).astype(np.float32)
    np.testing.assert_allclose(affine(a, 2.5, -1.0, device="cuda").numpy(), a * np.float32(2.5) - 1, rtol=1e-6)


def test_strided_host_and_foreign_inputs_are_read_through_their_strides(fake, rng):
    x = rng.standard_normal((48, 64)).astype(np.float32)
    np.testing.assert_allclose(softmax(x.T, device="cuda").numpy(), softmax_ref(x.T), rtol=1e-5)
    np.testing.assert_allclose(softmax(x[::-1, ::2], device="cuda").numpy(), softmax_ref(x[::-1, ::2]), rtol=1e-5)
    on_gpu = tj.asarray(x, device="cuda")

    class TransposedView:                               # another library's view of the same memory
        def __init__(self, base):
            self.base = base
            self.__cuda_array_interface__ = dict(base.__cuda_array_interface__, shape=(64, 48), strides=(4, 256))
    view = TransposedView(on_gpu)
    np.testing.assert_allclose(softmax(view, device="cuda").numpy(), softmax_ref(x.T), rtol=1e-5)
    assert tj.asarray(view, device="cuda").numpy().tolist() == x.T.tolist()   # no copy, strided readback


def test_the_float4_variant_runs_only_on_aligned_memory(fake, rng):
    x = rng.standard_normal(4096).astype(np.float32)
    on_gpu = tj.asarray(x, device="cuda")
    launched = []
    plan = affine.lower(on_gpu, 2.0, 1.0, device="cuda")
    assert plan.kernels[0].vector is not None
    original = fake.cuLaunchKernel
    fake.cuLaunchKernel = lambda fn, *rest: (launched.append(is_vector_variant(fn, plan.kernels[0]))
                                             or original(fn, *rest))
    np.testing.assert_allclose(affine(on_gpu, 2.0, 1.0, device="cuda").numpy(), x * 2 + 1, rtol=1e-6)

    class Offset:                                       # 4 bytes past an aligned address
        def __init__(self, base):
            self.base = base
            cai = base.__cuda_array_interface__
            self.__cuda_array_interface__ = dict(cai, shape=(4092,), data=(cai["data"][0] + 4, False))
    np.testing.assert_allclose(affine(Offset(on_gpu), 2.0, 1.0, device="cuda").numpy()[:8], x[1:9] * 2 + 1,
                               rtol=1e-6)
    assert launched[0] and not launched[-1]


def test_the_allocator_reuses_blocks_and_frees_held_ones_when_memory_runs_out(fake):
    dev = tj.device("cuda")
    a = tj.asarray(np.ones(1 << 18, np.float32), device="cuda")
    first = fake.allocations
    del a
    b = tj.asarray(np.ones(1 << 18, np.float32), device="cuda")
    assert fake.allocations == first and dev.memory_stats()["active_blocks"] >= 1
    del b
    assert dev.memory_stats()["held_blocks"] >= 1
    fake.memory_limit = sum(len(m) for m in fake.memory.values()) + (1 << 20) + 512
    c = tj.asarray(np.ones(1 << 19, np.float32), device="cuda")       # fits only once held blocks are freed
    assert dev.memory_stats()["held_blocks"] == 0 and c.numpy()[0] == 1
    with pytest.raises(tj.DeviceError, match="could not allocate"):
        tj.asarray(np.ones(1 << 28, np.float32), device="cuda")


def test_capture_replays_one_cuda_graph_with_new_inputs(fake, rng):
    x = rng.standard_normal((32, 256)).astype(np.float32)
    with tj.capture() as g:
        g.outputs = softmax(affine(x, 3.0, 0.5, device="cuda"), device="cuda")
    x2 = rng.standard_normal((32, 256)).astype(np.float32)
    before = fake.launches
    out = g(x2)
    assert fake.graph_launches == 1 and fake.launches == before + 2     # two launches captured, once
    np.testing.assert_allclose(out.numpy(), softmax_ref(x2 * np.float32(3) + np.float32(0.5)), rtol=1e-5)
    g(x)
    assert fake.graph_launches == 2
    np.testing.assert_allclose(out.numpy(), softmax_ref(x * np.float32(3) + np.float32(0.5)), rtol=1e-5)


def test_an_index_out_of_bounds_raises_numpys_index_error_and_the_next_call_works(fake):
    lookup = tj.kernel(lambda table, i: table[:, i] + 1)
    table = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    # two bad indices: GPU threads run in no promised order, so the first fault recorded may be either (NumPy
    # names 4); the emulator's launches run the threads forward, reversed and shuffled
    with pytest.raises(tj.IndexOutOfBoundsError, match="^index (4|-9) is out of bounds for axis 1 with size 4$"):
        lookup(table, np.array([0, 4, -9], np.int64), device="cuda")
    np.testing.assert_array_equal(lookup(table, np.array([0, -4], np.int64), device="cuda").numpy(),
                                  table[:, [0, -4]] + 1)
    with pytest.raises(tj.UnsupportedError, match="captured graph cannot report"), tj.capture():
        lookup(table, np.array([0, 1], np.int64), device="cuda")


def test_dlpack_names_the_gpu(fake):
    y = tj.asarray(np.arange(6, dtype=np.float32), device="cuda")
    assert y.__dlpack_device__() == (2, 0)
    capsule = y.__dlpack__(stream=None)
    assert type(capsule).__name__ == "PyCapsule"


def test_empty_arrays_get_memory_so_no_kernel_sees_a_null_pointer(fake):
    x = np.zeros((0, 3), np.float32)
    got = tj.kernel(lambda x: (x.sum(axis=0), x.max(axis=1)))(x, device="cuda")
    np.testing.assert_array_equal(got[0].numpy(), np.zeros(3, np.float32))   # the fake refuses null pointers
    assert got[1].shape == (0,)


def test_scatter_add_accumulates_duplicates_and_an_index_out_of_bounds_raises(fake):
    check_scatter_add("cuda")


def test_assigned_arguments_and_out_are_written_on_the_gpu(fake, rng):
    _, hx, _ = check_assigned_arguments("cuda", rng)
    out = tj.asarray(np.zeros(16, np.float32), device="cuda")
    assert affine(hx, 2.0, 1.0, out=out, device="cuda") is out
    np.testing.assert_allclose(out.numpy(), hx * 2 + 1, rtol=1e-6)
