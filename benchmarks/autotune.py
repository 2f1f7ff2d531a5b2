"""What autotuning finds (tj.tune, the engine of @tj.kernel(autotune=True)) on kernels of the CPU table and on sizes
where the devices' fixed rules are least sure (a kernel just past the numba device's threshold for threads, a
transposed read): each kernel tuned on each device, the choice kept, its time and the defaults', then the kept
choice checked again in a fresh kernel (the record read, nothing timed).

    .venv/bin/python benchmarks/autotune.py [--devices numba,opencl] [--seconds 2] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

import tracejit as tj


def transpose_add(x, y):
    return x.T + y


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def layernorm(x, w, b):
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w + b


def total(x):
    return x.sum()


def axpb(a, x, b):
    return a * x + b


def heat(u, steps):
    for _ in range(steps):
        u[1:-1] = u[1:-1] + 0.1 * (u[2:] - 2 * u[1:-1] + u[:-2])


def cases():
    rng = np.random.default_rng(0)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    return [
        ("transpose_add", transpose_add, "4096x4096", (f32(4096, 4096), f32(4096, 4096))),
        ("softmax", softmax, "4096x1024", (f32(4096, 1024),)),
        ("layernorm", layernorm, "4096x1024", (f32(4096, 1024), f32(1024), f32(1024))),
        ("sum", total, "16M", (f32(1 << 24),)),
        ("axpb", axpb, "100k", (np.float32(2), f32(100_000), np.float32(1))),
        ("heat", heat, "100k x 20", (f32(100_000), 20)),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--devices", default="numba,opencl")
    ap.add_argument("--seconds", type=float, default=2.0, help="each tuning's timing budget")
    ap.add_argument("--json", help="also write the results here")
    opts = ap.parse_args()
    available = {d.name for d in tj.devices() if d.available}
    devices = [d for d in opts.devices.split(",") if d in available]
    rows = []
    print(f"{platform.processor() or platform.machine()}, {time.strftime('%Y-%m-%d')}; ratio: the defaults' time "
          "over the kept choice's (noise: the choice is kept only if it beats the defaults by 5%)")
    print(f"{'kernel':14} {'shape':10} {'device':7} {'defaults ms':>11} {'tuned ms':>9} {'ratio':>6} "
          f"{'tune s':>6} {'distinct':>8}  kept")
    with tempfile.TemporaryDirectory() as records:
        import tracejit.frontend.autotune as autotune

        autotune.cache_dir = lambda: Path(records)  # this run's records only
        for name, fn, shape, args in cases():
            for dev in devices:
                f = tj.kernel(fn)
                start = time.perf_counter()
                report = tj.tune(f, *args, device=dev, seconds=opts.seconds)
                spent = time.perf_counter() - start
                default, best = report.times["defaults"], report.times[report.best]
                row = {"kernel": name, "shape": shape, "device": dev, "defaults_ms": default * 1e3,
                       "tuned_ms": best * 1e3, "ratio": default / best, "tune_s": spent,
                       "distinct": len(report.times), "kept": report.best}
                rows.append(row)
                print(f"{name:14} {shape:10} {dev:7} {default * 1e3:11.3f} {best * 1e3:9.3f} {default / best:6.2f} "
                      f"{spent:6.1f} {len(report.times):8}  {report.best}", flush=True)
    if opts.json:
        with open(opts.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
