"""Whether the steps of a loop over elements (ir/element_loops.py) are independent, so that they may run at once
on several threads: the dependence test of issue 46's "loops whose iterations are independent may run in parallel
where the dependence analysis proves it" (the same test whether the loop is written with `range` or with numba's
`prange`: the order of the steps is NumPy's either way, and a loop this test cannot prove runs in order).

The test is the one a reader applies to `for i in range(n): for j in range(m): C[i, j] = ...`: every array the loop
changes is read and written, by the loop and its inner loops, only at places whose index on one axis is the loop's
index itself, the same axis for every access to that array. Distinct steps then touch distinct rows (or columns)
of it, which holds wherever the index stays inside that axis: negative indices count from the end, so the caller
runs the steps at once only for bounds within [0, size) (`Independent.sizes`). Everything else a step computes is
its own: its 0-d values, inner loops' carried numbers, temporaries made inside it. A store of many elements (a
slab, `out[:, f] += w[f] * x`) counts as an access at the places its tests allow (`iota == f` fixes an axis to
the index), its value read there. A loop that carries a number from one step to the next (a running sum), breaks,
or reads or stores at a fixed place is not independent.

`work(plan)` estimates the element operations one step costs, to decide whether threads pay for themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracejit.ir.element_loops import Plan, is_flat_positions
from tracejit.ir.graph import ELEMENTWISE, Node, Op

_UNKNOWN_TRIPS = 32  # an inner loop whose bounds are read when it runs: steps assumed, for work()


@dataclass(frozen=True)
class Independent:
    """The steps of a loop are independent where its index stays in [0, min(sizes)): `sizes` are the lengths of
    the axes it indexes."""

    sizes: tuple[int, ...]


class _Dependent(Exception):
    pass


def independent(plan: Plan) -> Independent | None:
    """Independent(sizes) where the steps of the plan's loop are independent (module docstring), else None."""
    loop = plan.loop
    if loop.kind != "for" or loop.until is not None or loop.bounds[2] != 1:
        return None
    carried = loop.inputs[1 : 1 + loop.carried]
    if any(x.shape == () for x in carried):
        return None  # (a number carried from step to step: a reduction, in order)
    axes: dict[Node, int] = {}
    sizes: list[int] = []
    try:
        _scope(plan, {x: x for x in carried}, {loop.inputs[0]}, axes, sizes, {})
    except _Dependent:
        return None
    return Independent(tuple(sizes))


_TOP = "top"  # a place's coordinate, or an index, equal to the outer loop's index
Coordinate = object  # _TOP, ("axis", k): the coordinate on axis k of the place computed, or None: unknown
_SHAPING = (Op.EXPAND, Op.RESHAPE, Op.PERMUTE, Op.SLICE, Op.PAD)


def _source_place(n: Node, place: tuple) -> tuple:
    """The coordinates of the place in a movement op's source that its place `place` reads."""
    src = n.srcs[0]
    if n.op is Op.EXPAND:
        return tuple(None if s == 1 else c for s, c in zip(src.shape, place))
    if n.op is Op.PERMUTE:
        out: list = [None] * len(place)
        for c, axis in zip(place, n.arg):
            out[axis] = c
        return tuple(out)
    if n.op is Op.SLICE:
        return tuple(c if (start, step) == (0, 1) else None for (start, step, _), c in zip(n.arg, place))
    if n.op is Op.PAD:
        pads, _ = n.arg
        return tuple(
            c if before == 0 and s == size else None for (before, _), s, size, c in zip(pads, src.shape, n.shape, place)
        )
    kept = [c for c, s in zip(place, n.shape) if s != 1]  # a reshape
    if [s for s in n.shape if s != 1] == [s for s in src.shape if s != 1]:
        it = iter(kept)
        return tuple(next(it) if s != 1 else None for s in src.shape)
    return (None,) * len(src.shape)


def _axes(shape: tuple[int, ...]) -> tuple:
    return tuple(("axis", k) for k in range(len(shape)))


