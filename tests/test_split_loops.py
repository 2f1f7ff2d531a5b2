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
