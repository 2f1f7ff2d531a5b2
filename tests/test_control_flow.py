"""tj.cond, tj.fori_loop and tj.while_loop (JAX's signatures) inside kernels on every device, and outside."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from reference import assert_close, run_kernel


def relax(u, steps):   # a time-step loop through fori_loop, its count a Python-number argument
    def body(i, v):
        return 0.5 * v + 0.25 * (np.roll(v, 1) + np.roll(v, -1))
    return tj.fori_loop(0, steps, body, u)


def relax_numpy(u, steps):
    for _ in range(steps):
        u = 0.5 * u + 0.25 * (np.roll(u, 1) + np.roll(u, -1))
    return u


def halve_until(x, limit):   # a while_loop whose condition is on Python numbers carried with the array
    def keep_going(state):
        n, _ = state
        return n < limit

    def body(state):
        n, v = state
        return n + 1, v * 0.5
    return tj.while_loop(keep_going, body, (0, x))[1]


def signed(x, y):   # a predicate read from the arrays: both branches, selected
    return tj.cond(x.sum() > y.sum(), lambda a, b: (a - b, a * 2), lambda a, b: (b - a, b * 2), x, y)


def signed_numpy(x, y):
    return (x - y, x * 2) if x.sum() > y.sum() else (y - x, y * 2)


def test_fori_loop_runs_a_time_step_loop_as_numpy_does(device, rng):
    u = rng.standard_normal(32).astype(np.float32)
    kernel = tj.kernel(relax)
    for steps in (3, 7):
        assert_close(run_kernel(kernel, u, steps, device=device), relax_numpy(u, steps))


def test_while_loop_on_python_numbers(device, rng):
    x = rng.standard_normal((4, 5)).astype(np.float32)
    assert_close(run_kernel(tj.kernel(halve_until), x, 3, device=device), x * np.float32(0.125))


def test_cond_on_a_value_read_from_arrays_selects_both_branches_results(device, rng):
    kernel = tj.kernel(signed)
    for _ in range(3):
        x, y = rng.standard_normal(6).astype(np.float32), rng.standard_normal(6).astype(np.float32)
        got = run_kernel(kernel, x, y, device=device)
        for g, e in zip(got, signed_numpy(x, y)):
            assert_close(g, e)
    assert kernel.cache_info()["traces"] == 1   # the data decides when it runs, not when it is traced


def test_cond_on_a_python_number_runs_one_branch(rng):
    calls = []

    def f(x, flag):
        return tj.cond(flag, lambda v: calls.append("yes") or v + 1, lambda v: calls.append("no") or v - 1, x)
    x = rng.standard_normal(4)
    assert_close(tj.kernel(f)(x, 1), x + 1)
    assert "no" not in calls


def test_the_building_blocks_work_outside_a_kernel_on_numpy_values():
    x = np.arange(4.0)
    assert_close(tj.fori_loop(0, 3, lambda i, v: v + i, x), x + 3)
    assert tj.while_loop(lambda n: n < 5, lambda n: n + 2, 0) == 6
    assert_close(tj.cond(np.float64(1.0) > 0, lambda v: v * 2, lambda v: v, x), x * 2)


def test_loop_bounds_and_conditions_read_from_arrays_run_as_compiled_loops(device):
    """fori_loop and while_loop go through the loops compiled as loops (numpy/loops.py): bounds and conditions
    read from arrays are read when the kernel runs."""
    x = np.ones(3, np.float32)
    kernel = tj.kernel(lambda x: tj.fori_loop(0, x.sum().astype(np.int32), lambda i, v: v + 1, x))
    np.testing.assert_allclose(np.asarray(run_kernel(kernel, x, device=device)), x + 3)
    kernel = tj.kernel(lambda x: tj.while_loop(lambda v: v.sum() < 10, lambda v: v * 2, x))
    np.testing.assert_allclose(np.asarray(run_kernel(kernel, x, device=device)), x * 4)


def test_cond_branches_must_agree_and_not_assign():
    with pytest.raises(tj.ShapeError, match="match in shape and dtype"):
        tj.kernel(lambda x: tj.cond(x.sum() > 0, lambda v: v, lambda v: v[:2], x))(np.ones(3))

    def assigns(x):
        def yes(v):
            v[0] = 1.0
            return v
        return tj.cond(x.sum() > 0, yes, lambda v: v, x)
    with pytest.raises(tj.UnsupportedError, match="assigned into an operand"):
        tj.kernel(assigns)(np.ones(3))


def edit_distance(a, b):   # dynamic programming written the Numba way, with Python's min
    n, m = len(a), len(b)
    D = np.zeros((n + 1, m + 1))
    D[:, 0] = np.arange(n + 1)
    D[0, :] = np.arange(m + 1)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            D[i, j] = min(D[i - 1, j] + 1, D[i, j - 1] + 1, D[i - 1, j - 1] + (a[i - 1] != b[j - 1]))
    return D[n, m]


def test_pythons_min_of_traced_values_runs_a_dynamic_programming_table(device, rng):
    a, b = rng.integers(0, 3, 5), rng.integers(0, 3, 6)
    assert_close(run_kernel(tj.kernel(edit_distance), a, b, device=device), edit_distance(a, b))


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 0, 1), (1, 2, 0)])
def test_pythons_min_and_max_keep_pythons_answer_with_nan(device, order):
    x = np.array([0.5, 2.0, np.nan], np.float32)
    i, j, k = order

    def f(x):
        return min(x[i], x[j], x[k]), max(x[i], x[j]), max([x[k], x[i]]), min(x[j], 1.0)
    for got, want in zip(run_kernel(tj.kernel(f), x, device=device), f(x)):
        assert_close(got, np.float32(want))


ELEMENTS = {"nan inside": [1.0, np.nan, 3.0, -2.0], "nan first": [np.nan, 1.0, 5.0], "zeros": [0.0, -0.0, -1.0],
            "zeros reversed": [-0.0, 0.0], "all nan": [np.nan, np.nan], "ints": [3, 1, 3, -4], "bools": [True, False]}


@pytest.mark.parametrize("values", ELEMENTS.values(), ids=ELEMENTS)
def test_pythons_min_and_max_of_a_traced_array_iterate_its_elements_as_python(device, values):
    """max(x) compares elements as Python iterates them: NaN never replaces a number, a NaN first is the answer,
    and the first of equal zeros is the one kept (its sign)."""
    dtype = {"f": np.float32 if device in ("webgpu", "metal") else np.float64, "i": np.int32, "b": np.bool_}[
        np.asarray(values).dtype.kind]
    x = np.array(values, dtype)

    def f(x):
        return max(x), min(x), max(abs(x)), min(x[1:])
    for got, want in zip(run_kernel(tj.kernel(f), x, device=device), f(x)):
        got = np.asarray(got)
        assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True), (got, want)
        assert np.signbit(got) == np.signbit(want)


def test_pythons_max_of_an_empty_traced_array_raises_pythons_error():
    with pytest.raises(ValueError, match=r"max\(\) iterable argument is empty"):
        tj.kernel(lambda x: max(x[:0]))(np.ones(3))
    assert tj.kernel(lambda x: max(x[:0], default=-1.0))(np.ones(3)) == -1.0


def test_min_with_a_key_or_of_plain_numbers_is_pythons_own():
    assert tj.kernel(lambda x, n: x * min(3, 4, key=lambda v: -v) + min([n, 2]))(np.ones(2), 1)[0] == 5.0


def signs(x, n):
    """Conditional expressions: on a value read from the array (both sides, selected), on a number argument
    (Python decides), nested."""
    s = x.sum()
    return (x * 2 if s > 0 else -x) + (1 if n > 2 else 2) + (0.5 if x[0] > 0 else (0.25 if x[1] > 0 else 0.0))


def test_conditional_expressions_on_array_values_select_as_numpy_decides(device, rng):
    kernel = tj.kernel(signs)
    for _ in range(4):
        x = rng.standard_normal(5).astype(np.float32)
        for n in (1, 3):
            assert_close(run_kernel(kernel, x, n, device=device), signs(x, n))


def test_a_conditional_expression_decided_in_python_computes_one_side_only():
    def f(x, n):
        return x[n] if n < 3 else x[0] * 10   # x[n] would be out of bounds for n = 5
    assert_close(tj.kernel(f)(np.arange(4.0), 5), f(np.arange(4.0), 5))


def test_a_rewritten_function_keeps_its_closure_and_its_line_numbers():
    scale = 3.0

    def f(x):
        return x * scale if x.sum() > 0 else -x

    def g(x):
        y = x * scale if x.sum() > 0 else -x
        return y + (0.0, 1.0)[int(x[0])]   # this line is named in the error (a Python tuple's index)
    for x in (np.ones(2), -np.ones(2)):
        assert_close(tj.kernel(f)(x), f(x))
    line = g.__code__.co_firstlineno + 2
    with pytest.raises(tj.TraceError, match=rf"test_control_flow.py:{line}: "):
        tj.kernel(g)(np.ones(2))


def branchy(x, n):
    """`if` statements that bind names: on values read from the array (both branches, selected, nested), and on
    a number argument (Python decides)."""
    if x.sum() > 0:
        y = x * 2
        scale = 1.0
    else:
        y = -x
        if x[0] > 0:
            scale = 2.0
        else:
            scale = 3.0
    if n > 2:
        y = y + 1
    return y * scale


def test_if_statements_on_array_values_select_as_numpy_decides(device, rng):
    kernel = tj.kernel(branchy)
    for _ in range(5):
        x = rng.standard_normal(4).astype(np.float32)
        for n in (1, 3):
            assert_close(run_kernel(kernel, x, n, device=device), branchy(x, n))


def test_a_name_bound_in_one_branch_of_an_array_if_is_an_error_only_where_used():
    def unused(x):
        if x.sum() > 0:
            extra = x * 2   # never read: the kernel runs as NumPy does
        return x + 1

    def used(x):
        if x.sum() > 0:
            extra = x * 2
        return extra

    assert_close(tj.kernel(unused)(np.ones(3)), np.ones(3) + 1)
    with pytest.raises(tj.TraceError, match="`extra` is bound in only one branch"):
        tj.kernel(used)(np.ones(3))


def test_an_if_that_stores_into_an_array_runs_both_branches_guarded(device, rng):
    def stores(x):
        if x.sum() > 0:
            x[0] = 1.0   # changes x only where the test holds
        else:
            x[1:] += 2.0
        return x

    for sign in (1, -1):
        x = (rng.random(3) * sign).astype(np.float32)
        expected = stores(x.copy())
        got = x.copy()
        np.testing.assert_allclose(np.asarray(run_kernel(tj.kernel(stores), got, device=device)), expected)
        np.testing.assert_allclose(got, expected)


def early_return(x):   # an `if` on an array value that returns, then the rest of the function
    if x.sum() > 0:
        return x * 2
    y = -x
    return y + 1


def safe_ratio(a, b):   # a helper's guard: the classic early return
    if b == 0:
        return 0.0
    return a / b


def ratios(x, y):
    out = np.zeros_like(x)
    for i in range(x.shape[0]):
        out[i] = safe_ratio(x[i], y[i])
    return out


def nested_returns(x, t):   # returns in nested ifs, one on a Python number, a fall off the end in a procedure
    if t > 2:
        if x.max() > 0.5:
            return x - 1
        elif x.min() < 0.1:
            return x + 1
    s = x.sum()
    if not s > 3:
        return x * s
    return x / s


def early_procedure(u, steps):   # returns early with nothing; otherwise updates u in place
    if u.max() > 10:
        return
    for _ in range(steps):
        u[1:-1] = 0.5 * (u[2:] + u[:-2])


@pytest.mark.parametrize("program", [early_return, ratios, nested_returns, early_procedure])
def test_an_if_on_array_values_that_returns_early_computes_both_sides_and_selects(device, rng, program):
    dt = np.float32 if device in ("webgpu", "metal") else np.float64
    x = rng.random(7).astype(dt)
    if program is early_return:
        cases = [(x,), (-x,)]
    elif program is ratios:
        y = rng.random(7).astype(dt)
        y[2] = 0
        cases = [(x, y)]
    elif program is nested_returns:
        cases = [(x, 3), (x * 0.4, 3), (x * 0.4 + 0.2, 3), (x, 1), (x * 0.1, 1)]
    else:
        cases = [(x, 4), (x * 20, 4)]
    for args in cases:
        ours, theirs = [a.copy() if isinstance(a, np.ndarray) else a for a in args], list(args)
        theirs = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        try:
            got = run_kernel(tj.kernel(program), *ours, device=device)
        except tj.DtypeError:   # (the loop's Python-int index: int64, which webgpu and metal lack)
            assert device in ("webgpu", "metal") and program is ratios
            return
        expected = program(*theirs)
        if expected is None:
            assert got is None
        else:
            np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-6)
        np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6)


def test_an_early_return_whose_sides_differ_in_shape_is_refused_on_array_values():
    def differs(x):
        if x.sum() > 0:
            return x[:2]
        return x

    with pytest.raises(tj.TraceError, match="would depend on the data"):
        tj.kernel(differs)(np.ones(3))


def test_a_return_inside_a_loop_with_a_loop_inside_it_is_left_as_python_runs_it():
    # (a return in a loop without one inside it becomes a break: test_element_loops.py)
    def search(x):
        for i in range(x.shape[0]):
            for j in range(x.shape[1]):
                if x[i, j] > 0.5:
                    return i
        return -1

    with pytest.raises(tj.TraceError):
        tj.kernel(search)(np.linspace(0, 1, 12).reshape(3, 4))


def test_conditionals_whose_sides_differ_in_shape_or_dtype_are_refused_on_array_values():
    """NumPy's `y if c else a` is y or a itself: with a data-dependent c and sides of other shapes (or dtypes)
    the result's shape would depend on the data; a select would broadcast and give the wrong shape."""
    def shapes(x, y):
        a = x[0] * 2
        return y if x[0] > y[1] else a

    def dtypes(x, k):
        return x if x.sum() > 0 else k   # float32 array or an int64 array

    x, y = np.ones(4, np.float32), np.zeros(4, np.float32)
    with pytest.raises(tj.TraceError, match=r"differ \(float32\[4\] and float32\[\]\)"):
        tj.kernel(shapes)(x, y)
    with pytest.raises(tj.TraceError, match="would depend on the data"):
        tj.kernel(dtypes)(x, np.arange(4))

    def number(x):
        return x if x.sum() > 0 else 0.5   # NumPy gives the array or the number itself

    with pytest.raises(tj.TraceError, match="a Python float"):
        tj.kernel(number)(x)


