"""An integer array compared with a Python int the array's dtype cannot hold: NumPy 2 compares them exactly
(u8 < 300 is True everywhere, i64 == 2**70 False), and so does every device, for the first call's int and for
any later call's, which reaches the same plan (the int is a run-time argument). Arithmetic with such an int
still raises OverflowError, as NumPy's does."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj

INT_DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64]

FORMS = {"x < s": lambda x, s: x < s, "x <= s": lambda x, s: x <= s, "x > s": lambda x, s: x > s,
         "x >= s": lambda x, s: x >= s, "x == s": lambda x, s: x == s, "x != s": lambda x, s: x != s,
         "s < x": lambda x, s: s < x, "s >= x": lambda x, s: s >= x, "s == x": lambda x, s: s == x,
         "np.equal(x, s)": lambda x, s: np.equal(x, s), "np.greater(s, x)": lambda x, s: np.greater(s, x),
         "np.less_equal(x, s)": lambda x, s: np.less_equal(x, s), "np.not_equal(s, x)": lambda x, s: np.not_equal(s, x),
         "np.greater_equal(x, s)": lambda x, s: np.greater_equal(x, s)}


def every_form(x, s):
    return tuple(form(x, s) for form in FORMS.values())


def boundary_ints(dtype) -> list[int]:
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    return [0, 5, -1, -2, hi, hi + 1, hi - 1, lo, lo - 1, lo + 1, 300, -300, 2 ** 31, 2 ** 32, 2 ** 63 - 1,
            2 ** 63, 2 ** 64 - 1, 2 ** 64, -2 ** 63, -2 ** 63 - 1, 2 ** 70, -2 ** 70]


def boundary_array(dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.array([info.min, info.min + 1, 0, 1, 5, 100, info.max - 1, info.max], dtype)


def check_forms(got, x, s) -> None:
    for name, g, want in zip(FORMS, got, every_form(x, s)):
        g = np.asarray(g)
        assert g.dtype == np.bool_, (name, s)
        np.testing.assert_array_equal(g, want, err_msg=f"{name} with {x.dtype} x and s = {s}")


def needs_int64(device: str, dtype) -> None:
    if device.startswith("webgpu") and np.dtype(dtype).itemsize == 8:
        pytest.skip("WGSL has no 64-bit integers")


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_an_integer_array_compares_with_any_python_int_as_numpy_does(device, dtype):
    """Every operator, the int on either side and the ufunc forms, against the dtype's bounds, one beyond
    them, 2**63, 2**64, -2**63 - 1 and 2**70: one trace, the values arriving call by call."""
    needs_int64(device, dtype)
    k = tj.kernel(every_form)
    x = boundary_array(dtype)
    for s in boundary_ints(dtype):
        check_forms(k(x, s, device=device), x, s)
    assert k.cache_info()["traces"] == 1


@pytest.mark.parametrize("first", [300, -1, 2 ** 70, -2 ** 63 - 1])
def test_the_first_call_may_bring_the_int_beyond_the_dtype(device, first):
    k = tj.kernel(every_form)
    x = boundary_array(np.uint8)
    check_forms(k(x, first, device=device), x, first)   # refused as ScalarOverflowError before
    check_forms(k(x, 7, device=device), x, 7)           # then inside it, same plan
    check_forms(k(x, -first, device=device), x, -first)
    assert k.cache_info()["traces"] == 1


def test_uint64_values_compare_exactly_too(device):
    """uint64 values in a kernel (a cast, a sum of unsigned ints): negative ints and ints from 2**64 on
    compare exactly, and the ints between 2**63 and 2**64 by value."""
    needs_int64(device, np.uint64)

    def f(x, s):
        u = x.astype(np.uint64) * np.uint64(2 ** 33)
        return u < s, s <= u, u == s, np.not_equal(u, s)
    k = tj.kernel(f)
    x = np.array([0, 1, 2 ** 31 - 1, 2 ** 31, 2 ** 31 + 5, 2 ** 32 - 1], np.uint32)
    for s in (0, 2 ** 33, -1, -2 ** 63 - 1, 2 ** 63, 2 ** 64 - 2 ** 33, 2 ** 64 - 1, 2 ** 64, 2 ** 70):
        for g, want in zip(k(x, s, device=device), f(x, s)):
            np.testing.assert_array_equal(np.asarray(g), want, err_msg=str(s))


def test_a_comparison_with_arithmetic_of_python_ints_is_exact(device):
    """x < n + 1 compared the int wrapped to the array's dtype (n = 299: x < 44 on uint8), silently."""
    needs_int64(device, np.int64)

    def f(x, n):
        return x < n + 1, n * 2 <= x, x == n - 3, np.greater(x, n // 2)
    k = tj.kernel(f)
    x = boundary_array(np.uint8)
    for n in (0, 10, 299, 600, -5, 2 ** 40):
        for g, want in zip(k(x, n, device=device), f(x, n)):
            np.testing.assert_array_equal(np.asarray(g), want, err_msg=str(n))


def test_arithmetic_with_an_int_beyond_the_dtype_still_raises_as_in_numpy(device):
    def f(x, s):
        return np.where(x < s, x + s, x)
    k = tj.kernel(f)
    x = np.arange(10, dtype=np.uint8)
    np.testing.assert_array_equal(np.asarray(k(x, 5, device=device)), f(x, 5))
    for s in (300, -1):
        with pytest.raises(OverflowError):
            f(x, s)   # NumPy: Python integer 300 out of bounds for uint8
        with pytest.raises(OverflowError):
            k(x, s, device=device)
    np.testing.assert_array_equal(np.asarray(k(x, 3, device=device)), f(x, 3))


def test_the_int_reaches_the_kernel_as_two_hidden_scalars_of_the_array_s_dtype():
    """What the plan passes: the int clamped to the dtype and the side it was clamped from (not the int
    itself, which a 64-bit argument could not hold)."""
    k = tj.kernel(lambda x, s: x < s)
    traced = k.trace(np.zeros(4, np.int8), 1)
    assert [(arg[1:], dt) for arg, dt in traced.compared] == [((1, "|i1", "side"), np.int32),
                                                              ((1, "|i1", "value"), np.int8)]
    from tracejit.numpy.int_comparisons import values_of
    values = values_of(traced.compared)
    assert [values((None, s)) for s in (5, 300, -129, -128)] == [(0, 5), (1, 127), (-1, -128), (0, -128)]
