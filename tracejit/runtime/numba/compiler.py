"""The numba device's compiles: Numba's (under a time limit, its stages timed for TRACEJIT_DEBUG=1, Python's
cycle collector paused) and LLVM's directly (runtime/numba/llvm_jit.py), with the errors they raise."""
from __future__ import annotations

import contextlib
import contextvars
import gc
import os
import threading
import warnings

from tracejit.codegen.cpu.native import FUNCTION
from tracejit.errors import CompileError, CompileTimeoutError
from tracejit.runtime.numba import llvm_jit
from tracejit.runtime.debug import current_times, log, stage
from tracejit.runtime.numba.cache import first_lines

COMPILE_TIMEOUT = 120.0   # seconds one numba compile may take (TRACEJIT_COMPILE_TIMEOUT; 0: no limit)


def try_compile(fn, signature, name: str, path: str):
    """(entry point, None), or (None, the exception) where Numba failed; a timeout is raised as it is."""
    try:
        with _collector_paused():
            return _compile_guarded(fn, signature, name, path), None
    except CompileTimeoutError:
        raise
    except Exception as e:   # noqa: BLE001 - the caller decides: damaged cache files, or a compile error
        return None, e


@contextlib.contextmanager
def _collector_paused():
    """Python's cycle collector off while Numba compiles: Numba makes objects by the hundred thousand, and
    the full collections they set off (each walking every object of the process, Numba's own included)
    were a quarter of a kernel's compile time. The garbage is collected after."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def compile_error(e: Exception, name: str, module) -> CompileError:
    return CompileError(f"numba failed to compile kernel {name}:\n{first_lines(str(e))}\n"
                        f"generated source: {module.__file__}")


_overdue: set[threading.Thread] = set()   # compiles that ran past the limit and are still going


def compile_timeout() -> float | None:
    """TRACEJIT_COMPILE_TIMEOUT in seconds (default COMPILE_TIMEOUT); None where it is 0: no limit."""
    raw = os.environ.get("TRACEJIT_COMPILE_TIMEOUT", "").strip()
    if not raw:
        return COMPILE_TIMEOUT
    try:
        limit = float(raw)
    except ValueError:
        warnings.warn(f"TRACEJIT_COMPILE_TIMEOUT={raw!r} is not a number of seconds; using "
                      f"{COMPILE_TIMEOUT:g}", RuntimeWarning, stacklevel=2)
        return COMPILE_TIMEOUT
    return limit if limit > 0 else None


def _compile_guarded(fn, signature, name: str, path: str):
    """fn.compile(signature), or CompileTimeoutError after compile_timeout() seconds."""
    return guarded(lambda: _compile_in_stages(fn, signature), name, "numba", f"Generated source: {path}.")


def guarded(compile, name: str, compiler: str, source: str):
    """compile(), or CompileTimeoutError after compile_timeout() seconds.

    LLVM cannot be interrupted, so the compile runs in a daemon thread and the caller stops waiting for
    it: the caller gets a loud error instead of a hang. The abandoned compile goes on in the background
    (holding Numba's compiler lock or llvm_jit's, so other compiles in this process wait for it, under the
    same limit) and does not keep the process from exiting."""
    limit = compile_timeout()
    if limit is None:
        return compile()
    box = {}

    def work():
        try:
            box["entry"] = compile()
        except BaseException as e:   # handed to the waiting caller
            box["error"] = e
        finally:
            _overdue.discard(threading.current_thread())

    worker = threading.Thread(target=contextvars.copy_context().run, args=(work,),   # the caller's stage times
                              name=f"tracejit {compiler} compile {name}", daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        others = sorted(t.name.rsplit(" ", 1)[-1] for t in list(_overdue) if t.is_alive())
        _overdue.add(worker)
        waiting = (f" It was waiting for earlier compiles that also ran past the limit and still run: "
                   f"{', '.join(others)}." if others else "")
        raise CompileTimeoutError(
            f"{compiler} did not finish compiling kernel {name} within {limit:g} s "
            f"(TRACEJIT_COMPILE_TIMEOUT); gave up.{waiting} {source} LLVM cannot be "
            f"interrupted, so that compile goes on in a background thread. If the kernel is just big, "
            f"raise TRACEJIT_COMPILE_TIMEOUT (seconds; 0 turns the limit off); a kernel that never "
            f"finishes compiling is a tracejit bug: please report it.") from None
    if "error" in box:
        raise box["error"]
    return box["entry"]


def direct_llvm() -> bool:
    """Whether llvm_jit can make entry points in this interpreter (it reads NumPy's array struct)."""
    try:
        llvm_jit.layout()
    except llvm_jit.Unavailable as e:
        log(1, f"kernels compile through Numba: {e}")
        return False
    return True


def parallel_entries() -> bool:
    """Whether a kernel looped in parallel over its global index can be IR that LLVM compiles directly
    (TRACEJIT_NUMBA_NATIVE=1) with an entry point running it on OpenMP's threads (llvm_jit.openmp)."""
    from tracejit.codegen.cpu.numba import native_mode
    return native_mode() == "1" and direct_llvm() and llvm_jit.openmp()


def compile_native(ir_text: str, symbol: str, loop: str, name: str) -> bytes:
    try:
        with stage("LLVM"):
            return llvm_jit.compile_object(ir_text, FUNCTION, symbol, loop == "serial", loop == "prange")
    except RuntimeError as e:   # llvmlite's error for IR that does not parse or verify
        raise CompileError(f"LLVM rejected the IR tracejit rendered for kernel {name}: {first_lines(str(e))}\n"
                           "This is a tracejit bug: please report it. TRACEJIT_NUMBA_NATIVE=0 renders the kernel "
                           "as Python for Numba instead.") from None


def _compile_in_stages(fn, signature):
    """fn.compile(signature); under TRACEJIT_DEBUG=1 its time split into stages by Numba's own events: its
    compiler passes (frontend, typing, lowering to LLVM IR) and the time inside LLVM (optimisation, machine
    code), this thread's only."""
    times = current_times()
    if times is None:
        return fn.compile(signature)
    from numba.core import event
    thread = threading.get_ident()

    class Stages(event.Listener):
        def on_start(self, ev):
            if threading.get_ident() == thread:
                times.enter(_numba_stage(ev))

        def on_end(self, ev):
            if threading.get_ident() == thread:
                times.exit()

    stages = Stages()
    with event.install_listener("numba:run_pass", stages), event.install_listener("numba:llvm_lock", stages):
        return fn.compile(signature)


_NUMBA_STAGES = {"nopython_type_inference": "numba typing", "native_lowering": "numba lowering",
                 "nopython_backend": "numba lowering"}


def _numba_stage(ev) -> str:
    if ev.kind == "numba:llvm_lock":
        return "LLVM"
    return _NUMBA_STAGES.get(ev.data["name"].split(" [")[0], "numba frontend")
