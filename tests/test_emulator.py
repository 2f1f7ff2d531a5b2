"""The CPU SIMT emulator (tracejit/runtime/emulator): TRACEJIT_EMULATE=cuda,metal makes both devices run the
generated CUDA C and MSL themselves on the CPU. The device-parametrised suite runs on them wherever the
variable is set (make test sets it); this file checks the emulator's own promises on any machine with a C++
compiler: what tj.devices() says, half conversions bit for bit, lane-exact warp and SIMD-group functions,
atomics, garbage in fresh shared memory, deadlocks reported, and that a missing barrier makes results wrong."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import tracejit as tj
from tracejit.codegen.simt import cuda as cuda_codegen
from tracejit.codegen.simt import metal as metal_codegen
from tracejit.runtime.cuda import driver as cuda_driver
from tracejit.runtime.metal import device as metal_device
from tracejit.runtime import registry
from tracejit.runtime.emulator import build

pytestmark = pytest.mark.skipif(build.unavailable_reason() is not None, reason=str(build.unavailable_reason()))
TARGETS = ("cuda", "metal")


@pytest.fixture
def emulated(monkeypatch):
    """TRACEJIT_EMULATE=cuda,metal for this test, with fresh devices."""
    monkeypatch.setenv("TRACEJIT_EMULATE", "cuda,metal")
    cuda_driver.initialise.cache_clear()
    metal_device._system_device.cache_clear()
    monkeypatch.setattr(registry, "_instances", {})
    monkeypatch.setattr(metal_device, "_OPEN", [])
    yield
    cuda_driver.initialise.cache_clear()
    metal_device._system_device.cache_clear()


def run_source(dialect: str, name: str, source: str, arrays: list[np.ndarray], groups: int, threads: int):
    """Compile a hand-written kernel for the emulator and launch it on NumPy arrays (each a buffer); the
    emulator's error text, or None."""
    image, _ = build.build(dialect, name, source)
    module = build.load(image, name)
    pointers = [ctypes.c_void_p(a.ctypes.data) for a in arrays]
    args = (ctypes.c_void_p * len(pointers))(*[ctypes.addressof(p) for p in pointers])
    return module.launch(ctypes.addressof(args), (groups, 1, 1), (threads, 1, 1))


def test_the_devices_say_they_are_emulated_and_are_never_chosen_automatically(emulated):
    infos = {i.name: i for i in tj.devices()}
    for target in TARGETS:
        assert infos[target].available and "emulated on the CPU" in infos[target].description
        assert not registry._qualifies(f"{target}-gpu")


def test_a_wrong_TRACEJIT_EMULATE_is_the_reason_the_devices_give(emulated, monkeypatch):
    monkeypatch.setenv("TRACEJIT_EMULATE", "cuda,vulkan")
    infos = {i.name: i for i in tj.devices()}
    for target in TARGETS:
        assert not infos[target].available and "vulkan" in infos[target].reason and "cuda,metal" in infos[target].reason


@pytest.mark.parametrize("target", TARGETS)
def test_float_to_half_rounds_to_nearest_even_bit_for_bit(emulated, target):
    halves = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    finite = np.sort(halves[np.isfinite(halves)].astype(np.float32))
    mids = (finite[:-1] + (finite[1:] - finite[:-1]) / 2).astype(np.float32)   # exactly halfway: ties to even
    x = np.concatenate([finite, mids, np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(-np.inf)),
                        np.float32([65504, 65519.996, 65520, 1e9, -1e9, np.inf, -np.inf, np.nan, 1e-8, -1e-8, 2.0 ** -25,
                                    2.0 ** -24 * 1.5, 0.0, -0.0])])
    got = np.asarray(tj.kernel(lambda a: a.astype(np.float16))(x, device=target))
    assert got.dtype == np.float16
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    np.testing.assert_array_equal(got.view(np.uint16)[~np.isnan(want)], want.view(np.uint16)[~np.isnan(want)])
    assert np.isnan(got[np.isnan(want)]).all()
    back = np.asarray(tj.kernel(lambda h: h.astype(np.float32))(halves, device=target))
    np.testing.assert_array_equal(back.view(np.uint32)[~np.isnan(halves)],
                                  halves.astype(np.float32).view(np.uint32)[~np.isnan(halves)])


def test_double_to_half_rounds_once(emulated):
    # just above a halfway point in double, below it once rounded to float: one rounding gives the upper half
    x = np.float64(1) + 2.0 ** -11 + 2.0 ** -40
    got = np.asarray(tj.kernel(lambda a: a.astype(np.float16))(np.array([x, -x]), device="cuda"))
    np.testing.assert_array_equal(got.view(np.uint16), np.array([x, -x]).astype(np.float16).view(np.uint16))


