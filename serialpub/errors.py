"""Errors the user can fix; the command line prints them as one line and exits 2."""

from __future__ import annotations


class InputError(Exception):
    """Bad input: a file, row, column or option the user must fix. Nothing was changed."""
