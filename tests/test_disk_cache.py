"""The disk cache: a second process compiles nothing; concurrent writers, corrupt and half-written
entries, changed compilers, failed builds, unusable directories, the size cap and planted pickles."""
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import tracejit as tj
from conftest import AVAILABLE_DEVICES
from reference import require_kept_kernels, unprivileged
from tracejit.runtime.cache import disk as disk_cache
from tracejit.runtime import emulator
from tracejit.runtime.cache.disk import CacheKey, CacheWarning, DiskCache, parse_entry

REPO = Path(__file__).resolve().parents[1]

PROGRAM = """
import json, sys, numpy as np, tracejit as tj

@tj.kernel
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)

@tj.kernel
def gelu(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))

# 7 x 299, not a multiple of 4: no float4 variant (a second artifact of one kernel) on cuda
x = np.random.default_rng(0).standard_normal((7, 299)).astype(np.float32)
y = np.asarray(softmax(x, device=DEVICE))
z = np.asarray(gelu(x, device=DEVICE))
assert np.allclose(y.sum(axis=1), 1, atol=1e-5) and np.isfinite(z).all()
counts = {k: softmax.cache_info()[k] + gelu.cache_info()[k] for k in ("compiles", "disk_hits")}
print(json.dumps(counts))
"""


def run_program(cache: Path, device: str, prelude: str = "", **env) -> dict:
    code = textwrap.dedent(prelude) + PROGRAM.replace("DEVICE", repr(device))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=str(REPO), TRACEJIT_CACHE_DIR=str(cache), **env))
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["stderr"] = out.stderr
    return result


def entry_files(cache: Path) -> list[Path]:
    return [p for p in (cache / "kernels" / "entries").glob("*/*/*") if not p.name.startswith(".tmp-")]


def key(**parts) -> CacheKey:
    base = {"kernel": "k", "device": "d", "options": "o", "tracejit": "t", "compiler": "c"}
    return CacheKey("numba", "k0_test", tuple({**base, **parts}.items()))


# ---- across processes, per device ----

@pytest.fixture(autouse=True)
def _device_keeps_compiled_kernels(request):
    """A device whose compiled kernels cannot be kept on disk (webgpu, metal: see no_disk_cache) has
    nothing for these tests to check."""
    if "device" in request.fixturenames:
        require_kept_kernels(request.getfixturevalue("device"))


def test_a_second_process_compiles_nothing(tmp_path, device):
    first = run_program(tmp_path, device)
    assert first["compiles"] >= 2 and first["disk_hits"] == 0
    second = run_program(tmp_path, device)
    assert second == {"compiles": 0, "disk_hits": first["compiles"], "stderr": second["stderr"]}


COUNTERS = """
import json, numpy as np, tracejit as tj

@tj.kernel
def products(a, b, c):
    return a @ b, b @ c, c @ a

@tj.kernel
def shifted(x):
    return np.exp(x) + 1

rng = np.random.default_rng(0)
# three shapes: no product's kernel is another's (each is compiled, not found in this process)
a, b, c = (rng.standard_normal(s).astype(np.float32) for s in ((64, 96), (96, 80), (80, 64)))
for _ in range(2):
    ab, bc, ca = (np.asarray(r) for r in products(a, b, c, device=DEVICE))
    shifted(a, device=DEVICE)
np.testing.assert_allclose(ab, a @ b, rtol=1e-5, atol=1e-5)
info = {"products": products.cache_info(), "shifted": shifted.cache_info()}
info["kernels"] = {"products": len(products.lower(a, b, c, device=DEVICE).kernels),
                   "shifted": len(shifted.lower(a, device=DEVICE).kernels)}
print(json.dumps(info))
"""


