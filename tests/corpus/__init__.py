"""A corpus of real-world NumPy programs, written as their authors wrote them, used unchanged as
tracejit kernels: each program is a plain function, its input maker and the dtypes its source uses."""
from __future__ import annotations

import inspect
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import tracejit as tj
from reference import assert_close, run_kernel, tolerances


@dataclass(frozen=True)
class Program:
    """One corpus entry. `inputs(rng, dtype)` returns the positional arguments; `static` are the settings
    passed by keyword (head counts, loop counts, axes), as plain Python values. Results are compared with the
    default tolerance of their dtype: every program that runs today meets it."""
    name: str
    function: Callable[..., Any]
    inputs: Callable[[np.random.Generator, str], tuple]
    dtypes: tuple[str, ...]
    static: dict[str, Any] = field(default_factory=dict)
    numpy_errors: str = "raise"   # np.errstate for the NumPy run: "ignore" where the source computes inf/NaN on purpose
    # dtype -> absolute tolerance, for results that are float sums in an order the device picks (np.add.at
    # by atomic adds on SIMT devices): a few roundings of the sum of the terms' magnitudes
    reordered_atol: dict[str, float] = field(default_factory=dict)


def program(function: Callable[..., Any], inputs: Callable[[np.random.Generator, str], tuple],
            dtypes: tuple[str, ...], **options: Any) -> Program:
    """A Program named `module.function` (module without the package prefix)."""
    module = function.__module__.rsplit(".", 1)[-1]
    return Program(f"{module}.{function.__name__}", function, inputs, dtypes, **options)


def all_programs() -> list[Program]:
    """Every program of every corpus module, in a stable order."""
    from . import (benchmarks, complex_numbers, cumulative_and_order, linalg, loops, numba_examples,
                   numbers_and_loops, numexpr_exprs, procedures, science, selections, transformer)
    return [p for module in (transformer, numexpr_exprs, numba_examples, benchmarks, science, cumulative_and_order,
                                   procedures, numbers_and_loops, loops, linalg, selections, complex_numbers)
            for p in module.PROGRAMS]


def run_program(p: Program, dtype: str, device: str) -> None:
    """Run `p` as a kernel on `device` and as plain NumPy on the same seeded inputs, and compare
    values and dtypes (reference.assert_close). Each side gets its own copy: some sources update
    their arguments in place."""
    args = p.inputs(np.random.default_rng(zlib.crc32(f"{p.name}-{dtype}".encode())), dtype)
    # decorated as a user would, without static=: the settings' numbers are Python numbers the kernel is
    # specialised on where the code needs them as numbers (a loop count, a head count), as in NumPy
    kernel = tj.kernel(p.function)
    kernel_args, numpy_args = _copies(args), _copies(args)
    positional, keywords = _call_of(p, kernel_args)
    result = run_kernel(kernel, *positional, device=device, **keywords)
    positional, keywords = _call_of(p, numpy_args)
    with np.errstate(all=p.numpy_errors, under="ignore"):  # float32 exp underflowing to 0 is ordinary
        expected = p.function(*positional, **keywords)
    if expected is None:   # a procedure: what it computes is what it did to its arguments
        assert result is None, f"{p.name} returns None; the kernel returned {type(result).__name__}"
        result, expected = tuple(a for a in kernel_args if isinstance(a, np.ndarray)), \
            tuple(a for a in numpy_args if isinstance(a, np.ndarray))
    # A float64 result computed from float32 data (a NumPy float64 scalar promotes a float32 chain
    # midway, as in GPT-2's gelu) carries the float32 steps' rounding: compare at the input's precision.
    if _nested(expected):   # (out, cache) with cache = (x, w, b, conv_param): compared leaf by leaf
        mine, theirs = _leaves(result), _leaves(expected)
        assert len(mine) == len(theirs) and _shape_of(result) == _shape_of(expected), (
            f"{p.name}: the result's structure {_shape_of(result)} is not NumPy's {_shape_of(expected)}")
        arrays = [(m, t) for m, t in zip(mine, theirs) if isinstance(t, (np.ndarray, np.generic, int, float))]
        for m, t in zip(mine, theirs):
            if not isinstance(t, (np.ndarray, np.generic, int, float)):
                assert m == t, f"{p.name}: a result that is not an array differs: {m!r}, not {t!r}"
        result, expected = tuple(m for m, _ in arrays), tuple(t for _, t in arrays)
    outputs = expected if isinstance(expected, tuple) else (expected,)
    floats = [np.asarray(a).dtype for a in (*args, *outputs) if np.asarray(a).dtype.kind == "f"]
    rtol, atol = max((tolerances(d) for d in floats), default=(None, None))
    atol = p.reordered_atol.get(dtype, atol)
    assert_close(result, expected, rtol=rtol, atol=atol)
    for i, (mine, theirs) in enumerate(zip(kernel_args, numpy_args)):   # arguments assigned into, as NumPy
        if isinstance(theirs, np.ndarray):
            assert_close(mine, theirs, rtol=rtol, atol=atol, what=f"{p.name}: argument {i} after the call")


def _nested(value) -> bool:
    return isinstance(value, (tuple, list)) and any(isinstance(v, (tuple, list)) for v in value)


def _leaves(value) -> list:
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def _shape_of(value):
    """A nested result's structure: its tuples and lists, each leaf's kind."""
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_shape_of(v) for v in value))
    return "array" if isinstance(value, (np.ndarray, np.generic)) or hasattr(value, "__array__") else type(value).__name__


def _call_of(p: Program, args: tuple) -> tuple[tuple, dict]:
    """The call's positional and keyword arguments: the inputs fill the parameters that are not static, in
    order; static ones go by keyword, and so does every input after one (npbench's kernel(TSTEPS, A, B) takes
    its loop count first)."""
    params = list(inspect.signature(p.function).parameters)
    first_static = min((params.index(s) for s in p.static), default=len(params))
    names = [n for n in params if n not in p.static]
    n = min(first_static, len(args))
    return tuple(args[:n]), {**dict(zip(names[n:], args[n:])), **p.static}


def _copies(args: tuple) -> tuple:
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)
