"""Numba renderer for loops over elements (ir/element_loops.py): one Python function with the loop nest in it, its
statements as the kernels' renderer writes the same ops (codegen/cpu/numba.py: NumPy's arithmetic per dtype,
int64 that wraps, NaN-propagating max and min).

The function takes the loop's bounds read from arrays (a `while`: its first test), then each carried value (an
array as its flat C-order memory, updated in place; a 0-d value in a one-element array, its value after the loop
written back there), then each value the body only reads (arrays flat, 0-d values as they are), then the error
record (codegen/cpu/numba.py). An index outside its axis records the fault and returns: the runtime raises
NumPy's IndexError. Statements over many elements address an array through its n-d view (`c0_nd[e1, i1, e2]`,
the flat memory reshaped): LLVM then loads and stores a row's contiguous elements as vectors, where the same
loops over flat offsets become gathers and scatters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tracejit.codegen.cpu.numba import (
    _REASSOC_STEP,
    _WRAPPING,
    _alu,
    _bitcast,
    _cast,
    _combine,
    _ctype,
    _in_order_below,
    _literal,
)
from tracejit.ir.dtypes import identity
from tracejit.ir.element_loops import Plan, element_at, is_flat_positions
from tracejit.ir.faulting import fault_of
from tracejit.ir.graph import ELEMENTWISE, Node, Op
from tracejit.ir.kernel_ir import NEGATIVE_POWER, Fault, KOp

NAME = "tj_element_loop"
# integer ops whose result's bounds follow from their operands' (lo, hi, lo, hi): the four corners
_INTERVALS = {
    KOp.ADD: lambda a, b, c, d: (a + c, b + d),
    KOp.SUB: lambda a, b, c, d: (a - d, b - c),
    KOp.MUL: lambda a, b, c, d: (a * c, a * d, b * c, b * d),
}
_OPS_PLAIN = {KOp.ADD: "({0} + {1})", KOp.SUB: "({0} - {1})", KOp.MUL: "({0} * {1})"}


def interval(n: Node, found: list[tuple[int, int] | None]) -> tuple[int, int] | None:
    """The bounds of an integer op's value from its operands' (`found`, None where unknown): sums, differences and
    products that cannot overflow, max, min, selects and casts between integer types that keep the value."""
    if n.dtype.kind not in "iu" or n.op not in _BOUNDED:
        return None
    if n.op is Op.WHERE:
        found = found[1:]
    if any(f is None for f in found):
        return None
    known = [f for f in found if f is not None]
    if n.op is Op.CAST:
        if n.srcs[0].dtype.kind not in "iu":
            return None
        span = known[0]
    elif n.op is Op.WHERE:
        span = (min(f[0] for f in known), max(f[1] for f in known))
    elif n.op in (Op.MAX, Op.MIN):
        pick = max if n.op is Op.MAX else min
        span = (pick(f[0] for f in known), pick(f[1] for f in known))
    else:
        (a, b), (c, d) = known
        corners = _INTERVALS[KOp(n.op.value)](a, b, c, d)
        span = (min(corners), max(corners))
    info = np.iinfo(n.dtype)
    return span if max(info.min, -(2**62)) < span[0] and span[1] < min(info.max, 2**62) else None


_BOUNDED = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.MAX, Op.MIN, Op.WHERE, Op.CAST})
# the names a line of a loop binds: `for i in`, `a = `, `a, b = `, `a += `
_BINDS = re.compile(r"^\s*(?:for\s+)?([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*(?:[-+*/%&|^]?=(?!=)|\bin\b)")
_HELPERS = (
    *("int_power", "int_fmod", "ldexp_f64", "exp_f32", "tanh_f32", "log_f32", "erf_f32", "exp_f64", "tanh_f64"),
    "log_f64",
    *("ldexp_f32", "wrap_add", "wrap_sub", "wrap_mul"),
)
ZERO_STEP = Fault("ValueError", "range() arg 3 must not be zero")


_VIEW = "_nd"  # an array's n-d view is named after its flat memory: `c0` -> `c0_nd`


def viewed(name: str) -> str:
    """The flat memory an array's name (its n-d view's, or its own) addresses."""
    return name.removesuffix(_VIEW)


def flat(shape: tuple[int, ...], places: list[str] | tuple[str, ...]) -> str:
    """The flat (C order) offset of the element at `places` (rendered, inside their axes)."""
    terms, step = [], 1
    for size, place in zip(reversed(shape), reversed(places)):
        if place != "0":
            terms.append(place if step == 1 else f"{place} * {step}")
        step *= size
    return " + ".join(reversed(terms)) or "0"


@dataclass(frozen=True)
class Rendered:
    source: str  # the module
    faults: tuple[Fault, ...]  # what the function may record


def render(plan: Plan, parts: bool = False) -> Rendered:
    """The plan's function. `parts`: its outer loop runs the steps [tj_start, tj_stop) of its range (the first
    two parameters; its steps independent, ir/loop_dependence.py), so threads may each run a part of it."""
    return _Writer(plan, parts).run()


class _Writer:
    def __init__(self, plan: Plan, parts: bool = False):
        self.top = plan
        self.parts = parts
        self.lines: list[str] = []
        self.depth = 1
        self.count = 0
        self.faults: dict[int, Fault] = {}
        self.helpers: set[str] = set()
        self.positions: dict[Node, str] = {}  # a store's position: its offset, as rendered
        self.known: dict[Node, tuple[int, int]] = {}  # an integer value's bounds, where they are known
        self.checked: list[dict[tuple, str]] = [{}]  # per loop: indices checked against an axis (and a fault)
        self.scopes: list[dict[Node, str]] = []  # the names of the loops around the one being written
        self.around: list[Plan] = []  # and their plans
        self.aliases: dict[Node, Node] = {}  # an inner loop's input: the value of the loop around it it is
        self.views: dict[str, tuple[int, ...]] = {}  # a parameter's n-d view, made at the top: its shape
        self.local: set[str] = set()  # memory made inside the function (its view made where it is)

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def out(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def view(self, memory: str, shape: tuple[int, ...]) -> str:
        """The name of flat memory's n-d view of `shape` (its own name where it has one axis or none)."""
        if len(shape) < 2:
            return memory
        assert self.views.setdefault(memory, shape) == shape, (memory, shape)
        return memory + _VIEW

    def allocate(self, memory: str, shape: tuple[int, ...], dtype: np.dtype) -> None:
        """Memory of its own for an array made inside the function, flat, and its n-d view."""
        self.local.add(memory)
        self.out(f"{memory} = np.empty({int(np.prod(shape, dtype=np.int64))}, np.{dtype.name})")
        if len(shape) >= 2:
            self.out(f"{self.view(memory, shape)} = {memory}.reshape({shape})")

    def fault(self, fault: Fault, value: str) -> None:
        self.faults[fault.code] = fault
        self.out(f"tj_error[0] = {fault.code}")
        self.out(f"tj_error[1] = {value}")
        self.out("return")

    def run(self) -> Rendered:
        plan = self.top
        loop = plan.loop
        first = 1 if loop.kind == "for" else 0
        carried = loop.inputs[first : first + loop.carried]
        free = loop.inputs[first + loop.carried :]
        heads = [f"h{j}" for j in range(loop.heads)]
        params = heads + [f"c{k}" for k in range(len(carried))] + [f"f{k}" for k in range(len(free))]
        inits = [f"c{k}" if x.shape else f"c{k}[0]" for k, x in enumerate(carried)]
        given = ["tj_start", "tj_stop", "1"] if self.parts else None
        results = self.loop(plan, heads, inits, [f"f{k}" for k in range(len(free))], bounds=given)
        for k, x in enumerate(carried):
            if x.shape == ():
                self.out(f"c{k}[0] = {results[k]}")
        params = (["tj_start", "tj_stop"] if self.parts else []) + params
        header = f"def {NAME}({', '.join(params + ['tj_error'])}):"
        views = [f"    {m}{_VIEW} = {m}.reshape({shape})" for m, shape in self.views.items() if m not in self.local]
        parts = ['"""Generated by tracejit from a loop over elements; do not edit."""', "import math", ""]
        parts += ["import numba", "import numpy as np", ""]
        if self.helpers:
            parts += [f"from tracejit.codegen.cpu.numba_math import {', '.join(sorted(self.helpers))}", ""]
        source = "\n".join([*parts, "", header, *views, *self.lines, ""])
        return Rendered(source, tuple(self.faults.values()))

    # -- a loop --

    def loop(
        self,
        plan: Plan,
        heads: list[str],
        inits: list[str],
        free: list[str],
        spans: list | None = None,
        bounds: list[str] | None = None,
    ) -> list[str]:
        """Write the loop; the names of its carried values after it (an array: its memory's). `spans`: per head,
        its value's bounds where they are known (an inner loop's bounds computed from the outer index); `bounds`:
        the range the loop runs, where it is not its own (render's `parts`)."""
        loop = plan.loop
        first = 1 if loop.kind == "for" else 0
        n = loop.carried
        carried = loop.inputs[first : first + n]
        names: dict[Node, str] = {}
        for x, init in zip(carried, inits):
            if x.shape:
                names[x] = init  # (updated in place)
            else:
                names[x] = self.fresh("s")
                self.out(f"{names[x]} = {init}")
        for x, name in zip(loop.inputs[first + n :], free):
            names[x] = name
        scalars = [(x, o) for x, o in zip(carried, loop.outputs[:n]) if x.shape == () and o is not x]
        if loop.kind == "for":
            index = names[loop.inputs[0]] = self.fresh("i")
            read = iter(heads)
            own = [next(read) if b is None else str(int(b)) for b in loop.bounds]
            bounds = bounds or own
            if loop.bounds[2] is None and len(heads) != 0:
                self.out(f"if {bounds[2]} == 0:")
                self.depth += 1
                self.fault(ZERO_STEP, "0")
                self.depth -= 1
            var = loop.inputs[0]
            steps = range(*loop.bounds) if None not in loop.bounds and loop.bounds[2] != 0 else None
            if steps:
                self.known[var] = (min(steps[0], steps[-1]), max(steps[0], steps[-1]))
            elif loop.bounds[2] is not None and loop.bounds[2] != 0 and spans is not None:
                spread = iter(spans)
                (a, b), (c, d) = ((int(x), int(x)) if x is not None else next(spread) for x in loop.bounds[:2])
                # (the index stays between the least start and the greatest stop, where it takes a value)
                if a is not None and c is not None:
                    self.known[var] = (a, d - 1) if loop.bounds[2] > 0 else (c + 1, b)

            def write() -> None:
                head = len(self.lines)
                self.out(f"for {index} in range({', '.join(bounds)}):")
                self.depth += 1
                if loop.until is not None:
                    self.out(f"if {names[carried[loop.until]]}:")
                    self.out("    break")
                self.scoped(plan, names)
                if scalars:
                    values = ", ".join(self.name(o, names) for _, o in scalars)
                    self.out(f"{', '.join(names[x] for x, _ in scalars)} = {values}")
                self.depth -= 1
                self.hoist(plan, head, bounds[0], bounds[1], names, cut=loop.bounds[2] == 1 and loop.until is None)

            size = _versioned(plan, self.known.get(var))
            if size is None:
                write()
            else:  # (the loop twice: with no index checks where its bounds are inside the axes it indexes)
                self.out(f"if {bounds[0]} >= 0 and {bounds[1]} <= {size}:")
                self.depth += 1
                known = dict(self.known)
                self.known[var] = (0, size - 1)
                write()
                self.known.clear()
                self.known.update(known)  # (what the first version learnt of values computed from the index)
                self.depth -= 1
                self.out("else:")
                self.depth += 1
                write()
                self.depth -= 1
        else:
            test = self.fresh("t")
            self.out(f"{test} = {heads[0]}")
            self.out(f"while {test}:")
            self.depth += 1
            self.scoped(plan, names)
            targets = [names[x] for x, _ in scalars] + [test]
            values = [self.name(o, names) for _, o in scalars] + [self.name(loop.outputs[n], names)]
            self.out(f"{', '.join(targets)} = {', '.join(values)}")
            self.depth -= 1
        # (a 0-d value: its variable, which holds its first value where the loop ran no step)
        return [names[x] if x.shape == () else names[plan.memory[o]] for x, o in zip(carried, loop.outputs[:n])]

    def name(self, n: Node, names: dict[Node, str]) -> str:
        if n in names:
            return names[n]
        for scope in reversed(self.scopes):  # (a value of a loop around, in an inner loop's alias)
            if n in scope:
                return scope[n]
        assert n.op is Op.CONST, n  # (every other value is named by its statement)
        return _literal(n.arg, n.dtype)

    def scoped(self, plan: Plan, names: dict[Node, str]) -> None:
        self.aliases.update(plan.aliases)
        self.body(plan, names)

    def body(self, plan: Plan, names: dict[Node, str]) -> None:
        self.checked.append({})
        statements = plan.statements
        done: set[int] = set()
        for k, st in enumerate(statements):
            n = st.node
            if k in done:
                continue
            if st.kind == "value":
                self.value(plan, n, names)
            elif st.kind == "slab":
                slabs, between = _fusable(plan, statements, k)
                if len(slabs) == 1 or not self.before(plan, names, between):
                    _Slab(self, plan, names).store(n)
                    continue
                done.update(statements.index(s) for s in (*slabs, *between))
                first = 0
                while first < len(slabs):  # (the longest run from the first that one loop nest can store)
                    last = next(
                        (m for m in range(len(slabs), first + 1, -1) if self.fuse(plan, names, slabs[first:m])),
                        first + 1,
                    )
                    if last == first + 1:
                        _Slab(self, plan, names).store(slabs[first].node)
                    first = last
            elif st.kind == "temporary":
                _Slab(self, plan, names).temporary(n)
            elif st.kind == "store":
                x, at, value, guard = plan.stores[n]
                if guard is not None:
                    self.out(f"if {self.name(guard, names)}:")
                    self.depth += 1
                where = self.positions.get(at) or self.name(at, names)
                self.out(f"{names[plan.memory[x]]}[{where}] = {self.name(value, names)}")
                if guard is not None:
                    self.depth -= 1
            else:
                inner = st.inner
                assert inner is not None
                loop = inner.loop
                srcs = [
                    self.name(s, names) if s.shape == () else names[plan.memory[s]] if s in plan.memory else "None"
                    for s in n.srcs
                ]  # (None: an alias, computed where the inner loop reads it)
                h, c = loop.heads, loop.carried
                first = 1 if loop.kind == "for" else 0
                for x, src in zip(loop.inputs[first + c :], n.srcs[h + c :]):  # (an outer index's bounds hold inside)
                    if src in self.known:
                        self.known[x] = self.known[src]
                    elif src.op is Op.CONST and src.dtype.kind in "iu":
                        self.known[x] = (int(src.arg), int(src.arg))
                    if src in self.aliases:  # (a value computed where it is read, passed on: computed there too)
                        self.aliases.setdefault(x, self.aliases[src])
                self.scopes.append(names)
                self.around.append(plan)
                start = len(self.lines)
                spans = [
                    self.known.get(s) or ((int(s.arg), int(s.arg)) if s.op is Op.CONST else (None, None))
                    for s in n.srcs[:h]
                ]
                results = self.loop(inner, srcs[:h], srcs[h : h + c], srcs[h + c :], spans)
                self.scopes.pop()
                self.around.pop()
                self.promote(start, [m for m, x in zip(srcs[h : h + c], n.srcs[h : h + c]) if x.shape])
                for k, node in st.values.items():
                    names[node] = results[k]
        self.checked.pop()

    def before(self, plan: Plan, names: dict[Node, str], values: list) -> bool:
        """Write 0-d values that come between slabs before them all, where none can fail (an error is the first
        one in order); else write nothing, False."""
        start, known, checked = len(self.lines), dict(self.known), dict(self.checked[-1])
        named, positions = dict(names), dict(self.positions)
        for v in values:
            self.value(plan, v.node, names)
        if not any("tj_error" in line for line in self.lines[start:]):
            return True
        del self.lines[start:]
        self.known.clear()
        self.known.update(known)
        self.checked[-1] = checked
        names.clear()
        names.update(named)
        self.positions.clear()
        self.positions.update(positions)
        return False

    def fuse(self, plan: Plan, names: dict[Node, str], slabs: list) -> bool:
        return len(slabs) > 1 and _Slab(self, plan, names).fused([s.node for s in slabs])

    def promote(self, start: int, memories: list[str]) -> None:
        """In the inner loop written from line `start` (each of its versions): an array it carries whose every read
        and store in the loop is of one element at a place the loop does not change (`y[i] += data[k] *
        x[indices[k]]` over k) kept in a variable through the loop, read before it and stored after (LLVM cannot:
        the arrays might overlap)."""
        lines = self.lines
        heads = [k for k in range(start, len(lines)) if lines[k].lstrip().startswith(("for ", "while "))]
        if not heads:
            return
        indent = len(lines[heads[0]]) - len(lines[heads[0]].lstrip())
        for head in reversed([k for k in heads if len(lines[k]) - len(lines[k].lstrip()) == indent]):
            self._promote(head, indent, memories)

    def _promote(self, head: int, indent: int, memories: list[str]) -> None:
        lines = self.lines
        end = head + 1
        while end < len(lines) and len(lines[end]) - len(lines[end].lstrip()) > indent:
            end += 1
        body = lines[head:end]
        bound = {name.strip() for line in body for m in _BINDS.finditer(line) for name in m.group(1).split(",")}
        for memory in dict.fromkeys(memories):
            places = {m.group(1) for line in body for m in re.finditer(rf"\b{memory}\[([^\[\]]*)\]", line)}
            if len(places) != 1 or any(f"{memory}{_VIEW}[" in line for line in body):
                continue  # (read or stored at other places, or through its n-d view)
            (place,) = places
            if set(re.findall(r"[A-Za-z_]\w*", place)) & bound:
                continue
            element = f"{memory}[{place}]"
            kept = self.fresh("p")
            body = [line.replace(element, kept) for line in body]
            pad = " " * indent
            body = [f"{pad}{kept} = {element}", *body, f"{pad}{element} = {kept}"]
        lines[head:end] = body

    def hoist(self, plan: Plan, head: int, lo: str, hi: str, names: dict[Node, str], cut: bool) -> None:
        """In the loop written from line `head` (`for i in range(lo, hi, ...)`), the reads of an element at a place
        the loop does not change (LLVM cannot move them: to it, any store may change any array):
        - of an array the loop does not store into: read once, before the loop;
        - where `cut` (a step of 1, no break), of an array the loop stores into once per step, at a place that
          moves with i (Floyd-Warshall's `path[i, k]` beside `path[i, j] = ...` in the loop over j): the loop is
          cut after the one step that may store at the place read (j == k) and the element read again there,
          once per part. Each part then reads one value, and LLVM can vectorise it."""
        lines = self.lines
        indent = len(lines[head]) - len(lines[head].lstrip())
        end = head + 1
        while end < len(lines) and len(lines[end]) - len(lines[end].lstrip()) > indent:
            end += 1
        body = lines[head + 1 : end]
        var = plan.loop.inputs[0]
        bound = {names[var]} | {
            name.strip() for line in body for m in _BINDS.finditer(line) for name in m.group(1).split(",")
        }
        writes: dict[str, list[int]] = {}  # the lines that store into each flat memory (through its view too)
        for k, line in enumerate(body):
            m = re.match(r"\s*(\w+)\[", line)
            if m:
                writes.setdefault(viewed(m.group(1)), []).append(k)
        reads: dict[tuple[str, str], list[int]] = {}  # (memory, place) -> the lines that read it
        top = " " * (indent + 4)
        for k, line in enumerate(body):
            m = re.fullmatch(rf"{top}\w+ = (\w+)\[([^\[\]]*)\]", line)
            if m and not _names(m.group(2)) & bound:
                reads.setdefault((m.group(1), m.group(2)), []).append(k)
        pad = " " * indent
        before: list[str] = []
        for (memory, place), at_lines in reads.items():
            if viewed(memory) not in writes and memory not in bound:
                kept = self.fresh("p")
                before.append(f"{pad}{kept} = {memory}[{place}]")
                for k in at_lines:
                    body[k] = f"{body[k].split(' = ', 1)[0]} = {kept}"
        split = self.cut(plan, body, bound, reads, writes, names, lo, hi, pad) if cut else None
        if split is None:
            lines[head:end] = [*before, lines[head], *body]
        else:
            lines[head:end] = [*before, *split]

    def cut(
        self,
        plan: Plan,
        body: list[str],
        bound: set[str],
        reads: dict[tuple[str, str], list[int]],
        writes: dict[str, list[int]],
        names: dict[Node, str],
        lo: str,
        hi: str,
        pad: str,
    ) -> list[str] | None:
        """The loop cut in two after the step that may store at a place one of its reads reads (hoist's second
        case), else None."""
        var = plan.loop.inputs[0]
        for st in plan.statements:
            if st.kind != "store":
                continue
            x, at, _, _ = plan.stores[st.node]
            moving = _moving_axis(at, var)
            memory = names[plan.memory[x]]
            if moving is None or len(writes.get(memory, ())) != 1:
                continue
            axis, shift = moving
            shape = at.srcs[0].shape
            places = [self.name(i, names) for i in at.srcs[1:]]
            if self.positions.get(at) != flat(shape, places):
                continue  # (an index counted from the end, or checked in the loop)
            places[axis] = "0"
            start = flat(shape, places)  # the store's place where i + shift is 0
            if _names(start) & bound:
                continue
            (write,) = writes[memory]
            found = [(place, ks) for (m, place), ks in reads.items() if m == memory and max(ks) < write]
            if not found:
                continue
            place, at_lines = found[0]
            stride = int(np.prod(shape[axis + 1 :], dtype=np.int64))
            d, cut, part, kept = self.fresh("d"), self.fresh("cut"), self.fresh("part"), self.fresh("p")
            step = d if stride == 1 else f"{d} // {stride}"
            after = f"{step} + {1 - shift}" if shift != 1 else step  # (the step after the one that stores there)
            out = [f"{pad}{d} = {place}" + (f" - ({start})" if start != "0" else "")]
            if stride == 1:
                out += [f"{pad}{line}" for line in _clamped(cut, after, lo, hi)]
            else:  # (no step stores there unless the distance is a whole number of strides)
                out += [f"{pad}{cut} = {hi}", f"{pad}if {d} % {stride} == 0:"]
                out += [f"{pad}    {line}" for line in _clamped(cut, after, lo, hi)]
            out += [f"{pad}for {part} in range(2):", f"{pad}    {kept} = {memory}[{place}]"]
            bounds = f"{lo} if {part} == 0 else {cut}, {cut} if {part} == 0 else {hi}, 1"
            out.append(f"{pad}    for {names[var]} in range({bounds}):")
            for k, line in enumerate(body):
                if k in at_lines:
                    line = f"{line.split(' = ', 1)[0]} = {kept}"
                out.append("    " + line)
            return out
        return None

    def value(self, plan: Plan, n: Node, names: dict[Node, str]) -> None:
        if n.op is Op.CONST:
            names[n] = _literal(n.arg, n.dtype)
            return
        v = names[n] = self.fresh("v")
        dt = n.dtype
        if n in plan.reads and plan.reads[n][0] in self.aliases or n.op is Op.GATHER and self.through_view(plan, n):
            names[n] = _Slab(self, plan, names).compute_at(n, ())  # (an element of an alias or a view: computed there)
            return
        if n in plan.reads:  # x[0]: an element at a fixed offset
            source, fixed = plan.reads[n]
            self.out(f"{v} = {names[plan.memory[source]]}[{fixed}]")
            return
        if n.op in (Op.RESHAPE, Op.EXPAND, Op.SLICE, Op.PERMUTE):
            source = element_at(n)[0]
            if source.shape == () or source.op is Op.REDUCE and source.size == 1:  # (a 0-d value: the value)
                names[n] = self.name(source, names)
            else:  # an element of a computed array (ir/element_loops.py's value()): computed at its place
                names[n] = _Slab(self, plan, names).compute_at(n, ())
            return
        if n.op is Op.GATHER:
            source = n.srcs[0]
            fault = fault_of(n)
            offset = self.offset(source.shape, n.srcs[1:], [self.name(s, names) for s in n.srcs[1:]], fault)
            if fault is not None:  # (faulting.check's: the check made, the table's one value)
                names[n] = _literal(fault.code, dt)
                self.known[n] = (fault.code, fault.code)
                return
            if is_flat_positions(source):  # a store's position (an int64 offset where a store uses it)
                self.positions[n] = offset
                self.out(f"{v} = {offset}" if dt == np.int64 else f"{v} = {_ctype(dt)}({offset})")
            else:
                self.out(f"{v} = {names[plan.memory[source]]}[{offset}]")
            return
        if n.op is Op.REDUCE:
            _Slab(self, plan, names).reduction(n, v)
            return
        self.out(f"{v} = {self.compute(n, [self.name(s, names) for s in n.srcs])}")

    def through_view(self, plan: Plan, n: Node) -> bool:
        """Whether GATHER n reads an alias, or an array through movement ops (ir/element_loops.py's value())."""
        source = n.srcs[0]
        if source in self.aliases:
            return True
        return source not in plan.memory and fault_of(n) is None and not is_flat_positions(source)

    def compute(self, n: Node, a: list[str], bounded: bool = False) -> str:
        """An elementwise op of operands `a` (rendered), as NumPy computes it in n's dtype (bounded: an integer
        value whose bounds are known, which cannot overflow)."""
        dt = n.dtype
        if n.shape == ():
            span = interval(n, [self.span_of(s) for s in n.srcs])
            if span is not None:
                self.known[n] = span
        if n.op is Op.CAST:
            return _cast(a[0], n.srcs[0].dtype, dt)
        if n.op is Op.BITCAST:
            self.helpers.add("bits_f32" if dt == np.float32 else "f32_bits")
            return _bitcast(a[0], dt)
        op = KOp(n.op.value)
        if op == KOp.POW and dt.kind == "i":
            self.helpers.update(("int_power", "nonnegative_exponent"))
            self.faults[NEGATIVE_POWER.code] = NEGATIVE_POWER
            a = [a[0], f"nonnegative_exponent({a[1]}, {NEGATIVE_POWER.code}, tj_error)"]
        if dt == np.int64 and (bounded or n in self.known) and op in _INTERVALS:
            expr = _OPS_PLAIN[op].format(*a)  # (no overflow: the operands' bounds say so)
        elif dt == np.int64 and op.value in _WRAPPING:
            self.helpers.update(("wrap_add", "wrap_sub", "wrap_mul"))
            expr = _WRAPPING[op.value].format(*a)
        else:
            expr = _alu(op, a, dt, n.srcs[0].dtype)
        self.note_helpers(expr)
        return expr

    def note_helpers(self, expr: str) -> None:
        """Import the helpers (codegen/cpu/numba_math.py) an expression calls."""
        for helper in _HELPERS:
            if f"{helper}(" in expr:
                self.helpers.add(helper)

    def span_of(self, n: Node) -> tuple[int, int] | None:
        """The bounds of a 0-d value, where they are known."""
        if n.op is Op.CONST and n.dtype.kind in "iu":
            return int(n.arg), int(n.arg)
        return self.known.get(n)

    def offset(
        self, shape: tuple[int, ...], indices: tuple[Node, ...], names: list[str], fault: Fault | None = None
    ) -> str:
        """The flat offset of an element, each index checked against its axis (a negative one counts from the
        end; one outside records IndexError, or `fault`, and returns)."""
        spans = [
            (int(i.arg), int(i.arg)) if i.op is Op.CONST else self.known.get(i, (-1, size))
            for i, size in zip(indices, shape)
        ]
        return flat(shape, self.checked_indices(shape, names, spans, fault))

    def checked_indices(
        self, shape: tuple[int, ...], names: list[str], spans: list[tuple[int, int]], error: Fault | None = None
    ) -> list[str]:
        """Each index as a place inside its axis: checked (once per loop), a negative one counted from the end."""
        found = []
        for axis, (size, name, (lo, hi)) in enumerate(zip(shape, names, spans)):
            key = (name, size) if error is None else (name, size, error.code)
            checked = next((c[key] for c in reversed(self.checked) if key in c), None)
            o: str
            if 0 <= lo and hi < size:
                o = name
            elif -size <= lo and hi < 0:
                o = f"({name} + {size})"
            elif checked is not None:
                o = checked
            else:
                o = self.fresh("o")
                self.out(f"{o} = np.int64({name})")
                self.out(f"if {o} < 0 or {o} >= {size}:")  # (rare: one unsigned comparison where it is not)
                self.out(f"    {o} += {size}")
                self.out(f"    if {o} < 0 or {o} >= {size}:")
                self.depth += 2
                fault = error or Fault(
                    "IndexOutOfBoundsError", f"index {{value}} is out of bounds for axis {axis} with size {size}"
                )
                self.fault(fault, name)
                self.depth -= 2
                self.checked[-1][key] = o
            found.append(o)
        return found


