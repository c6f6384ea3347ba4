"""Terminal tables that fit: numbers are never cut; name columns share what is left and are shortened in
the middle. Cells are literal text (names cannot inject markup or escape sequences). Formatting only.
"""

from __future__ import annotations

import copy
import dataclasses
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from .glossary import define
from .names import shorten_left, shorten_middle, term, visible
from .shortnames import compact, distinct_names

#: space rich puts between two columns (padding (0, 1), no edge padding)
GAP = 2


@dataclass(frozen=True)
class Col:
    header: str
    numeric: bool = False
    weight: int = 1  #: share of the free width among name columns
    min_width: int = 8
    key: str | None = None  #: glossary key (for the header's meaning in docs/HTML; terminal shows header only)
    #: a column the table may leave out when the width cannot hold every number whole (said below the table)
    optional: bool = False
    #: values from a small set (category, class, dtype): left-aligned, never shortened (like numbers)
    enum: bool = False
    #: kernel names: compacted (no void, namespaces, parameter lists) and kept distinct when shortened
    kernel: bool = False
    #: file paths (``path:line``), qualified names: shortened from the start, so that their most specific end stays
    tail: bool = False

    @property
    def whole(self) -> bool:
        """Cells shown whole: numbers and enums."""
        return self.numeric or self.enum


def us(v: float | None) -> str:
    """A µs value in the unit that reads best (µs, ms, s)."""
    if v is None:
        return "-"
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:,.3f} s"
    if a >= 1e3:
        return f"{v / 1e3:,.3f} ms"
    return f"{v:,.2f} µs"


def size(b: float | None) -> str:
    """Bytes in the unit that reads best (binary: KiB, MiB, GiB), sign kept."""
    if b is None:
        return "-"
    a = abs(b)
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if a >= k:
            return f"{b / k:,.2f} {unit}"
    return f"{b:,.0f} B"


def si(v: float | None) -> str:
    """A large count in the unit that reads best (k, M, G, T)."""
    if v is None:
        return "-"
    a = abs(v)
    for unit, k in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if a >= k:
            return f"{v / k:,.2f} {unit}"
    return f"{v:,.0f}"


def pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}%"


def count(v: int | None) -> str:
    return "-" if v is None else f"{v:,}"


