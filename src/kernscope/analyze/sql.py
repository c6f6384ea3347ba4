"""SQL over a trace's tables and its analysis's tables (``kernscope sql``; polars' SQL engine, no server).

Input: a :class:`~kernscope.model.Trace` and a query. Tables: the trace's (:meth:`Trace.tables`: ``events``,
``gpu``, ``kernels``, ``cpu_ops``, ``launches``, ``steps``, ``flows``, ``call_tree``; times int64 ns) and, when
the query names one, the analysis's (:meth:`Analysis.tables` as ``analysis.<name>``: ``analysis.kernels``,
``analysis.categories``, ``analysis.findings``, ``analysis.critical_path`` …; times µs floats in ``*_us``). The
analysis runs only when the query names an ``analysis.`` table; ``analysis.sources`` of a PyTorch trace reads its
Python stacks (what ``analyze --sources`` shows). ``counters.kernels``, ``counters.metrics``, ``counters.ranges``: the
hardware counters of a trace recorded with ``profiler_metrics`` (``kernscope counters``; empty otherwise). Several
traces (the ranks of one job): the job's tables as ``job.<name>`` (:func:`job_sql`). Output: a DataFrame.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

import polars as pl

from ..model import TRACE_TABLES, Lazy, Trace, query_words, run_sql, stored_table_makers
from .categories import Categorizer
from .counters import COUNTER_TABLES, KernelCounters, kernel_counters
from .critical_path import empty_path
from .summary import Analysis, analyze

if TYPE_CHECKING:
    from .ranks import JobAnalysis

#: the analysis tables, as SQL names
ANALYSIS_TABLES = ("kernels", "kernels_by_stream", "categories", "libraries", "ops", "ops_by_category", "launcher_categories",
                   "steps", "timeline", "timeline_by_device", "timeline_by_step", "step_categories", "findings", "findings_by_kind",
                   "sources", "critical_path", "critical_path_categories", "critical_path_ops", "critical_path_kernels",
                   "critical_path_whatif")


def table_names() -> list[str]:
    """Every table a query of one trace may name, in the order ``SHOW TABLES`` lists them: the trace's, the
    analysis's (``analysis.<name>``) and the counters' (``counters.<name>``)."""
    return [*TRACE_TABLES, *(f"analysis.{n}" for n in ANALYSIS_TABLES), *(f"counters.{n}" for n in COUNTER_TABLES)]


def reads_only(query: str, tables: frozenset[str], unread: frozenset[str]) -> bool:
    """Whether ``query`` can need, of the trace's tables and the analysis's and counters', only ``tables``, and none
    of the columns ``unread``: judged on its words as :func:`~kernscope.model.run_sql` judges which tables a query
    names (a word in a quoted literal counts too), so a doubt says no. A column reached without its name says no: a
    wildcard (``SELECT *``, ``t.*``; ``count(*)`` reads no column), ``COLUMNS(...)``, a ``NATURAL`` join."""
    words = query_words(query)
    parts = {p for w in words for p in w.split(".")}
    named = {t for t in TRACE_TABLES if t in words} | {w for w in words if w.startswith(("analysis.", "counters."))}
    if not named <= tables or parts & {c.lower() for c in unread} or parts & {"natural", "columns"}:
        return False
    return re.search(r"(?i)(\bselect\s+(distinct\s+)?|,\s*|\.)\*", query) is None


@dataclass(frozen=True)
class QueryResult:
    """A query's answer (result kind ``query``): ``rows`` as polars gave them, and the ``query``."""

    kind: ClassVar[str] = "query"
    query: str
    rows: pl.DataFrame

    @property
    def title(self) -> str:
        return self.query

    @property
    def notes(self) -> tuple[str, ...]:
        return ()

    def facts_dict(self) -> dict[str, Any]:
        """``columns``: the answer's column names."""
        return {"columns": self.rows.columns}

    def tables(self) -> dict[str, pl.DataFrame]:
        """``rows``: the answer."""
        return {"rows": self.rows}


def job_sql(job: JobAnalysis, query: str) -> pl.DataFrame:
    """Run ``query`` over a multi-rank job's tables (:meth:`~kernscope.analyze.ranks.JobAnalysis.tables`) as
    ``job.<table>`` (µs in ``*_us``). Bad queries: one-line :class:`~kernscope.errors.KernscopeError`."""
    have = job.tables()
    return run_sql(query, {f"job.{name}": partial(have.__getitem__, name) for name in have})


def sql(trace: Trace, query: str, *, step: int | None = None, categorizer: Categorizer | None = None) -> pl.DataFrame:
    """Run ``query`` over the trace's tables and (named ``analysis.<table>``) its analysis's, of step ``step`` (all
    steps by default). Bad queries: one-line :class:`~kernscope.errors.KernscopeError`."""
    return _sql(lambda: trace, trace.table_makers(), query, step, categorizer)


def stored_sql(stored: Callable[[str], pl.LazyFrame], load: Callable[[], Trace], query: str, *,
               categorizer: Categorizer | None = None) -> pl.DataFrame:
    """:func:`sql` of all steps over a trace's parse-cache entry: its tables (``stored(name)``: ``events``, ``gpu``,
    ``flows``, ``steps`` as lazy frames, :meth:`kernscope.load.cache.Entry.lazy`) read only as far as the query
    needs them, a few columns where :func:`sql` holds every table it names whole (a count of a 207 MB JAX profile's
    kernels: 1.03 GB of memory). ``load()`` gives the trace for what the query names of ``call_tree``, the analysis
    and the counters (on first use, once)."""
    trace: Lazy[Trace] = Lazy(load)
    return _sql(trace.get, stored_table_makers(stored, lambda: trace.get().call_tree), query, None, categorizer)


def _sql(trace: Callable[[], Trace], tables: dict[str, Callable[[], Any]], query: str, step: int | None,
         categorizer: Categorizer | None) -> pl.DataFrame:
    """``query`` over ``tables`` (the trace's) and the analysis's and counters' tables of ``trace()``."""
    cache: list[Analysis] = []
    # a PyTorch trace's lines come from its Python events (kept by the whole load a query reads): looked up only for
    # a query that names the table
    lines = re.search(r"(?i)(?<![\w.])analysis\.sources(?!\w)", query) is not None

    def table(name: str) -> pl.DataFrame:
        if not cache:  # one analysis for every analysis.* table of the query (none when it names none)
            cache.append(analyze(trace(), step=step, categorizer=categorizer, python_sources=lines))
        have = cache[0].tables()
        if name in have:
            return have[name]
        # the critical path's tables of a trace without steps: empty, with their columns (a query names them)
        return empty_path([]).tables()[name]

    for name in ANALYSIS_TABLES:
        tables[f"analysis.{name}"] = partial(table, name)
    counted: list[KernelCounters | None] = []

    def counters(name: str) -> pl.DataFrame:
        if not counted:  # (read from the file once, for every counters.* table of the query)
            counted.append(kernel_counters(trace()))
        c = counted[0]
        if c is None:
            return pl.DataFrame(schema=COUNTER_TABLES[name])
        return c.tables()[name]

    for name in COUNTER_TABLES:
        tables[f"counters.{name}"] = partial(counters, name)
    return run_sql(query, tables)