def _scope(
    plan: Plan,
    shared: dict[Node, Node],
    tops: set[Node],
    axes: dict[Node, int],
    sizes: list[int],
    aliases: dict[Node, Node],
) -> None:
    """Check the accesses of `plan`'s statements: `shared` maps its inputs that hold an array the outer loop changes
    to that array (the outer loop's input), `tops` are nodes equal to the outer loop's index (its own and those of
    the loops around `plan` equal to it), `aliases` the inputs computed where they are read (Plan.aliases)."""
    aliases = {**aliases, **plan.aliases}

    def owner(n: Node) -> Node | None:
        m = plan.memory.get(n)
        return shared.get(m) if m is not None else None

    def access(array: Node, coordinates: tuple) -> None:
        """A read or store of `array` at a place of these coordinates: where the outer loop changes it, on one axis
        the outer loop's index, the same axis for every access."""
        top = owner(array)
        if top is None:
            return
        found = [a for a, c in enumerate(coordinates) if c == _TOP]
        want = axes.setdefault(top, found[0] if found else -1)
        if want not in found:
            raise _Dependent
        sizes.append(array.shape[want])

    def coordinate(n: Node, place: tuple) -> Coordinate:
        """What the integer value n is at a place of these coordinates: _TOP, ("axis", k) or None."""
        n = aliases.get(n, n) if n not in tops else n
        if n in tops:
            return _TOP
        if n.op is Op.IOTA:
            return place[n.arg]
        if n.op is Op.CAST and n.dtype.kind in "iu" and n.srcs[0].dtype.kind in "iu" and n.dtype.itemsize >= 4:
            return coordinate(n.srcs[0], place)  # (a place, an index inside its axis: the same value)
        if n.op in _SHAPING:
            return coordinate(n.srcs[0], _source_place(n, place))
        if n.op is Op.GATHER:
            return coordinate(n.srcs[0], gathered(n, place))
        return None

    def gathered(n: Node, place: tuple) -> tuple:
        """The coordinates of the place a GATHER reads in its source (an index counted from the end: bounds in
        [0, size) for the outer loop's, `sizes`)."""
        indices = iter(n.srcs[1:])
        out = []
        for axis, size in zip(n.arg, n.srcs[0].shape):
            c = place[axis] if axis is not None else coordinate(next(indices), place)
            if c == _TOP:
                sizes.append(size)
            out.append(c)
        return tuple(out)

    statements = {st.node for st in plan.statements} | {v for st in plan.statements for v in st.values.values()}

    def reads(n: Node, place: tuple, seen: set, first: bool = True) -> None:
        """The arrays a statement's expression reads at a place of these coordinates (down to the values of other
        statements): each read of an array the loop changes checked."""
        if (n, place) in seen:
            return
        seen.add((n, place))
        if owner(n) is not None:
            access(n, place)  # (the array itself, at the place)
            return
        if not first and n in statements:
            return
        if n.op is Op.GATHER:
            if not is_flat_positions(n.srcs[0]):
                reads(n.srcs[0], gathered(n, place), seen, False)
            for s in n.srcs[1:]:
                reads(s, place, seen, False)
        elif n.op is Op.REDUCE:
            reads(n.srcs[0], _axes(n.srcs[0].shape), seen, False)
        elif n.op in _SHAPING:
            reads(n.srcs[0], _source_place(n, place), seen, False)
        elif n.op in ELEMENTWISE:
            for s in n.srcs:
                reads(s, place, seen, False)
        else:  # (anything else: read at places unknown)
            for s in n.srcs:
                reads(s, (None,) * len(s.shape), seen, False)

    def fixed(tests: tuple[Node, ...], shape: tuple[int, ...]) -> tuple:
        """The coordinates of the places a slab's tests allow: an axis the outer loop's index fixes (`iota ==
        index`, of their `and`s) _TOP."""
        place = list(_axes(shape))
        parts = [aliases.get(t, t) for t in tests]
        while parts:
            t = parts.pop()
            if t.op is Op.AND and t.dtype.kind == "b":
                parts += [aliases.get(s, s) for s in t.srcs]
            elif t.op is Op.EQ and t.shape == shape:
                sides = {coordinate(s, _axes(shape)) for s in t.srcs}
                axis = next((c[1] for c in sides if isinstance(c, tuple)), None)
                if _TOP in sides and axis is not None:
                    place[axis] = _TOP
                    sizes.append(shape[axis])
        return tuple(place)

    for st in plan.statements:
        n = st.node
        if st.kind == "value":
            if n in plan.reads and owner(plan.reads[n][0]) is not None:
                raise _Dependent  # (an element at a fixed place)
            reads(n, (), set())
        elif st.kind == "store":
            x, at, value, guard = plan.stores[n]
            if owner(x) is not None:
                if at.op is not Op.GATHER:
                    raise _Dependent
                access(x, tuple(coordinate(i, ()) for i in at.srcs[1:]))
            for s in (at, value) + ((guard,) if guard is not None else ()):
                reads(s, (), set())
        elif st.kind == "slab":  # (its value is computed, and stored, only where its tests hold)
            x, tests, value = plan.slabs[n]
            place = fixed(tests, x.shape)
            access(x, place)
            for s in (value, *tests):
                reads(s, place, set())
        elif st.kind == "temporary":
            reads(n, _axes(n.shape), set())
        else:
            inner = st.inner
            assert inner is not None
            first = 1 if inner.loop.kind == "for" else 0
            heads = inner.loop.heads
            inner_shared: dict[Node, Node] = {}
            inner_tops = set(tops)
            inner_aliases = dict(aliases)
            for x, src in zip(inner.loop.inputs[first:], n.srcs[heads:]):
                top = owner(src) if src.shape else None
                if top is not None:
                    inner_shared[x] = top
                if src.shape == () and coordinate(src, ()) == _TOP:
                    inner_tops.add(x)
                if src in aliases:  # (passed on: computed where the inner loop reads it too)
                    inner_aliases.setdefault(x, aliases[src])
            for src in n.srcs[:heads]:
                reads(src, (), set())
            for src in n.srcs[heads:]:
                if src.shape and src not in plan.memory:  # (an alias: computed where the inner loop reads it)
                    reads(src, (None,) * len(src.shape), set())
            _scope(inner, inner_shared, inner_tops, axes, sizes, inner_aliases)


def work(plan: Plan) -> int:
    """About how many element operations one step of the plan's loop costs: its statements, an inner loop's times
    its steps (where its bounds are constants; else _UNKNOWN_TRIPS)."""
    total = 0
    for st in plan.statements:
        if st.kind == "loop" and st.inner is not None:
            loop = st.inner.loop
            if loop.kind == "for" and None not in loop.bounds and loop.bounds[2] != 0:
                trips = len(range(*loop.bounds))
            else:
                trips = _UNKNOWN_TRIPS
            total += trips * work(st.inner)
        elif st.kind in ("slab", "temporary"):
            total += st.node.size
        else:
            total += 1
    return max(total, 1)