def test_each_counter_means_what_it_says_on_an_empty_and_a_warm_cache(tmp_path, device):
    """numba's products (and a CPU OpenCL's) are BLAS calls: nothing compiles them and nothing loads them, so they are `library`,
    not the disk hits they were counted as on an empty cache (3 products: 0 compiles, 3 disk hits). Every
    other kernel is a compile on an empty cache and a disk hit on a warm one; each call after the first is
    a hit."""
    def run():
        code = COUNTERS.replace("DEVICE", repr(device))
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                             env=dict(os.environ, PYTHONPATH=str(REPO), TRACEJIT_CACHE_DIR=str(tmp_path)))
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])

    empty, warm = run(), run()
    kernels = empty["kernels"]
    layout = tj.device(device).layout
    library = 3 if layout.library and not layout.tiled else 0   # (numba, and OpenCL on a CPU: host_calls.py)
    calls = {"traces": 1, "hits": 1, "plans": 1}
    assert empty["products"] == dict(calls, compiles=kernels["products"] - library, disk_hits=0, library=library)
    assert warm["products"] == dict(calls, compiles=0, disk_hits=kernels["products"] - library, library=library)
    assert empty["shifted"] == dict(calls, compiles=kernels["shifted"], disk_hits=0, library=0)
    assert warm["shifted"] == dict(calls, compiles=0, disk_hits=kernels["shifted"], library=0)
    assert kernels["shifted"] >= 1 and kernels["products"] >= library


def test_eight_processes_filling_one_cache_at_once_all_succeed_and_leave_no_corrupt_entry(tmp_path, device):
    code = PROGRAM.replace("DEVICE", repr(device))
    env = dict(os.environ, PYTHONPATH=str(REPO), TRACEJIT_CACHE_DIR=str(tmp_path))
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
             for _ in range(8)]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err.decode()
    files = entry_files(tmp_path)
    assert files and all(parse_entry(f.read_bytes()) is not None for f in files)
    assert run_program(tmp_path, device)["compiles"] == 0


