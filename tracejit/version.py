"""The tracejit version: one place, read by the package root and by the cache key (no import of the root)."""

__version__ = "0.1.0"
