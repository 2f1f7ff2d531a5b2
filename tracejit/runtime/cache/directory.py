"""Where tracejit keeps files: TRACEJIT_CACHE_DIR, else the platform's user cache directory."""
from __future__ import annotations

import os
import sys
from pathlib import Path


def cache_dir() -> Path:
    env = os.environ.get("TRACEJIT_CACHE_DIR")
    if env:
        root = Path(env)
    elif sys.platform == "darwin":
        root = Path.home() / "Library" / "Caches" / "tracejit"
    elif os.name == "nt":
        root = Path(os.environ.get("LOCALAPPDATA", Path.home())) / "tracejit" / "Cache"
    else:
        root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tracejit"
    try:
        make_private_dirs(root)
    except OSError:
        pass   # unusable (read-only, a file, full): each reader and writer warns and goes on without it
    return root


def make_private_dirs(path: Path) -> None:
    """mkdir -p where every directory created is 0700 (mkdir's parents=True would leave them 0755)."""
    for p in [*reversed(path.parents), path]:
        if not p.is_dir():
            try:
                p.mkdir(mode=0o700)
            except FileExistsError:
                pass
