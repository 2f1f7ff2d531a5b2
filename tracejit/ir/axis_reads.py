"""Which positions of its sources a graph reads, axis by axis: each node axis follows one source axis element
for element (the graph can run on blocks along it), or the node reads across a source axis (it needs all of
it). What a program over arrays cut into blocks (Dask) is split by: dask/plan.py."""

from __future__ import annotations

from collections.abc import Callable

from tracejit.ir.graph import ELEMENTWISE, Node, Op

# A source axis, seen from a node: the node axis that follows it (int), None where the node does not depend on
# it (a size-1 axis), or a string saying what reads across it ("np.cumsum along it").
Read = int | str | None
Source = tuple  # ("input", position) | ("iota", node) | ("table", node) | ("cut", node)
Reads = dict  # Source -> tuple[Read, ...], one per source axis

TWO_AXES = "it is read along two axes at once (x + x.T)"
_ACROSS = {
    Op.SCAN: "a running total (np.cumsum, ufunc.accumulate) along it",
    Op.SORT: "sorting along it (np.sort, np.median, np.percentile, ...)",
    Op.SLICE: "a slice or reversal along it (x[1:] - x[:-1], x[::-1])",
    Op.PAD: "np.pad, np.roll or joining along it",
    Op.RESHAPE: "a reshape that merges or splits it",
    Op.REDUCE: "a reduction along it",
    Op.GATHER: "indexing with an index array along it (x[idx], np.take)",
    Op.SCATTER: "a scatter into it (x[idx] = v, np.add.at)",
}


def axis_maps(node: Node) -> list[tuple[Read, ...]]:
    """For each source of `node`: for each of its axes, the node axis it becomes, or why it is read across."""
    op, srcs = node.op, node.srcs
    if op in ELEMENTWISE:
        return [tuple(range(len(node.shape)))] * len(srcs)
    (src, *rest) = srcs
    same = list(range(len(src.shape)))
    if op is Op.EXPAND:  # a broadcast axis has size 1 in the source: nothing follows it
        return [tuple(same)]
    if op is Op.PERMUTE:
        return [tuple(node.arg.index(d) for d in same)]
    if op is Op.RESHAPE:
        return [reshape_map(src.shape, node.shape)]
    if op is Op.SLICE:
        return [tuple(d if node.arg[d] == (0, 1, src.shape[d]) else _ACROSS[op] for d in same)]
    if op is Op.PAD:
        return [tuple(d if node.arg[0][d] == (0, 0) else _ACROSS[op] for d in same)]
    if op is Op.REDUCE:
        return [tuple(_ACROSS[op] if d in node.arg[1] else d for d in same)]
    if op in (Op.SCAN, Op.SORT):
        return [tuple(_ACROSS[op] if d == node.arg[0 if op is Op.SORT else 1] else d for d in same)]
    if op is Op.GATHER:
        gathered = tuple(_ACROSS[op] if a is None else a for a in node.arg)
        return [gathered] + [tuple(range(len(node.shape)))] * len(rest)
    if op is Op.SCATTER:
        target = (_ACROSS[op],) + tuple(same[1:])
        return [target, (_ACROSS[op],), target]
    return [tuple(f"{op.value} along it" for _ in s.shape) for s in srcs]


def reshape_map(old: tuple[int, ...], new: tuple[int, ...]) -> tuple[Read, ...]:
    """For each axis of `old`: the axis of `new` it is, element for element, where a reshape keeps it whole
    (size-1 axes come and go freely), else why not."""
    out: list[Read] = [None if s == 1 else _ACROSS[Op.RESHAPE] for s in old]
    i = j = 0
    while i < len(old) and j < len(new):
        if old[i] == 1:
            i += 1
        elif new[j] == 1:
            j += 1
        elif old[i] == new[j]:
            out[i] = j
            i, j = i + 1, j + 1
        else:  # a run of axes merged or split: skip to where both products meet again
            a, b = old[i], new[j]
            i, j = i + 1, j + 1
            while a != b:
                if a < b:
                    a, i = a * old[i], i + 1
                else:
                    b, j = b * new[j], j + 1
    return tuple(out)


def merge(a: Read, b: Read) -> Read:
    """One source axis met on two paths into a node."""
    if a is None or a == b:
        return b
    if b is None or isinstance(a, str):
        return a
    return b if isinstance(b, str) else TWO_AXES


class AxisReads:
    """reads(node): for each source the node depends on, how it reads each source axis (see Read).

    `cut(node, reads)` (optional) may make a node a source of its own, whose value comes from elsewhere (a
    reduction over blocks, computed before): it returns True for such a node, given `reads` to ask about the
    nodes below. `joined` collects, for every node axis met, the source axes that follow it together."""

    def __init__(
        self,
        cut: Callable[[Node, Callable], bool] | None = None,
        below: Callable[[Node], tuple[Node, ...]] | None = None,
    ):
        self._cut = cut
        self._below = below  # the nodes a cut decision looks at (default: the node's sources)
        self._memo: dict[Node, Reads] = {}
        self.joined: list[list[tuple[Source, int]]] = []

    def __contains__(self, node: Node) -> bool:
        return node in self._memo

    def reads(self, node: Node) -> Reads:
        memo = self._memo
        stack = [(node, 0)]
        while stack:  # iterative: graphs can be deeper than Python's recursion limit
            n, state = stack.pop()
            if n in memo:
                continue
            if state == 0 and self._cut is not None:
                stack.append((n, 1))
                stack.extend((s, 0) for s in (self._below(n) if self._below else n.srcs) if s not in memo)
            elif state <= 1 and self._cut is not None and self._cut(n, self.reads):
                memo[n] = {("cut", n): tuple(d if s > 1 else None for d, s in enumerate(n.shape))}
            elif state <= 1 and any(s not in memo for s in n.srcs):
                stack.append((n, 2))
                stack.extend((s, 0) for s in n.srcs if s not in memo)
            else:
                memo[n] = self._combine(n)
        return memo[node]

    def _combine(self, n: Node) -> Reads:
        if n.op is Op.INPUT:
            # (a tuple arg: a call's hidden scalar computed from argument arg[1], numpy/int_comparisons.py)
            position = n.arg[1] if isinstance(n.arg, tuple) else n.arg
            return {("input", position): tuple(d if s > 1 else None for d, s in enumerate(n.shape))}
        if n.op is Op.IOTA:
            return {("iota", n): (n.arg if n.shape[n.arg] > 1 else None,)}
        if n.op is Op.TABLE:
            return {("table", n): tuple(d if s > 1 else None for d, s in enumerate(n.shape))}
        if not n.srcs:  # a constant
            return {}
        out: Reads = {}
        along: dict[int, list] = {}
        for src, amap in zip(n.srcs, axis_maps(n)):
            for source, axes in self._memo[src].items():
                mapped = tuple(None if r is None else amap[r] if isinstance(r, int) else r for r in axes)
                for k, r in enumerate(mapped):
                    if isinstance(r, int):
                        along.setdefault(r, []).append((source, k))
                old = out.get(source)
                out[source] = mapped if old is None else tuple(map(merge, old, mapped))
        self.joined.extend(along.values())
        return out