def _allocate(cols: Sequence[Col], nat: list[int], width: int) -> list[int]:
    """Widths: numeric columns natural; name columns from their minimum up, sharing the rest by weight."""
    widths = list(nat)
    names = [i for i, c in enumerate(cols) if not c.whole]
    if not names:
        return widths
    free = width - sum(nat[i] for i, c in enumerate(cols) if c.whole) - GAP * (len(cols) - 1)
    if sum(nat[i] for i in names) <= free:
        return widths
    for i in names:
        widths[i] = min(nat[i], cols[i].min_width)
    spare = free - sum(widths[i] for i in names)
    while spare > 0:
        open_ = [i for i in names if widths[i] < nat[i]]
        if not open_:
            break
        total_w = sum(cols[i].weight for i in open_)
        given = 0
        for i in open_:
            add = min(nat[i] - widths[i], max(1, spare * cols[i].weight // total_w))
            add = min(add, spare - given)
            widths[i] += add
            given += add
            if given >= spare:
                break
        if given == 0:
            break
        spare -= given
    return widths


def _header_width(header: str, wrap: bool) -> int:
    return max((len(w) for w in header.split()), default=0) if wrap else len(header)


def _header(header: str, width: int) -> str:
    """``header`` in ``width`` columns: whole, else wrapped at spaces, else (a name column narrower than a
    word) shortened in the middle, line by line."""
    if len(header) <= width:
        return header
    return "\n".join(shorten_middle(line, width) for line in textwrap.wrap(header, width, break_long_words=False))


class FittedTable(Table):
    """A table whose title and caption are lines of their own above and below it, as wide as the terminal: a table
    narrower than its title (a one-column query's answer) wrapped the title inside its own width, a few letters a line.

    Its rows are kept as text (:attr:`body`, added by :meth:`add_text_row`) and drawn by :func:`_plain_body` where
    the table has :func:`fit_table`'s layout and every cell fits its column; else they become rich's cells and rich
    draws the table (:meth:`rich_body`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: the rows: each cell's text as shown, and the style of the row's first cell ("" none)
        self.body: list[tuple[list[str], str]] = []

    def add_text_row(self, cells: list[str], first_style: str = "") -> None:
        """A row of literal text (no markup), its first cell in ``first_style``."""
        self.body.append((cells, first_style))

    def rich_body(self) -> Table:
        """This table without its title and caption, its text rows as rich's cells (literal :class:`~rich.text.Text`)
        after any row added as rich's (``add_row``)."""
        body = copy.copy(self)
        body.title = body.caption = None
        body.columns = [dataclasses.replace(c, _cells=list(c.cells)) for c in self.columns]
        body.rows = list(self.rows)
        for cells, first in self.body:
            body.add_row(*(Text(v, style=first if i == 0 else "") for i, v in enumerate(cells)))
        return body

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.title:
            yield Text(str(self.title), style=self.title_style or "")
        body = _plain_body(self, console, options)
        if body is not None:
            yield from body
        else:
            yield from Table.__rich_console__(self.rich_body(), console, options)
        if self.caption:
            yield Text(str(self.caption), style=self.caption_style or "")


def _fits(text: str, width: int) -> bool:
    """``text`` is one line of printable characters that fits ``width`` terminal cells, each character one cell (rich
    measures, strips or expands the others: a tab, a control character, a second line, a character two cells wide)."""
    return len(text) <= width and text.isprintable() and (text.isascii() or cell_len(text) == len(text))


def _plain_body(table: FittedTable, console: Console, options: ConsoleOptions) -> list[Segment] | None:
    """The segments rich's :class:`~rich.table.Table` renders for a table of :func:`fit_table`'s layout (no box or
    edge, one space of padding between columns, columns of fixed width, no-wrap and cropped, header cells bottom
    aligned), made directly: rich measures and wraps every cell, ~0.1 ms each (20-50 ms of a 200 MB trace's cold
    ``analyze``, 9 s of a 60,900-row SQL answer). The same bytes with and without color
    (``tests/test_terminal_fast.py`` compares them with rich's on generated tables): the header's segments are
    rich's, and a row without a styled cell is one unstyled segment (rich writes a row's unstyled segments one after
    the other, with no escape codes). None where the table is not of that layout or a cell does not fit its column:
    rich then renders it."""
    cols = table.columns
    n = len(cols)
    if (not cols or table.rows or table.box is not None or table.show_edge or table.pad_edge or table.collapse_padding
            or table.expand or not table.show_header or table.show_footer or table.show_lines or table.leading
            or table.row_styles or table.padding != (0, 1, 0, 1) or (table.style or "none") != "none"
            or table.width is not None):
        return None
    widths: list[int] = []
    headers: list[Text] = []
    for c in cols:
        w, h = c.width, c.header
        if (w is None or c.min_width != w or c.max_width != w or not c.no_wrap or c.overflow != "crop" or c.ratio
                or c.justify not in ("left", "right") or c.vertical != "top" or c.style or c.header_style
                or not isinstance(h, Text) or h.spans or h.justify is not None):
            return None
        widths.append(w)
        headers.append(h)
    if sum(widths) + GAP * (n - 1) > options.max_width:
        return None
    heads = [h.plain.split("\n") for h in headers]
    if any(not _fits(line, w) for h, w in zip(heads, widths, strict=True) for line in h):
        return None
    if any(len(cells) != n or not all(_fits(v, w) for v, w in zip(cells, widths, strict=True))
           for cells, _ in table.body):
        return None
    get = console.get_style
    out: list[Segment] = []
    add = out.append
    line = Segment.line()
    pads = [(i > 0, i < n - 1) for i in range(n)]
    just = [str.rjust if c.justify == "right" else str.ljust for c in cols]

    # the header: its cells' lines at the bottom, blank lines above as wide as the padded cell, all in its style
    height = max(len(h) for h in heads)
    styles = [get(table.header_style or "") + get(c.header_style) for c in cols]
    for k in range(height):
        for h, head, w, (lp, rp), fill, hs in zip(headers, heads, widths, pads, just, styles, strict=True):
            j = k - (height - len(head))
            if j < 0:
                add(Segment(" " * (lp + w + rp), hs))
                continue
            if lp:
                add(Segment(" ", hs))
            add(Segment(fill(head[j], w), hs + get(h.style) if h.style else hs))
            if rp:
                add(Segment(" ", hs))
        add(line)
    # the rows: one line each; a styled first cell in its style (its padding unstyled, as rich's)
    gap = " " * GAP
    for cells, first in table.body:
        text = gap.join([fill(v, w) for fill, v, w in zip(just, cells, widths, strict=True)])
        if first:
            head_len = widths[0]
            add(Segment(text[:head_len], get(first)))
            add(Segment(text[head_len:]))
        else:
            add(Segment(text))
        add(line)
    return out


def fit_table(title: str, cols: Sequence[Col], rows: Sequence[Sequence[Any]], width: int, *, more: int = 0) -> FittedTable:
    """A table no wider than ``width`` in which no number or enum is ever cut: numeric and enum columns at their
    natural width, name columns shortened in the middle. When the numbers do not fit, headers wrap at spaces first; then
    ``optional`` columns are left out, then the last columns (the least important: tables put key columns
    first), and the caption names what was left out. The first column always stays."""
    every = list(cols)
    originals = [[visible(v) for v in r] for r in rows]  # kernel names before compacting (kept distinct by these)
    cells = [[compact(v) if every[i].kernel else v for i, v in enumerate(r)] for r in originals]

    def natural(wrap: bool) -> list[int]:
        return [max([_header_width(c.header, wrap)] + [len(r[i]) for r in cells]) for i, c in enumerate(every)]

    def need(keep: list[int]) -> int:
        return sum(nat[i] if every[i].whole else min(nat[i], every[i].min_width) for i in keep) + GAP * (len(keep) - 1)

    keep = list(range(len(every)))
    nat = natural(False)
    if need(keep) > width:
        nat = natural(True)
    dropped: list[str] = []
    while need(keep) > width and len(keep) > 1:
        opt = [i for i in keep if every[i].optional]
        gone = opt[-1] if opt else keep[-1]
        dropped.append(every[gone].header)
        keep.remove(gone)
    cols = [every[i] for i in keep]
    widths = _allocate(cols, [nat[i] for i in keep], width)
    for j, i in enumerate(keep):
        if every[i].kernel and cells:
            shown = distinct_names([r[i] for r in originals], widths[j], compacted=[r[i] for r in cells])
            for r, short in zip(cells, shown, strict=True):
                r[i] = short
    cells = [[r[i] for i in keep] for r in cells]
    t = FittedTable(title=shorten_middle(title, width), title_justify="left", title_style="bold", header_style="bold",
              box=None, pad_edge=False, padding=(0, 1), show_edge=False, expand=False, collapse_padding=False)
    for i, c in enumerate(cols):
        t.add_column(Text(_header(c.header, widths[i])), justify="right" if c.numeric else "left", width=widths[i],
                     no_wrap=True, overflow="crop", min_width=widths[i], max_width=widths[i])
    shown_as = [(lambda v, w: v) if c.whole else shorten_left if c.tail else shorten_middle for c in cols]
    for r in cells:
        t.add_text_row([f(v, w) for f, v, w in zip(shown_as, r, widths, strict=True)])
    notes = []
    if more > 0:  # a row under the first column where the words fit in it, else under the table (a steps table's
        # first column is a step's name: "… 3,…re" for 3,294 more steps)
        if len(f"… {more:,} more") <= widths[0]:
            t.add_text_row([f"… {more:,} more"] + [""] * (len(cols) - 1), "dim")
        else:
            notes.append(f"… {more:,} more")
    if dropped:
        notes.append(f"not shown at this width: {', '.join(reversed(dropped))} (wider terminal or --format json)")
    if notes:
        t.caption = "\n".join(notes)
        t.caption_justify = "left"
        t.caption_style = "dim"
    return t


def header_lines(console: Console, lines: Sequence[str | Text]) -> None:
    for line in lines:
        console.print(line if isinstance(line, Text) else term(line), overflow="fold")


def meaning(key: str) -> str:
    return define(key)
