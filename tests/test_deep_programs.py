"""Programs thousands of operations deep (Python loops, unrolled by tracing) trace, lower and run like short
ones and agree with NumPy: tracejit walks its graphs with explicit work stacks, so a program's length is
bounded by memory and time, not by Python's recursion limit (issue 44). The default sizes are a few thousand
operations, which stopped at a bare RecursionError before; TRACEJIT_DEEP_100K=1 adds a 100,000-operation
program (about a minute per device)."""
from __future__ import annotations

import inspect
import math
import os
import sys

import numpy as np
import pytest

import tracejit as tj
from reference import assert_close
from tracejit.ir.fuse import MAX_FUSED_DEPTH
from tracejit.ir.kernel_ir import KOp

BIG_DEVICES = ("numba", "opencl")   # the deepest sizes; the other devices run a tenth of them


def depth(device: str, n: int) -> int:
    return n if device in BIG_DEVICES else n // 10


def run(f, args, device):
    kernel_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    out = tj.kernel(f)(*kernel_args, device=device)
    expected = f(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    return np.asarray(out.numpy() if isinstance(out, tj.Array) else out), expected


def float_dtype(device: str):
    return np.float32 if device in ("webgpu", "metal") else np.float64


def test_an_elementwise_chain_of_5000_operations_matches_numpy(device, rng):
    steps = depth(device, 2500)

    def chain(x):
        for i in range(steps):
            x = x * (1.0 + (i % 7) * 1e-4) - 0.001
        return x

    dt = float_dtype(device)
    out, expected = run(chain, (rng.random(300).astype(dt),), device)
    assert_close(out, expected, rtol=1e-4 if dt == np.float32 else 1e-9)


def test_a_deep_chain_is_cut_into_kernels_of_bounded_depth():
    """LLVM's loop vectoriser is quadratic in a loop body: no kernel computes more than MAX_FUSED_DEPTH
    dependent operations, so compile time grows linearly with a program's length. (The loop is over a list, not
    range(): it is traced step by step, making the deep chain.)"""
    def grow(x):
        for i in list(range(2000)):
            x = x * 1.5 + 0.25
        return x

    def chain(x):
        return grow(x)

    program = tj.kernel(chain).trace(np.ones(64)).program()
    assert len(program.kernels) == math.ceil(4000 / MAX_FUSED_DEPTH)
    for k in program.kernels:
        assert sum(x.op in (KOp.MUL, KOp.ADD) for x in k.instrs) <= MAX_FUSED_DEPTH, k.name


def test_reductions_inside_a_long_loop_match_numpy(device, rng):
    steps = depth(device, 400)

    def normalise(x):
        for _ in range(steps):
            x = x - 0.01 * x.mean() + 0.001 * x.max()
        return x

    dt = float_dtype(device)
    out, expected = run(normalise, (rng.random(64).astype(dt),), device)
    assert_close(out, expected, rtol=1e-4 if dt == np.float32 else 1e-9)


def test_in_place_assignments_in_a_long_loop_match_numpy(device, rng):
    steps = depth(device, 800)

    def relax(x):
        for _ in range(steps):
            x += 0.5
            x[1:] *= 0.999
            x[0] = x[-1] * 0.5
        return x

    dt = float_dtype(device)
    out, expected = run(relax, (rng.random(32).astype(dt),), device)
    assert_close(out, expected, rtol=1e-4 if dt == np.float32 else 1e-9)


def test_a_1000_step_recurrence_on_a_traced_array_matches_numpy(device, rng):
    n = depth(device, 1000)

    def recurrence(x, a, b):
        for i in range(1, n):
            x[i] = x[i - 1] * a[i] + b[i]
        return x

    dt = float_dtype(device)
    args = tuple(rng.random(n).astype(dt) for _ in range(3))
    out, expected = run(recurrence, args, device)
    assert_close(out, expected, rtol=1e-4 if dt == np.float32 else 1e-9)


def test_a_scalar_loop_of_2000_steps_matches_numpy(device, rng):
    steps = depth(device, 2000)

    def damped(x):
        s = x[0]
        for _ in range(steps):
            s = s * 0.999 + 0.5
        return s

    dt = float_dtype(device)
    out, expected = run(damped, (rng.random(4).astype(dt),), device)
    assert_close(out, expected, rtol=1e-4 if dt == np.float32 else 1e-9)


def test_a_convolution_written_as_nested_loops_matches_numpy(device, rng):
    size = 16 if device in BIG_DEVICES else 8

    def convolve(img, k):
        out = np.zeros((img.shape[0] - 2, img.shape[1] - 2), img.dtype)
        for i in range(out.shape[0]):
            for j in range(out.shape[1]):
                acc = 0.0
                for di in range(3):
                    for dj in range(3):
                        acc = acc + img[i + di, j + dj] * k[di, dj]
                out[i, j] = acc
        return out

    dt = float_dtype(device)
    out, expected = run(convolve, (rng.random((size, size)).astype(dt), rng.random((3, 3)).astype(dt)), device)
    assert_close(out, expected, rtol=1e-4 if dt == np.float32 else 1e-9)


def test_a_300_step_stencil_with_np_roll_matches_numpy(device, rng):
    steps = depth(device, 300)

    def heat(u):
        for _ in range(steps):
            u = u + 0.1 * (np.roll(u, 1) - 2 * u + np.roll(u, -1))
        return u

    dt = float_dtype(device)
    out, expected = run(heat, (rng.random(64).astype(dt),), device)
    assert_close(out, expected, rtol=1e-4 if dt == np.float32 else 1e-9)


def test_a_pointer_chase_of_300_gathers_matches_numpy(device, rng):
    steps = depth(device, 300)

    def chase(p, nxt):
        for _ in range(steps):
            p = nxt[p]
        return p

    args = (rng.integers(0, 50, 20).astype(np.int32), rng.permutation(50).astype(np.int32))
    out, expected = run(chase, args, device)
    np.testing.assert_array_equal(out, expected)


def test_a_loop_of_np_roll_alone_matches_numpy(device, rng):
    """Index arithmetic that does not collapse, nested a level per step: ((i + 1) % 50 + 1) % 50 ..."""
    steps = depth(device, 1500)

    def rolls(x):
        for _ in range(steps):
            x = np.roll(x, 1)
        return x

    out, expected = run(rolls, (rng.random(50).astype(float_dtype(device)),), device)
    np.testing.assert_array_equal(out, expected)


def test_a_deep_program_prints_as_graph_ir():
    def grow(x):   # (a loop over a list is traced step by step: a deep graph)
        for _ in [None] * 3000:
            x = np.tanh(x)
        return x

    def chain(x):
        return grow(x)

    text = str(tj.kernel(chain).trace(np.ones(3)))
    assert text.count("tanh") == 3000


def test_recursion_in_the_kernels_own_code_is_a_recursion_limit_error_at_its_line():
    def descend(x, n):
        return x if n == 0 else descend(x * 1.0, n - 1)

    def deep(x):
        return descend(x, 100_000)

    with pytest.raises(tj.RecursionLimitError, match=r"test_deep_programs\.py:\d+: .*recursion limit.*descend") as e:
        tj.kernel(deep)(np.ones(3))
    assert isinstance(e.value, RecursionError) and isinstance(e.value, tj.TraceError)


def test_a_recursion_limit_too_low_for_tracing_is_a_recursion_limit_error():
    def f(x):
        return np.sin(x) * 2 + 1

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + 25)
    try:
        with pytest.raises(tj.RecursionLimitError, match=r"test_deep_programs\.py:\d+: .*sys\.setrecursionlimit"):
            tj.kernel(f).lower(np.ones(5))
    finally:
        sys.setrecursionlimit(limit)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("TRACEJIT_DEEP_100K") != "1", reason="about a minute per device: TRACEJIT_DEEP_100K=1")
