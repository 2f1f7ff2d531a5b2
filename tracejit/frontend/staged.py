"""Running a graph that holds loops compiled as loops (numpy/loops.py, LOOP nodes).

The graph is cut at its loops into parts, each an ordinary program of the device (fused and compiled as any
other): the part before the first loops computes what they start from and read; each loop runs its body's
program once per step (the body is itself such a graph: loops nest); the part after reads the loops' results.
A value is in a part's level: 0 for what needs no loop, else one more than the highest level among a loop's
sources, and a part computes every value of its level. Kernel arguments and constants are read by each part
where they are; what one part computes and a later one (or a loop) reads is an output of the first and an input
of the second.

A loop's bounds (where they are read from arrays) and a `while`'s test are read back to the host each time
they are needed: on the numba device that is reading memory; on the GPU-API devices it waits for the kernels
before it (one synchronisation per step of a `while`, one per loop with bounds from arrays). So is the count of a
size that depends on the data (a SIZE node, numpy/data_sizes.py), checked against the one the graph was traced
with: another raises SizeChanged with what was computed so far, from which the graph traced with that count goes
on (`seed`).
"""

from __future__ import annotations

import time
import weakref
from collections import OrderedDict

import numpy as np

from tracejit.errors import UnsupportedError
from tracejit.frontend import bound_loops, loop_stores
from tracejit.ir import build, element_loops
from tracejit.ir.analysis import Buffer
from tracejit.ir.fuse import input_buffer, schedule
from tracejit.ir.graph import LEAVES, Node, Op, replace, toposort
from tracejit.ir.verify import verify_graph, verify_kernel
from tracejit.runtime import choices, host_loops
from tracejit.runtime.array import Array
from tracejit.runtime.debug import log
from tracejit.numpy import host_calls
from tracejit.numpy.data_sizes import SizeChanged
from tracejit.numpy.host_calls import HostCall
from tracejit.numpy.loops import Loop, index_span


# where the graph is cut into parts: loops, calls run with NumPy on the host, counts read back
_CUTS = (Op.LOOP, Op.HOST, Op.SIZE)
# views a later part applies itself to what an earlier part computed, rather than read them as arrays of their
# own: a broadcast is bigger than its source, and a product whose operand is a broadcast weight is a BLAS
# call (ir/library.py), where a copy of the broadcast made before a loop was a generated reduction (a CNN's
# dense layer after its convolution's loop: w2 broadcast over 64 images, 9 MB, then summed in 1.4 ms)
_VIEWS = frozenset({Op.RESHAPE, Op.EXPAND, Op.PERMUTE})


def _unviewed(node: Node) -> Node:
    """What a chain of _VIEWS is a view of."""
    while node.op in _VIEWS:
        node = node.srcs[0]
    return node


def has_loops(outputs: list[Node]) -> bool:
    """Whether the graph holds a loop compiled as a loop or a call run on the host (a Staged runs it)."""
    return any(n.op in _CUTS for n in toposort(outputs))


# the executables of the graphs without cuts compiled lately, per device, by graph (nodes are hash-consed: a
# graph traced again is the same objects): the parts a data-dependent count does not change are not scheduled
# and rendered again when another count traces the kernel again (frontend/sized.py)
_COMPILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_COMPILED_MAX = 64


def compile_graph(outputs: list[Node], inputs: dict[Node, Buffer], nargs: int, dev, reused: set | None = None):
    """The executable of `outputs` on `dev`: called with `nargs` arguments (`inputs` says which of the graph's
    INPUT nodes each is), it returns the outputs' values as the device's executables do. `reused` gathers the ids
    of the kernels of executables compiled earlier for the same graph (not compiled again: counted as loaded)."""
    if not has_loops(outputs):
        present = set(toposort(outputs))
        reads = {n: b for n, b in inputs.items() if n in present}
        key = (tuple(outputs), frozenset(reads.items()), nargs, choices.current())  # (autotune's candidates)
        try:
            memo = _COMPILED.setdefault(dev, OrderedDict())
        except TypeError:  # (a device object that cannot be weakly referenced: compiled every time)
            memo = OrderedDict()
        found = memo.get(key)
        if found is not None:
            memo.move_to_end(key)
            if reused is not None:  # (a library's kernels are counted as such, not as loaded)
                calls = getattr(getattr(found, "program", None), "library_calls", {})
                reused.update(id(k) for i, k in enumerate(found.kernels) if i not in calls)
            return found
        program = schedule(outputs, reads, choices.layout_of(dev))
        for k in program.kernels:
            verify_kernel(k)
        executable = dev.compile(program)
        memo[key] = executable
        while len(memo) > _COMPILED_MAX:
            memo.popitem(last=False)
        return executable
    return Staged(outputs, inputs, nargs, dev)


