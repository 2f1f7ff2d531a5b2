"""The numba target: generated modules are real files imported as real modules, compiled by numba.njit
(compiler.py), run by a plan (plan.py) on NumPy's arrays (memory.py). Here: the device, and how each kernel loops."""

from __future__ import annotations

import functools
import importlib.util
import os

from tracejit.codegen.cpu import numba as numba_codegen
from tracejit.ir import library
from tracejit.ir.fuse import Program
from tracejit.ir.kernel_ir import KernelIR, has_atomics
from tracejit.ir.layout import LayoutOptions
from tracejit.ir.sizes import kernel_sizes
from tracejit.runtime.numba import (
    blas,
    cache as numba_cache,
    library as numba_library,
    threads as numba_threads,
    tuning as numba_tuning,
)
from tracejit.runtime import choices
from tracejit.runtime.debug import stage
from tracejit.runtime.device_info import ALL_DTYPES, DeviceInfo, host_memory, host_vendor
from tracejit.runtime.device_interface import Device
from tracejit.runtime.numba.compiler import NumbaKernel, NumbaModules, parallel_entries
from tracejit.runtime.numba.memory import NumbaMemory
from tracejit.runtime.numba.plan import NumbaPlan
from tracejit.runtime.numba.output_pool import OutputPool
from tracejit.runtime.symbolic_sizes import SymbolicSizes

PARALLEL_MIN_WORK = 1 << 16  # below this a serial kernel dispatches faster than a threaded one
# from this much work on, a parallel kernel that Numba compiles runs in chunks on tracejit's threads
# (runtime/numba/threads.py): it compiles in half the time of a prange loop, and the threads' wake-up (10-60 us,
# where OpenMP's spinning threads take a few) is a few percent of the run; one LLVM compiles directly runs
# on OpenMP's threads (_on_openmp), except beside BLAS products, where every parallel kernel is chunked (_loop)
CHUNKS_MIN_WORK = 1 << 22


