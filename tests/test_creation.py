"""Arrays made inside a kernel (zeros, arange, linspace, eye, tri, tril, ... and their _like forms) and
NumPy arrays captured from the function's closure: values and dtypes exactly NumPy's, fused into their
consumers (kernel counts pinned), embedded as constants up to the documented size, keyed by content."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tracejit as tj
from reference import assert_close, run_kernel
from tracejit.numpy.captured import array_node
from tracejit.ir import interpret
from tracejit.ir.graph import Op
from tracejit.ir.table import MAX_ELEMENTS, MAX_KERNEL_BYTES


def assert_exact(result, expected, what="result"):
    """Same dtype, shape and bits (NaN where NumPy has NaN, -0.0 where it has -0.0): these are constants."""
    if isinstance(expected, tuple):
        assert isinstance(result, tuple) and len(result) == len(expected)
        for i, (r, e) in enumerate(zip(result, expected)):
            assert_exact(r, e, f"{what}[{i}]")
        return
    r, e = np.asarray(result), np.asarray(expected)
    assert r.dtype == e.dtype, f"{what}: dtype {r.dtype}, NumPy gives {e.dtype}"
    assert r.shape == e.shape, f"{what}: shape {r.shape}, NumPy gives {e.shape}"
    if e.dtype.kind == "f":
        np.testing.assert_array_equal(r, e, err_msg=what)   # NaN == NaN here
        np.testing.assert_array_equal(np.signbit(r), np.signbit(e), err_msg=f"{what}: sign of zero")
    else:
        np.testing.assert_array_equal(r, e, err_msg=what, strict=True)


def check_exact(body, *args, device):
    result = run_kernel(tj.kernel(body), *args, device=device)
    assert_exact(result, body(*args))


# --- every creation function, with NumPy's arguments --------------------------------------------------
# Grouped so one kernel signature carries many results (each signature is a compile); the 32-bit group
# also runs on webgpu, which has no 64-bit types.

def made_32_bit(x):
    n = x.shape[-1]
    return (np.zeros(x.shape, np.float32), np.ones((2, 3), np.int32), np.full(x.shape, 7, np.int16),
            np.full_like(x, np.nan), np.zeros_like(x), np.ones_like(x, dtype=np.int8), np.full_like(x, -0.0),
            np.empty_like(x).shape == x.shape and np.zeros(1, np.uint8),
            np.arange(n, dtype=np.int32), np.arange(2, 11, 3, dtype=np.int32), np.arange(10, -1, -3, dtype=np.uint16),
            np.arange(0, 1, 0.125, dtype=np.float32), np.arange(-2.5, 3, 0.75, dtype=np.float32),
            np.linspace(0, 1, 7, dtype=np.float32), np.linspace(2, -3, 11, endpoint=False, dtype=np.float32),
            np.eye(4, dtype=np.float32), np.eye(3, 5, k=1, dtype=np.int32), np.eye(4, k=-2, dtype=np.uint8),
            np.identity(3, dtype=bool), np.tri(4, dtype=np.float32), np.tri(3, 5, k=-1, dtype=np.int32),
            np.tri(5, 3, k=2, dtype=bool), np.tril(x), np.tril(x, 1), np.tril(x, -2), np.triu(x), np.triu(x, -1),
            np.triu(x, 2), np.tril(x[0]), np.triu(x[1], 1))


def made_64_bit(x):
    n = x.shape[0]
    return (np.zeros(x.shape), np.ones(n), np.full((2, n), 3), np.full((n,), 2.5), np.full_like(x, 2.7),
            np.arange(n), np.arange(1, 2 * n, 2), np.arange(n, 0, -1), np.arange(-7, 8, 5.5), np.arange(0.0, 1.0, 0.1),
            np.arange(3.0, -1.0, -0.25), np.linspace(0, 1, 7), np.linspace(-1, 1, 5, endpoint=False),
            np.linspace(0, 10, 1), np.linspace(1.5, 1.5, 4), np.linspace(0, 1, 9, dtype=np.int64),
            np.eye(n), np.eye(n, 3, k=-1), np.identity(2), np.tri(n), np.tri(n, k=1), np.tril(x * 1.5),
            np.triu(x, 1))


def test_creation_functions_32_bit_match_numpy_exactly(device, rng):
    x = rng.standard_normal((5, 5)).astype(np.float32)
    check_exact(made_32_bit, x, device=device)


def test_creation_functions_64_bit_match_numpy_exactly(device):
    x = np.arange(-6, 6, dtype=np.int64).reshape(4, 3)
    check_exact(made_64_bit, x, device=device)


def test_tj_functions_follow_numpy_signatures_and_default_dtypes(device):
    def body(x):
        return (tj.zeros(3) + x[:3], tj.ones((2, 2)), tj.full(3, 4), tj.full(2, True), tj.arange(4), tj.arange(1.0, 2.0, 0.25),
                tj.linspace(0, 1, 5), tj.linspace(0, 1, 4, retstep=True)[0], tj.eye(3), tj.identity(2), tj.tri(3),
                tj.tril(x.reshape(2, 2), -1), tj.triu(x.reshape(2, 2)), tj.zeros_like(x), tj.full_like(x, 1.5),
                tj.empty(2).shape == (2,) and tj.ones(1, np.int8))
    got = run_kernel(tj.kernel(body), np.arange(4, dtype=np.int64), device=device)
    expected = (np.zeros(3) + np.arange(3), np.ones((2, 2)), np.full(3, 4), np.full(2, True), np.arange(4),
                np.arange(1.0, 2.0, 0.25), np.linspace(0, 1, 5), np.linspace(0, 1, 4), np.eye(3), np.identity(2),
                np.tri(3), np.tril(np.arange(4).reshape(2, 2), -1), np.triu(np.arange(4).reshape(2, 2)),
                np.zeros(4, np.int64), np.full(4, 1, np.int64), np.ones(1, np.int8))
    assert_exact(got, expected)


def test_tril_triu_of_batched_traced_values_and_full_like_fill_cast(device, rng):
    def body(x, i):
        return (np.tril(x, 1) + np.triu(x, -1), np.triu(x.transpose(0, 2, 1), 2), np.full_like(i, 2.7),
                np.full_like(i, -3, dtype=np.float32), np.zeros_like(i, shape=(2, 3)), x + [1.0, 2.0, 3.0, 4.0])
    x = rng.standard_normal((3, 4, 4)).astype(np.float32)
    i = np.arange(6, dtype=np.int32)
    assert_close(run_kernel(tj.kernel(body), x, i, device=device), body(x, i))


def test_creation_results_combine_with_numpy_promotion(device, rng):
    # an int64 arange next to float32 data is float64 in NumPy, and so here (webgpu: DtypeError)
    x = rng.standard_normal((3, 6)).astype(np.float32)
    f = tj.kernel(lambda x: x + np.arange(x.shape[-1]))
    assert_close(run_kernel(f, x, device=device), x + np.arange(6))
    assert len(f.lower(x, device=device).kernels) == 1


def test_long_rows_read_a_table_inside_a_work_group_row_kernel(device, rng):
    weights = rng.random(600).astype(np.float32)

    def body(x):
        s = x * weights
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    x = rng.standard_normal((3, 600)).astype(np.float32)
    f = tj.kernel(body)
    assert len(_kernels(f, x, device=device)) == 1
    assert_close(run_kernel(f, x, device=device), body(x))


# --- captured constants ------------------------------------------------------------------------------

LUT = np.array([0.5, -1.25, np.inf, -0.0, 3.0, np.nan, 7.5, 1e-3], np.float32)
STENCIL = np.array([[1, 2, 1], [2, 4, 2], [1, 2, 1]], np.int32)
MASK = np.array([True, False, False, True, True, False, True, False])


def test_closure_captured_tables_are_embedded_exactly(device, rng):
    def body(x, img):
        return x * LUT, np.where(MASK, x, LUT), img + STENCIL, img * STENCIL.T[::-1], (img + 1)[:, :2] * LUT[1:3]
    x = rng.standard_normal((4, 8)).astype(np.float32)
    img = rng.integers(-50, 50, (3, 3)).astype(np.int32)
    f = tj.kernel(body)
    with np.errstate(all="ignore"):
        assert_exact(run_kernel(f, x, img, device=device), body(x, img))


def test_float16_and_64_bit_tables(device, rng):
    half = np.array([1.5, -2.0, 65504.0, np.inf, 6e-8, -0.0], np.float16)
    wide = np.array([1e300, -2.5, 2 ** 60 + 1.0, np.nan, 5e-324, 0.1])
    ints = np.array([2 ** 62, -2 ** 63, 7, -1, 0, 3], np.int64)
    x = rng.standard_normal(6)
    check_exact(lambda x: (x * half.astype(np.float64), half + np.float16(0), x + wide, ints + x.astype(np.int64)),
                x, device=device)


def test_arrays_too_large_to_embed_are_held_by_the_plan_and_passed_beside_the_arguments(device, rng):
    # a lookup table from the closure, and arrays NumPy computes from the kernel's Python numbers (stockham_fft's
    # twiddle factors): past MAX_ELEMENTS they are not embedded but passed to the kernels as arrays of the plan's
    dt = np.float32 if device in ("webgpu", "metal") else np.float64
    big = rng.standard_normal(MAX_ELEMENTS + 1).astype(dt)
    x = rng.standard_normal(MAX_ELEMENTS + 1).astype(dt)
    f = tj.kernel(lambda x: x * big + np.sin(big[::-1]))
    assert_close(run_kernel(f, x, device=device), x * big + np.sin(big[::-1]))
    assert_close(run_kernel(f, 2 * x, device=device), 2 * x * big + np.sin(big[::-1]))   # the same plan again

    def grid(n, m, x):   # made from Python numbers: each (n, m) traces its own plan with its own arrays
        g = np.linspace(0.0, 1.0, n * m, dtype=x.dtype).reshape(n, m) ** 2
        return x[:n, :m] + (g + g.T[:n, :m] if n == m else g), g.sum(axis=1)

    y = rng.standard_normal((100, 100)).astype(dt)
    for n, m in ((100, 100), (90, 80)):
        for got, expected in zip(run_kernel(tj.kernel(grid), n, m, y, device=device), grid(n, m, y)):
            assert_close(got, expected, rtol=1e-6)


def test_a_held_array_is_the_value_it_had_when_the_function_was_traced(rng):
    # as a table's values and as Numba's global arrays: frozen when compiled (the docs say so)
    table = rng.standard_normal(3 * MAX_ELEMENTS)
    x = rng.standard_normal(3 * MAX_ELEMENTS)
    f = tj.kernel(lambda x: x + table)
    first = table.copy()
    assert_close(f(x), x + first)
    table[:] = 0.0
    assert_close(f(x), x + first)
    assert_close(tj.kernel(lambda x: x + table)(x), x)   # a new kernel traces it again


def test_held_arrays_inside_loops_selections_and_captured_graphs(device, rng):
    dt = np.float32 if device in ("webgpu", "metal") else np.float64
    weights = rng.standard_normal(5000).astype(dt)

    def relax(x, steps):   # read in every step of a loop compiled as a loop
        for _ in range(steps):
            x = 0.5 * x + weights
        return x

    x = rng.standard_normal(5000).astype(dt)
    assert_close(run_kernel(tj.kernel(relax), x, 40, device=device), relax(x, 40), rtol=1e-5)

    def positive(x):   # a size that depends on the data: its probe and its plan both read the array
        return (x * weights)[x > 0]

    assert_close(run_kernel(tj.kernel(positive), x, device=device), positive(x))
    f = tj.kernel(lambda x: x * weights)
    run_kernel(f, x, device=device)
    with tj.capture() as graph:
        out = f(tj.asarray(x, device), device=device)
    graph.replay()
    assert_close(np.asarray(out), x * weights)


def test_creation_from_a_traced_value_says_what_must_be_static():
    with pytest.raises(tj.UnsupportedError, match=r"np.zeros got a traced value.*Python values.*read from arrays"):
        tj.kernel(lambda x: np.zeros(x.argmax())).trace(np.ones(3))


def test_linspace_between_bounds_read_from_arrays_matches_numpy(device, rng):
    dt = np.float32 if device in ("webgpu", "metal") else np.float64
    x = rng.standard_normal(20).astype(dt)
    for body in (lambda x: np.linspace(x.min(), x.max(), 7), lambda x: np.linspace(0, x.max(), 5, endpoint=False),
                 lambda x: np.linspace(x.min(), x.min(), 1), lambda x: np.linspace(x[0], x[1], 4)[::-1]):
        got, expected = np.asarray(tj.kernel(body)(x, device=device)), body(x)
        assert got.dtype == expected.dtype
        assert_close(got, expected, rtol=1e-6 if dt == np.float32 else 1e-14)


def test_tables_past_a_kernels_constant_memory_are_held_instead(rng):
    a, b, c = (rng.standard_normal(MAX_ELEMENTS) for _ in range(3))
    x = np.ones(MAX_ELEMENTS)
    f = tj.kernel(lambda x: x * a + b - c)
    assert_close(f(x), x * a + b - c)
    for kernel in f.lower(x, device="cuda").kernels:   # (GPU constant memory: 64 KiB a kernel)
        tables = re.findall(r"tj_table_[0-9a-f]+\[(\d+)\]", kernel.source)
        assert sum(8 * int(n) for n in set(tables)) <= MAX_KERNEL_BYTES


@pytest.mark.parametrize("make", [lambda: np.ma.array([1.0, 2.0], mask=[True, False]),
                                  lambda: np.matrix([[1.0, 2.0]])], ids=["masked", "matrix"])
@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
def test_array_subclasses_are_not_silently_embedded_as_plain_arrays(make):
    value = make()
    with pytest.raises(tj.UnsupportedError, match="subclass"):
        tj.kernel(lambda x: x + value).trace(np.ones((1, 2)))


@pytest.mark.parametrize("value", [np.array([1, 2], np.clongdouble), np.array([object(), None]),
                                   np.array([1, 2], np.uint64)])
def test_unsupported_dtypes_of_captured_arrays_raise_dtype_error(value):
    with pytest.raises(tj.DtypeError, match=str(value.dtype)):
        tj.kernel(lambda x: x + value).trace(np.ones(2))


def test_a_captured_complex_array_is_a_complex_constant():
    table = np.array([1 + 2j, 3j])
    got = tj.kernel(lambda x: x * table)(np.array([2.0, -1.0]), device="numba")
    assert got.dtype == np.complex128 and np.array_equal(got, np.array([2.0, -1.0]) * table)


def test_changed_table_content_is_a_different_kernel_and_misses_the_cache(device):
    def make(table):
        return tj.kernel(lambda x: x * table)
    x = np.ones(4, np.float32)
    a, b = np.array([1, 2, 3, 4], np.float32), np.array([1, 2, 3, 5], np.float32)
    fa, fb = make(a), make(b)
    assert str(fa.trace(x)) != str(fb.trace(x))
    sa, sb = fa.lower(x, device=device).kernels[0].source, fb.lower(x, device=device).kernels[0].source
    assert sa != sb
    assert_exact(run_kernel(fa, x, device=device), x * a)
    assert_exact(run_kernel(fb, x, device=device), x * b)      # not a's kernel from the disk cache
    assert_exact(run_kernel(make(a.copy()), x, device=device), x * a)   # equal content: equal kernel
    assert make(a.copy()).lower(x, device=device).kernels[0].source == sa


# --- fused, never a buffer ---------------------------------------------------------------------------

def _kernels(f, *args, device):
    try:
        return f.lower(*args, device=device).kernels
    except tj.DtypeError as e:
        pytest.skip(f"{device}: {e}")


def test_causal_mask_softmax_and_arange_offsets_are_one_kernel_each(device, rng):
    def masked_softmax(x):
        n = x.shape[-1]
        s = np.where(np.tri(n, dtype=bool), x, -np.inf)
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def scaled_softmax(x):
        s = x * np.tri(x.shape[-1], dtype=np.float32)
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    x = rng.standard_normal((6, 6)).astype(np.float32)
    for body in (masked_softmax, scaled_softmax, lambda x: x + np.arange(6, dtype=np.float32),
                 lambda x: x * LUT[:6] + np.zeros(x.shape, np.float32)):
        f = tj.kernel(body)
        kernels = _kernels(f, x, device=device)
        assert len(kernels) == 1, body
        assert len(kernels[0].ir.params) == 2   # x and the result: no buffer for the mask or table
        assert_close(run_kernel(f, x, device=device), body(x))


def test_x_plus_int_arange_is_one_kernel(device):
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    f = tj.kernel(lambda x: x + np.arange(4, dtype=np.int32) * 3 + np.eye(3, 4, dtype=np.int32))
    assert len(_kernels(f, x, device=device)) == 1
    check_exact(lambda x: x + np.arange(4, dtype=np.int32) * 3 + np.eye(3, 4, dtype=np.int32), x, device=device)


# --- what NumPy arrays become (no device) --------------------------------------------------------------

@pytest.mark.parametrize("make, op", [
    (lambda: np.zeros((300, 300)), Op.CONST), (lambda: np.full(10 ** 5, np.nan, np.float32), Op.CONST),
    (lambda: np.arange(100_000), Op.IOTA), (lambda: np.arange(100_000, dtype=np.int32)[::-1], Op.ADD),
    (lambda: np.arange(6000).reshape(60, 100), Op.ADD), (lambda: np.arange(0, 2500, 0.5), Op.MUL),
    (lambda: np.arange(6000.0).reshape(60, 100) / 4, Op.MUL),
    (lambda: np.linspace(0, 1, 4097), Op.MUL), (lambda: np.linspace(-3, 7, 4097), Op.MUL), (lambda: np.linspace(0, 4096, 4097, dtype=np.float32), Op.CAST),
    (lambda: np.eye(500), Op.WHERE), (lambda: np.tri(300, k=-3, dtype=bool), Op.WHERE),
    (lambda: np.triu(np.ones((100, 200), np.int8), 5), Op.WHERE),
    (lambda: np.array([3, 1, 4, 1, 5]), Op.TABLE), (lambda: np.linspace(0, 1, 1000), Op.TABLE),
])
def test_large_structured_arrays_are_index_expressions_not_tables(make, op):
    assert array_node(make()).op is op


def test_large_unstructured_linspace_asks_for_an_argument():
    # step 1/9999 is inexact: compiled float arithmetic could round differently from NumPy, so no pattern
    with pytest.raises(tj.UnsupportedError, match="argument"):
        array_node(np.linspace(0, 1, 10_000))


ARANGE_CASES = [(0, 50, 1, "int8"), (100, -5, -7, "int16"), (3, 40, 4, "uint8"), (2 ** 31 - 100, 2 ** 31 - 1, 3, "int64"),
                (0, 4000, 1, "uint16"), (-1.5, 2.0, 0.125, "float32"), (1e6, 1e6 + 50, 0.5, "float64"),
                (0.0, 1.0, 0.1, "float64"), (5.0, -5.0, -0.3, "float32"), (0, 30000, 3, "float32")]
LINSPACE_CASES = [(0, 1, 5000, True), (0.1, 2, 3, True), (0, 1, 4097, True), (-3, 7, 4097, True), (0, 1, 4096, False), (2.5, -2.5, 21, True), (0, 1e-3, 33, False)]


def _evaluate(node_or_array):
    """Run the graph of one made array through lowering and the kernel-IR interpreter (no compile)."""
    def body(x):
        return tj.Tensor(array_node(node_or_array)) if not isinstance(node_or_array, tj.Tensor) else node_or_array
    traced = tj.kernel(body).trace(np.zeros(1))
    program = traced.program()
    bufs = {k: np.zeros(b.size, b.dtype) for k, b in program.buffers.items()}
    held = dict(traced.captured)   # (an array with no pattern, too large for a table: passed to the kernel as it is)
    for node, buffer in traced.inputs().items():
        if node.arg in held and buffer.key in bufs:
            bufs[buffer.key] = held[node.arg].ravel()
    for kernel, keys in zip(program.kernels, program.launches):
        interpret.run(kernel, [bufs[k] for k in keys])
    out = program.outputs[0]
    return bufs[out].reshape(program.buffers[out].shape)


@pytest.mark.parametrize("start, stop, step, dtype", ARANGE_CASES)
def test_arange_patterns_reproduce_numpy_bit_for_bit(start, stop, step, dtype):
    a = np.arange(start, stop, step, dtype=dtype)
    assert_exact(_evaluate(a), a)


@pytest.mark.parametrize("start, stop, num, endpoint", LINSPACE_CASES)
def test_linspace_patterns_reproduce_numpy_bit_for_bit(start, stop, num, endpoint):
    for dtype in ("float64", "float32"):
        a = np.linspace(start, stop, num, endpoint=endpoint, dtype=dtype)
        try:
            got = _evaluate(a)
        except tj.UnsupportedError:
            continue   # (not reached: no exact pattern and too large to embed, the array is held as it is)
        assert_exact(got, a)


def _random_made_array(rng):
    """Arrays like the ones NumPy code builds from static values: aranges (any int dtype, any step,
    reshaped), dyadic and non-dyadic float ranges, linspaces, band masks with any two values."""
    kind = rng.integers(5)
    n = int(rng.integers(2, 300))
    if kind == 0:
        dtype = rng.choice(["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32"])
        a = (int(rng.integers(-1000, 1000)) + int(rng.integers(-9, 9)) * np.arange(n)).astype(dtype)
    elif kind == 1:
        dtype = np.dtype(rng.choice(["float32", "float64"]))
        scale = 2.0 ** int(rng.integers(-8, 4))
        a = np.arange(n, dtype=dtype) * dtype.type(int(rng.integers(-5, 6)) * scale) + dtype.type(int(rng.integers(-99, 99)) * scale) \
            if rng.random() < 0.5 else np.arange(rng.uniform(-5, 5), 30.0, rng.uniform(0.05, 1.0), dtype=dtype)
    elif kind == 2:
        a = np.linspace(rng.uniform(-3, 3), rng.uniform(-3, 3), n, endpoint=bool(rng.random() < 0.5),
                        dtype=rng.choice(["float32", "float64"]))
    elif kind == 3:
        rows, cols = int(rng.integers(1, 40)), int(rng.integers(1, 40))
        lo, hi = sorted(rng.integers(-40, 40, 2))
        mask = np.tri(rows, cols, k=int(hi), dtype=bool) & ~np.tri(rows, cols, k=int(lo) - 1, dtype=bool)
        values = rng.choice([0.0, 1.0, -0.0, np.nan, -np.inf, 2.5], 2, replace=False)
        a = np.where(mask, values[0], values[1]).astype(rng.choice(["float32", "float64", "int32", "bool"]))
    else:
        a = rng.standard_normal(n).astype(rng.choice(["float16", "float32"]))
    if a.size % 6 == 0 and rng.random() < 0.3:
        a = a.reshape(6, -1)
    return a


def test_any_made_array_is_reproduced_bit_for_bit(rng):
    """Whatever an array becomes (constant, pattern or table), lowering it and running the kernel-IR
    interpreter gives back exactly its bits. TRACEJIT_CREATION_EXAMPLES raises the count."""
    import os
    for _ in range(int(os.environ.get("TRACEJIT_CREATION_EXAMPLES", "60"))):
        a = _random_made_array(rng)
        with np.errstate(all="ignore"):
            assert_exact(_evaluate(a), a, what=f"{a.dtype}{a.shape} {a.ravel()[:6]}")


# --- np.array / np.asarray of traced values, and made arrays indexed by traced ones ----------------------
def _pairwise(X, Y):   # numpy-benchmarks' allpairs_distances, as written there
    return np.array([[np.sum((x - y) ** 2) for x in X] for y in Y])


def _mixed(x):
    return (np.array([x.sum(), 1.5, 2]), np.array([x[0], x[1]], dtype=np.int32), np.array(x, ndmin=3),
            np.array([[x[0]], [True]]), np.asarray(x[1:]) * 2)


@pytest.mark.parametrize("body, dtype", [(_pairwise, "float32"), (_mixed, "float32"), (_mixed, "int32")],
                         ids=["pairwise", "mixed-float32", "mixed-int32"])
def test_np_array_of_traced_values_stacks_them_with_numpys_dtype(body, dtype, device, rng):
    x = rng.standard_normal(6).astype(dtype) * 4
    args = (rng.standard_normal((5, 3)).astype(dtype), x[:4].reshape(4, 1).repeat(3, 1)) if body is _pairwise else (x,)
    assert_close(run_kernel(tj.kernel(body), *args, device=device), body(*args))


def test_np_asarray_of_a_traced_array_is_that_array_and_np_array_a_copy(device, rng):
    def body(x):
        same, copy = np.asarray(x), np.array(x)
        same[0] = 7
        copy[1] = 9
        return copy

    x = rng.standard_normal(4).astype(np.float32)
    expected_x, expected = x.copy(), body(x.copy())
    arg = tj.asarray(x, device=device) if device != "numba" else x
    result = tj.kernel(body)(arg, device=device)
    expected_x[0] = 7
    assert_close(result, expected)
    assert_close(np.asarray(arg), expected_x)


def test_np_array_of_numbers_in_a_kernel_is_a_traced_array_to_assign_into(device, rng):
    """seq = np.array(range(n)) then seq[k], seq[p] = seq[p], seq[k] with p read from an array: a NumPy array
    cannot hold the traced values; np.asarray of a NumPy array (a global table) stays that array."""
    table = np.array([2.0, 4.0, 8.0], np.float32)

    def body(x, order):
        seq = np.array(range(len(order)))
        weights = np.array([[1, 2], [3, 4]], np.float32)
        for k in range(len(order)):
            p = order[k]
            seq[k], seq[p] = seq[p], seq[k]
        assert np.asarray(table) is table
        return seq, x[:2] @ weights + table[1]

    x = rng.standard_normal(4).astype(np.float32)
    order = rng.integers(0, 5, 5).astype(np.int32)
    got = run_kernel(tj.kernel(body), x, order, device=device)
    for g, e in zip(got, body(x, order)):
        assert np.asarray(g).dtype == e.dtype
        assert_close(g, e)


def test_np_array_of_differently_shaped_traced_values_raises_numpys_error():
    with pytest.raises(ValueError, match="inhomogeneous shape"):
        tj.kernel(lambda x: np.array([x, x[:2]]))(np.ones(3, np.float32))


def test_one_hot_through_numpys_indexing_of_a_made_eye_is_a_gather(device, rng):
    labels = rng.integers(0, 10, 20).astype(np.int32)
    one_hot = tj.kernel(lambda labels: np.eye(10, dtype=np.float32)[labels])
    assert_exact(run_kernel(one_hot, labels, device=device), np.eye(10, dtype=np.float32)[labels])
    with pytest.raises(IndexError):
        run_kernel(one_hot, np.array([3, 10], np.int32), device=device)


def test_grids_stay_numpys_constants_and_a_traced_mask_into_them_is_refused_clearly(device, rng):
    # np.mgrid's arrays are NumPy's: what NumPy computes from them is a constant (stockham_fft's twiddle factors);
    # NumPy's own indexing of one by a traced mask (mandelbrot2's Xi[I]) cannot be a gather, and says so
    def twiddled(x, n):
        i, j = np.mgrid[0:n, 0:n]
        return x @ np.cos(2 * np.pi * i * j / n).astype(x.dtype)

    def masked(x, n):
        Xi, Yi = np.mgrid[0:n, 0:n]
        return Xi[x > 0.5]

    x = rng.random((3, 6)).astype(np.float32)
    assert_close(run_kernel(tj.kernel(twiddled), x, 6, device=device), twiddled(x, 6), rtol=1e-5)
    with pytest.raises(tj.TraceError, match="converted to a NumPy array"):
        tj.kernel(masked)(rng.random((5, 5)).astype(np.float32), 5, device=device)


def test_reshaping_a_view_in_place_is_numpys_or_numpys_error():
    def fine(x):
        a = (x * 2.0)[1:5]   # (rows of a C-contiguous array: one block)
        a.shape = (2, 8)
        return a + 1

    def copy_needed(x):
        v = x * 1.0
        w = v[:, :3]
        w.shape = w.size
        return w

    x = np.ones((6, 4))
    assert_close(np.asarray(tj.kernel(fine)(x)), fine(x))
    with pytest.raises(AttributeError, match="Incompatible shape"):
        copy_needed(x)
    with pytest.raises(AttributeError, match="Incompatible shape"):
        tj.kernel(copy_needed)(x)


def test_made_arrays_used_as_python_numbers_keep_their_values(device):
    def body(x):
        steps = np.arange(10)
        n = int(steps[3]) + len(steps) + float(np.linspace(0, 1, 5)[2])
        if steps[2] > 1:
            n += 1
        return x * n + np.arange(1 << 20)[:4]   # too large to embed: stays NumPy's array

    x = np.ones(4, np.float32)
    assert_close(run_kernel(tj.kernel(body), x, device=device), body(x))


MADE_ARRAY_IDIOMS = {   # data-dependent shapes and NumPy-only methods on arrays made from constants
    "mask-of-made": lambda x: x[:5] + np.arange(10)[np.arange(10) % 2 == 0],
    "made-mask-of-x": lambda x: x[np.arange(10) != 3],
    "nonzero": lambda x: x[np.nonzero(np.arange(10) > 4)],
    "where-1-arg": lambda x: x[np.where(np.arange(10) > 4)[0]],
    "tolist": lambda x: x * len(np.arange(5).tolist()),
    "iterate": lambda x: sum(x[i] for i in np.arange(3)),
    "assign-into-made": lambda x: np.where(np.arange(10.0) > 4, x, np.arange(10.0)),
}


@pytest.mark.parametrize("idiom", MADE_ARRAY_IDIOMS, ids=str)
def test_made_arrays_keep_numpys_behaviour_where_a_trace_would_refuse(idiom, device):
    body = MADE_ARRAY_IDIOMS[idiom]
    x = np.linspace(-1, 1, 10, dtype=np.float32)
    assert_close(run_kernel(tj.kernel(body), x, device=device), body(x))


def test_creation_functions_imported_by_name_make_traced_arrays_and_come_back(device, tmp_path):
    # `from numpy import zeros, ones as o`: the kernel's module names are the wrappers while it is traced (so a
    # traced value can be stored into the array), NumPy's own again afterwards
    from reference import module_from_source
    module = module_from_source(
        "from numpy import zeros, ones as o, float32\n"
        "def fill(x):\n"
        "    out = zeros((3, x.shape[0]), x.dtype)\n"
        "    out[1] = x * 2\n"
        "    return out + o(x.shape, float32)\n",
        str(tmp_path), "by_name")
    x = np.arange(4, dtype=np.float32)
    assert_close(run_kernel(tj.kernel(module.fill), x, device=device), module.fill(x))
    assert module.zeros is np.zeros and module.o is np.ones


def test_a_module_whose_name_begins_with_numpy_is_the_users(device, tmp_path):
    # (only NumPy itself keeps NumPy's creation functions while a kernel is traced: numpy-benchmarks' files, run
    # as modules named numpy_benchmarks_*, stored traced values into NumPy's own arrays)
    from reference import module_from_source
    module = module_from_source(
        "import numpy as np\n"
        "def fill(x):\n"
        "    out = np.zeros((2, x.shape[0]), x.dtype)\n"
        "    out[1] = x * 2\n"
        "    return out\n",
        str(tmp_path), "numpy_helpers")
    assert module.__name__.startswith("numpy")
    x = np.arange(4, dtype=np.float32)
    assert_close(run_kernel(tj.kernel(module.fill), x, device=device), module.fill(x))


def test_a_large_numpy_array_returned_as_it_is_is_held(device):
    def table_and(x, n):   # NumPy alone computes g (no traced value reaches it): returned as it is, held
        g = np.sin(np.array(list(range(n))) * 0.37).astype(x.dtype)
        return g, x + 1

    x = np.ones(3, np.float32)
    for got, expected in zip(run_kernel(tj.kernel(table_and), x, 3 * MAX_ELEMENTS, device=device),
                             table_and(x, 3 * MAX_ELEMENTS)):
        assert_close(got, expected)
