"""Nothing of one call leaks into the next: every place that keeps something between calls (a kernel object's
arguments, a uniform or bind group, a graph's pre-bound launches, the size arguments of symbolic shapes, pooled
outputs and temporaries, static values keying a plan) is called with A, then with B, and B's result is
NumPy's; A's result, still held, is unchanged."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj


def host(r):
    return np.asarray(r.numpy() if isinstance(r, tj.Array) else r)


def same(got, want, what: str = "") -> None:
    """Equal to NumPy's up to the rounding of sums in another order (a stale value is off by far more)."""
    got, want = host(got), np.asarray(want)
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(want).max(initial=0))),
                               err_msg=str(what))


# ---- scalars: a run-time value of the plan, passed anew each call ----

def test_each_call_s_scalars_reach_every_kernel_of_the_plan(device, rng):
    """Float, int and bool scalars, one of them read by several kernels of the plan (a row reduction and
    the elementwise work after it)."""
    def f(x, a, b, n, flag):
        e = np.exp((x - x.max(axis=-1, keepdims=True)) / a)
        return np.where(flag, e / e.sum(axis=-1, keepdims=True) + b, x * n)
    k = tj.kernel(f)
    x = rng.standard_normal((64, 300)).astype(np.float32)
    for a, b, n, flag in ((2.0, 1.0, 3, True), (0.5, -4.25, -7, False), (1.5, 0.0, 0, True)):
        same(k(x, a, b, n, flag, device=device), f(x, a, b, n, flag), (a, b, n, flag))
    assert k.cache_info()["traces"] == 1


def test_each_call_s_arrays_are_read_not_the_first_call_s(device, rng):
    """New arrays of one shape, the same NumPy array changed in place between calls, and device arrays."""
    def f(x, y):
        return x * 2 + y.sum() - y
    k = tj.kernel(f)
    x, y = (rng.standard_normal(1000).astype(np.float32) for _ in range(2))
    same(k(x, y, device=device), f(x, y))
    x2, y2 = x[::-1].copy(), y * 3
    same(k(x2, y2, device=device), f(x2, y2))
    x2[:] = 5
    y2[::2] = -1
    same(k(x2, y2, device=device), f(x2, y2), "changed in place")
    on = [tj.asarray(v, device=device) for v in (x, y2)]
    same(k(*on, device=device), f(x, y2), "device arrays")


def test_a_result_still_held_is_not_overwritten_by_the_next_call(device, rng):
    """Results come from pools (numba's output pool from 1 MiB, the devices' buffer pools): one still held is
    not handed to the next call."""
    k = tj.kernel(lambda x: x * 2 + 1)
    x1, x2 = (rng.standard_normal(1 << 19).astype(np.float32) for _ in range(2))   # 2 MiB each
    r1 = k(x1, device=device)
    r2 = k(x2, device=device)
    r3 = k(x1 + 1, device=device)
    same(r1, x1 * 2 + 1, "first")
    same(r2, x2 * 2 + 1, "second")
    same(r3, (x1 + 1) * 2 + 1, "third")


# ---- sizes: symbolic shapes take theirs as arguments of code compiled once ----

@pytest.mark.parametrize("dynamic", [True, None], ids=["dynamic", "seen-twice"])
def test_each_call_s_sizes_reach_code_compiled_for_other_sizes(device, rng, dynamic):
    """A row reduction, a broadcast back over the rows and a whole-array sum, at sizes that come and go
    (dynamic=None: symbolic from the second size on); back to the first size at the end."""
    def f(x):
        return x * 2 + x.sum(axis=-1, keepdims=True) - x.mean()
    k = tj.kernel(f, dynamic=dynamic)
    for shape in ((8, 100), (8, 37), (13, 100), (3, 1000), (8, 37), (8, 100)):
        x = rng.standard_normal(shape).astype(np.float32)
        same(k(x, device=device), f(x), shape)


def test_long_reductions_scans_and_scatters_start_from_nothing_of_an_earlier_call(device, rng):
    """Pooled temporaries (two-stage reductions, blocked scans) and pooled outputs hold the earlier call's
    values: each call's kernels must not read them."""
    def f(x, idx):
        counts = np.zeros(64, np.float32)
        np.add.at(counts, idx, x[:idx.size])
        return x.sum(), x.max(), np.cumsum(x[:20000]), counts, np.argmax(x).astype(np.int32)
    k = tj.kernel(f)
    for scale in (1.0, -2.0, 0.5):
        x = (rng.standard_normal(1 << 16) * scale).astype(np.float32)
        idx = rng.integers(0, 64, 5000).astype(np.int32)
        got = k(x, idx, device=device)
        for name, g, want in zip(("sum", "max", "cumsum", "add.at", "argmax"), got, f(x, idx)):
            want = np.asarray(want)
            np.testing.assert_allclose(host(g), want, rtol=1e-4, atol=1e-3 * max(1.0, float(np.abs(want).max())),
                                       err_msg=f"{name}, scale {scale}")


