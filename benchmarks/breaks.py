"""Breaks and sizes that depend on the data (issue 47), against what a skilled user writes by hand, same run.

1. A program with one break (np.unwrap, which tracejit does not compile, runs with NumPy in the middle of the
   kernel) against the same program split by hand into two kernels around NumPy's call, and NumPy alone.
2. A selection used as an array (`x[x > t] * 3 + 1`), against NumPy and a hand-written Numba compaction (a
   counting pass, then a filling pass, output preallocated), with the count the same every call and changing
   every call (each new count traces the kernel again).

Milliseconds per call, tj.benchmark's medians; each result checked against NumPy first."""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import tracejit as tj  # noqa: E402


def with_break(x, w):
    y = np.tanh(x * w + 0.5) * 3.0
    z = np.unwrap(y, axis=-1)  # (NumPy's: a break)
    return np.sqrt(z * z + 1.0).sum(axis=-1)


@tj.kernel
def before(x, w):
    return np.tanh(x * w + 0.5) * 3.0


@tj.kernel
def after(z):
    return np.sqrt(z * z + 1.0).sum(axis=-1)


def split_by_hand(x, w, device):
    y = before(x, w, device=device)
    z = np.unwrap(np.asarray(y), axis=-1)
    return after(z, device=device)


def selected(x, t):
    y = np.sqrt(x) * 2
    z = y[y > t]
    return z * 3 + 1


def _numba_selection():
    try:
        import numba
    except ImportError:
        return None

    @numba.njit
    def compact(x, t):
        count = 0
        for i in range(x.size):
            if np.sqrt(x[i]) * 2 > t:
                count += 1
        out = np.empty(count, x.dtype)
        k = 0
        for i in range(x.size):
            y = np.sqrt(x[i]) * 2
            if y > t:
                out[k] = y * 3 + 1
                k += 1
        return out

    return compact


def ms(fn, seconds: float, device: str) -> float:
    """Milliseconds per call of fn(): tj.benchmark's median over rounds, `device` synchronised after each."""
    return tj.benchmark(fn, device=device, seconds=seconds, warmup=seconds / 10).ms


def measure_break(device: str, rows: int, cols: int, seconds: float) -> dict:
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((rows, cols)), rng.standard_normal(cols)
    if device in ("webgpu", "metal"):
        x, w = x.astype(np.float32), w.astype(np.float32)
    kernel = tj.kernel(with_break, fallback=True)  # (the test suite turns fallbacks off: this one is measured)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tj.FallbackWarning)
        expected = with_break(x, w)
        rtol = 1e-4 if x.dtype == np.float32 else 1e-10
        assert np.allclose(np.asarray(kernel(x, w, device=device)), expected, rtol=rtol)
        assert np.allclose(np.asarray(split_by_hand(x, w, device)), expected, rtol=rtol)
        return {
            "break": ms(lambda: kernel(x, w, device=device), seconds, device),
            "by hand": ms(lambda: split_by_hand(x, w, device), seconds, device),
            "numpy": ms(lambda: with_break(x, w), seconds, "numba"),
        }


def measure_selection(device: str, n: int, seconds: float) -> dict:
    rng = np.random.default_rng(1)
    x = rng.random(n)
    if device in ("webgpu", "metal"):
        x = x.astype(np.float32)
    kernel = tj.kernel(selected)
    expected = selected(x, 0.5)
    assert np.array_equal(np.asarray(kernel(x, 0.5, device=device)), expected)
    thresholds = iter(np.linspace(0.3, 1.7, 100_000))
    out = {
        "same count": ms(lambda: kernel(x, 0.5, device=device), seconds, device),
        "new count": ms(lambda: kernel(x, float(next(thresholds)), device=device), seconds, device),
        "numpy": ms(lambda: selected(x, 0.5), seconds, "numba"),
    }
    compact = _numba_selection() if device == "numba" else None
    if compact is not None:
        assert np.allclose(compact(x, 0.5), expected)
        out["numba"] = ms(lambda: compact(x, 0.5), seconds, "numba")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, short timings")
    parser.add_argument("--devices", default="numba,opencl", help="comma-separated")
    args = parser.parse_args(argv)
    seconds = 0.05 if args.quick else 1.0  # (per figure: tj.benchmark's budget)
    rows, cols, n = (64, 256, 100_000) if args.quick else (512, 4096, 1_000_000)
    devices = args.devices.split(",")
    print(f"1. one break (np.unwrap) in a {rows} x {cols} program; ms per call")
    print(f"{'device':<10}{'break':>10}{'by hand':>10}{'numpy':>10}{'break/hand':>12}")
    for device in devices:
        r = measure_break(device, rows, cols, seconds)
        print(f"{device:<10}{r['break']:>10.2f}{r['by hand']:>10.2f}{r['numpy']:>10.2f}"
              f"{r['break'] / r['by hand']:>11.2f}x", flush=True)
    print(f"\n2. x[x > t] * 3 + 1 over {n:,} elements; ms per call")
    print(f"{'device':<10}{'same count':>12}{'new count':>11}{'numpy':>9}{'numba':>9}{'numpy/same':>12}")
    for device in devices:
        r = measure_selection(device, n, seconds)
        numba = f"{r['numba']:>9.2f}" if "numba" in r else f"{'-':>9}"
        print(f"{device:<10}{r['same count']:>12.2f}{r['new count']:>11.2f}{r['numpy']:>9.2f}{numba}"
              f"{r['numpy'] / r['same count']:>11.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
