"""Fault injection: damaged cache files of every kind, unusable permissions, a full disk, SIGKILL during
writes and loads, many processes and threads on one new kernel, bad arguments of every kind. Every case
ends in the right answer or a tracejit error, and the process after it is clean.

`make test` runs a covering sample (every kind of file and every way of damaging one, every fault
class); TRACEJIT_FAULTS_FULL=1 runs every combination. Each run is a fresh process, as a user's next
run would be: in-process state (loaded modules, plans) cannot hide a damaged file."""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tracejit as tj

REPO = Path(__file__).resolve().parents[1]
FULL = bool(os.environ.get("TRACEJIT_FAULTS_FULL"))
def _cache_devices() -> list[str]:
    names = {info.name: info for info in tj.devices()}
    return [d for d in ("numba", "opencl") if d in names and names[d].available]


CACHE_DEVICES = _cache_devices()

# The program every case runs: a fused row reduction (softmax) and an integer kernel, checked against
# NumPy inside the child; it prints what it compiled, loaded and was warned about.
PROBE = """
import json, sys, warnings, numpy as np, tracejit as tj
from tracejit.errors import CacheWarning
DEVICE = sys.argv[1]

@tj.kernel
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)

@tj.kernel
def mix(a, b):   # its np.cbrt is Numba's to compile: a module and Numba's files in the cache
    return (a * 3 + b // 2) % 7 + np.cbrt(a).astype(np.int32)

x = np.random.default_rng(0).standard_normal((8, 300)).astype(np.float32)
a, b = np.arange(-50, 50, dtype=np.int32), np.arange(100, dtype=np.int32)[::-1].copy()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    y = np.asarray(softmax(x, device=DEVICE))
    z = np.asarray(mix(a, b, device=DEVICE))
e = np.exp(x - x.max(axis=-1, keepdims=True))
ref = e / e.sum(axis=-1, keepdims=True)
assert y.dtype == ref.dtype and np.allclose(y, ref, rtol=1e-5, atol=1e-7), "wrong softmax"
assert z.dtype == np.int32 and np.array_equal(z, (a * 3 + b // 2) % 7 + np.cbrt(a).astype(np.int32)), "wrong integer kernel"
info = [k.cache_info() for k in (softmax, mix)]
print(json.dumps({"compiles": sum(i["compiles"] for i in info), "disk_hits": sum(i["disk_hits"] for i in info),
                  "cache_warnings": [str(w.message) for w in caught if issubclass(w.category, CacheWarning)],
                  "other_warnings": [str(w.message) for w in caught if not issubclass(w.category, CacheWarning)]}))
"""
KERNELS = 2


