"""Other libraries' arrays in, the same library's arrays out: a kernel called with PyTorch tensors returns
PyTorch tensors, with JAX arrays JAX arrays, with CuPy arrays CuPy arrays (Triton's and CuPy's users' rule).

The rule for a call: the arguments' arrays of one other library decide its results' type; NumPy arrays,
tj.Arrays and Python numbers beside them change nothing; arrays of two other libraries in one call are an
error (which library's results would be a guess). A result that is one of the arguments, as given to the
kernel (out=, or `return x`), comes back as the very object the caller passed.

Memory is shared wherever the layout allows: a CPU tensor is a NumPy view of the tensor's memory (so an
assignment inside the kernel changes the caller's tensor, as in NumPy), a CUDA tensor is read through its
__cuda_array_interface__ in place, and a result in host memory becomes a tensor over the same memory
(torch.from_numpy). A result on a device whose memory other libraries cannot address (opencl, webgpu, metal)
is copied to the host first. JAX arrays are immutable: the kernel sees them read-only.

Nothing here imports torch, JAX or CuPy: a library is recognised only when its module is already imported.
"""

from __future__ import annotations

import abc
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from tracejit.errors import ArgumentError
from tracejit.runtime import emulator
from tracejit.runtime.array import Array


class Library(abc.ABC):
    """One array library's two conversions: its arrays to what a kernel takes, a kernel's results to its arrays."""

    name = ""

    @abc.abstractmethod
    def owns(self, a: object) -> bool: ...

    @abc.abstractmethod
    def take(self, a: Any, where: Callable[[], str], device) -> object: ...

    @abc.abstractmethod
    def give(self, r: np.ndarray | np.generic | Array) -> object: ...


def _bfloat16():
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


def _on_cuda(a, device) -> Array:
    from tracejit.frontend.signature import cuda_array

    return cuda_array(a, device)


