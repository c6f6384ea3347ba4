"""Every table of every trace command at 80, 120 and 200 columns: no line wider than the terminal, and every
number a table shows is whole: it parses with its unit and equals a value of the command's JSON output to the
digits shown (a cut number, ``97.812 m`` or ``1,839`` for 1,839.9, matches none)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import TRACES

from kernscope.cli import main

EXAMPLE = Path(__file__).resolve().parents[1] / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
DDP = TRACES / "multirank"

#: a number as the tables write it, with an optional unit right after it
_NUM = re.compile(r"(?<!, )(?<![\w.#/<>x\-…\[,(:])([-+]?\d{1,3}(?:,\d{3})*(?:\.\d+)?|[-+]?\d+(?:\.\d+)?)"
                  r"(?: (µs|ms|s|ns)(?![\w])|(%))?(?![\w.,/x>:…\])])")
_TO_US = {"ns": 1e-3, "µs": 1.0, "ms": 1e3, "s": 1e6, None: 1.0, "%": 1.0}


def _numbers(doc) -> list[float]:
    out: list[float] = []
    stack = [doc]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            stack.extend(x.values())
            if isinstance(x.get("bytes"), (int, float)):  # the collectives table shows B, KiB, MiB or GiB
                out.extend(x["bytes"] / 2**k for k in (10, 20, 30))
        elif isinstance(x, list):
            stack.extend(x)
        elif isinstance(x, (int, float)) and not isinstance(x, bool):
            out.append(float(x))
    return out


def _shown(table_lines: list[str]) -> list[tuple[str, float, float]]:
    """(text, value in µs or as written, half a unit of the last digit shown, in the same unit)."""
    found = []
    for line in table_lines:
        for m in _NUM.finditer(line):
            text, unit = m.group(1), m.group(2) or m.group(3)
            digits = text.replace(",", "")
            decimals = len(digits.split(".")[1]) if "." in digits else 0
            scale = _TO_US[unit]
            found.append((m.group(0), float(digits) * scale, 0.5 * 10 ** -decimals * scale))
    return found


def _tables(out: str) -> list[str]:
    """Lines of table bodies: those with at least two runs of two spaces (title and notes lines are prose)."""
    return [x for x in out.splitlines() if len(re.findall(r"\S  +\S", x)) >= 2 and not x.startswith("not shown")]


def _check(capsys, monkeypatch, args: list[str], columns: int) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main([*args, "--no-cache", "-q"]) == 0
    out = capsys.readouterr().out
    too_wide = [x for x in out.splitlines() if len(x) > columns]
    assert not too_wide, too_wide[:3]
    assert main([*args, "--no-cache", "-q", "--format", "json"]) == 0
    values = sorted(set(_numbers(json.loads(capsys.readouterr().out))))
    # the JSON keeps µs; the tables show µs, ms or s, percentages as written, counts whole
    assert values
    import bisect

    bad = []
    lines = _tables(out)
    assert lines, out[:500]
    for text, v, tol in _shown(lines):
        i = bisect.bisect_left(values, v - tol - 1e-9)
        if not (i < len(values) and values[i] <= v + tol + 1e-9):
            bad.append(text)
    assert not bad, (columns, bad[:10])


WIDTHS = [80, 120, 200]


@pytest.mark.parametrize("columns", WIDTHS)
def test_analyze_tables_at_every_width(capsys, monkeypatch, columns):
    _check(capsys, monkeypatch, ["analyze", str(EXAMPLE), "--top", "12"], columns)


@pytest.mark.parametrize("columns", WIDTHS)
def test_perf_tables_at_every_width(capsys, monkeypatch, columns):
    _check(capsys, monkeypatch, ["perf", str(EXAMPLE), "--top", "12"], columns)


@pytest.mark.parametrize("columns", WIDTHS)
def test_diff_tables_at_every_width(capsys, monkeypatch, columns):
    _check(capsys, monkeypatch, ["diff", str(EXAMPLE), str(EXAMPLE), "--step", "2", "--step-b", "3", "--top", "12"], columns)


@pytest.mark.skipif(not (DDP / "ddp4_rank0.json.gz").exists(), reason="needs ../shared/traces/multirank")
@pytest.mark.parametrize("columns", WIDTHS)
def test_rank_tables_at_every_width(capsys, monkeypatch, columns):
    paths = [str(DDP / f"ddp4_rank{r}.json.gz") for r in range(4)]
    _check(capsys, monkeypatch, ["analyze", *paths, "--workers", "1"], columns)


def test_the_check_catches_a_cut_number():
    """The checker itself: a cropped unit, a cropped decimal part and a middle-cut number are all found."""
    values = [97812.0, 1839.9, 0.0]
    cut = ["r  97.812 m  x", "a  1,839  b", "c  0.00 µ  d"]
    shown = _shown(cut)
    ok = [t for t, v, tol in shown if any(abs(v - x) <= tol for x in values)]
    assert len(ok) < len(cut)


def test_kernel_names_compact_and_distinct():
    from kernscope.render.shortnames import compact, distinct_names

    fill = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
            "(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)")
    assert compact(fill) == "vectorized_elementwise_kernel<4,FillFunctor<float>,array<char*,1ul>>"
    copy = ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
            "{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>, 4>"
            "(int, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3})")
    assert compact(copy) == "unrolled_elementwise_kernel<direct_copy_kernel_cudaλ[float],array<char*,2ul>,4>"
    assert compact("nvjet_sm90_tst_128x128_64x6_2x1_v_bz_NNT") == "nvjet_sm90_tst_128x128_64x6_2x1_v_bz_NNT"
    # three cuBLAS kernels that a middle cut makes identical (the diff): where they differ is shown
    gemm = "sm80_xmma_gemm_f32f32_f32f32_f32_{}_n_tilesize{}_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas"
    names = [gemm.format("nn", "128x128x8"), gemm.format("tn", "64x64x8"), gemm.format("nt", "128x128x8")]
    for width in (14, 20, 30, 40):
        shown = distinct_names(names, width)
        assert len(set(shown)) == 3 and all(len(s) <= width for s in shown), shown
    # the same name twice (two launchers) is the same text; different names that differ only past the width
    # are numbered
    assert distinct_names([names[0], names[0]], 20)[0] == distinct_names([names[0], names[0]], 20)[1]
    twins = ["k" * 40 + "a", "k" * 40 + "b"]
    shown = distinct_names(twins, 10)
    assert len(set(shown)) == 2 and all(len(s) <= 10 for s in shown)


@pytest.mark.parametrize("columns", WIDTHS)
def test_kernel_rows_of_different_kernels_never_read_the_same(capsys, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["analyze", str(EXAMPLE), "--no-cache", "-q", "--top", "66"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("Kernels by name"))
    rows = [x for x in lines[start + 2:] if x.strip()][:66]
    rows = rows[: next((i for i, x in enumerate(rows) if x.startswith(("…", "not shown"))), len(rows))]
    assert main(["analyze", str(EXAMPLE), "--no-cache", "-q", "--format", "json"]) == 0
    kernels = json.loads(capsys.readouterr().out)["kernels"]
    assert len(rows) == len(kernels) == 66
    by_shown: dict[str, set[str]] = {}
    for row, k in zip(rows, kernels, strict=True):
        by_shown.setdefault(row.split("  ")[0], set()).add(k["name"])
    assert all(len(v) == 1 for v in by_shown.values()), [k for k, v in by_shown.items() if len(v) > 1]


def test_every_output_of_one_run_agrees(tmp_path, capsys, monkeypatch):
    """One trace, every output: the JSON's kernel rows are the analyze CSV's, the report's kernel_summary
    (CSV folder and xlsx, split by device and stream) sums to them, and the terminal table shows their counts
    and totals in the same order."""
    import csv
    import io
    import zipfile

    import polars as pl

    assert main(["analyze", str(EXAMPLE), "--no-cache", "-q", "--format", "json"]) == 0
    kernels = json.loads(capsys.readouterr().out)["kernels"]
    key = ("name", "launcher", "category", "decided_by")
    want = {tuple(k[c] for c in key): (k["count"], k["total_us"]) for k in kernels}
    assert main(["analyze", str(EXAMPLE), "--no-cache", "-q", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {tuple(r[c] for c in key): (int(r["count"]), float(r["total_us"])) for r in rows} == want
    assert main(["report", str(EXAMPLE), "--no-cache", "-q", "-o", str(tmp_path / "csv")]) == 0
    ks = pl.read_csv(tmp_path / "csv" / "kernel_summary.csv", infer_schema_length=None)
    summed = ks.group_by(list(key)).agg(pl.col("count").sum(), pl.col("total_us").sum())
    got = {tuple(r[c] for c in key): (r["count"], r["total_us"]) for r in summed.iter_rows(named=True)}
    assert got.keys() == want.keys()
    assert all(got[k][0] == want[k][0] and abs(got[k][1] - want[k][1]) < 1e-3 for k in want)
    x = tmp_path / "r.xlsx"
    assert main(["report", str(EXAMPLE), "--no-cache", "-q", "-o", str(x)]) == 0
    z = zipfile.ZipFile(x)
    book = z.read("xl/workbook.xml").decode()
    sheets = re.findall(r'<sheet name="([^"]+)"', book)
    sheet_xml = z.read(f"xl/worksheets/sheet{sheets.index('kernel_summary') + 1}.xml").decode()
    assert sheet_xml.count("<row ") == ks.height + 1  # the header and the CSV's rows
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["analyze", str(EXAMPLE), "--no-cache", "-q", "--top", str(len(kernels))]) == 0
    out = capsys.readouterr().out.splitlines()
    start = next(i for i, x in enumerate(out) if x.startswith("Kernels by name"))
    table = out[start + 2:start + 2 + len(kernels)]
    for line, k in zip(table, kernels, strict=True):
        assert f" {k['count']:,} " in line and (f"{k['total_us']:,.2f} µs" in line or f"{k['total_us'] / 1e3:,.3f} ms" in line)


@pytest.mark.parametrize("columns", [60, 150])
def test_rows_left_out_are_counted_in_words_that_fit(columns):
    """A table cut to its top rows says how many more there are in words a reader can read, under the first column
    where they fit, else under the table (a steps table's first column is as narrow as a step's name: 3,294 more
    steps were shown as "… 3,…re")."""
    from rich.console import Console

    from kernscope.render.terminal import Col, fit_table

    def shown(first: str, more: int) -> str:
        console = Console(width=columns, record=True, color_system=None)
        console.print(fit_table("Steps", [Col(first), Col("kernels", numeric=True)],
                                [["train#0", 288], ["train#1", 288]], columns, more=more))
        return console.export_text()

    narrow = shown("step", 3294)
    assert "… 3,294 more" in narrow and "…re" not in narrow
    wide = shown("a step's long name column", 12)
    assert [line.strip() for line in wide.splitlines() if "more" in line] == ["… 12 more"]
    assert "more" not in shown("step", 0)


@pytest.mark.parametrize("columns", [60, *WIDTHS])
def test_a_two_gpu_traces_tables_at_every_width(capsys, monkeypatch, columns):
    """One process on two GPUs (a row per GPU, then their sum): every number shown is in the JSON, no line too wide;
    the idle time stays at 60 columns (the exposed and total columns go first)."""
    mp = Path(__file__).parent / "data" / "multigpu_h200" / "torch_mp.pt.trace.json.gz"
    _check(capsys, monkeypatch, ["analyze", str(mp), "--top", "12"], columns)
    assert main(["analyze", str(mp), "--no-cache", "-q"]) == 0
    out = capsys.readouterr().out
    head = out[out.index("GPU timeline by device"):].splitlines()[1:3]
    assert "idle" in " ".join(head)
