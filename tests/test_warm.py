"""Warming ahead of deployment: tj.warm, `python -m tracejit warm` (a function or a manifest), the
TRACEJIT_RECORD manifest, and moving a cache with `python -m tracejit cache export / import`."""
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

import tracejit as tj
from reference import require_kept_kernels
from tracejit.frontend.manifest import parse_arg, read_manifest

REPO = Path(__file__).resolve().parents[1]

KERNELS = '''
import numpy as np
import tracejit as tj

@tj.kernel
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)

@tj.kernel(static=("axis",))
def normalize(x, axis):
    return x / x.sum(axis=axis, keepdims=True)
'''

APP = '''
import json, sys, numpy as np
from warm_kernels import softmax, normalize
x = np.ones((16, 300), np.float32)
device = sys.argv[1]
np.asarray(softmax(x, device=device)); np.asarray(normalize(x, axis=0, device=device))
np.asarray(softmax(x.T, device=device))
print(json.dumps({k: softmax.cache_info()[k] + normalize.cache_info()[k] for k in ("compiles", "disk_hits")}))
'''


@pytest.fixture
def project(tmp_path):
    (tmp_path / "warm_kernels.py").write_text(KERNELS)
    (tmp_path / "app.py").write_text(APP)
    return tmp_path


def run(project: Path, cache: Path, *argv, **env) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{project}", TRACEJIT_CACHE_DIR=str(cache), **env)
    if "TRACEJIT_RECORD" not in env:
        full.pop("TRACEJIT_RECORD", None)
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=project, env=full, timeout=600)


def app_counts(project, cache, device) -> dict:
    out = run(project, cache, "app.py", device)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_warm_compiles_from_specs_without_data_and_reports_what_it_did():
    f = tj.kernel(lambda x: (x * 2.5).sum(axis=1))
    report = tj.warm(f, tj.spec((32, 40), "float32"), devices=tj.devices()[0].name)
    (result,) = report
    assert report.ok and result.kernels and result.compiled + result.cached == len(result.kernels)
    assert "float32[32,40]" in str(report) and f.cache_info()["plans"] == 1


def test_warm_reports_an_error_per_device_instead_of_raising():
    report = tj.warm(tj.kernel(lambda x: x + 1), tj.spec((4,), "float32"), devices=["no-such-device"])
    assert not report.ok and "DeviceError" in report[0].error


def test_argument_specs_read_dtype_and_shape_and_reject_the_rest():
    assert parse_arg("float32[4096,1024]") == tj.spec((4096, 1024), "float32")
    assert parse_arg("float16[]") == tj.spec((), "float16")
    assert parse_arg("int") == 0 and parse_arg("float") == 0.0 and parse_arg("bool") is False
    assert parse_arg({"dtype": "float32", "shape": [4, 3], "strides": [1, 4]}).element_strides == (1, 4)
    with pytest.raises(tj.ArgumentError, match=r"dtype\[shape\]"):
        parse_arg("float32(4096)")
    assert parse_arg("complex64[3]") == tj.spec(3, "complex64")
    with pytest.raises(tj.DtypeError):
        parse_arg("uint64[3]")


def test_command_line_warm_of_a_function_leaves_nothing_to_compile(project, tmp_path, device):
    require_kept_kernels(device)
    cache = tmp_path / "cache"
    out = run(project, cache, "-m", "tracejit", "warm", "warm_kernels:softmax", "--arg", "float32[16,300]",
              "--device", device)
    assert out.returncode == 0, out.stderr
    assert f"warm_kernels:softmax(float32[16,300]) on {device}: 1 kernel(s), 1 compiled" in out.stdout
    out = run(project, cache, "-m", "tracejit", "warm", "warm_kernels:normalize", "--arg", "float32[16,300]",
              "--static", "axis=0", "--device", device)
    assert out.returncode == 0, out.stderr
    again = run(project, cache, "-m", "tracejit", "warm", "warm_kernels:softmax", "--arg", "float32[16,300]",
                "--device", device)
    assert "0 compiled, 1 cached" in again.stdout
    counts = app_counts(project, cache, device)
    assert counts["disk_hits"] >= 2   # the transposed softmax was not warmed: it is the one compile
    assert counts["compiles"] == 1


