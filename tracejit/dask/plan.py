"""How a kernel runs over arrays cut into blocks (Dask): its graph split into stages that each run block by
block, joined by reductions over blocks. Knows nothing of Dask itself: dask/arrays.py builds the
Dask graph from a BlockPlan, and each worker rebuilds the same BlockPlan to run its stages (dask/stages.py)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from tracejit.errors import InternalError, UnsupportedError
from tracejit.ir.axis_reads import TWO_AXES, AxisReads, reshape_map
from tracejit.ir.graph import Node, Op
from tracejit.numpy import statistic_log
from tracejit.numpy.statistic_log import Statistic

STATISTIC_KINDS = {"var": "moments", "std": "moments", "argmax": "arg", "argmin": "arg"}
_POSITIONS = "values made from positions along it (np.arange, np.eye, np.tri, ...)"
_CAPTURED = "a NumPy array the kernel captured, laid along it"


@dataclass(frozen=True)
class Unit:
    """A value reduced over blocks: partials per block, combined by a tree reduction, then read as an input
    by the stages after it."""

    node: Node  # its value in the whole program
    kind: str  # "sum" | "prod" | "max" | "min" | "moments" (var, std) | "arg" (argmax, argmin)
    operand: Node  # what is reduced: a partial is computed from a block of it
    axes: tuple[int, ...]  # the operand's reduced axes
    level: int  # 1 + the highest level of the units its operand reads
    statistic: Statistic | None


@dataclass
class Stage:
    """Kernels run once per block of a grid: the block's share of some units (partials) or outputs."""

    level: int
    letters: tuple[str, ...]  # the block grid: one letter per chunked dimension
    roots: list[tuple[str, int]]  # ("output", k) or ("unit", index into BlockPlan.units)
    inputs: list[tuple[str, int]] = field(default_factory=list)  # ("arg", position) or ("unit", index)


@dataclass(frozen=True)
class Problem:
    """A chunked dimension that a stage reads across blocks: it must be made one block."""

    letter: str
    members: tuple[tuple[int, int], ...]  # (argument position, axis) of the arrays that have it
    reason: str


