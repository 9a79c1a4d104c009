"""Handing memory the process freed back to the system, between the steps of a release
(docs/scaling.md, "Memory").

glibc serves an allocation above its mmap threshold with a mapping of its own and unmaps it
when freed, but it raises that threshold to the size of any such block freed (up to glibc's
``DEFAULT_MMAP_THRESHOLD_MAX``), so the arrays of a few MiB that a release makes and frees (a column of 1M
records, a chunk of queries) end up in the heap of the thread that allocated them, and stay
resident after they are freed. Each thread that allocates gets a heap (an *arena*) of its
own, and one arena's free memory is never used for another's allocations: memory one step
freed on one thread adds to the peak of the next step on another. Fixing the threshold low
(``mallopt``) maps and faults in every large array afresh, which costs far more CPU than it
saves memory; :func:`give_back`, once between steps, returns what the heaps hold free in
one pass and leaves the allocations within a step as fast as they were.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, None on a system without it (macOS, musl, Windows)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def give_back() -> bool:
    """Return the free memory of every thread's heap to the system (glibc's
    ``malloc_trim(0)``: the free pages inside each arena, not only its top). Nothing is
    moved or freed that is in use, so it changes no result; it costs one walk of the free
    lists (milliseconds) and the page faults of touching that memory again. True when
    memory was returned; False when none was, or on a system without glibc, where it does
    nothing."""
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False