def programs(outputs: list[Node], inputs: dict[Node, Buffer], nargs: int, options) -> list:
    """Every program the graph's parts and loop bodies are scheduled into for a target of these layout options,
    compiling nothing (the test suite's source checks render them)."""
    found: list = []

    class _Collect:
        layout, returns_numpy, runs, computes_int64 = options, True, False, True

        @staticmethod
        def element_loop(plan):
            return None  # (its body's programs are rendered)

        @staticmethod
        def compile(program):
            found.append(program)
            return _Nothing(program)

    compile_graph(outputs, inputs, nargs, _Collect())
    return found


class _Nothing:
    def __init__(self, program):
        self.program, self.kernels = program, []


def _contiguous(node: Node, index: int) -> Buffer:
    strides, step = [], 1
    for s in reversed(node.shape):
        strides.append(step)
        step *= s
    return input_buffer(index, node, tuple(reversed(strides)))


class _Part:
    """One part of the graph between loops: its executable, what it reads besides the arguments, what it
    computes."""

    def __init__(self, computes: list[Node], reads: list[Node], executable):
        self.computes, self.reads, self.executable = computes, reads, executable


class _Body:
    """A loop's body, compiled: its executable and the sources of its LOOP nodes, and what a call of it needs that
    no call's values change (Staged._run_loop)."""

    def __init__(self, loop: Loop, srcs: tuple[Node, ...], executable, results: dict[int, Node]):
        self.loop, self.srcs, self.executable, self.results = loop, srcs, executable, results
        self.heads = loop.heads
        self.ends = loop.heads + loop.carried  # (where the carried values' first values end in srcs)
        self.constants = [s.op is Op.CONST for s in srcs]
        self.arguments: list[int | None] = [None] * len(srcs)  # the kernel argument each source is, if one (Staged)
        self.element = bool(getattr(executable, "element", False))
        self.result_items = list(results.items())
        firsts = srcs[self.heads : self.ends]
        self.firsts = firsts
        self.donatable: list[bool] = []  # per carried value: whether its memory may be given to the loop (donated)
        first = 1 if loop.kind == "for" else 0
        # a Python number carried (a weak 0-d value) is passed as one, as the kernel's Python-number arguments are
        self.scalar = [x.weak and x.shape == () for x in loop.inputs[first : first + loop.carried]]
        # each step writes its arrays into the memory of the step before last's, free once the last step read it
        program = getattr(executable, "program", None)
        keys = list(program.outputs[: loop.carried]) if program is not None else []
        if len(set(keys)) < len(keys) or any(k.argument for k in keys):
            keys = []
        self.keys = keys


