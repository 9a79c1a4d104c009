"""Failpoints for the crash tests: named places in the publication where a test can have
the process killed (``SERIALPUB_CRASH_AT=<name>`` sends SIGKILL to itself there).

With the variable unset this is a dictionary lookup and nothing else. The names, in the
order a publication passes them, are :data:`POINTS`.
"""

from __future__ import annotations

import os
import signal

ENV = "SERIALPUB_CRASH_AT"
POINTS = (
    "after_snapshot",  # snapshot read and checked, nothing recorded yet
    "after_draft",  # draft row committed
    "after_state_load",  # statistics file loaded
    "after_anonymize",  # release computed in memory
    "after_data_written",  # staging data.parquet written, no manifest yet
    "after_manifest_written",  # staging manifest written, not yet flushed
    "after_flush",  # staging files and folder flushed (then staged in the state, uncounted)
    "after_validation",  # suites passed and stored, evidence in staging, release validated
    "before_commit",  # approved, sign-off in the staged manifest, about to commit the state
    "after_commit",  # state committed, release still in staging
    "after_rename",  # release renamed into place, parent folder not yet flushed
    "after_publish",  # everything done
    "during_recovery",  # recovery renamed a committed staging folder into place
)


def checkpoint(name: str) -> None:
    """Kill this process with SIGKILL if the crash tests asked for it at ``name``."""
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
