"""One malloc arena for any process that imports serialpub (glibc only; docs/scaling.md,
"Memory"); ``serialpub/__init__.py`` sets it first, before any thread of the process
allocates (glibc fixes its arena limit when a second arena is first needed).

A release's steps run on short-lived threads (the snapshot's coding, the work ahead, the
measures, the validation), each of which glibc gives an arena of its own. Memory a step
frees stays in its thread's arena, where the next step's arrays, allocated on another
thread, cannot reuse it: the process's resident peak grows by what the arenas hold apart.
With one arena every thread reuses what any other freed. The threads allocate their large
arrays rarely and hold the interpreter's lock between them, so they hardly wait for the
arena's lock.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

#: glibc's mallopt parameter for the largest number of arenas (malloc.h)
M_ARENA_MAX = -8

_done = False


def share_one_arena() -> bool:
    """Limit glibc's malloc to one arena for the rest of the process, once; a no-op where
    the C library is not glibc or where ``MALLOC_ARENA_MAX`` is set (the operator's choice
    is kept). Returns whether the limit is in force."""
    global _done
    if _done:
        return True
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        mallopt = getattr(libc, "mallopt", None) if libc is not None else None
        if mallopt is None or os.confstr("CS_GNU_LIBC_VERSION") is None:
            return False
        _done = bool(mallopt(M_ARENA_MAX, 1))
    except (OSError, ValueError, AttributeError):
        return False
    return _done
