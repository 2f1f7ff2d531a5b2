"""A fuzzer of loops (issue 46): random procedures and functions with `for` loops over range() (bounds from
Python numbers, from the arrays' shapes, from an int array, from the outer loop's index) and `while` loops whose
test reads an array; bodies that assign into slices (bounded by the index too) and single elements, rebind
names, accumulate, call a helper that assigns into its argument, branch on array values, `break` and
`continue`. Each program is written to a real source file
(its loops are compiled from its source, as a user's are), run as a kernel, and compared with NumPy running the
same function: results, and the arrays it assigned into."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import tracejit as tj
from reference import assert_close, module_from_source
from tracejit.runtime.numba import element_loops

EXAMPLES = int(os.environ.get("TRACEJIT_FUZZ_EXAMPLES", "0")) or 15   # more: TRACEJIT_FUZZ_EXAMPLES=150
_DIR = tempfile.mkdtemp(prefix="tracejit-fuzz-loops-")   # the programs' module files, removed at exit
atexit.register(shutil.rmtree, _DIR, ignore_errors=True)

_HEADERS = [   # (the loop's first line, its index name or None)
    ("for i in range(n):", "i"),
    ("for i in range(1, u.shape[0] - 1):", "i"),
    ("for i in range(m, 2 * n + 3):", "i"),
    ("for i in range(3):", "i"),          # short and known: traced step by step
    ("for i in range(k[0]):", "i"),       # bounds read from an array
    ("for i in range(u.shape[0] - 1, 0, -2):", "i"),
    ("while c[0] < n:", None),            # a test read from an array
    ("for i, e in enumerate(u[:6]):", "i"),   # over an array itself (loops.for_each)
    ("for i, e in zip(range(2, 9), v):", "i"),
]
_PLAIN = [   # statements any body may hold
    "u[1:-1] = u[1:-1] * 0.5 + v[:-2] * 0.25",
    "u[1:] += v[:-1] * 0.125",
    "v = v * 0.75 + u * 0.25",
    "s = s + u.sum() * 0.01",
    "w = u.copy()\nu[:] = w[::-1] * 0.5 + 1.0",
    "_halve_evens(v)",
    "t = np.tanh(v)\nv[::2] = t[1::2]",
    "if u[0] > v[0]:\n    s = s + 1.0\nelse:\n    s = s - 0.5",
    "a = u if v.sum() > 0 else v\nu = u + a * 0.01",
    "if u[0] > v[0]:\n    u[1] = v[2]\nelse:\n    v[3] += 1.0\n    s = s * 0.5",
    "if u.sum() > v.sum():\n    break",
    "if v[1] < 0:\n    continue",
]
_INDEXED = [   # statements that read the index
    "s = s + u[i % 8] * 0.01",
    "u[i % 8] = v[(i + 1) % 8]",
    "v[i % 8] += 1.0",
    "for j in range(i % 3):\n    v[j] = v[j] * 0.5 + u[j + 1]",
    "u = u + (i % 4) * 0.0625",
    "if u[i % 8] > v[(i + 3) % 8]:\n    u[i % 8], v[(i + 3) % 8] = v[(i + 3) % 8], u[i % 8]",
    "u[:i % 8] += 0.5",
    "s = s + u[:i % 8] @ v[:i % 8] * 0.01",
    "v[i % 8:] = v[i % 8:] * 0.5 + 0.25",
    "u[1:] = u[:-1] * 0.5\nv[-(i % 3) - 1:] -= u[-(i % 3) - 1:].sum() * 0.1",
    # stores through slices of the index's bounds beside whole-array work: made in place on the numba device
    # (frontend/loop_stores.py), a negative start counting from the end, a stop past the end clamped
    "u[i % 8:] = u[i % 8:] * 0.5 + v.sum() * 0.01",
    "v[(i % 5) - 3:i % 5] += 0.5",
    "u[i % 8:(i % 8) + 5] -= v[i % 8] * 0.25",
    "v[i % 8:] += 0.5\nu[i % 8:] = v[i % 8:] * 0.25",
]


@st.composite
def programs(draw) -> tuple[list[str], bool]:
    """The lines of a function's body (a loop, maybe two), and whether it returns a value (else a procedure)."""
    lines = ["s = 0.0", "c = np.zeros(1, np.int32)"]
    for _ in range(draw(st.integers(1, 2))):
        header, index = draw(st.sampled_from(_HEADERS))
        pool = _PLAIN + (_INDEXED if index else [])
        body = [draw(st.sampled_from(pool)) for _ in range(draw(st.integers(1, 3)))]
        if index is None:
            body.insert(0, "c = c + 1")   # (first: a continue must not skip it, or NumPy's loop never ends)
        lines.append(header)
        lines += ["    " + line for part in body for line in part.split("\n")]
    returns = draw(st.booleans())
    lines.append("return u + v * 2 + s" if returns else "u += s")
    return lines, returns


