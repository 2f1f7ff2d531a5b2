"""Graph IR: immutable, hash-consed tensor-level nodes with static shape and dtype, and their printer."""

from __future__ import annotations

import math
import weakref
from enum import Enum
from typing import Any

import numpy as np

from tracejit.ir.ops import BINARY_NAMES, OPS, PREDICATE_NAMES, UNARY_NAMES


class Op(str, Enum):
    """Every graph op: the structural ones, then one per row of ops.OPS (Op.ADD is "add"), in the table's order.
    Written out because a type checker knows only the members a class body names (an Enum built from the table
    at run time had none for mypy); the check below the class keeps them equal to the table."""

    INPUT = "input"
    CONST = "const"
    IOTA = "iota"  # element i is its index along axis `arg` (arrays made in a kernel)
    TABLE = "table"  # a constant array embedded in the kernel (arg: a table.Table, C order)
    CAST = "cast"
    BITCAST = "bitcast"  # the same bits read as arg, a dtype of the same size (float32 <-> uint32: narrow_floats.py)
    REDUCE = "reduce"
    SCAN = "scan"  # running reduction along one axis (arg: (op, axis)): cumsum, ufunc.accumulate
    SORT = "sort"  # rows sorted along axis arg[0], NaN last, stable; arg[1] "values" or "indices" (int32)
    RESHAPE = "reshape"  # movement (reshape to pad): become index arithmetic
    PERMUTE = "permute"
    EXPAND = "expand"
    SLICE = "slice"
    PAD = "pad"
    GATHER = "gather"  # x[idx]: srcs (x, one index array per gathered axis), arg: see build.gather
    SCATTER = "scatter"  # srcs (target, positions, values), arg: combine op; see build.scatter
    LOOP = "loop"  # value k of a loop compiled as a loop: arg (numpy.loops.Loop, k); srcs: its bounds or first
    # test, the carried values' first values, the loop-invariant values the body reads (frontend/staged.py)
    HOST = "host"  # value k of a call run with NumPy on the host: arg (numpy.host_calls.HostCall, k); srcs: the
    # traced values it is passed (frontend/staged.py runs it between the compiled parts)
    SIZE = "size"  # a size that depends on the data (numpy/data_sizes.py): srcs (count, payload), arg (k, the count
    # the trace was made with or None, "file:line"); its value is the payload's once frontend/staged.py has read the
    # count back to the host and found it the one traced (a probe's SIZE has no payload: it only reads the count)
    # elementwise: ops.OPS
    NEG = "neg"
    ABS = "abs"
    SIGN = "sign"
    INVERT = "invert"
    RECIP = "recip"
    EXP = "exp"
    EXP2 = "exp2"
    EXPM1 = "expm1"
    LOG = "log"
    LOG2 = "log2"
    LOG10 = "log10"
    LOG1P = "log1p"
    SQRT = "sqrt"
    CBRT = "cbrt"
    SIN = "sin"
    COS = "cos"
    TAN = "tan"
    ARCSIN = "arcsin"
    ARCCOS = "arccos"
    ARCTAN = "arctan"
    SINH = "sinh"
    COSH = "cosh"
    TANH = "tanh"
    ARCSINH = "arcsinh"
    ARCCOSH = "arccosh"
    ARCTANH = "arctanh"
    ERF = "erf"
    FLOOR = "floor"
    CEIL = "ceil"
    TRUNC = "trunc"
    RINT = "rint"
    ISNAN = "isnan"
    ISINF = "isinf"
    SIGNBIT = "signbit"
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    IDIV = "idiv"
    MOD = "mod"
    FMOD = "fmod"
    POW = "pow"
    MAX = "max"
    MIN = "min"
    ARCTAN2 = "arctan2"
    HYPOT = "hypot"
    COPYSIGN = "copysign"
    LDEXP = "ldexp"
    LT = "lt"
    LE = "le"
    EQ = "eq"
    NE = "ne"
    AND = "and"
    OR = "or"
    XOR = "xor"
    SHL = "shl"
    SHR = "shr"
    WHERE = "where"

    def __repr__(self) -> str:
        return self.value


if [op.value for op in Op][-len(OPS) :] != [d.name for d in OPS]:
    raise ImportError("graph.Op's elementwise members must be ops.OPS's rows, in order: add the new row's op there")

UNARY = frozenset(Op(n) for n in UNARY_NAMES)
BINARY = frozenset(Op(n) for n in BINARY_NAMES)
PREDICATES = frozenset(Op(n) for n in PREDICATE_NAMES)
ELEMENTWISE = UNARY | BINARY | {Op.WHERE, Op.CAST, Op.BITCAST}
MOVEMENT = frozenset({Op.RESHAPE, Op.PERMUTE, Op.EXPAND, Op.SLICE, Op.PAD})
LEAVES = frozenset({Op.INPUT, Op.CONST, Op.IOTA, Op.TABLE})
REDUCE_OPS = ("sum", "prod", "max", "min")


class Node:
    """One graph node. Built only through `Node.make`, so equal nodes are the same object."""

    __slots__ = ("op", "dtype", "shape", "srcs", "arg", "weak", "__weakref__")
    _interned: weakref.WeakValueDictionary[tuple, Node] = weakref.WeakValueDictionary()

    op: Op
    dtype: np.dtype
    shape: tuple[int, ...]
    srcs: tuple[Node, ...]
    arg: Any  # what the op's row in Op says it holds: an axis, a tuple, a dtype, a Table, a constant
    weak: bool  # a Python scalar (NEP 50 weak type) not yet combined with a typed value

    @classmethod
    def make(cls, op: Op, dtype, shape, srcs=(), arg=None, weak: bool = False) -> Node:
        dtype = np.dtype(dtype)
        shape = tuple(int(s) for s in shape)
        key = (op, dtype.str if dtype.isbuiltin != 2 else dtype.name, shape, tuple(srcs), _key_of(arg), weak)
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
        arg = "" if n.arg is None else f" {format_arg(n.arg)}"
        weak = " weak" if n.weak else ""
        shape = "x".join(map(str, n.shape)) or "scalar"
        call = f"({srcs})" if n.srcs else ""
        lines.append(f"  {names[id(n)]} = {n.op.value}{arg}{call} : {n.dtype.name}[{shape}]{weak}")
    lines.append("  return " + ", ".join(names[id(o)] for o in outputs))
    return "\n".join(lines)


def format_arg(arg) -> str:
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


def replace(outputs, mapping: dict[Node, Node]) -> list[Node]:
    """The graph of `outputs` with each node of `mapping` replaced by its value (what only a replaced node
    reads is not visited)."""
    new: dict[Node, Node] = dict(mapping)
    stack = [(n, False) for n in reversed(list(outputs))]
    while stack:
        node, expanded = stack.pop()
        if node in new:
            continue
        if not expanded:
            stack.append((node, True))
            stack.extend((s, False) for s in reversed(node.srcs) if s not in new)
            continue
        srcs = tuple(new[s] for s in node.srcs)
        new[node] = node if srcs == node.srcs else Node.make(node.op, node.dtype, node.shape, srcs, node.arg, node.weak)
    return [new[o] for o in outputs]
