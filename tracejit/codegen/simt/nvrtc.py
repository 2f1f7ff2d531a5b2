"""CUDA C -> PTX with NVRTC (cuda.bindings.nvrtc), and a check of PTX with ptxas; neither needs a GPU.
CUDA C -> a cubin for one real chip (compile_cubin) checks the source and the assembly in one call.

PTX ISA: NVRTC 13.0 emits PTX ISA 9.0, which ptxas 13.0 and drivers from CUDA 13.0 on (r580+) accept.
A newer NVRTC emits a newer ISA (13.x: 9.x), which older ptxas and drivers reject, so the `cuda` extra
pins nvidia-cuda-nvrtc to 13.0. The PTX targets a virtual architecture (compute_XX); the driver
finishes it for the GPU it runs on.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

from tracejit.errors import CompileError, DeviceError
from tracejit.codegen.build_log import annotate

ENV_ARCH = "TRACEJIT_CUDA_ARCH"
DEFAULT_ARCH = "sm_80"
# NumPy rounds a product and a sum apart: -fmad=false keeps `a * b + c` two roundings (nvcc's default would
# contract it into one FMA, and then edges computed as i * step + lo, floors and comparisons of such values
# differ from NumPy's: np.histogram's bins did on an H200). Matrix products ask for fma() where they mean it
# (codegen/simt/tiled.py), as BLAS does. Division and sqrt stay IEEE-exact, as NumPy computes them.
OPTIONS = ("--std=c++17", "--fmad=false", "--prec-div=true", "--prec-sqrt=true", "--ftz=false")
INSTALL_HINT = "pip install 'tracejit[cuda]' (cuda-python, nvidia-cuda-nvrtc 13.0, nvidia-cuda-runtime headers)"


def parse_arch(arch: str | None) -> str:
    """'sm_90', '90', 'compute_90' or '9.0' -> 'sm_90'; None -> TRACEJIT_CUDA_ARCH, else sm_80."""
    text = (arch or os.environ.get(ENV_ARCH) or DEFAULT_ARCH).strip().lower()
    m = re.fullmatch(r"(?:sm_|compute_)?(\d+)([a-z]?)|(\d+)\.(\d+)", text)
    if not m:
        raise DeviceError(
            f"CUDA architecture {text!r} is not one like sm_80 or sm_90 (from {'the argument' if arch else ENV_ARCH})"
        )
    number = m.group(1) + m.group(2) if m.group(1) else m.group(3) + m.group(4)
    if int(m.group(1) or m.group(3) + m.group(4)) < 50:  # the number without its letter
        raise DeviceError(f"CUDA architecture sm_{number} is older than sm_50, which NVRTC 13 no longer targets")
    return f"sm_{number}"


def version() -> str:
    """NVRTC's version, as 'NVRTC 13.0'."""
    nvrtc = _nvrtc()
    _, major, minor = nvrtc.nvrtcVersion()
    return f"NVRTC {major}.{minor}"


@functools.cache
def supported_archs() -> tuple[int, ...]:
    nvrtc = _nvrtc()
    err, archs = nvrtc.nvrtcGetSupportedArchs()
    return tuple(archs) if err == nvrtc.nvrtcResult.NVRTC_SUCCESS else ()


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:
        raise DeviceError(f"cuda-python's NVRTC bindings are not importable ({e}); {INSTALL_HINT}") from None
    return nvrtc


@functools.cache
def include_dirs() -> tuple[str, ...]:
    """Where cuda_fp16.h is: the nvidia-cuda-runtime wheel, else CUDA_HOME / CUDA_PATH / /usr/local/cuda."""
    found = []
    try:
        import nvidia

        for root in nvidia.__path__:
            found += sorted(str(p.parent) for p in Path(root).glob("*/include/cuda_fp16.h"))
    except ImportError:
        pass
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            found.append(os.path.join(os.environ[env], "include"))
    found.append("/usr/local/cuda/include")
    return tuple(d for d in dict.fromkeys(found) if os.path.isfile(os.path.join(d, "cuda_fp16.h")))


def compile_ptx(name: str, source: str, arch: str, extra: tuple[str, ...] = ()) -> str:
    """PTX for the virtual architecture of `arch` (sm_90 -> compute_90). A CompileError carries NVRTC's
    log, each message followed by the generated line it points at. `extra`: more NVRTC options."""
    ptx = _compiled(name, source, arch, f"compute_{arch.removeprefix('sm_')}", extra, "PTX")
    return ptx.rstrip(b"\0").decode()


