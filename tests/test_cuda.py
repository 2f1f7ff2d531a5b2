"""The cuda target. Without a GPU: CUDA C, NVRTC to PTX, ptxas, lower/warm for an architecture, the
disk cache, errors, the array interfaces. With a GPU (tj.devices() says cuda is available), also the
runtime: interop with the CUDA Array Interface and DLPack, the allocator, CUDA-graph capture.

The device-parametrised suite runs on cuda where a GPU is present, and every kernel it compiles on numba
is also compiled to PTX and assembled by ptxas (tests/cuda_check.py)."""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tracejit as tj
from tracejit.codegen.simt import cuda as cuda_codegen
from tracejit.codegen.simt import nvrtc
from tracejit.runtime.cuda import driver as cuda_driver
from tracejit.runtime import dlpack, emulator
from tracejit.runtime import registry

REPO = Path(__file__).resolve().parents[1]
INFO = {i.name: i for i in tj.devices()}["cuda"]
GPU = INFO.available

try:
    nvrtc.version()
    NVRTC = None
except tj.DeviceError as e:
    NVRTC = str(e)
needs_nvrtc = pytest.mark.skipif(NVRTC is not None, reason=f"NVRTC is not installed: {NVRTC}")
needs_ptxas = pytest.mark.skipif(nvrtc.ptxas() is None, reason="ptxas was not found (no CUDA toolkit)")
needs_gpu = pytest.mark.skipif(not GPU, reason=f"no CUDA GPU here: {INFO.reason}")
no_gpu = pytest.mark.skipif(GPU, reason="checks the behaviour of a machine without a GPU")