def _function(lines: list[str]):
    """The program as a function in a real module file."""
    body = "\n".join("    " + s for s in lines)
    source = (
        "import numpy as np\n\n\ndef _halve_evens(a):\n    a[::2] *= 0.5\n\n\n"
        f"def program(u, v, k, n, m):\n{body}\n"
    )
    module = module_from_source(source, _DIR, "tracejit_fuzz_loops")
    return module.program, source


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
@given(program=programs(), seed=st.integers(0, 2**16), n=st.integers(0, 9), m=st.integers(0, 4),
       count=st.integers(0, 6))
def test_random_loops_match_numpy(device, program, seed, n, m, count):
    lines, _ = program
    fn, source = _function(lines)
    note(source)
    rng = np.random.default_rng(seed)
    dt = np.float32 if device in ("webgpu", "metal") else np.float64
    u, v = (rng.standard_normal(8).astype(dt) for _ in range(2))
    k = np.array([count], np.int32)
    ours, theirs = (u.copy(), v.copy()), (u.copy(), v.copy())
    try:
        got = tj.kernel(fn)(*ours, k, n, m, device=device)
    except tj.DtypeError:   # a device without 64-bit integers, where the body computes with the Python-int index
        assert device in ("webgpu", "metal"), device
        return
    except tj.AssignmentError as e:   # assigning into a name that is the argument or a new array, by the data
        assert "NumPy would assign into" in str(e), str(e)
        return
    except (tj.UnsupportedError, tj.TraceError) as e:   # the refusals, each with its reason:
        # - bounds or a test read from arrays (no fallback to stepping), and an array assigned into then bound
        #   again (which array it changes differs between steps);
        # - a name bound only in the steps before a break (a value only sometimes);
        # - a break or continue in a body with an inner loop, on array values (not compiled yet)
        exits = "break" in source or "continue" in source
        assert (
            "read from arrays" in str(e) and "differs between steps" in str(e)
            or exits and "bound in only one branch" in str(e)
            or exits and "used as a Python" in str(e) and "for j in" in source
        ), str(e)
        return
    _same(got, fn(*theirs, k, n, m), ours, theirs, dt)
    if program[1]:   # a function: captured, and replayed on new data (each step's launches recorded), working on
        # copies of its arguments (a captured graph does not assign into the caller's arrays)
        copying, _ = _function(["u = u.copy()", "v = v.copy()", *lines])
        _replays_as_numpy(tj.kernel(copying), copying, device, (u, v, k, n, m), rng, dt)


def _replays_as_numpy(kernel, fn, device, args, rng, dt) -> None:
    """The kernel captured on `args`, then replayed on new values of its float arrays, as NumPy computes them;
    or refused with a reason a replay gives (something read back to the host, an error only a call reports)."""
    def copies(values):
        return [a.copy() if isinstance(a, np.ndarray) else a for a in values]
    try:
        with tj.capture() as g:
            g.outputs = kernel(*copies(args), device=device)
    except tj.UnsupportedError as e:
        assert any(why in str(e) for why in ("cannot be captured into a graph", "assigns into its argument",
                                             "can raise an error NumPy would raise")), str(e)
        return
    fresh = [rng.standard_normal(a.shape).astype(dt) if isinstance(a, np.ndarray) and a.dtype == dt else a
             for a in args]
    expected = fn(*copies(fresh))
    tol = dict(rtol=1e-4 if dt == np.float32 else 1e-9, atol=1e-5)
    inputs = [a for a in fresh if isinstance(a, np.ndarray)]   # (the graph's: its arrays, in the order passed)
    assert_close(np.asarray(g(*inputs)), expected, **tol)
    assert_close(np.asarray(g(*inputs)), expected, **tol)   # (again: loops start from their first values)


