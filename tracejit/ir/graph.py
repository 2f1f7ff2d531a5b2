"""Graph IR: immutable, hash-consed tensor-level nodes with static shape and dtype, and their printer."""
from __future__ import annotations

import math
import weakref
from enum import Enum

import numpy as np


class Op(str, Enum):
    INPUT = "input"; CONST = "const"  # noqa: E702
    IOTA = "iota"   # leaf: element i of the result is its index along axis `arg` (arrays made in a kernel)
    TABLE = "table"  # leaf: a constant array embedded in the kernel (arg: a table.Table, C order)
    # unary
    NEG = "neg"; EXP = "exp"; EXP2 = "exp2"; LOG = "log"; LOG2 = "log2"; SQRT = "sqrt"  # noqa: E702
    SIN = "sin"; COS = "cos"; TAN = "tan"; TANH = "tanh"; ERF = "erf"; ABS = "abs"  # noqa: E702
    SIGN = "sign"; FLOOR = "floor"; CEIL = "ceil"; TRUNC = "trunc"; RINT = "rint"  # noqa: E702
    INVERT = "invert"; RECIP = "recip"; ISNAN = "isnan"; ISINF = "isinf"  # noqa: E702
    # binary
    ADD = "add"; SUB = "sub"; MUL = "mul"; DIV = "div"; IDIV = "idiv"; MOD = "mod"; POW = "pow"  # noqa: E702
    MAX = "max"; MIN = "min"; LT = "lt"; LE = "le"; EQ = "eq"; NE = "ne"  # noqa: E702
    AND = "and"; OR = "or"; XOR = "xor"  # noqa: E702
    WHERE = "where"; CAST = "cast"; REDUCE = "reduce"
    # movement: never materialised, they become index arithmetic
    RESHAPE = "reshape"; PERMUTE = "permute"; EXPAND = "expand"; SLICE = "slice"; PAD = "pad"  # noqa: E702

    def __repr__(self) -> str:
        return self.value


UNARY = frozenset({Op.NEG, Op.EXP, Op.EXP2, Op.LOG, Op.LOG2, Op.SQRT, Op.SIN, Op.COS, Op.TAN, Op.TANH,
                   Op.ERF, Op.ABS, Op.SIGN, Op.FLOOR, Op.CEIL, Op.TRUNC, Op.RINT, Op.INVERT, Op.RECIP,
                   Op.ISNAN, Op.ISINF})
BINARY = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.IDIV, Op.MOD, Op.POW, Op.MAX, Op.MIN,
                    Op.LT, Op.LE, Op.EQ, Op.NE, Op.AND, Op.OR, Op.XOR})
PREDICATES = frozenset({Op.LT, Op.LE, Op.EQ, Op.NE, Op.ISNAN, Op.ISINF})
ELEMENTWISE = UNARY | BINARY | {Op.WHERE, Op.CAST}
MOVEMENT = frozenset({Op.RESHAPE, Op.PERMUTE, Op.EXPAND, Op.SLICE, Op.PAD})
LEAVES = frozenset({Op.INPUT, Op.CONST, Op.IOTA, Op.TABLE})
REDUCE_OPS = ("sum", "prod", "max", "min")


class Node:
    """One graph node. Built only through `Node.make`, so equal nodes are the same object."""

    __slots__ = ("op", "dtype", "shape", "srcs", "arg", "weak", "__weakref__")
    _interned: "weakref.WeakValueDictionary[tuple, Node]" = weakref.WeakValueDictionary()

    op: Op
    dtype: np.dtype
    shape: tuple[int, ...]
    srcs: tuple["Node", ...]
    arg: object
    weak: bool  # a Python scalar (NEP 50 weak type) not yet combined with a typed value

    @classmethod
    def make(cls, op: Op, dtype, shape, srcs=(), arg=None, weak: bool = False) -> "Node":
        dtype = np.dtype(dtype)
        shape = tuple(int(s) for s in shape)
        key = (op, dtype.str, shape, tuple(srcs), _key_of(arg), weak)
        node = cls._interned.get(key)
        if node is None:
            node = object.__new__(cls)
            for name, value in zip(cls.__slots__, (op, dtype, shape, tuple(srcs), arg, weak)):
                object.__setattr__(node, name, value)
            cls._interned[key] = node
        return node

    def __setattr__(self, name, value):
        raise AttributeError("graph nodes are immutable")

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __repr__(self) -> str:
        return f"Node({self.op.value}, {self.dtype}, {self.shape})"


def _key_of(arg):
    # NaN constants compare unequal to themselves, and -0.0 equals 0.0: key them by their bit pattern.
    if isinstance(arg, float) and (arg != arg or arg == 0):
        return ("float bits", np.float64(arg).tobytes())
    return arg


def toposort(outputs) -> list[Node]:
    """Nodes reachable from outputs, each after its sources (iterative: graphs can be deep)."""
    order, seen = [], set()
    stack = [(n, False) for n in reversed(list(outputs))]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        stack.extend((s, False) for s in reversed(node.srcs) if id(s) not in seen)
    return order


def format_graph(outputs, title: str = "graph") -> str:
    """Canonical printed form: stable for equal graphs, so it can serve as a key."""
    order = toposort(outputs)
    names = {id(n): f"%{i}" for i, n in enumerate(order)}
    lines = [f"{title}:"]
    for n in order:
        srcs = ", ".join(names[id(s)] for s in n.srcs)
        arg = "" if n.arg is None else f" {_format_arg(n.arg)}"
        weak = " weak" if n.weak else ""
        shape = "x".join(map(str, n.shape)) or "scalar"
        call = f"({srcs})" if n.srcs else ""
        lines.append(f"  {names[id(n)]} = {n.op.value}{arg}{call} : {n.dtype.name}[{shape}]{weak}")
    lines.append("  return " + ", ".join(names[id(o)] for o in outputs))
    return "\n".join(lines)


def _format_arg(arg) -> str:
    if isinstance(arg, np.dtype):
        return arg.name
    return repr(arg).replace(" ", "")


def rewrite(outputs, fn) -> list[Node]:
    """Rebuild the graph bottom-up, passing each node (with rewritten sources) through fn."""
    new: dict[Node, Node] = {}
    for n in toposort(outputs):
        srcs = tuple(new[s] for s in n.srcs)
        m = n if srcs == n.srcs else Node.make(n.op, n.dtype, n.shape, srcs, n.arg, n.weak)
        new[n] = fn(m)
    return [new[o] for o in outputs]
