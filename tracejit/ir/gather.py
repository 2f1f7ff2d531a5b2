"""Integer-array indexing in the index arithmetic: where a GATHER node reads its data, as expressions
whose gathered axes are DataIndex atoms (the index arrays' values, checked and clamped when they run)."""
from __future__ import annotations

import hashlib
import weakref

from .graph import Node, format_graph
from .symbolic import DataIndex, Expr

_TAGS: "weakref.WeakKeyDictionary[Node, str]" = weakref.WeakKeyDictionary()


def data_position(node: Node, idx: tuple[Expr, ...]) -> tuple[Expr, ...]:
    """The index into node.srcs[0] (the data) of the GATHER node's element at idx."""
    atoms = iter(gathered_atoms(node, idx))
    return tuple(Expr.of(next(atoms)) if a is None else idx[a] for a in node.arg)


def gathered_atoms(node: Node, idx: tuple[Expr, ...]) -> list[DataIndex]:
    """Every index the GATHER node reads at idx, including those of axes its data does not vary along
    (a broadcast or size-1 axis), which the data's offset drops but NumPy checks all the same."""
    data = node.srcs[0]
    axes = [d for d, a in enumerate(node.arg) if a is None]
    return [DataIndex(s, idx, data.shape[d], d, tag(s)) for s, d in zip(node.srcs[1:], axes)]


def tag(source: Node) -> str:
    """A name for an index array that depends only on the graph that computes it: printed expressions,
    and so the order of the kernel IR's instructions, are the same in every run."""
    found = _TAGS.get(source)
    if found is None:
        found = _TAGS[source] = "ix" + hashlib.sha256(format_graph([source]).encode()).hexdigest()[:10]
    return found
