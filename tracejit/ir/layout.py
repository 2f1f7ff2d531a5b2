"""Layout: how a kernel's index space is walked. Merge dimensions every access walks contiguously,
tile transposed reads, and register-tile contractions. Each decision only rewrites loop variables
(a substitution of index expressions), so lowering stays the same whatever is chosen."""

from __future__ import annotations

from dataclasses import dataclass

from tracejit.ir.symbolic import Clamp, Expr, Var


@dataclass(frozen=True)
class LayoutOptions:
    """What a target's memory and threads favour; each device passes its own."""

    accumulate_rows: bool = True  # i-k-j rows of accumulators private to one global index (CPU caches)
    keep_row_max: int = 16384  # longest reduction input kept in local memory for the write loop
    # rows at least this long keep the arrays their first reduction reads in local memory for the loops
    # after it (lower._inputs_to_keep; GPUs, where a work-group shares the row); None: read them again
    keep_inputs_min: int | None = None
    gather_rows: bool = True  # a gather's trailing axes that no index depends on are an inner loop (CPU)
    # independent reductions over loops of the same extents share one loop (lower._sharing_loops: a CPU thread's
    # one pass; a GPU's work-group reduces one accumulator per loop, so there each keeps its own)
    share_reduce_loops: bool = True
    # an innermost loop runs its interior, where no index is clamped, as a loop of its own (ir/split_loops.py: a
    # CPU's vector loads; a GPU's threads are the columns)
    split_loops: bool = True
    sort_bytes: int | None = None  # local memory for the rows a kernel sorts (None: no limit, the heap: numba)
    library: bool = False  # the launch plan runs matrix products and sorts as NumPy calls (ir/library.py)
    tiled: bool = False  # matrix products are kernels of their own, rendered tiled (ir/contraction.py)
    # the tile (rows of the output, columns) of a transposed read (x.T + y), by the element size of the array
    # read across: 1, 2, 4 and 8 bytes
    transpose_tiles: tuple[tuple[int, int], ...] = ((32, 32),) * 4
    # local arrays have lengths fixed in the source (C-style targets): a row whose length is symbolic is
    # not kept in local memory (lower._row_to_keep, _inputs_to_keep), so that one source serves every length
    fixed_locals: bool = False
    # arrays one kernel may read and write at most (webgpu's storage buffers per shader stage, Metal's argument
    # table), constant tables and the error flag included: the schedule writes values to memory sooner so that
    # no kernel reads more (a loop traced step by step fuses many values into one kernel)
    max_buffers: int | None = None


@dataclass
class LoopPlan:
    """How one kernel walks its index space."""

    pvars: list[Var]  # parallel variables, unravelled from the global index (innermost last)
    wvars: list[Var]  # element loops inside each global index (rows written back)
    rgroups: list[list[Var]]  # the loop variables of each reduction
    subst: dict[Var, Expr]  # the analysis' variables in terms of the ones above
    tile: list[dict]  # register-tile copies: a substitution each ([{}]: not tiled)
    row: Var | None = None  # i-k-j: the block of outputs accumulated in local memory


def plan_loops(
    out_vars: list[Var],
    rows: set[Var],
    reduce_vars: list[list[Var]],
    offsets: list[Expr],
    options: LayoutOptions = LayoutOptions(),
    itemsizes: list[int] | None = None,
    plain: bool = False,
    moving: frozenset[str] = frozenset(),
) -> LoopPlan:
    """`rows`: the output variables the reductions depend on (all of them when there is none);
    `offsets`: every load's offset and, last, the store's, with the element size of each in `itemsizes`.
    `plain`: dimensions are merged, nothing else (scans and sorts walk their rows themselves: no tiles, no
    streamed rows). `moving`: the names of the variables whose extent follows a symbolic dimension (issue
    19): no choice depends on their extent (a tile that must divide it, a threshold), so that every size
    of the dimension lowers to the same code."""
    pvars = [v for v in out_vars if v in rows]
    wvars = [v for v in out_vars if v not in rows]
    moving_names = set(moving)  # merge_vars adds the merged variables' names
    groups, subst = merge_vars([pvars, wvars] + reduce_vars, offsets, moving_names)
    pvars, wvars, rgroups = groups[0], groups[1], groups[2:]
    if plain:
        return LoopPlan(pvars, wvars, rgroups, subst, [{}])
    if not reduce_vars:
        tiles = [
            options.transpose_tiles[min(3, (size or 4).bit_length() - 1)] for size in itemsizes or [4] * len(offsets)
        ]
        pvars, wvars, subst = tile_transposed(pvars, wvars, subst, offsets, tiles, moving_names)
        if options.gather_rows and not wvars:
            pvars, wvars, subst = inner_row(pvars, subst, moving_names)
    streamed = options.accumulate_rows and accumulate_rows(
        len(reduce_vars), pvars, wvars, rgroups[0] if rgroups else [], subst, offsets, moving_names
    )
    if streamed:
        pvars, row, subst = streamed
        return LoopPlan(pvars, wvars, rgroups, subst, [{}], row)
    pvars, subst, tile = register_tile(len(reduce_vars), pvars, wvars, subst, offsets, moving_names)
    return LoopPlan(pvars, wvars, rgroups, subst, tile)


