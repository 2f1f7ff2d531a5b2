"""Matrix products that a BLAS computes better than generated loops.

A float32 or float64 sum over some axes of the product of two broadcast views (what `a @ b`, np.dot,
np.einsum and a hand-written `(a[:, :, None] * b[None]).sum(1)` all trace to) is a batched matrix product
when every axis of the product is one of: a batch axis (both operands have it, kept), an m axis (only the
left operand has it), an n axis (only the right one), a k axis (both have it, summed). On a device whose
launch plan can call a BLAS (numba: NumPy's matmul, OpenBLAS, on all cores), such a reduction above
MIN_WORK multiply-adds is a kernel of its own: its operands are read through their views straight from
the buffers they live in (a transposed weight is not copied), anything computed is written first, and the
consumers (a bias, an activation) read the product from memory in the next kernel. The kernel IR lowered
for it as usual stays the reference (the interpreter, and any device without a BLAS, runs that).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .graph import MOVEMENT, Node, Op, toposort

MIN_WORK = 1 << 16     # multiply-adds; below it the fused loops win (no pass over memory between kernels)
MIN_OUTPUT = 64        # fewer results than this: the two-stage split reduction spreads the work better
DTYPES = frozenset({np.dtype("float32"), np.dtype("float64")})
# movement ops the plan applies as NumPy views (a pad would need a copy: its source is written first)
VIEWS = MOVEMENT - {Op.PAD}
LEAVES = frozenset({Op.INPUT, Op.CONST, Op.IOTA, Op.TABLE})   # read where they are, never computed


@dataclass(frozen=True)
class Gemm:
    """One product: `node` (the REDUCE) is x * y summed over k; x and y are the views before broadcasting
    (the product's rank, size 1 along the other operand's own axes); the axes of the product by role."""
    node: Node
    x: Node
    y: Node
    batch: tuple[int, ...]
    m: tuple[int, ...]
    n: tuple[int, ...]
    k: tuple[int, ...]
    unit: tuple[int, ...]   # size 1 in the product: in no role
    sources: tuple[Node, ...] = ()   # where the operands' views start (see plan)

    def sizes(self) -> tuple[int, int, int, int]:
        shape = self.node.srcs[0].shape
        return tuple(math.prod(shape[d] for d in axes) for axes in (self.batch, self.m, self.n, self.k))

    def leaves(self, written: set[Node]) -> tuple[Node, ...]:
        """The nodes the operands' views start from: arguments, constants, values written first (among
        them `written`: another product's result)."""
        out: list[Node] = []
        stack = [self.y, self.x]
        while stack:
            n = stack.pop()
            if n.op in VIEWS and n not in written:
                stack.extend(reversed(n.srcs))
            elif n not in out:
                out.append(n)
        return tuple(out)


def find(node: Node) -> Gemm | None:
    """The matrix product `node` is, if it is one worth a BLAS call."""
    if node.op is not Op.REDUCE or node.arg[0] != "sum" or node.dtype not in DTYPES or node.size < MIN_OUTPUT:
        return None
    product = node.srcs[0]
    if product.op is not Op.MUL:
        return None
    x, y = (s.srcs[0] if s.op is Op.EXPAND else s for s in product.srcs)
    roles: dict[str, list[int]] = {"batch": [], "m": [], "n": [], "k": [], "unit": []}
    for d, size in enumerate(product.shape):
        xs, ys = x.shape[d], y.shape[d]
        if size == 1:
            role = "unit"
        elif d in node.arg[1]:
            if xs != size or ys != size:
                return None   # a sum over one operand's axis alone: not a product of matrices
            role = "k"
        elif xs == ys:
            role = "batch"
        else:
            role = "m" if ys == 1 else "n"
        roles[role].append(d)
    gemm = Gemm(node, x, y, *(tuple(roles[r]) for r in ("batch", "m", "n", "k", "unit")))
    b, m, n, k = gemm.sizes()
    if not gemm.k or b * m * n * k < MIN_WORK:
        return None
    return gemm


