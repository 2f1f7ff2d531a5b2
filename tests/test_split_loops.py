"""Index-set splitting of innermost loops (ir/split_loops.py): kernels whose inner loop clamps shifted reads and
selects an interior, compared with NumPy on the numba device at sizes around the loop's edges, and the split seen
in the kernel's IR."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from tracejit.ir import split_loops
from tracejit.ir.kernel_ir import KOp


def stencil(p, b):
    q = p.copy()
    q[1:-1, 1:-1] = 0.25 * (p[1:-1, 2:] + p[1:-1, :-2] + p[2:, 1:-1] + p[:-2, 1:-1]) - b[1:-1, 1:-1]
    q[:, -1] = q[:, -2]
    q[0, :] = q[1, :]
    return q


def shifted(x):
    return x[:, 3:] - 2 * x[:, :-3] + np.pad(x, ((0, 0), (2, 1)), mode="edge")[:, 3:-3]


def triangles(a):
    return np.triu(a, 2) - np.tril(a, -3) + np.where(np.arange(a.shape[1]) % 3 == 0, a, -a)


def windows(x):
    return x[:, 2:-2] * 2 + x[:, :-4] - x[:, 4:] + np.roll(x, 5, axis=1)[:, 2:-2]


@pytest.mark.parametrize("cols", (8, 9, 16, 41, 100))
@pytest.mark.parametrize("fn", (stencil, shifted, triangles, windows), ids=lambda f: f.__name__)
def test_split_kernels_match_numpy(fn, cols, rng):
    args = [rng.standard_normal((7, cols)) for _ in range(fn.__code__.co_argcount)]
    got = tj.kernel(fn)(*args, device="numba")
    np.testing.assert_allclose(got, fn(*args), rtol=1e-12, atol=0)
    got32 = tj.kernel(fn)(*[a.astype(np.float32) for a in args], device="numba")
    np.testing.assert_allclose(got32, fn(*[a.astype(np.float32) for a in args]), rtol=1e-6)


def test_a_stencils_inner_loop_is_split_around_its_interior(rng):
    p, b = rng.standard_normal((41, 41)), rng.standard_normal((41, 41))
    kernels = tj.kernel(stencil).lower(p, b, device="numba").kernels
    ranges = [[x.arg[0] for x in k.ir.instrs if x.op == KOp.RANGE] for k in kernels]
    assert any(r[:3] == [1, 39, 1] for r in ranges), ranges   # columns 0, 1-39, 40


def test_a_loop_whose_interior_is_small_is_left_as_it_is():
    from tracejit.ir.kernel_ir import INDEX, Builder, KernelIR, Param

    k = KernelIR("k", [Param("out0", np.dtype(np.float64), 10, True)])
    bld = Builder(k)
    r = bld.open_range(10, "loop")
    v = bld.emit(KOp.MIN, INDEX, (r, bld.emit(KOp.CONST, INDEX, (), 2)))   # identity for 3 of 10 places
    bld.emit(KOp.STORE, None, (0, r, bld.emit(KOp.CAST, np.dtype(np.float64), (v,))))
    bld.close_range(r)
    assert split_loops.split(k) is k


def heat_step(u, nu):   # a 1-d stencil: its kernel's only loop is over the global index
    v = u.copy()
    v[1:-1] = u[1:-1] + nu * (u[2:] - 2 * u[1:-1] + u[:-2])
    return v


def edges_1d(x):
    return np.pad(x, (2, 3), mode="edge")[1:-4] * 2 - np.roll(x, 7) + np.where(np.arange(x.shape[0]) < 5, x, -x)


def differences_1d(x):
    return np.diff(x, 2) + x[2:] * np.float32(0.5) - np.pad(x, 1, mode="reflect")[3:-1]


@pytest.mark.parametrize("fn", (heat_step, edges_1d, differences_1d), ids=lambda f: f.__name__)
def test_split_1d_kernels_match_numpy_on_threads_and_sizes_that_become_arguments(fn, rng):
    """The global index's loop is cut into three in every part a thread runs; a size seen twice becomes an
    argument of the code (runtime/symbolic_sizes.py), whose constants cut nothing. One kernel takes every size: the
    first two compile code of their own, the others run the code of symbolic sizes (split from split_loops.GLOBAL_MIN
    places)."""
    k = tj.kernel(fn)
    sizes = [size for n in (8, 13, 1024, 1025, 4099, 100_003) for size in (n, n + 1, n + 2)]
    for size in sizes + [3, 2]:   # (the last two: no interior at all)
        args = [rng.standard_normal(size)] + ([0.2] if fn is heat_step else [])
        for threads in (1, 2):
            with tj.set_num_threads(threads):
                got = k(*args, device="numba")
            np.testing.assert_allclose(got, fn(*args), rtol=1e-12, atol=1e-15)
        x32 = args[0].astype(np.float32)
        np.testing.assert_allclose(k(x32, *args[1:], device="numba"), fn(x32, *args[1:]), rtol=1e-6, atol=1e-6)
    for size in (1025, 100_003):   # a kernel's first size: code of its own, the size a constant
        args = [rng.standard_normal(size)] + ([0.2] if fn is heat_step else [])
        with tj.set_num_threads(2):
            np.testing.assert_allclose(tj.kernel(fn)(*args, device="numba"), fn(*args), rtol=1e-12, atol=1e-15)


def test_a_1d_stencils_global_loop_is_split_around_its_interior(rng):
    u = rng.standard_normal(2000)
    (kernel,) = [k for k in tj.kernel(heat_step).lower(u, 0.2, device="numba").kernels if k.ir.split_global]
    inside, bounds = split_loops.global_plan(kernel.ir)
    assert sorted(v for v in inside.values() if isinstance(v, bool)) == [True, True]   # 1 <= i and i < 1999
    assert {side for side, _, _ in bounds} == {"lo", "hi"}
    assert "loop.2" in kernel.source and "and i1 1, 1" in kernel.source   # three loops; the interior's tests: true


def test_a_short_global_range_is_not_split(rng):
    (kernel,) = [k for k in tj.kernel(heat_step).lower(rng.standard_normal(500), 0.2, device="numba").kernels
                 if k.ir.split_global]
    assert split_loops.global_plan(kernel.ir) is None and "loop.2" not in kernel.source
