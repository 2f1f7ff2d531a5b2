"""New shapes on the numba device: a kernel's sizes become arguments once they are seen to change, so a
new batch size or row length reuses a compiled kernel instead of compiling again (issue 19). Every
result is compared with NumPy, dtype included; compile counts come from cache_info()."""
from __future__ import annotations

import contextlib
import json
import re

import numpy as np
import pytest

import tracejit as tj
from cuda_check import checks_paused
from reference import native_ir
from tracejit.codegen.cpu.rows import host_vector_bytes
from tracejit.ir.kernel_ir import KOp


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, w, b):
    mu = x.mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + 1e-5) * w + b


def gelu(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))


def _check(got, want, what):
    assert got.dtype == want.dtype, what
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6, err_msg=what)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_growing_row_length_compiles_a_few_kernels_not_one_per_length(rng, dtype):
    """A decoder's softmax over 1, 2, ..., 96 keys: the first length is specialised, the second makes the
    row length an argument (a sum over a loop of that length is written for every length: blocks of
    1024, in NumPy's order below 8), and later ones compile only where the kernel must change. 96
    lengths, at most 3 compiles."""
    f = tj.kernel(softmax)
    for n in range(1, 97):
        x = (rng.standard_normal((6, n)) * 4).astype(dtype)
        with checks_paused() if n > 1 else contextlib.nullcontext():
            _check(f(x, device="numba"), softmax(x), f"length {n}")
    info = f.cache_info()
    assert info["traces"] == 96
    assert info["compiles"] <= 3, info
    body = f.lower(x, device="numba").kernels[0].source.split("def ", 1)[1]
    assert "tj_s0" in body and "96" not in body


def test_a_row_length_and_its_reciprocal_in_a_mean_are_both_arguments(device, rng):
    """layernorm's mean divides by the row length: a float constant of the kernel that changes with it.
    On GPUs the row of 257 takes a work-group (a kernel of another shape)."""
    f = tj.kernel(layernorm)
    for n in (5, 17, 33, 64, 100, 257):
        x = rng.standard_normal((9, n), dtype=np.float32)
        w, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
        with checks_paused():
            _check(np.asarray(f(x, w, b, device=device)), layernorm(x, w, b), f"{device} length {n}")
    assert f.cache_info()["compiles"] <= 3, f.cache_info()


def test_strides_that_follow_a_size_are_arguments_too(device, rng):
    """Sums down columns and a shifted difference, transposed: row strides and extents in index
    arithmetic change with the row length; every size matches NumPy and most reuse a compile."""
    def columns_and_steps(x):
        return x.sum(axis=0) + (x[:, 1:] - x[:, :-1]).T.sum(axis=1).sum()

    f = tj.kernel(columns_and_steps)
    sizes = (5, 17, 33, 64, 100, 257)
    for n in sizes:
        x = rng.standard_normal((9, n), dtype=np.float32)
        with checks_paused():
            got, want = np.asarray(f(x, device=device)), columns_and_steps(x)
            assert got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-4, err_msg=f"{device} length {n}")
    kernels = len(f.lower(x, device=device).kernels)
    assert f.cache_info()["compiles"] < kernels * len(sizes), f.cache_info()


def test_the_first_size_is_specialised_and_a_second_one_makes_what_changed_an_argument(rng):
    def scaled_softmax(x):   # a kernel no other test compiles: symbolic sizes are shared by identical kernels
        return softmax(x * np.float32(1.375))

    f = tj.kernel(scaled_softmax)
    softmax_ = scaled_softmax
    x1, x2 = rng.standard_normal((4, 48), dtype=np.float32), rng.standard_normal((4, 80), dtype=np.float32)
    assert "tj_s0" not in f.lower(x1, device="numba").kernels[0].source
    with checks_paused():
        _check(f(x1, device="numba"), softmax_(x1), "first")
        _check(f(x2, device="numba"), softmax_(x2), "second")
    second = f.lower(x2, device="numba").kernels[0].source
    assert "tj_s0" in second and "80" not in second.split("def ", 1)[1]


def test_indices_read_from_data_are_checked_against_each_sizes_own_axis(rng):
    """x[idx] checks each index against the length of x's axis, which NumPy's IndexError message names:
    such a kernel is compiled per axis length (the message is part of it), and raises for the size at hand."""
    f = tj.kernel(lambda x, idx: x[idx] * 2)
    idx = np.array([0, 3, -1, 5], np.int64)
    with checks_paused():
        for n in (8, 9, 12):
            x = rng.standard_normal(n).astype(np.float32)
            _check(f(x, idx, device="numba"), x[idx] * 2, f"length {n}")
        with pytest.raises(IndexError, match="size 5"):
            f(rng.standard_normal(5).astype(np.float32), idx, device="numba")


