"""Kernel functions compiled again from their source before they are traced, so that code written for NumPy
runs as written where its tests are read from arrays (numpy/conditional_expressions.py runs what this writes):
- conditional expressions, `cost = 0 if a[i] == b[j] else 1`, become calls of `choose`;
- `if`/`else` statements become two functions of the names they bind and a call of `branches` (a branch that
  returns, raises or asserts is left as Python runs it: an `if` on an array value there is still an error);
- `and`/`or` become `both`/`either`; `for` over `range()` and `while` become numpy/loops.py's loops, their
  `break` and `continue` flags;
- calls of the user's own functions are compiled the same way (`helper`), `math.*`, `float()`, `int()` and
  `complex()` of values read from arrays compute them in the kernel.
The side Python would not take runs only where the test is traced. A function without source, a lambda, or one
with `global`/`nonlocal` or whose conditionals bind names with `:=` or yield is left as it is."""

from __future__ import annotations

import ast
import builtins
import collections
import copy
import inspect
import os
import sys
import sysconfig
import textwrap
import types
from typing import Any


from tracejit.numpy.conditional_expressions import (
    UNDEFINED,
    both,
    branches,
    choose,
    construct,
    either,
    neither,
    pick,
    unless_stopped,
    value_before,
)
from tracejit.numpy import early_returns, python_math


_NAME = "__tracejit_choose"
_compiled: dict[types.CodeType, types.CodeType | None] = {}  # a function's code -> its rewritten code (None: none)


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


def _effects_only(statements: list[ast.stmt], rewritten: set[int]) -> bool:
    """Whether a branch of an `if` does only what both branches can do, guarded by the test: bind names, assign
    into arrays (through names, views, helper functions), call functions, loop; no return, break, continue,
    raise, assert, yield, or change of a Python container."""
    for st in statements:
        if id(st) in rewritten:
            continue
        if not isinstance(
            st, (ast.Pass, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.If, ast.For, ast.While)
        ):
            return False
        if any(isinstance(n, (ast.Raise, ast.Assert, ast.Try, ast.With, ast.Delete)) for n in ast.walk(st)):
            return False
    return not _loop_body_problem(statements)


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


# methods that change a Python container in place: a loop whose body calls one is traced step by step
_MUTATORS = frozenset(
    "append extend insert pop remove clear update add discard setdefault popitem reverse appendleft extendleft "
    "put".split()
)


def _call(name: str, *args: ast.expr) -> ast.Call:
    return ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=list(args), keywords=[])


def _lambda(body: ast.expr) -> ast.Lambda:
    return ast.Lambda(
        args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]), body=body
    )


def _names_tuple(names, ctx) -> ast.Tuple:
    return ast.Tuple(elts=[ast.Name(id=n, ctx=ctx()) for n in names], ctx=ctx())


def _strings(names) -> ast.Tuple:
    return ast.Tuple(elts=[ast.Constant(value=n) for n in names], ctx=ast.Load())


def _unbind(names) -> list[ast.stmt]:
    """`if name is UNDEFINED: del name` for each name: one that had no value before and was not bound is
    unbound after, as in Python."""
    return [
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


def _loop_body_problem(statements: list[ast.stmt]) -> bool:
    """Whether a loop body does something a compiled loop cannot follow: breaks or continues this loop,
    returns, yields, binds with :=, changes a Python container, or assigns into something other than a name's
    subscript."""

    def visit(node: ast.AST, in_loop: bool) -> bool:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return False
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            return any(isinstance(n, ast.NamedExpr) for n in ast.walk(node))
        if isinstance(node, (ast.Break, ast.Continue)) and not in_loop:
            return True
        if isinstance(
            node, (ast.Return, ast.Yield, ast.YieldFrom, ast.Await, ast.NamedExpr, ast.Import, ast.ImportFrom)
        ):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS:
            return True
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and _subscript_base(node) is None:
            return True
        inner = in_loop or isinstance(node, (ast.For, ast.While, ast.AsyncFor))
        return any(visit(child, inner) for child in ast.iter_child_nodes(node))

    return any(visit(st, False) for st in statements)


def _exits(statements: list[ast.stmt]) -> tuple[bool, bool]:
    """Whether these statements `break` and whether they `continue` the loop they are the body of (not an inner
    loop's, not a nested function's)."""
    found = [False, False]

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.For, ast.While)):
            return
        if isinstance(node, ast.Break):
            found[0] = True
        if isinstance(node, ast.Continue):
            found[1] = True
        for child in ast.iter_child_nodes(node):
            visit(child)

    for st in statements:
        visit(st)
    return found[0], found[1]


def _has_inner_loop(statements: list[ast.stmt]) -> bool:
    """Whether a loop body holds another loop (a body with a break and an inner loop is left as Python runs
    it: its flags are not carried through the inner loop's rewriting yet)."""
    return any(isinstance(n, (ast.For, ast.While, ast.AsyncFor)) for st in statements for n in ast.walk(st))


