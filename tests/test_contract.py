"""#26: one result contract (``kind``, ``title``, ``notes``, ``facts_dict()``, ``tables()``) and one renderer per
format that takes any result: a result type nobody registered views for renders in every format, and every
result kind the CLI shows satisfies the contract."""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import polars as pl
import pytest

import kernscope
from kernscope.result import Result

EXAMPLE = Path(__file__).resolve().parents[1] / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
MEMORY = Path(__file__).parent / "data" / "memory_h100" / "h100_gpt_memory.pt.trace.json.gz"


@dataclass(frozen=True)
class Occupancy:
    """A result type the renderers have never seen: two facts and two tables, no views, no layout."""

    kind: ClassVar[str] = "occupancy_test"
    device: str
    kernels: pl.DataFrame

    @property
    def title(self) -> str:
        return f"occupancy on {self.device}"

    @property
    def notes(self) -> tuple[str, ...]:
        return ("registers limit two kernels",)

    def facts_dict(self) -> dict[str, Any]:
        return {"device": self.device, "kernel_count": self.kernels.height}

    def tables(self) -> dict[str, pl.DataFrame]:
        by_regs = self.kernels.group_by("registers").agg(pl.len().alias("count")).sort("registers")
        return {"kernels": self.kernels, "by_registers": by_regs}


def occupancy() -> Occupancy:
    return Occupancy("H100", pl.DataFrame({"name": ["gemm_kernel", "softmax_kernel", "=cmd|x"],
                                           "registers": [255, 32, 32], "occupancy_pct": [12.5, 100.0, 50.0],
                                           "total_us": [1234.5678, 2.0, 3.25]}))


def test_a_new_result_type_renders_in_every_format_without_a_renderer_edit(tmp_path):
    from kernscope.render.formats import FORMATS, Options, render, write

    r = occupancy()
    assert isinstance(r, Result)
    assert set(FORMATS) == {"table", "json", "csv", "xlsx", "html"}  # one module each
    body = render(r, "json")
    assert isinstance(body, bytes)  # one file (a multi-file format gives a dict of them)
    doc = json.loads(body)
    assert doc["device"] == "H100" and doc["kernel_count"] == 3 and doc["schema_version"]
    assert [k["name"] for k in doc["kernels"]] == ["gemm_kernel", "softmax_kernel", "=cmd|x"]
    assert doc["kernels"][0]["total_us"] == 1234.568  # µs rounded to the ns, as every JSON output
    assert doc["by_registers"] == [{"registers": 32, "count": 2}, {"registers": 255, "count": 1}]
    body = render(r, "json", Options(top=1))
    assert isinstance(body, bytes)
    top = json.loads(body)
    assert len(top["kernels"]) == 1 and len(top["by_registers"]) == 1

    text = render(r, "table", Options(width=100)).decode()
    assert "device: H100" in text and "kernels (3 rows)" in text and "by registers (2" in text
    assert "softmax_kernel" in text and "1,234.568" in text

    csv = render(r, "csv").decode()
    assert csv.splitlines()[0] == "name,registers,occupancy_pct,total_us"  # the first table
    assert "'=cmd|x" in csv  # formula injection defused, as in every CSV
    files = render(r, "csv", Options(all_tables=True))
    assert isinstance(files, dict) and set(files) == {"facts.csv", "kernels.csv", "by_registers.csv"}
    write(files, str(tmp_path / "dir"))
    assert (tmp_path / "dir" / "by_registers.csv").read_text().splitlines() == ["registers,count", "32,2", "255,1"]

    book = render(r, "xlsx")
    assert isinstance(book, bytes)
    with zipfile.ZipFile(io.BytesIO(book)) as z:
        wb = z.read("xl/workbook.xml").decode()
        strings = z.read("xl/sharedStrings.xml").decode()
    assert all(f'name="{n}"' in wb for n in ("facts", "kernels", "by_registers", "definitions"))
    assert "softmax_kernel" in strings and "H100" in strings

    page = render(r, "html").decode()
    data = json.loads(page.split('id="ks-data">')[1].split("</script>")[0])
    assert data["title"] == "occupancy on H100"
    assert data["facts"] == {"device": "H100", "kernel_count": 3, "notes": ["registers limit two kernels"]}
    assert [v["name"] for v in data["views"]] == ["kernels", "by_registers"]
    assert data["views"][0]["table"]["rows"][1][:2] == ["softmax_kernel", 32]


