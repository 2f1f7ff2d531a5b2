"""Numba's own cache files for tracejit's generated modules: one locator (the __pycache__ beside the
module, inside tracejit's cache), the SHA-256 checksums tracejit records after each build, damaged or
unrecorded files removed and rebuilt, and saves that cannot be written reported instead of failed."""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

from tracejit.runtime.debug import log, stage
from tracejit.runtime.cache.disk import CACHE, CacheKey, _warn_once, write_atomic

# Contraction into FMAs only: "reassoc" would let LLVM fold (x + 1) - 1 to x, and "nsz" x + 0.0 to x for
# x = -0.0, both answers NumPy does not give. The reductions reorder their own steps (numba_math.reassoc_add).
FASTMATH = {"contract"}


@functools.cache
def host_cpu() -> str:
    """The CPU as LLVM sees it (its name and a digest of its features): compiled code is for it alone."""
    from tracejit.runtime.numba.host_record import host_cpu as llvm_host_cpu

    cpu = llvm_host_cpu()
    return f"{cpu.name} {hashlib.sha256(cpu.features.encode()).hexdigest()[:16]}"


@functools.cache
def compiler_versions() -> str:
    return f"numba {numba_version()} llvmlite {installed_version('llvmlite')} python {sys.version.split()[0]}"


def numba_version() -> str:
    """Numba's version, without importing Numba where it is not imported yet (~0.2 s)."""
    return installed_version("numba")


@functools.cache
def installed_version(package: str) -> str:
    """The version of an installed package (numba, llvmlite), without importing it where it is not imported yet."""
    loaded = sys.modules.get(package)
    if loaded is not None:
        return loaded.__version__
    import importlib.util

    spec = importlib.util.find_spec(package)  # the dist-info beside the package names the version (importlib's
    if spec is not None and spec.origin:  # metadata.version scans every path entry: 15 ms of a first call)
        found = list(Path(spec.origin).parent.parent.glob(f"{package}-*.dist-info"))
        if len(found) == 1:
            return found[0].name[len(package) + 1 : -len(".dist-info")]
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:  # importable but not installed as a distribution (a source tree)
        import importlib

        return importlib.import_module(package).__version__


def first_lines(text: str, n: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[:n])


# Numba's files without the checksums tracejit records after them: a process killed between the two
# writes, or a cache filled by hand. Nothing says they are whole, so they are rebuilt, without a warning:
# nothing was damaged that the user should hear about.
UNRECORDED = "no checksums recorded for them"


def rebuild_without_damaged_files(fn, name: str, path: str, damage: str):
    """Report damaged Numba cache files once, remove them and return a fresh dispatcher (Numba then rewrites
    them whole; one without Numba's cache where they cannot be removed)."""
    damaged = numba_cache_files(fn)
    folder = damaged[0].parent if damaged else path
    message = (
        f"Numba's cache files for kernel {name} in {folder} are damaged ({damage}); "
        f"they were removed and the kernel is rebuilt"
    )
    if damage == UNRECORDED:
        log(1, message)
    else:
        _warn_once(f"numba-files:{folder}", message)
    for f in [*damaged, _numba_manifest(fn)]:
        if f.is_dir() and not f.is_symlink():
            shutil.rmtree(f, ignore_errors=True)
        else:
            _unlink(f)
    removed = not any(os.path.lexists(f) for f in damaged)
    options = fn.targetoptions
    contract = bool(options.get("fastmath", FASTMATH))
    return dispatcher(
        fn.py_func, options.get("parallel", False), options.get("nogil", False), cache=removed, contract=contract
    )


def dispatcher(py_func, parallel: bool, nogil: bool, cache: bool = True, contract: bool = True):
    """numba.njit with Numba's disk cache in the __pycache__ beside the module, inside tracejit's cache;
    without it (and a warning, once) where that directory neither exists nor can be made: each process
    then compiles. contract: a * b + c may be one fused multiply-add (kernels); not in a loop over elements,
    whose chains of sums it lengthens (an FMA's latency is an add's and more on AMD's cores: Gram-Schmidt's
    dot products 1.6x slower), and whose sums NumPy rounds after each product."""
    import numba

    fn = numba.njit(  # type: ignore[call-overload]  # Numba's stub lacks no_cfunc_wrapper, an option it takes
        cache=False,
        parallel=parallel,
        nogil=nogil,
        fastmath=FASTMATH if contract else set(),
        error_model="numpy",
        no_cfunc_wrapper=True,
    )(py_func)  # nothing calls a kernel through a C function pointer
    if cache:
        try:
            fn._cache = _function_cache_class()(py_func)  # what njit(cache=True) does, with our locator
        except (RuntimeError, OSError) as e:
            _warn_once(
                f"numba-locator:{os.path.dirname(py_func.__code__.co_filename)}",
                f"Numba cannot keep compiled kernels beside {py_func.__code__.co_filename} "
                f"({first_lines(str(e), 1)}); kernels are compiled in each process. Make the cache "
                f"directory writable or set TRACEJIT_CACHE_DIR to one that is",
            )
    return fn


