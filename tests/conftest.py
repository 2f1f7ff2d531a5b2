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

# a call tracejit does not compile is refused, not run with NumPy: a fallback must never hide a missing feature or
# a bug from the suite (tests/test_fallback.py turns it on where it is the subject)
os.environ["TRACEJIT_FALLBACK"] = "0"

if "TRACEJIT_CACHE_DIR" not in os.environ:
    # Set before tracejit is imported, in case it reads the variable at import time.
    _cache_dir = tempfile.mkdtemp(prefix="tracejit-test-cache-")
    atexit.register(shutil.rmtree, _cache_dir, ignore_errors=True)
    os.environ["TRACEJIT_CACHE_DIR"] = _cache_dir

import tracejit as tj  # noqa: E402
from tracejit.runtime.numba import blas as _blas  # noqa: E402

# MKL's products where the mkl wheel is installed (the dev extra installs it), whatever the CPU: `auto` takes NumPy's
# BLAS on a CPU that is not Intel's (runtime/numba/blas.py), and the suite tests the MKL paths on every machine CI
# draws (tests/test_blas.py tests `auto`'s choice itself). Read at the first product, after this.
if _blas._find_mkl_rt() is not None:
    os.environ.setdefault("TRACEJIT_BLAS", "mkl")
from tracejit.runtime import emulator  # noqa: E402
from tracejit.runtime.emulator import build as emulator_build  # noqa: E402

AVAILABLE_DEVICES = [info.name for info in tj.devices() if info.available]
EMULATED = [t for t in ("cuda", "metal") if emulator.emulates(t) and t in AVAILABLE_DEVICES]   # TRACEJIT_EMULATE

# Every kernel compiled on numba is also compiled for CUDA (NVRTC + ptxas for sm_80, and sm_90 with TRACEJIT_CHECK_CUDA=all; see
# cuda_check.py) and rendered as MSL for Metal, checked by clang++ against the Metal shim (metal_check.py)
import cuda_check  # noqa: E402
import metal_check  # noqa: E402

CUDA_CHECK_SKIPPED = cuda_check.unavailable_reason()
CUDA_CHECKER = cuda_check.install() if CUDA_CHECK_SKIPPED is None else None
METAL_CHECK_SKIPPED = metal_check.unavailable_reason()
METAL_CHECKER = metal_check.install() if METAL_CHECK_SKIPPED is None else None


def pytest_report_header(config):
    lines = [f"emulated on the CPU (TRACEJIT_EMULATE): {', '.join(EMULATED) or 'none'}",f"CUDA kernel check (NVRTC + ptxas): off, {CUDA_CHECK_SKIPPED}" if CUDA_CHECK_SKIPPED else
             f"CUDA kernel check (NVRTC + ptxas for {', '.join(cuda_check.ARCHS)}): on",
             f"MSL kernel check (clang against the Metal shim): off, {METAL_CHECK_SKIPPED}" if METAL_CHECK_SKIPPED
             else f"MSL kernel check ({metal_check.checker_name()} against the Metal shim): on"]
    return lines


# counts of this process plus finished xdist workers
_TOTALS = {"cuda_kernels": 0, "cuda_assemblies": 0, "msl_kernels": 0, "msl_refused": 0, "emulated_cuda": 0,
           "emulated_metal": 0}


def _counts() -> dict[str, int]:
    out = {f"emulated_{dialect}": n for dialect, n in emulator_build.BUILT.items()}
    if CUDA_CHECKER is not None:
        out.update(cuda_kernels=CUDA_CHECKER.kernels, cuda_assemblies=CUDA_CHECKER.assemblies)
    if METAL_CHECKER is not None:
        out.update(msl_kernels=METAL_CHECKER.kernels, msl_refused=METAL_CHECKER.refused)
    return out


def _add(counts: dict[str, int]) -> None:
    for k, v in counts.items():
        _TOTALS[k] += v


def pytest_sessionfinish(session):
    if hasattr(session.config, "workeroutput"):
        session.config.workeroutput["kernel_checks"] = _counts()
    else:
        _add(_counts())


def pytest_testnodedown(node, error):
    _add(getattr(node, "workeroutput", {}).get("kernel_checks", {}))


