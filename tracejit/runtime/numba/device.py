"""The numba target: generated modules are real files imported as real modules, compiled by numba.njit."""
from __future__ import annotations

import functools
import importlib.util
import os
import sys
import threading
import time
from dataclasses import dataclass

import numpy as np

from tracejit.codegen.cpu import numba as numba_codegen
from tracejit.errors import CompileError
from tracejit.ir import library
from tracejit.ir.fuse import Program
from tracejit.ir.kernel_ir import KernelIR, faults, has_atomics
from tracejit.ir.layout import LayoutOptions
from tracejit.ir.sizes import kernel_sizes
from tracejit.runtime.numba import blas, llvm_jit, cache as numba_cache, library as numba_library, threads as numba_threads, tuning as numba_tuning
from tracejit.runtime.array import Array
from tracejit.runtime.cache.key import SHARED_NAME, shared_source, source_part, tracejit_part
from tracejit.runtime.debug import log, stage
from tracejit.runtime.device_info import ALL_DTYPES, DeviceInfo, host_memory, host_vendor
from tracejit.runtime.device_interface import Device
from tracejit.runtime.device_stats import no_pool
from tracejit.runtime.cache.disk import CACHE, CacheKey
from tracejit.runtime.numba.cache import FASTMATH, first_lines
from tracejit.runtime.numba.compiler import compile_error, compile_native, direct_llvm, guarded, parallel_entries, try_compile
from tracejit.runtime.numba.plan import NumbaPlan
from tracejit.runtime.numba.output_pool import OutputPool
from tracejit.runtime.sharing import plan_sharing
from tracejit.runtime.symbolic_sizes import SymbolicSizes

_LOAD_LOCK = threading.RLock()   # kernel modules are imported and compiled one thread at a time

PARALLEL_MIN_WORK = 1 << 16   # below this a serial kernel dispatches faster than a threaded one
# from this much work on, a parallel kernel that Numba compiles runs in chunks on tracejit's threads
# (runtime/numba/threads.py): it compiles in half the time of a prange loop, and the threads' wake-up (10-60 us,
# where OpenMP's spinning threads take a few) is a few percent of the run; one LLVM compiles directly runs
# on OpenMP's threads (_on_openmp), except beside BLAS products, where every parallel kernel is chunked (_loop)
CHUNKS_MIN_WORK = 1 << 22


@dataclass(frozen=True)
class NumbaKernel:
    """A kernel compiled by Numba (or LLVM): its name, module source, kernel IR (what f.lower() lists)."""
    name: str
    source: str
    ir: KernelIR
    parallel: bool
    cached: bool = False   # loaded from the disk cache: nothing was compiled
    # the arguments before the buffers: the global size (for a kernel not run in chunks), then the sizes that
    # are arguments of this kernel's code (codegen.numba.render's `symbolic`)
    lead: tuple = ()


