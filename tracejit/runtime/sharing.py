"""Graph-level buffer reuse: intermediates of a captured graph whose lifetimes do not overlap share
memory. Lifetimes are launch-index intervals; blocks are handed out greedily, smallest fit first."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

Block = TypeVar("Block")  # what a device allocates: a NumPy array, a pooled API buffer, ...


def plan_sharing(
    uses: Sequence[Sequence[tuple[int, object, int]]], scratch: set[int], allocate: Callable[[int], Block]
) -> tuple[dict[int, Block], int]:
    """`uses[i]`: (argument position, memory object, bytes) for each buffer launch i touches. Every
    memory object in `scratch` (by id: what the graph allocated, less its outputs) gets a block shared
    with others whose last use comes strictly before its first use. Returns id(memory object) -> block,
    and the bytes of all blocks."""
    spans: dict[int, list] = {}
    for i, used in enumerate(uses):
        for _, mem, nbytes in used:
            if id(mem) not in scratch:
                continue
            span = spans.setdefault(id(mem), [i, i, nbytes])
            span[1], span[2] = i, max(span[2], nbytes)
    blocks: list[list] = []  # [last use, size, block]
    assignment: dict[int, Block] = {}
    for key, (first, last, nbytes) in sorted(spans.items(), key=lambda kv: kv[1][0]):
        free = [b for b in blocks if b[0] < first and b[1] >= nbytes]
        if free:
            block = min(free, key=lambda b: b[1])
        else:
            block = [last, nbytes, allocate(nbytes)]
            blocks.append(block)
        block[0] = last
        assignment[key] = block[2]
    return assignment, sum(b[1] for b in blocks)
