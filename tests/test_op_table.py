"""The op table (ir/ops.py) is the one list of elementwise ops: the IR, interpreter and frontend are built
from it, and every renderer renders every op for every dtype the op is defined on, or refuses it with a
DtypeError saying why (WGSL and Metal: no 64-bit floats; WGSL: no 64-bit integers). Rendering only: no
compiler runs here, so this covers all ops x dtypes x targets in about a second."""
from __future__ import annotations

import numpy as np
import pytest
from llvmlite import binding as llvm

import tracejit as tj
from tracejit.codegen.simt import cuda, metal, opencl, wgsl
from tracejit.codegen.cpu import numba as numba_codegen, native as numba_native
from tracejit.codegen.simt.mapping import RenderOptions
from tracejit.numpy import numpy_protocol
from tracejit.ir import interpret, kernel_ir
from tracejit.ir.graph import BINARY, PREDICATES, UNARY, Op
from tracejit.ir.kernel_ir import INDEX, Builder, KOp, KernelIR, Param
from tracejit.ir.ops import OPS

DTYPES = {"b": ["bool"], "i": ["int8", "int32", "int64"], "u": ["uint16", "uint32"],
          "f": ["float16", "float32", "float64"]}
N = 8


def _kernel(op, dtype) -> KernelIR:
    dt = np.dtype(dtype)
    srcs = [np.dtype(bool), dt, dt] if op.name == "where" else [dt] * op.arity
    out = np.dtype(bool) if op.predicate else dt
    params = [Param(f"in{i}", s, N, False) for i, s in enumerate(srcs)] + [Param("out0", out, N, True)]
    k = KernelIR(f"k_{op.name}_{dt.name}", params, global_size=N)
    b = Builder(k)
    ptrs = [b.emit(KOp.PARAM, p.dtype, (), i) for i, p in enumerate(params)]
    g = b.emit(KOp.GLOBAL, INDEX, (), N)
    vals = [b.emit(KOp.LOAD, s, (ptrs[i], g)) for i, s in enumerate(srcs)]
    b.emit(KOp.STORE, None, (ptrs[-1], g, b.emit(KOp(op.name), out, vals)))
    return k


def _no_64_bits(target: str, dt: np.dtype) -> bool:
    """Where the target states that it cannot represent dt (a DtypeError naming it is then expected)."""
    return target == "webgpu" and dt.itemsize == 8 or target == "metal" and dt == np.float64


RENDERERS = {
    "numba": lambda k: numba_codegen.render(k, "prange"),
    "opencl": lambda k: opencl.render(k, RenderOptions(device="opencl")),
    "opencl_cpu": lambda k: opencl.render(k, RenderOptions(device="opencl", own_math=True, wide_sums=True)),
    "cuda": lambda k: cuda.render(k, RenderOptions(device="cuda")),
    "metal": lambda k: metal.render(k),
    "webgpu": lambda k: wgsl.render(k, wgsl.WGSLOptions(f16=True)),
}
CASES = [(op, dt) for op in OPS for kind in op.kinds for dt in DTYPES[kind]]


@pytest.mark.parametrize("target", list(RENDERERS))
def test_every_renderer_renders_every_op_of_the_table(target):
    missing = []
    for op, dtype in CASES:
        k = _kernel(op, dtype)
        try:
            RENDERERS[target](k)
        except tj.DtypeError as e:
            if not (_no_64_bits(target, np.dtype(dtype)) and np.dtype(dtype).name in str(e)):
                missing.append(f"{op.name}[{dtype}]: {e}")
        except Exception as e:   # noqa: BLE001  (every failure is listed, not just the first)
            missing.append(f"{op.name}[{dtype}]: {type(e).__name__}: {e}")
    assert not missing, f"{target} does not render:\n" + "\n".join(missing)


def test_the_numba_native_renderer_renders_every_op_it_takes():
    """codegen/cpu/native.py takes a kernel only where it renders each of its ops in LLVM IR that parses
    (the others are Python for Numba, with the reason given)."""
    taken, failed = 0, []
    for op, dtype in CASES:
        k = _kernel(op, dtype)
        why = numba_native.unsupported(k, "serial")
        if why is not None:
            assert why, op.name
            continue
        taken += 1
        try:
            llvm.parse_assembly(numba_native.render(k, "serial")).verify()
        except Exception as e:   # noqa: BLE001  (every failure is listed, not just the first)
            failed.append(f"{op.name}[{dtype}]: {type(e).__name__}: {e}")
    assert not failed, "\n".join(failed)
    assert taken >= len(CASES) // 2, (taken, len(CASES))


def test_ir_interpreter_and_frontend_are_built_from_the_op_table():
    names = {op.name for op in OPS}
    assert {o.value for o in UNARY | BINARY} | {"where"} == names
    assert kernel_ir.ALU == names
    assert set(interpret.NUMPY_OPS) == names
    assert {o.value for o in PREDICATES} == {op.name for op in OPS if op.predicate}
    for op in OPS:
        assert Op(op.name).value == op.name
        if op.ufunc is not None:   # each NumPy ufunc in the table reaches tracejit through __array_ufunc__
            assert op.ufunc in numpy_protocol.UFUNCS, op.ufunc


def test_interpreter_computes_each_op_as_its_numpy_definition():
    """The interpreter runs the hand-built kernels; a row's NumPy definition is what it computes."""
    rng = np.random.default_rng(0)
    for op, dtype in CASES:
        if dtype == "float16":
            continue
        k = _kernel(op, dtype)
        ins = [p for p in k.params if not p.output]
        args = [(rng.random(N) < 0.5) if p.dtype == bool else
                rng.integers(0, 7, N).astype(p.dtype) if p.dtype.kind in "iu" else
                rng.uniform(0.1, 0.9, N).astype(p.dtype) for p in ins]
        out = np.zeros(N, k.params[-1].dtype)
        interpret.run(k, [*args, out])
        with np.errstate(all="ignore"):
            expected = np.asarray(op.numpy(*args)).astype(out.dtype)
        np.testing.assert_array_equal(out, expected, err_msg=f"{op.name}[{dtype}]")