def test_graph_capture_replays_a_kernel_whose_sizes_are_arguments(rng):
    f = tj.kernel(softmax)
    with checks_paused():
        f(rng.standard_normal((3, 40), dtype=np.float32), device="numba")   # the first: specialised
        x = rng.standard_normal((3, 72), dtype=np.float32)
        with tj.capture() as g:
            y = f(x, device="numba")
            g.outputs = y
        assert "tj_s0" in f.lower(x, device="numba").kernels[0].source
    _check(np.asarray(y), softmax(x), "captured call")
    for _ in range(2):
        x2 = rng.standard_normal((3, 72), dtype=np.float32)
        _check(np.asarray(g(x2)), softmax(x2), "replay")


def test_dynamic_true_makes_sizes_arguments_from_the_first_compile(rng):
    def softmax_times_two(x):   # a kernel of its own: symbolic sizes are shared by identical kernels
        return softmax(x) * np.float32(2)

    f = tj.kernel(softmax_times_two, dynamic=True)
    x = rng.standard_normal((5, 40), dtype=np.float32)
    source = f.lower(x, device="numba").kernels[0].source
    assert "tj_s0" in source and "40" not in source.split("def ", 1)[1]
    with checks_paused():
        for n in (40, 24, 56, 72, 100):
            x = rng.standard_normal((5, n), dtype=np.float32)
            _check(f(x, device="numba"), softmax_times_two(x), f"length {n}")
    assert f.cache_info()["compiles"] == 1, f.cache_info()


def test_dynamic_per_axis_makes_the_named_axes_sizes_arguments_and_leaves_the_others_to_the_default(rng):
    def softmax_plus_one(x):   # kernels of their own: symbolic sizes are shared by identical kernels
        return softmax(x) + np.float32(1)

    f = tj.kernel(softmax_plus_one, dynamic={"x": -1})   # the row length symbolic from the first call
    source = f.lower(rng.standard_normal((5, 40), dtype=np.float32), device="numba").kernels[0].source
    assert "tj_s0" in source and "40" not in source.split("def ", 1)[1]
    with checks_paused():
        for n in (40, 24, 56, 100):
            x = rng.standard_normal((5, n), dtype=np.float32)
            _check(f(x, device="numba"), softmax_plus_one(x), f"length {n}")
    assert f.cache_info()["compiles"] == 1, f.cache_info()

    def softmax_minus_one(x):
        return softmax(x) - np.float32(1)

    # rows symbolic (the global size, an argument anyway): the row length stays a constant of the first
    # compile and follows the default, an argument once a second value is seen
    g = tj.kernel(softmax_minus_one, dynamic={"x": (0,)})
    assert "40" in g.lower(rng.standard_normal((5, 40), dtype=np.float32), device="numba").kernels[0].source
    with checks_paused():
        for b, n in ((5, 40), (9, 40), (5, 41), (7, 64), (3, 100)):
            x = rng.standard_normal((b, n), dtype=np.float32)
            _check(g(x, device="numba"), softmax_minus_one(x), f"shape {(b, n)}")
    assert g.cache_info()["compiles"] == 2, g.cache_info()


