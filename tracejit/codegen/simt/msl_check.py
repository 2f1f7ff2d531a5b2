"""A checker for generated Metal Shading Language that runs without a Mac.

Two parts:
- the source is compiled as C++ by clang (`clang++ -fsyntax-only`, or libclang in this process where its
  Python bindings are installed: the `libclang` wheel, in the dev extra) against metal_shim/metal_stdlib, a shim of
  the Metal standard library (address spaces that do not mix, `half`, no `double`, the `metal::` math and
  SIMD-group functions Metal has and none it lacks, barriers);
- the `[[...]]` attributes, which C++ ignores, are checked here: each kernel parameter carries exactly
  one known attribute, buffer indices are unique and below Metal's 31, buffers are `device` or
  `constant` pointers or references, and builtins have the types Metal allows.

It checks what the shim models, not everything Apple's compiler does. Use it on a file:

    python -m tracejit.codegen.simt.msl_check kernel.metal ...
"""

from __future__ import annotations

import atexit
import functools
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from tracejit.errors import CompileError
from tracejit.codegen import build_log

SHIM = Path(__file__).with_name("metal_shim")
MAX_BUFFER_INDEX = 30
CLANG_FLAGS = (
    "-x",
    "c++",
    "-std=c++17",
    "-target",
    "aarch64-linux-gnu",
    "-nostdinc",
    "-fsyntax-only",
    "-Wno-unknown-attributes",
    "-ferror-limit=20",
)

# attribute -> the types its parameter may have (None: a buffer, checked apart)
_POSITION = {"uint", "ushort", "uint2", "ushort2", "uint3", "ushort3"}
_INDEX = {"uint", "ushort"}
BUILTINS: dict[str, set[str]] = {
    **{
        a: _POSITION
        for a in (
            "thread_position_in_grid",
            "thread_position_in_threadgroup",
            "threadgroup_position_in_grid",
            "threads_per_grid",
            "threads_per_threadgroup",
            "threadgroups_per_grid",
            "dispatch_threads_per_threadgroup",
        )
    },
    **{
        a: _INDEX
        for a in (
            "thread_index_in_threadgroup",
            "thread_index_in_simdgroup",
            "thread_index_in_quadgroup",
            "simdgroup_index_in_threadgroup",
            "simdgroups_per_threadgroup",
            "threads_per_simdgroup",
            "thread_execution_width",
            "quadgroup_index_in_threadgroup",
            "quadgroups_per_threadgroup",
        )
    },
}
KERNEL = re.compile(r"\bkernel\s+void\s+(\w+)\s*\(")
PARAM = re.compile(r"^(?P<type>.*?)(?P<name>\w+)\s*\[\[\s*(?P<attr>[^\]]*?)\s*\]\]$", re.S)
_BUFFER = re.compile(r"^buffer\s*\(\s*(\d+)\s*\)$")


def find_clang() -> str | None:
    """clang++ from TRACEJIT_CLANG, the PATH, or a versioned clang++-N."""
    want = os.environ.get("TRACEJIT_CLANG")
    if want:
        return shutil.which(want)
    for name in ("clang++", *(f"clang++-{v}" for v in range(25, 13, -1))):
        found = shutil.which(name)
        if found:
            return found
    return None


def _line_of(source: str, pos: int) -> int:
    return source.count("\n", 0, pos) + 1


def split_params(text: str) -> list[tuple[str, int]]:
    """Top-level comma-separated parts of a parameter list, with their offsets."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "([<":
            depth += 1
        elif c in ")]>":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append((text[start:i], start))
            start = i + 1
    if text[start:].strip():
        parts.append((text[start:], start))
    return parts


def attribute_problems(source: str) -> list[str]:
    """What is wrong with the `[[...]]` attributes of the kernels in `source`, as 'LINE: message'."""
    problems, in_signatures = [], []
    kernels = list(KERNEL.finditer(source))
    if not kernels:
        return ["1: no `kernel void NAME(...)` function found"]
    for m in kernels:
        open_at = m.end() - 1
        depth, end = 0, None
        for i in range(open_at, len(source)):
            depth += {"(": 1, ")": -1}.get(source[i], 0)
            if depth == 0:
                end = i
                break
        if end is None:
            problems.append(f"{_line_of(source, m.start())}: kernel {m.group(1)}: unbalanced parentheses")
            continue
        in_signatures.append((open_at, end))
        buffers: dict[int, str] = {}
        builtins: dict[str, str] = {}
        for text, offset in split_params(source[open_at + 1 : end]):
            line = _line_of(source, open_at + 1 + offset + len(text) - len(text.lstrip()))
            p = PARAM.match(" ".join(text.split()))
            if p is None:
                problems.append(
                    f"{line}: kernel {m.group(1)}: parameter `{' '.join(text.split())}` has no "
                    "[[buffer(i)]] or builtin attribute"
                )
                continue
            ptype, name, attr = " ".join(p.group("type").split()), p.group("name"), p.group("attr")
            b = _BUFFER.match(attr)
            if b:
                index = int(b.group(1))
                if index > MAX_BUFFER_INDEX:
                    problems.append(f"{line}: {name}: buffer index {index} is above Metal's {MAX_BUFFER_INDEX}")
                if index in buffers:
                    problems.append(f"{line}: {name}: buffer index {index} is also used by {buffers[index]}")
                buffers.setdefault(index, name)
                space = ptype.split()[0] if ptype else ""
                if space not in ("device", "constant") or not ptype.rstrip().endswith(("*", "&")):
                    problems.append(
                        f"{line}: {name}: a [[buffer({index})]] parameter must be a device or constant "
                        f"pointer or reference, not `{ptype.strip()}`"
                    )
            elif attr in BUILTINS:
                if attr in builtins:
                    problems.append(f"{line}: {name}: [[{attr}]] is also given to {builtins[attr]}")
                builtins.setdefault(attr, name)
                if ptype.strip() not in BUILTINS[attr]:
                    problems.append(
                        f"{line}: {name}: [[{attr}]] needs one of {', '.join(sorted(BUILTINS[attr]))}, "
                        f"not `{ptype.strip()}`"
                    )
            else:
                problems.append(f"{line}: {name}: unknown attribute [[{attr}]]")
    for a in re.finditer(r"\[\[", source):
        if not any(start < a.start() < end for start, end in in_signatures):
            problems.append(f"{_line_of(source, a.start())}: an attribute outside a kernel's parameter list")
    return problems


def available() -> bool:
    """Whether check() can run here: libclang's bindings or a clang++."""
    return _index() is not None or find_clang() is not None


