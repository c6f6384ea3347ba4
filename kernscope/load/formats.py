"""The trace formats kernscope reads, and the one seam every load goes through: :func:`parse`.

A format is detected from the file's first bytes (decompressed), never from its name alone:

| format | detected by | decoder |
|---|---|---|
| ``kineto`` | JSON text (``{`` or ``[`` first): Kineto, Chrome, JAX's JSON exports | :mod:`.kineto` |
| ``xplane`` | an XSpace protobuf (``*.xplane.pb``, what ``jax.profiler`` writes) | :mod:`.xplane` |

Adding a format: a ``Format`` entry below with its detector and decoder returning a
:class:`~kernscope.model.RawTrace`; linking and every analysis then work unchanged.

A JAX run directory (``plugins/profile/<run>/``) is resolved to its richest file by
:func:`kernscope.files.resolve_run_dir`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..model import RawTrace
from .project import Projection
from .source import Limits, TraceSource

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class ParseOptions:
    """How to decode: what changes the table (``salvage``, ``projection``) and what bounds the work."""

    salvage: bool = False
    limits: Limits | None = None
    workers: int | None = None
    progress: Progress | None = None
    projection: Projection | None = None


def _is_json(head: bytes) -> bool:
    h = head.lstrip(b" \t\r\n\xef\xbb\xbf")
    return h[:1] in (b"{", b"[")


def _parse_kineto(source: TraceSource, opts: ParseOptions) -> RawTrace:
    from .jax_json import adapt, is_jax_json
    from .kineto import parse_source

    raw = parse_source(source, salvage=opts.salvage, limits=opts.limits, workers=opts.workers,
                       progress=opts.progress, projection=opts.projection)
    return adapt(raw) if is_jax_json(raw) else raw


def _parse_xplane(source: TraceSource, opts: ParseOptions) -> RawTrace:
    from . import xplane

    data = source.read_all(opts.limits or Limits())
    if opts.progress is not None:
        opts.progress(source.stored_bytes, source.stored_bytes)
    return xplane.decode(data, source.path)


def _looks_xspace(head: bytes) -> bool:
    from .xplane import is_xspace

    return is_xspace(head)


@dataclass(frozen=True)
class Format:
    name: str
    detect: Callable[[bytes], bool]
    parse: Callable[[TraceSource, ParseOptions], RawTrace]
    #: whether a load projection (skipping unread JSON events) applies
    projects: bool = False


#: in the order they are tried
FORMATS: tuple[Format, ...] = (
    Format("kineto", _is_json, _parse_kineto, projects=True),
    Format("xplane", _looks_xspace, _parse_xplane),
)


def detect(source: TraceSource) -> Format:
    """The format of an opened trace; JSON when nothing else matches (its parser gives the error)."""
    head = source.head()
    for fmt in FORMATS:
        if fmt.detect(head):
            return fmt
    return FORMATS[0]


def parse(source: TraceSource, opts: ParseOptions | None = None) -> RawTrace:
    """Decode an opened trace of any known format into an unlinked event table."""
    opts = opts or ParseOptions()
    return detect(source).parse(source, opts)
