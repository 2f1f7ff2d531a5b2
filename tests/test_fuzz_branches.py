"""A fuzzer of conditionals (issue 46): random programs of `if`/`else` statements, conditional expressions and
Python's min/max whose tests read the arrays, some nested, some on a Python-number argument; each compiled as a
kernel (written to a real source file, as a user's code is) and compared with the same function run by NumPy."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import numpy as np
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import tracejit as tj
from reference import assert_close, module_from_source

EXAMPLES = int(os.environ.get("TRACEJIT_FUZZ_EXAMPLES", "0")) or 25   # more: TRACEJIT_FUZZ_EXAMPLES=250
_DIR = tempfile.mkdtemp(prefix="tracejit-fuzz-branches-")   # the programs' module files, removed at exit
atexit.register(shutil.rmtree, _DIR, ignore_errors=True)

_VALUES = ["x", "y", "x * 2", "y - x", "-x", "x * y", "np.abs(y) + 0.5", "a", "b"]   # a, b: bound names
_TESTS = ["x.sum() > 0", "y.max() > x.min()", "x[0] > y[1]", "n > 2", "(x * y).sum() < 0.5"]


@st.composite
def statements(draw, depth=0) -> list[str]:
    """Lines of a branch body that bind a and b (nested ifs included), indented by the caller."""
    lines = []
    for name in ("a", "b"):
        kind = draw(st.sampled_from(["plain", "ifexp", "min", "max", "if", "return"] if depth < 2 else ["plain", "ifexp"]))
        v1, v2 = draw(st.sampled_from(_VALUES[:7])), draw(st.sampled_from(_VALUES))
        if kind == "plain":
            lines.append(f"{name} = {v1}")
        elif kind == "ifexp":
            lines.append(f"{name} = {v1} if {draw(st.sampled_from(_TESTS))} else {v2}")
        elif kind == "return":   # an early return (source_rewrite._lift_returns: the rest is the other branch)
            lines += [f"if {draw(st.sampled_from(_TESTS))}:", f"    return {v1} - 1", f"{name} = {v2}"]
        elif kind in ("min", "max"):
            lines.append(f"{name} = {kind}(({v1})[0], ({v1})[1] * 0.5) + x * 0")   # (a vector, as the others)
        else:
            then, orelse = draw(statements(depth + 1)), draw(statements(depth + 1))
            lines += [f"if {draw(st.sampled_from(_TESTS))}:", *("    " + s for s in then), "else:",
                      *("    " + s for s in orelse)]
    return lines


def _function(lines: list[str]):
    """The program as a function in a real module file (its conditionals are rewritten from its source)."""
    body = "\n".join("    " + s for s in ["a = x", "b = y", *lines, "return a + b * 2"])
    source = f"import numpy as np\n\n\ndef program(x, y, n):\n{body}\n"
    module = module_from_source(source, _DIR, "tracejit_fuzz_branches")
    return module.program, source


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
@given(lines=statements(), seed=st.integers(0, 2**16), n=st.integers(0, 4))
def test_random_conditionals_match_numpy(device, lines, seed, n):
    fn, source = _function(lines)
    note(source)
    rng = np.random.default_rng(seed)
    x, y = (rng.standard_normal(5).astype(np.float32) for _ in range(2))
    expected = fn(x.copy(), y.copy(), n)
    assert_close(tj.kernel(fn)(x, y, n, device=device), expected)
