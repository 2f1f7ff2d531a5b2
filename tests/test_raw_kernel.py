"""tj.RawKernel: hand-written CUDA C, OpenCL C, MSL and WGSL launched on tracejit's devices."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tracejit as tj
from conftest import AVAILABLE_DEVICES
from tracejit.runtime import emulator

RAW_DEVICES = [d for d in AVAILABLE_DEVICES if d.partition(":")[0] in ("cuda", "opencl", "metal", "webgpu")]

SCALE = {
    "opencl": """
__kernel void scale(__global const float* x, __global float* y, const float a, const int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = a * x[i] + 1.0f;
}""",
    "cuda": """
extern "C" __global__ void scale(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + 1.0f;
}""",
    "metal": """
#include <metal_stdlib>
using namespace metal;
kernel void scale(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                  constant float& a [[buffer(2)]], constant int& n [[buffer(3)]],
                  uint i [[thread_position_in_grid]]) {
    if ((int)i < n) y[i] = a * x[i] + 1.0f;
}""",
    "webgpu": """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> a: f32;
@group(0) @binding(3) var<uniform> n: i32;
@compute @workgroup_size(64)
fn scale(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = i32(gid.x);
    if (i < n) { y[i] = a * x[i] + 1.0; }
}"""}

# a 2-D grid: out[r, c] = 1000 * r + c over a 24 x 40 array, in work-groups of 8 x 8 (columns along x)
GRID2D = {
    "opencl": """
__kernel void coords(__global int* out, const int rows, const int cols) {
    int c = get_global_id(0), r = get_global_id(1);
    if (r < rows && c < cols) out[r * cols + c] = 1000 * r + c;
}""",
    "cuda": """
extern "C" __global__ void coords(int* out, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) out[r * cols + c] = 1000 * r + c;
}""",
    "metal": """
#include <metal_stdlib>
using namespace metal;
kernel void coords(device int* out [[buffer(0)]], constant int& rows [[buffer(1)]], constant int& cols [[buffer(2)]],
                   uint2 p [[thread_position_in_grid]]) {
    int c = (int)p.x, r = (int)p.y;
    if (r < rows && c < cols) out[r * cols + c] = 1000 * r + c;
}""",
    "webgpu": """
