"""Wrong answers found by real NumPy programs and a differential fuzzer (issue 14, item 0), each pinned
on every device against NumPy computed here: values, result dtypes and the exception classes NumPy raises."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tracejit as tj
from reference import NO_FLOAT64, assert_close, pack_flags, run_kernel

REPO = Path(__file__).resolve().parents[1]


# ---- kernels that render the same source run the overload of their own argument types ----

def test_two_kernels_with_one_source_each_run_code_for_their_own_dtypes(device):
    i, x = np.array([1, 2, 3]), np.array([1.5, 2.0, -3.0])
    f = tj.kernel(lambda a, b: a * b)
    g = tj.kernel(lambda a, b: a * b)
    assert_close(run_kernel(f, i, i, device=device), i * i)
    assert_close(run_kernel(f, x, x, device=device), x * x)
    assert_close(run_kernel(g, i, i, device=device), i * i)
    assert_close(run_kernel(g, x, x, device=device), x * x)


# ---- NumPy scalars are strong types (NEP 50); Python ints out of range follow NumPy ----

def test_numpy_scalars_in_the_body_are_strong_like_in_numpy(device, rng):
    x = rng.standard_normal(7).astype(np.float32)
    h = x.astype(np.float16)
    i = np.arange(-3, 4, dtype=np.int8)

    def narrow(h, i):   # types every device has
        return h * np.float32(0.1), i * np.float16(2), i + np.int16(3), np.int8(2) * i, np.uint8(3) + i

    captured = np.float64(0.044715)   # from the closure, as module-level constants are

    def wide(x, i):     # GPT-2's gelu writes np.sqrt(2 / np.pi): a np.float64, so the result is float64
        return x * np.float64(0.1), x / np.float64(1.5), np.sqrt(2 / np.pi) * x, i + np.int64(3), captured * x

    assert_close(run_kernel(tj.kernel(narrow), h, i, device=device), narrow(h, i))
    assert_close(run_kernel(tj.kernel(wide), x, i, device=device), wide(x, i))


def test_numpy_scalar_arguments_are_strong_like_in_numpy(device, rng):
    x = rng.standard_normal(5).astype(np.float32)
    f = tj.kernel(lambda x, s, t: (x * s, x / s, x + t))
    for s, t in ((np.float64(0.1), np.int64(3)), (np.float32(2.5), np.int8(-2)), (0.1, 3)):
        assert_close(run_kernel(f, x, s, t, device=device), (x * s, x / s, x + t))


def test_float64_scalars_on_devices_without_double_give_numpys_answer_or_refuse(device):
    """A float64 scalar argument arrives as float where the device has no double: exact when NumPy casts it to
    float32 or float16 anyway (a Python float next to float32 data), refused otherwise. Found by the dtype
    fuzzer on metal and webgpu: a 0-d float64 array of -5e-324 cast to bool was False there, True in NumPy."""
    x32, x16 = np.linspace(-1, 1, 7, dtype=np.float32), np.linspace(-1, 1, 7).astype(np.float16)
    weak = tj.kernel(lambda a, h, s: (a * s, a > s, h + s))
    assert_close(weak(x32, x16, 0.1, device=device), (x32 * 0.1, x32 > 0.1, x16 + 0.1))
    for value in (-5e-324, 1e-300, 0.1 + 2**-56):
        zero_d = np.array(value)
        for body in (lambda v: v.astype(bool), lambda v: v > 0.1, lambda v: (v * 1e300).astype(np.int8) == 0):
            with np.errstate(all="ignore"):
                expected = body(zero_d)
            try:
                got = tj.kernel(body)(zero_d, device=device)
            except tj.DtypeError as e:
                assert device in NO_FLOAT64 and "float64" in str(e), e
                continue
            assert_close(got, expected)


def test_a_power_or_an_index_no_result_reads_raises_where_numpy_raises(device):
    """NumPy evaluates every operation, so a negative integer exponent or an index outside its axis raises
    even where nothing reads the value: np.isnan(a ** b) of integers is False whatever the power (the
    trace folds it), and the dropped x[i] below is never needed (found by the dtype fuzzer)."""
    a = np.array([[3, -2], [1, 4]], np.int32)
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)

    def dropped_index(x, i):
        x[i]   # read and dropped: NumPy still checks the index
        return x * 2

    for body, args, error in ((lambda v: np.isnan(v ** v), (a,), ValueError),
                              (lambda v, w: (v + 1, v ** w)[0], (a, a), ValueError),
                              (dropped_index, (x, np.array([0, 3], np.int32)), IndexError)):
        with pytest.raises(error):
            body(*args)
        with pytest.raises(error):
            run_kernel(tj.kernel(body), *args, device=device)
    # in range, they compute nothing anyone sees: NumPy's result
    assert_close(run_kernel(tj.kernel(lambda v: np.isnan(v ** v)), np.abs(a), device=device), np.isnan(np.abs(a)))
    assert_close(run_kernel(tj.kernel(dropped_index), x, np.array([0, 2], np.int32), device=device), x * 2)


def test_algebra_a_compiler_may_assume_keeps_numpys_answers(device):
    """IEEE arithmetic is not algebra: (x + 1e8) - 1e8 is 0 for x = 1 in float32, x - x is NaN for inf, 0 / x
    is NaN for NaN and -0 for negative x. WebGPU's shader compilers (Mesa's, found by the dtype fuzzer) folded
    each of these into the algebraic answer; every device computes NumPy's."""
    x = np.array([1.0, 3.0, -3.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 7e-3, 2e30], np.float32)
    y = np.array([1e8, 3e7, 0.5, 1.0, -2.0, 1.0, np.inf, 2.0, 1e-3, 2e30], np.float32)

    def body(a, b):
        return (a - a, a + (-a), -a + a, (a - a) * 2, a - a + 1, (a + b) - b, (a - b) + b, a + b - a,
                (a + np.float32(1e8)) - np.float32(1e8), (a * b) / b, (a * np.float32(1e30)) * np.float32(1e-30),
                0 / a, np.float32(-0.0) / a, (a + b) < b, a * a - a * a, np.abs(a) - np.abs(a))

    with np.errstate(all="ignore"):
        expected = body(x, y)
    assert_close(run_kernel(tj.kernel(body), x, y, device=device), expected, rtol=1e-6, atol=0)