def _flag(name: str, value: bool) -> ast.Assign:
    return ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=ast.Constant(value=value))


def _unless(flags: list[str], body: list[ast.stmt]) -> ast.If:
    """`if not (flag or ...): body`, as a test both Python and traced flags take (neither)."""
    test = _call("__tracejit_neither", *(ast.Name(id=f, ctx=ast.Load()) for f in flags))
    return ast.If(test=test, body=body or [ast.Pass()], orelse=[])


def _without_exits(statements: list[ast.stmt], stop: str | None, skip: str | None) -> list[ast.stmt]:
    """A loop body's statements with each `break` setting `stop` and each `continue` setting `skip`, and every
    statement that may follow one run only while neither is set: what Python skips after a break or a continue
    does nothing (an `if` on array values runs both branches, guarded, numpy/tensor.guarded)."""
    flags = [f for f in (stop, skip) if f is not None]
    out: list[ast.stmt] = []
    for at, st in enumerate(statements):
        if isinstance(st, ast.Break):
            assert stop is not None
            out.append(_flag(stop, True))
            return out
        if isinstance(st, ast.Continue):
            assert skip is not None
            out.append(_flag(skip, True))
            return out
        if any(_exits([st])):
            if isinstance(st, ast.If):
                st.body = _without_exits(st.body, stop, skip)
                st.orelse = _without_exits(st.orelse, stop, skip)
            out.append(st)
            rest = statements[at + 1 :]
            if rest:
                out.append(_unless(flags, _without_exits(rest, stop, skip)))
            return out
        out.append(st)
    return out


_VIEW_ATTRIBUTES = ("real", "imag", "T", "mT")  # views of the array they are read from: a store into them is a's


def _subscript_base(node: ast.expr) -> str | None:
    """The name `a` of a store into `a[...]` (or `a[...][...]`, `a.real[...]`, `a.T[...]`), else None."""
    while isinstance(node, ast.Subscript) or isinstance(node, ast.Attribute) and node.attr in _VIEW_ATTRIBUTES:
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _stored(statements: list[ast.stmt]) -> tuple[list[str], list[str]]:
    """The names these statements bind (in order; not those of nested functions and comprehensions), and the
    names they assign into by subscript."""
    names: dict[str, None] = {}
    bases: dict[str, None] = {}

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if not node.name.startswith("__tracejit_"):
                names.setdefault(node.name)
            return
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.setdefault(node.id)
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            base = _subscript_base(node)
            if base is not None:
                bases.setdefault(base)
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Subscript):
            base = _subscript_base(node.target)
            if base is not None:
                bases.setdefault(base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for st in statements:
        visit(st)
    return list(names), list(bases)


def _loads(node: ast.AST) -> collections.Counter:
    """How many times each name is read in `node`."""
    return collections.Counter(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))


def _bound_before_read(statements: list[ast.stmt], name: str) -> bool:
    """Whether each step of a loop with this body binds `name` before anything reads it, on every path through
    its `if`s (`if a[i] > a[i + 1]: tmp = a[i]; a[i] = a[i + 1]; a[i + 1] = tmp`): then no step reads the one
    before's value (it is not carried)."""
    return _first_use(statements, name) == "binds"


def _first_use(statements: list[ast.stmt], name: str) -> str:
    """What a block does first with `name` on its paths: "reads" (some path may read it before binding it),
    "binds" (every path binds it, by a plain assignment, before reading it), or "neither"."""
    for st in statements:
        if isinstance(st, ast.If):
            if _loads(st.test)[name]:
                return "reads"
            uses = {_first_use(st.body, name), _first_use(st.orelse, name)}
            if "reads" in uses:
                return "reads"
            if uses == {"binds"}:
                return "binds"
            continue
        if isinstance(st, ast.Assign):
            if _loads(st.value)[name] or any(_loads(t)[name] for t in st.targets):
                return "reads"
            if any(
                isinstance(t, ast.Name)
                and t.id == name
                or isinstance(t, (ast.Tuple, ast.List))
                and any(isinstance(e, ast.Name) and e.id == name for e in t.elts)
                for t in st.targets
            ):
                return "binds"
            continue
        if _loads(st)[name] or name in _stored([st])[0]:
            return "reads"  # (a loop, an augmented assignment, ...: taken as a read)
    return "neither"


