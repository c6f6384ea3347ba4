"""The data model every layer shares: the decoded and the linked trace. Imports nothing from kernscope.

Times are int64 **nanoseconds** in every table (``ts``, ``dur``, ``end``), on the trace's own clock
(add ``base_time_ns`` for wall-clock time when the trace has ``baseTimeNanoseconds``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, TypeVar

import polars as pl

T = TypeVar("T")


class Lazy(Generic[T]):
    """A value computed on first use and kept (e.g. a table read from the cache only when needed).

    The holder memoizes; the object that owns it is never modified by a read.
    """

    __slots__ = ("_fn", "_value", "_done", "_lock")

    def __init__(self, fn: Callable[[], T]) -> None:
        self._fn = fn
        self._value: T | None = None
        self._done = False
        self._lock = threading.Lock()

    @classmethod
    def of(cls, value: T) -> "Lazy[T]":
        """An already computed value."""
        lazy: Lazy[T] = cls(lambda: value)
        lazy._value, lazy._done = value, True
        return lazy

    @property
    def loaded(self) -> bool:
        return self._done

    def get(self) -> T:
        if not self._done:
            with self._lock:
                if not self._done:
                    self._value = self._fn()
                    self._done = True
        return self._value  # type: ignore[return-value]


@dataclass
class RawTrace:
    """A decoded, unlinked trace (output of ``load``): one row per event, ``idx`` its position in the
    file's event array; flow (``ph`` s/f/t) and metadata (``M``) rows in their own tables, counters dropped."""

    events: pl.DataFrame
    metadata: dict[str, Any] = field(default_factory=dict)
    flows: pl.DataFrame = field(default_factory=pl.DataFrame)
    meta_events: pl.DataFrame = field(default_factory=pl.DataFrame)
    salvaged: int | None = None  #: events recovered by ``--salvage`` (None when not salvaged)
    #: what salvage skipped, one line per reason (empty when nothing was skipped)
    skipped: list[str] = field(default_factory=list)
    projected_out: int = 0  #: events a load projection skipped unparsed (0: every event was read)
    #: earliest ``ts`` in **µs** (read from the text, float) of the ``ph: X`` events skipped; +inf when none
    projected_first_ts: float = float("inf")
    #: pieces of the text read by each reader ("compiled scanner", "line reader", "array reader", "salvage");
    #: empty for formats read whole
    readers: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class TraceStats:
    """Facts computed once at link time, so a cached trace is summarized without its full event table."""

    events: int  #: events in the file, metadata and flows included
    event_counts: dict[str, int]  #: linked events by kind (flows and metadata excluded)
    platform: str  #: "cuda", "rocm" or "unknown"
    t0: int  #: earliest event start (ns): the origin for relative times in reports
    #: events skipped unparsed by a load projection (counted in ``events``, not in ``event_counts``)
    projected_out: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"events": self.events, "event_counts": dict(self.event_counts), "platform": self.platform, "t0": self.t0,
                "projected_out": self.projected_out}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TraceStats":
        return cls(int(d["events"]), {str(k): int(v) for k, v in d["event_counts"].items()}, str(d["platform"]), int(d["t0"]),
                   int(d.get("projected_out", 0)))


