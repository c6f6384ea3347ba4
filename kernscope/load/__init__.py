"""``load``: trace file -> linked :class:`~kernscope.model.Trace` (with a parse cache)."""

from __future__ import annotations

import os

from ..model import Trace
from . import cache as _cache
from .kineto import RawTrace, parse_document
from .salvage import salvage_document
from .source import FileIdentity, read_bytes

__all__ = ["load", "parse", "RawTrace"]


def parse(path: str | os.PathLike[str], *, salvage: bool = False, workers: int | None = None) -> RawTrace:
    """Decode a trace file into an unlinked event table (no cache)."""
    p = str(path)
    data = read_bytes(p, salvage=salvage)
    if salvage:
        from ..errors import TraceError

        try:
            return parse_document(data, p, workers=workers)
        except TraceError:
            return salvage_document(data, p, workers=workers)
    return parse_document(data, p, workers=workers)


def load(
    path: str | os.PathLike[str],
    *,
    cache: bool = True,
    salvage: bool = False,
    workers: int | None = None,
) -> Trace:
    """Load and link a PyTorch profiler (Kineto) trace: ``.json``, ``.json.gz``, ``*.pt.trace.json(.gz)``.

    Args:
        path: trace file; gzip is detected from the bytes.
        cache: read/write the Arrow parse cache (keyed by path, size, mtime, format version).
        salvage: recover the complete events of a truncated file instead of failing.
        workers: decoding processes (default: CPU count; large traces only).

    Raises:
        kernscope.errors.TraceError: with one message naming the file and the problem.
    """
    from ..link import link

    p = str(path)
    ident = FileIdentity.of(p)
    if cache:
        hit = _cache.read(ident, salvage)
        if hit is not None:
            hit.path = p
            return hit
    trace = link(parse(p, salvage=salvage, workers=workers), p)
    if cache:
        _cache.write(trace, ident, salvage)
    return trace
