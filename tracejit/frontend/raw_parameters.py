"""The parameters a tj.RawKernel's source declares, in launch order, read from the source itself: a call must
pass each of them (an argument left out would otherwise reach the kernel as the previous call's value)."""

from __future__ import annotations

import re

_C_KERNEL = {"cuda": r"\b__global__\b", "opencl": r"\b(?:__kernel|kernel)\b", "metal": r"\bkernel\b"}
_WGSL_BINDING = re.compile(
    r"@group\(\s*0\s*\)\s*@binding\(\s*(\d+)\s*\)\s*var(?:\s*<[^>]*>)?\s+(\w+)|"
    r"@binding\(\s*(\d+)\s*\)\s*@group\(\s*0\s*\)\s*var(?:\s*<[^>]*>)?\s+(\w+)"
)
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def declared(target: str, source: str, name: str) -> list[str] | None:
    """The name of each argument kernel `name` takes, by position (cuda, opencl: its parameters; metal: its
    [[buffer(i)]] parameters by i; webgpu: the @group(0) @binding(i) variables by i), or None where the
    source does not say in a way read here (then the driver's own count, where it has one, is all we check)."""
    text = _without_comments(source)
    if target == "webgpu":
        return _wgsl(text, name)
    params = _c_parameters(text, name, _C_KERNEL[target])
    if params is None:
        return None
    return _metal_buffers(params) if target == "metal" else [_parameter_name(p) for p in params]


def _without_comments(source: str) -> str:
    source = re.sub(r"/\*.*?\*/", lambda m: " " * len(m.group()), source, flags=re.S)
    return re.sub(r"//[^\n]*", "", source)


def _c_parameters(text: str, name: str, qualifier: str) -> list[str] | None:
    """The parameter declarations of the kernel function `name`, split at their top-level commas."""
    for m in re.finditer(rf"\b{re.escape(name)}\s*\(", text):
        head = text[max(0, m.start() - 400) : m.start()]
        statement = re.split(r"[;{}]", head)[-1]  # from the end of the previous statement to the name
        if not re.search(qualifier, statement):
            continue
        inside: list[str] = []
        depth = 1
        for ch in text[m.end() :]:
            depth += ch in "([<" and 1 or ch in ")]>" and -1 or 0
            if depth == 0:
                break
            inside.append(ch)
        else:
            return None
        params: list[str] = []
        part: list[str] = []
        depth = 0
        for ch in "".join(inside):
            if ch == "," and depth == 0:
                params.append("".join(part))
                part = []
                continue
            depth += ch in "([<" and 1 or ch in ")]>" and -1 or 0
            part.append(ch)
        params.append("".join(part))
        params = [p.strip() for p in params]
        return [] if params == [""] or params == ["void"] else params
    return None


def _parameter_name(param: str) -> str:
    """`const float* x` -> x; `device float* y [[buffer(1)]]` -> y; `float a[4]` -> a."""
    bare = re.sub(r"\[\[.*?\]\]", " ", param)
    bare = re.sub(r"\[[^\]]*\]\s*$", " ", bare.strip())
    names = _IDENTIFIER.findall(bare)
    return names[-1] if names else param


def _metal_buffers(params: list[str]) -> list[str] | None:
    """MSL: the arguments are the [[buffer(i)]] parameters, argument i at index i (a parameter without an
    attribute takes the next index); built-ins ([[thread_position_in_grid]], ...) are not arguments."""
    found, following = {}, 0
    for p in params:
        m = re.search(r"\[\[\s*buffer\s*\(\s*(\d+)\s*\)\s*\]\]", p)
        if m:
            following = int(m.group(1))
        elif "[[" in p:
            continue
        found[following] = _parameter_name(p)
        following += 1
    if not found:
        return []
    return [found.get(i, f"buffer({i})") for i in range(max(found) + 1)]


def _wgsl(text: str, name: str) -> list[str] | None:
    """The group-0 bindings the entry point `name` uses (itself, or the functions it calls), argument i at
    binding i: WebGPU's automatic layout holds only those."""
    bindings = {}
    for m in _WGSL_BINDING.finditer(text):
        index, var = (m.group(1), m.group(2)) if m.group(1) is not None else (m.group(3), m.group(4))
        bindings[int(index)] = var
    bodies = _wgsl_functions(text)
    if name not in bodies:
        return None
    used, stack, seen = set(), [name], set()
    while stack:
        fn = stack.pop()
        if fn in seen:
            continue
        seen.add(fn)
        words = set(_IDENTIFIER.findall(bodies[fn]))
        used |= words
        stack.extend(w for w in words if w in bodies)
    indices = [i for i, var in bindings.items() if var in used]
    if not indices:
        return []
    return [bindings[i] if i in indices else f"@binding({i})" for i in range(max(indices) + 1)]


def _wgsl_functions(text: str) -> dict[str, str]:
    """Each WGSL function's name -> its parameters and body, as text."""
    out = {}
    for m in re.finditer(r"\bfn\s+(\w+)\s*\(", text):
        start = text.find("{", m.end())
        if start < 0:
            continue
        depth, i = 0, start
        while i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                break
            i += 1
        out[m.group(1)] = text[m.end() : i]
    return out
