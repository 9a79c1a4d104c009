"""serialpub limits glibc's malloc to one arena when imported (serialpub.heap;
docs/scaling.md, "Memory"), unless the operator set MALLOC_ARENA_MAX."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

# a process that imports serialpub, lets four threads allocate at once, and prints how many
# arenas glibc made (malloc_info's <heap> elements)
_PROBE = textwrap.dedent(
    """
    import ctypes, ctypes.util, os, tempfile, threading
    import serialpub  # noqa: F401
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    libc.fdopen.restype = ctypes.c_void_p
    libc.fdopen.argtypes = [ctypes.c_int, ctypes.c_char_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.fflush.argtypes = [ctypes.c_void_p]
    start = threading.Barrier(4)
    def work():
        start.wait()
        for p in [libc.malloc(4096) for _ in range(200)]:
            libc.free(p)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    fd, path = tempfile.mkstemp()
    f = libc.fdopen(os.dup(fd), b"w")
    libc.malloc_info(0, f)
    libc.fflush(f)
    print(open(path).read().count("<heap nr="))
    os.unlink(path)
    """
)


def _glibc() -> bool:
    try:
        return sys.platform.startswith("linux") and bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (OSError, ValueError, AttributeError):
        return False


def _arenas(**env: str) -> int:
    clean = {k: v for k, v in os.environ.items() if k not in ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES")}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], env={**clean, **env}, capture_output=True, text=True, check=True
    )
    return int(out.stdout.strip())


@pytest.mark.skipif(not _glibc() or "LD_PRELOAD" in os.environ, reason="glibc's own malloc only")
def test_threads_of_a_serialpub_process_share_one_arena() -> None:
    assert _arenas() == 1
    # the operator's setting is kept, either way it is given: four threads then get arenas of their own
    assert _arenas(MALLOC_ARENA_MAX="8") > 1
    assert _arenas(GLIBC_TUNABLES="glibc.malloc.arena_max=8") > 1