@functools.cache
def _function_cache_class():
    """Numba's FunctionCache with one locator: the __pycache__ beside the module. Numba's own locators
    would send the files to NUMBA_CACHE_DIR or a user-wide directory (outside tracejit's cache, its
    checksums and its `cache clear`), and would skip a directory they cannot write, so a cache made
    read-only would compile every time; this one reads a read-only directory, and saves into it fail
    with a warning (GuardedSaves below)."""
    from numba.core import caching

    class Locator(caching.InTreeCacheLocator):
        def ensure_cache_path(self):
            os.makedirs(self.get_cache_path(), exist_ok=True)  # an existing one is used as it is

    class Impl(caching.CompileResultCacheImpl):
        _locator_classes = [Locator]

    class GuardedSaves(caching.FunctionCache):
        """A full disk, a read-only or vanished directory while Numba saves a compiled kernel costs the
        next process a compile, never this one its result."""

        _impl_class = Impl

        def load_overload(self, sig, target_context):
            """Numba's, without its refresh of the target context (load_registries) where the kernel is in
            the cache: loading machine code needs only Numba's runtime. A process whose kernels all come
            from the cache never imports the implementations of what Numba can compile."""
            from numba.core.runtime import rtsys

            rtsys.initialize(target_context)
            with self._guard_against_spurious_io_errors():
                data = self._load_overload(sig, target_context)
            if data is None:
                load_registries()  # Numba compiles next, and would do it there; timed apart from the compile
            return data

        def save_overload(self, sig, data):
            try:
                with stage("disk cache"):
                    super().save_overload(sig, data)
            except OSError as e:
                _warn_once(
                    f"numba-save:{self._cache_path}",
                    f"Numba could not write its cache files in {self._cache_path} ({e}); kernels are "
                    f"compiled but not kept for the next process",
                )

    return GuardedSaves


def load_registries() -> None:
    """What Numba does before it compiles in a process: import the implementations of everything it can
    compile (about 100 modules, cffi's C parser among them; 0.1-0.25 s), and refresh its typing and target
    contexts with them. Timed as device setup, so that a kernel's compile time is its own."""
    from numba.core.registry import cpu_target

    with stage("device setup"):
        cpu_target.typing_context.refresh()
        cpu_target.target_context.refresh()


def numba_cache_files(fn) -> list[Path]:
    """The files of Numba's disk cache for this dispatcher's function (its index and data files)."""
    cache_file = getattr(getattr(fn, "_cache", None), "_cache_file", None)
    if cache_file is None:
        return []
    folder = Path(cache_file._cache_path)
    stem = cache_file._index_name[: -len(".nbi")]
    try:
        return sorted(
            p
            for p in folder.iterdir()
            if p.name == cache_file._index_name or (p.name.startswith(stem + ".") and p.name.endswith(".nbc"))
        )
    except OSError:
        return []


def _numba_manifest(fn) -> Path:
    cache_file = fn._cache._cache_file
    return Path(cache_file._cache_path) / f"{cache_file._index_name}.sha256"


def _numba_checksums(files: list[Path]) -> str:
    return "".join(f"{hashlib.sha256(f.read_bytes()).hexdigest()}  {f.name}\n" for f in files)


def numba_files_damage(fn) -> str | None:
    """Why Numba's cache files for this function cannot be trusted, or None (also when there are none)."""
    files = numba_cache_files(fn)
    if not files:
        return None
    try:
        recorded = _numba_manifest(fn).read_text()
    except (OSError, UnicodeDecodeError):
        return UNRECORDED
    try:
        return None if _numba_checksums(files) == recorded else "their checksums differ from those recorded"
    except OSError as e:
        return f"{type(e).__name__}: {e}"


def record_numba_files(fn) -> None:
    """Record the checksums of the files Numba just wrote or loaded (nothing where it keeps none)."""
    files = numba_cache_files(fn)
    if files:
        try:
            text = _numba_checksums(files)
            manifest = _numba_manifest(fn)
            if not (manifest.is_file() and manifest.read_text() == text):
                write_atomic(manifest, text.encode())
        except (OSError, UnicodeDecodeError):
            pass  # a read-only cache: the next process finds the files unrecorded and rebuilds


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def module_file(key: CacheKey, modname: str, source: str) -> tuple[Path, bool]:
    """Where the kernel's module lives: beside its cache entry, or, when the cache directory cannot be
    written, in a directory private to this process (Numba then caches nothing for the next one).

    The module's name carries the key's digest, so a file of that name holds this very source unless it
    was damaged; Numba's cache files beside it are trusted only while the entry is whole. Also returns
    whether the entry is stored."""
    path = CACHE.artifacts(key) / f"{modname}.py"
    payload, state = CACHE.lookup(key)
    if state == "hit" and payload != source.encode():
        CACHE.remove(CACHE._entry(key))  # well-formed but not ours: planted or from a hash collision
        state = "corrupt"
    try:
        # the module's directory or Numba's __pycache__ beside it replaced by a file (or the module by a
        # directory): removed, else Numba would keep its files elsewhere or nowhere, silently
        repaired = CACHE.repair(path) | CACHE.repair(path.parent / "__pycache__" / "index")
        if state == "corrupt" or repaired:
            shutil.rmtree(path.parent, ignore_errors=True)  # Numba recompiles, nothing stale is loaded
            if state != "corrupt":
                _warn_once(
                    f"corrupt:{path}",
                    f"cache files of kernel {key.name} under {path.parent} were "
                    "damaged (a directory where a file belongs, or the reverse); "
                    "they are removed and the kernel rebuilt",
                )
            state = "corrupt"
        if not (path.is_file() and path.read_bytes() == source.encode()):
            write_atomic(path, source.encode())
        return path, state == "hit"
    except OSError:
        path = _private_dir() / f"{modname}.py"
        if not path.exists():
            write_atomic(path, source.encode())
        return path, state == "hit"


@functools.cache
def _private_dir() -> Path:
    path = Path(tempfile.mkdtemp(prefix="tracejit-numba-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path
