"""python -m tracejit info | warm | graph | cache | tune: devices, warming, what fused, the kernel disk cache,
this machine's transpose tiles."""

from __future__ import annotations

import argparse
import json
import os
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tracejit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    i = sub.add_parser("info", help="targets, each device's facts (memory, kind, dtypes) and the recommended one")
    i.add_argument("--json", action="store_true", help="the same as JSON")
    w = sub.add_parser(
        "warm",
        help="compile kernels into the disk cache without running them",
        description="Compile MODULE:FUNC for the given argument specs, or every entry of a "
        "manifest (one JSON object per line, as TRACEJIT_RECORD writes), into the "
        "disk cache, in parallel worker processes.",
    )
    w.add_argument("function", nargs="?", help="MODULE:FUNC of a @tj.kernel function")
    w.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="SPEC",
        help="an argument: dtype[shape] such as float32[4096,1024] (float32[n,1024] or "
        "float32[n=4096,1024]: a symbolic dimension n), or int / float / bool",
    )
    w.add_argument(
        "--static",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a static argument (VALUE read as JSON, else as a string)",
    )
    w.add_argument("--device", default=None, help="comma-separated devices (default: the default device)")
    w.add_argument("--manifest", help="a manifest file: one JSON object per line")
    w.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1), help="worker processes")
    g = sub.add_parser(
        "graph",
        help="draw what fused: the graph IR with a cluster per kernel",
        description="Trace MODULE:FUNC for the given argument specs and draw its graph IR as "
        "scheduled for a device, one cluster per kernel (Graphviz's dot); without "
        "dot, print the DOT text.",
    )
    g.add_argument("function", help="MODULE:FUNC of a @tj.kernel function")
    g.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="SPEC",
        help="an argument: dtype[shape] such as float32[4096,1024], or int / float / bool",
    )
    g.add_argument("--device", default=None, help="the device whose fusion to show (default: the default device)")
    g.add_argument("-o", "--output", help="the drawing: graph.svg, graph.png, graph.pdf (default: DOT on stdout)")
    c = sub.add_parser("cache", help="inspect or move the kernel disk cache")
    c.add_argument("action", choices=["info", "clear", "export", "import"])
    c.add_argument("file", nargs="?", help="the archive for export / import")
    sub.add_parser(
        "tune",
        help="time the numba device's transpose tiles on this machine and keep the fastest",
        description="Time x.T + y with each candidate tile for 1-, 2-, 4- and 8-byte elements on the "
        "numba device (about 20 s) and keep the fastest in the cache directory; the numba "
        "device uses them from then on, in every process on this machine.",
    )
    args = parser.parse_args(argv)
    if args.command == "tune":
        return _tune()
    if args.command == "info":
        return _info(args.json)
    if args.command == "warm":
        return _warm(args, parser)
    if args.command == "graph":
        return _graph(args)
    return _cache(args, parser)


def _tune() -> int:
    from tracejit.frontend.tuning import tune
    from tracejit.runtime.numba.tuning import record_path

    print("x.T + y on the numba device, median ms of each tile (rows x columns of the output):")
    record = tune(report=lambda line: print(line, flush=True))
    tiles = ", ".join(f"{r}x{c}" for r, c in record["transpose_tiles"])
    print(f"kept {tiles} (1, 2, 4, 8 bytes) in {record_path(record['machine'])}")
    return 0


