"""f(*args, out=...) (issue 16 item 4): results written into the caller's arrays and returned in their
place, wrong shapes and dtypes refused naming both, and out= arrays that alias an argument the kernel
reads giving NumPy's answer (computed as if out were a fresh array)."""
from __future__ import annotations

import numpy as np
import pytest
from reference import assert_close, run_kernel

import tracejit as tj


def _out_like(device, shape, dtype, kind):
    """An output array: a NumPy array, or (kind "device") a tj.Array of the device."""
    host = np.full(shape, -1, dtype)
    return host if kind == "numpy" else tj.asarray(host, device=device)


def _host(a):
    return a.numpy() if isinstance(a, tj.Array) else a


@pytest.mark.parametrize("kind", ["numpy", "device"])
def test_results_go_into_out_and_out_is_returned(device, rng, kind):
    f = tj.kernel(lambda x, y: (x * 2 + y, (x - y).sum(axis=0)))
    x, y = rng.random((3, 5), np.float32), rng.random((3, 5), np.float32)
    a, b = _out_like(device, (3, 5), np.float32, kind), _out_like(device, (5,), np.float32, kind)
    got = run_kernel(f, x, y, out=(a, b), device=device)
    assert got[0] is a and got[1] is b
    assert_close(_host(a), x * 2 + y)
    assert_close(_host(b), (x - y).sum(axis=0))
    single = tj.kernel(lambda x: x + 1)
    c = _out_like(device, (3, 5), np.float32, kind)
    assert run_kernel(single, x, out=c, device=device) is c
    assert_close(_host(c), x + 1)
    assert run_kernel(single, x, out=(c,), device=device) is c   # a tuple of one, as ufuncs accept


def test_none_in_an_out_tuple_allocates_that_result(device, rng):
    f = tj.kernel(lambda x: (x + 1, x * 3))
    x = rng.random(4, np.float32)
    b = np.zeros(4, np.float32)
    first, second = run_kernel(f, x, out=(None, b), device=device)
    assert second is b
    assert_close(_host(first), x + 1)
    assert_close(b, x * 3)


def test_out_aliasing_an_argument_gives_numpys_answer(device):
    elementwise = tj.kernel(lambda x, y: x * 2 + y)
    reversed_ = tj.kernel(lambda x: x[::-1] + x * 10)
    rows = tj.kernel(lambda x: x - x.mean(axis=1, keepdims=True))
    shifted = tj.kernel(lambda x: x[:-1] * 2)
    x = np.arange(6, dtype=np.float32)
    expected = x * 2 + 1
    assert run_kernel(elementwise, x, np.ones(6, np.float32), out=x, device=device) is x   # read and written in place
    assert_close(x, expected)
    x = np.arange(6, dtype=np.float32)
    run_kernel(reversed_, x, out=x, device=device)     # reads elements it also writes: staged
    assert_close(x, np.arange(6, dtype=np.float32)[::-1] + np.arange(6, dtype=np.float32) * 10)
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    want = m - m.mean(axis=1, keepdims=True)
    run_kernel(rows, m, out=m, device=device)
    assert_close(m, want)
    y = np.arange(6, dtype=np.float32)
    run_kernel(shifted, y, out=y[1:], device=device)    # out overlaps the argument, shifted by one
    assert_close(y, np.array([0, 0, 2, 4, 6, 8], np.float32))


def test_out_aliasing_a_device_array_argument(device):
    if device == "numba":
        pytest.skip("tj.Arrays on numba are NumPy arrays: covered above")
    f = tj.kernel(lambda x: x[::-1] * 2 + x)
    g = tj.kernel(lambda x: x * 3)
    host = np.arange(5, dtype=np.float32)
    a = tj.asarray(host, device=device)
    assert run_kernel(f, a, out=a, device=device) is a
    assert_close(a.numpy(), host[::-1] * 2 + host)
    run_kernel(g, a, out=a, device=device)
    assert_close(a.numpy(), (host[::-1] * 2 + host) * 3)


def test_a_non_contiguous_out_is_written_through_its_strides(device, rng):
    f = tj.kernel(lambda x: x * 2)
    x = rng.random((3, 4), np.float32)
    base = np.zeros((4, 6), np.float32)
    run_kernel(f, x, out=base[::-1, :4:].T.T[:3], device=device)
    expected = np.zeros((4, 6), np.float32)
    expected[::-1, :4][:3] = x * 2
    assert_close(base, expected)


def test_wrong_out_arrays_are_argument_errors_naming_both(device):
    f = tj.kernel(lambda x: x + 1)
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(tj.ArgumentError, match=r"shape \(3, 2\) and dtype float32; the result has shape \(2, 3\)"):
        f(x, out=np.zeros((3, 2), np.float32), device=device)
    with pytest.raises(tj.ArgumentError, match="dtype float64; the result has shape \\(2, 3\\) and dtype float32"):
        f(x, out=np.zeros((2, 3), np.float64), device=device)
    with pytest.raises(tj.ArgumentError, match="returns 1 value"):
        f(x, out=(np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32)), device=device)
    with pytest.raises(tj.ArgumentError, match="numpy array or tj.Array"):
        f(x, out=[[0.0] * 3] * 2, device=device)
    ro = np.zeros((2, 3), np.float32)
    ro.flags.writeable = False
    with pytest.raises(tj.AssignmentError, match="read-only"):
        f(x, out=ro, device=device)


def test_out_of_another_device_is_refused():
    devices = [d.name for d in tj.devices() if d.available and d.name != "numba"]
    if not devices:
        pytest.skip("needs a second device")
    f = tj.kernel(lambda x: x + 1)
    with pytest.raises(tj.ArgumentError, match="tj.Array on"):
        f(np.zeros(3, np.float32), out=tj.asarray(np.zeros(3, np.float32), device=devices[0]), device="numba")


def test_a_parameter_named_out_stays_the_functions_own():
    def body(x, out):
        out[...] = x * 2   # the function's own argument, written as NumPy would write it
        return out.sum()
    x, o = np.arange(3.0), np.zeros(3)
    assert tj.kernel(body)(x, out=o) == 6.0
    np.testing.assert_array_equal(o, [0.0, 2.0, 4.0])


def test_staging_apis_and_capture_with_out():
    f = tj.kernel(lambda x: x * 2)
    x = np.ones(4, np.float32)
    assert "mul" in str(f.trace(x))
    assert len(f.lower(x).kernels) == 1
    with pytest.raises(tj.UnsupportedError, match="out="), tj.capture():
        f(x, out=np.zeros(4, np.float32))
    jf = tj.jit(lambda a: f(a, out=np.zeros(4, np.float32)))
    with pytest.raises(tj.UnsupportedError, match="out="):
        jf(x)


def test_an_out_that_the_function_also_assigns_into_ends_with_the_result(device):
    def body(x):
        x[0] = 5
        return x * 2
    x = np.arange(4, dtype=np.float32)
    run_kernel(tj.kernel(body), x, out=x, device=device)   # x is written, then the result goes into out = x
    assert_close(x, np.array([10, 2, 4, 6], np.float32))
