"""Names from traces are attacker-controlled text: one place that makes them safe for every output.

- terminal: plain text (never rich markup), control characters (ESC, OSC, C1, DEL, NUL...) shown escaped;
- CSV: formula prefixes (``= + - @``, tab, CR) neutralized with a leading apostrophe (OWASP);
- xlsx: strings are written as strings (the workbook is created with formulas and URLs off);
- HTML: text escaped, data embedded as JSON that cannot close its ``<script>``, and a
  Content-Security-Policy that only runs the page's own script (by hash).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.text import Text

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n")
#: the same test as a regex (for vectorized use on columns)
FORMULA_PREFIX = r"^[=+\-@\t\r\n]"


def visible(s: object) -> str:
    """``s`` with control and bidi-override characters shown as ``\\xNN``/``\\uNNNN`` escapes."""
    text = "" if s is None else str(s)
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", text)


def term(s: object, style: str | None = None) -> Text:
    """A terminal cell: literal text (``[bold]`` stays ``[bold]``), control characters escaped."""
    from rich.text import Text  # here, not at import: JSON and CSV output never load rich

    return Text(visible(s), style=style or "")


def shorten_middle(s: str, width: int) -> str:
    """Fit ``s`` in ``width`` characters by cutting its middle (ends say most about a kernel)."""
    if width <= 0:
        return ""
    if len(s) <= width:
        return s
    if width <= 3:
        return s[:width]
    head = (width - 1) * 2 // 3
    tail = width - 1 - head
    return s[:head].rstrip() + "…" + (s[-tail:].lstrip() if tail else "")  # no space beside the …


def shorten_left(s: str, width: int) -> str:
    """Fit ``s`` in ``width`` characters by cutting its start (a file's path: its name and line say most)."""
    if width <= 0:
        return ""
    if len(s) <= width:
        return s
    return "…" + s[len(s) - width + 1:] if width > 1 else s[-1:]


#: the title of the table of GPU time by source line (terminal, HTML): a JAX profile's, from the HLO
SOURCES_TITLE = "GPU time by source line (the line of your code each kernel's op was traced from)"
#: ... and a PyTorch trace's, from its Python stacks (``--sources``): PyTorch's tracer names a frame by its function's
#: first line; a backward kernel is its forward op's function's, marked
PYTHON_SOURCES_TITLE = ("GPU time by Python function of your code (its file and first line; a backward kernel counts "
                        "for its forward op's function, marked (backward))")


def sources_title(framework: object) -> str:
    """The title of a trace's source table: :data:`SOURCES_TITLE` for a JAX profile (``framework`` "jax"), else
    :data:`PYTHON_SOURCES_TITLE`."""
    return SOURCES_TITLE if framework == "jax" else PYTHON_SOURCES_TITLE
#: the source cell of the GPU rows with no line (XLA's copies and memsets, instructions XLA added itself)
NO_SOURCE = "(no source line)"


def csv_cell(v: Any) -> Any:
    """A CSV value: strings that a spreadsheet would run as a formula get a leading apostrophe."""
    if isinstance(v, str) and v.startswith(_FORMULA_START):
        return "'" + v
    return v


def html_text(s: object) -> str:
    """``s`` escaped for HTML text and attribute values (``html.escape`` with quotes)."""
    import html  # (here, not at the top: its entity table is ~5 ms of every command's imports, and only HTML uses it)

    return html.escape("" if s is None else str(s), quote=True)


def script_json(data: Any) -> str:
    """JSON for a ``<script type="application/json">`` block: no ``<``, ``>``, ``&`` or line separators
    can end the block or start markup, whatever the names contain."""
    return (json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def csp_for(script: str, style: str = "") -> str:
    """A Content-Security-Policy that runs exactly ``script`` and applies exactly ``style`` (by hash)."""
    def h(s: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'"

    styles = f"style-src {h(style)}" if style else "style-src 'none'"
    return (f"default-src 'none'; script-src {h(script)}; {styles}; img-src data:; connect-src 'none'; "
            "base-uri 'none'; form-action 'none'")