class Staged:
    """The executable of a graph with loops (module docstring)."""

    staged = True
    program = None

    def __init__(self, outputs: list[Node], inputs: dict[Node, Buffer], nargs: int, dev):
        self.device, self.outputs, self._inputs = dev, outputs, inputs
        self.reused: set[int] = set()  # ids of kernels compiled earlier for the same graph (compile_graph)
        self._wrap = not dev.returns_numpy
        order = toposort(outputs)
        level: dict[Node, int] = {}
        for n in order:
            if n.op in _CUTS:
                level[n] = 1 + max((level[s] for s in n.srcs), default=0)
            else:
                level[n] = max((level[s] for s in n.srcs), default=0)
        # values a later part or a loop reads: computed by an earlier part (or a loop) and kept
        kept: dict[Node, None] = {}
        loops: dict[Loop, tuple[int, tuple[Node, ...], dict[int, Node]]] = {}
        elements: dict[Loop, object] = {}  # the loops over elements, compiled
        hosts: dict[HostCall, tuple[int, tuple[Node, ...], dict[int, Node]]] = {}
        self._sizes: dict[int, list[Node]] = {}
        for n in order:
            if n.op is Op.SIZE:
                self._sizes.setdefault(level[n], []).append(n)
                for s in n.srcs:
                    if not (s.op is Op.INPUT and s in inputs):
                        kept.setdefault(s)
            elif n.op is Op.HOST:
                call, k = n.arg
                hosts.setdefault(call, (level[n], n.srcs, {}))[2][k] = n
                for s in n.srcs:
                    if not (s.op is Op.INPUT and s in inputs):
                        kept.setdefault(s)
            elif n.op is Op.LOOP:
                loop, k = n.arg
                found = loops.setdefault(loop, (level[n], n.srcs, {}))
                found[2][k] = n
                if loop not in elements:
                    elements[loop] = _element_loop(loop, dev)
                for s in n.srcs:
                    if s.op is Op.INPUT and s in inputs:
                        continue
                    if s.op is Op.CONST and elements[loop] is not None:
                        continue  # (made where the loop runs: np.zeros is memory the loop may update in place)
                    kept.setdefault(s)
            else:
                for s in n.srcs:
                    if s.op in _CUTS or (s.op not in LEAVES and level[s] < level[n]):
                        source = _unviewed(s)  # (the view is applied where it is read)
                        if source.op in _CUTS or source.op not in LEAVES:
                            kept.setdefault(source)
        for o in outputs:
            kept.setdefault(o)
        self._parts: dict[int, _Part] = {}
        for lv in sorted({level[n] for n in kept if n.op not in _CUTS}):
            computes = [
                n for n in kept if level[n] == lv and n.op not in _CUTS and not (n.op is Op.INPUT and n in inputs)
            ]
            if not computes:
                continue
            reads = _frontier(
                computes,
                lambda n, lv=lv: n.op in _CUTS or (n.op not in LEAVES and n.op not in _VIEWS and level[n] < lv),
            )
            fresh = {n: build.input_(nargs + j, n.dtype, n.shape, n.weak) for j, n in enumerate(reads)}
            graph = replace(computes, fresh) if fresh else computes
            present = set(toposort(graph))
            part_inputs = {n: b for n, b in inputs.items() if n in present}
            part_inputs.update({f: _contiguous(f, nargs + j) for j, f in enumerate(fresh.values())})
            verify_graph(graph)
            self._parts[lv] = _Part(
                computes, reads, compile_graph(graph, part_inputs, nargs + len(reads), dev, self.reused)
            )
        self._loops: dict[int, list[_Body]] = {}
        # who reads each value (a loop once for all its LOOP nodes): a loop over elements may update in place the
        # memory of a value nothing else reads
        self._users: dict[Node, set] = {}
        for n in order:
            for s in n.srcs:
                self._users.setdefault(s, set()).add(n.arg[0] if n.op in _CUTS else n)
        for o in outputs:
            self._users.setdefault(o, set()).add(None)
        for loop, (lv, srcs, results) in loops.items():
            element = elements[loop]
            if element is not None:
                self._loops.setdefault(lv, []).append(_Body(loop, srcs, element, results))
                continue
            body_inputs = {x: build.input_(p, x.dtype, x.shape, x.weak) for p, x in enumerate(loop.inputs)}
            stand_ins = list(body_inputs.values())
            span = _index_span(loop) if dev.computes_int64 else None  # (the clamp computes with the int64 index)
            if span is not None:  # the index clamped to the values it takes: its picks need no check (value_range)
                index = body_inputs[loop.inputs[0]]
                low, high = (build.const(v, index.dtype, (), weak=True) for v in span)
                body_inputs[loop.inputs[0]] = build.binary(Op.MIN, build.binary(Op.MAX, index, low), high)
            graph = replace(loop.outputs, body_inputs)
            verify_graph(graph)
            executable = self._compile_body(graph, stand_ins, loop)
            if isinstance(executable, Staged):  # (a body with loops: its parts compiled earlier too)
                self.reused |= executable.reused
            self._loops.setdefault(lv, []).append(_Body(loop, srcs, executable, results))
        self._hosts: dict[int, list[tuple[HostCall, tuple[Node, ...], dict[int, Node]]]] = {}
        for call, (lv, srcs, results) in hosts.items():
            self._hosts.setdefault(lv, []).append((call, srcs, results))
        self.levels = sorted(set(self._parts) | set(self._loops) | set(self._hosts) | set(self._sizes))
        self._argument = {n: b.key.index for n, b in inputs.items() if b.key is not None}  # (INPUT -> position)
        for bodies in self._loops.values():
            for b in bodies:
                # (a value carried twice, or also read, is copied; so is one anything else reads)
                b.donatable = [b.srcs.count(s) == 1 and self._users.get(s) == {b.loop} for s in b.firsts]
                b.arguments = [self._argument.get(s) if s.op is Op.INPUT else None for s in b.srcs]
        # per level, in order: its sizes to check, loops, calls on the host, part
        self._plan = [
            (self._sizes.get(lv, ()), self._loops.get(lv, ()), self._hosts.get(lv, ()), self._parts.get(lv))
            for lv in self.levels
        ]
        self.kernels = [k for part in self._parts.values() for k in part.executable.kernels] + [
            k for bodies in self._loops.values() for b in bodies for k in b.executable.kernels
        ]

    def _compile_body(self, graph: list[Node], stand_ins: list[Node], loop: Loop):
        """A loop body's executable: where the device's memory is NumPy's, its stores into one place of a carried
        array made in place (frontend/loop_stores.py)."""
        dev, first = self.device, 1 if loop.kind == "for" else 0

        def compiled(outputs: list[Node]):
            present = set(toposort(outputs))
            buffers = {x: _contiguous(x, p) for p, x in enumerate(stand_ins) if x in present}
            return compile_graph(outputs, buffers, len(stand_ins), dev, self.reused)

        if dev.returns_numpy and not has_loops(graph):
            outputs, found = loop_stores.stores(graph, stand_ins[first : first + loop.carried])
            if found:
                arrays = len({s.carried for s in found})
                log(1, f"the loop at {loop.where} stores into {arrays} carried array(s) in place ({len(found)} stores)")
                return loop_stores.InPlaceBody(compiled(outputs), found, first, len(graph), lambda: compiled(graph))
        return compiled(graph)

    @property
    def library_calls(self) -> int:
        """How many of the kernels a library runs (numba's BLAS products, NumPy's sorts)."""
        return sum(_library_calls(p.executable) for p in self._parts.values()) + sum(
            _library_calls(b.executable) for bodies in self._loops.values() for b in bodies
        )

    # -- running --

    def __call__(self, args, into=None, seed=None) -> list:
        """The outputs' values. `seed`: values a call computed already (graph node -> value, from SizeChanged), which
        parts, loops and calls computing nothing else are not run again for."""
        values: dict[Node, object] = dict(seed) if seed else {}
        owned: set[Node] = set()  # values in memory a loop over elements made (not views of anything else)
        parts: set[Node] = set()  # values a part's kernels made, as arrays of the host (see _own_memory)
        args = tuple(args)
        value = self._value
        for sizes, bodies, hosts, part in self._plan:
            for node in sizes:
                self._check_size(node, args, values)
            for body in bodies:
                if not (seed and all(n in values for n in body.results.values())):
                    self._run_loop(body, args, values, owned, parts)
            for call, srcs, results in hosts:
                if not (seed and all(n in values for n in results.values())):
                    self._run_host(call, srcs, results, args, values)
            if part is not None and not (seed and all(n in values for n in part.computes)):
                extra = tuple([value(n, args, values) for n in part.reads])
                for n, v in zip(part.computes, part.executable(args + extra)):
                    values[n] = v
                    if type(v) is np.ndarray:  # (a loop over elements may take its memory: _run_loop checks)
                        parts.add(n)
        return [self._output(o, value(o, args, values)) for o in self.outputs]

    def _check_size(self, node: Node, args, values) -> None:
        """A data-dependent size: its count read back (waiting for the kernels computing it), which must be the one
        traced (else SizeChanged); its value is its payload's."""
        if node in values:
            return
        index, expected, _ = node.arg
        count = int(self._read(self._value(node.srcs[0], args, values)))
        if count != expected:
            raise SizeChanged(index, count, values)
        payload = self._value(node.srcs[1], args, values)
        values[node] = payload._data if self._wrap and isinstance(payload, Array) else payload

    def run(self, args):
        outs = self(args)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def bind(self, args, into=None) -> tuple[list, list, list]:
        """For graph capture (frontend/capture.py): every launch of a call, bound for good in the form the device's
        replay() takes, the outputs, and every array the launches allocated; launches nothing. A `for` loop's
        steps are bound one after another, each step's arrays in the memory of the step before last's and its
        temporaries in the step before's, so a replay runs the whole loop as one sequence of launches (one CUDA
        graph on cuda, one command buffer on metal and webgpu) in the memory of two steps; a Python number the
        kernel computes stays the 0-d memory it is computed in. What a call reads back to the host while it runs
        to decide what to launch cannot be bound (a `while`'s test, a `break`, bounds read from arrays, a loop
        over elements a GPU-API device runs on the host): such a kernel is refused, naming the loop. (`into`, the
        memory of outputs, is not taken: a part's outputs are its own.)"""
        bound = _Bound()
        values: dict[Node, object] = {}
        args = tuple(args)
        for lv in self.levels:
            for node in self._sizes.get(lv, ()):
                raise UnsupportedError(
                    f"{node.arg[2]}: a size that depends on the data (x[mask], np.nonzero, np.unique, ...) is read "
                    "back to the host when the kernel runs, which a captured graph cannot replay; call the kernel "
                    "outside tj.capture() (or tj.jit)"
                )
            for call, _, _ in self._hosts.get(lv, ()):
                raise UnsupportedError(
                    f"{call.where}: {call.name} runs with NumPy on the host (a fallback: tracejit does not compile "
                    "it), which a captured graph cannot replay; call the kernel outside tj.capture() (or tj.jit)"
                )
            for body in self._loops.get(lv, ()):
                self._bind_loop(body, args, values, bound)
            part = self._parts.get(lv)
            if part is not None:
                extra = tuple(self._value(n, args, values, binding=True) for n in part.reads)
                for n, v in zip(part.computes, bound.add(part.executable.bind(args + extra))):
                    values[n] = v
        # (a Python number returned stays the device's memory: a replay computes it anew)
        outputs = [self._output(o, values[o] if o in values else self._value(o, args, values)) for o in self.outputs]
        return outputs, bound.launches, bound.allocated

    def _output(self, node: Node, value):
        """A result as executables return it: the device's memory (a Python number carried, or an argument
        returned as it is, copied there)."""
        if isinstance(value, Array):
            return value._data
        if isinstance(value, (int, float, bool, np.generic)) or self._wrap and isinstance(value, np.ndarray):
            host = np.asarray(value, node.dtype)
            return self.device.from_numpy(host) if self._wrap else host
        return value

    def _arg(self, value):
        """A value one executable returned, as another takes it."""
        if not self._wrap or isinstance(value, (Array, np.ndarray, np.generic, int, float, bool)):
            return value  # (an argument as the call passed it)
        return Array(value, self.device)

    def _value(self, node: Node, args, values, binding: bool = False):
        """A node's value as an executable takes it: computed (a device's memory wrapped as its array), or an
        argument as the call passed it. A Python number computed is read back to the host, as the executables take
        Python numbers; while binding it stays the memory it is computed in (bind() passes 0-d memory as such)."""
        if node in values:
            value = values[node]
            if node.weak and node.shape == () and not (binding and type(value) not in (int, float, bool)):
                return self._read(value)
            return self._arg(value)
        return args[self._argument[node]]

    def _memory(self, value):
        """An array's memory as executables take it in `into` (the device's own for a tj.Array)."""
        return value._data if isinstance(value, Array) else value

    def _read(self, value) -> int | bool | float:
        """A 0-d value read back to the host (waits for the kernels that compute it)."""
        if type(value) in (int, float, bool):
            return value
        if isinstance(value, Array):
            return value.numpy().reshape(()).item()
        if self._wrap and not isinstance(value, (np.ndarray, np.generic, int, float, bool)):
            return Array(value, self.device).numpy().reshape(()).item()
        return np.asarray(value).reshape(()).item()

    def _run_host(self, call: HostCall, srcs, results: dict[int, Node], args, values) -> None:
        """A call run with NumPy on the host: its values read there (a GPU-API device's copied, after the kernels
        computing them), its results put where the next part reads them."""
        t0 = time.perf_counter()
        given = []
        for s in srcs:
            v = self._value(s, args, values)
            given.append(v.numpy() if isinstance(v, Array) else v)
        outs = call(given)
        for k, node in results.items():
            a = outs[k]
            values[node] = self.device.from_numpy(np.ascontiguousarray(a)) if self._wrap else a
        seconds = time.perf_counter() - t0
        log(1, f"{call.where}: {call.name} ran with NumPy on the host in {seconds * 1e3:.2f} ms")
        host_calls.warn_once(call, seconds, self.device.name, self._wrap)

    def _run_loop(self, body: _Body, args, values, owned: set[Node], parts: set[Node]) -> None:
        loop = body.loop
        made: set[Node] = set()  # constants a loop over elements starts from, in memory of their own
        srcs = []
        value = self._value
        for s, position, constant in zip(body.srcs, body.arguments, body.constants):
            if position is not None:  # (a kernel argument: never computed)
                srcs.append(args[position])
            elif constant and s not in values:
                srcs.append(_constant(s))
                made.add(s)
            else:
                srcs.append(value(s, args, values))
        heads, carried = srcs[: body.heads], srcs[body.heads : body.ends]
        free = tuple(srcs[body.ends :])
        run = body.executable
        if body.element:  # the whole loop nest in one call
            donated = [
                d and (s in owned or s in made or s in parts and _own_memory(s, args, values))
                for s, d in zip(body.firsts, body.donatable)
            ]
            finals = run([self._read(h) for h in heads], carried, free, donated)
            for k, node in body.result_items:
                values[node] = finals[k]
                owned.add(node)
            return
        if getattr(run, "in_place", None):
            carried = run.own(carried)  # (the loop's own memory to store into)
        n = loop.carried
        scalar, keys = body.scalar, body.keys

        def taken(out):
            return [self._read(v) if w else self._arg(v) for v, w in zip(out, scalar)]

        spare: list = []

        def step(args):
            if not spare:
                return run(args)
            into = {k: self._memory(b) for k, b, w in zip(keys, spare, scalar) if not w}
            return run(args, into)

        if loop.kind == "for":
            read = iter(heads)
            start, stop, step_ = (int(self._read(next(read))) if b is None else b for b in loop.bounds)
            if step_ == 0:
                raise ValueError("range() arg 3 must not be zero")
            until = loop.until
            steps = range(start, stop, step_)
            finals = None
            if until is None and not self._wrap and bound_loops.bindable(run, n):  # (its steps run bound)
                finals = bound_loops.run(run, steps, carried, free, self.device)
            for count, i in enumerate(steps if finals is None else ()):
                if until is not None and self._read(carried[until]):  # (a break in the step before)
                    break
                last = carried
                carried = taken(step((i, *carried, *free)))
                spare = last if count and keys else []  # (the first step's were the loop's first values)
            carried = carried if finals is None else finals
        else:
            test = self._read(heads[0])
            count = 0
            while test:
                last = carried
                out = step((*carried, *free))
                carried = taken(out[:n])
                test = self._read(out[n])
                spare = last if count and keys else []
                count += 1
        for k, node in body.results.items():
            v = carried[k]
            values[node] = v._data if self._wrap and isinstance(v, Array) else v  # (a Python number stays one)

    def _bind_loop(self, body: _Body, args, values, bound: _Bound) -> None:
        """bind() of one loop: its steps' launches one after another (see bind)."""
        loop = body.loop

        def refuse(why: str):
            raise UnsupportedError(
                f"the loop at {loop.where} cannot be captured into a graph: {why}; call the kernel outside "
                "tj.capture() (or tj.jit)"
            )

        srcs = [
            _constant(s) if s.op is Op.CONST and s not in values else self._value(s, args, values, binding=True)
            for s in body.srcs
        ]
        heads, carried = srcs[: loop.heads], srcs[loop.heads : loop.heads + loop.carried]
        free = tuple(srcs[loop.heads + loop.carried :])
        run = body.executable
        if getattr(run, "element", False):  # (its bounds and tests read where it runs, when it runs)
            if not hasattr(run, "bind"):
                refuse("it is a loop over elements, which this device runs on the host (numba runs it as a launch)")
            finals = bound.add(run.bind(heads, carried, free))
        else:
            if loop.kind == "while":
                refuse("a `while` reads its test back to the host after every step")
            if loop.until is not None:
                refuse("a `break` is read back to the host after every step")
            if any(type(h) not in (int, float, bool) for h in heads):
                refuse("its bounds are read back to the host from arrays")
            n = loop.carried
            read = iter(heads)
            start, stop, step_ = (int(next(read)) if b is None else b for b in loop.bounds)
            if step_ == 0:
                raise ValueError("range() arg 3 must not be zero")
            program = getattr(run, "program", None)
            keys = list(program.outputs[:n]) if program is not None else []
            if len(set(keys)) < len(keys) or any(k.argument for k in keys):
                keys = []
            names = getattr(run, "allocations", None)
            own = set(program.outputs) if program is not None else set()
            temporaries: dict = {}  # the step before's temporaries, by buffer key
            spare: list = []
            for count, i in enumerate(range(start, stop, step_)):
                into = dict(temporaries)
                into.update((k, self._memory(b)) for k, b in zip(keys, spare))
                last = carried
                try:
                    outs = bound.add(run.bind((i, *carried, *free), into))
                except UnsupportedError as e:
                    if str(e).startswith("the loop at"):
                        raise
                    refuse(
                        "its body can raise an error NumPy would raise (an index out of bounds, an integer to a "
                        f"negative power), which a captured graph cannot report on {self.device.name} (numba can)"
                    )
                if names is not None:
                    temporaries = {k: m for k, m in zip(names, bound.last) if k not in own}
                carried = [self._arg(v) for v in outs[:n]]
                spare = last if count and keys else []
            finals = carried
        for k, node in body.results.items():
            v = finals[k]
            values[node] = v._data if self._wrap and isinstance(v, Array) else v


