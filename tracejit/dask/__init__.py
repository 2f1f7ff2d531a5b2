"""Dask arrays as kernel arguments: a kernel planned once, computed block by block on Dask's workers. It joins
the kernel through frontend/hooks.py; Dask itself is imported only when a call has a Dask array."""

from __future__ import annotations

from tracejit.frontend import hooks


def is_dask_array(a) -> bool:
    """Whether `a` is a Dask collection, told by its type without importing Dask."""
    return type(a).__module__.startswith("dask.") and hasattr(a, "__dask_graph__")


def _call(kernel, args: tuple, device: str | None):
    from tracejit.dask.arrays import call

    return call(kernel, args, device)


def _warming(kernel, args: tuple) -> tuple:
    from tracejit.dask.arrays import prepare
    from tracejit.dask.stages import warm_stages

    key, _, letter_chunks = prepare(kernel, args)
    return warm_stages, (key, letter_chunks)


def _warm_recorded(kernel, args: list, entry: dict, devices) -> list[dict]:
    from tracejit.dask.stages import warm_recorded

    return warm_recorded(kernel, args, entry["chunks"], entry.get("static", {}), devices)


hooks.register(
    hooks.Collection(
        name="Dask arrays",
        claims=is_dask_array,
        call=_call,
        warming=_warming,
        warm_recorded=_warm_recorded,
        manifest_field="chunks",
        in_capture="it launches nothing here (Dask runs its blocks later, on its workers); call it outside",
        with_out="its results are Dask arrays themselves; store them with dask.array.store or .compute()",
        in_lower="it compiles a kernel per stage and block shape on the workers; tj.warm(f, x, client=client) "
        "compiles them ahead",
    )
)
