"""CUDA C to PTX for one architecture, with no GPU needed: the compiler (NVRTC, the PTX kept in the disk
cache; or the CPU emulator's build under TRACEJIT_EMULATE=cuda), and the compile-only target `cuda` (or
`cuda:sm_90`, ...) for lower() and warm() where no GPU runs it; and the device's role that loads the PTX
as driver modules (CUDAModules)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from tracejit.codegen.simt import cuda as cuda_codegen
from tracejit.codegen.simt import nvrtc
from tracejit.codegen.simt.mapping import GROUP_MIN_REDUCE, Launch, RenderOptions
from tracejit.errors import DeviceError
from tracejit.ir.fuse import Program
from tracejit.ir.kernel_ir import KernelIR
from tracejit.ir.layout import LayoutOptions
from tracejit.runtime.cache.key import SHARED_NAME, shared_source, source_part, tracejit_part
from tracejit.runtime.cuda import driver as cu
from tracejit.runtime.debug import log, stage
from tracejit.runtime.device_interface import Device
from tracejit.runtime.device_memory import RenderedOnly, by_value_params
from tracejit.runtime.cache.disk import CACHE, CacheKey
from tracejit.runtime.emulator.cuda_driver import EmulatedCompiler

REDUCTION_SCRATCH = 4096  # bytes of shared memory left for reduction trees when keeping rows
MAX_THREADS = 1024
# x.T + y: each thread walks 32 rows of the output at one column (ir/layout.py's (ta, 1) tiles), so a warp
# writes 128 coalesced bytes per step and each thread reads along its own row of x
TRANSPOSE_TILES = ((32, 1),) * 4
# a row reduction's block: a thread per 8 elements, from one warp to 256 threads. On an H200, rows of 1024
# (65536 of them) with 32/64/128/256/512/1024 threads: softmax 3461/3516/3646/2923/1554/995 GB/s,
# layernorm 3552/3659/3850/3123/1628/989; rows of 4096 were best at 256-512 (layernorm 3730 at 256)
GROUP_STRIDE = 8


@dataclass(frozen=True)
class CUDAKernel:
    """A kernel compiled for CUDA: its name, CUDA C source, PTX, kernel IR and launch shape (what f.lower() lists)."""

    name: str
    source: str  # CUDA C
    ptx: str | bytes  # PTX (emulated: the shared object the CPU emulator loads instead)
    ir: KernelIR
    launch: Launch
    cached: bool = False  # the PTX came from the disk cache: nothing was compiled
    vector: tuple | None = None  # (name, source, ptx, launch) of the float4 variant
    vector_params: tuple[int, ...] = ()


class CudaCompiler:
    """Renders and compiles kernels to PTX for one architecture; needs no GPU."""

    def __init__(
        self,
        arch: str,
        shared_memory: int = cuda_codegen.SHARED_MEMORY,
        max_threads: int = MAX_THREADS,
        description: str = "",
    ):
        self.arch = arch
        self.options = RenderOptions(
            device=description or f"cuda ({arch})",
            fp64=True,
            fp16=False,
            max_local_size=max_threads,
            tensor_cores=self.tensor_cores(arch),
            always_check=True,  # one source for every global size
            group_stride=GROUP_STRIDE,
            group_min=cuda_codegen.WARP,
        )
        keep = max(0, min(shared_memory, cuda_codegen.SHARED_MEMORY) - REDUCTION_SCRATCH) // 8
        self.layout = LayoutOptions(
            accumulate_rows=False,
            share_reduce_loops=False,
            split_loops=False,
            gather_rows=False,
            fixed_locals=True,
            tiled=True,
            keep_row_max=min(16384, keep),
            keep_inputs_min=GROUP_MIN_REDUCE,
            sort_bytes=keep * 8,
            transpose_tiles=TRANSPOSE_TILES,
        )
        self._ptx: dict = {}  # source -> PTX (emulated: (source, entry) -> shared object)

    @staticmethod
    def tensor_cores(arch: str) -> bool:
        """Whether float16 products use mma.sync: on sm_80 and later."""
        m = re.match(r"sm_(\d+)", arch)
        assert m is not None, arch  # nvrtc.parse_arch and compile_arch write sm_<number>
        return int(m.group(1)) >= 80

    def cache_key(self, name: str, source: str) -> CacheKey:
        return CacheKey(
            "cuda",
            name,
            (
                ("kernel", source_part(source)),
                ("device", self.arch),
                ("options", " ".join(nvrtc.OPTIONS)),
                ("tracejit", tracejit_part()),
                ("compiler", nvrtc.version()),
            ),
        )

    def ptx(self, name: str, source: str, entry: str | None = None) -> tuple[str | bytes, bool]:
        """The PTX of `source` (kernel `name`, its entry point `entry`, else `name`), compiled once per
        process and kept in the disk cache; also whether it came from the cache (nothing compiled). (Bytes
        only from EmulatedCompiler's: a shared object for the CPU emulator.)"""
        known = self._ptx.get(source)
        if known is not None:
            return known, True
        t0 = time.perf_counter()
        key = self.cache_key(name, source)
        payload = CACHE.get(key)
        loaded = nvrtc.as_ptx(payload) if payload is not None else None
        if payload is not None and loaded is None:
            CACHE.reject(key, "holds no PTX")
        cached = loaded is not None
        if loaded is not None:
            ptx = loaded
        else:
            ptx = nvrtc.compile_ptx(name, source, self.arch)
            CACHE.put(key, ptx.encode())  # only after a successful build
        self._ptx[source] = ptx
        log(
            1,
            f"{'loaded' if cached else 'compiled'} {name} (cuda {self.arch}, PTX ISA {nvrtc.ptx_isa(ptx)}) in "
            f"{1e3 * (time.perf_counter() - t0):.0f} ms",
        )
        return ptx, cached

    def build(
        self,
        kernel: KernelIR,
        by_value: frozenset[int],
        options: RenderOptions | None = None,
        symbolic: dict | None = None,
    ) -> CUDAKernel:
        with stage("render"):
            r = cuda_codegen.render(kernel, options or self.options, by_value, symbolic)
        with stage("compile"):  # kernels that differ only in their names compile once (cache_key.shared_source)
            ptx, cached = self.ptx(r.name, shared_source(r.source, r.name), SHARED_NAME)
            vector = None
            if r.vector is not None:
                vptx, vcached = self.ptx(r.vector.name, shared_source(r.vector.source, r.vector.name), SHARED_NAME)
                vector, cached = (r.vector.name, r.vector.source, vptx, r.vector.launch), cached and vcached
        return CUDAKernel(kernel.name, r.source, ptx, kernel, r.launch, cached, vector, r.vector_params)


class CudaTarget(Device):
    """`cuda` where no GPU can run it: lower() and warm() compile PTX for an architecture into the disk
    cache; running raises DeviceError with the reason."""

    runs = False

    def __init__(self, arch: str, reason: str, name: str):
        self.name, self.reason = name, reason
        self.compiler = CudaCompiler(arch)
        self.layout = self.compiler.layout

    def compile(self, program: Program) -> RenderedOnly:
        kernels = [
            self.compiler.build(k, by_value_params(program, keys)) for k, keys in zip(program.kernels, program.launches)
        ]
        return RenderedOnly(
            kernels, f"{self.name} compiled PTX for {self.compiler.arch} here, but cannot run it: {self.reason}"
        )


class EmulatedCudaCompiler(EmulatedCompiler, CudaCompiler):
    """Under TRACEJIT_EMULATE=cuda: the same CUDA C, built for the CPU emulator instead of into PTX (float16
    products through tensor cores too: the emulator's tj_cuda.h computes mma.sync from the same fragments)."""


def compile_arch(cc: int) -> str:
    """The architecture to compile for: the GPU's own, or, for a GPU newer than this NVRTC knows, the
    newest it does (the driver compiles that PTX forward)."""
    known = nvrtc.supported_archs()
    if not known or cc in known:
        return f"sm_{cc}"
    older = [a for a in known if a <= cc]
    return f"sm_{max(older) if older else min(known)}"


class CUDAModules:
    """Loads the compiler's PTX as driver modules (a role of CUDADevice, which sets these attributes)."""

    name: str
    compiler: CudaCompiler
    _functions: dict[tuple, object]
    _modules: list
    _make_current: Callable[[], None]

    def build(self, kernel: KernelIR, by_value: frozenset[int], symbolic, options: RenderOptions):
        c = self.compiler.build(kernel, by_value, options, symbolic)
        with stage("load"):
            fn = self._function(c.name, c.ptx, SHARED_NAME)  # (CudaCompiler.build)
        d = cu.driver()
        fits = cu.check(
            d.cuFuncGetAttribute(d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn),
            "cuFuncGetAttribute",
        )
        return c, fn, fits

    def _function(self, name: str, ptx: str | bytes, entry: str | None = None):
        """Kernel `name` of a PTX module (or, emulated, of a shared object), its entry point `entry` (else
        `name`), loaded once per process (the driver finishes PTX for this GPU and keeps the result in its
        own compute cache)."""
        entry = entry or name
        fn = self._functions.get((ptx, entry))  # a module may hold several (a raw kernel's source)
        if fn is None:
            self._make_current()
            d = cu.driver()
            err, module = d.cuModuleLoadData(ptx if isinstance(ptx, bytes) else ptx.encode() + b"\0")
            if err == d.CUresult.CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
                assert isinstance(ptx, str)  # (only PTX has a version to refuse, not the emulator's objects)
                raise DeviceError(
                    f"the CUDA driver on this machine is older than {nvrtc.version()}: it rejects PTX ISA "
                    f"{nvrtc.ptx_isa(ptx)}. Update the driver (CUDA 13.0 needs r580 or newer), or "
                    "install an nvidia-cuda-nvrtc that matches the driver's CUDA version"
                )
            if err != d.CUresult.CUDA_SUCCESS:
                raise DeviceError(f"the CUDA driver could not load kernel {name} ({cu.error_text(err)})")
            self._modules.append(module)
            fn = self._functions[ptx, entry] = cu.check(
                d.cuModuleGetFunction(module, entry.encode()), "cuModuleGetFunction"
            )
        return fn