def test_dynamic_per_axis_matches_numpy_on_every_device(device, rng):
    f = tj.kernel(lambda x, w: softmax(x * w), dynamic={"x": (0, 1), "w": -1})
    for b, n in ((4, 16), (6, 20), (3, 33)):
        x, w = rng.standard_normal((b, n), dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
        _check(f(x, w, device=device), softmax(x * w), f"{device} {(b, n)}")


def attention_step(q, k, v):
    """One decoder step: a query row against the keys and values of every position so far."""
    s = q @ k.T / np.sqrt(np.float32(q.shape[-1]))
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def test_a_decoding_loop_compiles_each_kernel_at_length_one_and_once_symbolic(device, rng):
    """The default dynamic=None makes a dimension symbolic the first time it takes a second value: the
    decoder's step compiles its 4 kernels at length 1 and once more at length 2 with the lengths as
    arguments (row lengths and loop extents on every device), and later lengths reuse them: no layout
    depends on a symbolic extent (no register tile of q @ k.T that must divide the length, no row kept
    in local memory whose length the source fixes, a GPU's rows walked by work-groups whatever their
    length; a CPU's rows by one work-item each; a sum over the length in NumPy's order below 8 from the same
    source; PoCL's padding work-items clamped to the last index, their stores skipped). Every length
    matches NumPy."""
    f = tj.kernel(attention_step)
    q = rng.standard_normal((1, 64), dtype=np.float32)
    with checks_paused():
        for n in (*range(1, 41), 64, 127, 128, 129, 200, 256):
            k, v = rng.standard_normal((n, 64), dtype=np.float32), rng.standard_normal((n, 64), dtype=np.float32)
            _check(np.asarray(f(q, k, v, device=device)), attention_step(q, k, v), f"{device} length {n}")
    kernels = len(f.lower(q, k, v, device=device).kernels)
    # measured here: 8 on every device, numba with 256-bit vectors too (11-17 before on PoCL, 9-13 on GPUs)
    assert kernels == 4 and f.cache_info()["compiles"] <= 2 * kernels, f.cache_info()


@pytest.mark.parametrize("fn", [softmax, layernorm], ids=["softmax", "layernorm"])
def test_a_growing_row_length_compiles_a_few_kernels_on_every_device(device, rng, fn):
    """Rows of 1, 2, ..., 40 and past the thresholds where a specialised kernel changes shape (a GPU
    work-group per row from 128, a row kept in local memory): the first length is specialised, the second
    makes the length an argument, and that kernel serves every later length (on SIMT devices it keeps no
    row in local memory, whose length their source would fix, and a GPU walks every row with a
    work-group of the largest size, a CPU device one work-item; the float32 sums keep NumPy's order below 8
    from the same source). One compile per length on the SIMT devices before."""
    f = tj.kernel(fn)
    with checks_paused():
        for n in (*range(1, 41), 64, 127, 128, 129, 300, 1000):
            x = rng.standard_normal((6, n), dtype=np.float32)
            extra = (rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)) \
                if fn is layernorm else ()
            _check(np.asarray(f(x, *extra, device=device)), fn(x, *extra), f"{device} length {n}")
    limit = 2
    assert f.cache_info()["compiles"] <= limit, f.cache_info()


@pytest.fixture(params=[32, 64], ids=["256-bit", "512-bit"])
def vector_bytes(request, monkeypatch):
    """The numba device's kernels vectorised with 256-bit registers (unmarked: LLVM's tuning on AVX2, and on
    Intel's AVX-512 cores as here) or 512-bit ones (marked; AVX-512 hosts only)."""
    from tracejit.codegen.cpu import numba as numba_codegen, native as numba_native, rows as numba_rows
    if request.param == 64 and host_vector_bytes() < 64:
        pytest.skip("512-bit vectors need an AVX-512 host")
    for module in (numba_codegen, numba_native, numba_rows):
        monkeypatch.setattr(module, "host_vector_bytes", lambda: request.param)
    return request.param


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_short_sums_over_a_symbolic_length_are_numpy_s_sums_bit_for_bit(rng, dtype, vector_bytes, numba_renderer):
    """A float32 sum over a length that is an argument is one source for every length, NumPy's bits below 8:
    with 512-bit vectors LLVM's scalar loop adds those in order; with 256-bit ones, whose vector epilogue
    takes 4, the kernel branches to a copy of the loop without reassociation (the native rendering always
    does). A float64 sum is not written for every length (it accumulates in its own dtype): its short
    lengths are a source of their own."""
    f = tj.kernel(lambda x: x.sum(axis=-1), dynamic={"x": -1})
    x = rng.standard_normal((64, 40)).astype(dtype)
    _check(f(x, device="numba"), x.sum(axis=-1), "length 40")   # compiled with the length an argument
    for n in range(1, 8):
        x = (rng.standard_normal((64, n)) * 1000).astype(dtype)
        np.testing.assert_array_equal(f(x, device="numba"), x.sum(axis=-1), err_msg=f"length {n}")
    source = f.lower(x).kernels[0].source
    native = native_ir(source)
    assert (native is not None) == (numba_renderer == "native")
    if native is None:
        assert ("wide_vectors()" in source) == (vector_bytes == 64)
        assert (" < 8:" in source) == (dtype == np.float32 and vector_bytes == 32), source
    else:
        assert ('"prefer-vector-width"="512"' in native) == (vector_bytes == 64)
        assert (re.search(r'icmp slt i64 %"[^"]+", 8\n', native) is not None) == (dtype == np.float32), native
    # length 1 is a kernel of its own (a copy)
    assert f.cache_info()["compiles"] <= (2 if dtype == np.float32 else 3), f.cache_info()


