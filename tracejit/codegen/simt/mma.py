"""A float16 matrix product on CUDA tensor cores: tiled.py's kernel with the multiply-adds done by
`mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32` (inline PTX, sm_80 and later), float32 accumulators,
each result rounded once to float16.

A work-group computes a tile.m x tile.n block of the result; its warps split it into tile.rows x tile.cols
blocks, each warp's block being (rows / 16) x (cols / 8) m16n8k16 products per 16 of the contraction, so a
fragment loaded from shared memory serves several products. Per step of tile.k along the contraction the A
tile is staged in shared memory row by row (the contraction axis contiguous: a lane's two halves of A are one
32-bit load) and the B tile column by column of the contraction; each row of either is padded by 8 halves,
so the lanes of a warp reading fragments hit 32 different banks. Where both tiles are copied 16 bytes at a
time straight into that layout (row-major x @ w) there are two buffers of each: the next step's tiles arrive
by cp.async while this step's products run. Fragments are the elements PTX assigns a
lane (group = lane / 4, pair = lane % 4): A rows group and group + 8, columns 2 * pair (+1, +8, +9); B
columns group, rows the same four; C rows group and group + 8, columns 2 * pair (+1).

Used where the CUDA device reports compute capability 8.0 or more (RenderOptions.tensor_cores), and on the
CPU SIMT emulator, whose tj_cuda.h computes the same instruction from the same fragments (tj_mma_m16n8k16),
so the layout is tested without a GPU; NVRTC and ptxas check the PTX (tests/test_tiled.py).
"""

from __future__ import annotations

import numpy as np

from tracejit.codegen.simt import tiled

WARP = 32
MMA = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
PAD = 8  # halves after each staged row: 16 bytes, so rows stay aligned for vector access and banks differ


