"""Matrix products that SIMT targets (OpenCL, CUDA, Metal, WebGPU) run as a tiled kernel (codegen/simt/tiled.py).

The products are the ones ir/library.py recognises (a sum over k of the product of two broadcast views:
`a @ b`, np.dot, np.einsum, tensordot), in every numeric dtype. Each is written to memory by a kernel of its
own, like a BLAS call on numba, and its consumers (a bias, an activation) fuse into the next kernel. The
kernel's IR is lowered as usual and stays the reference (the interpreter runs it); the Contraction attached
to it says where the renderer finds each element of A, B and the result: per role (batch, m, n, k), the
sizes of its axes and each operand's stride along them. Operands whose views are not affine in the
product's axes (a reshape of a transpose) keep the generated loops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tracejit.ir import build, library
from tracejit.ir.graph import Node, Op, rewrite
from tracejit.ir.analysis import Buffer, c_strides, source_index
from tracejit.ir.symbolic import Expr, Var

MIN_WORK = 1 << 12  # multiply-adds; below it one work-group's worth of loops fused with the neighbours wins
# split-K: a product of fewer result tiles (codegen/simt/tiled.py's 128 x 128) than SPLIT_GROUPS leaves most of a
# GPU idle (64 x 768 @ 768 x 3072, a linear layer of 64 tokens: 24 work-groups for 132 multiprocessors), so
# its contraction is cut into chunks of at least SPLIT_MIN_CHUNK, each chunk's product a batch of its own,
# and the partial products summed by the next kernel with the product's consumers (bias, activation)
TILE_SIDE = 128
SPLIT_GROUPS = 256
SPLIT_MIN_CHUNK = 128
NUMERIC = frozenset(
    np.dtype(t)
    for t in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64")
)


@dataclass(frozen=True)
class Operand:
    """Where an operand's elements are in kernel parameter `param`: offset + sum of index * stride, per
    axis of each of its two roles (A: batch, m, k; B: batch, k, n; the result: batch, m, n)."""

    param: int
    offset: int
    strides: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True)
class Contraction:
    """out[b, m, n] = sum over k of a[b, m, k] * b[b, k, n]; each role a tuple of axis sizes (outer first)."""

    dtype: np.dtype
    batch: tuple[int, ...]
    m: tuple[int, ...]
    n: tuple[int, ...]
    k: tuple[int, ...]
    a: Operand
    b: Operand
    out: Operand

    def sizes(self) -> tuple[int, int, int, int]:
        return math.prod(self.batch), math.prod(self.m), math.prod(self.n), math.prod(self.k)

    def __str__(self) -> str:
        b, m, n, k = self.sizes()
        return f"contraction {b} x ({m} x {k}) @ ({k} x {n}) {self.dtype.name}: a {self.a}, b {self.b}, out {self.out}"


def find(node: Node):
    """What library.plan makes a kernel of its own on a SIMT target: a product of matrices of any
    numeric dtype (sorts stay generated)."""
    if (
        node.op is not Op.REDUCE
        or node.dtype not in NUMERIC
        or node.size < library.MIN_OUTPUT
        or node.srcs[0].dtype != node.dtype
    ):
        return None
    return library.find_gemm(node, MIN_WORK)


def plan(outputs: list[Node], stored: set[Node]) -> tuple[list[Node], dict]:
    """Every product SIMT targets tile, by the node written for it (see library.plan); products of few
    tiles split along the contraction first (split_k)."""
    return library.plan(rewrite(outputs, split_k), stored, find)


def split_k(node: Node) -> Node:
    """A product of fewer than SPLIT_GROUPS tiles as the sum of `chunks` partial products, each over a
    chunk of the contraction: partial[c, ...] = x[..., c-th chunk] @ y[c-th chunk, ...], one batched product
    (its chunk axis outermost, so the sum reads it coalesced), then total = partial[0] + partial[1] + ...,
    elementwise, fused with what consumes the product. float16 keeps one product (its partials would round
    to float16); integers wrap the same in any order; float sums change order as BLAS's blocked sums do."""
    gemm = find(node)
    if gemm is None or node.dtype == np.float16 or len(gemm.k) != 1:
        return node
    b, m, n, k = gemm.sizes()
    tiles = b * -(-m // TILE_SIDE) * -(-n // TILE_SIDE)
    chunks = 1
    while tiles * chunks < SPLIT_GROUPS and k % (2 * chunks) == 0 and k // (2 * chunks) >= SPLIT_MIN_CHUNK:
        chunks *= 2
    if chunks == 1:
        return node
    product, d = node.srcs[0], gemm.k[0]
    shape = product.shape[:d] + (chunks, k // chunks) + product.shape[d + 1 :]
    x, y = (
        build.expand(build.reshape(v, v.shape[:d] + (chunks, k // chunks) + v.shape[d + 1 :]), shape)
        for v in (gemm.x, gemm.y)
    )
    partial = build.reduce(build.binary(Op.MUL, x, y), "sum", (d + 1,))
    parts = build.reshape(partial, product.shape[:d] + (chunks,) + product.shape[d + 1 :])
    parts = build.permute(parts, (d,) + tuple(i for i in range(len(product.shape)) if i != d))
    whole = tuple((0, 1, size) for size in parts.shape[1:])
    return _pairwise([build.reshape(build.slice_(parts, ((c, 1, 1),) + whole), node.shape) for c in range(chunks)])


def _pairwise(terms: list[Node]) -> Node:
    """The sum of `terms` as a balanced tree of elementwise adds: one thread per result reads every chunk's
    partial (a reduction over the chunk axis would be rendered as a work-group per result)."""
    if len(terms) == 1:
        return terms[0]
    half = len(terms) // 2
    return build.binary(Op.ADD, _pairwise(terms[:half]), _pairwise(terms[half:]))


def describe(gemm: library.Gemm, written: Node, reads: dict, out: Buffer, params: list[Buffer]) -> Contraction | None:
    """The Contraction of the kernel that writes `written` (the product, or views of it) into `out` and
    has `params`, or None when an operand is not an affine view of one of them."""
    product = gemm.node.srcs[0]
    axes = [Var(f"p{d}", s) for d, s in enumerate(product.shape)]
    position = {p.key: i for i, p in enumerate(params)}
    found = []
    for x, roles in ((gemm.x, (gemm.batch, gemm.m, gemm.k)), (gemm.y, (gemm.batch, gemm.k, gemm.n))):
        where = _operand_offset(x, axes, reads)
        if where is None or where[0].key not in position:
            return None
        found.append(_operand(position[where[0].key], where[1], axes, roles))
    offset = out.offset_of(_forward(gemm.node, written, axes, gemm.k))
    a, b = found
    if out.key not in position or a is None or b is None:
        return None
    result = _operand(position[out.key], offset, axes, (gemm.batch, gemm.m, gemm.n))
    if result is None:
        return None
    shape = product.shape
    batch, m, n, k = (tuple(shape[d] for d in r) for r in (gemm.batch, gemm.m, gemm.n, gemm.k))
    return _merged(Contraction(gemm.node.dtype, batch, m, n, k, a, b, result))


def _operand_offset(x: Node, axes: list[Var], reads: dict) -> tuple[Buffer, Expr] | None:
    """The buffer x's views start from, and x's element at the product's index there."""
    idx = tuple(Expr.of(v) if s != 1 else Expr() for v, s in zip(axes, x.shape))
    while x not in reads:
        if x.op not in library.VIEWS:
            return None  # a constant or a computed value the plan did not write first
        idx, _ = source_index(x, idx)
        x = x.srcs[0]
    buf = reads[x]
    return buf, buf.offset_of(idx)


def _forward(node: Node, written: Node, axes: list[Var], k: tuple[int, ...]) -> tuple[Expr, ...]:
    """The index of `written` (reshapes and permutes of the product's sum `node`) at the product's index."""
    idx = tuple(Expr() if d in k or s == 1 else Expr.of(v) for d, (v, s) in enumerate(zip(axes, node.shape)))
    chain = []
    while written is not node:
        chain.append(written)
        written = written.srcs[0]
    for view in reversed(chain):
        if view.op is Op.PERMUTE:
            idx = tuple(idx[p] for p in view.arg)
        else:  # a reshape: through the flat position
            flat = Expr()
            for e, st in zip(idx, c_strides(view.srcs[0].shape)):
                flat = flat + e * st
            idx = tuple(Expr() if s == 1 else (flat // st) % s for s, st in zip(view.shape, c_strides(view.shape)))
    return idx


def _operand(param: int, offset: Expr, axes: list[Var], roles) -> Operand | None:
    """The Operand at `offset` (in the product's axes), or None when it is not affine in them."""
    if any(not isinstance(atom, Var) for atom in offset.atoms()):
        return None

    def stride(d: int) -> int:
        c = offset.coefficient(axes[d])
        assert c is not None  # every atom is a variable: the offset is affine in each
        return c

    first, second, third = (tuple(stride(d) for d in r) for r in roles)
    return Operand(param, offset.const, (first, second, third))


def _merged(c: Contraction) -> Contraction:
    """Neighbouring axes of a role that every operand walks as one (contiguous batches, a (B, T) of rows)
    become one axis, so the kernel unravels fewer indices."""
    roles = {"batch": list(c.batch), "m": list(c.m), "n": list(c.n), "k": list(c.k)}
    # per role, the operands that have it and where in their strides it is
    users = {
        "batch": [(c.a, 0), (c.b, 0), (c.out, 0)],
        "m": [(c.a, 1), (c.out, 1)],
        "k": [(c.a, 2), (c.b, 1)],
        "n": [(c.b, 2), (c.out, 2)],
    }
    strides = {id(o): [list(s) for s in o.strides] for o in (c.a, c.b, c.out)}
    for role, sizes in roles.items():
        d = len(sizes) - 1
        while d > 0:
            if all(strides[id(o)][r][d - 1] == strides[id(o)][r][d] * sizes[d] for o, r in users[role]):
                sizes[d - 1 : d + 1] = [sizes[d - 1] * sizes[d]]
                for o, r in users[role]:
                    del strides[id(o)][r][d - 1]
            d -= 1

    def op(o: Operand) -> Operand:
        first, second, third = (tuple(s) for s in strides[id(o)])
        return Operand(o.param, o.offset, (first, second, third))

    batch, m, n, k = (tuple(roles[r]) for r in ("batch", "m", "n", "k"))
    return Contraction(c.dtype, batch, m, n, k, op(c.a), op(c.b), op(c.out))