def test_a_truncated_or_altered_entry_is_reported_once_and_rebuilt(tmp_path, device):
    first = run_program(tmp_path, device)
    files = entry_files(tmp_path)
    assert len(files) == first["compiles"]
    blob = files[0].read_bytes()
    files[0].write_bytes(blob[: len(blob) // 2])                    # truncated
    flipped = bytearray(files[1].read_bytes())
    flipped[-1] ^= 0xFF                                             # one changed byte
    files[1].write_bytes(bytes(flipped))
    second = run_program(tmp_path, device)
    assert second["compiles"] == 2 and second["stderr"].count("is corrupt") == 2
    third = run_program(tmp_path, device)
    assert third["compiles"] == 0 and "corrupt" not in third["stderr"]


def test_a_changed_compiler_version_misses_and_debug_output_says_why(tmp_path, device):
    run_program(tmp_path, device)
    cuda = (("runtime.emulator.build", "compiler_version") if emulator.emulates("cuda")
            else ("codegen.simt.nvrtc", "version"))
    # numba: Numba's version, and LLVM's for the kernels it compiles directly (runtime/numba/llvm_jit.py)
    changes = {"numba": [("runtime.numba.cache", "compiler_versions"), ("runtime.numba.llvm_jit", "versions")],
               "opencl": [("runtime.opencl.compiler", "_pyopencl_version")], "cuda": [cuda]}[device]
    prelude = "".join(f"""
        import tracejit.{module} as m
        m.{function} = lambda: "a newer compiler"
    """ for module, function in changes)
    changed = run_program(tmp_path, device, prelude, TRACEJIT_DEBUG="1")
    assert changed["compiles"] >= 2
    assert "compiler was" in changed["stderr"] and "a newer compiler" in changed["stderr"]


def test_a_changed_codegen_hash_misses(tmp_path, device):
    run_program(tmp_path, device)
    prelude = """
        import tracejit.runtime.cache.key as k
        k.tracejit_part = lambda: "0.1.0+edited"
        import tracejit.runtime.numba.compiler, tracejit.runtime.opencl.compiler
        tracejit.runtime.numba.compiler.tracejit_part = k.tracejit_part
        tracejit.runtime.opencl.compiler.tracejit_part = k.tracejit_part
    """
    assert run_program(tmp_path, device, prelude, TRACEJIT_DEBUG="1")["compiles"] >= 2


def test_on_pocl_the_entry_records_pocls_cache_and_another_pocl_cache_is_not_a_hit(tmp_path):
    """PoCL keeps what it builds in its own cache: the entry says so (runtime/opencl/discovery.pocl_record)
    instead of holding a binary, whose fetch made PoCL compile every kernel a second time. A record of another
    PoCL cache directory is no hit (that directory's PoCL compiles, and the call counts it); with PoCL's cache
    off, the entry holds the binary again (docs/guide/caching.md: warming for another machine)."""
    if "opencl" not in AVAILABLE_DEVICES:
        pytest.skip("no OpenCL device here")
    from tracejit.runtime.opencl.discovery import POCL_RECORD, is_pocl
    if not is_pocl(tj.device("opencl").cl_device):
        pytest.skip("the OpenCL device is not PoCL's")
    cache, pocl = tmp_path / "tracejit", tmp_path / "pocl"
    first = run_program(cache, "opencl", POCL_CACHE_DIR=str(pocl / "a"))
    payloads = [parse_entry(f.read_bytes()) for f in entry_files(cache)]
    assert len(payloads) == first["compiles"] >= 2
    assert all(p is not None and p.startswith(POCL_RECORD) and str(pocl / "a").encode() in p for p in payloads)
    assert run_program(cache, "opencl", POCL_CACHE_DIR=str(pocl / "a"))["compiles"] == 0
    shutil.rmtree(pocl / "a")  # PoCL's cache removed: made anew, and no record names it
    assert run_program(cache, "opencl", POCL_CACHE_DIR=str(pocl / "a"))["compiles"] == first["compiles"]
    other = run_program(cache, "opencl", POCL_CACHE_DIR=str(pocl / "b"))
    assert other["compiles"] == first["compiles"] and other["disk_hits"] == 0
    binaries = tmp_path / "binaries"
    off = run_program(binaries, "opencl", POCL_CACHE_DIR=str(pocl / "c"), POCL_KERNEL_CACHE="0")
    assert off["compiles"] == first["compiles"]
    assert not any(parse_entry(f.read_bytes()).startswith(POCL_RECORD) for f in entry_files(binaries))
    # ... and a binary (warmed with PoCL's cache off, `cache import`ed) loads with PoCL's cache on
    assert run_program(binaries, "opencl", POCL_CACHE_DIR=str(pocl / "a"))["compiles"] == 0


def test_on_pocl_a_warm_stores_binaries_a_later_process_loads_without_pocls_cache(tmp_path):
    """A warm pays for PoCL's binaries (runtime/cache/ahead.py): a later process loads each program from the entry
    in 3-5 ms, not from PoCL's cache in 35-50, and a record a call left is replaced by the binary."""
    if "opencl" not in AVAILABLE_DEVICES:
        pytest.skip("no OpenCL device here")
    from tracejit.runtime.opencl.discovery import POCL_RECORD, is_pocl
    if not is_pocl(tj.device("opencl").cl_device):
        pytest.skip("the OpenCL device is not PoCL's")
    warm = PROGRAM.split("# 7 x 299")[0] + textwrap.dedent("""
        x = tj.spec((7, 299), np.float32)
        report = [tj.warm(k, x, devices="opencl") for k in (softmax, gelu)]
        assert all(r.ok for r in report), report
        print(json.dumps({"compiled": sum(r.compiled for rs in report for r in rs)}))
    """)

    def run_warm(cache, pocl):
        out = subprocess.run([sys.executable, "-c", warm], capture_output=True, text=True, timeout=300,
                             env=dict(os.environ, PYTHONPATH=str(REPO), TRACEJIT_CACHE_DIR=str(cache),
                                      POCL_CACHE_DIR=str(pocl)))
        assert out.returncode == 0, out.stderr

    def kinds(cache):
        return {parse_entry(f.read_bytes()).startswith(POCL_RECORD) for f in entry_files(cache)}

    cache, pocl = tmp_path / "warmed", tmp_path / "pocl"
    run_warm(cache, pocl / "a")
    assert kinds(cache) == {False}  # binaries only
    # a fresh PoCL cache: nothing compiled, every program loaded from its binary
    assert run_program(cache, "opencl", POCL_CACHE_DIR=str(pocl / "b"))["compiles"] == 0
    called = tmp_path / "called"
    first = run_program(called, "opencl", POCL_CACHE_DIR=str(pocl / "c"))
    assert kinds(called) == {True}  # a call's compile: records of PoCL's cache
    run_warm(called, pocl / "c")
    assert kinds(called) == {False} and len(entry_files(called)) == first["compiles"]
    assert run_program(called, "opencl", POCL_CACHE_DIR=str(pocl / "d"))["compiles"] == 0


def test_an_unusable_cache_directory_warns_and_still_computes(tmp_path, device):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = run_program(blocker, device)
    assert result["compiles"] >= 2 and "CacheWarning" in result["stderr"]


# ---- the cache itself ----

def test_get_returns_what_put_stored_and_other_keys_miss(tmp_path):
    cache = DiskCache(tmp_path)
    cache.put(key(), b"payload")
    assert cache.get(key()) == b"payload"
    assert cache.get(key(compiler="other")) is None
    assert cache.explain_miss(key(compiler="other")) == "compiler was 'c', now 'other'"
    assert cache.explain_miss(key(kernel="never seen")) == "not compiled before"


def test_a_writer_killed_mid_write_leaves_no_visible_entry(tmp_path):
    code = f"""
        import os, signal
        from pathlib import Path
        from tracejit.runtime import emulator
        from tracejit.runtime.cache import disk as disk_cache
        from tracejit.runtime.cache.disk import CacheKey, DiskCache
        real_fdopen = os.fdopen
        class Dying:
            def __init__(self, f): self.f = f
            def __enter__(self): return self
            def __exit__(self, *a): pass
            def write(self, data):
                self.f.write(data[: len(data) // 2]); self.f.flush()
                os.kill(os.getpid(), signal.SIGKILL)
        disk_cache.os.fdopen = lambda fd, mode: Dying(real_fdopen(fd, mode))
        key = CacheKey("numba", "k", (("kernel", "k"),))
        DiskCache(Path({str(tmp_path)!r})).put(key, b"x" * 1000000)
    """
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=dict(os.environ, PYTHONPATH=str(REPO)),
                         capture_output=True, timeout=120)
    assert out.returncode == -signal.SIGKILL
    cache = DiskCache(tmp_path)
    k = CacheKey("numba", "k", (("kernel", "k"),))
    assert cache.get(k) is None and cache.entries() == []
    assert list(tmp_path.rglob(".tmp-*"))            # the half-written temp file, never an entry
    assert disk_cache.remove_stale_temp_files(tmp_path, older_than_s=0) == 1
    cache.put(k, b"whole")
    assert cache.get(k) == b"whole"


def test_a_failed_build_is_never_stored(monkeypatch, tmp_path, device):
    # a cache of its own: the suite's other worker fills the shared one meanwhile
    monkeypatch.setattr(disk_cache, "CACHE", DiskCache(tmp_path))
    for module in ("numba.compiler", "numba.cache", "symbolic_sizes", "opencl.compiler", "cuda.compiler"):
        monkeypatch.setattr(f"tracejit.runtime.{module}.CACHE", disk_cache.CACHE)
    if device == "opencl":
        dev = tj.device("opencl")
        source = "__kernel void k0_broken(__global float* out) { out[0] = nope; }"
        with pytest.raises(tj.CompileError):
            dev._build("k0_broken", source)
        assert disk_cache.CACHE.get(dev.cache_key("k0_broken", source)) is None
        return
    if device.startswith("cuda"):
        compiler = tj.device(device).compiler
        source = 'extern "C" __global__ void k0_broken(float* out) { out[0] = nope; }'
        with pytest.raises(tj.CompileError):
            compiler.ptx("k0_broken", source)
        assert disk_cache.CACHE.get(compiler.cache_key("k0_broken", source)) is None
        return
    from tracejit.codegen.cpu import numba as numba_codegen
    from tracejit.codegen.cpu import native as numba_native
    render = numba_codegen.render_module
    monkeypatch.setattr(numba_codegen, "render_module", lambda *a: render(*a) + "\nnot python\n")
    monkeypatch.setenv("TRACEJIT_NUMBA_NATIVE", "0")   # a module for Numba
    with pytest.raises(tj.CompileError):
        tj.kernel(lambda a: a * 3.5 - 11.25)(np.ones(5, np.float32), device="numba")
    stored = [parse_entry(path.read_bytes()) or b"" for path, _, _ in disk_cache.CACHE.entries()]
    assert not any(b"not python" in payload for payload in stored)
    # IR that LLVM rejects: a CompileError naming the kernel, and no object code stored for it
    monkeypatch.setenv("TRACEJIT_NUMBA_NATIVE", "1")
    monkeypatch.setattr(numba_codegen, "render_module", render)
    ir_render = numba_native.render
    monkeypatch.setattr(numba_native, "render", lambda *a: ir_render(*a) + "\nnot llvm ir\n")
    before = {path for path, _, _ in disk_cache.CACHE.entries()}
    with pytest.raises(tj.CompileError, match="LLVM rejected the IR tracejit rendered for kernel k0_"):
        tj.kernel(lambda a: a * 2.5 - 13.25)(np.ones(5, np.float32), device="numba")
    new = [parse_entry(path.read_bytes()) or b"" for path, _, _ in disk_cache.CACHE.entries() if path not in before]
    assert not any(payload.startswith(b"\x7fELF") for payload in new)


def test_a_full_disk_warns_and_still_computes(monkeypatch, tmp_path, device):
    monkeypatch.setattr(disk_cache, "CACHE", DiskCache(tmp_path))
    for module in ("numba.compiler", "numba.cache", "symbolic_sizes", "opencl.compiler", "cuda.compiler"):
        monkeypatch.setattr(f"tracejit.runtime.{module}.CACHE", disk_cache.CACHE)

    def full(path, data):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(disk_cache, "write_atomic", full)
    monkeypatch.setattr("tracejit.runtime.numba.cache.write_atomic", full)   # (imported by name there)
    monkeypatch.setattr(disk_cache, "_warned", set())
    # a constant of this device's own: the CUDA check (conftest) compiles the numba run's kernels for CUDA in
    # the same worker, and a kernel compiled before writes nothing, so nothing would warn
    bias = np.float32(0.5 + sum(map(ord, device)) / 1024)
    k = tj.kernel(lambda a: a * 7.25 + bias)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = k(np.arange(4, dtype=np.float32), device=device)
    np.testing.assert_array_equal(np.asarray(got), np.arange(4, dtype=np.float32) * 7.25 + bias)
    # a kernel this process had compiled before writes nothing (and so cannot meet the full disk)
    if k.cache_info()["compiles"]:
        assert any(issubclass(w.category, CacheWarning) and "No space left" in str(w.message) for w in seen), \
            [str(w.message) for w in seen]


def test_the_size_cap_evicts_least_recently_used_entries(monkeypatch, tmp_path):
    cache = DiskCache(tmp_path)
    monkeypatch.setenv("TRACEJIT_CACHE_MAX_BYTES", "10000000")
    keys = [key(kernel=f"k{i}") for i in range(4)]
    for i, k in enumerate(keys):
        cache.put(k, bytes(300_000))
        entry = cache._entry(k)
        os.utime(entry, (1000 + i, 1000 + i))      # put in order: k0 oldest
    cache.get(keys[0])                             # ... but k0 was used last
    monkeypatch.setenv("TRACEJIT_CACHE_MAX_BYTES", "700000")
    cache.put(key(kernel="new"), bytes(10))
    assert cache.get(keys[0]) is not None and cache.get(keys[3]) is not None
    assert cache.get(keys[1]) is None and cache.get(keys[2]) is None
    assert sum(size for _, size, _ in cache.entries()) <= 700_000


def test_puts_keep_a_size_ledger_and_scan_the_cache_only_without_one(monkeypatch, tmp_path):
    """A process's first put scanned every entry to learn the cache's size: a second per compile with a
    large cache. The size now lives in a ledger; a scan happens where there is none, or at the cap."""
    cache = DiskCache(tmp_path)
    monkeypatch.setenv("TRACEJIT_CACHE_MAX_BYTES", "10000000")
    cache.put(key(kernel="a"), bytes(1000))      # no ledger yet: one scan
    scanned = sum(size for _, size, _ in cache.entries())
    assert cache.ledger_total() == scanned

    def no_scan():
        raise AssertionError("a put with a ledger scanned the cache")
    monkeypatch.setattr(cache, "entries", no_scan)
    for i in range(3):
        DiskCache(tmp_path).put(key(kernel=f"b{i}"), bytes(1000))   # other processes, same ledger
        cache.put(key(kernel=f"c{i}"), bytes(1000))
    monkeypatch.undo()
    assert cache.ledger_total() == sum(size for _, size, _ in cache.entries())
    cache.forget_size()                          # what importing an archive does
    assert cache.ledger_total() is None


class _Planted:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "pickle ran"))


