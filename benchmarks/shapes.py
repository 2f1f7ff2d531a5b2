"""New shapes without new compiles (issue 19): what a kernel whose sizes are arguments costs against one
specialised on its sizes, and how many compiles a server's batch sizes or a decoder's growing sequence
cause.

1. Speed at 4096x1024 float32 on numba: each program compiled twice in one process,
   @tj.kernel(dynamic=False) (every size a constant of the code) and @tj.kernel(dynamic=True) (the sizes
   that follow the shapes are arguments); both checked against NumPy, then timed in alternating rounds
   (medians), and the ratio symbolic / specialised printed.
2. Compiles on every available device: 50 batch sizes of softmax, layernorm and GELU; a decoder's
   attention step over sequence lengths 1..N (numba). Counts come from cache_info(); the time per new
   size is the wall time of the calls divided by their number.

    .venv/bin/python benchmarks/shapes.py [--rounds 15] [--decode 256] [--devices numba,opencl]
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import tempfile
import time

import numpy as np

# compile counts are this run's own: an empty kernel cache, unless one is named
os.environ.setdefault("TRACEJIT_CACHE_DIR", tempfile.mkdtemp(prefix="tracejit-shapes-"))

import tracejit as tj  # noqa: E402

RNG = np.random.default_rng(0)


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, w, b):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w + b


def gelu(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))


def matmul(a, b):
    return a @ b


def attention_step(q, k, v):
    """One decoder step: a query row against the keys and values of every position so far."""
    s = q @ k.T / np.sqrt(np.float32(q.shape[-1]))
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def normal(*shape):
    return RNG.standard_normal(shape, dtype=np.float32)


SPEED_CASES = {
    "softmax": (softmax, lambda: (normal(4096, 1024),)),
    "layernorm": (layernorm, lambda: (normal(4096, 1024), normal(1024), normal(1024))),
    "gelu": (gelu, lambda: (normal(4096, 1024),)),
    "matmul": (matmul, lambda: (normal(4096, 1024), normal(1024, 1024))),
}


def timed(fn, args, batch: int) -> float:
    start = time.perf_counter()
    for _ in range(batch):
        fn(*args)
    return (time.perf_counter() - start) / batch


def speed(rounds: int) -> None:
    print("symbolic vs specialised at 4096x1024 float32 on numba (medians of alternating rounds, ms)")
    print(f"{'program':<12}{'specialised':>13}{'symbolic':>11}{'ratio':>8}  symbolic arguments")
    for name, (fn, make) in SPEED_CASES.items():
        args = make()
        want = fn(*args)
        fixed, symbolic = tj.kernel(fn, dynamic=False), tj.kernel(fn, dynamic=True)
        for k in (fixed, symbolic):
            got = k(*args, device="numba")
            assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3, err_msg=name)
        sources = [c.source for c in symbolic.lower(*args, device="numba").kernels]
        arguments = sum(bool(re.search(r"\btj_s\d", src)) for src in sources)
        batch = max(1, int(0.05 / timed(fixed, args, 1)))
        times = {"specialised": [], "symbolic": []}
        for _ in range(rounds):
            times["specialised"].append(timed(fixed, args, batch))
            times["symbolic"].append(timed(symbolic, args, batch))
        a, b = (1e3 * statistics.median(times[c]) for c in ("specialised", "symbolic"))
        print(f"{name:<12}{a:>13.3f}{b:>11.3f}{b / a:>7.2f}x  {arguments} of {len(sources)} kernel(s)", flush=True)


def batch_sizes(devices: list[str]) -> None:
    print("\n50 batch sizes (15..750 rows of 96): kernels compiled per program, and ms per new size")
    w, b = normal(96), normal(96)
    for device in devices:
        cells = []
        for fn, extra in ((softmax, ()), (layernorm, (w, b)), (gelu, ())):
            k = tj.kernel(fn)
            start = time.perf_counter()
            k(normal(15, 96), *extra, device=device)   # the first size: its compile is not a new size's cost
            first = time.perf_counter() - start
            start = time.perf_counter()
            for batch in range(2, 51):
                x = normal(batch * 15, 96)
                got = np.asarray(k(x, *extra, device=device))
                np.testing.assert_allclose(got, fn(x, *extra), rtol=2e-5, atol=2e-6)
            per_size = 1e3 * (time.perf_counter() - start) / 49
            cells.append(f"{fn.__name__} {k.cache_info()['compiles']} ({1e3 * first:.0f} ms first, "
                         f"{per_size:.1f} ms per new size)")
        print(f"  {device:<8}" + "; ".join(cells), flush=True)


def decoding(steps: int) -> None:
    print(f"\ndecoder attention step, sequence length 1..{steps}, head size 64, on numba")
    f = tj.kernel(attention_step)
    start = time.perf_counter()
    for n in range(1, steps + 1):
        q, k, v = normal(1, 64), normal(n, 64), normal(n, 64)
        np.testing.assert_allclose(f(q, k, v, device="numba"), attention_step(q, k, v), rtol=1e-4, atol=1e-5)
    info = f.cache_info()
    kernels = len(f.lower(q, k, v, device="numba").kernels)
    print(f"  {info['compiles']} kernel compiles for {steps} lengths ({kernels} kernels per step), "
          f"{1e3 * (time.perf_counter() - start) / steps:.1f} ms per step on average", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--decode", type=int, default=256)
    parser.add_argument("--devices", default=None, help="comma-separated (default: every available one)")
    args = parser.parse_args()
    devices = args.devices.split(",") if args.devices else [d.name for d in tj.devices() if d.available]
    speed(args.rounds)
    batch_sizes(devices)
    decoding(args.decode)


if __name__ == "__main__":
    main()
