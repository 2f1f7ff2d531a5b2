"""Kernels bind their arguments as Python binds them: positional-only, keyword-only (with and without
defaults), *args, **kwargs, array defaults, static parameters passed by keyword; and a fuzzer of signatures
and calls compared with the plain function."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import tracejit as tj
from reference import assert_close, run_kernel
from corpus.benchmarks import hasting   # (numpy-benchmarks' hasting: called with NumPy scalars there)

EXAMPLES = int(os.environ.get("TRACEJIT_FUZZ_EXAMPLES", "0")) or 12   # per device; more: TRACEJIT_FUZZ_EXAMPLES=200


def _x(n=5):
    return np.arange(n, dtype=np.float32) + 1


def test_keyword_only_parameter_with_default_is_used_in_either_order(device):
    def f(x, *, scale=2.0):
        return x * scale
    k = tj.kernel(f)
    x = _x()
    assert_close(run_kernel(k, x, scale=3.0, device=device), f(x, scale=3.0))
    assert_close(run_kernel(k, scale=0.5, x=x, device=device), f(x, scale=0.5))
    assert_close(run_kernel(k, x, device=device), f(x))
    assert_close(run_kernel(k, x, scale=3.0, device=device), f(x, scale=3.0))   # cached plan, new value


def test_required_keyword_only_array(device):
    def g(x, *, w):
        return x * w + 1
    k = tj.kernel(g)
    x, w = _x(), _x()[::-1].copy()
    assert_close(run_kernel(k, x, w=w, device=device), g(x, w=w))
    assert_close(run_kernel(k, w=x, x=w, device=device), g(w, w=x))
    with pytest.raises(tj.ArgumentError, match="missing a required argument: 'w'"):
        k(x, device=device)
    with pytest.raises(tj.ArgumentError, match="positional"):
        k(x, w, device=device)


def test_positional_only_parameters(device):
    def f(x, y, /, z=1.0):
        return x - y * z
    k = tj.kernel(f)
    x, y = _x(), _x() * 2
    assert_close(run_kernel(k, x, y, device=device), f(x, y))
    assert_close(run_kernel(k, x, y, z=3.0, device=device), f(x, y, z=3.0))
    with pytest.raises(tj.ArgumentError, match="positional only"):
        k(x, y=y, device=device)


def test_var_positional_and_var_keyword(device):
    def h(x, *args, k=1.0, **kw):
        r = x
        for a in args:
            r = r + a
        for name, v in kw.items():
            r = (-r if v == "yes" else r) if name == "negate" else r * v
        return r * k
    kern = tj.kernel(h)
    x = _x()
    for args, kwargs in [((), {}), ((x,), {}), ((x, 2.0), {"k": 2.0}), ((x, 2.0), {"m": 3.0, "negate": "yes"}),
                         ((), {"negate": "no", "m": x}), ((2.0, x), {"k": 0.5})]:
        assert_close(run_kernel(kern, x, *args, device=device, **kwargs), h(x, *args, **kwargs),
                     what=f"h(x, *{args!r}, **{kwargs!r})")


def test_settings_in_kwargs_are_constants_of_the_code(device):
    def f(x, **options):
        mode = options.get("mode", "add")
        fn = options.get("fn", np.negative)
        return fn(x + 1) if mode == "add" else fn(x * 2)
    k = tj.kernel(f)
    x = _x()
    for kwargs in [{}, {"mode": "mul"}, {"mode": "add", "fn": np.square}, {"fn": np.sqrt, "mode": "mul"}]:
        assert_close(run_kernel(k, x, device=device, **kwargs), f(x, **kwargs), what=str(kwargs))


def test_array_default_is_an_argument(device):
    table = np.linspace(0, 1, 5, dtype=np.float32)

    def f(x, w=table, *, bias=np.float32(0.5)):
        return x * w + bias
    k = tj.kernel(f)
    x = _x()
    assert_close(run_kernel(k, x, device=device), f(x))
    assert_close(run_kernel(k, x, x, device=device), f(x, x))
    assert_close(run_kernel(k, x, bias=2.0, device=device), f(x, bias=2.0))


def test_static_argument_passed_by_keyword(device):
    def f(x, n, *, axis=0, keep=False):
        return x[:n].sum(axis=axis, keepdims=keep)
    k = tj.kernel(static=("n", "axis", "keep"))(f)
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    assert_close(run_kernel(k, x, n=2, device=device), f(x, n=2))
    assert_close(run_kernel(k, x, 3, axis=1, device=device), f(x, 3, axis=1))
    assert_close(run_kernel(k, n=3, x=x, keep=True, axis=1, device=device), f(x, 3, axis=1, keep=True))


def test_static_names_checked():
    with pytest.raises(tj.ArgumentError, match="not parameters"):
        tj.kernel(static=("nope",))(lambda x: x)
    with pytest.raises(tj.ArgumentError, match=r"\*args"):
        tj.kernel(static=("args",))(lambda x, *args: x)


# ---- the fuzzer: a random signature, a random valid call, the plain function as reference ----

_KINDS = ("positional_only", "positional", "keyword_only")


@st.composite
def signatures(draw):
    """A parameter list: (name, kind, default or None) in Python's order, and whether *args/**kwargs."""
    params = []
    n = 0
    has_default = False
    for kind in _KINDS:
        for _ in range(draw(st.integers(0, 2))):
            default = None
            # after a positional default every later positional needs one (Python's rule)
            if kind == "keyword_only" or has_default or draw(st.booleans()):
                default = draw(st.sampled_from([None, 2.0, -1.5, "array"]))
                if default is not None and kind != "keyword_only":
                    has_default = True
                elif kind != "keyword_only" and has_default:
                    default = 2.0
            params.append((f"p{n}", kind, default))
            n += 1
    if not params:
        params.append(("p0", "positional", None))
    return params, draw(st.booleans()), draw(st.booleans())


