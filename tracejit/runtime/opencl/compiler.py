"""OpenCL's compiler side: rendering a kernel to OpenCL C, building or loading its program (the disk cache's
binary first; on PoCL, PoCL's own cache), the cache key, the build log as an error message, and the
compiled-kernel record."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracejit.codegen import build_log as build_log_text
from tracejit.codegen.simt import opencl as opencl_codegen
from tracejit.codegen.simt.c_target import Rendered
from tracejit.codegen.simt.mapping import Launch, RenderOptions
from tracejit.errors import CompileError
from tracejit.ir.kernel_ir import KernelIR
from tracejit.runtime.cache.key import SHARED_NAME, shared_source, source_part, tracejit_part
from tracejit.runtime.debug import log, stage
from tracejit.runtime.cache.ahead import compiling_ahead
from tracejit.runtime.cache.disk import CACHE, CacheKey
from tracejit.runtime.opencl.discovery import (
    POCL_RECORD,
    build_lock,
    build_program,
    is_pocl,
    pocl_cannot_write,
    pocl_record,
)

if TYPE_CHECKING:  # (imported where used: the device is opened on demand)
    import pyopencl as cl


@dataclass(frozen=True)
class OpenCLKernel:
    """A kernel compiled for OpenCL: its name, OpenCL C source, kernel IR and launch shape (what f.lower() lists)."""

    name: str
    source: str
    ir: KernelIR
    launch: Launch
    cached: bool = False  # the program came from the disk cache (on PoCL, from PoCL's): nothing was compiled


def _pyopencl_version() -> str:
    import pyopencl

    return pyopencl.VERSION_TEXT


def build_error_message(name: str, device: str, source: str, build_log: str) -> str:
    """The compiler's messages, each followed by the generated line it points at."""
    return build_log_text.annotate(
        f"the OpenCL compiler rejected generated kernel {name} on {device}:", source, build_log, r":(\d+):\d+:"
    )


