"""The numba device's compiles: Numba's (under a time limit, its stages timed for TRACEJIT_DEBUG=1, Python's
cycle collector paused) and LLVM's directly (runtime/numba/llvm_jit.py), with the errors they raise; and the
device's role that renders kernel modules, keys them in the disk cache and loads them (NumbaModules)."""

from __future__ import annotations

import contextlib
import contextvars
import gc
import importlib.util
import os
import sys
import threading
import time
import warnings
from dataclasses import dataclass

import numpy as np

from tracejit.codegen.cpu import numba as numba_codegen
from tracejit.codegen.cpu.native import FUNCTION
from tracejit.errors import CompileError, CompileTimeoutError
from tracejit.ir.kernel_ir import KernelIR, faults, has_atomics
from tracejit.runtime import choices
from tracejit.runtime.cache.disk import CACHE, CacheKey
from tracejit.runtime.cache.key import SHARED_NAME, shared_source, source_part, tracejit_part
from tracejit.runtime.debug import current_times, log, stage
from tracejit.runtime.numba import blas, llvm_jit, cache as numba_cache, threads as numba_threads
from tracejit.runtime.numba.cache import FASTMATH, first_lines
from tracejit.runtime.symbolic_sizes import SymbolicSizes

COMPILE_TIMEOUT = 120.0  # seconds one numba compile may take (TRACEJIT_COMPILE_TIMEOUT; 0: no limit)


def try_compile(fn, signature, name: str, path: str):
    """(entry point, None), or (None, the exception) where Numba failed; a timeout is raised as it is."""
    try:
        with _collector_paused():
            return _compile_guarded(fn, signature, name, path), None
    except CompileTimeoutError:
        raise
    except Exception as e:  # noqa: BLE001 - the caller decides: damaged cache files, or a compile error
        return None, e


