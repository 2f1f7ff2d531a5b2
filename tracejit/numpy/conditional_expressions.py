"""Conditionals in a kernel function: where the test is read from arrays, both sides are computed and the test
selects between them when the kernel runs; where it is a Python value, Python decides while tracing, as before.
- conditional expressions, `cost = 0 if a[i] == b[j] else 1`;
- `if`/`else` statements whose branches only bind names (`y = ...`, nested such `if`s): each name bound in
  either branch is selected. A branch that stores into an array, updates in place (`+=`), calls for its
  effect, returns, loops or raises is left as Python runs it (an `if` on an array value there is still an
  error).

The function is compiled again from its source: each conditional expression becomes a call of `choose` (its
sides argument-less lambdas), each such `if` two functions of the names it binds and a call of `branches`, so
the side Python would not take runs only where the test is traced. A function without source, a lambda, or
one with `global`/`nonlocal` or whose conditionals bind names with `:=` or yield is left as it is."""

from __future__ import annotations

import ast
import inspect
import textwrap
import types
from typing import Any

import numpy as np

from tracejit.errors import ShapeError, TraceError
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
    return select(test, yes(), no(), "the two sides of a conditional expression")


class _Undefined:
    def __repr__(self) -> str:
        return "<not yet bound>"


UNDEFINED = _Undefined()  # a name the `if` binds that had no value before it


def select(test: Tensor, a, b, what: str):
    """np.where(test, a, b) where NumPy's answer would be a or b itself: the same shape, and the same dtype (a
    Python number beside an array of a dtype it does not change is fine); else which shape or dtype the result
    has would depend on the data, which a compiled kernel cannot follow."""
    shape_a, shape_b = np.shape(a), np.shape(b)
    kinds = [type(v) in (bool, int, float) for v in (a, b)]
    dtype_a, dtype_b = (None if weak else _dtype(v) for v, weak in zip((a, b), kinds))
    if all(kinds):
        same = type(a) is type(b)
    elif any(kinds):
        array, number = (b, a) if kinds[0] else (a, b)
        same = np.result_type(_dtype(array), number) == _dtype(array)
    else:
        same = dtype_a == dtype_b
    if shape_a != shape_b or not same:
        raise ShapeError(
            f"{what} differ ({_describe(a)} and {_describe(b)}) where the test is read from arrays: "
            "the result's shape or dtype would depend on the data; they must match in shape and dtype "
            "(np.broadcast_to, .astype), or the test be a Python value"
        )
    return np.where(test, a, b)


def _dtype(value) -> np.dtype:
    return value.dtype if isinstance(value, Tensor) else np.asarray(value).dtype


def _describe(value) -> str:
    if type(value) in (bool, int, float):
        return f"a Python {type(value).__name__}"
    return f"{_dtype(value)}{list(np.shape(value))}"


class PartlyBound:
    """A name an `if` on an array value binds in one branch only: it has a value only sometimes, so any use of
    it is an error (as reading it where Python had not bound it would be)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def _refuse(self, *args, **kwargs):
        raise TraceError(
            f"`{self._name}` is bound in only one branch of an `if` on a value read from arrays, so it "
            "has a value only sometimes; give it a value before the `if`"
        )

    __getattr__ = _refuse
    __bool__ = __index__ = __float__ = __int__ = __array__ = __len__ = __iter__ = __getitem__ = _refuse
    __array_ufunc__ = __array_function__ = _refuse

    def __repr__(self) -> str:
        return f"<{self._name}: bound in only one branch of an `if` on an array value>"


for _op in (
    "add",
    "sub",
    "mul",
    "truediv",
    "floordiv",
    "mod",
    "pow",
    "matmul",
    "and",
    "or",
    "xor",
    "lshift",
    "rshift",
    "lt",
    "le",
    "gt",
    "ge",
    "eq",
    "ne",
):
    setattr(PartlyBound, f"__{_op}__", PartlyBound._refuse)
    setattr(PartlyBound, f"__r{_op}__", PartlyBound._refuse)
for _op in ("neg", "pos", "abs", "invert"):
    setattr(PartlyBound, f"__{_op}__", PartlyBound._refuse)


def value_before(get):
    """A name's value before the `if`, or UNDEFINED."""
    try:
        return get()
    except NameError:  # (UnboundLocalError too)
        return UNDEFINED


def branches(test, then, orelse, before: tuple, names: tuple[str, ...]) -> tuple:
    """The names an `if` binds, after it: then(*before) or orelse(*before) where Python decides, or where `test`
    is a 0-d value read from arrays, each name selected between both branches' values."""
    if isinstance(test, Tensor):
        test = python_value(test, "an `if`'s test")
    if not isinstance(test, Tensor):
        return then(*before) if test else orelse(*before)
    if test.shape != ():
        raise ValueError(
            "The truth value of an array with more than one element is ambiguous (an `if`'s test must "
            "be a single value)"
        )
    yes, no = then(*before), orelse(*before)
    out = []
    for name, a, b in zip(names, yes, no):
        if a is b:  # neither branch changed it
            out.append(a)
            continue
        if a is UNDEFINED or b is UNDEFINED:  # an error where it is used, as Python's would be
            out.append(PartlyBound(name))
            continue
        out.append(select(test, a, b, f"`{name}` after the two branches of an `if`"))
    return tuple(out)


