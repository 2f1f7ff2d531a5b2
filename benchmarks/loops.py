"""Loop-heavy and mixed programs as their authors write them, decorated unchanged, against NumPy running the same
code, against the same algorithm written for numba.njit by a skilled user (loops, preallocated outputs, prange
where it wins), and against PyTorch where a port is natural (the convolution rows), in one run.

Columns: NumPy, hand-written Numba, torch and tracejit (numba device) steady-state medians; tracejit's first call
(trace and compile, in this process, with a kernel cache of its own that starts empty); how the loops ran
("loop": compiled as a loop, its kernels run once per step; "steps": traced step by step, see
docs/guide/control-flow.md); and the ratios (above 1: tracejit is faster), with the geometric mean of the ratios
to Numba under the table. Every column's result is checked against NumPy's before it is timed.

    .venv/bin/python benchmarks/loops.py [--quick] [--rows heat_1d,jacobi_2d] [--json FILE]
"""
from __future__ import annotations

import argparse
import atexit
import importlib.util
import json
import logging
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if "TRACEJIT_CACHE_DIR" not in os.environ:   # (the first-call column is a trace and a compile, not a disk hit)
    _cache = tempfile.mkdtemp(prefix="tracejit-loops-bench-")
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)
    os.environ["TRACEJIT_CACHE_DIR"] = _cache

import numba  # noqa: E402
import numpy as np  # noqa: E402

import tracejit as tj  # noqa: E402

torch = F = None   # imported by the child process that times the torch column (_torch_column), never here

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from corpus import loops as corpus_loops  # noqa: E402
from corpus import complex_numbers, numbers_and_loops, science  # noqa: E402


# --- the programs as NumPy users write them (the corpus's where they are there) --------------------------------

def heat_1d(u, steps, nu):
    for t in range(steps):
        u[1:-1] = u[1:-1] + nu * (u[2:] - 2 * u[1:-1] + u[:-2])


def floyd_warshall(path):   # the min-plus update written with broadcasting (np.add.outer is issue 48's)
    for k in range(path.shape[0]):
        path[:] = np.minimum(path, path[:, k, None] + path[None, k, :])


def floyd_warshall_elements(path):   # the same, over elements, as written for numba.njit
    n = path.shape[0]
    for k in range(n):
        for i in range(n):
            for j in range(n):
                path[i, j] = min(path[i, j], path[i, k] + path[k, j])


# --- the same algorithms for numba.njit ---------------------------------------------------------------------------

@numba.njit(cache=True)
def heat_1d_nb(u, steps, nu):
    n = u.shape[0]
    new = np.empty_like(u)
    for _ in range(steps):
        for i in range(1, n - 1):
            new[i] = u[i] + nu * (u[i + 1] - 2 * u[i] + u[i - 1])
        u[1:-1] = new[1:-1]


@numba.njit(cache=True)
def jacobi_2d_nb(TSTEPS, A, B):
    n = A.shape[0]
    for _ in range(1, TSTEPS):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                B[i, j] = 0.2 * (A[i, j] + A[i, j - 1] + A[i, j + 1] + A[i + 1, j] + A[i - 1, j])
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                A[i, j] = 0.2 * (B[i, j] + B[i, j - 1] + B[i, j + 1] + B[i + 1, j] + B[i - 1, j])


@numba.njit(cache=True)
def gramschmidt_nb(A):
    m, n = A.shape
    Q = np.zeros_like(A)
    R = np.zeros((n, n), A.dtype)
    for k in range(n):
        nrm = 0.0
        for i in range(m):
            nrm += A[i, k] * A[i, k]
        R[k, k] = np.sqrt(nrm)
        for i in range(m):
            Q[i, k] = A[i, k] / R[k, k]
        for j in range(k + 1, n):
            s = 0.0
            for i in range(m):
                s += Q[i, k] * A[i, j]
            R[k, j] = s
            for i in range(m):
                A[i, j] -= Q[i, k] * s
    return Q, R


@numba.njit(cache=True)
def trisolv_nb(L, x, b):
    for i in range(x.shape[0]):
        s = b[i]
        for j in range(i):
            s -= L[i, j] * x[j]
        x[i] = s / L[i, i]


