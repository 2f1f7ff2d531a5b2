"""Where integrations join the kernel without the kernel importing them: a kind of argument that a call hands
over whole (a Dask array: planned here, computed block by block on its workers) registers a Collection."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Collection:
    """An integration's kind of argument, and what the kernel's entry points do with a call that has one."""

    name: str  # plural, in messages: "Dask arrays"
    claims: Callable[[Any], bool]  # one argument; told by its type, without importing the library
    call: Callable[..., Any]  # (kernel, bound args, device) -> the call's result
    warming: Callable[..., tuple]  # (kernel, bound args) -> (fn, fn_args): fn(*fn_args, devices)
    #   warms the call where it runs, returning WarmResult dicts
    warm_recorded: Callable[..., list[dict]]  # (kernel, args, manifest entry, devices) -> WarmResult dicts
    manifest_field: str  # the field that marks its calls in a TRACEJIT_RECORD entry
    in_capture: str  # why a call with one cannot be captured, and what to do
    with_out: str  # why such a call takes no out=, and what to do
    in_lower: str  # why f.lower refuses one, and what to do


COLLECTIONS: list[Collection] = []


def register(collection: Collection) -> None:
    """Make `collection` known to every kernel (an integration's package does this when imported)."""
    COLLECTIONS[:] = [c for c in COLLECTIONS if c.name != collection.name] + [collection]


def collection_of(args) -> Collection | None:
    """The registered collection an argument of this call belongs to, if any."""
    for c in COLLECTIONS:
        if any(c.claims(a) for a in args):
            return c
    return None
