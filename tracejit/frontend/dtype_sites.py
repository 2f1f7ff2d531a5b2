"""Where a value a device cannot hold comes from (issue 47 item 3): a device's DtypeError about a 64-bit value
(webgpu has no 64-bit types, metal no float64) names the argument that has the dtype, or the user's line that
makes the value. The function is traced again watching the creation of traced values (numpy/tensor.py's
`watching`): graph nodes are hash-consed, so the trace made again makes the very nodes of the failing graph, and
the first of that dtype made in the user's code stops it there."""

from __future__ import annotations

from tracejit.errors import DtypeError
from tracejit.ir.graph import Op, toposort
from tracejit.frontend.plan import loops_in
from tracejit.numpy.tensor import Made, watching


def with_site(kernel, error: DtypeError, args, sizes: tuple[int, ...]) -> DtypeError:
    """`error` with where its value comes from, when it is about a 64-bit dtype a device lacks; else as it is."""
    text = str(error)
    name = text.split(" ", 1)[0]
    if name not in ("float64", "int64", "uint64") or " is not supported on " not in text:
        return error
    try:
        traced = kernel._trace(args, count=False, sizes=sizes)
        given = sorted(
            n.arg
            for n in toposort(traced.outputs)
            if n.op is Op.INPUT and n.dtype == name and not n.weak and isinstance(n.arg, int) and n.arg < len(args)
        )
        if given:
            names = kernel._names
            which = names[given[0]] if given[0] < len(names) else f"argument {given[0]}"
            return DtypeError(f"{kernel.__name__}: its argument {which} is {name}; {text}")
        found = frozenset(
            n
            for graph in [traced.outputs] + [loop.outputs for loop in loops_in(traced.outputs)]
            for n in toposort(graph)
            if n.dtype == name and n.op not in (Op.INPUT, Op.CONST)
        )
        with watching(found):
            kernel._trace(args, count=False, sizes=sizes)
    except Made as made:
        return DtypeError(f"{made.site}: this line makes a {name} value; {text}")
    except Exception:  # noqa: BLE001 - (a diagnosis only: the device's own error stands)
        return error
    return error
