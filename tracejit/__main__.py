"""python -m tracejit info: the device list, available or not and why."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tracejit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="list devices and versions")
    args = parser.parse_args(argv)
    if args.command == "info":
        import numpy

        import tracejit as tj
        from tracejit.runtime.cache_dir import cache_dir
        from tracejit.runtime.registry import default_device_name
        print(f"tracejit {tj.__version__} (numpy {numpy.__version__}, python {sys.version.split()[0]})")
        print(f"cache directory: {cache_dir()}")
        print(f"default device: {default_device_name()}")
        print("devices:")
        for info in tj.devices():
            print(f"  {info}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