def test_every_result_the_cli_shows_satisfies_the_contract():
    """Analysis, diff, perf, memory, job, bench directory, query, report, bench run and run comparison: the five members, tables named and
    typed, and facts that JSON can hold."""
    from kernscope.analyze.bench_dir import BenchDir
    from kernscope.analyze.diff import Side, diff
    from kernscope.analyze.memory import memory_timeline
    from kernscope.analyze.perf import PerfReport, perf_model
    from kernscope.analyze.ranks import combine, summarize_rank
    from kernscope.analyze.report import Report
    from kernscope.analyze.sql import QueryResult, sql
    from kernscope.analyze.summary import analyze
    from kernscope.bench.compare import Comparison
    from kernscope.bench.results import BenchRun, Cell

    t = kernscope.load(EXAMPLE, cache=False)
    a = analyze(t)
    mem = memory_timeline(kernscope.load(MEMORY, cache=False))
    assert mem is not None
    results: list[Any] = [
        a, diff(Side(t, 2), Side(t, 3)), PerfReport(perf_model(t), str(EXAMPLE)), mem,
        combine([summarize_rank(t, "rank0.json"), summarize_rank(t, "rank1.json")]),
        BenchDir("root", "kernscope", pl.DataFrame({"op": ["gemm"]})),
        QueryResult("select 1", sql(t, "select count(*) as n from kernels")), Report(a, memory=mem),
        BenchRun("add", ("n",), ["torch_add"], ["latency"], "fwd", "fp32", "cpu",
                 cells=[Cell(0, (1024,), "torch_add", {"latency": 0.01})]),
        Comparison("a.json", "b.json", "add", pl.DataFrame({"impl": ["torch_add"], "ratio": [1.0]}))]
    kinds = set()
    for r in results:
        assert isinstance(r, Result), type(r)
        kinds.add(r.kind)
        assert isinstance(r.title, str) and r.title and all(isinstance(n, str) for n in r.notes)
        json.dumps(r.facts_dict(), default=str)
        tables = r.tables()
        assert tables and all(isinstance(k, str) and isinstance(v, pl.DataFrame) for k, v in tables.items())
    assert kinds == {"analysis", "diff", "perf", "memory", "job", "bench_dir", "query", "report", "bench_run",
                     "bench_compare"}
    from kernscope.render.formats import text

    run = results[-2]  # the bench run's JSON is its to_dict(), as `kernscope bench --json` always wrote it
    assert json.loads(text(run, "json")) == json.loads(json.dumps(run.to_dict(), default=str))
    # the analysis's tables are what `kernscope sql` calls analysis.<name>
    assert a.tables()["kernels"].height == sql(t, "select * from analysis.kernels").height


def test_views_are_registered_by_qualified_table_name_and_layouts_name_real_parts():
    """Every registered view is ``format``/``kind.part``; every name a layout lists is a fact or table of that kind's
    result, or a part only a view makes (a view is registered for it)."""
    from kernscope.render import views
    from kernscope.render.formats import FORMATS

    for kind in views.VIEW_MODULES:
        for fmt in FORMATS:
            views.load_views(fmt, kind)
    reg = views._REGISTRY
    assert reg.views and all(fmt in FORMATS and "." in name for fmt, name in reg.views)
    t = kernscope.load(EXAMPLE, cache=False)
    from kernscope.analyze.summary import analyze

    a = analyze(t)
    for fmt in FORMATS:
        names = views.Walk(fmt, a, views.Options()).names()
        known = {*a.facts_dict(), *a.tables(), "schema_version"}
        for n in names:
            assert n in known or (fmt, f"analysis.{n}") in reg.views, (fmt, n)