def _info(as_json: bool = False) -> int:
    """The targets (usable here or why not), each usable device's facts, the recommended device."""
    import numpy

    import tracejit as tj
    from tracejit.runtime.cache.directory import cache_dir
    from tracejit.runtime.registry import default_device_name

    statuses = tj.devices()
    facts: dict[str, tj.DeviceInfo | str] = {}  # what each device says of itself, or why it did not open
    for status in statuses:
        if status.available:
            try:
                facts[status.name] = tj.device(status.name).info
            except Exception as e:  # one device failing to open must not hide the others
                facts[status.name] = f"{type(e).__name__}: {e}"
    try:
        recommended = tj.select_device()
    except tj.DeviceError:
        recommended = None
    summary = {
        "tracejit": tj.__version__,
        "numpy": numpy.__version__,
        "python": sys.version.split()[0],
        "cache_directory": str(cache_dir()),
        "default_device": default_device_name(),
        "recommended_device": recommended,
        "targets": [
            {"name": s.name, "available": s.available, "reason": s.reason, "description": s.description}
            for s in statuses
        ],
        "devices": [f.as_dict() if isinstance(f, tj.DeviceInfo) else {"name": n, "error": f} for n, f in facts.items()],
    }
    if as_json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"tracejit {tj.__version__} (numpy {numpy.__version__}, python {sys.version.split()[0]})")
    print(f"cache directory: {cache_dir()}")
    print("targets:")
    for s in statuses:
        print(f"  {'✓' if s.available else '✗'} {s.name:<8} {s.description if s.available else s.reason}")
    print("devices:")
    for name, f in facts.items():
        print(f"  {name:<8} {_describe(f) if isinstance(f, tj.DeviceInfo) else 'could not be opened: ' + f}")
    print(f"recommended device: {recommended or 'none'}")
    print(f"default device: {default_device_name()}")
    return 0


def _describe(info) -> str:
    """One line of a device's facts: kind, vendor, memory, unified memory, compute units."""

    def gib(n):
        return "unknown" if n is None else f"{n / 2**30:.1f} GiB"

    parts = [
        info.kind,
        info.vendor or "vendor unknown",
        f"memory {gib(info.total_memory)} total, {gib(info.free_memory)} free",
        {True: "unified memory", False: "discrete memory", None: "unified memory unknown"}[info.unified_memory],
    ]
    if info.compute_units is not None:
        parts.append(f"compute units: {info.compute_units}")
    if info.compute_capability is not None:
        parts.append("compute capability {}.{}".format(*info.compute_capability))
    return "; ".join(parts)


def _graph(args) -> int:
    from tracejit.errors import TracejitError
    from tracejit.frontend.graph_view import render, to_dot
    from tracejit.frontend.manifest import parse_arg
    from tracejit.frontend.warm import load_kernel

    try:
        kernel = load_kernel(args.function)
        g = kernel.trace(*[parse_arg(a) for a in args.arg]).to_networkx(args.device)
        if args.output and args.output.rsplit(".", 1)[-1].lower() in (args.output, "dot"):
            raise TracejitError(
                f"-o {args.output}: name a drawing such as graph.svg, graph.png or graph.pdf "
                "(leave -o out for the DOT text)"
            )
    except (TracejitError, ImportError, AttributeError) as e:
        print(f"python -m tracejit graph: {e}", file=sys.stderr)
        return 2
    dot = to_dot(g)
    print(
        f"{g.graph['name']}: {g.number_of_nodes()} nodes in {len(g.graph['kernels'])} kernel(s): "
        f"{', '.join(g.graph['kernels'])}",
        file=sys.stderr,
    )
    if not args.output:
        sys.stdout.write(dot)
        return 0
    why = render(dot, args.output)
    if why is None:
        print(f"wrote {args.output}", file=sys.stderr)
        return 0
    print(
        f"could not draw {args.output}: {why}; the DOT text follows (paste it into any Graphviz viewer)",
        file=sys.stderr,
    )
    sys.stdout.write(dot)
    return 1


