"""Times tracejit (numba device, and opencl and webgpu where present) against NumPy, numexpr and hand-written Numba
on common array kernels.

One process, one run, one table of medians. See benchmarks/README.md for what each row and column means.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numba
import numexpr as ne
import numpy as np
from numba import prange

import tracejit as tj

F32 = np.float32
# Float32 constants: numexpr and Numba treat float literals as float64 and would compute in float64,
# while NumPy (NEP 50) and tracejit compute in float32.
HALF, GELU_C, GELU_K = F32(0.5), F32(0.7978845608028654), F32(0.044715)
TWO, THREE = F32(2.0), F32(3.0)

# ---- tracejit: the kernels are plain NumPy code, exactly as a user writes them ----

@tj.kernel
def gelu(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))


@tj.kernel
def axpbz(x, z):
    return 2.0 * x + 3.0 * z + 1


@tj.kernel
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@tj.kernel
def layernorm(x):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5)


@tj.kernel
def rmsnorm(x):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6)


@tj.kernel
def total(x):
    return x.sum()


@tj.kernel
def transpose_add(x, y):
    return x.T + y


@tj.kernel
def matmul(a, b):
    return a @ b


@tj.kernel
def linear_gelu(x, w, b):   # a transformer's FFN up-projection: x @ w + b, then GELU (tanh form)
    h = x @ w + b
    return 0.5 * h * (1 + np.tanh(0.7978845608028654 * (h + 0.044715 * h**3)))


def linear_gelu_numpy(x, w, b):
    h = x @ w + b
    return 0.5 * h * (1 + np.tanh(0.7978845608028654 * (h + 0.044715 * h**3)))


@tj.kernel
def scale_shift(x):
    return x * 2 + 1


# ---- NumPy: the same code, run eagerly; also the reference every other column is checked against ----

def softmax_numpy(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm_numpy(x):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5)


# ---- numexpr: whole expressions where it can; row reductions by NumPy (numexpr's are single-threaded) ----

def softmax_numexpr(x):
    m = x.max(axis=-1, keepdims=True)
    e = ne.evaluate("exp(x - m)")
    s = e.sum(axis=-1, keepdims=True)
    return ne.evaluate("e / s")


def layernorm_numexpr(x):
    mean = x.mean(axis=-1, keepdims=True)
    d = ne.evaluate("x - mean")
    var = ne.evaluate("d * d").mean(axis=-1, keepdims=True)
    eps = F32(1e-5)
    return ne.evaluate("d / sqrt(var + eps)")


def rmsnorm_numexpr(x):
    ms = ne.evaluate("x * x").mean(axis=-1, keepdims=True)
    eps = F32(1e-6)
    return ne.evaluate("x / sqrt(ms + eps)")


# ---- hand-written Numba: the obvious parallel loops, one row per prange iteration ----

@numba.njit(parallel=True, fastmath=False)
def gelu_numba(x):
    out = np.empty_like(x)
    for i in prange(x.size):
        v = x[i]
        out[i] = HALF * v * (1 + np.tanh(GELU_C * (v + GELU_K * v * v * v)))
    return out


@numba.njit(parallel=True, fastmath=False)
def axpbz_numba(x, z):
    out = np.empty_like(x)
    for i in prange(x.size):
        out[i] = TWO * x[i] + THREE * z[i] + 1
    return out


@numba.njit(parallel=True, fastmath=False)
def softmax_numba(x):
    out = np.empty_like(x)
    for i in prange(x.shape[0]):
        m = x[i, 0]
        for j in range(1, x.shape[1]):
            m = max(m, x[i, j])
        s = 0.0
        for j in range(x.shape[1]):
            e = np.exp(x[i, j] - m)
            out[i, j] = e
            s += e
        for j in range(x.shape[1]):
            out[i, j] /= s
    return out


@numba.njit(parallel=True, fastmath=False)
def layernorm_numba(x):
    out = np.empty_like(x)
    n = x.shape[1]
    for i in prange(x.shape[0]):
        mean = 0.0
        for j in range(n):
            mean += x[i, j]
        mean /= n
        var = 0.0
        for j in range(n):
            var += (x[i, j] - mean) ** 2
        inv = 1.0 / np.sqrt(var / n + 1e-5)
        for j in range(n):
            out[i, j] = (x[i, j] - mean) * inv
    return out


@numba.njit(parallel=True, fastmath=False)
def rmsnorm_numba(x):
    out = np.empty_like(x)
    n = x.shape[1]
    for i in prange(x.shape[0]):
        ss = 0.0
        for j in range(n):
            ss += x[i, j] * x[i, j]
        inv = 1.0 / np.sqrt(ss / n + 1e-6)
        for j in range(n):
            out[i, j] = x[i, j] * inv
    return out


@numba.njit(parallel=True, fastmath=False)
def total_numba(x):
    s = 0.0
    for i in prange(x.size):
        s += x[i]
    return s


@numba.njit(parallel=True, fastmath=False)
def transpose_add_numba(x, y):
    out = np.empty((x.shape[1], x.shape[0]), dtype=x.dtype)
    for i in prange(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = x[j, i] + y[i, j]
    return out


@numba.njit(parallel=True, fastmath=False)
def matmul_numba(a, b):
    out = np.zeros((a.shape[0], b.shape[1]), dtype=a.dtype)
    for i in prange(a.shape[0]):  # i-k-j order: the inner loop is unit-stride and vectorises
        for k in range(a.shape[1]):
            aik = a[i, k]
            for j in range(b.shape[1]):
                out[i, j] += aik * b[k, j]
    return out


@numba.njit(parallel=True, fastmath=False)
def scale_shift_numba(x):
    out = np.empty_like(x)
    for i in prange(x.size):
        out[i] = x[i] * 2 + 1
    return out


# ---- the benchmark table ----

RNG = np.random.default_rng(0)
M16 = 16 * 2**20


def normal(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape, dtype=np.float32)


def two_squares(divisor: int) -> tuple:
    n = 4096 // math.isqrt(divisor)
    return normal(n, n), normal(n, n)


@dataclass(frozen=True)
class Case:
    name: str
    setup: Callable[[int], tuple]  # size divisor (1, or 16 with --quick) -> input arrays
    impls: dict[str, Callable]     # column -> implementation; "numpy" is the reference
    unit: str = "ms"
    tolerance: tuple[float, float] = (1e-4, 1e-5)  # rtol, atol against NumPy; reductions may reassociate


CASES = [
    Case("gelu", lambda d: (normal(M16 // d),), {
        "tracejit": gelu,
        "numpy": lambda x: 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3))),
        "numexpr": lambda x: ne.evaluate("HALF * x * (1 + tanh(GELU_C * (x + GELU_K * x**3)))"),
        "numba": gelu_numba}),
    Case("axpbz", lambda d: (normal(M16 // d), normal(M16 // d)), {
        "tracejit": axpbz,
        "numpy": lambda x, z: 2.0 * x + 3.0 * z + 1,
        "numexpr": lambda x, z: ne.evaluate("TWO * x + THREE * z + 1"),
        "numba": axpbz_numba}),
    Case("softmax", lambda d: (normal(4096 // d, 1024),), {
        "tracejit": softmax, "numpy": softmax_numpy, "numexpr": softmax_numexpr, "numba": softmax_numba}),
    Case("layernorm", lambda d: (normal(4096 // d, 1024),), {
        "tracejit": layernorm, "numpy": layernorm_numpy, "numexpr": layernorm_numexpr, "numba": layernorm_numba}),
    Case("rmsnorm", lambda d: (normal(4096 // d, 1024),), {
        "tracejit": rmsnorm,
        "numpy": lambda x: x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6),
        "numexpr": rmsnorm_numexpr,
        "numba": rmsnorm_numba}),
    Case("sum", lambda d: (RNG.random(M16 // d, dtype=np.float32),), {
        "tracejit": total, "numpy": np.sum, "numexpr": lambda x: ne.evaluate("sum(x)"), "numba": total_numba}),
    Case("transpose_add", two_squares, {
        "tracejit": transpose_add,
        "numpy": lambda x, y: x.T + y,
        "numexpr": lambda x, y: ne.evaluate("xt + y", local_dict={"xt": x.T, "y": y}),
        "numba": transpose_add_numba}),
    Case("matmul", lambda d: (normal(1024 // math.isqrt(d), 1024), normal(1024, 1024 // math.isqrt(d))), {
        "tracejit": matmul, "numpy": np.matmul, "numba": matmul_numba},
        tolerance=(1e-3, 1e-3)),  # 1024-term float32 dot products of magnitude ~30
    Case("linear_gelu", lambda d: (normal(64, 256), normal(256, 768), normal(768)), {
        "tracejit": linear_gelu, "numpy": linear_gelu_numpy,
        "numba": lambda x, w, b: gelu_numba((np.matmul(x, w) + b).reshape(-1)).reshape(len(x), -1)},  # BLAS + GELU
        tolerance=(1e-3, 1e-3)),
    Case("dispatch", lambda d: (normal(16),), {
        "tracejit": scale_shift,
        "numpy": lambda x: x * 2 + 1,
        "numexpr": lambda x: ne.evaluate("x * 2 + 1"),
        "numba": scale_shift_numba}, unit="us"),
]
DEVICE_COLUMNS = [i.name for i in tj.devices() if i.name in ("opencl", "webgpu") and i.available]


def on_device(kernel: Callable, device: str) -> Callable:
    """tracejit on another device, inputs already resident there (uploaded once, as a chain of kernels
    would leave them); each timed call waits for the kernel to finish."""
    resident: dict[int, tuple] = {}

    def call(*inputs):
        args = []
        for x in inputs:
            if id(x) not in resident:
                resident[id(x)] = (x, tj.asarray(x, device=device))
            args.append(resident[id(x)][1])
        out = kernel(*args, device=device)
        tj.synchronize(device)
        return out
    return call


for _case in CASES:
    for _device in DEVICE_COLUMNS:
        _case.impls[_device] = on_device(_case.impls["tracejit"], _device)
COLUMNS = ["tracejit", "opencl", "webgpu", "numpy", "numexpr", "numba"]
UNIT_SCALE = {"ms": 1e3, "us": 1e6}


def seconds_per_call(fn: Callable, args: tuple, batch: int) -> float:
    start = time.perf_counter()
    for _ in range(batch):
        fn(*args)
    return (time.perf_counter() - start) / batch


def run_case(case: Case, divisor: int, budget_s: float) -> dict:
    """Checks every column against NumPy once, then times them round-robin, so load that drifts on a busy
    machine falls on all columns alike. Each sample follows an untimed call of the same function: the first
    call after another column's is slower (allocator and cache state). Calls under ~1 ms are batched."""
    inputs = case.setup(divisor)
    reference = np.asarray(case.impls["numpy"](*inputs))
    cells, batch, times, round_s = {}, {}, {}, 0.0
    for column, fn in case.impls.items():
        cells[column] = {"seconds": None, "samples": 0, "ok": False, "error": None}
        try:  # a broken implementation is a cell in the table, not a crash
            result = np.asarray(fn(*inputs))  # first call: compiles where there is a compiler
            same = result.shape == reference.shape and np.allclose(result, reference, *case.tolerance)
            cells[column]["ok"] = bool(same)
            fn(*inputs)  # the second call takes the cached path; warm it up before timing it
            once = max(seconds_per_call(fn, inputs, 1), 1e-7)
            batch[column] = max(1, int(1e-3 / once))
            round_s += once * batch[column]
            times[column] = []
        except Exception as exc:
            cells[column]["error"] = f"{type(exc).__name__}: {exc}"
    for _ in range(int(min(max(budget_s * len(batch) / max(round_s, 1e-9), 5), 200))):
        for column in list(times):
            try:
                case.impls[column](*inputs)
                times[column].append(seconds_per_call(case.impls[column], inputs, batch[column]))
            except Exception as exc:
                cells[column]["error"] = f"{type(exc).__name__}: {exc}"
                del times[column]
    for column, samples in times.items():
        cells[column].update(seconds=statistics.median(samples), samples=len(samples))
    return {"case": case.name, "shape": "x".join(map(shape_label, inputs[0].shape)), "unit": case.unit,
            "cells": cells, "ratios": {f"{other}/tracejit": ratio(cells, other) for other in ("numpy", "numba")}}


