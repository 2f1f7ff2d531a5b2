"""A numba program's launch plan: straight-line Python generated per plan (flat views of the arguments,
outputs, each kernel's entry point, the results), its kept temporaries, and graph-capture binding."""

from __future__ import annotations

import functools
import math
import time

import numpy as np
from numpy._core import multiarray

from tracejit.errors import OutOfMemoryError
from tracejit.ir.fuse import Program
from tracejit.ir.kernel_ir import KernelIR, fault_error, faults
from tracejit.ir.analysis import Buffer
from tracejit.runtime.numba import output_pool
from tracejit.runtime import profiler
from tracejit.runtime.array import Array
from tracejit.runtime.debug import log, stage
from tracejit.runtime.scalars import check_int_scalars
from tracejit.runtime.views import flat_view


def _entry_accepts(entry, call) -> bool:
    """Whether the compiled entry point (typed for writable C-contiguous arrays) takes these arrays;
    others, such as read-only views, go through the dispatcher."""
    return all(a.flags.writeable and a.flags.c_contiguous for a in call)


def _reporting(fn, kernel: KernelIR):
    """For graph replay: a kernel that can fault, given its own error record, raising what it records."""
    error = np.zeros(2, np.int64)

    def run(*args):
        error[:] = 0
        fn(*args, error)
        if error[0]:
            raise fault_error([kernel], int(error[0]), int(error[1]))

    return run