def test_a_planted_pickle_is_never_unpickled(tmp_path, device):
    marker = tmp_path / "ran"
    bomb = pickle.dumps(_Planted(marker))
    cache_root = tmp_path / "cache"
    run_program(cache_root, device)
    for entry in entry_files(cache_root):
        header = json.loads(entry.read_bytes().split(b"\n")[1])
        # a well-formed entry (right key, right checksum) whose payload is the pickle
        header.update(sha256=__import__("hashlib").sha256(bomb).hexdigest(), size=len(bomb))
        entry.write_bytes(disk_cache.MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + bomb)
    with warnings.catch_warnings():
        result = run_program(cache_root, device)
    assert not marker.exists()
    assert result["compiles"] >= 2                   # the planted payloads were rejected and rebuilt


def test_the_cache_directory_is_created_private(tmp_path):
    cache = tmp_path / "new" / "cache"
    run_program(cache, "numba")
    for path in (cache, cache / "kernels", cache / "kernels" / "entries" / "numba"):
        assert path.stat().st_mode & 0o777 == 0o700, path


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only directories; the not-a-directory test covers it")
def test_a_read_only_cache_directory_warns_and_still_computes(tmp_path, device):
    cache = tmp_path / "ro"
    cache.mkdir(mode=0o500)
    try:
        result = run_program(cache, device)
    finally:
        cache.chmod(0o700)
    assert result["compiles"] >= 2 and "CacheWarning" in result["stderr"]