def _iterable(node: ast.expr) -> ast.expr:
    """A `for`'s iterable as loops.for_each takes it: enumerate() and zip() as loops.enumerate_ and loops.zip_
    (by position where they hold traced arrays, else Python's)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("enumerate", "zip"):
        return ast.Call(  # (and those inside it: enumerate(zip(x, y)))
            func=ast.Name(id=f"__tracejit_{node.func.id}", ctx=ast.Load()),
            args=[_iterable(a) for a in node.args],
            keywords=node.keywords,
        )
    return node


def _target_names(target: ast.expr) -> list[str] | None:
    """The names a `for` binds where its target is a name or a tuple of names and such tuples (`(i, j), v` of
    np.ndenumerate, `k, (a, b)` of enumerate(zip(...))), else None."""
    if isinstance(target, ast.Name):
        return [target.id]
    if not isinstance(target, (ast.Tuple, ast.List)):
        return None
    names: list[str] = []
    for e in target.elts:
        inner = _target_names(e)
        if inner is None:
            return None
        names += inner
    return names


def _is_range(node: ast.expr) -> bool:
    """range(...) or numba's prange(...) (as `prange`, `numba.prange` or `nb.prange`), positional bounds only."""
    if not isinstance(node, ast.Call) or node.keywords or not 1 <= len(node.args) <= 3:
        return False
    if any(isinstance(a, ast.Starred) for a in node.args):
        return False
    f = node.func
    return (
        isinstance(f, ast.Name) and f.id in ("range", "prange") or isinstance(f, ast.Attribute) and f.attr == "prange"
    )


