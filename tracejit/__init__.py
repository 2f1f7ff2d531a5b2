"""tracejit: NumPy-style Python functions traced, fused and compiled into fast kernels.

import tracejit as tj

@tj.kernel
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
"""

from __future__ import annotations

from tracejit.version import __version__  # noqa: F401

from tracejit.errors import (  # noqa: F401
    ArgumentError,
    ArgumentValueError,
    AssignmentError,
    CastingError,
    CompileError,
    CompileTimeoutError,
    DeviceError,
    DtypeError,
    FallbackWarning,
    IndexOutOfBoundsError,
    InvalidIndexError,
    InternalError,
    OutOfMemoryError,
    RecursionLimitError,
    ScalarOverflowError,
    ShapeError,
    TraceError,
    TracejitError,
    UnsupportedError,
)
from tracejit.frontend.capture import Graph, capture, jit  # noqa: F401
from tracejit.numpy.functions import *  # noqa: F401,F403  (each module's __all__ is its public part)
from tracejit.numpy.reductions import *  # noqa: F401,F403
from tracejit.numpy.creation import *  # noqa: F401,F403
from tracejit.numpy.methods import *  # noqa: F401,F403
from tracejit.numpy.linalg import *  # noqa: F401,F403
from tracejit.numpy.einsum import *  # noqa: F401,F403
from tracejit.numpy.indexing import *  # noqa: F401,F403
from tracejit.numpy.scatter import *  # noqa: F401,F403
from tracejit.numpy.histogram import *  # noqa: F401,F403
from tracejit.numpy.ufuncs import *  # noqa: F401,F403
from tracejit.numpy.joining import *  # noqa: F401,F403
from tracejit.numpy.movement import *  # noqa: F401,F403
from tracejit.numpy.padding import *  # noqa: F401,F403
from tracejit.numpy.scans import *  # noqa: F401,F403
from tracejit.numpy.sorting import *  # noqa: F401,F403
from tracejit.numpy.control_flow import *  # noqa: F401,F403
from tracejit.frontend.kernel import kernel  # noqa: F401
from tracejit.frontend.signature import spec  # noqa: F401
from tracejit.numpy.tensor import Tensor  # noqa: F401
from tracejit.frontend.warm import warm  # noqa: F401
from tracejit.frontend.benchmarking import Benchmark, benchmark  # noqa: F401
from tracejit.frontend.autotune import Tuning, TuningWarning, tune  # noqa: F401
import tracejit.dask  # noqa: F401,E402  (Dask arrays as arguments join the kernel through frontend/hooks.py)
from tracejit.runtime.array import Array  # noqa: F401
import tracejit.array_api  # noqa: F401,E402  (tj.Array computes: its operators, methods and namespace)
from tracejit.runtime.registry import device as _device
from tracejit.runtime.device_info import DeviceInfo  # noqa: F401
from tracejit.runtime.registry import devices, set_default_device  # noqa: F401
from tracejit.runtime.registry import set_memory_limit  # noqa: F401
from tracejit.runtime.profiler import profile  # noqa: F401
from tracejit.runtime.debug import set_debug  # noqa: F401
from tracejit.runtime.numba.threads import set_num_threads  # noqa: F401
from tracejit.frontend.raw_kernel import RawKernel  # noqa: F401
from tracejit.runtime.selection import select_device  # noqa: F401
from tracejit import random  # noqa: F401  (tj.random.seed)


def device(name: str | None = None):
    """The device object for "numba", "opencl:1", ... (None: the default device)."""
    return _device(name)


def asarray(obj, device: str | None = None) -> Array:
    """Put obj on a device as a tj.Array (a no-op for a tj.Array already there)."""
    dev = _device(device)
    if isinstance(obj, Array) and obj.device is dev:
        return obj
    if hasattr(obj, "__cuda_array_interface__") and not isinstance(obj, Array) and dev.imports_foreign:
        return dev.import_foreign(obj)  # another library's GPU array on this GPU: no copy
    import numpy as np
    from tracejit.frontend.signature import normalize

    host = obj.numpy() if isinstance(obj, Array) else normalize(obj, "numba")
    host = host.numpy() if isinstance(host, Array) else np.asarray(host)
    from tracejit.frontend.signature import describe

    describe(host, 0)  # rejects unsupported dtypes with a clear error
    return Array(dev.from_numpy(host), dev)


def synchronize(device: str | None = None) -> None:
    """Wait until all work queued on the device has finished."""
    _device(device).synchronize()
