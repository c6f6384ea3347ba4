"""GPU timing shared by the benchmark scripts: CUDA events around back-to-back launches."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any


def timed(fn: Callable[[], Any], n: int = 15, batch: int = 20) -> float:
    """GPU µs per launch: ``batch`` launches back to back between two events (a queued GPU never waits for
    Python's launch path, which a single launch between events would measure), median of ``n`` batches."""
    import torch

    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(n):
        s.record()
        for _ in range(batch):
            fn()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e) * 1e3 / batch)
    return statistics.median(out)