def _same(got, expected, ours, theirs, dt) -> None:
    """The kernel's result and the arrays it assigned into, as NumPy's."""
    rtol = 1e-4 if dt == np.float32 else 1e-9
    if expected is None:
        assert got is None
    else:
        assert_close(np.asarray(got), expected, rtol=rtol, atol=rtol)
    for a, b in zip(ours, theirs):
        assert_close(a, b, rtol=rtol, atol=rtol)


# --- loops over elements (ir/element_loops.py: one compiled function on the numba device) ---------------------------

_OUTER = [   # (header, lines first in the body)
    ("for i in range(n):", []),
    ("for i in range(x.shape[0]):", []),
    ("for i in range(1, x.shape[0] - 1):", []),
    ("for i in range(x.shape[0] - 1, -1, -1):", []),
    ("for i in range(k[0]):", []),
    ("for i in range(2, n, 3):", []),
    ("while t < n:", ["i = t", "t = t + 1"]),
    ("for i, w in enumerate(y):", ["s += w * 0.5"]),
    ("for w in A:", ["i = t", "t = t + 1", "w[1] = w[0] + x[i % 8]"]),   # (rows: views of A)
]
_INNER = [
    ("for j in range(i):", []),
    ("for j in range(i, x.shape[0]):", []),
    ("for j in range(k[0], n):", []),
    ("for j in range(0, x.shape[0], 2):", []),
    ("for j in range(i % 3):", []),   # (few steps, known only from the outer index)
]
_ELEMENT = [   # statements over elements; {a} is i or j
    "x[{a} % 8] = y[({a} + 3) % 8] * 0.5 + x[{a} % 8]",
    "s += x[{a} % 8]",
    "y[{a} % 8] = min(y[{a} % 8], x[({a} + 1) % 8] + 1.0)",
    "if x[{a} % 8] > y[{a} % 8]:\n    x[{a} % 8], y[{a} % 8] = y[{a} % 8], x[{a} % 8]",
    "if x[{a} % 8] > 0.5:\n    s += 1.0\nelse:\n    y[({a} + 1) % 8] -= 0.25",
    "x[-1 - {a} % 8] += y[{a} % 8 - 8] * 0.125",
    "A[{a} % 5, ({a} * 2) % 6] += x[{a} % 8]",
    "s = s * 0.5 + A[{a} % 5, {a} % 6]",
    "c = x[{a} % 8] if y[{a} % 8] > 0 else -y[{a} % 8]\ns += c",
    "m = 0\nwhile m < 2 and x[(m + {a}) % 8] > 0.1:\n    m = m + 1\ns += m",
    # many elements at once, slices bounded by the index (the loop nests inside the compiled function)
    "x[:{a} % 8] += y[:{a} % 8] * 0.5",
    "s += x[:{a} % 8] @ y[:{a} % 8]",
    "y[{a} % 8:] = y[{a} % 8:] * 0.5 + 0.25",
    "A[{a} % 5, :] = A[({a} + 1) % 5, :] * 0.5",
    "A[:, {a} % 6] -= x[:5] * A[{a} % 5, 0]",
    "A[{a} % 5, :] += A[{a} % 5, ::-1] * 0.25",
    "if x[{a} % 8] > 0.5:\n    A[:, {a} % 6] = 1.0",
    "s += A[:, {a} % 6].sum() + A[{a} % 5].max()",
    "A[({a} + 1) % 5, {a} % 6:] = A[{a} % 5, {a} % 6:] * 0.5",
    "A[{a} % 5, 1:] = x[3:]",
]
_EXITS = ["if s > 3.0:\n    break", "if x[i % 8] < 0:\n    continue"]


