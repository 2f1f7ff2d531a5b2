"""Eager dispatch vs graph replay: a chain of 10 small kernels (x * 0.5 + 1 on 16 float32 elements),
called one by one vs captured once with tj.capture() and replayed; microseconds per kernel, per device.
Each figure is the median of rounds of --calls chains, ending with a synchronize.

Then a loop compiled as a loop (a 1-D diffusion stencil, 1,000 time steps on 4,096 float32 elements):
the kernel called (its body's launches issued from Python, step by step) vs captured once and replayed
(every step's launches recorded: one CUDA graph on cuda); milliseconds per 1,000 steps."""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import tracejit as tj  # noqa: E402

CHAIN = 10


@tj.kernel
def step(x):
    return x * 0.5 + 1.0


def eager(x, device):
    for _ in range(CHAIN):
        x = step(x, device=device)
    return x


@tj.kernel
def diffuse(u, steps: int):
    for t in range(steps):
        u = u + 0.1 * (np.roll(u, 1) - 2 * u + np.roll(u, -1))
    return u


def diffuse_numpy(u, steps):
    for t in range(steps):
        u = u + np.float32(0.1) * (np.roll(u, 1) - 2 * u + np.roll(u, -1))
    return u


def measure_loop(device: str, rounds: int, steps: int = 1000) -> dict:
    u = np.random.default_rng(1).standard_normal(4096).astype(np.float32)
    start = tj.asarray(u, device=device) if device != "numba" else u
    with tj.capture() as g:
        g.outputs = diffuse(start, steps, device=device)
    g.replay()
    expected = diffuse_numpy(u, steps)
    assert np.allclose(np.asarray(g.outputs), expected, rtol=1e-4, atol=1e-5), "replay differs from NumPy"
    assert np.allclose(np.asarray(diffuse(start, steps, device=device)), expected, rtol=1e-4, atol=1e-5)

    def ms(fn) -> float:
        samples = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            fn()
            tj.synchronize(device)
            samples.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(samples)
    return {"called": ms(lambda: diffuse(start, steps, device=device)), "replayed": ms(g.replay)}


def per_kernel_us(fn, calls: int, rounds: int, device: str) -> float:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        tj.synchronize(device)
        samples.append((time.perf_counter() - t0) / calls / CHAIN * 1e6)
    return statistics.median(samples)


def measure(device: str, calls: int, rounds: int) -> dict:
    x = np.random.default_rng(0).standard_normal(16).astype(np.float32)
    start = tj.asarray(x, device=device) if device != "numba" else x
    with tj.capture() as g:
        g.outputs = eager(start, device)
    expected = x
    for _ in range(CHAIN):
        expected = expected * np.float32(0.5) + np.float32(1)
    g.replay()
    assert np.allclose(np.asarray(g.outputs), expected, rtol=1e-6), "replay differs from NumPy"
    eager(start, device)
    return {"eager": per_kernel_us(lambda: eager(start, device), calls, rounds, device),
            "replay": per_kernel_us(g.replay, calls, rounds, device)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--devices", default=None, help="comma-separated (default: every available one)")
    args = parser.parse_args(argv)
    calls, rounds = (20, 3) if args.quick else (500, 9)
    devices = args.devices.split(",") if args.devices else [i.name for i in tj.devices() if i.available]
    print(f"chain of {CHAIN} kernels on 16 float32 elements; microseconds per kernel")
    print(f"{'device':<10}{'eager':>10}{'replay':>10}{'eager/replay':>14}")
    for device in devices:
        r = measure(device, calls, rounds)
        print(f"{device:<10}{r['eager']:>10.2f}{r['replay']:>10.2f}{r['eager'] / r['replay']:>13.1f}x", flush=True)
    print("\na loop compiled as a loop: 1,000 steps of a stencil on 4,096 float32 elements; ms per 1,000 steps")
    print(f"{'device':<10}{'called':>10}{'replayed':>10}{'called/replayed':>17}")
    for device in devices:
        r = measure_loop(device, 3 if args.quick else 9)
        print(f"{device:<10}{r['called']:>10.2f}{r['replayed']:>10.2f}{r['called'] / r['replayed']:>16.1f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
