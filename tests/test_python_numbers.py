"""Python-number arguments the code needs as numbers (issue 46, item 2): a loop count, a shape, a count, a slice
bound, int()/float(), an `if`: the kernel is specialised on their values (a new value traces again), with no
static= needed; where a number is only arithmetic it stays an argument of the compiled code."""
from __future__ import annotations

import logging

import numpy as np
import pytest

import tracejit as tj
from reference import assert_close, run_kernel


def steps(TSTEPS, A, B):   # npbench's jacobi_1d: the loop count first, arrays updated in place
    for t in range(1, TSTEPS):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])


def made(x, n, m, lo, hi):   # shapes, counts and bounds from int and float arguments
    z = np.zeros((n, m), dtype=x.dtype) + np.eye(n, m, dtype=x.dtype)
    return z * x[:n, :m] + np.linspace(lo, hi, m).astype(x.dtype) + x[n - 1, 0] * int(m) + float(lo)


def branchy(x, n):
    if n > 2:   # an `if` on a Python number
        return x[: n // 2].sum(axis=0) * n
    return x[0] * 2


def reshaped(x, N, C):
    return np.reshape(x, (N, C)).mean(axis=1)


def test_a_loop_count_argument_runs_the_procedure_as_numpy_does(device, rng):
    kernel = tj.kernel(steps)
    for count in (5, 8):
        a, b = rng.standard_normal(40).astype(np.float32), rng.standard_normal(40).astype(np.float32)
        a2, b2 = a.copy(), b.copy()
        assert run_kernel(kernel, count, a, b, device=device) is None
        steps(count, a2, b2)
        assert_close(a, a2)
        assert_close(b, b2)


def test_shapes_counts_and_bounds_from_number_arguments_match_numpy(device, rng):
    x = rng.standard_normal((10, 10)).astype(np.float32)
    kernel = tj.kernel(made)
    for n, m, lo, hi in ((3, 4, 0.5, 2.0), (5, 2, -1.0, 1.0)):
        assert_close(run_kernel(kernel, x, n, m, lo, hi, device=device), made(x, n, m, lo, hi))


def test_an_if_on_a_number_argument_takes_numpys_branch(device, rng):
    x = rng.standard_normal((8, 3)).astype(np.float32)
    kernel = tj.kernel(branchy)
    for n in (6, 1, 4):
        assert_close(run_kernel(kernel, x, n, device=device), branchy(x, n))


def test_reshape_to_number_arguments(device, rng):
    x = rng.standard_normal(24).astype(np.float32)
    kernel = tj.kernel(reshaped)
    for N, C in ((4, 6), (3, 8)):
        assert_close(run_kernel(kernel, x, N, C, device=device), reshaped(x, N, C))


def test_a_new_value_traces_again_and_the_same_value_does_not():
    kernel = tj.kernel(branchy)
    x = np.ones((8, 3), np.float32)
    kernel(x, 6)
    kernel(x, 6)
    assert kernel.cache_info()["traces"] == 2   # the first trace found n needed, the second made the plan
    kernel(x, 4)
    assert kernel.cache_info()["traces"] == 3
    kernel(x, 6)
    assert kernel.cache_info()["traces"] == 3   # a value seen before: its plan


def test_a_number_used_only_in_arithmetic_stays_an_argument_of_the_code():
    kernel = tj.kernel(lambda x, a: x * a + 1)
    x = np.arange(6, dtype=np.float32)
    for a in (2.0, 3.0, -1.5):
        assert_close(kernel(x, a), x * np.float32(a) + 1)
    assert kernel.cache_info()["traces"] == 1


def test_debug_output_says_which_argument_was_specialised_and_why(caplog):
    kernel = tj.kernel(steps)
    a, b = np.ones(10, np.float32), np.ones(10, np.float32)
    tj.set_debug(1)
    try:
        with caplog.at_level(logging.DEBUG, logger="tracejit"):
            kernel(3, a, b)
    finally:
        tj.set_debug(0)
    assert any("specialised on the value of TSTEPS" in r.getMessage() and "range bound" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_a_number_read_from_an_array_is_still_refused_with_advice():
    kernel = tj.kernel(lambda x: np.zeros(int(x[0])))
    with pytest.raises(tj.TraceError, match="int"):
        kernel(np.array([3.0]))


def test_a_number_among_star_args_used_as_a_count_asks_for_a_named_parameter():
    def f(x, *counts):
        return x[: counts[0]]
    with pytest.raises(tj.TraceError, match="named parameter"):
        tj.kernel(f)(np.arange(5.0), 2)


def test_a_specialised_kernel_still_captures_and_lowers(rng):
    kernel = tj.kernel(branchy)
    x = rng.standard_normal((8, 3)).astype(np.float32)
    assert kernel.lower(x, 5).kernels
    assert str(kernel.trace(x, 5)).count(" = input ") == 1   # traced with n a constant: x is its only input
    with tj.capture() as g:
        y = kernel(x, 5)
    assert_close(np.asarray(y), branchy(x, 5))
    g.replay()


WEAK_EXPRESSIONS = {
    "square": lambda u, s: u / s**2,
    "cube": lambda u, s: u * s**3,
    "sqrt_power": lambda u, s: u + s**0.5,
    "negative": lambda u, s: u * -s,
    "abs": lambda u, s: u - abs(s),
    "product": lambda u, s: u * (s * s + 1),
    "divided": lambda u, s: u / (s / 3),
    "int_power": lambda u, s: u * 2**3 + s,
}


@pytest.mark.parametrize("name", list(WEAK_EXPRESSIONS))
def test_arithmetic_on_a_number_argument_stays_weak_beside_float32(device, name):
    """A Python number's square, cube, root, negation... is still a Python number to NumPy (NEP 50): beside a
    float32 array the result is float32 (a pow rewritten as products once made it float64)."""
    f = WEAK_EXPRESSIONS[name]
    u = np.linspace(1, 2, 7, dtype=np.float32)
    got = run_kernel(tj.kernel(f), u, 0.75, device=device)
    want = f(u, 0.75)
    assert np.asarray(got).dtype == want.dtype == np.float32
    assert_close(np.asarray(got), want)
