"""The cores kernscope sizes its pools by (:func:`kernscope.cores.usable_cores`): the process's affinity mask, not
the machine's count, so that a job confined to some cores (``taskset``, a container's or a batch job's cpuset, a test
worker pinned to one) starts no more threads or processes than it may run."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kernscope import cores


def test_the_affinity_mask_counts_not_the_machines_cores(monkeypatch):
    monkeypatch.setattr(cores.os, "cpu_count", lambda: 64)
    monkeypatch.setattr(cores.os, "sched_getaffinity", lambda pid: {3, 5}, raising=False)
    assert cores.usable_cores() == 2
    monkeypatch.delattr(cores.os, "sched_getaffinity", raising=False)  # (macOS, Windows: no mask)
    assert cores.usable_cores() == 64
    monkeypatch.setattr(cores.os, "cpu_count", lambda: None)  # (undetermined)
    assert cores.usable_cores() == 1


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this OS")
def test_a_process_confined_to_one_core_sizes_its_parse_and_scan_for_one():
    """A real mask (set in a child process): one core, whatever the machine has, and the XSpace scanner's parts
    follow it."""
    code = ("import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); import numpy as np; "
            "from kernscope.cores import usable_cores; from kernscope.load import xscan; "
            "print(usable_cores(), os.cpu_count() >= 1, len(xscan._parts(np.full(64, xscan.PART_BYTES, dtype=np.int64))) - 1)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["1", "True", "1"]


@pytest.mark.parametrize("usable, threads", [(1, 3), (2, 4), (64, 8)])
def test_a_kineto_parse_runs_two_threads_more_than_the_usable_cores_at_most_eight(usable, threads, monkeypatch):
    import kernscope
    from kernscope.load import kineto
    from kernscope.pipeline import load

    seen: list[int] = []
    init = kineto._Pipeline.__init__

    def spy(self, *args, **kwargs):
        seen.append(kwargs["workers"])
        init(self, *args, **kwargs)

    monkeypatch.setattr(kineto, "usable_cores", lambda: usable)
    monkeypatch.setattr(kineto._Pipeline, "__init__", spy)
    example = os.path.join(os.path.dirname(kernscope.__file__), "examples", "h200_gpt_train_step.pt.trace.json.gz")
    assert load(example, cache=False).gpu.height == 808
    assert seen and set(seen) == {threads}