class _Rewrite(ast.NodeTransformer):
    def __init__(self, where: str = "", first_line: int = 1, function: ast.AST | None = None) -> None:
        self.count = 0
        self.rewritten: set[int] = set()  # ids of the statements a rewritten `if` became
        self.where, self.first_line = where, first_line
        self.reads = _loads(function) if function is not None else None  # the names the function reads, as written
        # of the loops whose break/continue became flags: the names each carries, the flag that stops it
        self.carried: dict[int, list[str]] = {}
        self.until: dict[int, str | None] = {}
        self.truth: set[int] = set()  # ids of the `and`/`or`s whose value only a test's truth reads

    def _tested(self, test: ast.expr) -> None:
        """`test` is an `if`'s, a `while`'s, a conditional expression's or `not`'s: only its truth is read, so
        its `and`/`or`s (and theirs inside) may compute with their operands' truths (`if grid[i, j] and s < 2`:
        an int64 and a bool, where the value of `and` itself would be one or the other)."""
        if isinstance(test, ast.BoolOp):
            self.truth.add(id(test))
            for value in test.values:
                self._tested(value)
        elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            self._tested(test.operand)

    def _live(self, node, names: list[str]) -> list[str]:
        """The names a loop binds whose values matter beyond one step: read outside the loop, or read by a
        step before it binds them (the others are each step's own, and are not carried)."""
        if self.reads is None:
            return names
        inside = _loads(node)
        return [n for n in names if self.reads[n] > inside[n] or not _bound_before_read(node.body, n)]

    def _loop_parts(self, node, params: list[str], names: list[str], bases: list[str], k: int) -> tuple:
        """The body as a function of `params` returning `names`, and the call's common arguments."""
        result = ast.Return(
            value=ast.Tuple(
                elts=[_call("__tracejit_value_before", _lambda(ast.Name(id=n, ctx=ast.Load()))) for n in names],
                ctx=ast.Load(),
            )
        )
        args = ast.arguments(
            posonlyargs=[], args=[ast.arg(arg=n) for n in params], kwonlyargs=[], kw_defaults=[], defaults=[]
        )
        body = ast.FunctionDef(
            name=f"__tracejit_body_{k}", args=args, body=[*node.body, result], decorator_list=[], returns=None
        )
        before = ast.Tuple(
            elts=[_call("__tracejit_value_before", _lambda(ast.Name(id=n, ctx=ast.Load()))) for n in names],
            ctx=ast.Load(),
        )
        stored = ast.Tuple(elts=[_lambda(ast.Name(id=b, ctx=ast.Load())) for b in bases], ctx=ast.Load())
        where = ast.Constant(value=f"{self.where}:{node.lineno + self.first_line - 1}")
        return body, before, stored, where

    def _finish_loop(self, node, made: list[ast.stmt], bound: list[str]) -> list[ast.stmt]:
        out = [*made, *_unbind(bound)]
        for st in out:
            ast.copy_location(st, node)
            self.rewritten.add(id(st))  # (an enclosing if's branches may hold it: both may run it, guarded)
        return out + list(node.orelse)  # (no break: the `else` always runs)

    def visit_For(self, node: ast.For) -> Any:
        breaks, continues = _exits(node.body)
        if (
            (breaks or continues)
            and isinstance(node.target, ast.Name)
            and _is_range(node.iter)
            and not _has_inner_loop(node.body)
        ):
            return self._for_with_exits(node, breaks, continues)
        if (breaks or continues) and not _is_range(node.iter) and not _has_inner_loop(node.body):
            positions = self._over_positions(node)
            if positions is not None:
                return positions
        names, bases = _stored(node.body)  # (of the body as written)
        names = [n for n in names if n != "__tracejit_unused"]  # (an index nothing reads)
        live = self.carried.get(id(node))
        live = self._live(node, names) if live is None else [n for n in names if n in live]
        # (the index is bound by each step itself: it matters beyond the loop only where read outside it)
        target_live = isinstance(node.target, ast.Name) and (
            self.reads is None or self.reads[node.target.id] > _loads(node)[node.target.id]
        )
        self.generic_visit(node)  # (inner loops first)
        if _loop_body_problem(node.body):
            return node
        if not _is_range(node.iter):
            return self._for_each(node, names, live, bases)
        if not isinstance(node.target, ast.Name):
            return node
        target = node.target.id
        if target in names:
            return node
        names = live
        self.count += 1
        k = self.count
        body, before, stored, where = self._loop_parts(node, [target, *names], names, bases, k)
        call = _call(
            "__tracejit_for",
            ast.Tuple(elts=list(node.iter.args), ctx=ast.Load()),  # type: ignore[attr-defined]
            ast.Name(id=body.name, ctx=ast.Load()),
            before,
            _strings(names),
            _call("__tracejit_value_before", _lambda(ast.Name(id=target, ctx=ast.Load())))
            if target_live
            else ast.Constant(value=None),
            stored,
            where,
            ast.Constant(value=self.until.get(id(node))),
        )
        after = target if target_live else "__tracejit_unused"  # (an index nothing reads after: not computed)
        assign = ast.Assign(targets=[_names_tuple([*names, after], ast.Store)], value=call)
        return self._finish_loop(node, [body, assign], [*names, after])

    def _for_each(self, node: ast.For, names: list[str], live: list[str], bases: list[str]):
        """`for row in A:`, `for i, x in enumerate(a):`, `for x, y in zip(a, b):`: the iterable evaluated once, as
        Python does, then a call of loops.for_each, which compiles the loop over positions where it is a traced
        array (or enumerate/zip of them), and iterates it as Python does otherwise. Each step reads its item
        from the iterable as it is then (`__tracejit_at`: an array the body changes in place shows it, as NumPy's
        iterator does)."""
        t = node.target
        targets = _target_names(t)
        if targets is None or set(targets) & set(names):
            return node  # (the body rebinds the item's name)
        if any(self.reads is None or self.reads[n] > _loads(node)[n] for n in targets):
            return node  # (the item's names read after the loop: Python's loop)
        self.count += 1
        k = self.count
        iterable, position = f"__tracejit_iterable_{k}", f"__tracejit_item_{k}"
        first = ast.Assign(targets=[ast.Name(id=iterable, ctx=ast.Store())], value=_iterable(node.iter))
        at = _call("__tracejit_at", ast.Name(id=iterable, ctx=ast.Load()), ast.Name(id=position, ctx=ast.Load()))
        unpack = ast.Assign(targets=[t], value=at)
        inner = ast.For(target=t, iter=node.iter, body=[unpack, *node.body], orelse=[])
        for made in (first, unpack, inner):
            ast.fix_missing_locations(ast.copy_location(made, node))
        body, before, stored, where = self._loop_parts(inner, [position, *live], live, bases, k)
        call = _call(
            "__tracejit_for_each",
            ast.Name(id=iterable, ctx=ast.Load()),
            ast.Name(id=body.name, ctx=ast.Load()),
            before,
            _strings(live),
            stored,
            where,
        )
        assign = ast.Assign(targets=[_names_tuple([*live, "__tracejit_unused"], ast.Store)], value=call)
        return self._finish_loop(node, [first, body, assign], [*live, "__tracejit_unused"])

    def _over_positions(self, node: ast.For) -> list[ast.stmt] | None:
        """A `for` over an array itself (as _for_each takes it) that breaks or continues: the iterable evaluated
        once; where it is a traced array, `for p in range(len): item = at(p); ...` (compiled as such loops with
        exits are), else the loop as written, over it."""
        t = node.target
        targets = _target_names(t)
        if targets is None or set(targets) & set(_stored(node.body)[0]):
            return None  # (the body rebinds the item's name: each step's would differ with the break's flags)
        self.count += 1
        k = self.count
        iterable, position = f"__tracejit_iterable_{k}", f"__tracejit_position_{k}"
        first = ast.Assign(targets=[ast.Name(id=iterable, ctx=ast.Store())], value=_iterable(node.iter))
        unpack = ast.Assign(
            targets=[copy.deepcopy(t)],
            value=_call("__tracejit_at", ast.Name(id=iterable, ctx=ast.Load()), ast.Name(id=position, ctx=ast.Load())),
        )
        ranged = ast.For(
            target=ast.Name(id=position, ctx=ast.Store()),
            iter=_call("range", _call("__tracejit_length", ast.Name(id=iterable, ctx=ast.Load()))),
            body=[unpack, *copy.deepcopy(node.body)],
            orelse=copy.deepcopy(node.orelse),
        )
        written = copy.deepcopy(node)
        written.iter = ast.Name(id=iterable, ctx=ast.Load())
        for made in (first, unpack, ranged, written):
            ast.fix_missing_locations(ast.copy_location(made, node))
        compiled = self.visit_For(ranged)
        as_written = self.generic_visit(written)
        test = _call("__tracejit_positional", ast.Name(id=iterable, ctx=ast.Load()))
        choice = ast.If(
            test=test,
            body=compiled if isinstance(compiled, list) else [compiled],
            orelse=[as_written],  # type: ignore[list-item]
        )
        out = [first, choice]
        for st in out:
            ast.fix_missing_locations(ast.copy_location(st, node))
            self.rewritten.add(id(st))
        return out

    def _for_with_exits(self, node: ast.For, breaks: bool, continues: bool) -> list[ast.stmt]:
        """A `for` whose body breaks or continues it, as one that does not (then rewritten as any other)."""
        # `break` and `continue` become flags: the steps after a break, and the rest of a step after a
        # continue, do nothing; a compiled loop stops after the step that set `stop` (loops.for_range)
        self.count += 1
        k = self.count
        stop = f"__tracejit_stop_{k}" if breaks else None
        skip = f"__tracejit_skip_{k}" if continues else None
        at = f"__tracejit_at_{k}"
        assert isinstance(node.target, ast.Name)  # (visit_For checked)
        target = node.target.id
        live = self.reads is None or self.reads[target] > _loads(node)[target]
        names = [n for n in _stored(node.body)[0] if n != "__tracejit_unused"]
        carried = self._live(node, names)  # (of the body as written: the flags' ifs would hide it)
        body = _without_exits(node.body, stop, skip)
        head: list[ast.stmt] = []
        if live:  # the index after the loop: the last step's that ran (Python's, after a break too)
            head.append(
                ast.Assign(
                    targets=[ast.Name(id=at, ctx=ast.Store())],
                    value=_call(
                        "__tracejit_pick",
                        ast.Name(id=stop, ctx=ast.Load()) if stop else ast.Constant(value=False),
                        ast.Name(id=at, ctx=ast.Load()),
                        ast.Name(id=target, ctx=ast.Load()),
                    ),
                )
            )
        inner = [_flag(skip, False)] if skip else []
        node.body = head + ([_unless([stop], inner + body)] if stop else inner + body)
        before_loop: list[ast.stmt] = [_flag(stop, False)] if stop else []
        if live:  # (the index before the loop: where no step runs, it stays)
            before_loop.append(
                ast.Assign(
                    targets=[ast.Name(id=at, ctx=ast.Store())],
                    value=_call("__tracejit_value_before", _lambda(ast.Name(id=target, ctx=ast.Load()))),
                )
            )
        after_loop: list = []
        if live:
            after_loop.append(
                ast.If(
                    test=ast.Compare(
                        left=_call("__tracejit_value_before", _lambda(ast.Name(id=at, ctx=ast.Load()))),
                        ops=[ast.IsNot()],
                        comparators=[ast.Name(id="__tracejit_undefined", ctx=ast.Load())],
                    ),
                    body=[
                        ast.Assign(
                            targets=[ast.Name(id=target, ctx=ast.Store())], value=ast.Name(id=at, ctx=ast.Load())
                        )
                    ],
                    orelse=[],
                )
            )
        if node.orelse:  # (runs when no break stopped the loop)
            after_loop.append(_unless([stop], node.orelse) if stop else node.orelse)
            node.orelse = []
        self.until[id(node)] = stop  # (the loop stops on `stop`)
        self.carried[id(node)] = carried + [f for f in (stop, at) if f and (f == stop or live)]
        after = [x for st in after_loop for x in (st if isinstance(st, list) else [st])]
        return self._around(node, before_loop, self.visit_For(node), after)

    def _around(self, node, before: list[ast.stmt], rewritten, after: list[ast.stmt]) -> list[ast.stmt]:
        """A rewritten loop with the statements its flags need before it and after it (those rewritten too)."""
        for st in before + after:
            ast.copy_location(st, node)
            ast.fix_missing_locations(st)
        out = [*before, *(rewritten if isinstance(rewritten, list) else [rewritten])]
        for st in after:
            made = self.visit(st)
            out += made if isinstance(made, list) else [made]
        return out

    def visit_While(self, node: ast.While) -> Any:
        self._tested(node.test)
        breaks, continues = _exits(node.body)
        if (breaks or continues) and not _has_inner_loop(
            node.body
        ):  # as visit_For's: flags, the rest guarded; the test false once `stop` is set
            return self._while_with_exits(node, breaks, continues)
        names, bases = _stored(node.body)
        names = [n for n in names if n != "__tracejit_unused"]  # (an index nothing reads)
        tested = _loads(node.test)
        live = self.carried.get(id(node))
        if live is None:
            names = [n for n in names if tested[n] or n in self._live(node, [n])]  # (what the test reads is carried)
        else:
            names = [n for n in names if n in live]
        self.generic_visit(node)
        if _loop_body_problem(node.body) or any(
            isinstance(n, (ast.NamedExpr, ast.Yield, ast.Await)) for n in ast.walk(node.test)
        ):
            return node
        self.count += 1
        k = self.count
        body, before, stored, where = self._loop_parts(node, names, names, bases, k)
        args = ast.arguments(
            posonlyargs=[], args=[ast.arg(arg=n) for n in names], kwonlyargs=[], kw_defaults=[], defaults=[]
        )
        test = ast.FunctionDef(
            name=f"__tracejit_test_{k}", args=args, body=[ast.Return(value=node.test)], decorator_list=[], returns=None
        )
        call = _call(
            "__tracejit_while",
            ast.Name(id=test.name, ctx=ast.Load()),
            ast.Name(id=body.name, ctx=ast.Load()),
            before,
            _strings(names),
            stored,
            where,
        )
        made: list[ast.stmt] = [test, body]
        if names:
            made.append(ast.Assign(targets=[_names_tuple(names, ast.Store)], value=call))
        else:
            made.append(ast.Expr(value=call))
        return self._finish_loop(node, made, names)

    def visit_If(self, node: ast.If) -> Any:
        self._tested(node.test)
        self.generic_visit(node)  # (inner ifs first: a rewritten one binds names only)
        if any(isinstance(n, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)) for n in ast.walk(node)):
            return node
        sides = [node.body, node.orelse]
        if all(len(b) == 1 and isinstance(b[0], ast.Return) and b[0].value is not None for b in sides):
            # `if c: return a else: return b` (a helper's clamp): return a if c else b
            self.count += 1
            choice = _call(_NAME, node.test, _lambda(node.body[0].value), _lambda(node.orelse[0].value))  # type: ignore[attr-defined]
            return ast.copy_location(ast.Return(value=choice), node)
        bases: list[str] = []
        names = _bound_names(node.body + node.orelse)
        if names and _binds_only_names(node.body, self.rewritten) and _binds_only_names(node.orelse, self.rewritten):
            pass
        elif _effects_only(node.body, self.rewritten) and _effects_only(node.orelse, self.rewritten):
            # branches that assign into arrays too: both traced, their assignments guarded by the test
            names, bases = _stored(node.body + node.orelse)
            names = [n for n in names if n != "__tracejit_unused"]  # (an index nothing reads)
        else:
            return node
        self.count += 1
        k = self.count
        params = ast.arguments(
            posonlyargs=[], args=[ast.arg(arg=n) for n in names], kwonlyargs=[], kw_defaults=[], defaults=[]
        )

        def side(name: str, body: list[ast.stmt]) -> ast.FunctionDef:
            # (value_before: an `if` inside that bound a name neither before nor in the side Python took unbinds it)
            result = ast.Return(
                value=ast.Tuple(
                    elts=[_call("__tracejit_value_before", _lambda(ast.Name(id=n, ctx=ast.Load()))) for n in names],
                    ctx=ast.Load(),
                )
            )
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
                ast.Tuple(elts=[_lambda(ast.Name(id=b, ctx=ast.Load())) for b in bases], ctx=ast.Load()),
            ],
            keywords=[],
        )
        assign: ast.stmt = (
            ast.Assign(
                targets=[ast.Tuple(elts=[ast.Name(id=n, ctx=ast.Store()) for n in names], ctx=ast.Store())],
                value=call,
            )
            if names
            else ast.Expr(value=call)
        )
        out = [side(then, node.body), side(orelse, node.orelse or [ast.Pass()]), assign, *_unbind(names)]
        for st in out:
            ast.copy_location(st, node)
            self.rewritten.add(id(st))  # (an enclosing if's branches may hold it)
        return out

    def _while_with_exits(self, node: ast.While, breaks: bool, continues: bool) -> list[ast.stmt]:
        """A `while` whose body breaks or continues it, as one that does not (then rewritten as any other)."""
        self.count += 1
        k = self.count
        stop = f"__tracejit_stop_{k}" if breaks else None
        skip = f"__tracejit_skip_{k}" if continues else None
        names = [n for n in _stored(node.body)[0] if n != "__tracejit_unused"]
        tested = _loads(node.test)
        carried = [n for n in names if tested[n] or n in self._live(node, [n])]
        body = _without_exits(node.body, stop, skip)
        node.body = ([_flag(skip, False)] if skip else []) + body
        before_loop: list[ast.stmt] = [_flag(stop, False)] if stop else []
        if stop:
            node.test = _call("__tracejit_unless_stopped", ast.Name(id=stop, ctx=ast.Load()), node.test)
        after: list[ast.stmt] = []
        if node.orelse:
            after = [_unless([stop], node.orelse)] if stop else list(node.orelse)
            node.orelse = []
        self.carried[id(node)] = carried + ([stop] if stop else [])
        return self._around(node, before_loop, self.visit_While(node), after)

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr == "ndarray" or isinstance(f, ast.Name) and f.id == "ndarray":
            self.count += 1  # np.ndarray(shape, dtype): an allocation, see construct
            return ast.copy_location(
                ast.Call(
                    func=ast.Name(id="__tracejit_construct", ctx=ast.Load()),
                    args=[f, *node.args],
                    keywords=node.keywords,
                ),
                node,
            )
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        if isinstance(node.op, ast.Not):
            self._tested(node.operand)
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):  # `not x` of a value read from arrays: its negation (python_math.not_)
            return ast.copy_location(_call("__tracejit_not", node.operand), node)
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        """`a and b and c` as both(a, both(b, c)) with each later operand a lambda (Python's short circuit)."""
        self.generic_visit(node)
        if any(isinstance(n, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)) for n in ast.walk(node)):
            return node
        self.count += 1
        helper = "__tracejit_both" if isinstance(node.op, ast.And) else "__tracejit_either"
        values = node.values
        if id(node) in self.truth:  # (a test's: each operand's truth, Python's bool())
            values = [ast.copy_location(_call("__tracejit_truth", v), v) for v in values]
        out = values[-1]
        for value in reversed(values[:-1]):
            out = ast.Call(func=ast.Name(id=helper, ctx=ast.Load()), args=[_lambda(value), _lambda(out)], keywords=[])
        return ast.copy_location(out, node)

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        self._tested(node.test)
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


