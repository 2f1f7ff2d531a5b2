"""Python's argument binding for kernels: a call's arguments as one flat tuple, the positions plans are
keyed, traced and launched on, and that tuple back into a call of the user's function."""
from __future__ import annotations

import enum
import inspect
from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentError
from .signature import Default

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


@dataclass(frozen=True)
class Variadic:
    """What a call gave a function's *args and **kwargs: how many extra positional arguments, and the
    extra keywords in the order they were passed. The last item of a variadic function's flat tuple, so
    that it keys the plan: another count or other names trace anew."""
    count: int
    keywords: tuple[str, ...]


class Parameters:
    """A kernel function's parameters in the order of the flat tuple: positional ones (positional-only
    too), then keyword-only ones, each at a fixed position; then the items of *args and the values of
    **kwargs, and a Variadic saying how many of each, where the function has them."""

    def __init__(self, fn_name: str, signature: inspect.Signature):
        self.fn_name, self.signature = fn_name, signature
        params = list(signature.parameters.values())
        self.positional = [p for p in params if p.kind in _POSITIONAL]
        self.keyword_only = [p for p in params if p.kind is p.KEYWORD_ONLY]
        self.var_positional = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), None)
        self.var_keyword = next((p.name for p in params if p.kind is p.VAR_KEYWORD), None)
        self.fixed = self.positional + self.keyword_only
        self.names = [p.name for p in self.fixed]          # of the fixed positions, in order
        self.variadic = self.var_positional is not None or self.var_keyword is not None
        # a call of len(names) positional arguments is complete as it stands (the hot path's case)
        self.simple = not self.keyword_only and not self.variadic

    def bind(self, args: tuple, kwargs: dict, static: frozenset[int] = frozenset()) -> tuple:
        """The flat tuple of this call, with Python's errors for a call the function would refuse; the
        positions in `static` get their default itself where left out (a static value is keyed as it is)."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise ArgumentError(f"{self.fn_name}{self.signature}: {e}") from None
        given = bound.arguments
        flat = [given[p.name] if p.name in given else p.default if i in static else default(p.default)
                for i, p in enumerate(self.fixed)]
        if not self.variadic:
            return tuple(flat)
        extra = given.get(self.var_positional, ()) if self.var_positional else ()
        keywords = given.get(self.var_keyword, {}) if self.var_keyword else {}
        flat += [_variadic_item(a) for a in extra]
        flat += [_variadic_item(a) for a in keywords.values()]
        return (*flat, Default(Variadic(len(extra), tuple(keywords))))

    def call(self, fn, flat):
        """fn called with a flat tuple's values (traced or not) as Python would have passed them."""
        n = len(self.positional)
        positional = list(flat[:n])
        keywords = {p.name: v for p, v in zip(self.keyword_only, flat[n:len(self.fixed)])}
        if self.variadic:
            shape = flat[-1]
            shape = shape.value if isinstance(shape, Default) else shape
            start = len(self.fixed)
            positional += flat[start:start + shape.count]
            keywords.update(zip(shape.keywords, flat[start + shape.count:-1]))
        return fn(*positional, **keywords)

    def leaf_names(self, n: int, shape: Variadic | None = None) -> list[str]:
        """A name for each of n positions of a flat tuple (for messages): the parameter's, args[i] for the
        items of *args, kwargs['k'] for those of **kwargs, 'the call's shape' for the Variadic."""
        names = list(self.names)
        if shape is not None:
            names += [f"{self.var_positional}[{i}]" for i in range(shape.count)]
            names += [f"{self.var_keyword}[{k!r}]" for k in shape.keywords]
        names += [f"argument {i}" for i in range(len(names), n)]
        return names[:n]

    def check_static(self, static: tuple[str, ...]) -> frozenset[int]:
        """static= names as flat positions, refused where they are not fixed parameters."""
        var = [s for s in static if s in (self.var_positional, self.var_keyword)]
        if var:
            raise ArgumentError(f"{self.fn_name}: static={var!r} names *{var[0]}/**{var[0]}; the items of *args and "
                                "**kwargs are traced (arrays and numbers), and strings, None, callables and "
                                "other settings among them are constants of the code already: leave it out "
                                "of static=")
        unknown = [s for s in static if s not in self.names]
        if unknown:
            raise ArgumentError(f"{self.fn_name}: static argument(s) {unknown} are not parameters of the function "
                                f"(its parameters: {self.names})")
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
    """An item of *args or **kwargs: arrays and numbers are traced; a setting (a string, None, a callable,
    an enum member, a slice) is a constant of the code, keyed by value, as a static argument would be."""
    setting = isinstance(a, (str, bytes, slice, type(None), type(Ellipsis), type, np.dtype)) or (
        isinstance(a, enum.Enum) and not isinstance(a, (int, float))) or (
        callable(a) and not hasattr(a, "__array__"))
    if setting:
        try:
            hash(a)
        except TypeError:
            return a
        return Default(a)
    return a
