"""A scan walked by a whole work-group (OpenCL, CUDA, Metal, WGSL): the kernel IR's "scan" range, whose
steps one work-item would otherwise take in order, split over the group a tile at a time.

Per tile of local_size * SCAN_CHUNK steps, each work-item owns SCAN_CHUNK consecutive steps: it first walks them
computing only the accumulator's inputs (producers fused in the load), keeps them in a private array and combines
them into its chunk's total; a Hillis-Steele scan of those totals in local memory gives every work-item the total of
the chunks before its own and the tile's; it then walks its chunk again from the kept inputs, computing only what
the consumers and stores need, starting from the running total of the tiles before combined with its chunk's prefix.
A float sum so adds in runs of SCAN_CHUNK joined by a tree, more accurately than in order.
Written in the target's spelling hooks (loop, let, var, guard, select, barrier), so C-style targets and WGSL
share it."""

from __future__ import annotations

import numpy as np

from tracejit.ir.kernel_ir import INDEX, KOp
from tracejit.codegen.simt.mapping import SCAN_CHUNK, Nest

I32 = np.dtype("int32")


def render(r, nest: Nest) -> None:
    """Emit the scan nest `nest` (one range updating one accumulator, see simt.Mapping) for the work-group
    of renderer `r`, in place of the range's serial loop."""
    t, ins, at = r.t, r.ins, nest.ranges[0]
    update = next(j for j in range(at + 1, nest.end) if ins[j].op == KOp.UPDATE)
    acc, value = ins[update].srcs
    op, dt = ins[acc].arg[0], r.acc_dtype(ins[acc].dtype)
    ct, identity = r.ctype(dt), r.literal(ins[acc].arg[1], dt)
    r.names[at] = f"v{at}"  # the step, declared in each walk of the chunk
    running, tile, part, kept = f"v{acc}", f"tj_tile{at}", f"tj_part{at}", f"tj_kept{at}"
    before, total, carry = f"tj_before{at}", f"tj_total{at}", f"tj_carry{at}"
    feeding = _feeding(ins, at, nest.end, [value])
    writing = _feeding(ins, at, nest.end, [j for j in range(at + 1, nest.end) if j not in feeding], skip=value)
    chunk = min(SCAN_CHUNK, -(-nest.extent // r.local_size))  # shorter where a reduction sized the group
    r.out(t.array(kept, r.vtype(value), chunk, False))
    r.out(
        t.loop(
            tile,
            r.idx,
            r.literal(0, INDEX, True),
            f"{tile} < {r.literal(nest.extent, INDEX, True)}",
            f"{tile} += {r.literal(r.local_size * chunk, INDEX, True)}",
        )
    )
    r.depth += 1
    r.out(t.var(part, ct, identity))

    def keep() -> None:
        r.out(f"{kept}[tj_c{at}] = {r.names[value]};")
        r.out(f"{part} = {r.combine(op, dt, part, r.names[value])};")

    _walk_chunk(r, nest, tile, chunk, feeding, keep)
    for line in _exclusive_scan(r, at, part, before, total, f"tj_red_{dt.name}", op, dt, ct, identity):
        r.out(line)
    r.out(t.let(carry, ct, running))
    r.out(f"{running} = {r.combine(op, dt, running, before)};")
    name = r.names[value]
    if value not in writing:  # the kept value, unless a consumer needs it computed again anyway
        r.names[value] = f"{kept}[tj_c{at}]"
    _walk_chunk(r, nest, tile, chunk, writing, lambda: None)
    r.names[value] = name  # a value from outside the loop keeps its name for what follows
    r.out(f"{running} = {r.combine(op, dt, carry, total)};")
    r.depth -= 1
    r.out("}")


def _feeding(ins, start: int, end: int, roots: list[int], skip: int | None = None) -> list[int]:
    """The instructions strictly between start and end that `roots` are computed from (themselves
    included), not looking past `skip`."""
    need, stack = set(), list(roots)
    while stack:
        j = stack.pop()
        if start < j < end and j not in need and j != skip:
            need.add(j)
            stack.extend(ins[j].srcs)
    return sorted(need)


def _walk_chunk(r, nest: Nest, tile: str, chunk: int, body, finish) -> None:
    """This work-item's `chunk` steps of the tile, in order: instructions `body` at each, then `finish()`."""
    t, at, n = r.t, nest.ranges[0], nest.extent
    step = f"tj_c{at}"
    r.out(t.loop(step, t.types[I32], r.literal(0, I32), f"{step} < {r.literal(chunk, I32)}", f"{step}++"))
    r.depth += 1
    r.out(t.let(f"v{at}", r.idx, f"({tile} + lid * {r.literal(chunk, I32)} + {step})"))
    ragged = n % (r.local_size * chunk) != 0
    if ragged:
        r.out(f"if (v{at} < {r.literal(n, INDEX, True)}) {{")
        r.depth += 1
    r.level += 1
    for j in body:
        r.instr(j)
    finish()
    r.level -= 1
    for _ in range(1 + ragged):
        r.depth -= 1
        r.out("}")


def _exclusive_scan(
    r, at: int, part: str, before: str, total: str, buf: str, op: str, dt: np.dtype, ct: str, identity: str
) -> list[str]:
    """Lines giving every work-item the combination of the work-items' `part` before its own (`before`)
    and of all of them (`total`): a Hillis-Steele scan in the local array `buf`, one slot per work-item,
    a barrier after each read and each write. Each slot combines the earlier value first."""
    t, b = r.t, r.t.barrier
    lit = lambda v: r.literal(v, I32)  # noqa: E731
    s, other = f"tj_s{at}", f"tj_o{at}"
    wrap = lit(r.local_size - 1)  # keeps an index unused by the select inside the array: WGSL's is not lazy
    return [
        f"{buf}[lid] = {part};",
        b,
        t.loop(s, t.types[I32], lit(1), f"{s} < {lit(r.local_size)}", f"{s} *= {lit(2)}"),
        "    " + t.let(other, ct, r.select(f"lid >= {s}", f"{buf}[(lid - {s}) & {wrap}]", identity)),
        f"    {b}",
        "    " + t.guard(f"lid >= {s}", f"{buf}[lid] = {r.combine(op, dt, other, f'{buf}[lid]')};"),
        f"    {b}",
        "}",
        t.let(before, ct, r.select(f"lid > {lit(0)}", f"{buf}[(lid - {lit(1)}) & {wrap}]", identity)),
        t.let(total, ct, f"{buf}[{lit(r.local_size - 1)}]"),
        b,
    ]