def _source(params, star_args, star_kwargs) -> str:
    parts = []
    kinds = [k for _, k, _ in params]
    for i, (name, kind, default) in enumerate(params):
        if kind == "keyword_only" and (i == 0 or kinds[i - 1] != "keyword_only") and not star_args:
            parts.append("*")
        if kind == "keyword_only" and (i == 0 or kinds[i - 1] != "keyword_only") and star_args:
            parts.append("*args")
        if default is None:
            parts.append(name)
        else:
            parts.append(f"{name}={'DEFAULT_ARRAY' if default == 'array' else repr(default)}")
        if kind == "positional_only" and (i + 1 == len(params) or kinds[i + 1] != "positional_only"):
            parts.append("/")
    if star_args and "*args" not in parts:
        parts.append("*args")
    if star_kwargs:
        parts.append("**kwargs")
    weights = " + ".join(f"{i + 2} * {name}" for i, (name, _, _) in enumerate(params))
    body = f"    r = {weights}\n"
    if star_args:
        body += "    for i, a in enumerate(args):\n        r = r + (i + 7) * a\n"
    if star_kwargs:
        body += "    for name, v in kwargs.items():\n        r = r * 0.5 + (len(name) + 1) * v\n"
    return f"def f({', '.join(parts)}):\n{body}    return r\n"


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
@given(sig=signatures(), data=st.data())
def test_random_signatures_bind_as_python(sig, data, device):
    params, star_args, star_kwargs = sig
    source = _source(params, star_args, star_kwargs)
    env = {"DEFAULT_ARRAY": np.linspace(-1, 1, 4, dtype=np.float32)}
    exec(source, env)
    fn = env["f"]
    note(source)
    value = st.one_of(st.sampled_from([1.0, -3.0, 2]),
                      st.integers(0, 9).map(lambda s: np.arange(4, dtype=np.float32) * (s + 1)))
    args, kwargs = [], {}
    positional_open = True
    for name, kind, default in params:
        if default is not None and data.draw(st.booleans(), label=f"leave {name} out"):
            positional_open = positional_open and kind == "keyword_only"
            continue
        v = data.draw(value, label=name)
        by_keyword = kind == "keyword_only" or not positional_open or (
            kind == "positional" and data.draw(st.booleans(), label=f"{name} by keyword"))
        if kind == "positional_only" and not positional_open:
            return   # a positional-only parameter after a left-out one cannot be given: Python's rule too
        if by_keyword:
            kwargs[name] = v
            positional_open = positional_open and kind == "keyword_only"
        else:
            args.append(v)
    if star_args and positional_open and len(args) == sum(k != "keyword_only" for _, k, _ in params):
        args += data.draw(st.lists(value, max_size=2), label="*args")
    if star_kwargs:
        for i in range(data.draw(st.integers(0, 2), label="**kwargs count")):
            kwargs[f"extra{'_' * i}"] = data.draw(value, label=f"extra{i}")
    note(f"call: f(*{args!r}, **{kwargs!r})")
    expected = np.asarray(fn(*args, **kwargs), dtype=np.float64)
    result = run_kernel(tj.kernel(fn), *args, device=device, **kwargs)
    np.testing.assert_allclose(np.asarray(result, dtype=np.float64), expected, rtol=1e-5, atol=1e-5)


