"""The call of a natively rendered kernel (codegen/cpu/native.py) from the one-line Python function Numba
compiles for it: a Numba intrinsic that links the kernel's LLVM IR into the function's code library and
calls it with the arrays' data pointers. Numba's disk cache then keeps the whole machine code as it keeps
any kernel's."""

from __future__ import annotations

import itertools
import uuid

from llvmlite import binding as llvm
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from tracejit.codegen.cpu.native import FUNCTION

_PROCESS = uuid.uuid4().hex[:16]
_COUNT = itertools.count()


def native(source: str, arity: int):
    """An intrinsic of `arity` arguments (the kernel's start and stop, sizes, arrays) calling the IR
    function of `source`."""

    def codegen(context, builder, sig, args):
        # a name no other compile in any process takes: Numba's cached machine code keeps its symbols
        name = f"tracejit.native.{_PROCESS}.{next(_COUNT)}"
        module = llvm.parse_assembly(source.replace(f'@"{FUNCTION}"', f'@"{name}"'))
        module.triple = llvm.get_process_triple()
        module.data_layout = str(context.codegen().target_data)
        context.active_code_library.add_llvm_module(module)
        values = [
            context.make_array(t)(context, builder, v).data if isinstance(t, types.Array) else v
            for t, v in zip(sig.args, args)
        ]
        callee = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [v.type for v in values]), name
        )
        builder.call(callee, values)
        return context.get_dummy_value()

    def typer(typingctx, *args):
        if len(args) == arity:
            return types.none(*args), codegen
        return None

    names = ", ".join(f"a{i}" for i in range(arity))  # numba.extending.intrinsic reads the typer's arity
    scope = {"typer": typer}
    exec(f"def tj_native(typingctx, {names}):\n    return typer(typingctx, {names})", scope)
    return intrinsic(scope["tj_native"])
