"""First-call latency of a fresh process, per device: `import tracejit` plus the first call of softmax
(4096x1024) and GELU (16M), with an empty kernel cache (cold) and after `python -m tracejit warm`
filled it (warm). Each figure is the median of --runs fresh processes; see benchmarks/README.md.

`cold_first_call` times one column of one bench.py row the same way, for `bench.py --first-call`."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KERNELS = '''
import numpy as np
import tracejit as tj

@tj.kernel
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)

@tj.kernel
def gelu(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))
'''
CHILD = '''
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import tracejit as tj
from first_call_kernels import softmax, gelu
t1 = time.perf_counter()
device = sys.argv[1]
x = np.random.default_rng(0).standard_normal((4096, 1024), dtype=np.float32)
g = np.random.default_rng(1).standard_normal(1 << 24, dtype=np.float32)
t2 = time.perf_counter(); np.asarray(softmax(x, device=device)); t3 = time.perf_counter()
np.asarray(gelu(g, device=device)); t4 = time.perf_counter()
info = {k: softmax.cache_info()[k] + gelu.cache_info()[k] for k in ("compiles", "disk_hits")}
print(json.dumps({"import": t1 - t0, "softmax": t3 - t2, "gelu": t4 - t3, **info}))
'''


ROW_CHILD = '''
import json, sys, time
import numpy as np
import bench
case = {c.name: c for c in bench.CASES}[sys.argv[1]]
fn, inputs = case.impls[sys.argv[2]], case.setup(int(sys.argv[3]))
start = time.perf_counter()
np.asarray(fn(*inputs))
print(json.dumps({"seconds": time.perf_counter() - start}))
'''


def fresh_env(project: Path, cache: Path, pocl: Path, inductor: Path | None = None) -> dict:
    """The environment of a child process whose caches are the given (empty or warmed) folders."""
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{project}", TRACEJIT_CACHE_DIR=str(cache),
               POCL_CACHE_DIR=str(pocl))
    if inductor:
        env["TORCHINDUCTOR_CACHE_DIR"] = str(inductor)
    env.pop("TRACEJIT_RECORD", None)
    return env


def run_child(args: list[str], env: dict) -> dict:
    out = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=600)
    if out.returncode:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def cold_first_call(row: str, column: str, divisor: int) -> float:
    """Seconds of the first call of `column` (tracejit, numba, compile, ...) on bench.py's `row` in a fresh
    process with empty tracejit, PoCL and TorchInductor caches; imports and input set-up are not counted."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = fresh_env(Path(__file__).resolve().parent, folder / "tracejit", folder / "pocl", folder / "inductor")
        return run_child(["-c", ROW_CHILD, row, column, str(divisor)], env)["seconds"]


def child(project: Path, cache: Path, pocl: Path, device: str) -> dict:
    return run_child([str(project / "child.py"), device], fresh_env(project, cache, pocl))


def warm(project: Path, cache: Path, pocl: Path, device: str) -> None:
    env = fresh_env(project, cache, pocl)
    for fn, arg in (("softmax", "float32[4096,1024]"), ("gelu", "float32[16777216]")):
        subprocess.run([sys.executable, "-m", "tracejit", "warm", f"first_call_kernels:{fn}", "--arg", arg,
                        "--device", device], check=True, capture_output=True, env=env, timeout=600)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--devices", default=None, help="comma-separated (default: every available one)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    import tracejit as tj
    devices = args.devices.split(",") if args.devices else [i.name for i in tj.devices() if i.available]
    print(f"{'device':<8} {'cache':<5} {'import s':>9} {'softmax s':>10} {'gelu s':>8} {'total s':>8}  compiles")
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "first_call_kernels.py").write_text(KERNELS)
        (project / "child.py").write_text(CHILD)
        for device in devices:
            for state in ("cold", "warm"):
                runs = []
                for i in range(args.runs):
                    cache, pocl = project / f"cache-{device}-{state}-{i}", project / f"pocl-{device}-{state}-{i}"
                    if state == "warm":
                        warm(project, cache, pocl, device)
                    runs.append(child(project, cache, pocl, device))
                med = {k: statistics.median(r[k] for r in runs) for k in ("import", "softmax", "gelu")}
                total = sum(med.values())
                print(f"{device:<8} {state:<5} {med['import']:>9.2f} {med['softmax']:>10.2f} {med['gelu']:>8.2f} "
                      f"{total:>8.2f}  {runs[0]['compiles']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
