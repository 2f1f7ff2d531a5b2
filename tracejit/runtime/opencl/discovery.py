"""Which OpenCL devices there are, in a fixed order, and which one `opencl` means (TRACEJIT_OPENCL_DEVICE);
why PoCL, the CPU platform, though installed, offers no device or cannot build (its cache directory); how a
program is built where other processes share PoCL's cache (a lock, and one retry)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
from pathlib import Path

from tracejit.errors import DeviceError
from tracejit.runtime.cache.directory import cache_dir
from tracejit.runtime.cache.disk import write_atomic
from tracejit.runtime.device_info import host_vendor
from tracejit.runtime.debug import log as debug_log
from tracejit.runtime.process_lock import held

ENV_DEVICE = "TRACEJIT_OPENCL_DEVICE"


def all_devices() -> list:
    """Every OpenCL device whose compiler builds a kernel, in a fixed order: GPUs first, then by platform
    and device name (refused_devices() says which were left out, and why)."""
    return [d for d in _listed() if _build_problem(d) is None]


def refused_devices() -> list[str]:
    """The devices left out of all_devices(), each with its compiler's reason."""
    return [f"{describe(d)}: {_build_problem(d)}" for d in _listed() if _build_problem(d) is not None]


def _listed() -> list:
    import pyopencl as cl

    found = []
    try:
        platforms = cl.get_platforms()
    except cl.Error:  # no ICD loader or no platform: pyopencl reports PLATFORM_NOT_FOUND_KHR
        return []
    for p in platforms:
        try:
            found += p.get_devices()
        except cl.Error:
            continue
    return sorted(found, key=lambda d: (not d.type & cl.device_type.GPU, d.platform.name, d.name))


_CHECK_SOURCE = "__kernel void tracejit_check(__global float *a) { a[get_global_id(0)] *= 2.0f; }"
_build_problems: dict[int, str | None] = {}


def _build_problem(d) -> str | None:
    """Why this device's compiler cannot build a one-line kernel, or None. PoCL 3.0's LLVM 14 (PyPI's
    pocl-binary-distribution) knows no CPU newer than it (AMD's Zen 5: 'unknown target CPU'), and fails
    every build there; such a device is not offered. Asked once per device and process, and not at all
    where the disk cache records that it built on this driver and CPU (the build cost a process that found
    all its kernels cached 45 ms a device, with two PoCL platforms 90 of its 300 ms to a first result)."""
    key = d.int_ptr
    if key not in _build_problems:
        import pyopencl as cl

        record = _check_record(d)
        if _recorded(record):
            _build_problems[key] = None
            return None
        with build_lock(d, _CHECK_SOURCE):
            built, log = build_program(cl.Context([d]), d, _CHECK_SOURCE, b"")
        _build_problems[key] = (
            None
            if built is not None
            else f"its compiler cannot build a one-line kernel ({' '.join(log.split())[:300]})"
        )
        if built is not None:
            try:
                write_atomic(record, _BUILDS)
            except OSError:
                pass  # a read-only cache: the next process builds it again
    return _build_problems[key]


_BUILDS = b"builds a one-line kernel\n"


def _check_record(d) -> Path:
    """Where the cache directory records that device `d` built the check: named by the device, its
    platform's and driver's versions, pyopencl's and the CPU's (beside numba's records of the CPU)."""
    import pyopencl

    identity = "\n".join(
        (
            _CHECK_SOURCE,
            f"{describe(d)} / {d.platform.version.strip()} / driver {d.driver_version.strip()}",
            host_vendor() or "unknown CPU",
            f"pyopencl {pyopencl.VERSION_TEXT}",
        )
    )
    return cache_dir() / "host" / f"opencl-{hashlib.sha256(identity.encode()).hexdigest()[:32]}"


def _recorded(path: Path) -> bool:
    try:
        return path.read_bytes() == _BUILDS
    except OSError:
        return False


def is_pocl(d) -> bool:
    return "portable computing language" in d.platform.name.lower()


def build_lock(d, text: str):
    """A lock held while a process builds a program (or loads its binary) on device `d`; `text` names the
    program (its source, or a key built from it). PoCL keeps every program in a directory of its cache
    named by a hash of its source, options and device, and writes a file there by removing the old one
    and renaming a new one into place: a second process building the same program reads nothing between
    the two (a build failure without a compiler message, or a crash in LLVM's reader). The lock file lives
    in that cache, beside what it guards; other drivers' caches need none."""
    if not is_pocl(d):
        return contextlib.nullcontext(False)
    name = hashlib.sha256(f"{describe(d)}\n{d.driver_version}\n{text}".encode()).hexdigest()[:32]
    return held(Path(_pocl_cache_dir()) / "tracejit-locks" / name)


def build_program(context, d, source: str, options: bytes):
    """(the pyopencl program built from `source` for device `d`, None) or (None, the compiler's log). On PoCL,
    a failure the compiler gave no message for comes from its cache (what a process outside the lock left
    there, a damaged file), not from the source: the build is tried once more with an option that changes
    only PoCL's hash of the program, so it runs in a cache directory of its own that no process touches.
    A program the compiler rejects says why (`error: ...`) and is not tried again."""
    built, log = _build_once(context, d, source, options)
    if built is None and is_pocl(d) and not re.search(r"\berror\b", log, re.IGNORECASE):
        debug_log(
            1,
            f"building on {describe(d)} failed without a compiler message ({' '.join(log.split())[:200]}); "
            "once more in a PoCL cache directory of its own",
        )
        private = f" -D TRACEJIT_PRIVATE_BUILD={os.getpid()}_{os.urandom(6).hex()}".encode()
        built, log = _build_once(context, d, source, options + private)
    return built, log


