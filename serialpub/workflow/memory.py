"""Large freed arrays handed back to the system at once (docs/scaling.md, "Memory").

A release allocates and frees many arrays of a few to a few tens of MiB (a column of 1M
records, a chunk of queries). glibc maps an allocation on its own only above a threshold
that it raises, after the first such block is freed, up to 32 MiB; below it, a freed block
stays in the heap of the thread that freed it, counted in the process's resident memory.
With the steps on two threads (each with its heap) that memory is still held when the next
step allocates its own: at 1M records over the 5M register, about 0.45 GiB of it after the
first release and at the next release's peak.

Fixing the threshold at 1 MiB (which also stops glibc from raising it) maps every block of
1 MiB or more on its own, and freeing it returns it to the system. Smaller blocks, and every
platform without glibc, keep the allocator's default.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

#: glibc's ``M_MMAP_THRESHOLD`` parameter of ``mallopt`` (malloc.h)
_M_MMAP_THRESHOLD = -3
#: blocks from this size up are mapped on their own
MAP_FROM_BYTES = 1 << 20

_done = False


def map_large_blocks() -> None:
    """Have glibc map every block of :data:`MAP_FROM_BYTES` or more on its own (module
    docstring); once per process, and nothing where the C library is not glibc."""
    global _done
    if _done or not sys.platform.startswith("linux"):
        return
    _done = True
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and others: no mallopt, their own policy
        return
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    mallopt(_M_MMAP_THRESHOLD, MAP_FROM_BYTES)
