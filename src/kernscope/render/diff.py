"""Views of a trace diff (:class:`~kernscope.analyze.diff.TraceDiff`): the verdict line, terminal tables, JSON,
CSV and the ``diff_*`` sheets. Formatting only."""

from __future__ import annotations

from typing import Any

import polars as pl
from rich.console import Console
from rich.text import Text

from ..analyze.diff import TraceDiff
from .excel import Sheet
from .formats.json import whole
from .names import NO_SOURCE, term
from .tables import json_rows
from .terminal import Col, count, fit_table, us
from .views import OMIT, Section, layout, view

#: differences below this share of A's total read as "the same" in the verdict
SAME_PCT = 0.5

layout("table", "diff", ("a", "verdict", "notes", "total", "categories", "libraries", "sources", "kernels", "ops"))
layout("json", "diff", ("schema_version", "a", "b", "match", "verdict", "notes", "total", "categories", "libraries", "kernels",
                        "ops", "sources"))
layout("csv", "diff", ("kernels",))
layout("xlsx", "diff", ("summary", "categories", "libraries", "sources", "kernels", "ops"))

#: the trace facts each side shows in JSON
SIDE_KEYS = ("path", "events", "gpu_events", "kernels", "kernel_time_us", "devices", "device_names", "rank", "world_size",
             "platform", "steps", "step_source", "graph_launches", "step")


def _ms(us: float) -> str:
    a = abs(us)
    if a >= 1e6:
        return f"{us / 1e6:.2f} s"
    if a >= 1e3:
        return f"{us / 1e3:.1f} ms"
    return f"{us:.1f} µs"


#: communication at or above this share of a side's GPU time, or of the change, gets its own part of the verdict
COMM_SHARE = 0.25


def _head(total: dict[str, float]) -> str:
    d, pct = total["delta_us"], total["delta_pct"]
    if abs(pct) < SAME_PCT:
        return f"B and A take the same GPU time ({_ms(total['b_us'])}, {pct:+.1f}%)"
    return f"B is {_ms(abs(d))} ({abs(pct):.1f}%) {'slower' if d > 0 else 'faster'} than A in GPU time"


def _ranks_head(ranks: tuple[int, int]) -> str:
    return f"A and B are ranks {ranks[0]} and {ranks[1]} of one job, which run their steps together"


def verdict(total: dict[str, float], categories: pl.DataFrame, top: int = 3, ranks: tuple[int, int] | None = None) -> str:
    """One line: which side is slower, by how much, and the categories that moved most.

    Communication kernels run as long as their slowest peer makes them wait, so where they weigh (at least
    :data:`COMM_SHARE` of either side's GPU time or of the change) the line separates compute (every other
    kernel) from communication. ``ranks``: A and B are these ranks of one job; their GPU time is then no
    verdict at all (they run the same steps together), only compute and waiting are compared."""
    if total["a_us"] == 0 and total["b_us"] == 0:
        return "neither side has GPU activity"
    rows = list(categories.iter_rows(named=True))
    comm = next((r for r in rows if r["category"] == "Communication"), None)
    ca, cb = (comm["a_us"], comm["b_us"]) if comm else (0.0, 0.0)
    weighs = comm is not None and (ca >= COMM_SHARE * total["a_us"] or cb >= COMM_SHARE * total["b_us"]
                                   or abs(cb - ca) >= COMM_SHARE * abs(total["delta_us"]) > 0)
    if not weighs:
        moved = [r for r in rows if abs(r["delta_us"]) > 0][:top]
        parts = [f"{r['category']} {'+' if r['delta_us'] > 0 else '-'}{_ms(abs(r['delta_us']))}" for r in moved]
        return _head(total) + (f"; {', '.join(parts)}" if parts else "")
    xa, xb = total["a_us"] - ca, total["b_us"] - cb
    xpct = 100.0 * (xb - xa) / xa if xa else 0.0
    compute = (f"compute (kernels other than communication) the same ({_ms(xb)}, {xpct:+.1f}%)" if abs(xpct) < SAME_PCT
               else f"compute {'+' if xb > xa else '-'}{_ms(abs(xb - xa))} ({xpct:+.1f}%)")
    cpct = 100.0 * (cb - ca) / ca if ca else (0.0 if cb == ca else 100.0)
    if abs(cpct) < SAME_PCT:  # no side waits longer: no later side to name (and no "-0.0 µs")
        waiting = f"communication the same ({_ms(cb)}, {cpct:+.1f}%)"
        return f"{_head(total) if ranks is None else _ranks_head(ranks)}: {compute}; {waiting}"
    waiting = (f"communication {'+' if cb > ca else '-'}{_ms(abs(cb - ca))} (communication kernels include "
               f"waiting for the other ranks")
    if ranks is None:
        return f"{_head(total)}: {compute}; {waiting}, so a side that waits less is not faster)"
    later_rank, later = (ranks[0], "A") if cb > ca else (ranks[1], "B")  # who waits less arrived later
    return (f"{_ranks_head(ranks)}: {compute}; {waiting}: B waits {'more' if cb > ca else 'less'}, so of the two "
            f"rank {later_rank} ({later}) arrives later at the collectives); `kernscope analyze` on the job's folder names "
            "the stragglers per step")


