"""A short run of benchmarks/soak.py (processes x threads calling 20 kernels with random shapes, dtypes and
devices): no call raises, none returns a wrong answer, no process dies. The full run is by hand."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import AVAILABLE_DEVICES

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_a_short_soak_has_no_errors_and_no_wrong_answers(tmp_path):
    devices = ",".join(d for d in ("numba", "opencl", "webgpu") if d in AVAILABLE_DEVICES)
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "soak.py"), "--seconds", "6",
                          "--processes", "2", "--threads", "3", "--devices", devices, "--warmup", "3",
                          "--sample", "2", "--json", str(tmp_path / "soak.json")],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    report = json.loads((tmp_path / "soak.json").read_text())
    for worker in report["workers"]:
        assert worker["calls"] > 0 and worker["errors"] == 0 and worker["wrong"] == 0, worker["examples"]
