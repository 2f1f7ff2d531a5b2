"""The error record of a kernel that can fault (kernel_ir.Fault: an index out of bounds, an integer to a
negative power) on the SIMT devices: a 16-byte buffer, zeroed before the launch, read after it."""

from __future__ import annotations

import numpy as np

from tracejit.ir.kernel_ir import KernelIR, fault_error

RECORD_WORDS = 4  # int32: the fault's code (0: none), its value's low and high halves, how many faults
RECORD_BYTES = 4 * RECORD_WORDS
CAPTURE_REFUSED = (
    "kernel {name} can raise an error NumPy would raise (an index out of bounds, an integer to a "
    "negative power), which a captured graph cannot report on {device}; call it outside "
    "tj.capture()"
)


def raise_recorded(kernels: list[KernelIR], record: np.ndarray) -> None:
    """Raise the fault recorded in `record` (the buffer's bytes or int32 words) by one of kernels, if any."""
    words = np.frombuffer(np.ascontiguousarray(record).tobytes(), np.int32, RECORD_WORDS)
    if words[0]:
        raise fault_error(kernels, int(words[0]), int(words[1:3].view(np.int64)[0]))