_SHAPING = (Op.EXPAND, Op.RESHAPE, Op.PERMUTE)


class _Slab:
    """Statements of a loop over elements that compute many elements (ir/element_loops.py): a store of many
    (x[:, k] = v, x[a:b] -= v: where(tests, value, x)) and a full reduction (x[:i] @ y[:i]). Each is a nest of
    loops over the places of an array, narrowed to the ranges its tests allow (`iota == k` fixes a place, `a <=
    iota < b` bounds one; a sum over where(test, v, 0) needs only the places where the test holds), the values
    computed element by element as the kernels' renderer computes them."""

    def __init__(self, w: _Writer, plan: Plan, names: dict[Node, str]):
        self.w, self.plan, self.names = w, plan, names
        self.memo: dict[tuple[Node, tuple[str, ...]], str] = {}
        self.vars: set[str] = set()
        self.spans: dict[str, tuple[int, int]] = {"0": (0, 0)}  # a loop's place: its bounds
        self.intervals: dict[tuple[Node, tuple[str, ...]], tuple[int, int] | None] = {}
        self.forward: dict[str, str] = {}  # an element (as rendered) whose value a variable holds, not yet stored
        self.reads: list[tuple[str, str]] = []  # every array element read: (memory, the element as rendered)
        self.loops: list[tuple[int, str, str]] = []  # the loops `open` wrote: (the line, lo, hi)

    # -- the statements --

    def reduction(self, n: Node, v: str) -> None:
        """A full reduction. A float sum or product over one loop adds in any order where the loop runs 8
        steps or more (`x[:i] @ y[:i]`, `np.sum(x[a:b])`: NumPy's pairwise sum and BLAS's dot do not add in
        order either), so LLVM keeps it in vector lanes; fewer than 8 add in order, as NumPy's do. The kernels'
        renderer reorders the same sums (codegen/cpu/rows.py): trisolv's and lu's dots ran at one add per
        latency of the add, the serial chain of a `for` loop written out by hand."""
        red, _ = n.arg
        src = n.srcs[0]
        w = self.w
        w.out(f"{v} = {_literal(identity(red, n.dtype), n.dtype)}")
        tests = self.zero_outside(src) if red == "sum" else []
        self.loops = []
        idx, opened = self.open(src, src.shape, tests, exact=False)
        value = self.at(src, idx)
        expr = _combine(red, n.dtype, v, value)
        reorder = red in ("sum", "prod") and n.dtype in (np.float32, np.float64) and src.dtype == n.dtype
        if reorder and len(self.loops) == 1:
            start, lo, hi = self.loops[0]
            w.helpers.add(f"reassoc_{'add' if red == 'sum' else 'mul'}")
            w.out(f"{v} = reassoc_{'add' if red == 'sum' else 'mul'}({v}, {value})")
            self.close(opened)
            pad = len(w.lines[start]) - len(w.lines[start].lstrip())  # (the loop's, inside any `if` open wrote)
            loop = [line[pad:] for line in w.lines[start:]]
            written = _in_order_below(loop, f"({hi}) - ({lo})", 0)
            if _strided(loop):  # (the long copy: after `else:`)
                at = written.index("else:") + 1
                first = _literal(identity(red, n.dtype), n.dtype)
                written[at:] = ["    " + line for line in _four_lanes(loop, v, first, w.fresh("q"))]
            w.lines[start:] = [" " * pad + line for line in written]
            return
        w.note_helpers(expr)
        w.out(f"{v} = {expr}")
        self.close(opened)

    def memory(self, n: Node) -> str | None:
        """The name of the memory holding array n: of this loop, or of a loop around it (an alias reads an array
        the loop around does not change, where the inner loop reads the alias)."""
        if n in self.plan.memory:
            return self.names[self.plan.memory[n]]
        for plan, names in zip(reversed(self.w.around), reversed(self.w.scopes)):
            if n in plan.memory:
                return names[plan.memory[n]]
        return None

    def element(self, memory: str, shape: tuple[int, ...], idx: tuple[str, ...]) -> str:
        """The element of flat memory holding an array of `shape` at places idx, as its n-d view addresses it."""
        view = self.w.view(memory, shape)
        return f"{view}[{', '.join(idx)}]" if view != memory else f"{memory}[{flat(shape, idx)}]"

    def store(self, n: Node) -> None:
        x, tests, value = self.plan.slabs[n]
        memory = self.names[self.plan.memory[x]]
        start, checked, count = len(self.w.lines), dict(self.w.checked[-1]), len(self.reads)
        idx, opened = self.open(value, x.shape, list(tests), exact=True)
        at = self.element(memory, x.shape, idx)
        self.w.out(f"{at} = {self.at(value, idx)}")
        self.close(opened)
        if all(element == at for m, element in self.reads[count:] if m == memory):
            return
        # value reads x at other places than the one it writes: into a temporary first, then copied
        del self.w.lines[start:]
        self.w.checked[-1] = checked
        self.memo.clear()
        temporary, written = self.w.fresh("tmp"), self.w.fresh("tmp")
        self.w.allocate(temporary, x.shape, x.dtype)
        before = len(self.w.lines)
        idx, opened = self.open(value, x.shape, list(tests), exact=False)
        kept = [t for t in tests if self.memo.get((self.w.aliases.get(t, t), idx)) != "True"]
        if kept:  # (which places the tests allow, kept: the copy stores there alone, other steps' places untouched)
            loops = self.w.lines[before:]
            del self.w.lines[before:]
            self.w.depth -= opened
            self.w.allocate(written, x.shape, np.dtype(np.bool_))
            self.w.depth += opened
            self.w.lines += loops
            test = " and ".join(self.at(t, idx) for t in kept)
            self.w.out(f"{self.element(written, x.shape, idx)} = {test}")
        self.w.out(f"{self.element(temporary, x.shape, idx)} = {self.at(value, idx)}")
        self.close(opened)
        idx, opened = self.open(value, x.shape, list(tests), exact=False)
        if kept:
            self.w.out(f"if {self.element(written, x.shape, idx)}:")
            self.w.depth, opened = self.w.depth + 1, opened + 1
        self.w.out(f"{self.element(memory, x.shape, idx)} = {self.element(temporary, x.shape, idx)}")
        self.close(opened)

    def fused(self, nodes: list[Node]) -> bool:
        """Slabs into one array under the same tests (_fusable) stored by one loop nest, each place updated by
        each slab in turn, where each reads that array at the place it writes alone and no index is checked in the
        loops (so that the first error in order is the same); else nothing written, False."""
        x, tests, value = self.plan.slabs[nodes[0]]
        memory = self.names[self.plan.memory[x]]
        start, checked, count = len(self.w.lines), dict(self.w.checked[-1]), len(self.reads)
        for n in nodes[1:]:  # (indices read from 0-d values: checked before the loops, in order)
            for t in (*self.plan.slabs[n][1], self.plan.slabs[n][2]):
                self.precheck(t, set())
        idx, opened = self.open(value, x.shape, list(tests), exact=True)
        at = self.element(memory, x.shape, idx)
        for n in nodes:  # (each slab's new value read by the next where it reads the array there: kept, not stored)
            self.forward[at] = self.at(self.plan.slabs[n][2], idx)
        self.w.out(f"{at} = {self.forward.pop(at)}")
        self.close(opened)
        alone = all(element == at for m, element in self.reads[count:] if m == memory)
        if alone and not any("tj_error" in line for line in self.w.lines[start:]):
            return True
        del self.w.lines[start:]
        del self.reads[count:]
        self.w.checked[-1] = checked
        self.memo.clear()
        return False

    def temporary(self, n: Node) -> None:
        memory = self.names[n] = self.w.fresh("tmp")
        self.w.allocate(memory, n.shape, n.dtype)
        idx, opened = self.open(n, n.shape, [], exact=True)
        self.w.out(f"{self.element(memory, n.shape, idx)} = {self.at(n, idx, whole=False)}")
        self.close(opened)

    # -- the loop nest --

    def open(self, value: Node, shape: tuple[int, ...], tests: list[Node], exact: bool) -> tuple[tuple[str, ...], int]:
        """Write the loops over `shape`'s places the tests allow (exact: and an `if` of the tests that are not
        ranges); the places, rendered, and the number of blocks opened."""
        w = self.w
        for t in (*tests, value):  # an index read from 0-d values: checked once, before the loops
            self.precheck(t, set())
        names = tuple(w.fresh("e") if size != 1 else "0" for size in shape)
        self.vars = {p for p in names if p != "0"}
        self.spans.update((p, (0, size - 1)) for p, size in zip(names, shape))  # (every place inside its axis)
        lows: dict[str, list[str]] = {}
        highs: dict[str, list[str]] = {}
        fixed: dict[str, list[str]] = {}
        rest: list[Node] = []
        absorbed: list[Node] = []
        opened = 0
        for t in (w.aliases.get(t, t) for t in tests):
            s = self.scalar(t)
            if s is not None:
                if exact:  # (else the caller tests it where it needs to)
                    w.out(f"if {s}:")
                    w.depth, opened = w.depth + 1, opened + 1
                    absorbed.append(t)
            elif self.limits(t, names, lows, highs, fixed, absorbed):
                absorbed.append(t)
            else:
                rest.append(t)
        places = list(names)
        guards = []
        for axis, (p, size) in enumerate(zip(names, shape)):
            if p not in fixed:
                continue
            value_at, *others = fixed[p]
            places[axis] = value_at
            guards.append(f"0 <= {value_at} < {size}")
            guards += [f"{o} == {value_at}" for o in others]
            guards += [f"{lo} <= {value_at}" for lo in lows.get(p, [])]
            guards += [f"{value_at} < {hi}" for hi in highs.get(p, [])]
        if guards:
            w.out(f"if {' and '.join(guards)}:")
            w.depth, opened = w.depth + 1, opened + 1
        w.checked.append({})
        for p, size in zip(names, shape):
            if p == "0" or p in fixed:
                continue
            lo = self.extreme(">", "0", lows[p]) if p in lows else "0"
            hi = self.extreme("<", str(size), highs[p]) if p in highs else str(size)
            self.loops.append((len(w.lines), lo, hi))
            w.out(f"for {p} in range({lo}, {hi}):")
            w.depth, opened = w.depth + 1, opened + 1
        idx = tuple(places)
        for t in absorbed:
            self.memo[(t, idx)] = "True"
        if exact and rest:
            test = " and ".join(self.at(t, idx) for t in rest)
            w.out(f"if {test}:")
            w.depth, opened = w.depth + 1, opened + 1
        return idx, opened

    def extreme(self, order: str, first: str, terms: list[str]) -> str:
        """A variable holding the greatest (order ">") or least ("<") of `first` and the integer terms, written
        before the loop it bounds (see _clamped)."""
        v = self.w.fresh("b")
        self.w.out(f"{v} = {first}")
        for t in terms:
            self.w.out(f"{v} = {_pick(t, order, v)}")
        return v

    def close(self, opened: int) -> None:
        self.w.depth -= opened
        self.w.checked.pop()

    def limits(
        self,
        test: Node,
        idx: tuple[str, ...],
        lows: dict[str, list[str]],
        highs: dict[str, list[str]],
        fixed: dict[str, list[str]],
        absorbed: list[Node],
    ) -> bool:
        """Whether `test` at idx is ranges of the loops' places (`iota == s`, `s <= iota`, `iota < s` and their
        `and`), which it adds to lows, highs and fixed (absorbed: its parts that are)."""
        test = self.w.aliases.get(test, test)
        if test.op is Op.AND and test.dtype == np.bool_:
            found = [self.limits(s, idx, lows, highs, fixed, absorbed) for s in test.srcs]
            for s, ok in zip(test.srcs, found):
                if ok:
                    absorbed.append(self.w.aliases.get(s, s))
            return all(found)
        if test.op is Op.PAD and test.dtype == np.bool_ and not test.arg[1]:  # (a write into a view of the array)
            src, inner = test.srcs[0], list(idx)
            for d, pad in enumerate(test.arg[0]):  # false outside: a padded axis of length 1 fixes the place
                if pad != (0, 0):
                    if src.shape[d] != 1 or idx[d] not in self.vars:
                        return False
                    fixed.setdefault(idx[d], []).append(str(pad[0]))
                    inner[d] = "0"
            return self.limits(src, tuple(inner), lows, highs, fixed, absorbed)
        if test.op is Op.RESHAPE and test.dtype == np.bool_:  # (only axes of length 1 come or go)
            mapped = _unit_axes_moved(test.shape, test.srcs[0].shape, idx)
            return mapped is not None and self.limits(test.srcs[0], mapped, lows, highs, fixed, absorbed)
        if test.op not in (Op.EQ, Op.LT, Op.LE) or test.srcs[0].dtype.kind not in "iu":
            return False
        a, b = test.srcs
        va, vb, sa, sb = self.var(a, idx), self.var(b, idx), self.scalar(a), self.scalar(b)
        if test.op is Op.EQ and (va and sb or vb and sa):
            value = self.place(b) or sb if va else self.place(a) or sa
            fixed.setdefault(va or vb, []).append(value)  # type: ignore[arg-type]
        elif va and sb:  # place < s, place <= s
            highs.setdefault(va, []).append(sb if test.op is Op.LT else f"{sb} + 1")
        elif sa and vb:  # s < place, s <= place
            lows.setdefault(vb, []).append(sa if test.op is Op.LE else f"{sa} + 1")
        else:
            return False
        return True

    def zero_outside(self, e: Node) -> list[Node]:
        """Tests outside which e is zero (a sum over e needs only the places where they hold): where(t, v, 0),
        and products and sums of such with the same tests (a float's 0 * inf is NaN: both sides must be zero)."""
        e = self.w.aliases.get(e, e)
        if e.op is Op.WHERE:
            z = e.srcs[2]
            return [e.srcs[0]] if z.op is Op.CONST and z.arg == 0 else []
        if e.op in (Op.NEG, Op.CAST):
            return self.zero_outside(e.srcs[0])
        if e.op in (Op.MUL, Op.ADD, Op.SUB):
            a, b = self.zero_outside(e.srcs[0]), self.zero_outside(e.srcs[1])
            if len(a) == len(b) and all(s is t for s, t in zip(a, b)):
                return a
            return a + b if e.op is Op.MUL and e.dtype.kind in "iub" else []
        return []

    # -- what a value is at a place --

    def scalar(self, n: Node) -> str | None:
        """The value n is a broadcast of, rendered, where it is one (a constant, a 0-d value, a full reduction, or
        elementwise ops of those: written where first needed)."""
        n = self.w.aliases.get(n, n)
        if n.op is Op.CONST:
            return _literal(n.arg, n.dtype)
        m = n
        while m.shape != () and m.op in _SHAPING and m.srcs[0].size == 1:
            m = m.srcs[0]
        if m.shape == () or m.op is Op.REDUCE and m.size == 1:
            return self.w.positions.get(m) or self.w.name(m, self.names)
        if not self.invariant(n):
            return None
        return self.compute_at(n, ("0",) * len(n.shape))

    def invariant(self, n: Node) -> bool:
        """Whether n is the same at every place: elementwise ops of constants and broadcast 0-d values, and an
        element read at such indices."""
        n = self.w.aliases.get(n, n)
        if n.op is Op.CONST or n.shape == () or n.op is Op.REDUCE and n.size == 1:
            return True
        if self.memory(n) is not None:
            return False
        if n.op in _SHAPING and n.srcs[0].size == 1 or n.op in ELEMENTWISE:
            return all(self.invariant(s) for s in n.srcs)
        if n.op is Op.GATHER and n.size == 1:
            return all(self.invariant(s) for s in n.srcs[1:])
        return False

    def place(self, n: Node) -> str | None:
        """Where n is an element read from places (x[:, k] = v's test: `iota == places[k]`, k checked and
        counted from the end), that checked index, as element reads render it; else None."""
        n = self.w.aliases.get(n, n)
        while n.shape != () and n.op in _SHAPING and n.srcs[0].size == 1:
            n = n.srcs[0]
        if n.op is not Op.GATHER or n.size != 1 or not all(self.invariant(s) for s in n.srcs[1:]):
            return None
        places = self.gather_places(n, ("0",) * len(n.shape))
        return iota_at(n.srcs[0], places, self.w.aliases)

    def var(self, n: Node, idx: tuple[str, ...]) -> str | None:
        """The loop place n is at idx, where it is one (an iota, moved, cast between integer types)."""
        p = iota_at(n, idx, self.w.aliases)
        return p if p in self.vars else None

    def precheck(self, n: Node, seen: set[Node]) -> None:
        n = self.w.aliases.get(n, n)
        if n in seen or n.shape == () or self.scalar(n) is not None or self.memory(n) is not None:
            return
        seen.add(n)
        if n.op is Op.GATHER:
            indices = iter(n.srcs[1:])
            for size, axis in zip(n.srcs[0].shape, n.arg):
                if axis is None:
                    index = next(indices)
                    found = self.scalar(index)
                    if found is not None:
                        self.w.checked_indices((size,), [found], [self.span(index, size)])
        for s in n.srcs:
            self.precheck(s, seen)

    def interval(self, n: Node, idx: tuple[str, ...]) -> tuple[int, int] | None:
        """The bounds of integer n's value at the places the loops at idx run over, where they are known (an index
        inside its axis is then used unchecked: `tmp[e1, v2 + e3]` for v2 in [0, 4], e3 in [0, 28), an axis of 32)."""
        n = self.w.aliases.get(n, n)
        if n.dtype.kind not in "iu":
            return None
        key = (n, idx)
        if key not in self.intervals:
            self.intervals[key] = self._interval(n, idx)
        return self.intervals[key]

    def _interval(self, n: Node, idx: tuple[str, ...]) -> tuple[int, int] | None:
        m = n
        while m.shape != () and m.op in _SHAPING and m.srcs[0].size == 1:
            m = m.srcs[0]
        if m.op is Op.CONST:
            return int(m.arg), int(m.arg)
        if m.shape == ():
            return self.w.span_of(m)
        place = iota_at(n, idx, self.w.aliases)
        if place is not None:
            return self.spans.get(place)
        if n.op in _SHAPING:
            return self.interval(n.srcs[0], source_index(n, idx))
        if n.op not in ELEMENTWISE:
            return None
        return interval(n, [self.interval(s, idx) for s in n.srcs])

    def span(self, index: Node, size: int) -> tuple[int, int]:
        while index.shape != () and index.op in _SHAPING:
            index = index.srcs[0]
        if index.op is Op.CONST:
            return int(index.arg), int(index.arg)
        return self.w.known.get(index, (-1, size))

    def at(self, n: Node, idx: tuple[str, ...], whole: bool = True) -> str:
        """n's element at idx, rendered (lines computing it written where needed; whole: n itself may be an
        array in memory)."""
        s = self.scalar(n)
        if s is not None:
            return s
        return self.compute_at(self.w.aliases.get(n, n), idx, whole)

    def compute_at(self, n: Node, idx: tuple[str, ...], whole: bool = True) -> str:
        key = (n, idx)
        if key in self.memo:
            return self.memo[key]
        w = self.w
        memory = self.memory(n) if whole else None
        if memory is not None:  # an array's element
            expr = self.element(memory, n.shape, idx)
            self.reads.append((memory, expr))
            expr = self.forward.get(expr, expr)
        elif n.op is Op.IOTA:
            expr = f"np.{n.dtype.name}({idx[n.arg]})"
        elif n.op in _SHAPING or n.op is Op.SLICE:
            found = self.memo[key] = self.at(n.srcs[0], source_index(n, idx))
            return found
        elif n.op is Op.GATHER:
            expr = self.gather(n, idx)
        elif n.op is Op.PAD:  # the source's element where idx is inside it (read clamped), else the fill
            src, (pads, fill) = n.srcs[0], n.arg
            places: list[str] = []
            inside: list[str] = []
            for p, size, (before, _) in zip(idx, src.shape, pads):
                if (before, size) == (0, n.shape[len(places)]):
                    places.append(p)
                    continue
                at = p if before == 0 else f"({p} - {before})"
                places.append("0" if size == 1 and before == 0 else f"min(max({at}, 0), {size - 1})")
                inside.append(f"{before} <= {p} < {before + size}")
            expr = f"({self.at(src, tuple(places))} if {' and '.join(inside)} else {_literal(fill, n.dtype)})"
        else:
            bounded = n.op in _BOUNDED and self.interval(n, idx) is not None
            expr = w.compute(n, [self.at(s, idx) for s in n.srcs], bounded)
        v = self.memo[key] = w.fresh("a")
        w.out(f"{v} = {expr}")
        return v

    def gather(self, n: Node, idx: tuple[str, ...]) -> str:
        source, places = self.w.aliases.get(n.srcs[0], n.srcs[0]), self.gather_places(n, idx)
        memory = self.memory(source)
        if memory is not None:
            element = self.element(memory, source.shape, places)
            self.reads.append((memory, element))
            return self.forward.get(element, element)
        return self.at(source, places)

    def gather_places(self, n: Node, idx: tuple[str, ...]) -> tuple[str, ...]:
        """The place in a GATHER's source its place idx reads, each gathered index checked."""
        source, indices = n.srcs[0], iter(n.srcs[1:])
        names, spans = [], []
        for size, axis in zip(source.shape, n.arg):
            if axis is not None:
                names.append(idx[axis])
                spans.append((0, 0))
                continue
            index = next(indices)
            s = self.scalar(index)
            names.append(s if s is not None else self.at(index, idx))
            spans.append(self.span(index, size) if s is not None else self.interval(index, idx) or (-1, size))
        return tuple(self.w.checked_indices(source.shape, names, spans))


