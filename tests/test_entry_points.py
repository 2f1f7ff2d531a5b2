"""A native crash is a failed test, not a lost worker: every public module and entry point is imported, and
every available device runs a kernel, each in a subprocess of its own whose exit status is checked."""
from __future__ import annotations

import os
import pkgutil
import subprocess
import sys
import textwrap

import pytest
from conftest import AVAILABLE_DEVICES

import tracejit

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _modules() -> list[str]:
    names = ["tracejit"]
    for info in pkgutil.walk_packages(tracejit.__path__, "tracejit."):
        if ".emulator" in info.name and "metal" in info.name and sys.platform == "darwin":
            continue
        names.append(info.name)
    return sorted(names)


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=600, env=dict(os.environ, PYTHONPATH=REPO))


def _check(done: subprocess.CompletedProcess, what: str) -> None:
    assert done.returncode >= 0, f"{what}: killed by signal {-done.returncode}\n{done.stderr[-4000:]}"
    assert done.returncode == 0, f"{what}: exit status {done.returncode}\n{done.stderr[-4000:]}"


def test_every_module_imports_in_a_fresh_process():
    modules = _modules()
    code = "import importlib\n" + "".join(f"importlib.import_module({m!r})\n" for m in modules)
    _check(_run(code), f"importing {len(modules)} modules")


def test_every_public_name_resolves():
    code = """
        import tracejit as tj
        names = [n for n in dir(tj) if not n.startswith("_")]
        for n in names:
            getattr(tj, n)
        for n in ("seed",):
            getattr(tj.random, n)
        tj.devices()
        print(len(names))
    """
    done = _run(code)
    _check(done, "public names")
    assert int(done.stdout.split()[-1]) > 20


@pytest.mark.parametrize("command", [["info"], ["info", "--json"]])
def test_command_line_entry_point_exits_cleanly(command):
    done = subprocess.run([sys.executable, "-X", "faulthandler", "-m", "tracejit", *command], capture_output=True,
                          text=True, timeout=600, env=dict(os.environ, PYTHONPATH=REPO))
    _check(done, f"python -m tracejit {' '.join(command)}")


@pytest.mark.parametrize("device", AVAILABLE_DEVICES)
def test_a_kernel_runs_and_the_process_exits_cleanly(device):
    code = f"""
        import numpy as np, tracejit as tj
        @tj.kernel
        def f(x):
            return np.exp(x - x.max(axis=-1, keepdims=True)).sum(axis=-1)
        x = np.random.default_rng(0).random((8, 64), dtype=np.float32)
        got = np.asarray(f(x, device={device!r}))
        want = np.exp(x - x.max(axis=-1, keepdims=True)).sum(axis=-1)
        assert np.allclose(got, want, rtol=1e-5), (got, want)
        r = np.asarray(tj.kernel(lambda n: np.random.rand(*n.shape).astype(np.float32) + n)(x, device={device!r})) \\
            if {device!r} not in ("webgpu", "metal") else x + 0.5
        assert r.shape == x.shape and ((r - x) >= 0).all() and ((r - x) < 1).all()
        tj.synchronize({device!r})
    """
    _check(_run(code), f"a kernel on {device}")
