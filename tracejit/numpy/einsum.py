"""np.einsum, and the contraction it shares with dot, matmul, tensordot, inner, vdot and outer: axes
named by labels, diagonals read as strided views, operands multiplied pairwise over broadcast views and
summed: the broadcast-multiply-reduce pattern that fusion keeps in one kernel and the layout pass tiles."""

from __future__ import annotations

import math
import string
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
from numpy.typing import DTypeLike

from tracejit.errors import ShapeError, UnsupportedError
from tracejit.ir import build
from tracejit.ir.dtypes import BOOL, check, is_narrow_float
from tracejit.ir.graph import Node, Op
from tracejit.numpy.tensor import Casting, Tensor, as_node

__all__ = ["einsum"]

Label = Hashable  # a subscript letter, or a negative int for a broadcast ('...') axis: -1 the last


@dataclass(frozen=True)
class Term:
    """An operand whose axes are named by labels, no label twice."""

    node: Node
    labels: tuple[Label, ...]


# --- the contraction -------------------------------------------------------------------------------


def strong(x) -> Node:
    """x as the array NumPy's contractions make of it (np.asarray): a Python scalar is a float64 / int64
    / bool array, not a weak scalar (np.dot(x_f32, 2.0) is float64)."""
    node = as_node(x)
    return build.cast(node, node.dtype)


def contract(
    operands: list[tuple[Node, tuple[Label, ...]]], output: tuple[Label, ...], what: str = "np.einsum"
) -> Node:
    """Sum over every label missing from `output` of the product of the operands, with NumPy's einsum
    semantics: the result dtype is NumPy's promotion of the operands' (integers stay integers, bools
    are the `or` of `and`s), a label repeated within an operand takes its diagonal, and a label of size
    1 broadcasts against the same label elsewhere. The result's axes are `output`'s, in its order."""
    dtype = check(np.result_type(*(n.dtype for n, _ in operands)), f"result of {what}")
    if is_narrow_float(dtype):  # products and sums in float32, as ml_dtypes' dot; matmul's result stays float32
        product = contract([(build.cast(n, np.float32), labels) for n, labels in operands], output, what)
        return product if what == "matmul" else build.cast(product, dtype)
    shapes = [n.shape for n, _ in operands]
    terms = [_diagonal(build.cast(n, dtype), labels, k, what) for k, (n, labels) in enumerate(operands)]
    _check_sizes(terms, shapes, what)
    # a label only one operand has and the output lacks is summed out before any product
    terms = [_sum_out(t, _needed(output, terms[:k] + terms[k + 1 :])) for k, t in enumerate(terms)]
    while len(terms) > 1:
        i, j = _cheapest_pair(terms)
        rest = [t for k, t in enumerate(terms) if k not in (i, j)]
        merged = _multiply(terms[i], terms[j], _needed(output, rest))
        terms = rest[:i] + [merged] + rest[i:]
    last = _sum_out(terms[0], set(output))
    return build.permute(last.node, tuple(last.labels.index(label) for label in output))


def _diagonal(node: Node, labels: tuple[Label, ...], k: int, what: str) -> Term:
    """Take the diagonal of every label the operand repeats ('ii->i'): the two axes moved last, viewed
    as one of n*n elements and read with step n + 1, which index arithmetic turns into a strided read."""
    while len(set(labels)) < len(labels):
        label = next(lab for lab in labels if labels.count(lab) > 1)
        p = labels.index(label)
        q = labels.index(label, p + 1)
        n = node.shape[p]
        if node.shape[q] != n:
            raise ShapeError(
                f"{what}: dimensions in operand {k} for collapsing index {label!r} don't match "
                f"({n} != {node.shape[q]}; its shape is {node.shape})"
            )
        others = [d for d in range(len(labels)) if d not in (p, q)]
        node = build.permute(node, (*others, p, q))
        node = build.reshape(node, tuple(node.shape[:-2]) + (n * n,))
        node = build.slice_(node, tuple((0, 1, s) for s in node.shape[:-1]) + ((0, n + 1, n),))
        labels = tuple(labels[d] for d in others) + (label,)
    return Term(node, labels)


def _check_sizes(terms: list[Term], shapes: list[tuple[int, ...]], what: str) -> None:
    seen: dict[Label, tuple[int, int]] = {}  # label -> (size other than 1, operand)
    for k, t in enumerate(terms):
        for label, n in zip(t.labels, t.node.shape):
            if n == 1:
                continue
            m, other = seen.setdefault(label, (n, k))
            if m != n:
                name = f"subscript {label!r}" if isinstance(label, str) else "a broadcast ('...') dimension"
                raise ShapeError(
                    f"{what}: operands {other} and {k} with shapes {shapes[other]} and {shapes[k]} "
                    f"disagree on the size of {name}: {m} != {n}"
                )


