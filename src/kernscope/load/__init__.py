"""``load``: trace file bytes -> decoded, unlinked event table (:class:`~kernscope.model.RawTrace`).

Modules: ``source`` (opening, gzip streaming, content digest, memory limits), ``document`` (metadata
and event-aligned pieces), ``chunk`` (one piece -> typed columns), ``kineto`` (parallel parsing,
repair, salvage), ``argspec`` (which args become columns), ``cache`` (the linked trace stored as
Arrow, checked on read). The whole pipeline (parse -> link -> cache) is :func:`kernscope.pipeline.load`.

The names below are imported on first use, so ``kernscope.load.cache`` can be used without polars.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # (not imported from typing: see kernscope/__init__.py)

if TYPE_CHECKING:
    from typing import Any

    from ..model import RawTrace
    from .source import Limits

__all__ = ["parse"]


def parse(path: str | os.PathLike[str], *, salvage: bool = False, workers: int | None = None,
          limits: Limits | None = None) -> RawTrace:
    """Decode a trace file of any known format (:mod:`.formats`) into an unlinked event table (no cache,
    no linking)."""
    from .formats import ParseOptions
    from .formats import parse as parse_any
    from .source import open_trace

    source = open_trace(path)
    try:
        return parse_any(source, ParseOptions(salvage=salvage, limits=limits, workers=workers))
    finally:
        source.close()


def __getattr__(name: str) -> Any:
    raise AttributeError(f"module 'kernscope.load' has no attribute {name!r}")