def verdict_text(d: TraceDiff, top: int = 3) -> str:
    """The diff's one-line verdict (:func:`verdict` of its totals and categories)."""
    return verdict(d.total, d.categories, top=top, ranks=d.ranks)


def _side(side: dict[str, Any]) -> str:
    dev = ", ".join(side["device_names"]) or "-"
    return f"{side['path']}" + (f" (step {side['step']})" if side["step"] is not None else "") + f" · {dev}"


def _delta(v: float) -> str:
    return ("+" if v > 0 else "") + us(v) if v else "0"


@view("table", "diff.a")
def _console_sides(s: Section, out: Console) -> None:
    out.print(term("A: " + _side(s.facts["a"])), overflow="fold")
    out.print(term("B: " + _side(s.facts["b"])), overflow="fold")


@view("table", "diff.verdict")
def _console_verdict(s: Section, out: Console) -> None:
    out.print(Text(verdict_text(s.result), style="bold"), overflow="fold")


@view("table", "diff.notes")
def _console_notes(s: Section, out: Console) -> None:
    for n in s.result.notes:
        out.print(Text(n, style="yellow"), overflow="fold")


@view("table", "diff.total")
def _console_total(s: Section, out: Console) -> None:
    t = s.facts["total"]
    out.print(term(f"GPU time A {us(t['a_us'])} · B {us(t['b_us'])} · delta {_delta(t['delta_us'])} ({t['delta_pct']:+.1f}%) · "
                   f"GPU busy A {us(t['a_busy_us'])} · B {us(t['b_busy_us'])}"), overflow="fold")
    out.print()


def _console_by(s: Section, out: Console, key: str, title: str) -> None:
    rows = [[r[key], count(r["a_count"]), count(r["b_count"]), us(r["a_us"]), us(r["b_us"]), _delta(r["delta_us"])]
            for r in s.df.iter_rows(named=True)]
    out.print(fit_table(title, [Col(key, enum=True), Col("A count", True), Col("B count", True),
                                Col("A", True), Col("B", True), Col("B - A", True)], rows, s.options.width))
    out.print()


@view("table", "diff.categories")
def _console_categories(s: Section, out: Console) -> None:
    _console_by(s, out, "category", "By category")


@view("table", "diff.libraries")
def _console_libraries(s: Section, out: Console) -> None:
    _console_by(s, out, "library", "By library (who wrote the kernel)")


def _console_deltas(s: Section, out: Console, title: str, name_cols: list[str]) -> None:
    df, top = s.df, s.top
    part = df.head(top) if top is not None else df
    cols = [Col("kernel" if "launcher" in name_cols else "op", weight=4, min_width=12, kernel="launcher" in name_cols)]
    if "launcher" in name_cols:
        cols.append(Col("launcher", weight=2, min_width=8))
    cols += [Col("A count", True), Col("B count", True), Col("A", True), Col("B", True), Col("B - A", True),
             Col("only", True)]
    rows = [[*(r[c] for c in name_cols), count(r["a_count"]), count(r["b_count"]), us(r["a_us"]), us(r["b_us"]),
             _delta(r["delta_us"]), r["only"]] for r in part.iter_rows(named=True)]
    out.print(fit_table(title, cols, rows, s.options.width, more=df.height - part.height))
    out.print()