class NumbaPlan:
    """A compiled program. Calls go through `run`, straight-line Python generated for this plan:
    flat views of the arguments, fresh outputs, each kernel's entry point, the results."""

    def __init__(self, program: Program, compiled, device):
        self.program, self.device = program, device
        self.kernels = [c for c, _ in compiled]
        self._fns = [fns for _, fns in compiled]
        with stage("runner"):
            self.run = self._make_runner(self._fns)

    @property
    def allocations(self) -> list:
        """The keys of the buffers a call allocates (outputs and temporaries), in the order bind() returns them."""
        return [key for key in self.program.buffers if not key.argument]

    def bind(self, args, into=None) -> tuple[list[np.ndarray], list[tuple], list[np.ndarray]]:
        """For graph capture: fresh outputs and temporaries (or the C-contiguous arrays of `into`, by buffer
        key), and each kernel as (function, arguments) bound to these very buffers, to be run again and again;
        runs nothing. Also returns every array it allocated or took, in the order of `allocations`."""
        prog = self.program
        check_int_scalars(prog.int_scalars, args)
        bufs, arrays = {}, {}
        for key, buf in prog.buffers.items():
            if key.argument:
                bufs[key] = flat_view(args[key.index], buf)
            else:
                given = into.get(key) if into else None
                arrays[key] = arr = np.empty(buf.shape, buf.dtype) if given is None else given  # (viewed whole)
                bufs[key] = (arr.view(np.uint16) if buf.dtype == np.float16 else arr).reshape(-1)
        launches = []
        for (entry, dispatcher), keys, c in zip(self._fns, prog.launches, self.kernels):
            call = tuple(bufs[k] for k in keys)
            fn = entry if _entry_accepts(entry, call) else dispatcher
            launches.append((_reporting(fn, c.ir) if faults(c.ir) else fn, c.lead + call))
        return [arrays[k] for k in prog.outputs], launches, list(arrays.values())

    def __call__(self, args, into=None) -> list[np.ndarray]:
        """Run; `into` maps output buffer keys to C-contiguous arrays to write those results into."""
        out = (self.timed_run if profiler.ACTIVE else self.run)(args, into)
        return list(out) if isinstance(out, tuple) else [out]

    @functools.cached_property
    def timed_run(self):
        """`run` with each kernel timed and reported (runtime/profiler.py): used inside tj.profile()."""
        return self._make_runner(self._fns, timed=True)

    def _make_runner(self, fns, timed: bool = False):
        prog = self.program
        name = {key: f"b{i}" for i, key in enumerate(prog.buffers)}
        # NumPy's own empty, bound once (not the np.empty name: a wrapper while another thread traces, see
        # numpy/allocation.py)
        env = {
            "np": np,
            "empty": multiarray.empty,
            "recycled": self.device.outputs.empty,
            "flat_view": flat_view,
            "Array": Array,
            "check_int_scalars": check_int_scalars,
            "int_scalars": prog.int_scalars,
            "perf_counter": time.perf_counter,
            "log": log,
            "fault_error": fault_error,
            "device": self.device,
            "launched": profiler.launched,
        }
        lines = ["def run(args, into=None):"]
        if prog.int_scalars:
            lines.append("    check_int_scalars(int_scalars, args)")
        kept = _kept_temporaries(prog)
        if kept:  # the plan's own temporaries, taken from its pool (a call on another thread meanwhile: new ones)
            env["scratch_pool"], env["kept_shapes"] = [], [(prog.buffers[k].shape, prog.buffers[k].dtype) for k in kept]
            lines += [
                "    scratch = scratch_pool.pop() if scratch_pool else [np.empty(s, d) for s, d in kept_shapes]",
                f"    {', '.join(name[k] + '_arr' for k in kept)}, = scratch",
            ]
        for key, buf in prog.buffers.items():
            b = name[key]
            if key.argument:
                env[f"{b}_desc"] = buf
                contiguous = buf.offset == 0 and buf.strides == Buffer.contiguous(None, buf.dtype, buf.shape).strides
                data = f"args[{key.index}]"
                if not buf.shape:  # Python scalar or 0-d array
                    lines.append(f"    {b} = np.asarray({data}, {b}_desc.dtype).reshape(1)")
                elif contiguous and buf.dtype != np.float16:
                    flat = "" if len(buf.shape) == 1 else ".reshape(-1)"
                    lines.append(f"    {b} = ({data}._data if type({data}) is Array else {data}){flat}")
                else:
                    lines.append(f"    {b} = flat_view({data}, {b}_desc)")
            else:
                env[f"{b}_dt"], env[f"{b}_key"] = buf.dtype, key
                if key in prog.outputs:  # a destination given by the caller, or a fresh array
                    nbytes = math.prod(buf.shape) * buf.dtype.itemsize
                    fresh = "recycled" if nbytes >= output_pool.MIN_BYTES else "empty"  # runtime/numba/output_pool.py
                    lines.append(
                        f"    {b}_arr = {fresh}({buf.shape!r}, {b}_dt) if into is None or {b}_key not in "
                        f"into else into[{b}_key]"
                    )
                elif key not in kept:
                    lines.append(f"    {b}_arr = empty({buf.shape!r}, {b}_dt)")
                view = ".view(np.uint16)" if buf.dtype == np.float16 else ""
                flat = "" if len(buf.shape) == 1 else ".reshape(-1)"
                lines.append(f"    {b} = {b}_arr{view}{flat}" if view or flat else f"    {b} = {b}_arr")
        for i, ((entry, dispatcher), keys) in enumerate(zip(fns, prog.launches)):
            env[f"entry{i}"], env[f"dispatch{i}"] = entry, dispatcher
            lead = []
            for j, v in enumerate(self.kernels[i].lead):  # sizes: ints in the source, other values by name
                if type(v) is int:
                    lead.append(str(v))
                else:
                    env[f"lead{i}_{j}"] = v
                    lead.append(f"lead{i}_{j}")
            call_args = ", ".join([*lead, *(name[k] for k in keys)])
            can_fault = bool(faults(self.kernels[i].ir))
            if can_fault:  # a fresh error record per call: calls from several threads do not share one
                env[f"kernel{i}"] = self.kernels[i].ir
                lines.append(f"    error{i} = np.zeros(2, np.int64)")
                call_args += f", error{i}"
            lines += ["    t0 = perf_counter()"] if timed else []
            lines += [
                "    try:",
                f"        entry{i}({call_args})",
                "    except TypeError:  # an argument of another numba type (read-only view)",
                f"        dispatch{i}({call_args})",
            ]
            if can_fault:
                lines += [
                    f"    if error{i}[0]:",
                    f"        raise fault_error([kernel{i}], int(error{i}[0]), int(error{i}[1]))",
                ]
            if timed:
                kernel = self.kernels[i]
                nbytes = sum(p.size * p.dtype.itemsize for p in kernel.ir.params)
                env[f"name{i}"] = kernel.name
                lines += [f"    launched('numba', name{i}, t0, perf_counter(), {nbytes})"]
        outs = [f"{name[k]}_arr" for k in prog.outputs]
        if kept:  # back to the pool once every kernel is done with them (a call that raised drops them)
            lines.append(f"    if len(scratch_pool) < {KEEP_SETS}:")
            lines.append("        scratch_pool.append(scratch)")
        lines.append(f"    device.launches += {len(fns)}")
        lines.append(f"    return {outs[0]}" if len(outs) == 1 else f"    return ({', '.join(outs)},)")
        # NumPy's MemoryError for an output or temporary too big for host memory becomes a tracejit error
        # (still a MemoryError); the try costs nothing when nothing is raised
        env["out_of_memory"] = _out_of_memory
        lines = [
            lines[0],
            "  try:",
            *[" " * 2 + line for line in lines[1:]],
            "  except MemoryError as e:",
            "    raise out_of_memory(e) from None",
        ]
        exec(compile("\n".join(lines), f"<tracejit plan runner {id(self):x}>", "exec"), env)
        return env["run"]


# Temporaries (buffers between a plan's kernels that are not its results) of at least KEEP_MIN_BYTES and at
# most KEEP_MAX_BYTES in all are allocated once per plan and reused by its later calls. Fresh ones each
# call page-faulted whenever glibc had handed the memory back to the system between calls: a GPT-2 block's
# float64 weight copies took 3,600 page faults a call and ran 24 ms instead of 15 beside NumPy's calls.
KEEP_MIN_BYTES = 1 << 18
KEEP_MAX_BYTES = 1 << 28
KEEP_SETS = 4  # sets kept per plan: one for each thread running the plan at once, up to this many


def _kept_temporaries(prog: Program) -> list:
    temporaries = [k for k in prog.buffers if not k.argument and k not in prog.outputs]
    nbytes = sum(math.prod(prog.buffers[k].shape) * prog.buffers[k].dtype.itemsize for k in temporaries)
    return temporaries if KEEP_MIN_BYTES <= nbytes <= KEEP_MAX_BYTES else []


def _out_of_memory(e: MemoryError) -> MemoryError:
    if isinstance(e, OutOfMemoryError):
        return e
    return OutOfMemoryError(
        f"numba could not allocate an array this kernel needs ({e}); make the arrays smaller, "
        "or free arrays you no longer need"
    )
