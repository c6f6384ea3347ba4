"""``load``: trace file bytes -> decoded, unlinked event table (:class:`~kernscope.model.RawTrace`).

Modules: ``source`` (reading, gzip, file identity), ``kineto`` (JSON decoding), ``timestamps`` (exact
µs text -> ns), ``argspec`` (which args become columns), ``salvage`` (truncated files), ``cache``
(the linked trace stored as Arrow). The whole pipeline (parse -> link -> cache) is
:func:`kernscope.pipeline.load`.
"""

from __future__ import annotations

import os

from ..errors import TraceError
from ..model import RawTrace
from .kineto import parse_document
from .salvage import salvage_document
from .source import read_bytes

__all__ = ["parse"]


def parse(path: str | os.PathLike[str], *, salvage: bool = False, workers: int | None = None) -> RawTrace:
    """Decode a trace file into an unlinked event table (no cache, no linking)."""
    p = str(path)
    data = read_bytes(p, salvage=salvage)
    if salvage:
        try:
            return parse_document(data, p, workers=workers)
        except TraceError:
            return salvage_document(data, p, workers=workers)
    return parse_document(data, p, workers=workers)
