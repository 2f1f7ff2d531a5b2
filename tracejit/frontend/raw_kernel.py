"""tj.RawKernel: a kernel written by hand in the device's own language, launched on tracejit's devices.

    k = tj.RawKernel(source, "scale", device="opencl")   # CUDA C (cuda), OpenCL C, MSL (metal), WGSL (webgpu)
    k(x, out, np.float32(2), np.int32(n), grid=blocks, block=threads)

`grid` counts work-groups per dimension and `block` work-items per group on every target (CUDA's
convention; OpenCL's global size is grid x block), each an int or a tuple of up to 3. Arguments, one for
each parameter the kernel declares (more or fewer is an ArgumentError naming them), in the kernel's
parameter order: tj.Arrays on the device (passed as pointers / buffers), NumPy arrays (copied
to the device and, once the kernel is done, back into the array when it is writeable: the call waits),
NumPy scalars (passed by value as their dtype), Python ints (int32) and floats (float32). On webgpu
argument i is @group(0) @binding(i): arrays as storage buffers, scalars as uniforms, and `block` must be
the shader's @workgroup_size. Sources are compiled once per process (cuda and opencl keep the binary
in the disk cache); a compile error is tj.CompileError with the lines around it.
"""

from __future__ import annotations

import ctypes
import re
import threading
from collections.abc import Callable
from typing import Protocol

import numpy as np

from tracejit.codegen import build_log
from tracejit.errors import ArgumentError, CompileError, DeviceError, UnsupportedError
from tracejit.runtime import registry
from tracejit.runtime.array import Array
from tracejit.frontend import capture, raw_parameters

LANGUAGES = {"cuda": "CUDA C", "opencl": "OpenCL C", "metal": "MSL", "webgpu": "WGSL"}

Dims = tuple[int, int, int]  # grid or block: (x, y, z)


class _Compiled(Protocol):
    """A RawKernel as one API has it (_Cuda, _OpenCL, _Metal, _WebGPU below)."""

    def count(self) -> int | None: ...  # the parameters the driver counts, if it does
    def launch(self, bound: list, grid: Dims, block: Dims) -> None: ...
    def info(self) -> dict: ...


