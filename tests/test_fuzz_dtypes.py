"""Differential fuzzing of semantics: random elementwise programs over every dtype (bool, signed and
unsigned ints, float16/32/64), inputs salted with special values (NaN, +-0, +-inf, subnormals, the
integer extremes), Python and NumPy scalar operands written in the body or passed as arguments, casts,
where, comparisons and reductions. Each program runs twice (the second time on new data, through the
cached plan) and must match NumPy exactly in dtype and, up to rounding, in value; where NumPy raises,
tracejit must raise the same built-in exception. TRACEJIT_FUZZ_EXAMPLES sets the number of examples."""
from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, Phase, assume, event, given, note, settings
from hypothesis import strategies as st

import tracejit as tj
from reference import ALL_DTYPES, assert_close, tolerances

EXAMPLES = int(os.environ.get("TRACEJIT_FUZZ_EXAMPLES", "0")) or 40
# TRACEJIT_FUZZ_KNOWN_BUGS=1 also runs the programs that hit a known bug (KNOWN_BUGS), to see them fail
RUN_KNOWN_BUGS = os.environ.get("TRACEJIT_FUZZ_KNOWN_BUGS") == "1"

UNARY = ["negative", "absolute", "sign", "square", "reciprocal", "floor", "ceil", "trunc", "rint", "sqrt",
         "exp", "log", "tanh", "sin", "exp2", "isnan", "isinf", "isfinite", "invert", "logical_not", "positive"]
BINARY = ["add", "subtract", "multiply", "true_divide", "floor_divide", "remainder", "power", "maximum",
          "minimum", "less", "less_equal", "greater", "equal", "not_equal", "bitwise_and", "bitwise_or",
          "bitwise_xor", "logical_and", "logical_or"]
REDUCTIONS = ["sum", "prod", "max", "min", "mean"]

PYTHON_SCALARS = [True, False, 0, 1, -1, 2, 3, 127, 200, 255, -129, 2**31 - 1, 2**40, 0.0, -0.0, 0.5, -1.5, 2.5,
                  1e-40, 1e300, float("nan"), float("inf"), float("-inf")]
NUMPY_SCALARS = [np.float16(2.5), np.float16(-0.0), np.float32(0.1), np.float32("nan"), np.float64(0.1),
                 np.float64("-inf"), np.int8(-3), np.int16(300), np.int32(-7), np.int64(3), np.uint8(200),
                 np.uint16(3), np.uint32(4000000000), np.bool_(True)]


def _same_type(scalar) -> list:
    """The scalars of the pools of the same type as `scalar` (Python bool, int, float, a NumPy type)."""
    return [s for s in PYTHON_SCALARS + NUMPY_SCALARS if type(s) is type(scalar)]


def _another(scalar, rng: np.random.Generator):
    same = _same_type(scalar)
    return same[rng.integers(len(same))]


def special_values(dt: np.dtype, device: str = "numba") -> list:
    if dt.kind == "b":
        return [True, False]
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return [int(info.min), int(info.max), 0, 1] + ([-1] if dt.kind == "i" else [])
    info = np.finfo(dt)
    # webgpu: GPUs flush subnormals to zero (a documented limit, README "Supported NumPy API")
    tiny = [] if device == "webgpu" else [float(info.smallest_subnormal), -float(info.smallest_subnormal)]
    # float64 just past a float16 tie: rounding it to float32 first lands on the tie (a double rounding)
    past_tie = [1 + 2**-11 + 2**-40, -(2048 + 1 + 2**-30)] if dt == np.float64 else []
    return [np.nan, np.inf, -np.inf, 0.0, -0.0, *tiny, float(info.max), -float(info.max), 0.5, -2.5, 1.5, *past_tie]