def test_a_later_process_loads_the_overload_for_each_call_s_own_dtypes(tmp_path, device):
    """Kernels of one source share a cached module with one overload per dtype signature; a process that
    loads them from disk in another order than they were compiled still runs each call's own."""
    program = """
    import numpy as np, tracejit as tj
    i, x = np.array([1, 2, 3]), np.array([1.5, 2.0, -3.0])
    f, g = tj.kernel(lambda a, b: a * b), tj.kernel(lambda a, b: a * b)
    for k, a in ORDER:
        assert np.array_equal(np.asarray(k(a, a, device=DEVICE)), a * a), (k, a.dtype)
    """
    for order in ("(f, i), (f, x)", "(f, x), (g, i), (g, x), (f, i)"):
        code = textwrap.dedent(program).replace("ORDER", f"[{order}]").replace("DEVICE", repr(device))
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                             env=dict(os.environ, PYTHONPATH=str(REPO), TRACEJIT_CACHE_DIR=str(tmp_path)))
        assert out.returncode == 0, out.stderr


# ---- Numba's own cache files (numba only) ----

NUMBA_FILES_PROGRAM = """
import os, sys, warnings, numpy as np, tracejit as tj
from pathlib import Path
from tracejit.errors import CacheWarning
from tracejit.runtime import emulator
from tracejit.runtime.cache import disk as disk_cache
cache, x = Path(os.environ["TRACEJIT_CACHE_DIR"]), np.arange(10, dtype=np.float32)

def fresh():   # as a new process: the module imported again, so Numba reads its cache files again
    for name in [m for m in sys.modules if m.startswith("_tracejit_numba_")]:
        del sys.modules[name]
    disk_cache._warned.clear()
    f = tj.kernel(lambda x: (x * 2 + 1).sum())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert float(np.asarray(f(x, device="numba"))) == 100.0
    return [str(w.message) for w in caught if issubclass(w.category, CacheWarning)], f.cache_info()

def flip(at):
    def damage(p):
        b = bytearray(p.read_bytes()); b[int(at * (len(b) - 1))] ^= 0xFF; p.write_bytes(bytes(b))
    return damage

def directory(p):
    p.unlink(); p.mkdir(); (p / "x").write_bytes(b"x")

WAYS = {"flip-first": flip(0), "flip-5%": flip(0.05), "flip-10%": flip(0.1), "flip-middle": flip(0.5),
        "flip-last": flip(1),   # in .nbc machine code a flip at 5% loaded silently, at 10% aborted in LLVM
        "truncate": lambda p: p.write_bytes(p.read_bytes()[:p.stat().st_size // 2]),
        "empty": lambda p: p.write_bytes(b""), "directory": directory}
assert fresh()[0] == []                                            # fills the cache
warned, info = fresh()
assert warned == [] and info["compiles"] == 0 and info["disk_hits"] == 1   # then loads it whole
for suffix in (".nbi", ".nbc"):
    for way, damage in WAYS.items():
        (target,) = cache.rglob("*" + suffix)
        damage(target)
        warned, info = fresh()
        assert len(warned) == 1 and "Numba's cache files" in warned[0], (suffix, way, warned)
        assert info["compiles"] == 1, (suffix, way, info)
        warned, info = fresh()
        assert warned == [] and info["compiles"] == 0 and info["disk_hits"] == 1, (suffix, way, warned, info)
print("ok")
"""