class OpenCLCompiler:
    """Builds the device's programs (a role of OpenCLDevice, which sets the attributes below)."""

    name: str
    cl_device: cl.Device
    context: cl.Context
    # shared source -> (its program, the kernel's name there where build_together renamed it)
    _programs: dict[str, tuple[cl.Program, str | None]]
    _fresh: dict[str, bool]  # build_together's kernels not asked for yet -> whether their program was loaded

    def build(self, kernel: KernelIR, by_value: frozenset[int], symbolic, options: RenderOptions):
        import pyopencl as cl

        with stage("render"):
            r = opencl_codegen.render(kernel, options, by_value, symbolic)
        with stage("compile"):  # kernels that differ only in their names build once (cache_key.shared_source)
            knl, cached = self._build(r.name, shared_source(r.source, r.name), SHARED_NAME)
        fits = knl.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, self.cl_device)
        return OpenCLKernel(kernel.name, r.source, kernel, r.launch, cached), knl, fits

    def cache_key(self, name: str, source: str) -> CacheKey:
        d = self.cl_device
        return CacheKey(
            "opencl",
            name,
            (
                ("kernel", source_part(source)),
                (
                    "device",
                    f"{d.platform.name.strip()} {d.platform.version.strip()} / {d.name.strip()} / "
                    f"driver {d.driver_version.strip()}",
                ),
                ("options", opencl_codegen.BUILD_OPTIONS),
                ("tracejit", tracejit_part()),
                ("compiler", f"pyopencl {_pyopencl_version()}"),
            ),
        )

    def build_together(self, kernels: list) -> None:
        """The kernels a launch plan builds next, (kernel IR, by_value, symbolic, options) each, built as one
        program whose kernels build() then finds. A driver pays a cost per program besides its kernels' own (PoCL:
        about 110 ms of clang reading OpenCL's headers, against 5-30 ms for a kernel's code): a program of twelve
        kernels is compiled, cached and loaded once. Each kernel keeps its source (f.lower() lists it as rendered)
        and its name in the program is SHARED_NAME numbered; helpers two kernels share are written once. Where the
        program does not build (two helpers of one name that differ), each kernel is built alone, by build()."""
        rendered: dict[str, Rendered] = {}  # shared source -> rendering, for the kernels not built yet
        for k, by_value, symbolic, options in kernels:
            with stage("render"):
                r = opencl_codegen.render(k, options, by_value, symbolic)
            source = shared_source(r.source, r.name)
            if source not in self._programs and r.pieces:
                rendered.setdefault(source, r)
        if len(rendered) < 2:
            return
        prelude: dict[str, None] = {}  # (ordered, each once)
        bodies, entries = [], []
        for i, r in enumerate(rendered.values()):
            prelude.update(dict.fromkeys(r.pieces[:-1]))
            entries.append(f"{SHARED_NAME}_{i}")
            bodies.append(re.sub(rf"\b{re.escape(r.name)}\b", entries[-1], r.pieces[-1]))
        first = next(iter(rendered.values())).name
        try:
            with stage("compile"):
                prg, cached = self._program(f"{first} and {len(rendered) - 1} more", "\n\n".join([*prelude, *bodies]))
        except CompileError as e:
            log(1, f"the {len(rendered)} kernels of {first}'s program did not build together; one by one ({e})")
            return
        for source, entry in zip(rendered, entries):
            if source not in self._programs:
                self._programs[source] = (prg, entry)
                self._fresh[source] = cached

    def _build(self, name: str, source: str, entry: str | None = None):
        """Kernel `name` of `source` (its entry point `entry`, else `name`), built once per process; the
        program comes from the disk cache when it is there (_program). Returns (kernel, whether nothing was
        compiled)."""
        import pyopencl as cl

        found = self._programs.get(source)
        cached = self._fresh.pop(source, True)  # (built by build_together: compiled or loaded as its program was)
        if found is None:
            prg, cached = self._program(name, source)
            found = self._programs.setdefault(source, (prg, None))
        prg, renamed = found  # (a source of several functions, RawKernel's: the one asked for)
        # a kernel object per plan: each holds its own argument types
        return cl.Kernel(prg, renamed or entry or name), cached

    def _program(self, name: str, source: str) -> tuple[cl.Program, bool]:
        """The program of `source`, loaded or built, and whether it was loaded. The disk cache holds its binary;
        on PoCL it holds a record that PoCL's own cache has it (pocl_record says why), and the build from source
        finds it there."""
        t0 = time.perf_counter()
        key = self.cache_key(name, source)
        record = pocl_record(self.cl_device)
        binary_wanted = record is not None and compiling_ahead()  # a warm stores PoCL's binary (cache/ahead.py)
        # One process (and thread) at a time builds or loads a program in PoCL's cache (build_lock says
        # why); the others wait, then find it in the disk cache.
        with build_lock(self.cl_device, key.digest):
            payload = CACHE.get(key)
            recorded = payload is not None and payload.startswith(POCL_RECORD)  # (never a binary to load)
            prg = self._from_binary(payload) if payload is not None and not recorded else None
            cached = prg is not None or (record is not None and payload == record)
            if prg is None:
                prg = self._from_source(name, source)  # (on PoCL, found in its cache where `cached`)
                if not cached or binary_wanted:  # (a warm replaces a record by the binary)
                    CACHE.put(key, record if record is not None and not binary_wanted else self._binary(prg))
        log(1, f"{'loaded' if cached else 'compiled'} {name} (opencl) in {1e3 * (time.perf_counter() - t0):.0f} ms")
        return prg, cached

    @staticmethod
    def _binary(prg: cl.Program) -> bytes:
        import pyopencl as cl

        binaries = prg.get_info(cl.program_info.BINARIES)  # one per device (the stub says object)
        assert isinstance(binaries, list)
        return binaries[0]

    def _from_binary(self, binary: bytes) -> cl.Program | None:
        import pyopencl as cl

        try:
            prg = cl.Program(self.context, [self.cl_device], [binary])
            prg.build(opencl_codegen.BUILD_OPTIONS)
            return prg
        except cl.Error as e:  # a driver that no longer accepts it: build from source instead
            log(1, f"cached OpenCL binary rejected by {self.name} ({e}); building from source")
            return None

    def _from_source(self, name: str, source: str) -> cl.Program:
        import pyopencl as cl

        raw, build_log = build_program(self.context, self.cl_device, source, opencl_codegen.BUILD_OPTIONS.encode())
        if raw is not None:
            return cl.Program(raw)
        problem = pocl_cannot_write() if is_pocl(self.cl_device) else None
        if problem:
            raise CompileError(f"cannot build kernel {name} on {self.name}: {problem}") from None
        raise CompileError(build_error_message(name, self.name, source, build_log)) from None