def _unit_axes_moved(shape: tuple[int, ...], source: tuple[int, ...], idx: tuple[str, ...]) -> tuple[str, ...] | None:
    """The places in `source` of the places idx in `shape`, a reshape of it that only adds or drops axes of
    length 1 (their places "0"), else None."""
    kept = [p for p, n in zip(idx, shape) if n != 1]
    if [n for n in shape if n != 1] != [n for n in source if n != 1] or any(
        p != "0" for p, n in zip(idx, shape) if n == 1
    ):
        return None
    places = iter(kept)
    return tuple("0" if n == 1 else next(places) for n in source)


_LOOP_HEAD = re.compile(r"^for (\w+) in range\((.*)\):$")
_SUBSCRIPT = re.compile(r"\[([^\[\]]*)\]")


def _strided(loop: list[str]) -> bool:
    """Whether a reduction's loop (its lines, `for e in range(lo, hi):` first) reads an array along an axis that
    is not its last (`A[e, j]`: a column), which LLVM does not vectorise."""
    var = _LOOP_HEAD.match(loop[0])[1]  # type: ignore[index]
    own = re.compile(rf"\b{var}\b")
    return any(
        own.search(part) for line in loop[1:] for sub in _SUBSCRIPT.findall(line) for part in sub.split(",")[:-1]
    )