def test_damaged_numba_cache_files_are_reported_once_rebuilt_and_the_next_process_is_clean(tmp_path):
    """Each .nbi/.nbc file flipped (five places), truncated, emptied or replaced with a directory: one
    CacheWarning, the right result, and the next load takes Numba's rewritten files."""
    out = subprocess.run([sys.executable, "-c", NUMBA_FILES_PROGRAM], capture_output=True, text=True,
                         timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO), TRACEJIT_CACHE_DIR=str(tmp_path),
                                           TRACEJIT_NUMBA_NATIVE="numba"))   # Numba's files: Numba compiles
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


CACHED_ONLY_PROGRAM = """
import sys, numpy as np, tracejit as tj

@tj.kernel
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)

x = np.random.default_rng(0).standard_normal((7, 299)).astype(np.float32)
e = np.exp(x - x.max(axis=-1, keepdims=True))
np.testing.assert_allclose(np.asarray(softmax(x, device="numba")), e / e.sum(axis=-1, keepdims=True), rtol=1e-6)
loaded = "numba.np.arraymath" in sys.modules   # one of the modules of Numba's implementations
print(softmax.cache_info()["compiles"], loaded, "numba" in sys.modules)
new = tj.kernel(lambda a: np.sqrt(np.abs(a)) * 3 - a.astype(np.float64))   # not in the cache: compiled
y = np.asarray(new(x, device="numba"))
assert y.dtype == np.float64 and np.array_equal(y, np.sqrt(np.abs(x)) * 3 - x.astype(np.float64))
"""