def env_for(cache: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(PYTHONPATH=str(REPO), TRACEJIT_CACHE_DIR=str(cache), **extra)
    return env


def probe(cache: Path, device: str, prelude: str = "", prefix=(), timeout=300, **extra) -> dict:
    """Run PROBE in a fresh process; the answer must be right and the only failure a tracejit error."""
    code = textwrap.dedent(prelude) + PROBE
    out = subprocess.run([*prefix, sys.executable, "-c", code, device], capture_output=True, text=True,
                         timeout=timeout, env=env_for(cache, **extra), cwd="/")
    assert out.returncode == 0, f"exit {out.returncode}\n{out.stderr[-4000:]}"
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["other_warnings"] == [], result
    result["stderr"] = out.stderr
    return result


def assert_clean(cache: Path, device: str, **kw) -> None:
    """The process after a fault: no warning, nothing compiled, the right answer."""
    after = probe(cache, device, **kw)
    assert after["cache_warnings"] == [] and after["compiles"] == 0 and after["disk_hits"] == KERNELS, after


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """A cache filled by one process per device, copied afresh for each case."""
    made: dict[str, Path] = {}

    def get(device: str) -> Path:
        if device not in made:
            made[device] = tmp_path_factory.mktemp(f"filled-{device}")
            first = probe(made[device], device)
            assert first["compiles"] == KERNELS and first["cache_warnings"] == [], first
        return made[device]
    return get


def fresh_copy(filled_cache: Path, tmp_path: Path) -> Path:
    cache = tmp_path / "cache"
    shutil.copytree(filled_cache, cache, symlinks=True)
    return cache


# ---- damaged cache files: every kind, every way ----

def _flip(at: float):
    def damage(p: Path) -> None:
        b = bytearray(p.read_bytes())
        b[int(at * (len(b) - 1))] ^= 0xFF
        p.write_bytes(bytes(b))
    return damage


def _garbage(p: Path) -> None:
    p.write_bytes(random.Random(p.name).randbytes(p.stat().st_size))


def _directory(p: Path) -> None:
    p.unlink()
    p.mkdir()
    (p / "x").write_bytes(b"x")


def _dangling_link(p: Path) -> None:
    p.unlink()
    p.symlink_to(p.parent / "nowhere")


WAYS = {
    "flip-first": _flip(0), "flip-5%": _flip(0.05), "flip-middle": _flip(0.5), "flip-last": _flip(1),
    "truncate": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    "empty": lambda p: p.write_bytes(b""),
    "garbage": _garbage,
    "directory": _directory,
    "dangling-link": _dangling_link,
}

# file kinds, by a glob under the cache root (and what the file holds, for the entry of the softmax, whose
# object code LLVM made directly: runtime/numba/llvm_jit.py); numba keeps a module and Numba's own index and code
# files beside the entry of a kernel Numba compiles (PROBE's integer kernel), opencl keeps the program binary
# inside the entry (on PoCL, a record that PoCL's cache holds the program)
KINDS = {
    "numba": {"entry": "kernels/entries/numba/*/*", "index": "kernels/index/numba/*",
              "object": ("kernels/entries/numba/*/*", b'"loader": "llvm object code'),
              "module": "kernels/artifacts/numba/*/*.py", "nbi": "kernels/artifacts/numba/*/__pycache__/*.nbi",
              "nbc": "kernels/artifacts/numba/*/__pycache__/*.nbc",
              "nbi-checksum": "kernels/artifacts/numba/*/__pycache__/*.nbi.sha256"},
    "opencl": {"entry": "kernels/entries/opencl/*/*", "index": "kernels/index/opencl/*"},
}


COUNTS = {"object": 1, "module": 1, "nbi": 1, "nbc": 1, "nbi-checksum": 1}   # files of each kind; others: KERNELS


def _targets(cache: Path, device: str, kind: str) -> list[Path]:
    pattern, holding = KINDS[device][kind], None
    if isinstance(pattern, tuple):
        pattern, holding = pattern
    return sorted(p for p in cache.glob(pattern) if holding is None or holding in p.read_bytes())


def _corruption_cases() -> list:
    cases = []
    ways = list(WAYS)
    for device in CACHE_DEVICES:
        for k, kind in enumerate(KINDS[device]):
            # the sample: three ways per kind, rotating, so every way meets every device
            chosen = ways if FULL else [ways[(3 * k + j) % len(ways)] for j in range(3)]
            cases += [pytest.param(device, kind, way, id=f"{device}-{kind}-{way}") for way in chosen]
    return cases


@pytest.mark.parametrize("device, kind, way", _corruption_cases())
def test_a_damaged_cache_file_is_survived_and_the_next_process_is_clean(filled, tmp_path, device, kind, way):
    cache = fresh_copy(filled(device), tmp_path)
    targets = _targets(cache, device, kind)
    assert len(targets) == COUNTS.get(kind, KERNELS), (kind, targets)
    WAYS[way](targets[0])
    probe(cache, device)       # the right answer (checked in the child), warned about or not
    assert_clean(cache, device)


@pytest.mark.parametrize("device", CACHE_DEVICES)
def test_a_cache_directory_replaced_by_a_file_is_survived_and_the_next_process_is_clean(filled, tmp_path, device):
    """A shard directory of entries, and an entry's artifact directory, each replaced by a file."""
    cache = fresh_copy(filled(device), tmp_path)
    for pattern in ("kernels/entries/*/*", "kernels/artifacts/*/*", "kernels/artifacts/*/*/__pycache__"):
        for d in sorted(cache.glob(pattern))[-1:]:
            shutil.rmtree(d)
            d.write_bytes(b"not a directory")
    probe(cache, device)
    assert_clean(cache, device)


# ---- a full disk, and SIGKILL in the middle of a write: injected into every cache write ----

# Run before PROBE in the child: every file opened for writing under the cache directory (tracejit's own
# writes through os.fdopen, Numba's through open) fails as TJ_FAULT says: "enospc:N" - the disk is full
# after N more bytes; "kill:K" - the process is killed half-way through its K-th cache file write.
INJECT = """
import builtins, errno, os, signal
_root = os.path.realpath(os.environ["TRACEJIT_CACHE_DIR"])
_kind, _n = os.environ["TJ_FAULT"].split(":")
_n, _used, _writes = int(_n), [0], [0]

class _Faulty:
    def __init__(self, f):
        self._f = f
    def write(self, data):
        if _kind == "enospc":
            room = max(_n - _used[0], 0)
            if len(data) > room:
                self._f.write(data[:room])
                _used[0] = _n
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            _used[0] += len(data)
        elif _kind == "kill":
            _writes[0] += 1
            if _writes[0] == _n:
                self._f.write(data[: len(data) // 2])
                self._f.flush()
                os.kill(os.getpid(), signal.SIGKILL)
        return self._f.write(data)
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        self._f.close()
    def __getattr__(self, name):
        return getattr(self._f, name)

def _faulty(f, path, mode):
    inside = os.path.realpath(path).startswith(_root + os.sep)
    return _Faulty(f) if inside and any(c in mode for c in "wax+") else f

_open, _fdopen = builtins.open, os.fdopen
builtins.open = lambda file, mode="r", *a, **k: (
    _faulty(_open(file, mode, *a, **k), file, mode) if isinstance(file, (str, os.PathLike)) else _open(file, mode, *a, **k))
os.fdopen = lambda fd, mode="r", *a, **k: _faulty(_fdopen(fd, mode, *a, **k), os.readlink(f"/proc/self/fd/{fd}"), mode)
"""


def cold_writes(device: str, tmp_path: Path) -> int:
    """How many cache files a cold run writes (counted with a kill point that is never reached)."""
    counter = INJECT.replace("self._f.write(data[: len(data) // 2])", "pass") + \
        "import atexit; atexit.register(lambda: open('" + str(tmp_path / "writes") + "', 'x').write(str(_writes[0])))\n"
    probe(tmp_path / "count", device, prelude=counter, TJ_FAULT="kill:1000000")
    return int((tmp_path / "writes").read_text())


def _sample(values: list, n: int) -> list:
    return values if FULL or len(values) <= n else [values[round(i * (len(values) - 1) / (n - 1))] for i in range(n)]


@pytest.mark.parametrize("device", CACHE_DEVICES)
def test_sigkill_during_each_cache_write_leaves_a_cache_the_next_process_uses(device, tmp_path):
    """Killed half-way through the 1st, 2nd, ... cache write of a cold run: the next process gets the right
    answer with no warning (nothing half-written is visible), and the one after compiles nothing."""
    n = cold_writes(device, tmp_path)
    assert n >= 2 * KERNELS
    for k in _sample(list(range(1, n + 1)), 3):
        cache = tmp_path / f"kill-{k}"
        code = textwrap.dedent(INJECT) + PROBE
        out = subprocess.run([sys.executable, "-c", code, device], capture_output=True, text=True, timeout=300,
                             env=env_for(cache, TJ_FAULT=f"kill:{k}"), cwd="/")
        assert out.returncode == -signal.SIGKILL, (k, out.returncode, out.stderr[-2000:])
        after = probe(cache, device)
        assert after["cache_warnings"] == [], (k, after)
        assert_clean(cache, device)


@pytest.mark.parametrize("device", CACHE_DEVICES)
def test_a_full_disk_at_any_byte_warns_computes_and_the_next_process_is_clean(device, tmp_path):
    """The disk fills after 0, 100, ... bytes of cache writes: a CacheWarning and the right answer (no
    raw OSError from tracejit or Numba); with space again, the next process warns about nothing."""
    for limit in _sample([0, 10, 100, 1000, 4000, 10_000, 30_000, 100_000, 300_000], 3):
        cache = tmp_path / f"enospc-{limit}"
        full = probe(cache, device, prelude=INJECT, TJ_FAULT=f"enospc:{limit}")
        assert full["compiles"] == KERNELS, (limit, full)
        after = probe(cache, device)
        assert after["cache_warnings"] == [], (limit, after)
        assert_clean(cache, device)


@pytest.mark.parametrize("device", CACHE_DEVICES)
def test_sigkill_at_random_moments_of_cold_and_warm_runs_never_damages_the_cache(device, tmp_path):
    """Killed at a random moment while compiling and writing (a cold cache) or while importing and loading
    (a warm one): every later process gets the right answer without a warning."""
    rng = random.Random(int(os.environ.get("TRACEJIT_FAULTS_SEED", "0")))
    cache = tmp_path / "cache"
    code = textwrap.dedent(PROBE)
    for trial in range(12 if FULL else 3):
        warm = trial % 2 == 1
        if not warm:
            shutil.rmtree(cache / "kernels", ignore_errors=True)   # cold
        p = subprocess.Popen([sys.executable, "-c", code, device], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=env_for(cache), cwd="/")
        try:
            p.wait(timeout=rng.uniform(0.2, 1.5 if warm else 4.0))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        after = probe(cache, device)
        assert after["cache_warnings"] == [], (trial, after)
    assert_clean(cache, device)


def test_a_real_full_filesystem_warns_and_computes(tmp_path):
    """A tmpfs that is already full (as root, in a private mount namespace) holds the cache: every write
    fails with ENOSPC, in tracejit and Numba; each device still computes, with a CacheWarning. PoCL's own
    directory on it: a tracejit error that names POCL_CACHE_DIR (PoCL cannot build without it)."""
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or unshare is None:
        pytest.skip("needs root and unshare(1) to mount a private tmpfs")
    mnt = tmp_path / "small"
    mnt.mkdir()
    opencl = "opencl" in CACHE_DEVICES
    script = textwrap.dedent(f"""
        mount -t tmpfs -o size=64k tmpfs {mnt} || exit 99
        mkdir {mnt}/pocl
        dd if=/dev/zero of={mnt}/filler bs=4k 2>/dev/null
        for d in {' '.join(CACHE_DEVICES)}; do
            POCL_CACHE_DIR={tmp_path}/pocl {sys.executable} -c "$PROBE" $d || exit 1
        done
        if {str(opencl).lower()}; then
            POCL_CACHE_DIR={mnt}/pocl {sys.executable} -c "$PROBE" opencl 2>&1 && exit 2
        fi
        exit 0
    """)
    out = subprocess.run([unshare, "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300,
                         env=env_for(mnt / "cache", PROBE=PROBE), cwd="/")
    if out.returncode == 99:
        pytest.skip(f"cannot mount a tmpfs here: {out.stderr.strip()[:200]}")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    results = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(CACHE_DEVICES)
    assert all(r["compiles"] == KERNELS and r["cache_warnings"] for r in results), results
    if opencl:
        assert "tracejit.errors." in out.stdout and "POCL_CACHE_DIR" in out.stdout, out.stdout[-3000:]


# ---- permissions, as a user bound by them (CI runs as root: the child drops its privileges) ----

def _chmod_tree(root: Path, clear: int = 0, add: int = 0) -> None:
    for p in [root, *root.rglob("*")]:
        if not p.is_symlink():
            p.chmod((p.stat().st_mode | add) & ~clear)


@pytest.mark.parametrize("device", CACHE_DEVICES)
def test_unusable_permissions_warn_and_compute_and_fixed_ones_are_clean_again(device):
    """As a non-root user: one entry unreadable (a warning, rewritten, then clean); a kernel's artifacts
    read-only (loaded as they are); the whole cache read-only (the right answer on every run); its root
    unreadable (a warning and the right answer on every run)."""
    from reference import unprivileged
    prefix = unprivileged()
    top = Path(tempfile.mkdtemp(prefix="tracejit-perm-"))    # not tmp_path: its parent is private to root
    cache, home = top / "cache", top / "home"
    run = lambda: probe(cache, device, prefix=prefix, HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"),
                        POCL_CACHE_DIR=str(home / "pocl"))
    try:
        home.mkdir()
        top.chmod(0o755)
        if "--reuid=65534" in prefix:
            for p in (top, home):
                os.chown(p, 65534, 65534)
        first = run()
        assert first["compiles"] == KERNELS and first["cache_warnings"] == [], first

        entry = sorted(cache.glob("kernels/entries/*/*/*"))[0]
        entry.chmod(0)
        unreadable = run()
        assert unreadable["cache_warnings"], unreadable
        clean = run()
        assert clean["cache_warnings"] == [] and clean["compiles"] == 0, clean

        for d in sorted(cache.glob("kernels/artifacts/*/*")):
            _chmod_tree(d, clear=0o222)
        loaded = run()
        assert loaded["cache_warnings"] == [] and loaded["compiles"] == 0, loaded
        _chmod_tree(cache, add=0o200)

        _chmod_tree(cache, clear=0o222)
        for _ in range(2):
            run()   # loads what it can (numba: Numba finds no place for its files, warns and compiles)
        _chmod_tree(cache, add=0o200)

        cache.chmod(0)
        for _ in range(2):
            closed = run()
            assert closed["compiles"] == KERNELS and closed["cache_warnings"], closed
        cache.chmod(0o700)
        assert run()["cache_warnings"] == []
    finally:
        _chmod_tree(top, add=0o700)
        shutil.rmtree(top)


# ---- many processes, each with many threads, on one new kernel ----

THREADED = """
import json, sys, threading, numpy as np, tracejit as tj
DEVICE, N = sys.argv[1], int(sys.argv[2])

@tj.kernel
def norm_rows(x):
    m = x.mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(axis=-1, keepdims=True) + 1e-5)

x = np.random.default_rng(1).standard_normal((64, 128)).astype(np.float32)
m = x.mean(axis=-1, keepdims=True)
ref = (x - m) / np.sqrt(((x - m) ** 2).mean(axis=-1, keepdims=True) + 1e-5)
barrier, errors = threading.Barrier(N), []

def work():
    barrier.wait()
    try:
        y = np.asarray(norm_rows(x, device=DEVICE))
        assert y.dtype == ref.dtype and np.allclose(y, ref, rtol=1e-4, atol=1e-5), "wrong result"
    except BaseException as e:
        errors.append(repr(e))

threads = [threading.Thread(target=work) for _ in range(N)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps({"errors": errors, **{k: norm_rows.cache_info()[k] for k in ("compiles", "disk_hits")}}))
"""


@pytest.mark.parametrize("device", CACHE_DEVICES)
def test_processes_and_threads_making_the_first_call_at_once_all_get_the_right_answer(device, tmp_path):
    """P processes, each with T threads released by a barrier, make the first call of one new kernel on an
    empty cache: every thread gets the right answer, each process compiles at most once, and a later
    process compiles nothing."""
    procs, threads = (8, 8) if FULL else (3, 4)
    env = env_for(tmp_path)
    running = [subprocess.Popen([sys.executable, "-c", THREADED, device, str(threads)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, cwd="/") for _ in range(procs)]
    for p in running:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        result = json.loads(out.strip().splitlines()[-1])
        assert result["errors"] == [] and result["compiles"] + result["disk_hits"] == 1, result
    out = subprocess.run([sys.executable, "-c", THREADED, device, "2"], capture_output=True, text=True,
                         env=env, cwd="/", timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"errors": [], "compiles": 0, "disk_hits": 1}


# ---- bad arguments of every kind, on every device ----

class _IntSubclass(int):
    pass


def _bad_arguments() -> dict:
    unaligned = np.frombuffer(b"\0" + np.arange(6, dtype=np.float32).tobytes(), np.float32, 6, 1)
    structured = np.zeros(3, dtype=[("a", np.float32), ("b", np.int32)])
    return {
        "None": None, "str": "abc", "bytes": b"abc", "object": object(), "dict": {"a": 1}, "set": {1, 2},
        "ragged list": [1, [2, 3]], "ragged nested list": [[1, 2], [3]], "empty list": [],
        "list of str": ["a", "b"], "object array": np.array([1, "a"], dtype=object),
        "str array": np.array(["a", "b"]), "complex array": np.array([1 + 2j, 3]),
        "complex scalar": 1 + 2j, "datetime array": np.array(["2020-01-01"], dtype="datetime64[D]"),
        "timedelta array": np.array([1, 2], dtype="timedelta64[s]"), "structured array": structured,
        "longdouble array": np.ones(3, np.longdouble), "int 2**63": 2**63, "int -2**63-1": -2**63 - 1,
        "int 2**64": 2**64, "int 10**30": 10**30, "uint64 array": np.array([2**64 - 1], np.uint64),
        "float nan": float("nan"), "float inf": float("inf"), "bool": True, "int subclass": _IntSubclass(3),
        "numpy int64 scalar": np.int64(7), "0-d array": np.array(2.5, np.float32),
        "memoryview": memoryview(np.arange(4, dtype=np.float32)),
        "generator": (i for i in range(3)), "big-endian": np.arange(5, dtype=">f4"), "unaligned": unaligned,
        "read-only": np.frombuffer(np.arange(4, dtype=np.int16).tobytes(), np.int16),
        "negative strides": np.arange(10, dtype=np.float64)[::-2], "zero-size": np.zeros((0, 3), np.float32),
        "zero-stride broadcast": np.broadcast_to(np.float32(1), (3, 4)),
        "ndarray subclass": np.arange(4, dtype=np.int32).view(np.recarray),
        "masked array": np.ma.masked_array([1.0, 2.0], mask=[0, 1]), "matrix": np.asmatrix(np.eye(2)),
        "32-d array": np.ones((1,) * 32, np.float32),
    }


BAD_ARGUMENTS = _bad_arguments()
SETTINGS = {"dict"}   # arguments the kernel is specialised on by value (a dict of settings: test_api.py)


def _numpy_outcome(fn, arg):
    """What NumPy makes of fn(arg), with a sequence argument taken as np.asarray takes it (as tracejit does)."""
    try:
        with np.errstate(all="ignore"):
            if isinstance(arg, (list, memoryview)):
                arg = np.asarray(arg)
            return "ok", np.asarray(fn(arg))
    except Exception as e:   # noqa: BLE001 - whatever NumPy raises, tracejit must raise its own
        return "error", e


@pytest.mark.parametrize("name", list(BAD_ARGUMENTS))
def test_every_kind_of_argument_gives_numpy_s_answer_or_a_tracejit_error(name, device):
    """x * 2 + 1 on each argument: where NumPy computes it in a dtype tracejit supports, the same values
    and dtype (or a tracejit error); where NumPy fails or needs another dtype, a tracejit error. Never a
    raw exception from NumPy, Numba, a driver or tracejit's internals."""
    arg = BAD_ARGUMENTS[name]
    fn = lambda x: x * 2 + 1   # noqa: E731
    status, expected = _numpy_outcome(fn, arg)
    try:
        got = tj.kernel(fn)(arg, device=device)
    except tj.TracejitError:
        return
    except TypeError as e:   # a dict of settings is passed to the function as it is: Python's own error, as NumPy's
        if not (name in SETTINGS and status == "error" and type(e) is type(expected) and str(e) == str(expected)):
            raise
        return
    got = np.asarray(got)
    assert status == "ok", f"NumPy raised {expected!r} but tracejit returned {got!r}"
    assert not isinstance(arg, (np.ma.MaskedArray, np.matrix)), "a mask or matrix semantics silently dropped"
    assert got.dtype == expected.dtype and got.shape == expected.shape, (got.dtype, expected.dtype)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("call", [
    "f()", "f(x, x)", "f(x, y=1)", "f(x, device='nope')", "f(x, device=3)", "f(x, device=None, out=1)",
    "f(*[x] * 300)",
])
def test_bad_calls_are_tracejit_errors(call, device):
    f, x = tj.kernel(lambda x: x + 1), np.arange(3, dtype=np.float32)
    try:
        eval(call, {"f": f, "x": x})
    except tj.TracejitError:
        return
    except TypeError as e:   # Python's own, for a call that does not match the signature
        assert "argument" in str(e), e
        return
    pytest.fail(f"{call} did not raise")
