"""Early returns in a kernel function or helper (`if b == 0: return 0.0`, then `return a / b`; a `return` inside a
loop), rewritten before numpy/source_rewrite.py's passes so that an `if` on values read from arrays can compute
both sides and select: each such `if` holds the rest of the function in its branch that does not return, every
branch binds the result to one name, and one `return` ends the function."""

from __future__ import annotations

import ast
import copy

_RESULT = "__tracejit_result"
LOOP_RESULT = "__tracejit_loop_result"  # (read only where its flag says the loop returned: conditional_expressions)


def lift(fdef: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """lift_loops, then lift_ifs: whether either did anything."""
    loops = lift_loops(fdef)
    return lift_ifs(fdef) or loops


def lift_loops(fdef: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A `return` inside a loop with no loop inside it (Numba's Mandelbrot: `for i in range(max_iters): ...
    if abs2 >= 4: return i`, then `return 255`) becomes a `break` that binds the value and a flag, and the loop
    is followed by `if flag: return value`: a loop that breaks can be compiled (source_rewrite.py), and lift_ifs
    then lifts that `if`. Loops with an `else` or inside a `try` or `with` are left as they are."""
    count = 0

    def returns_in(node: ast.AST) -> list[ast.Return]:
        return [n for n in own_nodes(node) if isinstance(n, ast.Return)]

    def inner_loop(loop: ast.For | ast.While) -> bool:
        return any(isinstance(n, (ast.For, ast.While, ast.AsyncFor)) for st in loop.body for n in own_nodes(st))

    def rewrite_returns(stmts: list[ast.stmt], value: str, flag: str) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for st in stmts:
            if isinstance(st, ast.Return):
                bind = ast.Assign(
                    targets=[ast.Name(id=value, ctx=ast.Store())],
                    value=st.value if st.value is not None else ast.Constant(value=None),
                )
                done = ast.Assign(targets=[ast.Name(id=flag, ctx=ast.Store())], value=ast.Constant(value=True))
                out += [ast.copy_location(n, st) for n in (bind, done, ast.Break())]
                break  # (what follows a return never runs)
            if isinstance(st, ast.If):
                st.body = rewrite_returns(st.body, value, flag)
                st.orelse = rewrite_returns(st.orelse, value, flag)
            out.append(st)
        return out

    def visit(stmts: list[ast.stmt]) -> list[ast.stmt]:
        nonlocal count
        out: list[ast.stmt] = []
        for st in stmts:
            if isinstance(st, ast.If):
                st.body, st.orelse = visit(st.body), visit(st.orelse)
            elif (
                isinstance(st, (ast.For, ast.While))
                and not st.orelse
                and not inner_loop(st)
                and returns_in(st)
                and all(_in_ifs(r, st.body) for r in returns_in(st))
            ):
                count += 1
                value, flag = f"{LOOP_RESULT}_{count}", f"__tracejit_loop_returned_{count}"
                st.body = rewrite_returns(st.body, value, flag)
                start = ast.Assign(targets=[ast.Name(id=flag, ctx=ast.Store())], value=ast.Constant(value=False))
                then = ast.If(
                    test=ast.Name(id=flag, ctx=ast.Load()),
                    body=[ast.Return(value=ast.Name(id=value, ctx=ast.Load()))],
                    orelse=[],
                )
                out += [ast.copy_location(start, st), st, ast.copy_location(then, st)]
                continue
            out.append(st)
        return out

    if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in own_nodes(fdef)):
        return False
    fdef.body = visit(fdef.body)
    ast.fix_missing_locations(fdef)
    return count > 0


def _in_ifs(node: ast.AST, stmts: list[ast.stmt]) -> bool:
    """Whether `node` is one of `stmts` or inside `if`s among them (not a `with`, `try` or `match`)."""
    for st in stmts:
        if st is node:
            return True
        if isinstance(st, ast.If) and (_in_ifs(node, st.body) or _in_ifs(node, st.orelse)):
            return True
    return False


def lift_ifs(fdef: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
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
