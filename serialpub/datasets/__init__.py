"""Data sets bundled with serialpub."""
