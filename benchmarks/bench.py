"""Times tracejit (numba device, and opencl and webgpu where present) against NumPy, numexpr, hand-written Numba
and, when PyTorch is installed, torch eager and torch.compile: common array kernels and transformer layers.

One process, one run, one table of medians and ratios; with --first-call, a second table of the first call
of each kernel in a fresh process with cold caches. See benchmarks/README.md for the rows and columns.
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import first_call
import hand_numba
import numba
import numexpr as ne
import numpy as np
from kernels import (axpbz, gelu, layernorm, linear_gelu, linear_gelu_numpy, matmul, rmsnorm, scale_shift, softmax,
                     total, transpose_add)
from models import MODELS

import tracejit as tj

try:
    import torch_peers
    TORCH_INFO = torch_peers.setup(threads=numba.get_num_threads())   # as many threads as tracejit's numba
except ImportError as missing:   # the torch columns are optional: pip install -e ".[bench]"
    torch_peers, TORCH_INFO = None, {"torch": f"not installed ({missing}): no torch columns"}

F32 = np.float32
# Float32 constants: numexpr treats float literals as float64 and would compute in float64, while NumPy
# (NEP 50) and tracejit compute in float32.
HALF, GELU_C, GELU_K = F32(0.5), F32(0.7978845608028654), F32(0.044715)
TWO, THREE = F32(2.0), F32(3.0)

# ---- tracejit: kernels.py, plain NumPy code exactly as a user writes it ----

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
    static: dict = field(default_factory=dict)     # keyword arguments every column's function takes


KERNEL_CASES = [
    Case("gelu", lambda d: (normal(M16 // d),), {
        "tracejit": gelu,
        "numpy": lambda x: 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3))),
        "numexpr": lambda x: ne.evaluate("HALF * x * (1 + tanh(GELU_C * (x + GELU_K * x**3)))")}),
    Case("axpbz", lambda d: (normal(M16 // d), normal(M16 // d)), {
        "tracejit": axpbz,
        "numpy": lambda x, z: 2.0 * x + 3.0 * z + 1,
        "numexpr": lambda x, z: ne.evaluate("TWO * x + THREE * z + 1")}),
    Case("softmax", lambda d: (normal(4096 // d, 1024),), {
        "tracejit": softmax, "numpy": softmax_numpy, "numexpr": softmax_numexpr}),
    Case("layernorm", lambda d: (normal(4096 // d, 1024),), {
        "tracejit": layernorm, "numpy": layernorm_numpy, "numexpr": layernorm_numexpr}),
    Case("rmsnorm", lambda d: (normal(4096 // d, 1024),), {
        "tracejit": rmsnorm,
        "numpy": lambda x: x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6),
        "numexpr": rmsnorm_numexpr}),
    Case("sum", lambda d: (RNG.random(M16 // d, dtype=np.float32),), {
        "tracejit": total, "numpy": np.sum, "numexpr": lambda x: ne.evaluate("sum(x)")}),
    Case("transpose_add", two_squares, {
        "tracejit": transpose_add,
        "numpy": lambda x, y: x.T + y,
        "numexpr": lambda x, y: ne.evaluate("xt + y", local_dict={"xt": x.T, "y": y})}),
    Case("matmul", lambda d: (normal(1024 // math.isqrt(d), 1024), normal(1024, 1024 // math.isqrt(d))), {
        "tracejit": matmul, "numpy": np.matmul},
        tolerance=(1e-3, 1e-3)),  # 1024-term float32 dot products of magnitude ~30
    Case("linear_gelu", lambda d: (normal(64, 256), normal(256, 768), normal(768)), {
        "tracejit": linear_gelu, "numpy": linear_gelu_numpy},
        tolerance=(1e-3, 1e-3)),
    Case("dispatch", lambda d: (normal(16),), {
        "tracejit": scale_shift,
        "numpy": lambda x: x * 2 + 1,
        "numexpr": lambda x: ne.evaluate("x * 2 + 1")}, unit="us"),
]
for _case in KERNEL_CASES:
    _case.impls["numba"] = hand_numba.PEERS[_case.name]

# The model rows run the NumPy code unchanged under tj.kernel; the size divisor does not apply.
MODEL_CASES = [
    Case(m.name, lambda d, m=m: m.inputs(np.random.default_rng(0)), {
        "tracejit": functools.partial(tj.kernel(static=tuple(m.static))(m.function), **m.static),
        "numpy": functools.partial(m.function, **m.static)},
        tolerance=(1e-3, 1e-4), static=m.static)
    for m in MODELS
]
CASES = KERNEL_CASES + MODEL_CASES
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
    if torch_peers:
        _case.impls.update(torch_peers.columns(_case.name, _case.static))
COLUMNS = ["tracejit", "opencl", "webgpu", "numpy", "numexpr", "numba", "torch", "compile"]
RATIOS = ("numpy", "numba", "torch", "compile")   # each: its time over tracejit's
SIDE_COLUMNS = ("torch_np",)   # a few rows only, printed under the table (torch_peers.NUMPY_DTYPES)
FIRST_CALL_COLUMNS = ("tracejit", "numba", "compile")
UNIT_SCALE = {"ms": 1e3, "us": 1e6}


def seconds_per_call(fn: Callable, args: tuple, batch: int) -> float:
    start = time.perf_counter()
    for _ in range(batch):
        fn(*args)
    return (time.perf_counter() - start) / batch


def check(case: Case, result, reference: np.ndarray) -> str | None:
    """None when `result` matches NumPy's within the row's tolerance, else what differs."""
    result = np.asarray(result)
    if result.shape != reference.shape:
        return f"shape {result.shape}, NumPy's is {reference.shape}"
    if not np.allclose(result, reference, *case.tolerance):
        return f"differs from NumPy: max abs error {np.max(np.abs(result - reference)):.3g}"
    return None


# Columns take turns in passes, each column timing a run of samples at a time, after SETTLE_S of its own
# untimed calls: a column's threads that spin-wait after their work (torch's libgomp spins ~15 ms,
# OpenBLAS longer) halved the speed of the next column's threads on 2 cores when the columns alternated
# call by call (softmax: 1.9 -> 3.6 ms). Sleeping instead was no better: on this VM the cores come back
# from an idle sleep slow (softmax 2.0 ms after no pause, 2.6 after 0.5 s asleep).
PASSES = 5
SETTLE_S = 0.05


def run_case(case: Case, divisor: int, budget_s: float) -> dict:
    """Checks every column against NumPy once (a wrong answer is reported, never timed), then times them
    in PASSES turns, so load that drifts on a busy machine falls on all columns alike. Each turn begins
    with SETTLE_S (at least one call) of untimed calls of the same function: the first calls after
    another column's are slower (spinning threads, allocator and cache state). Calls under ~1 ms are
    batched."""
    inputs = case.setup(divisor)
    reference = np.asarray(case.impls["numpy"](*inputs))
    cells, batch, times, round_s = {}, {}, {}, 0.0
    for column, fn in case.impls.items():
        cells[column] = {"seconds": None, "samples": 0, "ok": False, "error": None}
        try:  # a broken implementation is a cell in the table, not a crash
            wrong = check(case, fn(*inputs), reference)  # first call: compiles where there is a compiler
            if wrong:
                cells[column]["error"] = f"wrong result: {wrong}"
                continue
            cells[column]["ok"] = True
            fn(*inputs)  # the second call takes the cached path; warm it up before timing it
            once = max(seconds_per_call(fn, inputs, 1), 1e-7)
            batch[column] = max(1, int(1e-3 / once))
            round_s += once * batch[column]
            times[column] = []
        except Exception as exc:
            cells[column]["error"] = f"{type(exc).__name__}: {exc}"
    rounds = int(min(max(budget_s * len(batch) / max(round_s, 1e-9), 5), 200))
    for p in range(PASSES):
        for column in list(times):
            try:
                settled = time.perf_counter() + SETTLE_S   # untimed calls while the last column's threads
                case.impls[column](*inputs)                 # stop spinning (libgomp's, OpenBLAS's)
                while time.perf_counter() < settled:
                    case.impls[column](*inputs)
                for _ in range(rounds * (p + 1) // PASSES - rounds * p // PASSES):
                    times[column].append(seconds_per_call(case.impls[column], inputs, batch[column]))
            except Exception as exc:
                cells[column].update(ok=False, error=f"{type(exc).__name__}: {exc}")
                del times[column]
    for column, samples in times.items():
        cells[column].update(seconds=statistics.median(samples), samples=len(samples))
    return {"case": case.name, "shape": "x".join(map(shape_label, inputs[0].shape)), "unit": case.unit,
            "dtype": str(reference.dtype), "cells": cells,
            "ratios": {f"{other}/tracejit": ratio(cells, other) for other in RATIOS + SIDE_COLUMNS}}


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
    info = {
        "cpu": cpu, "uname": " ".join(platform.uname()), "cpu_count": os.cpu_count(),
        "python": platform.python_version(), "numpy": np.__version__, "numexpr": ne.__version__,
        "numba": numba.__version__, "numba_threads": numba.get_num_threads(), "numexpr_threads": ne.nthreads,
        "tracejit": getattr(tj, "__version__", "unknown"),
    }
    return info | TORCH_INFO


def format_cell(cell: dict, unit: str) -> str:
    if cell["error"]:
        return "wrong" if cell["error"].startswith("wrong") else "error"
    value = cell["seconds"] * UNIT_SCALE[unit]
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def print_row(result: dict) -> None:
    cells = [format_cell(result["cells"][c], result["unit"]) if c in result["cells"] else "-" for c in COLUMNS]
    ratios = [f"{r:.2f}x" if r is not None else "-" for r in (result["ratios"][f"{o}/tracejit"] for o in RATIOS)]
    print(f"{result['case']:<14}{result['shape']:>11}{result['unit']:>5}"
          + "".join(f"{c:>10}" for c in cells) + "".join(f"{r:>17}" for r in ratios), flush=True)


def side_table(results: list[dict]) -> None:
    """The rows whose NumPy code computes in float64, against torch eager computing the same dtypes."""
    rows = [r for r in results if "torch_np" in r["cells"]]
    if not rows:
        return
    print("\nrows whose NumPy code promotes to float64: torch eager in NumPy's dtypes (torch_np)\n"
          f"{'case':<14}{'unit':>5}{'tracejit':>10}{'torch':>10}{'torch_np':>10}{'torch_np/tracejit':>19}")
    for r in rows:
        cells = [format_cell(r["cells"][c], r["unit"]) for c in ("tracejit", "torch", "torch_np")]
        same = r["ratios"]["torch_np/tracejit"]
        print(f"{r['case']:<14}{r['unit']:>5}" + "".join(f"{c:>10}" for c in cells)
              + f"{(f'{same:.2f}x' if same is not None else '-'):>19}", flush=True)


def first_call_table(cases: list[Case], divisor: int) -> dict:
    """The first call of each row's kernel in a fresh process with cold caches (benchmarks/first_call.py):
    tracejit's trace and compile, Numba's njit compile, torch.compile's Dynamo and Inductor compile."""
    print(f"\nfirst call in a fresh process, cold caches, seconds\n{'case':<14}"
          + "".join(f"{c:>10}" for c in FIRST_CALL_COLUMNS))
    table = {}
    for case in cases:
        row = {}
        for column in FIRST_CALL_COLUMNS:
            if column in case.impls:
                try:
                    row[column] = first_call.cold_first_call(case.name, column, divisor)
                except RuntimeError as exc:
                    row[column] = None
                    print(f"  {case.name} / {column}: {str(exc).strip().splitlines()[-1]}")
        table[case.name] = row
        print(f"{case.name:<14}" + "".join(f"{row[c]:>10.3g}" if row.get(c) is not None else f"{'-':>10}"
                                             for c in FIRST_CALL_COLUMNS), flush=True)
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="sizes / 16 and fewer repetitions")
    parser.add_argument("--rows", help="comma-separated case names: " + ",".join(c.name for c in CASES))
    parser.add_argument("--first-call", action="store_true",
                        help="also time each row's first call in a fresh process with cold caches (slow)")
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
          + "".join(f"{other + '/tracejit':>17}" for other in RATIOS))
    results = []
    for case in cases:
        results.append(run_case(case, divisor, budget_s))
        print_row(results[-1])

    print("\nmedian time per call; ratios: the other column's time over tracejit's (> 1: tracejit is faster)")
    for result in results:
        if result["dtype"] != "float32":
            print(f"  {result['case']}: NumPy's result is {result['dtype']}")
        for column, cell in result["cells"].items():
            if cell["error"]:
                print(f"  {result['case']} / {column}: {cell['error']}")
    side_table(results)
    first_calls = first_call_table(cases, divisor) if args.first_call else None
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"machine": info, "quick": args.quick, "results": results,
                                         "first_call_seconds": first_calls}, indent=2))
        print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
