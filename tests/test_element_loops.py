"""Loops over elements, the Numba idiom (ir/element_loops.py): loop nests that read and write single elements run
as one compiled function on the numba device (and as loops of kernels elsewhere). Each program is written as a
Numba user writes it, run on every device, and compared with NumPy (plain Python loops) on the same arguments."""
from __future__ import annotations

import logging
import math
import sys
from unittest import mock
from pathlib import Path

import numba
import numpy as np
import pytest

import tracejit as tj
from tracejit.runtime.numba import element_loops as numba_element_loops
from reference import assert_close, run_kernel

sys.path.insert(0, str(Path(__file__).parent))
from corpus.loops import create_fractal  # noqa: E402
from corpus.numbers_and_loops import levenshtein  # noqa: E402
from test_loops import _loop_messages, check, float_dtype  # noqa: E402


def floyd_warshall(path):   # all pairs' shortest paths, as written for numba.njit
    n = path.shape[0]
    for k in range(n):
        for i in range(n):
            for j in range(n):
                path[i, j] = min(path[i, j], path[i, k] + path[k, j])


def matmul_loops(A, B):   # the textbook triple loop into a preallocated result
    n, m = A.shape
    p = B.shape[1]
    C = np.zeros((n, p), A.dtype)
    for i in range(n):
        for j in range(p):
            acc = 0.0
            for k in range(m):
                acc += A[i, k] * B[k, j]
            C[i, j] = acc
    return C


def running_max(x):   # an `if` on an element, a carried value and a store
    out = np.empty_like(x)
    best = x[0]
    for i in range(x.shape[0]):
        if x[i] > best:
            best = x[i]
        out[i] = best
    return out


def insertion_sort(a):   # a `while` inside a `for`, its test on an element
    for i in range(1, a.shape[0]):
        key = a[i]
        j = i - 1
        while j >= 0 and a[j] > key:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = key
    return a


def sieve(n):   # a bool table, inner bounds and step from the outer index
    is_prime = np.ones(n, dtype=np.bool_)
    is_prime[0] = False
    is_prime[1] = False
    for i in range(2, n):
        if is_prime[i]:
            for j in range(i * i, n, i):
                is_prime[j] = False
    return is_prime


def first_above(x, t):   # a break, the index after it
    found = -1
    for i in range(x.shape[0]):
        if x[i] > t:
            found = i
            break
    return found


def wrap_around(x):   # negative indices count from the end
    n = x.shape[0]
    out = np.zeros_like(x)
    for i in range(n):
        out[i] = x[i - 1] + x[i - n]
    return out


def conv2d_loops(image, kernel):   # a 2-D convolution (valid), four nested loops
    H, W = image.shape
    kh, kw = kernel.shape
    out = np.zeros((H - kh + 1, W - kw + 1), image.dtype)
    for i in range(H - kh + 1):
        for j in range(W - kw + 1):
            s = 0.0
            for a in range(kh):
                for b in range(kw):
                    s += image[i + a, j + b] * kernel[a, b]
            out[i, j] = s
    return out


def escape_times(cr, ci, maxiter):   # Mandelbrot's escape time per point, with real arithmetic and a break
    out = np.zeros(cr.shape[0], np.int32)
    for p in range(cr.shape[0]):
        zr = 0.0
        zi = 0.0
        for _k in range(maxiter):
            zr, zi = zr * zr - zi * zi + cr[p], 2 * zr * zi + ci[p]
            if zr * zr + zi * zi > 4.0:
                break
            out[p] += 1
    return out


def smooth_in_place(u, steps):   # a procedure over the caller's array: element updates of an argument
    n = u.shape[0]
    for _t in range(steps):
        for i in range(1, n - 1):
            u[i] = 0.5 * u[i] + 0.25 * (u[i - 1] + u[i + 1])


def int_accumulate(x):   # int32 elements, wrapping as NumPy's int32 does
    total = np.int32(0)
    for i in range(x.shape[0]):
        total = total * np.int32(31) + x[i]
    return total


def first_index_above(x, t):   # a `return` inside the loop, another after it
    for i in range(x.shape[0]):
        if x[i] > t:
            return i
    return -1


def squares_of_complex(re, im):   # complex() of elements
    out = np.empty(re.shape[0], re.dtype)
    for k in range(re.shape[0]):
        z = complex(re[k], im[k])
        out[k] = (z * z).imag
    return out


def columns_by_columns(x, w):   # out[:, f] += ...: a store into the column the outer loop's index picks
    out = np.zeros((x.shape[0], w.shape[1]), x.dtype)
    for f in range(w.shape[1]):
        for c in range(w.shape[0]):
            out[:, f] += w[c, f] * x[:, c]
    return out


def out_of_bounds(x):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i + 1]
    return s


def test_an_edit_distance_table_as_written_for_numba_matches_numpy(device, rng):
    if device in ("webgpu", "metal"):
        pytest.skip("the table is float64")
    check(levenshtein, (rng.integers(0, 4, 9), rng.integers(0, 4, 11)), device)


def test_floyd_warshall_over_elements_matches_numpy(device, rng):
    check(floyd_warshall, (rng.integers(1, 50, (7, 7)).astype(float_dtype(device)),), device)


def test_floyd_warshall_with_negative_cycles_matches_numpy(device, rng):
    # path[i, k] changes in the loop over j where j == k and path[k, k] < 0: read again after that step
    check(floyd_warshall, (rng.integers(-6, 40, (9, 9)).astype(float_dtype(device)),), device)


def test_a_store_into_the_column_an_outer_index_picks_matches_numpy(device, rng):
    dt = float_dtype(device)
    check(columns_by_columns, (rng.random((7, 6)).astype(dt), rng.random((6, 5)).astype(dt)), device)


def test_a_store_into_the_column_an_outer_index_picks_runs_over_that_column_alone(caplog, rng):
    # (its mask, places == arange(5)[f], is computed where the inner loop reads it: not an array of the whole
    # `out` made each step and tested element by element, 5x the work here and 16x in a convolution layer's)
    with caplog.at_level(logging.DEBUG - 3, logger="tracejit"):
        run_kernel(tj.kernel(columns_by_columns), rng.random((7, 6)), rng.random((6, 5)), device="numba")
    (source,) = [r.getMessage() for r in caplog.records if "def tj_element_loop(" in r.getMessage()]
    assert "np.empty(" not in source, source


def test_a_read_the_inner_loop_does_not_move_is_made_once_per_part_of_the_loop(caplog, rng):
    # (codegen/cpu/element_loops.py's hoist: path[i, k] read before the loop over j and again after j == k; the
    # fuzzer test_reads_beside_a_store_that_moves_with_the_index_match_numpy checks the values)
    with caplog.at_level(logging.DEBUG - 3, logger="tracejit"):
        check(floyd_warshall, (rng.integers(-6, 40, (8, 8)).astype(np.float64),), "numba")
    (source,) = [r.getMessage() for r in caplog.records if "def tj_element_loop(" in r.getMessage()]
    part = source.index("for part")
    assert source.count("= c0[i2 * 8 + i1]") == 1 and source.index("= c0[i2 * 8 + i1]") > part, source
    # the place of the cut is clamped by conditional expressions: bounded by Numba's min(max(...)), the loop over
    # j ran 25% slower (120 x 120)
    assert "min(" not in source and "max(" not in source, source


def test_a_triple_loop_matrix_product_matches_numpy(device, rng):
    dt = float_dtype(device)
    check(matmul_loops, (rng.random((5, 4)).astype(dt), rng.random((4, 6)).astype(dt)), device)


def test_a_running_maximum_matches_numpy(device, rng):
    check(running_max, (rng.standard_normal(20).astype(float_dtype(device)),), device)


def test_an_insertion_sort_with_a_while_over_elements_matches_numpy(device, rng):
    if device == "webgpu":
        pytest.skip("the while's index is a Python int: int64 on webgpu")
    check(insertion_sort, (rng.standard_normal(12).astype(float_dtype(device)),), device)


