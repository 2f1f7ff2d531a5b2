"""tracejit's loader of cached object code (runtime/numba/object_loader.py): every kind of kernel the numba device
compiles gives the same bits loaded by it as loaded by LLVM's MCJIT, damaged or unknown object code is refused
before anything runs, and a fresh process whose kernels are all cached loads no LLVM."""
from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import tracejit as tj
from tracejit.runtime import registry
from tracejit.runtime.numba import llvm_jit, object_loader

pytestmark = pytest.mark.skipif(not object_loader.supported_here(), reason="the loader serves x86-64 Linux")


def _kernels():
    """A kernel of each kind: serial and OpenMP-parallel entry points, libm calls, integers with a fault
    record, float16, scalars passed as arguments. Their constants are this file's own: objects no other test
    loads."""

    def small(x):
        return np.exp(x * 1.0625) - 0.375

    def rows(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True) + 0.03125)
        return e / e.sum(axis=-1, keepdims=True)

    def libm(x):
        return np.sin(x) * np.log1p(np.abs(x)) + np.arctan2(x, 1.3125)

    def powers(a, b):
        return a ** b + a // 7

    def half(h):
        return (h * np.float16(1.5)).astype(np.float16)

    def scalar(x, s):
        return x * s + 0.1875

    rng = np.random.default_rng(7)
    x64 = rng.standard_normal(1000)
    return [
        (small, (rng.standard_normal(100).astype(np.float32),)),
        (rows, (rng.standard_normal((512, 300)).astype(np.float32),)),
        (libm, (x64,)),
        (libm, (rng.standard_normal(200_000),)),
        (powers, (rng.integers(1, 9, 300), rng.integers(0, 5, 300))),
        (half, (rng.standard_normal(3000).astype(np.float16),)),
        (scalar, (rng.standard_normal((300, 400)).astype(np.float32), 2.5)),
    ]


def _run_all() -> list:
    out = []
    for fn, args in _kernels():
        with np.errstate(all="ignore"):
            result = tj.kernel(fn)(*args, device="numba")
        out.append(result)
    a, b = _kernels()[4][1]
    with pytest.raises(ValueError, match="negative"):  # the kernel's fault record, read after it ran
        tj.kernel(_kernels()[4][0])(a, -b, device="numba")
    return out


def _forget_loaded() -> None:
    registry.device("numba")._native.clear()
    llvm_jit._entries.clear()


def test_every_kind_of_kernel_gives_the_same_bits_loaded_by_tracejit_or_by_llvm(monkeypatch):
    _forget_loaded()
    loaded = []

    def mapped(obj, symbol):
        loaded.append(symbol)
        return object_loader_load(obj, symbol)

    def no_mcjit(obj, symbol):
        raise AssertionError("the object went to LLVM's MCJIT")

    object_loader_load = llvm_jit.load_mapped
    monkeypatch.setattr(llvm_jit, "load_mapped", mapped)
    monkeypatch.setattr(llvm_jit, "load_mcjit", no_mcjit)
    ours = _run_all()
    assert len(loaded) >= len(ours)  # (every kernel compiled or taken from the disk cache, then loaded)
    entries = dict(llvm_jit._entries)
    monkeypatch.undo()

    _forget_loaded()
    refused = []

    def refuse(obj, symbol):
        refused.append(symbol)
        raise object_loader.Unsupported("this test asks for MCJIT")

    monkeypatch.setattr(llvm_jit, "load_mapped", refuse)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (the refusal's warning)
        theirs = _run_all()
    assert sorted(refused) == sorted(loaded)  # the same objects, from the disk cache, through MCJIT
    for (fn, args), a, b in zip(_kernels(), ours, theirs):
        with np.errstate(all="ignore"):
            expected = fn(*args)
        np.testing.assert_array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8), err_msg=fn.__name__)
        np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(expected, np.float64), rtol=2e-3,
                                   err_msg=fn.__name__)
    for entry in entries.values():  # the entry points' own refusals, raised by code the loader mapped
        with pytest.raises(TypeError, match="takes"):
            entry()


def _an_object() -> tuple[bytes, str]:
    """A cached kernel's object code and its symbol (compiled here when the cache has none)."""
    tj.kernel(lambda x: x * 3.0625 + 1)(np.ones(10, np.float32), device="numba")
    dev = registry.device("numba")
    from tracejit.runtime.cache.disk import CACHE

    for path, _, _ in CACHE.entries():
        blob = path.read_bytes()
        if b"llvm object code" in blob[:4000]:
            obj = blob[blob.index(b"\n", len(b"tracejit-cache-entry 1\n")) + 1 :]
            return obj, f"tracejit.{path.name[:32]}"
    pytest.skip(f"no object code in the cache ({dev})")


