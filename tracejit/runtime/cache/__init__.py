"""The disk cache every target shares: its directory, its keys, its files, and moving it between machines."""
