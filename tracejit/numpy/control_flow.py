"""tj.cond, tj.fori_loop and tj.while_loop with JAX's signatures, inside a kernel or outside it.

A predicate that is a Python value (or made from the kernel's Python-number arguments, python_numbers.py)
decides in Python as the trace runs; one read from arrays selects between both branches' results, JAX's
semantics for branches without side effects. The loops are what a `for` over range() and a `while` in the
kernel function become (numpy/loops.py): compiled as loops, their bodies traced once, their bounds and
conditions read from arrays where they are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tracejit.errors import ShapeError, UnsupportedError
from tracejit.numpy import loops
from tracejit.numpy.conditional_expressions import select
from tracejit.numpy.tensor import Tensor, python_value

__all__ = ["cond", "fori_loop", "while_loop"]


def cond(pred, true_fun: Callable[..., Any], false_fun: Callable[..., Any], *operands):
    """jax.lax.cond: true_fun(*operands) if pred else false_fun(*operands).

    A predicate read from arrays (a 0-d traced value) runs both branches and selects each result element
    with np.where, as JAX does for branches without side effects: the two must return the same structure of
    arrays of the same shapes and dtypes, and must not assign into arrays (their assignments would both
    happen)."""
    decided = _decided(pred, "tj.cond's predicate")
    if decided is not None:
        return true_fun(*operands) if decided else false_fun(*operands)
    if pred.shape != ():
        raise ShapeError(f"tj.cond: the predicate must be a scalar (a 0-d value), got shape {pred.shape}")
    before = [o._value if isinstance(o, Tensor) else None for o in operands]
    yes, no = true_fun(*operands), false_fun(*operands)
    if any(isinstance(o, Tensor) and o._value is not b for o, b in zip(operands, before)):
        raise UnsupportedError(
            "tj.cond with a predicate read from arrays runs both branches, and a branch "
            "assigned into an operand: both assignments would happen. Return the new value "
            "from each branch instead"
        )
    return _select(pred, yes, no, "result")


def fori_loop(lower, upper, body_fun: Callable[[int, Any], Any], init_val):
    """jax.lax.fori_loop: init_val passed through body_fun(i, val) for i in range(lower, upper). Compiled as a
    loop (numpy/loops.py), as a `for` over range() in the kernel function is: the body is traced once, and the
    bounds may be read from arrays; a short loop with bounds known while tracing is traced step by step."""
    leaves, rebuild = _flatten(init_val, "tj.fori_loop's init_val")

    def body(i, *values):
        return _leaves_like(body_fun(i, rebuild(values)), len(leaves), "tj.fori_loop")

    names = tuple(f"val[{k}]" for k in range(len(leaves)))
    out = loops.for_range((lower, upper), body, tuple(leaves), names, None, (), "tj.fori_loop")
    return rebuild(out[: len(leaves)])


def while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any], init_val):
    """jax.lax.while_loop: val = body_fun(val) while cond_fun(val). Where the condition is read from arrays,
    the rest of the loop is compiled as a loop that reads the condition back after each step (numpy/loops.py)."""
    leaves, rebuild = _flatten(init_val, "tj.while_loop's init_val")

    def test(*values):
        return cond_fun(rebuild(values))

    def body(*values):
        return _leaves_like(body_fun(rebuild(values)), len(leaves), "tj.while_loop")

    names = tuple(f"val[{k}]" for k in range(len(leaves)))
    return rebuild(loops.while_true(test, body, tuple(leaves), names, (), "tj.while_loop"))


def _leaves_like(out, count: int, what: str) -> tuple:
    """The leaves of a body_fun's result, which must have init_val's structure (`count` leaves)."""
    flat, _ = _flatten(out, f"{what}'s body_fun result")
    if len(flat) != count:
        raise ShapeError(
            f"{what}: body_fun returned {len(flat)} values where init_val has {count}: it must return a value "
            "of init_val's structure"
        )
    return tuple(flat)


def _flatten(tree, what: str) -> tuple[list, Callable[[Any], Any]]:
    """The leaves of a tuple/list/dict/None structure of arrays and numbers, and a function that rebuilds the
    structure from as many leaves."""
    if isinstance(tree, (tuple, list)):
        parts = [_flatten(t, what) for t in tree]
        kind = type(tree)

        def rebuild_seq(values):
            out, at = [], 0
            for leaves, rebuild in parts:
                out.append(rebuild(values[at : at + len(leaves)]))
                at += len(leaves)
            return kind(out)

        return [leaf for leaves, _ in parts for leaf in leaves], rebuild_seq
    if isinstance(tree, dict):
        keys = list(tree)
        flat, rebuild_values = _flatten([tree[k] for k in keys], what)
        return flat, lambda values: dict(zip(keys, rebuild_values(values)))
    if tree is None:
        return [], lambda values: None
    return [tree], lambda values: values[0]


def _decided(pred, use: str) -> bool | None:
    """A predicate's truth where it is known while tracing (a Python or NumPy value, or one made from the
    kernel's Python numbers), else None."""
    if isinstance(pred, Tensor):
        pred = python_value(pred, use)
        if isinstance(pred, Tensor):
            return None
    if np.ndim(pred) != 0:
        raise ShapeError(f"{use} must be a scalar, got an array of shape {np.shape(pred)}")
    return bool(pred)


def _select(pred: Tensor, yes, no, where: str):
    """np.where(pred, yes, no) leaf by leaf over matching tuples, lists and dicts."""
    if isinstance(yes, (tuple, list)) and isinstance(no, (tuple, list)) and type(yes) is type(no):
        if len(yes) != len(no):
            raise ShapeError(f"tj.cond: the branches return {len(yes)} and {len(no)} values at {where}")
        return type(yes)(_select(pred, a, b, f"{where}[{i}]") for i, (a, b) in enumerate(zip(yes, no)))
    if isinstance(yes, dict) and isinstance(no, dict):
        if yes.keys() != no.keys():
            raise ShapeError(f"tj.cond: the branches return dicts with other keys at {where}")
        return {k: _select(pred, yes[k], no[k], f"{where}[{k!r}]") for k in yes}
    if yes is None and no is None:
        return None
    return select(pred, yes, no, f"tj.cond's branch results at {where}")
