"""The trace pipeline in one place: source -> parse (``load``) -> link (``link``) -> cache."""

from __future__ import annotations

import os

from .link import StepSpec, link
from .link.tree import call_tree
from .load import cache as _cache
from .load import parse
from .load.source import FileIdentity
from .model import Trace

__all__ = ["load"]


def load(
    path: str | os.PathLike[str],
    *,
    cache: bool = True,
    salvage: bool = False,
    workers: int | None = None,
    steps: StepSpec | None = None,
) -> Trace:
    """Load and link a PyTorch profiler (Kineto) trace: ``.json``, ``.json.gz``, ``*.pt.trace.json(.gz)``.

    Args:
        path: trace file; gzip is detected from the bytes.
        cache: read/write the Arrow parse cache.
        salvage: recover the complete events of a truncated file instead of failing.
        workers: decoding processes (default: CPU count; large traces only).
        steps: how step windows are found (default: ``ProfilerStep#N``).

    Raises:
        kernscope.errors.TraceError: with one message naming the file and the problem.
    """
    p = str(path)
    spec = steps or StepSpec()
    ident = FileIdentity.of(p)
    options = {"salvage": salvage, "step_marker": spec.marker}
    if cache:
        hit = _cache.read(ident, options, path=p, make_tree=call_tree)
        if hit is not None:
            return hit
    trace = link(parse(p, salvage=salvage, workers=workers), p, steps=spec)
    if cache:
        _cache.write(trace, ident, options)
    return trace
