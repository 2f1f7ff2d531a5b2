"""Many processes building the same opencl kernels at once on one fresh pair of caches (tracejit's disk cache
and PoCL's, which PoCL writes by removing a file and renaming a new one into place): every process gets
NumPy's answer. Also the pieces: the lock between processes, the one retry in a private PoCL directory.

TRACEJIT_RACE_REPEATS and TRACEJIT_RACE_PROCESSES run the race more often than CI does (2 x 6)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import AVAILABLE_DEVICES

pytestmark = pytest.mark.skipif("opencl" not in AVAILABLE_DEVICES, reason="no OpenCL device here")
REPO = Path(__file__).resolve().parents[1]
REPEATS = int(os.environ.get("TRACEJIT_RACE_REPEATS", "1"))  # (make test-all: 5)
PROCESSES = int(os.environ.get("TRACEJIT_RACE_PROCESSES", "6"))

# Each child waits for the same moment, then makes the first call of three kernels (a row reduction, a
# fused softmax, an elementwise one) on opencl and checks each against NumPy.
CHILD = """
import json, sys, time, numpy as np, tracejit as tj

@tj.kernel
def reduce_sum(x):
    return x.sum(axis=-1)

@tj.kernel
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)

@tj.kernel
def axpy(a, x, y):
    return a * x + y

while time.time() < float(sys.argv[1]):
    time.sleep(0.005)
rng = np.random.default_rng(0)
x, y = rng.standard_normal((2, 64, 300)).astype(np.float32)
e = np.exp(x - x.max(axis=-1, keepdims=True))
errors = []
for name, call, ref in [("reduce_sum", lambda: reduce_sum(x, device="opencl"), x.sum(axis=-1)),
                        ("softmax", lambda: softmax(x, device="opencl"), e / e.sum(axis=-1, keepdims=True)),
                        ("axpy", lambda: axpy(np.float32(2), x, y, device="opencl"), 2 * x + y)]:
    try:
        got = np.asarray(call())
        if got.dtype != ref.dtype or not np.allclose(got, ref, rtol=1e-4, atol=1e-4):
            errors.append(name + ": wrong answer")
    except Exception as e:
        errors.append(f"{name}: {type(e).__name__}: {e}")
print(json.dumps({"errors": errors}))
"""


def _env(top: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "TRACEJIT_DEBUG")}
    env.update(PYTHONPATH=str(REPO), TRACEJIT_CACHE_DIR=str(top / "tracejit"), POCL_CACHE_DIR=str(top / "pocl"),
               **extra)
    return env


def race(top: Path, processes: int) -> list[str]:
    """Start `processes` children on the fresh caches under `top` at one moment; what went wrong in each."""
    start = time.time() + 2.0   # every child imported and waiting
    children = [subprocess.Popen([sys.executable, "-c", CHILD, str(start)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=_env(top), cwd="/")
                for _ in range(processes)]
    failures = []
    for child in children:
        out, err = child.communicate(timeout=600)
        if child.returncode != 0:
            failures.append(f"exit {child.returncode}: {err[-2000:]}")
            continue
        failures += json.loads(out.strip().splitlines()[-1])["errors"]
    return failures


@pytest.mark.parametrize("repeat", range(REPEATS))
def test_processes_building_the_same_kernels_at_once_on_fresh_caches_all_get_numpys_answer(repeat, tmp_path):
    assert race(tmp_path, PROCESSES) == []
    # ... and the caches they left serve the next process
    assert race(tmp_path, 1) == []


def test_a_damaged_program_in_pocls_cache_is_built_again_in_a_directory_of_its_own(tmp_path):
    """program.bc replaced by a directory (what a reader sees of a file being replaced, for good): the
    build fails without a compiler message, and the one retry in a private PoCL directory succeeds."""
    assert race(tmp_path, 1) == []
    damaged = list((tmp_path / "pocl").rglob("program.bc"))
    assert damaged
    for path in damaged:
        path.unlink()
        path.mkdir()
    (tmp_path / "tracejit").rename(tmp_path / "tracejit-before")   # so the kernels are built from source again
    assert race(tmp_path, 1) == []


def test_a_program_the_compiler_rejects_is_not_built_twice(monkeypatch):
    from tracejit.runtime.opencl import discovery as opencl_devices
    import tracejit as tj
    device = tj.device("opencl")
    calls = []
    real = opencl_devices._build_once
    monkeypatch.setattr(opencl_devices, "_build_once", lambda *a: calls.append(a[3]) or real(*a))
    built, log = opencl_devices.build_program(device.context, device.cl_device, "__kernel void f(__global float *a) "
                                              "{ a[0] = undeclared; }", b"")
    assert built is None and "undeclared" in log and len(calls) == 1


def test_a_build_failing_without_a_compiler_message_is_tried_once_more_privately(monkeypatch):
    from tracejit.runtime.opencl import discovery as opencl_devices
    import tracejit as tj
    device = tj.device("opencl")
    if not opencl_devices.is_pocl(device.cl_device):
        pytest.skip("the retry is for PoCL's cache")
    calls = []
    real = opencl_devices._build_once

    def first_fails(*args):
        calls.append(args[3])
        return (None, "Device x failed to build the program") if len(calls) == 1 else real(*args)

    monkeypatch.setattr(opencl_devices, "_build_once", first_fails)
    source = "__kernel void g(__global float *a) { a[get_global_id(0)] += 1.0f; }"
    built, log = opencl_devices.build_program(device.context, device.cl_device, source, b"")
    assert built is not None and len(calls) == 2 and b"TRACEJIT_PRIVATE_BUILD" in calls[1]


HOLDER = """
import sys, time
from pathlib import Path
from tracejit.runtime.process_lock import held
with held(Path(sys.argv[1])) as locked:
    print(locked, flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_the_build_lock_excludes_other_processes_and_other_threads(tmp_path):
    from tracejit.runtime.process_lock import held
    path = tmp_path / "locks" / "one"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), "3"], stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert holder.stdout.readline().strip() == "True"
    with held(path, wait_s=0.3) as locked:
        assert not locked   # the other process holds it: the wait ran out
    holder.wait(timeout=60)
    with held(path, wait_s=5) as locked:
        assert locked       # released when its holder exited
        seen = []

        def try_it():
            with held(path, wait_s=0.3) as other_locked:
                seen.append(other_locked)

        other = threading.Thread(target=try_it)
        other.start()
        other.join()
        assert seen == [False]   # another thread of this process is excluded too