@st.composite
def element_programs(draw) -> list[str]:
    lines = ["s = 0.0", "t = 0"]
    header, first = draw(st.sampled_from(_OUTER))
    lines.append(header)
    body = list(first)
    for _ in range(draw(st.integers(1, 3))):
        choice = draw(st.integers(0, 5))
        if choice == 0:
            inner, _ = draw(st.sampled_from(_INNER))
            body.append(inner)
            body += ["    " + line for _ in range(draw(st.integers(1, 2)))
                     for line in draw(st.sampled_from(_ELEMENT)).format(a="j").split("\n")]
        elif choice == 1:
            body += draw(st.sampled_from(_EXITS)).split("\n")
        else:
            body += draw(st.sampled_from(_ELEMENT)).format(a="i").split("\n")
    lines += ["    " + line for line in body]
    lines.append(draw(st.sampled_from(["return x + y * 2 + s + t", "return A.sum() + s", "x += s"])))
    return lines


@pytest.mark.slow_emulated("metal")
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
@given(lines=element_programs(), seed=st.integers(0, 2**16), n=st.integers(0, 9), count=st.integers(0, 6))
def test_random_loops_over_elements_match_numpy(device, lines, seed, n, count):
    body = "\n".join("    " + s for s in lines)
    source = f"import numpy as np\n\n\ndef program(x, y, A, n, k):\n{body}\n"
    fn = module_from_source(source, _DIR, "tracejit_fuzz_element_loops").program
    note(source)
    rng = np.random.default_rng(seed)
    dt = np.float32 if device in ("webgpu", "metal") else np.float64
    x, y = (rng.standard_normal(8).astype(dt) for _ in range(2))
    A = rng.standard_normal((5, 6)).astype(dt)
    k = np.array([count], np.int32)
    ours, theirs = (x.copy(), y.copy(), A.copy()), (x.copy(), y.copy(), A.copy())
    try:
        got = tj.kernel(fn)(*ours, n, k, device=device)
    except tj.DtypeError:   # the Python-int index or counter: int64, which webgpu and metal lack
        assert device in ("webgpu", "metal"), device
        return
    except (tj.UnsupportedError, tj.TraceError) as e:   # a break or continue on array values beside an inner loop
        assert ("break" in source or "continue" in source) and (
            "used as a Python" in str(e) or "bound in only one branch" in str(e)), str(e)
        return
    _same(got, fn(*theirs, n, k), ours, theirs, dt)
    if lines[-1].startswith("return"):   # captured and replayed, on copies of its arguments (see above)
        body = "\n".join("    " + s for s in ["x = x.copy()", "y = y.copy()", "A = A.copy()", *lines])
        source = f"import numpy as np\n\n\ndef program(x, y, A, n, k):\n{body}\n"
        copying = module_from_source(source, _DIR, "tracejit_fuzz_element_loops").program
        _replays_as_numpy(tj.kernel(copying), copying, device, (x, y, A, n, k), rng, dt)


# --- a read at a place the inner loop does not change, beside a store that moves with its index ------------------
# (codegen/cpu/element_loops.py's split: the read made once per part of the loop, the loop cut after the step that
# may store there; Floyd-Warshall's path[i, k] beside path[i, j] = ...)

