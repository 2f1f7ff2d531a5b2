"""Matrix products and sorts that a library on the host computes better than generated loops.

On a device whose launch plan runs on the host's memory (numba), two kinds of node are kernels of their
own that the plan runs as NumPy calls on views of the buffers (LayoutOptions.library):
- a float32 or float64 sum over some axes of the product of two broadcast views (what `a @ b`, np.dot,
  np.einsum and a hand-written `(a[:, :, None] * b[None]).sum(1)` all trace to) is a batched matrix
  product when every axis of the product is one of: a batch axis (both operands have it, kept), an m
  axis (only the left operand has it), an n axis (only the right one), a k axis (both have it, summed).
  Above MIN_WORK multiply-adds it is np.matmul: NumPy's BLAS (OpenBLAS, on all cores);
- a sort along an axis (np.sort, np.argsort, and what median, percentile and topk sort) is NumPy's own
  sort: np.sort's default (a SIMD introsort; NaN last) for values, np.argsort(kind="stable") for
  positions (ties in their order, as tracejit's sort promises).
The operands are read through their views straight from the buffers they live in (a transposed weight
is not copied); anything computed is written first, and the consumers (a bias, an activation, a median's
pick) read the result from memory in the next kernel. The kernel IR lowered for these nodes as usual
stays the reference: the interpreter, and every device without such a library, runs that.
"""

from __future__ import annotations

import functools
import math
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from tracejit.ir import build, evaluate
from tracejit.ir.evaluate import constant_value
from tracejit.ir.graph import MOVEMENT, Node, Op, rewrite, toposort

MIN_WORK = 1 << 16  # multiply-adds; below it the fused loops win (no pass over memory between kernels)
MIN_SIDE = 8  # rows and columns of the product at least: a row's sum of squares (layernorm's variance) or a
# matrix-vector product of a computed matrix is memory-bound, and fused with its neighbours it wins
MIN_MATVEC = 1 << 14  # elements of a matrix read from memory times a vector: BLAS's gemv reads it faster than the
# generated loops (y @ A sums down the columns: 5x slower at 5500^2; see find_gemm)
# ... and times 2-7 vectors, a matrix of at least this many elements (float32 768 x 3072, 9 MB: the generated
# loops 0.46 ms against BLAS's 0.65; 4096^2: 6.5 against 5.1; 30000 x 2000: 81 against 17)
MIN_ROWS_MATRIX = 1 << 22
MIN_OUTPUT = 64  # fewer results than this: the two-stage split reduction spreads the work better
MIN_SORT = 1 << 16  # elements; NumPy's SIMD sort beats the generated merge sort by ~4x from here
MIN_POSITIONS = 1 << 14  # elements of a mask: np.flatnonzero (one pass) beats the scan and scatter from here
DTYPES = frozenset({np.dtype("float32"), np.dtype("float64")})
# movement ops the plan applies as NumPy views (a pad would need a copy: its source is written first)
VIEWS = MOVEMENT - {Op.PAD}
LEAVES = frozenset({Op.INPUT, Op.CONST, Op.IOTA, Op.TABLE})  # read where they are, never computed


class _Library(ABC):
    """What a library call has: `node`, the value it computes; `operands` (each kind's own), the views it
    reads; `sources`, where those views start (see plan)."""

    node: Node
    sources: tuple[Node, ...]

    @property
    @abstractmethod
    def operands(self) -> tuple[Node, ...]: ...

    def leaves(self, written: set[Node]) -> tuple[Node, ...]:
        """The nodes the operands' views start from: arguments, constants, values written first (among
        them `written`: another call's result)."""
        out: list[Node] = []
        stack = list(reversed(self.operands))
        while stack:
            n = stack.pop()
            if n.op in VIEWS and n not in written:
                stack.extend(reversed(n.srcs))
            elif n not in out:
                out.append(n)
        return tuple(out)