def _four_lanes(loop: list[str], v: str, first: str, q: str) -> list[str]:
    """A reduction's loop over a column (_strided) as four accumulators, each taking every fourth step, then the
    steps left over, then the four added pairwise: the loads of four steps overlap (lu's column dots 1.3x)."""
    var, bounds = _LOOP_HEAD.match(loop[0]).groups()  # type: ignore[union-attr]
    body = [line[4:] for line in loop[1:]]
    step = _REASSOC_STEP.match(body[-1])
    assert step is not None and step[2] == v, body[-1]
    sign = "+" if step[3] == "add" else "*"

    def sym(a: str, b: str) -> str:  # (plain steps: each lane adds in order; reassociating them undid the lanes)
        return f"({a} {sign} {b})"

    lanes = [f"{v}{k}{q}" for k in range(4)]
    out = [f"{q}lo, {q}hi = {bounds}", f"{q}end = {q}lo + ({q}hi - {q}lo) // 4 * 4"]
    out += [f"{lanes[0]} = {v}", *(f"{lane} = {first}" for lane in lanes[1:])]
    out.append(f"for {q} in range({q}lo, {q}end, 4):")
    for k, lane in enumerate(lanes):
        out += [f"    {var} = {q} + {k}", *("    " + line for line in body[:-1]), f"    {lane} = {sym(lane, step[4])}"]
    out += [f"for {var} in range({q}end, {q}hi):", *("    " + line for line in body[:-1])]
    out += [f"    {lanes[0]} = {sym(lanes[0], step[4])}"]
    out.append(f"{v} = {sym(sym(lanes[0], lanes[1]), sym(lanes[2], lanes[3]))}")
    return out


