"""Natively rendered numba-device kernels (codegen/cpu/native.py) made into machine code by LLVM through
llvmlite, without Numba: their first call in a fresh process costs no `import numba` (~0.2 s) and no Numba
registries, compiler passes or CPython wrapper (softmax 4096x1024: ~0.38 -> ~0.13 s after `import tracejit`).

Each kernel's object code is LLVM's optimisation (the pipeline Numba runs: O3 with loop vectorisation, no
SLP) and machine code for this CPU of its IR plus a small CPython entry point, written in IR here: a
METH_FASTCALL function taking the Python function's arguments (the global size or a chunk's bounds, the
sizes, the flat arrays), reading each array's data pointer from NumPy's array struct, and calling the
kernel with the GIL released, as Numba's `nogil` entry points do. The object code is what the disk cache
keeps (CACHE, checksummed like every entry); a process maps it with tracejit's own loader (object_loader.py,
no LLVM loaded), or where that refuses it loads it into one MCJIT engine, and makes the entry point a builtin
function (PyCFunction_NewEx), so a call costs what a call of Numba's compiled entry point costs.

A kernel looped in parallel over its global index has an entry point that runs even parts of the range on
GNU OpenMP's threads (GOMP_parallel; see openmp), where Numba would have compiled a `prange` loop.

An array the entry point cannot take as it is (not an ndarray, not C-contiguous and aligned) raises
TypeError; `fallback` calls it with contiguous copies instead and copies written results back.
"""

from __future__ import annotations

import ctypes
import functools
import sys
import threading
import warnings

import numpy as np

from tracejit.runtime.debug import log
from tracejit.runtime.numba import object_loader

_lock = threading.RLock()  # llvmlite's objects are not safe to share between threads
_entries: dict[str, object] = {}  # symbol -> the builtin function calling it: an object loads once per process
_method_defs: list = []  # PyMethodDef structs must outlive their functions: kept for the process's life

METH_FASTCALL = 0x0080
# NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED: what the kernel's loads and stores assume of every array
NEEDED_FLAGS = 0x0001 | 0x0100


class Unavailable(RuntimeError):
    """This interpreter's object layout could not be read: kernels compile through Numba instead."""


@functools.cache
def layout() -> tuple[int, int, int]:
    """Byte offsets, in this interpreter and NumPy, of an object's type pointer and of an ndarray's data
    pointer and flags, found by reading real arrays (a free-threaded CPython's object header is larger).
    The flags follow the data pointer, nd, dimensions, strides, base and descr (NumPy's
    PyArrayObject_fields, unchanged since NumPy 1.7)."""
    arrays = [np.empty(3, np.float32), np.arange(8.0)[::2], np.ones((2, 2), np.int8).T]

    def word(obj, offset: int) -> int:
        return ctypes.c_void_p.from_address(id(obj) + offset).value or 0

    def int32(obj, offset: int) -> int:
        return ctypes.c_int32.from_address(id(obj) + offset).value

    type_at = [k for k in range(0, 64, 8) if all(word(a, k) == id(np.ndarray) for a in arrays)]
    data_at = [k for k in range(8, 96, 8) if all(word(a, k) == a.ctypes.data for a in arrays)]
    if len(type_at) != 1 or len(data_at) != 1 or not all(int32(a, data_at[0] + 48) == a.flags.num for a in arrays):
        raise Unavailable("the layout of NumPy's array objects in this interpreter is not the one expected")
    return type_at[0], data_at[0], data_at[0] + 48