def test_a_plan_s_kept_temporaries_hold_nothing_of_an_earlier_call(device, rng):
    """Temporaries between a plan's kernels (here two products' intermediates of 512 KiB: numba keeps such a
    plan's set and reuses it, the devices take theirs from their pools) are written before they are read."""
    def f(x, w):
        h = np.tanh(x @ w)
        return h @ w.T + h.sum()
    k = tj.kernel(f)
    for scale in (1.0, -3.0, 0.25):
        x = (rng.standard_normal((512, 128)) * scale).astype(np.float32)
        w = (rng.standard_normal((128, 256)) * 0.1).astype(np.float32)
        want = f(x, w)
        np.testing.assert_allclose(host(k(x, w, device=device)), want, rtol=1e-4,
                                   atol=1e-4 * float(np.abs(want).max()), err_msg=str(scale))


# ---- destinations ----

def test_out_and_assigned_arguments_are_each_call_s_own(device, rng):
    def f(x):
        return x + 1
    k = tj.kernel(f)
    x, y = (rng.standard_normal(500).astype(np.float32) for _ in range(2))
    o1, o2 = np.zeros_like(x), np.zeros_like(x)
    k(x, out=o1, device=device)
    k(y, out=o2, device=device)
    same(o1, x + 1, "out of the first call")
    same(o2, y + 1, "out of the second call")

    def g(a, s):
        a[::2] = a[::2] * s
    h = tj.kernel(g)
    a1, a2 = x.copy(), y.copy()
    h(a1, 2.0, device=device)
    h(a2, -3.0, device=device)
    same(a1, np.where(np.arange(500) % 2 == 0, x * 2, x), "first assigned")
    same(a2, np.where(np.arange(500) % 2 == 0, y * -3, y), "second assigned")


# ---- values that key a plan or a graph ----

def test_static_arguments_key_by_type_and_sign_as_well_as_value(device):
    """1, True and np.int16(1) are equal in Python, and so are 0.0 and -0.0; as constants of the code they give
    other dtypes (i8 * np.int16(1) is int16) and other signs (x / -0.0 is -inf): each is a plan of its own
    (a static argument keyed the plan by == alone, so the first of them served them all)."""
    k = tj.kernel(lambda x, c: x * c, static="c")
    x = np.arange(1, 5, dtype=np.int8)
    for c in (1, True, np.int16(1), np.int32(1), np.uint8(1), 1, (1,)[0]):
        want = x * c
        got = host(k(x, c, device=device))
        assert got.dtype == want.dtype, (repr(c), got.dtype, want.dtype)
        np.testing.assert_array_equal(got, want, err_msg=repr(c))
    div = tj.kernel(lambda x, c: x / c, static="c")
    y = np.arange(1, 5, dtype=np.float32)
    for c in (0.0, -0.0, np.float32(0.0), np.float32(-0.0), 0.0, (2.0, -0.0)[1]):
        with np.errstate(divide="ignore"):
            want = y / c
        np.testing.assert_array_equal(host(div(y, c, device=device)), want, err_msg=repr(c))


class Scaled:
    """A method kernel: `self.c` is a constant of its code, keyed by value like a static argument."""

    def __init__(self, c):
        self.c = c

    @tj.kernel
    def apply(self, x):
        return x / self.c


def test_an_object_s_constant_attributes_key_by_type_and_sign_too(device):
    y = np.arange(1, 5, dtype=np.float32)
    for c in (2.0, np.float32(2), 0.0, -0.0, np.float32(-0.0), 2, True):
        with np.errstate(divide="ignore"):
            want = y / c
        got = host(Scaled(c).apply(y, device=device))
        assert got.dtype == want.dtype, (repr(c), got.dtype, want.dtype)
        np.testing.assert_array_equal(got, want, err_msg=repr(c))


def test_a_captured_graph_replays_each_feed_s_data(device, rng):
    def f(x, y, s):
        return (x * s + y).sum(axis=-1), x - y
    k = tj.kernel(f)
    x, y = (rng.standard_normal((16, 50)).astype(np.float32) for _ in range(2))
    with tj.capture() as g:
        g.outputs = k(x, y, 2.0, device=device)
    for _ in range(2):
        x2, y2 = (rng.standard_normal((16, 50)).astype(np.float32) for _ in range(2))
        for got, want in zip(g(x2, y2), f(x2, y2, 2.0)):
            same(got, want)


