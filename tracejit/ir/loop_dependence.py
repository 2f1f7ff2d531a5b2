"""Whether the steps of a loop over elements (ir/element_loops.py) are independent, so that they may run at once
on several threads: the dependence test of issue 46's "loops whose iterations are independent may run in parallel
where the dependence analysis proves it" (the same test whether the loop is written with `range` or with numba's
`prange`: the order of the steps is NumPy's either way, and a loop this test cannot prove runs in order).

The test is the one a reader applies to `for i in range(n): for j in range(m): C[i, j] = ...`: every array the loop
changes is read and written, by the loop and its inner loops, only at places whose index on one axis is the loop's
index itself, the same axis for every access to that array. Distinct steps then touch distinct rows (or columns)
of it, which holds wherever the index stays inside that axis: negative indices count from the end, so the caller
runs the steps at once only for bounds within [0, size) (`Independent.sizes`). Everything else a step computes is
its own: its 0-d values, inner loops' carried numbers, temporaries made inside it. A loop that carries a number
from one step to the next (a running sum), breaks, reads or stores at a fixed place, or stores many elements at
once (a slab: refused for now) is not independent.

`work(plan)` estimates the element operations one step costs, to decide whether threads pay for themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracejit.ir.element_loops import Plan, is_flat_positions
from tracejit.ir.graph import Node, Op

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
        _scope(plan, {x: x for x in carried}, {loop.inputs[0]}, axes, sizes)
    except _Dependent:
        return None
    return Independent(tuple(sizes))


def _scope(plan: Plan, shared: dict[Node, Node], tops: set[Node], axes: dict[Node, int], sizes: list[int]) -> None:
    """Check the accesses of `plan`'s statements: `shared` maps its inputs that hold an array the outer loop changes
    to that array (the outer loop's input), `tops` are its nodes equal to the outer loop's index."""

    def owner(n: Node) -> Node | None:
        m = plan.memory.get(n)
        return shared.get(m) if m is not None else None

    def access(array: Node, indices: tuple[Node, ...]) -> None:
        top = owner(array)
        if top is None:
            return
        found = [a for a, i in enumerate(indices) if i in tops]
        want = axes.setdefault(top, found[0] if found else -1)
        if want not in found:
            raise _Dependent
        sizes.append(array.shape[want])

    statements = {st.node for st in plan.statements} | {v for st in plan.statements for v in st.values.values()}

    def reads(n: Node, seen: set[Node], first: bool = True) -> None:
        """The arrays a statement's expression reads (down to the values of other statements): each GATHER's
        checked, any other way into an array the loop changes refused."""
        if n in seen or (not first and n in statements):
            return
        seen.add(n)
        if n.op is Op.GATHER and not is_flat_positions(n.srcs[0]):
            access(n.srcs[0], n.srcs[1:])
            srcs = n.srcs[1:]
        elif owner(n) is not None:
            raise _Dependent  # (a slice or a whole read of an array the loop changes)
        else:
            srcs = n.srcs
        for s in srcs:
            reads(s, seen, False)

    for st in plan.statements:
        n = st.node
        if st.kind == "value":
            if n in plan.reads and owner(plan.reads[n][0]) is not None:
                raise _Dependent  # (an element at a fixed place)
            reads(n, set())
        elif st.kind == "store":
            x, at, value, guard = plan.stores[n]
            if owner(x) is not None:
                if at.op is not Op.GATHER:
                    raise _Dependent
                access(x, at.srcs[1:])
            for s in (at, value) + ((guard,) if guard is not None else ()):
                reads(s, set())
        elif st.kind in ("slab", "temporary"):
            if st.kind == "slab" and owner(plan.slabs[n][0]) is not None:
                raise _Dependent
            reads(plan.slabs[n][2] if st.kind == "slab" else n, set())
            for t in plan.slabs[n][1] if st.kind == "slab" else ():
                reads(t, set())
        else:
            inner = st.inner
            assert inner is not None
            first = 1 if inner.loop.kind == "for" else 0
            heads = inner.loop.heads
            inner_shared: dict[Node, Node] = {}
            inner_tops: set[Node] = set()
            for x, src in zip(inner.loop.inputs[first:], n.srcs[heads:]):
                top = owner(src) if src.shape else None
                if top is not None:
                    inner_shared[x] = top
                if src in tops:
                    inner_tops.add(x)
            for src in n.srcs[:heads]:
                reads(src, set())
            _scope(inner, inner_shared, inner_tops, axes, sizes)


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