CUDA_LANES = r"""
extern "C" __global__ void lanes(float* out, unsigned* votes, const float* x) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    const float v = x[t];
    out[6 * t + 0] = __shfl_down_sync(0xffffffffu, v, 3);
    out[6 * t + 1] = __shfl_up_sync(0xffffffffu, v, 5);
    out[6 * t + 2] = __shfl_xor_sync(0xffffffffu, v, 9);
    out[6 * t + 3] = __shfl_sync(0xffffffffu, v, 7);
    out[6 * t + 4] = __shfl_down_sync(0xffffffffu, v, 2, 8);
    out[6 * t + 5] = __shfl_xor_sync(0xffffffffu, v, 16, 16);
    votes[t] = __ballot_sync(0xffffffffu, v > 0.0f);
}
"""


def test_cuda_warp_shuffles_and_votes_are_lane_exact(rng):
    x = rng.standard_normal(128).astype(np.float32)
    lane, base = np.arange(128) % 32, np.arange(128) // 32 * 32

    def within(src, ok):   # lane src's value where it is in range, else the lane's own
        return np.where(ok, x[base + np.clip(src, 0, 31)], x)
    want = np.stack([within(lane + 3, lane + 3 < 32), within(lane - 5, lane >= 5), within(lane ^ 9, True),
                     x[base + 7], within(lane + 2, lane % 8 + 2 < 8), within(lane ^ 16, (lane ^ 16) // 16 == lane // 16)],
                    axis=1)
    bits = (x > 0).reshape(4, 32) * (1 << np.arange(32, dtype=np.uint64))
    for _ in range(3):   # forward, reversed, shuffled
        out, votes = np.zeros((128, 6), np.float32), np.zeros(128, np.uint32)
        assert run_source("cuda", "lanes", CUDA_LANES, [out, votes, x], 2, 64) is None
        np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(votes, np.repeat(bits.sum(axis=1).astype(np.uint32), 32))


MSL_SIMD = r"""
#include <metal_stdlib>
using namespace metal;
kernel void simd(device float* out [[buffer(0)]], device const float* x [[buffer(1)]],
                 device atomic_int* count [[buffer(2)]], device atomic_float* total [[buffer(3)]],
                 uint gid [[thread_position_in_grid]], uint lane [[thread_index_in_simdgroup]]) {
    const float v = x[gid];
    out[4 * gid + 0] = simd_sum(v);
    out[4 * gid + 1] = simd_max(v);
    out[4 * gid + 2] = simd_shuffle_down(v, (ushort)1);
    out[4 * gid + 3] = simd_shuffle_xor(v, (ushort)1);
    atomic_fetch_add_explicit(count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(total, 1.0f, memory_order_relaxed);
}
"""


def test_msl_simd_group_functions_are_lane_exact_and_atomics_count(rng):
    x = rng.integers(-8, 8, 64).astype(np.float32)   # small integers: sums in any order are exact
    groups = x.reshape(2, 32)
    lane, base = np.arange(64) % 32, np.arange(64) // 32 * 32
    want = np.stack([np.repeat(groups.sum(1), 32), np.repeat(groups.max(1), 32),
                     np.where(lane + 1 < 32, x[base + np.minimum(lane + 1, 31)], x), x[base + (lane ^ 1)]], axis=1)
    for _ in range(3):
        out, count, total = np.zeros((64, 4), np.float32), np.zeros(1, np.int32), np.zeros(1, np.float32)
        assert run_source("metal", "simd", MSL_SIMD, [out, x, count, total], 1, 64) is None
        np.testing.assert_array_equal(out, want)
        assert count[0] == 64 and total[0] == 64


CUDA_ATOMICS = r"""
extern "C" __global__ void atomics(float* f, double* d, int* i, unsigned long long* u, int* cas) {
    atomicAdd(f, 0.5f);
    atomicAdd(d, 0.25);
    atomicMax(i, (int)(blockIdx.x * blockDim.x + threadIdx.x));
    atomicAdd(u, 1ull);
    int seen = *cas, want;
    do { want = seen; seen = atomicCAS(cas, want, want + 2); } while (seen != want);
}
"""


def test_cuda_atomics_of_every_width():
    f, d, i = np.zeros(1, np.float32), np.zeros(1, np.float64), np.full(1, -1, np.int32)
    u, cas = np.zeros(1, np.uint64), np.zeros(1, np.int32)
    assert run_source("cuda", "atomics", CUDA_ATOMICS, [f, d, i, u, cas], 3, 100) is None
    assert (f[0], d[0], i[0], u[0], cas[0]) == (150.0, 75.0, 299, 300, 600)


CUDA_GARBAGE = r"""
extern "C" __global__ void garbage(unsigned* out) {
    __shared__ unsigned fresh[64];
    out[threadIdx.x] = fresh[threadIdx.x];
    __syncthreads();
    fresh[threadIdx.x] = 7;
}
"""


def test_shared_memory_starts_as_garbage_in_every_block():
    out = np.zeros(64, np.uint32)
    for _ in range(2):
        assert run_source("cuda", "garbage", CUDA_GARBAGE, [out], 2, 64) is None
        assert (out == 0xFFFFFFFF).all()


CUDA_DEADLOCK = r"""
extern "C" __global__ void stuck(float* x) {
    if (threadIdx.x == 0) __syncthreads();
    else x[threadIdx.x] = __shfl_down_sync(0xffffffffu, x[threadIdx.x], 1);
}
"""


def test_a_deadlock_is_reported_not_hung():
    error = run_source("cuda", "stuck", CUDA_DEADLOCK, [np.zeros(32, np.float32)], 1, 32)
    assert error is not None and "deadlock" in error


@tj.kernel
def row_sums(x):
    return x.sum(axis=-1)


def _without_first_barrier(group_reduce):
    def render(self, *args):
        lines = group_reduce(self, *args)
        first = lines.index(self.barrier)
        return lines[:first] + lines[first + 1:]
    return render


@pytest.mark.parametrize("target", TARGETS)
def test_a_reduction_missing_a_barrier_goes_wrong_under_adversarial_orders(emulated, monkeypatch, target, rng):
    """The emulator's point: with one barrier dropped from the renderer's reduction tree, some launch order
    (forward, reversed, shuffled) reads shared memory before it is written, and the sums come out wrong."""
    x = rng.random((8, 4096)).astype(np.float32)
    want = x.sum(axis=-1)
    renderer = cuda_codegen.CUDA if target == "cuda" else metal_codegen.Metal
    for _ in range(3):
        np.testing.assert_allclose(np.asarray(row_sums(x, device=target)), want, rtol=1e-5)
    monkeypatch.setattr(renderer, "group_reduce", _without_first_barrier(renderer.group_reduce))
    broken = tj.kernel(lambda a: a.sum(axis=-1))
    results = [np.asarray(broken(x, device=target)) for _ in range(3)]
    assert any(not np.allclose(r, want, rtol=1e-5) for r in results)


CUDA_FAULTS = r"""
extern "C" __global__ void wild(float* out, const long long* where, int deep) {
    if (deep) {                           // with fibers: a frame larger than a fiber's stack
        volatile float big[32768];
        big[threadIdx.x] = 1.0f;
        __syncthreads();
        out[threadIdx.x] = big[threadIdx.x];
    } else {
        out[threadIdx.x] = *(const float*)where[0];
    }
}
"""


@pytest.mark.parametrize("deep", [0, 1], ids=["wild pointer", "stack overflow"])
def test_a_memory_fault_in_a_kernel_is_an_error_not_a_crash(deep):
    out, where = np.zeros(32, np.float32), np.array([16], np.int64)
    image, _ = build.build("cuda", "wild", CUDA_FAULTS)
    module = build.load(image, "wild")
    values = [ctypes.c_void_p(out.ctypes.data), ctypes.c_void_p(where.ctypes.data), ctypes.c_int(deep)]
    args = (ctypes.c_void_p * 3)(*[ctypes.addressof(v) for v in values])
    error = module.launch(ctypes.addressof(args), (1, 1, 1), (32, 1, 1))
    assert error is not None and "touched memory outside" in error
    assert run_source("cuda", "garbage", CUDA_GARBAGE, [out.view(np.uint32)], 1, 32) is None   # and it goes on


def test_debug_builds_keep_their_source_for_the_debugger(monkeypatch):
    monkeypatch.setenv("TRACEJIT_EMULATE_DEBUG", "1")
    out = np.zeros(64, np.uint32)
    assert run_source("cuda", "garbage", CUDA_GARBAGE, [out], 1, 64) is None
    kept = [p for p in build._work_dir().glob("garbage-*.cpp") if "__shared__ unsigned fresh" in p.read_text()]
    assert kept and "TJ_CUDA_ENTRY(garbage)" in kept[0].read_text()


CUDA_VECTORS = r"""
extern "C" __global__ void vectors(float4* out, const float4* x, const int2* k) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const float4 v = x[i];
    out[i] = make_float4(v.w, v.z + (float)k[i].x, v.y * (float)k[i].y, v.x);
}
"""


def test_cuda_vector_types_are_laid_out_as_on_the_gpu(rng):
    x, k = rng.standard_normal((64, 4)).astype(np.float32), rng.integers(-5, 5, (64, 2)).astype(np.int32)
    out = np.zeros((64, 4), np.float32)
    assert run_source("cuda", "vectors", CUDA_VECTORS, [out, x, k], 2, 32) is None
    kf = k.astype(np.float32)
    want = np.stack([x[:, 3], x[:, 2] + kf[:, 0], x[:, 1] * kf[:, 1], x[:, 0]], axis=1)
    np.testing.assert_array_equal(out, want)
