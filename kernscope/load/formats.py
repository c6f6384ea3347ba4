"""The trace formats kernscope reads, and the one seam every load goes through: :func:`parse`.

A format is detected from the file's first bytes (decompressed), never from its name alone:

| format | detected by | decoder |
|---|---|---|
| ``kineto`` | JSON text (``{`` or ``[`` first): Kineto, Chrome, JAX's JSON exports | :mod:`.kineto` |
| ``xplane`` | an XSpace protobuf (``*.xplane.pb``, what ``jax.profiler`` writes) | :mod:`.xplane` |

Adding a format: a ``Format`` entry below with its detector and decoder returning a
:class:`~kernscope.model.RawTrace`; linking and every analysis then work unchanged.

A JAX run directory (``plugins/profile/<run>/``) is resolved to its richest file by :func:`resolve_run_dir`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import TraceError
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
    from .kineto import parse_source

    return parse_source(source, salvage=opts.salvage, limits=opts.limits, workers=opts.workers,
                        progress=opts.progress, projection=opts.projection)


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


#: files of a JAX run directory, richest first (the XSpace is the complete record; the JSON exports drop fields)
RUN_DIR_PREFERENCE = ("*.xplane.pb", "perfetto_trace.json.gz", "*.trace.json.gz", "*.trace.json", "perfetto_trace.json")


def resolve_run_dir(path: str | os.PathLike[str]) -> tuple[list[str], str] | None:
    """For a JAX profile run directory (``plugins/profile/<run>/``, or a log dir holding exactly one run):
    the files to read (one per host for the XSpace) and a one-line note saying which were chosen.
    None when ``path`` is not such a directory."""
    p = Path(path)
    if not p.is_dir():
        return None
    runs = [p]
    if not any(p.glob("*.xplane.pb")) and not any(p.glob("perfetto_trace.json*")):
        runs = sorted({x.parent for x in p.glob("plugins/profile/*/*") if x.is_file()} |
                      {x.parent for x in p.glob("*/*.xplane.pb")})
        if not runs:
            return None
        if len(runs) > 1:
            names = ", ".join(r.name for r in runs[-5:])
            raise TraceError(str(p), f"holds {len(runs)} profile runs ({names}); name one run directory")
    run = runs[0]
    for pattern in RUN_DIR_PREFERENCE:
        found = sorted(str(x) for x in run.glob(pattern) if x.is_file())
        if found:
            if pattern != "*.xplane.pb":
                found = found[:1]
            what = ", ".join(os.path.basename(f) for f in found)
            others = sorted(x.name for x in run.iterdir() if x.is_file() and str(x) not in found)
            also = f"; also there: {', '.join(others)}" if others else ""
            note = f"{run}: reading {what} (the richest file of this JAX run{also})"
            return found, note
    return None
