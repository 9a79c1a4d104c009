"""anonymizer.heap: the free memory of a thread's heap goes back to the system."""

from __future__ import annotations

import platform
import resource
import threading
from pathlib import Path

import numpy as np
import pytest

from anonymizer import heap

glibc = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's"
)


def _resident_mib() -> float:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() / 2**20


@glibc
def test_freed_blocks_inside_a_thread_heap_are_returned() -> None:
    """The case of a release: arrays of a few MiB freed on a worker thread, under a block
    still in use that keeps the heap from shrinking at its top. They stay resident until
    give_back returns them."""
    # freeing a mapped block raises glibc's mmap threshold to its size: the smaller arrays
    # below (2**19 float64 each) then come from the thread's heap, as a release's columns do
    big = np.ones(2**21)  # four times the arrays below
    del big
    held: dict[str, object] = {}

    def churn() -> None:
        arrays = [np.ones(2**19) for _ in range(24)]  # 24 arrays of 2**19 float64
        held["top"] = np.ones(2**19)  # in use above them: the heap cannot shrink at its top
        del arrays

    worker = threading.Thread(target=churn)
    worker.start()
    worker.join()
    before = _resident_mib()
    assert heap.give_back()
    after = _resident_mib()
    assert before - after > 50, (before, after)  # most of the 24 arrays freed went back
    assert np.all(held["top"] == 1.0)  # what is in use is untouched


def test_give_back_without_glibc_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "_malloc_trim", lambda: None)
    assert heap.give_back() is False