def test_a_json_answer_imports_no_terminal_or_html_code():
    """A rendering imports only the views of its format and kind: `analyze --format json` stays as fast to start."""
    import subprocess
    import sys

    code = ("import sys, kernscope; from kernscope.analyze.summary import analyze; "
            "from kernscope.render.formats import text; "
            f"text(analyze(kernscope.load({str(EXAMPLE)!r}, cache=False)), 'json'); "
            "print(sorted(m for m in sys.modules if m.startswith('kernscope.render')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = set(eval(out))
    assert "kernscope.render.tables" in loaded and "kernscope.render.formats.json" in loaded
    assert not loaded & {"kernscope.render.console", "kernscope.render.terminal", "kernscope.render.report",
                         "kernscope.render.html.analysis", "kernscope.render.excel"}


@pytest.mark.parametrize("fmt", ["json", "table", "csv"])
def test_diff_verdict_is_prose_of_the_renderer(fmt):
    """The diff result holds numbers (totals, categories, the ranks of one job); its one-line verdict is written by
    the renderer, the same in every format."""
    from kernscope.analyze.diff import Side, diff
    from kernscope.render.diff import verdict_text
    from kernscope.render.formats import Options, render

    t = kernscope.load(EXAMPLE, cache=False)
    d = diff(Side(t, 2), Side(t, 3))
    assert not hasattr(d, "verdict")
    line = verdict_text(d)
    out = render(d, fmt, Options(width=400)).decode()
    if fmt == "json":
        assert json.loads(out)["verdict"] == line
    elif fmt == "table":
        assert line in out.replace("\n", " ") or line[:60] in out
    else:
        assert out.splitlines()[0].startswith("name,launcher,a_count")


def test_json_written_part_by_part_is_json_dumps_of_the_whole_document() -> None:
    """The JSON renderer writes one part at a time (memory); its text is the one json.dumps(indent=2) makes."""
    from kernscope.render.formats.json import _dumps

    docs: list[dict[str, Any]] = [{"a": 1, "b": [1, {"x": "y\nz", "w": None}], "c": {}, "d": [], "e": "é\t", "f": 1.5e-7},
            {"k": {"n": [[], [1, [2, {"m": "\n"}]]]}}, {"only": "one"}]
    for doc in docs:
        parts = ",\n".join(f"  {json.dumps(k, ensure_ascii=False)}: {_dumps(v)}" for k, v in doc.items())
        assert "{\n" + parts + "\n}" == json.dumps(doc, indent=2, ensure_ascii=False, default=str)


def test_parts_made_one_at_a_time_write_the_same_text() -> None:
    """A view's Parts (values made as they are written) give the text of the same object made at once."""
    from kernscope.render.formats.json import _dumps
    from kernscope.render.views import Parts

    made: list[str] = []

    def part(name: str, value: Any) -> Any:
        def make() -> Any:
            made.append(name)
            return value
        return make

    plain: dict[str, Any] = {"steps": [{"a": 1, "b": "x\ny"}], "empty": [], "nested": {"k": [1, 2]}, "notes": []}
    lazy = Parts({k: part(k, v) for k, v in plain.items()})
    assert _dumps(lazy) == _dumps(plain) and made == list(plain)
    assert _dumps(Parts()) == _dumps({}) == "{}"
    doc: dict[str, Any] = {"x": 1, "cp": plain}
    parts = ",\n".join(f"  {json.dumps(k)}: {_dumps(Parts({kk: part(kk, vv) for kk, vv in v.items()}) if k == 'cp' else v)}"
                       for k, v in doc.items())
    assert "{\n" + parts + "\n}" == json.dumps(doc, indent=2, ensure_ascii=False)


def test_json_rows_give_a_non_finite_float_as_null():
    """JSON has no NaN or infinity: a table's rows give them as null (rounded as ever), other values as they are."""
    from kernscope.render.tables import records

    df = pl.DataFrame({"a_us": [1.23456789, float("inf"), float("-inf"), float("nan"), None], "n": [1, 2, 3, 4, 5],
                       "s": ["x", "y", None, "z", "w"],
                       "f32": pl.Series([0.5, float("nan"), 1.0, float("-inf"), None], dtype=pl.Float32)})
    rows = records(df)
    assert [r["a_us"] for r in rows] == [1.235, None, None, None, None]
    assert [r["f32"] for r in rows] == [0.5, None, 1.0, None, None]
    assert [r["n"] for r in rows] == [1, 2, 3, 4, 5] and [r["s"] for r in rows] == ["x", "y", None, "z", "w"]
    assert records(df, 2) == rows[:2]
    json.dumps(rows, allow_nan=False)  # strict JSON


def _as_written(value: object) -> str:
    """A part's text in the JSON format (its indenting: ``json.dumps(value, indent=2)`` for Python values)."""
    from kernscope.render.formats.json import _indented

    return _indented(value)


def test_table_rows_written_by_polars_are_the_text_of_their_records():
    """The JSON format's table rows written by polars (``json_rows``) are, once indented, the text of the rows as
    Python values: integers, Float64 (shortest text, exponents, -0.0, 0.1 + 0.2, non-finite as null), text with
    escapes, non-ASCII, an emoji, a line separator, categoricals, enums, booleans, nulls, lists; ``top`` rows; and
    tables of other types (Float32, dates, structs) are records, written by the standard library."""
    import datetime

    from kernscope.render.tables import JsonRows, json_rows, records

    df = pl.DataFrame({
        "n": [1, -2**62, None, 7, 0], "u": pl.Series([2**63 + 5, 0, 1, None, 3], dtype=pl.UInt64),
        "f": [1e16, 1.2345678901234567e17, -0.0, 0.1 + 0.2, float("nan")],
        "x_us": [1.23456789, 1e-5, float("inf"), 123456.7895, None], "b": [True, False, None, True, False],
        "s": ['q"u\\o', "tab\t nl\n \x01", "µs é", "\U0001F600 \u2028", None],
        "c": pl.Series(["a", "b", None, "a", "c"], dtype=pl.Categorical),
        "e": pl.Series(["k", "m", "k", None, "m"], dtype=pl.Enum(["k", "m"])),
        "l": [[1, 2], [], None, [3], [None, 4]], "z": [None] * 5})
    got = json_rows(df)
    assert isinstance(got, JsonRows)
    assert _as_written(got) == json.dumps(records(df), indent=2, ensure_ascii=False)
    top = json_rows(df, 2)
    assert isinstance(top, JsonRows) and _as_written(top) == json.dumps(records(df, 2), indent=2, ensure_ascii=False)
    empty = json_rows(df.head(0))
    assert isinstance(empty, JsonRows) and _as_written(empty) == "[]"
    for other in (pl.Series("h", [0.1, 0.5], dtype=pl.Float32), pl.Series("d", [datetime.date(2026, 1, 2)] * 2),
                  pl.Series("t", [{"a": 1}, {"a": 2}])):
        assert json_rows(pl.DataFrame({"n": [1, 2]}).with_columns(other)) == records(pl.DataFrame({"n": [1, 2]}).with_columns(other))


def test_findings_written_with_their_stored_evidence_are_the_text_of_their_records():
    """The JSON format's findings (``findings_json``): the other columns written by polars and each evidence's stored
    text after them give the text of the records with the evidence parsed; evidence whose stored text is not what
    json.dumps would write (a non-ASCII character escaped, NaN, Infinity) takes the records' path."""
    from kernscope.analyze.findings import SCHEMA
    from kernscope.render.tables import JsonRows, findings_json, findings_records

    def table(evidence: list[dict[str, object]]) -> pl.DataFrame:
        enc = json.JSONEncoder(default=str)  # (as the findings store it)
        n = len(evidence)
        return pl.DataFrame({"rule": ["launch_bound"] * n, "title": ["t"] * n, "step": list(range(n)), "device": [0] * n,
                             "rank": [None] * n, "op": ["aten::mm"] * n, "kernel": [None] * n,
                             "win_back_us": [12.3456789 * (i + 1) for i in range(n)], "text": ['a "b"\n'] * n,
                             "evidence": [enc.encode(e) for e in evidence]}, schema=SCHEMA)

    plain = table([{"step": 1, "wait_us": 1e16, "share_pct": 0.1 + 0.2, "kernels": 3, "none": None},
                   {"step": 2, "nested": {"a": [1, 2.5]}, "flag": True, "op": 'x"y'}])
    got = findings_json(plain)
    assert isinstance(got, JsonRows)
    assert _as_written(got) == json.dumps(findings_records(plain), indent=2, ensure_ascii=False)
    odds: list[dict[str, object]] = [{"op": "µ-kernel"}, {"x": float("nan")}, {"x": float("inf")}]
    for odd in odds:
        t = table([{"step": 1}, odd])
        assert findings_json(t) == findings_records(t)  # (the records: their text is json.dumps's)
    assert findings_json(table([])) == []