@functools.cache
def _machine():
    """LLVM's target machine for this CPU (as Numba's JIT makes it) and the process's MCJIT engine."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    machine = target.create_target_machine(
        cpu=llvm.get_host_cpu_name(),
        features=llvm.get_host_cpu_features().flatten(),
        opt=3,
        reloc="static",
        codemodel="jitdefault",
        jit=True,
    )
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), machine)
    # the objects the entry points use, by names of tracejit's own: Numba gives the C names of the
    # exception variables (PyExc_TypeError, a PyObject *) the objects' own addresses once it is imported
    llvm.add_symbol("tracejit.None", id(None))
    llvm.add_symbol("tracejit.TypeError", id(TypeError))
    return machine, engine


def _mcjit():
    """The MCJIT engine, told of libgomp and tracejit.omp_threads once OpenMP is loaded (openmp)."""
    import llvmlite.binding as llvm

    _, engine = _machine()
    if _gomp and not _gomp_told_llvm:
        llvm.load_library_permanently(_gomp[0]._name)
        llvm.add_symbol("tracejit.omp_threads", ctypes.addressof(_omp_threads))
        _gomp_told_llvm.append(True)
    return engine


# The threads a parallel kernel's entry point asks OpenMP for; 0 in a forked child (libgomp's pool does not
# survive fork: its first parallel region there can hang), where such kernels run serially instead.
_omp_threads = ctypes.c_int32(0)
_gomp: list[ctypes.CDLL] = []  # libgomp, once loaded (openmp)
_gomp_told_llvm: list[bool] = []  # whether MCJIT's engine knows it (_mcjit)


@functools.cache
def openmp() -> bool:
    """Whether GNU OpenMP (libgomp, which Numba's OpenMP layer and MKL's GNU layer use too) is loaded for
    the entry points of parallel kernels: their global range in even parts on its threads (GOMP_parallel),
    which spin briefly between regions as Numba's `prange` loops' do. Loaded on first use, after the numba
    device has set GOMP_SPINCOUNT where MKL will share it (blas.settle_openmp)."""
    import os

    from tracejit.runtime.numba.blas import system_library
    from tracejit.runtime.numba.threads import limit_pools, thread_count

    path = system_library("gomp")
    if path is None:
        return False
    try:  # (as LLVM's load_library_permanently: its symbols visible to every library loaded after it)
        _gomp.append(ctypes.CDLL(path, mode=os.RTLD_LAZY | os.RTLD_GLOBAL))
    except OSError:
        return False
    _omp_threads.value = thread_count()
    limit_pools()  # tj.set_num_threads(n) before libgomp loaded (MKL's products may run on it)
    os.register_at_fork(after_in_child=lambda: setattr(_omp_threads, "value", 0))
    return True


def set_omp_threads(n: int) -> None:
    """tj.set_num_threads(n): the threads parallel entry points ask OpenMP for from now on (0, a forked
    child's, stays: serial; before OpenMP is loaded, `openmp` reads the number then)."""
    if _omp_threads.value:
        _omp_threads.value = n


def versions() -> str:
    """What the object code depends on besides the IR and the CPU: for the cache key. llvmlite's version, read
    without loading its LLVM, names LLVM's (each llvmlite release builds with one LLVM release)."""
    from tracejit.runtime.numba.cache import installed_version

    return f"llvmlite {installed_version('llvmlite')} python {sys.version.split()[0]} numpy-layout {layout()}"


def compile_object(ir_text: str, function: str, symbol: str, serial: bool, parallel: bool = False) -> bytes:
    """Object code of the kernel IR `ir_text` (its function `function` renamed `symbol`) and of its entry
    point `symbol`.call, whose arguments are the one-line Python function's (codegen/cpu/numba.py
    _native_module): the global size (serial: the kernel runs over [0, size); parallel: over parts of it on
    OpenMP's threads, see openmp) or a chunk's start and stop, then the sizes and the arrays."""
    import llvmlite.binding as llvm

    machine, _ = _machine()
    if parallel and not openmp():
        raise RuntimeError("no OpenMP runtime (libgomp) to run a parallel kernel on")
    with _lock:
        module = llvm.parse_assembly(ir_text.replace(f'@"{function}"', f'@"{symbol}"'))
        kinds = [str(a.type) for a in module.get_function(symbol).arguments]
        module.link_in(llvm.parse_assembly(_entry_ir(symbol, kinds[2:], serial or parallel, parallel)))
        module.triple = llvm.get_process_triple()
        module.data_layout = str(machine.target_data)
        module.verify()
        _optimize(module, machine)
        return machine.emit_object(module)


def _optimize(module, machine) -> None:
    """Numba's pipeline for its CPU code: function passes, then module passes, at O3 with loop
    vectorisation and without SLP vectorisation (which Numba leaves off: numba#8705)."""
    import llvmlite.binding as llvm

    def builder():
        options = llvm.create_pipeline_tuning_options()
        options.speed_level, options.loop_vectorization, options.slp_vectorization = 3, True, False
        return llvm.create_pass_builder(machine, options)

    functions = builder()
    passes = functions.getFunctionPassManager()
    for fn in module.functions:
        if not fn.is_declaration:
            passes.run(fn, functions)
    modules = builder()
    modules.getModulePassManager().run(module, modules)


class BadObject(ValueError):
    """A payload that is not whole object code of this machine: LLVM would crash on it, not refuse it."""


def check_object(obj: bytes) -> None:
    """BadObject unless `obj` is a relocatable ELF object of this machine's class and byte order whose
    section table and sections lie within it (llvmlite hands whatever it is given to LLVM, which reads
    a damaged or foreign file out of bounds)."""
    import struct

    if len(obj) < 64 or obj[:4] != b"\x7fELF":
        raise BadObject("is not an ELF object file")
    width, order = obj[4], obj[5]
    if width != (2 if sys.maxsize > 2**32 else 1) or order != (1 if sys.byteorder == "little" else 2) or width != 2:
        raise BadObject("is an object file of another kind of machine")
    end = "<" if order == 1 else ">"
    e_type, machine = struct.unpack_from(end + "HH", obj, 16)
    if e_type != 1 or machine != _machine_code():
        raise BadObject("is not relocatable object code for this CPU")
    (shoff,) = struct.unpack_from(end + "Q", obj, 40)
    shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", obj, 58)
    if shentsize != 64 or not 0 < shnum < 1 << 16 or shstrndx >= shnum or shoff + shnum * 64 > len(obj):
        raise BadObject("has a section table outside the file")
    for i in range(shnum):
        (kind,) = struct.unpack_from(end + "I", obj, shoff + 64 * i + 4)
        offset, size = struct.unpack_from(end + "QQ", obj, shoff + 64 * i + 24)
        if kind != 8 and offset + size > len(obj):  # (SHT_NOBITS takes no bytes of the file)
            raise BadObject("has a section outside the file")


# ELF's e_machine of a 64-bit process's object code, by the machine os.uname() names
MACHINE_CODES = {"x86_64": 62, "aarch64": 183, "arm64": 183}


@functools.cache
def _machine_code() -> int:
    """ELF's e_machine of the object code LLVM makes here (known, or read from a tiny object of its own)."""
    import os
    import struct

    if sys.maxsize > 2**32 and os.uname().machine in MACHINE_CODES:
        return MACHINE_CODES[os.uname().machine]

    import llvmlite.binding as llvm

    machine, _ = _machine()
    with _lock:
        obj = machine.emit_object(llvm.parse_assembly("define void @f() { ret void }"))
    return struct.unpack_from("<H" if obj[5] == 1 else ">H", obj, 18)[0]


def load(obj: bytes, symbol: str, name: str):
    """The entry point of `symbol` in object code `obj`, as a Python function named `name`; an object loads
    once per process, by tracejit's own loader (object_loader.py: no LLVM loaded) where it takes the object,
    else by LLVM's MCJIT. BadObject where `obj` is not object code (check_object)."""
    with _lock:
        fn = _entries.get(symbol)
        if fn is not None:
            return fn
        check_object(obj)
        try:
            ndarray, entry = load_mapped(obj, symbol)
        except object_loader.Unsupported as e:
            _refused(name, str(e))
            ndarray, entry = load_mcjit(obj, symbol)
        if not ndarray or not entry:
            raise RuntimeError(f"kernel {name}'s object code lacks its entry point")
        ctypes.c_void_p.from_address(ndarray).value = id(np.ndarray)
        fn = _entries[symbol] = _builtin(entry, name)
        return fn


def load_mapped(obj: bytes, symbol: str) -> tuple[int, int]:
    """The addresses of `symbol`.ndarray and `symbol`.call in `obj` loaded by object_loader (Unsupported where
    it does not take it)."""
    symbols = {"tracejit.None": id(None), "tracejit.TypeError": id(TypeError)}
    if _gomp:
        symbols["tracejit.omp_threads"] = ctypes.addressof(_omp_threads)
    names = [f"{symbol}.ndarray", f"{symbol}.call"]
    found = object_loader.load(obj, symbols, _gomp, names)
    return found[names[0]], found[names[1]]


def load_mcjit(obj: bytes, symbol: str) -> tuple[int, int]:
    """The addresses of `symbol`.ndarray and `symbol`.call in `obj` loaded into LLVM's MCJIT engine."""
    import llvmlite.binding as llvm

    engine = _mcjit()
    engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    return engine.get_global_value_address(f"{symbol}.ndarray"), engine.get_function_address(f"{symbol}.call")


def _refused(name: str, why: str) -> None:
    """object_loader's refusal: expected where it serves no such machine (logged), loud where it does (a
    warning, once per reason): LLVM then loads the object, at ~25 ms more for the first kernel."""
    message = f"kernel {name}'s object code was loaded by LLVM: tracejit's loader refused it, as {why}"
    if not object_loader.supported_here():
        log(1, message)
    elif why not in _refusals:
        _refusals.add(why)
        warnings.warn(f"tracejit: {message}. This is a tracejit bug: please report it.", RuntimeWarning, stacklevel=4)


_refusals: set[str] = set()


class _MethodDef(ctypes.Structure):
    _fields_ = [
        ("ml_name", ctypes.c_char_p),
        ("ml_meth", ctypes.c_void_p),
        ("ml_flags", ctypes.c_int),
        ("ml_doc", ctypes.c_char_p),
    ]


def _builtin(address: int, name: str):
    method = _MethodDef(name.encode(), address, METH_FASTCALL, None)
    _method_defs.append(method)
    new = ctypes.pythonapi.PyCFunction_NewEx
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    return new(ctypes.addressof(method), None, None)


def fallback(fn):
    """`fn` for arrays its entry point refuses (views that are not C-contiguous or not aligned): called with
    contiguous copies, the copies of writable arrays copied back after (the kernel's results)."""

    def call(*args):
        fixed = [np.require(a, requirements="CA") if isinstance(a, np.ndarray) else a for a in args]
        fn(*fixed)
        for given, used in zip(args, fixed):
            if used is not given and given.flags.writeable:
                np.copyto(given, used)

    return call


def _entry_ir(symbol: str, kinds: list[str], serial: bool, parallel: bool = False) -> str:
    """LLVM IR of `symbol`.call(self, args, nargs), METH_FASTCALL, calling the kernel `symbol` whose
    arguments after its start and stop are of `kinds` (LLVM's type names); `parallel`: over even parts of
    [0, size) on OpenMP's threads (`symbol`.omp, one part per thread)."""
    from llvmlite import ir

    type_at, data_at, flags_at = layout()
    i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
    obj = i8.as_pointer()
    scalar = {
        "i64": i64,
        "i32": i32,
        "i16": ir.IntType(16),
        "i8": i8,
        "i1": ir.IntType(1),
        "double": ir.DoubleType(),
        "float": ir.FloatType(),
    }
    module = ir.Module("tracejit.entry")
    kernel = ir.Function(
        module, ir.FunctionType(ir.VoidType(), [i64, i64] + [obj if k == "ptr" else scalar[k] for k in kinds]), symbol
    )

    def extern(name, result, *args):
        return ir.Function(module, ir.FunctionType(result, list(args)), name)

    as_int, as_float = extern("PyLong_AsLongLong", i64, obj), extern("PyFloat_AsDouble", ir.DoubleType(), obj)
    occurred, subtype = extern("PyErr_Occurred", obj), extern("PyType_IsSubtype", i32, obj, obj)
    set_string = extern("PyErr_SetString", ir.VoidType(), obj, obj)
    save, restore = extern("PyEval_SaveThread", obj), extern("PyEval_RestoreThread", ir.VoidType(), obj)
    incref = extern("Py_IncRef", ir.VoidType(), obj)
    type_error = ir.GlobalVariable(module, i8, "tracejit.TypeError")  # the objects themselves (_machine)
    none = ir.GlobalVariable(module, i8, "tracejit.None")
    ndarray = ir.GlobalVariable(module, obj, f"{symbol}.ndarray")  # set to np.ndarray when loaded
    ndarray.initializer = ir.Constant(obj, None)

    def text(name: str, value: str):
        data = bytearray(value.encode() + b"\0")
        g = ir.GlobalVariable(module, ir.ArrayType(i8, len(data)), f"{symbol}.{name}")
        g.initializer, g.global_constant, g.linkage = ir.Constant(ir.ArrayType(i8, len(data)), data), True, "private"
        return g

    lead = 1 if serial else 2
    n = lead + len(kinds)
    wrong_count = text("count", f"a tracejit kernel takes {n} arguments")
    wrong_array = text("array", "a tracejit kernel takes C-contiguous, aligned NumPy arrays")

    fn = ir.Function(module, ir.FunctionType(obj, [obj, obj.as_pointer(), i64]), f"{symbol}.call")
    _, args, nargs = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    fail = fn.append_basic_block("fail")
    refuse_array = fn.append_basic_block("refuse_array")
    refuse_count = fn.append_basic_block("refuse_count")
    with b.goto_block(fail):
        b.ret(ir.Constant(obj, None))
    for block, message in ((refuse_array, wrong_array), (refuse_count, wrong_count)):
        with b.goto_block(block):
            b.call(set_string, [b.bitcast(type_error, obj), b.bitcast(message, obj)])
            b.branch(fail)
    counted = fn.append_basic_block("counted")
    b.cbranch(b.icmp_signed("==", nargs, ir.Constant(i64, n)), counted, refuse_count)
    b.position_at_end(counted)

    def at(value, offset: int, kind):
        return b.load(b.bitcast(b.gep(value, [ir.Constant(i64, offset)]), kind.as_pointer()))

    values = []
    for k, kind in enumerate(["i64"] * lead + kinds):
        arg = b.load(b.gep(args, [ir.Constant(i64, k)]))
        if kind == "ptr":
            of_type = at(arg, type_at, obj)
            exact, checked, taken = (fn.append_basic_block(f"a{k}.{s}") for s in ("subtype", "flags", "data"))
            expected = b.load(ndarray)
            b.cbranch(b.icmp_unsigned("==", of_type, expected), checked, exact)
            with b.goto_block(exact):
                b.cbranch(
                    b.icmp_signed("!=", b.call(subtype, [of_type, expected]), ir.Constant(i32, 0)),
                    checked,
                    refuse_array,
                )
            b.position_at_end(checked)
            flags = b.and_(at(arg, flags_at, i32), ir.Constant(i32, NEEDED_FLAGS))
            b.cbranch(b.icmp_unsigned("==", flags, ir.Constant(i32, NEEDED_FLAGS)), taken, refuse_array)
            b.position_at_end(taken)
            values.append(at(arg, data_at, obj))
            continue
        floating = kind in ("double", "float")
        value = b.call(as_float if floating else as_int, [arg])
        maybe = (
            b.fcmp_ordered("==", value, ir.Constant(ir.DoubleType(), -1.0))
            if floating
            else b.icmp_signed("==", value, ir.Constant(i64, -1))
        )
        check, good = fn.append_basic_block(f"a{k}.error"), fn.append_basic_block(f"a{k}.value")
        b.cbranch(maybe, check, good)
        with b.goto_block(check):
            b.cbranch(b.icmp_unsigned("==", b.call(occurred, []), ir.Constant(obj, None)), good, fail)
        b.position_at_end(good)
        if kind == "float":
            value = b.fptrunc(value, ir.FloatType())
        elif kind != "i64" and not floating:
            value = b.trunc(value, scalar[kind])
        values.append(value)
    if serial:
        values.insert(0, ir.Constant(i64, 0))
    state = b.call(save, [])
    if parallel:
        _parallel_call(module, b, kernel, values, symbol)
    else:
        b.call(kernel, values)
    b.call(restore, [state])
    result = b.bitcast(none, obj)
    b.call(incref, [result])
    b.ret(result)
    return str(module)


def _parallel_call(module, b, kernel, values: list, symbol: str) -> None:
    """kernel(0, size, *rest) as GOMP_parallel running `symbol`.omp on OpenMP's threads, each calling the
    kernel over its part of [0, size); serially where tracejit.omp_threads is 1 or less (a forked child)."""
    from llvmlite import ir

    i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
    size, rest = values[1], values[2:]
    data_type = ir.LiteralStructType([i64] + [v.type for v in rest])
    threads = ir.GlobalVariable(module, i32, "tracejit.omp_threads")  # llvm_jit._omp_threads
    outlined = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8.as_pointer()]), f"{symbol}.omp")
    outlined.linkage = "internal"
    ob = ir.IRBuilder(outlined.append_basic_block("entry"))
    data = ob.bitcast(outlined.args[0], data_type.as_pointer())
    fields = [ob.load(ob.gep(data, [ir.Constant(i32, 0), ir.Constant(i32, k)])) for k in range(1 + len(rest))]
    thread = ob.sext(ob.call(ir.Function(module, ir.FunctionType(i32, []), "omp_get_thread_num"), []), i64)
    count = ob.sext(ob.call(ir.Function(module, ir.FunctionType(i32, []), "omp_get_num_threads"), []), i64)
    start = ob.sdiv(ob.mul(fields[0], thread), count)
    stop = ob.sdiv(ob.mul(fields[0], ob.add(thread, ir.Constant(i64, 1))), count)
    ob.call(kernel, [start, stop, *fields[1:]])
    ob.ret_void()

    gomp = ir.Function(
        module, ir.FunctionType(ir.VoidType(), [outlined.type, i8.as_pointer(), i32, i32]), "GOMP_parallel"
    )
    n = b.load(threads)
    fn = b.function
    alone, spread, joined = (fn.append_basic_block(f"omp.{s}") for s in ("alone", "spread", "joined"))
    b.cbranch(b.icmp_signed(">", n, ir.Constant(i32, 1)), spread, alone)
    with b.goto_block(alone):
        b.call(kernel, values)
        b.branch(joined)
    b.position_at_end(spread)
    slot = b.alloca(data_type)
    for k, v in enumerate([size, *rest]):
        b.store(v, b.gep(slot, [ir.Constant(i32, 0), ir.Constant(i32, k)]))
    b.call(gomp, [outlined, b.bitcast(slot, i8.as_pointer()), n, ir.Constant(i32, 0)])
    b.branch(joined)
    b.position_at_end(joined)
