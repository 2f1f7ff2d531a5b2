"""Every operator and function a kernel supports, per dtype, against NumPy computed in the test:
values, result dtype (NumPy 2 promotion, NEP 50 weak scalars) and shape. Also the call surface that
only shows with data: tuples, static args, the in-memory cache, strided inputs, accuracy."""
from __future__ import annotations

import operator

import numpy as np
import pytest

import tracejit as tj
from reference import (ALL_DTYPES, FLOATS, INTS_AND_BOOL, UNSIGNED_INTS, assert_close,
                       assert_flags_match, assert_kernel_matches_numpy, erf_reference, pack_flags, random_array,
                       random_dyadic, run_kernel, sigmoid_reference, tolerances, with_edge_values)

# Each kernel output can cost a compile of its own, so tests that check many boolean results pack
# them into one output (pack_flags), and sums stand in for lists where only the dtype rule is new.


def uniform(low, high):
    return lambda rng, shape, dtype: random_array(rng, shape, dtype, low=low, high=high)


def away_from_zero(rng, shape, dtype):
    return (rng.uniform(0.25, 5.0, shape) * rng.choice([-1.0, 1.0], shape)).astype(dtype)


# =============================================================================================
# Unary functions

# name: (function called in the kernel, NumPy reference, inputs inside the function's domain)
FLOAT_FUNCTIONS = {
    "exp": (np.exp, np.exp, uniform(-5, 5)),
    "exp2": (np.exp2, np.exp2, uniform(-5, 5)),
    "log": (np.log, np.log, uniform(0.1, 10)),
    "log2": (np.log2, np.log2, uniform(0.1, 10)),
    "sqrt": (np.sqrt, np.sqrt, uniform(0, 10)),
    "sin": (np.sin, np.sin, uniform(-4, 4)),
    "cos": (np.cos, np.cos, uniform(-4, 4)),
    "tan": (np.tan, np.tan, uniform(-1.2, 1.2)),
    "tanh": (np.tanh, np.tanh, uniform(-5, 5)),
    "reciprocal": (np.reciprocal, np.reciprocal, away_from_zero),
    "sigmoid": (tj.sigmoid, sigmoid_reference, uniform(-8, 8)),
    "erf": (tj.erf, erf_reference, uniform(-3, 3)),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", list(FLOAT_FUNCTIONS))
def test_float_function_matches_numpy(name, dtype, device, rng):
    function, reference, sample = FLOAT_FUNCTIONS[name]
    x = sample(rng, (6, 7), dtype)

    @tj.kernel
    def kernel(x):
        return function(x)

    with np.errstate(all="raise"):
        expected = reference(x)
    assert_close(run_kernel(kernel, x, device=device), expected)


@pytest.mark.parametrize("dtype", INTS_AND_BOOL)
def test_functions_of_integers_promote_like_numpy(dtype, device, rng):
    """NumPy computes float functions of int8/uint8/bool in float16, of int16/uint16 in float32 and of
    wider ints in float64; floor/ceil/trunc/abs keep the integer type. The functions' numerics are
    tested on floats above; here their sum carries the promotion (a wider result would show in it)."""
    x = random_array(rng, (4, 5), dtype, low=1, high=10)

    def body(x):
        floats = (np.exp(x) + np.exp2(x) + np.log(x) + np.log2(x) + np.sqrt(x) + np.sin(x) + np.cos(x)
                  + np.tan(x) + np.tanh(x) + np.rint(x))
        integers = np.floor(x) + np.ceil(x) + np.trunc(x) + np.abs(x)
        return floats, integers, pack_flags(np.isnan(x), np.isinf(x), np.isfinite(x))

    kernel = tj.kernel(body)
    floats, integers, flags = run_kernel(kernel, x, device=device)
    with np.errstate(all="ignore" if dtype == "bool" else "raise"):  # log(False) is -inf
        expected_floats, expected_integers, expected_flags = body(x)
    assert_close(floats, expected_floats, what="sum of float functions")
    assert_close(integers, expected_integers, what="floor + ceil + trunc + abs")
    assert_flags_match(flags, expected_flags, ["isnan", "isinf", "isfinite"])


@pytest.mark.parametrize("dtype", FLOATS)
def test_floor_ceil_trunc_rint_match_numpy_including_halves(dtype, device, rng):
    halves = np.arange(-6.0, 6.5, 0.5)  # rint rounds ties to even
    x = np.concatenate([halves, rng.uniform(-10, 10, 15)]).astype(dtype).reshape(5, 8)
    assert_kernel_matches_numpy(lambda x: (np.floor(x), np.ceil(x), np.trunc(x), np.rint(x)), x, device=device)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_abs_negative_sign_match_numpy(dtype, device, rng):
    x = with_edge_values(random_array(rng, (5, 6), dtype))  # abs(-128) and -(-128) wrap in int8
    if dtype == "bool":  # NumPy defines abs of bool, but neither negative nor sign
        body = lambda x: abs(x)
    else:
        body = lambda x: (np.abs(x), -x, np.sign(x))
    assert_kernel_matches_numpy(body, x, device=device)


SPECIAL_FLOATS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 100.0]


