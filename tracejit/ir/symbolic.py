"""Integer index expressions over loop variables: affine sums of atoms (variables, floor div, mod, clamp,
and indices read from data).

Simplification knows the range of every variable, so reshapes that undo each other cancel:
(x // c) * c + x % c is x, and x % c is x when 0 <= x < c. That is what turns views into plain
strided indexing, and lets the layout pass see which dimensions can be merged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # an index array is a graph node; expressions themselves need nothing of the graph
    from tracejit.ir.graph import Node


def _hash_once(cls):
    """A frozen dataclass whose hash is computed once: expressions nest, and the hash dataclass writes walks
    the whole tree on every dict lookup (a GPT-2 block's lowering hashed 250,000 times). The cached hash and
    sort key (_sort_key) are not pickled: string hashes differ from process to process."""
    compute = cls.__hash__

    def __hash__(self):
        d = self.__dict__
        h = d.get("_hash")
        if h is None:
            h = d["_hash"] = compute(self)
        return h

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("_hash", "_key")}

    cls.__hash__, cls.__getstate__ = __hash__, __getstate__
    return cls


@_hash_once
@dataclass(frozen=True)
class Var:
    name: str
    extent: int

    def bounds(self) -> tuple[int, int]:
        return 0, self.extent - 1


@_hash_once
@dataclass(frozen=True)
class Div:
    x: Expr
    d: int

    def bounds(self):
        lo, hi = self.x.bounds()
        return lo // self.d, hi // self.d


@_hash_once
@dataclass(frozen=True)
class Mod:
    x: Expr
    d: int

    def bounds(self):
        return 0, self.d - 1


@_hash_once
@dataclass(frozen=True)
class Clamp:
    x: Expr
    lo: int
    hi: int
    # kept whatever the bounds of x (a clamp to a symbolic extent: the code must be the same at every size,
    # including those where x's bounds happen to fit; ir/layout.register_tile)
    kept: bool = False

    def bounds(self):
        lo, hi = self.x.bounds()
        return max(min(lo, self.hi), self.lo), min(max(hi, self.lo), self.hi)


@_hash_once
@dataclass(frozen=True)
class DataIndex:
    """An index read from data (x[idx]): the value of the index array `source` at `at`, with a negative
    value counted from the end of an axis of `size` elements. The value is checked against the axis when
    the kernel runs (an IndexError otherwise) and clamped, so it always lies in [0, size - 1]. `axis`
    names the axis in that error; `tag` identifies `source` in printed expressions, stable across runs."""

    source: Node
    at: tuple[Expr, ...]
    size: int
    axis: int
    tag: str
    fault: object = None  # the error in place of the IndexError (faulting.check's: a kernel_ir.Fault)

    def bounds(self):
        return 0, max(self.size - 1, 0)

    def variables(self) -> set[Var]:
        return set().union(*(e.variables() for e in self.at))


Atom = Var | Div | Mod | Clamp | DataIndex


@_hash_once
@dataclass(frozen=True)
class Expr:
    """const + sum(coef * atom), terms sorted so that equal expressions compare equal."""

    terms: tuple[tuple[Atom, int], ...] = ()
    const: int = 0

    @staticmethod
    def of(x: Expr | Atom | int) -> Expr:
        if isinstance(x, Expr):
            return x
        if isinstance(x, int):
            return Expr((), x)
        return Expr(((x, 1),), 0)

    def bounds(self) -> tuple[int, int]:
        lo = hi = self.const
        for atom, c in self.terms:
            a, b = atom.bounds()
            lo, hi = (lo + c * a, hi + c * b) if c > 0 else (lo + c * b, hi + c * a)
        return lo, hi

    def is_const(self) -> bool:
        return not self.terms

    def __add__(self, other) -> Expr:
        # every Expr is normalised (_normalize's invariant, kept by * and by the remainders of // and %), so
        # adding a constant, or adding to one, only moves the constant
        if type(other) is int:
            return Expr(self.terms, self.const + other) if other else self
        other = Expr.of(other)
        if not other.terms:
            return Expr(self.terms, self.const + other.const)
        if not self.terms:
            return Expr(other.terms, other.const + self.const)
        coefs = dict(self.terms)
        for atom, c in other.terms:
            coefs[atom] = coefs.get(atom, 0) + c
        return _normalize(coefs, self.const + other.const)

    __radd__ = __add__

    def __mul__(self, k: int) -> Expr:
        assert isinstance(k, int)
        if k == 1:
            return self
        if k == 0:
            return Expr()
        return Expr(tuple((a, c * k) for a, c in self.terms), self.const * k)

    __rmul__ = __mul__

    def __sub__(self, other) -> Expr:
        return self + Expr.of(other) * -1

    def __floordiv__(self, d: int) -> Expr:
        if d == 1:
            return self
        # (q*d + r)*x // d is q*x + (r*x // d): only remainders of the coefficients stay under the division
        # (the diagonal x.reshape(-1)[::n + 1] reads row (n+1)*i // n, which is i)
        split = {a: _residue(c, d) for a, c in self.terms}
        q = _normalize({a: (c - split[a]) // d for a, c in self.terms}, self.const // d)
        rest = Expr(tuple((a, r) for a, r in split.items() if r != 0), self.const % d)
        lo, hi = rest.bounds()
        if lo // d == hi // d:
            return q + lo // d
        shift = -(lo // d) if lo < 0 else 0  # (the code divides non-negative values: C's / truncates)
        return q - shift + Expr.of(Div(rest + shift * d, d))

    def __mod__(self, d: int) -> Expr:
        if d == 1:
            return Expr()
        rest = Expr(tuple((a, r) for a, c in self.terms if (r := _residue(c, d)) != 0), self.const % d)
        lo, hi = rest.bounds()
        if 0 <= lo and hi < d:
            return rest
        if lo // d == hi // d:
            return rest - (lo // d) * d
        if lo < 0:  # (the code takes remainders of non-negative values: C's % keeps the sign)
            rest = rest + -(lo // d) * d
        return Expr.of(Mod(rest, d))

    def clamp(self, lo: int, hi: int) -> Expr:
        a, b = self.bounds()
        if lo <= a and b <= hi:
            return self
        return Expr.of(Clamp(self, lo, hi))

    def atoms(self):
        return [a for a, _ in self.terms]

    def variables(self) -> set[Var]:
        out = set()
        for atom, _ in self.terms:
            out |= _atom_variables(atom)
        return out

    def coefficient(self, var: Var) -> int | None:
        """The coefficient of var if the expression is affine in it, else None."""
        coef = 0
        for atom, c in self.terms:
            if atom == var:
                coef = c
            elif not isinstance(atom, Var) and var in _atom_variables(atom):
                return None
        return coef

    def substitute(self, mapping: dict[Var, Expr]) -> Expr:
        out = Expr((), self.const)
        for atom, c in self.terms:
            if isinstance(atom, Var):
                out = out + Expr.of(mapping.get(atom, atom)) * c
            elif isinstance(atom, DataIndex):
                at = tuple(e.substitute(mapping) for e in atom.at)
                out = out + Expr.of(DataIndex(atom.source, at, atom.size, atom.axis, atom.tag, atom.fault)) * c
            else:
                x = atom.x.substitute(mapping)
                if isinstance(atom, Div):
                    out = out + (x // atom.d) * c
                elif isinstance(atom, Mod):
                    out = out + (x % atom.d) * c
                elif atom.kept:
                    out = out + Expr.of(Clamp(x, atom.lo, atom.hi, True)) * c
                else:
                    out = out + x.clamp(atom.lo, atom.hi) * c
        return out

    def __str__(self) -> str:
        parts = [(_fmt_atom(a) if c == 1 else f"{c}*{_fmt_atom(a)}") for a, c in self.terms]
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts)


def _residue(c: int, d: int) -> int:
    """c's remainder modulo d of the least magnitude (-1 rather than d - 1): an index expression such as -i % d,
    a flip of a concatenation, stays as small as i instead of growing to i * (d - 1), which overflows the 32-bit
    indices of the GPU kernels past 2**31 (a flip of 65,537 elements read garbage there)."""
    r = c % d
    return r - d if r > d // 2 else r


def _atom_variables(atom: Atom) -> set[Var]:
    if isinstance(atom, Var):
        return {atom}
    if isinstance(atom, DataIndex):
        return atom.variables()
    return atom.x.variables()


def _fmt_atom(a: Atom) -> str:
    if isinstance(a, Var):
        return a.name
    if isinstance(a, DataIndex):
        return f"{a.tag}[{', '.join(map(str, a.at))}]"
    if isinstance(a, Div):
        return f"({a.x})//{a.d}"
    if isinstance(a, Mod):
        return f"({a.x})%{a.d}"
    return f"clamp({a.x}, {a.lo}, {a.hi})"


def _normalize(coefs: dict, const: int) -> Expr:
    coefs = {a: c for a, c in coefs.items() if c != 0}
    changed = any(type(a) is Mod for a in coefs)
    while changed:  # k*c*(x//c) + k*(x%c) == k*x
        changed = False
        for atom, k in list(coefs.items()):
            if isinstance(atom, Mod):
                div = Div(atom.x, atom.d)
                if coefs.get(div) == k * atom.d:
                    del coefs[atom], coefs[div]
                    for a, c in atom.x.terms:
                        coefs[a] = coefs.get(a, 0) + c * k
                    const += atom.x.const * k
                    coefs = {a: c for a, c in coefs.items() if c != 0}
                    changed = True
                    break
    return Expr(tuple(sorted(coefs.items(), key=lambda t: _sort_key(t[0]))), const)


def _sort_key(atom) -> str:
    d = atom.__dict__
    key = d.get("_key")
    if key is None:
        key = d["_key"] = f"{type(atom).__name__}:{_fmt_atom(atom)}"
    return key
