"""Metal's compiler side: rendering a kernel to MSL, building its library and compute pipeline, Metal's
compiler messages as an error, the compiled-kernel record, and the compile-only target (MSL without a device)."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from tracejit.codegen import build_log as build_log_text
from tracejit.codegen.simt import metal as metal_codegen
from tracejit.codegen.simt.mapping import GROUP_MIN_REDUCE, Launch, RenderOptions
from tracejit.errors import CompileError
from tracejit.ir.fuse import Program
from tracejit.ir.kernel_ir import KernelIR
from tracejit.ir.layout import LayoutOptions
from tracejit.runtime.cache.key import SHARED_NAME, shared_source
from tracejit.runtime.debug import log, stage
from tracejit.runtime.device_interface import Device
from tracejit.runtime.device_memory import RenderedOnly, by_value_params

REDUCTION_SCRATCH = 4096  # bytes of threadgroup memory left for reduction trees when keeping rows


def _layout(threadgroup_memory: int) -> LayoutOptions:
    return LayoutOptions(
        accumulate_rows=False,
        share_reduce_loops=False,
        split_loops=False,
        gather_rows=False,
        fixed_locals=True,
        tiled=True,
        keep_row_max=min(4096, (threadgroup_memory - REDUCTION_SCRATCH) // 8),
        keep_inputs_min=GROUP_MIN_REDUCE,
        sort_bytes=threadgroup_memory - REDUCTION_SCRATCH,
        max_buffers=metal_codegen.MAX_BUFFERS,
    )


@dataclass(frozen=True)
class MetalKernel:
    """A kernel compiled for Metal: its name, MSL source, kernel IR and launch shape (what f.lower() lists)."""

    name: str
    source: str  # MSL
    ir: KernelIR
    launch: Launch
    cached: bool = False


class MetalTarget(Device):
    """MSL for any Metal GPU (no double, threadgroups of up to 256), rendered without a device, on any
    system: lower() works anywhere; a call lowers again for the device itself."""

    runs = False
    computes_float64 = False
    name = "metal"
    layout = _layout(metal_codegen.THREADGROUP_MEMORY)
    options = replace(metal_codegen.DEFAULT_OPTIONS, device="metal (MSL only, no device)")

    def compile(self, program: Program) -> RenderedOnly:
        kernels = []
        for k, keys in zip(program.kernels, program.launches):
            r = metal_codegen.render(k, self.options, by_value_params(program, keys))
            kernels.append(MetalKernel(k.name, r.source, k, r.launch))
        return RenderedOnly(
            kernels, "this plan holds MSL only; call the kernel with device='metal' (on macOS) to run it"
        )


def _describe_error(error) -> str:
    if error is None:
        return "no message"
    return str(error.localizedDescription())


def build_error_message(name: str, device: str, source: str, error: str) -> str:
    """Metal's compiler messages ('program_source:LINE:COL: error: ...'), each followed by the generated line."""
    return build_log_text.annotate(
        f"the Metal compiler rejected generated kernel {name} on {device}:", source, error, r"program_source:(\d+):\d+"
    )


class MetalCompiler:
    """Builds the device's pipelines (a role of MetalDevice, which sets these attributes)."""

    name: str
    Metal: Any  # PyObjC's Metal module, or the emulator's
    mtl: Any  # the MTLDevice
    _pipelines: dict[tuple, object]

    def build(self, kernel: KernelIR, by_value: frozenset[int], symbolic, options: RenderOptions):
        with stage("render"):
            r = metal_codegen.render(kernel, options, by_value, symbolic)
        with stage("compile"):  # kernels that differ only in their names build once (cache_key.shared_source)
            pipeline, cached = self._pipeline(r.name, shared_source(r.source, r.name), SHARED_NAME)
        return (
            MetalKernel(kernel.name, r.source, kernel, r.launch, cached),
            pipeline,
            int(pipeline.maxTotalThreadsPerThreadgroup()),
        )

    def _pipeline(self, name: str, source: str, entry: str | None = None):
        """The compute pipeline of kernel `name`'s source (its function `entry`, else `name`), built once per
        process; (pipeline, built before)."""
        entry = entry or name
        found = self._pipelines.get((source, entry))  # a library may hold several (a raw kernel's source)
        if found is not None:
            return found, True
        t0 = time.perf_counter()
        Metal = self.Metal
        options = Metal.MTLCompileOptions.new()
        # IEEE results as NumPy gives them: no fast math, precise library functions where settable
        if hasattr(options, "setMathMode_"):
            options.setMathMode_(getattr(Metal, "MTLMathModeSafe", 0))
        else:
            options.setFastMathEnabled_(False)
        if hasattr(options, "setMathFloatingPointFunctions_"):
            options.setMathFloatingPointFunctions_(getattr(Metal, "MTLMathFloatingPointFunctionsPrecise", 1))
        library, error = self.mtl.newLibraryWithSource_options_error_(source, options, None)
        if library is None:
            raise CompileError(build_error_message(name, self.name, source, _describe_error(error)))
        function = library.newFunctionWithName_(entry)
        if function is None:
            raise CompileError(
                f"the Metal library built from generated kernel {name} has no function {entry}; this is a tracejit bug"
            )
        pipeline, error = self.mtl.newComputePipelineStateWithFunction_error_(function, None)
        if pipeline is None:
            raise CompileError(build_error_message(name, self.name, source, _describe_error(error)))
        self._pipelines[source, entry] = pipeline
        log(1, f"compiled {name} (metal) in {1e3 * (time.perf_counter() - t0):.0f} ms")
        return pipeline, False
