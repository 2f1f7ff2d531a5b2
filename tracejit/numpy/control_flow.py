"""tj.cond, tj.fori_loop and tj.while_loop with JAX's signatures, inside a kernel or outside it.

A predicate, bound or condition that is a Python value (or made from the kernel's Python-number arguments,
python_numbers.py) decides in Python as the trace runs: the loop's steps are traced one after the other.
A predicate read from arrays selects between both branches' results, JAX's semantics for branches without
side effects. A loop whose bounds or condition are read from arrays needs loops compiled as loops, which
tracejit does not do yet: that is a clear error, not a wrong answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tracejit.errors import ShapeError, UnsupportedError
from tracejit.numpy.conditional_expressions import select
from tracejit.numpy.tensor import Tensor, python_value

__all__ = ["cond", "fori_loop", "while_loop"]

_NOT_YET = (
    "is read from arrays, so it is known only when the kernel runs; tracejit does not compile loops as "
    "loops yet (a Python loop over Python numbers is traced step by step). Compute a bound from the "
    "kernel's int arguments, or run the loop outside the kernel"
)


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
    """jax.lax.fori_loop: init_val passed through body_fun(i, val) for i in range(lower, upper); the bounds
    are Python ints (or computed from the kernel's int arguments)."""
    lo = _python_int(lower, "tj.fori_loop's lower bound")
    hi = _python_int(upper, "tj.fori_loop's upper bound")
    val = init_val
    for i in range(lo, hi):
        val = body_fun(i, val)
    return val


def while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any], init_val):
    """jax.lax.while_loop: val = body_fun(val) while cond_fun(val); the condition is a Python value (or
    computed from the kernel's Python-number arguments)."""
    val = init_val
    while True:
        decided = _decided(cond_fun(val), "tj.while_loop's condition")
        if decided is None:
            raise UnsupportedError(f"tj.while_loop's condition {_NOT_YET}")
        if not decided:
            return val
        val = body_fun(val)


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


def _python_int(value, use: str) -> int:
    value = python_value(value, use) if isinstance(value, Tensor) else value
    if isinstance(value, Tensor):
        raise UnsupportedError(f"{use} {_NOT_YET}")
    return int(value)


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