def test_a_jit_function_keys_its_scalars_by_type_and_sign(device):
    """tj.jit captures per scalar value: 0.0 and -0.0 (equal, one hash) are two graphs, as are 1 and 1.0."""
    x = np.arange(1, 5, dtype=np.float32)
    k = tj.kernel(lambda x, s: x / s)
    j = tj.jit(lambda x, s: k(x, s, device=device), copy=True)
    for s in (0.0, -0.0, np.float32(0.0), np.float32(-0.0), 2, 2.0, 2.5, 0.0):
        with np.errstate(divide="ignore"):
            want = x / s
        np.testing.assert_array_equal(host(j(x, s)), want, err_msg=repr(s))


def test_a_jit_function_s_arguments_stay_apart_however_the_first_call_aliased_them(device):
    """A first call passing one array twice (f(x, x)), or an array the function also reads from a global, was
    captured as one input: a later call's feeds went into it one after the other, and the graph computed with
    the last (f(a, b) gave f(b, b))."""
    k = tj.kernel(lambda x, y: x - y)
    j = tj.jit(lambda x, y: k(x, y, device=device), copy=True)
    x, a, b = np.arange(4, dtype=np.float32), np.ones(4, np.float32), np.full(4, 5, np.float32)
    same(j(x, x), x - x)
    same(j(a, b), a - b, "after f(x, x)")
    w = np.full(4, 10, np.float32)
    g = tj.jit(lambda x: k(x, w, device=device), copy=True)
    same(g(w), w - w)
    same(g(a), a - w, "after f(w) where the function reads w too")


# ---- hand-written kernels ----

RAW = {
    "opencl": ("__kernel void axpy(__global const float* x, __global float* y, const float a, const int n) {\n"
               "    int i = get_global_id(0);\n    if (i < n) y[i] = a * x[i] + y[i];\n}"),
    "cuda": ('extern "C" __global__ void axpy(const float* x, float* y, float a, int n) {\n'
             "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = a * x[i] + y[i];\n}"),
    "metal": ("#include <metal_stdlib>\nusing namespace metal;\n"
              "kernel void axpy(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],\n"
              "                 constant float& a [[buffer(2)]], constant int& n [[buffer(3)]],\n"
              "                 uint i [[thread_position_in_grid]]) {\n    if ((int)i < n) y[i] = a * x[i] + y[i];\n}"),
    "webgpu": ("@group(0) @binding(0) var<storage, read> x: array<f32>;\n"
               "@group(0) @binding(1) var<storage, read_write> y: array<f32>;\n"
               "@group(0) @binding(2) var<uniform> a: f32;\n@group(0) @binding(3) var<uniform> n: i32;\n"
               "@compute @workgroup_size(64)\nfn axpy(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
               "    let i = i32(gid.x);\n    if (i < n) { y[i] = a * x[i] + y[i]; }\n}")}


def test_a_raw_kernel_reads_each_call_s_arguments(device, rng):
    target = device.partition(":")[0]
    if target not in RAW:
        pytest.skip(f"{device} has no kernel language of its own")
    k = tj.RawKernel(RAW[target], "axpy", device=device)
    x1, x2 = (rng.standard_normal(256).astype(np.float32) for _ in range(2))
    y1, y2 = np.ones(256, np.float32), np.full(256, -2, np.float32)
    k(x1, y1, np.float32(2), 256, grid=4, block=64)
    k(x2, y2, np.float32(-0.5), 100, grid=4, block=64)   # every argument new: a scalar, arrays, a size
    same(y1, np.float32(2) * x1 + 1)
    same(y2, np.where(np.arange(256) < 100, np.float32(-0.5) * x2 - 2, -2).astype(np.float32))
    with pytest.raises(tj.ArgumentError, match="missing n"):
        k(x2, y2, np.float32(3), grid=4, block=64)   # the last call's n is not taken


def test_a_raw_kernel_called_from_several_threads_launches_each_call_s_arguments(device, rng):
    """OpenCL's kernel object holds the arguments: a thread's could be set between another's setting and its
    launch (the generated kernels' launches set and enqueue under a lock; raw ones now do too)."""
    import threading
    target = device.partition(":")[0]
    if target not in RAW:
        pytest.skip(f"{device} has no kernel language of its own")
    k = tj.RawKernel(RAW[target], "axpy", device=device)
    wrong = []

    def work(t: int):
        for i in range(15):
            x = np.full(256, t + 1, np.float32)
            y = np.full(256, i, np.float32)
            a, n = np.float32(t * 10 + 1), 64 * (1 + (t + i) % 4)
            k(x, y, a, n, grid=4, block=64)
            want = np.where(np.arange(256) < n, a * x + i, i).astype(np.float32)
            if not np.array_equal(y, want):
                wrong.append((t, i))
    threads = [threading.Thread(target=work, args=(t,)) for t in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert wrong == []