_MOVING_STORES = ["A[i, j]", "A[i, j + 1]", "A[i, j - 1]", "A[j, i]", "A[j + 1, i % 3]", "B[i, j]"]
_FIXED_READS = ["A[i, k]", "A[k, i]", "A[k, k]", "A[i, 0]", "A[i - 1, k]", "A[i, -1]", "B[k, i]"]
_UPDATES = [
    "{s} = min({s}, {r} + A[k, j % 3])",
    "{s} = {s} * 0.5 - {r}",
    "if {r} < {s}:\n    {s} = {r} - 1.0",
    "t = {r}\n{s} = {s} + t * 0.25\nu = {r}\n{s} = {s} - u * 0.125",
]
_SPANS = ["range(1, n - 1)", "range(k, n - 1)", "range(k + 1, n - 1)", "range(1, k)", "range(n - 2, 0, -1)"]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
@given(
    store=st.sampled_from(_MOVING_STORES),
    read=st.sampled_from(_FIXED_READS),
    update=st.sampled_from(_UPDATES),
    span=st.sampled_from(_SPANS),
    seed=st.integers(0, 2**16),
)
def test_reads_beside_a_store_that_moves_with_the_index_match_numpy(store, read, update, span, seed):
    body = update.format(s=store, r=read).split("\n")
    lines = ["n = A.shape[0]", "for k in range(n):", "    for i in range(n):", f"        for j in {span}:"]
    lines += ["            " + line for line in body]
    source = "import numpy as np\n\n\ndef program(A, B):\n" + "".join(f"    {line}\n" for line in lines)
    fn = module_from_source(source, _DIR, "tracejit_fuzz_moving_stores").program
    note(source)
    rng = np.random.default_rng(seed)
    A = rng.integers(-3, 9, (6, 6)).astype(np.float64)   # (negative entries: min() changes the element read)
    B = rng.integers(-3, 9, (6, 6)).astype(np.float64)
    ours, theirs = (A.copy(), B.copy()), (A.copy(), B.copy())
    _same(tj.kernel(fn)(*ours, device="numba"), fn(*theirs), ours, theirs, np.float64)


# --- loops whose steps are independent, run in parts on threads (ir/loop_dependence.py), and loops that look so ---

_STEP_STATEMENTS = [   # one step's work; {i} is the outer index
    "for j in range(m):\n    A[{i}, j] = A[{i}, j] * 0.5 + B[{i}, j]",
    "s = 0.0\nfor j in range(m):\n    s += B[{i}, j] * x[j]\nA[{i}, 0] = s",
    "A[{i}, {i} % 3] = A[{i}, 1] * 0.5 + B[{i}, 0]",
    "if A[{i}, 0] > 0:\n    A[{i}, 1] = -A[{i}, 1]",
    "for j in range(1, m):\n    A[{i}, j] = max(A[{i}, j], A[{i}, j - 1])",
    "t = 0\nwhile t < 3 and A[{i}, t] < 1.0:\n    t += 1\nA[{i}, 3] = t",
    "B[{i}, 0] = A[{i}, m - 1] - B[{i}, 1]",
    # steps that depend on each other: run in order
    "x[{i} % 4] += A[{i}, 0]",
    "A[{i} - 1, 0] = A[{i}, 2]",
    "A[{i}, 2] = A[-1 - {i}, 0] * 0.25",
    "A[{i}, :] = A[{i}, :] * 0.5",
    "for j in range(m):\n    A[j % 6, {i} % 5] += 0.125",
]
_STEP_RANGES = ["range(n)", "range(1, n)", "range(k, n)", "range(k, n - 1)", "range(n - 1, -1, -1)"]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
@given(
    header=st.sampled_from(_STEP_RANGES),
    picks=st.lists(st.sampled_from(_STEP_STATEMENTS), min_size=1, max_size=3),
    k=st.integers(-3, 3),
    seed=st.integers(0, 2**16),
)
def test_loops_whose_steps_may_run_on_threads_match_numpy(header, picks, k, seed):
    body = [line for pick in picks for line in pick.format(i="i").split("\n")]
    lines = ["n, m = A.shape", f"for i in {header}:", *("    " + line for line in body), "return A.sum() + x.sum()"]
    source = "import numpy as np\n\n\ndef program(A, B, x, k):\n" + "".join(f"    {line}\n" for line in lines)
    fn = module_from_source(source, _DIR, "tracejit_fuzz_parallel_steps").program
    note(source)
    rng = np.random.default_rng(seed)
    A, B = rng.standard_normal((9, 6)), rng.standard_normal((9, 6))
    x = rng.standard_normal(6)
    ours, theirs = (A.copy(), B.copy(), x.copy()), (A.copy(), B.copy(), x.copy())
    with mock.patch.object(element_loops, "PARALLEL_MIN_WORK", 0):   # (threads for any work: the parts are tested)
        got = tj.kernel(fn)(*ours, k, device="numba")
    _same(got, fn(*theirs, k), ours, theirs, np.float64)
