"""The launch plan of the GPU-API devices (opencl, cuda, metal, webgpu): what every call does, written once,
around the few things a device does its own way (the hooks of device_interface.KernelDevice)."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from tracejit.errors import UnsupportedError
from tracejit.ir.fuse import Program
from tracejit.runtime import choices, profiler
from tracejit.runtime.array import Array
from tracejit.runtime.device_memory import by_value_params
from tracejit.runtime.faults import CAPTURE_REFUSED, raise_recorded
from tracejit.runtime.scalars import check_int_scalars


class LaunchPlan:
    """A compiled program on one device: each kernel built (rendered again for smaller groups where its
    registers allow fewer than it was rendered for), and calls that check Python-int arguments, upload
    host arguments, allocate results from the pool, enqueue every kernel, read the call's error record
    when a kernel can fault, and return device arrays without waiting (inside tj.profile(), each launch
    timed and waited for)."""

    def __init__(self, device, program: Program, in_memory: frozenset = frozenset()):
        """`in_memory`: the keys of 0-d inputs passed as the device's memory, not by value (see `_for`)."""
        self.device, self.program, self._in_memory = device, program, in_memory
        self.kernels, self._launches = [], []
        # (kernel, by value, symbolic sizes, options: autotune's candidate or choice, where one is applied)
        builds = {
            i: (
                k,
                self._by_value(keys),
                choices.sizes_of(device).of(program, i, device.name),
                choices.options_of(device),
            )
            for i, (k, keys) in enumerate(zip(program.kernels, program.launches))
            if i not in program.library_calls
        }
        device.build_together(list(builds.values()))
        for i, (k, keys) in enumerate(zip(program.kernels, program.launches)):
            by_value = self._by_value(keys)
            call = program.library_calls.get(i)
            if call is not None:  # a product or sort the host's library runs (a CPU device: LayoutOptions.library)
                scalars = [
                    (key.index, program.buffers[key].dtype) if j in by_value else None for j, key in enumerate(keys)
                ]
                c, launcher = device.library_launch(k, call, scalars)
                self.kernels.append(c)
                self._launches.append((launcher, keys))
                continue
            _, _, symbolic, options = builds[i]
            c, binary, fits = device.build(k, by_value, symbolic, options)
            if fits is not None and fits < c.launch.local_size:  # its registers allow fewer threads per group
                c, binary, _ = device.build(k, by_value, symbolic, replace(options, max_local_size=fits))
            scalars = [(key.index, program.buffers[key].dtype) if j in by_value else None for j, key in enumerate(keys)]
            self.kernels.append(c)
            self._launches.append((device.launcher(c, binary, scalars), keys))
        self._inputs = [(k, b) for k, b in program.buffers.items() if k.argument]
        self._allocs = [(k, b.shape, b.dtype) for k, b in program.buffers.items() if not k.argument]
        self._faulting = next((c for c in self.kernels if c.launch.error_flag), None)
        self._irs = [c.ir for c in self.kernels]
        self._int_scalars, self._outputs = program.int_scalars, program.outputs
        self._zero_d = [k for k, b in self._inputs if b.shape == () and k not in in_memory]
        self._variants: dict[frozenset, LaunchPlan] = {}

    def _by_value(self, keys) -> frozenset[int]:
        """The parameters of a kernel (its buffer keys) passed by value: 0-d inputs, but those in memory."""
        return by_value_params(self.program, keys) - {j for j, key in enumerate(keys) if key in self._in_memory}

    def _for(self, args, captured: bool = False) -> LaunchPlan:
        """The plan for these arguments. A 0-d input is passed by value, read when the call starts; one that is
        the device's memory (a value an earlier call computed, a loop's step) is passed as memory instead, by
        kernels built for that once: reading it would wait for the kernels computing it, and a captured graph
        would replay the number it read (`captured`: any array is, a host array uploaded)."""
        if not self._zero_d:
            return self
        memory = frozenset(
            k for k in self._zero_d if _in_memory(args[k.index], self.device) or captured and _is_array(args[k.index])
        )
        if not memory:
            return self
        plan = self._variants.get(memory)
        if plan is None:
            plan = self._variants[memory] = LaunchPlan(self.device, self.program, self._in_memory | memory)
        return plan

    def _buffers(self, args, into=None) -> tuple[dict, dict]:
        """What each buffer of a call is: a 0-d input's Python value, a tj.Array's memory on this device,
        else an upload of the span the kernels read (once per host array, even when it is passed twice);
        each output and temporary allocated, or the array of `into` for it."""
        dev = self.device
        bufs, staged, results = {}, {}, {}
        for key, desc in self._inputs:
            a = args[key.index]
            if desc.shape == () and key not in self._in_memory:
                bufs[key] = a.numpy().reshape(()).item() if type(a) is Array else np.asarray(a).item()
            elif type(a) is Array and a.device is dev:
                bufs[key] = a._data
            else:
                host = a.numpy() if type(a) is Array else a
                if id(host) not in staged:
                    staged[id(host)] = dev.upload_span(host, desc)
                bufs[key] = staged[id(host)]
        for key, shape, dtype in self._allocs:
            results[key] = bufs[key] = into[key] if into and key in into else dev.allocate(shape, dtype)
        return bufs, results

    def __call__(self, args, into=None) -> list:
        """Run; `into` maps output buffer keys to device arrays to write those results into."""
        dev = self.device
        if self._int_scalars:
            check_int_scalars(self._int_scalars, args)
        if self._zero_d:
            plan = self._for(args)
            if plan is not self:
                return plan(args, into)
        bufs, results = self._buffers(args, into)
        # the call's own record, for all its kernels (a fault's code names it in any kernel): a record shared
        # with calls in other threads would be zeroed and read by them
        error = dev.error_record() if self._faulting is not None else None
        dev.launches += len(self._launches)
        if profiler.timing():
            self._timed(bufs, error)
        else:
            dev.enqueue(self._launches, bufs, error)
        if error is not None:
            raise_recorded(self._irs, dev.read_record(error))
        return [results[k] for k in self._outputs]

    def _timed(self, bufs, error) -> None:
        """Each launch on its own, waited for and reported, by the device's clock where it has one."""
        dev = self.device
        for c, (launcher, keys) in zip(self.kernels, self._launches):
            values = [bufs[k] for k in keys]
            t0 = time.perf_counter()
            seconds = dev.timed(launcher, values, error)
            end = time.perf_counter()
            launch = c.launch
            profiler.launched(
                dev.name,
                c.name,
                t0 if seconds is None else end - seconds,
                end,
                sum(p.size * p.dtype.itemsize for p in c.ir.params),
                launch.global_items // launch.local_size,
                launch.local_size,
                "wall" if seconds is None else "device",
                f"{launch.mode} mode, {launch.global_items} work-items in groups of {launch.local_size}",
            )

    @property
    def allocations(self) -> list:
        """The keys of the buffers a call allocates (outputs and temporaries), in the order bind() returns them."""
        return [key for key, _, _ in self._allocs]

    def bind(self, args, into=None) -> tuple[list, list, list]:
        """For graph capture: fresh outputs and temporaries (or the arrays of `into`, by buffer key), and each
        kernel's launch with these arguments, in the form the device's replay() takes; launches nothing. Also
        returns every array it allocated or took, in the order of `allocations`."""
        check_int_scalars(self._int_scalars, args)
        if self._faulting is not None:
            raise UnsupportedError(CAPTURE_REFUSED.format(name=self._faulting.name, device=self.device.name))
        plan = self._for(args, captured=True)
        if plan is not self:
            return plan.bind(args, into)
        bufs, results = self._buffers(args, into)
        launches = [self.device.bound(launcher, [bufs[k] for k in keys]) for launcher, keys in self._launches]
        return [results[k] for k in self._outputs], launches, list(results.values())


def _in_memory(a, device) -> bool:
    """Whether an argument is memory of `device` (a tj.Array there)."""
    return type(a) is Array and a.device is device


def _is_array(a) -> bool:
    return isinstance(a, (np.ndarray, Array))
