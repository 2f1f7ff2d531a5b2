"""What @tj.kernel's trace() and lower() return: the traced graph of one signature (Traced) and its compiled
plan (Plan), which runs a call, writing assigned arguments back and results into out= where given."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from tracejit.errors import UnsupportedError
from tracejit.ir import build, narrow_floats
from tracejit.ir.fuse import Program, input_buffer, schedule
from tracejit.ir.graph import Node, Op, format_graph, toposort
from tracejit.ir.layout import LayoutOptions
from tracejit.runtime import registry
from tracejit.runtime.array import Array
from tracejit.frontend import destinations
from tracejit.numpy import captured, int_comparisons, random_draws
from tracejit.frontend.signature import ArgInfo, c_strides


@dataclass(frozen=True)
class Constant:
    """A value of a nested result that is not an array (a dict of settings, a string, None): returned as it was,
    a copy of it each call."""

    value: object


def template(value, flat: list):
    """The structure of a nested result (Traced.structure), its arrays and numbers appended to `flat`."""
    if isinstance(value, (tuple, list)):
        items = [template(v, flat) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if value is None or isinstance(value, (str, bytes, dict, set, frozenset)):
        return Constant(value)
    flat.append(value)
    return len(flat) - 1


def _built(structure, results: list):
    if isinstance(structure, int):
        return results[structure]
    if isinstance(structure, Constant):
        return copy.deepcopy(structure.value)
    items = [_built(s, results) for s in structure]
    return type(structure)(*items) if hasattr(structure, "_fields") else type(structure)(items)


class Traced:
    """The graph of one signature: str() prints the graph IR.

    `outputs` are the returned values, then the new value of each argument in `assigned` (the positions
    of the array arguments the function assigned into), which a call writes back into the caller's arrays,
    then `checks` values computed only for the faults they raise (ir/faulting.py), which a call drops.
    `streams`: the random streams the function draws from (random_draws.py), each four uint32 scalar inputs
    after the arguments, which every call fills afresh. `compared`: the hidden scalars of its comparisons of
    integer arrays with Python-int arguments (int_comparisons.py), after those. `captured`: the NumPy arrays too
    large to embed that it reads (`held` while it was traced: numpy/captured.py), after those. `tuple_result` is
    None for a function that returns None (a procedure: it only assigns into its arguments). `sizes`: the counts of
    its sizes that depend on the data (numpy/data_sizes.py), None where it has none; `probe`: a graph that only
    computes the count after those (frontend/sized.py)."""

    sizes: tuple[int, ...] | None = None
    probe = False
    complex_outputs: dict[int, np.dtype] = {}  # results computed as parts: their complex dtype (complex_calls.py)
    named: type | None = None  # the named tuple class of the function's result (np.linalg.svd's SVDResult), if one
    narrow_outputs: dict[int, np.dtype] = {}  # bfloat16 and float8 results, computed as bits (narrow_floats.py)
    # a result of nested tuples and lists (CS231n's `return out, (x, w, b, conv_param)`): the result's shape, each
    # array an int (its position among the results), each other value a Constant; None: a flat result
    structure: object = None

    def __init__(
        self,
        name: str,
        outputs: list[Node],
        tuple_result: bool | None,
        infos: list[ArgInfo],
        assigned: tuple[int, ...] = (),
        checks: int = 0,
        streams: tuple = (),
        held: dict | None = None,
    ):
        if narrow_floats.uses_narrow_floats(outputs):  # (bits and float32 values from here on: ir/narrow_floats.py)
            outputs, self.narrow_outputs = narrow_floats.lower(outputs)
        self.name, self.outputs, self.tuple_result, self.infos = name, outputs, tuple_result, infos
        self.assigned, self.checks, self.streams = assigned, checks, tuple(streams)
        self.compared = int_comparisons.hidden(outputs)
        self.captured = captured.hidden(outputs, held or {})

    def pack(self, results: list):
        """The call's result from its arrays: None (a procedure), the one array, a tuple, or the function's named
        tuple."""
        if self.tuple_result is None:
            return None
        if self.structure is not None:
            return _built(self.structure, results)
        if not self.tuple_result:
            return results[0]
        return tuple(results) if self.named is None else self.named(*results)

    def inputs(self) -> dict:
        """The buffer of each INPUT node the graph reads: the arguments (read in place through their strides),
        then the hidden scalars of a call (random words, compared ints), positions as `nargs` counts them."""
        inputs = {}
        read = set(toposort(self.outputs)) if self.compared else None
        for i, info in enumerate(self.infos):
            if info.kind == "array":
                node = build.input_(i, narrow_floats.storage(np.dtype(info.dtype)), info.shape)
                inputs[node] = input_buffer(i, node, info.strides)
            elif info.kind == "scalar":
                node = build.input_(i, info.dtype, (), weak=True)
                if read is None or node in read:  # an int only compared is read through its hidden scalars
                    inputs[node] = input_buffer(i, node, ())
        for s in self.streams:
            for i in range(s.first, s.first + random_draws.WORDS):
                node = build.input_(i, random_draws.U32, ())
                inputs[node] = input_buffer(i, node, ())
        first = len(self.infos) + random_draws.WORDS * len(self.streams)
        for j, (arg, dtype) in enumerate(self.compared):
            node = build.input_(arg, dtype, ())
            inputs[node] = input_buffer(first + j, node, ())
        first += len(self.compared)
        for j, (arg, array) in enumerate(self.captured):
            node = build.input_(arg, array.dtype, array.shape)
            inputs[node] = input_buffer(first + j, node, c_strides(array.shape))
        return inputs

    @property
    def nargs(self) -> int:
        """How many values a call passes its executable: the arguments, then the hidden scalars and arrays."""
        return len(self.infos) + random_draws.WORDS * len(self.streams) + len(self.compared) + len(self.captured)

    @property
    def results(self) -> list[Node]:
        """The returned values (without the new values of assigned arguments, and the checks)."""
        return self.outputs[: len(self.outputs) - len(self.assigned) - self.checks]

    def __str__(self) -> str:
        text = format_graph(self.outputs, f"graph {self.name}")
        for loop in loops_in(self.outputs):  # each loop compiled as a loop: its body's graph
            inputs = ", ".join(repr(n.arg) for n in loop.inputs)
            text += "\n" + format_graph(loop.outputs, f"body of the {loop.kind} loop {loop!r} (inputs {inputs})")
        n = len(self.results)
        if self.assigned:
            text += "\n  " + ", ".join(
                f"value {n + k} is written into argument {j}" for k, j in enumerate(self.assigned)
            )
        if self.checks:
            first = n + len(self.assigned)
            text += (
                "\n  "
                + ", ".join(f"value {first + k}" for k in range(self.checks))
                + " computed for the errors it raises (a power or an index no returned value reads; "
                "NumPy raises for it)"
            )
        return text

    def to_networkx(self, device: str | None = None):
        """The graph as it is scheduled for `device` (None: the default device) as a networkx DiGraph: each
        node with its op, shape, dtype and the kernel it is fused into (frontend/graph_view.py)."""
        from tracejit.frontend.graph_view import to_networkx

        return to_networkx(self.program(registry.compiler(device).layout), self.name)

    def programs(self, options: LayoutOptions = LayoutOptions()) -> list[Program]:
        """The programs of this graph: its one program, or where it holds loops compiled as loops, the program
        of each part between loops and of each loop's body (frontend/staged.py)."""
        from tracejit.frontend import staged

        if not staged.has_loops(self.outputs):
            return [self.program(options)]
        return staged.programs(self.outputs, self.inputs(), self.nargs, options)

    def program(
        self,
        options: LayoutOptions = LayoutOptions(),
        other: Program | None = None,
        moving: dict | None = None,
        **fields,
    ) -> Program:
        """The kernels of this graph; `other`: its twin's, or `moving`: the variables known to move, per
        kernel name; `fields`: the Program's dynamic, every_loop, ahead and find_twin (ir.fuse.schedule)."""
        from tracejit.frontend import staged

        if staged.has_loops(self.outputs):
            raise UnsupportedError(
                f"{self.name} holds loops compiled as loops: it is several programs (Traced.programs()), not one"
            )
        inputs = self.inputs()
        return schedule(self.outputs, inputs, options, other, moving, **fields)