class NumbaDevice(Device):
    returns_numpy = True                   # NumPy arrays in, NumPy arrays out
    has_memory_pool = False
    name = "numba"
    # NumPy's matmul (OpenBLAS) and sort: ir/library.py. Transposed reads in tiles, by default those measured best on
    # the 2-core Zen 4 VM (x.T + y, 4096^2: float32 8x4 19 ms against 32x32 25; int8 32x8 5.6 against 18); a machine's
    # own once `python -m tracejit tune` has measured them (runtime/numba/tuning.py)
    layout = LayoutOptions(library=True, transpose_tiles=((32, 8), (32, 8), (8, 4), (8, 4)))
    inner_sizes_as_arguments = True        # row lengths and the like too, not only the global size (symbolic_sizes)

    def __init__(self, index: int | None = None):
        if index:
            raise ValueError("the numba device has no index")
        self.modules: dict[str, object] = {}
        # which sizes of each kernel are arguments of its code
        self.sizes = SymbolicSizes(numba_codegen.slot_argument, "numba-sizes")
        # (module key, loop, signature) -> (module, (entry point, dispatcher)): a kernel this process already loaded
        # (another size of a kernel whose sizes are arguments) costs a dict lookup, not a module load
        self._loaded: dict[tuple, tuple] = {}
        self._native: dict[str, tuple] = {}   # cache key digest -> (entry point, fallback): llvm_jit's kernels
        self.outputs = OutputPool()   # large results' memory, taken back when the caller drops them
        self.layout = numba_tuning.tuned_layout(type(self).layout)
        blas.settle_openmp()

    @staticmethod
    def probe():
        """Whether Numba is installed, without importing it (~0.2 s): a program whose kernels LLVM compiles
        directly (runtime/numba/llvm_jit.py) never does."""
        for package in ("numba", "llvmlite"):
            if importlib.util.find_spec(package) is None:
                return False, f"{package} is not installed; pip install numba", ""
        return True, None, f"CPU, {os.cpu_count()} threads, numba {numba_cache.numba_version()}, {blas.describe()}"

    def memory(self):
        # NumPy's arrays: tracejit keeps no count of host memory in use; it keeps large results' blocks
        return None, None, self.outputs.held_bytes

    def set_memory_limit(self, nbytes) -> None:
        no_pool(self.name)

    memory_limit = None

    @property
    def info(self) -> DeviceInfo:
        """This CPU as the OS describes it; its memory is the host's (free: what the OS has available)."""
        import llvmlite.binding as llvm
        import numba
        total, free = host_memory()
        llvm_version = ".".join(map(str, llvm.llvm_version_info))
        return DeviceInfo(self.name, "numba", "cpu", host_vendor(), f"numba {numba.__version__}, LLVM {llvm_version}",
                          total, free, numba_threads.thread_count(), None, True, None, None, None, ALL_DTYPES)

    # -- memory --
    def from_numpy(self, a: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(a)

    def clone(self, data: np.ndarray) -> np.ndarray:
        return data.copy()

    def to_numpy(self, data: np.ndarray) -> np.ndarray:
        return data

    def dlpack(self, data, *args, **kwargs):
        return data.__dlpack__(*args, **kwargs)

    def dlpack_device(self, data):
        return data.__dlpack_device__()

    def synchronize(self) -> None:
        """Numba kernels finish before the call returns; nothing to wait for."""

    # -- graph capture --
    def own(self, a) -> np.ndarray:
        """A graph's own copy of an input, in the same memory layout where NumPy can keep it."""
        src = a._data if type(a) is Array else a
        out = np.empty_like(src)
        np.copyto(out, src)
        return out

    def feed(self, owned: np.ndarray, a) -> None:
        np.copyto(owned, a._data if type(a) is Array else a)

    def replay(self, launches) -> None:
        """A pre-bound list of compiled calls, run in one loop."""
        self.launches += len(launches)
        for fn, args in launches:
            fn(*args)

    def memory_of(self, value) -> int:
        """The array that owns the memory of a value of this device."""
        return id(_root(value))

    def share_memory(self, launches, scratch: set[int]):
        """Intermediates whose lifetimes do not overlap share blocks (see plan_sharing)."""
        uses = [[(pos, _root(a), a.nbytes) for pos, a in enumerate(args) if isinstance(a, np.ndarray)]
                for _, args in launches]
        blocks, nbytes = plan_sharing(uses, scratch, lambda n: np.empty(n, np.uint8))
        out = []
        for (fn, args), used in zip(launches, uses):
            roots = {pos: r for pos, r, _ in used}   # the arrays among the arguments (a global size is not)
            out.append((fn, tuple(blocks[id(roots[pos])][:a.nbytes].view(a.dtype)
                                  if pos in roots and id(roots[pos]) in blocks else a for pos, a in enumerate(args))))
        return out, nbytes

    # -- compilation --
    def compile(self, program: Program) -> "NumbaPlan":
        compiled = []
        beside_blas = any(isinstance(c.what, library.Gemm) for c in program.library_calls.values()) \
            and not (blas.products_spin_long() and numba_threads.openmp_layer())
        for i, k in enumerate(program.kernels):
            call = program.library_calls.get(i)
            if call is not None:   # MKL's or NumPy's matmul, NumPy's sort on views of the buffers
                fn = numba_library.library_kernel(call)
                if isinstance(call.what, library.Gemm) and call.what.node.dtype in numba_library.DRIVEN \
                        and blas.backend() == "mkl":
                    fn = numba_library.GemmLaunch(call, fn, functools.partial(self._gemm_driver, call.what.node.dtype))
                    if program.ahead:   # warming: into the disk cache now, not on the second call
                        fn._driver(compile=True)
                # nothing compiled, nor loaded: counted as a library call (Program.library_calls)
                compiled.append((NumbaKernel(k.name, numba_library.library_source(call), k, True), (fn, fn)))
                continue
            loop = _loop(k, beside_blas)
            if loop == "chunks" and not beside_blas and _on_openmp(k):
                loop = "prange"
            with stage("render"):
                sizes = kernel_sizes(k)
                # which sizes follow the shapes: asked of the twin only for a size-free key not met before (warming
                # names its dimensions: asked always)
                ask = (lambda k=k, sizes=sizes, i=i: self.sizes.named(k, sizes, program.twin, i))
                named = ask() if program.every_loop else None
                symbolic = {} if program.dynamic is False else \
                    self.sizes.symbolic(k, loop, sizes, ask if named is None else named)
            # (entry point, dispatcher), whether nothing was compiled
            source, values, fns, cached = self._build(k, loop, sizes, symbolic)
            lead = (k.global_size, *values)
            if loop == "chunks":
                chunks = min(numba_threads.thread_count(), k.global_size)
                fns = tuple(numba_threads.chunked(fn, k.global_size, chunks) for fn in fns)
                lead = values
            compiled.append((NumbaKernel(k.name, source, k, loop != "serial", cached, lead), fns))
            if named is not None and program.dynamic is not False and (   # (named: every_loop)
                    named or _other_work(program.twin, i, k)):
                self._other_loops(k, loop, sizes, named)
        return NumbaPlan(program, compiled, self)

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
                symbolic = self.sizes.symbolic(kernel, other, sizes, named)
            cached = self._build(kernel, other, sizes, symbolic)[3]
            log(1, f"{kernel.name}: its {other} loop {'was cached' if cached else 'compiled'} too, for other "
                   "sizes of the named dimensions")

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
            (entry, _), _ = self._load_function(source, key, "tj_gemm", signature, parallel=False,
                                                nogil=True)   # nogil: as ctypes calls it
        return entry

    @staticmethod
    def _key(source: str, name: str, loop: str | None = None) -> CacheKey:
        """The disk-cache key of a module Numba compiles, or (`loop`) of a kernel's object code that LLVM
        compiles directly (_load_native)."""
        how = (("options", f"fastmath={sorted(FASTMATH)} error_model=numpy") if loop is None
               else ("loader", f"llvm object code, {loop} loop"))
        return CacheKey("numba", name, (
            ("kernel", source_part(source)),
            ("device", numba_cache.host_cpu()),
            how,
            ("tracejit", tracejit_part()),
            ("compiler", numba_cache.compiler_versions() if loop is None else llvm_jit.versions()),
        ))

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
        return self._load_function(shared, self._key(shared, kernel.name), SHARED_NAME,
                                   _signature(kernel, loop == "chunks", values), loop == "prange", loop == "chunks")

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
            except llvm_jit.BadObject as e:   # whole by its checksum, yet not object code: put there by hand
                CACHE.reject(key, str(e))
                obj = None
        cached = obj is not None
        if obj is None:
            t0 = time.perf_counter()
            obj = guarded(lambda: compile_native(ir_text, symbol, loop, name), name, "LLVM",
                           "(TRACEJIT_NUMBA_NATIVE=0 has Numba compile the kernel from Python instead.)")
            with stage("disk cache"):
                CACHE.put(key, obj)
            log(1, f"compiled {name} (numba, LLVM directly) in {1e3 * (time.perf_counter() - t0):.0f} ms")
            with stage("load object code"):
                entry = llvm_jit.load(obj, symbol, name)
        fns = self._native[key.digest] = (entry, llvm_jit.fallback(entry))
        return fns, cached

    def _load_function(self, source: str, key: CacheKey, name: str, signature, parallel: bool, nogil: bool):
        """Function `name` of the module `source` (the disk cache's file under `key`), compiled by Numba for
        `signature`: ((entry point, dispatcher), whether nothing was compiled). Under _LOAD_LOCK."""
        memo = (key.digest, parallel, nogil, signature)
        modname = f"_tracejit_numba_{key.digest[:24]}"
        hit = self._loaded.get(memo)
        if hit is not None and sys.modules.get(modname) is hit[0]:   # (the module may have been dropped)
            return hit[1], True
        module = sys.modules.get(modname)
        stored = True
        for attempt in range(2) if module is None else ():
            with stage("disk cache"):
                path, stored = numba_cache.module_file(key, modname, source)
            spec = importlib.util.spec_from_file_location(modname, path)
            assert spec is not None and spec.loader is not None   # a .py file
            module = importlib.util.module_from_spec(spec)
            sys.modules[modname] = module  # numba's disk cache finds the module through sys.modules
            try:
                with stage("import module"):
                    spec.loader.exec_module(module)
                break
            except FileNotFoundError:   # another process evicted the entry just now: written again, once
                del sys.modules[modname]
                if attempt:
                    raise CompileError(f"generated module {path} was removed twice while it was imported (by "
                                       "another process sharing a full kernel cache?); raise "
                                       "TRACEJIT_CACHE_MAX_BYTES") from None
            except Exception as e:
                del sys.modules[modname]
                raise CompileError(f"generated module {path} failed to import: {e}") from None
        fn = getattr(module, name)
        file = module.__file__
        assert file is not None   # made from a file (module_file)
        if not hasattr(fn, "compile"):
            # nogil: the chunks of a kernel run at once on several threads
            fn = numba_cache.dispatcher(fn, parallel=parallel, nogil=nogil)
            setattr(module, name, fn)
        if parallel:   # tj.set_num_threads(n) before Numba was imported: its parallel loops in this thread
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
                damage = f"{type(error).__name__}: {first_lines(str(error), 1)}"   # failed to load them
        if damage is not None:
            fn = numba_cache.rebuild_without_damaged_files(fn, key.name, file, damage)
            setattr(module, name, fn)
            misses = sum(fn.stats.cache_misses.values())
            entry, error = try_compile(fn, signature, key.name, file)
            if error is not None:
                raise compile_error(error, key.name, module) from None
        with stage("disk cache"):
            numba_cache.record_numba_files(fn)
        cached = sum(fn.stats.cache_misses.values()) == misses   # Numba compiled nothing
        if not stored:
            with stage("disk cache"):
                CACHE.put(key, source.encode())   # only after a successful build
        log(1, f"{'loaded' if cached else 'compiled'} {key.name} (numba) in "
               f"{1e3 * (time.perf_counter() - t0):.0f} ms")
        # the entry point skips numba's type dispatch; the dispatcher stays for arrays of other numba
        # types (read-only views), which it compiles on demand
        self._loaded[memo] = (module, (entry, fn))
        return (entry, fn), cached


def _root(a: np.ndarray) -> np.ndarray:
    """The array that owns the memory a view looks at."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a



def _loop(kernel: KernelIR, beside_blas: bool = False) -> str:
    """How the kernel loops over its global index (codegen.numba.LOOPS). Numba's CPU code has no atomics:
    a kernel combining updates into memory runs in order. In a program that calls BLAS every parallel
    kernel runs on tracejit's threads, which sleep when idle: OpenMP's threads (prange) spin after their
    loop as OpenBLAS's do after a product, and on 2 cores each kept the other's threads from running
    (a Llama block's attention softmax, 384 rows of 64: 6 ms beside the products, 20 us alone; the block
    8.0 -> 1.75 ms, a GPT-2 block 64 -> 27 ms). `beside_blas` is False where the products' own threads
    are OpenMP's and spin long (blas.products_spin_long): then sharing them is what avoids the wait."""
    if kernel.work < PARALLEL_MIN_WORK or kernel.global_size < 2 or has_atomics(kernel):
        return "serial"
    return "chunks" if kernel.work >= CHUNKS_MIN_WORK or beside_blas else "prange"


def _on_openmp(kernel: KernelIR) -> bool:
    """Whether a big kernel (CHUNKS_MIN_WORK) runs on OpenMP's threads rather than in chunks on tracejit's:
    where LLVM compiles it directly with a parallel entry point, whose compile costs what a chunked one's
    does. OpenMP's threads spin briefly between kernels where tracejit's sleep, and waking one cost ~60 us
    on the 2-core VM (sum of 16M float32: 1.33 -> 1.25 ms, torch's 1.28; rmsnorm 4096x1024: 0.73 -> 0.65 ms,
    hand-written Numba's 0.65). Not beside BLAS products (_loop)."""
    from tracejit.codegen.cpu import native as numba_native
    return parallel_entries() and numba_native.unsupported(kernel, "prange", None, True) is None


def _other_work(twin: Program | None, i: int, kernel: KernelIR) -> bool:
    """Whether kernel i of the program's twin does other work than `kernel`: False without a twin (the
    function did not trace or lower at other sizes: its sizes stay constants)."""
    return twin is not None and i < len(twin.kernels) and twin.kernels[i].work != kernel.work


def _argument(value, dtype: np.dtype | None):
    """A symbolic size's value as the argument its kernel takes (`dtype`: slot_argument's)."""
    assert dtype is not None   # a size is symbolic only where it can be an argument
    return int(value) if dtype == np.int64 else dtype.type(value)


def _signature(kernel: KernelIR, chunks: bool, values: tuple = ()):
    import numba
    chunk = [numba.int64, numba.int64] if chunks else [numba.int64]   # [start, stop) of the global range, or its size
    chunk += [numba.int64 if isinstance(v, int) else numba.from_dtype(np.asarray(v).dtype) for v in values]
    args = chunk + [numba.types.Array(numba.from_dtype(np.dtype("uint16") if p.dtype == np.float16 else p.dtype), 1, "C")
            for p in kernel.params]
    if faults(kernel):
        args.append(numba.types.Array(numba.int64, 1, "C"))   # the error record, see codegen.numba
    return numba.types.void(*args)