NEW_SIZES_APP = """
import json, numpy as np
from warm_kernels import softmax
for shape in [(16, 300), (5, 77), (3000, 64), (400, 512), (40, 3000)]:
    x = np.random.default_rng(shape[0]).standard_normal(shape).astype(np.float32)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(softmax(x, device="numba"), e / e.sum(axis=-1, keepdims=True), rtol=2e-5, atol=1e-6)
print(json.dumps(softmax.cache_info()))
"""


def test_warming_named_dimensions_leaves_no_size_of_them_to_compile(project, tmp_path):
    """float32[b=64,n=256]: the batch and the row length are symbolic, so the warmed kernels (each loop
    kind, serial and parallel) serve every size the application then calls with, rows longer than a
    float32 block (1024) too: a sum over a length that is an argument is written in blocks."""
    cache = tmp_path / "cache"
    out = run(project, cache, "-m", "tracejit", "warm", "warm_kernels:softmax", "--arg", "float32[b=64,n=256]",
              "--device", "numba")
    assert out.returncode == 0, out.stderr
    assert "warm_kernels:softmax(float32[b=64,n=256]) on numba: 1 kernel(s), 1 compiled" in out.stdout
    (project / "sizes.py").write_text(NEW_SIZES_APP)
    app = run(project, cache, "sizes.py")
    assert app.returncode == 0, app.stderr
    info = json.loads(app.stdout.strip().splitlines()[-1])
    assert info["compiles"] == 0 and info["disk_hits"] == 5, info


def test_a_named_dimension_the_function_takes_at_one_size_only_keeps_its_sizes_constant():
    """The function cannot be traced at another n (a reshape to 32 x 32): there is no twin to say which
    sizes follow n, so they stay constants, as without a name (lowering raised AttributeError on numba)."""
    f = tj.kernel(lambda x: np.sin(x.reshape(32, 32)) * 2)
    f.lower(tj.spec((("n", 1024),), "float32"), device="numba")
    x = np.linspace(0, 1, 1024, dtype=np.float32)
    np.testing.assert_allclose(f(x, device="numba"), np.sin(x.reshape(32, 32)) * 2, rtol=1e-6, atol=1e-6)


@pytest.mark.slow_emulated
def test_a_recorded_manifest_warms_a_fresh_cache_in_parallel_workers(project, tmp_path, device):
    require_kept_kernels(device)
    manifest = tmp_path / "manifest.jsonl"
    recorded = run(project, tmp_path / "first", "app.py", device, TRACEJIT_RECORD=str(manifest))
    assert recorded.returncode == 0, recorded.stderr
    entries = read_manifest(str(manifest))
    assert len(entries) == 3 and {e["function"] for e in entries} == {"warm_kernels:softmax", "warm_kernels:normalize"}
    assert any(e["static"] == {"axis": 0} for e in entries) and all(e["device"] == device for e in entries)
    assert any(isinstance(e["args"][0], dict) for e in entries)      # the transposed (strided) argument
    fresh = tmp_path / "fresh"
    out = run(project, fresh, "-m", "tracejit", "warm", "--manifest", str(manifest), "--jobs", "2")
    assert out.returncode == 0, out.stderr
    assert len([ln for ln in out.stdout.splitlines() if " on " + device in ln]) == 3   # one line per signature
    assert "warmed 3 of 3: 3 kernel(s) compiled" in out.stdout
    assert app_counts(project, fresh, device) == {"compiles": 0, "disk_hits": 3}


def test_manifest_problems_are_reported_clearly(project, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"function": "warm_kernels:softmax", "args": ["float32[4,4]"]}\nnot json\n')
    with pytest.raises(tj.ArgumentError, match="bad.jsonl:2"):
        read_manifest(str(bad))
    missing = tmp_path / "missing.jsonl"
    missing.write_text('{"function": "warm_kernels:nope", "args": ["float32[4,4]"], "device": "numba"}\n')
    out = run(project, tmp_path / "c", "-m", "tracejit", "warm", "--manifest", str(missing))
    assert out.returncode == 1 and "FAILED" in out.stdout and "nope" in out.stdout


