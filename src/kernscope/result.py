"""The result contract: what every analysis result exposes, so that any renderer can show any result.

A result is a frozen object with

- ``kind``: a short name (``"analysis"``, ``"diff"``, ``"perf"``, ...) that qualifies its table names, so a
  renderer's views are registered as ``"<kind>.<table>"`` (``"analysis.kernels"``, ``"diff.categories"``);
- ``title`` and ``notes``: one line naming what it describes, and what a reader should know about it;
- ``facts_dict()``: its facts, named scalars and small mappings (JSON values; units in the names);
- ``tables()``: its tables by name (polars DataFrames; units in the column names: ``_us`` µs, ``_ns`` ns,
  ``_pct`` %), typed.

Renderers (:mod:`kernscope.render.formats`) take any object with these five members; they never need to know
its class. Adding a result type is a class with these members (and, if it wants more than the default layout,
views registered by its table names); it needs no renderer edit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    import polars as pl


@runtime_checkable
class Result(Protocol):
    """What a renderer may ask of a result (see the module docstring)."""

    kind: ClassVar[str]

    @property
    def title(self) -> str: ...

    @property
    def notes(self) -> Sequence[str]: ...

    def facts_dict(self) -> dict[str, Any]: ...

    def tables(self) -> dict[str, pl.DataFrame]: ...
