"""`python -m tracejit tune`: the numba device's transpose tiles timed on this machine; the candidates, the
record and how the device reads it are runtime/numba/tuning.py's."""

from __future__ import annotations

import dataclasses
import statistics
import time

import numpy as np

from tracejit.runtime.numba import tuning as tuning
from tracejit.runtime import registry
from tracejit.runtime.symbolic_sizes import InMemorySizes
from tracejit.frontend.kernel import kernel


def _transpose_add(x, y):
    return x.T + y


def _seconds(f, args: tuple, out: np.ndarray) -> float:
    """The median of tuning.CALLS calls of f(*args, out=out)."""
    times = []
    for _ in range(tuning.CALLS):
        start = time.perf_counter()
        f(*args, out=out)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def tune(report=None) -> dict:
    """Times every candidate tile for each element size on the numba device, writes the record and applies
    it to the device for the kernels it compiles from now on; returns the record. `report`, if given, is
    called with a line of text per element size."""
    device = registry.device("numba")
    defaults, current, sizes = type(device).layout, device.layout, device.sizes
    chosen, measured = list(defaults.transpose_tiles), {}
    rng = np.random.default_rng(0)
    try:
        for slot, dtype in enumerate(tuning.DTYPES):
            rows, cols = tuning.SHAPE[0], tuning.SHAPE[1] // (2 if np.dtype(dtype).itemsize == 8 else 1)
            y = (rng.standard_normal((rows, cols)) * 100).astype(dtype)
            x = np.ascontiguousarray(((rng.standard_normal((rows, cols)) * 100).astype(dtype)).T)
            out, expected = np.empty_like(y), x.T + y
            kernels = {}
            for tile in tuning.CANDIDATES:
                device.layout = dataclasses.replace(defaults, transpose_tiles=(tile,) * 4)
                # the candidates are one size-free key with other tile extents: fresh symbolic sizes keep each
                # specialised (its extents constants of its code) and remember nothing in the disk cache
                device.sizes = InMemorySizes(sizes.slot_argument, sizes.kind)
                kernels[tile] = kernel(_transpose_add)
                kernels[tile](x, y, out=out, device=device.name)  # compiles with this tile
                if not np.array_equal(out, expected):
                    raise RuntimeError(f"tracejit tune: the {tile} tile computed a wrong x.T + y for {dtype.__name__}")
            device.layout, device.sizes = defaults, sizes
            times = {tile: float("inf") for tile in tuning.CANDIDATES}
            for _ in range(tuning.ROUNDS):
                for tile, f in kernels.items():
                    times[tile] = min(times[tile], _seconds(f, (x, y), out))
            default = defaults.transpose_tiles[slot]
            best = min(times, key=times.__getitem__)
            if default in times and times[best] > times[default] * (1 - tuning.MARGIN):
                best = default
            chosen[slot] = best
            measured[np.dtype(dtype).name] = {f"{r}x{c}": round(t * 1e3, 3) for (r, c), t in times.items()}
            if report:
                report(
                    f"{np.dtype(dtype).name:>8} ({np.dtype(dtype).itemsize} bytes): {best[0]}x{best[1]}   "
                    + "  ".join(f"{r}x{c} {t * 1e3:.2f} ms" for (r, c), t in times.items())
                )
    finally:
        device.layout, device.sizes = current, sizes
    machine = tuning.fingerprint()
    record = {
        "transpose_tiles": [list(t) for t in chosen],
        "defaults": [list(t) for t in defaults.transpose_tiles],
        "shape": list(tuning.SHAPE),
        "milliseconds": measured,
        "machine": machine,
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    tuning.save(record)
    device.layout = dataclasses.replace(defaults, transpose_tiles=tuple(chosen))
    return record
