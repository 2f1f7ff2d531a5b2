"""Differential fuzzing: hypothesis builds small random programs (elementwise chains with broadcasting,
reductions over random axes, transposes, strided slices, reshapes) over small float inputs. One
interpreter runs a program on NumPy arrays and, inside a kernel, on traced tensors; results must agree.
Every op is safe on its whole domain, so no NaN or inf arises and nothing needs filtering."""
from __future__ import annotations

import operator
import os

import numpy as np
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

import tracejit as tj
from reference import assert_close

UNARY = {
    "neg": operator.neg,
    "abs": abs,
    "tanh": np.tanh,
    "sin": np.sin,
    "exp(tanh)": lambda v: np.exp(np.tanh(v)),
    "log(|v|+1)": lambda v: np.log(np.abs(v) + 1.0),
    "sqrt(|v|+1)": lambda v: np.sqrt(np.abs(v) + 1.0),
    "0.5v+0.25": lambda v: v * 0.5 + 0.25,
    "square": lambda v: v * v,
    "leaky relu": lambda v: np.where(v > 0, v, 0.1 * v),
}
BINARY = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "a/(|b|+1)": lambda a, b: a / (np.abs(b) + 1.0),
    "where(a>b,a,b)": lambda a, b: np.where(a > b, a, b),
}
REDUCTIONS = ["sum", "max", "min", "mean"]
MAX_RANK = 4
MAX_MAGNITUDE = 1e3  # programs whose values grow past this are skipped, so tolerances stay meaningful
EXAMPLES = int(os.environ.get("TRACEJIT_FUZZ_EXAMPLES", "0")) or 60   # more: TRACEJIT_FUZZ_EXAMPLES=2000


def apply_step(step, values):
    """One step of a program; works on NumPy arrays and on traced tensors alike."""
    kind, *params = step
    if kind == "unary":
        name, i = params
        return UNARY[name](values[i])
    if kind == "binary":
        name, i, j = params
        return BINARY[name](values[i], values[j])
    if kind == "reduce":
        op, i, axis, keepdims = params
        return getattr(values[i], op)(axis=axis, keepdims=keepdims)
    if kind == "transpose":
        i, perm = params
        return values[i].transpose(*perm)
    if kind == "slice":
        i, index = params
        return values[i][index]
    if kind == "reshape":
        i, shape = params
        return np.reshape(values[i], shape)
    if kind == "expand":
        i, position = params
        return values[i][(slice(None),) * position + (None,)]
    raise AssertionError(f"unknown step {step}")


def run_program(program, inputs):
    values = list(inputs)
    for step in program:
        values.append(apply_step(step, values))
    return values[-1]


def make_kernel(program, n_inputs):
    """A kernel with one named parameter per input (no *args) running the program."""
    if n_inputs == 1:
        return tj.kernel(lambda a: run_program(program, [a]))
    if n_inputs == 2:
        return tj.kernel(lambda a, b: run_program(program, [a, b]))
    return tj.kernel(lambda a, b, c: run_program(program, [a, b, c]))


# ---------------------------------------------------------------------------------------------
# Drawing programs: each step is chosen knowing the shapes so far (the NumPy values are computed
# as the program grows), so every drawn program is valid.


def broadcastable(a, b):
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


def draw_axis(data, ndim):
    choices = [st.none()]
    if ndim:
        choices.append(st.integers(-ndim, ndim - 1))
        choices.append(st.lists(st.integers(-ndim, ndim - 1), min_size=1, max_size=ndim,
                                unique_by=lambda a: a % ndim).map(tuple))
    return data.draw(st.one_of(choices), label="axis")


