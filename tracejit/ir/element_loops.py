"""Loops over elements, the Numba idiom (`for i in range(n): for j in range(m): D[i, j] = min(D[i - 1, j] + 1,
...)`): a loop compiled as a loop (numpy/loops.py) whose body computes with 0-d values only, reads single
elements of arrays and stores single elements into the arrays it carries, its inner loops alike, runs as one
function with the loops in it (codegen/cpu/element_loops.py renders it), not as one launch of the body's kernels
per step (frontend/staged.py). The arrays it carries are updated in place.

`plan(loop)` decides, from the body's graph, and orders the body's work into statements:
- a 0-d value computed from 0-d values (elementwise ops, casts, selects, constants);
- a read of one element (a GATHER of 0-d indices from an array; a negative index counts from the end, one
  outside its axis raises IndexError as in NumPy);
- a store of one element (build.store_element, what `x[i, j] = v` traces to), under a 0-d test where the
  store is in a branch of an `if` on array values (assign.store's where(guard, new, old));
- a reduction to one value of an expression over many elements (`L[i, :i] @ x[:i]`, `A[:, k].sum()`);
- a store of many elements ("slab": where(tests, value, x), what `Q[:, k] = v`, `A[i, 1:] = x[2:]`
  (scatter._slab) and `x[:i] -= v` (bounded_slices) trace to), x replaced by value where the tests hold;
- an array an inner loop reads, computed here into memory of its own ("temporary": `Q[:, k]` read in the
  loop over j), or, where it reads no array (a slice's mask) or only moves arrays the loop does not change
  (`x[:, c]`), computed where the inner loop reads it (alias);
- an inner loop of the same kind.
The expressions of the last three are elementwise and movement ops, reads of arrays at places they compute
(GATHER) and pads; codegen/cpu/element_loops.py renders each as loops over the places its tests allow.
A store over a region no index chooses (a stencil's `u[1:-1] = ...`) is not planned: parallel kernels run it
faster.

Stores are in place, so each array's values form a chain of versions, each made from the one before by one
store or one inner loop; every read of a version comes before the store that makes the next one. A body that
reads an array's old values after it changed them, branches into two versions of one array, or writes an array
it does not carry (or carries one array into another's place, `a, b = b, a`) is not a loop over elements: it
runs as before.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from tracejit.ir import build
from tracejit.ir.evaluate import constant_value
from tracejit.ir.faulting import fault_of
from tracejit.ir.graph import ELEMENTWISE, Node, Op, replace, toposort


class LoopLike(Protocol):
    """What a plan reads of a loop (numpy.loops.Loop, which this layer does not import)."""

    kind: str
    bounds: tuple
    inputs: list[Node]
    outputs: list[Node]
    carried: int
    until: int | None
    where: str

    @property
    def heads(self) -> int: ...


class NotElementLoop(Exception):
    """Why a loop is not a loop over elements (TRACEJIT_DEBUG=1 says it)."""


class _ReadAfterChange(NotElementLoop):
    """A statement reads an array's old values after another changed them (plan: again, stores' values copied)."""


@dataclass(eq=False)
class Statement:
    """One step of a body, in order: kind "value" (node: a 0-d value), "store" (node: build.store_element's,
    guard: its 0-d test or None), or "loop" (inner: the inner loop's plan, node: its first LOOP node)."""

    kind: str
    node: Node
    guard: Node | None = None
    inner: Plan | None = None
    values: dict[int, Node] = field(default_factory=dict)  # a loop's: its values the body reads, by number


@dataclass(eq=False)
class Plan:
    """A loop over elements: the loop (numpy.loops.Loop), its body's statements in the order they run, and for
    every array the body names (its inputs, the stores' results, its inner loops' array results) the input
    whose memory holds it."""

    loop: LoopLike
    statements: list[Statement] = field(default_factory=list)
    memory: dict[Node, Node] = field(default_factory=dict)
    stores: dict[Node, tuple[Node, Node, Node, Node | None]] = field(default_factory=dict)  # (x, at, value, guard)
    reads: dict[Node, tuple[Node, int]] = field(default_factory=dict)  # an element at a fixed offset: (x, offset)
    slabs: dict[Node, tuple[Node, tuple[Node, ...], Node]] = field(default_factory=dict)  # (x, tests, value)
    aliases: dict[Node, Node] = field(default_factory=dict)  # an input the loop around computes where read: how


def element_store(node: Node) -> tuple[Node, Node, Node] | None:
    """(x, position, value) where `node` is build.store_element(x, position, value) (as simplified), else None:
    where(table == table[i, j], v, x) for a table of flat positions."""
    if node.op is not Op.WHERE or node.shape == ():
        return None
    at, values, x = node.srcs
    if at.op is not Op.EQ:
        return None
    table, position, value = at.srcs[0], _broadcast_source(at.srcs[1]), _broadcast_source(values)
    if position is None or value is None or not is_flat_positions(table):
        return None
    if position.op is Op.GATHER and position.srcs[0] is table:  # x[i, j] = v
        return x, position, value
    if position.op is Op.CONST and 0 <= int(position.arg) < table.size:  # x[2, 0] = v
        return x, position, value
    return None


def store_mask(node: Node) -> tuple[Node, ...] | None:
    """The indices of the element a store's mask (build.store_element's `table == table[i, j]`) picks, where
    `node` is one (they may come from outside a loop, the mask may not: element_store reads it whole)."""
    if node.op is not Op.EQ or node.shape == ():
        return None
    position = _broadcast_source(node.srcs[1])
    if position is None or not is_flat_positions(node.srcs[0]):
        return None
    if position.op is Op.GATHER and position.srcs[0] is node.srcs[0]:
        return position.srcs[1:]
    return () if position.op is Op.CONST else None


_FLAT: weakref.WeakKeyDictionary[Node, bool] = weakref.WeakKeyDictionary()


def is_flat_positions(table: Node) -> bool:
    """Whether `table` is build.flat_positions(table.shape) (as simplified): its values, which need no argument,
    are its elements' flat positions."""
    known = _FLAT.get(table)
    if known is None:
        value = constant_value(table) if table.dtype.kind in "iu" else None
        known = _FLAT[table] = value is not None and np.array_equal(value.reshape(-1), np.arange(table.size))
    return known


def _broadcast_source(node: Node) -> Node | None:
    """The 0-d value `node` is a broadcast of (reshapes and expands of it, a constant), else None."""
    if node.op is Op.CONST and node.shape != ():  # (x[6] = 1.0: both a constant array)
        return build.const(node.arg, node.dtype, ())
    while node.shape != () and node.op in (Op.EXPAND, Op.RESHAPE) and node.srcs[0].size == 1:
        node = node.srcs[0]
    return node if node.shape == () or node.op is Op.REDUCE and node.size == 1 else None  # (x @ y: a 0-d value)


_MOVEMENT = frozenset({Op.RESHAPE, Op.SLICE, Op.PERMUTE, Op.EXPAND})
_VIEWED = _MOVEMENT | {Op.GATHER}  # what an element is read through, computed where it is read


def element_at(n: Node) -> tuple[Node, int]:
    """A 0-d value made by movement ops only: the value they start from, and the flat offset of n's element in it."""
    chain = [n]
    while chain[-1].op in _MOVEMENT:
        chain.append(chain[-1].srcs[0])
    source = chain[-1]
    if source.shape == ():
        return source, 0
    positions = build.flat_positions(source.shape)
    moved = replace([n], {source: positions})[0]
    offset = constant_value(moved)
    assert offset is not None  # (positions and movement ops only: known)
    return source, int(offset.reshape(()))


def plan(loop: LoopLike) -> Plan:
    """The loop's plan, or NotElementLoop saying why it is not a loop over elements."""
    try:
        try:
            return _Planner(loop).run()
        except _ReadAfterChange:
            # x[[k, p]] = x[[p, k]] (a row swap: x[k] = old x[p], then x[p] = old x[k]): each store's value
            # computed into memory of its own first, as NumPy's right-hand side is a copy
            return _Planner(loop, copy_values=True).run()
    except RecursionError:
        raise NotElementLoop("its body is too long a chain of values to plan") from None


_SCALAR_DTYPES = frozenset("?bBhHiIlLqQfd")  # no float16 (numba has none), no complex


def _check_dtype(n: Node) -> None:
    if n.dtype.char not in _SCALAR_DTYPES:
        raise NotElementLoop(f"it computes in {n.dtype}")


class _Planner:
    def __init__(self, loop: LoopLike, copy_values: bool = False):
        self.loop = loop
        self.copy_values = copy_values  # a store of many elements computes its value into a temporary first
        self.plan = Plan(loop)
        self.inputs = {x: p for p, x in enumerate(loop.inputs)}
        first = 1 if loop.kind == "for" else 0
        self.carried = set(loop.inputs[first : first + loop.carried])
        self.deps: dict[Node, list[Node]] = {}  # a statement's node -> the statements' nodes it reads
        self.loops: dict[object, Statement] = {}  # an inner Loop -> its statement
        self.readers: dict[Node, list[Node]] = {}  # an array version -> the statements that read it
        self.mutator: dict[Node, Node] = {}  # an array version -> the statement that makes the next one
        self.kinds: dict[Node, Statement] = {}  # a statement's node -> the statement
        self.unchanged: dict[Node, bool] = {}  # moved()'s answers

    def run(self) -> Plan:
        loop = self.loop
        if loop.until is not None and loop.kind != "for":
            raise NotElementLoop("a `while` with a break")
        outputs = list(loop.outputs)
        for o in outputs:
            if o.shape == ():
                self.value(o)
            else:
                self.array(o)
        n = loop.carried
        for k, o in enumerate(outputs[:n]):
            if o.shape == ():
                continue
            memory = self.plan.memory[o]
            x = loop.inputs[(1 if loop.kind == "for" else 0) + k]
            if memory is not x:
                raise NotElementLoop("it carries one array into another's place (a, b = b, a) or a new array")
            if o in self.mutator:
                raise NotElementLoop("it changes an array after the values it carries to the next step")
        for version in self.mutator:
            if self.plan.memory[version] not in self.carried:
                raise NotElementLoop("it writes into an array it does not carry")
        self.plan.statements = self.order(outputs)
        return self.plan

    # -- what each node is --

    def statement(self, node: Node, kind: str, deps: list[Node], **kw) -> None:
        self.deps[node] = deps
        self.kinds[node] = Statement(kind, node, **kw)

    def value(self, n: Node) -> None:
        """A 0-d value: its statement and those of what it reads."""
        if n in self.inputs or n in self.deps:
            return
        _check_dtype(n)
        if n.op is Op.HOST:
            raise NotElementLoop(f"it calls {n.arg[0].name}, which runs with NumPy on the host")
        if n.op is Op.REDUCE and n.size == 1:  # (x[:i] @ y[:i], A[:, k].sum(): a loop over the elements it reads)
            deps: list[Node] = []
            self.expression(n.srcs[0], n, deps, set())
            self.statement(n, "value", deps)
            return
        if n.shape != ():
            raise NotElementLoop(f"it computes with whole arrays ({n.op.value} of shape {n.shape})")
        if n.op is Op.LOOP:
            self.inner(n)
            return
        if n.op is Op.CONST:
            self.statement(n, "value", [])
            return
        if n.op in ELEMENTWISE:
            for s in n.srcs:
                self.value(s)
            self.statement(n, "value", [s for s in n.srcs if s not in self.inputs])
            return
        if n.op is Op.GATHER:
            source, indices = n.srcs[0], n.srcs[1:]
            for s in indices:
                self.value(s)
            deps = [s for s in indices if s not in self.inputs]
            if is_flat_positions(source) or fault_of(n) is not None:  # (a store's position, a check: no read)
                pass
            elif self.is_array(source) or source in self.inputs or source.op not in _VIEWED:
                self.array(source)
                self.readers.setdefault(source, []).append(n)
                if source not in self.inputs:
                    deps.append(source)
            else:  # a read through a view of an array (z[i - 1] of a complex z: a part of its parts' array), or
                # of a row read at a traced index (row = x[i]; row[j]: x[i, j])
                self.expression(source, n, deps, set())
            self.statement(n, "value", deps)
            return
        if n.op in _MOVEMENT:  # x[0] of an array: the element at a fixed offset (movement ops only)
            source, offset = element_at(n)
            if source.shape == () or source.op is Op.REDUCE and source.size == 1:
                self.value(source)
                self.statement(n, "value", [source] if source not in self.inputs else [])
                return
            if source not in self.inputs and not self.is_array(source):
                # an element of a computed array (px, py = positions[k]: elements of a row read at a traced
                # index): that element alone, computed where the value is
                deps = []
                self.expression(source, n, deps, set())
                self.statement(n, "value", deps)
                return
            self.array(source)
            self.readers.setdefault(source, []).append(n)
            self.plan.reads[n] = (source, offset)
            self.statement(n, "value", [source] if source not in self.inputs else [])
            return
        raise NotElementLoop(f"it computes {n.op.value} of arrays")

    def array(self, n: Node) -> None:
        """An array version: an input, a store's result or an inner loop's array."""
        if n in self.plan.memory:
            return
        _check_dtype(n)
        if n.op is Op.HOST:
            raise NotElementLoop(f"it calls {n.arg[0].name}, which runs with NumPy on the host")
        if n in self.inputs:
            self.plan.memory[n] = n
            return
        if n.op is Op.LOOP:
            self.inner(n)
            return
        guard, store = None, n
        if n.op is Op.WHERE:  # a store in a branch of an `if`: where(test, store, old)
            test = _broadcast_source(n.srcs[0])
            inner = element_store(n.srcs[1])
            if test is not None and inner is not None and inner[0] is n.srcs[2]:
                guard, store = test, n.srcs[1]
        found = element_store(store)
        if found is None:
            self.slab(n)
            return
        x, at, value = found
        self.array(x)
        self.value(at)
        self.value(value)
        deps = [s for s in (at, value, guard) if s is not None and s not in self.inputs]
        if guard is not None:
            self.value(guard)
        if x not in self.inputs:
            deps.append(x)
        self._mutates(x, n)
        self.plan.memory[n] = self.plan.memory[x]
        self.plan.stores[n] = (x, at, value, guard)
        self.statement(n, "store", deps, guard=guard)

    def slab(self, n: Node) -> None:
        """A store of many elements: where(test, value, x) for an array version x (x[:, k] = v, x[a:b] -= v, and
        where(g, ..., x) around it in a branch), x with the places where every test holds replaced by value."""
        if n.op is not Op.WHERE or not self.is_array(n.srcs[2]):
            raise NotElementLoop(f"it computes {n.op.value} of arrays of shape {n.shape}")
        tests, value, x = [n.srcs[0]], n.srcs[1], n.srcs[2]
        while value.op is Op.WHERE and value.srcs[2] is x:
            tests.append(value.srcs[0])
            value = value.srcs[1]
        if all(constant_value(t) is not None for t in tests):  # u[1:-1] = f(u[2:], u[:-2]): a step of a stencil
            raise NotElementLoop(
                "it stores into a region of an array its index does not choose (a stencil's step "
                "runs faster as parallel kernels)"
            )
        self.array(x)
        deps: list[Node] = [] if x in self.inputs else [x]
        seen: set[Node] = set()
        if self.copy_values and not self.computed(value) and not self.is_array(value):
            self.temporary(value)
        for t in (*tests, value):
            self.expression(t, n, deps, seen)
        self._mutates(x, n)
        self.plan.memory[n] = self.plan.memory[x]
        self.plan.slabs[n] = (x, tuple(tests), value)
        self.statement(n, "slab", deps)

    def temporary(self, n: Node) -> None:
        """An array computed element by element into memory of its own (what an inner loop reads of the values
        of this step: x[:, k], a mask)."""
        if n in self.plan.memory:
            return
        deps: list[Node] = []
        self.expression(n, n, deps, set(), whole=False)
        self.plan.memory[n] = n
        self.statement(n, "temporary", deps)

    def computed(self, n: Node) -> bool:
        """Whether n reads no array: computed from places, constants and 0-d values alone."""
        if n.shape == () or n.op in (Op.CONST, Op.IOTA) or n.op is Op.REDUCE and n.size == 1:
            return True
        if self.is_array(n) or n.op not in ELEMENTWISE and n.op not in _MOVEMENT and n.op is not Op.GATHER:
            return False  # (a GATHER of places at places: `x[:, k] = v`'s mask compares the places with arange[k])
        return all(self.computed(s) for s in n.srcs)

    def moved(self, n: Node) -> bool:
        """Whether n only moves and picks elements of arrays this loop does not change (`x[:, c]`, `x[:, c, i:]`,
        computing their indices): read where an inner loop reads it, it is the same, and copies nothing."""
        found = self.unchanged.get(n)
        if found is None:
            found = self.unchanged[n] = self._moved(n)
        return found

    def _moved(self, n: Node) -> bool:
        if n.shape == () or n.op in (Op.CONST, Op.IOTA) or n.op is Op.REDUCE and n.size == 1:
            return True
        if n in self.inputs:
            return n not in self.carried
        if self.is_array(n):
            return False
        if n.op in _MOVEMENT or n.op in (Op.GATHER, Op.PAD) or n.op in ELEMENTWISE and n.dtype.kind in "iub":
            return all(self.moved(s) for s in n.srcs)
        return False

    def is_array(self, n: Node) -> bool:
        """Whether n is an array version: an input, an inner loop's array, or a store into one."""
        if n in self.plan.memory or n in self.inputs or n.op is Op.LOOP:
            return True
        if n.op is not Op.WHERE or n.shape == ():
            return False
        return element_store(n) is not None or self.is_array(n.srcs[2])

    def expression(self, n: Node, reader: Node, deps: list[Node], seen: set[Node], whole: bool = True) -> None:
        """An array-shaped value that statement `reader` computes element by element (elementwise and movement
        ops, reads of arrays at places it computes): the statements of its 0-d values and arrays (whole: n
        itself may be one)."""
        if n in seen:
            return
        seen.add(n)
        if n.shape == () or n.op is Op.REDUCE and n.size == 1:
            self.value(n)
        elif whole and self.is_array(n):
            self.array(n)
            self.readers.setdefault(n, []).append(reader)
        elif n.op in (Op.CONST, Op.IOTA):
            return
        elif n.op in ELEMENTWISE or n.op in _MOVEMENT or n.op in (Op.GATHER, Op.PAD):
            _check_dtype(n)
            for s in n.srcs:
                self.expression(s, reader, deps, seen)
            return
        else:
            raise NotElementLoop(f"it computes {n.op.value} of arrays of shape {n.shape}")
        if n not in self.inputs:
            deps.append(n)

    def _mutates(self, version: Node, statement: Node) -> None:
        if self.mutator.get(version, statement) is not statement:
            raise NotElementLoop("it makes two different arrays from one (stores in both branches of an `if`?)")
        self.mutator[version] = statement

    def inner(self, n: Node) -> None:
        loop, _ = n.arg
        found = self.loops.get(loop)
        if found is None:
            inner = plan(loop)
            heads, carried = loop.heads, loop.carried
            arrays = [s for s in n.srcs if s.shape != ()]
            if any(arrays.count(s) > 1 for s in n.srcs[heads : heads + carried] if s.shape != ()):
                raise NotElementLoop("an inner loop carries one array under two names, or reads it as it was")
            deps: list[Node] = []
            for j, s in enumerate(n.srcs):
                carry = heads <= j < heads + carried
                if s.shape == ():
                    self.value(s)
                elif not carry and not self.is_array(s):  # (an array the inner loop reads, computed here)
                    if self.computed(s) or self.moved(s):  # the inner loop computes it where it reads it
                        inner.aliases[loop.inputs[j - heads + (1 if loop.kind == "for" else 0)]] = s
                        self.expression(s, n, deps, set())
                        continue
                    self.temporary(s)
                    self.readers.setdefault(s, []).append(n)
                else:
                    self.array(s)
                    if carry:
                        self._mutates(s, n)
                    else:
                        self.readers.setdefault(s, []).append(n)
                if s not in self.inputs:
                    deps.append(s)
            found = self.loops[loop] = Statement("loop", n, inner=inner)
            self.deps[n] = deps
            self.kinds[n] = found
        else:
            self.deps.setdefault(n, [found.node])  # another value of the same loop: after it, nothing to run
            self.kinds.setdefault(n, found)
        found.values[n.arg[1]] = n
        if n.shape != ():
            k = n.arg[1]
            self.plan.memory[n] = self.plan.memory[n.srcs[loop.heads + k]]

    # -- the order --

    def order(self, outputs: list[Node]) -> list[Statement]:
        """The statements in an order where each comes after what it reads and every read of an array version
        before the statement that changes it (NotElementLoop where there is none)."""
        after: dict[Node, set[Node]] = {n: set(d for d in deps if d in self.deps) for n, deps in self.deps.items()}
        for version, mutator in self.mutator.items():
            for reader in self.readers.get(version, ()):
                if reader is not mutator:
                    after[mutator].add(reader)
        rank = {n: i for i, n in enumerate(toposort(outputs))}
        waiting = {n: len(d) for n, d in after.items()}
        users: dict[Node, list[Node]] = {}
        for n, d in after.items():
            for s in d:
                users.setdefault(s, []).append(n)
        ready = sorted((n for n, k in waiting.items() if k == 0), key=lambda n: -rank.get(n, -1))
        done: list[Statement] = []
        seen: set[int] = set()
        while ready:
            n = ready.pop()
            statement = self.kinds[n]
            if id(statement) not in seen:  # (every value of an inner loop is one statement)
                seen.add(id(statement))
                done.append(statement)
            for u in users.get(n, ()):
                waiting[u] -= 1
                if waiting[u] == 0:
                    ready.append(u)
                    ready.sort(key=lambda n: -rank.get(n, -1))
        if len(seen) < len({id(s) for s in self.kinds.values()}):
            raise _ReadAfterChange("it reads an array's old values after it changed them")
        return done