def shape_label(n: int) -> str:
    return f"{n // 2**20}M" if n >= 2**20 and n % 2**20 == 0 else str(n)


def ratio(cells: dict, other: str) -> float | None:
    ours, theirs = cells.get("tracejit"), cells.get(other)
    usable = [c for c in (ours, theirs) if c and c["ok"] and c["seconds"]]
    return theirs["seconds"] / ours["seconds"] if len(usable) == 2 else None


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [ln.split(":", 1)[1].strip() for ln in cpuinfo.read_text().splitlines() if ln.startswith("model name")]
        cpu = names[0] if names else cpu
    return {
        "cpu": cpu, "uname": " ".join(platform.uname()), "cpu_count": os.cpu_count(),
        "python": platform.python_version(), "numpy": np.__version__, "numexpr": ne.__version__,
        "numba": numba.__version__, "numba_threads": numba.get_num_threads(), "numexpr_threads": ne.nthreads,
        "tracejit": getattr(tj, "__version__", "unknown"),
    }


def format_cell(cell: dict, unit: str) -> str:
    if cell["error"]:
        return "error"
    value = cell["seconds"] * UNIT_SCALE[unit]
    return (f"{value:.0f}" if value >= 100 else f"{value:.3g}") + ("" if cell["ok"] else "!")


