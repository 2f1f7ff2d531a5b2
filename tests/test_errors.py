"""Mistakes in kernels and calls raise tracejit's own error classes with messages in the user's terms:
what went wrong, the shapes or names involved, where in the user's file, and what to do instead.
Never a Numba traceback."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import tracejit as tj

THIS_FILE = Path(__file__)


def line_of(marker: str) -> int:
    """Line number in this file of the statement tagged with the comment `marker`."""
    for number, text in enumerate(THIS_FILE.read_text().splitlines(), start=1):
        if text.rstrip().endswith(marker):
            return number
    raise AssertionError(f"no line ends with {marker!r}")


def assert_points_at(error: BaseException, marker: str) -> None:
    message = str(error)
    assert THIS_FILE.name in message, f"file name missing from: {message}"
    line = line_of(marker)
    assert re.search(rf"(?<!\d){line}(?!\d)", message), f"line {line} missing from: {message}"


def f32(*shape):
    return np.ones(shape, np.float32)


# =============================================================================================
# Tracing: control flow on traced values, len()


def test_if_on_traced_value_raises_trace_error_suggesting_where(device):
    class Positive(Exception):
        pass

    @tj.kernel
    def relu(x):   # (an early return, or a raise of a built-in exception, compiles: test_control_flow.py)
        if x.sum() > 0:  # <- if on traced value
            raise Positive("positive")
        return -x

    with pytest.raises(tj.TraceError, match=r"tj\.where") as caught:
        relu(f32(3), device=device)
    assert_points_at(caught.value, "# <- if on traced value")


def test_bool_of_traced_value_raises_trace_error_suggesting_where(device):
    # bool() in the kernel function's code is computed (test_control_flow.py); in a lambda, whose source is not
    # rewritten, it is Python's bool() of a value unknown while tracing
    truthy = tj.kernel(lambda x: x * bool(x.max() > 1))  # <- bool of traced value

    with pytest.raises(tj.TraceError, match=r"tj\.where") as caught:
        truthy(f32(3), device=device)
    assert_points_at(caught.value, "# <- bool of traced value")


def test_while_on_traced_value_runs_as_a_compiled_loop(device):
    def halve_until_small(x):
        while x.max() > 1:  # a while on a value read from arrays: compiled as a loop (tests/test_loops.py)
            x = x / 2
        return x

    x = f32(3) * 7
    np.testing.assert_allclose(np.asarray(tj.kernel(halve_until_small)(x, device=device)), halve_until_small(x))


def test_len_of_0d_traced_value_raises_type_error_as_numpy(device):
    @tj.kernel
    def count(x):
        return x * len(x)  # <- len of traced value

    with pytest.raises(TypeError, match="len.. of unsized object") as caught:
        count(np.float32(3), device=device)
    assert isinstance(caught.value, tj.TraceError)
    assert_points_at(caught.value, "# <- len of traced value")


# =============================================================================================
# Shapes


def test_mismatched_shapes_raise_shape_error_naming_both_shapes(device):
    @tj.kernel
    def add(a, b):
        return a + b  # <- mismatched add

    with pytest.raises(tj.ShapeError) as caught:
        add(f32(3, 4), f32(5), device=device)
    message = str(caught.value)
    assert re.search(r"\(3,\s*4\)", message), message
    assert re.search(r"\(5,?\)", message), message
    assert isinstance(caught.value, ValueError)
    assert_points_at(caught.value, "# <- mismatched add")


@pytest.mark.parametrize(("body", "x_shape", "y_shape"), [
    (lambda x, y: x.reshape(5, -1) + y, (3, 4), (1,)),
    (lambda x, y: x @ y, (3, 4), (5, 2)),
    (lambda x, y: np.broadcast_to(x, (5, 4)) + y, (3, 4), (1,)),
    (lambda x, y: x.sum(axis=2) + y, (3, 4), (1,)),
], ids=["reshape to a wrong size", "matmul inner dims differ", "broadcast_to an incompatible shape",
        "reduction axis out of range"])
def test_impossible_shape_raises_shape_error(body, x_shape, y_shape, device):
    with pytest.raises(tj.ShapeError):
        tj.kernel(body)(f32(*x_shape), f32(*y_shape), device=device)


def test_max_of_zero_size_array_raises_value_error_like_numpy(device):
    with pytest.raises(ValueError):
        tj.kernel(lambda x: x.max())(f32(0), device=device)


def test_failed_trace_does_not_poison_the_kernel(device):
    @tj.kernel
    def add(a, b):
        return a + b

    with pytest.raises(tj.ShapeError):
        add(f32(3, 4), f32(5), device=device)
    np.testing.assert_array_equal(np.asarray(add(f32(3, 4), f32(4), device=device)), np.full((3, 4), 2, np.float32))


# =============================================================================================
# Unsupported functions


@pytest.mark.parametrize(("body", "name"), [
    (lambda x: np.i0(x), "i0"),
    (lambda x: np.unwrap(x), "unwrap"),
    (lambda x: np.gcd(x, x), "gcd"),
], ids=["np.i0", "np.unwrap", "np.gcd"])
def test_unsupported_numpy_function_raises_unsupported_error_naming_it(body, name, device):
    with pytest.raises(tj.UnsupportedError, match=name) as caught:
        tj.kernel(body)(f32(8), device=device)
    assert isinstance(caught.value, TypeError)


def test_unsupported_function_error_points_at_the_call(device):
    @tj.kernel
    def spectrum(x):
        return np.i0(x)  # <- unsupported call

    with pytest.raises(tj.UnsupportedError) as caught:
        spectrum(f32(8), device=device)
    assert_points_at(caught.value, "# <- unsupported call")


# =============================================================================================
# Dtypes and arguments


@pytest.mark.parametrize("array", [
    np.ones(3, np.clongdouble),
    np.ones(3, np.uint64),
    np.array([1, "a"], dtype=object),
], ids=lambda a: str(a.dtype))
def test_unsupported_input_dtype_raises_dtype_error_naming_it(array, device):
    with pytest.raises(tj.DtypeError, match=str(array.dtype)):
        tj.kernel(lambda x: x + 1)(array, device=device)


def test_complex128_where_a_device_has_no_float64_raises_dtype_error(device):
    if device not in ("webgpu", "metal"):
        pytest.skip("the device has float64, so complex128")
    with pytest.raises(tj.DtypeError, match="complex128"):
        tj.kernel(lambda x: x + 1)(np.ones(3, np.complex128), device=device)


@tj.kernel
def add_two(a, b):
    return a + b


@pytest.mark.parametrize(("args", "kwargs"), [
    ((f32(3),), {}),
    ((f32(3), f32(3), f32(3)), {}),
    ((f32(3), f32(3)), {"c": f32(3)}),
    (("not an array", f32(3)), {}),
    ((object(), f32(3)), {}),
    (({"a": f32(3)}, f32(3)), {}),   # (a dict of settings is a static argument: test_api.py)
], ids=["too few", "too many", "unknown keyword", "str argument", "object argument", "dict of arrays argument"])
def test_wrong_arguments_raise_argument_error(args, kwargs, device):
    with pytest.raises(tj.ArgumentError):
        add_two(*args, device=device, **kwargs)


def test_unhashable_static_argument_raises_argument_error(device):
    @tj.kernel(static=("axis",))
    def total(x, axis):
        return x.sum(axis=axis)

    with pytest.raises(tj.ArgumentError):
        total(f32(3, 4), {0, 1}, device=device)   # (a set: a list or a dict of settings keys by value)


# =============================================================================================
# The hierarchy users catch


def test_error_classes_form_the_documented_hierarchy():
    assert issubclass(tj.TraceError, tj.TracejitError)
    assert issubclass(tj.ShapeError, tj.TraceError) and issubclass(tj.ShapeError, ValueError)
    assert issubclass(tj.UnsupportedError, tj.TraceError) and issubclass(tj.UnsupportedError, TypeError)
    assert issubclass(tj.DtypeError, tj.TracejitError) and issubclass(tj.DtypeError, TypeError)
    assert issubclass(tj.ArgumentError, tj.TracejitError) and issubclass(tj.ArgumentError, TypeError)
    assert issubclass(tj.IndexOutOfBoundsError, tj.TraceError) and issubclass(tj.IndexOutOfBoundsError, IndexError)
    assert issubclass(tj.ScalarOverflowError, tj.TracejitError) and issubclass(tj.ScalarOverflowError, OverflowError)
    assert issubclass(tj.CompileError, tj.TracejitError)
    assert issubclass(tj.CompileTimeoutError, tj.CompileError) and issubclass(tj.CompileTimeoutError, TimeoutError)
    assert issubclass(tj.DeviceError, tj.TracejitError)


def test_integer_power_with_a_negative_exponent_raises_like_numpy(device):
    a = np.array([1, 2, 3], np.int32)
    f = tj.kernel(lambda x, y: x ** y)
    np.testing.assert_array_equal(f(a, a, device=device), a ** a)
    with pytest.raises(ValueError, match="negative integer powers"):
        a ** -a
    with pytest.raises(ValueError, match="negative integer powers"):
        f(a, -a, device=device)
    with pytest.raises(ValueError, match="negative integer powers"):   # on data, as NumPy: not while tracing
        tj.kernel(lambda x: x ** -1)(a, device=device)
    np.testing.assert_array_equal(tj.kernel(lambda x: x ** 3)(a, device=device), a ** 3)


def test_an_error_in_a_value_nothing_uses_is_raised_as_numpy_raises_it(device):
    """NumPy computes every step, so it raises for the unused power and the unused out-of-bounds gather
    below; tracejit keeps them as checks (README, "Semantics are NumPy's") and raises the same errors."""
    a, idx = np.array([1, 2, 3], np.int32), np.array([0, 5], np.int32)

    def body(x, n, idx):
        x ** n     # computed and never used
        x[idx]
        return x * 2

    f = tj.kernel(body)
    for n, i, error in ((-a, np.array([0], np.int32), ValueError), (a, idx, IndexError)):
        with pytest.raises(error):
            body(a, n, i)
        with pytest.raises(error):
            f(a, n, i, device=device)
    np.testing.assert_array_equal(f(a, a, np.array([0, 2], np.int32), device=device), a * 2)


def test_where_with_one_of_x_and_y_raises_numpys_error(device):
    # (np.where(cond) alone is np.nonzero: tests/test_data_sizes.py)
    with pytest.raises(ValueError, match="either both or neither of x and y should be given"):
        tj.kernel(lambda x: np.where(x > 1, x))(np.arange(3.0), device=device)


def test_a_dict_of_traced_values_is_refused_saying_what_a_kernel_returns(device):
    """(Nested tuples and lists of results keep their shape: test_api.py.)"""
    with pytest.raises(tj.TraceError, match="returns a dict of traced values.*nested tuples and lists"):
        tj.kernel(lambda x: ((x + 1, {"twice": x * 2}), x))(np.arange(3.0), device=device)


# ---- bad input that a dependency used to reject with its own exception (issue 15, item 4) ----

def test_ragged_list_argument_is_an_argument_error_and_a_value_error(device):
    f = tj.kernel(lambda x: x + 1, device=device)
    with pytest.raises(tj.ArgumentValueError, match="equal length") as info:
        f([[1.0, 2.0], [3.0]])
    assert isinstance(info.value, ValueError) and isinstance(info.value, tj.ArgumentError)


@pytest.mark.parametrize("value", [2**63, -2**63 - 1, 2**70])
@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_python_int_beyond_int64_is_an_overflow_error_on_every_device(device, dtype, value):
    f = tj.kernel(lambda x, s: x + s, device=device)
    f(np.zeros(3, dtype), 7)          # compiled and cached with a small int: the big one hits the plan
    with pytest.raises(tj.ScalarOverflowError) as info:
        f(np.zeros(3, dtype), value)
    assert isinstance(info.value, OverflowError) and str(value) in str(info.value)


def test_a_python_int_out_of_bounds_for_the_dtype_it_meets_raises_even_where_the_result_is_unused(device):
    # (found by test_fuzz_dtypes: the narrowing cast of a dead value left the graph, and its check with it)
    def f(x, s):
        unused = x + s   # NumPy raises here for s = 255 and an int8 x
        return -x

    kernel = tj.kernel(f, device=device)
    np.testing.assert_array_equal(np.asarray(kernel(np.ones(3, np.int8), 7)), -np.ones(3, np.int8))
    with pytest.raises(OverflowError, match="255"):
        kernel(np.ones(3, np.int8), 255)
    with pytest.raises(OverflowError):
        f(np.ones(3, np.int8), 255)


def test_output_too_big_for_memory_is_a_tracejit_memory_error(device):
    f = tj.kernel(lambda x: np.broadcast_to(x, (2**40, 2**10)) + 1, device=device)
    with pytest.raises(tj.TracejitError) as info:
        f(np.zeros(2**10, np.float32))
    if device != "webgpu":            # webgpu refuses the index space (32-bit WGSL indices) before allocating
        assert isinstance(info.value, tj.OutOfMemoryError) and isinstance(info.value, MemoryError)
        assert "allocate" in str(info.value)


def test_an_array_beyond_webgpu_s_binding_limit_is_a_memory_error():
    if "webgpu" not in [d.name for d in tj.devices() if d.available]:
        pytest.skip("webgpu is not available here")
    dev = tj.device("webgpu")
    f = tj.kernel(lambda x: np.broadcast_to(x, (dev.max_binding // 4 + 1, 1)) + 1, device="webgpu")
    with pytest.raises(tj.OutOfMemoryError) as info:
        f(np.zeros(1, np.float32))
    assert isinstance(info.value, MemoryError) and "bind" in str(info.value)


def test_statistics_over_no_elements_warn_like_numpy(device):
    x = np.zeros((0, 3), np.float32)
    for fn in (lambda a: a.mean(axis=0), lambda a: a.var(axis=0), lambda a: np.std(a, axis=0, ddof=1)):
        with pytest.warns(RuntimeWarning):
            got = np.asarray(tj.kernel(fn)(x, device=device))
        with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
            expected = fn(x)
        np.testing.assert_array_equal(got, expected)
        assert got.dtype == expected.dtype


def test_trace_errors_name_the_users_file_even_when_its_path_says_numpy(tmp_path, monkeypatch):
    """The user's frame is told by its module, not by "numpy" in its path (kernels/heat_numpy.py)."""
    folder = tmp_path / "numpy_kernels"
    folder.mkdir()
    (folder / "heat_numpy.py").write_text(
        "import tracejit as tj\n\nclass Up(Exception):\n    pass\n\n@tj.kernel\ndef step(u):\n    if u.sum() > 0:\n"
        "        raise Up\n    return -u\n")
    monkeypatch.syspath_prepend(str(folder))
    import importlib
    module = importlib.import_module("heat_numpy")
    with pytest.raises(tj.TraceError) as caught:
        module.step(np.ones(4, np.float32))
    assert f"{folder / 'heat_numpy.py'}:8: " in str(caught.value)


def _squared_bound(x, t):
    c = t ** 2   # a Python float's arithmetic: float64
    return x < c


def test_a_64_bit_value_a_device_cannot_hold_is_named_by_the_line_that_makes_it(device):
    if device not in ("webgpu", "metal"):
        pytest.skip("a device without float64")
    line = _squared_bound.__code__.co_firstlineno + 1
    with pytest.raises(tj.DtypeError, match=rf"test_errors.py:{line}: this line makes a float64 value; float64 "):
        tj.kernel(_squared_bound)(np.ones(4, np.float32), 1.5, device=device)
    with pytest.raises(tj.DtypeError, match="its argument x is float64"):
        tj.kernel(lambda x: x + 1)(np.ones(3), device=device)
