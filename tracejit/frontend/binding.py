"""Python's argument binding for kernels: a call's arguments as one flat tuple, the positions plans are
keyed, traced and launched on, and that tuple back into a call of the user's function."""

from __future__ import annotations

import enum
import inspect
from dataclasses import dataclass

import numpy as np

from tracejit.errors import ArgumentError
from tracejit.frontend.instances import Instance, check_unchanged, describe, is_instance
from tracejit.frontend.signature import Default

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


@dataclass(frozen=True)
class Layout:
    """The last item of a flat tuple that holds more than the fixed parameters: how many items of *args
    follow them, the keywords of **kwargs in the order they were passed, and how many arrays of objects
    (instances.py) come after those. It keys the plan: another count or other names trace anew."""

    count: int = 0
    keywords: tuple[str, ...] = ()
    leaves: int = 0


class Parameters:
    """A kernel function's parameters in the order of the flat tuple: positional ones (positional-only
    too), then keyword-only ones, each at a fixed position; then the items of *args and the values of
    **kwargs, the arrays of the objects among all these (an object's slot holds its Instance), and a
    Layout saying how many of each, where there are any."""

    def __init__(self, fn_name: str, signature: inspect.Signature):
        self.fn_name, self.signature = fn_name, signature
        params = list(signature.parameters.values())
        self.positional = [p for p in params if p.kind in _POSITIONAL]
        self.keyword_only = [p for p in params if p.kind is p.KEYWORD_ONLY]
        self.var_positional = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), None)
        self.var_keyword = next((p.name for p in params if p.kind is p.VAR_KEYWORD), None)
        self.fixed = self.positional + self.keyword_only
        self.names = [p.name for p in self.fixed]  # of the fixed positions, in order
        self.variadic = self.var_positional is not None or self.var_keyword is not None
        # a call of len(names) positional arguments is complete as it stands (the hot path's case)
        self.simple = not self.keyword_only and not self.variadic

    def bind(self, args: tuple, kwargs: dict, static: frozenset[int] = frozenset()) -> tuple:
        """The flat tuple of this call, with Python's errors for a call the function would refuse; the
        positions in `static` get their default itself where left out (a static value is keyed as it is)."""
        keywords: dict[str, object]
        if self.simple and not kwargs and len(args) == len(self.fixed):
            flat, extra, keywords = list(args), (), {}
        else:
            try:
                bound = self.signature.bind(*args, **kwargs)
            except TypeError as e:
                raise ArgumentError(f"{self.fn_name}{self.signature}: {e}") from None
            given = bound.arguments
            flat = [
                given[p.name] if p.name in given else p.default if i in static else default(p.default)
                for i, p in enumerate(self.fixed)
            ]
            extra = given.get(self.var_positional, ()) if self.var_positional else ()
            keywords = given.get(self.var_keyword, {}) if self.var_keyword else {}
            flat += [_variadic_item(a) for a in (*extra, *keywords.values())]
        for i, a in enumerate(flat):
            if isinstance(a, type) and i not in static:  # a classmethod's class: a constant of the code
                flat[i] = Default(a)
        objects = [i for i, a in enumerate(flat) if i not in static and is_instance(a)]
        if not self.variadic and not objects:
            return tuple(flat)
        names = self.leaf_names(len(flat), Layout(len(extra), tuple(keywords)))
        leaves: list = []
        for i in objects:
            instance, arrays = describe(flat[i], names[i])
            flat[i] = Default(instance)
            leaves += arrays
        return (*flat, *leaves, Default(Layout(len(extra), tuple(keywords), len(leaves))))

    def call(self, fn, flat):
        """fn called with a flat tuple's values (traced or not) as Python would have passed them."""
        layout = flat[-1] if flat else None
        layout = layout.value if isinstance(layout, Default) else layout
        if isinstance(layout, Layout):
            body, leaves = list(flat[: len(flat) - 1 - layout.leaves]), iter(flat[len(flat) - 1 - layout.leaves : -1])
        else:
            layout, body, leaves = Layout(), list(flat), iter(())
        copies = []
        names = self.leaf_names(len(body), layout)
        for i, a in enumerate(body):
            a = a.value if isinstance(a, Default) and isinstance(a.value, Instance) else a
            if isinstance(a, Instance):
                body[i] = a.rebuild([next(leaves) for _ in range(a.count)])
                copies.append((body[i], dict(body[i].__dict__), names[i]))
        n, fixed = len(self.positional), len(self.fixed)
        positional = body[:n] + body[fixed : fixed + layout.count]
        # a keyword-only parameter left to its default is left out (a ufunc refuses dtype= and signature= both)
        keywords = {p.name: v for p, v in zip(self.keyword_only, body[n:fixed]) if v is not p.default}
        keywords.update(zip(layout.keywords, body[fixed + layout.count :]))
        result = fn(*positional, **keywords)
        code = getattr(fn, "__code__", None)
        defined = f"{code.co_filename}:{code.co_firstlineno}: " if code is not None else ""
        for copy, before, where in copies:
            check_unchanged(copy, before, f"{defined}{self.fn_name}", where)
        return result

    def leaf_names(self, n: int, layout: Layout | None = None) -> list[str]:
        """A name for each of n positions of a flat tuple (for messages): the parameter's, args[i] for the
        items of *args, kwargs['k'] for those of **kwargs, 'an array of an object' after them."""
        names = list(self.names)
        if layout is not None:
            names += [f"{self.var_positional}[{i}]" for i in range(layout.count)]
            names += [f"{self.var_keyword}[{k!r}]" for k in layout.keywords]
        names += ["an array attribute of an object argument"] * (n - len(names))
        return names[:n]

    def check_static(self, static: tuple[str, ...]) -> frozenset[int]:
        """static= names as flat positions, refused where they are not fixed parameters."""
        var = [s for s in static if s in (self.var_positional, self.var_keyword)]
        if var:
            raise ArgumentError(
                f"{self.fn_name}: static={var!r} names *{var[0]}/**{var[0]}; the items of *args and "
                "**kwargs are traced (arrays and numbers), and strings, None, callables and "
                "other settings among them are constants of the code already: leave it out "
                "of static="
            )
        unknown = [s for s in static if s not in self.names]
        if unknown:
            raise ArgumentError(
                f"{self.fn_name}: static argument(s) {unknown} are not parameters of the function "
                f"(its parameters: {self.names})"
            )
        return frozenset(self.names.index(s) for s in static)


def default(value):
    """A left-out parameter's default: a constant of the trace when it is a hashable non-array (an axis,
    a flag, eps); an array default is an argument like any other."""
    if isinstance(value, np.ndarray):
        return value
    try:
        hash(value)
    except TypeError:
        return value
    return Default(value)


def _variadic_item(a):
    """An item of *args or **kwargs: arrays and numbers are traced, objects taken apart (instances.py); a
    setting (a string, None, a callable, an enum member, a slice) is a constant of the code, keyed by value,
    as a static argument would be."""
    if is_instance(a):
        return a
    setting = (
        isinstance(a, (str, bytes, slice, type(None), type(Ellipsis), type, np.dtype))
        or (isinstance(a, enum.Enum) and not isinstance(a, (int, float)))
        or (callable(a) and not hasattr(a, "__array__"))
    )
    if setting:
        try:
            hash(a)
        except TypeError:
            return a
        return Default(a)
    return a