@dataclass(frozen=True)
class Gemm(_Library):
    """One product: `node` (the REDUCE) is x * y summed over k; x and y are the views before broadcasting
    (the product's rank, size 1 along the other operand's own axes); the axes of the product by role."""

    node: Node
    x: Node
    y: Node
    batch: tuple[int, ...]
    m: tuple[int, ...]
    n: tuple[int, ...]
    k: tuple[int, ...]
    unit: tuple[int, ...]  # size 1 in the product: in no role
    sources: tuple[Node, ...] = ()

    @property
    def operands(self) -> tuple[Node, ...]:
        return self.x, self.y

    def sizes(self) -> tuple[int, int, int, int]:
        shape = self.node.srcs[0].shape
        b, m, n, k = (math.prod(shape[d] for d in axes) for axes in (self.batch, self.m, self.n, self.k))
        return b, m, n, k

    def describe(self) -> str:
        b, m, n, k = self.sizes()
        return f"matmul (BLAS): {b} x ({m} x {k}) @ ({k} x {n}), {self.node.dtype}"

    def run(self, x: np.ndarray, y: np.ndarray, out: np.ndarray, matmul=None) -> None:
        """out (the reduction's shape) = x * y summed over k, by `matmul(a, c, out)` (np.matmul's
        signature; the numba device's: runtime.blas.matmul) on (B, M, K) @ (B, K, N)."""
        matmul = matmul or (lambda a, c, into: np.matmul(a, c, out=into))
        b, m, n, k = self.sizes()
        a = x.transpose(self.batch + self.m + self.k + self.n + self.unit).reshape(b, m, k)
        c = y.transpose(self.batch + self.k + self.n + self.m + self.unit).reshape(b, k, n)
        target = out.transpose(self.batch + self.m + self.n + self.k + self.unit)
        try:
            into = target.reshape((b, m, n), copy=False)
        except ValueError:  # the result's axes interleave: no (B, M, N) view of it
            into = np.empty((b, m, n), out.dtype)
            matmul(a, c, into)
            target[...] = into.reshape(target.shape)
            return
        matmul(a, c, into)


@dataclass(frozen=True)
class Sort(_Library):
    """np.sort / np.argsort (kind="stable") of x along axis: the SORT node's values or int32 positions. Values
    are NumPy's default sort (SIMD introsort: NaN last, -0.0 and 0.0 in the order np.sort(x) gives them),
    positions its stable sort."""

    node: Node
    sources: tuple[Node, ...] = ()

    @property
    def operands(self) -> tuple[Node, ...]:
        return self.node.srcs

    def describe(self) -> str:
        axis, what = self.node.arg
        name = "argsort" if what == "indices" else "sort"
        return f"numpy.{name}(kind='stable', axis={axis}) of {self.node.srcs[0].shape} {self.node.srcs[0].dtype}"

    def run(self, x: np.ndarray, out: np.ndarray) -> None:
        axis, what = self.node.arg
        key = self.node.srcs[0]
        if what == "indices" and x.ndim == 1 and key.op is Op.CAST and key.srcs[0].dtype == np.bool_:
            # a mask sorted as bytes (the selected first: numpy/data_sizes.py): the 0s' positions, then the 1s'
            zeros = np.flatnonzero(x == 0)
            out[: zeros.size] = zeros
            out[zeros.size :] = np.flatnonzero(x)
        elif what == "indices":
            out[...] = np.argsort(x, axis=axis, kind="stable")
        else:  # equal values are indistinguishable but for -0.0 and 0.0, which NumPy's np.sort orders its way
            out[...] = np.sort(x, axis=axis)


@dataclass(frozen=True)
class Positions(_Library):
    """The positions of a mask's selected elements (numpy/data_sizes.py's scatter of each one's rank): NumPy's
    np.flatnonzero, first in the int32 result, zeros after; the last entry, where the scatter adds up the
    positions of the others, is their sum as the scatter's int32 adds leave it."""

    node: Node
    mask: Node
    sources: tuple[Node, ...] = ()

    @property
    def operands(self) -> tuple[Node, ...]:
        return (self.mask,)

    def describe(self) -> str:
        return f"numpy.flatnonzero of {self.mask.shape} bool"

    def run(self, mask: np.ndarray, out: np.ndarray) -> None:
        found = np.flatnonzero(mask)
        out[: found.size] = found
        out[found.size : -1] = 0
        total = mask.size * (mask.size - 1) // 2 - int(found.sum(dtype=np.int64))
        out[-1] = np.array(total & 0xFFFFFFFF, np.uint32).view(np.int32)


# masks whose positions numpy/data_sizes.py placed with a scatter (weakly: a graph's nodes come and go)
POSITIONED: weakref.WeakSet[Node] = weakref.WeakSet()


