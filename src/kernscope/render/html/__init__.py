"""Self-contained HTML pages: all JS/CSS inline (no network), data as a JSON block, a strict CSP.

:func:`page` assembles one page from a data document; ``report.js`` draws whatever sections the
document has (trace facts, timeline, breakdown, per-step bars, tables, extra views).
"""

from __future__ import annotations

import base64
import re
from importlib import resources
from typing import Any

import numpy as np
from zlib_ng import zlib_ng

from ..names import csp_for, html_text, script_json, visible


def asset(name: str) -> str:
    return resources.files("kernscope.render.html").joinpath(name).read_text(encoding="utf-8")


class Packed(str):
    """Base64 text (``A-Z a-z 0-9 + / =`` only): nothing in it is shown differently or escaped in a page, so
    :func:`page` sets it into the page's JSON as it is instead of passing it through the escapes (a 207 MB JAX
    profile's timeline is 42 MB of it: 0.35 s of escaping that changed nothing)."""

    __slots__ = ()


#: arrays of more than this many bytes go into a page deflated (zlib), which the browser inflates
#: (``DecompressionStream``) before it draws: a 207 MB JAX profile's timeline, 31 MB of arrays, is 9.5 MB so
DEFLATE_ABOVE = 1 << 20


def b64(a: np.ndarray) -> Packed | dict[str, Packed]:
    """A numpy array as base64 of its little-endian bytes (decoded into a typed array in the page); past
    :data:`DEFLATE_ABOVE` bytes deflated first, as ``{"deflate": base64}``."""
    raw = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
    if len(raw) > DEFLATE_ABOVE:
        return {"deflate": Packed(base64.b64encode(zlib_ng.compress(raw, 1)).decode())}
    return Packed(base64.b64encode(raw).decode())


#: one colour per built-in category, the same on every page and chart (distinct hues: Kelly's colours of
#: maximum contrast, with greys for Memory and Other); categories of user rules take further hues in the page
CATEGORY_COLORS = {
    "GEMM": "#0067a5", "Attention Forward": "#f38400", "Attention Backward": "#be0032", "Convolution": "#875692",
    "Communication": "#008856", "Memory": "#848482", "Elementwise": "#f3c300", "Reduction": "#a1caf1",
    "Normalization": "#e68fac", "Softmax": "#882d17", "Embedding/Indexing": "#8db600", "Optimizer": "#604e97",
    "Sort/Scan": "#c2b280", "Loss": "#e25822", "MoE": "#2b3d26", "Quantization": "#f99379", "Pooling": "#654522",
    "SSM/Linear Attention": "#b3446c", "FFT": "#00b5b8", "Linear Algebra": "#1f4e5f", "Other": "#d4d4d4",
}


def _shown(x: Any, packed: list[str]) -> Any:
    """Every string of the data document as the terminal shows it: control and bidi-override characters
    (U+202E would display "evil" as "live") written as visible escapes (one pass over the small document). Each
    :class:`Packed` text is moved to ``packed``, its place held by a NUL and its number (no shown string has a NUL:
    it would be an escape)."""
    if isinstance(x, Packed):
        packed.append(x)
        return f"\0{len(packed) - 1}"
    if isinstance(x, str):
        return visible(x)
    if isinstance(x, dict):
        return {k: _shown(v, packed) for k, v in x.items()}
    if isinstance(x, list):
        return [_shown(v, packed) for v in x]
    return x


#: a :class:`Packed` text's place in the page's JSON (the NUL as JSON writes it), a value (not a key: a colon follows
#: a key)
_PACKED_AT = re.compile(r'"\\u0000(\d+)"(?=[,\]}])')


def page(data: dict[str, Any], title: str, subtitle: str = "") -> str:
    """One HTML file: the report script and style inline, the data document in a JSON block (with the
    category colours)."""
    packed: list[str] = []
    data = _shown({**data, "category_colors": CATEGORY_COLORS}, packed)
    text = script_json(data)
    if packed:  # (the packed texts back in their places, once, past the escapes)
        text = _PACKED_AT.sub(lambda m: f'"{packed[int(m.group(1))]}"', text)
    js = asset("report.js")
    css = asset("report.css")
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{html_text(csp_for(js, css))}\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{html_text(visible(title))}</title>\n<style>{css}</style>\n</head><body>\n"
        f"<header><h1 id=\"title\">{html_text(visible(title))}</h1><small>{html_text(visible(subtitle))}</small></header>\n"
        "<main id=\"main\"></main>\n"
        f"<script type=\"application/json\" id=\"ks-data\">{text}</script>\n"
        f"<script>{js}</script>\n</body></html>\n"
    )