def compile_cubin(name: str, source: str, arch: str, extra: tuple[str, ...] = ()) -> bytes:
    """Machine code (a cubin) for the real architecture `arch` itself: NVRTC compiles and runs ptxas's
    assembler in the same call, in this process, so its errors (too much shared memory for the chip, say)
    come as they would from `assemble`, without ptxas's process start. A CompileError carries the log."""
    return _compiled(name, source, arch, arch, extra, "CUBIN")


def _compiled(name: str, source: str, arch: str, target: str, extra: tuple[str, ...], kind: str) -> bytes:
    """NVRTC's output of `kind` ("PTX" or "CUBIN") for --gpu-architecture=`target`."""
    nvrtc = _nvrtc()
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    options = [f"--gpu-architecture={target}", *OPTIONS, *extra]
    if "#include <cuda_fp16.h>" in source:
        dirs = include_dirs()
        if not dirs:
            raise DeviceError(
                f"kernel {name} uses float16, and NVRTC needs cuda_fp16.h, which was found neither "
                f"in the nvidia-cuda-runtime wheel nor under CUDA_HOME or /usr/local/cuda; {INSTALL_HINT}"
            )
        options += [f"--include-path={d}" for d in dirs]
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), 0, [], [])
    _check(nvrtc, err, "nvrtcCreateProgram")
    try:
        encoded = [o.encode() for o in options]
        (result,) = nvrtc.nvrtcCompileProgram(prog, len(encoded), encoded)
        if result != ok:
            raise CompileError(build_error_message(name, arch, source, _log(nvrtc, prog), version()))
        get_size, get = getattr(nvrtc, f"nvrtcGet{kind}Size"), getattr(nvrtc, f"nvrtcGet{kind}")
        err, size = get_size(prog)
        _check(nvrtc, err, f"nvrtcGet{kind}Size")
        out = b" " * size
        (err,) = get(prog, out)
        _check(nvrtc, err, f"nvrtcGet{kind}")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return out


def _check(nvrtc, err, what: str) -> None:
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompileError(f"NVRTC failed in {what}: {err.name if hasattr(err, 'name') else err}")


def _log(nvrtc, prog) -> str:
    err, size = nvrtc.nvrtcGetProgramLogSize(prog)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS or size <= 1:
        return ""
    buf = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return buf.rstrip(b"\0").decode(errors="replace")


def build_error_message(name: str, arch: str, source: str, build_log: str, compiler: str) -> str:
    """NVRTC's messages ('name.cu(12): error: ...'), each followed by the generated line it names."""
    return annotate(
        f"{compiler} rejected generated CUDA kernel {name} for {arch}:", source, build_log, r"\.cu\((\d+)\)"
    )


def as_ptx(payload: bytes) -> str | None:
    """The PTX text of a cached payload, or None when it is not PTX (never trusted further than that)."""
    try:
        text = payload.decode("ascii")
    except UnicodeDecodeError:
        return None
    return text if re.search(r"^\s*\.version\s+\d+\.\d+", text, re.M) else None


def ptx_isa(ptx: str) -> str:
    """The PTX ISA version a module declares ('9.0')."""
    m = re.search(r"^\s*\.version\s+(\S+)", ptx, re.M)
    return m.group(1) if m else "unknown"


def ptxas() -> str | None:
    """The ptxas that checks PTX without a GPU: PTXAS, else on PATH, else under CUDA_HOME / /usr/local/cuda."""
    for candidate in (
        os.environ.get("PTXAS"),
        shutil.which("ptxas"),
        os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "ptxas"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def assemble(ptx: str, arch: str, name: str = "kernel") -> str:
    """Assemble PTX for a real GPU architecture with ptxas (no GPU needed); returns ptxas's resource
    report (registers, shared memory, spills). A CompileError carries ptxas's messages."""
    tool = ptxas()
    if tool is None:
        raise DeviceError("ptxas was not found (set PTXAS, put it on PATH, or install the CUDA toolkit)")
    proc = subprocess.run(
        [tool, f"--gpu-name={arch}", "--verbose", "--warn-on-spills", "-o", os.devnull, "-"],
        input=ptx.encode(),
        capture_output=True,
        timeout=120,
    )
    report = (proc.stdout + proc.stderr).decode(errors="replace").strip()
    if proc.returncode != 0:
        raise CompileError(f"ptxas rejected the PTX of kernel {name} for {arch} (PTX ISA {ptx_isa(ptx)}):\n{report}")
    return report
