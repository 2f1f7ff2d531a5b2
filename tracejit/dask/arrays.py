"""f(dask_array) -> a Dask array: the call is planned on the whole arrays' shapes (dask/plan.py), then
each stage becomes a blockwise Dask layer running a tracejit kernel per block (dask/stages.py) and
each reduction over blocks a Dask tree reduction (dask/partials.py). Dask is imported only here, and
only when a kernel is called with a Dask array."""

from __future__ import annotations

import functools
import operator
import os
from typing import TYPE_CHECKING

import numpy as np

from tracejit.errors import ArgumentError, UnsupportedError
from tracejit.ir.dtypes import check
from tracejit.ir.graph import Op
from tracejit.runtime import registry
from tracejit.runtime.array import Array
from tracejit.runtime.debug import log
from tracejit.dask import partials as dask_partials
from tracejit.frontend import manifest
from tracejit.dask.stages import PlanKey, StageRef, letter_chunks, plan_for, root_node, run_stage
from tracejit.frontend.signature import Default, Spec, normalize
from tracejit.dask import is_dask_array

if TYPE_CHECKING:  # (Dask has no type information: for the reader)
    import dask.array as da

_recorded: set = set()  # plan keys this process has written to the TRACEJIT_RECORD manifest


def call(kernel, args: tuple, device: str | None):
    """kernel(*args) where some arguments are Dask arrays: the results as Dask arrays (nothing computed)."""
    key, arrays, by_letter = prepare(kernel, args)
    plan = plan_for(key)
    if os.environ.get(manifest.ENV_RECORD) and key not in _recorded:  # once per call signature and process
        _recorded.add(key)
        chunks = [
            _runs(a.chunks) if info.kind == "array" else None  # (in the order of the entry's "args")
            for a, info in zip(arrays, plan.traced.infos)
            if info.kind in ("array", "scalar")
        ]
        manifest.record(kernel, plan.traced.infos, device or registry.default_device_name(), {"chunks": chunks})
    units: dict[int, da.Array] = {}  # unit index -> its value
    outputs: dict[int, da.Array] = {}  # output index -> its value, where a stage computes it
    for index, stage in enumerate(plan.stages):
        leaf = _stage_layer(kernel, plan, StageRef(key, index, device), arrays, units, by_letter)
        for position, root in enumerate(stage.roots):
            part = _take(leaf, stage.letters, position, plan, root, f"s{index}.{position}")
            if root[0] == "output":
                outputs[root[1]] = part
            else:
                unit = plan.units[root[1]]
                units[root[1]] = _reduce_blocks(part, unit, plan.labels(unit.operand), kernel.__name__)
    results = []
    for k, node in enumerate(plan.outputs):
        if k in outputs:
            results.append(outputs[k])
            continue
        found = plan.direct(node)
        assert found is not None  # an output no stage computes is a unit's value, reshaped or cast
        u, steps = found
        out = units[u]
        for step in steps:  # squeezes and casts of a reduction's result
            out = out.astype(step.dtype) if step.op is Op.CAST else out.reshape(step.shape)
        results.append(out)
    results = results[: len(plan.traced.results)]  # (the checks: computed for their faults)
    return plan.traced.pack(results)  # (None for a procedure)


def _stage_layer(kernel, plan, ref: StageRef, arrays, units, by_letter):
    """The stage as one blockwise layer: a task per block of its grid, each returning a tuple (one item per
    root of the stage)."""
    import dask.array as da

    stage = plan.stages[ref.index]
    pairs = []
    for kind, i in stage.inputs:
        if kind == "unit":
            pairs += [units[i], _index(plan.source_labels(("cut", plan.units[i].node)), f"u{i}")]
        elif isinstance(arrays[i], da.Array):
            pairs += [arrays[i], _index(plan.source_labels(("input", i)), f"a{i}")]
        else:  # a Python scalar
            pairs += [arrays[i], None]
    if any(r[0] == "unit" and plan.units[r[1]].kind == "arg" for r in stage.roots):
        for letter in stage.letters:  # where each block starts, for argmax/argmin's global indices
            starts = np.cumsum((0,) + by_letter[letter][:-1])
            pairs += [da.from_array(starts, chunks=1), (letter,)]
    # (the blocks are already cut alike: align_arrays=False; a one-block axis comes as a one-item list)
    return da.blockwise(
        run_stage,
        stage.letters,
        ref,
        None,
        *pairs,
        dtype=object,
        align_arrays=False,
        concatenate=False,
        meta=np.empty((0,) * len(stage.letters), object),
        token=f"{kernel.__name__}-stage{ref.index}",
    )