@pytest.mark.parametrize("target", BIG_DEVICES)
def test_a_program_of_100000_operations_matches_numpy(target, rng):
    if target not in [d.name for d in tj.devices() if d.available]:
        pytest.skip(f"{target} is not available here")

    def chain(x):
        for i in range(50_000):
            x = x * (1.0 + (i % 97) * 1e-7) - 1e-4
        return x

    out, expected = run(chain, (rng.random(1000),), target)
    assert_close(out, expected, rtol=1e-8)


def test_a_trace_that_would_fill_memory_stops_at_the_users_line(monkeypatch):
    """A Bellman-Ford loop traced element by element grew a process past 24 GiB until the system killed it:
    a trace now stops at a limit scaled to the free memory, with an error naming the user's line."""
    from tracejit.frontend import kernel as kernel_module
    monkeypatch.setattr(kernel_module, "_trace_values", lambda: 20_000)

    def sweep(D):   # loops over lists are traced step by step
        for i in list(range(1, 100)):
            for j in list(range(1, 100)):
                D[i, j] = D[i - 1, j] + D[i, j - 1] * 0.5   # the line the error names
        return D

    def relax(D):
        return sweep(D)
    with pytest.raises(tj.TraceError, match=r"test_deep_programs.py:\d+: the trace grew past 20,000 traced values"):
        tj.kernel(relax)(np.ones((100, 100)))
    assert_close(tj.kernel(lambda x: x * 2)(np.ones(3)), np.full(3, 2.0))   # the next trace has its own budget


def test_the_same_loop_nest_in_the_kernel_itself_is_compiled_as_a_loop_and_matches_numpy(monkeypatch, rng):
    """The loops of the kernel function itself are compiled as loops: the same nest runs within that budget."""
    from tracejit.frontend import kernel as kernel_module
    monkeypatch.setattr(kernel_module, "_trace_values", lambda: 20_000)

    def relax(D):
        for i in range(1, 100):
            for j in range(1, 100):
                D[i, j] = D[i - 1, j] + D[i, j - 1] * 0.5
        return D
    D = rng.random((100, 100))
    expected = relax(D.copy())
    assert_close(tj.kernel(relax)(D.copy()), expected, rtol=1e-12)