class RawKernel:
    """A hand-written kernel `name` in `source`, compiled now for `device` (see the module and
    docs/guide/raw-kernels.md); `parameters`: the name of each argument a call passes (None where neither
    the source nor the driver says)."""

    def __init__(self, source: str, name: str, device: str | None = None):
        if not isinstance(source, str) or not isinstance(name, str) or not name.isidentifier():
            raise ArgumentError(
                "RawKernel(source, name, device): source is the kernel's text and name the "
                f"function to launch (an identifier); got {type(source).__name__}, {name!r}"
            )
        self.device = registry.device(device)
        target = self.device.name.partition(":")[0]
        if target not in LANGUAGES:
            raise UnsupportedError(
                f"RawKernel runs {', '.join(f'{v} on {k}' for k, v in LANGUAGES.items())}; "
                f"{self.device.name} has no kernel language of its own (write the loop with "
                "@numba.njit, or decorate NumPy code with @tj.kernel)"
            )
        self.source, self.name, self.language = source, name, LANGUAGES[target]
        token = build_log.USER_SOURCE.set(True)  # compiler messages about the user's lines, not tracejit's
        apis: dict[str, Callable[[object, str, str], _Compiled]] = {
            "cuda": _Cuda,
            "opencl": _OpenCL,
            "metal": _Metal,
            "webgpu": _WebGPU,
        }
        try:
            self._impl = apis[target](self.device, source, name)
        finally:
            build_log.USER_SOURCE.reset(token)
        self.parameters = _parameters(self._impl.count(), raw_parameters.declared(target, source, name))

    def __call__(self, *args: object, grid: int | tuple[int, ...], block: int | tuple[int, ...]) -> None:
        if capture.ACTIVE:
            raise UnsupportedError(
                f"RawKernel {self.name} cannot be captured into a graph yet; launch it outside tj.capture()"
            )
        if self.parameters is not None and len(args) != len(self.parameters):
            raise self._miscount(len(args))
        grid, block = _dims("grid", grid), _dims("block", block)
        limit = self.info["max_threads_per_group"]
        if limit is not None and np.prod(block) > limit:
            raise ArgumentError(
                f"RawKernel {self.name}: block {block} has {int(np.prod(block))} work-items; "
                f"{self.device.name} allows {limit} for this kernel (k.info)"
            )
        bound: list[Array | np.generic] = []  # the device's arrays, and scalars by value
        copy_back = []
        for i, a in enumerate(args):
            if type(a) is Array:
                if a.device is not self.device:
                    raise ArgumentError(
                        f"RawKernel {self.name}: argument {i} is on {a.device.name}, not "
                        f"{self.device.name}; move it with tj.asarray(a, device={self.device.name!r})"
                    )
                bound.append(a)
            elif isinstance(a, np.ndarray):
                on_device = _upload(self.device, a)
                bound.append(on_device)
                if a.flags.writeable:
                    copy_back.append((a, on_device))
            else:
                bound.append(_scalar(self.name, i, a))
        self._impl.launch(bound, grid, block)
        self.device.launches += 1
        for host, on_device in copy_back:
            np.copyto(host, on_device.numpy().reshape(host.shape))

    def _miscount(self, given: int) -> ArgumentError:
        """A call with more or fewer arguments than the kernel declares (a parameter left out would reach the
        kernel as the previous call's value on OpenCL, whose kernels keep their arguments between launches)."""
        names = self.parameters
        assert names is not None  # a count is checked only where the kernel's parameters are known
        takes = f"RawKernel {self.name} takes {len(names)} argument{'s' * (len(names) != 1)} ({', '.join(names)})"
        if given < len(names):
            missing = ", ".join(f"{n} (argument {i})" for i, n in enumerate(names) if i >= given)
            return ArgumentError(
                f"{takes}; this call passes {given}: missing {missing}. Pass every parameter on every call"
            )
        return ArgumentError(f"{takes}; this call passes {given}, {given - len(names)} more than it declares")

    @property
    def info(self) -> dict:
        """What the driver says about the compiled kernel: max_threads_per_group, registers (per
        work-item), local_memory (bytes of work-group memory it uses), preferred_group_multiple; None
        where the API does not say."""
        return self._impl.info()


def _dims(what: str, value) -> Dims:
    dims = (
        (value,) if isinstance(value, (int, np.integer)) else tuple(value) if isinstance(value, (tuple, list)) else None
    )
    if not dims or len(dims) > 3 or any(not isinstance(d, (int, np.integer)) or d < 1 for d in dims):
        raise ArgumentError(f"{what}={value!r}: give a positive int, or a tuple of up to 3 (x, y, z)")
    x, y, z = [int(d) for d in dims] + [1] * (3 - len(dims))
    return x, y, z


def _parameters(count: int | None, names: list[str] | None) -> list[str] | None:
    """The name of each argument a call must pass: the source's names (raw_parameters), checked against the
    driver's own count where it gives one (its count wins, named by position, where the source read differs)."""
    if count is None:
        return names
    if names is not None and len(names) == count:
        return names
    return [f"argument {i}" for i in range(count)]


def _upload(device, a: np.ndarray) -> Array:
    return Array(device.from_numpy(np.ascontiguousarray(a)), device)


def _scalar(name: str, i: int, a) -> np.generic:
    if isinstance(a, np.generic):
        return a
    if isinstance(a, bool):
        return np.uint8(a)
    if isinstance(a, int):
        if not -(2**31) <= a < 2**31:
            raise ArgumentError(
                f"RawKernel {name}: argument {i} ({a}) does not fit int32, which a Python int "
                "passes as; give it a NumPy type (np.int64(...))"
            )
        return np.int32(a)
    if isinstance(a, float):
        return np.float32(a)
    raise ArgumentError(
        f"RawKernel {name}: argument {i} is a {type(a).__name__}; pass tj.Arrays, NumPy arrays, "
        "NumPy scalars, or Python ints and floats"
    )