@pytest.mark.parametrize("reduce", ["sum", "prod"])
def test_short_sums_over_a_symbolic_length_are_numpy_s_on_every_device(device, rng, reduce):
    """One source for every length on the SIMT devices too: where the length (an argument) is below 8 at
    run time, a work-item adds in NumPy's order without reassociation, and a work-group's row is added by
    its first work-item alone; a longer one as a long row. Rows of 1-7 give NumPy's bits."""
    f = tj.kernel(lambda x: getattr(x, reduce)(axis=-1), dynamic={"x": -1})
    scale = 1000 if reduce == "sum" else 1.5
    with checks_paused():
        x = rng.standard_normal((64, 40)).astype(np.float32)
        _check(np.asarray(f(x, device=device)), getattr(x, reduce)(axis=-1), "length 40")
        for n in range(1, 8):
            x = (rng.standard_normal((64, n)) * scale).astype(np.float32)
            np.testing.assert_array_equal(np.asarray(f(x, device=device)), getattr(x, reduce)(axis=-1),
                                          err_msg=f"{device} length {n}")
    # length 40 (its length an argument from the first compile), length 1 (a program of its own); numba's
    # float32 product accumulates in float64 where long, so its short ones are a source of their own
    assert f.cache_info()["compiles"] <= 2 + (device == "numba" and reduce == "prod"), f.cache_info()


def _scatter_add(x, i, v):
    y = x.copy()
    np.add.at(y, i, v)
    return y