def make_array(rng: np.random.Generator, shape, dt: np.dtype, specials: bool, device: str = "numba") -> np.ndarray:
    if dt.kind == "b":
        a = rng.random(shape) < 0.5
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        a = rng.integers(max(-100, info.min), min(100, info.max), size=shape, endpoint=True).astype(dt)
    else:
        a = rng.uniform(-10, 10, shape).astype(dt)
    if specials and a.size:
        flat = a.reshape(-1)
        pool = special_values(dt, device)
        for at in rng.choice(a.size, size=max(1, a.size // 3), replace=False):
            flat[at] = pool[rng.integers(len(pool))]
    return a


# ---------------------------------------------------------------------------------------------
# Programs: steps over values (inputs, then each step's result) and scalars. A step's scalar operand is
# ("const", value): written in the body, or ("arg", k): the kernel's k-th scalar argument.

def operand(ref, values, scalars):
    kind, x = ref
    return values[x] if kind == "value" else x if kind == "const" else scalars[x]


def apply_step(step, values, scalars):
    """One step; works on NumPy arrays and traced tensors alike (through NumPy's protocols)."""
    kind, name, *refs = step
    args = [operand(r, values, scalars) for r in refs]
    if kind == "ufunc":
        return getattr(np, name)(*args)
    if kind == "where":
        return np.where(*args)
    if kind == "astype":
        return args[0].astype(name)
    if kind == "reduce":
        op, axis = name
        return getattr(np, op)(args[0], axis=axis)
    raise AssertionError(step)


def run_program(program, values, scalars):
    """The kernel's body: every step, used or not, as the program is written (NumPy raises for an unused
    step, and so does tracejit: README, "Semantics are NumPy's")."""
    return program_values(program, values, scalars)[-1]


def call_values(program, values, scalars) -> list:
    """program_values of a call NumPy does not refuse, under NumPy's ignored floating-point warnings."""
    with np.errstate(all="ignore"):
        return [np.asarray(v) for v in program_values(program, values, scalars)]


def program_values(program, values, scalars) -> list:
    """The inputs and every step's value, in NumPy."""
    values = list(values)
    for step in program:
        values.append(apply_step(step, values, scalars))
    return values


def make_kernel(program, n_inputs, n_scalars):
    """A kernel with one named parameter per input and scalar argument."""
    names = [f"a{i}" for i in range(n_inputs)] + [f"s{i}" for i in range(n_scalars)]
    env = {"run": run_program, "program": program}
    exec(f"def kernel({', '.join(names)}):\n"
         f"    return run(program, [{', '.join(names[:n_inputs])}], [{', '.join(names[n_inputs:])}])", env)
    return tj.kernel(env["kernel"])


def outcome(fn):
    """fn()'s value, or the exception it raised."""
    try:
        with np.errstate(all="ignore"):
            return np.asarray(fn()), None
    except Exception as e:   # noqa: BLE001  (which exception is what is compared)
        return None, e


# ---------------------------------------------------------------------------------------------
# Drawing programs valid for NumPy's dtype rules is not needed: where NumPy raises, tracejit must too.

def draw_scalar(data, scalar_args: list):
    python = data.draw(st.booleans(), label="python scalar")
    value = data.draw(st.sampled_from(PYTHON_SCALARS if python else NUMPY_SCALARS), label="scalar")
    if data.draw(st.booleans(), label="scalar is an argument"):
        scalar_args.append(value)
        return ("arg", len(scalar_args) - 1)
    return ("const", value)


def draw_step(data, values, scalar_args):
    i = data.draw(st.integers(0, len(values) - 1), label="operand")
    v = values[i]
    kind = data.draw(st.sampled_from(["unary", "binary", "binary", "where", "astype", "reduce"]), label="kind")
    if kind == "unary":
        return ("ufunc", data.draw(st.sampled_from(UNARY)), ("value", i))
    if kind in ("binary", "where"):
        refs = []
        for _ in range(2 if kind == "binary" else 3):
            if data.draw(st.integers(0, 3), label="scalar operand?") == 0:
                refs.append(draw_scalar(data, scalar_args))
            else:
                partners = [j for j, w in enumerate(values) if _broadcastable(v.shape, w.shape)]
                refs.append(("value", data.draw(st.sampled_from(partners))))
        refs[data.draw(st.integers(0, len(refs) - 1))] = ("value", i)   # at least one array
        if kind == "where":
            return ("where", None, *refs)
        return ("ufunc", data.draw(st.sampled_from(BINARY)), *refs)
    if kind == "astype":
        # float -> int is undefined for NaN, inf and out-of-range values (NumPy gives what the CPU gives)
        targets = [d for d in ALL_DTYPES if not (v.dtype.kind == "f" and np.dtype(d).kind in "iu")]
        return ("astype", data.draw(st.sampled_from(targets)), ("value", i))
    ops = REDUCTIONS if _order_free(v) else ["max", "min"]
    axis = data.draw(st.none() | st.integers(-max(v.ndim, 1), max(v.ndim, 1) - 1)) if v.ndim else None
    return ("reduce", (data.draw(st.sampled_from(ops)), axis), ("value", i))


def _broadcastable(a, b) -> bool:
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


def _order_free(v: np.ndarray) -> bool:
    """Whether a sum or product of v's values is the same in any order up to rounding: integers (they
    wrap), or floats without huge or tiny finite values (overflow would depend on the order)."""
    if v.dtype.kind != "f":
        return True
    finite = np.abs(v[np.isfinite(v)])
    return bool(np.all((finite == 0) | ((finite > 1e-3) & (finite < 16))))


# ---------------------------------------------------------------------------------------------
# Known bugs and limits. A program that hits one is set aside; TRACEJIT_FUZZ_KNOWN_BUGS=1 runs it too.
# Each entry names its bug exactly (the op-semantics bugs of issue 14's item 0 are fixed and gone):
# (device or "*", hit(ufuncs in the program, dtypes it sees, whether it sees special values)).

KNOWN_BUGS = [
    # a limit, not a wrong answer: a Python int *argument* beyond the other operand's int dtype raises
    # tj.ScalarOverflowError in np.where, where NumPy before 2.5 wraps (as tracejit does for a constant); see
    # README, "Semantics are NumPy's" (comparisons with one are exact: numpy/int_comparisons.py)
    ("*", lambda ops, dts, special: "python int argument" in ops and "where" in ops),
]


def _is_special(v) -> bool:
    v = np.asarray(v)
    big, tiny = (float(np.finfo(v.dtype).max) / 4, np.finfo(v.dtype).tiny) if v.dtype.kind == "f" else (1e9, 0)
    v = v.astype(np.float64)
    return bool(np.any(~np.isfinite(v) | (v == 0) & np.signbit(v) | (np.abs(v) > big) | (v != 0) & (np.abs(v) < tiny)))


def known_bug(device: str, program, dtypes, values, scalar_args, specials: bool = False) -> bool:
    """Whether the program hits a KNOWN_BUGS entry on device; `specials`: its inputs are salted with
    special values (in some call, if not in the values seen while drawing)."""
    consts = [r[1] for step in program for r in step[2:] if r[0] == "const"]
    ops = {step[1] if step[0] == "ufunc" else step[0] for step in program}
    ops |= {"nan constant"} if any(isinstance(c, (float, np.floating)) and c != c for c in consts) else set()
    ops |= {"python int argument"} if any(type(a) is int for a in scalar_args) else set()
    second_args = [s for a in scalar_args for s in _same_type(a)]   # what the second call may pass
    special = specials or any(_is_special(v) for v in [*values, *consts, *second_args])
    return any(dev in ("*", device) and hit(ops, dtypes, special) for dev, hit in KNOWN_BUGS)


# ---------------------------------------------------------------------------------------------

@settings(max_examples=EXAMPLES, deadline=None, print_blob=True, phases=[p for p in Phase if p is not Phase.explain],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_random_program_over_every_dtype_matches_numpy(data, device):
    base = tuple(data.draw(st.lists(st.integers(1, 4), max_size=2), label="base shape"))
    n_inputs = data.draw(st.integers(1, 2), label="inputs")
    specials = data.draw(st.booleans(), label="special values")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    shapes, dtypes = [], []
    for _ in range(n_inputs):
        shapes.append(tuple(1 if data.draw(st.booleans(), label="broadcast dim") else n for n in base))
        dtypes.append(np.dtype(data.draw(st.sampled_from(ALL_DTYPES), label="dtype")))
    rng = np.random.default_rng(seed)
    inputs = [make_array(rng, s, d, specials, device) for s, d in zip(shapes, dtypes)]

    values, scalar_args, program, raised = list(inputs), [], [], None
    for _ in range(data.draw(st.integers(1, 3), label="steps")):
        step = draw_step(data, values, scalar_args)
        program.append(step)
        value, raised = outcome(lambda: apply_step(step, values, scalar_args))
        if raised is not None:
            break   # NumPy refuses: the kernel must refuse with the same built-in exception
        values.append(value)
    note(describe(program, inputs, scalar_args))
    seen = {np.asarray(v).dtype for v in values} | {np.asarray(s).dtype for s in scalar_args}
    if not RUN_KNOWN_BUGS:
        assume(not known_bug(device, program, seen, values, scalar_args, specials))

    kernel = make_kernel(program, n_inputs, len(scalar_args))
    # the second call: new arrays, and new values of the same types for the scalar arguments
    second = ([make_array(rng, s, d, specials, device) for s, d in zip(shapes, dtypes)],
              [_another(a, rng) for a in scalar_args])
    # where NumPy refuses the program, once is enough: which step raises first may depend on the data
    for call, (args, scalars) in enumerate([(inputs, scalar_args)] + ([] if raised else [second])):
        expected, numpy_error = outcome(lambda: run_program(program, args, scalars))
        result, error = outcome(lambda: kernel(*args, *scalars, device=device))
        if isinstance(error, tj.DtypeError) and device != "numba":
            assume(False)   # a dtype this device cannot represent (WGSL: no 64-bit types)
        check(call, expected, numpy_error, result, error, values if numpy_error else call_values(program, args, scalars))


def check(call: int, expected, numpy_error, result, error, values) -> None:
    """`values`: this call's inputs and intermediate values, whose magnitudes set the tolerance."""
    what = f"call {call + 1}"
    event(f"NumPy raises {type(numpy_error).__name__}" if numpy_error is not None else "values compared")
    if numpy_error is not None:
        builtin = next(c for c in type(numpy_error).__mro__ if c.__module__ == "builtins")
        assert isinstance(error, builtin), (f"{what}: NumPy raises {type(numpy_error).__name__}: {numpy_error}; "
                                            f"tracejit: {error!r}")
        return
    if error is not None:
        raise AssertionError(f"{what}: NumPy gives {expected.dtype} {expected}; tracejit raised {error!r}")
    if expected.dtype.kind == "f":
        # fused kernels may contract a*b+c into one rounding and reassociate sums: a few ulps of the
        # largest value in the program, never a NaN, an infinity or its sign
        finite = [np.abs(v[np.isfinite(v)]).max(initial=0) for v in map(np.asarray, values) if v.dtype.kind == "f"]
        # (an intermediate rounded in a narrower float carries that float's error into a wider result: NumPy's
        # float32 sin is not correctly rounded, the emulated CUDA sinf is, and the two differ by an ulp there)
        narrowest = [np.asarray(v).dtype for v in values if np.asarray(v).dtype.kind == "f"]
        rtol = max(tolerances(dt)[0] for dt in [expected.dtype, *narrowest])
        magnitude = min(float(max(finite, default=1.0)), 1e6)
        assert_close(result, expected, rtol=rtol, atol=rtol * max(1.0, magnitude), what=what)
    else:
        assert_close(result, expected, what=what)


def describe(program, inputs, scalar_args) -> str:
    lines = [f"v{i} = {x.dtype}{list(x.shape)} {x.tolist()}" for i, x in enumerate(inputs)]
    lines += [f"s{k} = {type(s).__name__}({s!r})" for k, s in enumerate(scalar_args)]
    lines += [f"v{len(inputs) + n} = {step}" for n, step in enumerate(program)]
    return "\n".join(lines)


def test_every_known_bug_entry_sets_aside_the_program_it_was_written_for():
    """No entry that can never hit: each one sets aside the program of its bug."""
    programs = [  # (device, program, dtypes, values)
        ("opencl", [("ufunc", "less", ("arg", 0), ("value", 0)),
                    ("where", None, ("value", 1), ("value", 0), ("arg", 0))], {np.dtype("uint8")}, []),
    ]
    assert len(programs) == len(KNOWN_BUGS)
    for device, program, dtypes, values in programs:
        args = [-1] if program[0][2][0] == "arg" else []
        assert known_bug(device, program, dtypes, values, args), (device, program)
