"""WebGPU's compiler side: rendering a kernel to WGSL, building its shader module and pipeline, wgpu's
validation messages as an error, the compiled-kernel record, and the compile-only target (WGSL without an adapter)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from tracejit.codegen import build_log as build_log_text
from tracejit.codegen.simt import wgsl
from tracejit.errors import CompileError
from tracejit.ir.fuse import Program
from tracejit.ir.kernel_ir import KernelIR
from tracejit.ir.layout import LayoutOptions
from tracejit.runtime.debug import log, stage
from tracejit.runtime.device_interface import Device
from tracejit.runtime.device_memory import RenderedOnly, by_value_params

REDUCTION_SCRATCH = 4096


@dataclass(frozen=True)
class WebGPUKernel:
    """A kernel compiled for WebGPU: its name, WGSL source, kernel IR and rendering (what f.lower() lists)."""

    name: str
    source: str  # WGSL
    ir: KernelIR
    rendered: wgsl.WGSLRendered
    cached: bool = False

    @property
    def launch(self):
        return self.rendered.launch


class WebGPUTarget(Device):
    """WGSL for WebGPU's default limits (and shader-f16), rendered without an adapter: lower() works
    anywhere; a call lowers again for the device itself."""

    runs = False
    name = "webgpu"
    computes_int64 = False
    computes_float64 = False
    layout = LayoutOptions(
        accumulate_rows=False,
        share_reduce_loops=False,
        split_loops=False,
        gather_rows=False,
        fixed_locals=True,
        tiled=True,
        keep_row_max=(16384 - REDUCTION_SCRATCH) // 8,
        sort_bytes=16384 - REDUCTION_SCRATCH,
    )
    options = wgsl.WGSLOptions(device="webgpu (WGSL only, no adapter)", f16=True)

    def compile(self, program: Program) -> RenderedOnly:
        kernels = []
        for k, keys in zip(program.kernels, program.launches):
            r = wgsl.render(k, self.options, by_value_params(program, keys))
            kernels.append(WebGPUKernel(k.name, r.source, k, r))
        return RenderedOnly(kernels, "this plan holds WGSL only; call the kernel with device='webgpu' to run it")


def build_error_message(name: str, device: str, source: str, error: str) -> str:
    """wgpu's validation messages (naga names 'wgsl:LINE:COL'), each followed by the generated line."""
    return build_log_text.annotate(
        f"WebGPU rejected generated WGSL kernel {name} on {device}:",
        source,
        re.sub(r"\n\s*\n", "\n", error),
        r"wgsl:(\d+):\d+",
    )


class WebGPUCompiler:
    """Builds the device's pipelines (a role of WebGPUDevice, which sets these attributes)."""

    name: str
    device: Any  # wgpu's GPUDevice
    options: wgsl.WGSLOptions
    _pipelines: dict[str, tuple[object, object]]

    def build(self, kernel: KernelIR, by_value: frozenset[int], symbolic, options: wgsl.WGSLOptions):
        """WebGPU says no more about a pipeline than the device's limits, which the rendering honours."""
        with stage("render"):
            r = wgsl.render(kernel, options, by_value, symbolic)
        with stage("compile"):
            cached = self._pipeline(r)
        return WebGPUKernel(kernel.name, r.source, kernel, r, cached), self._pipelines[r.source], None

    def _pipeline(self, r: wgsl.WGSLRendered) -> bool:
        """Shader module, bind group layout and pipeline of a rendered kernel, built once per process;
        whether it was built before. The first time in a process is always a compile: wgpu-py exposes no
        pipeline cache, so nothing compiled can be kept on disk."""
        if r.source in self._pipelines:
            return True  # built before in this process: nothing compiled now
        import wgpu

        t0 = time.perf_counter()
        try:
            module = self.device.create_shader_module(code=r.source)
            kinds = [
                wgpu.BufferBindingType.storage if w else wgpu.BufferBindingType.read_only_storage for w in r.writable
            ]
            if r.uniform:
                kinds.append(
                    wgpu.BufferBindingType.read_only_storage if r.scalars_in_storage else wgpu.BufferBindingType.uniform
                )
            if r.launch.error_flag:
                kinds.append(wgpu.BufferBindingType.storage)
            kinds += [wgpu.BufferBindingType.read_only_storage] * len(r.tables)
            layout = self.device.create_bind_group_layout(
                entries=[
                    {"binding": i, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": kind}}
                    for i, kind in enumerate(kinds)
                ]
            )
            pipeline = self.device.create_compute_pipeline(
                layout=self.device.create_pipeline_layout(bind_group_layouts=[layout]),
                compute={"module": module, "entry_point": r.name},
            )
        except Exception as e:
            raise CompileError(build_error_message(r.name, self.name, r.source, str(e))) from None
        self._pipelines[r.source] = (pipeline, layout)
        log(1, f"compiled {r.name} (webgpu) in {1e3 * (time.perf_counter() - t0):.0f} ms")
        return False