_BUILTIN_NAMES = frozenset(dir(builtins))
# where installed code lives (the standard library, site-packages, tracejit itself): not a user's helper
_INSTALLED = tuple(
    sorted(
        {
            os.path.join(os.path.abspath(p), "")
            for p in (*sysconfig.get_paths().values(), os.path.dirname(os.path.dirname(__file__)))
        }
    )
)


def helper(f):
    """What a call in a kernel's code calls: a function of the user's own (defined in a file outside the standard
    library, the installed packages and tracejit) compiled again from its source as the kernel function is
    (visible: its conditionals, `and`/`or` and loops on values read from arrays); a function of Python's math
    module, given a value read from arrays, NumPy's version of it computed in float64 (a Python float, as math's
    result is; a domain error gives NaN, as in Numba, not ValueError); anything else as it is."""
    if type(f) is types.FunctionType:
        path = f.__code__.co_filename
        if path.startswith("<") or os.path.abspath(path).startswith(_INSTALLED):
            return f
        return visible(f)
    if isinstance(f, types.BuiltinFunctionType) and getattr(f, "__module__", None) == "math":
        return python_math.MATH.get(f.__name__, f)
    if f is float:
        return python_math.float_of
    if f is complex:
        return python_math.complex_of
    if f is int:
        return python_math.int_of
    if f is bool:
        return python_math.bool_of
    return f


