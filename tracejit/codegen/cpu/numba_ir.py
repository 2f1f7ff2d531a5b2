"""Scalar functions for numba kernels written as Python arithmetic that emits LLVM IR (codegen/cpu/llvm_values.py),
made into Numba intrinsics.

Why not @numba.njit helpers: each one is a separate Numba compile (bytecode, typing, lowering, an LLVM
module optimised and turned into machine code) the first time a process's kernel calls it. Softmax's
compile spent about half its time compiling exp_f32 and the np.floor inside it. An intrinsic made here
costs a few hundred LLVM instructions in the kernel's own module, emitted once per module as an internal
function that LLVM inlines (alwaysinline; or as it judges, for the `called` variant) before it
vectorises the loop around it."""

from __future__ import annotations

from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from tracejit.codegen.cpu.llvm_values import F32, F64, I16, I32, I64, defined

_NUMBA = {F32: types.float32, F64: types.float64, I16: types.uint16, I32: types.int32, I64: types.int64}


def scalar_function(name: str, body, params: tuple[ir.Type, ...], result: ir.Type):
    """Two Numba intrinsics, `name` (inlined everywhere: LLVM's alwaysinline) and `name_called` (inlined
    where LLVM's inliner judges it pays: a kernel calling one function many times), whose code is
    body(*Values) for parameters of LLVM types `params`. Any Numba number or bool is accepted as an argument and
    converted first, as np.float32(x) would (an i16 parameter is a uint16)."""
    numba_params = [_NUMBA[t] for t in params]
    numba_result = _NUMBA[result]

    def make(inline: bool):
        symbol = f"tracejit.{name}" + ("" if inline else ".called")

        def codegen(context, builder, sig, args):
            args = [context.cast(builder, v, t, want) for v, t, want in zip(args, sig.args, numba_params)]
            fn = defined(builder.module, symbol, body, params, result, inline)
            return builder.call(fn, args)

        def typer(typingctx, *args):
            if len(args) == len(params) and all(isinstance(a, (types.Number, types.Boolean)) for a in args):
                return numba_result(*args), codegen
            return None

        # numba.extending.intrinsic reads the typer's arity from its signature
        arity = ", ".join(f"a{i}" for i in range(len(params)))
        scope = {"typer": typer}
        exec(f"def {name}(typingctx, {arity}):\n    return typer(typingctx, {arity})", scope)
        return intrinsic(scope[name])

    return make(True), make(False)