@group(0) @binding(0) var<storage, read_write> out: array<i32>;
@group(0) @binding(1) var<uniform> rows: i32;
@group(0) @binding(2) var<uniform> cols: i32;
@compute @workgroup_size(8, 8)
fn coords(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = i32(gid.x);
    let r = i32(gid.y);
    if (r < rows && c < cols) { out[r * cols + c] = 1000 * r + c; }
}"""}

BROKEN = {"opencl": "__kernel void scale(__global float* y) {\n    y[0] = 1.0f\n}",
          "cuda": 'extern "C" __global__ void scale(float* y) {\n    y[0] = 1.0f\n}',
          "metal": "#include <metal_stdlib>\nkernel void scale(device float* y [[buffer(0)]]) {\n    y[0] = 1.0f\n}",
          "webgpu": "@group(0) @binding(0) var<storage, read_write> y: array<f32>;\n@compute @workgroup_size(1)\n"
                    "fn scale() {\n    y[0] = 1.0\n}"}


@pytest.fixture(params=RAW_DEVICES or ["(none)"])
def raw_device(request):
    if request.param == "(none)":
        pytest.skip("no cuda, opencl, metal or webgpu device here")
    return request.param


def test_a_raw_kernel_takes_numpy_and_device_arrays_and_scalars(raw_device):
    k = tj.RawKernel(SCALE[raw_device.partition(":")[0]], "scale", device=raw_device)
    x = np.arange(1000, dtype=np.float32) / 7
    y = np.zeros_like(x)
    k(x, y, np.float32(2.5), 1000, grid=(1000 + 63) // 64, block=64)   # NumPy arrays: copied in and back
    # the device's compiler may fuse a * x + 1 into one rounding (an FMA): within an ulp of NumPy's two
    np.testing.assert_allclose(y, np.float32(2.5) * x + 1, rtol=2.5e-7, atol=0)
    xd, yd = tj.asarray(x, device=raw_device), tj.asarray(np.zeros_like(x), device=raw_device)
    k(xd, yd, 3.0, 1000, grid=[16], block=(64,))                     # device arrays stay there
    np.testing.assert_allclose(yd.numpy(), np.float32(3.0) * x + 1, rtol=2.5e-7, atol=0)
    info = k.info
    assert set(info) == {"max_threads_per_group", "registers", "local_memory", "preferred_group_multiple"}
    assert info["max_threads_per_group"] >= 64


def test_two_kernels_of_one_source_each_run_their_own_code(raw_device):
    """RawKernel(source, "scale") and a second function of the same source by its own name: each launch runs
    the function it names (a module compiled once per source must not hand back the first one's)."""
    source = SCALE[raw_device.partition(":")[0]]
    body = source[source.index("@compute"):] if "@compute" in source else source.replace(
        "#include <metal_stdlib>\nusing namespace metal;", "")   # the second function alone
    source += "\n" + body.replace("scale", "shift").replace("a * x[i] + 1.0", "x[i] + a + 0.0")
    x = np.arange(100, dtype=np.float32)
    for name, expected in (("scale", np.float32(2) * x + 1), ("shift", x + np.float32(2))):
        y = np.zeros_like(x)
        tj.RawKernel(source, name, device=raw_device)(x, y, np.float32(2), 100, grid=2, block=64)
        np.testing.assert_array_equal(y, expected, err_msg=name)


def test_grid_counts_groups_and_block_threads_in_two_dimensions(raw_device):
    if raw_device == "metal" and emulator.emulates("metal"):
        k = tj.RawKernel(SCALE["metal"], "scale", device="metal")
        with pytest.raises(tj.UnsupportedError, match="one dimension"):
            k(np.ones(64, np.float32), np.ones(64, np.float32), 1.0, 64, grid=(1, 2), block=64)
        pytest.skip("the emulator runs Metal launches of one dimension")
    k = tj.RawKernel(GRID2D[raw_device.partition(":")[0]], "coords", device=raw_device)
    out = tj.asarray(np.full((24, 40), -1, np.int32), device=raw_device)
    k(out, 24, 40, grid=(5, 3), block=(8, 8))
    rows, cols = np.indices((24, 40))
    np.testing.assert_array_equal(out.numpy(), 1000 * rows + cols)


def test_a_compile_error_names_the_line_and_is_not_called_tracejit_s(raw_device):
    source = BROKEN[raw_device.partition(":")[0]]
    with pytest.raises(tj.CompileError) as e:
        tj.RawKernel(source, "scale", device=raw_device)
    text = str(e.value)
    quoted = re.findall(r"^ +line (\d+): (.*)$", text, re.M)
    assert quoted and all(source.splitlines()[int(n) - 1].strip() == line for n, line in quoted), text
    assert "tracejit bug" not in text and "generated" not in text


def test_bad_launches_and_devices_are_named(raw_device, rng):
    k = tj.RawKernel(SCALE[raw_device.partition(":")[0]], "scale", device=raw_device)
    x = rng.standard_normal(64, dtype=np.float32)
    for grid, block in ((0, 64), ((1, 2, 3, 4), 64), (1, "64")):
        with pytest.raises(tj.ArgumentError, match="grid|block"):
            k(x, x.copy(), 1.0, 64, grid=grid, block=block)
    with pytest.raises(tj.ArgumentError, match="work-items"):
        k(x, x.copy(), 1.0, 64, grid=1, block=1 << 20)
    with pytest.raises(tj.ArgumentError, match="argument 2 is a str"):
        k(x, x.copy(), "2", 64, grid=1, block=64)
    with pytest.raises(tj.ArgumentError, match="does not fit int32"):
        k(x, x.copy(), 1.0, 1 << 40, grid=1, block=64)
    with tj.capture():
        with pytest.raises(tj.UnsupportedError, match="captured"):
            k(x, x.copy(), 1.0, 64, grid=1, block=64)


def test_a_call_must_pass_every_parameter_the_kernel_declares(raw_device):
    """OpenCL keeps a kernel's arguments set between launches: a call that left one out ran with the previous
    call's value. Every device refuses it, naming what is missing, after a good call as before one."""
    k = tj.RawKernel(SCALE[raw_device.partition(":")[0]], "scale", device=raw_device)
    assert k.parameters == ["x", "y", "a", "n"]
    x = np.arange(64, dtype=np.float32)
    y = np.zeros_like(x)
    k(x, y, np.float32(2), 64, grid=1, block=64)
    np.testing.assert_array_equal(y, 2 * x + 1)
    for args, missing in (((x, y, np.float32(3)), r"missing n \(argument 3\)"),
                          ((x, y), r"missing a \(argument 2\), n \(argument 3\)"),
                          ((), "missing x")):
        y[:] = -1
        with pytest.raises(tj.ArgumentError, match=missing) as e:
            k(*args, grid=1, block=64)
        assert "takes 4 arguments (x, y, a, n)" in str(e.value)
        np.testing.assert_array_equal(y, -1)   # nothing launched
    with pytest.raises(tj.ArgumentError, match="passes 5, 1 more than it declares"):
        k(x, y, np.float32(3), 64, 7, grid=1, block=64)
    k(x, y, np.float32(4), 32, grid=1, block=64)   # every value new, the first half only
    np.testing.assert_array_equal(y, np.where(np.arange(64) < 32, 4 * x + 1, -1))


def test_the_parameters_are_read_from_each_language_s_declaration():
    """The names a missing argument is reported by: C parameters (comments, attributes and qualifiers
    aside), MSL's [[buffer(i)]] parameters by index, the WGSL bindings the entry point uses by binding."""
    from tracejit.frontend.raw_parameters import declared
    cuda = ('/* __global__ void f(int a) */ extern "C" __global__ void __launch_bounds__(256)\n'
            "f(const float* __restrict__ x, float y[], int n) { g(x); }")
    assert declared("cuda", cuda, "f") == ["x", "y", "n"]
    assert declared("opencl", "__kernel void f(void) {}", "f") == []
    assert declared("opencl", "void f(int a) {}\n__kernel void g(__global int* o) { f(1); }", "f") is None
    metal = ("kernel void f(device float* y [[buffer(1)]], uint i [[thread_position_in_grid]], "
             "constant int& n [[buffer(2)]]) {}")
    assert declared("metal", metal, "f") == ["buffer(0)", "y", "n"]
    wgsl = ("@group(0) @binding(0) var<storage, read_write> a: array<f32>;\n"
            "@group(0) @binding(1) var<uniform> n: u32;\n@group(0) @binding(2) var<storage> b: array<f32>;\n"
            "fn get(i: u32) -> f32 { return b[i]; }\n"
            "@compute @workgroup_size(1) fn one() { a[0] = 1.0; }\n"
            "@compute @workgroup_size(1) fn two() { a[n] = get(0u); }")
    assert declared("webgpu", wgsl, "one") == ["a"]
    assert declared("webgpu", wgsl, "two") == ["a", "n", "b"]


def test_numba_has_no_raw_kernels():
    with pytest.raises(tj.UnsupportedError, match="no kernel language"):
        tj.RawKernel("def f(): pass", "f", device="numba")