def _needed(output: tuple[Label, ...], terms: list[Term]) -> set[Label]:
    return set(output).union(*(t.labels for t in terms))


def _sum_out(t: Term, keep: set[Label]) -> Term:
    axes = tuple(d for d, label in enumerate(t.labels) if label not in keep)
    if not axes:
        return t
    reduced = build.reduce(t.node, "max" if t.node.dtype == BOOL else "sum", axes)
    shape = tuple(n for d, n in enumerate(reduced.shape) if d not in axes)
    return Term(build.reshape(reduced, shape), tuple(label for label in t.labels if label in keep))


def _union(a: Term, b: Term) -> tuple[tuple[Label, ...], tuple[int, ...]]:
    """Both operands' labels, a's first (a @ b: batch, m, k, n), each with its broadcast size (0 beats 1)."""
    sizes = dict(zip(b.labels, b.node.shape))
    for label, n in zip(a.labels, a.node.shape):
        sizes[label] = n if sizes.get(label, 1) == 1 else sizes[label]
    labels = a.labels + tuple(label for label in b.labels if label not in a.labels)
    return labels, tuple(sizes[label] for label in labels)


def _cheapest_pair(terms: list[Term]) -> tuple[int, int]:
    """The two operands whose product has the fewest elements: a chain a @ b @ c is contracted along
    the chain, never through an outer product."""
    costs = {
        (i, j): math.prod(_union(terms[i], terms[j])[1]) for i in range(len(terms)) for j in range(i + 1, len(terms))
    }
    return min(costs, key=lambda pair: (costs[pair], pair))


def _multiply(a: Term, b: Term, keep: set[Label]) -> Term:
    labels, shape = _union(a, b)
    times = Op.AND if a.node.dtype == BOOL else Op.MUL
    product = build.binary(times, _broadcast_view(a, labels, shape), _broadcast_view(b, labels, shape))
    return _sum_out(Term(product, labels), keep)


def _broadcast_view(t: Term, labels: tuple[Label, ...], shape: tuple[int, ...]) -> Node:
    """t's axes in the order of `labels` (a sub-sequence), with size-1 axes for the labels t lacks,
    broadcast to `shape`."""
    mine = [label for label in labels if label in t.labels]
    node = build.permute(t.node, tuple(t.labels.index(label) for label in mine))
    sizes = dict(zip(mine, node.shape))
    node = build.reshape(node, tuple(sizes.get(label, 1) for label in labels))
    return build.expand(node, shape)


# --- np.einsum -------------------------------------------------------------------------------------


def einsum(
    *operands: object,
    out: Tensor | None = None,
    dtype: DTypeLike | None = None,
    order: str = "K",
    casting: Casting = "safe",
    optimize: bool | str = False,
) -> Tensor:
    """np.einsum with a subscripts string ('ij,jk->ik', implicit output 'ij,jk', diagonals and traces
    'ii->i' and 'ii', broadcasting 'ij...,j...->...') or in the sublist form
    (np.einsum(a, [0, 1], b, [1, 2], [0, 2])), any number of operands, and `dtype=` / `casting=`.
    `optimize=` is accepted and ignored: operands are always contracted two at a time, the pair with
    the smallest product first, which is the order NumPy's optimize='greedy' finds for chains and
    bilinear forms. `order=` does not change values."""
    if out is not None:
        raise UnsupportedError("np.einsum(..., out=...) is not supported while tracing; use the returned value")
    if not operands:
        raise ShapeError("np.einsum: no subscripts and no operands given")
    subscripts, arrays = (operands[0], operands[1:]) if isinstance(operands[0], str) else _from_sublists(operands)
    nodes = [strong(a) for a in arrays]
    if dtype is not None:
        nodes = [_cast(n, check(dtype, "np.einsum(dtype=...)"), casting) for n in nodes]
    inputs, output = parse(subscripts, [n.shape for n in nodes])
    return Tensor(contract(list(zip(nodes, inputs)), output))


def _cast(node: Node, dtype: np.dtype, casting: Casting) -> Node:
    if not np.can_cast(node.dtype, dtype, casting):
        raise UnsupportedError(
            f"np.einsum(dtype={dtype}): cannot cast an operand from {node.dtype} to {dtype} "
            f"with casting={casting!r}; NumPy refuses this too. Pass casting='unsafe' or "
            "convert the operand with .astype() first"
        )
    return build.cast(node, dtype)