@pytest.mark.parametrize("dtype", FLOATS)
def test_isnan_isinf_isfinite_match_numpy(dtype, device):
    x = np.array(SPECIAL_FLOATS * 2, dtype).reshape(4, 5)

    def body(x):
        return np.isnan(x), pack_flags(np.isnan(x), np.isinf(x), np.isfinite(x))

    isnan, flags = run_kernel(tj.kernel(body), x, device=device)
    expected_isnan, expected_flags = body(x)
    assert_close(isnan, expected_isnan)
    assert_flags_match(flags, expected_flags, ["isnan", "isinf", "isfinite"])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_functions_follow_numpy_on_nan_inf_and_signed_zero(dtype, device):
    x = np.array(SPECIAL_FLOATS, dtype)

    def body(x):
        return np.exp(x), np.log(x), np.sqrt(x), np.tanh(x), np.reciprocal(x), np.sign(x), np.floor(x)

    assert_kernel_matches_numpy(body, x, device=device, numpy_errors="ignore")


# =============================================================================================
# Binary operators

ARITHMETIC = {
    "add": operator.add,                # a + b
    "subtract": operator.sub,           # a - b
    "multiply": operator.mul,           # a * b
    "true_divide": operator.truediv,    # a / b
    "floor_divide": operator.floordiv,  # a // b
    "remainder": operator.mod,          # a % b
    "power": operator.pow,              # a ** b
}


def arithmetic_operands(name, dtype, rng, shape):
    """Operands inside the operator's domain; negative values wherever the dtype has them."""
    if name in ("floor_divide", "remainder"):
        return random_dyadic(rng, shape, dtype), random_dyadic(rng, shape, dtype, nonzero=True)
    if name == "true_divide":
        return random_array(rng, shape, dtype), random_array(rng, shape, dtype, nonzero=True)
    if name == "power":
        if np.dtype(dtype).kind == "f":
            return (random_array(rng, shape, dtype, low=0.5, high=3),
                    random_array(rng, shape, dtype, low=-2, high=2))
        return (random_array(rng, shape, dtype, low=-4, high=4),
                random_array(rng, shape, dtype, low=0, high=3))  # NumPy rejects negative int powers
    return random_array(rng, shape, dtype), random_array(rng, shape, dtype)  # int8 overflow wraps


ARITHMETIC_CASES = [(name, dtype) for name in ARITHMETIC for dtype in ALL_DTYPES
                    if not (name == "subtract" and dtype == "bool")]  # NumPy rejects bool - bool


@pytest.mark.parametrize(("name", "dtype"), ARITHMETIC_CASES)
def test_arithmetic_operator_matches_numpy(name, dtype, device, rng):
    a, b = arithmetic_operands(name, dtype, rng, (6, 5))
    op = ARITHMETIC[name]
    assert_kernel_matches_numpy(lambda a, b: op(a, b), a, b, device=device)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_comparisons_and_maximum_minimum_match_numpy(dtype, device, rng):
    a = random_array(rng, (6, 5), dtype)
    b = random_array(rng, (6, 5), dtype)
    b[::2] = a[::2]
    if a.dtype.kind == "f":
        a[0, 0] = b[1, 1] = np.nan  # every comparison with NaN is False, except !=; maximum gives NaN

    def body(a, b):
        return pack_flags(a < b, a <= b, a > b, a >= b, a == b, a != b), np.maximum(a, b), np.minimum(a, b)

    flags, maximum, minimum = run_kernel(tj.kernel(body), a, b, device=device)
    expected_flags, expected_maximum, expected_minimum = body(a, b)
    assert_flags_match(flags, expected_flags, ["<", "<=", ">", ">=", "==", "!="])
    assert_close((maximum, minimum), (expected_maximum, expected_minimum), what="(maximum, minimum)")