@numba.njit(cache=True)
def lu_nb(A):
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            s = A[i, j]
            for k in range(j):
                s -= A[i, k] * A[k, j]
            A[i, j] = s / A[j, j]
        for j in range(i, n):
            s = A[i, j]
            for k in range(i):
                s -= A[i, k] * A[k, j]
            A[i, j] = s


@numba.njit(cache=True)
def floyd_warshall_nb(path):
    n = path.shape[0]
    for k in range(n):
        for i in range(n):
            pik = path[i, k]
            for j in range(n):
                path[i, j] = min(path[i, j], pik + path[k, j])


@numba.njit(cache=True)
def edit_distance_nb(a, b):
    n, m = a.shape[0], b.shape[0]
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


@numba.njit(cache=True)
def sum2d_nb(arr):
    M, N = arr.shape
    result = 0.0
    for i in range(M):
        for j in range(N):
            result += arr[i, j]
    return result


@numba.njit(cache=True, parallel=True)
def csr_matvec_nb(indptr, indices, data, x):   # rows are independent: a skilled user writes prange
    n = indptr.shape[0] - 1
    y = np.zeros(n, data.dtype)
    for i in numba.prange(n):
        s = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            s += data[k] * x[indices[k]]
        y[i] = s
    return y


@numba.njit(cache=True, parallel=True)
def _nbody_acc_nb(pos, mass, G, softening, acc):
    n = pos.shape[0]
    for i in numba.prange(n):
        ax = ay = az = 0.0
        for j in range(n):
            dx = pos[j, 0] - pos[i, 0]
            dy = pos[j, 1] - pos[i, 1]
            dz = pos[j, 2] - pos[i, 2]
            r2 = dx * dx + dy * dy + dz * dz + softening * softening
            inv_r3 = 1.0 / (r2 * np.sqrt(r2)) if r2 > 0 else r2   # (r2 ** -1.5 takes a pow: 3x the time)
            ax += dx * inv_r3 * mass[j, 0]
            ay += dy * inv_r3 * mass[j, 0]
            az += dz * inv_r3 * mass[j, 0]
        acc[i, 0] = G * ax
        acc[i, 1] = G * ay
        acc[i, 2] = G * az


@numba.njit(cache=True, parallel=True)
def _nbody_energy_nb(pos, vel, mass, G):
    n = pos.shape[0]
    ke = 0.0
    for i in range(n):
        ke += mass[i, 0] * (vel[i, 0] ** 2 + vel[i, 1] ** 2 + vel[i, 2] ** 2)
    pe = 0.0
    for i in numba.prange(n):
        for j in range(i + 1, n):
            r = np.sqrt((pos[j, 0] - pos[i, 0]) ** 2 + (pos[j, 1] - pos[i, 1]) ** 2 + (pos[j, 2] - pos[i, 2]) ** 2)
            if r > 0:
                pe -= mass[i, 0] * mass[j, 0] / r
    return 0.5 * ke, G * pe


@numba.njit(cache=True)
def nbody_nb(mass, pos, vel, Nt, dt, G, softening):   # pairs in loops, rows of particles in prange
    n = pos.shape[0]
    for k in range(3):   # centre-of-mass frame
        s = 0.0
        for i in range(n):
            s += mass[i, 0] * vel[i, k]
        for i in range(n):
            vel[i, k] -= s / mass.sum()
    acc = np.empty_like(pos)
    _nbody_acc_nb(pos, mass, G, softening, acc)
    pos_save = np.zeros((n, 3, Nt + 1))
    KE_save = np.zeros(Nt + 1)
    PE_save = np.zeros(Nt + 1)
    pos_save[:, :, 0] = pos
    KE_save[0], PE_save[0] = _nbody_energy_nb(pos, vel, mass, G)
    for step in range(Nt):
        for i in range(n):
            for k in range(3):
                vel[i, k] += acc[i, k] * dt / 2.0
                pos[i, k] += vel[i, k] * dt
        _nbody_acc_nb(pos, mass, G, softening, acc)
        for i in range(n):
            for k in range(3):
                vel[i, k] += acc[i, k] * dt / 2.0
        KE_save[step + 1], PE_save[step + 1] = _nbody_energy_nb(pos, vel, mass, G)
        pos_save[:, :, step + 1] = pos
    return pos_save, KE_save, PE_save


