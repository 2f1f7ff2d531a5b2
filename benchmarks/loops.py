"""Loop-heavy programs as NumPy users write them, decorated unchanged, against NumPy running the same code and
against the same algorithm written for numba.njit by a skilled user (loops, preallocated outputs), in one run.

Columns: NumPy, hand-written Numba and tracejit (numba device) steady-state medians; tracejit's first call
(trace and compile, in this process, caches warm from earlier rows); how the loops ran ("loop": compiled as a
loop, its kernels run once per step; "steps": traced step by step, see docs/guide/control-flow.md); and the
ratios (above 1: tracejit is faster).

    .venv/bin/python benchmarks/loops.py [--quick] [--rows heat_1d,jacobi_2d] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import logging
import platform
import statistics
import sys
import time
from pathlib import Path

import numba
import numpy as np

import tracejit as tj

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from corpus import loops as corpus_loops  # noqa: E402
from corpus import numbers_and_loops  # noqa: E402


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


# --- cases --------------------------------------------------------------------------------------------------------

def cases(quick: bool) -> list:
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
    F = rng.integers(1, 100, (120 // s, 120 // s)).astype(np.float64)
    ne = 2000 // s
    indptr = np.concatenate([[0], np.cumsum((dense != 0).sum(1))]).astype(np.int64)
    csr = (indptr, np.nonzero(dense)[1].astype(np.int64), dense[dense != 0], rng.random(dense.shape[1]))
    return [
        ("heat_1d", heat_1d, heat_1d_nb, (rng.random(100_000 // s), 1000 // s, 0.2)),
        ("jacobi_2d", corpus_loops.jacobi_2d, jacobi_2d_nb, (200 // s, A2, A2.copy())),
        ("gramschmidt", corpus_loops.gramschmidt, gramschmidt_nb, (G,)),
        ("floyd_warshall", floyd_warshall, floyd_warshall_nb, (P,)),
        ("trisolv", corpus_loops.trisolv, trisolv_nb, (L, np.zeros(nt), rng.random(nt))),
        ("lu", corpus_loops.lu, lu_nb, (LU,)),
        ("floyd_elements", floyd_warshall_elements, floyd_warshall_nb, (F,)),
        ("edit_distance", numbers_and_loops.levenshtein, edit_distance_nb, (rng.integers(0, 4, ne), rng.integers(0, 4, ne))),
        ("sum2d", corpus_loops.sum2d, sum2d_nb, (rng.random((1000 // s, 1000 // s)),)),
        ("csr_matvec", corpus_loops.csr_matvec, csr_matvec_nb, csr),
    ]


def fresh(args: tuple) -> list:
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller sizes, shorter budgets: a smoke test")
    ap.add_argument("--rows", help="comma-separated row names (default: all)")
    ap.add_argument("--json", help="also write the results here")
    opts = ap.parse_args()
    budget = 0.3 if opts.quick else 2.0
    rows = []
    for name, fn, nb, args in cases(opts.quick):
        if opts.rows and name not in opts.rows.split(","):
            continue
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
        row = {
            "program": name,
            "numpy_ms": 1e3 * median_seconds(fn, args, budget),
            "numba_ms": 1e3 * median_seconds(nb, args, budget),
            "tracejit_ms": 1e3 * median_seconds(kernel, args, budget),
            "first_call_s": first,
            "loops": f"{handler.compiled} loop, {handler.stepped} steps, {handler.elements} over elements",
            "kernels": kernel.cache_info()["compiles"] + kernel.cache_info()["disk_hits"],
        }
        rows.append(row)
        print(f"  {name}: done", file=sys.stderr)
    print(f"{platform.processor() or platform.machine()}, NumPy {np.__version__}, Numba {numba.__version__}, "
          f"tracejit {tj.__version__}; tracejit on its numba device")
    print(f"{'program':15s} {'numpy ms':>9s} {'numba ms':>9s} {'tracejit ms':>11s} {'first s':>8s} "
          f"{'vs numpy':>8s} {'vs numba':>8s} {'kernels':>7s}  how the loops ran")
    for r in rows:
        print(f"{r['program']:15s} {r['numpy_ms']:9.3f} {r['numba_ms']:9.3f} {r['tracejit_ms']:11.3f} "
              f"{r['first_call_s']:8.2f} {r['numpy_ms'] / r['tracejit_ms']:7.2f}x {r['numba_ms'] / r['tracejit_ms']:7.2f}x "
              f"{r['kernels']:7d}  {r['loops']}")
    if opts.json:
        Path(opts.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
