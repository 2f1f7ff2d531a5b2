"""What a kernel function's conditionals run when it is traced, as numpy/source_rewrite.py rewrote them: where
the test is read from arrays, both sides are computed and the test selects between them when the kernel runs;
where it is a Python value, Python decides while tracing, as before.
- `choose`: a conditional expression (`cost = 0 if a[i] == b[j] else 1`), its sides argument-less lambdas;
- `branches`: an `if`/`else` whose branches bind names (each name either binds is selected; PartlyBound where
  one branch leaves it unbound) or assign into arrays (each branch traced under its side of the test);
- `both`/`either`: `and`/`or` with Python's short circuit, the right side traced as running only where Python
  runs it;
- `pick`, `unless_stopped`, `neither`: a loop's `break` and `continue` flags;
- `construct`: `np.ndarray(shape, dtype)` as an allocation."""

from __future__ import annotations

import numpy as np

from tracejit.errors import ShapeError, TraceError
from tracejit.ir import build
from tracejit.ir.graph import Op
from tracejit.numpy import allocation
from tracejit.numpy.complex_values import ComplexTensor
from tracejit.numpy.early_returns import LOOP_RESULT
from tracejit.numpy.functions import select_numbers
from tracejit.numpy.tensor import Tensor, as_node, guarded, living, may_alias, python_value


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
    before = {id(t) for t in living()}
    a, b = _both_sides(test, yes, no)
    out = select(test, a, b, "the two sides of a conditional expression")
    if any(isinstance(v, Tensor) and id(v) in before for v in (a, b)):
        may_alias(out, _ALIAS.format(what="this value of a conditional expression", where="the test"))
    return out


def _both_sides(test: Tensor, yes, no):
    """yes() and no(), each traced as running only where the test says it runs (an index in the side Python
    does not take, `x[i] if i < n else 0`, may be outside its axis: it is not read)."""
    condition = as_node(test)
    condition = condition if condition.dtype == np.bool_ else build.cast(condition, np.dtype(np.bool_))
    with guarded(condition):
        a = yes()
    with guarded(build.unary(Op.INVERT, condition)):
        b = no()
    return a, b


def both(first, second):
    """`first() and second()` as Python computes it; where the first is a 0-d value read from arrays, the second
    is traced as running only where the first holds, and the result selected as `second if first else first`."""
    a = first()
    test = python_value(a, "an `and`'s operand") if isinstance(a, Tensor) else a
    if not isinstance(test, Tensor):
        return second() if test else a
    return choose(test, second, lambda: a)


def either(first, second):
    """`first() or second()`, as `both`: `first if first else second`."""
    a = first()
    test = python_value(a, "an `or`'s operand") if isinstance(a, Tensor) else a
    if not isinstance(test, Tensor):
        return a if test else second()
    return choose(test, lambda: a, second)


_ALIAS = (
    "{what} is one array or another depending on {where}, a value read from arrays; NumPy would assign into "
    "the array it is, which a compiled kernel cannot follow. Assign into a copy (`y = y.copy()`) or compute a "
    "new array instead of assigning into it"
)


def construct(cls, *args, **kwargs):
    """`cls(*args, **kwargs)`, where the code calls `np.ndarray(shape, dtype)` (an allocation, as some code
    writes np.empty) while a kernel is traced: a traced array to assign into, as np.empty makes."""
    if cls is np.ndarray and allocation.tracing() and len(args) <= 2 and set(kwargs) <= {"shape", "dtype", "order"}:
        from tracejit.numpy import creation

        shape = args[0] if args else kwargs["shape"]
        dtype = args[1] if len(args) > 1 else kwargs.get("dtype", float)
        return creation.empty(shape, dtype, kwargs.get("order") or "C")
    return cls(*args, **kwargs)


class _Undefined:
    def __repr__(self) -> str:
        return "<not yet bound>"


UNDEFINED = _Undefined()  # a name the `if` binds that had no value before it


def select(test: Tensor, a, b, what: str):
    """np.where(test, a, b) where NumPy's answer would be a or b itself: the same shape, and the same dtype (a
    Python number beside an array of a dtype it does not change is fine); else which shape or dtype the result
    has would depend on the data, which a compiled kernel cannot follow."""
    if isinstance(a, ComplexTensor) or isinstance(b, ComplexTensor):
        return _select_complex(test, a, b, what)
    shape_a, shape_b = np.shape(a), np.shape(b)
    # a Python number, or a 0-d value made from Python numbers alone (NEP 50's weak scalars: a loop's carried
    # `s = 0.0`), beside an array of a dtype it keeps: NumPy's arithmetic casts it to that dtype either way
    kinds = [type(v) in (bool, int, float) or isinstance(v, Tensor) and v.shape == () and v._node.weak for v in (a, b)]
    dtype_a, dtype_b = (None if weak else _dtype(v) for v, weak in zip((a, b), kinds))
    if all(kinds):
        same = type(_number(a)) is type(_number(b))
    elif any(kinds):
        array, number = (b, a) if kinds[0] else (a, b)
        same = np.result_type(_dtype(array), _number(number)) == _dtype(array)
    else:
        same = dtype_a == dtype_b
    if shape_a != shape_b or not same:
        raise ShapeError(
            f"{what} differ ({_describe(a)} and {_describe(b)}) where the test is read from arrays: "
            "the result's shape or dtype would depend on the data; they must match in shape and dtype "
            "(np.broadcast_to, .astype), or the test be a Python value"
        )
    return select_numbers(test, a, b)


