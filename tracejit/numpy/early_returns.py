"""Early returns in a kernel function or helper (`if b == 0: return 0.0`, then `return a / b`), rewritten before
numpy/source_rewrite.py's passes so that an `if` on values read from arrays can compute both sides and select:
each such `if` holds the rest of the function in its branch that does not return, every branch binds the
result to one name, and one `return` ends the function."""

from __future__ import annotations

import ast
import copy

_RESULT = "__tracejit_result"


def lift(fdef: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A function whose `if`s return early (`if b == 0: return 0.0` then `return a / b`), its returns only in
    `if`s and at its end (none in a loop, a `with` or a `try`): rewritten so that each `if` holds the rest of
    the function in its branch that does not return, every branch binds the result to a name, and one `return`
    ends the function. An `if` on values read from arrays can then compute both branches and select (as an
    `if` that binds names does), where it could not return from the middle of a traced function. Whether it
    did anything."""

    def returns_in(node: ast.AST) -> bool:
        return any(isinstance(n, ast.Return) for n in own_nodes(node))

    def plain(stmts: list[ast.stmt]) -> bool:  # returns only at the end, or in ifs (made of such statements)
        for k, st in enumerate(stmts):
            if isinstance(st, ast.Return):
                if k != len(stmts) - 1:
                    return False
            elif isinstance(st, ast.If):
                if not (plain(st.body) and plain(st.orelse)):
                    return False
            elif returns_in(st):
                return False
        return True

    def lifted(stmts: list[ast.stmt]) -> list[ast.stmt]:
        """stmts, every path through them ending in an assignment of the result (a fall off the end: None)."""
        for k, st in enumerate(stmts):
            if isinstance(st, ast.Return):
                value = st.value if st.value is not None else ast.Constant(value=None)
                bind = ast.Assign(targets=[ast.Name(id=_RESULT, ctx=ast.Store())], value=value)
                return [*stmts[:k], ast.copy_location(bind, st)]
            if isinstance(st, ast.If) and returns_in(st):
                rest = stmts[k + 1 :]
                branch = ast.If(
                    test=st.test,
                    body=lifted(st.body + copy.deepcopy(rest)),
                    orelse=lifted(st.orelse + copy.deepcopy(rest)),
                )
                return [*stmts[:k], ast.copy_location(branch, st)]
        end = ast.Assign(targets=[ast.Name(id=_RESULT, ctx=ast.Store())], value=ast.Constant(value=None))
        return [*stmts, ast.copy_location(end, stmts[-1]) if stmts else end]

    body = fdef.body
    early = any(isinstance(st, ast.If) and returns_in(st) for st in body)
    if not early or not plain(body) or sum(1 for n in own_nodes(fdef) if isinstance(n, ast.Return)) > 16:
        return False  # (nothing to do, returns it cannot lift, or a function whose copies would grow too much)
    if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in own_nodes(fdef)):
        return False
    docstring = body[:1] if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else []
    final = ast.Return(value=ast.Name(id=_RESULT, ctx=ast.Load()))
    fdef.body = [*docstring, *lifted(body[len(docstring) :]), ast.copy_location(final, body[-1])]
    return True


def own_nodes(node: ast.AST):
    """The nodes of `node` outside the functions, lambdas and classes it defines."""
    stack = list(ast.iter_child_nodes(node))
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        yield n
        stack.extend(ast.iter_child_nodes(n))
