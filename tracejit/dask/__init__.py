"""Dask arrays as kernel arguments: a kernel planned once and computed block by block (joined to the core through frontend/hooks.py)."""
