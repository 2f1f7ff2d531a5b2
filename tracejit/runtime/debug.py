"""TRACEJIT_DEBUG levels: 1 compiles with timings, 2 launches, 3 the IRs, 4 generated source."""
from __future__ import annotations

import os
import sys

LEVEL = int(os.environ.get("TRACEJIT_DEBUG", "0") or 0)


def log(level: int, message: str) -> None:
    if LEVEL >= level:
        print(f"[tracejit] {message}", file=sys.stderr)
