"""Conditional expressions (`a if test else b`) in a kernel function: where the test is read from arrays, both
sides are computed and the test selects between them when the kernel runs (`cost = 0 if a[i] == b[j] else 1`
in a loop over elements); where it is a Python value, Python decides while tracing, as before.

The function is compiled again from its source with each conditional expression made a call of `choose`
(its sides become argument-less lambdas, so the side Python would not take is computed only where the
test is traced); a function without source, a lambda, or one whose conditional expressions bind names
(`:=`) or yield is left as it is."""

from __future__ import annotations

import ast
import inspect
import textwrap
import types
from typing import Any

import numpy as np

from tracejit.numpy.tensor import Tensor, python_value

_NAME = "__tracejit_choose"
_compiled: dict[types.CodeType, types.CodeType | None] = {}  # a function's code -> its rewritten code (None: none)


def choose(test, yes, no):
    """`yes() if test else no()`, or where `test` is a 0-d value read from arrays, np.where(test, yes(), no())."""
    if isinstance(test, Tensor):
        test = python_value(test, "a conditional expression's test")
    if not isinstance(test, Tensor):
        return yes() if test else no()
    if test.shape != ():
        raise ValueError(
            "The truth value of an array with more than one element is ambiguous (a conditional "
            "expression's test must be a single value)"
        )
    return np.where(test, yes(), no())


class _Rewrite(ast.NodeTransformer):
    def __init__(self) -> None:
        self.count = 0

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        self.generic_visit(node)
        if any(isinstance(n, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)) for n in ast.walk(node)):
            return node
        self.count += 1
        side = lambda body: ast.Lambda(
            args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]), body=body
        )
        call = ast.Call(
            func=ast.Name(id=_NAME, ctx=ast.Load()), args=[node.test, side(node.body), side(node.orelse)], keywords=[]
        )
        return ast.copy_location(call, node)


def _rewritten(fn) -> types.CodeType | None:
    code = fn.__code__
    if code in _compiled:
        return _compiled[code]
    _compiled[code] = None
    if fn.__name__ == "<lambda>":
        return None
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    fdef = tree.body[0] if tree.body else None
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)) or fdef.name != code.co_name:
        return None
    rewrite = _Rewrite()
    fdef = rewrite.visit(fdef)
    if not rewrite.count:
        return None
    fdef.decorator_list = []
    ast.increment_lineno(fdef, code.co_firstlineno - 1)  # the user's lines in tracebacks and messages
    # a factory whose parameters are the function's free variables, so the copy keeps its closure
    factory = ast.FunctionDef(
        name="__tracejit_factory",
        args=ast.arguments(
            posonlyargs=[], args=[ast.arg(arg=n) for n in code.co_freevars], kwonlyargs=[], kw_defaults=[], defaults=[]
        ),
        body=[fdef, ast.Return(value=ast.Name(id=fdef.name, ctx=ast.Load()))],
        decorator_list=[],
    )
    module = ast.fix_missing_locations(ast.Module(body=[factory], type_ignores=[]))
    try:
        compiled = compile(module, code.co_filename, "exec")
    except SyntaxError:
        return None
    factory_code = next(c for c in compiled.co_consts if isinstance(c, types.CodeType))
    inner = next((c for c in factory_code.co_consts if isinstance(c, types.CodeType) and c.co_name == fdef.name), None)
    if inner is None or set(inner.co_freevars) - set(code.co_freevars):
        return None
    _compiled[code] = inner
    return inner


def visible(fn):
    """fn, or a copy of it whose conditional expressions select traced values (module docstring)."""
    if not isinstance(fn, types.FunctionType):
        return fn
    inner = _rewritten(fn)
    if inner is None:
        return fn
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    new_globals = dict(fn.__globals__)
    new_globals[_NAME] = choose
    copy = types.FunctionType(
        inner, new_globals, fn.__name__, fn.__defaults__, tuple(cells[n] for n in inner.co_freevars) or None
    )
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = fn.__qualname__
    return copy