class NumbaDevice(NumbaModules, NumbaMemory, Device):
    returns_numpy = True  # NumPy arrays in, NumPy arrays out
    has_memory_pool = False
    name = "numba"
    # NumPy's matmul (OpenBLAS) and sort: ir/library.py. Transposed reads in tiles, by default those measured best on
    # the 2-core Zen 4 VM (x.T + y, 4096^2: float32 8x4 19 ms against 32x32 25; int8 32x8 5.6 against 18); a machine's
    # own once `python -m tracejit tune` has measured them (runtime/numba/tuning.py)
    layout = LayoutOptions(library=True, transpose_tiles=((32, 8), (32, 8), (8, 4), (8, 4)))
    inner_sizes_as_arguments = True  # row lengths and the like too, not only the global size (symbolic_sizes)

    def __init__(self, index: int | None = None):
        if index:
            raise ValueError("the numba device has no index")
        self.modules: dict[str, object] = {}
        # which sizes of each kernel are arguments of its code
        self.sizes = SymbolicSizes(numba_codegen.slot_argument, "numba-sizes")
        # (module key, loop, signature) -> (module, (entry point, dispatcher)): a kernel this process already loaded
        # (another size of a kernel whose sizes are arguments) costs a dict lookup, not a module load
        self._loaded: dict[tuple, tuple] = {}
        self._native: dict[str, tuple] = {}  # cache key digest -> (entry point, fallback): llvm_jit's kernels
        self.outputs = OutputPool()  # large results' memory, taken back when the caller drops them
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

    @property
    def info(self) -> DeviceInfo:
        """This CPU as the OS describes it; its memory is the host's (free: what the OS has available)."""
        import llvmlite.binding as llvm
        import numba

        total, free = host_memory()
        llvm_version = ".".join(map(str, llvm.llvm_version_info))
        return DeviceInfo(
            self.name,
            "numba",
            "cpu",
            host_vendor(),
            f"numba {numba.__version__}, LLVM {llvm_version}",
            total,
            free,
            numba_threads.thread_count(),
            None,
            True,
            None,
            None,
            None,
            ALL_DTYPES,
        )

    def tuning_choices(self) -> list[choices.Choice]:
        """Autotuning's candidates here: every transpose tile `python -m tracejit tune` times (one tile for every
        element size), and kernels on several threads from 4,096 elements of work, or never."""
        tiles = [
            choices.Choice(layout=(("transpose_tiles", (tile,) * 4),))
            for tile in numba_tuning.CANDIDATES
            if (tile,) * 4 != self.layout.transpose_tiles
        ]
        return [*tiles, choices.Choice(parallel_min_work=1 << 12), choices.Choice(parallel_min_work=choices.SERIAL)]

    def tuning_fingerprint(self) -> dict:
        """This CPU as LLVM sees it, its cores and caches, and the code generator's versions."""
        return numba_tuning.fingerprint()

    def synchronize(self) -> None:
        """Numba kernels finish before the call returns; nothing to wait for."""

    def replay(self, launches) -> None:
        """A pre-bound list of compiled calls, run in one loop."""
        self.launches += len(launches)
        for fn, args in launches:
            fn(*args)

    def element_loop(self, plan):
        """A loop over elements (ir/element_loops.py) as one compiled function (element_loops.py)."""
        from tracejit.runtime.numba.element_loops import ElementLoop

        return ElementLoop(plan, self)

    # -- the roles together: a program's kernels, compiled (NumbaModules), in a plan (plan.py) --
    def compile(self, program: Program) -> NumbaPlan:
        compiled = []
        beside_blas = any(isinstance(c.what, library.Gemm) for c in program.library_calls.values()) and not (
            blas.products_spin_long() and numba_threads.openmp_layer()
        )
        for i, k in enumerate(program.kernels):
            call = program.library_calls.get(i)
            if call is not None:  # MKL's or NumPy's matmul, NumPy's sort on views of the buffers
                fn = numba_library.library_kernel(call)
                if (
                    isinstance(call.what, library.Gemm)
                    and call.what.node.dtype in numba_library.DRIVEN
                    and blas.backend() == "mkl"
                ):
                    fn = numba_library.GemmLaunch(call, fn, functools.partial(self._gemm_driver, call.what.node.dtype))
                    if program.ahead:  # warming: into the disk cache now, not on the second call
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
                ask = lambda k=k, sizes=sizes, i=i: choices.sizes_of(self).named(k, sizes, program.twin, i)
                named = ask() if program.every_loop else None
                symbolic = (
                    {}
                    if program.dynamic is False
                    else choices.sizes_of(self).symbolic(k, loop, sizes, ask if named is None else named)
                )
            # (entry point, dispatcher), whether nothing was compiled
            source, values, fns, cached = self._build(k, loop, sizes, symbolic)
            lead = (k.global_size, *values)
            if loop == "chunks":
                chunks = min(numba_threads.thread_count(), k.global_size)
                fns = tuple(numba_threads.chunked(fn, k.global_size, chunks) for fn in fns)
                lead = values
            compiled.append((NumbaKernel(k.name, source, k, loop != "serial", cached, lead), fns))
            if (
                named is not None
                and program.dynamic is not False
                and (  # (named: every_loop)
                    named or _other_work(program.twin, i, k)
                )
            ):
                self._other_loops(k, loop, sizes, named)
        return NumbaPlan(program, compiled, self)


def _loop(kernel: KernelIR, beside_blas: bool = False) -> str:
    """How the kernel loops over its global index (codegen.numba.LOOPS). Numba's CPU code has no atomics:
    a kernel combining updates into memory runs in order. In a program that calls BLAS every parallel
    kernel runs on tracejit's threads, which sleep when idle: OpenMP's threads (prange) spin after their
    loop as OpenBLAS's do after a product, and on 2 cores each kept the other's threads from running
    (a Llama block's attention softmax, 384 rows of 64: 6 ms beside the products, 20 us alone; the block
    8.0 -> 1.75 ms, a GPT-2 block 64 -> 27 ms). `beside_blas` is False where the products' own threads
    are OpenMP's and spin long (blas.products_spin_long): then sharing them is what avoids the wait."""
    if kernel.work < choices.parallel_min_work(PARALLEL_MIN_WORK) or kernel.global_size < 2 or has_atomics(kernel):
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