def _positions_mask(node: Node) -> Node | None:
    """The mask whose selected elements' positions a SCATTER node places (data_sizes.positions: each selected
    element's running count minus one, the others the place past the end; the scan may be split in blocks by
    now), else None."""
    if node.op is not Op.SCATTER or node.arg != "sum" or node.dtype != np.int32 or len(node.shape) != 1:
        return None
    target, place, values = node.srcs
    total = node.shape[0] - 1
    if target.op is not Op.CONST or target.arg != 0 or values.op is not Op.IOTA or values.shape != (total,):
        return None
    if place.op is not Op.WHERE or place.srcs[2].op is not Op.CONST or place.srcs[2].arg != total:
        return None
    mask, rank = place.srcs[0], place.srcs[1]
    if mask not in POSITIONED:
        return None
    below = toposort([rank])
    counted = any(n.op is Op.CAST and n.srcs[0] is mask for n in below)
    return mask if counted and any(n.op is Op.SCAN for n in below) else None


def find(node: Node) -> Gemm | Sort | Positions | None:
    """The library call `node` is, if it is one worth making."""
    if node.op is Op.SORT:  # small sorts stay fused with their producers and consumers
        return Sort(node) if node.size >= MIN_SORT else None
    if node.op is Op.SCATTER:
        mask = _positions_mask(node)
        return Positions(node, mask) if mask is not None and mask.size >= MIN_POSITIONS else None
    if node.dtype not in DTYPES or node.size < MIN_OUTPUT:
        return None
    return find_gemm(node, MIN_WORK, matvec=True)


def find_gemm(node: Node, min_work: int, matvec: bool = False) -> Gemm | None:
    """`node` as a product of matrices (see Gemm) of at least `min_work` multiply-adds and MIN_SIDE rows
    and columns, or None. Also what SIMT targets tile (ir/contraction.py). `matvec`: also a matrix times a vector
    (`y @ A`, `A @ x`) whose matrix of at least MIN_MATVEC elements is read straight from memory (an argument's
    view): BLAS's gemv reads it once at the memory's speed on every core, where the generated reduction along
    its columns (`y @ A`) does not; a matrix computed by the kernel stays fused instead (no pass to write it)."""
    if node.op is not Op.REDUCE or node.arg[0] != "sum":
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
                return None  # a sum over one operand's axis alone: not a product of matrices
            role = "k"
        elif xs == ys:
            role = "batch"
        else:
            role = "m" if ys == 1 else "n"
        roles[role].append(d)
    gemm = Gemm(
        node, x, y, tuple(roles["batch"]), tuple(roles["m"]), tuple(roles["n"]), tuple(roles["k"]), tuple(roles["unit"])
    )
    b, m, n, k = gemm.sizes()
    if not gemm.k or b * m * n * k < min_work:
        return None
    if min(m, n) < MIN_SIDE and not (matvec and _matrix_times_vector(gemm)):
        return None
    return gemm


def _matrix_times_vector(gemm: Gemm) -> bool:
    """Whether the product is one matrix (k by n, or m by k, at least MIN_MATVEC elements) read from memory times
    a vector, or times fewer than MIN_SIDE of them (`x @ W` for 2 rows of x: generated, the sum down W's columns
    took 81 ms for 2 x 30000 @ 30000 x 2000 float32 where NumPy's BLAS takes 17; see find_gemm)."""
    b, m, n, k = gemm.sizes()
    if b != 1 or min(m, n) >= MIN_SIDE or max(m, n) < MIN_SIDE or k < MIN_SIDE or max(m, n) * k < MIN_MATVEC:
        return False
    if min(m, n) > 1 and max(m, n) * k < MIN_ROWS_MATRIX:  # (a few rows through a matrix the caches hold: fused)
        return False
    matrix = gemm.y if m == 1 else gemm.x
    while matrix.op in VIEWS:
        matrix = matrix.srcs[0]
    return matrix.op in (Op.INPUT, Op.CONST)


@dataclass(frozen=True)
class Call:
    """A kernel the launch plan may run as a library call: the call, where each leaf of its operands is
    (its kernel parameter, how its elements lie there), the parameter written, and the views (reshapes and
    permutes) between the call's result and the node written there, in order."""

    what: Gemm | Sort | Positions
    leaves: tuple[tuple[Node, int, object], ...]
    out: int
    views: tuple[Node, ...]

    def write(self, operands: list[np.ndarray], out: np.ndarray, matmul=None) -> None:
        """The call on its operands' views, into `out`: the written node's contiguous array (`matmul`: see
        Gemm.run)."""
        run: Callable[..., None] = (
            functools.partial(self.what.run, matmul=matmul) if isinstance(self.what, Gemm) else self.what.run
        )
        result = out
        for node in reversed(self.views):  # back from the written node to the call's result, as views
            try:
                result = (
                    result.transpose(np.argsort(node.arg))
                    if node.op is Op.PERMUTE
                    else result.reshape(node.srcs[0].shape, copy=False)
                )
            except ValueError:  # no view of the result's shape: compute it apart, then store it
                result = np.empty(self.what.node.shape, out.dtype)
                run(*operands, result)
                out[...] = view(self.views[-1], {self.what.node: result})
                return
        run(*operands, result)