@numba.njit(cache=True)
def cavity_flow_nb(nx, ny, nt, nit, u, v, dt, dx, dy, p, rho, nu):   # the grid is small: one thread wins
    un = np.empty_like(u)
    vn = np.empty_like(v)
    pn = np.empty_like(p)
    b = np.zeros((ny, nx))
    for _ in range(nt):
        un[:] = u
        vn[:] = v
        for i in range(1, ny - 1):
            for j in range(1, nx - 1):
                dudx = (u[i, j + 1] - u[i, j - 1]) / (2 * dx)
                dvdy = (v[i + 1, j] - v[i - 1, j]) / (2 * dy)
                dudy = (u[i + 1, j] - u[i - 1, j]) / (2 * dy)
                dvdx = (v[i, j + 1] - v[i, j - 1]) / (2 * dx)
                b[i, j] = rho * (1 / dt * (dudx + dvdy) - dudx ** 2 - 2 * (dudy * dvdx) - dvdy ** 2)
        for _ in range(nit):
            pn[:] = p
            for i in range(1, ny - 1):
                for j in range(1, nx - 1):
                    p[i, j] = (((pn[i, j + 1] + pn[i, j - 1]) * dy ** 2 + (pn[i + 1, j] + pn[i - 1, j]) * dx ** 2)
                               / (2 * (dx ** 2 + dy ** 2))
                               - dx ** 2 * dy ** 2 / (2 * (dx ** 2 + dy ** 2)) * b[i, j])
            for i in range(ny):
                p[i, nx - 1] = p[i, nx - 2]
            for j in range(nx):
                p[0, j] = p[1, j]
            for i in range(ny):
                p[i, 0] = p[i, 1]
            for j in range(nx):
                p[ny - 1, j] = 0
        for i in range(1, ny - 1):
            for j in range(1, nx - 1):
                u[i, j] = (un[i, j] - un[i, j] * dt / dx * (un[i, j] - un[i, j - 1])
                           - vn[i, j] * dt / dy * (un[i, j] - un[i - 1, j])
                           - dt / (2 * rho * dx) * (p[i, j + 1] - p[i, j - 1])
                           + nu * (dt / dx ** 2 * (un[i, j + 1] - 2 * un[i, j] + un[i, j - 1])
                                   + dt / dy ** 2 * (un[i + 1, j] - 2 * un[i, j] + un[i - 1, j])))
                v[i, j] = (vn[i, j] - un[i, j] * dt / dx * (vn[i, j] - vn[i, j - 1])
                           - vn[i, j] * dt / dy * (vn[i, j] - vn[i - 1, j])
                           - dt / (2 * rho * dy) * (p[i + 1, j] - p[i - 1, j])
                           + nu * (dt / dx ** 2 * (vn[i, j + 1] - 2 * vn[i, j] + vn[i, j - 1])
                                   + dt / dy ** 2 * (vn[i + 1, j] - 2 * vn[i, j] + vn[i - 1, j])))
        u[0, :] = 0
        u[:, 0] = 0
        u[:, -1] = 0
        u[-1, :] = 1
        v[0, :] = 0
        v[-1, :] = 0
        v[:, 0] = 0
        v[:, -1] = 0
    return u, v, p


@numba.njit(cache=True)
def _conv2d_into(x, w, b, n, f, out):   # one image and output channel; the innermost loop along a row vectorises
    C = x.shape[1]
    KH, KW = w.shape[2], w.shape[3]
    Ho, Wo = out.shape[0], out.shape[1]
    out[:, :] = b[f]
    for c in range(C):
        for p in range(KH):
            for q in range(KW):
                wv = w[f, c, p, q]
                for i in range(Ho):
                    for j in range(Wo):
                        out[i, j] += wv * x[n, c, i + p, j + q]