@pytest.mark.parametrize("dtype", INTS_AND_BOOL)
def test_bitwise_operators_match_numpy(dtype, device, rng):
    a = random_array(rng, (6, 5), dtype, full_range=True)
    b = random_array(rng, (6, 5), dtype, full_range=True)
    assert_kernel_matches_numpy(lambda a, b: (a & b, a | b, a ^ ~b), a, b, device=device)  # ~ through a ^ ~b


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_maximum_minimum_propagate_nan(dtype, device, rng):
    a = random_array(rng, (4, 5), dtype)
    b = random_array(rng, (4, 5), dtype)
    a[0, 1] = np.nan
    b[2, 3] = np.nan
    a[3, 4] = b[3, 4] = np.nan
    assert_kernel_matches_numpy(lambda a, b: (np.maximum(a, b), np.minimum(b, a)), a, b, device=device)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_max_min_reductions_propagate_nan(dtype, device, rng):
    x = random_array(rng, (4, 5), dtype)
    x[1, 2] = np.nan
    x[3, 0] = np.nan
    assert_kernel_matches_numpy(lambda x: (x.max(axis=1), x.min(axis=0), np.max(x)), x, device=device)


def test_clip_matches_numpy_with_scalar_and_array_bounds(device, rng):
    x = random_array(rng, (5, 6), "float32", low=-5, high=5)
    x[0, 0] = np.nan  # clip keeps NaN
    low = random_array(rng, (6,), "float32", low=-4, high=-1)
    high = random_array(rng, (6,), "float32", low=1, high=4)

    def body(x, low, high):
        return np.clip(x, -1.0, 1.0), np.clip(x, low, high), np.clip(x, low, 2.0), np.clip(x, -3, 3)

    assert_kernel_matches_numpy(body, x, low, high, device=device)


def test_clip_of_integers_keeps_their_dtype(device, rng):
    i16 = random_array(rng, (5, 6), "int16")
    u8 = random_array(rng, (5, 6), "uint8")
    assert_kernel_matches_numpy(lambda i16, u8: (np.clip(i16, -5, 5), np.clip(u8, 3, 50)), i16, u8, device=device)


def test_where_selects_and_promotes_like_numpy(device, rng):
    cond = random_array(rng, (4, 5), "bool")
    i8 = random_array(rng, (4, 5), "int8")
    f32 = random_array(rng, (4, 5), "float32")
    f64 = random_array(rng, (4, 5), "float64")

    def body(cond, i8, f32, f64):
        return (np.where(cond, i8, -i8), np.where(cond, f32, f64), np.where(cond, i8, f32),
                np.where(f32 > 0, f32, 0.0), np.where(i8 > 0, i8, 0), np.where(cond, 1.5, f32))

    assert_kernel_matches_numpy(body, cond, i8, f32, f64, device=device)


def test_where_broadcasts_all_three_operands(device, rng):
    cond = random_array(rng, (4, 1), "bool")
    a = random_array(rng, (1, 5), "float32")
    b = random_array(rng, (5,), "float32")
    assert_kernel_matches_numpy(lambda cond, a, b: np.where(cond, a, b), cond, a, b, device=device)


BROADCAST_SHAPES = [((4, 1), (5,)), ((2, 1, 4), (3, 1)), ((1,), (3, 4)), ((3, 4), ()), ((1, 1), (1, 5))]


@pytest.mark.parametrize(("left", "right"), BROADCAST_SHAPES, ids=str)
def test_binary_ops_broadcast_like_numpy(left, right, device, rng):
    a = random_array(rng, left, "float32")
    b = random_array(rng, right, "float32")
    assert_kernel_matches_numpy(lambda a, b: a * b - a, a, b, device=device)


MIXED_DTYPES = [("int8", "uint8"), ("int32", "uint32"), ("int64", "uint32"), ("uint8", "float16"),
                ("int16", "float16"), ("int32", "float32"), ("float16", "float32"), ("float32", "float64"),
                ("bool", "int8")]


