"""Symbolic dimensions (issue 19): which dimensions of a kernel's arguments are symbolic, and the "twin"
arguments a function is traced at once more to find which of its kernels' sizes follow them: the named
axes of @tj.kernel(dynamic={"x": (0,)}), every dimension under dynamic=True, the dimensions tj.spec names
("n", 1024), and under the default dynamic=None those seen with a second size. On numba the sizes that
differ between a kernel and its twin are arguments of its code from that compile (runtime/symbolic_sizes.py).
"""

from __future__ import annotations

from tracejit.errors import ArgumentError
from tracejit.frontend.signature import ArgInfo, Spec


def twin_sizes(args) -> dict[str, tuple[int, int]] | None:
    """The named dimensions of the tj.spec arguments: name -> (size traced, other size for the twin
    trace that tells which of a kernel's sizes follow it), or None when there are none. A name means one
    size everywhere."""
    sizes: dict[str, int] = {}
    for i, a in enumerate(args):
        if type(a) is Spec and a.names:
            for d, name in enumerate(a.names):
                if name is not None and sizes.setdefault(name, a.shape[d]) != a.shape[d]:
                    raise ArgumentError(
                        f"symbolic dimension {name!r} is {sizes[name]} in one tj.spec and "
                        f"{a.shape[d]} in another (argument {i}); a name stands for one size"
                    )
    other = other_sizes(sizes.values())
    return {name: (n, other[n]) for name, n in sizes.items()} or None


def other_sizes(values, avoid=()) -> dict[int, int]:
    """For each size, another close to it (one more, else one less: close enough that the code usually
    takes the same shape), distinct sizes staying distinct and none becoming another of them or one of
    `avoid` (sizes that stay); 0 and 1 (empty, broadcast) stay as they are. One more first: the
    thresholds that change a program's shape are `size >= a power of two` (a reduction split in two
    stages, a parallel loop), and sizes are often that power of two, which one less would cross."""
    taken, out = set(values) | set(avoid), {}
    for v in sorted(set(values)):
        out[v] = v
        for w in (v + 1, v - 1):
            if v >= 2 and w >= 2 and w not in taken:
                out[v] = w
                taken.add(w)
                break
    return out


def with_sizes(a, sizes: dict[str, int]):
    """A tj.spec with its named dimensions at the given sizes (anything else as it is)."""
    if type(a) is not Spec or not a.names:
        return a
    shape = tuple(sizes[name] if name is not None else s for s, name in zip(a.shape, a.names))
    return Spec(shape, a.dtype, None, a.names)


def every_size_other(args, infos: list[ArgInfo]) -> list:
    """The arguments with every dimension of every C-contiguous array at another size (other_sizes), as
    tj.specs: @tj.kernel(dynamic=True) traces them to find which of a kernel's sizes follow the shapes."""
    arrays = [info for info in infos if info.kind == "array"]
    other = other_sizes([s for info in arrays for s in info.shape])
    out = []
    for a, info in zip(args, infos):
        if info.kind == "array" and info.contiguous:
            a = Spec(tuple(other[s] for s in info.shape), info.value_dtype)
        out.append(a)
    return out


def named_axes_other(args, infos: list[ArgInfo], axes: dict[int, tuple[int, ...]]) -> list:
    """The arguments with the named axes (argument position -> axes) at another size, every other dimension
    as it is: @tj.kernel(dynamic={"x": (0,)}) traces them to find which of a kernel's sizes follow those
    axes. Arrays that are not C-contiguous stay as they are (their strides follow the shape)."""
    named = [(i, ax) for i, axs in axes.items() for ax in axs]
    other = other_sizes(
        [infos[i].shape[ax] for i, ax in named], avoid=[s for info in infos if info.kind == "array" for s in info.shape]
    )
    out = list(args)
    for i, axs in axes.items():
        info = infos[i]
        if info.contiguous:
            out[i] = Spec(tuple(other[s] if d in axs else s for d, s in enumerate(info.shape)), info.value_dtype)
    return out


def changed_axes(known: list[list[ArgInfo]], new: list[ArgInfo]) -> dict[int, tuple[int, ...]]:
    """The axes of the array arguments whose size differs between `new` and a known signature that is the
    same in everything else (kinds, dtypes, ranks, static values): argument position -> axes. These are
    the dimensions the default dynamic=None makes symbolic once they take a second value."""
    out: dict[int, set[int]] = {}
    for old in known:
        if len(old) != len(new) or any(_differ_but_in_size(a, b) for a, b in zip(old, new)):
            continue
        for i, (a, b) in enumerate(zip(old, new)):
            if a.kind == "array":
                out.setdefault(i, set()).update(d for d, (x, y) in enumerate(zip(a.shape, b.shape)) if x != y)
    return {i: tuple(sorted(axes)) for i, axes in out.items() if axes}