@pytest.mark.parametrize("source", ["float16", "float32", "float64"])
def test_float_to_integer_casts_out_of_range_give_numpys_answers(device, source):
    """C leaves them undefined; NumPy's are x86's (a truncation to int32 or int64, the minimum for NaN and
    beyond, then the low bits): (x * 255).astype(np.uint8) of 256.0 is 0 and of -1.0 is 255 there, where a
    vectorised conversion saturated (255 and 0). uint32 beyond its range is the only one whose NumPy answer
    depends on the element's place (the vectorised loop's or the scalar one's): compared with its 0-d one."""
    if source == "float64" and device in NO_FLOAT64:
        pytest.skip(NO_FLOAT64[device])
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.7, -0.7, 255.5, 256.0, -1.0, 300.7, -300.7, 40000.5,
                  -40000.5, 65504.0, 3e9, -3e9, 1e10, -1e10, 2.0 ** 31, -2.0 ** 31, 2.0 ** 63, -2.0 ** 63,
                  2.0 ** 64, 1e30, -1e30], np.float64)
    with np.errstate(all="ignore"):
        x = x.astype(source)
        targets = [t for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64)
                   if device != "webgpu" or np.dtype(t).itemsize < 8]
        expected = tuple(np.array([np.asarray(v).astype(t) for v in x]) for t in targets)
        got = run_kernel(tj.kernel(lambda a: tuple(a.astype(t) for t in targets)), x, device=device)
    assert_close(got, expected)


def test_python_ints_out_of_the_dtype_range_follow_numpy(device):
    u32 = np.array([0, 5, 7], np.uint32)
    u8 = np.array([0, 5, 255], np.uint8)
    i8 = np.array([-128, 3, 127], np.int8)

    def body(u32, u8, i8):
        return (np.clip(u8, -3, 300), np.clip(u8, 3, 300), np.clip(i8, -300, 5), np.clip(u8, -1, 200),
                np.clip(i8, None, 1000))

    assert_close(run_kernel(tj.kernel(body), u32, u8, i8, device=device), body(u32, u8, i8))
    # np.where wrapped a Python int beyond the dtype into it (np.where(u32 > 0, u32, -1) is uint32) until
    # NumPy 2.5, which raises OverflowError as ufuncs do: tracejit follows the NumPy it runs beside
    for where, arg in ((lambda a: np.where(a > 0, a, -1), u32), (lambda a: np.where(a > 4, 300, a), u8)):
        try:
            expected = where(arg)
        except OverflowError:
            with pytest.raises(OverflowError, match="out of bounds"):
                run_kernel(tj.kernel(where), arg, device=device)
        else:
            assert_close(run_kernel(tj.kernel(where), arg, device=device), expected)
    for bad in (lambda a: a + 300, lambda a: np.maximum(a, -3), lambda a: np.clip(a, 300, 400)):
        with pytest.raises(OverflowError):
            bad(u8)
        with pytest.raises(OverflowError, match="out of bounds for uint8"):
            run_kernel(tj.kernel(bad), u8, device=device)
    with pytest.raises(OverflowError):
        run_kernel(tj.kernel(lambda a, s: a + s), u8, 256, device=device)


