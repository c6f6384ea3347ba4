"""How many CPU cores this process may run on (the thread and process counts of a parse, a scan, a job)."""

from __future__ import annotations

import os


def usable_cores() -> int:
    """The CPUs this process may run on, at least 1: its affinity mask where the OS keeps one (``taskset``, a
    container's or a batch job's cpuset, a test worker pinned to a core), which ``os.cpu_count()`` ignores (it counts
    the machine's: a job of 8 cores on a 128-core node would size its pools for 128); else the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except OSError:
            pass
    return max(1, os.cpu_count() or 1)