def _binds_only_names(statements: list[ast.stmt], rewritten: set[int]) -> bool:
    """Whether these statements only bind names: assignments to names and `if`s already rewritten."""
    for st in statements:
        if isinstance(st, ast.Pass) or id(st) in rewritten:
            continue
        if isinstance(st, ast.Assign):
            targets = [
                t
                for target in st.targets
                for t in (target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target])
            ]
            if all(isinstance(t, ast.Name) for t in targets):
                continue
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
            continue
        return False
    return True


def _bound_names(statements: list[ast.stmt]) -> list[str]:
    """The names these statements (which bind names only) bind, in order."""
    names: dict[str, None] = {}
    for st in statements:
        targets = st.targets if isinstance(st, ast.Assign) else [st.target] if isinstance(st, ast.AnnAssign) else []
        for target in targets:
            for t in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
                if isinstance(t, ast.Name):
                    names.setdefault(t.id)
    return list(names)


class _Rewrite(ast.NodeTransformer):
    def __init__(self) -> None:
        self.count = 0
        self.rewritten: set[int] = set()  # ids of the statements a rewritten `if` became

    def visit_If(self, node: ast.If) -> Any:
        self.generic_visit(node)  # (inner ifs first: a rewritten one binds names only)
        if not (_binds_only_names(node.body, self.rewritten) and _binds_only_names(node.orelse, self.rewritten)) or any(
            isinstance(n, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)) for n in ast.walk(node)
        ):
            return node
        names = _bound_names(node.body + node.orelse)
        if not names:
            return node
        self.count += 1
        k = self.count
        params = ast.arguments(
            posonlyargs=[], args=[ast.arg(arg=n) for n in names], kwonlyargs=[], kw_defaults=[], defaults=[]
        )

        def side(name: str, body: list[ast.stmt]) -> ast.FunctionDef:
            result = ast.Return(value=ast.Tuple(elts=[ast.Name(id=n, ctx=ast.Load()) for n in names], ctx=ast.Load()))
            return ast.FunctionDef(name=name, args=params, body=[*body, result], decorator_list=[], returns=None)

        then, orelse = f"__tracejit_then_{k}", f"__tracejit_else_{k}"
        lam = lambda value: ast.Lambda(
            args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]), body=value
        )
        before = ast.Tuple(
            elts=[
                ast.Call(
                    func=ast.Name(id="__tracejit_value_before", ctx=ast.Load()),
                    args=[lam(ast.Name(id=n, ctx=ast.Load()))],
                    keywords=[],
                )
                for n in names
            ],
            ctx=ast.Load(),
        )
        call = ast.Call(
            func=ast.Name(id="__tracejit_branches", ctx=ast.Load()),
            args=[
                node.test,
                ast.Name(id=then, ctx=ast.Load()),
                ast.Name(id=orelse, ctx=ast.Load()),
                before,
                ast.Tuple(elts=[ast.Constant(value=n) for n in names], ctx=ast.Load()),
            ],
            keywords=[],
        )
        assign = ast.Assign(
            targets=[ast.Tuple(elts=[ast.Name(id=n, ctx=ast.Store()) for n in names], ctx=ast.Store())], value=call
        )
        # a name neither branch bound, with no value before: unbound after, as in Python
        unbind = [
            ast.If(
                test=ast.Compare(
                    left=ast.Name(id=n, ctx=ast.Load()),
                    ops=[ast.Is()],
                    comparators=[ast.Name(id="__tracejit_undefined", ctx=ast.Load())],
                ),
                body=[ast.Delete(targets=[ast.Name(id=n, ctx=ast.Del())])],
                orelse=[],
            )
            for n in names
        ]
        out = [side(then, node.body), side(orelse, node.orelse or [ast.Pass()]), assign, *unbind]
        for st in out:
            ast.copy_location(st, node)
            self.rewritten.add(id(st))  # (an enclosing if's branches may hold it)
        return out

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
    if any(isinstance(n, (ast.Global, ast.Nonlocal)) for n in ast.walk(fdef)):
        return None
    rewrite = _Rewrite()
    fdef = rewrite.visit(fdef)
    if not rewrite.count:
        return None
    fdef.decorator_list = []
    ast.fix_missing_locations(fdef)  # (the new nodes take their statement's lines, then all move)
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
    new_globals.update(
        {
            _NAME: choose,
            "__tracejit_branches": branches,
            "__tracejit_value_before": value_before,
            "__tracejit_undefined": UNDEFINED,
        }
    )
    copy = types.FunctionType(
        inner, new_globals, fn.__name__, fn.__defaults__, tuple(cells[n] for n in inner.co_freevars) or None
    )
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = fn.__qualname__
    return copy
