"""f.explain(*args): what a call does, as text: the kernels it launches in order, the loops and how they run, every
break (a call run with NumPy on the host) and every synchronisation (a value read back to the host before the call
can go on). Read off the plan a call of these arguments uses (frontend/staged.py's parts for a graph with loops or
fallbacks)."""

from __future__ import annotations

from tracejit.frontend.staged import Staged
from tracejit.ir.graph import Op


def explain(plan) -> str:
    """The text of f.explain for a plan (frontend/plan.py's Plan)."""
    dev = plan.device
    on_host = dev.returns_numpy
    lines: list[str] = []
    counts = {"kernels": 0, "breaks": 0, "syncs": 0}

    def say(depth: int, text: str) -> None:
        lines.append("  " * depth + text)

    def sync(depth: int, text: str) -> None:
        counts["syncs"] += 1
        say(depth, f"synchronisation: {text}" + (" (host memory on numba: no wait)" if on_host else ""))

    def program(executable, depth: int, label: str) -> None:
        kernels = list(getattr(executable, "kernels", ()))
        counts["kernels"] += len(kernels)
        names = ", ".join(k.name for k in kernels) or "none"
        say(depth, f"{label}: {len(kernels)} kernel(s): {names}")
        calls = getattr(getattr(executable, "program", None), "library_calls", None)
        if calls:
            say(depth + 1, f"{len(calls)} of them run by a library (BLAS products, NumPy sorts)")
        faulting = getattr(executable, "_faulting", None)
        if faulting is not None and not on_host:
            sync(depth + 1, f"{faulting.name} can raise an error NumPy raises: its record is read after the kernels")

    def staged(executable: Staged, depth: int) -> None:
        for lv in executable.levels:
            for node in executable._sizes.get(lv, ()):
                _, count, where = node.arg
                sync(
                    depth,
                    f"the count of the selection at {where} ({count} in this call), read back and checked: another "
                    "count traces the kernel again and reuses its kernels",
                )
            for body in executable._loops.get(lv, ()):
                loop = body.loop
                if getattr(body.executable, "element", False):
                    where = "on the host" if not on_host else "as one compiled function"
                    say(depth, f"loop over elements at {loop.where}: the whole loop nest {where}")
                    if not on_host:
                        sync(depth + 1, "its arrays are copied to the host before it and back after it")
                    continue
                say(depth, f"{loop.kind} loop at {loop.where}: its body's kernels run once per step")
                if loop.kind == "while":
                    sync(depth + 1, "its test, read after every step")
                elif any(not _python_number(h) for h in body.srcs[: loop.heads]):
                    sync(depth + 1, "its bounds, read from arrays when the loop starts")
                if loop.until is not None:
                    sync(depth + 1, "its `break`, read after every step")
                first = 1 if loop.kind == "for" else 0
                if any(x.weak and x.shape == () for x in loop.inputs[first : first + loop.carried]):
                    sync(depth + 1, "a Python number it carries, read after every step")
                run(body.executable, depth + 1, "body")
            for call, _, _ in executable._hosts.get(lv, ()):
                counts["breaks"] += 1
                say(depth, f"break at {call.where}: {call.name} runs with NumPy on the host (a fallback)")
                if not on_host:
                    sync(depth + 1, "the values it reads are copied to the host, its results back")
            part = executable._parts.get(lv)
            if part is not None:
                for n in part.reads:
                    if n.weak and n.shape == () and not _python_number(n):
                        sync(depth, "a Python number computed before these kernels, read to pass it to them")
                run(part.executable, depth, "kernels")

    def run(executable, depth: int, label: str) -> None:
        if isinstance(executable, Staged):
            staged(executable, depth)
        else:
            program(executable, depth, label)

    run(plan.executable, 1, "kernels")
    args = ", ".join(_describe(info) for info in plan.traced.infos)
    head = (
        f"{plan.traced.name}({args}) on {dev.name}: {counts['kernels']} kernel(s), {counts['breaks']} break(s), "
        f"{counts['syncs']} synchronisation(s) in its code"
    )
    return "\n".join([head, *lines])


def _describe(info) -> str:
    if info.kind == "static":
        return repr(info.value)
    if info.kind in ("default", "generator"):
        return info.kind
    text = str(info.dtype)
    return text + (str(list(info.shape)) if info.kind == "array" else " (a Python number)")


def _python_number(node) -> bool:
    """Whether a value is a Python number the call is given (an argument or a constant: no read-back)."""
    return node.weak and node.shape == () and node.op in (Op.INPUT, Op.CONST)