@pytest.mark.parametrize(("left", "right"), MIXED_DTYPES)
def test_mixed_dtype_operands_promote_like_numpy(left, right, device, rng):
    a = random_array(rng, (4, 5), left, low=-10, high=10)
    b = random_array(rng, (4, 5), right, low=-10, high=10)
    assert_kernel_matches_numpy(lambda a, b: (a * b + a, a < b), a, b, device=device)


# =============================================================================================
# Python scalars are weak (NEP 50): they take the array's dtype when it can hold them.

SCALAR_CASES = [
    ("float32 + 2.0", "float32", lambda x: x + 2.0),
    ("float16 * 3", "float16", lambda x: x * 3),
    ("int8 + 1", "int8", lambda x: x + 1),
    ("int8 * 2.5 is float64", "int8", lambda x: x * 2.5),
    ("7 - uint16 wraps", "uint16", lambda x: 7 - x),
    ("int32 / 2 is float64", "int32", lambda x: x / 2),
    ("100 // int64", "int64", lambda x: 100 // x),
    ("-7 % int32", "int32", lambda x: -7 % x),
    ("bool + 1 is int64", "bool", lambda x: x + 1),
    ("bool * 1.5 is float64", "bool", lambda x: x * 1.5),
    ("2.0 ** float32", "float32", lambda x: 2.0 ** x),
    ("float64 ** 2", "float64", lambda x: x ** 2),
    ("float32 > 0.5", "float32", lambda x: x > 0.5),
    ("maximum(float32, 0.0)", "float32", lambda x: np.maximum(x, 0.0)),
]


@pytest.mark.parametrize(("dtype", "body"), [case[1:] for case in SCALAR_CASES], ids=[case[0] for case in SCALAR_CASES])
def test_python_scalar_is_weakly_typed(dtype, body, device, rng):
    x = random_array(rng, (4, 5), dtype, nonzero=dtype != "bool")  # nonzero: safe as a divisor
    assert_kernel_matches_numpy(lambda x: body(x), x, device=device)


def test_python_scalar_arguments_use_their_value_and_type_on_every_call(device, rng):
    x = random_array(rng, (4, 5), "int8", low=-50, high=50)

    @tj.kernel
    def scale(x, s):
        return x * s

    for s in (2, 3, 2.5, -1):  # int8 * int stays int8; int8 * float is float64
        assert_close(run_kernel(scale, x, s, device=device), x * s, what=f"x * {s!r}")


def test_integer_arithmetic_wraps_around_like_numpy(device):
    i8 = np.array([127, -128, 100], np.int8)
    u8 = np.array([0, 255, 1], np.uint8)
    i16 = np.array([300, -300, 181], np.int16)
    i32 = np.array([2**31 - 1, -2**31, 65536], np.int32)

    def body(i8, u8, i16, i32):
        return i8 + 1, -i8, u8 - 1, i16 * i16, i32 + 1, i32 * 2

    result = assert_kernel_matches_numpy(body, i8, u8, i16, i32, device=device)
    assert np.asarray(result[0])[0] == -128


def test_integer_division_by_zero_gives_zero_like_numpy(device):
    a = np.array([7, -7, 0, 5], np.int32)
    u = np.array([3, 0, 9, 255], np.uint8)
    zeros_a = np.zeros_like(a)
    zeros_u = np.zeros_like(u)
    assert_kernel_matches_numpy(lambda a, b, u, v: (a // b, a % b, u // v, u % v), a, zeros_a, u, zeros_u,
                                device=device, numpy_errors="ignore")


# =============================================================================================
# astype

CAST_TARGETS = ALL_DTYPES


@pytest.mark.parametrize("source", ALL_DTYPES)
def test_astype_to_every_dtype_matches_numpy(source, device, rng):
    """Floats truncate toward zero and become True when nonzero; ints wrap into narrower ints.
    Float values stay in range of every target (out-of-range float -> int casts are undefined).
    Row t of the one output holds the cast to target t, widened exactly to float64, so one kernel
    checks every cast from this source."""
    if source == "bool":
        signed = unsigned = random_array(rng, (24,), source)
    elif np.dtype(source).kind == "f":
        values = np.concatenate([[0.0, 0.5, -0.5, 2.5, -2.5, 99.75], rng.uniform(-100, 100, 18)])
        signed, unsigned = values.astype(source), np.abs(values).astype(source)
    else:  # fits float16 too
        signed = unsigned = random_array(rng, (24,), source, low=-30000, high=30000)
    selector = np.eye(len(CAST_TARGETS))

    def body(signed, unsigned, selector):
        rows = []
        for t, target in enumerate(CAST_TARGETS):
            values = unsigned if target in UNSIGNED_INTS else signed
            rows.append(selector[:, t:t + 1] * values.astype(np.dtype(target).type).astype(np.float64))
        return sum(rows[1:], rows[0])

    result = np.asarray(run_kernel(tj.kernel(body), signed, unsigned, selector, device=device))
    expected = body(signed, unsigned, selector)
    assert result.dtype == expected.dtype and result.shape == expected.shape
    for t, target in enumerate(CAST_TARGETS):
        rtol, atol = tolerances(target)
        np.testing.assert_allclose(result[t], expected[t], rtol=rtol, atol=atol, err_msg=f"{source} -> {target}")


def test_float_to_int_truncates_toward_zero(device):
    x = np.array([-2.7, -2.5, -0.5, 0.0, 0.5, 1.5, 2.7, 99.9, -99.9], np.float64)
    result = assert_kernel_matches_numpy(lambda x: (x.astype(np.int32), x.astype(np.int8)), x, device=device)
    assert np.asarray(result[0]).tolist() == [-2, -2, 0, 0, 0, 1, 2, 99, -99]


# =============================================================================================
# Reductions

REDUCTION_AXES = [(None, True), (1, False), (-1, True), ((0, 2), False), ((-1, 0), True)]


@pytest.mark.parametrize(("axis", "keepdims"), REDUCTION_AXES, ids=lambda v: repr(v).replace(" ", ""))
@pytest.mark.parametrize("op", ["sum", "max", "min", "prod", "mean"])
def test_reduction_over_axes_matches_numpy(op, axis, keepdims, device, rng):
    x = random_array(rng, (3, 4, 5), "float32", low=0.5, high=2.0)  # no cancellation, prod stays finite
    assert_kernel_matches_numpy(lambda x: getattr(x, op)(axis=axis, keepdims=keepdims), x, device=device)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_reductions_give_numpy_result_dtype(dtype, device, rng):
    """sum and prod of bools and signed ints accumulate in int64, mean of ints is float64,
    max and min keep the dtype."""
    if np.dtype(dtype).kind == "f":
        x = random_array(rng, (5, 6), dtype, low=0.5, high=2.0)
    else:
        x = random_array(rng, (5, 6), dtype, low=-4, high=4)
    if dtype in UNSIGNED_INTS:
        # NumPy sums unsigned ints into uint64, which tracejit does not have; only max/min/mean here.
        body = lambda x: (x.max(axis=1), x.min(axis=0), x.mean())
    else:
        body = lambda x: (x.sum(axis=1), x.prod(axis=0), x.max(axis=1), x.min(axis=0), x.mean())
    assert_kernel_matches_numpy(body, x, device=device)


def test_reduction_functions_match_numpy(device, rng):
    x = random_array(rng, (4, 5), "float32", low=0.5, high=2.0)

    def body(x):
        return (np.sum(x, axis=1), np.max(x, axis=0), np.min(x, axis=-1, keepdims=True),
                np.prod(x, axis=0), np.mean(x), np.sum(x, axis=(0, 1)))

    assert_kernel_matches_numpy(body, x, device=device)


def test_elementwise_ops_on_zero_size_arrays(device):
    x = np.zeros((0, 3), np.float32)
    assert_kernel_matches_numpy(lambda x: (x * 2.0 + 1.0, np.exp(x), x > 0), x, device=device)


def test_reduction_over_zero_size_axis_gives_identity(device):
    x = np.zeros((0, 3), np.float32)
    n = np.zeros((0,), np.int8)

    def body(x, n):
        return x.sum(axis=0), x.prod(axis=0), x.sum(), x.sum(axis=1), x.max(axis=1), n.sum()

    assert_kernel_matches_numpy(body, x, n, device=device)


def test_zero_d_arrays_work_elementwise(device):
    a = np.array(2.5, np.float32)
    b = np.array(-1.25, np.float32)
    assert_kernel_matches_numpy(lambda a, b: (a * b + 1.0, np.exp(a), a > b, -a), a, b, device=device)


def test_zero_d_array_broadcasts_against_array(device, rng):
    s = np.array(3, np.int16)
    x = random_array(rng, (3, 4), "int16")
    assert_kernel_matches_numpy(lambda s, x: (s * x, x - s, np.maximum(x, s)), s, x, device=device)


def test_float32_sum_of_millions_of_elements_is_accurate(device):
    x = np.random.default_rng(7).random(4_200_001, dtype=np.float32)

    @tj.kernel
    def total(x):
        return x.sum()

    result = np.asarray(run_kernel(total, x, device=device))
    exact = x.astype(np.float64).sum()
    assert result.dtype == np.float32 and result.shape == ()
    assert abs(float(result) - exact) <= 1e-5 * exact


# =============================================================================================
# matmul


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_matmul_2d_matches_numpy(dtype, device, rng):
    a = random_array(rng, (7, 9), dtype, low=-3, high=3)
    b = random_array(rng, (9, 5), dtype, low=-3, high=3)
    assert_kernel_matches_numpy(lambda a, b: a @ b, a, b, device=device,
                                atol=1e-5 if dtype == "float32" else None)


def test_matmul_with_1d_operands_matches_numpy(device, rng):
    m = random_array(rng, (6, 4), "float64")
    v4 = random_array(rng, (4,), "float64")
    v6 = random_array(rng, (6,), "float64")
    assert_kernel_matches_numpy(lambda m, v4, v6: (v6 @ m, m @ v4, v4 @ v4, np.matmul(v6, m)),
                                m, v4, v6, device=device, rtol=1e-12, atol=1e-11)


def test_matmul_of_larger_matrices_matches_numpy(device, rng):
    a = random_array(rng, (67, 45), "float32", low=-3, high=3)
    b = random_array(rng, (45, 33), "float32", low=-3, high=3)
    assert_kernel_matches_numpy(lambda a, b: a @ b, a, b, device=device, atol=1e-4)


def test_matmul_of_transposed_operands_matches_numpy(device, rng):
    a = random_array(rng, (9, 7), "float32", low=-3, high=3)
    b = random_array(rng, (5, 9), "float32", low=-3, high=3)
    assert_kernel_matches_numpy(lambda a, b: (a.T @ b.T, np.matmul(b, a) * 2.0), a, b, device=device, atol=1e-5)


# =============================================================================================
# Movement: reshape, transpose, broadcast_to, indexing


def test_reshape_matches_numpy(device, rng):
    x = random_array(rng, (4, 6), "float32")
    assert_kernel_matches_numpy(
        lambda x: (x.reshape(6, 4), x.reshape(-1), x.reshape(2, -1, 3), np.reshape(x, (3, 8)) + 1),
        x, device=device)


def test_reshape_of_transposed_view_matches_numpy(device, rng):
    x = random_array(rng, (4, 6), "float32")
    assert_kernel_matches_numpy(lambda x: (x.T.reshape(-1), x.T.reshape(3, 8) * 2.0), x, device=device)


def test_transpose_forms_match_numpy(device, rng):
    x = random_array(rng, (2, 3, 4), "int32")
    assert_kernel_matches_numpy(
        lambda x: (x.T, x.transpose(1, 0, 2), x.transpose((2, 0, 1)), np.transpose(x, (0, 2, 1)) + 1),
        x, device=device)


def test_broadcast_to_matches_numpy(device, rng):
    x = random_array(rng, (3, 1), "float32")
    y = random_array(rng, (4, 3, 5), "float32")
    assert_kernel_matches_numpy(lambda x, y: (np.broadcast_to(x, (3, 5)), np.broadcast_to(x, (4, 3, 5)) + y),
                                x, y, device=device)


def test_movement_ops_compose(device, rng):
    x = random_array(rng, (4, 6), "float32")
    assert_kernel_matches_numpy(lambda x: x.T.reshape(2, 12)[:, ::3][None, ::-1] * 2.0, x, device=device)


INDEXES = {
    "int": (1,),
    "int, negative int": (2, -3),
    "step": (slice(None, None, 2),),
    "negative step": (slice(None, None, -1),),
    "negative step with bounds": (slice(None), slice(4, 0, -2)),
    "three strided slices": (slice(1, None), slice(2, 5, 2), slice(None, None, -3)),
    "None between": (slice(None), None, 2),
    "ellipsis": (Ellipsis, 1),
    "int, ellipsis, None, negative step": (1, Ellipsis, None, slice(None, None, -2)),
    "all ints to 0-d": (3, 4, 5),
    "empty slice": (slice(3, 1),),
}


@pytest.mark.parametrize("index", list(INDEXES.values()), ids=list(INDEXES))
def test_basic_indexing_matches_numpy(index, device, rng):
    x = random_array(rng, (4, 5, 6), "float32")
    assert_kernel_matches_numpy(lambda x: x[index] * 2.0, x, device=device)


def test_kernel_may_return_a_view_of_its_input(device, rng):
    x = random_array(rng, (4, 5), "int16")
    assert_kernel_matches_numpy(lambda x: x[::2, 1], x, device=device)


# =============================================================================================
# The tj namespace mirrors NumPy's


def test_tj_unary_functions_equal_numpy_functions(device, rng):
    x = random_array(rng, (4, 5), "float32", low=0.1, high=1.2)  # inside every domain

    def body(ns, x):
        floats = (ns.exp(x) + ns.exp2(x) + ns.log(x) + ns.log2(x) + ns.sqrt(x) + ns.sin(x) + ns.cos(x) + ns.tan(x)
                  + ns.tanh(x) + ns.abs(x) + ns.sign(x) + ns.floor(x) + ns.ceil(x) + ns.trunc(x) + ns.rint(x)
                  + ns.reciprocal(x))
        return floats, pack_flags(ns.isnan(x), ns.isinf(x), ns.isfinite(x))

    floats, flags = run_kernel(tj.kernel(lambda x: body(tj, x)), x, device=device)
    expected_floats, expected_flags = body(np, x)
    assert_close(floats, expected_floats, rtol=1e-5, atol=1e-5)
    assert_flags_match(flags, expected_flags, ["isnan", "isinf", "isfinite"])


def test_tj_functions_of_several_arrays_equal_numpy_functions(device, rng):
    x = random_array(rng, (4, 5), "float32", low=0.1, high=1.2)
    y = random_array(rng, (4, 5), "float32", low=0.1, high=1.2)
    z = random_array(rng, (5,), "float32")

    def body(ns, x, y, z):
        return (ns.maximum(x, y) + ns.minimum(x, y) * ns.power(x, y) + ns.where(x > y, x, y) - ns.clip(x, 0.3, 0.9),
                ns.matmul(x, y.T),
                ns.broadcast_to(z, (4, 5)) + ns.transpose(ns.reshape(x, (5, 4))),
                ns.sum(x, axis=1), ns.max(x, axis=0), ns.min(x), ns.prod(x, axis=1), ns.mean(x, axis=0, keepdims=True))

    @tj.kernel
    def kernel(x, y, z):
        return body(tj, x, y, z)

    assert_close(run_kernel(kernel, x, y, z, device=device), body(np, x, y, z))


# =============================================================================================
# Call surface: tuples, static args, the in-memory cache, strided inputs


def test_kernel_returning_a_tuple_returns_a_tuple(device, rng):
    x = random_array(rng, (3, 4), "float32")
    assert_kernel_matches_numpy(lambda x: (x + 1.0, x.sum(axis=0), x > 0), x, device=device)


def test_static_axis_argument_selects_the_reduction(device, rng):
    x = random_array(rng, (3, 4, 5), "int32")

    @tj.kernel(static=("axis",))
    def total(x, axis):
        return x.sum(axis=axis)

    assert_close(run_kernel(total, x, 0, device=device), x.sum(axis=0))
    assert_close(run_kernel(total, x, axis=1, device=device), x.sum(axis=1))
    assert_close(run_kernel(total, x, (0, 2), device=device), x.sum(axis=(0, 2)))
    assert_close(run_kernel(total, x, axis=None, device=device), x.sum(axis=None))
    assert total.cache_info()["traces"] == 4  # one per distinct static value
    assert_close(run_kernel(total, x, (0, 2), device=device), x.sum(axis=(0, 2)))
    assert total.cache_info()["traces"] == 4


def test_static_argument_can_drive_python_control_flow(device, rng):
    x = random_array(rng, (3, 8), "float32")

    @tj.kernel(static=("mode",))
    def pool(x, mode):
        if mode == "max":
            return x.max(axis=-1)
        return x.mean(axis=-1)

    assert_close(run_kernel(pool, x, "max", device=device), x.max(axis=-1))
    assert_close(run_kernel(pool, x, mode="mean", device=device), x.mean(axis=-1))


def test_second_call_with_same_signature_skips_tracing_and_compiling(device, rng):
    @tj.kernel
    def affine(x, y):
        return x * y + 1.0

    fresh = affine.cache_info()
    assert (fresh["traces"], fresh["compiles"], fresh["hits"]) == (0, 0, 0)
    x, y = random_array(rng, (8, 16), "float32"), random_array(rng, (8, 16), "float32")
    assert_close(run_kernel(affine, x, y, device=device), x * y + 1.0)
    first = affine.cache_info()
    assert all(isinstance(first[key], int) for key in ("traces", "compiles", "hits"))
    assert first["traces"] == 1 and first["hits"] == 0

    x2, y2 = random_array(rng, (8, 16), "float32"), random_array(rng, (8, 16), "float32")
    assert_close(run_kernel(affine, x2, y2, device=device), x2 * y2 + 1.0)  # new data, same signature
    second = affine.cache_info()
    assert second["traces"] == first["traces"]
    assert second["compiles"] == first["compiles"]
    assert second["hits"] == first["hits"] + 1


def test_new_shape_or_dtype_traces_again_and_old_signature_still_hits(device, rng):
    @tj.kernel
    def shift(x):
        return x - x.mean(axis=0)

    inputs = [random_array(rng, (8, 4), "float32"), random_array(rng, (5, 4), "float32"),
              random_array(rng, (8, 4), "float64")]
    for x in inputs:
        assert_close(run_kernel(shift, x, device=device), x - x.mean(axis=0))
    assert shift.cache_info()["traces"] == 3
    hits = shift.cache_info()["hits"]
    assert_close(run_kernel(shift, inputs[0], device=device), inputs[0] - inputs[0].mean(axis=0))
    assert shift.cache_info()["traces"] == 3
    assert shift.cache_info()["hits"] == hits + 1


STRIDED_VIEWS = {
    "transposed": lambda base: base.T,
    "every other row": lambda base: base[::2],
    "reversed rows": lambda base: base[::-1],
    "reversed columns": lambda base: base[:, ::-1],
    "offset with step": lambda base: base[1:, ::3],
}


@pytest.mark.parametrize("view", list(STRIDED_VIEWS))
def test_strided_numpy_input_is_read_through_its_strides(view, device, rng):
    x = STRIDED_VIEWS[view](random_array(rng, (8, 9), "float32"))
    assert not x.flags.c_contiguous
    y = random_array(rng, x.shape, "float32")
    assert_kernel_matches_numpy(lambda x, y: (x * 2.0 + y, x.sum(axis=1)), x, y, device=device)


def test_same_shape_with_different_strides_is_not_confused(device, rng):
    @tj.kernel
    def f(x):
        return x * 2.0 + x[0]

    square = random_array(rng, (6, 6), "float32")
    for x in (square, square.T, square[::-1], np.ascontiguousarray(square.T)):
        assert_close(run_kernel(f, x, device=device), x * 2.0 + x[0])


@pytest.mark.parametrize("shape, axis", [((64, 200_000), 1), ((200_000, 8), 0), ((4, 300_000), 1)])
def test_long_float32_sums_are_as_accurate_as_numpy(shape, axis, device, rng):
    """Row sums (a row per thread, or a work-group tree) and column sums stay within a few float32
    roundings of the float64 answer, like NumPy's pairwise sum, whatever launch shape a device picks."""
    x = rng.random(shape, dtype=np.float32)
    exact = x.astype(np.float64).sum(axis=axis)
    got = np.asarray(run_kernel(tj.kernel(lambda a: a.sum(axis=axis)), x, device=device)).astype(np.float64)
    numpy_error = np.abs(x.sum(axis=axis) / exact - 1).max()
    assert np.abs(got / exact - 1).max() <= max(4 * numpy_error, 2e-7)
