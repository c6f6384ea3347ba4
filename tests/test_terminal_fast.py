"""The terminal tables' own body drawing (:func:`kernscope.render.terminal._plain_body`) gives the bytes rich's table
gives, with and without color, on generated tables of every shape fit_table makes, and on real analyses."""

from __future__ import annotations

import io
import random

import pytest
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kernscope.render import terminal
from kernscope.render.terminal import Col, FittedTable, fit_table

WORDS = ["aten::mm", "volta_sgemm_64x64_nt", "void at::native::vectorized_elementwise_kernel<4, float>(int)",
         "ProfilerStep#12", "µs", "… tail", "[bold]markup[/bold]", ":smile:", "a b c", "", "x",
         "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_nn"]
#: cells rich draws itself (two cells a character, a tab, a second line): now and then
RARE = ["名前の長いカーネル", "tab\there", "nl\nhere"]
HEADERS = ["name", "count", "total time", "% of step", "mean (µs)", "[x]", "kernel name of the launch", "a:b:", "s"]


def _console(width: int, color: bool) -> Console:
    return Console(file=io.StringIO(), width=width, force_terminal=color, no_color=not color, highlight=False,
                   emoji=False)


def _text(console: Console) -> str:
    f = console.file
    assert isinstance(f, io.StringIO)
    return f.getvalue()


