"""Constant tables: a NumPy array embedded in a kernel (a captured lookup table, a small mask), keyed by
its content so equal tables are one node and a changed table is a different kernel."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

# The largest array embedded as a table. GPU constant memory is 64 KiB per kernel (CUDA, OpenCL's
# guaranteed minimum); 4096 elements of float64 are half of that, leaving room for a second table.
MAX_ELEMENTS = 4096
MAX_KERNEL_BYTES = 64 * 1024  # all tables one kernel reads


@dataclass(frozen=True, eq=False)
class Table:
    """The elements of a constant array, flattened in C order (dtype and length fixed)."""

    data: bytes
    dtype: np.dtype
    digest: str = field(init=False)

    def __post_init__(self):
        h = hashlib.sha256(self.dtype.str.encode() + b"\0" + self.data).hexdigest()[:16]
        object.__setattr__(self, "digest", h)

    @staticmethod
    def of(array: np.ndarray) -> Table:
        a = np.ascontiguousarray(array)
        return Table(a.astype(a.dtype.newbyteorder("<")).tobytes(), np.dtype(a.dtype).newbyteorder("="))

    @property
    def values(self) -> np.ndarray:
        """The elements as a flat, read-only NumPy array."""
        return np.frombuffer(self.data, self.dtype.newbyteorder("<")).astype(self.dtype)

    @property
    def size(self) -> int:
        return len(self.data) // self.dtype.itemsize

    @property
    def name(self) -> str:
        """A name renderers give the table, unique for its content."""
        return f"tj_table_{self.digest}"

    def __eq__(self, other) -> bool:
        return isinstance(other, Table) and self.dtype == other.dtype and self.data == other.data

    def __hash__(self) -> int:
        return hash((self.digest, self.dtype.str))

    def __repr__(self) -> str:  # the printed IRs are keys: the digest stands for the content
        return f"table<{self.dtype.name}[{self.size}]:{self.digest}>"