def render(r, tile: tiled.Tile) -> None:
    """The body of CUDA renderer `r` for its kernel's float16 contraction."""
    warps_n = tile.n // tile.cols
    assert (
        tile.k % 16 == 0
        and tile.rows % 16 == 0
        and tile.cols % 8 == 0
        and tile.m % tile.rows == 0
        and tile.n % tile.cols == 0
        and tile.threads == WARP * (tile.m // tile.rows) * warps_n
    ), tile
    c, t, it = r.k.contraction, r.t, r.idx
    _, nm, nn, nk = c.sizes()
    tiles_m, tiles_n = -(-nm // tile.m), -(-nn // tile.n)
    a, b, out = (r.k.params[o.param].name for o in (c.a, c.b, c.out))
    lda, ldb = tile.k + PAD, tile.n + PAD
    operands = (
        (
            "a",
            a,
            "tj_abase",
            "tj_row0",
            nm,
            tile.m,
            c.m,
            c.a,
            c.a.strides[1],
            c.a.strides[2],
            lambda kk, pos: f"({pos}) * {lda} + {kk}",
            False,
        ),
        (
            "b",
            b,
            "tj_bbase",
            "tj_col0",
            nn,
            tile.n,
            c.n,
            c.b,
            c.b.strides[2],
            c.b.strides[1],
            lambda kk, pos: f"({kk}) * {ldb} + {pos}",
            True,
        ),
    )
    along = [_vector_axis(o[7], o[6], o[8], c.k, o[9], o[4], nk) for o in operands]
    vectors = [o for o, v in zip(operands, along) if v is not None]
    # both tiles copied 16 bytes at a time straight into their layout: asynchronous copies into two buffers,
    # the next step's arriving while this one's products run
    from tracejit.codegen.simt.cuda import SHARED_MEMORY  # cuda.py renders through cstyle.py, which imports this module

    sizes = {"a": tile.m * lda, "b": tile.k * ldb}
    pipelined = tile.double_buffer and along == ["k", "pos"] and 2 * 2 * sum(sizes.values()) <= SHARED_MEMORY
    for which, size in sizes.items():
        r.shared(f"__shared__ __align__(16) __half tj_{which}s[{2 * size if pipelined else size}];")
    tiled.prologue(r, tile, tiles_m, tiles_n)
    r.out(f"const int tj_warp = lid / {WARP}, tj_group = (lid % {WARP}) / 4, tj_pair = lid % 4;")
    r.out(f"const int tj_wm = (tj_warp / {warps_n}) * {tile.rows}, tj_wn = (tj_warp % {warps_n}) * {tile.cols};")
    r.out(f"float tj_c[{tile.rows // 16}][{tile.cols // 8}][4] = {{}};")
    aligned = f"((({' | '.join(f'(unsigned long long){o[1]}' for o in vectors)}) & 15) == 0)"
    if pipelined:
        r.out(f"if ({aligned}) {{")
        r.depth += 1
        for o in operands:
            _stage_async(r, tile, o, c.k, nk, "0", "0")
        r.out("tj_cp_async_commit();")
        r.out(f"for ({it} tj_k0 = 0, tj_buf = 0; tj_k0 < {nk}; tj_k0 += {tile.k}, tj_buf ^= 1) {{")
        r.depth += 1
        r.out(f"if (tj_k0 + {tile.k} < {nk}) {{")
        r.depth += 1
        for o in operands:
            _stage_async(r, tile, o, c.k, nk, f"tj_k0 + {tile.k}", f"(tj_buf ^ 1) * {sizes[o[0]]}")
        r.out("tj_cp_async_commit();")
        r.out("tj_cp_async_wait1();")
        r.depth -= 1
        r.out("} else {")
        r.out("    tj_cp_async_wait0();")
        r.out("}")
        r.out(t.barrier)
        _multiply(r, tile, lda, ldb, f"tj_buf * {sizes['a']}", f"tj_buf * {sizes['b']}")
        r.out(t.barrier)
        r.depth -= 1
        r.out("}")
        r.depth -= 1
        r.out("} else {")
        r.depth += 1
    r.out(f"for ({it} tj_k0 = 0; tj_k0 < {nk}; tj_k0 += {tile.k}) {{")
    r.depth += 1
    if vectors and not pipelined:  # 16 bytes a load where the pointers are aligned (a view's may not be)
        r.out(f"if {aligned} {{")
        r.depth += 1
        for o in vectors:
            _stage_vectors(r, tile, o, c.k, nk)
        r.depth -= 1
        r.out("} else {")
        r.depth += 1
        for o in vectors:
            _stage_loop(r, tile, o, c.k, nk)
        r.depth -= 1
        r.out("}")
    for o in operands:
        if pipelined or o not in vectors:
            _stage_loop(r, tile, o, c.k, nk)
    r.out(t.barrier)
    _multiply(r, tile, lda, ldb, "0", "0")
    r.out(t.barrier)
    r.depth -= 1
    r.out("}")
    if pipelined:
        r.depth -= 1
        r.out("}")
    _helpers(r, pipelined)
    r.out("#pragma unroll")
    r.out(f"for (int tj_i = 0; tj_i < {tile.rows // 16}; tj_i++) {{")
    r.out("#pragma unroll")
    r.out(f"for (int tj_j = 0; tj_j < {tile.cols // 8}; tj_j++) {{")
    r.depth += 1
    for q, (row, col) in enumerate((("0", "0"), ("0", "1"), ("8", "0"), ("8", "1"))):
        m, n = f"tj_m{q}", f"tj_n{q}"
        r.out(
            f"const {it} {m} = tj_row0 + tj_wm + tj_i * 16 + tj_group + {row}, "
            f"{n} = tj_col0 + tj_wn + tj_j * 8 + 2 * tj_pair + {col};"
        )
        where = tiled.sum_of("tj_obase", tiled.offset(m, c.m, c.out.strides[1]), tiled.offset(n, c.n, c.out.strides[2]))
        store = r.write(out, where, f"tj_c[tj_i][tj_j][{q}]", np.dtype("float16"))
        r.out(t.guard(f"{m} < {nm} && {n} < {nn}", store))
    r.depth -= 1
    r.out("}")
    r.out("}")


def _multiply(r, tile: tiled.Tile, lda: int, ldb: int, a_at: str, b_at: str) -> None:
    """Each warp's products of one step's tiles (at offsets a_at and b_at of the local arrays)."""
    fm, fn = tile.rows // 16, tile.cols // 8
    r.out("#pragma unroll")
    r.out(f"for (int tj_ks = 0; tj_ks < {tile.k}; tj_ks += 16) {{")
    r.depth += 1
    r.out(f"unsigned tj_a[{fm}][4];")
    r.out("#pragma unroll")
    r.out(f"for (int tj_i = 0; tj_i < {fm}; tj_i++) {{")
    r.out(f"    const __half* tj_ar = &tj_as[{a_at} + (tj_wm + tj_i * 16 + tj_group) * {lda} + tj_ks + 2 * tj_pair];")
    for q, at in enumerate(("0", f"8 * {lda}", "8", f"8 * {lda} + 8")):
        r.out(f"    tj_a[tj_i][{q}] = *(const unsigned*)(tj_ar + {at});")
    r.out("}")
    r.out("#pragma unroll")
    r.out(f"for (int tj_j = 0; tj_j < {fn}; tj_j++) {{")
    r.depth += 1
    r.out(f"const __half* tj_bc = &tj_bs[{b_at} + (tj_ks + 2 * tj_pair) * {ldb} + tj_wn + tj_j * 8 + tj_group];")
    r.out(
        f"const unsigned tj_b0 = tj_pack(tj_bc[0], tj_bc[{ldb}]), tj_b1 = tj_pack(tj_bc[{8 * ldb}], tj_bc[{9 * ldb}]);"
    )
    r.out("#pragma unroll")
    r.out(f"for (int tj_i = 0; tj_i < {fm}; tj_i++) tj_mma_m16n8k16(tj_c[tj_i][tj_j], tj_a[tj_i], tj_b0, tj_b1);")
    r.depth -= 1
    r.out("}")
    r.depth -= 1
    r.out("}")


def _helpers(r, asynchronous: bool) -> None:
    """The device functions the kernel calls: inline PTX for NVRTC; the emulator's tj_cuda.h defines its own
    (TJ_EMULATED_MMA)."""
    q = r.t.helper_qualifier
    r.helpers["tj_pack"] = (
        f"{q} unsigned tj_pack(__half lo, __half hi) {{\n"
        "    return (unsigned)__half_as_ushort(lo) | ((unsigned)__half_as_ushort(hi) << 16);\n}"
    )
    ptx = [
        f"{q} void tj_mma_m16n8k16(float* c, const unsigned* a, unsigned b0, unsigned b1) {{\n"
        f'    asm volatile("{MMA} {{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};"\n'
        '        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])\n'
        '        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));\n}'
    ]
    if asynchronous:  # 16 bytes global -> shared without registers; bytes = 0 fills zeros (past the edges)
        ptx += [
            f"{q} void tj_cp_async16(void* dst, const void* src, int bytes) {{\n"
            '    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"\n'
            '        :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src), "r"(bytes));\n}',
            f'{q} void tj_cp_async_commit() {{ asm volatile("cp.async.commit_group;"); }}',
            f'{q} void tj_cp_async_wait1() {{ asm volatile("cp.async.wait_group 1;" ::: "memory"); }}',
            f'{q} void tj_cp_async_wait0() {{ asm volatile("cp.async.wait_group 0;" ::: "memory"); }}',
        ]
    r.helpers["tj_mma_ptx" + ("_async" if asynchronous else "")] = (
        "#ifndef TJ_EMULATED_MMA\n" + "\n".join(ptx) + "\n#endif"
    )


def _stage_async(r, tile: tiled.Tile, o, k_sizes, nk: int, k0: str, at: str) -> None:
    """One step's tile of an operand (from contraction position k0) into the local array at offset `at`,
    16 bytes per asynchronous copy, zeros past the edges; the layout is the operand's own along its
    contiguous axis (A along the contraction, B along its columns)."""
    which, ptr, base, start, extent, width, sizes, _, strides, k_strides, local, _ = o
    for kk, pos, name, spare in _vectors(tile, "k" if which == "a" else "pos", o, "tj_c"):
        r.out(f"{{ const {r.idx} {name}k = {k0} + {kk}, {name}p = {start} + {pos};")
        where = tiled.sum_of(
            base, tiled.offset(f"{name}p", sizes, strides), tiled.offset(f"{name}k", k_sizes, k_strides)
        )
        inside = f"{name}p < {extent} && {name}k < {nk}"
        copy = (
            f"tj_cp_async16(&tj_{which}s[{at} + {local(kk, pos)}], "
            f"{inside} ? &{ptr}[{where}] : {ptr}, {inside} ? 16 : 0);"
        )
        r.out(f"  {r.t.guard(spare, copy) if spare else copy} }}")


def _vectors(tile: tiled.Tile, along: str, o, prefix: str):
    """Each of a work-item's 16-byte vectors of one step's tile of an operand, consecutive work-items taking
    consecutive vectors along the contiguous axis: (position along the contraction, along the operand's rows or
    columns, a name, the test that the work-item has this vector or None where every one has)."""
    which, width = o[0], o[5]
    per_row = (tile.k if along == "k" else width) // 8
    count = width * tile.k // 8
    for step in range(-(-count // tile.threads)):
        e = f"(lid + {step * tile.threads})" if step else "lid"
        v = f"{e} % {per_row} * 8"
        kk, pos = (v, f"{e} / {per_row}") if along == "k" else (f"{e} / {per_row}", v)
        yield kk, pos, f"{prefix}{which}{step}", f"{e} < {count}" if count % tile.threads else None


def _vector_axis(operand, sizes, strides, k_sizes, k_strides, extent: int, nk: int) -> str | None:
    """Which axis of an operand's tile 8 halves at a time come from ("k" or "pos"), or None: one axis per role,
    the contiguous one's length a multiple of 8, every other stride and the offset multiples of 8 (aligned
    16-byte vectors wherever the pointer is)."""
    if len(sizes) != 1 or len(k_sizes) != 1 or operand.offset % 8 or any(s % 8 for s in operand.strides[0]):
        return None
    if k_strides[0] == 1 and strides[0] % 8 == 0 and nk % 8 == 0:
        return "k"
    if strides[0] == 1 and k_strides[0] % 8 == 0 and extent % 8 == 0:
        return "pos"
    return None


def _stage_vectors(r, tile: tiled.Tile, o, k_sizes, nk: int) -> None:
    """tiled.stage, 8 halves (a uint4) per load: consecutive work-items take consecutive vectors along the
    contiguous axis; into local memory as one store where that axis is contiguous there too (`row_major`: B,
    whose tile is kept k by k), else as 8."""
    which, ptr, base, start, extent, width, sizes, operand, strides, k_strides, local, row_major = o
    t, it = r.t, r.idx
    along = _vector_axis(operand, sizes, strides, k_sizes, k_strides, extent, nk)
    assert along is not None  # staged by vectors only where it has an axis for them (see `vectors`)
    for kk, pos, name, spare in _vectors(tile, along, o, "tj_v"):
        r.out(f"{it} {name}k = tj_k0 + {kk}, {name}p = {start} + {pos};")
        where = tiled.sum_of(
            base, tiled.offset(f"{name}p", sizes, strides), tiled.offset(f"{name}k", k_sizes, k_strides)
        )
        r.out(f"uint4 {name} = make_uint4(0, 0, 0, 0);")
        inside = f"{spare} && " if spare else ""
        r.out(t.guard(f"{inside}{name}p < {extent} && {name}k < {nk}", f"{name} = *(const uint4*)(&{ptr}[{where}]);"))
        if (along == "pos") == row_major:
            store = f"*(uint4*)(&tj_{which}s[{local(kk, pos)}]) = {name};"
        else:
            # (called at once, in this iteration: the defaults only say which kk and pos)
            step_of = (
                (lambda q, kk=kk, pos=pos: (f"{kk} + {q}", pos))
                if along == "k"
                else (lambda q, kk=kk, pos=pos: (kk, f"{pos} + {q}"))
            )
            store = " ".join(f"tj_{which}s[{local(*step_of(q))}] = ((const __half*)&{name})[{q}];" for q in range(8))
        r.out(t.guard(spare, store) if spare else store)


def _stage_loop(r, tile: tiled.Tile, o, k_sizes, nk: int) -> None:
    """tiled.stage as a loop unrolled 4 times, not whole: for shapes or pointers that 16-byte vectors do not
    fit, small enough to take no registers from the accumulators."""
    which, ptr, base, start, extent, width, sizes, _, strides, k_strides, local, _ = o
    it = r.idx
    k_fast = k_strides[-1] == 1
    kk, pos = (f"tj_e % {tile.k}", f"tj_e / {tile.k}") if k_fast else (f"tj_e / {width}", f"tj_e % {width}")
    r.out("#pragma unroll 4")
    r.out(f"for (int tj_e = lid; tj_e < {width * tile.k}; tj_e += {tile.threads}) {{")
    r.out(f"    const {it} tj_sk = tj_k0 + {kk}, tj_sp = {start} + {pos};")
    where = tiled.sum_of(base, tiled.offset("tj_sp", sizes, strides), tiled.offset("tj_sk", k_sizes, k_strides))
    r.out(
        f"    tj_{which}s[{local(kk, pos)}] = tj_sp < {extent} && tj_sk < {nk} ? "
        f"{ptr}[{where}] : __float2half_rn(0.0f);"
    )
    r.out("}")