def _relocation_types(obj: bytes) -> list[tuple[int, int]]:
    """(file offset of each relocation's type, the type) in the object's RELA sections."""
    (shoff,) = struct.unpack_from("<Q", obj, 40)
    (shnum,) = struct.unpack_from("<H", obj, 60)
    out = []
    for i in range(shnum):
        _, kind, _, _, at, size, _, _, _, _ = struct.unpack_from("<IIQQQQIIQQ", obj, shoff + 64 * i)
        if kind == 4:
            out += [(at + k + 8, struct.unpack_from("<I", obj, at + k + 8)[0]) for k in range(0, size, 24)]
    return out


def test_a_relocation_the_loader_does_not_know_is_refused_and_llvm_loads_the_object():
    obj, symbol = _an_object()
    names = [f"{symbol}.ndarray", f"{symbol}.call"]
    symbols = {"tracejit.None": id(None), "tracejit.TypeError": id(TypeError), "tracejit.omp_threads": 0}
    (at, _), *_ = _relocation_types(obj)
    changed = bytearray(obj)
    struct.pack_into("<I", changed, at, 4)  # R_X86_64_PLT32: not in the large code model's objects
    with pytest.raises(object_loader.Unsupported, match="type 4"):
        object_loader.load(bytes(changed), symbols, [], names)
    with pytest.raises(object_loader.Unsupported, match="does not define"):
        object_loader.load(obj, symbols, [], ["tracejit.nothing.call"])
    llvm_jit._refusals.discard("the test's reason")
    with pytest.warns(RuntimeWarning, match="loaded by LLVM.*the test's reason"):
        llvm_jit._refused("k", "the test's reason")


def test_damaged_object_code_is_refused_never_run_nor_crashing():
    """Bytes changed anywhere in the object's headers, tables and relocations: check_object or the loader
    refuses it, or it maps (nothing of it is run here); the interpreter never crashes."""
    obj, symbol = _an_object()
    names = [f"{symbol}.ndarray", f"{symbol}.call"]
    symbols = {"tracejit.None": id(None), "tracejit.TypeError": id(TypeError), "tracejit.omp_threads": 0}
    rng = np.random.default_rng(3)
    (shoff,) = struct.unpack_from("<Q", obj, 40)
    spots = np.concatenate([np.arange(0, 64), np.arange(shoff, len(obj)), [a for a, _ in _relocation_types(obj)]])
    for _ in range(300):
        changed = bytearray(obj)
        for at in rng.choice(spots, 2):
            changed[int(at)] = int(rng.integers(256))
        try:
            llvm_jit.check_object(bytes(changed))
            object_loader.load(bytes(changed), symbols, [], names)
        except (llvm_jit.BadObject, object_loader.Unsupported):
            pass


def test_a_fresh_process_with_every_kernel_cached_loads_no_llvm(tmp_path):
    """After `warm`, a new process's first call compiles nothing and imports no llvmlite.binding (LLVM): the
    CPU comes from its record, the object code through tracejit's loader."""
    (tmp_path / "kernels_here.py").write_text(textwrap.dedent("""
        import numpy as np
        import tracejit as tj

        @tj.kernel
        def softmax(x):
            e = np.exp(x - x.max(axis=-1, keepdims=True))
            return e / e.sum(axis=-1, keepdims=True)
    """))
    env = dict(os.environ, TRACEJIT_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]))
    subprocess.run([sys.executable, "-m", "tracejit", "warm", "kernels_here:softmax", "--arg", "float32[512,1024]",
                    "--device", "numba"], check=True, capture_output=True, env=env, timeout=300)
    child = textwrap.dedent("""
        import sys, warnings
        warnings.simplefilter("error")
        import numpy as np
        from kernels_here import softmax
        x = np.random.default_rng(0).standard_normal((512, 1024), dtype=np.float32)
        y = softmax(x, device="numba")
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        np.testing.assert_allclose(y, e / e.sum(axis=-1, keepdims=True), rtol=1e-5, atol=1e-7)
        assert softmax.cache_info()["compiles"] == 0, softmax.cache_info()
        assert "llvmlite.binding" not in sys.modules, "LLVM was loaded"
    """)
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr


def test_the_cpu_record_is_llvms_answer_and_a_damaged_one_is_rewritten(monkeypatch, tmp_path):
    from tracejit.codegen.cpu import host
    from tracejit.runtime.numba import host_record

    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(host, "_told", [])
    host.host_cpu.cache_clear()
    host_record.host_cpu.cache_clear()
    try:
        first = host_record.host_cpu()
        assert first == host.ask_llvm()
        (record,) = (tmp_path / "host").iterdir()
        record.write_text(record.read_text().replace('"name": "', '"name": "x'))  # its checksum no longer holds
        host.host_cpu.cache_clear()
        host_record.host_cpu.cache_clear()
        monkeypatch.setattr(host, "_told", [])
        assert host_record.host_cpu() == first
        assert '"name": "x' not in record.read_text()
    finally:
        host.host_cpu.cache_clear()
        host_record.host_cpu.cache_clear()