def _select_complex(test: Tensor, a, b, what: str) -> ComplexTensor:
    """select() of complex values (`z` of Mandelbrot's loop before and after a step): each part selected, where
    both sides are complex of one dtype and shape."""
    if not all(isinstance(v, ComplexTensor) for v in (a, b)) or a.shape != b.shape or a.dtype != b.dtype:
        described = (f"{v.dtype}{list(v.shape)}" if isinstance(v, ComplexTensor) else _describe(v) for v in (a, b))
        raise ShapeError(
            f"{what} differ ({' and '.join(described)}) where the test is read from arrays: the result's dtype "
            "would depend on the data; they must match in shape and dtype, or the test be a Python value"
        )
    return ComplexTensor(select_numbers(test, a.re, b.re), select_numbers(test, a.im, b.im))


def _number(value):
    """A Python number of a weak value's kind (a weak 0-d Tensor's, or the number itself): what promotion sees."""
    if isinstance(value, Tensor):
        return {"b": False, "i": 0, "u": 0, "f": 0.0, "c": 0j}[value.dtype.kind]
    return value


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


def branches(test, then, orelse, before: tuple, names: tuple[str, ...], stored: tuple = ()) -> tuple:
    """The names an `if` binds, after it: then(*before) or orelse(*before) where Python decides, or where `test`
    is a 0-d value read from arrays, each name selected between both branches' values. Both branches are then
    traced, each guarded by its side of the test (tensor.guarded): what they assign into arrays (`stored`: the
    objects assigned into by subscript) changes only where their side holds."""
    if isinstance(test, Tensor):
        test = python_value(test, "an `if`'s test")
    if not isinstance(test, Tensor):
        return then(*before) if test else orelse(*before)
    if test.shape != ():
        raise ValueError(
            "The truth value of an array with more than one element is ambiguous (an `if`'s test must "
            "be a single value)"
        )
    for get in stored:  # a Python list or dict assigned into in a branch: both branches would change it
        try:
            target = get()
        except NameError:
            continue
        if not isinstance(target, (Tensor, ComplexTensor)):  # (a complex array's stores are its parts')
            bool(test)  # (the TraceError of an `if` on an array value)
    alive = {id(t) for t in living()}
    condition = as_node(test)
    condition = condition if condition.dtype == np.bool_ else build.cast(condition, np.dtype(np.bool_))
    with guarded(condition):
        yes = then(*before)
    with guarded(build.unary(Op.INVERT, condition)):
        no = orelse(*before)
    out = []
    for name, a, b in zip(names, yes, no):
        if a is b:  # neither branch changed it
            out.append(a)
            continue
        if name.startswith(LOOP_RESULT) and any(v is UNDEFINED for v in (a, b)):  # (read only after a return)
            out.append(b if a is UNDEFINED else a)
            continue
        if any(v is UNDEFINED or isinstance(v, PartlyBound) for v in (a, b)):  # an error where it is used, as
            out.append(PartlyBound(name))  # Python's would be (a name bound in one branch, an earlier step's too)
            continue
        chosen = select(test, a, b, f"`{name}` after the two branches of an `if`")
        if any(isinstance(v, Tensor) and id(v) in alive for v in (a, b)):  # an array from before the `if`
            may_alias(
                chosen,
                _ALIAS.format(what=f"`{name}` after the `if`", where="its test").replace(
                    "`y = y.copy()`", f"`{name} = {name}.copy()`"
                ),
            )
        out.append(chosen)
    return tuple(out)


def pick(stop, before, index):
    """A loop's last index that ran: `index` unless the loop has stopped (`stop`), where it is `before`."""
    if before is UNDEFINED:
        return index
    if isinstance(stop, Tensor):
        stop = python_value(stop, "a loop's break")
    if not isinstance(stop, Tensor):
        return before if stop else index
    index = as_node(index)  # (both Python ints: as the index's dtype)
    return Tensor(build.where(as_node(stop), build.cast(as_node(before), index.dtype, index.weak), index))


def unless_stopped(stop, test):
    """`test and not stop`, for a `while` with a break: a Python bool where both are known, else traced."""
    return _both(test, neither(stop))


def _both(a, b):
    values = [python_value(v, "a `while` test") if isinstance(v, Tensor) else v for v in (a, b)]
    if not any(isinstance(v, Tensor) for v in values):
        return bool(values[0]) and bool(values[1])
    nodes = []
    for v in values:
        node = as_node(v)
        if node.shape != ():
            raise ValueError("The truth value of an array with more than one element is ambiguous")
        nodes.append(node if node.dtype == np.bool_ else build.cast(node, np.dtype(np.bool_)))
    return Tensor(build.binary(Op.AND, nodes[0], nodes[1]))


def neither(*flags):
    """not any(flags): a Python bool where every flag is one, else the traced value of it."""
    values = [python_value(f, "a loop's break") if isinstance(f, Tensor) else f for f in flags]
    if not any(isinstance(v, Tensor) for v in values):
        return not any(values)
    out = None
    for v in values:
        node = as_node(v)
        node = node if node.dtype == np.bool_ else build.cast(node, np.dtype(np.bool_))
        out = node if out is None else build.binary(Op.OR, out, node)
    assert out is not None
    return Tensor(build.unary(Op.INVERT, out))