@numba.njit(cache=True, parallel=True)
def conv2d_nb(x, w, b):   # images x output channels in prange
    N, _, H, W = x.shape
    F_, _, KH, KW = w.shape
    out = np.empty((N, F_, H - KH + 1, W - KW + 1), x.dtype)
    for k in numba.prange(N * F_):
        _conv2d_into(x, w, b, k // F_, k % F_, out[k // F_, k % F_])
    return out


@numba.njit(cache=True, parallel=True)
def cnn_forward_nb(x, w1, b1, w2, b2):   # the convolution, ReLU and pooling of one image per prange step
    N, _, H, W = x.shape
    F_, _, KH, KW = w1.shape
    Ho, Wo = H - KH + 1, W - KW + 1
    pooled = np.empty((N, F_ * (Ho // 2) * (Wo // 2)), x.dtype)
    for n in numba.prange(N):
        conv = np.empty((Ho, Wo), x.dtype)
        for f in range(F_):
            _conv2d_into(x, w1, b1, n, f, conv)
            for i in range(Ho // 2):
                for j in range(Wo // 2):
                    top = max(conv[2 * i, 2 * j], conv[2 * i, 2 * j + 1])
                    bottom = max(conv[2 * i + 1, 2 * j], conv[2 * i + 1, 2 * j + 1])
                    pooled[n, (f * (Ho // 2) + i) * (Wo // 2) + j] = max(max(top, bottom), 0)
    return pooled @ w2 + b2


_mandel_nb = numba.njit(cache=True)(corpus_loops.mandel)   # Numba's documentation, unchanged: the corpus's own


@numba.njit(cache=True, parallel=True)
def create_fractal_nb(min_x, max_x, min_y, max_y, image, iters):   # the documentation's, its columns in prange
    height = image.shape[0]
    width = image.shape[1]
    pixel_size_x = (max_x - min_x) / width
    pixel_size_y = (max_y - min_y) / height
    for x in numba.prange(width):
        real = min_x + x * pixel_size_x
        for y in range(height):
            imag = min_y + y * pixel_size_y
            color = _mandel_nb(real, imag, iters)
            image[y, x] = color
    return image


# --- PyTorch, where a port is natural: its fused convolution -------------------------------------------------------

# the Thomas algorithm over complex coefficients: the corpus's code itself, jitted (a skilled user writes just this)
tridiagonal_nb = numba.njit(cache=True)(complex_numbers.tridiagonal_solve)


@numba.njit(cache=True, parallel=True)
def dft_loops_nb(x):   # the loop DFT; its output frequencies are independent: prange
    n = x.shape[0]
    out = np.zeros(n, dtype=np.complex128)
    for k in numba.prange(n):
        s = 0j
        for t in range(n):
            s += x[t] * np.exp(-2j * np.pi * k * t / n)
        out[k] = s
    return out


def conv2d_torch(x, w, b):
    return F.conv2d(x, w, b)


def cnn_forward_torch(x, w1, b1, w2t, b2):   # w2t: the dense layer's weights as nn.Linear keeps them, [out, in]
    out = F.max_pool2d(F.relu(F.conv2d(x, w1, b1)), 2)
    return F.linear(out.flatten(1), w2t, b2)


# --- cases --------------------------------------------------------------------------------------------------------

def cases(quick: bool) -> list:
    """(name, the NumPy program, its Numba peer, arguments, (torch peer, its arguments) or None, rtol of the check)."""
    rng = np.random.default_rng(0)
    s = 4 if quick else 1
    n2 = 256 // s
    A2 = rng.random((n2, n2))
    G = rng.random((400 // s, 300 // s)) + np.eye(400 // s, 300 // s)
    nt = 2000 // s
    L = np.tril(rng.random((nt, nt))) + nt * np.eye(nt)
    nl = 200 // s
    LU = rng.random((nl, nl)) + nl * np.eye(nl)
    P = rng.integers(1, 100, (192 // s, 192 // s)).astype(np.float64)
    dense = rng.random((4000 // s, 3000 // s)) * (rng.random((4000 // s, 3000 // s)) < 0.05)
    F_ = rng.integers(1, 100, (120 // s, 120 // s)).astype(np.float64)
    ne = 2000 // s
    indptr = np.concatenate([[0], np.cumsum((dense != 0).sum(1))]).astype(np.int64)
    csr = (indptr, np.nonzero(dense)[1].astype(np.int64), dense[dense != 0], rng.random(dense.shape[1]))
    nb_n = 100 // s   # Mocz's nbody.py: 100 particles, t = 0 to 10 in steps of 0.01
    nbody = (20.0 * np.ones((nb_n, 1)) / nb_n, rng.standard_normal((nb_n, 3)), rng.standard_normal((nb_n, 3)),
             1000 // s, 0.01, 1.0, 0.1)
    grid = 41   # CFD Python's step 11: 41 x 41, 700 steps of 50 pressure iterations
    cavity = (grid, grid, 700 // s, 50, np.zeros((grid, grid)), np.zeros((grid, grid)), 0.001, 2 / (grid - 1),
              2 / (grid - 1), np.zeros((grid, grid)), 1.0, 0.1)
    conv = tuple(rng.standard_normal(shape).astype(np.float32)
                 for shape in ((8 // s, 8, 32, 32), (16, 8, 3, 3), (16,)))
    cnn = tuple(rng.standard_normal(shape).astype(np.float32) * scale
                for shape, scale in (((64 // s, 3, 32, 32), 1), ((16, 3, 3, 3), 0.3), ((16,), 0.1),
                                     ((16 * 15 * 15, 10), 0.02), ((10,), 0.1)))
    fractal = (-2.0, 1.0, -1.0, 1.0, np.zeros((1000 // s, 1500 // s), np.uint8), 20)   # Numba's documentation's size
    nc = 100_000 // s   # a Crank-Nicolson step's complex tridiagonal system
    off = np.full(nc, -0.15j)
    tridiagonal = (off, np.full(nc, 1 + 0.3j), off.copy(), rng.standard_normal(nc) + 1j * rng.standard_normal(nc))
    signal = rng.standard_normal(2000 // s) + 1j * rng.standard_normal(2000 // s)
    torch_conv = torch_cnn = None
    if torch is not None:
        torch_conv = (conv2d_torch, tuple(torch.from_numpy(a) for a in conv))   # (in _torch_column's child)
        torch_cnn = (cnn_forward_torch, tuple(torch.from_numpy(np.ascontiguousarray(a.T) if k == 3 else a)
                                              for k, a in enumerate(cnn)))
    return [
        ("heat_1d", heat_1d, heat_1d_nb, (rng.random(100_000 // s), 1000 // s, 0.2), None, 1e-9),
        ("jacobi_2d", corpus_loops.jacobi_2d, jacobi_2d_nb, (200 // s, A2, A2.copy()), None, 1e-9),
        ("gramschmidt", corpus_loops.gramschmidt, gramschmidt_nb, (G,), None, 1e-7),
        ("floyd_warshall", floyd_warshall, floyd_warshall_nb, (P,), None, 0),
        ("trisolv", corpus_loops.trisolv, trisolv_nb, (L, np.zeros(nt), rng.random(nt)), None, 1e-9),
        ("lu", corpus_loops.lu, lu_nb, (LU,), None, 1e-9),
        ("floyd_elements", floyd_warshall_elements, floyd_warshall_nb, (F_,), None, 0),
        ("edit_distance", numbers_and_loops.levenshtein, edit_distance_nb,
         (rng.integers(0, 4, ne), rng.integers(0, 4, ne)), None, 0),
        ("sum2d", corpus_loops.sum2d, sum2d_nb, (rng.random((1000 // s, 1000 // s)),), None, 1e-9),
        ("csr_matvec", corpus_loops.csr_matvec, csr_matvec_nb, csr, None, 1e-9),
        ("nbody", science.nbody, nbody_nb, nbody, None, 1e-4),   # (chaotic: orders of sums part over 1000 steps)
        ("cavity_flow", science.cavity_flow, cavity_flow_nb, cavity, None, 1e-7),
        ("conv2d", corpus_loops.conv2d, conv2d_nb, conv, torch_conv, 1e-4),
        ("cnn_forward", corpus_loops.cnn_forward, cnn_forward_nb, cnn, torch_cnn, 1e-4),
        ("mandelbrot", corpus_loops.create_fractal, create_fractal_nb, fractal, None, 0),
        ("tridiagonal_complex", complex_numbers.tridiagonal_solve, tridiagonal_nb, tridiagonal, None, 1e-9),
        ("dft_loops", complex_numbers.dft_loops, dft_loops_nb, (signal,), None, 1e-9),
    ]


def fresh(args: tuple) -> list:
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def outputs(fn, args: tuple) -> list[np.ndarray]:
    """What a call computes: its result(s), or for a procedure the arrays it assigned into."""
    copies = fresh(args)
    out = fn(*copies)
    if out is None:
        out = tuple(a for a in copies if isinstance(a, np.ndarray))
    out = out if isinstance(out, tuple) else (out,)
    return [o.numpy() if torch is not None and isinstance(o, torch.Tensor) else np.asarray(o) for o in out]


def wrong(got: list, expected: list, rtol: float) -> str | None:
    """Why `got` is not NumPy's result (values, within rtol of the largest magnitude, and dtypes), or None."""
    if len(got) != len(expected):
        return f"{len(got)} results, NumPy's {len(expected)}"
    for k, (g, e) in enumerate(zip(got, expected)):
        if g.shape != e.shape or g.dtype != e.dtype and not (g.dtype.kind == e.dtype.kind and g.dtype.kind in "fc"):
            return f"result {k}: {g.dtype}{list(g.shape)}, NumPy's {e.dtype}{list(e.shape)}"
        scale = max(float(np.abs(e).max()), 1.0) if e.size else 1.0
        wide = np.complex128 if "c" in (g.dtype.kind, e.dtype.kind) else np.float64   # (complex: both parts)
        err = float(np.abs(g.astype(wide) - e.astype(wide)).max()) if e.size else 0.0
        if not err <= rtol * scale:
            return f"result {k}: largest difference {err:.3g} (of values up to {scale:.3g})"
    return None


def median_seconds(fn, args: tuple, budget_s: float) -> float:
    times, start = [], time.perf_counter()
    while len(times) < 3 or (time.perf_counter() - start < budget_s and len(times) < 100):
        copies = fresh(args)
        t0 = time.perf_counter()
        out = fn(*copies)
        np.asarray(out[0] if isinstance(out, tuple) else out)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


class _Loops(logging.Handler):
    """Counts the loops compiled as loops and those traced step by step (TRACEJIT_DEBUG=1's messages)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.compiled = self.stepped = self.elements = 0

    def emit(self, record):
        message = record.getMessage()
        self.compiled += "compiled as a loop" in message
        self.stepped += "traced step by step" in message
        self.elements += "is a loop over elements" in message


def _torch_column(quick: bool, names: list[str]) -> tuple[dict, list, str]:
    """The torch column of these rows, timed in a child process: importing torch in this one (its OpenMP
    runtime, whose threads spin after a call) slowed Numba's prange and tracejit's threads on 2 cores, 20x for
    the CSR product's Numba peer. {row: ms or None}, the wrong results, torch's version and threads."""
    command = [sys.executable, __file__, "--torch-column", "--rows", ",".join(names)] + (["--quick"] if quick else [])
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    found = json.loads(done.stdout)
    return found["ms"], found["problems"], found["version"]


def _time_torch(opts, budget: float) -> None:
    """The child process of _torch_column: prints the torch column as JSON."""
    global torch, F
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(numba.get_num_threads())   # as many threads as tracejit's and Numba's
    found = {"ms": {}, "problems": [], "version": f"torch {torch.__version__} ({torch.get_num_threads()} threads)"}
    for name, fn, _, args, torch_case, rtol in cases(opts.quick):
        if torch_case is None or opts.rows and name not in opts.rows.split(","):
            continue
        why = wrong(outputs(*torch_case), outputs(fn, args), rtol)
        if why is not None:
            found["problems"].append(f"{name}, torch: wrong, {why}")
        found["ms"][name] = None if why else 1e3 * median_seconds(*torch_case, budget)
    print(json.dumps(found))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller sizes, shorter budgets: a smoke test")
    ap.add_argument("--rows", help="comma-separated row names (default: all)")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--torch-column", action="store_true", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    budget = 0.3 if opts.quick else 2.0
    if opts.torch_column:
        _time_torch(opts, budget)
        return
    rows, problems = [], []
    for name, fn, nb, args, _, rtol in cases(opts.quick):
        if opts.rows and name not in opts.rows.split(","):
            continue
        expected = outputs(fn, args)
        nb(*fresh(args))   # (compiled, or loaded from numba's cache)
        kernel = tj.kernel(fn)
        handler = _Loops()
        logger = logging.getLogger("tracejit.compile")
        logger.addHandler(handler)
        tj.set_debug(1)
        try:
            t0 = time.perf_counter()
            kernel(*fresh(args))
            first = time.perf_counter() - t0
        finally:
            tj.set_debug(0)
            logger.removeHandler(handler)
        row = {"program": name}
        for column, f in (("numpy", fn), ("numba", nb), ("tracejit", kernel)):
            why = None if column == "numpy" else wrong(outputs(f, args), expected, rtol)
            if why is not None:
                problems.append(f"{name}, {column}: wrong, {why}")
            row[f"{column}_ms"] = None if why else 1e3 * median_seconds(f, args, budget)
        row.update(first_call_s=first,
                   loops=f"{handler.compiled} loop, {handler.stepped} steps, {handler.elements} over elements",
                   kernels=kernel.cache_info()["compiles"] + kernel.cache_info()["disk_hits"])
        rows.append(row)
        print(f"  {name}: done", file=sys.stderr)
    torch_version = "torch: not installed"
    if importlib.util.find_spec("torch") is not None:
        column, wrong_torch, torch_version = _torch_column(opts.quick, [r["program"] for r in rows])
        problems += wrong_torch
        for r in rows:
            if r["program"] in column:
                r["torch_ms"] = column[r["program"]]
    print(f"{platform.processor() or platform.machine()}, NumPy {np.__version__}, Numba {numba.__version__} "
          f"({numba.get_num_threads()} threads), "
          + f"{torch_version}, tracejit {tj.__version__}; tracejit on its numba device")
    print(f"{'program':15s} {'numpy ms':>9s} {'numba ms':>9s} {'torch ms':>9s} {'tracejit ms':>11s} {'first s':>8s} "
          f"{'vs numpy':>8s} {'vs numba':>8s} {'vs torch':>8s} {'kernels':>7s}  how the loops ran")

    def ms(v):
        return f"{v:9.3f}" if v is not None else f"{'-':>9s}"

    def ratio(r, column):
        if r.get(f"{column}_ms") is None or not r["tracejit_ms"]:
            return None
        return r[f"{column}_ms"] / r["tracejit_ms"]

    def shown(v):
        return f"{v:7.2f}x" if v is not None else f"{'-':>8s}"

    for r in rows:
        print(f"{r['program']:15s} {ms(r['numpy_ms'])} {ms(r['numba_ms'])} {ms(r.get('torch_ms'))} "
              f"{ms(r['tracejit_ms']):>11s} {r['first_call_s']:8.2f} {shown(ratio(r, 'numpy'))} "
              f"{shown(ratio(r, 'numba'))} {shown(ratio(r, 'torch'))} {r['kernels']:7d}  {r['loops']}")
    for column in ("numba", "numpy", "torch"):
        ratios = [v for v in (ratio(r, column) for r in rows) if v is not None]
        if ratios:
            mean = math.exp(sum(math.log(v) for v in ratios) / len(ratios))
            below = [r["program"] for r in rows if (ratio(r, column) or 1.0) < 1.0]
            print(f"geometric mean vs {column} over {len(ratios)} rows: {mean:.2f}x"
                  + (f"; below 1.0x: {', '.join(below)}" if below and column != "numpy" else ""))
    for p in problems:
        print(p)
    if opts.json:
        Path(opts.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
