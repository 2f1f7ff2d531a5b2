"""What runs on a Dask worker: a kernel per plan stage, which traces the plan's graph at the sizes of the
blocks it is called with, and the task that calls it on one block and packs what it returns. Plans and stage
kernels are kept per process, so a worker traces and compiles each block signature once."""

from __future__ import annotations

import inspect
import itertools
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tracejit.errors import InternalError, ShapeError
from tracejit.ir import build
from tracejit.ir.graph import Node, Op
from tracejit.ir.resize import resize
from tracejit.dask import partials as dask_partials
from tracejit.frontend import shipping
from tracejit.dask.plan import BlockPlan, build_plan
from tracejit.frontend.signature import Default

if TYPE_CHECKING:  # for the annotation only: stage_kernel imports it where it is used
    from tracejit.frontend.kernel import Kernel

PLANS_KEPT = 64  # plans (kernel x argument shapes x chunked axes) a process keeps


@dataclass(frozen=True)
class PlanKey:
    """What a plan is made from: the kernel, its arguments (arrays as tj.spec of the whole array, Python
    scalars as 0 of their type, static values) and which axes of each array are cut into blocks."""

    kernel: Kernel
    args: tuple
    chunked: tuple

    def __dask_tokenize__(self):
        return ("tracejit.PlanKey", shipping.token(self.kernel), repr(self.args), self.chunked)


@dataclass(frozen=True)
class StageRef:
    """One stage of one plan, as a Dask task names it."""

    key: PlanKey
    index: int
    device: str | None

    def __dask_tokenize__(self):
        return ("tracejit.StageRef", self.key.__dask_tokenize__(), self.index, self.device)


_plans: OrderedDict = OrderedDict()
_stage_kernels: dict = {}
_lock = threading.Lock()


def plan_for(key: PlanKey) -> BlockPlan:
    with _lock:
        plan = _plans.get(key)
        if plan is None:
            plan = _plans[key] = build_plan(key.kernel, key.args, key.chunked)
            while len(_plans) > PLANS_KEPT:
                old, _ = _plans.popitem(last=False)
                for stage_key in [k for k in _stage_kernels if k[0] == old]:
                    del _stage_kernels[stage_key]
        else:
            _plans.move_to_end(key)
        return plan


def stage_kernel(key: PlanKey, index: int):
    """The kernel of stage `index` (one per process: its plans are every block signature seen here)."""
    from tracejit.frontend.kernel import Kernel

    plan = plan_for(key)
    with _lock:
        kernel = _stage_kernels.get((key, index))
        if kernel is None:
            user = key.kernel
            dynamic = user._dynamic
            if dynamic is None or isinstance(dynamic, dict):
                # the block sizes along chunked dimensions are arguments of the code from the first compile: one
                # kernel for the edge blocks too; the one-block axes (a softmax's rows) stay constants
                inputs = plan.stages[index].inputs
                dynamic = {
                    f"a{p}": axes
                    for p, inp in enumerate(inputs)
                    if (axes := tuple(d for d, x in enumerate(plan.source_labels(_source(plan, inp))) if x))
                }
            kernel = Kernel(StageProgram(key, plan, index), device=user._device, dynamic=dynamic or None)
            _stage_kernels[(key, index)] = kernel
        return kernel


