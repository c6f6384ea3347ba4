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

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import TraceError
from ..model import RawTrace
from .headstart import HeadStart
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
    #: a Kineto trace's first pieces scanned ahead (:mod:`.headstart`): taken where the scans are the parse's
    head: HeadStart | None = None


def _is_json(head: bytes) -> bool:
    h = head.lstrip(b" \t\r\n\xef\xbb\xbf")
    return h[:1] in (b"{", b"[")


def _parse_kineto(source: TraceSource, opts: ParseOptions) -> RawTrace:
    from .jax_json import adapt, is_jax_json
    from .kineto import parse_source

    raw = parse_source(source, salvage=opts.salvage, limits=opts.limits, workers=opts.workers,
                       progress=opts.progress, projection=opts.projection, head=opts.head)
    if is_jax_json(raw):
        return adapt(raw)
    if _is_proton_trace(raw):
        raise TraceError(source.path, "this is an intra-kernel trace (Proton's chrome_trace: processes are CTAs, threads "
                                      f"warps), not a profiler trace; read it with: kernscope intra stats {source.path}")
    return raw


#: Proton's intra-kernel Chrome traces name a process "<kernel> Core<sm> CTA<n>" and a thread "warp <w> (line <l>)"
_PROTON_PID = r" Core\d+ CTA\d+$"


def _is_proton_trace(raw: RawTrace) -> bool:
    import polars as pl

    ev = raw.events
    if ev.height == 0 or "pid" not in ev.columns:
        return False
    pids = ev["pid"].unique().drop_nulls().cast(pl.String)
    return bool(pids.len()) and bool(pids.str.contains(_PROTON_PID).all())


def _parse_xplane(source: TraceSource, opts: ParseOptions) -> RawTrace:
    from . import xplane

    # progress: a gzipped file's compressed bytes as it is inflated (whole, first); a plain one's events' lines, most
    # of the file, as the scanner reads them
    stored, said = source.stored_bytes, opts.progress
    data = source.read_all(opts.limits or Limits(), progress=said)
    scanning = None
    if said is not None:
        if source.gz:
            said(stored, stored)
        else:
            def scanning(done: int, total: int) -> None:
                said(min(stored, done * stored // max(total, 1)), stored)
    stats = opts.projection.stats if opts.projection is not None else None
    # a plain file's mapped pages leave the process once the events are read (the page cache keeps them)
    try:
        return xplane.decode(data, source.path, workers=opts.workers, stats=stats,
                             scanned=lambda: source.release(len(data)), progress=scanning)
    except TraceError as e:
        if opts.salvage and e.problem.startswith("not a valid XSpace protobuf"):
            # (a protobuf holds each plane's names and metadata after its events: a cut plane's events are nameless)
            raise TraceError(source.path, f"{e.problem}; --salvage recovers the events of JSON traces only, an XSpace "
                                          "profile must be whole") from None
        raise


def _looks_xspace(head: bytes) -> bool:
    from .xplane import is_xspace

    return is_xspace(head)


@dataclass(frozen=True)
class Format:
    name: str
    detect: Callable[[bytes], bool]
    parse: Callable[[TraceSource, ParseOptions], RawTrace]
    #: whether a load projection applies (Kineto: unread JSON events and args skipped; XSpace: unread columns null)
    projects: bool = False
    #: whether its projected load reads the projection's ``stats`` (an XSpace profile's own columns); a format that
    #: reads none stores its entry under the projection without them (``Projection.without_stats``)
    reads_stats: bool = False


#: in the order they are tried
FORMATS: tuple[Format, ...] = (
    Format("kineto", _is_json, _parse_kineto, projects=True),
    Format("xplane", _looks_xspace, _parse_xplane, projects=True, reads_stats=True),
)


def detect(source: TraceSource) -> Format:
    """The format of an opened trace; JSON when nothing else matches (its parser gives the error). A file
    that starts like a JSON array of something other than events (TOML's ``[table]``, ``[1, 2, 3]``) is
    refused here, with what it starts with."""
    head = source.head()
    h = head.lstrip(b" \t\r\n\xef\xbb\xbf")
    if h[:1] == b"[" and h[1:].lstrip(b" \t\r\n")[:1] not in (b"{", b"]", b""):
        shown = h[:40].decode("utf-8", "replace")
        what = "a JSON array of values, not of trace events" if _json_values(h) else "not JSON"
        raise TraceError(source.path, f"{what} (it starts with {shown!r}); a trace is a JSON object with "
                                      "'traceEvents', an array of event objects, or a JAX .xplane.pb")
    other = _another_kind(h, source.path)
    if other is not None:
        raise TraceError(source.path, other)
    for fmt in FORMATS:
        if fmt.detect(head):
            return fmt
    return FORMATS[0]


def _another_kind(h: bytes, path: str) -> str | None:
    """What a file that kernscope reads with another command is, and that command (an intra-kernel buffer, a
    Perfetto trace, a hatchet scope tree), or None. ``h``: the file's first bytes, whitespace stripped."""
    name = path.lower()
    if h[:4] == b"PK\x03\x04" and name.endswith(".npz") or h[:6] == b"\x93NUMPY":
        return "an intra-kernel profiler buffer (numpy), not a trace: `kernscope intra stats` reads it"
    if name.endswith((".perfetto-trace", ".perfetto-trace.gz", ".pftrace", ".pftrace.gz")):
        return ("a Perfetto trace (protobuf), not a Kineto trace: `kernscope intra stats` reads intra-kernel ones "
                "(open others in ui.perfetto.dev)")
    if re.match(rb'\[\s*\{\s*"(frame|children|metrics)"\s*:', h):  # hatchet's node keys, in any order
        return "a hatchet scope tree (Proton's profile), not a trace: `kernscope intra view` shows it"
    for magic, kind, undo in _ARCHIVES:
        if h.startswith(magic):
            return (f"{kind}-compressed: kernscope reads traces as written (JSON, gzip-compressed JSON, an XSpace "
                    f"protobuf); decompress it first ({undo})")
    return None


#: compressions and archives a trace may be put in (their magic bytes), none of which a profiler writes
_ARCHIVES = ((b"\xfd7zXZ\x00", "xz", "xz -d"), (b"BZh", "bzip2", "bunzip2"), (b"\x28\xb5\x2f\xfd", "zstd", "zstd -d"),
             (b"PK\x03\x04", "zip", "unzip"), (b"7z\xbc\xaf\x27\x1c", "7z", "7z x"), (b"\x04\x22\x4d\x18", "lz4", "lz4 -d"))


def _json_values(h: bytes) -> bool:
    """Whether ``h`` (an array's start) holds JSON values: numbers, strings, literals, nested arrays."""
    rest = h[1:].lstrip(b" \t\r\n")
    return rest[:1] in b'-0123456789"[' or rest[:4] in (b"true", b"null") or rest[:5] == b"false"


def parse(source: TraceSource, opts: ParseOptions | None = None) -> RawTrace:
    """Decode an opened trace of any known format into an unlinked event table."""
    opts = opts or ParseOptions()
    return detect(source).parse(source, opts)
