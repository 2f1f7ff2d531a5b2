"""Procedures: kernels that update their argument arrays in place and return nothing, with loop counts
passed by keyword, as scientific benchmark suites write them (npbench's NumPy versions of PolyBench,
whose `kernel(TSTEPS, A, B)` functions return None) and as PDE tutorials do."""
from __future__ import annotations

import numpy as np

from . import program


def jacobi_2d(TSTEPS, A, B):  # npbench, polybench/jacobi_2d/jacobi_2d_numpy.py
    for t in range(1, TSTEPS):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] +
                               A[2:, 1:-1] + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] +
                               B[2:, 1:-1] + B[:-2, 1:-1])


def heat_3d(TSTEPS, A, B):  # npbench, polybench/heat_3d/heat_3d_numpy.py
    for t in range(1, TSTEPS):
        B[1:-1, 1:-1, 1:-1] = (0.125 * (A[2:, 1:-1, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[:-2, 1:-1, 1:-1]) +
                               0.125 * (A[1:-1, 2:, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, :-2, 1:-1]) +
                               0.125 * (A[1:-1, 1:-1, 2:] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, 1:-1, 0:-2]) +
                               A[1:-1, 1:-1, 1:-1])
        A[1:-1, 1:-1, 1:-1] = (0.125 * (B[2:, 1:-1, 1:-1] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[:-2, 1:-1, 1:-1]) +
                               0.125 * (B[1:-1, 2:, 1:-1] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[1:-1, :-2, 1:-1]) +
                               0.125 * (B[1:-1, 1:-1, 2:] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[1:-1, 1:-1, 0:-2]) +
                               B[1:-1, 1:-1, 1:-1])


def fdtd_2d(TMAX, ex, ey, hz, _fict_):  # npbench, polybench/fdtd_2d/fdtd_2d_numpy.py
    for t in range(TMAX):
        ey[0, :] = _fict_[t]
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])


def gemver(alpha, beta, A, u1, v1, u2, v2, w, x, y, z):  # npbench, polybench/gemver/gemver_numpy.py
    A += np.outer(u1, v1) + np.outer(u2, v2)
    x += beta * y @ A + z
    w += alpha * A @ x


def syrk(alpha, beta, C, A):  # npbench, polybench/syrk/syrk_numpy.py
    for i in range(A.shape[0]):
        C[i, :i + 1] *= beta
        for k in range(A.shape[1]):
            C[i, :i + 1] += alpha * A[i, k] * A[:i + 1, k]


def trmm(alpha, A, B):  # npbench, polybench/trmm/trmm_numpy.py
    for i in range(B.shape[0]):
        for j in range(B.shape[1]):
            B[i, j] += np.dot(A[i + 1:, i], B[i + 1:, j])
    B *= alpha


def wave_leapfrog(u, v, dt):  # one leapfrog step of the 1-D wave equation, interior updated in place
    v[1:-1] += dt * (u[2:] - 2 * u[1:-1] + u[:-2])
    u[1:-1] += dt * v[1:-1]


def apply_boundary(u, *, value=0.0, periodic=False):  # a keyword-only option as library helpers write them
    if periodic:
        u[0] = u[-2]
        u[-1] = u[1]
    else:
        u[0] = value
        u[-1] = value


def electric_potential(phi, charges, positions):  # a computational-physics exercise: the potential of point
    for (i, j), _ in np.ndenumerate(phi):          # charges at each grid point, written with loops for numba.njit
        total = 0.0
        for q, (px, py) in zip(charges, positions):
            r = np.sqrt((i - px) ** 2 + (j - py) ** 2)
            total += q / max(r, 0.5)
        phi[i, j] = total


def normalize_rows(P):  # a transition matrix's rows scaled to sum to one, row by row, as written for numba.njit
    for i in range(P.shape[0]):
        row = P[i]
        s = 0.0
        for j in range(row.shape[0]):
            s += row[j]
        if s > 0:
            for j in range(row.shape[0]):
                row[j] /= s


def _grid(*shapes, low=0.0, high=1.0):
    def make(rng, dt):
        return tuple(rng.uniform(low, high, s).astype(dt) for s in shapes)
    return make


BOTH = ("float64", "float32")
PROGRAMS = [
    program(jacobi_2d, _grid((14, 14), (14, 14)), BOTH, static={"TSTEPS": 5}),
    program(heat_3d, _grid((8, 8, 8), (8, 8, 8)), BOTH, static={"TSTEPS": 4}),
    program(fdtd_2d, _grid((10, 12), (10, 12), (10, 12), 6), BOTH, static={"TMAX": 6}),
    program(gemver, lambda rng, dt: (1.5, 1.2) + _grid((12, 12), 12, 12, 12, 12, 12, 12, 12, 12)(rng, dt), BOTH),
    program(syrk, lambda rng, dt: (1.5, 1.2) + _grid((6, 6), (6, 4))(rng, dt), BOTH),
    program(trmm, lambda rng, dt: (1.5,) + _grid((6, 6), (6, 4))(rng, dt), BOTH),
    program(wave_leapfrog, lambda rng, dt: (np.sin(np.linspace(0, 3, 32)).astype(dt), np.zeros(32, dt), 0.1),
            BOTH),
    program(apply_boundary, _grid(20), BOTH),
    program(electric_potential, lambda rng, dt: (np.zeros((16, 12), dt), rng.uniform(-1, 1, 10).astype(dt),
                                                 rng.uniform(0, 12, (10, 2)).astype(dt)), BOTH),
    program(normalize_rows, lambda rng, dt: (np.where(rng.random((12, 9)) < 0.2, 0, rng.random((12, 9))).astype(dt)
                                             * (np.arange(12) != 3)[:, None],), BOTH),
]
