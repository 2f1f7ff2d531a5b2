"""Compiling generated kernels for the emulator, loading them, and launching them.

A kernel's source (CUDA C or MSL) plus a small entry per kernel (tj_thread_NAME: the kernel called with its
arguments read from a void* array, and for Metal its [[...]] builtins from the emulator's coordinates) is
compiled by g++ or clang++ with `-O1 -fPIC` and linked alone into a shared object (about 60 ms a kernel).
The object's bytes are the artifact: kept in the kernel disk cache under a key that includes the headers'
hash and the compiler's version, and loaded with ctypes. Each module has its own shared memory statics and
calls into one scheduler library per process (tj_core.cpp, built at the first launch).

-O1: a kernel compiled as fast at -O1 as at -O0 here (the time goes to starting the compiler), and runs
optimised.
Kernels without a barrier or warp function are launched without fibers: their threads are plain calls.
-fstack-clash-protection makes a frame too large for a fiber's stack touch the guard page below it, so the
overflow is reported (tj_core.cpp turns memory faults inside a launch into errors) instead of silently
writing over the next fiber's stack.

Launch orders: each launch runs its blocks and the threads between waits forward, reversed or shuffled,
in turn (launch number modulo 3), shuffles seeded by TRACEJIT_EMULATE_SEED (default 0) and the launch number,
so one seed gives the same results on every run.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from tracejit.codegen import build_log
from tracejit.codegen.simt.msl_check import KERNEL, PARAM, find_clang, split_params
from tracejit.errors import CompileError, DeviceError
from tracejit.runtime.cache.key import source_part, tracejit_part
from tracejit.runtime.debug import log
from tracejit.runtime.cache.disk import CACHE, CacheKey
from tracejit.runtime.emulator import DESCRIPTION

INCLUDE = Path(__file__).with_name("include")
CORE = Path(__file__).with_name("tj_core.cpp")
# -fno-threadsafe-statics: shared-memory arrays are static locals; a guard for them needs libstdc++, unlinked.
# -pipe: the compiler hands its assembly to the assembler through a pipe, not a file (32.5 -> 29.9 ms a kernel).
FLAGS = (
    "-std=c++17",
    "-pipe",
    "-O1",
    "-fPIC",
    "-fno-exceptions",
    "-fno-rtti",
    "-fno-threadsafe-statics",
    "-fstack-clash-protection",
    "-w",
)
SEED_ENV = "TRACEJIT_EMULATE_SEED"
DEBUG_ENV = "TRACEJIT_EMULATE_DEBUG"
DEBUG_FLAGS = ("-g", "-O0")
SYNC = re.compile(
    r"__syncthreads|__syncwarp|__shfl|__ballot|__any_sync|__all_sync|__activemask|"
    r"threadgroup_barrier|simdgroup_barrier|simd_"
)
PRELUDE = {"cuda": "tj_cuda.h", "metal": "metal_stdlib"}
ELF = b"\x7fELF"


@functools.cache
def compiler() -> str | None:
    """TRACEJIT_EMULATE_CXX, else g++ (it compiles a kernel in about 2/3 of clang++'s time), clang++, c++."""
    want = os.environ.get("TRACEJIT_EMULATE_CXX")
    if want:
        return shutil.which(want)
    return shutil.which("g++") or find_clang() or shutil.which("c++")


@functools.cache
def compiler_version() -> str:
    cxx = compiler()
    if cxx is None:
        return "none"
    done = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=False)
    return (done.stdout.splitlines() or ["unknown"])[0].strip()


@functools.cache
def headers_hash() -> str:
    h = hashlib.sha256()
    for path in [*sorted(INCLUDE.iterdir()), CORE]:
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def unavailable_reason() -> str | None:
    if compiler() is None:
        return "the emulator compiles kernels as C++ and found no clang++ or g++ (Debian: apt-get install clang)"
    return None


# ---- entries ----
# Metal builtins from the emulator's coordinates of the running thread (1-D launches)
METAL_BUILTINS = {
    "thread_position_in_grid": "(tj_now.block_idx.x * tj_now.block_dim.x + tj_now.thread_idx.x)",
    "thread_position_in_threadgroup": "tj_now.thread_idx.x",
    "thread_index_in_threadgroup": "tj_now.linear_tid",
    "threadgroup_position_in_grid": "tj_now.block_idx.x",
    "threads_per_threadgroup": "tj_now.block_dim.x",
    "threadgroups_per_grid": "tj_now.grid_dim.x",
    "threads_per_grid": "(tj_now.grid_dim.x * tj_now.block_dim.x)",
    "thread_index_in_simdgroup": "(tj_now.linear_tid % ::tj::WARP)",
    "simdgroup_index_in_threadgroup": "(tj_now.linear_tid / ::tj::WARP)",
    "simdgroups_per_threadgroup": "((tj_now.block_dim.x + ::tj::WARP - 1) / ::tj::WARP)",
    "threads_per_simdgroup": "::tj::WARP",
    "thread_execution_width": "::tj::WARP",
}


