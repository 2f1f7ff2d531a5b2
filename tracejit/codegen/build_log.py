"""Compiler messages made readable: each message followed by the generated line it points at."""

from __future__ import annotations

import contextvars
import re

MAX_MESSAGES = 40


def annotate(header: str, source: str, build_log: str, line_pattern: str) -> str:
    """`header`, then the compiler's log; `line_pattern` is a regex whose first group is the line number
    a message refers to (OpenCL: ':12:5:', NVRTC: '.cu(12)')."""
    lines = source.splitlines()
    user = USER_SOURCE.get()
    out = [re.sub(r"generated (\w+ )?kernel", r"\1kernel", header) if user else header]
    for entry in build_log.strip().splitlines()[:MAX_MESSAGES]:
        out.append("  " + entry)
        m = re.search(line_pattern, entry)
        if m and 0 < int(m.group(1)) <= len(lines):
            out.append(f"    {'' if user else 'generated '}line {m.group(1)}: {lines[int(m.group(1)) - 1].strip()}")
    if not user:
        out.append("This is a tracejit bug; please report it with TRACEJIT_DEBUG=4 output.")
    return "\n".join(out)


# set while a user's own source (tj.RawKernel) is compiled: its errors are the user's, not tracejit's
USER_SOURCE: contextvars.ContextVar[bool] = contextvars.ContextVar("tracejit_user_source", default=False)
