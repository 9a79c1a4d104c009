"""One malloc arena for any process that imports serialpub (glibc only; docs/scaling.md,
"Memory"); ``serialpub/__init__.py`` sets it first, before the steps start their threads.

A release's steps run on short-lived threads (the snapshot's coding, the work ahead, the
measures, the validation), each of which glibc gives an arena of its own. Memory a step
frees stays in its thread's arena, where the next step's arrays, allocated on another
thread, cannot reuse it: the process's resident peak grows by what the arenas hold apart.
With one arena every thread reuses what any other freed. The threads allocate their large
arrays rarely and hold the interpreter's lock between them, so they hardly wait for the
arena's lock.

Best effort: glibc reads the limit when a thread first needs a new arena and fixes it once
the process has more arenas than its test value (eight on 64-bit systems), so a process
that ran many allocating threads before importing serialpub keeps glibc's own limit.
"""

from __future__ import annotations

import ctypes
import os

#: glibc's mallopt parameter for the largest number of arenas (malloc.h)
M_ARENA_MAX = -8

_done = False


def _glibc() -> bool:
    """Whether the C library is glibc (``confstr`` raises or answers None elsewhere)."""
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (OSError, ValueError, AttributeError):
        return False


def _operator_set() -> bool:
    """Whether the environment already sets the arena limit (kept as the operator's choice)."""
    return "MALLOC_ARENA_MAX" in os.environ or "glibc.malloc.arena_max" in os.environ.get("GLIBC_TUNABLES", "")


def share_one_arena() -> bool:
    """Ask glibc's malloc for one arena for the rest of the process, once; a no-op where the
    C library is not glibc or where the environment sets the limit (``MALLOC_ARENA_MAX`` or
    ``GLIBC_TUNABLES``'s ``glibc.malloc.arena_max``). Returns whether glibc accepted the
    setting (see the module docstring for when it takes effect)."""
    global _done
    if _done:
        return True
    if _operator_set() or not _glibc():
        return False
    try:
        # the running process's own symbols: libc is loaded, no library search (which would
        # start a subprocess on every import)
        mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
        _done = mallopt is not None and bool(mallopt(M_ARENA_MAX, 1))
    except (OSError, AttributeError):
        return False
    return _done