def print_row(result: dict) -> None:
    cells = [format_cell(result["cells"][c], result["unit"]) if c in result["cells"] else "-" for c in COLUMNS]
    ratios = [f"{r:.2f}x" if r is not None else "-" for r in result["ratios"].values()]
    print(f"{result['case']:<14}{result['shape']:>11}{result['unit']:>5}"
          + "".join(f"{c:>10}" for c in cells) + "".join(f"{r:>16}" for r in ratios), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="sizes / 16 and fewer repetitions")
    parser.add_argument("--rows", help="comma-separated case names: " + ",".join(c.name for c in CASES))
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    args = parser.parse_args(argv)

    cases = CASES
    if args.rows:
        wanted = args.rows.split(",")
        unknown = set(wanted) - {c.name for c in CASES}
        if unknown:
            parser.error(f"unknown rows {sorted(unknown)}; choose from {[c.name for c in CASES]}")
        cases = [c for c in CASES if c.name in wanted]
    divisor, budget_s = (16, 0.1) if args.quick else (1, 0.5)

    info = machine()
    for key, value in info.items():
        print(f"{key:>16}: {value}")
    print()
    print(f"{'case':<14}{'shape':>11}{'unit':>5}" + "".join(f"{c:>10}" for c in COLUMNS)
          + f"{'numpy/tracejit':>16}{'numba/tracejit':>16}")
    results = []
    for case in cases:
        results.append(run_case(case, divisor, budget_s))
        print_row(results[-1])

    print("\nmedian time per call; ratios > 1 mean tracejit is faster; '!' = result differs from NumPy")
    for result in results:
        for column, cell in result["cells"].items():
            if cell["error"]:
                print(f"  {result['case']} / {column}: {cell['error']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"machine": info, "quick": args.quick, "results": results}, indent=2))
        print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
