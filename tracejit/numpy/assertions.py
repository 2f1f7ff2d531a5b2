"""`assert` in a kernel function (and `if test: raise ValueError(...)` of a built-in exception, the same check
raising that exception), as numpy/source_rewrite.py rewrites it (unless Python runs with -O, which drops
asserts): where the test is a Python value, Python's assert, while tracing; where it is read from arrays, a check
when the kernel runs. The function carries the number of its first assert that failed (`failed`, 0: none) as a
value of its own, through its loops and branches like any name it binds, and before it returns, a check per
assert (faulting.check) raises Python's AssertionError, with the assert's message, when the kernel runs. So a
failing assert stops the call with NumPy's error, after the kernel ran to its end; the arrays it assigned into
are left as they were (NumPy's would hold what the steps before the assert wrote)."""

from __future__ import annotations

import threading

import numpy as np

from tracejit.errors import TraceError
from tracejit.ir import build, faulting
from tracejit.ir.graph import Op
from tracejit.ir.kernel_ir import Fault
from tracejit.numpy.tensor import Tensor, as_node, in_loop_body, python_value

_local = threading.local()  # the messages of the asserts traced, by (function, number)


def no_failure() -> Tensor:
    """The count a function with asserts starts from: no assert failed (a traced 0, so loops carry it)."""
    return Tensor(build.const(0, np.dtype(np.int64), (), weak=True))


def check(failed, number: int, test, message, where: str, raising: bool = False):
    """`assert test, message()` as the function's `number`th assert: Python's where the test is a Python value;
    else `failed` becomes `number` where it is 0 and the test fails, and the message is kept for the check.
    `raising`: `if not test: raise message()` instead (message() gives a built-in exception or its class), the
    same check raising that exception."""
    if isinstance(test, Tensor):
        test = python_value(test, "an assert's test" if not raising else "an `if` that raises")
    if not isinstance(test, Tensor):
        if not test:
            if raising:
                raise message()
            text = message()
            raise AssertionError(*(() if text is None else (_shown(text),)))
        return failed
    node = as_node(test)
    if node.shape != ():
        raise TraceError(
            f"{where}: an assert on an array of shape {node.shape}: the truth value of an array with more than one "
            "element is ambiguous; assert x.all() or x.any()"
        )
    if raising:
        exc = message()
        exc = exc() if isinstance(exc, type) else exc
        _messages()[(where, number)] = (type(exc).__name__, _shown(exc) if exc.args else "")
    else:
        text = message()
        _messages()[(where, number)] = ("AssertionError", "" if text is None else _shown(text))
    fails = build.binary(
        Op.AND,
        build.binary(Op.EQ, as_node(failed), build.const(0, np.int64, ())),
        build.unary(Op.INVERT, build.cast(node, np.dtype(np.bool_))),
    )
    return Tensor(build.where(fails, build.const(number, np.int64, (), weak=True), as_node(failed)))


def finish(failed, value, where: str, count: int):
    """`value`, returned by a function with asserts: where one read from arrays failed, the call raises its
    AssertionError when the kernel runs."""
    if not isinstance(failed, Tensor):
        return value
    if in_loop_body():
        raise TraceError(
            f"{where}: an assert on a value read from arrays in a function called inside a loop compiled as a loop "
            "is not supported yet: move the assert out of the loop, or into the kernel function itself"
        )
    messages = _messages()
    for number in range(1, count + 1):
        found = messages.get((where, number))
        if found is not None:
            error, text = found
            ok = build.binary(Op.NE, as_node(failed), build.const(number, np.int64, ()))
            faulting.check(ok, Fault(error, text.replace("{", "{{").replace("}", "}}")))
    return value


def _shown(message) -> str:
    """An assert's message as a string, saying so where it shows traced values (made while tracing)."""
    text = str(message)
    if "Tensor(" in text:
        text += " (the message shows values known only when the kernel runs as Tensor(...))"
    return text


def _messages() -> dict:
    found = getattr(_local, "messages", None)
    if found is None:
        found = _local.messages = {}
    return found
