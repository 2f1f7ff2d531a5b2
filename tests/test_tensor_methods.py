"""The ndarray methods and attributes NumPy code calls on a traced value, the NumPy functions that mirror
them (np.round, np.dot, np.squeeze, ...), and Python built-ins whose answer is known while tracing."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from reference import FLOATS, assert_close, random_array, run_kernel
from tracejit.numpy.tensor import MAX_UNROLL


def assert_matches(body, *args, device, **kwargs):
    result = run_kernel(tj.kernel(body), *args, device=device)
    with np.errstate(all="raise"):
        expected = body(*args)
    assert_close(result, expected, **kwargs)


# =============================================================================================
# Methods


def methods(x):
    """Each ndarray method once; outputs of one shape where possible so they share a kernel."""
    return (x.astype(np.int32), x.copy(), x.reshape(4, 3, 2).ravel(), x.flatten(), x[:, None].squeeze(),
            x[:, :1, None].squeeze(axis=(1, 2)), x.swapaxes(0, 1), x.transpose(1, 0), x.T, x.mT,
            x.clip(-1, 1), x.clip(min=0), x.round(1), x.conj(), x.conjugate(), x.real, x.imag,
            x.any(axis=0), x.all(), x.argmax(axis=1), x.argmin(), x.var(axis=0), x.std(ddof=1),
            x.sum(axis=1), x.prod(axis=0), x.max(axis=1, keepdims=True), x.min(), x.mean(axis=0),
            x.dot(x.T))


def test_ndarray_methods_match_numpy(device, rng):
    assert_matches(methods, random_array(rng, (4, 6), "float32", low=-2, high=2), device=device)


def test_ptp_method_matches_np_ptp(device, rng):
    # NumPy 2 dropped ndarray.ptp; tracejit keeps it as np.ptp for code written against NumPy 1
    x = random_array(rng, (3, 5), "int16")
    assert_close(run_kernel(tj.kernel(lambda x: x.ptp(axis=1)), x, device=device), np.ptp(x, axis=1))


@pytest.mark.parametrize("dtype", ["int16", "uint8", "float16", "float32", "float64"])
def test_round_follows_numpys_algorithm(dtype, device, rng):
    x = random_array(rng, (3, 8), dtype, low=-300, high=300)
    if x.dtype.kind == "f":
        x[0, :4] = [2.675, 0.125, -0.5, 1.5]  # halfway cases (after scaling) round to even, as rint does

    def body(x):
        return np.round(x, 2), np.around(x, -1), x.round(), np.round(x, -2), x.round(decimals=1)
    assert_matches(body, x, device=device)


def test_round_of_bool_matches_numpy(device):
    x = np.array([True, False, True])
    assert_matches(lambda x: np.round(x), x, device=device)
    with pytest.raises(tj.UnsupportedError, match="bool"):
        tj.kernel(lambda x: np.round(x, 1)).trace(x)


def dot_forms(v, m, t):
    return (np.dot(v, v), np.dot(m, v[:5]), np.dot(m, m.T), np.dot(v[:4], m), np.dot(t, v[:5]),
            np.dot(t, m.T), np.dot(m, m.dtype.type(2)), np.dot(v.dtype.type(3), v), t.dot(m.T))


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
def test_dot_matches_numpy_for_every_form(dtype, device, rng):
    v = random_array(rng, (5,), dtype, low=-5, high=5)
    m = random_array(rng, (4, 5), dtype, low=-5, high=5)
    t = random_array(rng, (2, 3, 5), dtype, low=-5, high=5)
    assert_matches(dot_forms, v, m, t, device=device)


def test_dot_with_a_python_scalar_promotes_it_as_an_array():
    # np.dot(x, 2.0) is float64 for float32 x (the scalar becomes a float64 array, no weak typing)
    traced = tj.kernel(lambda m: (np.dot(m, 2.0), np.dot(3, m.astype(np.int32)))).trace(np.ones((2, 2), np.float32))
    assert [o.dtype for o in traced.outputs] == [np.dot(np.ones(2, np.float32), 2.0).dtype,
                                                 np.dot(3, np.ones(2, np.int32)).dtype]


def test_dot_shape_mismatch_is_a_value_error():
    with pytest.raises(ValueError, match="not aligned"):
        tj.kernel(lambda a, b: np.dot(a, b)).trace(np.ones((2, 3)), np.ones((4, 2)))


def movement_functions(x):
    return (np.squeeze(x), np.squeeze(x, axis=0), np.swapaxes(x, 0, -1), np.ravel(x), np.copy(x),
            x.reshape(np.shape(x)[1:]) + (np.ndim(x) + np.size(x, 1) + np.size(x)))


def test_movement_functions_match_numpy(device, rng):
    assert_matches(movement_functions, random_array(rng, (1, 3, 4), "float32"), device=device)


def test_squeeze_of_a_longer_axis_is_a_value_error():
    with pytest.raises(ValueError, match="size not equal to one"):
        tj.kernel(lambda x: np.squeeze(x, axis=1)).trace(np.ones((1, 3)))


# =============================================================================================
# Attributes and Python built-ins known while tracing


def builtins(x):
    total = x[0] * 0
    for row in x:                      # unrolled: one slice per row
        total = total + row
    first, second, third = x           # unpacking
    columns = [sum(c) for c in zip(*x)]  # zip(*t) iterates rows, then their elements
    scale = len(x) + x.size + x.nbytes + x.itemsize + x.ndim
    return total, first - second * third, columns[0] + columns[3], x * scale


def test_builtins_with_static_answers_match_numpy(device, rng):
    assert_matches(builtins, random_array(rng, (3, 4), "float32"), device=device)


def test_len_of_a_0d_value_is_a_type_error_as_in_numpy():
    with pytest.raises(TypeError, match="unsized"):
        len(np.ones(()))
    with pytest.raises(TypeError, match="unsized"):
        tj.kernel(lambda x: x * len(x)).trace(np.float32(1))
    with pytest.raises(TypeError, match="0-d"):
        tj.kernel(lambda x: [r for r in x]).trace(np.float32(1))


def test_iterating_past_the_unroll_limit_names_the_length_and_the_alternative():
    kernel = tj.kernel(lambda x: [row for row in x][0])
    with pytest.raises(tj.TraceError, match=f"length {MAX_UNROLL + 1}.*limit of {MAX_UNROLL}.*axis=0") as e:
        kernel.trace(np.ones((MAX_UNROLL + 1, 2), np.float32))
    assert __file__ in str(e.value)
    kernel.trace(np.ones((MAX_UNROLL, 2), np.float32))  # at the limit: traced


@pytest.mark.parametrize("use, words", [
    (lambda x: 1 if x.sum() > 0 else 0, "Python bool"),
    (lambda x: float(x.sum()), "float()"),
    (lambda x: int(x.sum()), "Python integer"),
    (lambda x: range(x.max()), "Python integer"),
])
def test_value_dependent_builtins_raise_trace_error_at_the_user_line(use, words):
    with pytest.raises(tj.TraceError, match="not known while tracing") as e:
        tj.kernel(use).trace(np.ones(3, np.float32))
    assert words in str(e.value) and f"{__file__}:" in str(e.value)


def test_missing_ndarray_method_raises_unsupported_error_at_the_user_line():
    def body(x):
        return x.tobytes()
    with pytest.raises(tj.UnsupportedError, match=r"ndarray\.tobytes is not supported by tracejit") as e:
        tj.kernel(body).trace(np.ones(3, np.float32))
    assert f"{__file__}:{body.__code__.co_firstlineno + 1}:" in str(e.value)
    assert "argmax" in str(e.value)  # lists what is supported


def test_a_name_ndarray_lacks_is_a_plain_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'shapee'"):
        tj.kernel(lambda x: x.shapee).trace(np.ones(3, np.float32))
    with pytest.raises(AttributeError):
        np.ones(3).shapee


@pytest.mark.parametrize("dtype", FLOATS)
def test_real_imag_conj_keep_the_dtype(dtype, device, rng):
    x = random_array(rng, (2, 3), dtype)
    assert_matches(lambda x: (x.real + x.imag, x.conj() * 2), x, device=device)


# the ndarray methods and attributes of issue 14 that real NumPy code calls
CALLED_METHODS = ("astype copy reshape ravel flatten squeeze swapaxes transpose clip round any all argmax argmin var "
                  "std sum prod max min mean ptp dot conj real imag size nbytes itemsize mT T ndim shape dtype").split()


def test_every_commonly_called_ndarray_method_exists_on_traced_values():
    x = tj.Tensor(tj.kernel(lambda x: x).trace(np.ones((2, 3), np.float32)).outputs[0])
    missing = [name for name in CALLED_METHODS if not hasattr(x, name)]
    assert not missing
    assert all(hasattr(np.ones((2, 2)), name) for name in CALLED_METHODS if name != "ptp")  # NumPy 2 dropped ndarray.ptp


def test_setting_the_shape_of_an_array_the_kernel_made_reshapes_it(device):
    """NumPy's `y.shape = (n, -1)` on an array made in the kernel; on an argument it is refused with what to write."""
    def body(x, n):
        y = x * 2
        y.shape = (n, -1)
        return y.sum(axis=1)

    x = np.arange(12, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(tj.kernel(body)(x, 3, device=device)), body(x, 3))

    def argument(x):
        x.shape = (3, 4)
        return x

    with pytest.raises(tj.UnsupportedError, match=r"x = x.reshape"):
        tj.kernel(argument)(x, device=device)