def test_a_sieve_with_bounds_and_step_from_the_outer_index_matches_numpy(device):
    if device in ("webgpu", "metal"):
        pytest.skip("the bounds are Python ints: int64")
    check(sieve, (40,), device)


def test_a_break_over_elements_matches_numpy(device, rng):
    x = rng.random(30).astype(float_dtype(device))
    if device in ("webgpu", "metal"):
        pytest.skip("the index found is a Python int: int64")
    for t in (0.5, 0.99, 2.0):
        check(first_above, (x, t), device)


def test_negative_indices_count_from_the_end(device, rng):
    check(wrap_around, (rng.random(9).astype(float_dtype(device)),), device)


def test_a_2d_convolution_written_with_loops_matches_numpy(device, rng):
    dt = float_dtype(device)
    check(conv2d_loops, (rng.random((8, 9)).astype(dt), rng.random((3, 2)).astype(dt)), device)


def test_escape_times_with_a_break_match_numpy(device, rng):
    if device in ("webgpu", "metal"):
        pytest.skip("Python floats: float64")
    cr, ci = rng.uniform(-2, 1, 25), rng.uniform(-1.2, 1.2, 25)
    check(escape_times, (cr, ci, 30), device)


def test_a_procedure_updating_its_argument_element_by_element_matches_numpy(device, rng):
    check(smooth_in_place, (rng.random(15).astype(float_dtype(device)), 6), device)


def test_int32_arithmetic_over_elements_wraps_as_numpy(device, rng):
    check(int_accumulate, (rng.integers(-2**31, 2**31 - 1, 50).astype(np.int32),), device)


def test_an_index_outside_its_axis_raises_numpys_index_error(device, rng):
    x = rng.random(6).astype(float_dtype(device))
    with pytest.raises(IndexError) as theirs:
        out_of_bounds(x)
    with pytest.raises(IndexError) as ours:
        run_kernel(tj.kernel(out_of_bounds), x, device=device)
    assert str(ours.value) == str(theirs.value)


def test_loops_over_elements_run_as_one_function_on_numba(caplog, rng):
    """The whole nest is one function (said under TRACEJIT_DEBUG=1); a loop with whole-array work is not."""
    def whole_arrays(u, steps):
        for _t in range(steps):
            u[1:-1] = 0.5 * (u[2:] + u[:-2])
        return u

    with caplog.at_level(logging.DEBUG, logger="tracejit"):
        run_kernel(tj.kernel(floyd_warshall), rng.random((6, 6)), device="numba")
        run_kernel(tj.kernel(whole_arrays), rng.random(10), 7, device="numba")
    said = [r.getMessage() for r in caplog.records]
    assert sum("is a loop over elements" in m for m in said) == 1, said
    assert any("not a loop over elements (it stores into a region" in m for m in said), said


def test_a_return_inside_a_loop_stops_it_with_its_value(device, rng):
    x = rng.random(20).astype(float_dtype(device))
    for t in (0.5, 2.0):   # found at some step, and never: the return after the loop
        check(first_index_above, (x, t), device)


def test_complex_of_elements_is_computed_in_the_kernel(device, rng):
    x, y = rng.standard_normal((2, 9)).astype(float_dtype(device))
    check(squares_of_complex, (x, y), device)


def test_numbas_mandelbrot_example_runs_as_one_function_on_numba(caplog):
    """Numba's documentation example, unchanged: `complex(x, y)` of a pixel's coordinates, a complex `z` carried by
    the loop over iterations, and a `return i` inside it. It ran step by step (a 1000 x 1500 image: minutes of
    tracing); now the three loops are one function."""
    args = (-2.0, 1.0, -1.0, 1.0, np.zeros((20, 30), np.uint8), 20)
    with caplog.at_level(logging.DEBUG, logger="tracejit"):
        image = tj.kernel(create_fractal)(*args, device="numba")
    said = [r.getMessage() for r in caplog.records]
    assert sum("is a loop over elements" in m for m in said) == 1, said
    assert not any("step by step" in m for m in said), said
    np.testing.assert_array_equal(image, create_fractal(*args[:4], np.zeros((20, 30), np.uint8), 20))


def test_a_600_by_600_table_matches_a_row_by_row_reference(rng):
    """360,000 element steps (one launch per step would take minutes: the nest is one function)."""
    a, b = rng.integers(0, 4, 600), rng.integers(0, 4, 600)
    assert tj.kernel(levenshtein)(a, b, device="numba") == _edit_distance_reference(a, b)


def _edit_distance_reference(a, b) -> float:
    """The same table, row by row with NumPy (the element loops in Python would take seconds)."""
    prev = np.arange(len(b) + 1, dtype=np.float64)
    for i in range(1, len(a) + 1):
        cur = np.empty_like(prev)
        cur[0] = i
        sub = prev[:-1] + (a[i - 1] != b)
        best = np.minimum(sub, prev[1:] + 1)
        for j in range(1, len(b) + 1):  # the left neighbour's dependency: a short scalar pass
            cur[j] = min(best[j - 1], cur[j - 1] + 1)
        prev = cur
    return float(prev[-1])


def test_stores_into_an_argument_are_written_back_and_values_match(rng):
    u = rng.random(12)
    expected = u.copy()
    smooth_in_place(expected, 3)
    assert tj.kernel(smooth_in_place)(u, 3, device="numba") is None
    assert_close(u, expected, rtol=1e-12)


def twins(x):   # b = a.copy() is a's value under a second name: each changed on its own
    n = x.shape[0]
    a = np.zeros(n, x.dtype)
    for i in range(n):
        a[i] = x[i]
    b = a.copy()
    for i in range(n):
        a[i] = a[i] * 2
        b[i] = b[i] + 1
    return a, b


def twins_inside(x):   # the same inside an outer loop
    n = x.shape[0]
    a = np.zeros(n, x.dtype)
    for _ in range(5):
        b = a.copy()
        for i in range(n):
            a[i] += x[i]
            b[i] -= x[i]
        a[0] = b[0]
    return a


def test_a_copy_under_a_second_name_is_changed_on_its_own(device, rng):
    x = rng.random(7).astype(float_dtype(device))
    check(twins, (x,), device)
    check(twins_inside, (x,), device)


def window_floor(idx, radius):   # numpy-benchmarks' growcut helpers: an `if` that returns, on the loop's index
    if radius > idx:
        return 0
    else:
        return idx - radius


def local_energy(x, radius):   # a helper with a branch and a loop of its own; math on values read from arrays
    n = x.shape[0]
    out = np.zeros(n, x.dtype)
    for i in range(n):
        s = 0.0
        for j in range(window_floor(i, radius), min(i + radius + 1, n)):
            s += x[j] * x[j]
        out[i] = math.sqrt(s) + math.exp(-abs(x[i]))
    return out


def helper_loop(x):
    return _prefix_sums(x) * 2


def _prefix_sums(x):   # a loop in a helper: compiled as the kernel's own loops are
    out = np.empty_like(x)
    total = 0.0
    for i in range(x.shape[0]):
        total += x[i]
        out[i] = total
    return out


def test_helpers_with_branches_that_return_and_math_functions_match_numpy(device, rng):
    if device in ("webgpu", "metal"):
        pytest.skip("math's results are Python floats: float64")
    check(local_energy, (rng.standard_normal(11), 2), device)


def test_a_loop_in_a_helper_function_compiles_as_a_loop(device, rng, caplog):
    with caplog.at_level(logging.DEBUG, logger="tracejit"):
        check(helper_loop, (rng.random(40).astype(float_dtype(device)),), device)
    assert any("compiled as a loop" in r.getMessage() for r in caplog.records)


def float_and_int(x, k):   # float() and int() of values read from arrays, as Python numbers
    s = float(x.sum())
    n = int(k[0])
    total = 0.0
    for i in range(n):
        total += x[i] / s
    return x / s + total