@dataclass(frozen=True)
class Trace:
    """A linked trace. Build it with :func:`kernscope.load`.

    Attributes:
        path: the file it came from.
        gpu: GPU activity (kernels, memcpy, memset) with launch/op/step link columns.
        steps: step windows (``step, name, start, end`` in ns; ``ProfilerStep#N`` or another marker).
        metadata: top-level document keys other than ``traceEvents``.
        unlinked: counts of things that could not be linked, by kind (never silently dropped).
        salvaged: number of events recovered from a truncated file, or None.
        stats: facts computed at link time (event counts, platform, t0).
    """

    path: str
    events_table: Lazy[pl.DataFrame]
    gpu: pl.DataFrame
    flows_table: Lazy[pl.DataFrame]
    steps: pl.DataFrame
    tree_table: Lazy[pl.DataFrame]
    stats: TraceStats
    metadata: dict[str, Any] = field(default_factory=dict)
    process_names: dict[str, str] = field(default_factory=dict)
    thread_names: dict[str, str] = field(default_factory=dict)
    unlinked: dict[str, int] = field(default_factory=dict)
    salvaged: int | None = None
    salvage_skipped: tuple[str, ...] = ()
    from_cache: bool = False
    #: how the step windows were found: "ProfilerStep", "marker:<pattern>", "auto" or "none"
    step_source: str = "ProfilerStep"

    # -- tables ------------------------------------------------------------------------------
    @property
    def events(self) -> pl.DataFrame:
        """Every non-metadata, non-flow event, one row each (``idx`` is the row id)."""
        return self.events_table.get()

    @property
    def flows(self) -> pl.DataFrame:
        """Flow events (``ph`` s/f/t) with their ids."""
        return self.flows_table.get()

    @property
    def call_tree(self) -> pl.DataFrame:
        """``idx, parent_idx, depth`` for host events (nesting by time on each thread)."""
        return self.tree_table.get()

    @property
    def kernels(self) -> pl.DataFrame:
        """GPU kernels only (no memcpy/memset), with link columns."""
        return kernel_rows(self.gpu)

    @property
    def cpu_ops(self) -> pl.DataFrame:
        return cpu_op_rows(self.events)

    def rows(self, kinds: Sequence[str], columns: Sequence[str]) -> pl.DataFrame:
        """The events of these ``kinds`` with only these ``columns`` (analyses read a few columns: filtering the
        whole event table would copy all its columns, a gigabyte per kind on a 10 GB trace)."""
        wanted = list(dict.fromkeys([*columns, "kind"]))
        return self.events.select(wanted).filter(pl.col("kind").is_in(list(kinds))).select(list(columns))

    @property
    def launches(self) -> pl.DataFrame:
        """Runtime/driver events that launched GPU work in this trace."""
        return launch_rows(self.events, self.gpu["launch_idx"])

    def tables(self) -> dict[str, pl.DataFrame]:
        """The trace's tables by name, as ``sql`` sees them: ``events`` (every event; times ns), ``gpu`` (GPU
        records with their launch, op and step), ``kernels``, ``cpu_ops``, ``launches``, ``steps``, ``flows``,
        ``call_tree``. Loaded lazily: a query reads only the tables it names."""
        return {n: getattr(self, n) for n in TRACE_TABLES}  # each name is this class's table attribute

    def sql(self, query: str) -> pl.DataFrame:
        """Run a SQL query (polars' SQL dialect) over :meth:`tables`, e.g. ``trace.sql("SELECT name,
        count(*) AS n, sum(dur) / 1000 AS total_us FROM kernels GROUP BY name ORDER BY total_us DESC")``. Times
        are int64 ns (``ts``, ``dur``, ``end``)."""
        return run_sql(query, self.table_makers())

    def table_makers(self) -> dict[str, Callable[[], pl.DataFrame]]:
        """:meth:`tables`, each built only when called (what a query does not name is never built)."""
        return {n: partial(getattr, self, n) for n in TRACE_TABLES}

    # -- metadata ---------------------------------------------------------------------------
    @property
    def distributed_info(self) -> dict[str, Any]:
        d = self.metadata.get("distributedInfo")
        return d if isinstance(d, dict) else {}

    @property
    def rank(self) -> int | None:
        r = self.distributed_info.get("rank")
        return r if isinstance(r, int) and not isinstance(r, bool) else None

    @property
    def world_size(self) -> int | None:
        w = self.distributed_info.get("world_size")
        return w if isinstance(w, int) and not isinstance(w, bool) else None

    @property
    def base_time_ns(self) -> int | None:
        b = self.metadata.get("baseTimeNanoseconds")
        return b if isinstance(b, int) and not isinstance(b, bool) else None

    @property
    def device_properties(self) -> list[dict[str, Any]]:
        d = self.metadata.get("deviceProperties")
        return [x for x in d if isinstance(x, dict)] if isinstance(d, list) else []

    @property
    def platform(self) -> str:
        """``"rocm"``, ``"cuda"`` or ``"unknown"``, from metadata and runtime names."""
        return self.stats.platform

    @property
    def t0(self) -> int:
        """Earliest event start (ns): the origin for relative times in reports."""
        return self.stats.t0

    @property
    def devices(self) -> list[int]:
        """GPU device ids that ran activity in this trace."""
        if self.gpu.height == 0:
            return []
        return sorted(int(d) for d in self.gpu["device"].drop_nulls().unique().to_list())

    def __repr__(self) -> str:
        return (
            f"Trace({self.path!r}, events={self.stats.events}, gpu={self.gpu.height}, "
            f"steps={self.steps.height}, unlinked={self.unlinked})"
        )