def _casts_first(outputs: list[Node], find=find) -> list[Node]:
    """A cast of a view as an operand (float32 weights transposed and cast for a float64 product:
    `h @ wte.T`) becomes the view of the cast: the value written first is then the whole array cast in
    its own layout, a streaming pass, not a transposing one."""
    targets = set()
    for n in toposort(outputs):
        what = find(n)
        for leaf in what.leaves(set()) if what else ():
            below = leaf.srcs[0] if leaf.op is Op.CAST else None
            while below is not None and below.op in VIEWS:
                below = below.srcs[0]
            if below is not None and below is not leaf.srcs[0] and below.size <= leaf.size:
                targets.add(leaf)
    return rewrite(outputs, lambda n: _cast_first(n) if n in targets else n) if targets else outputs


def _cast_first(cast: Node) -> Node:
    views, x = [], cast.srcs[0]
    while x.op in VIEWS:
        views.append(x)
        x = x.srcs[0]
    out = build.cast(x, cast.dtype)
    for v in reversed(views):
        out = Node.make(v.op, cast.dtype, v.shape, (out,), v.arg, v.weak)
    return out


def plan(outputs: list[Node], stored: set[Node], find=find) -> tuple[list[Node], dict[Node, Gemm | Sort | Positions]]:
    """Every library call worth making among `outputs`' graph, by the node written for it: the call's
    result itself, or the reshapes and permutes that are all its consumers see (einsum's result in its
    output order). That node, and every computed value the operands' views start from, go to `stored`.
    Returns the outputs (rewritten by _casts_first) with the calls. `find` says which nodes are calls
    (ir/contraction.py passes its own: the products SIMT targets tile)."""
    outputs = _casts_first(outputs, find)
    order = toposort(outputs)
    consumers: dict[Node, list[Node]] = {}
    for n in order:
        for s in n.srcs:
            consumers.setdefault(s, []).append(n)
    found: dict[Node, Gemm | Sort | Positions] = {}
    for n in order:
        what = find(n)
        if what is None:
            continue
        written = n
        while (
            written not in outputs
            and len(consumers.get(written, ())) == 1
            and consumers[written][0].op in (Op.RESHAPE, Op.PERMUTE)
        ):
            written = consumers[written][0]
        what = replace(what, sources=what.leaves(set(found)))
        found[written] = what
        stored.add(written)
        stored.update(leaf for leaf in what.sources if leaf.op not in LEAVES)
    return outputs, found


def call(what: Gemm | Sort | Positions, written: Node, params: list, reads: dict, out_key) -> Call | None:
    """The Call for a kernel whose parameters are `params` (buffers, by key), or None when a leaf is not
    among them (the kernel then runs as generated)."""
    position = {p.key: i for i, p in enumerate(params)}
    leaves = []
    for leaf in what.sources:
        if leaf.op in LEAVES - {Op.INPUT}:
            continue
        buffer = reads.get(leaf)
        if buffer is None or buffer.key not in position:
            return None
        leaves.append((leaf, position[buffer.key], buffer))
    views = []
    while written is not what.node:
        views.append(written)
        written = written.srcs[0]
    return Call(what, tuple(leaves), position[out_key], tuple(reversed(views))) if out_key in position else None


# ---- evaluation on the host, with NumPy (the runtime calls this; no device code involved) ----


def view(node: Node, leaves: dict) -> np.ndarray:
    """`node` as a NumPy view, given the arrays of its leaves (`leaves[leaf]`); constants are made."""
    if node in leaves:
        return leaves[node]
    if node.op in VIEWS:
        return evaluate.view(node, view(node.srcs[0], leaves))
    assert node.op in LEAVES - {Op.INPUT}, f"{node.op} is not a leaf of this call"
    value = constant_value(node)
    assert value is not None  # a leaf but an input is a constant
    return value