def test_pythons_min_of_arrays_is_refused_as_numpy_refuses_it():
    def f(x):
        return min(x, 0.5)

    with pytest.raises(ValueError, match="truth value of an array"):
        f(np.ones(3))
    with pytest.raises(ValueError, match="truth value of an array"):
        tj.kernel(f)(np.ones(3))


# --- assert --------------------------------------------------------------------------------------------------------

def normalized(x):   # an assert on a value read from the array: a check when the kernel runs
    s = np.sqrt((x * x).sum())
    assert s != 0, "x is all zeros"
    return x / s


def reciprocal_steps(x):   # an assert in a loop compiled as a loop, without a message
    out = np.zeros_like(x)
    for i in range(1, x.shape[0]):
        d = x[i] - x[i - 1]
        assert d != 0
        out[i] = 1.0 / d
    return out


def scaled(x, n):   # an assert on an int argument: Python's, while tracing
    assert n > 0, "n must be positive"
    return x * n


def _assert_helper(x):
    assert x.min() >= 0, "negative values"
    return np.sqrt(x)


def calls_a_helper_with_an_assert(x):
    return _assert_helper(x) + 1


@pytest.mark.parametrize("program, good, bad", [
    (normalized, np.arange(1.0, 6.0), np.zeros(4)),
    (reciprocal_steps, np.arange(1.0, 6.0), np.array([1.0, 2.0, 2.0, 3.0])),
    (calls_a_helper_with_an_assert, np.arange(4.0), np.array([1.0, -2.0, 3.0])),
])
def test_an_assert_on_values_read_from_arrays_raises_numpys_assertion_error_when_the_kernel_runs(
        device, program, good, bad):
    dt = np.float32 if device in ("webgpu", "metal") else np.float64
    good, bad = good.astype(dt), bad.astype(dt)
    if device in ("webgpu", "metal") and program is reciprocal_steps:
        pytest.skip("the loop's index is a Python int: int64")
    assert_close(np.asarray(run_kernel(tj.kernel(program), good, device=device)), program(good))
    with pytest.raises(AssertionError) as theirs:
        program(bad)
    with pytest.raises(AssertionError) as ours:
        run_kernel(tj.kernel(program), bad, device=device)
    assert str(ours.value) == _message(theirs.value)


