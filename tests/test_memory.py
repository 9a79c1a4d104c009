"""serialpub.workflow.memory: large blocks mapped on their own, so that freeing one returns it."""

from __future__ import annotations

import ctypes
import ctypes.util

import pytest

from serialpub.workflow.memory import MAP_FROM_BYTES, map_large_blocks


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                     "keepcost")
    ]  # fmt: skip


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    if not hasattr(libc, "mallinfo2"):
        pytest.skip("not glibc 2.33 or later: no mallinfo2 to read the mapped bytes")
    libc.mallinfo2.restype = _MallInfo2
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    return libc


def test_a_block_of_a_few_mib_is_mapped_even_after_a_larger_one_was_freed() -> None:
    """glibc raises its threshold to the size of a freed mapped block (up to 32 MiB), after
    which a 2 MiB array would stay in the heap when freed; with the threshold fixed it is
    mapped (counted in ``hblkhd``, the mapped bytes) whatever was freed before."""
    libc = _libc()
    map_large_blocks()
    map_large_blocks()  # once per process: a second call changes nothing
    libc.free(libc.malloc(16 << 20))  # what raises glibc's own threshold to 16 MiB
    before = libc.mallinfo2().hblkhd
    block = libc.malloc(2 * MAP_FROM_BYTES)
    try:
        assert libc.mallinfo2().hblkhd - before >= 2 * MAP_FROM_BYTES
    finally:
        libc.free(block)
    assert libc.mallinfo2().hblkhd == before  # and freeing it hands it back
