"""Self-contained HTML pages: all JS/CSS inline (no network), data as a JSON block, a strict CSP.

:func:`page` assembles one page from a data document; ``report.js`` draws whatever sections the
document has (trace facts, timeline, breakdown, per-step bars, tables, extra views).
"""

from __future__ import annotations

import base64
from importlib import resources
from typing import Any

import numpy as np

from ..names import csp_for, html_text, script_json


def asset(name: str) -> str:
    return resources.files("kernscope.render.html").joinpath(name).read_text(encoding="utf-8")


def b64(a: np.ndarray) -> str:
    """A numpy array as base64 of its little-endian bytes (decoded into a typed array in the page)."""
    return base64.b64encode(np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"), copy=False).tobytes()).decode()


def page(data: dict[str, Any], title: str, subtitle: str = "") -> str:
    """One HTML file: the report script and style inline, the data document in a JSON block."""
    js = asset("report.js")
    css = asset("report.css")
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{html_text(csp_for(js, css))}\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{html_text(title)}</title>\n<style>{css}</style>\n</head><body>\n"
        f"<header><h1 id=\"title\">{html_text(title)}</h1><small>{html_text(subtitle)}</small></header>\n"
        "<main id=\"main\"></main>\n"
        f"<script type=\"application/json\" id=\"ks-data\">{script_json(data)}</script>\n"
        f"<script>{js}</script>\n</body></html>\n"
    )