class _OpenCL:
    def __init__(self, dev, source, name):
        import pyopencl as cl

        try:
            self.kernel, _ = dev._build(name, source)
        except cl.Error as e:  # built, but no kernel of that name
            raise CompileError(
                f"the OpenCL program built from the RawKernel source has no kernel {name!r} ({e})"
            ) from None
        self.dev = dev
        self.lock = threading.Lock()  # the kernel object keeps its arguments: set and enqueued in one step

    def count(self) -> int:
        return int(self.kernel.num_args)

    def launch(self, bound, grid, block):
        import pyopencl as cl

        dims = 3 if grid[2] > 1 or block[2] > 1 else 2 if grid[1] > 1 or block[1] > 1 else 1
        try:
            with self.lock:  # (another thread's arguments set between ours and the enqueue would be launched)
                for i, a in enumerate(bound):
                    self.kernel.set_arg(i, a._data.buf if type(a) is Array else a)
                cl.enqueue_nd_range_kernel(
                    self.dev.queue, self.kernel, tuple(g * b for g, b in zip(grid, block))[:dims], block[:dims]
                )
        except cl.Error as e:
            raise DeviceError(f"{self.dev.name} refused to launch RawKernel {self.kernel.function_name}: {e}") from None

    def info(self) -> dict:
        import pyopencl as cl

        w, d = cl.kernel_work_group_info, self.dev.cl_device
        return {
            "max_threads_per_group": int(self.kernel.get_work_group_info(w.WORK_GROUP_SIZE, d)),
            "registers": None,
            "local_memory": int(self.kernel.get_work_group_info(w.LOCAL_MEM_SIZE, d)),
            "preferred_group_multiple": int(self.kernel.get_work_group_info(w.PREFERRED_WORK_GROUP_SIZE_MULTIPLE, d)),
        }


class _Cuda:
    def __init__(self, dev, source, name):
        self.dev, self.name = dev, name
        ptx, _ = dev.compiler.ptx(name, source)
        self.fn = dev._function(name, ptx)

    def count(self) -> int | None:
        """The driver's count of the kernel's parameters (cuFuncGetParamInfo, CUDA 12.4 on), else None."""
        from tracejit.runtime.cuda import driver as cu

        d = cu.driver()
        info = getattr(d, "cuFuncGetParamInfo", None)
        if info is None:
            return None
        n = 0
        try:
            while info(self.fn, n)[0] == d.CUresult.CUDA_SUCCESS:
                n += 1
        except Exception:  # a binding without it, or a driver that refuses the call
            return None
        return n if n or info(self.fn, 0)[0] == d.CUresult.CUDA_ERROR_INVALID_VALUE else None

    def launch(self, bound, grid, block):
        from tracejit.runtime.cuda import driver as cu
        from tracejit.runtime.cuda.launch import SCALAR_CTYPES

        holders = [
            ctypes.c_uint64(a._data.ptr) if type(a) is Array else SCALAR_CTYPES[a.dtype](a.item()) for a in bound
        ]
        params = (ctypes.c_void_p * max(1, len(holders)))(*[ctypes.addressof(h) for h in holders])
        self.dev._make_current()
        d = cu.driver()
        (err,) = d.cuLaunchKernel(self.fn, *grid, *block, 0, self.dev.stream, ctypes.addressof(params), 0)
        if err != d.CUresult.CUDA_SUCCESS:
            raise DeviceError(
                f"CUDA refused to launch RawKernel {self.name} (grid {grid}, block {block}): {cu.error_text(err)}"
            )
        self.dev.synchronize()  # the holders above must outlive the launch's reading of them

    def info(self) -> dict:
        from tracejit.runtime.cuda import driver as cu

        d = cu.driver()
        attr = d.CUfunction_attribute

        def get(name):
            which = getattr(attr, name, None)
            return None if which is None else int(cu.check(d.cuFuncGetAttribute(which, self.fn), "cuFuncGetAttribute"))

        return {
            "max_threads_per_group": get("CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK"),
            "registers": get("CU_FUNC_ATTRIBUTE_NUM_REGS"),
            "local_memory": get("CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES"),
            "preferred_group_multiple": 32,
        }  # a warp