def prepare(kernel, args: tuple) -> tuple[PlanKey, list, dict[str, tuple[int, ...]]]:
    """The plan key of this call, its arguments as Dask arrays (rechunked to the plan's blocks) and scalars,
    and the block sizes along each chunked dimension. Axes that the kernel reads across are made one block
    where that stays small (dask's array.chunk-size), else the error says which to rechunk."""
    import dask.array as da

    names = kernel._names
    arrays, specs = [], []
    for i, a in enumerate(args):
        if i in kernel._static or type(a) is Default or type(a) in (bool, int, float):
            arrays.append(a)
            # a Python scalar is a run-time value: plans (and the manifest) know only its type
            specs.append(type(a)() if i not in kernel._static and type(a) in (bool, int, float) else a)
            continue
        a = _as_dask(a, names[i] if i < len(names) else f"argument {i}", da)
        arrays.append(a)
        specs.append(Spec(a.shape, check(a.dtype, f"argument {names[i]!r}", internal=False).newbyteorder("=")))
    chunks = [a.chunks if isinstance(a, da.Array) else None for a in arrays]
    chunked = tuple(None if c is None else tuple(len(x) > 1 for x in c) for c in chunks)
    while True:
        key = PlanKey(kernel, tuple(specs), chunked)
        plan = plan_for(key)
        if plan.problems:  # must be one block
            chunked = _merge_blocks(kernel, {p.letter: p.reason for p in plan.problems}, plan, arrays, chunked, names)
            continue
        merged = _merge_blocks(kernel, {x: None for x in plan.rereads()}, plan, arrays, chunked, names)
        if merged == chunked:
            break
        chunked = merged  # one pass over the data instead of several
    by_letter = letter_chunks(plan, chunks)
    for i, a in enumerate(arrays):
        if isinstance(a, da.Array):
            labels = plan.source_labels(("input", i))
            target = tuple(by_letter[x] if x else (s,) for x, s in zip(labels, a.shape))
            if target != a.chunks:
                arrays[i] = a.rechunk(target)
    return key, arrays, by_letter


def _as_dask(a, name: str, da):
    """An array argument as a Dask array: NumPy arrays and array-likes become one block (Dask's own
    broadcasting splits them to match where they meet chunked arrays)."""
    if isinstance(a, da.Array):
        if type(a._meta) is not np.ndarray:
            raise ArgumentError(
                f"argument {name!r} is a Dask array of {type(a._meta).__module__}."
                f"{type(a._meta).__name__} blocks; tracejit's kernels over Dask arrays take NumPy "
                f"blocks (a kernel's device= says where each block is computed): "
                f"{name}.map_blocks(np.asarray) first"
            )
        if any(np.isnan(s) for c in a.chunks for s in c):
            raise ArgumentError(
                f"argument {name!r} is a Dask array whose chunk sizes are unknown (NaN), which "
                f"tracejit plans the kernel by; call {name}.compute_chunk_sizes() first"
            )
        return a
    if is_dask_array(a):
        raise ArgumentError(
            f"argument {name!r} is a {type(a).__module__}.{type(a).__name__}; tracejit kernels "
            "take Dask arrays (a DataFrame's .to_dask_array(lengths=True), a Bag's .to_dataframe())"
        )
    host = a.numpy() if isinstance(a, Array) else normalize(a)
    host = np.asarray(host.numpy() if isinstance(host, Array) else host)
    return da.from_array(host, chunks=host.shape or ())


