"""A float16 matrix product on CUDA tensor cores: tiled.py's kernel with the multiply-adds done by
`mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32` (inline PTX, sm_80 and later), float32 accumulators,
each result rounded once to float16.

A work-group of four warps computes a 64x128 tile of the result (tiled.MMA_TILE); per step of 16 along the
contraction the A and B tiles are staged in shared memory as half (tiled.stage: zeros past the edges), then
each warp multiplies its 16 rows by the tile's 128 columns as sixteen m16n8k16 products. A lane's fragments are the
elements PTX assigns it (group = lane / 4, pair = lane % 4): A rows group and group + 8, columns 2 * pair
(+1, +8, +9); B columns group, rows the same four; C rows group and group + 8, columns 2 * pair (+1).

Used only where the CUDA device reports compute capability 8.0 or more (RenderOptions.tensor_cores). The
CPU SIMT emulator cannot run inline PTX, so emulated CUDA keeps the plain tiled kernel; here the path is
checked by NVRTC and ptxas (tests/test_tiled.py).
"""
from __future__ import annotations

import numpy as np

from . import tiled

WARP = 32
MMA = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"


def render(r, tile: tiled.Tile) -> None:
    """The body of CUDA renderer `r` for its kernel's float16 contraction."""
    assert tile.k == 16 and tile.m == 16 * tile.threads // WARP, f"mma.py renders one m16n8k16 per step: {tile}"
    c, t = r.k.contraction, r.t
    _, nm, nn, nk = c.sizes()
    tiles_m, tiles_n = -(-nm // tile.m), -(-nn // tile.n)
    a, b, out = (r.k.params[o.param].name for o in (c.a, c.b, c.out))
    r.shared(t.array("tj_as", "__half", tile.k * tile.m, True))
    r.shared(t.array("tj_bs", "__half", tile.k * tile.n, True))
    tiled.prologue(r, tile, tiles_m, tiles_n)
    r.out(f"const int tj_warp = lid / {WARP}, tj_group = (lid % {WARP}) / 4, tj_pair = lid % 4;")
    r.out("const int tj_r0 = tj_warp * 16 + tj_group;")
    columns = tile.n // 8
    r.out(f"float tj_c[{columns}][4] = {{}};")
    r.out(f"for ({r.idx} tj_k0 = 0; tj_k0 < {nk}; tj_k0 += {tile.k}) {{")
    r.depth += 1
    raw = (lambda ptr, where: f"{ptr}[{where}]", "__float2half_rn(0.0f)")
    tiled.stage(r, tile, "a", a, "tj_abase", "tj_row0", nm, tile.m, c.m, c.a.strides[1], c.k, c.a.strides[2], "__half", raw)
    tiled.stage(r, tile, "b", b, "tj_bbase", "tj_col0", nn, tile.n, c.n, c.b.strides[2], c.k, c.b.strides[1], "__half", raw)
    r.out(t.barrier)

    def pair(array: str, width: int, k: str, at: str) -> str:
        """Two halves, k and k + 1 at position `at`, as the 32-bit register PTX takes (the lower k low)."""
        return f"tj_pack({array}[({k}) * {width} + {at}], {array}[({k} + 1) * {width} + {at}])"
    fragments = [pair("tj_as", tile.m, k, row) for k, row in (("2 * tj_pair", "tj_r0"), ("2 * tj_pair", "tj_r0 + 8"),
                                                               ("2 * tj_pair + 8", "tj_r0"), ("2 * tj_pair + 8", "tj_r0 + 8"))]
    r.out(f"const unsigned tj_a[4] = {{{', '.join(fragments)}}};")
    r.out(f"for (int tj_j = 0; tj_j < {columns}; tj_j++) {{")
    column = "tj_j * 8 + tj_group"
    r.out(f"    const unsigned tj_b0 = {pair('tj_bs', tile.n, '2 * tj_pair', column)};")
    r.out(f"    const unsigned tj_b1 = {pair('tj_bs', tile.n, '2 * tj_pair + 8', column)};")
    r.out(f'    asm volatile("{MMA} {{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};"')
    r.out('        : "+f"(tj_c[tj_j][0]), "+f"(tj_c[tj_j][1]), "+f"(tj_c[tj_j][2]), "+f"(tj_c[tj_j][3])')
    r.out('        : "r"(tj_a[0]), "r"(tj_a[1]), "r"(tj_a[2]), "r"(tj_a[3]), "r"(tj_b0), "r"(tj_b1));')
    r.out("}")
    r.out(t.barrier)
    r.depth -= 1
    r.out("}")
    r.helpers["tj_pack"] = (f"{t.helper_qualifier} unsigned tj_pack(__half lo, __half hi) {{\n"
                            "    return (unsigned)__half_as_ushort(lo) | ((unsigned)__half_as_ushort(hi) << 16);\n}")
    r.out(f"for (int tj_j = 0; tj_j < {columns}; tj_j++) {{")
    r.depth += 1
    for q, (row, col) in enumerate((("0", "0"), ("0", "1"), ("8", "0"), ("8", "1"))):
        m, n = f"tj_m{q}", f"tj_n{q}"
        r.out(f"const {r.idx} {m} = tj_row0 + tj_r0 + {row}, {n} = tj_col0 + tj_j * 8 + 2 * tj_pair + {col};")
        where = tiled.sum_of("tj_obase", tiled.offset(m, c.m, c.out.strides[1]), tiled.offset(n, c.n, c.out.strides[2]))
        store = r.write(out, where, f"tj_c[tj_j][{q}]", np.dtype("float16"))
        r.out(t.guard(f"{m} < {nm} && {n} < {nn}", store))
    r.depth -= 1
    r.out("}")
