"""A loop's store into one place of an array it carries, made in place: `pos_save[:, :, i + 1] = pos` in a time
step, `history[t] = u`, `KE_save[i + 1] = KE`.

A loop compiled as a loop (frontend/staged.py) computes each carried array's next value whole: the store above is
`where(iota == i + 1, pos, pos_save)` over the whole history, a copy of every step saved so far at every step
(n-body's 100 x 3 x 1001 history: 57 us a step, more than its forces). XLA's dynamic-update-slice is the remedy: the
body's program computes only what is stored and where, and the step writes it into the carried array's memory.

A carried array's next value is such a store when it is `where(eq(iota along axis d, a position), expand(x),
the array's value at the step's start)`, the position one number (the index, `i + 1`, any value the body computes)
and x one along d, and the body reads the array nowhere else; or the same along several axes, the tests joined by
`and` (`out[:, i, j, :] = v`, a convolution's output place by place). The step's program then returns x and the position
in its place, and the runner assigns `memory[..., position:position + 1, ...] = x` (a position outside the axis
stores nothing, as the where would). The memory is the loop's own: its first value is copied once before the
first step (it may be the caller's array, or a value read after the loop).

Only where the device's memory is NumPy's (the numba device); a captured graph (bind) runs the body as it was.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tracejit.ir import build
from tracejit.ir.graph import Node, Op, toposort


@dataclass(frozen=True)
class _Store:
    carried: int  # which carried value (its position among them)
    axes: tuple[int, ...]  # the axes of the place (one, or several: `out[:, i, j, :] = v`)
    lengths: tuple[int, ...]  # their lengths
    value: int  # the output of the step's program holding x
    positions: tuple[int, ...]  # the outputs holding the positions along them


def stores(outputs: list[Node], carried: list[Node]) -> tuple[list[Node], list[_Store]]:
    """The body's outputs with each carried value's store into one place replaced by what it stores (x), and the
    positions appended; and the stores. `carried`: the INPUT stand-ins of the carried values, in order (the first
    len(carried) outputs are their next values)."""
    users: dict[Node, int] = {}
    for n in toposort(outputs):
        for s in n.srcs:
            users[s] = users.get(s, 0) + 1
    new, found = list(outputs), []
    for k, start in enumerate(carried):
        out = outputs[k]
        if users.get(start, 0) != 1 or users.get(out, 0) or outputs.count(out) != 1 or out.op is not Op.WHERE:
            continue
        cond, value, old = out.srcs
        places = _places(cond) if old is start else None
        if not places or value.op is not Op.EXPAND:
            continue
        axes = tuple(axis for axis, _ in places)
        x = value.srcs[0]
        if len(set(axes)) != len(axes) or len(x.shape) != len(out.shape) or any(x.shape[a] != 1 for a in axes):
            continue
        lengths = tuple(out.shape[a] for a in axes)
        found.append(_Store(k, axes, lengths, k, tuple(range(len(new), len(new) + len(places)))))
        new[k] = x
        new.extend(build.reshape(position, ()) for _, position in places)
    return new, found


def _places(cond: Node) -> list[tuple[int, Node]] | None:
    """[(axis, position)] of eq(iota along axis, the position broadcast), or of several such joined by `and` (a
    place picked along several axes), else None."""
    if cond.op is Op.AND and cond.dtype == np.bool_:
        found = [_places(s) for s in cond.srcs]
        return None if any(f is None for f in found) else [p for f in found for p in f]  # type: ignore[union-attr]
    place = _place(cond)
    return None if place is None else [place]


def _place(cond: Node) -> tuple[int, Node] | None:
    """(axis, position) of eq(iota along axis, the position broadcast), else None."""
    if cond.op is not Op.EQ:
        return None
    for along, other in (cond.srcs, reversed(cond.srcs)):
        if along.op is Op.IOTA and other.op is Op.EXPAND and math.prod(other.srcs[0].shape) == 1:
            if along.dtype.kind in "iu" and other.dtype == along.dtype:
                return along.arg, other.srcs[0]
    return None


def _store(memory: np.ndarray, value, positions: tuple, axes: tuple[int, ...], lengths: tuple[int, ...]) -> None:
    key: list = [slice(None)] * memory.ndim
    for position, axis, length in zip(positions, axes, lengths):
        at = int(np.asarray(position).reshape(()))
        if not 0 <= at < length:  # (a place outside the array stores nothing, as the where would)
            return
        key[axis] = slice(at, at + 1)
    memory[tuple(key)] = value


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
        self._stored_keys = frozenset(keys[s.value] for s in found) - {
            k for j, k in enumerate(keys) if j not in self.in_place
        }

    def own(self, carried: list) -> list:
        """The carried values' first values, those stored into in place copied (the loop's own memory)."""
        return [np.array(v, order="C") if k in self.in_place else v for k, v in enumerate(carried)]

    def __call__(self, args, into=None):
        if into:
            into = {key: m for key, m in into.items() if key not in self._stored_keys and self._fits(key, m)}
        outs = list(self.executable(args, into) if into else self.executable(args))
        for s in self.found:
            memory = args[self.first + s.carried]
            _store(memory, outs[s.value], tuple(outs[p] for p in s.positions), s.axes, s.lengths)
            outs[s.carried] = memory
        return outs[: self.count]

    def _fits(self, key, memory) -> bool:
        buffer = self.program.buffers.get(key)
        return buffer is not None and tuple(buffer.shape) == np.shape(memory)

    def bind_steps(self, args, into=None):
        """bind() for a loop whose steps run bound (frontend/bound_loops.py), after own(): the step's program bound,
        then each store as one more launch, writing into the carried array's memory. (`into`: the other carried
        values' memory only.)"""
        outs, launches, allocated = self.executable.bind(args, into)
        outs = list(outs)
        for s in self.found:
            memory = args[self.first + s.carried]
            launches.append((_store, (memory, outs[s.value], tuple(outs[p] for p in s.positions), s.axes, s.lengths)))
            outs[s.carried] = memory
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