class StageProgram:
    """The function a stage kernel traces: the stage's roots at the sizes of the blocks it is given."""

    recorded_elsewhere = True  # TRACEJIT_RECORD records the Dask call itself (dask/arrays.py)

    def __init__(self, key: PlanKey, plan: BlockPlan, index: int):
        self.key, self.plan, self.index = key, plan, index
        self.__name__ = self.__qualname__ = f"{key.kernel.__name__}_dask_stage{index}"
        self.__module__ = __name__
        n = len(plan.stages[index].inputs)
        self.__signature__ = inspect.Signature(
            [inspect.Parameter(f"a{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD) for i in range(n)]
        )

    def __call__(self, *blocks):
        plan, stage = self.plan, self.plan.stages[self.index]
        sizes = letter_sizes(plan, stage, [b.shape for b in blocks])
        position = {_source(plan, inp): p for p, inp in enumerate(stage.inputs)}

        def leaf(node: Node, shape):
            # an INPUT keyed by a tuple: a hidden scalar of argument hidden[1] (int_comparisons)
            hidden = node.arg if node.op is Op.INPUT and isinstance(node.arg, tuple) else None
            source = ("input", node.arg if hidden is None else hidden[1]) if node.op is Op.INPUT else ("cut", node)
            p = position.get(source)
            if hidden is not None and p is not None:  # the same hidden scalar of the stage's own argument
                return build.input_((hidden[0], p, *hidden[2:]), node.dtype, shape)
            if p is None:
                if node.op is Op.INPUT or plan.unit_index(node) is not None:  # (a unit rebuilt would be wrong)
                    raise InternalError(f"dask stage {self.index}: {source[0]} {node} is not among its inputs")
                return None
            return build.input_(p, node.dtype, shape, node.weak)

        roots = [root_node(plan, r) for r in stage.roots]
        at_blocks = resize(
            [(n, block_shape(plan, n, sizes)) for n in roots], leaf, lambda n, d: block_shape(plan, n, sizes)[d]
        )
        out = []
        for root, node in zip(stage.roots, at_blocks):
            out += dask_partials.block_values(plan.units[root[1]] if root[0] == "unit" else None, node)
        return tuple(out)


def _source(plan: BlockPlan, inp: tuple[str, int]):
    return ("input", inp[1]) if inp[0] == "arg" else ("cut", plan.units[inp[1]].node)


def root_node(plan: BlockPlan, root: tuple[str, int]) -> Node:
    return plan.units[root[1]].operand if root[0] == "unit" else plan.outputs[root[1]]


def letter_sizes(plan: BlockPlan, stage, shapes) -> dict[str, int]:
    """The block's size along each chunked dimension, read off the shapes of the blocks of its inputs."""
    sizes: dict[str, int] = {}
    for inp, shape in zip(stage.inputs, shapes):
        for letter, n in zip(plan.source_labels(_source(plan, inp)), shape):
            if letter and sizes.setdefault(letter, n) != n:
                # (a trace at made-up sizes, which dynamic shapes try, can disagree: it is then not used)
                raise ShapeError(f"blocks of {sizes[letter]} and {n} along one chunked dimension ({letter})")
    return sizes


def block_shape(plan: BlockPlan, node: Node, sizes: dict[str, int]) -> tuple[int, ...]:
    return tuple(sizes[letter] if letter else s for letter, s in zip(plan.labels(node), node.shape))


def run_stage(ref: StageRef, *args):
    """A Dask task: the stage on one block. args: the block of each input (a nested single-item list where
    Dask hands a one-block dimension over as a list), then the start of the block along each chunked
    dimension when the stage has argmax/argmin partials. Returns a tuple, one item per root."""
    plan = plan_for(ref.key)
    stage = plan.stages[ref.index]
    n = len(stage.inputs)
    blocks = [_one_block(a) for a in args[:n]]
    starts = {letter: int(_one_block(s)[0]) for letter, s in zip(stage.letters, args[n:])}
    outs = stage_kernel(ref.key, ref.index)(*blocks, device=ref.device)
    outs = iter([o if isinstance(o, np.ndarray) else np.asarray(o) for o in outs])
    sizes = letter_sizes(plan, stage, [np.shape(b) for b in blocks])
    results = []
    for root in stage.roots:
        if root[0] == "output":
            results.append(next(outs))
            continue
        unit = plan.units[root[1]]
        labels = plan.labels(unit.operand)
        offsets = tuple(starts.get(letter, 0) if letter else 0 for letter in labels)
        results.append(dask_partials.pack(unit, outs, block_shape(plan, unit.operand, sizes), offsets))
    return tuple(results)


def _one_block(a):
    while isinstance(a, list):
        a = a[0]
    if isinstance(a, np.ndarray) and a.flags.c_contiguous and 1 in a.shape:
        # a size-1 axis's stride means nothing, yet it is part of a plan's key: C order's, so that blocks of
        # one layout share one plan (Dask's reductions leave other strides there)
        a = np.lib.stride_tricks.as_strided(a, a.shape, _c_strides(a.shape, a.itemsize))
    return a


def _c_strides(shape, itemsize: int) -> tuple[int, ...]:
    out, step = [], itemsize
    for s in reversed(shape):
        out.append(step)
        step *= s
    return tuple(reversed(out))


def block_signatures(plan: BlockPlan, stage, key: PlanKey, letter_chunks: dict[str, tuple[int, ...]]):
    """The distinct argument lists (tj.spec per block input, scalars as they are) the stage kernel is called
    with over the whole grid: every combination of the distinct block sizes along its dimensions."""
    from tracejit.frontend.signature import Spec, spec

    letters = sorted({x for inp in stage.inputs for x in plan.source_labels(_source(plan, inp)) if x})
    choices = [sorted(set(letter_chunks[x])) for x in letters]
    for combo in itertools.product(*choices):
        sizes = dict(zip(letters, combo))
        args = []
        for inp in stage.inputs:
            if inp[0] == "arg" and not isinstance(key.args[inp[1]], Spec):
                args.append(key.args[inp[1]])  # a Python scalar
                continue
            node = plan.units[inp[1]].node if inp[0] == "unit" else None
            whole = node.shape if node is not None else key.args[inp[1]].shape
            dtype = node.dtype if node is not None else key.args[inp[1]].dtype
            labels = plan.source_labels(_source(plan, inp))
            args.append(spec(tuple(sizes[x] if x else s for x, s in zip(labels, whole)), dtype))
        yield args


def letter_chunks(plan: BlockPlan, chunks: list) -> dict[str, tuple[int, ...]]:
    """The blocks along each chunked dimension: where the arrays sharing it are cut differently, at every
    boundary of any of them (as Dask's blockwise unifies chunks). chunks: per argument, its chunks or None."""
    out = {}
    for letter in plan.letters.values():
        edges = {0}
        for i, k in plan.members(letter):
            edges.update(itertools.accumulate(chunks[i][k]))
        bounds = sorted(edges)
        out[letter] = tuple(b - a for a, b in zip(bounds, bounds[1:])) or (0,)
    return out


def warm_stages(key: PlanKey, chunks_by_letter: dict, devices=None) -> list[dict]:
    """Compile (or load) every stage kernel of the plan at every block shape it meets (tj.warm's results)."""
    from tracejit.frontend.warm import warm

    plan = plan_for(key)
    out = []
    for index, stage in enumerate(plan.stages):
        kernel = stage_kernel(key, index)
        for args in block_signatures(plan, stage, key, chunks_by_letter):
            out += [r.__dict__ for r in warm(kernel, *args, devices=devices)]
    return out


def warm_recorded(kernel, args: list, runs: list, static: dict, devices=None) -> list[dict]:
    """warm_stages for a manifest entry of a call with Dask arrays: its arguments (tj.spec, scalars), their
    chunks as run lengths per axis ([[size, count], ...]) and its static arguments."""
    bound = kernel._bind(tuple(args), static)
    positions = [i for i, a in enumerate(bound) if i not in kernel._static and not isinstance(a, Default)]
    chunks: list[tuple[tuple[int, ...], ...] | None] = [None] * len(bound)  # per argument: its blocks per axis
    for i, axis_runs in zip(positions, runs):
        if axis_runs is not None:
            chunks[i] = tuple(tuple(size for size, count in axis for _ in range(count)) for axis in axis_runs)
    chunked = tuple(None if c is None else tuple(len(x) > 1 for x in c) for c in chunks)
    key = PlanKey(kernel, tuple(bound), chunked)
    return warm_stages(key, letter_chunks(plan_for(key), chunks), devices)