def merge_vars(
    groups: list[list[Var]], offsets: list[Expr], moving: set[str] | None = None
) -> tuple[list[list[Var]], dict[Var, Expr]]:
    """Coalesce neighbours in each group (outer to inner) when all offsets allow; return the substitution.
    A merged variable is `moving` (a name added) where either of its parts is."""
    subst: dict[Var, Expr] = {}
    new_groups = []
    for group in groups:
        merged: list[Var] = []
        for v in group:
            if merged and _mergeable(merged[-1], v, offsets):
                a = merged.pop()
                m = Var(f"{a.name}{v.name}", a.extent * v.extent)
                if moving is not None and (a.name in moving or v.name in moving):
                    moving.add(m.name)
                step = {a: Expr.of(m) // v.extent, v: Expr.of(m) % v.extent}
                offsets = [o.substitute(step) for o in offsets]
                for k in list(subst):
                    subst[k] = subst[k].substitute(step)
                subst.setdefault(a, step[a])
                subst.setdefault(v, step[v])
                merged.append(m)
            else:
                merged.append(v)
        new_groups.append(merged)
    return new_groups, subst


REGISTER_TILE = (4, 8)  # rows x columns of accumulators for contractions


def register_tile(n_reduces: int, pvars, wvars, subst, offsets, moving=frozenset()):
    """Contractions (a @ b): each thread computes a 4x8 block of outputs, so every loaded element of
    one operand serves 8 (or 4) accumulators instead of one. Applies to a single reduction with no
    element loop when some operand does not depend on the unrolled output variable. A moving variable
    (its extent symbolic) is tiled whatever its extent: the last block's copies past the end read and
    write the last index instead (clamped), the same value again from the same work-item."""
    no_tile: tuple[list[Var], dict[Var, Expr], list[dict[Var, Expr]]] = (pvars, subst, [{}])
    if n_reduces != 1 or wvars or len(pvars) < 1:
        return no_tile
    offsets = [o.substitute(subst) for o in offsets[:-1]]  # the loads; the store is the last offset
    chosen = []
    for var, factor in zip(reversed(pvars), reversed(REGISTER_TILE)):
        fits = var.name in moving or var.extent % factor == 0 and var.extent >= 2 * factor
        if fits and any(o.coefficient(var) == 0 for o in offsets):
            chosen.append((var, factor))
    if not chosen:
        return no_tile
    steps: list[dict[Var, tuple[Var, int, int]]] = [{}]
    for var, factor in chosen:
        outer = Var(f"{var.name}u", -(-var.extent // factor))
        pvars = [outer if v == var else v for v in pvars]
        steps = [{**st, var: (outer, factor, k)} for st in steps for k in range(factor)]
    # one substitution per unrolled copy: var -> outer * factor + k (clamped to the extent where it moves)
    tile = [{v: _step(v, o, f, k, v.name in moving) for v, (o, f, k) in st.items()} for st in steps]
    return pvars, subst, tile


def _step(var: Var, outer: Var, factor: int, k: int, clamped: bool) -> Expr:
    e = Expr.of(outer) * factor + k
    return Expr.of(Clamp(e, 0, var.extent - 1, kept=True)) if clamped else e


def tile_transposed(pvars, wvars, subst, offsets, tiles, moving=frozenset()):
    """When the output walks variable b with unit stride but a big input walks a, iterate tiles of (a, b),
    so both are read from cache lines already loaded (x.T + y). `tiles`: the (a, b) tile of each offset,
    read from the device's table by the element size of the array read across. A tile (ta, 1) leaves b
    parallel and innermost (GPUs: neighbouring threads write neighbouring outputs) and walks ta steps of a
    per thread, each thread reading along its own row of the transposed input."""
    offsets = [o.substitute(subst) for o in offsets]
    if len(pvars) < 2 or wvars or offsets[-1].coefficient(pvars[-1]) != 1:
        return pvars, wvars, subst
    b = pvars[-1]
    if b.name in moving:
        return pvars, wvars, subst
    for a in pvars[:-1]:
        if a.name in moving:
            continue
        across = [t for o, t in zip(offsets[:-1], tiles) if o.coefficient(a) == 1 and o.coefficient(b) not in (0, 1)]
        ta, tb = max(across, default=(0, 0), key=lambda t: t[0] * t[1])
        if across and tb == 1 and a.extent % ta == 0:
            ao, ai = Var(f"{a.name}t", a.extent // ta), Var(f"{a.name}i", ta)
            step = {a: Expr.of(ao) * ta + Expr.of(ai)}
            subst = {**{k: e.substitute(step) for k, e in subst.items()}, **step}
            return [v for v in pvars if v not in (a, b)] + [ao, b], [ai], subst
        if across and a.extent % ta == 0 and b.extent % tb == 0:
            ao, bo = Var(f"{a.name}t", a.extent // ta), Var(f"{b.name}t", b.extent // tb)
            ai, bi = Var(f"{a.name}i", ta), Var(f"{b.name}i", tb)
            step = {a: Expr.of(ao) * ta + Expr.of(ai), b: Expr.of(bo) * tb + Expr.of(bi)}
            subst = {**{k: e.substitute(step) for k, e in subst.items()}, **step}
            return [v for v in pvars if v not in (a, b)] + [ao, bo], [ai, bi], subst
    return pvars, wvars, subst


MIN_ROWS = 16  # parallel rows an elementwise kernel keeps when its inner dimension becomes a loop
INNER_BLOCK = (1024, 512, 256, 128, 64)


def inner_row(pvars, subst, moving=frozenset()):
    """CPU: dimensions that could not merge (x + bias, a broadcast row) are walked as a loop over the
    inner one inside each parallel index, so no element pays an integer division to find its column
    and the loop vectorises. With fewer than MIN_ROWS rows the inner dimension is cut into blocks
    (rows of a moving extent count as many; a moving inner dimension is not cut)."""
    if len(pvars) < 2:
        return pvars, [], subst
    j, rows = pvars[-1], 1
    for v in pvars[:-1]:
        rows *= v.extent
    if rows >= MIN_ROWS or any(v.name in moving for v in pvars[:-1]):
        return pvars[:-1], [j], subst
    block = (
        None
        if j.name in moving
        else next((b for b in INNER_BLOCK if j.extent % b == 0 and rows * (j.extent // b) >= MIN_ROWS), None)
    )
    if block is None:
        return pvars, [], subst
    outer, inner = Var(f"{j.name}b", j.extent // block), Var(f"{j.name}j", block)
    step = {j: Expr.of(outer) * block + Expr.of(inner)}
    subst = {**{k: e.substitute(step) for k, e in subst.items()}, **step}
    return pvars[:-1] + [outer], [inner], subst


def _mergeable(a: Var, b: Var, offsets: list[Expr]) -> bool:
    for o in offsets:
        ca, cb = o.coefficient(a), o.coefficient(b)
        if ca is None or cb is None or ca != cb * b.extent:
            return False
    return True


ROW_BLOCK = (1024, 512, 256, 128, 64, 32, 16)


def accumulate_rows(n_reduces: int, pvars, wvars, reduce_vars, subst, offsets, moving=frozenset()):
    """A reduction whose operand is contiguous along the output's inner variable j but strided along
    the reduction (b in a @ b, x.sum(axis=0)) is walked i-k-j: a block of j outputs accumulates in
    local memory while the reduction loop streams whole rows of the operand. Returns
    (pvars, block variable, substitution) or None."""
    if n_reduces != 1 or wvars or not pvars:
        return None
    offsets = [o.substitute(subst) for o in offsets[:-1]]
    j = pvars[-1]
    if j.name in moving:
        return None
    if not any(o.coefficient(j) == 1 and all(o.coefficient(r) not in (1, None) for r in reduce_vars) for o in offsets):
        return None
    block = next((b for b in ROW_BLOCK if j.extent % b == 0), None)
    if block is None:
        return None
    outer, inner = Var(f"{j.name}b", j.extent // block), Var(f"{j.name}j", block)
    step = {j: Expr.of(outer) * block + Expr.of(inner)}
    subst = {**{k: e.substitute(step) for k, e in subst.items()}, **step}
    return [outer if v == j else v for v in pvars], inner, subst