class BlockPlan:
    """The stages of one kernel for arguments of these shapes, dtypes and chunked axes."""

    def __init__(self, traced, statistics: dict, chunked: tuple):
        self.traced, self.outputs = traced, traced.outputs
        self._stats = statistics
        self._classes = _Classes()
        self.units: list[Unit] = []
        self._unit_of: dict[Node, int] = {}
        free = AxisReads()
        for o in self.outputs:
            free.reads(o)
        self._free = free
        for group in free.joined:
            self._classes.join(group)
        self.letters: dict = {}
        for i, flags in enumerate(chunked):
            for k, flag in enumerate(flags or ()):
                if flag:
                    self._classes.mark(("input", i), k)
                    self.letters.setdefault(self._classes.find(("input", i), k), f"g{len(self.letters)}")
        self._reads = AxisReads(self._cut, lambda n: (statistics[n].source,) if n in statistics else n.srcs)
        for o in self.outputs:
            self._reads.reads(o)
        self.problems = self._find_problems()
        self.stages = self._stages() if not self.problems else []

    # -- which reductions run over blocks --
    def _cut(self, node: Node, reads) -> bool:
        stat = self._stats.get(node)
        if stat is not None:
            operand = stat.source
            axes = tuple(range(len(operand.shape))) if stat.axes is None else stat.axes
            kind = STATISTIC_KINDS[stat.kind]
        elif node.op is Op.REDUCE:
            assert isinstance(node.arg, tuple)  # (kind, axes)
            operand, axes, kind = node.srcs[0], node.arg[1], node.arg[0]
        else:
            return False
        operand_reads = reads(operand)
        if not any(
            r in axes and self._classes.chunked(source, k)
            for source, rs in operand_reads.items()
            for k, r in enumerate(rs)
        ):
            return False  # reduced within each block
        for source, rs in self._free.reads(node).items():  # its axes are the dimensions they follow
            for k, r in enumerate(rs):
                if isinstance(r, int):
                    self._classes.join([(source, k), (("cut", node), r)])
        level = 1 + max((self.units[self._unit_of[s[1]]].level for s in operand_reads if s[0] == "cut"), default=0)
        self._unit_of[node] = len(self.units)
        self.units.append(Unit(node, kind, operand, tuple(axes), level, stat))
        return True

    def labels(self, node: Node) -> tuple[str | None, ...]:
        """Per axis of node: the letter of the chunked dimension it follows, or None (the axis is one block)."""
        if node not in self._reads:
            raise InternalError(f"dask plan: {node} is not part of a stage")
        out = [None] * len(node.shape)
        for source, rs in self._reads.reads(node).items():
            for k, r in enumerate(rs):
                if isinstance(r, int) and self._classes.chunked(source, k):
                    out[r] = self.letters[self._classes.find(source, k)]
        return tuple(out)

    def source_labels(self, source) -> tuple[str | None, ...]:
        """Per axis of an argument ("input", i) or unit ("cut", node): its chunked dimension's letter, or None."""
        node = source[1] if source[0] == "cut" else None
        ndim = len(node.shape) if node is not None else len(self.traced.infos[source[1]].shape)
        return tuple(
            self.letters[self._classes.find(source, k)] if self._classes.chunked(source, k) else None
            for k in range(ndim)
        )

    def members(self, letter: str) -> tuple[tuple[int, int], ...]:
        """(argument position, axis) of the argument axes in the dimension `letter`."""
        return tuple(
            (i, k)
            for i, info in enumerate(self.traced.infos)
            for k in range(len(info.shape))
            if info.kind == "array" and self.letters.get(self._classes.find(("input", i), k)) == letter
        )

    # -- what cannot run block by block --
    def roots(self) -> list[tuple[tuple[str, int], Node]]:
        """Each stage root and the node its blocks are computed from: unit operands, and outputs that are not
        a unit reshaped or cast (`direct`)."""
        out = [(("unit", u), unit.operand) for u, unit in enumerate(self.units)]
        return out + [(("output", k), o) for k, o in enumerate(self.outputs) if self.direct(o) is None]

    def direct(self, node: Node) -> tuple[int, list[Node]] | None:
        """(unit index, the reshapes and casts from the unit up to node) where node is a unit's value with
        only size-1 axes added or removed and its dtype changed (x.sum(0) is the sum's unit squeezed): Dask
        does those to the unit's array, no kernel needed. None otherwise."""
        steps = []
        while node not in self._unit_of and (
            node.op is Op.CAST
            or node.op is Op.RESHAPE
            and not any(isinstance(r, str) for r in reshape_map(node.srcs[0].shape, node.shape))
        ):
            steps.append(node)
            node = node.srcs[0]
        return (self._unit_of[node], steps[::-1]) if node in self._unit_of else None

    def _find_problems(self) -> list[Problem]:
        found: dict[str, Problem] = {}
        for _, node in self.roots():
            for source, rs in self._reads.reads(node).items():
                for k, r in enumerate(rs):
                    if r is None or not self._classes.chunked(source, k):
                        continue
                    reason = (
                        r
                        if isinstance(r, str)
                        else _POSITIONS
                        if source[0] == "iota"
                        else _CAPTURED
                        if source[0] == "table"
                        else None
                    )
                    letter = self.letters[self._classes.find(source, k)]
                    if reason and letter not in found:
                        found[letter] = Problem(letter, self.members(letter), reason)
            # two axes of one value, or of one argument, in one chunked dimension (x @ y with y = x.T elsewhere):
            # Dask has no block index for that
            for labels in [self.labels(node)] + [
                self.source_labels(s) for s in self._reads.reads(node) if s[0] == "input"
            ]:
                for letter in {x for x in labels if x and labels.count(x) > 1} - set(found):
                    found[letter] = Problem(letter, self.members(letter), TWO_AXES)
        return list(found.values())

    # -- the stages --
    def _stages(self) -> list[Stage]:
        outputs = [node for root, node in self.roots() if root[0] == "output"]
        last = 1 + max(
            (self.units[self._unit_of[s[1]]].level for o in outputs for s in self._reads.reads(o) if s[0] == "cut"),
            default=0,
        )
        groups: OrderedDict = OrderedDict()
        for root, node in self.roots():
            level = self.units[root[1]].level if root[0] == "unit" else last
            letters = tuple(sorted({x for x in self.labels(node) if x}, key=lambda x: int(x[1:])))
            groups.setdefault((level, letters), []).append(root)
        ordered = sorted(groups.items(), key=lambda g: g[0][0])  # by level, stable
        stages = [Stage(level, letters, roots) for (level, letters), roots in ordered]
        for stage in stages:
            sources: set[tuple] = set()  # (kind, what): axis_reads' sources
            for root in stage.roots:
                node = self.units[root[1]].operand if root[0] == "unit" else self.outputs[root[1]]
                sources.update(s for s in self._reads.reads(node) if s[0] in ("input", "cut"))
            args = sorted(i for kind, i in sources if kind == "input")
            units = sorted(self._unit_of[n] for kind, n in sources if kind == "cut")
            stage.inputs = [("arg", i) for i in args] + [("unit", u) for u in units]
        return stages

    def unit_index(self, node: Node) -> int | None:
        return self._unit_of.get(node)

    def rereads(self) -> list[str]:
        """Chunked dimensions that units reduce while a later stage reads the arguments again with the units'
        values (x - x.mean(0), a softmax over a chunked axis): the data is read in two or more passes, which
        one block along them would make one."""
        out: list[str] = []
        for stage in self.stages:
            if any(kind == "arg" for kind, _ in stage.inputs):
                for kind, u in stage.inputs:
                    if kind == "unit":
                        labels = self.labels(self.units[u].operand)
                        out += [
                            label for label in (labels[d] for d in self.units[u].axes) if label and label not in out
                        ]
        return out