@pytest.mark.parametrize("mode", ["1", "numba"])
def test_a_process_whose_kernels_are_all_in_the_cache_skips_numbas_compiler_setup(tmp_path, mode):
    """Loading a kernel's machine code needs only Numba's runtime: a later process does not import the
    implementations of everything Numba compiles (0.1-0.25 s of its first call), and a kernel it must
    compile after that still compiles and gives NumPy's answer. A kernel LLVM compiles directly (the
    default for the softmax: runtime/numba/llvm_jit.py) does not import Numba at all, compiled or loaded."""
    env = dict(os.environ, PYTHONPATH=str(REPO), TRACEJIT_CACHE_DIR=str(tmp_path), TRACEJIT_NUMBA_NATIVE=mode)
    lines = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", CACHED_ONLY_PROGRAM], capture_output=True, text=True,
                             timeout=300, env=env)
        assert out.returncode == 0, out.stderr
        lines.append(out.stdout.split())
    if mode == "numba":
        assert lines == [["1", "True", "True"], ["0", "False", "True"]]
    else:
        assert lines == [["1", "False", "False"], ["0", "False", "False"]]


def test_a_read_only_numba_cache_as_a_non_root_user_loads_and_a_new_kernel_warns_and_computes():
    """A cache populated earlier, then made read-only (chmod -R a-w), used by a user who can write neither
    it nor HOME: what is there loads (Numba's files too) without a compile or a warning; a new kernel is
    compiled in-process with a CacheWarning. Under root (CI) the child drops privileges, so the test
    really runs."""
    prefix = unprivileged()
    top = Path(tempfile.mkdtemp(prefix="tracejit-ro-"))   # not tmp_path: its parent is private to root
    cache, home = top / "cache", top / "home"
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(PYTHONPATH=str(REPO), TRACEJIT_CACHE_DIR=str(cache), HOME=str(home),
               XDG_CACHE_HOME=str(home / ".cache"))
    code = PROGRAM.replace("DEVICE", repr("numba"))
    run = lambda code=code: subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True,
                                           text=True, timeout=300, cwd="/", env=env)
    try:
        home.mkdir()
        top.chmod(0o755)
        if "--reuid=65534" in prefix:
            for p in [top, home]:
                os.chown(p, 65534, 65534)
        filled = run()   # populated earlier by the same user and interpreter (the key names the Python)
        assert filled.returncode == 0 and "CacheWarning" not in filled.stderr, filled.stderr
        for p in [top, *top.rglob("*")]:
            p.chmod(0o755 if p == top else (p.stat().st_mode | 0o444 | (0o111 if p.is_dir() else 0)) & ~0o222)
        loaded = run()
        # new kernels (not new sizes: numba kernels differing only in their global size are one compile)
        new = run(code.replace("x.max(", "x.min(").replace("0.044715", "0.044716"))
    finally:
        for p in [top, *top.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o700)
        shutil.rmtree(top)
    assert loaded.returncode == 0 and "Warning" not in loaded.stderr, loaded.stderr
    assert json.loads(loaded.stdout) == {"compiles": 0, "disk_hits": 2}
    assert new.returncode == 0 and "CacheWarning" in new.stderr, new.stderr
    assert json.loads(new.stdout) == {"compiles": 2, "disk_hits": 0}