def int_of_a_float(x):
    return x * int(x.max())


def bin_counts(x, dx, nbins):   # Numba-style binning: an index computed with int() from a float read from x
    counts = np.zeros(nbins, np.int64)
    for i in range(x.shape[0]):
        j = int(x[i] / dx)
        if j < nbins:
            counts[j] += 1
    return counts


def roundings(x):   # math.floor, ceil and trunc of floats read from x: Python ints
    out = np.zeros(x.shape[0], np.int64)
    for i in range(x.shape[0]):
        out[i] = math.floor(x[i]) + math.ceil(x[i]) * 10 + math.trunc(x[i]) * 100
    return out


def test_float_and_int_of_values_read_from_arrays_are_python_numbers(device, rng):
    if device in ("webgpu", "metal"):
        pytest.skip("Python's numbers are 64-bit")
    check(float_and_int, (rng.random(7).astype(np.float32), np.array([5], np.int32)), device)
    check(int_of_a_float, (rng.random(3) * 10,), device)
    check(bin_counts, (rng.random(40) * 10, 0.7, 12), device)
    check(roundings, (rng.standard_normal(15) * 5,), device)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("program", [int_of_a_float, bin_counts])
def test_int_of_nan_or_infinity_raises_pythons_error_when_the_kernel_runs(device, rng, program, bad):
    if device in ("webgpu", "metal"):
        pytest.skip("Python's numbers are 64-bit")
    x = rng.random(9) * 10
    x[4] = bad
    args = (x, 0.7, 12) if program is bin_counts else (x,)
    try:
        program(*args)
    except (ValueError, OverflowError) as e:
        theirs = e
    else:
        assert program is int_of_a_float and bad == -np.inf  # (the maximum is finite)
        check(program, args, device)
        return
    with pytest.raises(type(theirs)) as ours:
        run_kernel(tj.kernel(program), *args, device=device)
    assert str(ours.value) == str(theirs)


def test_int_of_a_float_beyond_int64_is_a_clear_overflow_error(rng):
    """Python makes a larger int; tracejit's Python ints are int64, so it says so rather than wrap."""
    x = rng.random(5)
    x[2] = 1e30
    with pytest.raises(OverflowError, match="beyond the int64 range"):
        tj.kernel(int_of_a_float)(x, device="numba")


def test_the_loop_nests_source_is_printed_under_debug_level_4(caplog, rng):
    with caplog.at_level(logging.DEBUG - 3, logger="tracejit"):
        run_kernel(tj.kernel(matmul_loops), rng.random((6, 5)), rng.random((5, 7)), device="numba")
    assert any("def tj_element_loop(" in r.getMessage() for r in caplog.records)


# --- many elements at once: slices the index bounds, rows and columns it picks ------------------------------------
# A loop over elements may also store, and sum, many elements per step: the slices and rows it picks become loops
# inside the compiled function, narrowed to the places the index bounds (ir/element_loops.py, slabs).

def forward_substitution(L, b):   # a dot product over the slice the index bounds (npbench trisolv's form)
    x = np.zeros_like(b)
    for i in range(b.shape[0]):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]
    return x


def rows_and_columns(A, x):   # rows and columns the index picks: stored, read, a row read in reverse
    for i in range(A.shape[0]):
        A[i, :] += A[i, ::-1] * 0.25            # (reads the row it writes at other places: through a copy)
        A[:, (i + 1) % A.shape[1]] -= x[:A.shape[0]] * A[i, 0]
        A[i, 1:] = x[2:A.shape[1] + 1]
        if x[i] > 0.5:
            A[:, 0] = 1.0
    return A


def tails_and_sums(x, y, A):   # x[i:] stored, sums and maxima over slices, rows and columns
    s = 0.0
    for i in range(x.shape[0]):
        x[i:] = x[i:] * 0.5 + y[i]
        s += x[:i].sum() + A[i % A.shape[0]].max() - A[:, i % A.shape[1]].min()
        A[(i + 1) % A.shape[0], i % A.shape[1]:] = A[i % A.shape[0], i % A.shape[1]:] * 0.5
    return x, s


def column_out_of_bounds(A, k):
    for i in range(A.shape[0]):
        A[:, k + i] = 0.0
    return A


def test_a_dot_product_over_a_slice_the_index_bounds_matches_numpy(device, rng):
    dt = float_dtype(device)
    L = (np.tril(rng.random((9, 9))) + 4 * np.eye(9)).astype(dt)
    check(forward_substitution, (L, rng.random(9).astype(dt)), device)


def test_rows_and_columns_the_index_picks_match_numpy(device, rng):
    dt = float_dtype(device)
    check(rows_and_columns, (rng.standard_normal((5, 6)).astype(dt), rng.random(8).astype(dt)), device)


def test_stores_and_reductions_over_slices_match_numpy(device, rng):
    dt = float_dtype(device)
    x, y, A = rng.standard_normal(7).astype(dt), rng.standard_normal(7).astype(dt), rng.random((4, 5)).astype(dt)
    if device in ("webgpu", "metal"):
        pytest.skip("s is a Python float: float64")
    check(tails_and_sums, (x, y, A), device)


def test_a_column_outside_its_axis_raises_numpys_index_error(device, rng):
    A = rng.random((3, 4)).astype(float_dtype(device))
    if device in ("webgpu", "metal"):
        pytest.skip("the index is a Python int: int64")
    with pytest.raises(IndexError) as theirs:
        column_out_of_bounds(A.copy(), 2)
    with pytest.raises(IndexError) as ours:
        run_kernel(tj.kernel(column_out_of_bounds), A.copy(), 2, device=device)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("name", ["trisolv", "lu", "gramschmidt", "cholesky", "ludcmp", "symm"])
def test_npbench_decompositions_run_as_one_function_on_numba(name, caplog, rng):
    """npbench's NumPy versions of the decompositions and triangular solves: their loops, slices bounded by the
    index and all, run as one compiled function (one line under TRACEJIT_DEBUG=1 says so), at a size where
    launching their kernels per step was slower than NumPy."""
    from corpus import loops

    n = 40
    spd = loops._spd(rng, n, np.float64)
    args = {
        "trisolv": (np.tril(spd), np.zeros(n), rng.random(n)),
        "lu": (spd,),
        "gramschmidt": (rng.random((n + 5, n)) + np.eye(n + 5, n),),
        "cholesky": (spd,),
        "ludcmp": (spd, rng.random(n)),
        "symm": (1.5, 1.2, rng.random((n, n - 3)), spd, rng.random((n, n - 3))),
    }[name]
    with caplog.at_level(logging.DEBUG, logger="tracejit"):
        check(getattr(loops, name), args, "numba", rtol=1e-9)
    said = [r.getMessage() for r in caplog.records]
    assert any("is a loop over elements" in m for m in said), said
    assert not any("once per step" in m for m in said), said


def mixed_nest(x, y, A):   # an inner loop over elements, a row store, a loop of four known steps (unrolled)
    for i in range(x.shape[0]):
        for j in range(i):
            A[j % 5, (j * 2) % 6] += x[j % 8]
        A[i % 5, :] = A[(i + 1) % 5, :] * 0.5
        for j in range(0, x.shape[0], 2):
            x[j % 8] = y[(j + 3) % 8] * 0.5 + x[j % 8]
    return x + y * 2


def staged_nest(x, y, A):   # the same with a stencil's store: its steps run as kernels, the inner loop as one function
    for i in range(x.shape[0]):
        for j in range(i):
            A[j % 5, (j * 2) % 6] += x[j % 8]
        A[i % 5, :] = A[(i + 1) % 5, :] * 0.5
        y[1:] = y[1:] * 0.5
    return x + y * 2


def sparse_rows(indptr, indices, data, x):   # y[i] += ... over a row's nonzeros: y[i] kept in a register
    y = np.zeros(indptr.shape[0] - 1, data.dtype)
    for i in range(indptr.shape[0] - 1):
        for k in range(indptr[i], indptr[i + 1]):
            y[i] += data[k] * x[indices[k]]
    return y