def _warm(args, parser) -> int:
    from tracejit.frontend.manifest import read_manifest
    from tracejit.frontend.warm import warm_entry

    if bool(args.manifest) == bool(args.function):
        parser.error("warm takes either MODULE:FUNC (with --arg) or --manifest FILE")
    devices = args.device.split(",") if args.device else None
    if args.manifest:
        entries = read_manifest(args.manifest)
        if devices:
            entries = [dict(e, devices=devices) for e in entries]
    else:
        static = {}
        for item in args.static:
            name, _, value = item.partition("=")
            try:
                static[name] = json.loads(value)
            except ValueError:
                static[name] = value
        entries = [{"function": args.function, "args": args.arg, "static": static, "devices": devices}]
    progress: _Bar | _Lines
    if sys.stderr.isatty() and "TRACEJIT_WARM_PROGRESS" not in os.environ:
        progress = _Bar(sum(len(e.get("devices") or [None]) for e in entries))  # a result per device
    else:
        progress = _Lines()
    # this command's own bar or lines only: none of a compile's (runtime/progress.py) here or in the workers
    os.environ["TRACEJIT_PROGRESS"] = "0"
    results = []
    if args.jobs <= 1 or len(entries) == 1:
        for entry in entries:
            results += _report(warm_entry(entry), progress)
    else:
        import concurrent.futures as cf
        import multiprocessing

        context = multiprocessing.get_context("spawn")  # a clean interpreter per worker, no inherited devices
        with cf.ProcessPoolExecutor(max_workers=min(args.jobs, len(entries)), mp_context=context) as pool:
            for done in cf.as_completed([pool.submit(warm_entry, e) for e in entries]):
                results += _report(done.result(), progress)
    progress.close()
    failed = [r for r in results if r["error"]]
    compiled = sum(r["compiled"] for r in results)
    cached = sum(r["cached"] for r in results)
    print(
        f"warmed {len(results) - len(failed)} of {len(results)}: {compiled} kernel(s) compiled, {cached} "
        f"already cached" + (f"; {len(failed)} failed" if failed else "")
    )
    return 1 if failed else 0


def _report(results: list[dict], progress) -> list[dict]:
    for r in results:
        progress.step(r)
    return results


def _line(r: dict) -> str:
    if r["error"]:
        return f"{r['function']}({r['signature']}) on {r['device']}: FAILED: {r['error']}"
    return (
        f"{r['function']}({r['signature']}) on {r['device']}: {len(r['kernels'])} kernel(s), "
        f"{r['compiled']} compiled, {r['cached']} cached, {r['seconds']:.2f} s"
    )


class _Lines:
    """Not a terminal: one line per warmed signature and device."""

    def step(self, r: dict) -> None:
        print(_line(r), flush=True)

    def close(self) -> None:
        pass


class _Bar:
    """A terminal: one progress bar (tqdm) on stderr, failures printed above it."""

    def __init__(self, total: int):
        from tqdm import tqdm

        self.bar = tqdm(
            total=total,
            file=sys.stderr,
            desc="warming",
            dynamic_ncols=True,
            mininterval=0,
            bar_format="{desc}: {n_fmt}/{total_fmt} |{bar}| {elapsed}{postfix}",
        )

    def step(self, r: dict) -> None:
        if r["error"]:
            self.bar.write(_line(r), file=sys.stderr)
        if self.bar.n >= self.bar.total:  # (a call with Dask arrays warms a result per stage)
            self.bar.total = self.bar.n + 1
        self.bar.set_postfix_str(f"{r['function']} on {r['device']}", refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def _cache(args, parser) -> int:
    from tracejit.runtime.cache import archive as cache_archive
    from tracejit.runtime.cache.disk import CACHE

    if args.action in ("export", "import") and not args.file:
        parser.error(f"cache {args.action} needs a FILE")
    if args.action == "info":
        print(cache_archive.describe(CACHE))
    elif args.action == "clear":
        CACHE.clear()
        print(f"cleared {CACHE.root}")
    elif args.action == "export":
        n = cache_archive.export(CACHE, args.file)
        print(f"exported {n} entries to {args.file}")
    else:
        imported, rejected = cache_archive.import_(CACHE, args.file)
        print(
            f"imported {imported} entries into {CACHE.root}"
            + (f"; rejected {rejected} that failed their checksum" if rejected else "")
        )
        return 1 if rejected else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