_FAILED = "__tracejit_failed"


class _Asserts(ast.NodeTransformer):
    """`assert test, message` on values read from arrays, a check when the kernel runs (numpy/assertions.py): the
    function counts its first failed assert in a name of its own, which its loops and branches carry as any name
    they bind, and each `return` (and its end) passes through `finish`. Python without -O only (-O drops asserts);
    nested functions and lambdas are left as they are."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.count = 0

    def run(self, fdef: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        asserts = not sys.flags.optimize and any(isinstance(n, ast.Assert) for n in self._own(fdef))
        if not asserts and not any(_raising_if(n) is not None for n in self._own(fdef)):
            return
        fdef.body = [self.visit(st) for st in fdef.body]
        start = ast.Assign(targets=[ast.Name(id=_FAILED, ctx=ast.Store())], value=_call("__tracejit_no_failure"))
        docstring = 1 if ast.get_docstring(fdef) is not None else 0
        fdef.body[docstring:docstring] = [start]
        if not isinstance(fdef.body[-1], ast.Return):
            fdef.body.append(ast.Expr(value=self._finish(ast.Constant(value=None))))

    def _own(self, node: ast.AST):
        """The nodes of a function's body, not those of functions and lambdas inside it."""
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            yield child
            yield from self._own(child)

    def _finish(self, value: ast.expr) -> ast.Call:
        return _call(
            "__tracejit_finish",
            ast.Name(id=_FAILED, ctx=ast.Load()),
            value,
            ast.Constant(value=self.where),
            ast.Constant(value=self.count),
        )

    def visit_FunctionDef(self, node):  # (a nested function: its own)
        return node

    visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = visit_FunctionDef

    def visit_If(self, node: ast.If) -> Any:
        """`if test: raise ValueError("...")` (a built-in exception): a check as an assert's, raising that
        exception (numpy/assertions.py); Python's own where the test is a Python value."""
        exc = _raising_if(node)
        if exc is None:
            return self.generic_visit(node)
        self.count += 1
        call = _call(
            "__tracejit_assert",
            ast.Name(id=_FAILED, ctx=ast.Load()),
            ast.Constant(value=self.count),
            ast.UnaryOp(op=ast.Not(), operand=node.test),
            _lambda(exc),
            ast.Constant(value=self.where),
            ast.Constant(value=True),
        )
        return ast.fix_missing_locations(
            ast.copy_location(ast.Assign(targets=[ast.Name(id=_FAILED, ctx=ast.Store())], value=call), node)
        )

    def visit_Assert(self, node: ast.Assert) -> Any:
        if sys.flags.optimize:
            return node  # (Python drops it)
        self.count += 1
        message = node.msg if node.msg is not None else ast.Constant(value=None)
        call = _call(
            "__tracejit_assert",
            ast.Name(id=_FAILED, ctx=ast.Load()),
            ast.Constant(value=self.count),
            node.test,
            _lambda(message),
            ast.Constant(value=self.where),
        )
        return ast.copy_location(ast.Assign(targets=[ast.Name(id=_FAILED, ctx=ast.Store())], value=call), node)

    def visit_Return(self, node: ast.Return) -> Any:
        value = node.value if node.value is not None else ast.Constant(value=None)
        return ast.copy_location(ast.Return(value=self._finish(value)), node)


