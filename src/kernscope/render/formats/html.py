"""HTML: one self-contained page (:func:`kernscope.render.html.page`). The page's data document is built from
the result's parts: a table becomes a sortable view, a fact a line of the facts box; views registered by table
name add what the page script draws for them (the GPU timeline, bar charts, the headline) as document keys."""

from __future__ import annotations

from typing import Any

from ...result import Result
from ...version import __version__
from ..glossary import TERMS, define
from ..html import page
from ..html.analysis import table
from ..views import OMIT, Options, Walk


def sheet_view(name: str, df: Any, title: str | None = None) -> dict[str, Any]:
    """A sortable table view of ``df`` (list cells joined, key columns first)."""
    from ..html.views import TITLES, flat, key_first

    shown = flat(key_first(df) if "kernel_time_us" in df.columns else df)
    return {"name": name, "title": title or TITLES.get(name, name.replace("_", " ")), "table": table(shown, name)}


def merge(doc: dict[str, Any], part: dict[str, Any]) -> None:
    """Add a view's keys to the document: lists extend, mappings update, other values replace."""
    for k, v in part.items():
        have = doc.get(k)
        if isinstance(have, list) and isinstance(v, list):
            have.extend(v)
        elif isinstance(have, dict) and isinstance(v, dict):
            have.update(v)
        else:
            doc[k] = v


def glossary(doc: dict[str, Any], terms: list[str]) -> dict[str, str]:
    """The definitions of every column and fact the page shows (sorted: the page is the same on every run)."""
    used = set(terms)
    for v in doc.get("views", []):
        used.update(v["table"]["columns"])
    for t in doc.get("tables", {}).values():
        used.update(t["columns"])
    used.update(doc.get("facts", {}))
    return {k: define(k) for k in sorted(used) if k in TERMS}


class Html:
    """The ``html`` format: the page's bytes (UTF-8)."""

    def render(self, result: Result, options: Options) -> bytes:
        doc: dict[str, Any] = {"title": result.title}
        facts: dict[str, Any] = {}
        terms: list[str] = []
        walk = Walk("html", result, options)
        for s, view in walk:
            if view is not None:
                part = view(s)
                if part is not OMIT:
                    terms.extend(part.pop("terms", ()))
                    merge(doc, part)
            elif s.name in s.tables:
                if s.df.height:
                    merge(doc, {"views": [sheet_view(s.name, s.df)]})
            else:
                facts[s.name] = s.facts[s.name]
        if not walk.has_layout() and result.notes:
            facts["notes"] = list(result.notes)
        if facts or "facts" not in doc:
            merge(doc, {"facts": facts})
        doc["glossary"] = glossary(doc, terms)
        subtitle = doc.pop("subtitle", f"kernscope {__version__} · {result.kind}")
        return page(doc, result.title, subtitle).encode()


#: this module's renderer (the format's name is the module's)
RENDERER = Html
