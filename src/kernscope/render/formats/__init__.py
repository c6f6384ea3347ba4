"""One renderer per output format, each a small class whose ``render(result, options)`` takes any result
(:class:`kernscope.result.Result`) and returns its bytes (or, for a directory of CSVs, its files).

=========  ===========================  ==================================================
format     class                        output
=========  ===========================  ==================================================
``table``  :class:`.table.Console`      terminal tables (rich), fitted to ``options.width``
``json``   :class:`.json.Json`          one JSON document (``schema_version`` first)
``csv``    :class:`.csv.Csv`            the first table, or one file per sheet
``xlsx``   :class:`.xlsx.Xlsx`          a workbook: a sheet per table and ``definitions``
``html``   :class:`.html.Html`          a self-contained page
=========  ===========================  ==================================================

Adding a format is one new file here: ``<format>.py`` whose ``RENDERER`` is the class (:data:`FORMATS` lists the
files; nothing else names them).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Protocol

from ...result import Result
from ..views import Options

#: the formats: one module each in this package, named as the format (imported when first used)
FORMATS = tuple(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))

#: what a renderer returns: one file's bytes, or a directory's files (name -> bytes)
Rendered = bytes | dict[str, bytes]


class Renderer(Protocol):
    def render(self, result: Result, options: Options) -> Any: ...


def renderer(fmt: str) -> Renderer:
    """The renderer of format ``fmt`` (one of :data:`FORMATS`)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    return importlib.import_module(f"{__name__}.{fmt}").RENDERER()


def render(result: Result, fmt: str, options: Options | None = None) -> Rendered:
    """``result`` in format ``fmt``."""
    return renderer(fmt).render(result, options or Options())


def text(result: Result, fmt: str = "json", options: Options | None = None) -> str:
    """``result`` in a text format (``table``, ``json``, ``csv``) as a string."""
    out = render(result, fmt, options)
    if not isinstance(out, bytes):
        raise TypeError(f"{fmt} with all_tables is a directory, not a text")
    return out.decode()


def write(rendered: Rendered, target: str, *, regular: bool = False) -> None:
    """Write a rendering to ``target`` atomically: a file, or (files) a directory made whole or not at all.
    A FIFO or device takes a file's bytes as a stream unless ``regular`` (a workbook: refused there, as a file
    others would open by name)."""
    from ...files import atomic_dir, atomic_path
    from ...sink import write_bytes

    if isinstance(rendered, bytes):
        if regular:
            with atomic_path(target) as tmp:
                tmp.write_bytes(rendered)
        else:
            write_bytes(target, rendered)
        return
    with atomic_dir(target) as tmp:
        for name, body in rendered.items():
            (tmp / name).write_bytes(body)


__all__ = ["FORMATS", "Options", "Rendered", "Renderer", "render", "renderer", "text", "write"]
