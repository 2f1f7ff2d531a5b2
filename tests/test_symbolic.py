"""The index algebra every lowering goes through (tracejit/ir/symbolic.py): its simplified expressions must
have the value of the integer arithmetic they stand for, at every point of their variables' ranges, and
expressions must compare and hash equal wherever they are equal, in this process and after pickling."""
from __future__ import annotations

import itertools
import os
import pickle
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tracejit.ir.symbolic import Clamp, Div, Expr, Mod, Var

REPO = Path(__file__).resolve().parents[1]
I, J = Var("i", 6), Var("j", 5)


def value(e, env: dict) -> int:
    """An expression's value, by plain integer arithmetic (clamps as min/max)."""
    if isinstance(e, Var):
        return env[e]
    if isinstance(e, Div):
        return value(e.x, env) // e.d
    if isinstance(e, Mod):
        return value(e.x, env) % e.d
    if isinstance(e, Clamp):
        return min(max(value(e.x, env), e.lo), e.hi)
    return e.const + sum(c * value(a, env) for a, c in e.terms)


def points():
    return [{I: i, J: j} for i, j in itertools.product(range(I.extent), range(J.extent))]


# a program of operations on a stack of (expression, integer function) pairs, checked point by point
OPS = st.one_of(
    st.tuples(st.just("var"), st.sampled_from([I, J])),
    st.tuples(st.just("const"), st.integers(-7, 7)),
    st.tuples(st.just("add int"), st.integers(-7, 7)),   # a Python int on either side
    st.tuples(st.just("add"), st.none()),
    st.tuples(st.just("sub"), st.none()),
    st.tuples(st.just("mul"), st.integers(-3, 4)),
    st.tuples(st.just("div"), st.integers(1, 7)),
    st.tuples(st.just("mod"), st.integers(1, 7)),
    st.tuples(st.just("clamp"), st.tuples(st.integers(-4, 4), st.integers(0, 9))),
    # substitute j for i: a substitution stands in an expression whose values lie in the variable's range
    # (what layouts do), and j's [0, 5) lies in i's [0, 6). i for j would not: j // 5 is simplified to 0.
    st.tuples(st.just("swap"), st.just((I, J))),
)


def run(program):
    stack = [(Expr.of(I), lambda p: p[I])]
    for op, arg in program:
        if op == "var":
            stack.append((Expr.of(arg), lambda p, v=arg: p[v]))
        elif op == "const":
            stack.append((Expr.of(arg), lambda p, k=arg: k))
        elif op == "add int":
            a, fa = stack.pop()
            stack.append((a + arg if arg % 2 else arg + a, lambda p, fa=fa, k=arg: fa(p) + k))
        elif op in ("add", "sub") and len(stack) >= 2:
            (b, fb), (a, fa) = stack.pop(), stack.pop()
            if op == "add":
                stack.append((a + b, lambda p, fa=fa, fb=fb: fa(p) + fb(p)))
            else:
                stack.append((a - b, lambda p, fa=fa, fb=fb: fa(p) - fb(p)))
        elif op == "mul":
            a, fa = stack.pop()
            stack.append((a * arg, lambda p, fa=fa, k=arg: fa(p) * k))
        elif op == "div":
            a, fa = stack.pop()
            stack.append((a // arg, lambda p, fa=fa, d=arg: fa(p) // d))
        elif op == "mod":
            a, fa = stack.pop()
            stack.append((a % arg, lambda p, fa=fa, d=arg: fa(p) % d))
        elif op == "clamp":
            a, fa = stack.pop()
            lo, hi = arg[0], arg[0] + arg[1]
            stack.append((a.clamp(lo, hi), lambda p, fa=fa, lo=lo, hi=hi: min(max(fa(p), lo), hi)))
        elif op == "swap":
            a, fa = stack.pop()
            old, new = arg
            stack.append((a.substitute({old: Expr.of(new)}), lambda p, fa=fa, old=old, new=new: fa({**p, old: p[new]})))
        if not stack:
            stack.append((Expr(), lambda p: 0))
    return stack


@settings(max_examples=int(os.environ.get("TRACEJIT_SYMBOLIC_EXAMPLES", "300")), deadline=None)
@given(st.lists(OPS, max_size=14))
def test_simplified_expressions_have_the_value_of_the_integer_arithmetic(program):
    for expr, reference in run(program):
        lo, hi = expr.bounds()
        for p in points():
            got = value(expr, p)
            assert got == reference(p), (str(expr), p)
            assert lo <= got <= hi, (str(expr), p, (lo, hi))


def test_reshapes_that_undo_each_other_cancel_and_equal_expressions_hash_equal():
    flat = Expr.of(I) * 5 + J                         # a (6, 5) array's flat index
    row, col = flat // 5, flat % 5
    assert row == Expr.of(I) and col == Expr.of(J)
    again = row * 5 + col
    assert again == flat and hash(again) == hash(flat) and {flat: 1}[again] == 1
    k = Var("k", 30)
    assert (Expr.of(k) // 5) * 5 + Expr.of(k) % 5 == Expr.of(k)   # k // 5 and k % 5 stay atoms, then cancel
    assert Expr.of(k) % 5 + (Expr.of(k) // 5) * 5 + 2 == Expr.of(k) + 2
    assert Expr.of(I) + 0 == Expr.of(I) and (Expr.of(I) * 1) is not None and 3 + Expr.of(J) == Expr.of(J) + 3


def test_pickled_expressions_hash_as_this_process_hashes_them():
    """Hashes are cached on the expressions; a cached string hash must not travel to a process whose
    string hashes differ (dask ships traced programs by pickle)."""
    e = (Expr.of(Var("row", 7)) * 3 + Var("col", 3)) // 2 + Expr.of(Var("row", 7)) % 4
    hash(e), str(e)   # fill the caches before pickling
    code = ("import pickle, sys\nfrom tracejit.ir.symbolic import Expr, Var\n"
            "e = pickle.loads(sys.stdin.buffer.read())\n"
            "f = (Expr.of(Var('row', 7)) * 3 + Var('col', 3)) // 2 + Expr.of(Var('row', 7)) % 4\n"
            "assert e == f and hash(e) == hash(f) and {f: 1}[e] == 1, (hash(e), hash(f))\n"
            "assert [t[0] for t in e.terms] == [t[0] for t in f.terms]\n")
    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(e), capture_output=True,
                             timeout=120, env=dict(os.environ, PYTHONPATH=str(REPO), PYTHONHASHSEED=seed))
        assert out.returncode == 0, out.stderr.decode()