def _merge_blocks(kernel, letters: dict, plan, arrays, chunked, names) -> tuple:
    """chunked with the dimensions `letters` made one block where the blocks that makes are within dask's
    array.chunk-size. letters: letter -> why the kernel reads across it (one block is a must: beyond the limit
    a tj.UnsupportedError names the argument and axis to rechunk), or None (one pass instead of several: beyond
    the limit, or where no other dimension would stay chunked to run blocks in parallel, it stays chunked)."""
    import dask
    from dask.utils import format_bytes, parse_bytes

    limit = parse_bytes(dask.config.get("array.chunk-size"))
    flags = [list(c) if c is not None else None for c in chunked]
    chunked_letters = set(plan.letters.values())
    for letter, reason in letters.items():
        if reason is None and not chunked_letters - {letter}:
            continue  # x - x.mean(0) over a tall array chunked by rows: two passes, both in parallel
        members = plan.members(letter)
        trial = [list(f) if f is not None else None for f in flags]
        for i, k in members:
            trial[i][k] = False
        for i, k in members:
            a = arrays[i]
            size = a.dtype.itemsize * int(
                np.prod([s if not trial[i][d] else max(c) for d, (s, c) in enumerate(zip(a.shape, a.chunks))])
            )
            if size > limit and reason is None:
                break
            if size > limit:
                name = names[i]
                suggestion = ", ".join([f"{k}: -1"] + [f"{d}: 'auto'" for d, f in enumerate(trial[i]) if f])
                raise UnsupportedError(
                    f"{kernel.__name__}: argument {name!r} (shape {a.shape}) is cut into {len(a.chunks[k])} blocks "
                    f"along axis {k}, and the kernel reads across that axis ({reason}), so it needs the whole "
                    f"axis in each block. Merged, its blocks would hold {format_bytes(size)}, more than dask's "
                    f"array.chunk-size ({format_bytes(limit)}); rechunk it first, e.g. "
                    f"{name}.rechunk({{{suggestion}}}), or raise array.chunk-size"
                )
        else:
            flags = trial
            chunked_letters.discard(letter)
            log(
                1,
                f"{kernel.__name__}: {', '.join(f'{names[i]!r} axis {k}' for i, k in members)} made one block "
                f"({reason or 'one pass over the data instead of several'})",
            )
    return tuple(None if f is None else tuple(f) for f in flags)


def _index(labels, prefix: str) -> tuple[str, ...]:
    """A Dask index for an input: its chunked dimensions' letters, a name of its own for each axis in one block."""
    return tuple(x if x else f"{prefix}.{d}" for d, x in enumerate(labels))


def _take(leaf, letters, position: int, plan, root, prefix: str):
    """Root `position` of the stage's per-block tuples, as a Dask array of its own."""
    node = root_node(plan, root)
    unit = plan.units[root[1]] if root[0] == "unit" else None
    reduced = unit.axes if unit is not None else ()
    dtype = dask_partials.partial_dtype(unit) if unit is not None else node.dtype
    labels = plan.labels(node)
    index = _index(labels, prefix)
    new_axes = {i: (1 if d in reduced else s) for d, (i, x, s) in enumerate(zip(index, labels, node.shape)) if not x}
    adjust = {x: 1 for d, x in enumerate(labels) if x and d in reduced}
    import dask.array as da

    return da.blockwise(
        operator.getitem,
        index,
        leaf,
        letters,
        position,
        None,
        new_axes=new_axes,
        adjust_chunks=adjust,
        dtype=dtype,
        meta=np.empty((0,) * len(index), dtype),
        align_arrays=False,
        concatenate=False,
    )


def _reduce_blocks(part, unit, labels, name: str):
    """The unit's value from its per-block partials: a Dask tree reduction."""
    import dask.array as da

    kind = dask_partials.kind_of(unit)
    stat = unit.statistic
    if stat is None:  # sum, prod, max, min: over the chunked axes (the others are reduced in each block)
        axis, extra = tuple(d for d in unit.axes if labels[d]), {}
    else:
        axis, extra = unit.axes, {"ddof": stat.ddof, "dtype": unit.node.dtype}
    # dtype is the partials' (Dask checks the chunk step against it); meta gives the result its own
    meta = np.empty((0,) * len(part.shape), unit.node.dtype)
    out = da.reduction(
        part,
        dask_partials.identity,
        functools.partial(dask_partials.aggregate, kind=kind, **extra),
        axis=axis,
        keepdims=True,
        dtype=part.dtype,
        combine=functools.partial(dask_partials.combine, kind=kind),
        concatenate=True,
        meta=meta,
        name=f"{name}-{kind}",
    )
    return out if out.shape == unit.node.shape else out.reshape(unit.node.shape)  # argmax(axis=None): (1,)


def _runs(chunks) -> list[list[list[int]]]:
    """Chunks as run lengths per axis, [[size, count], ...]: a manifest line stays short for many blocks."""
    out = []
    for axis in chunks:
        runs: list[list[int]] = []
        for c in axis:
            if runs and runs[-1][0] == c:
                runs[-1][1] += 1
            else:
                runs.append([int(c), 1])
        out.append(runs)
    return out
