"""While a recording is open, the statistics a trace computes (var, std, argmax, argmin): which node holds the
result and how it was asked for, so a program over Dask blocks can combine them from per-block partials."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from tracejit.ir.graph import Node

RECORDINGS: list[dict] = []  # open recordings (innermost last): result node -> Statistic


@dataclass(frozen=True)
class Statistic:
    """The node recorded is the statistic before it is squeezed and cast to its result dtype (var, std: in
    the dtype it is computed in, reduced axes kept; argmax, argmin: the index, flattened for axis=None), the
    part that stays one node whatever the code around it does with the result."""

    kind: str  # "var", "std", "argmax", "argmin"
    source: Node  # the array the statistic is of
    axes: tuple[int, ...] | None  # reduced axes of source (argmax/argmin: one axis, or None: flattened)
    ddof: float = 0


def note(result: Node, statistic: Statistic) -> None:
    if RECORDINGS:
        RECORDINGS[-1][result] = statistic


@contextlib.contextmanager
def recording():
    """with recording() as found: ...trace...; found maps each statistic's result node to how it was made."""
    found: dict[Node, Statistic] = {}
    RECORDINGS.append(found)
    try:
        yield found
    finally:
        RECORDINGS.remove(found)
