"""Which sizes of a kernel are symbolic, arguments of its code (issue 19), for every device: those that
changed since the first kernel with its size-free key (ir/sizes.py), those that follow a symbolic dimension
(Program.twin), and those an earlier process made symbolic (kept in the disk cache)."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Set

import numpy as np

from tracejit.ir.fuse import Program
from tracejit.ir.kernel_ir import KernelIR
from tracejit.ir.sizes import Slot, kernel_sizes, size_free_key
from tracejit.runtime.cache.key import tracejit_part
from tracejit.runtime.debug import log, stage
from tracejit.runtime.cache.disk import CACHE, CacheKey

KEYS_MAX = 4096  # size-free keys whose sizes are tracked (forgetting one re-specialises its next size)


class SymbolicSizes:
    """A kernel's sizes are constants of its first compile; those that change in a later kernel with the same
    size-free key (the same code but for those values) become symbolic, compiled once more and reused by
    every later size. Sizes found to follow the shapes otherwise (tj.spec's named dimensions,
    @tj.kernel(dynamic=True): Program.twin) are symbolic from the first compile. Kept per size-free key and
    loop kind (numba) or device: the sizes of its first kernel and the slots that are symbolic, remembered
    in the disk cache so that a later process goes straight to that kernel. `slot_argument(kernel, slot)`:
    the dtype a size is passed as where the device's renderer can take it as an argument (codegen.numba's,
    codegen.cstyle's), else None; `kind`: the disk cache's name for the device's records."""

    def __init__(self, slot_argument: Callable[[KernelIR, Slot], np.dtype | None], kind: str):
        self._seen: dict[tuple, tuple[dict, set]] = {}
        self._lock = threading.Lock()
        self.slot_argument, self.kind = slot_argument, kind

    def symbolic(
        self, kernel: KernelIR, loop: str, values: dict, named: Set[Slot] | Callable[[], Set[Slot]] = frozenset()
    ) -> dict[Slot, str]:
        """The sizes of this kernel to render as arguments, by slot: those that changed since the first
        kernel with its size-free key (a second row length of a softmax makes the row length symbolic, and
        every later one reuses that compile). The first with a key is specialised (none). `values`: the
        kernel's sizes. Only sizes that can be arguments are returned (slot_argument). `named`: slots of
        sizes that follow a dimension tj.spec named, any dimension under @tj.kernel(dynamic=True) or a named
        axis under dynamic={"x": (0,)} (found from Program.twin): symbolic from the first compile, and
        remembered for later processes. A callable `named` is asked only for a key without symbolic sizes
        yet (it may trace the function at other sizes: Program.twin)."""
        key = (size_free_key(kernel, values), loop)
        if callable(named):  # (outside the lock: it may trace)
            with self._lock:
                seen = self._seen.get(key)
            following = named() if seen is None or not seen[1] else frozenset()
        else:
            following = named
        with self._lock:
            seen = self._seen.get(key)
            if seen is None:
                if len(self._seen) >= KEYS_MAX:  # forgetting only re-specialises a kernel's next size
                    self._seen.clear()
                # sizes seen to change in an earlier process (or named by a warm) are arguments at once:
                # that compile is in the disk cache, and this size reuses it
                known = {
                    slot
                    for slot in self._remembered(kernel, key)
                    if slot in values and self.slot_argument(kernel, slot) is not None
                }
                self._seen[key] = seen = (values, known)
            first, changed = seen
            new = {
                slot
                for slot, v in values.items()
                if not same(first[slot], v) and self.slot_argument(kernel, slot) is not None
            } - changed
            if following - changed:
                log(1, f"{kernel.name}: {len(following - changed)} size(s) follow the shapes: arguments of its code")
                changed |= following
                self._remember(kernel, key, changed)
            if new:
                changes = ", ".join(dict.fromkeys(f"{first[slot]} -> {values[slot]}" for slot in sorted(new)))
                log(
                    1,
                    f"{kernel.name}: sizes changed since its first compile ({changes}): now arguments of its "
                    f"code, compiled once more and reused by later sizes",
                )
                changed |= new
                self._remember(kernel, key, changed)
            return {slot: f"tj_s{n}" for n, slot in enumerate(sorted(changed))}

    def of(self, program: Program, index: int, loop: str) -> dict[Slot, str]:
        """symbolic() for kernel `index` of a program: none under dynamic=False; sizes that follow the
        shapes (named()) from the first compile."""
        if program.dynamic is False:
            return {}
        kernel = program.kernels[index]
        values = kernel_sizes(kernel)
        return self.symbolic(kernel, loop, values, lambda: self.named(kernel, values, program.twin, index))

    def named(self, kernel: KernelIR, values: dict, twin: Program | None, index: int) -> set[Slot]:
        """The slots of the sizes of kernel `index` that differ in the program's twin (traced at other sizes of the
        dimensions tj.spec named, or of those dynamic= makes symbolic): those follow the shapes. Empty
        where there is no twin, or where the twin's kernel has another shape of code (it would need a
        compile of its own: a threshold lies between the sizes)."""
        if twin is None or index >= len(twin.kernels) or index in twin.library_calls:
            return set()
        other = twin.kernels[index]
        other_values = kernel_sizes(other)
        if size_free_key(kernel, values) != size_free_key(other, other_values):
            log(1, f"{kernel.name}: its code takes another shape at other sizes; its sizes stay constants")
            return set()
        return {
            slot
            for slot, v in values.items()
            if not same(other_values[slot], v) and self.slot_argument(kernel, slot) is not None
        }

    def _key(self, kernel: KernelIR, key: tuple) -> CacheKey:
        """The disk cache entry recording which sizes of a size-free key are symbolic."""
        return CacheKey(
            self.kind,
            kernel.name,
            (
                ("kernel", hashlib.sha256(repr(key).encode()).hexdigest()),
                ("tracejit", tracejit_part()),
            ),
        )

    def _remembered(self, kernel: KernelIR, key: tuple) -> set[Slot]:
        """The slots of a key's sizes an earlier process made symbolic, from the disk cache (none if unknown)."""
        with stage("disk cache"):
            payload, _ = CACHE.lookup(self._key(kernel, key))
        if payload is None:
            return set()
        try:
            return {(int(i), int(j)) for i, j in json.loads(payload)}
        except (ValueError, TypeError):  # not ours: the sizes are found again
            return set()

    def _remember(self, kernel: KernelIR, key: tuple, slots: set[Slot]) -> None:
        with stage("disk cache"):
            CACHE.put(self._key(kernel, key), json.dumps(sorted(slots)).encode())


class InMemorySizes(SymbolicSizes):
    """Symbolic sizes of this process only, never read from nor written to the disk cache: a layout choice
    other than the device's own (runtime/choices.py, `python -m tracejit tune`) compiles one size-free key
    with other tile extents, which must neither read as sizes that changed nor tell later processes to take
    those extents as arguments."""

    def _remembered(self, kernel, key):
        return set()

    def _remember(self, kernel, key, slots) -> None:
        pass


def same(a, b) -> bool:
    """Two sizes alike: equal, and equal as bits where floats (so NaN is NaN, and 0.0 is not -0.0)."""
    if isinstance(a, (float, np.floating)) or isinstance(b, (float, np.floating)):
        return np.float64(a).tobytes() == np.float64(b).tobytes()
    return a == b
