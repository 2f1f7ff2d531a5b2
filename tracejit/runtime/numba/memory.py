"""The numba device's memory: NumPy arrays in and out (large results' blocks kept by output_pool.py), graph
capture's copies and shared intermediates."""

from __future__ import annotations

import numpy as np

from tracejit.runtime import dlpack
from tracejit.runtime.array import Array
from tracejit.runtime.device_stats import no_pool
from tracejit.runtime.numba.output_pool import OutputPool
from tracejit.runtime.sharing import plan_sharing


def _root(a: np.ndarray) -> np.ndarray:
    """The array that owns the memory a view looks at."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


class NumbaMemory:
    """The device's arrays, NumPy's (a role of NumbaDevice, which sets these attributes)."""

    name: str
    outputs: OutputPool

    def memory(self):
        # NumPy's arrays: tracejit keeps no count of host memory in use; it keeps large results' blocks
        return None, None, self.outputs.held_bytes

    def set_memory_limit(self, nbytes) -> None:
        no_pool(self.name)

    memory_limit = None

    def from_numpy(self, a: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(a).reshape(np.shape(a))  # (ascontiguousarray makes a 0-d array 1-d)

    def clone(self, data: np.ndarray) -> np.ndarray:
        return data.copy()

    def to_numpy(self, data: np.ndarray) -> np.ndarray:
        return data

    def dlpack(self, data, *args, **kwargs):
        if data.dtype.kind == "V":  # bfloat16: NumPy has no DLPack code for it, tracejit's capsule does
            return dlpack.of_host(data)
        return data.__dlpack__(*args, **kwargs)

    def dlpack_device(self, data):
        return data.__dlpack_device__()

    # -- graph capture --
    def own(self, a) -> np.ndarray:
        """A graph's own copy of an input, in the same memory layout where NumPy can keep it."""
        src = a._data if type(a) is Array else a
        out = np.empty_like(src)
        np.copyto(out, src)
        return out

    def feed(self, owned: np.ndarray, a) -> None:
        np.copyto(owned, a._data if type(a) is Array else a)

    def memory_of(self, value) -> int:
        """The array that owns the memory of a value of this device."""
        return id(_root(value))

    def share_memory(self, launches, scratch: set[int]):
        """Intermediates whose lifetimes do not overlap share blocks (see plan_sharing)."""
        uses = [
            [(pos, _root(a), a.nbytes) for pos, a in enumerate(args) if isinstance(a, np.ndarray)]
            for _, args in launches
        ]
        blocks, nbytes = plan_sharing(uses, scratch, lambda n: np.empty(n, np.uint8))
        out = []
        for (fn, args), used in zip(launches, uses):
            roots = {pos: r for pos, r, _ in used}  # the arrays among the arguments (a global size is not)
            out.append(
                (
                    fn,
                    tuple(
                        blocks[id(roots[pos])][: a.nbytes].view(a.dtype)
                        if pos in roots and id(roots[pos]) in blocks
                        else a
                        for pos, a in enumerate(args)
                    ),
                )
            )
        return out, nbytes