def pytest_terminal_summary(terminalreporter):
    if _TOTALS["emulated_cuda"] or _TOTALS["emulated_metal"]:
        terminalreporter.write_line(f"Emulated on the CPU: {_TOTALS['emulated_cuda']} CUDA C and {_TOTALS['emulated_metal']} "
                                    "MSL kernel sources compiled as C++ and run (each once per process)")
    if CUDA_CHECKER is not None:
        terminalreporter.write_line(f"CUDA kernel check: {_TOTALS['cuda_kernels']} kernels rendered; "
                                    f"{_TOTALS['cuda_assemblies']} of them new, compiled by NVRTC to machine code for "
                                    f"{' and '.join(cuda_check.ARCHS)}")
    if METAL_CHECKER is not None:
        terminalreporter.write_line(f"MSL kernel check: {_TOTALS['msl_kernels']} kernels checked by "
                                    f"{metal_check.checker_name()} against "
                                    f"the Metal shim; {_TOTALS['msl_refused']} programs refused with a clear error "
                                    "(float64, more than 31 buffers, or a scatter of a dtype without atomics)")


SLOW_EMULATED = ("slow on the CPU emulator, where what it checks is not target-specific; "
                 "TRACEJIT_EMULATE_ALL=1 runs it there too")


SIMT_SHARED = ("runs on emulated cuda, not emulated metal: what it checks is the SIMT lowering both dialects "
               "share, and its MSL is compiled by the MSL check of its numba run; TRACEJIT_EMULATE_ALL=1 runs it "
               "there too")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a smoke run of a long check (benchmarks/soak.py); -m 'not slow' skips it")
    config.addinivalue_line("markers", f"slow_emulated: skipped on emulated cuda/metal ({SLOW_EMULATED}); "
                                       f"slow_emulated('metal'): skipped on emulated metal only ({SIMT_SHARED})")


# The files whose tests run on emulated metal: what is Metal's own (its device and runtime, the MSL of each op,
# reduction, scan, sort, scatter's atomics, complex and random numbers). Elsewhere the subject is the SIMT lowering
# both dialects share, which emulated cuda runs, while each numba test's MSL is compiled by the MSL check
# (make test's budget; TRACEJIT_EMULATE_ALL=1 runs every file on emulated metal).
METAL_FILES = frozenset({
    "test_metal.py", "test_emulator.py", "test_device_info.py", "test_runtime.py", "test_capture.py", "test_ops.py",
    "test_reductions.py", "test_scans.py", "test_sorting.py", "test_scatter.py", "test_complex.py", "test_random.py",
    "test_ufuncs.py", "test_kernel_ir.py", "test_fusion.py", "test_errors.py", "test_api.py",
})
METAL_ELSEWHERE = ("runs on emulated metal in the files that test what is Metal's own (conftest.METAL_FILES); here "
                   "emulated cuda runs the SIMT lowering both dialects share, and the MSL check of its numba run "
                   "compiles its MSL; TRACEJIT_EMULATE_ALL=1 runs it there too")


def pytest_collection_modifyitems(config, items):
    """Tests marked slow_emulated skip on emulated devices (make test's budget), unless TRACEJIT_EMULATE_ALL=1;
    slow_emulated('metal') names the emulated devices it skips on, and reason=... says why where it is not
    SIMT_SHARED's."""
    if not EMULATED or os.environ.get("TRACEJIT_EMULATE_ALL") == "1":
        return
    for item in items:
        params = getattr(item, "callspec", None)
        marker = item.get_closest_marker("slow_emulated")
        device = params.params.get("device") if params else None
        if marker and device in EMULATED and (not marker.args or device in marker.args):
            reason = marker.kwargs.get("reason") or (SIMT_SHARED if marker.args else SLOW_EMULATED)
            item.add_marker(pytest.mark.skip(reason=reason))
        elif device == "metal" and "metal" in EMULATED and item.path.name not in METAL_FILES:
            item.add_marker(pytest.mark.skip(reason=METAL_ELSEWHERE))


@pytest.fixture(scope="session", params=AVAILABLE_DEVICES, ids=str)
def device(request: pytest.FixtureRequest) -> str:
    """Name of a device that can run kernels here; tests using it run once per device."""
    return request.param


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    """A random generator seeded from the test's id: different data per test, the same on every run."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))



@pytest.fixture(params=["native", "python"])
def numba_renderer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each numba kernel rendered natively where it can be (codegen/cpu/native.py, the default), or every
    one as Python for Numba (TRACEJIT_NUMBA_NATIVE=0): tests that read a kernel's source run with both."""
    monkeypatch.setenv("TRACEJIT_NUMBA_NATIVE", "1" if request.param == "native" else "0")
    return request.param