def draw_slice(data, size):
    step = data.draw(st.sampled_from([1, 2, 3, -1, -2]), label="step")
    start = data.draw(st.none() | st.integers(-size, size - 1), label="start")
    stop = data.draw(st.none() | st.integers(-size, size), label="stop")
    chosen = slice(start, stop, step)
    if not range(*chosen.indices(size)):
        chosen = slice(None, None, step)  # keep every array non-empty (max of nothing is an error)
    return chosen


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def draw_reshape(data, size):
    first = data.draw(st.sampled_from(divisors(size)), label="first")
    second = data.draw(st.sampled_from(divisors(size // first)), label="second")
    shape = data.draw(st.sampled_from([(size,), (first, size // first),
                                       (first, second, size // (first * second))]), label="shape")
    if data.draw(st.booleans(), label="infer one dim"):
        at = data.draw(st.integers(0, len(shape) - 1))
        shape = shape[:at] + (-1,) + shape[at + 1:]
    return shape


def draw_step(data, values):
    i = data.draw(st.integers(0, len(values) - 1), label="operand")
    v = values[i]
    kinds = ["unary", "binary", "reduce", "reshape"]
    if v.ndim >= 1:
        kinds.append("slice")
    if v.ndim >= 2:
        kinds.append("transpose")
    if v.ndim < MAX_RANK:
        kinds.append("expand")
    kind = data.draw(st.sampled_from(kinds), label="kind")
    if kind == "unary":
        return ("unary", data.draw(st.sampled_from(sorted(UNARY))), i)
    if kind == "binary":
        partners = [j for j, w in enumerate(values) if broadcastable(v.shape, w.shape)]
        return ("binary", data.draw(st.sampled_from(sorted(BINARY))), i, data.draw(st.sampled_from(partners)))
    if kind == "reduce":
        return ("reduce", data.draw(st.sampled_from(REDUCTIONS)), i, draw_axis(data, v.ndim), data.draw(st.booleans()))
    if kind == "transpose":
        return ("transpose", i, tuple(data.draw(st.permutations(range(v.ndim)))))
    if kind == "slice":
        axis = data.draw(st.integers(0, v.ndim - 1), label="slice axis")
        return ("slice", i, (slice(None),) * axis + (draw_slice(data, v.shape[axis]),))
    if kind == "reshape":
        return ("reshape", i, draw_reshape(data, v.size))
    return ("expand", i, data.draw(st.integers(0, v.ndim), label="position"))


def draw_inputs(data):
    base = data.draw(st.lists(st.integers(1, 5), max_size=3), label="base shape")
    n_inputs = data.draw(st.integers(1, 3), label="inputs")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    rng = np.random.default_rng(seed)
    inputs = []
    for _ in range(n_inputs):
        dropped = data.draw(st.integers(0, len(base)), label="leading dims dropped")
        shape = tuple(1 if data.draw(st.booleans(), label="broadcast dim") else n for n in base[dropped:])
        dtype = data.draw(st.sampled_from(["float32", "float64"]), label="dtype")
        inputs.append(rng.uniform(-2.0, 2.0, shape).astype(dtype))
    return inputs


def random_chain(rng: np.random.Generator, inputs, depth: int):
    """A program `depth` steps deep, drawn with rng (hypothesis draws a seed: thousands of draws would
    overrun its buffer): each step an elementwise op of the latest value, with any earlier value as the
    partner of a binary one, now and then a reduction kept as a dimension; a value past 10 in magnitude is
    squashed by tanh, so the program stays in range however deep. Returns (program, NumPy values)."""
    values, program = [np.asarray(x) for x in inputs], []
    while len(program) < depth:
        last = len(values) - 1
        ndim, r = values[last].ndim, rng.random()
        if r < 0.5:
            step = ("unary", str(rng.choice(sorted(UNARY))), last)
        elif r < 0.95 or not ndim:
            partners = [j for j, w in enumerate(values) if broadcastable(values[last].shape, w.shape)]
            step = ("binary", str(rng.choice(sorted(BINARY))), last, int(rng.choice(partners)))
        else:
            step = ("reduce", str(rng.choice(REDUCTIONS)), last, int(rng.integers(-ndim, ndim)), True)
        for step in (step, ("unary", "tanh", len(values))):
            with np.errstate(all="raise", under="ignore"):
                values.append(np.asarray(apply_step(step, values)))
            program.append(step)
            if np.max(np.abs(values[-1]), initial=0.0) <= 10:
                break
    return program, values


def describe(program, inputs):
    lines = [f"v{i} = input {x.dtype} {x.shape}" for i, x in enumerate(inputs)]
    lines += [f"v{len(inputs) + n} = {step}" for n, step in enumerate(program)]
    return "\n".join(lines)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
@given(data=st.data())
def test_random_program_matches_numpy(data, device):
    check_random_program(data, device)


def check_random_program(data, device: str) -> None:
    """Draw a program and its inputs, run it on NumPy and on `device`, compare."""
    inputs = draw_inputs(data)
    values = list(inputs)
    program = []
    for _ in range(data.draw(st.integers(1, 5), label="steps")):
        step = draw_step(data, values)
        program.append(step)
        with np.errstate(all="raise"):
            values.append(np.asarray(apply_step(step, values)))  # a full reduction gives a NumPy scalar
    note(describe(program, inputs))
    magnitude = max(float(np.max(np.abs(v), initial=0.0)) for v in values)
    assume(magnitude <= MAX_MAGNITUDE)

    rtol = 1e-4 if any(x.dtype == np.float32 for x in inputs) else 1e-9
    kernel = make_kernel(program, len(inputs))
    try:
        result = kernel(*inputs, device=device)
    except tj.DtypeError:
        if device == "numba":
            raise
        assume(False)   # a dtype the device lacks (WGSL: float64) sets this example aside
    assert_close(result, values[-1], rtol=rtol, atol=rtol * max(1.0, magnitude))
    # a second call, on new data of the same signature, goes through the cached plan
    second = [np.random.default_rng(len(program)).uniform(-2.0, 2.0, x.shape).astype(x.dtype) for x in inputs]
    with np.errstate(all="ignore"):
        expected = np.asarray(run_program(program, second))
    assert_close(kernel(*second, device=device), expected, rtol=rtol,
                 atol=rtol * max(1.0, magnitude, float(np.max(np.abs(expected), initial=0.0))), what="second call")


# on numba (and on opencl where more examples are asked for: its deep programs are PoCL compiles, 22 of make test's
# seconds at 400); a tenth of it on the other devices. What depth tests (the graph's walks, MAX_FUSED_DEPTH) is the
# frontend's and the fuser's, the same for every device.
DEEP_STEPS = 400


@settings(max_examples=max(3, EXAMPLES // 20), deadline=None, suppress_health_check=[HealthCheck.too_slow],
          print_blob=True)
@given(data=st.data())
def test_deep_random_program_matches_numpy(data, device):
    """Random programs hundreds of operations deep (a Python loop's worth): past the depth where the graph's
    walks once hit Python's recursion limit, and cut into several kernels (ir/fuse.py MAX_FUSED_DEPTH)."""
    inputs = draw_inputs(data)
    if device in ("webgpu", "metal"):
        inputs = [x.astype(np.float32) for x in inputs]
    deep = device == "numba" or (device == "opencl" and EXAMPLES > 60)
    depth = DEEP_STEPS if deep else DEEP_STEPS // 10
    program, values = random_chain(np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="chain seed")),
                                   inputs, depth)
    note(describe(program, inputs))
    magnitude = max(float(np.max(np.abs(v), initial=0.0)) for v in values)
    rtol = 1e-4 if any(x.dtype == np.float32 for x in inputs) else 1e-9
    result = make_kernel(program, len(inputs))(*inputs, device=device)
    assert_close(result, values[-1], rtol=rtol, atol=rtol * max(1.0, magnitude))