class _Helpers(ast.NodeTransformer):
    """The calls of the rewritten function made through `helper` (after the rewrite, whose analyses read the calls
    as written: `states.append(h)` changes a list): a helper of the user's is compiled from its source too."""

    def __init__(self) -> None:
        self.count = 0

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        f = node.func
        if not (
            isinstance(f, ast.Name)
            and (
                f.id in _BUILTIN_NAMES - {"float", "int", "bool", "complex"}
                or f.id.startswith("__tracejit")
                or f.id == "prange"
            )
            or isinstance(f, ast.Attribute)
            and f.attr in ("prange", "ndarray")
        ):  # (range(), len(), and numba's prange are what they are)
            self.count += 1
            node.func = _call("__tracejit_helper", f)
        return node


_EXCEPTIONS = frozenset(  # Python's own exception classes: a kernel's check can raise them by name (Fault)
    name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, Exception)
)


def _raising_if(node: ast.AST) -> ast.expr | None:
    """The exception of `if test: raise E(args)` (or `raise E`), E a built-in exception, with no else: what the
    assert pass makes a check of; else None."""
    if not isinstance(node, ast.If) or node.orelse or len(node.body) != 1 or not isinstance(node.body[0], ast.Raise):
        return None
    raise_ = node.body[0]
    exc = raise_.exc
    if raise_.cause is not None or exc is None:
        return None
    name = exc.func if isinstance(exc, ast.Call) else exc
    if not isinstance(name, ast.Name) or name.id not in _EXCEPTIONS:
        return None
    if isinstance(exc, ast.Call) and (exc.keywords or any(isinstance(a, ast.Starred) for a in exc.args)):
        return None
    return exc