@view("table", "diff.kernels")
def _console_kernels(s: Section, out: Console) -> None:
    loose = s.facts["match"] == "loose"
    _console_deltas(s, out, f"Kernels by |B - A| ({'names matched loosely' if loose else 'exact names'}; "
                            "'only' = on one side only)", ["name", "launcher"])


@view("table", "diff.ops")
def _console_ops(s: Section, out: Console) -> None:
    _console_deltas(s, out, "CPU ops by |B - A| of host time", ["name"])


#: the titles of the table of GPU time by the user's code, lines matched exactly and loosely
SOURCES_TITLE = "GPU time by line of your code, by |B - A| (PyTorch: a function's first line; 'only' = on one side only)"
LOOSE_SOURCES_TITLE = "GPU time by function of your code, by |B - A| (its lines as one, matched by file and function)"


@view("table", "diff.sources")
def _console_sources(s: Section, out: Console) -> None:
    if not s.df.height:
        return
    loose = s.facts["match"] == "loose"
    part = s.shown
    cols = [Col("file" if loose else "source line", weight=3, min_width=16, tail=True),
            Col("function", weight=2, min_width=8, tail=True), Col("A count", True), Col("B count", True),
            Col("A", True), Col("B", True), Col("B - A", True), Col("only", True)]
    rows = [[r["source"] if r["source"] is not None else NO_SOURCE, r["function"] or "", count(r["a_count"]),
             count(r["b_count"]), us(r["a_us"]), us(r["b_us"]), _delta(r["delta_us"]), r["only"]]
            for r in part.iter_rows(named=True)]
    out.print(fit_table(LOOSE_SOURCES_TITLE if loose else SOURCES_TITLE, cols, rows, s.options.width,
                        more=s.df.height - part.height))
    out.print()


@view("json", "diff.sources")
def _json_sources(s: Section) -> Any:
    # (only where both sides have lines of the user's code: JAX profiles, PyTorch traces with --sources)
    return json_rows(s.df, s.top) if s.df.height else OMIT


@view("json", "diff.a")
def _json_a(s: Section) -> dict[str, Any]:
    return {k: s.facts["a"][k] for k in SIDE_KEYS}


@view("json", "diff.b")
def _json_b(s: Section) -> dict[str, Any]:
    return {k: s.facts["b"][k] for k in SIDE_KEYS}


@view("json", "diff.verdict")
def _json_verdict(s: Section) -> str:
    return verdict_text(s.result)



@view("json", "diff.total")
def _json_total(s: Section) -> dict[str, float]:
    return {k: round(v, 3) for k, v in s.facts["total"].items()}


view("json", "diff.categories")(whole)  # every category: a short table
view("json", "diff.libraries")(whole)  # every library: a short table


def summary_sheet(d: TraceDiff) -> pl.DataFrame:
    """The diff's sides, match, verdict, notes and totals as (key, value) text rows."""
    return pl.DataFrame(
        [("A", d.a.path), ("A step", "" if d.step_a is None else str(d.step_a)), ("A devices", ", ".join(d.a.device_names)),
         ("B", d.b.path), ("B step", "" if d.step_b is None else str(d.step_b)), ("B devices", ", ".join(d.b.device_names)),
         ("match", d.match), ("verdict", verdict_text(d)), *(("note", n) for n in d.notes),
         *((k, f"{v:.3f}") for k, v in d.total.items())],
        schema={"key": pl.String, "value": pl.String}, orient="row")


@view("xlsx", "diff.summary")
def _xlsx_summary(s: Section) -> Sheet:
    return Sheet(summary_sheet(s.result), name="diff_summary")


def _prefixed(s: Section) -> Sheet:
    return Sheet(s.df, name=f"diff_{s.name}")


for _t in ("categories", "libraries", "kernels", "ops"):
    view("xlsx", f"diff.{_t}")(_prefixed)


@view("xlsx", "diff.sources")
def _xlsx_sources(s: Section) -> Sheet | object:
    return _prefixed(s) if s.df.height else OMIT



__all__ = ["LOOSE_SOURCES_TITLE", "SAME_PCT", "SOURCES_TITLE", "summary_sheet", "verdict", "verdict_text"]