def size_free_key(infos: list[ArgInfo]) -> tuple:
    """What a signature is but for its sizes: kinds, dtypes, ranks, layouts (C-contiguous, else the strides),
    static values. Signatures with one key lower to the same kernels at every size (ir/layout.py, moving)."""
    out: list[tuple] = []
    for a in infos:
        if a.kind == "array":
            out.append((a.kind, a.value_dtype.str, len(a.shape), a.writeable, True if a.contiguous else a.strides))
        elif a.kind in ("static", "default"):
            try:
                out.append((a.kind, type(a.value).__name__, hash(a.value), repr(a.value)))
            except TypeError:  # an array-valued static: by identity
                out.append((a.kind, id(a.value)))
        else:
            out.append((a.kind, None if a.dtype is None else a.dtype.str))
    return tuple(out)


def _differ_but_in_size(a: ArgInfo, b: ArgInfo) -> bool:
    if a.kind != b.kind or a.dtype != b.dtype or len(a.shape) != len(b.shape) or a.writeable != b.writeable:
        return True
    if a.kind in ("static", "default"):
        return not _same_value(a.value, b.value)
    # an array's layout: C-contiguous at both sizes (its strides follow its shape), or the same strides
    return a.strides != b.strides and not (a.contiguous and b.contiguous)


def dynamic_axes(fname: str, dynamic: dict, names: list[str], static: tuple) -> dict[int, tuple[int, ...]]:
    """dynamic={"x": (0,)} checked against the parameters: parameter position -> its axes (as given)."""
    out = {}
    for name, axes in dynamic.items():
        if name not in names or name in static:
            why = "a static parameter (its value is part of the code)" if name in static else "not a parameter"
            raise ArgumentError(
                f"{fname}: dynamic={{{name!r}: ...}}: {name!r} is {why}; name array parameters of {names}"
            )
        axes = (axes,) if isinstance(axes, int) else axes
        if not isinstance(axes, (tuple, list)) or not all(isinstance(a, int) and not isinstance(a, bool) for a in axes):
            raise ArgumentError(
                f"{fname}: dynamic={{{name!r}: {axes!r}}}: give an axis or a tuple of axes "
                "(ints), as in dynamic={'x': (0,)}"
            )
        out[names.index(name)] = tuple(axes)
    return out


def axes_of(dynamic_axes: dict, infos: list, names: list[str]) -> dict[int, tuple[int, ...]]:
    """The symbolic axes of each array argument of this call, normalised (negative axes from the end);
    names: the parameters' at their positions."""
    out = {}
    for i, axes in dynamic_axes.items():
        info = infos[i] if i < len(infos) else None
        if info is None or info.kind != "array":
            raise ArgumentError(
                f"dynamic={{{names[i]!r}: {axes}}}: {names[i]!r} is "
                f"{'left out' if info is None else 'not an array'} in this call; only an "
                "array's axes can be symbolic"
            )
        bad = [a for a in axes if not -len(info.shape) <= a < len(info.shape)]
        if bad:
            raise ArgumentError(
                f"dynamic={{{names[i]!r}: {axes}}}: axis {bad[0]} is out of range for "
                f"{names[i]!r}, an array of {len(info.shape)} dimension(s) (shape {info.shape})"
            )
        out[i] = tuple(sorted({a % len(info.shape) for a in axes}))
    return out


def signature_changes(names: list[str], old: list[ArgInfo], new: list[ArgInfo]) -> list[str]:
    """What changed from one argument signature to another, one phrase per difference:
    'x: shape[0] 64 -> 65', 'x: dtype float32 -> float64', 'axis (static): 1 -> 2'."""
    out = []
    for name, a, b in zip(names, old, new):
        if a.kind != b.kind:
            out.append(f"{name}: {_kind(a)} -> {_kind(b)}")
        elif a.kind in ("static", "default"):
            if not _same_value(a.value, b.value):
                out.append(f"{name} ({'static' if a.kind == 'static' else 'default'}): {a.value!r} -> {b.value!r}")
        elif a.dtype != b.dtype:
            out.append(f"{name}: dtype {a.dtype} -> {b.dtype}")
        elif len(a.shape) != len(b.shape):
            out.append(f"{name}: shape {a.shape} -> {b.shape}")
        elif a.shape != b.shape:
            out += [f"{name}: shape[{d}] {x} -> {y}" for d, (x, y) in enumerate(zip(a.shape, b.shape)) if x != y]
        elif a.strides != b.strides:
            out.append(f"{name}: strides {a.strides} -> {b.strides} (in elements)")
        elif a.writeable != b.writeable:
            out.append(
                f"{name}: {'writeable' if a.writeable else 'read-only'} -> "
                f"{'writeable' if b.writeable else 'read-only'}"
            )
    return out


def _kind(info: ArgInfo) -> str:
    if info.kind == "scalar":
        return f"a Python {dict(b='bool', i='int', u='int', f='float').get(info.value_dtype.kind, info.dtype)}"
    return f"a {info.dtype} array" if info.kind == "array" else info.kind


def _same_value(a, b) -> bool:
    try:
        return bool(type(a) is type(b) and a == b)
    except Exception:  # an array-valued static: compared by identity
        return a is b