class _Metal:
    def __init__(self, dev, source, name):
        self.dev, self.name = dev, name
        self.pipeline, _ = dev._pipeline(name, source)

    def count(self) -> None:
        return None  # the source's [[buffer(i)]] parameters say it (raw_parameters)

    def launch(self, bound, grid, block):
        from tracejit.runtime import emulator
        from tracejit.runtime.metal.launch import Dispatch

        if emulator.emulates("metal") and (grid[1:] != (1, 1) or block[1:] != (1, 1)):
            raise UnsupportedError(
                f"RawKernel {self.name}: the CPU emulator runs Metal launches of one dimension "
                f"(its MSL builtins are scalars); grid {grid} and block {block} need a Mac"
            )
        buffers = [a._data if type(a) is Array else a.tobytes() for a in bound]
        self.dev._submit([Dispatch(self.pipeline, buffers, grid, block)], wait=True)

    def info(self) -> dict:
        p = self.pipeline
        width = getattr(p, "threadExecutionWidth", None)
        memory = getattr(p, "staticThreadgroupMemoryLength", None)
        return {
            "max_threads_per_group": int(p.maxTotalThreadsPerThreadgroup()),
            "registers": None,
            "local_memory": int(memory()) if memory else None,
            "preferred_group_multiple": int(width()) if width else None,
        }


class _WebGPU:
    def __init__(self, dev, source, name):
        from tracejit.runtime.webgpu.compiler import build_error_message

        self.dev, self.name = dev, name
        m = re.search(rf"@workgroup_size\(([^)]*)\)[^{{]*?fn\s+{name}\s*\(", source, re.S)
        self.workgroup = None
        if m:
            try:
                self.workgroup = _dims("@workgroup_size", [int(v, 0) for v in m.group(1).split(",") if v.strip()])
            except ValueError:  # sizes named by constants: not checked here
                pass
        try:
            module = dev.device.create_shader_module(code=source)
            self.pipeline = dev.device.create_compute_pipeline(
                layout="auto", compute={"module": module, "entry_point": name}
            )
        except Exception as e:
            raise CompileError(build_error_message(name, dev.name, source, str(e))) from None

    def count(self) -> None:
        return None  # the source's @binding(i) variables say it (raw_parameters)

    def launch(self, bound, grid, block):
        import wgpu

        if self.workgroup is not None and block != self.workgroup:
            raise ArgumentError(
                f"RawKernel {self.name}: block {block} differs from the shader's @workgroup_size "
                f"{self.workgroup}; WebGPU takes the work-group size from the shader"
            )
        dev = self.dev.device
        entries, keep = [], []
        for i, a in enumerate(bound):
            if type(a) is Array:
                block_ = a._data.block
                entries.append(
                    {"binding": i, "resource": {"buffer": block_.buffer, "offset": 0, "size": block_.nbytes}}
                )
            else:
                words = np.zeros(4, np.uint32)
                words.view(np.uint8)[: a.nbytes] = np.frombuffer(a.tobytes(), np.uint8)
                u = dev.create_buffer_with_data(data=words, usage=wgpu.BufferUsage.UNIFORM)
                keep.append(u)
                entries.append({"binding": i, "resource": {"buffer": u, "offset": 0, "size": 16}})
        try:
            group = dev.create_bind_group(layout=self.pipeline.get_bind_group_layout(0), entries=entries)
            enc = dev.create_command_encoder()
            pass_ = enc.begin_compute_pass()
            pass_.set_pipeline(self.pipeline)
            pass_.set_bind_group(0, group)
            pass_.dispatch_workgroups(*grid)
            pass_.end()
            dev.queue.submit([enc.finish()])
        except Exception as e:
            raise DeviceError(f"{self.dev.name} refused to run RawKernel {self.name}: {e}") from None
        self.dev.synchronize()

    def info(self) -> dict:
        limits = self.dev.device.limits
        return {
            "max_threads_per_group": int(limits["max-compute-invocations-per-workgroup"]),
            "registers": None,
            "local_memory": None,
            "preferred_group_multiple": None,
        }
