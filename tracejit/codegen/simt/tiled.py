"""A matrix product (a kernel with an ir.contraction.Contraction) as a tiled SIMT kernel, for OpenCL, CUDA,
Metal and WGSL alike (written in the renderers' spelling hooks, like group_scan.py).

Each work-group computes a tile.m x tile.n block of the result: per step of tile.k along the contraction,
its work-items copy the A and B tiles into local memory (consecutive work-items reading consecutive
addresses of whichever axis the operand is contiguous along), wait at a barrier, and each work-item adds the
products into its own tile.rows x tile.cols register block; so every element loaded from global memory
serves tile.n (or tile.m) multiply-adds instead of one. A work-item's outputs are runs of tile.run
neighbouring rows (columns) spread over the tile (rows ty * 4 + 0..3, then 64 further, for 16 work-items
down a 128-row tile): a GPU compiler reads each run from local memory as one 16-byte load, a quarter of
the load instructions per multiply-add, and the work-items of a warp still read neighbouring words (no
bank conflicts). Edges where the sizes do not divide the tile load zeros and skip the stores.

The tile (TILE) is shaped for GPUs: 256 work-items of 8x8 outputs over 128x128, tile.k = 8 (8 KB of local
memory for float32, so several work-groups fit a multiprocessor). Measured on an H200 at 4096^3 float32
(benchmarks/gpu_tuning.py, one run): 31.9 TFLOP/s, against 25.5 with strided rows (run = 1), 25.1 at k = 16,
25.6 for 128x64 and 21.5 for 64x64 tiles of 4x4 (cuBLAS through PyTorch: 51). CPU implementations (PoCL,
llvmpipe) run a work-group as loops over its work-items, split at every barrier: there the tiled kernel
measured 3-7x slower than the generated loops, so those devices do not tile (LayoutOptions.tiled).
CUDA float16 on sm_80+ takes MMA_TILE (mma.py). float16 is computed in float32 and rounded once at the
end; integers wrap like NumPy's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracejit.ir.kernel_ir import KernelIR
from tracejit.codegen.simt.mapping import RenderOptions

I32 = np.dtype("int32")


@dataclass(frozen=True)
class Tile:
    m: int  # rows of the result per work-group
    n: int  # columns of the result per work-group
    k: int  # contraction step between barriers
    rows: int  # rows of each work-item's register block
    cols: int  # columns of each work-item's register block
    threads: int
    mma: bool = False  # CUDA tensor cores (mma.py): rows and cols are then each warp's block
    # a work-item's rows (columns) come in runs of this many neighbours, the runs spread over the tile: 4 lets
    # a GPU compiler read each run from local memory as one 16-byte load (LDS.128 on CUDA), 1 strides them
    run: int = 4
    double_buffer: bool = True  # mma.py: the next step's tiles copied asynchronously while this one's multiply


TILE = Tile(128, 128, 8, 8, 8, 256)
# mma.py: rows and cols are each warp's block (multiples of 16 and 8), k a multiple of 16. On an H200 at 4096^3:
# 275.7 TFLOP/s double-buffered (one buffer 184.0; warps of 64x32 225.6; a 64x128 tile of 32x64 warps 213.0)
MMA_TILE = Tile(128, 128, 32, 64, 64, 128, mma=True)


def plan(kernel: KernelIR, options: RenderOptions, by_value: frozenset[int]) -> Tile | None:
    """The tile the kernel's product is rendered with, or None to render its instructions."""
    c = kernel.contraction
    if c is None or {c.a.param, c.b.param, c.out.param} & by_value:
        return None
    tile = MMA_TILE if options.tensor_cores and c.dtype == np.float16 else TILE
    if tile.threads > options.max_local_size or groups(kernel, tile) * tile.threads >= 2**31:
        return None
    return tile


