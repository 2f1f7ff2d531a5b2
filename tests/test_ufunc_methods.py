"""The ufunc protocol's methods on traced values (issue 48 item 4): outer, reduce (axis tuples, initial, where,
keepdims), accumulate and reduceat of every binary ufunc, compared with NumPy on values and dtypes on every device.
NumPy's own reductions and scans serve add, multiply, maximum and minimum; any other binary ufunc folds as NumPy
does (tracejit/numpy/ufunc_methods.py)."""
import numpy as np
import pytest

import tracejit as tj
from reference import assert_close


def float_dtype(device):
    return np.float32 if device in ("webgpu", "metal") else np.float64


def int_dtype(device):
    return np.int32


def check(body, *args, device, rtol=1e-6):
    got, expected = tj.kernel(body)(*args, device=device), body(*args)
    if not isinstance(expected, tuple):
        got, expected = (got,), (expected,)
    for g, e in zip(got, expected):
        g = np.asarray(g)
        assert g.dtype == e.dtype, (g.dtype, e.dtype)
        assert g.shape == e.shape, (g.shape, e.shape)
        assert_close(g, e, rtol=rtol, atol=rtol)


def outers(x, v):
    return np.add.outer(v, v), np.minimum.outer(v, v[:3]), np.subtract.outer(x, v), np.hypot.outer(v, v), \
        np.arctan2.outer(v, v), np.greater.outer(v, v)


def reductions(x, v):
    return (np.multiply.reduce(x, axis=(0, 1)), np.add.reduce(x, axis=1, initial=5.0, where=x > 3),
            np.maximum.reduce(x, axis=0, keepdims=True), np.logical_or.reduce(x > 6, axis=1),
            np.subtract.reduce(v), np.logaddexp.reduce(x, axis=1), np.divide.reduce(x, axis=0, keepdims=True),
            np.subtract.reduce(v, axis=None), np.fmax.reduce(v, initial=2.5), np.hypot.accumulate(v[:3]))


def accumulations(x, v):
    return (np.maximum.accumulate(x, axis=1), np.multiply.accumulate(v), np.subtract.accumulate(v),
            np.divide.accumulate(x, axis=1), np.logaddexp.accumulate(x, axis=0), np.fmin.accumulate(v[::-1]))


def segments(x, v):
    return (np.add.reduceat(v, [0, 2]), np.multiply.reduceat(x, [0, 1, 3], axis=1),
            np.maximum.reduceat(v, [0, 3, 1]), np.subtract.reduceat(v, [1, 1, 2]), np.minimum.reduceat(x, [2, 0]))


@pytest.mark.parametrize("body", [outers, reductions, accumulations, segments])
def test_methods_of_float_ufuncs_match_numpy(device, body):
    dt = float_dtype(device)
    x = (np.arange(1, 13, dtype=dt).reshape(3, 4) * 0.37).astype(dt)
    v = np.array([1.5, 2.25, 0.5, 4.0], dt)
    check(body, x, v, device=device, rtol=1e-5 if dt == np.float32 else 1e-13)


def integer_methods(a):
    return (np.bitwise_and.reduce(a, axis=0), np.bitwise_or.reduce(a, axis=None), np.bitwise_xor.accumulate(a[0]),
            np.add.reduceat(a[0], [0, 2, 3]), np.bitwise_or.reduce(a, axis=(0, 1)), np.subtract.accumulate(a, axis=1),
            np.left_shift.outer(a[0, :3] % 4, a[1, :2] % 4))


def test_methods_of_integer_ufuncs_match_numpy_dtypes_included(device, rng):
    if device == "webgpu":
        pytest.skip("np.add.reduceat of int32 is int64 in NumPy, which webgpu does not hold")
    a = rng.integers(1, 60, (3, 5)).astype(np.int32)
    check(integer_methods, a, device=device)


@pytest.mark.parametrize("n", [3000, 200_001])
def test_a_bitwise_reduction_folds_as_a_tree_at_any_length(device, rng, n):
    """Halves of the axis folded level by level: log2(n) operations (element by element, 3,000 took 3 s to trace
    and compile on numba, and a long axis never finished)."""
    a = rng.integers(0, 2**20, n).astype(np.int32)
    check(lambda a: (np.bitwise_or.reduce(a), np.bitwise_xor.reduce(a), np.bitwise_and.reduce(a | 1)), a,
          device=device)
    b = rng.integers(0, 2**7, (5, 9, 3)).astype(np.int16)
    check(lambda b: (np.bitwise_xor.reduce(b, axis=1, initial=3), np.logical_or.reduce(b > 100, axis=(0, 2))), b,
          device=device)


def test_what_numpy_refuses_is_refused_as_numpy_does(device):
    x = np.arange(6, dtype=np.float32)
    with pytest.raises(IndexError, match="out-of-bounds in add.reduceat"):
        tj.kernel(lambda x: np.add.reduceat(x, [0, 9]))(x, device=device)
    with pytest.raises(ValueError, match="not reorderable"):
        tj.kernel(lambda x: np.subtract.reduce(x.reshape(2, 3), axis=(0, 1)))(x, device=device)
    with pytest.raises(ValueError, match="not reorderable"):
        tj.kernel(lambda x: np.subtract.reduce(x.reshape(2, 3), axis=None))(x, device=device)
    with pytest.raises(ValueError, match="only supported for binary functions"):
        tj.kernel(lambda x: np.sqrt.reduce(x))(x, device=device)
    with pytest.raises(tj.UnsupportedError, match="not the fold of the elements in order"):
        tj.kernel(lambda x: np.power.reduce(x))(x, device=device)   # (NumPy's own answer is not (a ** b) ** c)
    with pytest.raises(tj.UnsupportedError, match="folds subtract.*up to 256"):
        tj.kernel(lambda x: np.subtract.accumulate(x))(np.ones(300, np.float32), device=device)