def test_padding_work_items_compute_as_the_last_one_and_store_nothing(rng):
    """PoCL: a kernel whose sizes are arguments clamps its padding work-items' index to the last one and
    guards its stores (no early return, which stops PoCL vectorising across work-items), so the sizes its
    work-groups divide and the others share one source; the padding items store nothing, so an output
    that aliases an input (out=x) stays right. A kernel with atomic updates (np.add.at) keeps the check."""
    rows = tj.kernel(lambda x: x * 2 + x.sum(axis=-1, keepdims=True), dynamic=True)   # not idempotent
    scatter = tj.kernel(_scatter_add, dynamic=True)
    for n in (1000, 3001, 5003):
        host = rng.random((n // 10, 9), dtype=np.float32) + 1   # rows enough for a row per work-item
        x = tj.asarray(host, device="opencl")
        assert rows(x, out=x, device="opencl") is x
        _check(x.numpy(), host * 2 + host.sum(axis=-1, keepdims=True), f"rows {n}, out= its input")
        y, i, v = rng.standard_normal(64), rng.integers(0, 64, n), rng.standard_normal(n)
        _check(np.asarray(scatter(y, i, v, device="opencl")), _scatter_add(y, i, v), f"np.add.at {n}")
    flip = tj.kernel(lambda x: x[::-1] * 2 + x, dynamic=True)   # reads what other work-items write
    for n in (5, 7, 6, 13):
        host = np.arange(n, dtype=np.float32)
        x = tj.asarray(host, device="opencl")
        flip(x, out=x, device="opencl")
        _check(x.numpy(), host[::-1] * 2 + host, f"x[::-1] * 2 + x, {n}, out= its input")
    (k,) = rows.lower(rng.random((500, 9), dtype=np.float32), device="opencl").kernels
    assert "tj_items - 1)" in k.source and "if (tj_item < tj_items) out0[" in k.source and "return;" not in k.source
    (atomic,) = [k for k in scatter.lower(y, i, v, device="opencl").kernels if "atomic" in k.source]
    assert "tj_items - 1)" not in atomic.source and "return;" in atomic.source


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("dynamic", [False, True])
def test_long_maxima_and_minima_on_pocl_run_in_lanes_and_match_numpy(rng, dynamic):
    """PoCL vectorises a row's max or min only when it runs in independent lanes (simt.Mapping._laned_extrema):
    rows walked 8 at a time, the last element seen again past the end. NaN in every lane position, at the
    ends, infinities, rows of zeros; lengths that 8 divides and others, fixed and arguments of the code."""
    kernels = {"max": (tj.kernel(lambda x: x.max(axis=-1), dynamic=dynamic), lambda x: x.max(axis=-1)),
               "min": (tj.kernel(lambda x: np.min(x, axis=1), dynamic=dynamic), lambda x: np.min(x, axis=1)),
               "softmax": (tj.kernel(_softmax, dynamic=dynamic), _softmax)}
    for n in (129, 1000, 1024, 1031):
        for dtype in (np.float32, np.float64):
            x = rng.standard_normal((64, n)).astype(dtype)
            for r in range(10):
                x[r, (r * 37 + r) % n] = np.nan   # NaN in each of the 8 lanes, and beyond
            x[10, 0] = x[11, n - 1] = np.nan
            x[12, :] = -np.inf
            x[13, n - 1] = np.inf
            x[14, :] = 0.0
            x[15, ::2] = -0.0
            x[15, 1::2] = -1.0
            for name, (f, numpy_f) in kernels.items():
                got, want = np.asarray(f(x, device="opencl")), numpy_f(x)
                assert got.dtype == want.dtype
                np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"{name} {n} {dtype.__name__}")
                if name != "softmax":
                    np.testing.assert_array_equal(got, want, err_msg=f"{name} {n} {dtype.__name__}")
    for n in (1024, 1031):
        (k,) = kernels["max"][0].lower(rng.standard_normal((64, n)), device="opencl").kernels
        walk = k.source.split("_lane[")[2]   # from the lanes' first values to the first step: the index
        assert ("?" in walk) == (dynamic or n % 8 != 0), k.source   # clamped only where 8 may not divide it


def test_the_vector_width_is_512_bits_on_avx512_cores_but_the_first_intel_ones(monkeypatch):
    """LLVM's tuning vectorises with 256-bit registers on every Intel AVX-512 core; tracejit marks its kernels
    for 512 bits (runtime.numba_math.wide_vectors) but on the cores whose clock drops under 512-bit work.
    A float32 sum written for every length is NumPy's only where the shortest vector loop takes 8 lanes."""
    from tracejit.codegen.cpu import rows
    from tracejit.codegen.cpu.host import HostCPU
    for name, width in (("emeraldrapids", 64), ("skylake-avx512", 32), ("cascadelake", 32),
                        ("icelake-server", 64), ("znver4", 64)):
        monkeypatch.setattr(rows, "host_cpu", lambda name=name: HostCPU(name, "+avx,+avx2,+avx512f,-sse4a"))
        assert host_vector_bytes.__wrapped__() == width, name
    monkeypatch.setattr(rows, "host_cpu", lambda: HostCPU("znver3", "+avx,+avx2,-avx512f"))
    assert host_vector_bytes.__wrapped__() == 32


@pytest.mark.skipif(host_vector_bytes() < 64, reason="kernels are marked for 512-bit vectors on AVX-512 hosts only")
def test_kernels_on_avx512_hosts_are_vectorised_with_512_bit_registers():
    import numba
    from tracejit.codegen.cpu import numba as numba_codegen
    from tracejit.codegen.cpu.numba_math import wide_vectors

    @numba.njit
    def scale(x, out):
        wide_vectors()
        for i in range(x.size):
            out[i] = x[i] * np.float32(2)

    x = np.arange(1000, dtype=np.float32)
    out = np.empty_like(x)
    scale(x, out)
    np.testing.assert_array_equal(out, x * 2)
    assert "zmm" in scale.inspect_asm(scale.signatures[0]), "no 512-bit register in the loop's machine code"
    f = tj.kernel(lambda x: np.exp(x) * 2, dynamic=False)
    (k,) = f.lower(x).kernels
    # a serial or chunked kernel is marked once; a prange loop's body becomes a function of its own
    for loop, marked in (("serial", "out0, in0):\n    wide_vectors()\n    for"),
                         ("chunks", "out0, in0):\n    wide_vectors()\n    for"),
                         ("prange", "numba.prange(tj_size):\n        wide_vectors()")):
        assert marked in numba_codegen.render(k.ir, loop), loop


SECOND_PROCESS = """
import json, sys
import numpy as np
import tracejit as tj

def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)

f = tj.kernel(softmax)
out = []
for n in map(int, sys.argv[1:]):
    x = np.random.default_rng(n).standard_normal((3, n)).astype(np.float32)
    np.testing.assert_allclose(f(x, device="numba"), softmax(x), rtol=2e-5, atol=2e-6)
    out.append(f.cache_info()["compiles"])
print(json.dumps(out))
"""


def test_a_second_process_reuses_the_kernel_whose_sizes_became_arguments_in_the_first(tmp_path):
    """Which sizes of a kernel became arguments is kept in the disk cache: a later process seeing a new
    size goes straight to that kernel, which is in the disk cache too, and compiles nothing."""
    from test_api import run_python
    script = tmp_path / "second.py"
    script.write_text(SECOND_PROCESS)
    env = {"TRACEJIT_CACHE_DIR": str(tmp_path / "cache")}
    first = run_python(str(script), "40", "72", **env)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == [1, 2]      # specialised, then the row length an argument
    second = run_python(str(script), "56", "100", **env)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout) == [0, 0]


