"""Times np.cumsum along the last axis on tracejit's devices against NumPy: many rows (a row per work-item, or
per work-group when rows are few or long) and one long row (blocked in three kernels).

    .venv/bin/python benchmarks/scans.py                        # opencl and webgpu where present
    .venv/bin/python benchmarks/scans.py --devices opencl --shapes 8x65536,1x4194304
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import tracejit as tj


@tj.kernel
def cumsum(x):
    return np.cumsum(x, axis=-1)


def median_ms(call, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def time_device(x: np.ndarray, device: str, repeats: int) -> tuple[float, str]:
    """Milliseconds per call on device arrays (compile and upload not timed), and the launch modes used."""
    arg = tj.asarray(x, device=device)
    cumsum(arg, device=device)
    tj.synchronize(device)

    def call():
        cumsum(arg, device=device)
        tj.synchronize(device)
    kernels = cumsum.lower(x, device=device).kernels
    launches = [getattr(k, "launch", None) or k.rendered.launch for k in kernels]
    return median_ms(call, repeats), "+".join(f"{launch.mode}/{launch.local_size}" for launch in launches)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", default="opencl,webgpu")
    parser.add_argument("--shapes", default="4096x1024,1x4194304")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    available = {d.name for d in tj.devices() if d.available}
    rng = np.random.default_rng(0)
    print(f"{'shape':>12} {'device':>8} {'ms':>9} {'numpy ms':>9}  launches")
    for shape in args.shapes.split(","):
        x = rng.random(tuple(int(s) for s in shape.split("x")), dtype=np.float32)
        numpy_ms = median_ms(lambda x=x: np.cumsum(x, axis=-1), args.repeats)
        for device in args.devices.split(","):
            if device not in available:
                print(f"{shape:>12} {device:>8}  not available")
                continue
            ms, modes = time_device(x, device, args.repeats)
            print(f"{shape:>12} {device:>8} {ms:9.2f} {numpy_ms:9.2f}  {modes}")


if __name__ == "__main__":
    main()
