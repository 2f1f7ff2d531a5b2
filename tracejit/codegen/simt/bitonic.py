"""The kernel IR's `sort` on C-style targets (OpenCL, CUDA, Metal, WGSL): a bitonic network over the local
arrays of keys and positions, whose length is a power of two (lowering pads it with keys that sort last).

Each step orders disjoint pairs (lo, lo + j), ascending where lo's block of k is even, so in group mode
the pairs are spread over the work-group's items with a barrier after each step; in thread mode one
work-item walks them. Comparing (key, position) makes it stable, and NaN sorts after every number, as in
NumPy. Written in the target's spelling hooks (loop, let, select, is_nan), so every C-style target and
WGSL share it."""

from __future__ import annotations

import numpy as np

I32 = np.dtype("int32")


def network(r, at: int, keys: str, positions: str | None, size: int, dt: np.dtype) -> list[str]:
    """Lines (indented relative to the sort) that sort `keys` of `size` elements, and `positions` with
    them if given (equal keys then go by position); `r` is the renderer, `at` the instruction's index
    (names its variables)."""
    t, group = r.t, r.mode == "group"
    i32, lit = t.types[I32], (lambda v: r.literal(v, I32))
    k, j, i = f"tj_k{at}", f"tj_j{at}", f"tj_i{at}"
    lo, hi, ct, pt = f"tj_lo{at}", f"tj_hi{at}", r.ctype(dt), t.types[I32]
    start, step = (
        (f"({i32})lid" if i32 != "i32" else "lid", f"{i} += {lit(r.local_size)}") if group else (lit(0), f"{i}++")
    )
    a, b, pa, pb = (f"tj_{n}{at}" for n in ("a", "b", "pa", "pb"))
    body = [
        t.let(lo, i32, f"(2 * {i} - ({i} & ({j} - {lit(1)})))"),
        t.let(hi, i32, f"({lo} + {j})"),
        t.let(a, ct, r.local_value(f"{keys}[{lo}]", dt)),
        t.let(b, ct, r.local_value(f"{keys}[{hi}]", dt)),
    ]
    moved = [(keys, a, b)]
    if positions is not None:
        body += [t.let(pa, pt, f"{positions}[{lo}]"), t.let(pb, pt, f"{positions}[{hi}]")]
        moved.append((positions, pa, pb))
    swap = f"tj_swap{at}"
    after = _after(r, a, b, None if positions is None else (pa, pb), dt)
    body.append(t.let(swap, "bool", f"({after} == (({lo} & {k}) == {lit(0)}))"))
    for arr, first, second in moved:
        body += [f"{arr}[{lo}] = {r.select(swap, second, first)};", f"{arr}[{hi}] = {r.select(swap, first, second)};"]
    return [
        t.loop(k, i32, lit(2), f"{k} <= {lit(size)}", f"{k} *= {lit(2)}"),
        "    " + t.loop(j, i32, f"({k} / {lit(2)})", f"{j} > {lit(0)}", f"{j} /= {lit(2)}"),
        "        " + t.loop(i, i32, start, f"{i} < {lit(size // 2)}", step),
        *("            " + line for line in body),
        "        }",
        *(["        " + t.barrier] if group else []),
        "    }",
        "}",
    ]


def loop_iterations(size: int, items: int = 1) -> int:
    """The loop iterations (each loop's entries counted too, as Mesa's llvmpipe counts them) one work-item runs
    in the network of `size` elements, its pairs shared by `items` work-items: log2(size) stages of 1, 2, ...
    steps, each walking size / 2 pairs."""
    stages = size.bit_length() - 1
    steps = stages * (stages + 1) // 2
    pairs = -(-(size // 2) // items)
    return (stages + 1) + (steps + stages) + steps * (pairs + 1)


def _after(r, a: str, b: str, positions: tuple[str, str] | None, dt: np.dtype) -> str:
    """Whether key a (at position pa) sorts after key b (at pb): the larger key, a NaN after every number,
    equal keys (and two NaNs) by position, or never without positions. Each comparison is guarded by
    the NaN tests, so a compiler that assumes no NaN cannot change the order."""
    by_position = "false" if positions is None else f"({positions[1]} < {positions[0]})"
    numbers = f"(({b} < {a}) || (({b} == {a}) && {by_position}))"
    if dt.kind != "f":
        return numbers
    a_nan, b_nan = r.is_nan(a), r.is_nan(b)
    return r.select(a_nan, f"(!{b_nan} || {by_position})", f"(!{b_nan} && {numbers})")