def test_sizing_an_entry_another_process_is_evicting_does_not_raise(tmp_path, monkeypatch):
    """A soak's shared, capped cache raised FileNotFoundError into a kernel call: sizing an entry's artifacts
    while another process's eviction removed them (the directory, or a file the walk had listed)."""
    folder = tmp_path / "artifacts"
    (folder / "__pycache__").mkdir(parents=True)
    for name in ("m.py", "__pycache__/m.nbi"):
        (folder / name).write_bytes(b"x" * 10)
    assert disk_cache._tree_size(folder) == 20
    real_stat = Path.stat

    def vanished(self, *args, **kwargs):
        if self.name == "m.nbi":
            raise FileNotFoundError(2, "No such file or directory", str(self))
        return real_stat(self, *args, **kwargs)
    monkeypatch.setattr(Path, "stat", vanished)
    assert disk_cache._tree_size(folder) == 10
    monkeypatch.setattr(Path, "rglob", lambda self, pattern: (_ for _ in ()).throw(
        FileNotFoundError(2, "No such file or directory", str(self))))
    assert disk_cache._tree_size(folder) == 0


_EVICTED_ONCE = """
import os, shutil, numpy as np, tracejit as tj
from tracejit.runtime.numba import cache
real = cache.module_file
evicted = []
def module_file(key, modname, source):   # another process's eviction, between the write and the import
    path, stored = real(key, modname, source)
    if not evicted:
        evicted.append(path)
        shutil.rmtree(path.parent)
    return path, stored
cache.module_file = module_file
x = np.arange(12, dtype=np.int32).reshape(3, 4)
assert (tj.kernel(lambda x: x.argmax(axis=-1))(x) == x.argmax(axis=-1)).all() and evicted
print("ok")
"""


def test_a_kernel_module_evicted_between_its_write_and_its_import_is_written_again(tmp_path):
    env = dict(os.environ, TRACEJIT_CACHE_DIR=str(tmp_path), TRACEJIT_NUMBA_NATIVE="0", TRACEJIT_DEVICE="numba")
    done = subprocess.run([sys.executable, "-c", _EVICTED_ONCE], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