def groups(kernel: KernelIR, tile: Tile) -> int:
    assert kernel.contraction is not None  # a kernel that plan() gave a tile
    b, m, n, _ = kernel.contraction.sizes()
    return b * -(-m // tile.m) * -(-n // tile.n)


def render(r, tile: Tile) -> None:
    """The kernel body of renderer `r` (cstyle._Render or WGSL's) for its kernel's contraction."""
    c, t = r.k.contraction, r.t
    _, nm, nn, nk = c.sizes()
    acc = r.acc_dtype(c.dtype)
    ct, it = r.ctype(acc), r.idx
    tiles_m, tiles_n = -(-nm // tile.m), -(-nn // tile.n)
    across = tile.n // tile.cols  # work-items along a row of the tile
    down = tile.m // tile.rows
    a, b, out = (r.k.params[o.param].name for o in (c.a, c.b, c.out))
    vector = t.load4 is not None and ct == "float" and _run(tile) == 4
    for name, n in (("tj_as", tile.k * tile.m), ("tj_bs", tile.k * tile.n)):
        r.shared(f"{t.local_qualifier} {t.align16} {ct} {name}[{n}];" if vector else t.array(name, ct, n, True))
    prologue(r, tile, tiles_m, tiles_n)
    r.out(t.let("tj_tx", it, f"{_index_of(r, 'lid')} % {across}"))
    r.out(t.let("tj_ty", it, f"{_index_of(r, 'lid')} / {across}"))
    zero = r.literal(0, acc)
    for i in range(tile.rows):
        for j in range(tile.cols):
            r.out(t.var(f"tj_c{i}_{j}", ct, zero))
    r.out(t.loop("tj_k0", it, "0", f"tj_k0 < {nk}", f"tj_k0 += {tile.k}"))
    r.depth += 1
    src = c.dtype

    def converted(ptr: str, where: str) -> str:
        return r.read(ptr, where, src) if src == acc else r.cast(r.read(ptr, where, src), src, acc)

    load = (converted, zero)
    stage(r, tile, "a", a, "tj_abase", "tj_row0", nm, tile.m, c.m, c.a.strides[1], c.k, c.a.strides[2], ct, load)
    stage(r, tile, "b", b, "tj_bbase", "tj_col0", nn, tile.n, c.n, c.b.strides[2], c.k, c.b.strides[1], ct, load)
    r.out(t.barrier)
    r.out(t.loop("tj_kk", it, "0", f"tj_kk < {tile.k}", "tj_kk++"))
    r.depth += 1
    for v, count, width, item, items in (
        ("a", tile.rows, tile.m, "tj_ty", down),
        ("b", tile.cols, tile.n, "tj_tx", across),
    ):
        for i in range(count):
            where = sum_of(f"tj_kk * {width}", _spread(item, i, items, tile))
            if not vector:
                r.out(t.let(f"tj_{v}{i}", ct, f"tj_{v}s[{where}]"))
            elif i % 4 == 0:  # a run of 4: one 16-byte load
                r.out(f"const float4 tj_{v}{i}_4 = {t.load4.format(f'tj_{v}s', where)};")
            if vector and i % 4 == 3:
                for q, part in enumerate("xyzw"):
                    r.out(t.let(f"tj_{v}{i - 3 + q}", ct, f"tj_{v}{i - 3}_4.{part}"))
    for i in range(tile.rows):
        for j in range(tile.cols):
            if acc.kind == "f" and t.fma:  # one rounding per step, as BLAS's FMA loops
                r.out(f"tj_c{i}_{j} = {t.fma.format(f'tj_a{i}', f'tj_b{j}', f'tj_c{i}_{j}')};")
                continue
            product = r.wrap_int("*", f"tj_a{i}", f"tj_b{j}", acc) if acc.kind in "iu" else f"(tj_a{i} * tj_b{j})"
            r.out(f"tj_c{i}_{j} = {r.combine('sum', acc, f'tj_c{i}_{j}', product)};")
    r.depth -= 1
    r.out("}")
    r.out(t.barrier)
    r.depth -= 1
    r.out("}")
    for i in range(tile.rows):
        r.out(t.let(f"tj_m{i}", it, sum_of("tj_row0", _spread("tj_ty", i, down, tile))))
    for j in range(tile.cols):
        r.out(t.let(f"tj_n{j}", it, sum_of("tj_col0", _spread("tj_tx", j, across, tile))))
    for i in range(tile.rows):
        for j in range(tile.cols):
            where = sum_of(
                "tj_obase", offset(f"tj_m{i}", c.m, c.out.strides[1]), offset(f"tj_n{j}", c.n, c.out.strides[2])
            )
            value = f"tj_c{i}_{j}" if acc == c.dtype else r.cast(f"tj_c{i}_{j}", acc, c.dtype)
            r.out(t.guard(f"tj_m{i} < {nm} && tj_n{j} < {nn}", r.write(out, where, value, c.dtype)))


def _run(tile: Tile) -> int:
    return tile.run if tile.rows % tile.run == 0 and tile.cols % tile.run == 0 else 1


def _spread(item: str, i: int, items: int, tile: Tile) -> str:
    """Where a work-item's i-th row (column) of its block is in the tile: runs of tile.run neighbours
    (item * run onwards), the runs items * run apart, so the work-items of a warp read neighbouring words."""
    run = _run(tile)
    first = item if run == 1 else f"{item} * {run}"
    return sum_of(first, str(i // run * items * run + i % run))


def prologue(r, tile: Tile, tiles_m: int, tiles_n: int) -> None:
    """lid, the work-group's tile (tj_tile: its batch, first row and column) and where each operand's
    batch starts (tj_abase, tj_bbase, tj_obase)."""
    c, t, it = r.k.contraction, r.t, r.idx
    r.out(t.let("lid", t.types[I32], t.local_id))
    expr, launched = r.global_index()
    r.out(t.let("tj_tile", it, expr))
    if launched != groups(r.k, tile):  # WGSL: a 2-D dispatch of whole rows of work-groups
        r.out(t.guard(f"tj_tile >= {groups(r.k, tile)}", "return;"))
    for name, value in (
        ("tj_row0", f"(({_div('tj_tile', tiles_n)}) % {tiles_m}) * {tile.m}"),
        ("tj_col0", f"(tj_tile % {tiles_n}) * {tile.n}"),
        ("tj_batch", f"tj_tile / {tiles_m * tiles_n}"),
    ):
        r.out(t.let(name, it, value))
    for name, o in (("tj_abase", c.a), ("tj_bbase", c.b), ("tj_obase", c.out)):
        r.out(t.let(name, it, sum_of(str(o.offset), offset("tj_batch", c.batch, o.strides[0]))))


def stage(
    r,
    tile: Tile,
    which: str,
    ptr: str,
    base: str,
    start: str,
    extent: int,
    width: int,
    sizes,
    strides,
    k_sizes,
    k_strides,
    ct: str,
    load,
) -> None:
    """Copy this step's tile of one operand (width rows or columns by tile.k) into local memory of type
    ct, zeros outside the operand; consecutive work-items take consecutive elements along its contiguous
    axis. load: (a function of the buffer and offset giving the value to keep, the zero of ct)."""
    t, it, nk = r.t, r.idx, r.k.contraction.sizes()[3]
    k_fast = (k_strides[-1] if k_strides else 0) == 1
    per_item = -(-(width * tile.k) // tile.threads)
    value_at, zero = load
    for step in range(per_item):
        e = f"({_index_of(r, 'lid')} + {step * tile.threads})" if step else _index_of(r, "lid")
        kk, pos = (f"{e} % {tile.k}", f"{e} / {tile.k}") if k_fast else (f"{e} / {width}", f"{e} % {width}")
        name = f"tj_l{which}{step}"
        r.out(t.let(f"{name}k", it, f"tj_k0 + {kk}"))
        r.out(t.let(f"{name}p", it, f"{start} + {pos}"))
        where = sum_of(base, offset(f"{name}p", sizes, strides), offset(f"{name}k", k_sizes, k_strides))
        r.out(t.var(name, ct, zero))
        r.out(t.guard(f"{name}p < {extent} && {name}k < {nk}", f"{name} = {value_at(ptr, where)};"))
        inside = f"{kk} * {width} + {pos}"
        if (width * tile.k) % tile.threads:
            r.out(t.guard(f"{e} < {width * tile.k}", f"tj_{which}s[{inside}] = {name};"))
        else:
            r.out(f"tj_{which}s[{inside}] = {name};")


def _index_of(r, name: str) -> str:
    """A 32-bit work-item id as the kernel's index type."""
    return name if r.idx == r.t.types[I32] else f"(({r.idx}){name})"


def offset(value: str, sizes: tuple[int, ...], strides: tuple[int, ...]) -> str:
    """The offset of flat index `value` of a role with these axis sizes (outer first) and strides."""
    terms, inner = [], 1
    for size, stride in reversed(list(zip(sizes, strides))):
        digit = value if inner == 1 else f"({value} / {inner})"
        if inner * size != int(np.prod(sizes)):
            digit = f"({digit} % {size})"
        if stride:
            terms.append(digit if stride == 1 else f"{digit} * ({stride})" if stride < 0 else f"{digit} * {stride}")
        inner *= size
    return " + ".join(terms)


def _div(value: str, d: int) -> str:
    return value if d == 1 else f"{value} / {d}"


def sum_of(*terms: str) -> str:
    kept = [x for x in terms if x and x != "0"]
    return f"({' + '.join(kept)})" if kept else "0"