class _Bound:
    """What bind() gathers: the launches in order, every array they allocated, and those of the last bind added."""

    def __init__(self) -> None:
        self.launches: list = []
        self.allocated: list = []
        self.last: list = []

    def add(self, bound: tuple[list, list, list]) -> list:
        """One executable's bind(): its launches and arrays gathered; its outputs returned."""
        outputs, launches, allocated = bound
        self.launches.extend(launches)
        self.allocated.extend(allocated)
        self.last = allocated
        return outputs


def _index_span(loop: Loop) -> tuple[int, int] | None:
    """The least and greatest value of a `for` loop's index, where its bounds are known while tracing."""
    if loop.kind != "for" or any(b is None for b in loop.bounds):
        return None
    return index_span(*loop.bounds)


def _element_loop(loop: Loop, dev):
    """The loop as one function with its loops in it, where it is a loop over elements and the device runs such
    loops (ir/element_loops.py), else None (its body's kernels run once per step)."""
    try:
        plan = element_loops.plan(loop)
    except element_loops.NotElementLoop as e:
        log(1, f"the loop at {loop.where} runs its body's kernels once per step: not a loop over elements ({e})")
        return None
    element = dev.element_loop(plan)
    if element is None and dev.runs:  # (a GPU-API device's: on the host, its arrays copied there and back once)
        element = host_loops.on_host(plan, dev)
    if element is not None:
        log(1, f"the loop at {loop.where} is a loop over elements: one function runs the whole loop nest")
    return element