def test_a_nest_with_a_row_store_and_an_unrolled_loop_matches_numpy(device, rng):
    """Found by the element-loop fuzzer: the unrolled loop's stores (constant places: element stores), and where
    the steps run as kernels, a weak int array one part of the step computes and the next reads (range-checked as
    if it were a Python int argument: a crash)."""
    dt = float_dtype(device)
    args = (rng.standard_normal(8).astype(dt), rng.standard_normal(8).astype(dt), rng.standard_normal((5, 6)).astype(dt))
    check(mixed_nest, args, device)
    check(staged_nest, args, device)


def test_an_element_kept_in_a_register_through_an_inner_loop_is_stored_and_faults_as_numpy(device, rng):
    dt = float_dtype(device)
    if device in ("webgpu", "metal"):
        pytest.skip("the row pointers are int64")
    indptr = np.array([0, 2, 2, 5, 6], np.int64)
    indices = np.array([0, 3, 1, 2, 3, 0], np.int64)
    data, x = rng.random(6).astype(dt), rng.random(4).astype(dt)
    check(sparse_rows, (indptr, indices, data, x), device)
    bad = indices.copy()
    bad[3] = 7
    with pytest.raises(IndexError) as theirs:
        sparse_rows(indptr, bad, data, x)
    with pytest.raises(IndexError) as ours:
        run_kernel(tj.kernel(sparse_rows), indptr, bad, data, x, device=device)
    assert str(ours.value) == str(theirs.value)


def two_row_stores(x, A, n):   # found by the element-loop fuzzer (the per-step form crashed in lowering)
    for i in range(n):
        A[i % 5, :] = A[(i + 1) % 5, :] * 0.5
        for j in range(i):
            A[j % 5, (j * 2) % 6] += x[j % 8]
        A[i % 5, :] = A[(i + 1) % 5, :] * 0.5
    return A


def test_loops_over_elements_also_run_as_kernels_per_step(monkeypatch, rng):
    """What runs where a loop over elements cannot (no Numba on a GPU-API device; the test suite renders these
    programs for every device): the body's kernels once per step. An index a kernel reads from memory (a row
    number hoisted out of the inner loop) was recomputed from what it was made of, which the kernel does not
    read: a KeyError in lowering."""
    from tracejit.ir import element_loops

    def refuse(loop):
        raise element_loops.NotElementLoop("this test runs the body's kernels")

    monkeypatch.setattr(element_loops, "plan", refuse)
    check(two_row_stores, (rng.standard_normal(8), rng.standard_normal((5, 6)), 5), "numba")


# --- independent steps in parts on threads (ir/loop_dependence.py; runtime/numba/element_loops.py) ----------------

def row_scan(A, B):   # each step reads and writes row i only: independent steps
    n, m = A.shape
    for i in range(n):
        for j in range(1, m):
            A[i, j] = max(A[i, j], A[i, j - 1]) + B[i, j]


def row_scan_prange(A, B):   # the same, as written for numba.njit(parallel=True)
    n, m = A.shape
    for i in numba.prange(n):
        for j in range(1, m):
            A[i, j] = max(A[i, j], A[i, j - 1]) + B[i, j]


def row_from_the_one_before(A):   # a step reads the row the step before wrote: in order, prange or not
    n, m = A.shape
    for i in numba.prange(1, n):
        for j in range(m):
            A[i, j] = A[i - 1, j] * 0.5 + A[i, j]


def picked_columns(A, idx):   # an index read from data, checked in each part
    for i in range(A.shape[0]):
        A[i, 0] = A[i, idx[i]] * 2.0


@pytest.mark.parametrize("program", [row_scan, row_scan_prange, row_from_the_one_before])
def test_steps_run_in_parts_on_threads_only_where_they_are_independent(caplog, rng, program):
    A, B = rng.standard_normal((64, 40)), rng.standard_normal((64, 40))
    args = (A, B) if program is not row_from_the_one_before else (A,)
    with mock.patch.object(numba_element_loops, "PARALLEL_MIN_WORK", 0), caplog.at_level(logging.DEBUG, "tracejit"):
        check(program, args, "numba")
    in_parts = any("are independent: they run in parts" in r.getMessage() for r in caplog.records)
    assert in_parts == (program is not row_from_the_one_before)


def test_the_first_failing_step_in_order_raises_when_steps_run_in_parts(rng):
    # rows 3 and 7 pick a column outside A: NumPy stops at row 3; so must the parts (row 7's in another part)
    A = rng.standard_normal((10, 4))
    idx = np.zeros(10, np.int64)
    idx[3], idx[7] = 50, 70
    threads = mock.patch.object(numba_element_loops.numba_threads, "thread_count", lambda: 3)   # (rows 0-2, 3-5, 6-9)
    with mock.patch.object(numba_element_loops, "PARALLEL_MIN_WORK", 0), threads:
        with pytest.raises(IndexError, match="index 50 is out of bounds"):
            tj.kernel(picked_columns)(A.copy(), idx, device="numba")
    with pytest.raises(IndexError, match="index 50 is out of bounds"):
        picked_columns(A.copy(), idx)


# --- stores of many elements through n-d views, and their steps in parts (codegen/cpu/element_loops.py) ------------
# A slab's loops address each array through its n-d view, the innermost loop along its contiguous axis; a loop whose
# slabs store only at its own index on one axis (out[:, f] += ...) has independent steps.

def channel_mix(x, w):   # out[:, f] += w[f, c] * x[:, c]: a 1x1 convolution, rank-3 slabs
    out = np.zeros((x.shape[0], w.shape[0]) + x.shape[2:], x.dtype)
    for f in range(w.shape[0]):
        for c in range(w.shape[1]):
            out[:, f] += w[f, c] * x[:, c]
    return out


def from_the_end(x, w):   # negative picks: the filters stored from the last, the channels read from the end
    C = x.shape[1]
    out = np.zeros((x.shape[0], w.shape[0]) + x.shape[2:], x.dtype)
    for f in range(w.shape[0]):
        for c in range(C):
            out[:, -1 - f] += w[f, c] * x[:, c - C]
    return out


def every_other(x, w):   # slices with steps: every other place stored, the channel read backwards
    out = np.zeros((x.shape[0], w.shape[0]) + x.shape[2:], x.dtype)
    for f in range(w.shape[0]):
        for c in range(w.shape[1]):
            out[:, f, ::2] += w[f, c] * x[:, c, ::-2]
    return out


def onto_itself(A):   # a store reading its own target at other places: the column reversed, the one before
    for f in range(1, A.shape[1]):
        A[:, f] += A[::-1, f] * 3 + A[:, f - 1]
    return A


def filter_out_of_bounds(x, w, k):
    out = np.zeros((x.shape[0], w.shape[0]) + x.shape[2:], x.dtype)
    for f in range(w.shape[0]):
        out[:, f + k] += w[f, 0] * x[:, 0]
    return out


def whole_sum_per_row(A):   # each step reads every row: steps that depend on each other
    for i in range(A.shape[0]):
        A[i, 0] = 1.0
        A[i, 1] = A.sum()
    return A


def _data(rng, shape, dt):
    if np.dtype(dt).kind == "f":
        return rng.standard_normal(shape).astype(dt)
    return rng.integers(-5, 6, shape).astype(dt)


