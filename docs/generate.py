"""The generated parts of the docs, rewritten from the code: the supported NumPy API, the errors page (from
tracejit/errors.py) and the environment variables. `python docs/generate.py` rewrites them (make docs runs
it); `--check` only reports the pages that are out of date (tests/test_docs.py checks the same)."""
from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
for path in (str(ROOT), str(DOCS)):
    if path not in sys.path:
        sys.path.insert(0, path)

import environment_variables  # noqa: E402  (docs/environment_variables.py)
import tracejit  # noqa: E402
from tracejit import errors  # noqa: E402
from tracejit.numpy import api_table  # noqa: E402


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start (python docs/generate.py) -->", f"<!-- {name}:end -->"


# ---- the errors page -------------------------------------------------------------------------------------

def error_classes() -> list[type]:
    """The classes of tracejit/errors.py, in the order the file defines them."""
    return [c for c in vars(errors).values()
            if isinstance(c, type) and issubclass(c, BaseException) and c.__module__ == errors.__name__]


def public_name(cls: type) -> str:
    return f"tj.{cls.__name__}" if getattr(tracejit, cls.__name__, None) is cls else f"tracejit.errors.{cls.__name__}"


def split_docstring(cls: type) -> tuple[str, list[str], str]:
    """(what it means, the example's lines without their prompts, the fix): the docstring is prose, then
    `>>> ` lines (`... ` continues one), then the fix."""
    lines = inspect.cleandoc(cls.__doc__ or "").splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(">>> ")), None)
    if start is None:   # no example: the last paragraph is the advice
        paragraphs = "\n".join(lines).split("\n\n")
        return "\n\n".join(paragraphs[:-1]).strip(), [], paragraphs[-1].strip() if len(paragraphs) > 1 else ""
    end = start
    while end < len(lines) and lines[end].startswith((">>> ", "... ")):
        end += 1
    return ("\n".join(lines[:start]).strip(), [line[4:] for line in lines[start:end]],
            " ".join(line.strip() for line in lines[end:]).strip())


def _first_sentence(text: str) -> str:
    paragraph = " ".join(text.split("\n\n")[0].split())
    return re.split(r"(?<=\.)\s+(?=[A-Za-z])", paragraph)[0]


def _also(cls: type) -> str:
    """The other classes an `except` clause may name for it: tracejit's, and the built-in ones that it or
    one of them subclasses directly (ValueError, not ValueError's own bases)."""
    ours = [c for c in cls.__mro__ if c.__module__ == errors.__name__]
    builtin = {b for c in ours for b in c.__bases__ if b.__module__ != errors.__name__} - {Exception}
    names = [public_name(c) if c in ours else c.__name__ for c in cls.__mro__[1:] if c in ours or c in builtin]
    return ", ".join(f"`{n}`" for n in names)


def errors_block() -> str:
    start, end = markers("errors")
    rows = ["| error | also an instance of | when |", "|---|---|---|"]
    sections = []
    for cls in error_classes():
        name, anchor = public_name(cls), cls.__name__.lower()
        meaning, example, fix = split_docstring(cls)
        rows.append(f"| [`{name}`](#{anchor}) | {_also(cls) or '-'} | {_first_sentence(meaning)} |")
        body = [f"### `{name}` {{ #{anchor} }}", ""]
        if _also(cls):
            body += [f"Also an instance of {_also(cls)}.", ""]
        body += [meaning, ""]
        if example:
            body += ["```python", *example, "```", ""]
        if fix:
            body += [f"**What to do.** {fix}", ""]
        sections.append("\n".join(body).rstrip())
    return "\n".join([start, "", *rows, "", "\n\n".join(sections), "", end])


# ---- the environment variables ---------------------------------------------------------------------------

NAME = re.compile(r"(?<![A-Za-z0-9])TRACEJIT_[A-Z0-9_]*[A-Z0-9](?![A-Za-z0-9_])")
BUILT = re.compile(r"(?<![A-Za-z0-9])TRACEJIT_(?=[\"'{])")   # "TRACEJIT_" + name, f"TRACEJIT_{x}": unscannable


def _files(where: str) -> list[Path]:
    """The text files of the library ("library") or of the suite, benchmarks, examples and build ("suite")."""
    if where == "library":
        found = (ROOT / "tracejit").rglob("*")
    else:
        found = [p for d in ("tests", "benchmarks", "examples") for p in (ROOT / d).rglob("*.py")]
        found += [ROOT / "Makefile", ROOT / ".ci" / "run"]
    return sorted(p for p in found if p.is_file() and "__pycache__" not in p.parts
                  and p.suffix not in (".pyc", ".so", ".o", ".pch", ".gch"))


def scan(where: str) -> dict[str, set[str]]:
    """TRACEJIT_* name -> the files (relative to the repository) that mention it."""
    names: dict[str, set[str]] = {}
    for path in _files(where):
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        for name in NAME.findall(text):
            names.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return names


def built_names(where: str) -> list[str]:
    """file:line of every variable name put together at run time, which no scan can check."""
    return [f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}"
            for path in _files(where) if path.suffix == ".py"
            for text in [path.read_text()] for m in BUILT.finditer(text)]


def _table(rows: dict[str, tuple[str, str]]) -> list[str]:
    out = ["| variable | default | what it does |", "|---|---|---|"]
    for name in sorted(rows):
        default, what = rows[name]
        out.append(f"| `{name}` | {default} | {what} |")
    return out


def environment_block() -> str:
    start, end = markers("environment")
    return "\n".join([
        start, "",
        "### Read by tracejit", "",
        *_table(environment_variables.LIBRARY), "",
        "### Read by the test suite, the Makefile and the benchmarks", "",
        *_table(environment_variables.SUITE), "",
        end])


# ---- the pages -------------------------------------------------------------------------------------------

BLOCKS = {
    "reference/numpy-api.md": ((api_table.START, api_table.END), api_table.table),
    "guide/errors.md": (markers("errors"), errors_block),
    "reference/environment.md": (markers("environment"), environment_block),
}


def stale() -> dict[str, str]:
    """page -> its text with the generated block rewritten, for each page whose block is out of date."""
    out = {}
    for page, ((start, end), make) in BLOCKS.items():
        text = (DOCS / page).read_text()
        i, j = text.index(start), text.index(end) + len(end)
        block = make()
        if text[i:j] != block:
            out[page] = text[:i] + block + text[j:]
    return out


def main(argv: list[str]) -> int:
    changed = stale()
    if "--check" in argv:
        for page in changed:
            print(f"docs/{page} is out of date: run `make docs` (or python docs/generate.py)", file=sys.stderr)
        return 1 if changed else 0
    for page, text in changed.items():
        (DOCS / page).write_text(text)
        print(f"rewrote docs/{page}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