def _message(e: AssertionError) -> str:
    """The assert's own message (pytest adds the failing expression to asserts in test modules)."""
    text = str(e)
    return "" if text.startswith("assert ") else text.split("\nassert ")[0]


def test_an_assert_on_an_int_argument_is_pythons_while_tracing():
    assert_close(tj.kernel(scaled)(np.arange(3.0), 2, device="numba"), scaled(np.arange(3.0), 2))
    with pytest.raises(AssertionError, match="n must be positive"):
        tj.kernel(scaled)(np.arange(3.0), 0, device="numba")


def bools(x, flag):   # bool() and `not` of values read from arrays, and Python's arithmetic on bools
    b = bool(x[0] > 0.5)
    c = not (x.sum() > 2)
    count = b + c + bool(x[1]) + flag
    if not b:
        count = count * 10
    return count, -b, ~c, b & c, x * bool(x[2] - x[2])


def test_bool_and_not_of_values_read_from_arrays_are_pythons(device, rng):
    dt = np.float32 if device in ("webgpu", "metal") else np.float64
    for x in (rng.random(4).astype(dt), np.array([0.9, 0.0, np.nan, 1.0], dt), np.array([0.1, 0, 3, 4], dt)):
        for flag in (True, False):
            try:
                got = run_kernel(tj.kernel(bools), x.copy(), flag, device=device)
            except tj.DtypeError:   # (Python ints: int64, which webgpu and metal lack)
                assert device in ("webgpu", "metal")
                return
            for g, e in zip(got, bools(x.copy(), flag)):
                np.testing.assert_array_equal(np.asarray(g), e)