def parse(subscripts: str, shapes: list[tuple[int, ...]]) -> tuple[list[tuple[Label, ...]], tuple[Label, ...]]:
    """Each operand's labels and the output's, from an einsum subscripts string; '...' becomes
    negative ints counted from the right, so broadcast axes line up as in NumPy broadcasting."""
    spec = subscripts.replace(" ", "")
    lhs, arrow, rhs = spec.partition("->")
    if "->" in rhs or "-" in lhs or ">" in lhs:
        raise ShapeError(f"np.einsum: subscripts {subscripts!r} may contain '->' only once, before the output")
    parts = lhs.split(",")
    if len(parts) != len(shapes):
        raise ShapeError(
            f"np.einsum: subscripts {subscripts!r} name {len(parts)} operand(s) but {len(shapes)} were given"
        )
    inputs = [_operand_labels(p, shape, k) for k, (p, shape) in enumerate(zip(parts, shapes))]
    broadcast = max((sum(isinstance(label, int) for label in labels) for labels in inputs), default=0)
    if not arrow:  # implicit output: the broadcast axes, then the letters used once, sorted
        counts = Counter(label for labels in inputs for label in labels if isinstance(label, str))
        return inputs, tuple(range(-broadcast, 0)) + tuple(sorted(lab for lab, c in counts.items() if c == 1))
    return inputs, _output_labels(rhs, broadcast, inputs)


def _letters(part: str, where: str) -> None:
    for c in part.replace("...", ""):
        if c == ".":
            raise ShapeError(f"np.einsum: {where} {part!r} contains a '.' that is not part of an ellipsis ('...')")
        if c not in string.ascii_letters:
            raise ShapeError(
                f"np.einsum: invalid subscript {c!r} in {where} {part!r}; subscripts must be letters (a-z, A-Z)"
            )
    if part.count("...") > 1:
        raise ShapeError(f"np.einsum: {where} {part!r} has more than one ellipsis ('...')")


def _operand_labels(part: str, shape: tuple[int, ...], k: int) -> tuple[Label, ...]:
    _letters(part, f"the subscripts of operand {k}")
    head, ellipsis, tail = part.partition("...")
    named = len(head) + len(tail)
    extra = len(shape) - named
    if extra < 0 or (extra and not ellipsis):
        raise ShapeError(
            f"np.einsum: operand {k} has shape {shape} ({len(shape)} dimensions) but its subscripts "
            f"{part!r} name {named}" + ("" if ellipsis else "; use '...' for the axes not named")
        )
    return tuple(head) + tuple(range(-extra, 0)) + tuple(tail)


def _output_labels(rhs: str, broadcast: int, inputs: list[tuple[Label, ...]]) -> tuple[Label, ...]:
    _letters(rhs, "the output subscripts")
    head, ellipsis, tail = rhs.partition("...")
    if broadcast and not ellipsis:
        raise ShapeError(
            f"np.einsum: the operands have {broadcast} broadcast ('...') dimension(s) but the output "
            f"subscripts {rhs!r} have no '...' to put them"
        )
    used = set().union(*inputs)
    for c, count in Counter(head + tail).items():
        if count > 1:
            raise ShapeError(f"np.einsum: the output subscripts {rhs!r} name {c!r} more than once")
        if c not in used:
            raise ShapeError(f"np.einsum: output subscript {c!r} appears in no operand's subscripts")
    return tuple(head) + tuple(range(-broadcast, 0)) + tuple(tail)


def _from_sublists(args: tuple) -> tuple[str, tuple]:
    """np.einsum(a, [0, 1], b, [1, 2], [0, 2]) as ('AB,BC->AC', (a, b)): 0-25 are A-Z, 26-51 a-z."""
    arrays, sublists = args[0::2], list(args[1::2])
    output = "->" + _sublist(args[-1]) if len(args) % 2 else ""
    if len(args) % 2:
        arrays = arrays[:-1]
    return ",".join(_sublist(s) for s in sublists) + output, arrays


def _sublist(items) -> str:
    out = []
    for item in items:
        if item is Ellipsis:
            out.append("...")
        elif isinstance(item, (int, np.integer)) and 0 <= item < 52:
            out.append(string.ascii_uppercase[item] if item < 26 else string.ascii_lowercase[item - 26])
        else:
            raise ShapeError(f"np.einsum: subscript {item!r} in a sublist is not an int in [0, 52) or Ellipsis")
    return "".join(out)


NUMPY_FUNCTIONS = {np.einsum: einsum}
