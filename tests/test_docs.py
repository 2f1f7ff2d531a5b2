"""The generated documentation matches the code: the errors page (tracejit/errors.py) and the table of
environment variables are up to date, every TRACEJIT_* variable the code reads is documented (and every
documented one is read), and every example on the errors page raises the error it documents."""
from __future__ import annotations

import importlib
import importlib.util
import re
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import tracejit as tj

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


generate = _load("generate")
variables = generate.environment_variables


@pytest.mark.parametrize("page", ["guide/errors.md", "reference/environment.md"])
def test_generated_page_is_up_to_date(page):
    assert page not in generate.stale(), f"docs/{page} is out of date: run `make docs` (python docs/generate.py)"


def _undocumented(found: dict, documented: set) -> list[str]:
    return sorted(f"{name} (in {', '.join(sorted(files))})" for name, files in found.items()
                  if name not in documented and name not in variables.NOT_VARIABLES)


def test_every_variable_tracejit_reads_is_documented():
    missing = _undocumented(generate.scan("library"), set(variables.LIBRARY))
    assert not missing, ("TRACEJIT_* variables read by tracejit/ with no row in docs/environment_variables.py "
                         "(LIBRARY): " + "; ".join(missing))


def test_every_variable_the_suite_reads_is_documented():
    missing = _undocumented(generate.scan("suite"), set(variables.LIBRARY) | set(variables.SUITE))
    assert not missing, ("TRACEJIT_* variables read by the tests, benchmarks or build with no row in "
                         "docs/environment_variables.py: " + "; ".join(missing))


def test_every_documented_variable_is_read_somewhere():
    library, suite = generate.scan("library"), generate.scan("suite")
    stale = sorted(set(variables.LIBRARY) - set(library)) + sorted(set(variables.SUITE) - set(suite))
    assert not stale, f"docs/environment_variables.py documents variables nothing reads any more: {stale}"


def test_no_variable_name_is_put_together_at_run_time():
    """A name put together at run time (the prefix joined to a suffix) would escape the scan above."""
    assert not generate.built_names("library") + generate.built_names("suite")


def test_the_scan_finds_a_variable_read_through_a_constant():
    """The scan sees names wherever they are written: a constant read later (nvrtc.ENV_ARCH) counts."""
    found = generate.scan("library")
    assert "TRACEJIT_CUDA_ARCH" in found and "TRACEJIT_DEBUG" in found
    assert "TRACEJIT_PRIVATE_BUILD" in found   # not a variable: listed in NOT_VARIABLES, so never demanded


# ---- the errors page's examples ----------------------------------------------------------------------------

CLASSES = generate.error_classes()


def test_every_error_class_but_the_internal_one_has_an_example_and_advice():
    for cls in CLASSES:
        meaning, example, fix = generate.split_docstring(cls)
        assert meaning and fix, cls.__name__
        assert bool(example) == (cls is not tj.InternalError), cls.__name__


def _device_needed(code: str) -> str | None:
    for name in ("opencl", "webgpu", "cuda", "metal"):
        if f'device="{name}"' in code:
            return name
    return None


@pytest.mark.parametrize("cls", [c for c in CLASSES if generate.split_docstring(c)[1]], ids=lambda c: c.__name__)
def test_the_example_raises_the_error_it_documents(cls, tmp_path):
    code = "\n".join(generate.split_docstring(cls)[1])
    device = _device_needed(code)
    if device and device not in {d.name for d in tj.devices() if d.available}:
        pytest.skip(f"the example runs on {device}, which is not available here")
    if "os.environ" in code:   # it sets a variable: in a process of its own, with a cache of its own
        script = tmp_path / "example.py"
        script.write_text(
            "import os, sys, warnings\nimport numpy as np\nimport tracejit as tj\n"
            f"warnings.simplefilter('error', tj.errors.CacheWarning)\ntry:\n"
            + "".join(f"    {line}\n" for line in code.splitlines())
            + f"except tj.errors.{cls.__name__}:\n    sys.exit(0)\nsys.exit('no {cls.__name__}')\n")
        env = {**os.environ, "TRACEJIT_CACHE_DIR": str(tmp_path / "cache")}
        done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        return
    namespace = {"np": np, "tj": tj}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", tj.errors.CacheWarning)
            with pytest.raises(cls):
                exec(compile(code, f"<{cls.__name__} example>", "exec"), namespace)
    finally:
        if "set_memory_limit" in code:
            tj.set_memory_limit(None, device=device)


# ---- what the pages name exists ----------------------------------------------------------------------------

PAGES = sorted((ROOT / "docs").rglob("*.md"))
PACKAGE_PATH = r"(?<![\w/])(?:tracejit/)?((?:codegen|runtime|ir|frontend|numpy|dask)/[\w/]*\w\.py)"
REPOSITORY_PATH = r"(?<![\w/])((?:tests|benchmarks|examples)/[\w/]*\w(?:\.py|/)|tracejit/[\w/.]*\w/?)"
DOTTED = r"(?<![\w.])(?:tracejit|tj)((?:\.[A-Za-z_]\w*){2,})"


def test_every_file_the_pages_name_exists():
    """The pages name modules by path (ir/ops.py, codegen/simt/wgsl.py, tests/plugin_reference/): a move or a
    rename must update them."""
    missing = set()
    for page in PAGES:
        text = page.read_text()
        missing |= {f"{page.relative_to(ROOT)}: tracejit/{p}" for p in re.findall(PACKAGE_PATH, text)
                    if not (ROOT / "tracejit" / p).exists()}
        missing |= {f"{page.relative_to(ROOT)}: {p}" for p in re.findall(REPOSITORY_PATH, text) if not (ROOT / p).exists()}
    assert not missing, "files the docs name that do not exist:\n" + "\n".join(sorted(missing))


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for name in parts[i:]:
                obj = getattr(obj, name)
        except AttributeError:
            return False
        return True
    return False


def test_every_dotted_name_the_pages_give_resolves():
    """tracejit.numpy.tensor.MAX_UNROLL, tracejit.ir.fuse.Program, ...: each names a module and attribute that exist."""
    missing = {f"{page.relative_to(ROOT)}: tracejit{rest}" for page in PAGES
               for rest in re.findall(DOTTED, page.read_text()) if not _resolves("tracejit" + rest)}
    assert not missing, "names the docs give that do not resolve:\n" + "\n".join(sorted(missing))
