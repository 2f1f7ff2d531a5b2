"""The IR verifiers accept what tracejit builds and reject each kind of broken IR, naming the problem."""
import numpy as np
import pytest

import tracejit as tj
from tracejit.ir import build
from tracejit.ir.graph import Node, Op
from tracejit.ir.kernel_ir import INDEX, Instr, KOp, KernelIR, Param
from tracejit.ir.verify import verify_graph, verify_kernel

F32 = np.dtype("float32")


def test_graphs_and_kernels_built_by_tracejit_verify():
    x = np.ones((8, 16), np.float32)
    f = tj.kernel(lambda a: np.exp(a - a.max(axis=1, keepdims=True)).sum(axis=0) + a.T[::2].sum())
    verify_graph(f.trace(x).outputs)
    for k in f.lower(x).executable.program.kernels:
        verify_kernel(k)


@pytest.mark.parametrize("make, message", [
    (lambda a, b: Node.make(Op.ADD, F32, (4,), (a, build.input_(1, F32, (3,)))), "source shapes"),
    (lambda a, b: Node.make(Op.ADD, F32, (4,), (a, build.input_(1, "int32", (4,)))), "operand dtypes differ"),
    (lambda a, b: Node.make(Op.LT, F32, (4,), (a, b)), "result dtype should be bool"),
    (lambda a, b: Node.make(Op.REDUCE, F32, (4,), (a,), ("sum", (0,))), r"shape should be \(1,\)"),
    (lambda a, b: Node.make(Op.REDUCE, F32, (1,), (a,), ("mean", (0,))), "bad reduction"),
    (lambda a, b: Node.make(Op.RESHAPE, F32, (5,), (a,), (5,)), "element count"),
    (lambda a, b: Node.make(Op.SLICE, F32, (3,), (a,), ((2, 1, 3),)), "out of bounds"),
    (lambda a, b: Node.make(Op.EXPAND, F32, (4, 2), (a,), (4, 2)), "cannot expand"),
    (lambda a, b: Node.make(Op.WHERE, F32, (4,), (a, a, b)), "condition is not bool"),
])
def test_graph_verifier_rejects_broken_nodes(make, message):
    a, b = build.input_(0, F32, (4,)), build.input_(2, F32, (4,))
    with pytest.raises(tj.InternalError, match=message):
        verify_graph([make(a, b)])


def _kernel(*instrs, params=(Param("out0", F32, 4, True), Param("in0", F32, 4, False))):
    return KernelIR("k", list(params), list(instrs), 4)


def test_kernel_verifier_rejects_use_before_definition():
    k = _kernel(Instr(KOp.PARAM, F32, (), 0), Instr(KOp.LOAD, F32, (0, 3)), Instr(KOp.GLOBAL, INDEX, (), 4),
                Instr(KOp.CONST, INDEX, (), 0))
    with pytest.raises(tj.InternalError, match="before it is defined"):
        verify_kernel(k)


def test_kernel_verifier_rejects_unclosed_and_misnested_ranges():
    with pytest.raises(tj.InternalError, match="never closed"):
        verify_kernel(_kernel(Instr(KOp.RANGE, INDEX, (), (4, "loop"))))
    with pytest.raises(tj.InternalError, match="not the innermost"):
        verify_kernel(_kernel(Instr(KOp.RANGE, INDEX, (), (4, "loop")), Instr(KOp.RANGE, INDEX, (), (4, "loop")),
                              Instr(KOp.ENDRANGE, None, (0,)), Instr(KOp.ENDRANGE, None, (1,))))


def test_kernel_verifier_rejects_stores_to_inputs_and_mixed_dtypes():
    base = [Instr(KOp.PARAM, F32, (), 0), Instr(KOp.PARAM, F32, (), 1), Instr(KOp.GLOBAL, INDEX, (), 4),
            Instr(KOp.LOAD, F32, (1, 2))]
    with pytest.raises(tj.InternalError, match="stores to an input"):
        verify_kernel(_kernel(*base, Instr(KOp.STORE, None, (1, 2, 3))))
    with pytest.raises(tj.InternalError, match="operand dtypes differ"):
        verify_kernel(_kernel(*base, Instr(KOp.ADD, F32, (3, 2))))


def test_verifiers_reject_a_scatter_or_atomic_update_that_does_not_fit():
    target, positions = build.input_(0, F32, (4, 2)), build.input_(1, "int32", (6,))
    with pytest.raises(tj.InternalError, match="do not fit the target"):
        verify_graph([Node.make(Op.SCATTER, F32, (4, 2), (target, positions, build.input_(2, F32, (6, 3))), "sum")])
    with pytest.raises(tj.InternalError, match="combine op"):
        verify_graph([Node.make(Op.SCATTER, F32, (4, 2), (target, positions, build.input_(2, F32, (6, 2))), "mean")])
    base = [Instr(KOp.PARAM, F32, (), 0), Instr(KOp.PARAM, F32, (), 1), Instr(KOp.GLOBAL, INDEX, (), 4),
            Instr(KOp.LOAD, F32, (1, 2))]
    verify_kernel(_kernel(*base, Instr(KOp.ATOMIC, None, (0, 2, 3), "max")))
    with pytest.raises(tj.InternalError, match="needs an output param"):
        verify_kernel(_kernel(*base, Instr(KOp.ATOMIC, None, (1, 2, 3), "sum")))
    with pytest.raises(tj.InternalError, match="combines"):
        verify_kernel(_kernel(*base, Instr(KOp.ATOMIC, None, (0, 2, 3), "mean")))


def test_verifiers_reject_stores_to_tables_and_tables_that_disagree_with_their_node():
    from tracejit.ir.table import Table
    table = Table.of(np.arange(4, dtype=np.float32))
    base = [Instr(KOp.PARAM, F32, (), 0), Instr(KOp.TABLE, F32, (), table), Instr(KOp.GLOBAL, INDEX, (), 4),
            Instr(KOp.LOAD, F32, (1, 2))]
    verify_kernel(_kernel(*base, Instr(KOp.STORE, None, (0, 2, 3))))
    with pytest.raises(tj.InternalError, match="constant table"):
        verify_kernel(_kernel(*base, Instr(KOp.STORE, None, (1, 2, 3))))
    with pytest.raises(tj.InternalError, match="bad table"):
        verify_kernel(_kernel(Instr(KOp.TABLE, np.dtype("int32"), (), table)))
    with pytest.raises(tj.InternalError, match="table's content"):
        verify_graph([Node.make(Op.TABLE, F32, (5,), (), table)])