# ---- result dtypes are NumPy's own for each ufunc ----

def test_square_and_positive_resolve_dtypes_as_numpy(device):
    b = np.array([True, False, True])
    i = np.array([-3, 2, 5], np.int8)
    body = lambda b, i: (np.square(b), np.square(i), np.positive(i), +i)  # noqa: E731
    assert_close(run_kernel(tj.kernel(body), b, i, device=device), body(b, i))
    for refused in (lambda a: np.positive(a), lambda a: +a):
        with pytest.raises(TypeError):
            refused(b)
        with pytest.raises(TypeError, match="positive"):
            run_kernel(tj.kernel(refused), b, device=device)


# ---- a constant negative integer exponent raises what NumPy raises, when NumPy raises it ----

def test_a_constant_negative_integer_exponent_raises_value_error_only_on_data(device):
    f = tj.kernel(lambda a: (a + 1) ** -1)
    a = np.array([1, 2, 3], np.int32)
    with pytest.raises(ValueError, match="negative integer powers"):
        (a + 1) ** -1
    with pytest.raises(ValueError, match="negative integer powers"):
        run_kernel(f, a, device=device)
    empty = np.zeros((0, 3), np.int32)
    assert_close(run_kernel(f, empty, device=device), (empty + 1) ** -1)


# ---- tracejit's errors are the built-in exceptions NumPy raises ----

def test_errors_are_the_builtin_exceptions_numpy_raises(device):
    a = np.arange(6, dtype=np.int32)
    cases = [  # (kernel body, argument, built-in exception NumPy raises)
        (lambda x: x + x[:4], a, ValueError),                     # shapes do not broadcast
        (lambda x: x.reshape(4, 2), a, ValueError),
        (lambda x: x[6], a, IndexError),                          # index out of bounds
        (lambda x: x[1, -7], a.reshape(1, 6), IndexError),
        (lambda x: x + "s", a, TypeError),                        # bad argument type
        (lambda x: np.invert(x * np.float32(1.5)), a, TypeError),  # no loop for these dtypes
    ]
    for body, arg, builtin in cases:
        with pytest.raises(builtin):
            body(arg)
        with pytest.raises(builtin):
            run_kernel(tj.kernel(body), arg, device=device)
    with pytest.raises(tj.IndexOutOfBoundsError, match="index 6 is out of bounds for axis 0 with size 6"):
        tj.kernel(lambda x: x[6])(a, device=device)


# ---- valid programs that once failed to compile ----

def test_a_float16_scalar_argument_and_float16_and_float32_row_sums_in_one_kernel(device, rng):
    i = np.arange(-4, 4, dtype=np.int8)
    f = tj.kernel(lambda a, s: (a - s, s * a))   # OpenCL C takes no half by value
    for s in (np.float16(2.5), np.array(-1.5, np.float16)):
        assert_close(run_kernel(f, i, s, device=device), (i - s, s * i))
    x = rng.random((1, 4096)).astype(np.float32)
    body = lambda x: x.astype(np.float16).sum(-1, keepdims=True) / x.sum(-1, keepdims=True)  # noqa: E731
    assert_close(run_kernel(tj.kernel(body), x, device=device), body(x), rtol=2e-3)   # one tree per accumulator


def layernorm(x, w, b):   # enough instructions that WGSL names a loop variable f16
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5) * w + b


def test_wgsl_enables_f16_only_in_kernels_with_float16_values():
    """The OpenGL backend of wgpu has no shader-f16 and rejects `enable f16;` even in a float32 kernel."""
    for dtype, enabled in (("float32", False), ("float16", True)):
        specs = tj.spec((8, 1024), dtype), tj.spec(1024, dtype), tj.spec(1024, dtype)
        source = tj.kernel(layernorm).lower(*specs, device="webgpu").kernels[0].source
        assert ("enable f16;" in source) is enabled, source[:300]