@dataclass(frozen=True)
class Call:
    """A kernel the launch plan may run as a BLAS call: the product, where each leaf of its operands is
    (its kernel parameter, how its elements lie there), the parameter written, and the views (reshapes and
    permutes) between the product and the node written there, in order."""
    gemm: Gemm
    leaves: tuple[tuple[Node, int, object], ...]
    out: int
    views: tuple[Node, ...]

    def write(self, x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
        """The product of the operands' views x and y into `out`, the written node's contiguous array."""
        product = out
        for node in reversed(self.views):   # back from the written node to the product, as views
            inverse = np.argsort(node.arg) if node.op is Op.PERMUTE else None
            try:
                product = product.transpose(inverse) if inverse is not None else \
                    product.reshape(node.srcs[0].shape, copy=False)
            except ValueError:   # no view of the product's shape: compute it apart, then store it
                product = np.empty(self.gemm.node.shape, out.dtype)
                multiply(self.gemm, x, y, product)
                out[...] = view(self.views[-1], {self.gemm.node: product})
                return
        multiply(self.gemm, x, y, product)


def plan(outputs: list[Node], stored: set[Node]) -> dict[Node, Gemm]:
    """Every product worth a BLAS call among `outputs`' graph, by the node written for it: the product
    itself, or the reshapes and permutes that are all its consumers see (einsum's result in its output
    order). That node, and every computed value the operands' views start from, go to `stored`."""
    order = toposort(outputs)
    consumers: dict[Node, list[Node]] = {}
    for n in order:
        for s in n.srcs:
            consumers.setdefault(s, []).append(n)
    found: dict[Node, Gemm] = {}
    for n in order:
        gemm = find(n)
        if gemm is None:
            continue
        written = n
        while written not in outputs and len(consumers.get(written, ())) == 1 and \
                consumers[written][0].op in (Op.RESHAPE, Op.PERMUTE):
            written = consumers[written][0]
        gemm = replace(gemm, sources=gemm.leaves(set(found)))
        found[written] = gemm
        stored.add(written)
        stored.update(leaf for leaf in gemm.sources if leaf.op not in LEAVES)
    return found


def call(gemm: Gemm, written: Node, params: list, reads: dict, out_key) -> Call | None:
    """The Call for a kernel whose parameters are `params` (buffers, by key), or None when a leaf is not
    among them (the kernel then runs as generated)."""
    position = {p.key: i for i, p in enumerate(params)}
    leaves = []
    for leaf in gemm.sources:
        if leaf.op in LEAVES - {Op.INPUT}:
            continue
        buffer = reads.get(leaf)
        if buffer is None or buffer.key not in position:
            return None
        leaves.append((leaf, position[buffer.key], buffer))
    views = []
    while written is not gemm.node:
        views.append(written)
        written = written.srcs[0]
    return Call(gemm, tuple(leaves), position[out_key], tuple(reversed(views))) if out_key in position else None


# ---- evaluation on the host, with NumPy (the runtime calls this; no device code involved) ----

def view(node: Node, leaves: dict) -> np.ndarray:
    """`node` as a NumPy view, given the arrays of its leaves (`leaves[leaf]`); constants are made."""
    if node in leaves:
        return leaves[node]
    if node.op in VIEWS:
        x = view(node.srcs[0], leaves)
        if node.op is Op.RESHAPE:
            return x.reshape(node.shape)
        if node.op is Op.PERMUTE:
            return x.transpose(node.arg)
        if node.op is Op.EXPAND:
            return np.broadcast_to(x, node.shape)
        return x[tuple(_slice(start, step, count) for start, step, count in node.arg)]
    if node.op is Op.CONST:
        return np.full(node.shape, node.arg, node.dtype)
    if node.op is Op.IOTA:
        index = np.arange(node.shape[node.arg]).reshape([-1 if d == node.arg else 1 for d in range(len(node.shape))])
        return np.broadcast_to(index, node.shape).astype(node.dtype)
    assert node.op is Op.TABLE, f"{node.op} is not a leaf of this product"
    return node.arg.values.reshape(node.shape)


def _slice(start: int, step: int, count: int) -> slice:
    stop = start + step * count
    return slice(start, stop if stop >= 0 else None, step)


def multiply(gemm: Gemm, x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
    """out (the reduction's shape) = x * y summed over k, through np.matmul on (B, M, K) @ (B, K, N)."""
    b, m, n, k = gemm.sizes()
    a = x.transpose(gemm.batch + gemm.m + gemm.k + gemm.n + gemm.unit).reshape(b, m, k)
    c = y.transpose(gemm.batch + gemm.k + gemm.n + gemm.m + gemm.unit).reshape(b, k, n)
    target = out.transpose(gemm.batch + gemm.m + gemm.n + gemm.k + gemm.unit)
    try:
        into = target.reshape((b, m, n), copy=False)
    except ValueError:   # the result's axes interleave: no (B, M, N) view of it
        target[...] = np.matmul(a, c).reshape(target.shape)
        return
    np.matmul(a, c, out=into)
