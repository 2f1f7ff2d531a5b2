"""Programs that take Python numbers as grid sizes, step counts and coefficients and loop over time steps, as
tutorials and benchmark suites write them: Lorena Barba's "12 steps to Navier-Stokes" (CFD Python, its
vectorised NumPy versions, wrapped as functions of their parameters), npbench's jacobi_1d, a Numba-style
dynamic-programming table with Python's min, and Python's max/min as clamps."""
from __future__ import annotations

import numpy as np

from . import program


def linear_convection_1d(nx, nt, c):  # CFD Python, step 1 (vectorised, as in its step 4 notebooks)
    dx = 2 / (nx - 1)
    dt = .025
    u = np.ones(nx)
    u[int(.5 / dx):int(1 / dx + 1)] = 2
    for n in range(nt):
        un = u.copy()
        u[1:] = un[1:] - c * dt / dx * (un[1:] - un[:-1])
    return u


def diffusion_1d(nx, nt, nu):  # CFD Python, step 3
    dx = 2 / (nx - 1)
    sigma = .2
    dt = sigma * dx**2 / nu
    u = np.ones(nx)
    u[int(.5 / dx):int(1 / dx + 1)] = 2
    for n in range(nt):
        un = u.copy()
        u[1:-1] = un[1:-1] + nu * dt / dx**2 * (un[2:] - 2 * un[1:-1] + un[0:-2])
    return u


def convection_2d(nx, ny, nt, c):  # CFD Python, step 5 (array operations)
    dx = 2 / (nx - 1)
    dy = 2 / (ny - 1)
    sigma = .2
    dt = sigma * dx
    u = np.ones((ny, nx))
    u[int(.5 / dy):int(1 / dy + 1), int(.5 / dx):int(1 / dx + 1)] = 2
    for n in range(nt + 1):
        un = u.copy()
        u[1:, 1:] = (un[1:, 1:] - (c * dt / dx * (un[1:, 1:] - un[1:, :-1])) -
                     (c * dt / dy * (un[1:, 1:] - un[:-1, 1:])))
        u[0, :] = 1
        u[-1, :] = 1
        u[:, 0] = 1
        u[:, -1] = 1
    return u


def diffusion_2d(nx, ny, nt, nu):  # CFD Python, step 7, its diffuse(nt) with the grid a parameter
    dx = 2 / (nx - 1)
    dy = 2 / (ny - 1)
    sigma = .25
    dt = sigma * dx * dy / nu
    u = np.ones((ny, nx))
    u[int(.5 / dy):int(1 / dy + 1), int(.5 / dx):int(1 / dx + 1)] = 2
    for n in range(nt + 1):
        un = u.copy()
        u[1:-1, 1:-1] = (un[1:-1, 1:-1] +
                         nu * dt / dx**2 * (un[1:-1, 2:] - 2 * un[1:-1, 1:-1] + un[1:-1, 0:-2]) +
                         nu * dt / dy**2 * (un[2:, 1: -1] - 2 * un[1:-1, 1:-1] + un[0:-2, 1:-1]))
        u[0, :] = 1
        u[-1, :] = 1
        u[:, 0] = 1
        u[:, -1] = 1
    return u


def jacobi_1d(TSTEPS, A, B):  # npbench, polybench/jacobi_1d/jacobi_1d_numpy.py
    for t in range(1, TSTEPS):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])


def levenshtein(a, b):  # the textbook table, written for Numba: loops over elements and Python's min
    n, m = len(a), len(b)
    D = np.zeros((n + 1, m + 1))
    for i in range(n + 1):
        D[i, 0] = i
    for j in range(m + 1):
        D[0, j] = j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            D[i, j] = min(D[i - 1, j] + 1, D[i, j - 1] + 1, D[i - 1, j - 1] + cost)
    return D[n, m]


def soft_clip_norm(x, max_norm):  # a gradient-clipping helper: Python's min as a clamp
    norm = np.sqrt((x * x).sum())
    return x * min(1.0, max_norm / (norm + 1e-6))


def _ints(*values):
    return lambda rng, dt: values


def azimint_naive(data, radius, npt):  # npbench, azimint_naive/azimint_naive_numpy.py (x[mask].mean() per bin)
    rmax = radius.max()
    res = np.zeros(npt, dtype=np.float64)
    for i in range(npt):
        r1 = rmax * i / npt
        r2 = rmax * (i + 1) / npt
        mask_r12 = np.logical_and((r1 <= radius), (radius < r2))
        values_r12 = data[mask_r12]
        res[i] = values_r12.mean()
    return res


PROGRAMS = [
    program(linear_convection_1d, _ints(41, 25, 1.0), ("float64",)),
    program(azimint_naive, lambda rng, dt: (rng.random(400).astype(dt), rng.random(400).astype(dt), 12), ("float64",)),
    program(diffusion_1d, _ints(41, 20, 0.3), ("float64",)),
    program(convection_2d, _ints(21, 21, 10, 1.0), ("float64",)),
    program(diffusion_2d, _ints(17, 17, 10, .05), ("float64",)),
    program(jacobi_1d, lambda rng, dt: (8, rng.uniform(0, 1, 30).astype(dt), rng.uniform(0, 1, 30).astype(dt)),
            ("float64", "float32")),
    program(levenshtein, lambda rng, dt: (rng.integers(0, 4, 6), rng.integers(0, 4, 7)), ("int64",)),
    program(soft_clip_norm, lambda rng, dt: (rng.standard_normal(16).astype(dt) * 3, 1.5), ("float64", "float32")),
]
