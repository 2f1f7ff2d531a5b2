"""Every NumPy program of NPBench (github.com/spcl/npbench, its `*_numpy.py` files), decorated unchanged with
tj.kernel, run on one device at one of its presets and compared with NumPy running the same function: the outside
suite the loop work is measured on. NPBench is not vendored; pass a checkout.

    .venv/bin/python benchmarks/npbench.py --root ~/src/npbench [--preset S] [--device numba] [--only durbin,lu]

Per program: whether the results (and the arguments NPBench validates, its output_args) match NumPy's by NPBench's
own rule (its bench_info JSON: rtol and atol, else a relative error below norm_error; its defaults 1e-5, 1e-8 and
1e-5 otherwise), NumPy's time, tracejit's first call (trace and compile, this process, the kernel cache as it is)
and a later call, each one run. A program that raises
is listed with its error; one that takes longer than --timeout seconds is stopped (SIGALRM) and listed so.
(An element-by-element comparison alone failed programs NPBench passes: resnet, float32 sums in another order,
1e-5 from NumPy's and as close to a float64 reference as NumPy's; nbody at M, whose chaotic orbits NumPy's own
moves by more for a change of 1e-15 in its positions than tracejit's differs.)
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import signal
import sys
import time

import numpy as np

import tracejit as tj


class _Timeout(Exception):
    pass


def _alarm(*_):
    raise _Timeout()


def _load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _copy(v):
    return v.copy() if isinstance(v, np.ndarray) else v


def _close(a, b, rtol: float, atol: float, norm_error: float) -> bool:
    """NPBench's own rule (infrastructure/utilities.py, validate): within rtol and atol element by element, else
    a relative error ||a - b|| / ||b|| below the benchmark's norm_error (1e-5 unless its bench_info says: nbody's
    0.1, whose chaotic orbits NumPy itself moves by 0.06 for a change of 1e-15 in the positions)."""
    if isinstance(b, (tuple, list)):
        same = isinstance(a, (tuple, list)) and len(a) == len(b)
        return same and all(_close(x, y, rtol, atol, norm_error) for x, y in zip(a, b))
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
        return True
    with np.errstate(all="ignore"):
        reference = np.linalg.norm(b)
        return bool(reference > 0 and np.linalg.norm(a - b) / reference < norm_error)


def _arguments(info: dict, init_module, preset: str) -> list:
    params = info["parameters"][preset]
    init = info.get("init")
    env = dict(params)
    if init is not None:
        made = getattr(init_module, init["func_name"])(*[params[a] for a in init["input_args"]])
        env.update(zip(init["output_args"], made if isinstance(made, tuple) else (made,)))
    return [env[a] for a in info["input_args"]]


def run(root: str, preset: str, device: str, only: set[str] | None, timeout: int) -> list[tuple]:
    rows = []
    for info_path in sorted(glob.glob(os.path.join(root, "bench_info", "*.json"))):
        info = json.load(open(info_path))["benchmark"]
        short = info["short_name"]
        if only and short not in only:
            continue
        base = os.path.join(root, "npbench", "benchmarks", info["relative_path"])
        numpy_path = os.path.join(base, f"{info['module_name']}_numpy.py")
        if not os.path.exists(numpy_path) or preset not in info["parameters"]:
            continue
        try:
            init_module = _load(os.path.join(base, f"{info['module_name']}.py"), f"npbench_init_{short}")
            fn = getattr(_load(numpy_path, f"npbench_numpy_{short}"), info["func_name"])
            args = _arguments(info, init_module, preset)
            theirs = [_copy(a) for a in args]
            start = time.perf_counter()
            expected = fn(*theirs)
            numpy_s = time.perf_counter() - start
            kernel = tj.kernel(fn)
            ours = [_copy(a) for a in args]
            signal.alarm(timeout)
            try:
                start = time.perf_counter()
                got = kernel(*ours, device=device)
                first_s = time.perf_counter() - start
                again = [_copy(a) for a in args]
                start = time.perf_counter()
                kernel(*again, device=device)
                later_s = time.perf_counter() - start
            finally:
                signal.alarm(0)
            rtol, atol, norm = info.get("rtol", 1e-5), info.get("atol", 1e-8), info.get("norm_error", 1e-5)
            ok = expected is None and got is None or expected is not None and _close(got, expected, rtol, atol, norm)
            # (the arrays it assigns into that NPBench validates, its output_args: nbody's orbits are chaotic, so its
            # positions and velocities are not compared, by NPBench either, only its energies)
            compared = [j for j, name in enumerate(info["input_args"]) if name in info.get("output_args", ())]
            for mine, their in ((ours[j], theirs[j]) for j in compared):
                if isinstance(their, np.ndarray) and not _close(mine, their, rtol, atol, norm):
                    ok = False
            rows.append((short, "matches" if ok else "DIFFERS", numpy_s, later_s, first_s, ""))
        except _Timeout:
            rows.append((short, "TIMEOUT", None, None, None, f"more than {timeout} s"))
        except Exception as e:  # noqa: BLE001 - each program's failure is a row of the table
            rows.append((short, "ERROR", None, None, None, f"{type(e).__name__}: {str(e)[:160]}"))
        print(*_cells(rows[-1]), flush=True)
    return rows


def _cells(row) -> list[str]:
    short, status, numpy_s, later_s, first_s, note = row
    ms = lambda v: "-" if v is None else f"{1e3 * v:.2f}"
    ratio = "-" if not numpy_s or not later_s else f"{numpy_s / later_s:.2f}x"
    first = "-" if first_s is None else f"{first_s:.2f}"
    times = [f"{ms(numpy_s):>9}", f"{ms(later_s):>9}", f"{ratio:>8}", f"{first:>7}"]
    return [f"{short:<10}", f"{status:<8}", *times, note]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", required=True, help="a checkout of github.com/spcl/npbench")
    parser.add_argument("--preset", default="S")
    parser.add_argument("--device", default="numba")
    parser.add_argument("--only", default="", help="comma-separated short names (default: all)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per program")
    opts = parser.parse_args(argv)
    signal.signal(signal.SIGALRM, _alarm)
    print("program    result    numpy ms    tj ms vs numpy first s")
    rows = run(opts.root, opts.preset, opts.device, set(filter(None, opts.only.split(","))) or None, opts.timeout)
    counts = {s: sum(r[1] == s for r in rows) for s in ("matches", "DIFFERS", "ERROR", "TIMEOUT")}
    ratios = [r[2] / r[3] for r in rows if r[1] == "matches" and r[2] and r[3]]
    mean = float(np.exp(np.mean(np.log(ratios)))) if ratios else float("nan")
    print(
        f"{len(rows)} programs: "
        + ", ".join(f"{n} {s}" for s, n in counts.items())
        + f"; geometric mean vs NumPy over those that match: {mean:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