def check_as_given(f, args, device):   # strided and transposed arguments passed as they are (check() copies them)
    expected = f(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    got = run_kernel(tj.kernel(f), *args, device=device)
    assert_close(got, expected, rtol=1e-4 if expected.dtype == np.float32 else None)


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("program", [channel_mix, from_the_end, every_other])
def test_slab_updates_of_several_ranks_and_dtypes_match_numpy(program, dt, rng):
    check(program, (_data(rng, (3, 4, 9), dt), _data(rng, (5, 4), dt)), "numba")
    check(program, (_data(rng, (2, 3, 4, 7), dt), _data(rng, (2, 3), dt)), "numba")   # (rank-4 slabs)


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("size", [3, 5])   # (3: the offsets' loops unrolled; 5: loops passing the filter's mask on)
def test_a_convolution_layer_runs_as_one_function_and_matches_numpy(dt, size, rng, caplog):
    from corpus.loops import conv2d

    args = (_data(rng, (2, 3, 9, 10), dt), _data(rng, (6, 3, size, size), dt), _data(rng, (6,), dt))
    with caplog.at_level(logging.DEBUG, logger="tracejit"):
        check(conv2d, args, "numba")
    said = [r.getMessage() for r in caplog.records]
    assert any("is a loop over elements" in m for m in said), said
    assert not any("failed to compile" in m for m in said), said


def test_slab_updates_match_numpy_on_every_device(device, rng):
    dt = float_dtype(device)
    check(channel_mix, (_data(rng, (3, 4, 9), dt), _data(rng, (5, 4), dt)), device)
    check(every_other, (_data(rng, (3, 4, 9), dt), _data(rng, (5, 4), dt)), device)


@pytest.mark.parametrize("dt", [np.float32, np.int64])
def test_slab_updates_of_strided_and_transposed_arguments_match_numpy(dt, rng):
    x = _data(rng, (3, 4, 18), dt)[:, :, ::2]   # (every other element: not contiguous)
    w = _data(rng, (4, 5), dt).T   # (transposed)
    for program in (channel_mix, from_the_end, every_other):
        check_as_given(program, (x, w), "numba")
    check_as_given(onto_itself, (np.asfortranarray(_data(rng, (6, 5), dt)),), "numba")


@pytest.mark.parametrize("dt", [np.float64, np.int32])
def test_a_slab_reading_its_own_target_elsewhere_matches_numpy(dt, rng, caplog):
    with mock.patch.object(numba_element_loops, "PARALLEL_MIN_WORK", 0), caplog.at_level(logging.DEBUG, "tracejit"):
        check(onto_itself, (_data(rng, (7, 6), dt),), "numba")
    assert not any("are independent" in r.getMessage() for r in caplog.records)


def test_a_slab_picking_outside_its_axis_raises_numpys_index_error(rng):
    x, w = rng.standard_normal((3, 2, 5)), rng.standard_normal((4, 2))
    with pytest.raises(IndexError) as theirs:
        filter_out_of_bounds(x, w, 2)
    with pytest.raises(IndexError) as ours:
        tj.kernel(filter_out_of_bounds)(x, w, 2, device="numba")
    assert str(ours.value) == str(theirs.value)


def test_steps_storing_slabs_at_their_own_index_run_in_parts_and_match_numpy(caplog, rng):
    from corpus.loops import conv2d

    args = (rng.standard_normal((4, 3, 12, 11)), rng.standard_normal((7, 3, 5, 5)), rng.standard_normal(7))
    threads = mock.patch.object(numba_element_loops.numba_threads, "thread_count", lambda: 3)
    with mock.patch.object(numba_element_loops, "PARALLEL_MIN_WORK", 0), threads:
        with caplog.at_level(logging.DEBUG, logger="tracejit"):
            check(conv2d, args, "numba", rtol=1e-9)
            check(channel_mix, (rng.standard_normal((3, 4, 9)), rng.standard_normal((5, 4))), "numba", rtol=1e-9)
    said = [r.getMessage() for r in caplog.records]
    assert sum("are independent: they run in parts" in m for m in said) == 2, said


def test_a_step_reading_every_row_is_not_independent(caplog, rng):
    with mock.patch.object(numba_element_loops, "PARALLEL_MIN_WORK", 0), caplog.at_level(logging.DEBUG, "tracejit"):
        check(whole_sum_per_row, (rng.standard_normal((40, 3)),), "numba", rtol=1e-9)
    assert not any("are independent" in r.getMessage() for r in caplog.records)


def row_in_a_middle_loop(A, B):   # the middle loop's A[i, c, ::-1] read where the inner loop reads it (no copy)
    n, m, _ = A.shape
    for i in range(n):
        for c in range(m):
            for j in range(m):
                B[i, c, j] = A[i, c, ::-1][j] * 0.5 + c
        A[i, 0, 0] = B[i, 0, 1] + A[i, -1, -1]
    return A, B


def next_row_in_a_middle_loop(A, B):   # the same reading the row the next step changes: steps in order
    n, m, _ = A.shape
    for i in range(n):
        for c in range(m):
            for j in range(m):
                B[i, c, j] = A[(i + 1) % n, c, ::-1][j] * 0.5 + c
        A[i, 0, 0] = B[i, 0, 1] + A[i, -1, -1]
    return A, B


@pytest.mark.parametrize("program", [row_in_a_middle_loop, next_row_in_a_middle_loop])
def test_rows_an_inner_loop_reads_where_they_are_match_numpy_in_parts_or_in_order(program, caplog, rng):
    A, B = rng.standard_normal((9, 6, 6)), np.zeros((9, 6, 6))
    with mock.patch.object(numba_element_loops, "PARALLEL_MIN_WORK", 0), caplog.at_level(logging.DEBUG, "tracejit"):
        check(program, (A, B), "numba", rtol=1e-12)
    said = [r.getMessage() for r in caplog.records]
    assert any("is a loop over elements" in m for m in said), said
    if program is next_row_in_a_middle_loop:
        assert not any("are independent" in m for m in said), said


def element_beside_a_row(A, x):   # an element kept in a register through the loop, and a row over it stored
    for _i in range(A.shape[0]):
        for k in range(x.shape[0]):
            A[0, 0] += x[k]
            A[k % 2, :] += x[k] * 0.5
    return A


def read_beside_a_row(A, x):   # an element read at a place the loop does not move, which its row store changes
    s = 0.0
    for _i in range(A.shape[0]):
        for k in range(x.shape[0]):
            y = A[0, 0]
            A[k % 2, :] = A[k % 2, :] * 0.5 + x[k] * y
            s += A[1, 2] + A[0, 0]
    return A, s


@pytest.mark.parametrize("program", [element_beside_a_row, read_beside_a_row])
def test_elements_kept_or_read_once_beside_row_stores_through_views_match_numpy(program, rng):
    check(program, (rng.standard_normal((5, 6)) * 0.1, rng.standard_normal(7) * 0.1), "numba", rtol=1e-12)


def consecutive_updates(x, w):   # updates of one column in a row: one loop nest stores those that read it in place
    out = np.zeros((x.shape[0], w.shape[0]) + x.shape[2:], x.dtype)
    for f in range(w.shape[0]):
        for c in range(w.shape[1]):
            out[:, f] += w[f, c] * x[:, c]
            out[:, f] -= out[:, f] // 4
            out[:, f] += out[::-1, f] * 3   # (reads other places of the column: through a copy)
            s = out[0, f, 0]   # (reads the column between two updates)
            out[:, f] += s
            out[:, f] *= 2
    return out


def picked_twice(x, p, q):   # two updates picking rows by index arrays (checked in the loops)
    out = np.zeros((p.shape[0], x.shape[1]), x.dtype)
    for f in range(x.shape[1]):
        out[:, f] += x[p, f]
        out[:, f] += x[q, f]
    return out


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int64])
def test_consecutive_slab_updates_of_one_column_match_numpy(dt, rng):
    check(consecutive_updates, (_data(rng, (3, 4, 9), dt), _data(rng, (5, 4), dt)), "numba")


def test_the_first_of_two_updates_to_pick_outside_its_axis_raises(rng):
    x = rng.standard_normal((4, 6))
    p, q = np.array([0, 1, 2, 3, 3, 9]), np.array([0, 7, 1, 2, 3, 3])   # (p fails at place 5, q at place 1)
    with pytest.raises(IndexError) as theirs:
        picked_twice(x, p, q)
    with pytest.raises(IndexError) as ours:
        tj.kernel(picked_twice)(x, p, q, device="numba")
    assert str(ours.value) == str(theirs.value)
    check(picked_twice, (x, p % 4, q % 4), "numba", rtol=1e-12)