def row_run(events: pl.DataFrame, table: pl.DataFrame) -> int | None:
    """Where ``table``'s rows are one run of consecutive rows of ``events`` (by ``idx``; ``events``' idx increases, in
    file order), as a JAX profile's GPU rows are: the run's first row in ``events``; None where they are not (or either
    has no ``idx``, or a null one)."""
    n = table.height
    if n == 0 or "idx" not in table.columns or "idx" not in events.columns:
        return None
    ev_idx, idx = events["idx"], table["idx"]
    if idx.null_count() or ev_idx.null_count() or ev_idx.dtype != idx.dtype:
        return None
    start = int(ev_idx.search_sorted(idx[0], side="left"))
    if start + n > events.height or not ev_idx.slice(start, n).equals(idx):
        return None
    return start


def literal_nulls(table: pl.DataFrame) -> pl.DataFrame:
    """``table`` with each column that holds only nulls as one null literal of its type (polars keeps it as a scalar
    column: no buffer, and a filter, sort or gather of the table does not copy it). The same columns, types and
    values. The null counts are read without materializing a column already held as a literal (``table[c]`` would,
    and would keep the materialized buffer in the table)."""
    if table.height == 0 or table.width == 0:
        return table
    counts = table.null_count().row(0)
    empty = [c for c, n in zip(table.columns, counts) if n == table.height]
    if not empty:
        return table
    schema = table.schema  # (built anew at every call: once, not once a column)
    return table.with_columns(pl.lit(None, dtype=schema[c]).alias(c) for c in empty)


#: the trace tables ``Trace.sql`` and ``kernscope sql`` know
TRACE_TABLES = ("events", "gpu", "kernels", "cpu_ops", "launches", "steps", "flows", "call_tree")

Frame = TypeVar("Frame", pl.DataFrame, pl.LazyFrame)


def kernel_rows(gpu: Frame) -> Frame:
    """``Trace.kernels`` of a GPU table: its kernels (no memcpy or memset)."""
    return gpu.filter(pl.col("kind") == "kernel")


def cpu_op_rows(events: Frame) -> Frame:
    """``Trace.cpu_ops`` of an event table."""
    return events.filter(pl.col("kind") == "cpu_op")


def launch_rows(events: Frame, launch_idx: pl.Series) -> Frame:
    """``Trace.launches``: the events whose ``idx`` is a GPU row's ``launch_idx`` (that column of the GPU table)."""
    return events.filter(pl.col("idx").is_in(launch_idx.drop_nulls().unique().implode()))


#: the tables made from a part of the event table, by the kinds of event that part holds (a projected load holds such a
#: part whole where it skips no event of those kinds: ``pipeline.stored_tables``)
EVENT_PARTS: dict[str, tuple[str, ...]] = {"cpu_ops": ("cpu_op",), "launches": ("runtime", "driver")}


def stored_table_makers(stored: Callable[..., pl.LazyFrame],
                        call_tree: Callable[[], pl.DataFrame]) -> dict[str, Callable[[], pl.LazyFrame]]:
    """:data:`TRACE_TABLES` as lazy frames over the four tables a parse-cache entry stores (``stored(name)``:
    ``events``, ``gpu``, ``flows``, ``steps`` as lazy frames that read what a query asks for; ``stored("events",
    part)`` where only the events of an :data:`EVENT_PARTS` part are read); the rest made from them as :class:`Trace`
    makes its own (``call_tree``: the trace's, made from its whole event table)."""
    def launches() -> pl.LazyFrame:
        return launch_rows(stored("events", "launches"), stored("gpu").select("launch_idx").collect()["launch_idx"])

    return {"events": partial(stored, "events"), "gpu": partial(stored, "gpu"),
            "kernels": lambda: kernel_rows(stored("gpu")), "cpu_ops": lambda: cpu_op_rows(stored("events", "cpu_ops")),
            "launches": launches, "steps": partial(stored, "steps"), "flows": partial(stored, "flows"),
            "call_tree": lambda: call_tree().lazy()}


#: the first words of statements that are not queries, which ``run_sql`` refuses (other words go to polars' parser)
SQL_STATEMENT_WORDS = frozenset({"drop", "create", "insert", "update", "delete", "truncate", "alter", "replace", "merge",
                                 "copy", "attach", "detach", "set", "use", "grant", "revoke", "rename"})


