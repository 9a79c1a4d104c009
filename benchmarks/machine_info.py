"""What every benchmark records about the machine it ran on (the figures depend on it)."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    """Python version, CPU count and model, memory (GiB) and the 1/5/15-minute load
    averages at the call: on a shared 2-core machine the load explains slow figures."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "machine": platform.machine(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "load_average_at_start": list(os.getloadavg()),
    }
