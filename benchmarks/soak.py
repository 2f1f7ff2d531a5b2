"""Soak test: processes x threads calling 20 kernels with random shapes, dtypes and devices for a while,
every result checked against NumPy; reports errors, wrong answers, each process's resident memory after
warm-up, open files and threads at start and end, and the disk cache's size against its limit.

    python benchmarks/soak.py                      # 4 processes x 8 threads, 10 minutes
    python benchmarks/soak.py --seconds 20 --processes 2 --threads 4 --json out.json

Half of the processes share one disk cache capped at --cache-limit bytes (TRACEJIT_CACHE_MAX_BYTES); each
of the others has a cache of its own (default cap). All use a fresh PoCL cache directory. Exits 1 when a
call raised or returned a wrong answer, or a process died.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
FLOATS, INTS = ("float32", "float64"), ("int32",)


# ---- the kernels: plain NumPy functions; tracejit compiles each, NumPy runs it as the reference ----

def add(a, b): return a + b
def axpy(a, b): return 2.5 * a + b
def gelu(a): return 0.5 * a * (1 + np.tanh(0.7978845608 * (a + 0.044715 * a ** 3)))
def leaky(a): return np.where(a > 0, a, 0.1 * a)
def row_sum(a): return a.sum(axis=-1)
def col_max(a): return a.max(axis=0)
def mean_all(a): return a.mean()
def softmax(a):
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
def layernorm(a):
    m = a.mean(axis=-1, keepdims=True)
    return (a - m) / np.sqrt(((a - m) ** 2).mean(axis=-1, keepdims=True) + 1e-5)
def matmul_t(a, b): return a @ b.T
def transpose_add(a, b): return a.T + b.T * 2
def int_mix(a, b): return (a * 3 + b // 2) % 7
def cumsum(a): return np.cumsum(a, axis=-1)
def argmax(a): return a.argmax(axis=-1)
def abs_diff_sum(a, b): return np.abs(a - b).sum(axis=0)
def softplus_neg(a): return np.log1p(np.exp(-np.abs(a)))
def row_norm(a): return np.sqrt((a * a).sum(axis=-1, keepdims=True))
def halve(a): return a.astype(np.float32) * 0.5
def spread(a, b): return np.maximum(a, b) - np.minimum(a, b)
def logsumexp(a):
    m = a.max(axis=-1, keepdims=True)
    return m + np.log(np.exp(a - m).sum(axis=-1, keepdims=True))


# (function, number of array arguments (all of one shape), dtypes it is called with)
KERNELS = [
    (add, 2, FLOATS + INTS), (axpy, 2, FLOATS), (gelu, 1, FLOATS), (leaky, 1, FLOATS), (row_sum, 1, FLOATS + INTS),
    (col_max, 1, FLOATS + INTS), (mean_all, 1, FLOATS), (softmax, 1, FLOATS), (layernorm, 1, FLOATS),
    (matmul_t, 2, FLOATS), (transpose_add, 2, FLOATS + INTS), (int_mix, 2, INTS), (cumsum, 1, FLOATS + INTS),
    (argmax, 1, FLOATS + INTS), (abs_diff_sum, 2, FLOATS + INTS), (softplus_neg, 1, FLOATS), (row_norm, 1, FLOATS),
    (halve, 1, INTS), (spread, 2, FLOATS + INTS), (logsumexp, 1, FLOATS),
]
# A few shapes per kernel, so that after warm-up every signature is compiled and memory should stay flat.
SHAPES = [(1, 7), (16, 33), (64, 300)]


def inputs(rng, fn, nargs, dtype, shape):
    def one():
        if dtype in INTS:
            return rng.integers(-100, 100, shape).astype(dtype)
        return rng.standard_normal(shape).astype(dtype)
    return [one() for _ in range(nargs)]


def close(got, ref, dtype) -> bool:
    got, ref = np.asarray(got), np.asarray(ref)
    if got.shape != ref.shape or got.dtype != ref.dtype:
        return False
    if ref.dtype.kind in "iub":
        return np.array_equal(got, ref)
    tol = 2e-4 if ref.dtype == np.float32 else 1e-9
    scale = max(1.0, float(np.abs(ref).max())) if ref.size else 1.0
    return bool(np.allclose(got, ref, rtol=tol, atol=tol * scale, equal_nan=True))


# ---- one worker process ----

def worker(args) -> None:
    import psutil
    import tracejit as tj

    proc = psutil.Process()
    devices = [d for d in args.devices.split(",") if d]
    dtypes_of = {d: set(tj.device(d).info.dtypes) for d in devices}
    compiled = {fn.__name__: tj.kernel(fn) for fn, _, _ in KERNELS}
    t0 = time.monotonic()
    stop_at, warm_at = t0 + args.seconds, t0 + args.warmup
    lock = threading.Lock()
    stats = {"calls": 0, "errors": 0, "wrong": 0, "refused": 0, "by_device": {d: 0 for d in devices}}
    signatures: set = set()   # (kernel, dtype, shape, device) called so far: a new one is a compile
    examples: dict[str, int] = {}

    def note(kind: str, text: str) -> None:
        with lock:
            stats[kind] += 1
            examples[text] = examples.get(text, 0) + 1

    def run(seed: int) -> None:
        rng = np.random.default_rng(seed)
        while time.monotonic() < stop_at:
            fn, nargs, dtypes = KERNELS[rng.integers(len(KERNELS))]
            device = devices[rng.integers(len(devices))]
            usable = [d for d in dtypes if d in dtypes_of[device]]
            if not usable:
                continue
            dtype = usable[rng.integers(len(usable))]
            shape = SHAPES[rng.integers(len(SHAPES))]
            xs = inputs(rng, fn, nargs, dtype, shape)
            what = f"{fn.__name__}({dtype}{list(shape)}) on {device}"
            with np.errstate(all="ignore"):
                ref = np.asarray(fn(*xs))
            # a result dtype the device has not (webgpu's int64 sums) is refused as documented: tj.DtypeError
            refusal = ref.dtype.name not in dtypes_of[device]
            try:
                got = np.asarray(compiled[fn.__name__](*xs, device=device))
                if refusal or not close(got, ref, dtype):
                    note("wrong", what)
            except tj.DtypeError as e:
                if refusal:
                    with lock:
                        stats["refused"] += 1
                else:
                    note("errors", f"{what}: {type(e).__name__}: {' '.join(str(e).split())[:300]}")
            except Exception as e:   # noqa: BLE001 - every failure is counted and reported
                note("errors", f"{what}: {type(e).__name__}: {' '.join(str(e).split())[:300]}")
            with lock:
                stats["calls"] += 1
                stats["by_device"][device] += 1
                signatures.add((fn.__name__, dtype, shape, device))

    samples, marks = [], {}

    def sample(label: str | None = None) -> None:
        now = time.monotonic() - t0
        rss = proc.memory_info().rss
        samples.append((round(now, 1), rss, len(signatures)))
        if label:
            marks[label] = {"t": round(now, 1), "rss": rss, "fds": proc.num_fds(), "threads": proc.num_threads()}

    threads = [threading.Thread(target=run, args=(args.seed * 1000 + i,), daemon=True) for i in range(args.threads)]
    for t in threads:
        t.start()
    while time.monotonic() < warm_at and time.monotonic() < stop_at:
        time.sleep(0.2)
    sample("start")
    calls_at_start = stats["calls"]
    while time.monotonic() < stop_at:
        time.sleep(min(args.sample, max(0.0, stop_at - time.monotonic())))
        sample()
    sample("end")   # the workers still run (each finishes its call): the same state as at "start"
    for t in threads:
        t.join()
    post = [rss for t, rss, _ in samples if t >= marks["start"]["t"]]
    print(json.dumps({**stats, "calls_after_warmup": stats["calls"] - calls_at_start, "examples": examples,
                      "start": marks["start"], "end": marks["end"], "max_rss": max(post), "samples": samples}))


# ---- the parent: starts the workers, watches the caches, reports ----

def tree_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=600.0)
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--devices", default=None, help="comma-separated; default: numba, opencl, webgpu where available")
    ap.add_argument("--cache-limit", type=int, default=2 << 20, help="bytes, for the shared cache (default 2 MiB)")
    ap.add_argument("--warmup", type=float, default=None, help="seconds before memory is sampled (default: a fifth)")
    ap.add_argument("--sample", type=float, default=5.0, help="seconds between memory samples")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="also write the report here")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.warmup is None:
        args.warmup = min(120.0, args.seconds / 5)
    if args.worker:
        worker(args)
        return 0
    if args.devices is None:
        import tracejit as tj
        args.devices = ",".join(i.name for i in tj.devices() if i.name in ("numba", "opencl", "webgpu") and i.available)

    top = Path(tempfile.mkdtemp(prefix="tracejit-soak-"))
    shared = top / "shared"
    caches = [shared if i < (args.processes + 1) // 2 else top / f"own{i}" for i in range(args.processes)]
    procs = []
    for i, cache in enumerate(caches):
        env = dict(os.environ, PYTHONPATH=str(REPO), TRACEJIT_CACHE_DIR=str(cache), POCL_CACHE_DIR=str(top / "pocl"))
        if cache == shared:
            env["TRACEJIT_CACHE_MAX_BYTES"] = str(args.cache_limit)
        cmd = [sys.executable, __file__, "--worker", "--seconds", str(args.seconds), "--threads", str(args.threads),
               "--devices", args.devices, "--warmup", str(args.warmup), "--sample", str(args.sample),
               "--seed", str(args.seed * 100 + i)]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    outputs = [None] * len(procs)
    readers = [threading.Thread(target=lambda i=i, p=p: outputs.__setitem__(i, p.communicate()), daemon=True)
               for i, p in enumerate(procs)]
    for r in readers:
        r.start()
    shared_sizes, hang_at = [], time.monotonic() + args.seconds + 600   # a call still running then has hung
    while any(r.is_alive() for r in readers):
        shared_sizes.append(tree_bytes(shared / "kernels"))
        time.sleep(2.0)
        if time.monotonic() > hang_at:
            for p in procs:
                if p.poll() is None:
                    p.kill()
    shared_sizes.append(tree_bytes(shared / "kernels"))

    report = {"date": time.strftime("%Y-%m-%d"), "seconds": args.seconds, "processes": args.processes,
              "threads": args.threads, "devices": args.devices, "cache_limit": args.cache_limit,
              "shared_cache_end": shared_sizes[-1], "shared_cache_max": max(shared_sizes),
              "own_cache_end": [tree_bytes(c / "kernels") for c in caches if c != shared],
              "pocl_cache_end": tree_bytes(top / "pocl"), "workers": []}
    failed = False
    for i, (p, (out, err)) in enumerate(zip(procs, outputs)):
        try:
            result = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            result = {"died": p.returncode, "stderr": err[-3000:]}
            failed = True
        result["cache"] = "shared" if caches[i] == shared else "own"
        failed |= bool(result.get("errors") or result.get("wrong"))
        report["workers"].append(result)
    print_report(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    import shutil
    shutil.rmtree(top, ignore_errors=True)
    return 1 if failed else 0


def print_report(r) -> None:
    mib = 1 << 20
    print(f"soak {r['date']}: {r['processes']} processes x {r['threads']} threads, {r['seconds']:.0f} s, "
          f"devices {r['devices']}")
    for i, w in enumerate(r["workers"]):
        if "died" in w:
            print(f"  process {i} ({w['cache']} cache): DIED (exit {w['died']})\n{w['stderr']}")
            continue
        s, e = w["start"], w["end"]
        print(f"  process {i} ({w['cache']} cache): {w['calls']} calls ({w['calls_after_warmup']} after warm-up; "
              f"{w['by_device']}), {w['errors']} errors, {w['wrong']} wrong, {w['refused']} refused as documented; "
              f"RSS after warm-up "
              f"{s['rss'] / mib:.0f} -> {e['rss'] / mib:.0f} MiB (max {w['max_rss'] / mib:.0f}); "
              f"fds {s['fds']} -> {e['fds']}; threads {s['threads']} -> {e['threads']}")
        curve = w["samples"][:: max(1, len(w["samples"]) // 12)]
        print("    RSS curve (s: MiB, signatures compiled): "
              + ", ".join(f"{t:.0f}: {rss / mib:.0f} ({n})" for t, rss, n in curve))
        for text, n in sorted(w["examples"].items(), key=lambda kv: -kv[1])[:8]:
            print(f"    {n} x {text}")
    print(f"  shared disk cache: {r['shared_cache_end'] / mib:.2f} MiB at the end, at most "
          f"{r['shared_cache_max'] / mib:.2f} MiB seen, limit {r['cache_limit'] / mib:.2f} MiB; own caches "
          + ", ".join(f"{b / mib:.2f}" for b in r["own_cache_end"]) + f" MiB; PoCL's cache {r['pocl_cache_end'] / mib:.1f} MiB")


if __name__ == "__main__":
    sys.exit(main())