@pytest.mark.slow_emulated
def test_an_exported_cache_imported_elsewhere_compiles_nothing_and_a_tampered_entry_is_rejected(
        project, tmp_path, device):
    require_kept_kernels(device)
    source, archive = tmp_path / "source", tmp_path / "cache.tgz"
    app_counts(project, source, device)
    out = run(project, source, "-m", "tracejit", "cache", "export", str(archive))
    assert out.returncode == 0 and "exported 3 entries" in out.stdout, out.stderr
    target = tmp_path / "target"
    out = run(project, target, "-m", "tracejit", "cache", "import", str(archive))
    assert out.returncode == 0 and "imported 3 entries" in out.stdout, out.stderr
    assert app_counts(project, target, device) == {"compiles": 0, "disk_hits": 3}
    info = run(project, target, "-m", "tracejit", "cache", "info")
    assert f"{device}" in info.stdout and "3 entries" in info.stdout

    tampered = tmp_path / "tampered.tgz"
    with tarfile.open(archive) as src, tarfile.open(tampered, "w:gz") as dst:
        changed = False
        for m in src.getmembers():
            data = src.extractfile(m).read() if m.isfile() else None
            if data is not None and m.name.startswith("entries/") and not changed:
                data, changed = data[:-1] + bytes([data[-1] ^ 1]), True
            dst.addfile(m, io.BytesIO(data) if data is not None else None)
    out = run(project, tmp_path / "other", "-m", "tracejit", "cache", "import", str(tampered))
    assert out.returncode == 1 and "imported 2 entries" in out.stdout and "rejected 1" in out.stdout

    out = run(project, target, "-m", "tracejit", "cache", "clear")
    assert out.returncode == 0 and not (target / "kernels").exists()


def test_the_progress_bar_draws_on_a_terminal(capsys):
    from tracejit.__main__ import _Bar
    bar = _Bar(2)
    result = {"function": "m:f", "device": "numba", "signature": "float32[4]", "kernels": ["k0"], "compiled": 1,
              "cached": 0, "seconds": 0.1, "error": None}
    bar.step(result)
    bar.step(dict(result, error="DeviceError: gone"))
    bar.close()
    err = capsys.readouterr().err
    assert "warming: 1/2" in err and "2/2" in err and "m:f on numba" in err and "FAILED: DeviceError: gone" in err


def test_recording_skips_functions_a_warming_process_cannot_import(tmp_path, monkeypatch):
    manifest = tmp_path / "m.jsonl"
    monkeypatch.setenv("TRACEJIT_RECORD", str(manifest))
    tj.kernel(lambda x: x * 3)(np.ones(3, np.float32), device="numba")
    assert not manifest.exists() or manifest.read_text() == ""


@tj.kernel
def _noisy(x, rng):
    return x + rng.standard_normal(x.shape, dtype=np.float32)


def test_a_recorded_generator_argument_is_written_and_warmed_as_one(tmp_path, monkeypatch):
    manifest = tmp_path / "m.jsonl"
    monkeypatch.setenv("TRACEJIT_RECORD", str(manifest))
    _noisy(np.ones(3, np.float32), np.random.default_rng(0), device="numba")   # recording raised before
    monkeypatch.delenv("TRACEJIT_RECORD")
    (entry,) = read_manifest(str(manifest))
    assert entry["args"] == ["float32[3]", "generator"]
    assert isinstance(parse_arg("generator"), np.random.Generator)
    report = tj.warm(str(manifest))
    assert report.ok and [r.function for r in report] == [entry["function"]]


def test_the_cache_command_needs_a_file_to_export(project, tmp_path):
    out = run(project, tmp_path, "-m", "tracejit", "cache", "export")
    assert out.returncode != 0 and "needs a FILE" in out.stderr
