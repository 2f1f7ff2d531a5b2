"""Integer-array indexing in the index arithmetic: where a GATHER node reads its data, as expressions
whose gathered axes are DataIndex atoms (the index arrays' values, checked and clamped when they run)."""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Container

from tracejit.ir.faulting import fault_of
from tracejit.ir.graph import Node, Op, format_graph
from tracejit.ir.symbolic import DataIndex, Expr, Var

_TAGS: weakref.WeakKeyDictionary[Node, str] = weakref.WeakKeyDictionary()


def data_position(node: Node, idx: tuple[Expr, ...], realized: Container[Node] = ()) -> tuple[Expr, ...]:
    """The index into node.srcs[0] (the data) of the GATHER node's element at idx (`realized`: the values read
    from memory, as gathered_atoms)."""
    atoms = iter(gathered_atoms(node, idx, realized))
    return tuple(Expr.of(next(atoms)) if a is None else idx[a] for a in node.arg)


def gathered_atoms(node: Node, idx: tuple[Expr, ...], realized: Container[Node] = ()) -> list[DataIndex]:
    """Every index the GATHER node reads at idx, including those of axes its data does not vary along
    (a broadcast or size-1 axis), which the data's offset drops but NumPy checks all the same. An index array
    in `realized` (read from memory by the kernel) is read there, not computed again from what it broadcasts."""
    data = node.srcs[0]
    axes = [d for d, a in enumerate(node.arg) if a is None]
    atoms = []
    for s, d in zip(node.srcs[1:], axes):
        source, at = _unbroadcast(s, idx, realized)
        atoms.append(DataIndex(source, at, data.shape[d], d, tag(source), fault_of(node)))
    return atoms


def _unbroadcast(source: Node, idx: tuple[Expr, ...], realized: Container[Node] = ()) -> tuple[Node, tuple[Expr, ...]]:
    """The index array before it was broadcast to the result's shape (expanded, given size-1 axes), and
    where it is read: an index then depends on the variables it varies along, no others. It stops at a value
    in `realized`: the kernel reads that from memory, and what it was computed from may not be at hand."""
    while True:
        if source in realized:
            return source, idx
        if source.op is Op.CONST:  # the same everywhere (an int among index arrays: x[0, :, k])
            return source, tuple(Expr() for _ in source.shape)
        if not source.srcs:
            return source, idx
        src = source.srcs[0]
        if source.op is Op.EXPAND:
            idx = tuple(Expr() if n == 1 else e for n, e in zip(src.shape, idx))
        elif source.op is Op.RESHAPE and [n for n in src.shape if n != 1] == [n for n in source.shape if n != 1]:
            kept = iter(e for e, n in zip(idx, source.shape) if n != 1)
            idx = tuple(Expr() if n == 1 else next(kept) for n in src.shape)
        else:
            return source, idx
        source = src


MIN_GATHERED_ROWS = 16  # fewer rows than this: every element is a parallel index, as without a gather


def row_loop(out_vars: list[Var], offsets: list[Expr]) -> list[Var]:
    """The trailing output variables that no index read from data depends on, when they may be walked in
    an inner loop of each row (x[idx] of rows: each index is then read and checked once per row, and the
    row copied unit-stride); [] when there is no such suffix or it would leave too few rows."""
    indexed = set().union(*(_indexed_variables(o) for o in offsets))
    if not indexed:
        return []
    inner: list[Var] = []
    for v in reversed(out_vars):
        if v in indexed:
            break
        inner.insert(0, v)
    rows = 1
    for v in out_vars[: len(out_vars) - len(inner)]:
        rows *= v.extent
    return inner if rows >= MIN_GATHERED_ROWS else []


def _indexed_variables(expr: Expr) -> set[Var]:
    """The variables an index read from data in expr depends on (through its position in the index array)."""
    out = set()
    for atom, _ in expr.terms:
        if isinstance(atom, DataIndex):
            out |= atom.variables()
        elif not isinstance(atom, Var):
            out |= _indexed_variables(atom.x)
    return out


def tag(source: Node) -> str:
    """A name for an index array that depends only on the graph that computes it: printed expressions,
    and so the order of the kernel IR's instructions, are the same in every run."""
    found = _TAGS.get(source)
    if found is None:
        found = _TAGS[source] = "ix" + hashlib.sha256(format_graph([source]).encode()).hexdigest()[:10]
    return found
