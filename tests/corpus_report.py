"""Run the whole corpus (tests/corpus) on every available device, ignoring test_corpus.py's xfail
table, and print per device what passes and what fails with the first line of its error, then the
totals: the "before/after" count of issue 14. Usage: python tests/corpus_report.py [DEVICE ...] [-k TEXT]"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TRACEJIT_CACHE_DIR", tempfile.mkdtemp(prefix="tracejit-corpus-"))  # leave the user's cache alone

import pytest  # run_kernel skips a dtype a device lacks with pytest.skip

import tracejit as tj
from corpus import all_programs, run_program


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:160]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("devices", nargs="*", help="devices to run (default: every available one)")
    parser.add_argument("-k", default="", help="only programs whose name contains this text")
    options = parser.parse_args()
    devices = options.devices or [info.name for info in tj.devices() if info.available]
    cases = [(p, dtype) for p in all_programs() if options.k in p.name for dtype in p.dtypes]
    totals = {}
    for device in devices:
        passed, failed, skipped = [], [], []
        start = time.perf_counter()
        for p, dtype in cases:
            case = f"{p.name}[{dtype}]"
            try:
                run_program(p, dtype, device)
                passed.append(case)
            except pytest.skip.Exception:
                skipped.append(case)
            except Exception as error:  # noqa: BLE001 - every failure is a line of the report
                failed.append(f"{case}: {first_line(error)}")
        print(f"== {device}: {len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped "
              f"(dtype not on device), {time.perf_counter() - start:.0f} s")
        for case in passed:
            print(f"  pass  {case}")
        for line in failed:
            print(f"  FAIL  {line}")
        totals[device] = (len(passed), len(failed), len(skipped))
    print("== totals (program x dtype): " + "; ".join(
        f"{d}: {p} passed / {p + f} run ({s} skipped)" for d, (p, f, s) in totals.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