def metal_entry(source: str, name: str) -> str:
    """tj_thread_NAME(void** a): the kernel with buffer(i) read from a[i] and the builtins it declares."""
    m = next((k for k in KERNEL.finditer(source) if k.group(1) == name), None)
    if m is None:
        raise CompileError(f"the MSL of kernel {name} has no `kernel void {name}(`; this is a tracejit bug")
    depth, end = 0, m.end() - 1
    for end in range(m.end() - 1, len(source)):
        depth += {"(": 1, ")": -1}.get(source[end], 0)
        if depth == 0:
            break
    args = []
    for text, _ in split_params(source[m.end() : end]):
        p = PARAM.match(" ".join(text.split()))
        if p is None:
            raise CompileError(f"kernel {name}: parameter `{text.strip()}` has no attribute the emulator knows")
        ptype, attr = p.group("type").strip(), p.group("attr").strip()
        index = re.fullmatch(r"buffer\s*\(\s*(\d+)\s*\)", attr)
        if index:
            pointee = ptype[:-1] + "*" if ptype.endswith("&") else ptype + "*"
            args.append(f"*({pointee})a[{index.group(1)}]")
        elif attr in METAL_BUILTINS:
            args.append(f"({ptype}){METAL_BUILTINS[attr]}")
        else:
            raise CompileError(f"kernel {name}: the emulator does not provide [[{attr}]]")
    return f"TJ_EXPORT void tj_thread_{name}(void** a) {{ {name}({', '.join(args)}); }}"


def entry(dialect: str, source: str, name: str) -> str:
    """tj_thread_NAME, and tj_waits_NAME: whether its threads need fibers (a barrier or warp function)."""
    call = f"TJ_CUDA_ENTRY({name})" if dialect == "cuda" else metal_entry(source, name)
    return f"{call}\nTJ_EXPORT const int tj_waits_{name} = {int(bool(SYNC.search(source)))};"


# ---- compiling ----
def cache_key(dialect: str, name: str, source: str) -> CacheKey:
    return CacheKey(
        f"{dialect}-emulated",
        name,
        (
            ("kernel", source_part(source)),
            ("entry", name),  # the object holds the emulator's entry for this one function of the source
            ("emulator", headers_hash()),
            ("options", " ".join(FLAGS)),
            ("tracejit", tracejit_part()),
            ("compiler", compiler_version()),
        ),
    )


BUILT: dict[str, int] = {}  # kernel sources built (compiled or found in the disk cache), per dialect


def debugging() -> bool:
    """TRACEJIT_EMULATE_DEBUG=1: kernels built for a debugger (-g -O0, their source kept in this process's
    directory, which the debug information names), never from or into the disk cache."""
    return os.environ.get(DEBUG_ENV) == "1"


def build(dialect: str, name: str, source: str) -> tuple[bytes, bool]:
    """The shared object of kernel `name` (its source in `dialect`), from the disk cache or compiled now;
    also whether it came from the cache."""
    BUILT[dialect] = BUILT.get(dialect, 0) + 1
    if debugging():
        return _compile(dialect, name, source, _work_dir()), False
    key = cache_key(dialect, name, source)
    image = CACHE.get(key)
    if image is not None and image.startswith(ELF):  # anything else in the entry is not ours: rebuilt
        return image, True
    t0 = time.perf_counter()
    image = _compile(dialect, name, source)
    CACHE.put(key, image)  # only after a successful build
    log(1, f"compiled {name} ({dialect}, {DESCRIPTION}) in {1e3 * (time.perf_counter() - t0):.0f} ms")
    return image, False


