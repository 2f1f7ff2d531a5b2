"""A loop's stores into places and ranges of an array it carries, made in place: `pos_save[:, :, i + 1] = pos` in a
time step, `history[t] = u`, `cov[i, i:M] = v`.

A loop compiled as a loop (frontend/staged.py) computes each carried array's next value whole: the store above is
`where(iota == i + 1, pos, pos_save)` over the whole history, a copy of every step saved so far at every step
(n-body's 100 x 3 x 1001 history: 57 us a step, more than its forces). XLA's dynamic-update-slice is the remedy: the
body's program computes only what is stored and where, and the step writes it into the carried array's memory.

A carried array's next value is such a store when it is `where(eq(iota along axis d, a position), expand(x),
the array's value at the step's start)`, the position one number (the index, `i + 1`, any value the body computes)
and x one along d; or the same along several axes, the tests joined by `and` (`out[:, i, j, :] = v`, a convolution's
output place by place); or along a range of places, `start <= iota < stop` with bounds read when the kernel runs
(`x[i:] += v`, numpy/bounded_slices.py), x one along it or its whole length; or several such stores one after the
other (covariance's `cov[i:M, i] = cov[i, i:M] = v`: a column, then a row), every array they make but the last read
only at places (a gather: the row read back after the column's store is the where of the gathers, computed at those
places). The step's program then returns each x, position and bound, and the runner assigns
`memory[..., position:position + 1, ..., start:stop, ...] = x[..., start:stop, ...]` in turn (a position outside
the axis, or an empty range, stores nothing, as the where would; a range's bounds clamped to the axis). The program
reads the array as it was at the step's start (it runs before the stores), so it may read it anywhere, but returns
no view of it. The memory is the loop's own: its first value is copied once before the first step (it may be the
caller's array, or a value read after the loop).

Only where the device's memory is NumPy's (the numba device); a captured graph (bind) runs the body as it was.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tracejit.ir import build
from tracejit.ir.graph import MOVEMENT, Node, Op, replace, toposort


@dataclass(frozen=True)
class _Store:
    carried: int  # which carried value (its position among them)
    axes: tuple[int, ...]  # the axes of the place (none, one, or several: `out[:, i, j, :] = v`)
    lengths: tuple[int, ...]  # their lengths
    value: int  # the output of the step's program holding x
    positions: tuple[int, ...]  # the outputs holding the positions along them
    ranges: tuple[int, ...] = ()  # the axes stored over a range of places (`x[a:b] = v`, `x[i:]`, bounds read when run)
    bounds: tuple[int, ...] = ()  # the outputs holding each range's first place and the place past its last


def stores(outputs: list[Node], carried: list[Node]) -> tuple[list[Node], list[_Store]]:
    """The body's outputs with each carried value's stores replaced by what they store (x: the last store's in the
    carried value's place, the others', the positions and the bounds appended), and the stores, in the order they
    are made. `carried`: the INPUT stand-ins of the carried values, in order (the first len(carried) outputs are
    their next values)."""
    readers: dict[Node, list[tuple[Node, int]]] = {}
    for n in toposort(outputs):
        for j, s in enumerate(n.srcs):
            readers.setdefault(s, []).append((n, j))
    chains: dict[int, list[tuple[Node, _Where]]] = {}
    for k, start in enumerate(carried):
        chain = _chain(outputs[k], start, outputs, readers)
        if chain:
            chains[k] = chain
    if not chains:
        return list(outputs), []
    read = _Reads({version for chain in chains.values() for version, _ in chain[:-1]})
    new = read.through(list(outputs))
    found = []
    for k, chain in chains.items():
        for m, (_, where) in enumerate(chain):
            x, positions, bounds = (read.through(list(n)) for n in ((where.x,), where.positions, where.bounds))
            value = k if m == len(chain) - 1 else len(new)
            if value == k:
                new[k] = x[0]
            else:
                new.append(x[0])
            at = len(new)
            new.extend(build.reshape(p, ()) for p in positions)
            new.extend(build.reshape(b, ()) for b in bounds)
            lengths = tuple(where.shape[a] for a in where.axes)
            ends = tuple(range(at + len(positions), len(new)))
            found.append(
                _Store(k, where.axes, lengths, value, tuple(range(at, at + len(positions))), where.ranges, ends)
            )
    return new, found


@dataclass(frozen=True)
class _Where:
    """A store where(places and ranges, expand(x), old) read apart: x, the place's axes and positions, the ranges'
    axes and bounds (first, past the last, in turn)."""

    shape: tuple[int, ...]
    x: Node
    axes: tuple[int, ...]
    positions: tuple[Node, ...]
    ranges: tuple[int, ...]
    bounds: tuple[Node, ...]


def _chain(out: Node, start: Node, outputs: list[Node], readers) -> list[tuple[Node, _Where]] | None:
    """The stores that make a carried value's next value `out` from its value at the step's start, in the order they
    are made ([(the version each makes, the store)]), where each is a store into a place or ranges (_where) and
    every version but the last is read only by the next store (as the array it changes) and by gathers (`cov[i, :]`
    after `cov[:, i] = v`: read at places, computed where read, _Reads); else None. (The value at the step's start
    is read as anything else is: the program runs before the stores.)"""
    if readers.get(out) or outputs.count(out) != 1 or start in outputs:
        return None
    chain: list[tuple[Node, _Where]] = []
    node = out
    while node is not start:
        if node.op is not Op.WHERE:
            return None
        where = _where(node)
        if where is None:
            return None
        chain.append((node, where))
        node = node.srcs[2]
    chain.reverse()
    for m, (version, _) in enumerate(chain[:-1]):
        after = chain[m + 1][0]
        for reader, j in readers.get(version, ()):
            if not (reader is after and j == 2 or reader.op is Op.GATHER and j == 0):
                return None
    # (the program reads the array as it was before the step's stores, but what it returns must not be a view of
    # it: stored into in place, the view would change under the stores made after it is read)
    stored = [n for _, where in chain for n in (where.x, *where.positions, *where.bounds)]
    if any(_unviewed(n) is start for n in (*outputs, *stored)):
        return None
    return chain or None


def _unviewed(node: Node) -> Node:
    while node.op in MOVEMENT:
        node = node.srcs[0]
    return node


def _where(node: Node) -> _Where | None:
    """The store `node` = where(cond, value, old) makes, where cond picks a place (eq(iota along an axis, a
    position), as `x[i] = v` traces), ranges (a broadcast `start <= iota < stop` along an axis, as `x[a:b] = v` with
    bounds read when the kernel runs traces: numpy/bounded_slices.py), or both joined by `and`, each along an axis
    of its own; and value is x broadcast, of length 1 along the place's axes (along a range's, 1 or the whole
    axis). Else None."""
    cond, value, _ = node.srcs
    tests = _tests(cond)
    if not tests:
        return None
    axes = [a for kind, a, _ in tests if kind == "place"]
    ranges = [a for kind, a, _ in tests if kind == "range"]
    if len(set(axes + ranges)) != len(tests):
        return None
    x = value.srcs[0] if value.op is Op.EXPAND else value
    shape = node.shape
    if len(x.shape) != len(shape) or any(x.shape[a] != 1 for a in axes):
        return None
    positions = tuple(p for kind, _, found in tests if kind == "place" for p in found)
    bounds = tuple(b for kind, _, found in tests if kind == "range" for b in found)
    return _Where(shape, x, tuple(axes), positions, tuple(ranges), bounds)


def _tests(cond: Node) -> list[tuple[str, int, tuple[Node, ...]]] | None:
    """[(kind, axis, its 0-d values)] of a store's test: ("place", axis, (position,)), ("range", axis, (start,
    stop)), or several such joined by `and`; else None."""
    span = _range(cond)  # (an `and` itself: tried first)
    if span is not None:
        return [("range", span[0], span[1:])]
    if cond.op is Op.AND and cond.dtype == np.bool_:
        found = [_tests(s) for s in cond.srcs]
        return None if any(f is None for f in found) else [t for f in found for t in f]  # type: ignore[union-attr]
    place = _place(cond)
    return None if place is None else [("place", place[0], (place[1],))]


def _place(cond: Node) -> tuple[int, Node] | None:
    """(axis, position) of eq(iota along axis, the position broadcast), else None."""
    if cond.op is not Op.EQ:
        return None
    for along, other in (cond.srcs, reversed(cond.srcs)):
        position = _scalar(other)
        if along.op is Op.IOTA and position is not None:
            if along.dtype.kind in "iu" and other.dtype == along.dtype:
                return along.arg, position
    return None


def _range(cond: Node) -> tuple[int, Node, Node] | None:
    """(axis, start, stop) of and(start <= iota, iota < stop) along one axis (a vector of its places, reshaped and
    broadcast over the other axes, as numpy/bounded_slices.py makes a slice's mask), else None."""
    moved = cond.srcs[0] if cond.op is Op.EXPAND else cond
    inside = moved.srcs[0] if moved.op is Op.RESHAPE else moved
    if len(inside.shape) != 1 or inside.op is not Op.AND or len(moved.shape) != len(cond.shape):
        return None
    along = [d for d, n in enumerate(moved.shape) if n != 1]
    axis = 0 if len(cond.shape) == 1 else along[0] if len(along) == 1 else None
    if axis is None or moved.shape[axis] != inside.shape[0]:
        return None
    low, high = inside.srcs
    if low.op is not Op.LE or high.op is not Op.LT or low.srcs[1] is not high.srcs[0]:
        return None
    places = low.srcs[1]
    if places.op is not Op.IOTA or places.arg != 0 or places.dtype.kind not in "iu":
        return None
    start, stop = _scalar(low.srcs[0]), _scalar(high.srcs[1])
    if start is None or stop is None or start.dtype.kind not in "iu" or stop.dtype.kind not in "iu":
        return None
    return axis, start, stop


def _scalar(node: Node) -> Node | None:
    """The one value `node` broadcasts (reshapes and expands of a value of one element, a constant), else None."""
    if node.op is Op.CONST:
        return build.const(node.arg, node.dtype, ())
    while node.op in (Op.EXPAND, Op.RESHAPE) and math.prod(node.srcs[0].shape) == 1:
        node = node.srcs[0]
    return node if math.prod(node.shape) == 1 else None


class _Reads:
    """The body's graph with every read of an array version a chain of stores makes but the last (`cov[i, :]` read
    after `cov[:, i] = v`: a gather of where(the column, v, cov)) computed at the places read instead: the gather of
    a where is the where of the gathers, down to the value the array had at the step's start, so that no version is
    computed whole and the program reads the carried array only as it was before the step's stores."""

    def __init__(self, versions: set[Node]):
        self.versions = versions
        self.mapping: dict[Node, Node] = {}

    def through(self, nodes: list[Node]) -> list[Node]:
        for n in toposort(nodes):  # (what a gather reads, and the stores it reads through, come before it)
            if n.op is Op.GATHER and n.srcs[0] in self.versions and n not in self.mapping:
                self.mapping[n] = self._at(n.srcs[0], replace(list(n.srcs[1:]), self.mapping), n.arg)
        return replace(nodes, self.mapping)

    def _at(self, version: Node, indices: list[Node], axes) -> Node:
        cond, value = replace(list(version.srcs[:2]), self.mapping)
        old = version.srcs[2]
        at = tuple(indices)
        older = self._at(old, indices, axes) if old in self.versions else build.gather(old, at, axes)
        return build.where(build.gather(cond, at, axes), build.gather(value, at, axes), older)


def _store(memory: np.ndarray, value, positions: tuple, bounds: tuple, store: _Store) -> None:
    """memory[place, start:stop] = value (read when it runs: a bound step's 0-d arrays change between steps). A place
    outside its axis, or an empty range, stores nothing, as the where would; a range's bounds are clamped to the
    axis, as the where's test of each place is."""
    key: list = [slice(None)] * memory.ndim
    for position, axis, length in zip(positions, store.axes, store.lengths):
        at = int(np.asarray(position).reshape(()))
        if not 0 <= at < length:
            return
        key[axis] = slice(at, at + 1)
    value = np.asarray(value)
    taken: list = [slice(None)] * memory.ndim
    for n, axis in enumerate(store.ranges):
        length = memory.shape[axis]
        low, high = (min(max(int(np.asarray(b).reshape(())), 0), length) for b in bounds[2 * n : 2 * n + 2])
        if high <= low:
            return
        key[axis] = slice(low, high)
        if value.shape[axis] != 1:
            taken[axis] = slice(low, high)
    memory[tuple(key)] = value[tuple(taken)]


class InPlaceBody:
    """A loop body's executable whose stores into one place of carried arrays are made in place (module
    docstring): called as the plain body's executable is, it returns the carried arrays' memory as their next
    values. `plain` compiles the body as traced, for bind()."""

    staged = False

    def __init__(self, executable, found: list[_Store], first: int, count: int, plain):
        self.executable, self.found, self.first, self.count = executable, found, first, count
        self._plain, self._compile_plain = None, plain
        self.program = executable.program
        self.kernels = executable.kernels
        self.in_place = frozenset(s.carried for s in found)
        keys = list(getattr(self.program, "outputs", ()))[:count]
        # the memory Staged offers for a stored value's output is the carried array's, not the stored value's (an
        # output shared with another carried value keeps that value's memory)
        self._stored_keys = frozenset(keys[k] for k in self.in_place if k < len(keys)) - {
            k for j, k in enumerate(keys) if j not in self.in_place
        }

    def own(self, carried: list) -> list:
        """The carried values' first values, those stored into in place copied (the loop's own memory)."""
        return [np.array(v, order="C") if k in self.in_place else v for k, v in enumerate(carried)]

    def __call__(self, args, into=None):
        if into:
            into = {key: m for key, m in into.items() if key not in self._stored_keys and self._fits(key, m)}
        outs = list(self.executable(args, into) if into else self.executable(args))
        for s, store in zip(self.found, self._stores(args, outs)):
            _store(*store, s)
        for k in self.in_place:
            outs[k] = args[self.first + k]
        return outs[: self.count]

    def _stores(self, args, outs) -> list[tuple]:
        """Each store's memory, value, positions and bounds (all read before any is made: a carried array's last
        store's value is its output)."""
        return [
            (
                args[self.first + s.carried],
                outs[s.value],
                tuple(outs[p] for p in s.positions),
                tuple(outs[b] for b in s.bounds),
            )
            for s in self.found
        ]

    def _fits(self, key, memory) -> bool:
        buffer = self.program.buffers.get(key)
        return buffer is not None and tuple(buffer.shape) == np.shape(memory)

    def bind_steps(self, args, into=None):
        """bind() for a loop whose steps run bound (frontend/bound_loops.py), after own(): the step's program bound,
        then each store as one more launch, writing into the carried array's memory. (`into`: the other carried
        values' memory only.)"""
        outs, launches, allocated = self.executable.bind(args, into)
        outs = list(outs)
        for s, store in zip(self.found, self._stores(args, outs)):
            launches.append((_store, (*store, s)))
        for k in self.in_place:
            outs[k] = args[self.first + k]
        return outs[: self.count], launches, allocated

    @property
    def plain(self):
        if self._plain is None:
            self._plain = self._compile_plain()
        return self._plain

    def bind(self, args, into=None):
        return self.plain.bind(args, into)

    @property
    def allocations(self):
        return getattr(self.plain, "allocations", None)
