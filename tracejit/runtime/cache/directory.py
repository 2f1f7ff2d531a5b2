"""Where tracejit keeps files: TRACEJIT_CACHE_DIR, else the platform's user cache directory."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def cache_dir() -> Path:
    """TRACEJIT_CACHE_DIR, else platformdirs' user cache directory: ~/.cache/tracejit (XDG_CACHE_HOME on
    Linux), ~/Library/Caches/tracejit (macOS), %LOCALAPPDATA%\\tracejit\\Cache (Windows)."""
    env = os.environ.get("TRACEJIT_CACHE_DIR")
    root = Path(env) if env else Path(platformdirs.user_cache_dir("tracejit", appauthor=False))
    try:
        make_private_dirs(root)
    except OSError:
        pass  # unusable (read-only, a file, full): each reader and writer warns and goes on without it
    return root


def make_private_dirs(path: Path) -> None:
    """mkdir -p where every directory created is 0700 (mkdir's parents=True would leave them 0755)."""
    for p in [*reversed(path.parents), path]:
        if not p.is_dir():
            try:
                p.mkdir(mode=0o700)
            except FileExistsError:
                pass
