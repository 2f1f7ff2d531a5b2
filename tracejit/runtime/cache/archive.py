"""Moving a warmed kernel cache between machines: `python -m tracejit cache info | export | import`.

An archive is a tar.gz of the cache's entries, their artifacts and the miss-explanation index, with
file times kept (Numba's own cache checks its module's time and size). Import reads only regular files
at relative paths, checks every entry's checksum and that its name is its key's digest, and moves the
good ones into place atomically; a bad entry is rejected with its artifacts.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

from tracejit.runtime.cache.directory import make_private_dirs
from tracejit.runtime.cache.disk import (
    MAGIC,
    DiskCache,
    digest_of,
    max_bytes,
    parse_entry,
    remove_stale_temp_files,
)

_PARTS = ("entries", "artifacts", "index")


def describe(cache: DiskCache) -> str:
    entries = cache.entries()
    by_target: dict[str, list[int]] = {}
    for path, size, _ in entries:
        by_target.setdefault(path.parent.parent.name, []).append(size)
    lines = [
        f"kernel cache: {cache.root}",
        f"  {len(entries)} entries, {sum(s for _, s, _ in entries) / 2**20:.1f} MiB "
        f"(cap {max_bytes() / 2**20:.0f} MiB, TRACEJIT_CACHE_MAX_BYTES)",
    ]
    for target, sizes in sorted(by_target.items()):
        lines.append(f"  {target:<8} {len(sizes)} entries, {sum(sizes) / 2**20:.1f} MiB")
    return "\n".join(lines)


def export(cache: DiskCache, file: str) -> int:
    """Write every entry with its artifacts to a tar.gz; returns the number of entries."""
    remove_stale_temp_files(cache.root)
    count = 0
    with tarfile.open(file, "w:gz") as tar:
        for part in _PARTS:
            base = cache.root / part
            if base.is_dir():
                tar.add(base, arcname=part, filter=_skip_temp)
        count = len(cache.entries())
    return count


def _skip_temp(info: tarfile.TarInfo):
    return None if PurePosixPath(info.name).name.startswith(".tmp-") else info


def import_(cache: DiskCache, file: str) -> tuple[int, int]:
    """Add an exported cache's entries to this one; returns (imported, rejected)."""
    make_private_dirs(cache.root)
    staging = Path(tempfile.mkdtemp(dir=cache.root, prefix=".tmp-import-"))
    try:
        with tarfile.open(file, "r:gz") as tar:
            members = [m for m in tar.getmembers() if _safe(m)]
            tar.extractall(staging, members=members, filter="tar")
        imported = rejected = 0
        for entry in sorted((staging / "entries").glob("*/*/*")):
            target = entry.parent.parent.name
            if not _valid(entry):
                rejected += 1
                continue
            artifacts = staging / "artifacts" / target / entry.name
            if artifacts.is_dir():
                dest = cache.root / "artifacts" / target / entry.name
                shutil.rmtree(dest, ignore_errors=True)
                make_private_dirs(dest.parent)
                os.replace(artifacts, dest)
            dest = cache.root / "entries" / target / entry.name[:2] / entry.name
            make_private_dirs(dest.parent)
            os.replace(entry, dest)  # last: an entry is visible only once its artifacts are in place
            imported += 1
        for index in (staging / "index").glob("*/*"):
            dest = cache.root / "index" / index.parent.name / index.name
            make_private_dirs(dest.parent)
            os.replace(index, dest)
        cache.forget_size()
        return imported, rejected
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _safe(m: tarfile.TarInfo) -> bool:
    path = PurePosixPath(m.name)
    return (
        (m.isfile() or m.isdir())
        and not path.is_absolute()
        and ".." not in path.parts
        and path.parts[:1] in tuple((p,) for p in _PARTS)
    )


def _valid(entry: Path) -> bool:
    """Whole, unchanged, and filed under its own key's digest."""
    blob = entry.read_bytes()
    if parse_entry(blob) is None:
        return False
    header = json.loads(blob[len(MAGIC) : blob.index(b"\n", len(MAGIC))])
    return digest_of(header["target"], header["parts"]) == entry.name and header["target"] == entry.parent.parent.name