class _Classes:
    """Union-find over source axes that meet element for element; a class is chunked when one of its argument
    axes is cut into more than one block."""

    def __init__(self):
        self._parent: dict = {}
        self._marked: set = set()

    def find(self, source, axis: int):
        x = (source, axis)
        parent = self._parent
        while parent.get(x, x) != x:
            parent[x] = parent.get(parent[x], parent[x])
            x = parent[x]
        return x

    def join(self, group) -> None:
        roots = [self.find(s, k) for s, k in group]
        first = roots[0]
        for r in roots[1:]:
            if r != first:
                self._parent[r] = first
                if r in self._marked:
                    self._marked.add(first)

    def mark(self, source, axis: int) -> None:
        self._marked.add(self.find(source, axis))

    def chunked(self, source, axis: int) -> bool:
        return self.find(source, axis) in self._marked


def build_plan(kernel, args: tuple, chunked: tuple) -> BlockPlan:
    """The plan of `kernel` for these arguments (arrays as tj.spec of the whole array) where chunked[i][k]
    says whether axis k of argument i is cut into more than one block."""
    with statistic_log.recording() as statistics:
        traced = kernel._trace(kernel._normalize(args))
    if traced.streams:
        raise UnsupportedError(
            f"{kernel.__name__} draws random numbers (np.random), which a call with Dask arrays "
            "does not support (each block would need its own part of the stream); call it on "
            "NumPy arrays or tj.Arrays"
        )
    if traced.captured:
        shape = traced.captured[0][1].shape
        raise UnsupportedError(
            f"{kernel.__name__} uses a NumPy array of shape {shape}, too large to embed in a kernel (the plan "
            "holds it and passes it beside the arguments), which a call with Dask arrays does not support yet; "
            "pass it to the kernel as an argument, or call it on NumPy arrays or tj.Arrays"
        )
    if traced.assigned:
        names = kernel._names
        raise UnsupportedError(
            f"{kernel.__name__} assigns into its argument {names[traced.assigned[0]]!r}, which "
            "cannot be done to a Dask array; return the new value instead"
        )
    return BlockPlan(traced, statistics, chunked)
