"""Shared fixtures: every available device (one test run each), a seeded RNG per test, and a private
kernel disk cache so the suite neither reads nor fills the user's cache."""
from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import sys
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
if importlib.util.find_spec("tracejit") is None:
    # `pytest` run from a checkout that is not installed: test the checkout.
    sys.path.insert(0, str(REPO_ROOT))

if not os.environ.get("XDG_RUNTIME_DIR"):
    # the Vulkan loader (webgpu on lavapipe) complains on stderr without one
    _runtime_dir = tempfile.mkdtemp(prefix="tracejit-test-xdg-")
    atexit.register(shutil.rmtree, _runtime_dir, ignore_errors=True)
    os.environ["XDG_RUNTIME_DIR"] = _runtime_dir

if "TRACEJIT_CACHE_DIR" not in os.environ:
    # Set before tracejit is imported, in case it reads the variable at import time.
    _cache_dir = tempfile.mkdtemp(prefix="tracejit-test-cache-")
    atexit.register(shutil.rmtree, _cache_dir, ignore_errors=True)
    os.environ["TRACEJIT_CACHE_DIR"] = _cache_dir

import tracejit as tj  # noqa: E402

AVAILABLE_DEVICES = [info.name for info in tj.devices() if info.available]

# Every kernel compiled on numba is also compiled for CUDA (NVRTC + ptxas, sm_80 and sm_90); see cuda_check.py
import cuda_check  # noqa: E402

CUDA_CHECK_SKIPPED = cuda_check.unavailable_reason()
CUDA_CHECKER = cuda_check.install() if CUDA_CHECK_SKIPPED is None else None


def pytest_report_header(config):
    if CUDA_CHECK_SKIPPED:
        return f"CUDA kernel check (NVRTC + ptxas): off, {CUDA_CHECK_SKIPPED}"
    return f"CUDA kernel check (NVRTC + ptxas for {', '.join(cuda_check.ARCHS)}): on"


_CUDA_TOTALS = [0, 0]   # kernels checked, PTX modules assembled: this process plus finished xdist workers


def pytest_sessionfinish(session):
    if CUDA_CHECKER is not None:
        counts = (CUDA_CHECKER.kernels, len(CUDA_CHECKER.assembled))
        if hasattr(session.config, "workeroutput"):
            session.config.workeroutput["cuda_check"] = counts
        else:
            _CUDA_TOTALS[0] += counts[0]
            _CUDA_TOTALS[1] += counts[1]


def pytest_testnodedown(node, error):
    counts = getattr(node, "workeroutput", {}).get("cuda_check", (0, 0))
    _CUDA_TOTALS[0] += counts[0]
    _CUDA_TOTALS[1] += counts[1]


def pytest_terminal_summary(terminalreporter):
    if CUDA_CHECKER is not None:
        terminalreporter.write_line(f"CUDA kernel check: {_CUDA_TOTALS[0]} kernels compiled by NVRTC; "
                                    f"{_CUDA_TOTALS[1]} assemblies by ptxas for {' and '.join(cuda_check.ARCHS)}")


@pytest.fixture(scope="session", params=AVAILABLE_DEVICES, ids=str)
def device(request: pytest.FixtureRequest) -> str:
    """Name of a device that can run kernels here; tests using it run once per device."""
    return request.param


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    """A random generator seeded from the test's id: different data per test, the same on every run."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))