def test_a_float32_layernorm_runs_on_webgpu_over_opengl():
    """The same, run where it failed: wgpu on OpenGL (the backend without Vulkan), in a process of its own."""
    if "webgpu" not in [d.name for d in tj.devices() if d.available]:
        pytest.skip("webgpu is not available here")
    code = textwrap.dedent("""
        import numpy as np, tracejit as tj
        from test_numpy_fidelity import layernorm
        x = np.random.default_rng(0).standard_normal((8, 1024)).astype(np.float32)
        w, b = np.full(1024, 0.5, np.float32), np.full(1024, 0.25, np.float32)
        y = np.asarray(tj.kernel(layernorm)(x, w, b, device="webgpu"))
        assert np.allclose(y, layernorm(x, w, b), atol=1e-4), np.abs(y - layernorm(x, w, b)).max()
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, WGPU_BACKEND_TYPE="OpenGL", PYTHONPATH=f"{REPO}:{REPO / 'tests'}"))
    if "ok" not in out.stdout and "no adapter" in out.stderr.lower():
        pytest.skip(f"wgpu has no OpenGL adapter here: {out.stderr[-300:]}")
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-3000:]


# ---- what NumPy code expects to work ----

def test_matmul_of_bool_arrays_is_the_or_of_ands(device, rng):
    a, b = rng.random((2, 40, 64)) < 0.05, rng.random((64, 24)) < 0.05
    v = rng.random(64) < 0.5
    body = lambda a, b, v: (a @ b, np.matmul(v, b), a[0] @ v, v @ v)  # noqa: E731
    assert_close(run_kernel(tj.kernel(body), a, b, v, device=device), body(a, b, v))


def test_sums_and_products_of_unsigned_ints_are_uint64_like_numpy(device):
    u8 = np.arange(1000, dtype=np.uint8)
    u32 = (np.arange(64, dtype=np.uint32) * 1000003).reshape(8, 8)

    def body(u8, u32):
        s, p = u32.sum(1), u32.prod(1)   # products wrap modulo 2**64, as NumPy's
        return (u8.sum(), u8.prod(), np.sum(u8.reshape(10, 100), axis=1, keepdims=True), s, p, s + 1, s // 7,
                p % 1000, s > 5000000, s.astype(np.float32), s - u32[0], np.where(s > 5000000, s, 0), s.max())

    if device == "webgpu":   # WGSL has no 64-bit integers: a clear error, and the way out
        with pytest.raises(tj.DtypeError, match="uint64.*dtype=np.uint32"):
            tj.kernel(body)(u8, u32, device=device)
        f = tj.kernel(lambda u8: (u8.sum(dtype=np.uint32), u8.prod(dtype=np.uint32)))
        assert_close(f(u8, device=device), (u8.sum(dtype=np.uint32), u8.prod(dtype=np.uint32)))
        return
    assert_close(tj.kernel(body)(u8, u32, device=device), body(u8, u32))   # every other device has uint64


def test_a_kernel_that_only_stores_float16_compiles(device):
    """Found by the dtype fuzzer: CUDA C lacked cuda_fp16.h when no __half appeared outside the signature."""
    u = np.array(85, np.uint8)
    body = lambda u: np.where(u, np.float16(2.5), np.float16(-1.5))  # noqa: E731
    assert_close(run_kernel(tj.kernel(body), u, device=device), body(u))


def test_comparing_ints_with_a_python_int_beyond_their_dtype_is_exact_like_numpy(device):
    """Found by the dtype fuzzer: NumPy compares u8 > -1 exactly (no OverflowError, unlike u8 + -1)."""
    u8 = np.array([0, 85, 255], np.uint8)
    i8 = np.array([-128, 0, 127], np.int8)

    def body(u8, i8):
        return (np.less(-1, u8), u8 > -1, u8 <= 256, u8 == 300, u8 != -5, i8 >= -129, -200 > i8, i8 < 2**40)

    assert_close(run_kernel(tj.kernel(body), u8, i8, device=device), body(u8, i8))


def test_a_python_int_argument_beyond_int32_is_a_dtype_error_only_where_ints_are_32_bits(device):
    """Found by the dtype fuzzer: webgpu refused it with a DeviceError that `except TypeError` missed."""
    f = tj.kernel(lambda s, v: np.where(s, v, ~v))
    v = np.array([True, False])
    if device == "webgpu":
        with pytest.raises(tj.DtypeError, match="1099511627776.*int32"):
            f(2**40, v, device=device)
        return
    assert_close(run_kernel(f, 2**40, v, device=device), np.where(2**40, v, ~v))


def test_tj_jit_keys_numpy_scalars_by_their_type(device):
    """np.float32(0.5) == np.float64(0.5), but they give different dtypes: one captured graph each."""
    k = tj.kernel(lambda x, s: x * s)
    f = tj.jit(lambda x, s: k(x, s, device=device))
    x = np.ones(3, np.float32)
    for s in (np.float32(0.5), np.float64(0.5), 0.5, np.float64(0.5)):
        try:
            assert_close(f(x, s), x * s, what=f"x * {type(s).__name__}")
        except tj.DtypeError:
            assert device in NO_FLOAT64 and type(s) is np.float64


def test_int64_overflow_inside_a_fused_expression_wraps_like_numpy(device):
    """numba's own signed + - * tell LLVM overflow cannot happen, which folded (x + x) > 0 into x > 0:
    sign(x + x) of 2**62 was 1 where NumPy's wrapped sum gives -1. Data arithmetic now wraps."""
    x = np.array([2**62, -2**62, 5, -2**63, 2**63 - 1, 0], np.int64)

    def body(x):
        return np.sign(x + x), pack_flags((x * 3) > 0, (x - 1) > x, -x < 0), x // -1, (x + 1).sum(), (x * x).prod()

    with np.errstate(all="ignore"):
        expected = body(x)
    assert_close(run_kernel(tj.kernel(body), x, device=device), expected)


def test_augmented_assignment_keeps_the_dtype_and_shape_like_numpy(device, rng):
    """`pdfs /= np.sqrt(2 * np.pi) * sigma` on float32 stays float32 in NumPy (in place); it gave float64."""
    x = rng.uniform(0.5, 2.0, (4, 3)).astype(np.float32)

    def body(x, s):
        p = x * 1
        p /= np.sqrt(2 * np.pi) * s
        q = (x * 4).astype(np.int32)
        q += 3
        q //= 2
        q <<= 1
        return p, q

    assert_close(run_kernel(tj.kernel(body), x, 2.0, device=device), body(x, 2.0))


def test_augmented_assignment_refuses_what_numpy_refuses():
    def casts_float_into_int(x):
        q = x.astype(np.int32)
        q += 2.5
        return q

    def grows_the_shape(x):
        q = x[:1]
        q += x
        return q

    x = np.ones((3, 2), np.float32)
    for body, numpy_error in ((casts_float_into_int, TypeError), (grows_the_shape, ValueError)):
        with pytest.raises(numpy_error):
            body(x)
        with pytest.raises(numpy_error):
            tj.kernel(body)(x)


def test_expm1_is_finite_up_to_where_exp_overflows(device):
    """webgpu's expm1 (u - 1) * x / log(u) overflowed at x = 84, where NumPy's expm1 is 3e36."""
    x = np.array([84.0, 88.0, 60.0, 1e-5, -1e-5, 0.3, -0.7, -20.0, 0.6], np.float32)
    assert_close(run_kernel(tj.kernel(np.expm1), x, device=device), np.expm1(x))


def test_rounding_idioms_keep_numpys_order_of_operations(device):
    """(x + 1) - 1 rounds x away where NumPy does, and x + 0.0 of -0.0 is +0.0: the numba device let LLVM
    reassociate every float operation and ignore signed zeros, and returned x and -0.0. Only a reduction's
    own accumulating step may be reordered now; the row sums below go through one such step each."""
    if device == "webgpu":
        pytest.skip("WGSL lets the shader compiler reassociate float arithmetic (llvmpipe folds (x + 1) - 1 "
                    "to x); the README says so under the webgpu device")
    x = np.array([[1e-9, -0.0, 3e-8, 0.5], [2.0**-30, 1.0, -1e-9, 7.0]], np.float32)

    def idioms(x):
        shifted = (x + 1) - 1
        return shifted, x + 0.0, shifted.sum(axis=-1), ((x + 4096.0) - 4096.0).max(axis=-1)

    got = run_kernel(tj.kernel(idioms), x, device=device)
    expected = idioms(x)
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(np.asarray(g), e)
        assert np.asarray(g).dtype == e.dtype
    assert np.signbit(np.asarray(got[1])[0, 1]) == np.signbit(expected[1][0, 1])


def test_float_sums_of_fewer_than_eight_elements_add_in_numpys_order(device):
    """NumPy adds fewer than 8 elements one after another; a float32 sum that short, widened to float64 by
    np.array([x.sum(), 1.5]) (numpy-benchmarks' idiom), showed a last-bit difference when PoCL reordered
    it or numba summed it in float64. Such short sums now keep NumPy's order and precision exactly."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((64, 7)) * 4).astype(np.float32)

    def short_sums(x):
        return x.sum(axis=1), x[:, :6].prod(axis=1), x[:, 1:].sum(axis=1) * 2

    got = run_kernel(tj.kernel(short_sums), x, device=device)
    for g, e in zip(got, short_sums(x)):
        assert np.asarray(g).dtype == e.dtype
        np.testing.assert_array_equal(np.asarray(g), e)