def _both(table: Table, width: int, color: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    fast = _console(width, color)
    fast.print(table)
    with monkeypatch.context() as m:
        m.setattr(terminal, "_plain_body", lambda *a: None)
        slow = _console(width, color)
        slow.print(table)
    return _text(fast), _text(slow)


def _table(rng: random.Random, width: int) -> FittedTable:
    n = rng.randint(1, 7)
    cols = [Col(rng.choice(HEADERS), numeric=(k := rng.random()) < 0.4, enum=0.4 <= k < 0.55,
                kernel=0.55 <= k < 0.7, tail=0.7 <= k < 0.8, optional=rng.random() < 0.2,
                weight=rng.randint(1, 3), min_width=rng.randint(3, 10)) for _ in range(n)]
    rows = [[rng.randint(-10**9, 10**9) if c.numeric and rng.random() < 0.5
             else f"{rng.uniform(0, 1e6):,.3f} ms" if c.numeric
             else rng.choice(RARE if rng.random() < 0.01 else WORDS) * rng.randint(1, 3) for c in cols] for _ in range(rng.randint(0, 12))]
    return fit_table(rng.choice(["Kernels by name", "Steps (ProfilerStep)", "a [b] title " * 5]), cols, rows, width,
                     more=rng.choice([0, 0, 3, 12_345]))


def test_the_own_body_gives_riches_bytes_on_generated_tables(monkeypatch):
    rng = random.Random(96)
    drawn = 0
    for _ in range(400):
        width = rng.choice([20, 40, 60, 80, 100, 150, 220])
        table = _table(rng, width)
        drawn += terminal._plain_body(table, _console(width, False), _console(width, False).options) is not None
        for color in (False, True):
            fast, slow = _both(table, width, color, monkeypatch)
            assert fast == slow, (width, color, table.title)
    # (most tables take the own drawing: the comparison tests it, not the fallback)
    assert drawn > 300


def test_the_own_body_gives_way_to_rich_where_a_cell_does_not_fit(monkeypatch):
    wide = fit_table("t", [Col("name"), Col("n", numeric=True)], [["名前の長いカーネル", 1]], 40)
    plain = fit_table("t", [Col("name"), Col("n", numeric=True)], [["kernel", 1]], 40)
    con = _console(40, False)
    assert terminal._plain_body(wide, con, con.options) is None  # (two cells a character: rich measures it)
    assert terminal._plain_body(plain, con, con.options) is not None
    # a console narrower than the table: rich's own collapse of the widths
    narrow = _console(12, True)
    assert terminal._plain_body(plain, narrow, narrow.options.update_width(5)) is None
    fast, slow = _both(fit_table("t", [Col("name"), Col("count", numeric=True)], [["kernel_x", 123456]], 40), 10, True,
                       monkeypatch)
    assert fast == slow
    # a header is literal text (its brackets are no markup)
    out = _console(40, False)
    out.print(fit_table("t", [Col("[bold]x[/bold]", numeric=True)], [[1]], 40))
    assert "[bold]x[/bold]" in _text(out)


def test_a_table_of_several_line_headers_and_a_dim_row_in_color(monkeypatch):
    table = fit_table("Critical path by step", [Col("step", True), Col("length of the path", True),
                                                Col("kernel", kernel=True), Col("sync return", True, optional=True)],
                      [[str(i), f"{i * 1.5:,.3f} ms", WORDS[2], "0.00 µs"] for i in range(5)], 46, more=70)
    fast, slow = _both(table, 46, True, monkeypatch)
    assert fast == slow
    assert "\x1b[2m… 70 more" in fast and fast.count("\n") >= 8


@pytest.mark.parametrize("color", [False, True])
def test_the_bundled_examples_analysis_prints_the_same_bytes(color, monkeypatch):
    from kernscope.analyze.summary import analyze
    from kernscope.pipeline import load
    from kernscope.render.formats import text
    from kernscope.render.views import Options

    trace = load(str(pytest.importorskip("kernscope.examples").__path__[0]) + "/h200_gpt_train_step.pt.trace.json.gz",
                 cache=False)
    a = analyze(trace)
    for width in (60, 120, 200):
        fast = text(a, "table", Options(top=15, width=width, color=color))
        with monkeypatch.context() as m:
            m.setattr(terminal, "_plain_body", lambda *x: None)
            slow = text(a, "table", Options(top=15, width=width, color=color))
        assert fast == slow
        assert "Kernels by name" in fast and Text.from_ansi(fast).plain.count("\n") > 40


def test_a_sql_answer_of_every_kernel_prints_as_rich_prints_it(capsys, monkeypatch):
    """Every kernel of the example (its names long C++ signatures) as ``kernscope sql`` prints them: the own drawing
    and rich's, the same text; each row a kernel, in the raw trace's count."""
    import gzip
    import json

    from kernscope.cli import main
    from kernscope.examples import __path__ as examples

    example = f"{examples[0]}/h200_gpt_train_step.pt.trace.json.gz"
    raw = json.loads(gzip.open(example).read())["traceEvents"]
    kernels = sum(1 for e in raw if e.get("ph") == "X" and e.get("cat") == "kernel")
    q = "SELECT name, ts, dur, stream FROM kernels"
    monkeypatch.setenv("COLUMNS", "130")
    assert main(["sql", q, example, "--top", "100000", "--no-cache"]) == 0
    fast = capsys.readouterr().out
    monkeypatch.setattr(terminal, "_plain_body", lambda *a: None)
    assert main(["sql", q, example, "--top", "100000", "--no-cache"]) == 0
    slow = capsys.readouterr().out
    assert fast == slow
    lines = fast.splitlines()
    assert lines[0] == f"{q} ({kernels:,} rows)" and len(lines) == kernels + 2
    assert all(len(x) <= 130 for x in lines)


def test_a_fitted_table_inside_another_layout_measures_its_rows():
    """Laid out inside another renderable (a panel, columns), the table measures as wide as its rows make it (its
    columns' widths are fixed: its text rows, not yet rich's cells, change nothing) and draws them inside it."""
    from rich.measure import Measurement
    from rich.panel import Panel

    table = fit_table("t", [Col("name"), Col("count", numeric=True)], [["a_long_kernel_name", 1_234_567]], 60)
    con = _console(60, False)
    assert Measurement.get(con, con.options, table) == Measurement.get(con, con.options, table.rich_body())
    assert Measurement.get(con, con.options, table).maximum == len("a_long_kernel_name") + 2 + len("1234567")
    con.print(Panel(table, expand=False))
    assert "a_long_kernel_name  1234567" in _text(con)


@pytest.mark.parametrize("evil", ["[/]", "[link=https://x.example]click[/link]", "\\u001b[2J", "\\ud83d\\ude00", "x" * 5000,
                                  "名前", "tab\\there", "nl\\nhere", "\\u200bzero width", "e\\u0301 combining",
                                  "</script><img src=x onerror=alert(1)>"])
def test_names_a_trace_should_not_hold_print_as_rich_prints_them(evil, tmp_path, monkeypatch):
    """Kernel and op names with markup, escape sequences, an emoji, two-cell and combining characters, tabs,
    newlines and 5,000 characters (the fuzzer's and more), put into the example's trace: its analysis prints the
    same bytes by the own drawing and by rich's, with and without color."""
    import gzip
    import re

    from kernscope.analyze.summary import analyze
    from kernscope.examples import __path__ as examples
    from kernscope.pipeline import load
    from kernscope.render.formats import text
    from kernscope.render.views import Options

    raw = gzip.open(f"{examples[0]}/h200_gpt_train_step.pt.trace.json.gz").read()
    # every tenth event's name begins with the text (kernels, ops and runtime calls among them)
    k = iter(range(10**9))
    mutated = re.sub(rb'"name": ?"', lambda m: m.group(0) + (evil.encode() if next(k) % 10 == 0 else b""), raw)
    path = tmp_path / "evil.json"
    path.write_bytes(mutated)
    a = analyze(load(str(path), cache=False))
    for width in (80, 160):
        for color in (False, True):
            fast = text(a, "table", Options(top=15, width=width, color=color))
            with monkeypatch.context() as m:
                m.setattr(terminal, "_plain_body", lambda *x: None)
                slow = text(a, "table", Options(top=15, width=width, color=color))
            assert fast == slow, (evil[:20], width, color)