def checker() -> str:
    """What check() runs by default, for reports: libclang in this process, or a clang++."""
    return "libclang (in this process)" if _index() is not None else (find_clang() or "no clang")


NOT_FOUND = "clang++ was not found; the MSL check needs it (Debian: apt-get install clang; or pip install libclang)"


@functools.cache
def _index():
    """libclang through its Python bindings, or None (not installed, or TRACEJIT_CLANG names a clang++ to run).
    A parse in this process takes about 3 ms a kernel; a clang++ process 30, 27 of them starting clang++."""
    if os.environ.get("TRACEJIT_CLANG"):
        return None
    try:
        from clang import cindex

        index = cindex.Index.create()
    except Exception:  # ImportError, or the bindings' LibclangError where the library itself is missing
        return None
    # dropped before exit: the bindings' Index.__del__ fails once interpreter shutdown has cleared their module
    atexit.register(_index.cache_clear)
    return index


_PARSING = threading.Lock()  # one parse at a time through the shared index


def _clang(clang: str | None, text: str) -> tuple[bool, str]:
    """(no errors, clang's messages) for `text` as `<stdin>`: through `clang`, a clang++ to run, where given;
    else libclang where installed; else the clang++ find_clang() finds."""
    index = None if clang else _index()
    if index is not None:
        return _parse(index, text)
    clang = clang or find_clang()
    if clang is None:
        raise CompileError(NOT_FOUND)
    try:
        done = subprocess.run(
            [clang, *CLANG_FLAGS, "-I", str(SHIM), "-"], input=text, capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise CompileError(f"could not run {clang} to check MSL: {e}") from None
    return done.returncode == 0, done.stderr


def _parse(index, text: str) -> tuple[bool, str]:
    flags = [f for f in CLANG_FLAGS if f != "-fsyntax-only"] + ["-I", str(SHIM)]
    with _PARSING:
        unit = index.parse("<stdin>", args=flags, unsaved_files=[("<stdin>", text)])
        messages = [
            (
                d.severity >= d.Error,
                f"{d.location.file}:{d.location.line}:{d.location.column}: "
                f"{'error' if d.severity >= d.Error else 'warning'}: {d.spelling}",
            )
            for d in unit.diagnostics
        ]
    return not any(bad for bad, _ in messages), "\n".join(m for _, m in messages)


def check(source: str, name: str = "kernel", clang: str | None = None) -> None:
    """Raise CompileError, with each message followed by the generated line, if `source` fails. `clang`: a
    clang++ to run; by default libclang in this process where installed, else the clang++ on the PATH."""
    problems = attribute_problems(source)
    ok, log = _clang(clang, source)
    if ok and not problems:
        return
    text = "\n".join(
        [f"<stdin>:{p.split(':', 1)[0]}:1: error: {p.split(':', 1)[1].strip()}" for p in problems]
        + ([log] if not ok else [])
    )
    raise CompileError(
        build_log.annotate(f"generated MSL kernel {name} fails the Metal check:", source, text, r"<stdin>:(\d+):\d+:")
    )


def check_many(sources: dict[str, str], clang: str | None = None) -> None:
    """Check several kernels with one clang run (each in its own namespace); where that fails, each
    kernel alone, so the error names the kernel and its line."""
    parts = ["#include <metal_stdlib>\nusing namespace metal;"]
    for i, (name, source) in enumerate(sources.items()):
        if attribute_problems(source):
            check(source, name, clang)
        body = "\n".join(
            line
            for line in source.splitlines()
            if line.strip() not in ("#include <metal_stdlib>", "using namespace metal;")
        )
        parts.append(f"namespace tj_check_{i} {{\n{body}\n}}")
    ok, _ = _clang(clang, "\n".join(parts))
    if not ok:
        for name, source in sources.items():
            check(source, name, clang)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-1].strip())
        return 2
    failed = 0
    for path in argv:
        try:
            check(Path(path).read_text(), path)
            print(f"{path}: ok")
        except CompileError as e:
            failed += 1
            print(e, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