_unread: set[types.CodeType] = set()  # functions whose source could not be read: their loops run as Python's


def unread_source_hint(tb) -> str:
    """What to say where tracing a function whose source could not be read (typed at a `python` prompt, made by
    exec) failed inside it: its loops and branches ran as plain Python, on traced values. Empty otherwise."""
    while tb is not None:
        code = tb.tb_frame.f_code
        if code in _unread:
            return (
                f" ({code.co_name}'s source, {code.co_filename}:{code.co_firstlineno}, could not be read: tracejit "
                "compiles a function's loops and `if`s on traced values from its source; define it in a file or "
                "a notebook cell)"
            )
        tb = tb.tb_next
    return ""


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
        _unread.add(code)
        return None
    fdef = tree.body[0] if tree.body else None
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)) or fdef.name != code.co_name:
        return None
    if any(isinstance(n, (ast.Global, ast.Nonlocal)) for n in ast.walk(fdef)):
        return None
    lifted = early_returns.lift(fdef)
    asserts = _Asserts(f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}")
    asserts.run(fdef)
    rewrite = _Rewrite(os.path.basename(code.co_filename), code.co_firstlineno, fdef)
    fdef = rewrite.visit(fdef)
    helpers = _Helpers()
    fdef = helpers.visit(fdef)
    if not rewrite.count and not helpers.count and not asserts.count and not lifted:
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
    from tracejit.numpy import assertions, loops  # (loops needs this module)

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
            "__tracejit_for": loops.for_range,
            "__tracejit_for_each": loops.for_each,
            "__tracejit_not": python_math.not_,
            "__tracejit_truth": python_math.bool_of,
            "__tracejit_at": loops.item_at,
            "__tracejit_positional": lambda iterable: loops.positional(iterable) is not None,
            "__tracejit_length": loops.length,
            "__tracejit_enumerate": loops.enumerate_,
            "__tracejit_zip": loops.zip_,
            "__tracejit_construct": construct,
            "__tracejit_both": both,
            "__tracejit_helper": helper,
            "__tracejit_either": either,
            "__tracejit_neither": neither,
            "__tracejit_pick": pick,
            "__tracejit_unless_stopped": unless_stopped,
            "__tracejit_while": loops.while_true,
            "__tracejit_no_failure": assertions.no_failure,
            "__tracejit_assert": assertions.check,
            "__tracejit_finish": assertions.finish,
        }
    )
    copy = types.FunctionType(
        inner, new_globals, fn.__name__, fn.__defaults__, tuple(cells[n] for n in inner.co_freevars) or None
    )
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = fn.__qualname__
    return copy