@tj.kernel
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@tj.kernel
def gelu(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


@tj.kernel
def halves(x):
    return (x * 2).astype(np.float16), x.astype(np.float16).sum(axis=-1)


# ---- without a GPU ----------------------------------------------------------------------------------

@no_gpu
def test_devices_reports_cuda_unavailable_with_the_reason_and_that_lowering_still_works():
    assert not INFO.available
    if NVRTC is None:
        assert "lowered and warmed" in INFO.reason    # no driver or GPU, but NVRTC is there
    else:
        assert "pip install 'tracejit[cuda]'" in INFO.reason
    with pytest.raises(tj.DeviceError, match="not available"):
        tj.device("cuda")


@needs_nvrtc
@pytest.mark.skipif(emulator.emulates("cuda"), reason="TRACEJIT_EMULATE=cuda: `cuda` builds for the CPU emulator")
def test_lower_for_cuda_gives_cuda_c_and_ptx_for_sm_80_by_default(monkeypatch):
    monkeypatch.delenv("TRACEJIT_CUDA_ARCH", raising=False)
    plan = softmax.lower(tj.spec((64, 1024), np.float32), device="cuda")
    (k,) = plan.kernels
    assert 'extern "C" __global__ void' in k.source and "__syncthreads();" in k.source
    assert "__shfl_down_sync" in k.source      # the block's reduction: warp shuffles, then the warps' totals
    assert ".version 9.0" in k.ptx             # NVRTC 13.0's PTX ISA, which ptxas 13.0 and r580+ drivers accept
    if not GPU:
        assert ".target sm_80" in k.ptx


@needs_nvrtc
def test_the_architecture_comes_from_the_device_name_or_TRACEJIT_CUDA_ARCH(monkeypatch):
    plan = softmax.lower(tj.spec((64, 256), np.float32), device="cuda:sm_90")
    assert ".target sm_90" in plan.kernels[0].ptx
    monkeypatch.setenv("TRACEJIT_CUDA_ARCH", "sm_86")
    target = registry.compiler("cuda:sm_86")
    assert target.compiler.arch == "sm_86"
    assert nvrtc.parse_arch(None) == "sm_86"
    assert [nvrtc.parse_arch(a) for a in ("90", "compute_90", "9.0", "SM_90a")] == ["sm_90"] * 3 + ["sm_90a"]
    for bad in ("banana", "sm_35"):
        with pytest.raises(tj.DeviceError, match="architecture"):
            nvrtc.parse_arch(bad)


@needs_nvrtc
def test_running_on_an_architecture_name_says_it_only_compiles():
    softmax.lower(tj.spec((8, 256), np.float32), device="cuda:sm_90")
    with pytest.raises(tj.DeviceError, match="cannot run it|names an architecture"):
        softmax(np.ones((8, 256), np.float32), device="cuda:sm_90")


@no_gpu
@needs_nvrtc
def test_calling_on_cuda_without_a_gpu_raises_with_the_reason():
    with pytest.raises(tj.DeviceError, match="no NVIDIA driver|sees no GPU|did not initialise|cannot run"):
        gelu(np.ones(64, np.float32), device="cuda")


@needs_nvrtc
@needs_ptxas
def test_float16_uses_cuda_fp16_and_assembles_for_sm_80_and_sm_90():
    plan = halves.lower(tj.spec((8, 300), np.float32), device="cuda:sm_80")
    sources = "\n".join(k.source for k in plan.kernels)
    assert "#include <cuda_fp16.h>" in sources and "__float2half_rn" in sources
    for k in plan.kernels:
        for arch in ("sm_80", "sm_90"):
            assert "Used" in nvrtc.assemble(k.ptx, arch, k.name)   # ptxas's resource report


@needs_nvrtc
def test_contiguous_float32_elementwise_kernels_get_a_float4_variant():
    (k,) = gelu.lower(tj.spec((4096,), np.float32), device="cuda:sm_80").kernels
    name, source, ptx, launch = k.vector
    assert "__builtin_assume_aligned" in source and launch.global_items * 4 >= 4096
    assert "ld.global.v4.f32" in ptx and "st.global.v4.f32" in ptx
    assert k.vector_params == (0, 1)
    (odd,) = gelu.lower(tj.spec((4099,), np.float32), device="cuda:sm_80").kernels
    assert odd.vector is None          # not a multiple of 4 elements
    (strided,) = gelu.lower(tj.spec((64, 64), np.float32, strides=(1, 64)), device="cuda:sm_80").kernels
    assert strided.vector is None      # a transposed read is not the thread's own element


@needs_nvrtc
def test_an_nvrtc_error_names_the_log_and_the_generated_line():
    source = 'extern "C" __global__ void k(float* out) {\n    out[0] = not_declared;\n}\n'
    with pytest.raises(tj.CompileError) as e:
        nvrtc.compile_ptx("k", source, "sm_80")
    text = str(e.value)
    assert "not_declared" in text and "generated line 2: out[0] = not_declared;" in text and "NVRTC 13.0" in text



@needs_nvrtc
def test_a_cubin_is_machine_code_for_the_chip_and_its_assembler_errors_come_as_ptxas_gives_them():
    """nvrtc.compile_cubin (the suite's CUDA check) assembles in the same call: a kernel needing more shared
    memory than sm_80 gives a block is refused as ptxas refuses its PTX."""
    fits = 'extern "C" __global__ void k(float* x) {\n    x[threadIdx.x] *= 2.0f;\n}\n'
    assert nvrtc.compile_cubin("k", fits, "sm_80").startswith(b"\x7fELF")
    big = ('extern "C" __global__ void k(float* x) {\n    __shared__ float s[16448];\n    s[threadIdx.x] = x[0];\n'
           '    __syncthreads();\n    x[threadIdx.x] = s[threadIdx.x ^ 1];\n}\n')
    with pytest.raises(tj.CompileError, match="uses too much shared data"):
        nvrtc.compile_cubin("k", big, "sm_80")
    if nvrtc.ptxas() is not None:
        with pytest.raises(tj.CompileError, match="uses too much shared data"):
            nvrtc.assemble(nvrtc.compile_ptx("k", big, "sm_80"), "sm_80")

@needs_nvrtc
def test_a_failed_cuda_build_is_never_stored(tmp_path, monkeypatch):
    from tracejit.runtime.cuda import compiler as cuda_compiler
    from tracejit.runtime.cache import disk as disk_cache
    monkeypatch.setattr(cuda_compiler, "CACHE", disk_cache.DiskCache(tmp_path))
    compiler = cuda_compiler.CudaCompiler("sm_80")
    broken = 'extern "C" __global__ void k0_broken(float* out) { out[0] = nope; }'
    with pytest.raises(tj.CompileError, match="nope"):
        compiler.ptx("k0_broken", broken)
    assert cuda_compiler.CACHE.entries() == []
    good = 'extern "C" __global__ void k0_fine(float* out) { out[0] = 1.0f; }'
    ptx, cached = compiler.ptx("k0_fine", good)
    assert not cached and len(cuda_compiler.CACHE.entries()) == 1
    assert cuda_compiler.CudaCompiler("sm_80").ptx("k0_fine", good) == (ptx, True)   # a new compiler finds it


@needs_nvrtc
def test_a_cached_entry_that_is_not_ptx_is_reported_removed_and_rebuilt(tmp_path, monkeypatch):
    """A payload whose checksum holds but which is not PTX (a planted pickle, say) is never used as PTX."""
    import pickle
    import warnings
    from tracejit.runtime.cuda import compiler as cuda_compiler
    from tracejit.runtime.cache import disk as disk_cache
    monkeypatch.setattr(cuda_compiler, "CACHE", disk_cache.DiskCache(tmp_path))
    source = 'extern "C" __global__ void k0_fine(float* out) { out[0] = 1.0f; }'
    ptx, _ = cuda_compiler.CudaCompiler("sm_80").ptx("k0_fine", source)
    key = cuda_compiler.CudaCompiler("sm_80").cache_key("k0_fine", source)
    cuda_compiler.CACHE.put(key, pickle.dumps({"not": "ptx"}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again, cached = cuda_compiler.CudaCompiler("sm_80").ptx("k0_fine", source)
    assert (again, cached) == (ptx, False)
    assert any("holds no PTX" in str(w.message) for w in caught)
    assert cuda_compiler.CACHE.get(key) == ptx.encode()      # rebuilt and stored again


@needs_nvrtc
def test_products_and_sums_round_apart_as_in_numpy_and_matrix_products_ask_for_fma():
    """--fmad=false: x * y + z is a rounded product, then a rounded sum (an FMA would round once, and
    floors and comparisons of such values would differ from NumPy's); the tiled product uses fma()."""
    (k,) = tj.kernel(lambda x, y, z: x * y + z).lower(*[tj.spec((4096,), np.float32)] * 3, device="cuda:sm_80").kernels
    assert "mul.rn.f32" in k.ptx and "add.rn.f32" in k.ptx and "fma.rn.f32" not in k.ptx
    (m,) = tj.kernel(lambda a, b: a @ b).lower(*[tj.spec((256, 64), np.float32), tj.spec((64, 256), np.float32)],
                                               device="cuda:sm_80").kernels
    assert "fma(" in m.source and "fma.rn.f32" in m.ptx


@needs_nvrtc
def test_a_transposed_read_runs_a_thread_per_output_column_over_32_rows():
    """x.T + y: neighbouring threads write neighbouring outputs (coalesced) and each walks 32 rows, reading
    along its own row of x (2748 GB/s on an H200 against 284 for a 32x32 tile per thread)."""
    x, y = tj.spec((256, 128), np.float32), tj.spec((128, 256), np.float32)
    (k,) = tj.kernel(lambda x, y: x.T + y).lower(x, y, device="cuda:sm_80").kernels
    assert k.source.count("for (") == 1 and "< 32;" in k.source
    assert k.launch.global_items == 128 * 256 // 32


@needs_nvrtc
def test_a_row_reduction_gets_a_thread_per_8_elements_from_one_warp_to_256():
    """Measured on an H200: rows of 1024 ran fastest with 128 threads, rows of 4096 with 256."""
    for n, threads in ((128, 32), (256, 32), (1024, 128), (4096, 256), (16384, 256)):
        (k,) = softmax.lower(tj.spec((64, n), np.float32), device="cuda:sm_80").kernels
        assert k.launch.mode == "group" and k.launch.local_size == threads, (n, k.launch)


@needs_ptxas
def test_ptxas_rejects_broken_ptx_with_its_message():
    with pytest.raises(tj.CompileError, match="ptxas rejected"):
        nvrtc.assemble(".version 9.0\n.target sm_80\n.address_size 64\n.visible .entry k() { bogus; }\n", "sm_80")


@needs_nvrtc
def test_ptx_is_kept_in_the_disk_cache_per_architecture(tmp_path):
    script = ("import numpy as np, tracejit as tj, json\n"
              "@tj.kernel\ndef f(x):\n    return np.exp(x) * 2\n"
              "r = tj.warm(f, tj.spec((1000,), np.float32), devices=['cuda:sm_80', 'cuda:sm_90'])\n"
              "print(json.dumps([(x.compiled, x.cached) for x in r]))\n")
    env = dict(os.environ, TRACEJIT_CACHE_DIR=str(tmp_path), PYTHONPATH=str(REPO))
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
            for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr + runs[1].stderr
    assert runs[0].stdout.strip() == "[[1, 0], [1, 0]]"     # one kernel compiled for each architecture
    assert runs[1].stdout.strip() == "[[0, 1], [0, 1]]"     # the next process finds both in the cache


@needs_nvrtc
def test_python_m_tracejit_warm_compiles_for_cuda_without_a_gpu(tmp_path):
    (tmp_path / "kmod.py").write_text("import numpy as np, tracejit as tj\n"
                                      "@tj.kernel\ndef g(x, y):\n    return (x * y).sum(axis=-1)\n")
    env = dict(os.environ, TRACEJIT_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=f"{REPO}{os.pathsep}{tmp_path}")
    out = subprocess.run([sys.executable, "-m", "tracejit", "warm", "kmod:g", "--arg", "float32[512,512]",
                          "--arg", "float32[512,512]", "--device", "cuda:sm_90"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 compiled" in out.stdout


def test_the_cuda_array_interface_of_another_library_is_read_without_a_copy():
    class Foreign:
        __cuda_array_interface__ = {"shape": (3, 4), "typestr": "<f4", "data": (0x7F0000001000, False),
                                    "strides": (4, 12), "version": 3}
    buf = cuda_driver.from_interface(Foreign())
    assert (buf.ptr, buf.shape, buf.dtype, buf.strides) == (0x7F0000001000, (3, 4), np.float32, (4, 12))
    assert not buf.contiguous and buf.span() == (0x7F0000001000, 48)

    class Reversed:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<i8", "data": (0x1000, True), "strides": (-8,),
                                    "version": 3}
    rev = cuda_driver.from_interface(Reversed())
    assert rev.span() == (0x1000 - 24, 32) and rev.readonly

    class Broken:
        __cuda_array_interface__ = {"shape": (3,), "typestr": "<f4", "data": (0x1000, False), "strides": (3,)}
    with pytest.raises(tj.DeviceError, match="not a multiple of its item size"):
        cuda_driver.from_interface(Broken())


def test_dlpack_capsules_follow_the_abi_numpy_reads():
    """The exporter CUDA arrays use, checked here on host memory (device type CPU), where NumPy consumes it."""
    host = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]

    class Exported:
        def __dlpack__(self, **kwargs):
            return dlpack.export(host.ctypes.data, host.shape, host.strides, host.dtype, dlpack.CPU, 0, host)

        def __dlpack_device__(self):
            return (dlpack.CPU, 0)

    before = len(dlpack._live)
    seen = np.from_dlpack(Exported())
    np.testing.assert_array_equal(seen, host)
    assert seen.ctypes.data == host.ctypes.data          # no copy
    del seen
    assert len(dlpack._live) == before                   # the consumer's deleter released it
    capsule = Exported().__dlpack__()
    assert len(dlpack._live) == before + 1
    del capsule                                          # never consumed: the capsule's destructor releases it
    assert len(dlpack._live) == before


def test_kernel_arguments_are_packed_for_the_types_the_kernels_declare():
    from tracejit.runtime.cuda.launch import SCALAR_CTYPES
    for dt, ct in SCALAR_CTYPES.items():
        assert ctypes.sizeof(ct) == dt.itemsize
    assert set(SCALAR_CTYPES) == set(cuda_codegen.RENDERER.types)


# ---- with a GPU -------------------------------------------------------------------------------------

@needs_gpu
def test_results_stay_on_the_gpu_and_expose_the_cuda_array_interface(rng):
    x = rng.standard_normal((256, 1024)).astype(np.float32)
    y = softmax(x, device="cuda")
    assert isinstance(y, tj.Array) and y.device.name == "cuda"
    cai = y.__cuda_array_interface__
    assert cai["shape"] == (256, 1024) and cai["typestr"] == "<f4" and cai["data"][0] != 0
    z = softmax(y, device="cuda")                        # chained on the device
    e = np.exp(x - x.max(-1, keepdims=True))
    ref = e / e.sum(-1, keepdims=True)
    e2 = np.exp(ref - ref.max(-1, keepdims=True))
    np.testing.assert_allclose(z.numpy(), e2 / e2.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)


@needs_gpu
def test_a_foreign_view_of_a_tj_array_is_read_in_place_with_its_strides(rng):
    x = rng.standard_normal((64, 32)).astype(np.float32)
    on_gpu = tj.asarray(x, device="cuda")

    class TransposedView:
        def __init__(self, base):
            cai = base.__cuda_array_interface__
            self.base = base
            self.__cuda_array_interface__ = dict(cai, shape=(32, 64), strides=(4, 128))
    out = gelu(TransposedView(on_gpu), device="cuda")
    np.testing.assert_allclose(out.numpy(), gelu(x.T.copy(), device="numba"), rtol=1e-5, atol=1e-6)


@needs_gpu
def test_torch_and_cupy_tensors_are_inputs_without_a_copy_and_take_results_through_dlpack(rng):
    libs = [m for m in ("torch", "cupy") if __import__("importlib").util.find_spec(m)]
    if "torch" in libs and not __import__("torch").cuda.is_available():
        libs.remove("torch")   # a CPU-only build (the benchmarks' PyTorch), or the emulator's GPU
    if not libs:
        pytest.skip("neither torch with CUDA nor cupy is installed")
    x = rng.standard_normal((128, 512)).astype(np.float32)
    for lib in libs:
        if lib == "torch":
            import torch
            t = torch.from_numpy(x).cuda()
            y = softmax(t, device="cuda")      # tensors in, tensors out (interop.py), handed over through DLPack
            assert isinstance(y, torch.Tensor) and y.is_cuda
            np.testing.assert_allclose(y.cpu().numpy(), softmax(x, device="numba"), rtol=1e-5, atol=1e-7)
            a = tj.asarray(x, device="cuda")
            back = torch.from_dlpack(a)
            assert back.is_cuda and back.data_ptr() == a.__cuda_array_interface__["data"][0]
        else:
            import cupy
            c = cupy.asarray(x)
            y = softmax(c, device="cuda")
            assert isinstance(y, cupy.ndarray)
            np.testing.assert_allclose(cupy.asnumpy(y), softmax(x, device="numba"), rtol=1e-5, atol=1e-7)


@needs_gpu
def test_the_caching_allocator_reuses_freed_blocks():
    dev = tj.device("cuda")
    a = tj.asarray(np.ones(1 << 20, np.float32), device="cuda")
    before = dev.memory_stats()
    del a
    b = tj.asarray(np.ones(1 << 20, np.float32), device="cuda")
    after = dev.memory_stats()
    assert after["managed_bytes"] == before["managed_bytes"] and b.numpy()[0] == 1


@needs_gpu
def test_capture_replays_as_a_cuda_graph(rng):
    x = rng.standard_normal((64, 256)).astype(np.float32)
    with tj.capture() as g:
        g.outputs = softmax(gelu(x, device="cuda"), device="cuda")
    x2 = rng.standard_normal((64, 256)).astype(np.float32)
    out = g(x2)
    from tracejit.runtime.cuda.launch import CudaGraph
    assert any(type(launches) is CudaGraph for _, launches in g._segments)
    ref = softmax(gelu(x2, device="numba"), device="numba")
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-6)
