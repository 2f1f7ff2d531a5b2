"""Times whole real programs from the test corpus (tests/corpus), decorated unchanged, against the same
code run by NumPy: the GPT-2 forward pass of picoGPT, and the stencils that update arrays in place.

One process, one run, one table of medians; the ratio column is NumPy's time over tracejit's (above 1:
tracejit is faster). Compile (first) calls are not timed.

    .venv/bin/python benchmarks/programs.py [--quick] [--devices numba,opencl] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

import tracejit as tj

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from corpus import benchmarks as corpus_benchmarks  # noqa: E402
from corpus import transformer  # noqa: E402


def gpt2_case(n_seq: int, n_embd: int, n_vocab: int, n_head: int):
    """picoGPT's forward pass (embeddings, one transformer block, final layer norm, tied projection),
    with GPT-2 small's width and head count."""
    rng = np.random.default_rng(0)
    f = lambda *s, scale=0.02: (rng.standard_normal(s) * scale).astype(np.float32)   # noqa: E731
    e = n_embd
    args = (rng.integers(0, n_vocab, n_seq), f(n_vocab, e), f(1024, e),
            f(e, 4 * e), f(4 * e), f(4 * e, e), f(e), f(e, 3 * e), f(3 * e), f(e, e), f(e),
            1 + f(e), f(e), 1 + f(e), f(e), 1 + f(e), f(e))
    return transformer.gpt2_forward, args, {"n_head": n_head}


def stencil_cases(quick: bool) -> list:
    """The numpy-benchmarks stencils that update their arrays in place, at the sizes of numpy-benchmarks'
    own runs: diffusion on 1024x1024 (float32) for 10 steps, Gray-Scott on 280x280 (float64) for 40."""
    rng = np.random.default_rng(0)
    n, m = (256, 96) if quick else (1024, 280)
    u = rng.random((n, n)).astype(np.float32)
    ru, rv = rng.random((m, m)), rng.random((m, m))
    return [("diffusion", corpus_benchmarks.diffusion, (u, np.zeros_like(u)), {"iterNum": 10}),
            ("grayscott", corpus_benchmarks.grayscott, (0.16, 0.08, 0.04, 0.06, ru, rv), {"counts": 40})]


def median_seconds(fn: Callable, args: tuple, budget_s: float) -> float:
    fn(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])   # compile, warm caches
    times, start = [], time.perf_counter()
    while len(times) < 5 or (time.perf_counter() - start < budget_s and len(times) < 200):
        fresh = [a.copy() if isinstance(a, np.ndarray) else a for a in args]   # programs may write them
        t0 = time.perf_counter()
        out = fn(*fresh)
        np.asarray(out[0] if isinstance(out, tuple) else out)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller sizes, shorter budgets: a smoke test")
    ap.add_argument("--devices", default="numba,opencl")
    ap.add_argument("--json", help="also write the results here")
    opts = ap.parse_args()
    devices = [d for d in opts.devices.split(",") if any(i.name == d and i.available for i in tj.devices())]
    budget = 0.5 if opts.quick else 3.0
    gpt = gpt2_case(64, 256, 4096, 4) if opts.quick else gpt2_case(64, 768, 50257, 12)
    cases = [("gpt2_forward", *gpt)] + stencil_cases(opts.quick)
    rows = []
    for name, fn, args, static in cases:
        kernel = tj.kernel(static=tuple(static))(fn) if static else tj.kernel(fn)
        row = {"program": name, "numpy_ms": 1e3 * median_seconds(lambda *a: fn(*a, **static), args, budget)}
        try:
            for d in devices:
                row[f"{d}_ms"] = 1e3 * median_seconds(lambda *a, d=d: kernel(*a, device=d, **static), args, budget)
                row[f"{d}_kernels"] = len(kernel.lower(*args, device=d, **static).kernels)
        except tj.TracejitError as e:
            print(f"{name}: does not run under tracejit: {str(e).splitlines()[0]}")
            continue
        rows.append(row)
    print(f"{platform.processor() or platform.machine()}, NumPy {np.__version__}, tracejit {tj.__version__}")
    header = f"{'program':18s} {'numpy ms':>9s}" + "".join(f" {d + ' ms':>10s} {'kernels':>7s} {'vs numpy':>8s}"
                                                          for d in devices)
    print(header)
    for r in rows:
        line = f"{r['program']:18s} {r['numpy_ms']:9.2f}"
        for d in devices:
            line += f" {r[d + '_ms']:10.2f} {r[d + '_kernels']:7d} {r['numpy_ms'] / r[d + '_ms']:7.2f}x"
        print(line)
    if opts.json:
        Path(opts.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