def _versioned(plan: Plan, known: tuple[int, int] | None) -> int | None:
    """The least size of the axes an innermost loop's index picks directly (x[i], A[k, i]), where it is worth a
    second version of the loop with no index checks (its bounds are read when it runs, and not known inside those
    axes), else None."""
    loop = plan.loop
    if loop.kind != "for" or loop.bounds[2] != 1 or any(st.kind not in ("value", "store") for st in plan.statements):
        return None
    var = loop.inputs[0]
    sizes = [
        size
        for st in plan.statements
        if st.kind == "value" and st.node.op is Op.GATHER and fault_of(st.node) is None
        for index, size in zip(st.node.srcs[1:], st.node.srcs[0].shape)
        if index is var
    ]
    if not sizes or known is not None and 0 <= known[0] and known[1] < min(sizes):
        return None
    return min(sizes)


def _fusable(plan: Plan, statements: list, k: int) -> tuple[list, list]:
    """The slab statements[k] and those after it that store into the same array under the same tests, with no
    statement between them but 0-d values that read none of that array (`out[:, f] += w[f, c, 0, 0] * x0`,
    `out[:, f] += w[f, c, 0, 1] * x1`, ...): (the slabs, the values between them). One loop nest may store them
    all, each place updated by each in turn (_Slab.fused)."""
    x, tests, _ = plan.slabs[statements[k].node]
    memory = plan.memory[x]
    slabs: list = [statements[k]]
    between: list = []
    pending: list = []
    for st in statements[k + 1 :]:
        n = st.node
        if st.kind == "slab":
            y, others, _ = plan.slabs[n]
            if plan.memory[y] is not memory or y.shape != x.shape or others != tests:
                break
            slabs.append(st)
            between += pending
            pending = []
        elif st.kind == "value" and n not in plan.reads and n.op is not Op.REDUCE and n.op is not Op.LOOP:
            if n.op is Op.GATHER and fault_of(n) is None and not is_flat_positions(n.srcs[0]):
                if plan.memory.get(n.srcs[0], memory) is memory:
                    break  # (an element of the slabs' array, or of an alias)
            pending.append(st)
        else:
            break
    return slabs, between