def _build_once(context, d, source: str, options: bytes):
    import pyopencl as cl

    raw = cl._cl._Program(context, source)  # pyopencl's own build cache would unpickle files
    try:
        raw.build(options, [d])
        return raw, ""
    except cl.Error as e:
        try:
            log = raw.get_build_info(d, cl.program_build_info.LOG)
        except cl.Error:
            log = ""
        assert isinstance(log, str)  # (PyOpenCL's stub says object)
        return None, log.strip() or str(e)


def pocl_cache_problem() -> str | None:
    """Why PoCL, though installed, offers no device: it cannot create its kernel cache directory (a HOME
    that is not writable, as for a service user), and then lists no device at all. None if that is not it."""
    import pyopencl as cl

    try:
        if not any("portable computing language" in p.name.lower() for p in cl.get_platforms()):
            return None
    except cl.Error:
        return None
    where = _pocl_cache_dir()
    try:
        os.makedirs(where, exist_ok=True)
        if os.access(where, os.W_OK | os.X_OK):
            return None
        problem = "it is not writable"
    except OSError as e:
        problem = e.strerror or str(e)
    return (
        f"PoCL (the CPU OpenCL platform) found no device because it cannot create its cache directory "
        f"{where} ({problem}); set POCL_CACHE_DIR to a writable directory (or make HOME writable)"
    )


POCL_RECORD = b"tracejit: built in PoCL's cache "


def pocl_record(d) -> bytes | None:
    """What the disk cache keeps for a program built on PoCL device `d` in place of its binary, or None where
    it keeps the binary (other drivers; PoCL with its cache off, POCL_KERNEL_CACHE=0; a PoCL cache tracejit
    cannot mark). PoCL keeps each program it builds in its own kernel cache, and a later build of the same
    source finds it there (25-45 ms, against 5 ms to load a binary); but asking PoCL for the binary makes it
    compile each kernel of the program once more, for work-groups of any size, more than half of what a build
    cost. The record names that cache directory and the mark tracejit left in it (a random token, in a file
    of its own): where the directory was removed and made anew, or PoCL uses another, the record is not a hit
    (PoCL compiles the program again, and the call says so). (A directory's inode is no such mark: a new
    directory took the inode of the one removed just before.)"""
    if not is_pocl(d) or os.environ.get("POCL_KERNEL_CACHE", "1").strip() == "0":
        return None
    where = os.path.abspath(os.environ.get("POCL_CACHE_DIR") or os.path.join(_pocl_cache_dir(), "kcache"))
    mark = _cache_mark(Path(where))
    return None if mark is None else POCL_RECORD + f"{where} {mark}".encode()


def _cache_mark(where: Path) -> str | None:
    """The token in `where`'s tracejit-mark file, written (whole, by a link that fails where another process's
    is there first) where there is none; None where it can be neither read nor written."""
    path = where / "tracejit-mark"
    for _ in range(2):
        try:
            token = path.read_text().strip()
            if re.fullmatch(r"[0-9a-f]{32}", token):
                return token
            return None  # (not ours, or damaged: no record is made, the binary is kept instead)
        except FileNotFoundError:
            pass
        except OSError:
            return None
        try:
            with tempfile.NamedTemporaryFile("w", dir=where, prefix=".tracejit-mark-", delete=False) as f:
                f.write(os.urandom(16).hex())
            try:
                os.link(f.name, path)
            except FileExistsError:
                pass  # another process's mark: read next
            finally:
                os.unlink(f.name)
        except OSError:
            return None
    return None


def _pocl_cache_dir() -> str:
    where = os.environ.get("POCL_CACHE_DIR")
    if not where:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        where = os.path.join(base, "pocl")
    return where


def pocl_cannot_write() -> str | None:
    """Why PoCL cannot write its work files (it builds every program in its cache directory), or None."""
    where = _pocl_cache_dir()
    try:
        os.makedirs(where, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=where, prefix=".tracejit-probe-") as f:
            f.write(b"\0" * 65536)
            f.flush()
            os.fsync(f.fileno())
        return None
    except OSError as e:
        return (
            f"PoCL (the CPU OpenCL platform) builds programs in its cache directory {where}, which cannot "
            f"be written ({e.strerror or e}); free space there or set POCL_CACHE_DIR to a writable "
            f"directory with room"
        )


def describe(d) -> str:
    import pyopencl as cl

    kind = "GPU" if d.type & cl.device_type.GPU else "CPU" if d.type & cl.device_type.CPU else "accelerator"
    return f"{d.platform.name.strip()}: {d.name.strip()} ({kind}, {d.max_compute_units} compute units)"


def choose(devices: list) -> int:
    """The index `opencl` means: TRACEJIT_OPENCL_DEVICE (a number or part of a name), else the first."""
    want = os.environ.get(ENV_DEVICE, "").strip()
    if not want:
        return 0
    if want.isdigit():
        if int(want) >= len(devices):
            raise DeviceError(f"{ENV_DEVICE}={want}, but there are only {len(devices)} OpenCL device(s)")
        return int(want)
    for i, d in enumerate(devices):
        if want.lower() in describe(d).lower():
            return i
    raise DeviceError(
        f"{ENV_DEVICE}={want!r} matches no OpenCL device; devices: "
        + "; ".join(f"opencl:{i} {describe(d)}" for i, d in enumerate(devices))
    )