class Torch(Library):
    name = "torch"

    def owns(self, a):
        torch = sys.modules.get("torch")
        return torch is not None and isinstance(a, torch.Tensor)

    def take(self, a, where, device):
        torch = sys.modules["torch"]
        if a.requires_grad:
            if torch.is_grad_enabled():
                raise ArgumentError(
                    f"{where()} is a torch tensor that requires grad: tracejit does not compute gradients, so torch "
                    "could not differentiate through this call; pass x.detach() (or call under torch.no_grad())"
                )
            a = a.detach()
        if not a.is_cpu:
            if a.is_cuda:
                return _on_cuda(a, device)
            raise ArgumentError(
                f"{where()} is a torch tensor on {a.device}: tracejit reads torch tensors on the CPU or a CUDA GPU; "
                "pass x.cpu()"
            )
        if a.is_conj() or a.is_neg():  # a lazily conjugated (negated) view: its memory holds the other values
            a = a.resolve_conj().resolve_neg()
        if a.dtype == torch.bfloat16:
            bf16 = _bfloat16()
            if bf16 is None:
                raise ArgumentError(
                    f"{where()} is a bfloat16 tensor: tracejit needs ml_dtypes for bfloat16 (pip install ml_dtypes)"
                )
            return a.view(torch.int16).numpy().view(bf16)
        try:
            return a.numpy()
        except TypeError as e:  # a dtype NumPy has no counterpart of (float8, the quantized ones, ...)
            raise ArgumentError(
                f"{where()} is a torch tensor of dtype {a.dtype}, which tracejit cannot read: {e}"
            ) from None

    def give(self, r):
        torch = sys.modules["torch"]
        if type(r) is Array:
            if _on_gpu(r) and torch.cuda.is_available():
                return torch.from_dlpack(r)  # in place, on the GPU
            r = r.numpy()  # device memory torch cannot address: a copy to the host
        if not isinstance(r, np.ndarray):
            r = np.asarray(r)
        if r.dtype == _bfloat16():
            return torch.from_numpy(_own(r).view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(_own(r))


class Jax(Library):
    name = "JAX"

    def owns(self, a):
        jax = sys.modules.get("jax")
        return jax is not None and isinstance(a, jax.Array)

    def take(self, a, where, device):
        jax = sys.modules["jax"]
        if isinstance(a, jax.core.Tracer):
            raise ArgumentError(
                f"{where()} is a JAX tracer (the kernel was called inside jax.jit, grad or vmap): tracejit kernels "
                "run on concrete arrays; call it outside the transformation, or through jax.pure_callback"
            )
        platforms = {d.platform for d in a.devices()}
        if platforms == {"gpu"} or platforms == {"cuda"}:
            return _on_cuda(a, device)
        if platforms != {"cpu"}:
            raise ArgumentError(
                f"{where()} is a JAX array on {sorted(platforms)}: tracejit reads JAX arrays on the CPU or one CUDA "
                "GPU; pass jax.device_get(x)"
            )
        view = np.asarray(a).view()  # JAX's own memory on the CPU, without a copy
        view.flags.writeable = False  # JAX arrays are immutable: an assignment into one is refused, as JAX does
        return view

    def give(self, r):
        jax = sys.modules["jax"]
        if type(r) is Array:
            if _on_gpu(r) and any(d.platform in ("gpu", "cuda") for d in jax.devices()):
                return jax.dlpack.from_dlpack(r)
            r = r.numpy()
        return jax.numpy.asarray(r)  # (JAX's own dtype rules apply: float64 only with jax_enable_x64, as jnp.asarray)


class Cupy(Library):
    name = "CuPy"

    def owns(self, a):
        cupy = sys.modules.get("cupy")
        return cupy is not None and isinstance(a, cupy.ndarray)

    def take(self, a, where, device):
        return _on_cuda(a, device)

    def give(self, r):
        return sys.modules["cupy"].asarray(r)  # a cuda tj.Array in place (__cuda_array_interface__), else a copy


def _on_gpu(r: Array) -> bool:
    """Whether r is in a CUDA GPU's memory (a cuda device's array; the CPU emulator's cuda device has its memory
    on the host, which no library's GPU arrays can take)."""
    return r.device.name.startswith("cuda") and not emulator.emulates("cuda")


def _own(r: np.ndarray) -> np.ndarray:
    """r, or a copy where torch could not share it (read-only memory, a byte-swapped or unaligned layout)."""
    if r.flags.writeable and r.dtype.isnative and r.flags.aligned:
        return r
    return np.array(r)


LIBRARIES: tuple[Library, ...] = (Torch(), Jax(), Cupy())
_MODULES = ("torch", "jax", "cupy")
_BY_TYPE: dict[type, Library | None] = {}  # an argument's type -> its library (or None): asked once per type
_UNKNOWN: Any = object()  # (not yet asked)


def library_of(args: tuple, kwargs: dict) -> Library | None:
    """The library whose arrays are among these arguments, or None (NumPy's arrays only, as most calls)."""
    if not any(m in sys.modules for m in _MODULES):
        return None
    found: Library | None = None
    for a in (*args, *kwargs.values()):
        t = type(a)
        lib = _BY_TYPE.get(t, _UNKNOWN)
        if lib is _UNKNOWN:
            lib = _BY_TYPE[t] = next((lib for lib in LIBRARIES if lib.owns(a)), None)
        if lib is not None:
            if found is not None and found is not lib:
                raise ArgumentError(
                    f"arrays of {found.name} and {lib.name} in one call: a kernel's results take the type of "
                    "its arguments' library, so convert one of them (e.g. torch.from_dlpack(jax_array))"
                )
            found = lib
    return found


def call(kernel, lib: Library, args: tuple, kwargs: dict, device):
    """kernel._call with lib's arrays converted for it, and its results converted back."""
    given: dict[int, object] = {}  # id of what the kernel got -> the caller's object (returned as itself)

    def take(a, where):
        if not lib.owns(a):
            return a
        taken = lib.take(a, where, device)
        given[id(taken)] = a
        return taken

    names = kernel._names
    args = tuple(take(a, lambda i=i: f"argument {names[i] if i < len(names) else i}") for i, a in enumerate(args))
    kwargs = {k: take(v, lambda k=k: f"argument {k}") for k, v in kwargs.items()}
    result = kernel(*args, device=device, **kwargs)  # (NumPy's arrays now: the cached call's fast path)
    return _convert(result, lib, given)


def _convert(r, lib: Library, given: dict):
    if id(r) in given:
        return given[id(r)]
    if type(r) is Array or isinstance(r, (np.ndarray, np.generic)):
        return lib.give(r)
    if isinstance(r, tuple):
        items = [_convert(x, lib, given) for x in r]
        return type(r)(*items) if hasattr(r, "_fields") else type(r)(items)
    if isinstance(r, list):
        return [_convert(x, lib, given) for x in r]
    if isinstance(r, dict):
        return {k: _convert(v, lib, given) for k, v in r.items()}
    return r