def _compile(dialect: str, name: str, source: str, keep: Path | None = None) -> bytes:
    """Compile to an object, then link it alone into a shared object: its undefined symbols (the scheduler's,
    libm's) resolve when it is loaded, against the core and the process. `ld -shared` takes milliseconds where
    the compiler driver's link takes tens of them. `keep`: a directory where the source stays."""
    with tempfile.TemporaryDirectory(prefix="tracejit-emulate-") as tmp:
        where = Path(keep or tmp)
        digest = hashlib.sha256(source.encode()).hexdigest()[:12]
        src, obj, out = where / f"{name}-{digest}.cpp", Path(tmp, f"{name}.o"), Path(tmp, f"{name}.so")
        src.write_text(f"{source}\n{entry(dialect, source, name)}\n")
        options = DEBUG_FLAGS if debugging() else ()
        headers = INCLUDE if debugging() else _precompiled(dialect)
        done = _run(
            [
                *options,
                "-I",
                str(headers),
                "-include",
                str(headers / PRELUDE[dialect]),
                "-x",
                "c++",
                "-c",
                str(src),
                "-o",
                str(obj),
            ]
        )
        if done.returncode != 0:
            raise CompileError(
                build_log.annotate(
                    f"the emulator's C++ compiler ({Path(_compiler()).name}) rejected generated kernel {name}:",
                    source,
                    done.stderr,
                    rf"{re.escape(str(src))}:(\d+):\d+",
                )
            )
        linker = shutil.which("ld")
        link = (
            [linker, "-shared", str(obj), "-o", str(out)]
            if linker
            else [_compiler(), "-shared", "-nostdlib", str(obj), "-o", str(out)]
        )
        done = subprocess.run(link, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise DeviceError(f"the emulator could not link kernel {name}: {done.stderr[:2000]}")
        return out.read_bytes()


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([_compiler(), *FLAGS, *args], capture_output=True, text=True, check=False)


def _compiler() -> str:
    """compiler(), which building needs: DeviceError where there is none."""
    cxx = compiler()
    if cxx is None:
        raise DeviceError(unavailable_reason())
    return cxx


def _precompiled(dialect: str) -> Path:
    """A directory with the emulator's headers and, where g++ builds it, the dialect's prelude precompiled
    beside them (PRELUDE + .gch, which g++ takes in place of the header when the flags match): parsing the
    prelude was a quarter of a small kernel's compile (53 -> 38 ms). Built once per process and dialect;
    where it cannot be built, the header itself is read, as before."""
    with _PCH_LOCK:
        return _precompile(dialect)


_PCH_LOCK = threading.Lock()


@functools.cache
def _precompile(dialect: str) -> Path:
    where = _work_dir() / "include"
    if not where.is_dir():
        shutil.copytree(INCLUDE, where)
    if "g++" in Path(_compiler()).name or "GCC" in compiler_version() or "gcc" in compiler_version():
        header = where / PRELUDE[dialect]
        done = _run(["-x", "c++-header", str(header), "-o", f"{header}.gch"])
        if done.returncode != 0:
            log(1, f"the emulator's {dialect} prelude did not precompile ({done.stderr[:200]}); kernels read it")
    return where


@functools.cache
def _work_dir() -> Path:
    """This process's directory for loaded modules (removed at exit)."""
    path = tempfile.mkdtemp(prefix="tracejit-emulated-")
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return Path(path)


@functools.cache
def core() -> ctypes.CDLL:
    """The scheduler library (tj_core.cpp), built once per process (about a second) and loaded so that every
    kernel module resolves its symbols against it."""
    out = _work_dir() / "tj_core.so"
    done = _run(["-shared", "-I", str(INCLUDE), str(CORE), "-o", str(out), "-lm"])
    if done.returncode != 0:
        raise DeviceError(
            f"the emulator's scheduler (tj_core.cpp) does not compile with {compiler()}:\n{done.stderr[:2000]}"
        )
    library = ctypes.CDLL(str(out), mode=ctypes.RTLD_GLOBAL)
    library.tj_launch.restype = ctypes.c_int
    library.tj_launch.argtypes = (
        [ctypes.c_void_p, ctypes.c_void_p]
        + [ctypes.c_uint] * 6
        + [ctypes.c_int, ctypes.c_uint, ctypes.c_ulonglong, ctypes.c_void_p, ctypes.c_ulong]
    )
    library.tj_error_text.restype = ctypes.c_char_p
    return library


# ---- loading and launching ----
class Module:
    """A loaded kernel module: its kernel's per-thread entry, whether its threads need fibers, its shared
    memory."""

    def __init__(self, library: ctypes.CDLL, name: str):
        self.library, self.name = library, name
        self.entry = ctypes.cast(getattr(library, f"tj_thread_{name}"), ctypes.c_void_p).value
        self.waits = bool(ctypes.c_int.in_dll(library, f"tj_waits_{name}").value)
        shared = library.tj_shared_memory
        shared.restype, shared.argtypes = ctypes.c_void_p, [ctypes.POINTER(ctypes.c_ulong)]
        size = ctypes.c_ulong()
        self.shared = shared(ctypes.byref(size))
        self.shared_size = size.value

    def launch(self, args: int, grid: tuple[int, int, int], block: tuple[int, int, int]) -> str | None:
        """Run the kernel over the grid with the void* array at address `args`; an error's text, or None."""
        lib = core()
        mode, seed = _next_order()
        with _LAUNCH:  # the scheduler and a module's shared memory are process-wide statics
            rc = lib.tj_launch(
                self.entry, args, *grid, *block, int(not self.waits), mode, seed, self.shared, self.shared_size
            )
            return (lib.tj_error_text().decode() or f"error {rc}") if rc else None


_LAUNCH = threading.Lock()
_count = [0]


def _next_order() -> tuple[int, int]:
    """(mode: 0 forward, 1 reverse, 2 shuffled; seed) of the next launch."""
    n = _count[0]
    _count[0] += 1
    return n % 3, int(os.environ.get(SEED_ENV, "0") or 0) * 1_000_003 + n


_modules: dict[tuple[str, str], Module] = {}


def load(image: bytes, name: str) -> Module:
    """The module of a shared-object image (loaded once per process)."""
    key = (hashlib.sha256(image).hexdigest(), name)
    found = _modules.get(key)
    if found is not None:
        return found
    core()  # first: the module's calls into the scheduler resolve against it
    path = _work_dir() / f"{name}-{key[0][:16]}.so"  # kept until exit, so a debugger finds its symbols
    path.write_bytes(image)
    library = ctypes.CDLL(str(path))
    module = _modules[key] = Module(library, name)
    return module