def _pick(t: str, order: str, v: str) -> str:
    """`t` where it is beyond `v` in `order` (">": greater), else `v`: an integer max or min as a conditional
    expression (see _clamped)."""
    return f"{t} if {t} {order} {v} else {v}"


def _clamped(v: str, x: str, lo: str, hi: str) -> list[str]:
    """Statements setting `v` to the integer `x` clamped to [lo, hi]. Not Numba's min and max: a loop bounded by
    `min(max(x, lo), hi)` ran 25% slower than by these (Floyd-Warshall over elements, 120 x 120: 0.67 against
    0.53 ms, its loop over j cut at k; `min` alone made the difference, and only as that loop's bound: what LLVM
    then does differently was not looked into)."""
    return [f"{v} = {x}", f"{v} = {_pick(lo, '>', v)}", f"{v} = {_pick(hi, '<', v)}"]


def _moving_axis(at: Node, var: Node) -> tuple[int, int] | None:
    """(axis, shift) where a store's position `at` (a GATHER of flat positions) has index var + shift on that axis
    (var a loop's index), else None."""
    if at.op is not Op.GATHER or not is_flat_positions(at.srcs[0]):
        return None
    for axis, index in enumerate(at.srcs[1:]):
        if index is var:
            return axis, 0
        if index.op in (Op.ADD, Op.SUB) and index.srcs[0] is var and index.srcs[1].op is Op.CONST:
            shift = int(index.srcs[1].arg)
            return axis, shift if index.op is Op.ADD else -shift
        if index.op is Op.ADD and index.srcs[1] is var and index.srcs[0].op is Op.CONST:
            return axis, int(index.srcs[0].arg)
    return None