def prefix_sums_and_dots(x, y, short, long, cols, out):   # sums and dots over the slice the index bounds; products
    for i in range(x.shape[0] + 1):
        out[0, i] = x[:i].sum()
        out[1, i] = x[:i] @ y[:i]
        out[2, i] = np.prod(short[i])
        out[3, i] = np.prod(long[i])
        out[4, i] = y[:i] @ cols[:i, 5]   # (a column: four accumulators, each step's loads overlapping)
        out[5, i] = np.prod(long[:, i % 12])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_sums_over_slices_of_every_length_match_numpy_and_add_in_order_below_8(dt, rng, caplog):
    """Sums and dots over slices of 0-40 elements run in vector lanes where the slice has 8 elements or more:
    within NumPy's own rounding of its pairwise sum there, and exactly NumPy's below 8, which adds in order."""
    n = 40
    x, y = rng.standard_normal(n).astype(dt), (0.5 + rng.random(n)).astype(dt)
    short, long = (0.5 + rng.random((n + 1, 5))).astype(dt), (0.5 + rng.random((n + 1, 12))).astype(dt)
    cols = rng.standard_normal((n, 7)).astype(dt)
    ours, theirs = np.zeros((6, n + 1), dt), np.zeros((6, n + 1), dt)
    with caplog.at_level(logging.DEBUG, logger="tracejit"):
        run_kernel(tj.kernel(prefix_sums_and_dots), x, y, short, long, cols, ours, device="numba")
    assert any("is a loop over elements" in r.getMessage() for r in caplog.records)
    prefix_sums_and_dots(x, y, short, long, cols, theirs)
    assert_close(ours, theirs, rtol=1e-5 if dt == np.float32 else 1e-13)
    np.testing.assert_array_equal(ours[0, :8], theirs[0, :8])
    np.testing.assert_array_equal(ours[2], theirs[2])
    for bad in (np.nan, np.inf):   # a NaN or an infinity anywhere in the slice reaches the result
        x2 = x.copy()
        x2[20] = bad
        got, want = np.zeros((6, n + 1), dt), np.zeros((6, n + 1), dt)
        run_kernel(tj.kernel(prefix_sums_and_dots), x2, y, short, long, cols, got, device="numba")
        prefix_sums_and_dots(x2, y, short, long, cols, want)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(np.isinf(got), np.isinf(want))


def windows_of_an_argument(x, w, steps):   # slices of an argument and of a transpose read each step, whole-array work
    acc = np.zeros_like(x[:, 1:-1])
    for t in range(steps):
        acc = acc * 0.5 + w[t % w.shape[0]] * (x[:, 2:] - x[:, :-2]) + x.T[1:-1, :].T * t
    return acc


def windows_of_an_outer_input(x, y):   # the inner loop reads slices of the outer loop's array, which it changes
    for k in range(x.shape[0]):
        for i in range(x.shape[1] - 2):
            y[k, i] = x[k, i:i + 3].sum() - x[: k + 1, i + 1].max()
        x = x * 0.5
    return y


def test_slices_of_arrays_in_memory_are_read_in_place_by_the_loop_and_match_numpy(device, rng):
    """A loop reads a slice of an argument (or of an input of the loop around it) where it lies, not from a copy
    made before the loop: the convolution's shifted windows cost no kernel before its loop."""
    dt = float_dtype(device)
    check(windows_of_an_argument, (rng.standard_normal((5, 12)).astype(dt), rng.standard_normal(3).astype(dt), 9),
          device)
    check(windows_of_an_outer_input, (rng.standard_normal((4, 11)).astype(dt), np.zeros((4, 9), dt)), device)


def test_a_convolutions_windows_are_not_copied_before_its_loop(rng):
    from corpus.loops import conv2d

    args = (rng.standard_normal((2, 3, 9, 10)), rng.standard_normal((6, 3, 3, 3)), rng.standard_normal(6))
    plan = tj.kernel(conv2d).lower(*args, device="numba")
    assert len(plan.kernels) == 0, [k.name for k in plan.kernels]   # (the windows were 9 copies, made by a kernel)
    check(conv2d, args, "numba")


# -- complex arrays and views written element by element (a complex array is carried as its parts' array; a write
# into z[i] writes into its real and imaginary views: assign.store places the view's test in the root) --

def complex_recurrence(x, y):   # a first-order filter, in place
    for i in range(1, x.shape[0]):
        x[i] = x[i - 1] * 0.5 + y[i]


def complex_squares(x):
    n = x.shape[0]
    out = np.zeros(n, x.dtype)
    for i in range(n):
        out[i] = x[i] * x[i] + 1j
    return out


def complex_outer_accumulate(a, w):
    n = a.shape[0]
    s = np.zeros((n, 3), a.dtype)
    for i in range(n):
        for j in range(3):
            s[i, j] += a[i] * w[j]
    return s


def normalize_large(z):   # a branch on an element's magnitude
    for i in range(z.shape[0]):
        if abs(z[i]) > 1.0:
            z[i] = z[i] / abs(z[i])


def real_part_filled(x):   # a write through the real part's view
    out = np.zeros(x.shape[0], np.complex128 if x.dtype == np.float64 else np.complex64)
    for i in range(x.shape[0]):
        out.real[i] = x[i] * 2
    return out


def column_by_elements(a):   # a write through a column's view of a real array
    col = a[:, 1]
    for i in range(a.shape[0]):
        col[i] = col[i] * 2.0 + i
    return a


def complex_accumulator(x):   # `s = 0j` then `s += ...`: Python rebinds a scalar, nothing is written in place
    s = 0j
    for t in range(x.shape[0]):
        s += x[t] * np.exp(-0.25j * t)
        s *= 0.5
    return s


def accumulator_from_an_element(x, z):   # z[0] is a scalar: `s +=` leaves z as it was
    s = z[0]
    for t in range(x.shape[0]):
        s += x[t]
    return s, z


def flip_imaginary_where_real_positive(z):   # a branch storing into a view's element: `z.imag[i] = ...`
    for i in range(z.shape[0]):
        if z.real[i] > 0:
            z.imag[i] = -z.imag[i]
    return z


def lower_triangle_through_the_transpose(a):   # `a.T[j, i] = ...` in a branch, reversed views read
    r = a[::-1]
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            if j > i:
                a.T[j, i] = r[i, j] * 0.5
    return a


COMPLEX_ELEMENT_PROGRAMS = [flip_imaginary_where_real_positive, lower_triangle_through_the_transpose, complex_recurrence, complex_squares, complex_outer_accumulate, normalize_large,
                            real_part_filled, column_by_elements, complex_accumulator, accumulator_from_an_element]