@contextlib.contextmanager
def _collector_paused():
    """Python's cycle collector off while Numba compiles: Numba makes objects by the hundred thousand, and
    the full collections they set off (each walking every object of the process, Numba's own included)
    were a quarter of a kernel's compile time. The garbage is collected after."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def compile_error(e: Exception, name: str, module) -> CompileError:
    return CompileError(
        f"numba failed to compile kernel {name}:\n{first_lines(str(e))}\ngenerated source: {module.__file__}"
    )


_overdue: set[threading.Thread] = set()  # compiles that ran past the limit and are still going


def compile_timeout() -> float | None:
    """TRACEJIT_COMPILE_TIMEOUT in seconds (default COMPILE_TIMEOUT); None where it is 0: no limit."""
    raw = os.environ.get("TRACEJIT_COMPILE_TIMEOUT", "").strip()
    if not raw:
        return COMPILE_TIMEOUT
    try:
        limit = float(raw)
    except ValueError:
        warnings.warn(
            f"TRACEJIT_COMPILE_TIMEOUT={raw!r} is not a number of seconds; using {COMPILE_TIMEOUT:g}",
            RuntimeWarning,
            stacklevel=2,
        )
        return COMPILE_TIMEOUT
    return limit if limit > 0 else None


def _compile_guarded(fn, signature, name: str, path: str):
    """fn.compile(signature), or CompileTimeoutError after compile_timeout() seconds."""
    return guarded(lambda: _compile_in_stages(fn, signature), name, "numba", f"Generated source: {path}.")


def guarded(compile, name: str, compiler: str, source: str):
    """compile(), or CompileTimeoutError after compile_timeout() seconds.

    LLVM cannot be interrupted, so the compile runs in a daemon thread and the caller stops waiting for
    it: the caller gets a loud error instead of a hang. The abandoned compile goes on in the background
    (holding Numba's compiler lock or llvm_jit's, so other compiles in this process wait for it, under the
    same limit) and does not keep the process from exiting."""
    limit = compile_timeout()
    if limit is None:
        return compile()
    box = {}

    def work():
        try:
            box["entry"] = compile()
        except BaseException as e:  # handed to the waiting caller
            box["error"] = e
        finally:
            _overdue.discard(threading.current_thread())

    worker = threading.Thread(
        target=contextvars.copy_context().run,
        args=(work,),  # the caller's stage times
        name=f"tracejit {compiler} compile {name}",
        daemon=True,
    )
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        others = sorted(t.name.rsplit(" ", 1)[-1] for t in list(_overdue) if t.is_alive())
        _overdue.add(worker)
        waiting = (
            f" It was waiting for earlier compiles that also ran past the limit and still run: {', '.join(others)}."
            if others
            else ""
        )
        raise CompileTimeoutError(
            f"{compiler} did not finish compiling kernel {name} within {limit:g} s "
            f"(TRACEJIT_COMPILE_TIMEOUT); gave up.{waiting} {source} LLVM cannot be "
            f"interrupted, so that compile goes on in a background thread. If the kernel is just big, "
            f"raise TRACEJIT_COMPILE_TIMEOUT (seconds; 0 turns the limit off); a kernel that never "
            f"finishes compiling is a tracejit bug: please report it."
        ) from None
    if "error" in box:
        raise box["error"]
    return box["entry"]


def direct_llvm() -> bool:
    """Whether llvm_jit can make entry points in this interpreter (it reads NumPy's array struct)."""
    try:
        llvm_jit.layout()
    except llvm_jit.Unavailable as e:
        log(1, f"kernels compile through Numba: {e}")
        return False
    return True


def parallel_entries() -> bool:
    """Whether a kernel looped in parallel over its global index can be IR that LLVM compiles directly
    (TRACEJIT_NUMBA_NATIVE=1) with an entry point running it on OpenMP's threads (llvm_jit.openmp)."""
    from tracejit.codegen.cpu.numba import native_mode

    return native_mode() == "1" and direct_llvm() and llvm_jit.openmp()


def compile_native(ir_text: str, symbol: str, loop: str, name: str) -> bytes:
    try:
        with stage("LLVM"):
            return llvm_jit.compile_object(ir_text, FUNCTION, symbol, loop == "serial", loop == "prange")
    except RuntimeError as e:  # llvmlite's error for IR that does not parse or verify
        raise CompileError(
            f"LLVM rejected the IR tracejit rendered for kernel {name}: {first_lines(str(e))}\n"
            "This is a tracejit bug: please report it. TRACEJIT_NUMBA_NATIVE=0 renders the kernel "
            "as Python for Numba instead."
        ) from None


def _compile_in_stages(fn, signature):
    """fn.compile(signature); under TRACEJIT_DEBUG=1 its time split into stages by Numba's own events: its
    compiler passes (frontend, typing, lowering to LLVM IR) and the time inside LLVM (optimisation, machine
    code), this thread's only."""
    times = current_times()
    if times is None:
        return fn.compile(signature)
    from numba.core import event

    thread = threading.get_ident()

    class Stages(event.Listener):
        def on_start(self, ev):
            if threading.get_ident() == thread:
                times.enter(_numba_stage(ev))

        def on_end(self, ev):
            if threading.get_ident() == thread:
                times.exit()

    stages = Stages()
    with event.install_listener("numba:run_pass", stages), event.install_listener("numba:llvm_lock", stages):
        return fn.compile(signature)


_NUMBA_STAGES = {
    "nopython_type_inference": "numba typing",
    "native_lowering": "numba lowering",
    "nopython_backend": "numba lowering",
}


def _numba_stage(ev) -> str:
    if ev.kind == "numba:llvm_lock":
        return "LLVM"
    return _NUMBA_STAGES.get(ev.data["name"].split(" [")[0], "numba frontend")


_LOAD_LOCK = threading.RLock()  # kernel modules are imported and compiled one thread at a time


@dataclass(frozen=True)
class NumbaKernel:
    """A kernel compiled by Numba (or LLVM): its name, module source, kernel IR (what f.lower() lists)."""

    name: str
    source: str
    ir: KernelIR
    parallel: bool
    cached: bool = False  # loaded from the disk cache: nothing was compiled
    # the arguments before the buffers: the global size (for a kernel not run in chunks), then the sizes that
    # are arguments of this kernel's code (codegen.numba.render's `symbolic`)
    lead: tuple = ()


def _argument(value, dtype: np.dtype | None):
    """A symbolic size's value as the argument its kernel takes (`dtype`: slot_argument's)."""
    assert dtype is not None  # a size is symbolic only where it can be an argument
    return int(value) if dtype == np.int64 else dtype.type(value)


def _signature(kernel: KernelIR, chunks: bool, values: tuple = ()):
    import numba

    chunk = [numba.int64, numba.int64] if chunks else [numba.int64]  # [start, stop) of the global range, or its size
    chunk += [numba.int64 if isinstance(v, int) else numba.from_dtype(np.asarray(v).dtype) for v in values]
    args = chunk + [
        numba.types.Array(numba.from_dtype(np.dtype("uint16") if p.dtype == np.float16 else p.dtype), 1, "C")
        for p in kernel.params
    ]
    if faults(kernel):
        args.append(numba.types.Array(numba.int64, 1, "C"))  # the error record, see codegen.numba
    return numba.types.void(*args)


class NumbaModules:
    """Renders, loads and compiles kernel modules (a role of NumbaDevice, which sets these attributes)."""

    sizes: SymbolicSizes
    _loaded: dict[tuple, tuple]
    _native: dict[str, tuple]

    def _build(self, kernel: KernelIR, loop: str, sizes: dict, symbolic: dict):
        """Render the kernel with these slots as arguments and load it: (source, the arguments' values,
        its functions, whether nothing was compiled)."""
        with stage("render"):
            source = numba_codegen.render_module([(kernel, loop)], symbolic, loop == "prange" and parallel_entries())
        values = tuple(_argument(sizes[slot], numba_codegen.slot_argument(kernel, slot)) for slot in sorted(symbolic))
        fns, cached = self._load(source, kernel, loop, values)
        return source, values, fns, cached

    def _other_loops(self, kernel: KernelIR, loop: str, sizes: dict, named: set) -> None:
        """A kernel whose work follows a dimension tj.spec named loops serially or in parallel by the size
        of each call: its other loop kinds are compiled too (into the disk cache), so that no size of
        the named dimension compiles at run time."""
        for other in numba_codegen.LOOPS:
            if other == loop or other != "serial" and has_atomics(kernel):
                continue
            with stage("render"):
                symbolic = choices.sizes_of(self).symbolic(kernel, other, sizes, named)
            cached = self._build(kernel, other, sizes, symbolic)[3]
            log(
                1,
                f"{kernel.name}: its {other} loop {'was cached' if cached else 'compiled'} too, for other "
                "sizes of the named dimensions",
            )

    def _gemm_driver(self, dtype: np.dtype, compile: bool = True):
        """blas.DRIVER's entry point for these operands: loaded from the disk cache, else compiled (once per
        machine, ~0.3 s), or None where `compile` is False and it is not in the cache."""
        import numba

        source = blas.driver_source(dtype)
        key = self._key(source, "tj_gemm")
        if not compile and not any(m[0] == key.digest for m in self._loaded) and CACHE.get(key) is None:
            return None
        array = numba.types.Array(numba.from_dtype(np.dtype(dtype)), 1, "C")
        signature = numba.types.boolean(array, array, array, numba.types.Array(numba.types.int64, 1, "C"))
        with stage("blas driver"), _LOAD_LOCK:
            (entry, _), _ = self._load_function(
                source, key, "tj_gemm", signature, parallel=False, nogil=True
            )  # nogil: as ctypes calls it
        return entry

    @staticmethod
    def _key(source: str, name: str, loop: str | None = None) -> CacheKey:
        """The disk-cache key of a module Numba compiles, or (`loop`) of a kernel's object code that LLVM
        compiles directly (_load_native)."""
        how = (
            ("options", f"fastmath={sorted(FASTMATH)} error_model=numpy")
            if loop is None
            else ("loader", f"llvm object code, {loop} loop")
        )
        return CacheKey(
            "numba",
            name,
            (
                ("kernel", source_part(source)),
                ("device", numba_cache.host_cpu()),
                how,
                ("tracejit", tracejit_part()),
                ("compiler", numba_cache.compiler_versions() if loop is None else llvm_jit.versions()),
            ),
        )

    def _load(self, source: str, kernel: KernelIR, loop: str, values: tuple = ()):
        """Import the kernel's module (a real file, from the disk cache when it is there) and compile
        it with Numba, whose own cache beside the module makes a second process compile nothing. One
        thread at a time: a module is in sys.modules before it has finished executing."""
        with _LOAD_LOCK:
            return self._load_unlocked(source, kernel, loop, values)

    def _load_unlocked(self, source: str, kernel: KernelIR, loop: str, values: tuple):
        shared = shared_source(source, kernel.name)
        ir_text = numba_codegen.native_ir(shared) if numba_codegen.native_mode() == "1" else None
        if ir_text is not None and direct_llvm():
            return self._load_native(shared, ir_text, kernel.name, loop)
        return self._load_function(
            shared,
            self._key(shared, kernel.name),
            SHARED_NAME,
            _signature(kernel, loop == "chunks", values),
            loop == "prange",
            loop == "chunks",
        )

    def _load_native(self, source: str, ir_text: str, name: str, loop: str):
        """A natively rendered kernel compiled by LLVM directly (runtime/numba/llvm_jit.py), its object code kept
        in the disk cache: ((entry point, its fallback for views it refuses), whether nothing was compiled).
        Under _LOAD_LOCK."""
        key = self._key(source, name, loop)
        hit = self._native.get(key.digest)
        if hit is not None:
            return hit, True
        symbol = f"tracejit.{key.digest[:32]}"
        with stage("disk cache"):
            obj = CACHE.get(key)
        if obj is not None:
            try:
                with stage("load object code"):
                    entry = llvm_jit.load(obj, symbol, name)
            except llvm_jit.BadObject as e:  # whole by its checksum, yet not object code: put there by hand
                CACHE.reject(key, str(e))
                obj = None
        cached = obj is not None
        if obj is None:
            t0 = time.perf_counter()
            obj = guarded(
                lambda: compile_native(ir_text, symbol, loop, name),
                name,
                "LLVM",
                "(TRACEJIT_NUMBA_NATIVE=0 has Numba compile the kernel from Python instead.)",
            )
            with stage("disk cache"):
                CACHE.put(key, obj)
            log(1, f"compiled {name} (numba, LLVM directly) in {1e3 * (time.perf_counter() - t0):.0f} ms")
            with stage("load object code"):
                entry = llvm_jit.load(obj, symbol, name)
        fns = self._native[key.digest] = (entry, llvm_jit.fallback(entry))
        return fns, cached

    def _load_function(
        self, source: str, key: CacheKey, name: str, signature, parallel: bool, nogil: bool, contract: bool = True
    ):
        """Function `name` of the module `source` (the disk cache's file under `key`), compiled by Numba for
        `signature` (contract: numba_cache.dispatcher's): ((entry point, dispatcher), whether nothing was
        compiled). Under _LOAD_LOCK."""
        memo = (key.digest, parallel, nogil, signature, contract)
        modname = f"_tracejit_numba_{key.digest[:24]}"
        hit = self._loaded.get(memo)
        if hit is not None and sys.modules.get(modname) is hit[0]:  # (the module may have been dropped)
            return hit[1], True
        module = sys.modules.get(modname)
        stored = True
        for attempt in range(2) if module is None else ():
            with stage("disk cache"):
                path, stored = numba_cache.module_file(key, modname, source)
            spec = importlib.util.spec_from_file_location(modname, path)
            assert spec is not None and spec.loader is not None  # a .py file
            module = importlib.util.module_from_spec(spec)
            sys.modules[modname] = module  # numba's disk cache finds the module through sys.modules
            try:
                with stage("import module"):
                    spec.loader.exec_module(module)
                break
            except FileNotFoundError:  # another process evicted the entry just now: written again, once
                del sys.modules[modname]
                if attempt:
                    raise CompileError(
                        f"generated module {path} was removed twice while it was imported (by "
                        "another process sharing a full kernel cache?); raise "
                        "TRACEJIT_CACHE_MAX_BYTES"
                    ) from None
            except Exception as e:
                del sys.modules[modname]
                raise CompileError(f"generated module {path} failed to import: {e}") from None
        assert module is not None  # imported above (or raised)
        fn = getattr(module, name)
        file = module.__file__
        assert file is not None  # made from a file (module_file)
        if not hasattr(fn, "compile"):
            # nogil: the chunks of a kernel run at once on several threads
            fn = numba_cache.dispatcher(fn, parallel=parallel, nogil=nogil, contract=contract)
            setattr(module, name, fn)
        if parallel:  # tj.set_num_threads(n) before Numba was imported: its parallel loops in this thread
            numba_threads.limit_numba()
        t0 = time.perf_counter()
        # Numba's own cache files beside the module (index .nbi, data .nbc with machine code) are loaded
        # only while they match the checksums tracejit recorded after the build that wrote them: a flipped
        # byte in machine code can load silently or abort the process inside LLVM
        damage = numba_cache.numba_files_damage(fn)
        if damage is None:
            misses = sum(fn.stats.cache_misses.values())
            # the overload for these very types (several share one module), under the time limit
            entry, error = try_compile(fn, signature, key.name, file)
            if error is not None:
                if not numba_cache.numba_cache_files(fn):
                    raise compile_error(error, key.name, module) from None
                damage = f"{type(error).__name__}: {first_lines(str(error), 1)}"  # failed to load them
        if damage is not None:
            fn = numba_cache.rebuild_without_damaged_files(fn, key.name, file, damage)
            setattr(module, name, fn)
            misses = sum(fn.stats.cache_misses.values())
            entry, error = try_compile(fn, signature, key.name, file)
            if error is not None:
                raise compile_error(error, key.name, module) from None
        with stage("disk cache"):
            numba_cache.record_numba_files(fn)
        cached = sum(fn.stats.cache_misses.values()) == misses  # Numba compiled nothing
        if not stored:
            with stage("disk cache"):
                CACHE.put(key, source.encode())  # only after a successful build
        log(1, f"{'loaded' if cached else 'compiled'} {key.name} (numba) in {1e3 * (time.perf_counter() - t0):.0f} ms")
        # the entry point skips numba's type dispatch; the dispatcher stays for arrays of other numba
        # types (read-only views), which it compiles on demand
        self._loaded[memo] = (module, (entry, fn))
        return (entry, fn), cached
