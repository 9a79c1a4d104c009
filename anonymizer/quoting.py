"""Quoting a value in a message, shared by every layer (the command line, the input and
release checks, the audit): a message stays one line of at most 300 characters
(docs/commands.md, exit codes) whatever a file's cell, id or line holds. Generic text
handling, no privacy logic; it sits here, under every layer, so that all of them use one
rule (:mod:`serialpub.errors` re-exports it).
"""

from __future__ import annotations

import reprlib

#: characters of a quoted text value, quotes and ellipsis included
QUOTED_CHARS = 60

_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = QUOTED_CHARS
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxset = _SHORT.maxfrozenset = _SHORT.maxdict = 3
_SHORT.fillvalue = "…"


def quoted(value: object) -> str:
    """``repr(value)`` for a message, shortened by the standard library's :mod:`reprlib`: a
    text longer than :data:`QUOTED_CHARS` keeps its start and end around an ellipsis
    (``'abc…xyz'``), a list or tuple its first three items, each shortened alike. A newline
    inside a value is escaped by ``repr``, so the message stays one line. Only the first
    characters of a long text are read: quoting a long value costs no more than a short one."""
    return _SHORT.repr(value)