def _names(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", text))


def iota_at(n: Node, idx: tuple[str, ...], aliases: dict[Node, Node]) -> str | None:
    """The place n's value is at idx, where n is an iota (moved, cast between integer types), else None."""
    while True:
        n = aliases.get(n, n)
        if n.op is Op.IOTA:
            return idx[n.arg]
        if n.op in _SHAPING:
            idx = source_index(n, idx)
        elif not (n.op is Op.CAST and n.dtype.kind in "iu" and n.srcs[0].dtype.kind in "iu"):
            return None
        n = n.srcs[0]


def source_index(n: Node, idx: tuple[str, ...]) -> tuple[str, ...]:
    """The place in a movement op's source that its place idx reads."""
    src = n.srcs[0]
    if n.op is Op.EXPAND:
        return tuple("0" if s == 1 else p for s, p in zip(src.shape, idx))
    if n.op is Op.PERMUTE:
        out = [""] * len(idx)
        for p, axis in zip(idx, n.arg):
            out[axis] = p
        return tuple(out)
    if n.op is Op.SLICE:
        return tuple(
            p if (start, step) == (0, 1) else f"({start} + {p} * {step})" for (start, step, _), p in zip(n.arg, idx)
        )
    kept = [p for p, s in zip(idx, n.shape) if s != 1]  # a reshape
    if [s for s in n.shape if s != 1] == [s for s in src.shape if s != 1]:
        it = iter(kept)
        return tuple(next(it) if s != 1 else "0" for s in src.shape)
    at, out, step = flat(n.shape, idx), [], 1
    for k, size in reversed(list(enumerate(src.shape))):
        part = f"({at})" if step == 1 else f"(({at}) // {step})"
        out.append("0" if size == 1 else part if k == 0 else f"({part} % {size})")
        step *= size
    return tuple(reversed(out))
