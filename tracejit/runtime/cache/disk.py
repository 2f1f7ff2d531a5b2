"""The disk cache: compiled artifacts under a content-addressed key of named parts.

Two methods, `get` and `put`, one disk implementation (after CuPy's): each entry is one file that
carries its key and its own checksum, written to a temp file and moved into place, so readers see a
whole entry or none; nothing in it is ever unpickled or executed on load. A backend may keep derived
files for an entry in `artifacts(key)` (numba's module and Numba's own cache); they are counted and
evicted with the entry. Failures to read or write warn once and fall back to compiling.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from tracejit.errors import CacheWarning
from tracejit.runtime.cache.directory import cache_dir, make_private_dirs
from tracejit.runtime.debug import log

MAGIC = b"tracejit-cache-entry 1\n"
DEFAULT_MAX_BYTES = 2 << 30
ENV_MAX_BYTES = "TRACEJIT_CACHE_MAX_BYTES"


@dataclass(frozen=True)
class CacheKey:
    """Named parts (kernel, target, device, options, tracejit, compiler ...) hashed in order."""

    target: str
    name: str  # the kernel's name, for messages
    parts: tuple[tuple[str, str], ...]

    @property
    def digest(self) -> str:
        return digest_of(self.target, dict(self.parts))

    @property
    def kernel(self) -> str:
        """The part naming what is compiled; a miss is explained against the last entry with it."""
        return dict(self.parts)["kernel"]


def digest_of(target: str, parts: dict[str, str]) -> str:
    text = "\n".join(f"{k}={v}" for k, v in sorted({**parts, "target": target}.items()))
    return hashlib.sha256(text.encode()).hexdigest()


_warned: set[str] = set()


def _warn_once(what: str, message: str) -> None:
    if what not in _warned:
        _warned.add(what)
        warnings.warn(f"tracejit: {message}", CacheWarning, stacklevel=4)


class DiskCache:
    def __init__(self, root: Path | None = None):
        self._root = root

    @property
    def root(self) -> Path:
        return self._root if self._root is not None else cache_dir() / "kernels"

    def _entry(self, key: CacheKey) -> Path:
        d = key.digest
        return self.root / "entries" / key.target / d[:2] / d

    def artifacts(self, key: CacheKey) -> Path:
        """A directory the backend may fill with files derived from this entry."""
        return self.root / "artifacts" / key.target / key.digest

    def _index(self, key: CacheKey) -> Path:
        return self.root / "index" / key.target / hashlib.sha256(key.kernel.encode()).hexdigest()[:32]

    # -- the interface --
    def get(self, key: CacheKey) -> bytes | None:
        return self.lookup(key)[0]

    def lookup(self, key: CacheKey) -> tuple[bytes | None, str]:
        """(payload or None, "hit" | "miss" | "corrupt" | "unreadable"). A corrupt entry is reported once,
        removed with its artifacts, and must be rebuilt."""
        path = self._entry(key)
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            log(1, f"disk cache miss for {key.name} ({key.target}): {self.explain_miss(key)}")
            return None, "miss"
        except OSError as e:
            if self.repair(path):
                _warn_once(
                    f"corrupt:{path}",
                    f"cache entry {path} was damaged (a directory where a file "
                    "belongs, or a file where a directory belongs); it is removed "
                    "and the kernel rebuilt",
                )
                return None, "corrupt"
            _warn_once("read", f"cannot read the kernel cache at {self.root} ({e}); compiling instead")
            return None, "unreadable"
        payload = parse_entry(blob, key)
        if payload is None:
            _warn_once(
                f"corrupt:{path}",
                f"cache entry {path} is corrupt (truncated or changed bytes); it is removed and the kernel rebuilt",
            )
            self.remove(path)
            return None, "corrupt"
        try:
            os.utime(path)  # least recently used = oldest mtime
        except OSError:
            pass
        return payload, "hit"

    def reject(self, key: CacheKey, why: str) -> None:
        """An entry whose checksum holds but whose payload is not what its target stores (written by hand or
        by something else): reported once, removed, and the kernel rebuilt by the caller."""
        path = self._entry(key)
        _warn_once(f"corrupt:{path}", f"cache entry {path} {why}; it is removed and the kernel rebuilt")
        self.remove(path)

    def put(self, key: CacheKey, payload: bytes) -> None:
        header = json.dumps(
            {
                "target": key.target,
                "name": key.name,
                "parts": dict(key.parts),
                "sha256": hashlib.sha256(payload).hexdigest(),
                "size": len(payload),
            },
            sort_keys=True,
        ).encode()
        blob = MAGIC + header + b"\n" + payload
        try:
            for path, data in (
                (self._entry(key), blob),
                (self._index(key), json.dumps(dict(key.parts), sort_keys=True).encode()),
            ):
                try:
                    write_atomic(path, data)
                except OSError:
                    if not self.repair(path):
                        raise
                    write_atomic(path, data)
        except OSError as e:
            _warn_once(
                "write",
                f"cannot write the kernel cache at {self.root} ({e}); kernels are compiled "
                "but not kept for the next process",
            )
            return
        # The bytes held are kept in a ledger that every put adds to, and set right by a full scan where
        # there is none (a new, cleared or imported cache) and whenever the cap is reached: scanning a
        # cache of 20,000 files on each process's first compile cost it a second.
        total = self.ledger_total()
        if total is None:
            total = sum(size for _, size, _ in self.entries())
        else:
            total += len(blob) + _tree_size(self.artifacts(key))
        limit = max_bytes()
        if total > limit:
            self.evict(limit)
        else:
            self._write_ledger(total)

    # -- explaining, sizing, evicting --
    def explain_miss(self, key: CacheKey) -> str:
        try:
            before = json.loads(self._index(key).read_text())
        except (OSError, ValueError):
            return "not compiled before"
        changed = [f"{k} was {before.get(k)!r}, now {v!r}" for k, v in key.parts if before.get(k) != v]
        return "; ".join(changed) if changed else "the entry was evicted or removed"

    def entries(self) -> list[tuple[Path, int, float]]:
        """(entry file, bytes including its artifacts, last use) for every entry."""
        out: list[tuple[Path, int, float]] = []
        base = self.root / "entries"
        if not base.is_dir():
            return out
        for target in base.iterdir():
            for path in target.glob("*/*"):
                if path.name.startswith(".tmp-"):
                    continue
                try:
                    st = path.stat()
                except OSError:
                    continue
                out.append(
                    (path, st.st_size + _tree_size(self.root / "artifacts" / target.name / path.name), st.st_mtime)
                )
        return out

    def evict(self, limit: int) -> int:
        """Remove least recently used entries (and their artifacts) until the cache holds at most
        `limit` bytes; returns how many were removed."""
        remove_stale_temp_files(self.root)  # left by writers killed mid-write
        entries = self.entries()
        total = sum(size for _, size, _ in entries)
        removed = 0
        for path, size, _ in sorted(entries, key=lambda e: e[2]):
            if total <= limit:
                break
            self.remove(path)
            total -= size
            removed += 1
        self._write_ledger(total)
        return removed

    def _ledger(self) -> Path:
        return self.root / "size"

    def ledger_total(self) -> int | None:
        """The bytes held as the ledger has them (approximate: writers racing may each miss the other's
        addition until the next scan), or None where there is no ledger to trust."""
        try:
            return int(self._ledger().read_text())
        except (OSError, ValueError):
            return None

    def _write_ledger(self, total: int) -> None:
        try:
            write_atomic(self._ledger(), str(total).encode())
        except OSError:
            pass

    def forget_size(self) -> None:
        """Entries arrived by another way than put (an imported archive): the next put scans."""
        try:
            self._ledger().unlink()
        except OSError:
            pass

    def repair(self, path: Path) -> bool:
        """Make `path` (a file inside the cache) writable again where the cache's own tree is damaged: a
        file where one of its directories belongs, or a directory where it belongs, is removed. Returns
        whether anything was removed; permission problems are left alone (they are the user's to fix)."""
        try:
            inside = path.relative_to(self.root)
        except ValueError:
            return False
        repaired = False
        try:
            for d in [self.root.joinpath(*inside.parts[:i]) for i in range(1, len(inside.parts))]:
                if d.is_symlink() or (d.exists() and not d.is_dir()):
                    repaired |= _remove_path(d)
            if path.is_dir() and not path.is_symlink():
                repaired |= _remove_path(path)
        except OSError:  # a directory on the way cannot be read: not damage tracejit can mend
            pass
        return repaired

    def remove(self, entry: Path) -> None:
        target = entry.parent.parent.name
        try:
            entry.unlink()
        except OSError:
            pass
        shutil.rmtree(self.root / "artifacts" / target / entry.name, ignore_errors=True)

    def clear(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def parse_entry(blob: bytes, key: CacheKey | None = None) -> bytes | None:
    """The payload of an entry file, or None if it is not whole and unchanged (or not for `key`)."""
    if not blob.startswith(MAGIC):
        return None
    end = blob.find(b"\n", len(MAGIC))
    if end < 0:
        return None
    try:
        header = json.loads(blob[len(MAGIC) : end])
    except ValueError:
        return None
    payload = blob[end + 1 :]
    if (
        not isinstance(header, dict)
        or header.get("size") != len(payload)
        or header.get("sha256") != hashlib.sha256(payload).hexdigest()
    ):
        return None
    if key is not None and (header.get("target") != key.target or header.get("parts") != dict(key.parts)):
        return None
    return payload


def max_bytes() -> int:
    value = os.environ.get(ENV_MAX_BYTES)
    if not value:
        return DEFAULT_MAX_BYTES
    try:
        return int(float(value))
    except ValueError:
        _warn_once("max", f"{ENV_MAX_BYTES}={value!r} is not a number of bytes; using {DEFAULT_MAX_BYTES}")
        return DEFAULT_MAX_BYTES


def write_atomic(path: Path, data: bytes) -> None:
    """Write to a temp file beside `path`, then rename it into place: never a partial file at `path`."""
    make_private_dirs(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _remove_path(p: Path) -> bool:
    try:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()
        return True
    except OSError:
        return False


def _tree_size(path: Path) -> int:
    """Bytes of the files under `path`, which another process's eviction may be removing meanwhile (a soak's
    shared cache raised FileNotFoundError into a kernel call here)."""
    total = 0
    try:
        for p in path.rglob("*"):
            try:
                if p.is_file():
                    total += p.stat().st_size
            except OSError:  # removed since the walk listed it
                pass
    except OSError:  # the directory itself removed meanwhile
        pass
    return total


def remove_stale_temp_files(root: Path, older_than_s: float = 3600.0) -> int:
    """Temp files left by writers that were killed mid-write (never visible as entries)."""
    removed, now = 0, time.time()
    for p in root.rglob(".tmp-*"):
        try:
            if now - p.stat().st_mtime > older_than_s:
                p.unlink()
                removed += 1
        except OSError:
            pass
    return removed


CACHE = DiskCache()