def loops_in(outputs: list[Node]) -> list:
    """The loops compiled as loops a graph holds, those in their bodies too, outermost first."""
    found: list = []
    todo = list(outputs)
    while todo:
        fresh = [n.arg[0] for n in toposort(todo) if n.op is Op.LOOP and n.arg[0] not in found]
        fresh = list(dict.fromkeys(fresh))
        found += fresh
        todo = [o for loop in fresh for o in loop.outputs]
    return found


class Plan:
    """A compiled signature: `.kernels` (each with .name and .source) and the executable."""

    def __init__(self, traced: Traced, executable, device):
        self.traced, self.executable, self.device = traced, executable, device
        self.kernels = executable.kernels
        if not traced.outputs:  # a procedure that changes nothing, or an empty tuple: nothing to launch
            self.run = lambda args: traced.pack([])
        elif traced.assigned or traced.checks:
            self.run = lambda args: self._call(args, args)
        elif (
            device.returns_numpy
            and (len(traced.outputs) > 1 or not traced.tuple_result)
            and traced.named is None
            and traced.structure is None
        ):
            self.run = executable.run  # returns the array, or the tuple of arrays, as it is
        else:
            self.run = self._run
        self._wrap = not device.returns_numpy
        self._tuple = traced.tuple_result
        self._one_buffer_twice = device.binds_one_buffer_twice
        self.runnable = device.runs
        self._inner_run = self.run
        self._compared = int_comparisons.values_of(traced.compared) if traced.compared else None
        # the arrays it holds, put on its device by the first call (tj.Arrays: not copied again by later ones)
        self._captured: tuple | None = () if not traced.captured else None
        if traced.streams or traced.compared or traced.captured:  # each call's hidden values follow its arguments
            hidden, run = self._with_words, self.run
            self.run = lambda args: run(hidden(args))

    def _run(self, args):
        outs = self.executable(args)
        if self._wrap:
            outs = [Array(o, self.device) for o in outs]
        return self.traced.pack(outs)

    def __call__(self, *args, out=None):
        return self.call(args, args, out)

    def timed(self, args, originals, out=None):
        """A call inside tj.profile(): through the executable's own call, which times each launch then."""
        if out is None and not self.traced.assigned and not self.traced.checks:
            return self._run(self._with_words(args))
        return self.call(args, originals, out)

    def call(self, args, originals, out=None):
        """Run with `args` (as normalized for the plan), writing the new values of assigned arguments into
        the caller's `originals`, and the results into `out` where given (returned in their place)."""
        return self._call(self._with_words(args), originals, out)

    def _with_words(self, args) -> tuple:
        """The arguments and the call's hidden values after them: where the function draws random numbers,
        the call's words; then the values its comparisons with Python ints read (int_comparisons.py); then the
        arrays the plan holds (numpy/captured.py)."""
        streams, compared = self.traced.streams, self._compared
        if not streams and compared is None and not self.traced.captured:  # (the cached call's usual path)
            return args
        held = self.held_values()
        args = tuple(args)
        return (
            args
            + (random_draws.call_words(streams, args) if streams else ())
            + (compared(args) if compared is not None else ())
            + held
        )

    def held_values(self) -> tuple:
        """The arrays the plan holds (numpy/captured.py) as its device's executables read them."""
        if self._captured is None:
            dev = self.device
            self._captured = tuple(
                a if dev.returns_numpy else Array(dev.from_numpy(a), dev) for _, a in self.traced.captured
            )
        return self._captured

    def _call(self, args, originals, out=None, seed=None):
        """A call with its hidden scalars in `args`; `seed`: what an earlier plan of the call computed (from
        SizeChanged: frontend/sized.py), which the executable does not compute again."""
        traced = self.traced
        if not traced.assigned and not traced.checks and out is None and seed is None:
            return self._inner_run(args)
        n = len(traced.results)
        dests = [None] * len(traced.outputs)
        if traced.assigned:
            destinations.check_assigned(traced.name, traced.assigned, args, originals)
            for k, j in enumerate(traced.assigned):
                dests[n + k] = originals[j]
        if out is not None:
            if not self._tuple and isinstance(out, tuple) and len(out) == 1:
                out = out[0]
            outs = destinations.out_destinations(
                traced.name, out, [r.shape for r in traced.results], [r.dtype for r in traced.results], self.device
            )
            dests[:n] = outs
        into, staged = {}, []
        for pos, dest in enumerate(dests):
            if dest is not None:
                memory = self._direct(pos, dest, dests, originals)
                if memory is None:
                    staged.append(pos)
                else:
                    into[self.executable.program.outputs[pos]] = memory
        values = self.executable(args, into) if seed is None else self.executable(args, into, seed=seed)
        for pos in sorted(staged, key=lambda p: p < n):  # the arguments first, out= last: it has the final word
            destinations.copy_into(dests[pos], values[pos], self.device)
        if self._tuple is None:
            return None
        results = [
            dests[i] if dests[i] is not None else Array(values[i], self.device) if self._wrap else values[i]
            for i in range(n)
        ]
        return self.traced.pack(results)

    def _direct(self, pos: int, dest, dests, originals):
        """The memory of dest when the kernel can write output `pos` straight into it, else None (the
        value is then computed apart and copied in)."""
        program, traced = self.executable.program, self.traced
        if program is None:  # a graph with loops (staged.py): its results are copied in
            return None
        key = program.outputs[pos]
        node = traced.outputs[pos]
        if program.outputs.count(key) > 1:
            return None
        memory = destinations.writable_memory(dest, self.device, node.shape, node.dtype)
        if memory is None or any(
            d is not None and i != pos and destinations.overlap(dest, d) for i, d in enumerate(dests)
        ):
            return None
        for j, a in enumerate(originals):
            if isinstance(a, (np.ndarray, Array)) and destinations.overlap(dest, a):
                # only an argument read at just the element the kernel writes there, in the same layout
                same = destinations.writable_memory(a, self.device, node.shape, node.dtype) is memory
                if not (same and program.writes_in_place(key, j) and self._one_buffer_twice):
                    return None
        return memory

    def __repr__(self) -> str:
        return f"<Plan {self.traced.name} on {self.device.name}: {len(self.kernels)} kernel(s)>"
