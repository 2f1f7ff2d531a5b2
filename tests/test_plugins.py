"""Third-party targets through the `tracejit.targets` entry point group: tests/plugin_reference's
`reference` device (the kernel-IR interpreter) installed into a temporary directory, and broken plugins."""
from __future__ import annotations

import json
import os
import shutil
import textwrap
from pathlib import Path

import tracejit as tj
from test_api import run_python

PLUGIN = Path(__file__).parent / "plugin_reference"


def install(site: Path, name: str, entry_points: str, module: Path | None = None) -> None:
    """What pip leaves in site-packages for a distribution: its module and a .dist-info with METADATA
    and entry_points.txt (importlib.metadata finds it on sys.path)."""
    info = site / f"{name.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(entry_points)
    (info / "RECORD").write_text("")
    if module is not None:
        shutil.copy(module, site / module.name)


def child(site: Path, script: str) -> dict:
    path = os.pathsep.join([str(Path(tj.__file__).resolve().parents[1]), str(site)])
    done = run_python("-c", textwrap.dedent(script), PYTHONPATH=path)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


PROGRAMS = """
import json
import numpy as np
import tracejit as tj

def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)

def mixed(x, idx):
    y = np.cumsum(x * 2, axis=1)
    return y[idx].sum(axis=1), np.argmax(x, axis=1), (x > 0).astype(np.int16).sum(axis=0)

rng = np.random.default_rng(0)
x = rng.standard_normal((6, 33)).astype(np.float32)
idx = np.array([3, 0, 5, 5], np.int64)
status = {d.name: (d.available, d.reason, d.description) for d in tj.devices()}
report = {"status": status["reference"], "auto": tj.select_device(), "checks": []}
for fn, args in ((softmax, (x,)), (mixed, (x, idx)), (softmax, (x.astype(np.float64),))):
    got = fn.__name__, tj.kernel(fn)(*args, device="reference")
    want = fn(*args)
    got, want = (got[1] if isinstance(got[1], tuple) else (got[1],)), (want if isinstance(want, tuple) else (want,))
    for g, w in zip(got, want):
        g = g.numpy()
        close = bool(np.allclose(g, w, rtol=1e-6, atol=1e-6))
        report["checks"].append([fn.__name__, str(g.dtype), str(w.dtype), close])
f = tj.kernel(softmax)
report["kernels"] = [k.name for k in f.lower(x, device="reference").kernels]
report["source_is_ir"] = "global" in f.lower(x, device="reference").kernels[0].source
print(json.dumps(report))
"""


def test_a_plugin_target_is_discovered_listed_and_runs_programs_as_numpy_does(tmp_path):
    install(tmp_path, "tracejit-reference", "[tracejit.targets]\nreference = tracejit_reference:ReferenceTarget\n",
            PLUGIN / "tracejit_reference.py")
    report = child(tmp_path, PROGRAMS)
    assert report["status"] == [True, None, "the kernel-IR interpreter (NumPy), for debugging"]
    assert report["auto"] != "reference"   # a plugin is never chosen automatically
    assert len(report["checks"]) == 5
    for name, got, want, close in report["checks"]:
        assert got == want and close, (name, got, want)
    assert report["kernels"] == ["k0_row_max_sum"] and report["source_is_ir"]


def test_a_broken_plugin_is_listed_unavailable_with_its_error_and_tracejit_still_imports(tmp_path):
    install(tmp_path, "tracejit-broken", "[tracejit.targets]\nbroken = tracejit_no_such_module:Target\n"
                                         "notatarget = json:dumps\nnumba = json:JSONDecoder\n")
    report = child(tmp_path, """
        import json
        import tracejit as tj
        status = {d.name: [d.available, d.reason] for d in tj.devices()}
        try:
            tj.device("broken")
            opened = "opened"
        except tj.DeviceError as e:
            opened = str(e)
        print(json.dumps({"status": status, "opened": opened, "numba": tj.device("numba").name}))
    """)
    status = report["status"]
    assert status["broken"][0] is False and "ModuleNotFoundError" in status["broken"][1] \
        and "tracejit_no_such_module" in status["broken"][1]
    assert status["notatarget"][0] is False and "not a target class" in status["notatarget"][1]
    clash = [name for name in status if name.startswith("numba (")]
    assert clash and "cannot replace the built-in target 'numba'" in status[clash[0]][1]
    assert status["numba"][0] is True and report["numba"] == "numba"
    assert "broken" in report["opened"] and "not available" in report["opened"]
