"""One renderer per target: kernel IR -> source text. Pure functions; no device needed."""
