"""JSON: one document, ``schema_version`` first, then the result's parts in the layout's order (a table as a
list of row objects, µs rounded to ns; a fact as its value)."""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec
import polars as pl

from ...result import Result
from ...version import SCHEMA_VERSION
from ..tables import JsonRows, json_rows
from ..views import OMIT, Options, Parts, Section, Walk


def default(s: Section) -> Any:
    """A table as its rows (``top`` of them), a fact as it is, ``schema_version`` as the package's and ``notes``
    (when the result has no fact or table of that name) as the result's notes."""
    if s.name == "schema_version":
        return SCHEMA_VERSION
    if s.name in s.tables:
        return json_rows(s.df, s.top)
    if s.name == "notes" and s.name not in s.facts:
        return list(s.result.notes)
    return s.facts[s.name]


def whole(s: Section) -> JsonRows | list[dict[str, Any]]:
    """A view: every row of a short table, whatever ``top`` is."""
    return json_rows(s.df)


def raw_rows(s: Section) -> list[dict[str, Any]]:
    """A view: every row as polars holds it (no rounding: a query's answer, a run comparison), non-finite floats
    as null."""
    rows: list[dict[str, Any]] = s.df.with_columns(
        pl.col(pl.Float64, pl.Float32).replace([float("inf"), float("-inf")], None).fill_nan(None)).to_dicts()
    return rows


class Json:
    """The ``json`` format. A result without a layout gets ``schema_version``, its facts and its tables."""

    def render(self, result: Result, options: Options) -> bytes:
        # the text of json.dumps(doc, indent=2), made one part at a time: the rows of one table are Python objects
        # only while that table is written (all of them at once took ~1 GB for a 10 GB trace's per-step tables)
        walk = Walk("json", result, options)
        parts: dict[str, bytes] = {}  # (encoded as made, and joined once: the text is tens of MB on large traces)
        if not walk.has_layout():
            parts["schema_version"] = _dumps(SCHEMA_VERSION).encode()
        for s, view in walk:
            value = view(s) if view is not None else default(s)
            if value is not OMIT:
                parts[s.name] = _dumps(value).encode()
            del value
        if not parts:
            return b"{}"
        pieces = [b"{\n"]
        for i, (name, text) in enumerate(parts.items()):
            pieces += [b",\n  " if i else b"  ", json.dumps(name, ensure_ascii=False).encode(), b": ", text]
        pieces.append(b"\n}")
        parts.clear()
        return b"".join(pieces)


def _text(value: Any) -> str:
    """``json.dumps(value, indent=2)``, :class:`Parts` made one by one."""
    if not isinstance(value, Parts):
        return _indented(value)
    if not value:
        return "{}"
    items = [f"  {json.dumps(k, ensure_ascii=False)}: {_text(make()).replace(chr(10), chr(10) + '  ')}"
             for k, make in value.items()]
    return "{\n" + ",\n".join(items) + "\n}"


def _indented(value: Any) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=False, default=str)``, 2-3x faster: with an indent the standard
    library encodes in Python; here its C encoder writes the values (the same text for every number and string) and
    msgspec's formatter indents them. A value the formatter refuses holds a NaN or an infinity (which json writes
    though they are not JSON: ``jq`` and a browser's ``JSON.parse`` refuse the document): those are written as null,
    as polars writes them in a table's rows (:class:`~kernscope.render.tables.JsonRows`, only indented here)."""
    if isinstance(value, JsonRows):
        return msgspec.json.format(value.text, indent=2).decode()
    flat = json.dumps(value, ensure_ascii=False, default=str)
    try:
        return msgspec.json.format(flat, indent=2)
    except msgspec.DecodeError:
        return json.dumps(finite(value), indent=2, ensure_ascii=False, default=str, allow_nan=False)


def strict_dumps(value: Any, **kw: Any) -> str:
    """``json.dumps(value, **kw)`` with NaN and infinities written as null (:func:`finite`): always valid JSON."""
    return json.dumps(finite(value), allow_nan=False, **kw)


def finite(value: Any) -> Any:
    """``value`` with every NaN and infinity inside it (dicts, lists, tuples) as None: JSON has no such numbers."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def _dumps(value: Any) -> str:
    """``value`` as it appears one level inside an ``indent=2`` document (its raw newlines are all indentation:
    json.dumps escapes those in strings)."""
    return _text(value).replace("\n", "\n  ")


#: this module's renderer (the format's name is the module's)
RENDERER = Json