def test_bool_of_an_array_with_more_than_one_element_is_numpys_error():
    with pytest.raises(ValueError, match="more than one element is ambiguous"):
        tj.kernel(lambda x: x * bool(x[:2]))(np.ones(3))


def validated(x, n):   # input validation as written: raise a built-in exception on a value read from arrays
    if x.min() < 0:
        raise ValueError("negative entries")
    if n > 5:   # (on a Python number: Python's raise, while tracing)
        raise RuntimeError
    for i in range(x.shape[0]):
        if x[i] > 100:
            raise OverflowError(f"entry {i} too large")
    return np.sqrt(x)


def test_an_if_on_array_values_that_raises_a_builtin_exception_raises_it_when_the_kernel_runs(device, rng):
    dt = np.float32 if device in ("webgpu", "metal") else np.float64
    x = rng.random(6).astype(dt)
    try:
        got = run_kernel(tj.kernel(validated), x, 2, device=device)
    except tj.DtypeError:   # (the loop's Python-int index: int64, which webgpu and metal lack)
        assert device in ("webgpu", "metal")
        return
    np.testing.assert_allclose(np.asarray(got), validated(x, 2), rtol=1e-6)
    bad = x.copy()
    bad[2] = -1
    with pytest.raises(ValueError, match="negative entries"):
        run_kernel(tj.kernel(validated), bad, 2, device=device)
    with pytest.raises(RuntimeError):
        run_kernel(tj.kernel(validated), x, 9, device=device)
    big = x.copy()
    big[4] = 1000
    with pytest.raises(OverflowError, match="too large"):
        run_kernel(tj.kernel(validated), big, 2, device=device)


def test_a_function_whose_source_cannot_be_read_says_so_where_its_loop_fails():
    """A function made by exec (or typed at a `python` prompt) has no source tracejit can read: its loops run as
    Python's, and the error a loop bound or `if` on a traced value raises says why and what to do."""
    namespace: dict = {"np": np}
    exec("def g(x, m):\n    s = 0.0\n    for i in range(m[0]):\n        s += x[i]\n    return s\n", namespace)
    with pytest.raises(tj.TraceError, match=r"g's source, <string>:1, could not be read.*define it in a file"):
        tj.kernel(namespace["g"])(np.arange(5.0), np.array([3]))