DONATE_MIN_BYTES = 1 << 16  # a kernel's result smaller than this is copied for a loop over elements (_own_memory)


def _own_memory(node: Node, args, values) -> bool:
    """Whether a loop over elements may update `value` in place (its first value, which nothing else reads): memory
    of its own, as a loop over elements or a part's kernels made it (np.empty's, or a block of the output pool),
    never an argument's or memory another value also shows (a part's result may be a view of its argument, or of
    another result)."""
    value = values[node]
    if not (isinstance(value, np.ndarray) and value.flags.c_contiguous and value.flags.writeable):
        return False
    if value.nbytes < DONATE_MIN_BYTES:  # (copied: cheaper than the checks below, on the path of every call)
        return False
    others = [a for a in args if isinstance(a, np.ndarray)]
    others += [v for n, v in values.items() if isinstance(v, np.ndarray) and n is not node]
    return not any(np.may_share_memory(value, other) for other in others)


def _constant(node: Node):
    """A constant's value as a loop over elements takes it: a Python number, or a NumPy array of its own."""
    if node.shape == ():
        return node.arg if node.weak else np.asarray(node.arg, node.dtype)
    if node.arg == 0:
        return np.zeros(node.shape, node.dtype)  # (pages the loop touches first, not filled twice)
    return np.full(node.shape, node.arg, node.dtype)


def _frontier(computes: list[Node], read) -> list[Node]:
    """The nodes where a part starts: those `read` says are computed before it, reached from `computes` through
    nodes it computes itself, in a fixed order."""
    own = set(computes)
    found: dict[Node, None] = {}
    seen: set[Node] = set()
    stack = list(reversed(computes))
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n not in own and read(n):
            found.setdefault(n)
            continue
        stack.extend(reversed(n.srcs))
    return list(found)


def _library_calls(executable) -> int:
    if isinstance(executable, Staged):
        return executable.library_calls
    program = getattr(executable, "program", None)  # (a target that only renders has none: it runs nothing)
    return len(program.library_calls) if program is not None else 0
