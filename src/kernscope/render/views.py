"""Views: how one format shows one named part of a result, registered by format and qualified name.

A renderer (:mod:`kernscope.render.formats`) walks a result's parts in order. For each part, named
``"<kind>.<name>"`` (``"analysis.kernels"``, ``"diff.total"``), it uses the view registered for its format, or
its default (a table as a table, a fact as a value). Formatting lives in views; results never format and views
never compute: they read the result's facts and tables.

- :func:`view` registers a view: ``@view("console", "analysis.kernels")``.
- :func:`layout` registers the order of parts one format shows for one result kind (default: the result's facts,
  then its tables, as the result lists them). A name a layout lists that the result lacks is a part only a
  view knows how to make (``"analysis.critical_path"`` in JSON is one object of several tables).
- :data:`OMIT` from a view leaves the part out.

The registries are per process and filled by importing the modules that define views (:func:`load_views`, per
format and result kind, from :data:`VIEW_MODULES`); nothing else mutates them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ..result import Result

if TYPE_CHECKING:
    import polars as pl

#: returned by a view: leave this part out

class Parts(dict[str, Callable[[], Any]]):
    """A JSON view's object whose values are made one at a time, as the JSON format writes them (each a
    zero-argument function): a view of several long tables (a 10 GB trace's critical path: 260 k rows) then holds
    one table's rows at a time."""


OMIT: Any = object()

#: where each result kind's views and layouts are registered (modules of this package), by format ("*": any
#: format): a rendering imports only what it shows (a JSON answer never imports the terminal's table code)
VIEW_MODULES: dict[str, dict[str, tuple[str, ...]]] = {
    "analysis": {"table": ("console",), "*": ("tables",)},
    "diff": {"*": ("diff",)},
    "perf": {"*": ("perf",)},
    "memory": {"*": ("memory",)},
    "annotate": {"*": ("listing",)},
    "counters": {"*": ("counters",)},
    "job": {"html": ("ranks", "html.views"), "*": ("ranks",)},
    "bench_dir": {"html": ("bench_dir", "html.views"), "*": ("bench_dir",)},
    "query": {"*": ("frame",)},
    "report": {"*": ("report",)},
    "bench_run": {"*": ("bench",)},
    "bench_compare": {"*": ("bench",)},
}


@dataclass(frozen=True)
class Options:
    """What a caller asks of a rendering: ``top`` rows per long table (None: every row), the terminal ``width``
    (characters) and ``color``; ``all_tables``: every table (a directory of CSVs) instead of the first."""

    top: int | None = None
    width: int = 160
    color: bool = False
    all_tables: bool = False


@dataclass
class Section:
    """One part of a result as a view sees it: its ``name``, the ``result``, the rendering ``options``, and the
    result's facts and tables (computed once per rendering)."""

    result: Any
    name: str
    options: Options
    facts: dict[str, Any] = field(repr=False)
    tables: dict[str, pl.DataFrame] = field(repr=False)

    @property
    def df(self) -> pl.DataFrame:
        """This part's table."""
        return self.tables[self.name]

    @property
    def value(self) -> Any:
        """This part's fact."""
        return self.facts[self.name]

    @property
    def top(self) -> int | None:
        return self.options.top

    @property
    def shown(self) -> pl.DataFrame:
        """This part's table as a terminal table shows it: its first ``top`` rows, all without a ``top`` (the rows
        left out, ``df.height - shown.height``, are the table's "… N more")."""
        return self.df if self.top is None else self.df.head(self.top)


View = Callable[..., Any]
#: a layout: part names in order, or a function of the result giving them (parts that vary: one sheet per op class)
Layout = tuple[str, ...] | Callable[[Any], tuple[str, ...]]


@dataclass
class _Registry:
    views: dict[tuple[str, str], View] = field(default_factory=dict)
    layouts: dict[tuple[str, str], Layout] = field(default_factory=dict)
    loaded: set[tuple[str, str]] = field(default_factory=set)


_REGISTRY = _Registry()


def view(fmt: str, name: str) -> Callable[[View], View]:
    """Register the decorated function as format ``fmt``'s view of ``name`` (``"<kind>.<part>"``)."""

    def register(fn: View) -> View:
        _REGISTRY.views[(fmt, name)] = fn
        return fn

    return register


def layout(fmt: str, kind: str, names: Layout) -> None:
    """Format ``fmt`` shows a ``kind`` result's parts in the order ``names`` (or ``names(result)``)."""
    _REGISTRY.layouts[(fmt, kind)] = names


def load_views(fmt: str, kind: str) -> None:
    """Import the modules that register format ``fmt``'s views of ``kind`` results (once)."""
    if (fmt, kind) not in _REGISTRY.loaded:
        where = VIEW_MODULES.get(kind, {})
        for m in where.get(fmt, where.get("*", ())):
            importlib.import_module(f"{__package__}.{m}")
        _REGISTRY.loaded.add((fmt, kind))


def find(fmt: str, kind: str, name: str) -> View | None:
    """The view ``fmt`` registered for ``kind.name``, or None."""
    load_views(fmt, kind)
    return _REGISTRY.views.get((fmt, f"{kind}.{name}"))


@dataclass
class Walk:
    """A rendering of one result in one format: its sections in the layout's order."""

    fmt: str
    result: Result
    options: Options

    @cached_property
    def facts(self) -> dict[str, Any]:
        return self.result.facts_dict()

    @cached_property
    def tables(self) -> dict[str, pl.DataFrame]:
        return self.result.tables()

    def has_layout(self) -> bool:
        """Whether this format registered a layout for the result's kind."""
        load_views(self.fmt, self.result.kind)
        return (self.fmt, self.result.kind) in _REGISTRY.layouts

    def names(self) -> tuple[str, ...]:
        load_views(self.fmt, self.result.kind)
        got = _REGISTRY.layouts.get((self.fmt, self.result.kind))
        if got is None:
            return (*self.facts, *self.tables)
        return got if isinstance(got, tuple) else got(self.result)

    def __iter__(self) -> Iterator[tuple[Section, View | None]]:
        for name in self.names():
            yield (Section(self.result, name, self.options, self.facts, self.tables),
                   find(self.fmt, self.result.kind, name))