def test_static_parameter_left_to_its_default_is_the_value_itself(device):
    """A static parameter's default reached the function wrapped ('Default' object is not callable)."""
    def local_max(img, compare=np.greater_equal, axis=-1):
        left = compare(img[..., 1:-1], img[..., :-2])
        return left & compare(img[..., 1:-1], img[..., 2:])
    k = tj.kernel(static=("compare", "axis"))(local_max)
    img = np.array([[1, 3, 2, 2, 5, 4], [0, 0, 1, 0, 2, 2]], np.float32)
    assert_close(run_kernel(k, img, device=device), local_max(img))
    assert_close(run_kernel(k, img, np.greater, device=device), local_max(img, np.greater))


def test_numpy_scalar_arguments_match_numpy_and_reuse_the_plan(device, rng):
    # (NumPy scalars key as the 0-d arrays the plan takes: the second call is a hit, not a new plan)
    f = tj.kernel(hasting)
    y = rng.random(3)
    for args in (tuple(rng.random(7)), tuple(np.float32(v) for v in rng.random(7)),
                 (np.float64(0.5), np.float32(0.25), np.int64(2), np.int32(3), np.bool_(True), 0.5, 1)):
        if device == "webgpu" and any(np.asarray(a).dtype.itemsize == 8 for a in args):
            continue   # (WGSL has no float64 or int64)
        for _ in range(2):
            assert_close(run_kernel(f, y.astype(np.float32) if device == "webgpu" else y, *args, device=device),
                         hasting(y.astype(np.float32) if device == "webgpu" else y, *args))
    info = f.cache_info()
    assert info["hits"] >= info["plans"], info


def test_a_numpy_integer_used_as_a_size_or_a_test_is_keyed_by_value(device):
    # (NumPy takes np.int64(3) and np.array(3) as sizes as it takes 3; so does the kernel, specialised on the value)
    def ones(n, x):
        return np.ones(n, np.float32) * x

    def steps(x, n):
        if n > 2:
            x = x * 2
        return np.arange(n, dtype=np.float32).sum() + x

    f, g = tj.kernel(ones), tj.kernel(steps)
    x = np.arange(4, dtype=np.float32)
    for n in (np.int64(3), np.int32(5), np.int64(3), np.uint8(2), 6):
        assert_close(run_kernel(f, n, np.float32(2.0), device=device), ones(n, np.float32(2.0)))
        assert_close(run_kernel(g, x, n, device=device), steps(x, n))
    assert f.cache_info()["hits"] >= 1
    # (a 0-d array is the caller's memory, which may change after the trace read it: refused, saying what to do)
    with pytest.raises(tj.UnsupportedError, match=r"0-d array argument: pass int\(n\)"):
        run_kernel(tj.kernel(ones), np.array(4), np.float32(2.0), device=device)
    with pytest.raises(tj.ArgumentError, match=r"n is keyed by its value .* pass int\(x\)"):
        run_kernel(f, np.array(4), np.float32(2.0), device=device)   # (after f was specialised on n)


def test_an_assignment_into_a_numpy_scalar_argument_raises_as_numpys_does(device):
    def bump(c, x):
        c[...] = c + 1
        return x * c

    with pytest.raises(TypeError):
        bump(np.float32(2.0), np.ones(2, np.float32))
    with pytest.raises(tj.AssignmentError, match="read-only"):
        run_kernel(tj.kernel(bump), np.float32(2.0), np.ones(2, np.float32), device=device)