#: columns the analysis adds to the GPU rows (a kernel's category and library), which the trace's own tables lack: a
#: query of ``kernels`` naming one is pointed to ``analysis.kernels``
ANALYSIS_COLUMNS = ("category", "library")


def query_words(query: str) -> set[str]:
    """The words of a SQL ``query``, lowercased, dotted names whole (``analysis.kernels``, ``k.name``): what it may name
    (a word in a quoted literal too). :func:`run_sql` builds the tables among them."""
    import re

    return {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_.]*", query)}


def check_statement(query: str, tables: Sequence[str]) -> str:
    """What ``query`` is: "show" (``SHOW TABLES``) or "query"; a statement that is not a query (``DROP``, ``CREATE``
    …) or an empty one raises :class:`~kernscope.errors.KernscopeError` naming ``tables``. Judged on the statement's
    first word, past comments and parentheses: only queries read a trace (polars' engine would run DROP or CREATE on
    its own context and print nothing, and SHOW TABLES would list only the tables a query names). ``kernscope sql``
    asks before it loads anything."""
    import re

    from .errors import KernscopeError

    head = re.sub(r"--[^\n]*|/\*.*?\*/|[\s(;]+", " ", query, flags=re.DOTALL).split()
    first = head[0].lower() if head else ""
    if [w.lower() for w in head] == ["show", "tables"]:
        return "show"
    if not first or first in SQL_STATEMENT_WORDS:
        what = f"{first.upper()} changes nothing in a trace" if first else "the query is empty"
        raise KernscopeError(f"SQL: only queries run here (SELECT, WITH, or SHOW TABLES): {what} "
                             f"(tables: {', '.join(tables)})")
    return "query"


def run_sql(query: str, tables: Mapping[str, Callable[[], pl.DataFrame | pl.LazyFrame]]) -> pl.DataFrame:
    """``query`` over the named tables (each built only when the query names it; a lazy frame is read as far as
    the query needs it). Categorical columns are read
    as text, so ``WHERE name = '…'`` and ``LIKE`` work. A bad query: :class:`~kernscope.errors.KernscopeError`
    with polars' one-line reason."""
    import re

    from .errors import KernscopeError

    if check_statement(query, list(tables)) == "show":
        return pl.DataFrame({"name": list(tables)}, schema={"name": pl.String})
    ctx = pl.SQLContext()
    words = query_words(query)
    # a dotted name (analysis.kernels) is registered under a plain one and the query rewritten to it outside quotes:
    # polars 2.0 (the newest on Python 3.10) reads "analysis" as a schema it does not have
    plain = {name.lower(): f"__ks_{name.replace('.', '__')}" for name in tables if "." in name}
    for name, make in tables.items():
        if name.lower() in words:
            lf = make().lazy()
            cats = [c for c, t in lf.collect_schema().items() if isinstance(t, (pl.Categorical, pl.Enum))]
            ctx.register(plain.get(name.lower(), name), lf.with_columns(pl.col(cats).cast(pl.String)) if cats else lf)
    if plain:
        dotted = re.compile(r"(?<![\w.])(" + "|".join(re.escape(n) for n in sorted(plain, key=len, reverse=True))
                            + r")(?![\w])", re.IGNORECASE)
        # (text in quotes, 'literal' or "identifier", kept as written)
        query = "".join(part if part[:1] in ("'", '"') else dotted.sub(lambda m: plain[m.group(1).lower()], part)
                        for part in re.split(r"('(?:[^']|'')*'|\"(?:[^\"]|\"\")*\")", query))
    try:
        out = ctx.execute(query, eager=True)
    except pl.exceptions.PolarsError as e:  # a bad query (syntax, unknown table or column, types)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        for name in tables:
            if name.lower() in plain:
                first = first.replace(plain[name.lower()], name)
        known = ", ".join(tables)
        missing = re.search(r'unable to find column "(\w+)"', first)
        if missing and missing.group(1).lower() in ANALYSIS_COLUMNS and "analysis.kernels" in tables:
            # (the trace's tables hold what was recorded; what the analysis decides is in analysis.*)
            first += f"; {missing.group(1)} is the analysis's: in analysis.kernels (and analysis.categories, analysis.ops_by_category)"
        raise KernscopeError(f"SQL: {first} (tables: {known})") from None
    dec = [c for c, t in out.schema.items() if isinstance(t, pl.Decimal)]  # SQL arithmetic on literals: decimals
    return out.with_columns(pl.col(dec).cast(pl.Float64)) if dec else out
