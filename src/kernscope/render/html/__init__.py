"""Self-contained HTML pages: all JS/CSS inline (no network), data as a JSON block, a strict CSP.

:func:`page` assembles one page from a data document; ``report.js`` draws whatever sections the
document has (trace facts, timeline, breakdown, per-step bars, tables, extra views).
"""

from __future__ import annotations

import base64
from importlib import resources
from typing import Any

import numpy as np

from ..names import csp_for, html_text, script_json, visible


def asset(name: str) -> str:
    return resources.files("kernscope.render.html").joinpath(name).read_text(encoding="utf-8")


def b64(a: np.ndarray) -> str:
    """A numpy array as base64 of its little-endian bytes (decoded into a typed array in the page)."""
    return base64.b64encode(np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"), copy=False).tobytes()).decode()


#: one colour per built-in category, the same on every page and chart (distinct hues: Kelly's colours of
#: maximum contrast, with greys for Memory and Other); categories of user rules take further hues in the page
CATEGORY_COLORS = {
    "GEMM": "#0067a5", "Attention Forward": "#f38400", "Attention Backward": "#be0032", "Convolution": "#875692",
    "Communication": "#008856", "Memory": "#848482", "Elementwise": "#f3c300", "Reduction": "#a1caf1",
    "Normalization": "#e68fac", "Softmax": "#882d17", "Embedding/Indexing": "#8db600", "Optimizer": "#604e97",
    "Sort/Scan": "#c2b280", "Loss": "#e25822", "MoE": "#2b3d26", "Quantization": "#f99379", "Pooling": "#654522",
    "SSM/Linear Attention": "#b3446c", "FFT": "#00b5b8", "Linear Algebra": "#1f4e5f", "Other": "#d4d4d4",
}


def _shown(x: Any) -> Any:
    """Every string of the data document as the terminal shows it: control and bidi-override characters
    (U+202E would display "evil" as "live") written as visible escapes (one pass over the small document)."""
    if isinstance(x, str):
        return visible(x)
    if isinstance(x, dict):
        return {k: _shown(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_shown(v) for v in x]
    return x


def page(data: dict[str, Any], title: str, subtitle: str = "") -> str:
    """One HTML file: the report script and style inline, the data document in a JSON block (with the
    category colours)."""
    data = _shown({**data, "category_colors": CATEGORY_COLORS})
    js = asset("report.js")
    css = asset("report.css")
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{html_text(csp_for(js, css))}\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{html_text(visible(title))}</title>\n<style>{css}</style>\n</head><body>\n"
        f"<header><h1 id=\"title\">{html_text(visible(title))}</h1><small>{html_text(visible(subtitle))}</small></header>\n"
        "<main id=\"main\"></main>\n"
        f"<script type=\"application/json\" id=\"ks-data\">{script_json(data)}</script>\n"
        f"<script>{js}</script>\n</body></html>\n"
    )