def test_dynamic_false_compiles_every_size_with_its_sizes_as_constants(rng):
    def shifted_softmax(x):   # a kernel of its own: symbolic sizes are shared by identical kernels
        return softmax(x - np.float32(0.625))

    f = tj.kernel(shifted_softmax, dynamic=False)
    with checks_paused():
        for n in (24, 40, 56):
            x = rng.standard_normal((5, n), dtype=np.float32)
            _check(f(x, device="numba"), shifted_softmax(x), f"length {n}")
            assert "tj_s0" not in f.lower(x, device="numba").kernels[0].source
    assert f.cache_info()["compiles"] == 3


@pytest.mark.slow_emulated   # (what it counts is the frontend's: compiles per size, not a target's code)
def test_fifty_batch_sizes_compile_each_kernel_at_most_twice(device, rng):
    """A kernel's global size is its argument on every device: a new batch size of an elementwise or
    row-wise program traces and lowers again (a few ms) but compiles only where the kernel's body
    changes: on numba the loop kind (serial below 65536 elements of work, prange above); on CPU OpenCL
    whether the work-groups divide the size (no bounds check then, so PoCL vectorises); on CUDA, Metal
    and WebGPU never (fixed work-groups, always a bounds check against the size argument)."""
    w, b = rng.standard_normal(96, dtype=np.float32), rng.standard_normal(96, dtype=np.float32)
    for fn, extra in ((softmax, ()), (layernorm, (w, b)), (gelu, ())):
        kernel = tj.kernel(fn)
        for batch in range(1, 51):
            x = rng.standard_normal((batch * 15, 96), dtype=np.float32)
            with checks_paused() if batch > 1 else contextlib.nullcontext():   # one size's CUDA/MSL check is enough
                got = np.asarray(kernel(x, *extra, device=device))
            want = fn(x, *extra)
            assert got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6, err_msg=f"{fn.__name__} batch {batch}")
        info = kernel.cache_info()
        assert info["traces"] == 50 and info["plans"] <= 50
        assert info["compiles"] <= 2, (fn.__name__, info)


@pytest.mark.slow_emulated("metal")
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_products_with_symbolic_sizes_are_register_tiled_with_clamped_edges(device, rng, dtype):
    """Under dynamic=True the output's sizes are symbolic: a product is still register-tiled (4x8 outputs
    per work-item where the device lowers it so), its last block's copies past the edge reading and
    writing the last row or column again. Sizes that divide the tile and sizes that do not all match
    NumPy (integers exactly). Not asserted: how many compiles (a size equal to a constant of the kernel's
    own code, such as the tile's factor 8, shares that constant's instruction in the IR: a kernel of another
    shape, compiled apart; and GPUs' tiled products choose tiles by size)."""
    f = tj.kernel(lambda a, b: a @ b + 1, dynamic=True)
    with checks_paused():
        for m, k, n in ((2, 3, 1), (5, 7, 3), (16, 8, 24), (17, 19, 13), (48, 9, 40), (33, 11, 41), (12, 64, 100)):
            a = (rng.standard_normal((m, k)) * 8).astype(dtype)
            b = (rng.standard_normal((k, n)) * 8).astype(dtype)
            got, want = np.asarray(f(a, b, device=device)), a @ b + 1
            assert got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * 64 * k, err_msg=f"{device} {(m, k, n)}")
        ir = f.lower((rng.standard_normal((17, 19)) * 8).astype(dtype),
                     (rng.standard_normal((19, 13)) * 8).astype(dtype), device=device).kernels[0].ir
    if ir.contraction is None:   # lowered by layout (numba, CPU OpenCL): 4 x 8 accumulators, clamped copies
        assert sum(x.op == KOp.ACC for x in ir.instrs) == 32
        assert any(x.op == KOp.CAST and ir.instrs[x.srcs[0]].dtype == np.int32 for x in ir.instrs)