def _complex_element_arguments(program, device, rng):
    real = float_dtype(device)
    cdt = np.complex64 if real == np.float32 else np.complex128

    def z(*shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(cdt)
    return {complex_recurrence: lambda: (z(40), z(40)), complex_squares: lambda: (z(30),),
            complex_outer_accumulate: lambda: (z(12), z(3)), normalize_large: lambda: (z(50),),
            real_part_filled: lambda: (rng.standard_normal(25).astype(real),),
            column_by_elements: lambda: (rng.standard_normal((9, 4)).astype(real),),
            flip_imaginary_where_real_positive: lambda: (z(30),),
            lower_triangle_through_the_transpose: lambda: (rng.standard_normal((7, 7)).astype(real),),
            complex_accumulator: lambda: (z(30),), accumulator_from_an_element: lambda: (z(30), z(2))}[program]()


@pytest.mark.parametrize("program", COMPLEX_ELEMENT_PROGRAMS, ids=lambda p: p.__name__)
def test_complex_arrays_and_views_written_element_by_element_match_numpy(program, device, rng):
    check(program, _complex_element_arguments(program, device, rng), device)


@pytest.mark.parametrize("program", COMPLEX_ELEMENT_PROGRAMS, ids=lambda p: p.__name__)
def test_complex_arrays_and_views_written_element_by_element_are_one_function_on_numba(program, caplog, rng):
    """They were loops of kernels, each step writing every element of a part back (2,000 steps of
    complex_recurrence: 2.8 ms, now 0.05 ms), or traced step by step (a complex scalar's `s +=` wrote into
    parts made from Python's numbers: a 40-point DFT written with loops compiled for 26 s, now 0.3 s); each
    element written is now the one store it is (or, where every step is independent and whole-array code does
    the same, the loop became that: real_part_filled)."""
    said = _loop_messages(caplog, program, *_complex_element_arguments(program, "numba", rng))
    compiled = any("compiled as a loop" in m for m in said)
    assert not compiled or any("is a loop over elements" in m for m in said), said
    assert not any("runs its body's kernels" in m or "step by step" in m for m in said), said


# -- np.ndenumerate and nested loop targets (`for (i, j), v in np.ndenumerate(a)`, `for k, (a, b) in
# enumerate(zip(x, y))`): by position, as `for pos in np.ndindex(shape)` and enumerate() of arrays are --

def weighted_by_position(a):
    out = np.zeros_like(a)
    for (i, j), v in np.ndenumerate(a):
        out[i, j] = v * (i + j)
    return out


def sum_by_index(a):   # the index kept as a tuple
    s = 0.0
    for idx, v in np.ndenumerate(a):
        s += v * idx[0]
    return s


def products_with_positions(x, y):
    out = np.zeros_like(x)
    for k, (a, b) in enumerate(zip(x, y)):
        out[k] = a * b + k
    return out


def constant_table_enumerated(x):   # np.ndenumerate of a NumPy array: NumPy's own iterator, while tracing
    out = np.zeros_like(x)
    for (i,), w in np.ndenumerate(np.array([0.5, 1.5, 2.5])):
        out[i] = x[i] * w
    return out


ITERATION_PROGRAMS = [weighted_by_position, sum_by_index, products_with_positions, constant_table_enumerated]


def _iteration_arguments(program, device, rng):
    dt = float_dtype(device)
    return {weighted_by_position: lambda: (rng.random((30, 40)).astype(dt),),
            sum_by_index: lambda: (rng.random((20, 30)).astype(dt),),
            products_with_positions: lambda: (rng.random(300).astype(dt), rng.random(300).astype(dt)),
            constant_table_enumerated: lambda: (rng.random(5).astype(dt),)}[program]()


@pytest.mark.parametrize("program", ITERATION_PROGRAMS, ids=lambda p: p.__name__)
def test_ndenumerate_and_nested_loop_targets_match_numpy(program, device, rng):
    check(program, _iteration_arguments(program, device, rng), device)


@pytest.mark.parametrize("program", ITERATION_PROGRAMS[:3], ids=lambda p: p.__name__)
def test_ndenumerate_and_nested_loop_targets_are_one_function_on_numba(program, caplog, rng):
    """They were traced step by step (`(i, j), v`: 2,000 steps, 2.35 s) or refused (`enumerate(zip(x, y))` of 300
    elements: 'iterating over a traced value unrolls one step per row'; np.ndenumerate of a traced array: 'a traced
    value was converted to a NumPy array')."""
    said = _loop_messages(caplog, program, *_iteration_arguments(program, "numba", rng))
    assert any("is a loop over elements" in m for m in said), said


# -- rows read at a traced index and used element by element (`row = a[i]; row[j] /= s`, `px, py = pos[k]`): NumPy's
# row is a view of a; tracejit's is a copy read again from a, each write into it a write into a --

def normalize_rows(a):   # row = a[i]; row[j] /= s: a procedure, as a Numba user writes it
    for i in range(a.shape[0]):
        row = a[i]
        s = 0.0
        for j in range(a.shape[1]):
            s += row[j]
        for j in range(a.shape[1]):
            row[j] /= s


def cumulate_rows(a):   # two rows of the same array, one written
    for i in range(1, a.shape[0]):
        prev = a[i - 1]
        cur = a[i]
        for j in range(a.shape[1]):
            cur[j] += prev[j]


def permuted_rows(a, perm):   # a row picked by a value read from an array, into a row of a new array
    out = np.empty_like(a)
    for i in range(len(perm)):
        src = a[perm[i]]
        dst = out[i]
        for j in range(a.shape[1]):
            dst[j] = src[j] * 2
    return out


def swap_rows_in_place(a):   # two rows written through each other's values
    for i in range(a.shape[0] // 2):
        top = a[i]
        bottom = a[a.shape[0] - 1 - i]
        for j in range(a.shape[1]):
            tmp = top[j]
            top[j] = bottom[j]
            bottom[j] = tmp


def clip_planes(a):   # planes of a 3-D array, a branch on their elements, a `while` inside
    for i in range(a.shape[0]):
        plane = a[i]
        for j in range(a.shape[1]):
            m = 0
            while m < a.shape[2]:
                if plane[j, m] > 0.5:
                    plane[j, m] = 0.5
                else:
                    plane[j, m] += i
                m += 1


def scan_transposed_rows(a):   # rows of a transposed view
    t = a.T
    for i in range(t.shape[0]):
        r = t[i]
        for j in range(1, t.shape[1]):
            r[j] = r[j] + r[j - 1]


def view_seen_after_the_loop(a, k):   # writes into a show in the row read before them, after the loop
    row = a[k[0]]
    for j in range(a.shape[1]):
        a[k[0], j] = j * 1.5
    return row * 2


def potential_on_a_grid(grid, charges, positions):   # np.ndenumerate; a row of positions unpacked per charge
    for (i, j), _ in np.ndenumerate(grid):
        total = 0.0
        for q, (px, py) in zip(charges, positions):
            total += q / (np.sqrt((i - px) ** 2 + (j - py) ** 2) + 1e-3)
        grid[i, j] = total


def unpacked_rows(a, idx):   # x, y, z = a[idx[k]]
    out = np.zeros(len(idx), a.dtype)
    for k in range(len(idx)):
        x, y, z = a[idx[k]]
        out[k] = x * y - z
    return out


ROW_PROGRAMS = [normalize_rows, cumulate_rows, permuted_rows, swap_rows_in_place, clip_planes, scan_transposed_rows,
                view_seen_after_the_loop, potential_on_a_grid, unpacked_rows]


def _row_arguments(program, device, rng):
    dt = float_dtype(device)
    return {normalize_rows: lambda: (rng.random((30, 20)).astype(dt) + 0.5,),
            cumulate_rows: lambda: (rng.random((30, 20)).astype(dt),),
            permuted_rows: lambda: (rng.random((30, 20)).astype(dt), rng.permutation(30)),
            swap_rows_in_place: lambda: (rng.random((31, 20)).astype(dt),),
            clip_planes: lambda: (rng.random((4, 6, 7)).astype(dt),),
            scan_transposed_rows: lambda: (rng.random((9, 12)).astype(dt),),
            view_seen_after_the_loop: lambda: (rng.random((6, 5)).astype(dt), np.array([3])),
            potential_on_a_grid: lambda: (np.zeros((12, 10), dt), rng.random(15).astype(dt),
                                          (rng.random((15, 2)) * 10).astype(dt)),
            unpacked_rows: lambda: (rng.random((50, 3)).astype(dt), rng.integers(0, 50, 80))}[program]()


@pytest.mark.parametrize("program", ROW_PROGRAMS, ids=lambda p: p.__name__)
def test_rows_read_at_a_traced_index_and_used_element_by_element_match_numpy(program, device, rng):
    check(program, _row_arguments(program, device, rng), device)


@pytest.mark.parametrize("program", [p for p in ROW_PROGRAMS if p is not view_seen_after_the_loop],
                         ids=lambda p: p.__name__)
def test_rows_read_at_a_traced_index_are_one_function_on_numba(program, caplog, rng):
    """They ran their kernels once per step: 15 ms for normalize_rows on 60 x 40, now 0.05 ms; the potential on a
    40 x 30 grid 169 ms, now 0.16 ms. Each inner loop carried its row as an array of its own (a copy per step), and
    an element of a row read at a traced index (`px, py = positions[k]`) was not an element read."""
    said = _loop_messages(caplog, program, *_row_arguments(program, "numba", rng))
    assert any("is a loop over elements" in m for m in said), said
    assert not any("runs its body's kernels" in m or "step by step" in m for m in said), said


# -- partial pivoting and mixed truth tests: np.argmax of a slice the loop's index bounds, a row swap through a list
# of indices (x[[k, p]] = x[[p, k]]), `if grid[i, j] and s > 3` of an int and a bool --

def lu_partial_pivoting(A):   # Doolittle with partial pivoting, as a textbook writes it for numba.njit
    n = A.shape[0]
    piv = np.arange(n)
    for k in range(n - 1):
        p = np.argmax(np.abs(A[k:, k])) + k
        if p != k:
            A[[k, p]] = A[[p, k]]
            piv[[k, p]] = piv[[p, k]]
        for i in range(k + 1, n):
            A[i, k] /= A[k, k]
            for j in range(k + 1, n):
                A[i, j] -= A[i, k] * A[k, j]
    return piv


def game_of_life(grid, steps):   # Conway's rules over a torus, the test an int and a bool under `and`
    n, m = grid.shape
    for _ in range(steps):
        new = grid.copy()
        for i in range(n):
            for j in range(m):
                s = 0
                for di in (-1, 0, 1):
                    for dj in (-1, 0, 1):
                        if di or dj:
                            s += grid[(i + di) % n, (j + dj) % m]
                if grid[i, j] and (s < 2 or s > 3):
                    new[i, j] = 0
                elif not grid[i, j] and s == 3:
                    new[i, j] = 1
        grid = new
    return grid


def extremes_of_bounded_slices(x, flags):   # max, min, argmax and argmin of slices the index bounds
    top = np.zeros(len(x), x.dtype)
    at = np.zeros(len(x), np.int64)
    for k in range(len(x)):
        top[k] = x[k:].max() - np.min(x[:k + 1])
        at[k] = np.argmax(x[k:]) + 10 * np.argmin(x[:k + 1]) + 100 * np.argmax(flags[k:])
    return top, at


def listed_rows(A, order):   # x[[k, p]] = ...: in order, the last of equal indices winning, as NumPy writes them
    for k in range(len(order)):
        p = order[k]
        A[[k, p]] = A[[p, k]]
        A[[p, p, k]] = A[[k, 0, p]] * 0.5
        A[[k, p], 1:3] = A[[p, k], p % 2]   # (the rest of the key: a slice, an index read from an array)
    return A


def truth_tests(x, n):   # `and`/`or`/`not` of values of different dtypes, read only for their truth
    count = 0
    i = 0
    while i < len(x) and x[i] != 7:
        if (x[i] and i % 3) or not (x[i] or i):
            count += 1
        i += 1
    return count + n if x[0] and n else count


MIXED_PROGRAMS = [lu_partial_pivoting, game_of_life, extremes_of_bounded_slices, listed_rows, truth_tests]


def _mixed_arguments(program, device, rng):
    dt = float_dtype(device)
    it = np.int32 if device == "webgpu" else np.int64
    return {lu_partial_pivoting: lambda: (rng.random((12, 12)).astype(dt),),
            game_of_life: lambda: ((rng.random((10, 9)) < 0.35).astype(it), 3),
            extremes_of_bounded_slices: lambda: (np.where(rng.random(15) < 0.2, -np.inf, rng.random(15)).astype(dt),
                                                 rng.random(15) < 0.3),
            listed_rows: lambda: (rng.random((7, 5)).astype(dt), rng.integers(0, 7, 7).astype(it)),
            truth_tests: lambda: (rng.integers(0, 3, 40).astype(it), 5)}[program]()


@pytest.mark.parametrize("program", MIXED_PROGRAMS, ids=lambda p: p.__name__)
def test_pivoting_row_swaps_and_mixed_truth_tests_match_numpy(program, device, rng):
    check(program, _mixed_arguments(program, device, rng), device)


@pytest.mark.parametrize("program", MIXED_PROGRAMS[:4], ids=lambda p: p.__name__)
def test_pivoting_row_swaps_and_mixed_truth_tests_are_loops_over_elements_on_numba(program, caplog, rng):
    """LU with partial pivoting was traced step by step (np.argmax of A[k:, k] refused: 'its length is not known
    while tracing'; the row swap's scatter then ran kernels per step: 0.35 ms for 20 x 20, now 0.07); the game of
    life raised 'the two sides of a conditional expression differ (bool[] and int64[])' (its steps, each making
    a new grid, launch its loop nest once per step)."""
    said = _loop_messages(caplog, program, *_mixed_arguments(program, "numba", rng))
    assert any("is a loop over elements" in m for m in said), said
    assert not any("step by step" in m for m in said), said
    if program is not game_of_life:
        assert not any("runs its body's kernels" in m for m in said), said


def test_an_extreme_of_an_empty_slice_raises_numpys_error_when_the_kernel_runs(device):
    def empty_at_the_end(x):
        s = 0
        for k in range(len(x) + 1):
            s += np.argmax(x[k:])
        return s

    x = np.arange(5, dtype=float_dtype(device))
    with pytest.raises(ValueError, match="attempt to get argmax of an empty sequence"):
        run_kernel(tj.kernel(empty_at_the_end), x, device=device)


# --- a loop over elements updating, in place, memory a kernel before it made (frontend/staged.py's _own_memory) ---

def running_sum_of_a_product(a):
    x = a * 2.0                      # a kernel's result, which only the loop reads: the loop may update it in place
    for i in range(1, x.shape[0]):
        x[i] = x[i] + x[i - 1]
    return x


def running_sum_beside_its_first_value(a):
    x = a * 2.0
    before = x * 1.0                 # the first value also read after the loop: never updated in place
    for i in range(1, x.shape[0]):
        x[i] = x[i] + x[i - 1]
    return x, before + x


def running_sum_of_a_view(a):
    x = a.reshape(-1)                # NumPy's view of the argument: the loop writes into `a` as NumPy does
    for i in range(1, x.shape[0]):
        x[i] = x[i] + x[i - 1]
    return x


def running_sums_of_two_rows(a):
    m = a * 3.0
    x, y = m[0], m[1]                # two views of one kernel's result
    for i in range(1, x.shape[0]):
        x[i] = x[i] + x[i - 1]
        y[i] = y[i] * 0.5 + x[i]
    return m, x, y


@pytest.mark.parametrize("f", [running_sum_of_a_product, running_sum_beside_its_first_value, running_sum_of_a_view,
                               running_sums_of_two_rows])
def test_a_loop_starting_from_a_kernels_result_matches_numpy(f, device, rng):
    n = 20_000 if device == "numba" else 9  # (numba: past DONATE_MIN_BYTES, where the memory checks run)
    shape = (2, n) if f is running_sums_of_two_rows else (n, 1) if f is running_sum_of_a_view else (n,)
    check(f, (rng.standard_normal(shape).astype(float_dtype(device)),), device)


def test_a_kernels_result_only_the_loop_reads_is_not_copied_for_it(rng):
    copies = []
    real_array = np.array

    def counting(value, *args, **kwargs):
        copies.append(getattr(value, "shape", None))
        return real_array(value, *args, **kwargs)

    a = rng.standard_normal(20_000)  # (160 KB: a smaller result is copied, cheaper than checking it is not shared)
    f = tj.kernel(running_sum_of_a_product, device="numba")
    f(a)
    with mock.patch.object(numba_element_loops.np, "array", counting):
        got = f(a)
    np.testing.assert_allclose(got, running_sum_of_a_product(a.copy()), rtol=1e-12)
    assert copies == [], copies
