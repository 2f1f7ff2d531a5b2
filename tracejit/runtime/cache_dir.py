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
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        pass   # unusable (read-only, a file, full): each reader and writer warns and goes on without it
    return root
