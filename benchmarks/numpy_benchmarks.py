"""Every program of serge-sans-paille/numpy-benchmarks (its `numpy_benchmarks/benchmarks/*.py`: kernels from Stack
Overflow answers, blogs and the Parakeet and Pythran testbeds), decorated unchanged with tj.kernel, run with the
benchmark's own `#setup:` and `#run:` lines and compared with NumPy running the same call: a second outside suite,
beside npbench.py. The suite is not vendored; pass a checkout.

    .venv/bin/python benchmarks/numpy_benchmarks.py --root ~/src/numpy-benchmarks [--device numba] [--only cma_pt]

Per program: whether the result matches NumPy's (np.allclose, rtol 1e-5, atol 1e-8, NaN where NumPy has NaN; a
procedure, which returns None, by the arrays its setup made, as the call left them), NumPy's time, a later call's
time and the first call's (trace and compile, this process), one run each. A program that raises is listed with
its error; one past --timeout seconds is stopped (SIGALRM) and listed so. The last line counts them and gives the
geometric mean against NumPy over those that match.
"""

from __future__ import annotations

import argparse
import copy
import glob
import os
import re
import signal
import time

import numpy as np

import tracejit as tj


class _Timeout(Exception):
    pass


def _alarm(*_):
    raise _Timeout()


def _close(a, b) -> bool:
    if isinstance(b, (tuple, list)):
        return isinstance(a, (tuple, list)) and len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if b is None:
        return a is None
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-5, atol=1e-8, equal_nan=True))


def _arrays(env: dict) -> dict:
    return {k: v for k, v in env.items() if isinstance(v, np.ndarray)}


def _one(path: str, device: str, timeout: int) -> tuple:
    """(name, result, numpy s, tracejit s, first s, note) of one benchmark file."""
    name = os.path.basename(path)[:-3]
    source = open(path).read()
    setup, run = re.search(r"^#setup:(.*)$", source, re.M), re.search(r"^#run:(.*)$", source, re.M)
    if not setup or not run:
        return name, "SKIPPED", None, None, None, "no #setup/#run line"
    call = run.group(1).strip()
    function = call.split("(")[0].strip()
    try:
        env: dict = {}
        exec(setup.group(1).strip(), env)  # noqa: S102 - the benchmark's own setup line
        module: dict = {"__name__": f"numpy_benchmarks_{name}", "__file__": path}
        exec(compile(source, path, "exec"), module)  # noqa: S102 - a file (its functions' source is read back)
        defined = {k: v for k, v in module.items() if not k.startswith("__")}
        theirs = {**env, **copy.deepcopy(_arrays(env)), **defined}
        start = time.perf_counter()
        expected = eval(call, theirs)  # noqa: S307 - the benchmark's own run line
        numpy_s = time.perf_counter() - start
        kernel = tj.kernel(module[function])
        ours = {**env, **copy.deepcopy(_arrays(env)), **defined, function: lambda *a, **k: kernel(*a, device=device, **k)}
        signal.alarm(timeout)
        try:
            start = time.perf_counter()
            got = eval(call, ours)  # noqa: S307
            first_s = time.perf_counter() - start
            again = {**ours, **copy.deepcopy(_arrays(env))}
            start = time.perf_counter()
            eval(call, again)  # noqa: S307
            later_s = time.perf_counter() - start
        finally:
            signal.alarm(0)
        ok = _close(got, expected) and all(_close(ours[k], theirs[k]) for k in _arrays(env))
        return name, "matches" if ok else "DIFFERS", numpy_s, later_s, first_s, ""
    except _Timeout:
        return name, "TIMEOUT", None, None, None, f"more than {timeout} s"
    except Exception as e:  # noqa: BLE001 - each program's failure is a row of the table
        return name, "ERROR", None, None, None, f"{type(e).__name__}: {str(e)[:160]}"


def _cells(row) -> list[str]:
    name, result, numpy_s, later_s, first_s, note = row
    if numpy_s is None:
        return [f"{name:24s}", f"{result:8s}", f"{'-':>9s}", f"{'-':>9s}", f"{'-':>8s}", f"{'-':>7s}", note]
    return [
        f"{name:24s}",
        f"{result:8s}",
        f"{numpy_s * 1e3:9.2f}",
        f"{later_s * 1e3:9.2f}",
        f"{numpy_s / later_s:7.2f}x",
        f"{first_s:7.2f}",
        note,
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", required=True, help="a checkout of github.com/serge-sans-paille/numpy-benchmarks")
    parser.add_argument("--device", default="numba")
    parser.add_argument("--only", default="", help="comma-separated benchmark names (default: all)")
    parser.add_argument("--timeout", type=int, default=120)
    opts = parser.parse_args()
    only = set(filter(None, opts.only.split(",")))
    signal.signal(signal.SIGALRM, _alarm)
    print(f"{'program':24s} {'result':8s} {'numpy ms':>9s} {'tj ms':>9s} {'vs numpy':>8s} {'first s':>7s}")
    rows = []
    for path in sorted(glob.glob(os.path.join(opts.root, "numpy_benchmarks", "benchmarks", "*.py"))):
        if only and os.path.basename(path)[:-3] not in only:
            continue
        rows.append(_one(path, opts.device, opts.timeout))
        print(*_cells(rows[-1]), flush=True)
    counts = {r: sum(1 for row in rows if row[1] == r) for r in ("matches", "DIFFERS", "ERROR", "TIMEOUT")}
    ratios = [row[2] / row[3] for row in rows if row[1] == "matches" and row[3]]
    mean = float(np.exp(np.mean(np.log(ratios)))) if ratios else float("nan")
    print(
        f"{len(rows)} programs: "
        + ", ".join(f"{n} {r}" for r, n in counts.items())
        + f"; geometric mean vs NumPy over those that match: {mean:.2f}x"
    )


if __name__ == "__main__":
    main()
