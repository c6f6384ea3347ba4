"""The trace pipeline in one place: source -> parse (``load``) -> link (``link``) -> cache."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import polars as pl

from .errors import NeedsFullRead, TraceError
from .link import StepSpec, link
from .link.tree import call_tree
from .load import cache as _cache
from .load.formats import ParseOptions, detect
from .load.headstart import AHEAD, HeadStart
from .load.native import trim_heap
from .load.projection import Projection, costs_key, load_key, load_keys
from .load.source import FileIdentity, Limits, TraceSource, open_trace
from .model import Lazy, Trace, TraceStats

__all__ = ["load", "LoadOptions"]

Notify = Callable[[str], None]


def _warn(msg: str) -> None:
    warnings.warn(msg, _cache.CacheNotice, stacklevel=3)


@dataclass(frozen=True)
class LoadOptions:
    """What changes the loaded trace (and so is part of its cache key)."""

    salvage: bool = False
    steps: StepSpec = StepSpec()
    projection: Projection | None = None

    def key(self) -> dict[str, Any]:
        return load_key(self.salvage, self.steps.marker, self.projection)


def _info(trace: Trace) -> dict[str, Any]:
    return {
        "metadata": trace.metadata, "process_names": trace.process_names, "thread_names": trace.thread_names,
        "unlinked": trace.unlinked, "salvaged": trace.salvaged, "salvage_skipped": list(trace.salvage_skipped),
        "stats": trace.stats.to_dict(), "step_source": trace.step_source,
    }


def _from_entry(entry: _cache.Entry, path: str, reload: Callable[[], Trace], unread: frozenset[str] = frozenset()) -> Trace:
    """A Trace over a verified cache entry: GPU and step tables now, events and flows on first use (the events now
    where the GPU table is a run of them: its shared columns are slices of theirs). The columns ``unread`` (of a
    wider load's entry read for a projected load: what that load leaves null) are not read, and null."""
    info = entry.info

    def read(name: str, events: pl.DataFrame | None = None) -> pl.DataFrame:
        if not unread:
            return entry.table(name, events=events)
        columns = entry.columns(name)
        df = entry.table(name, [c for c in columns if c not in unread], events=events)
        schema = entry.table(name, rows=(0, 0)).schema if any(c in unread for c in columns) else {}
        return df.with_columns(pl.lit(None, dtype=schema[c]).alias(c) for c in columns if c in unread).select(columns)

    def table(name: str) -> Callable[[], pl.DataFrame]:
        def lazy_read() -> pl.DataFrame:
            try:
                return read(name)
            except (OSError, ValueError, pl.exceptions.PolarsError) as e:  # evicted or damaged since: parse again
                warnings.warn(f"kernscope: cache entry lost its {name} table ({e}); re-reading {path}",
                              _cache.CacheNotice, stacklevel=2)
                fresh = reload()
                return fresh.events if name == "events" else fresh.flows
        return lazy_read

    if entry.shares_events("gpu"):
        # the GPU rows are a run of the event table (a JAX profile's): the event table is read now and the GPU table's
        # columns it shares are slices of it, one copy as a parse leaves them (read apart, from the event table's file,
        # they were a second: a 207 MB JAX profile's analyze from its entry peaked at 0.89 GB, against 0.64 GB cold)
        whole_events = read("events")
        events = Lazy.of(whole_events)
        gpu = read("gpu", events=whole_events)
    else:
        events = Lazy(table("events"))
        gpu = read("gpu")
    return Trace(
        path=path, events_table=events, gpu=gpu, flows_table=Lazy(table("flows")),
        steps=read("steps"), tree_table=Lazy(lambda: call_tree(events.get())),
        stats=TraceStats.from_dict(info["stats"]), metadata=info["metadata"], process_names=info["process_names"],
        thread_names=info["thread_names"], unlinked=info["unlinked"], salvaged=info["salvaged"],
        salvage_skipped=tuple(info["salvage_skipped"]), from_cache=True, step_source=info["step_source"],
    )


def _unread_stats(entry: _cache.Entry, projection: Projection) -> frozenset[str] | None:
    """Of a whole load's entry read for a load with ``projection``, the columns that load leaves null: of an XSpace
    profile, the XLA stats it does not read (``xplane.decode`` makes them null literals); none of another format's
    (its projected load differs from the whole one in rows and args the analyses do not read). None where the entry
    cannot stand for that load: it reads a stat a whole load does not (the GPU cliques' of a rank summary), or the HLO
    instruction without matching command buffers' library kernels to their calls (those rows' would differ)."""
    if projection.stats is None or "xplane" not in entry.info.get("metadata", {}):
        return frozenset()
    from .load.xplane import XLA_COLUMNS, matches_library_calls
    from .load.xstats import OPT_IN_STATS

    stats = set(projection.stats)
    if stats & OPT_IN_STATS or ("hlo_instruction" in stats and not matches_library_calls(stats)):
        return None
    return frozenset(XLA_COLUMNS) - stats


def _costs_added(entry: _cache.Entry, source: TraceSource, path: str, limits: Limits | None,
                 reload: Callable[[], Trace]) -> Trace | None:
    """The trace of ``entry`` (an XSpace profile's load that read everything a load reading the HLO costs reads, but
    them) with the costs read from the profile's HLO (:func:`kernscope.load.xplane.with_costs`); None where they cannot
    be told without a parse, or the entry is another format's."""
    if "xplane" not in entry.info.get("metadata", {}):
        return None
    from .load.xplane import with_costs

    trace = _from_entry(entry, path, reload)
    data = source.read_all(limits or Limits())
    done = with_costs(trace.events, trace.gpu, data, path)
    source.release(len(data))  # (only the metadata's pages were read)
    if done is None:
        return None
    events, gpu = done
    return dataclasses.replace(trace, events_table=Lazy.of(events), gpu=gpu, tree_table=Lazy(lambda: call_tree(events)))


def _readers(counts: dict[str, int]) -> str:
    """``, compiled scanner 50 of 52 pieces, line reader 2``: which readers read the pieces (for ``--timings``); and
    ``(11 scanned ahead)``: of them, those a head start scanned (:mod:`kernscope.load.headstart`)."""
    ahead = counts.get(AHEAD, 0)
    counts = {k: v for k, v in counts.items() if k != AHEAD}
    total = sum(counts.values())
    parts = [f"{name} {n}" + (f" of {total} pieces" if i == 0 else "")
             for i, (name, n) in enumerate(sorted(counts.items(), key=lambda kv: -kv[1]))]
    return (", " + ", ".join(parts) if parts else "") + (f" ({ahead} scanned ahead)" if ahead else "")


def load(
    path: str | os.PathLike[str],
    *,
    cache: bool = True,
    salvage: bool = False,
    workers: int | None = None,
    steps: StepSpec | None = None,
    limits: Limits | None = None,
    notify: Notify | None = None,
    progress: Callable[[int, int], None] | None = None,
    projection: Projection | None = None,
    digest: _cache.KnownDigest | _cache.PendingDigest | None = None,
    defer_cache_write: Callable[[Callable[[], None]], None] | None = None,
    timings: list[tuple[str, float]] | None = None,
    head: HeadStart | None = None,
) -> Trace:
    """Load and link a PyTorch profiler (Kineto) trace: ``.json``, ``.json.gz``, ``*.pt.trace.json(.gz)``.

    Args:
        path: trace file; gzip is detected from the bytes.
        cache: read/write the parse cache (keyed by a hash of the file's content, checked on read).
        salvage: recover every complete, valid event of a truncated or partly corrupt file.
        workers: parsing threads (default: the CPU count plus two, at most 8).
        steps: how step windows are found (default: ``ProfilerStep#N``, else automatic windows).
        limits: memory bounds (default: 80% of available memory for the decoded tables).
        notify: receives one-line notices (cache rebuilt, ...); default: ``warnings.warn``.
        progress: called with (bytes read, file size) while parsing.
        projection: skip events and args an analysis will not read, unparsed (:mod:`kernscope.load.project`);
            the trace then holds only the rest (``stats.projected_out`` counts the events skipped; args
            columns not read are null).
        digest: the file's content digest when the caller has just computed it (used while the file
            still has the identity it had then; else the file is hashed again), or the pending one of a file no
            cache entry can hold yet. Without it a file whose size no entry has is not hashed before the parse
            (:class:`kernscope.load.cache.PendingDigest`: it is hashed while the entry is written).
        defer_cache_write: receives the function that stores the parsed trace in the cache, instead of
            it being called before returning (a command may run it while it analyzes the trace, and must
            have run it before it stores outputs in that cache entry).
        timings: receives (phase, seconds) of this load's phases: the content hash, the parse (with the format's
            name), the link and the cache write (``analyze --timings``).
        head: the file's first pieces scanned ahead (:mod:`kernscope.load.headstart`), which a parse of a Kineto trace
            takes where the scans are its own; closed before this returns, taken or not.

    Raises:
        kernscope.errors.TraceError: with one message naming the file and the problem.
    """
    try:
        return _load(str(path), cache, salvage, workers, steps, limits, notify, progress, projection, digest,
                     defer_cache_write, timings, head)
    finally:
        if head is not None:
            head.close()


def _load(p: str, cache: bool, salvage: bool, workers: int | None, steps: StepSpec | None, limits: Limits | None,
          notify: Notify | None, progress: Callable[[int, int], None] | None, projection: Projection | None,
          digest: _cache.KnownDigest | _cache.PendingDigest | None,
          defer_cache_write: Callable[[Callable[[], None]], None] | None, timings: list[tuple[str, float]] | None,
          head: HeadStart | None) -> Trace:
    opts = LoadOptions(salvage, steps or StepSpec(), projection)
    lap = _Laps(timings)
    source = open_trace(p)
    before = FileIdentity.of(p)
    try:
        digest_hex: str | _cache.PendingDigest = ""
        if cache:
            if isinstance(digest, _cache.PendingDigest) and digest.identity != before:
                digest = None
            if digest is None:  # no entry can exist for a file of an unseen size: parse first, hash later
                digest = _cache.digest_later(p, before)
            entry = None
            if isinstance(digest, _cache.PendingDigest):
                digest_hex = digest
            else:
                if digest is None or digest.identity != before:
                    digest = _cache.KnownDigest.of(p)
                digest_hex = digest.hexdigest if digest.identity == before else _cache.file_digest(p)
                lap("content hash (the cache key)")
                unread: frozenset[str] | None = frozenset()
                costs = costs_key(salvage, opts.steps.marker, projection)
                for i, key in enumerate(load_keys(salvage, opts.steps.marker, projection)):
                    entry = _cache.open_entry(digest_hex, key, notify=notify)
                    if entry is not None and key == costs:
                        # a load reading all but the HLO costs (``analyze``'s, for ``perf``): its entry, and the costs
                        # read from the profile's HLO, where they can be told exactly (else the file is parsed)
                        try:
                            added = _costs_added(entry, source, p, limits, lambda: load(
                                p, cache=False, salvage=salvage, workers=workers, steps=steps, limits=limits,
                                projection=projection))
                        except (OSError, ValueError, KeyError, TypeError, pl.exceptions.PolarsError) as e:
                            _cache._discard(entry.path, str(e) or type(e).__name__, notify)
                            added = None
                        if added is not None:
                            return added
                        entry = None
                        continue
                    if entry is not None and i and projection is not None:
                        # a wider load's entry (of the same projection reading every stat, or the whole load's)
                        # holds every table this load makes (its analyses answer the same: the tests compare them on
                        # every real trace): read, not parsed again (of a JAX profile, without the XLA stats the
                        # projection leaves null)
                        unread = _unread_stats(entry, projection)
                        entry = entry if unread is not None else None
                    if entry is not None:
                        break
            if entry is not None:
                if head is not None:  # (its scans are not needed: stopped now, not after the tables are read)
                    head.close()
                try:
                    return _from_entry(entry, p, lambda: load(p, cache=False, salvage=salvage, workers=workers,
                                                              steps=steps, limits=limits, projection=projection),
                                       unread or frozenset())
                except (OSError, ValueError, KeyError, TypeError, pl.exceptions.PolarsError) as e:
                    _cache._discard(entry.path, str(e) or type(e).__name__, notify)
        fmt = detect(source)
        if not fmt.projects or (projection is not None and projection.formats is not None
                                and fmt.name not in projection.formats):
            projection = None
        with _gc_paused():
            raw = fmt.parse(source, ParseOptions(salvage=salvage, limits=limits, workers=workers, progress=progress,
                                                 projection=projection, head=head))
        # (a gzip file's rate on disk says little of the parse: the label gives the JSON it inflated to)
        inflated = f", from gzip: {source.json_bytes / 1e6:,.1f} MB inflated" if source.gz else ""
        lap(f"parse ({fmt.name}{inflated}{', projected' if projection is not None else ''}{_readers(raw.readers)})")
    except MemoryError:
        raise TraceError(p, "out of memory while reading this trace; try --max-memory to bound it, or a machine "
                            "with more memory") from None
    finally:
        source.close()
    # the parse's freed buffers back to the system before linking allocates (peak RSS; a small trace's are left: they
    # are about its text's size, and a trim is paid again in faults)
    trim_heap(source.json_bytes)
    # (stored under the load it was: a projection this format does not take, as the XSpace-only one of a report of a
    # PyTorch trace, made a whole load, which a projected load may read)
    # (and a projection as the format applies it: of a Kineto trace, without the XSpace stats it reads none of)
    written = LoadOptions(salvage, opts.steps,
                          projection if projection is None or fmt.reads_stats else projection.without_stats()).key()
    staged = _StagedWrite(_cache.EntryWriter(digest_hex, written, notify=notify, size=before.size) if cache else None)
    try:
        with _gc_paused():
            trace = link(raw, p, steps=opts.steps, events_ready=staged.events)
        trim_heap(source.json_bytes)  # and linking's numpy temporaries, before the analysis (the run's peak) allocates
        lap("link (correlation, call tree, steps)")
    except (NeedsFullRead, TraceError) as e:
        staged.abandon()
        if projection is None or (isinstance(e, TraceError) and not raw.projected_out):
            raise
        # a skipped event may be the earliest, or the projected trace does not link: a full read decides
        return load(p, cache=cache, salvage=salvage, workers=workers, steps=steps, limits=limits, notify=notify,
                    progress=progress, projection=None, digest=digest, defer_cache_write=defer_cache_write, timings=timings)
    except BaseException:
        staged.abandon()
        raise
    if cache and not _unchanged(p, before):
        staged.abandon()
        (notify or _warn)(f"kernscope: {p} changed while it was read; not caching it")
    elif cache:
        tables = {"events": trace.events, "gpu": trace.gpu, "flows": trace.flows, "steps": trace.steps}
        info = _info(trace)

        def write() -> None:
            staged.finish(tables, info)

        if defer_cache_write is not None:
            defer_cache_write(write)
        else:
            write()
            lap("cache write (Arrow IPC, checksums)")
    return trace


def stored(path: str | os.PathLike[str], options: LoadOptions,
           notify: Notify | None = None) -> tuple[_cache.Entry, _cache.KnownDigest] | None:
    """The parse-cache entry a :func:`load` of ``path`` with ``options`` would read, and the file's digest (to hand
    to that load), or None when there is none (a file of a size no entry was written for is not hashed). Nothing is
    parsed: a caller reads the entry's tables as far as it needs them (:meth:`~kernscope.load.cache.Entry.lazy`).
    A missing or unreadable file: :class:`~kernscope.errors.TraceError`."""
    p = str(path)
    before = FileIdentity.of(p)
    if _cache.digest_later(p, before) is not None:
        return None
    digest = _cache.KnownDigest.of(p)
    if digest.identity != before:  # (changed while it was hashed: a load decides)
        return None
    keys = [options.key()]
    if options.projection is not None:  # (the entry of a format that reads no stats, as :func:`load` stores it)
        keys.append(LoadOptions(options.salvage, options.steps, options.projection.without_stats()).key())
    for key in keys:
        entry = _cache.open_entry(digest.hexdigest, key, notify=notify)
        if entry is not None:
            return entry, digest
    return None


def projection_unread(projection: Projection) -> frozenset[str]:
    """The GPU table's columns that a load with ``projection`` does not fill as a whole load does: the args and XSpace
    stats it leaves unread (null), and every HLO column of an XSpace load that does not match command buffers' library
    kernels to their custom calls (``xplane.matches_library_calls``:
    those kernels' HLO columns stay unset)."""
    from .load.argspec import ARG_FIELDS
    from .load.xplane import HLO_COLUMNS, XLA_COLUMNS, matches_library_calls

    unread: set[str] = set()
    if projection.args is not None:
        unread |= {f.column for f in ARG_FIELDS} - set(projection.args)
    if projection.stats is not None:
        unread |= set(XLA_COLUMNS) - set(projection.stats)
        if not matches_library_calls(projection.stats):
            unread |= set(HLO_COLUMNS)
    return frozenset(unread)


def projection_keeps(projection: Projection, columns: list[str]) -> frozenset[str]:
    """Of ``columns`` (a GPU table's), those a load with ``projection`` fills as a whole load does (all but
    :func:`projection_unread`'s). The link's columns are the whole load's (compared on the 118 real traces and test
    profiles of ``docs/performance.md``, session 58; ``tests/test_sql.py`` compares eight)."""
    unread = projection_unread(projection)
    return frozenset(c for c in columns if c not in unread)


#: the tables a projected load's entry holds as a whole load does (in the columns :func:`projection_keeps` names); its
#: events and flows lack the events the projection skipped (but the parts of its events of kinds it skips none of:
#: :func:`whole_parts`)
PROJECTED_WHOLE_TABLES = ("gpu", "steps")


def whole_parts(projection: Projection) -> frozenset[str]:
    """The parts of the event table (``model.EVENT_PARTS``: ``cpu_ops``, ``launches``) that a load with ``projection``
    holds whole: those of kinds no event it skips has (it skips ``ph: X`` events of its ``drop_cats``, but those whose
    names it keeps, and the events of its ``drop_phases``)."""
    from .link.kinds import kind_of
    from .model import EVENT_PARTS

    skipped = {kind_of("X", c) for c in projection.drop_cats} | {kind_of(p, "") for p in projection.drop_phases}
    return frozenset(part for part, kinds in EVENT_PARTS.items() if not skipped & set(kinds))


def served_tables(projection: Projection) -> frozenset[str]:
    """The trace tables a query (``sql``) reads from a load with ``projection`` as from a whole load (in the columns
    :func:`projection_keeps` names): the GPU rows (``gpu``, ``kernels``), the ``steps``, and the tables of the parts of
    the event table it holds whole (:func:`whole_parts`)."""
    return frozenset({"gpu", "kernels", "steps"}) | whole_parts(projection)


class Held:
    """A loaded trace's tables (``events``, ``gpu``, ``flows``, ``steps``) read as a parse-cache entry's are
    (:meth:`~kernscope.load.cache.Entry.lazy`), for :func:`stored_tables`: the first ``sql`` of a file that no load
    has stored reads a projected load's GPU rows and steps as it would read them from that load's entry."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace

    def columns(self, name: str) -> list[str]:
        """Table ``name``'s columns, in order."""
        return list(self._df(name).columns)

    def lazy(self, name: str, reread: Callable[[], pl.DataFrame] | None = None,
             holds: frozenset[str] | None = None) -> pl.LazyFrame:
        """Table ``name`` as a lazy frame; a query asking for a column not in ``holds`` reads ``reread()`` instead."""
        df = self._df(name)

        def read(columns: list[str], rows: tuple[int, int] | None) -> pl.DataFrame:
            return (df if rows is None else df.slice(*rows)).select(columns)

        return _cache.lazy_frame(df.schema, read, reread=reread, holds=holds, explain_name=f"kernscope {name}")

    def _df(self, name: str) -> pl.DataFrame:
        df: pl.DataFrame = getattr(self.trace, name)
        return df


def stored_tables(entry: _cache.Entry | Held, projection: Projection | None,
                  whole: Callable[[], Trace]) -> Callable[..., pl.LazyFrame]:
    """An entry's tables (``events``, ``gpu``, ``flows``, ``steps``) as lazy frames that read what a query asks for
    (:meth:`~kernscope.load.cache.Entry.lazy`; ``table("events", part)``: only a part of the events is read,
    ``model.EVENT_PARTS``): a whole load's entry (``projection`` None) all of them; a projected load's (``projection``:
    the one it was written with) :data:`PROJECTED_WHOLE_TABLES` and the parts of its events it holds whole
    (:func:`whole_parts`), in the columns it holds as a whole load does. The rest, a damaged entry's tables included,
    come from ``whole()`` (the trace loaded whole). ``entry`` may be a loaded trace's tables (:class:`Held`: a
    projected load not stored, or not yet read back)."""
    def table(name: str, part: str | None = None) -> pl.LazyFrame:
        def reread() -> pl.DataFrame:
            df: pl.DataFrame = getattr(whole(), name)
            return df

        if projection is None:
            return entry.lazy(name, reread=reread)
        if name not in PROJECTED_WHOLE_TABLES and not (name == "events" and part in whole_parts(projection)):
            return reread().lazy()
        return entry.lazy(name, reread=reread, holds=projection_keeps(projection, entry.columns(name)))

    return table


def _unchanged(path: str, before: FileIdentity) -> bool:
    """Whether the file at ``path`` still has the identity it had when it was read (a file removed or replaced by
    something unreadable since has not: the trace read is kept, not cached)."""
    try:
        return FileIdentity.of(path) == before
    except TraceError:
        return False


class _StagedWrite:
    """A load's parse-cache entry, written table by table: the event table (two thirds of the tables) on a thread as
    soon as the link has it final, while the link goes on at ~1.5 of 2 cores; the other tables and the manifest after
    the link (:meth:`finish`). Nothing of it is kept when the link fails (:meth:`abandon`). Without a writer (no
    cache) every method does nothing."""

    def __init__(self, writer: _cache.EntryWriter | None) -> None:
        self.writer = writer
        self._thread: threading.Thread | None = None  #: the event table's write, once the link handed it over

    def events(self, events: pl.DataFrame) -> None:
        if self.writer is not None and self._thread is None:
            self._thread = threading.Thread(target=self._write_events, args=(self.writer, events),
                                            name="kernscope-cache-events")
            self._thread.start()

    @staticmethod
    def _write_events(writer: _cache.EntryWriter, events: pl.DataFrame) -> None:
        writer.add("events", events)
        writer.settle_digest()  # a pending digest hashed here, while the link still runs on the other core

    def _join(self) -> None:
        if self._thread is not None:
            self._thread.join()  # (again: returns at once)

    def finish(self, tables: dict[str, pl.DataFrame], info: dict[str, Any]) -> None:
        """Write ``tables`` (the event table's write is waited for, or done here when the link did not hand it
        over) and commit the entry."""
        self._join()
        if self.writer is None:
            return
        for name, df in tables.items():
            if not (name == "events" and self._thread is not None):
                self.writer.add(name, df)
        self.writer.commit(info)

    def abandon(self) -> None:
        self._join()
        if self.writer is not None:
            self.writer.abandon()


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Python's cycle collector off while a trace is parsed or linked: they make few Python objects and no
    cycles, but many enough (metadata, HLO programs) that full collections kept walking every live object
    (~3% of a 200 MB XSpace's decode). Restored as it was, also on an error."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _Laps:
    """Appends (phase, seconds since the previous lap) to ``timings`` (nothing when it is None)."""

    def __init__(self, timings: list[tuple[str, float]] | None) -> None:
        self.timings = timings
        self.t = time.perf_counter()

    def __call__(self, phase: str) -> None:
        if self.timings is not None:
            now = time.perf_counter()
            self.timings.append((phase, now - self.t))
            self.t = now


def windowed_key(salvage: bool, step_marker: str | None, projection: Projection | None) -> dict[str, Any]:
    """The parse-cache key of an analysis made a time window at a time (:mod:`kernscope.analyze.windows`): its entry
    (:func:`results_entry`) holds the outputs of such analyses and no table; no load reads it."""
    return {**load_key(salvage, step_marker, projection), "windowed": True}


def results_entry(path: str, digest: _cache.KnownDigest | _cache.PendingDigest | None, key: dict[str, Any],
                  notify: Notify | None = None) -> None:
    """Write a parse-cache entry for ``path`` under ``key`` (:func:`windowed_key`) whose tables are empty: an
    analysis made without the trace's tables has nowhere else to store its outputs (``outputs.store``, found again by
    ``outputs.lookup``). ``digest``: the lookup's (None: hashed here). Nothing where the cache is not writable."""
    ident = FileIdentity.of(path)
    if isinstance(digest, _cache.KnownDigest) and digest.identity == ident:
        given: str | _cache.PendingDigest = digest.hexdigest
    elif isinstance(digest, _cache.PendingDigest) and digest.identity == ident:
        given = digest
    else:
        given = _cache.KnownDigest.of(path).hexdigest
    writer = _cache.EntryWriter(given, key, notify=notify, size=ident.size)
    for name in _cache.TABLES:
        writer.add(name, pl.DataFrame({"idx": pl.Series([], dtype=pl.Int64)}))
    writer.commit({"windowed": True})
