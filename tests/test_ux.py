"""Everyday terminal and file UX: tables that fit, --top everywhere, full JSON, clear step errors, progress,
readable files, CSV precision, xlsx formatting, pandas interop, bench without torch."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from conftest import TRACES, needs_traces

from kernscope.cli import main

EXAMPLE = Path(__file__).resolve().parents[1] / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
WIDE = ["tracelens/h100_google_owlv2-large-patch14-ensemble__1016001.json.gz", "hta/a100_16rank_rank0_triton.json.gz",
        "tracelens/rocm_vllm_piecewise_hipgraph.json.gz", "hta/v100_2rank_nccl_rank1.json.gz"]


def _analyze(capsys, monkeypatch, path, *args, columns=80):
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["analyze", str(path), "--no-cache", *args]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("columns", [80, 100])
def test_tables_fit_and_keep_their_numbers(capsys, monkeypatch, columns):
    out = _analyze(capsys, monkeypatch, EXAMPLE, "--top", "8", columns=columns)
    lines = out.splitlines()
    assert max(len(x) for x in lines) <= columns
    start = next(i for i, x in enumerate(lines) if x.startswith("Kernels by name"))
    rows = lines[start + 2 : start + 10]
    assert all(r.rstrip().endswith("%") and ("µs" in r or "ms" in r) for r in rows), rows  # numbers never cut
    assert "… 58 more" in out  # 66 kernel rows (one per name, launcher and category), 8 shown


@needs_traces
@pytest.mark.parametrize("name", WIDE)
def test_real_traces_fit_80_columns(capsys, monkeypatch, name):
    out = _analyze(capsys, monkeypatch, TRACES / name, columns=80)
    assert max(len(x) for x in out.splitlines()) <= 80


def test_top_limits_every_table(capsys, monkeypatch, tmp_path):
    from kernscope.testing.synth import make_trace

    p = tmp_path / "t.json"
    make_trace(p, 3_000_000)  # many steps
    out = _analyze(capsys, monkeypatch, p, "--top", "3", columns=120)
    steps = out.split("Steps")[1].split("\n\n")[0]
    assert len([x for x in steps.splitlines() if x.startswith("ProfilerStep#")]) == 3
    assert out.count("… ") >= 3  # steps, kernels, ops (at least) say how many rows were left out


def test_json_has_every_row_unless_top_is_given(capsys, monkeypatch):
    doc = json.loads(_analyze(capsys, monkeypatch, EXAMPLE, "--format", "json"))
    # one row per kernel name, launcher and category: 63 (name, launcher) pairs, three of them hold two categories
    assert len(doc["kernels"]) == 66 and len(doc["ops"]) == 25
    pairs = {(k["name"], k["launcher"]) for k in doc["kernels"]}
    assert len(pairs) == 63 and len({(k["name"], k["launcher"], k["category"]) for k in doc["kernels"]}) == 66
    doc = json.loads(_analyze(capsys, monkeypatch, EXAMPLE, "--format", "json", "--top", "5"))
    assert len(doc["kernels"]) == 5


def test_unknown_step_is_an_error_listing_the_steps(capsys):
    rc = main(["analyze", str(EXAMPLE), "--no-cache", "--step", "7"])
    err = capsys.readouterr().err
    assert rc == 2 and "no step 7" in err and "available: 2, 3" in err and len(err.strip().splitlines()) == 1


def test_progress_bar_only_for_slow_loads_on_a_terminal(monkeypatch):
    import sys

    from kernscope.render.progress import Progress

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    p = Progress("reading", quiet=False)
    p(10, 100)
    assert p.bar is None  # under a second: nothing shown
    p.t0 -= 2
    p(50, 100)
    assert p.bar is not None and p.bar.tasks[0].description == "reading"
    p(100, 100)  # read: the bar says what it is doing while the trace is linked
    assert p.bar.tasks[0].description == "reading: linking and analyzing"
    p.close()
    r = Progress("analyzing 4 ranks", quiet=False, unit="ranks")
    r.t0 -= 2
    r(2, 4)
    line = "".join(str(c.render(r.bar.tasks[0])) for c in r.bar.columns[1:] if not isinstance(c, str))
    assert "2/4" in line and "ranks" in line and "bytes" not in line and "B" not in line.split("2/4")[1]
    r.close()
    q = Progress("reading", quiet=True)
    q.t0 -= 2
    q(50, 100)
    assert q.bar is None


def test_no_progress_bar_when_the_output_goes_to_a_pipe(monkeypatch, tmp_path):
    # `kernscope analyze big.json --format json | jq`: stderr is the terminal, but the bar would draw over jq's output
    import os
    import sys

    from kernscope.render import progress

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    read_end, write_end = os.pipe()
    try:
        with os.fdopen(write_end, "w") as piped:
            monkeypatch.setattr(sys, "stdout", piped)
            assert progress.stdout_is_pipe()
            p = progress.Progress("reading", quiet=False)
            p.t0 -= 2
            p(50, 100)
            assert p.bar is None
        with open(tmp_path / "out.json", "w") as to_file:  # a file is not a pipe: the bar shows
            monkeypatch.setattr(sys, "stdout", to_file)
            assert not progress.stdout_is_pipe()
            f = progress.Progress("reading", quiet=False)
            f.t0 -= 2
            f(50, 100)
            assert f.bar is not None
            f.close()
    finally:
        os.close(read_end)


@pytest.mark.parametrize("width", [60, 80, 120])
@pytest.mark.parametrize("name", ["real1g.xplane.pb", "a_very_long_profile_name_of_some_training_run.xplane.pb"])
def test_progress_bar_is_one_line_on_narrow_terminals(name, width):
    # the count ("975.2/975.2 MB") was wrapped onto a second line at 80 columns; the description gives way instead
    import io

    from rich.console import Console
    from rich.progress import Progress as RichProgress

    from kernscope.render.progress import OTHER_COLUMNS, columns

    for done, what in ((500_000_000, f"reading {name}"), (975_200_000, f"reading {name}: linking and analyzing")):
        out = io.StringIO()
        console = Console(file=out, width=width, force_terminal=True, color_system=None)
        clock = [0.0]
        bar = RichProgress(*columns("bytes", width), console=console, transient=True, auto_refresh=False,
                           get_time=lambda: clock[0])
        task = bar.add_task(what, total=975_200_000)
        for t in (1.0, 2.0):  # half of it in the first second, the rest in the next
            clock[0] = t
            bar.update(task, completed=int(done * t / 2))
        console.print(bar.get_renderable())
        lines = out.getvalue().splitlines()
        assert len(lines) == 1 and len(lines[0]) <= width, lines
        assert f"{done / 1e6:.1f}/975.2 MB" in lines[0] and "reading" in lines[0] and "\u2501" in lines[0]  # and a bar
        assert f"{done / 2e6:.1f} MB/s" in lines[0]  # the rate
        if len(what) > width - OTHER_COLUMNS:
            assert "\u2026" in lines[0]  # the description cut with an ellipsis
        else:
            assert what in lines[0]


def test_csv_numbers_carry_no_float_noise(capsys, tmp_path):
    assert main(["report", str(EXAMPLE), "--no-cache", "-o", str(tmp_path / "csvs"), "--quiet"]) == 0
    for f in (tmp_path / "csvs").iterdir():
        for cell in f.read_text().replace("\n", ",").split(","):
            if cell.replace(".", "", 1).isdigit() and "." in cell:
                assert len(cell.split(".")[1]) <= 4, (f.name, cell)


def test_xlsx_is_formatted(tmp_path):
    out = tmp_path / "r.xlsx"
    assert main(["report", str(EXAMPLE), "--no-cache", "-o", str(out), "--quiet"]) == 0
    with zipfile.ZipFile(out) as z:
        names = z.namelist()
        wb = z.read("xl/workbook.xml").decode()
        assert 'name="definitions"' in wb and 'name="kernel_summary"' in wb
        sheet1 = z.read("xl/worksheets/sheet1.xml").decode()
        assert 'ySplit="1"' in sheet1 and "autoFilter" in sheet1  # frozen, filterable header
        styles = z.read("xl/styles.xml").decode()
        assert "#,##0.000" in styles and '0.00&quot;%&quot;' in styles
        assert any(n.startswith("xl/charts/chart") for n in names)
        assert "<col " in sheet1 and 'width="255' not in sheet1


def test_compat_gpu_timeline_sheet_is_tracelens_shaped(tmp_path):
    from kernscope.compat import generate_perf_report_pytorch

    sheets = generate_perf_report_pytorch(EXAMPLE, output_xlsx_path=tmp_path / "c.xlsx", use_kernel_name_categories=True,
                                          cache=False)
    tl = sheets["gpu_timeline"]
    assert tl.columns == ["type", "time ms", "percent"]


def test_to_pandas_after_a_plain_install():
    import kernscope

    t = kernscope.load(EXAMPLE, cache=False)
    df = t.kernels.to_pandas()
    assert len(df) == 728


def test_bench_without_torch_says_how_to_install(capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "torch" else real(n, *a))
    rc = main(["bench", "--op", "gemm"])
    err = capsys.readouterr().err
    assert rc == 2 and 'pip install "kernscope[gpu]"' in err and len(err.strip().splitlines()) == 1


def test_glossary_is_current_and_covers_every_column(capsys):
    from kernscope.render.glossary import TERMS, markdown

    assert (Path(__file__).resolve().parents[1] / "docs" / "glossary.md").read_text() == markdown()
    assert main(["analyze", str(EXAMPLE), "--no-cache", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    cols = set(doc["trace"]) | set(doc["unlinked"])
    for key in ("steps", "kernels", "categories", "ops", "launcher_categories", "timeline"):
        for row in doc[key]:
            cols |= set(row)
    cols |= {r["type"] for r in doc["timeline"]}
    missing = sorted(c for c in cols if c not in TERMS and c not in ("path", "device_names", "type"))
    assert not missing, missing


def _step(name, ts, dur):
    return {"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": {}}


def test_empty_answers_name_their_cause_and_exit_3(tmp_path, capsys):
    """A trace without GPU activity, one whose launches lost their kernels, and a step without GPU work:
    the tables are printed, then one line says why they are empty and what to do, exit 3, cached or not."""
    from conftest import write_trace

    cpu = write_trace(tmp_path / "cpu.json", [_step("ProfilerStep#1", 0, 100),
                                              {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5}])
    for cached in (False, True, True):  # the second cached run would find a stored output if one were stored
        args = ["analyze", str(cpu), "-q"] + ([] if cached else ["--no-cache"])
        assert main(args) == 3
        out, err = capsys.readouterr()
        assert "Steps" in out and err.count("\n") == 1
        assert "no GPU activity" in err and "ProfilerActivity.CUDA" in err and str(cpu) in err
    # a JAX/xprof JSON export of a CPU-only run: no torch.profiler advice for it
    jax_cpu = write_trace(tmp_path / "vm.trace.json", [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/host:CPU"}},
        {"ph": "X", "name": "jit_step", "pid": 1, "tid": 2, "ts": 10, "dur": 5, "args": {}}, {}])
    assert main(["analyze", str(jax_cpu), "-q", "--no-cache"]) == 3
    err = capsys.readouterr().err
    assert "this JAX/XLA profile has no GPU device with events" in err and "torch.profiler" not in err
    lost = write_trace(tmp_path / "lost.json", [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
         "args": {"correlation": 7}}])
    assert main(["analyze", str(lost), "-q", "--no-cache"]) == 3
    assert "though it has 1 launch calls: the profiler lost the device side" in capsys.readouterr().err
    # a window that held no GPU work (a schedule's trace exported after its last cycle: one synchronize): not a lost
    # device side, which the message said before
    idle = write_trace(tmp_path / "idle.json", [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 10, "dur": 5}])
    assert main(["analyze", str(idle), "-q", "--no-cache"]) == 3
    err = capsys.readouterr().err
    assert "its one runtime call (cudaDeviceSynchronize) launches no GPU work" in err and "on_trace_ready" in err
    assert "lost" not in err
    k = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 30, "dur": 10, "args": {"correlation": 1, "stream": 7, "device": 0}}
    launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 20, "dur": 5,
              "args": {"correlation": 1}}
    two = write_trace(tmp_path / "two.json", [_step("ProfilerStep#1", 0, 100), _step("ProfilerStep#2", 200, 100), launch, k])
    assert main(["analyze", str(two), "-q", "--no-cache", "--step", "1"]) == 0
    capsys.readouterr()
    for cmd in (["analyze"], ["perf"], ["report", "-o", str(tmp_path / "r.html")]):
        assert main([cmd[0], str(two), *cmd[1:], "-q", "--no-cache", "--step", "2"]) == 3, cmd
        assert "step 2 of" in capsys.readouterr().err
    assert (tmp_path / "r.html").exists()  # the report was written; the exit code says it is empty


def test_diff_with_an_empty_side_exits_3_naming_the_side(tmp_path, capsys):
    from conftest import write_trace

    cpu = write_trace(tmp_path / "cpu.json", [_step("ProfilerStep#1", 0, 100)])
    assert main(["diff", str(EXAMPLE), str(cpu), "--no-cache", "-q"]) == 3
    out, err = capsys.readouterr()
    assert "By category" in out and err.startswith("kernscope: B: no GPU activity in") and err.count("\n") == 1
    assert main(["diff", str(EXAMPLE), str(EXAMPLE), "--step", "2", "--step-b", "3", "--no-cache", "-q"]) == 0


def test_analyze_timings_prints_the_phases_of_a_cold_run(tmp_path, capsys):
    """#25: ``analyze --timings`` prints, after the unchanged output, the phases of a cold analyze of the user's file
    (parse with its format, link, analysis, render) with their seconds and the total, on stderr."""
    from kernscope.cli import main

    example = Path(__file__).resolve().parents[1] / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    assert main(["analyze", str(example), "--format", "json", "-o", str(tmp_path / "a.json"), "--no-cache"]) == 0
    capsys.readouterr()
    assert main(["analyze", str(example), "--format", "json", "-o", str(tmp_path / "b.json"), "--timings"]) == 0
    err = capsys.readouterr().err
    a, b = (json.loads((tmp_path / n).read_text()) for n in ("a.json", "b.json"))
    assert a == b  # the output is the same
    lines = {ln.split("  ")[0].strip(): ln for ln in err.splitlines() if ln.strip()}
    # the parse says which reader read the pieces: the compiled scanner, where the install built it
    # (and, for a gzip file, how much JSON it inflated to: its rate on disk says little of the parse)
    import gzip

    inflated = len(gzip.decompress(example.read_bytes())) / 1e6
    parse = f"parse (kineto, from gzip: {inflated:,.1f} MB inflated, projected, compiled scanner 1 of 1 pieces)"
    phases = [parse, "link (correlation, call tree, steps)", "analysis (summaries, categories, findings)", "render (json)"]
    assert all(p in lines for p in phases) and "total" in lines and "MB on disk, read cold" in err
    secs = [float(lines[p].split()[-2]) for p in phases]
    assert abs(sum(secs) - float(lines["total"].split()[-2])) <= 0.005 and all(s >= 0 for s in secs)
    # the trace's events and GPU rows as the output counts them, and its events per second through the phases
    events, gpu_rows = b["trace"]["events"], b["trace"]["gpu_events"]
    rate = f"{events / 1e6 / float(lines['total'].split()[-2]):,.2f}"
    assert f"{events:,} events: " in err and f"M events/s, {gpu_rows:,} of them GPU rows" in err
    assert abs(float(err.split(f"{events:,} events: ")[1].split(" M events/s")[0]) - float(rate)) <= 0.011


def test_the_commands_timings_begin_with_its_start_and_add_up_to_its_time(tmp_path, capsys):
    """Run as its own process, ``analyze --timings`` begins its table with the time no phase counted, from the
    process's start (the interpreter, the imports, the command line) to the output written; its total is the
    command's time, as the caller measures it from outside, not the phases' alone. Called in a running process
    (``main()``, the test above) it has no such row."""
    import os
    import subprocess
    import sys
    import time

    from kernscope.oneshot import process_started
    from kernscope.render.output import START_ROW

    if process_started() is None:
        pytest.skip("no kernel record of a process's start here (Linux's /proc)")
    env = dict(os.environ, KERNSCOPE_CACHE_DIR=str(tmp_path / "cache"))
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "kernscope", "analyze", str(EXAMPLE), "--format", "json", "-o",
                        str(tmp_path / "a.json"), "--timings"], capture_output=True, text=True, env=env, check=True)
    wall = time.perf_counter() - t0
    rows = [ln for ln in p.stderr.splitlines() if ln.strip().endswith("%")]
    assert rows[0].startswith(START_ROW) and rows[-1].startswith("total")
    secs = [float(ln.split()[-2]) for ln in rows]
    assert abs(sum(secs[:-1]) - secs[-1]) <= 0.006 and secs[0] > 0
    # the total: the command's time up to its output (its exit and this process's spawn left out), a clock tick of
    # the kernel's record of its start either way
    assert secs[-1] <= wall + 0.011
    assert secs[0] >= 0.01  # (the interpreter alone starts in more than 10 ms)
    assert main(["analyze", str(EXAMPLE), "--format", "json", "-o", str(tmp_path / "b.json"), "--timings"]) == 0
    assert START_ROW not in capsys.readouterr().err


def test_analyze_timings_counts_a_jax_profiles_events_and_gpu_rows(tmp_path, capsys):
    """A JAX profile's phase table says how many events it held and how many were GPU rows (most of them, where a
    Kineto trace's are a few percent: session 66), as the JSON output counts them."""
    from kernscope.cli import main

    profile = Path(__file__).resolve().parent / "data" / "jax" / "transformer" / "vm.xplane.pb.gz"
    assert main(["analyze", str(profile), "--format", "json", "-o", str(tmp_path / "a.json"), "--timings"]) == 0
    err = capsys.readouterr().err
    trace = json.loads((tmp_path / "a.json").read_text())["trace"]
    assert 0 < trace["gpu_events"] < trace["events"]
    assert f"{trace['events']:,} events: " in err and f" M events/s, {trace['gpu_events']:,} of them GPU rows" in err
    assert "parse (xplane" in err


def test_analyze_timings_names_the_readers(tmp_path, capsys, monkeypatch):
    """Without the compiled scanner (or for pieces it declines) the parse line names polars' line reader."""
    from kernscope.cli import main

    example = Path(__file__).resolve().parents[1] / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    monkeypatch.setenv("KERNSCOPE_NO_NATIVE", "1")
    assert main(["analyze", str(example), "--format", "json", "-o", str(tmp_path / "a.json"), "--timings"]) == 0
    assert "inflated, projected, line reader 1 of 1 pieces)" in capsys.readouterr().err
    plain = tmp_path / "plain.json"  # a plain file: no gzip in the label
    import gzip

    plain.write_bytes(gzip.decompress(example.read_bytes()))
    assert main(["analyze", str(plain), "--format", "json", "-o", str(tmp_path / "b.json"), "--timings"]) == 0
    assert "parse (kineto, projected, line reader 1 of 1 pieces)" in capsys.readouterr().err


def test_the_html_report_is_the_same_on_every_run(tmp_path):
    """The page must not depend on the process's string-hash seed (its glossary was built from a set: the
    order of its entries changed from run to run)."""
    import os
    import subprocess
    import sys

    example = Path(__file__).resolve().parents[1] / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    pages = []
    for seed in ("1", "2"):
        out = tmp_path / f"r{seed}.html"
        env = dict(os.environ, PYTHONHASHSEED=seed)
        subprocess.run([sys.executable, "-m", "kernscope", "report", str(example), "-o", str(out), "--quiet", "--no-cache"],
                       check=True, env=env)
        pages.append(out.read_bytes())
    assert pages[0] == pages[1]


def test_the_header_names_a_rank_without_a_world_size(tmp_path, capsys):
    """A trace whose rank is known but not its world size reads ``rank 3``, not ``rank 3/None``; with both,
    ``rank 3/8``; with neither, ``rank -``."""
    from conftest import write_trace

    from kernscope.cli import main

    ev = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.0, "dur": 2.0,
           "args": {"device": 0, "stream": 7}}]
    for info, want in (({"rank": 3}, "rank 3 ·"), ({"rank": 3, "world_size": 8}, "rank 3/8 ·"), (None, "rank - ·")):
        p = write_trace(tmp_path / "t.json", ev, **({"distributedInfo": info} if info else {}))
        assert main(["analyze", str(p), "--no-cache", "-q"]) == 0
        out = capsys.readouterr().out
        assert want in out and "None" not in out, out[:300]


def test_every_result_table_gives_text_as_string():
    """Text columns of every public result table are String (a launching op was Categorical in the kernel, op and
    launcher summaries, a category in ``step_categories``: pandas' category dtype beside object columns, and a
    polars join of one with a String column fails)."""
    import polars as pl

    import kernscope
    from kernscope.analyze.diff import Side, diff
    from kernscope.analyze.memory import memory_timeline
    from kernscope.analyze.perf.roofline import perf_model
    from kernscope.analyze.summary import analyze
    from kernscope.engine import analyze_job

    data = Path(__file__).parent / "data"
    results: dict[str, dict[str, pl.DataFrame]] = {}
    for path in (EXAMPLE, data / "jax" / "transformer", data / "memory_h100" / "h100_gpt_memory.pt.trace.json.gz"):
        t = kernscope.load(path, cache=False)
        a = analyze(t)
        results[f"{path.name} analyze"] = {**a.tables(), **(a.critical_path.tables() if a.critical_path else {})}
        results[f"{path.name} perf"] = perf_model(t).sheet_tables()
        results[f"{path.name} diff"] = diff(Side(t), Side(t)).tables()
        m = memory_timeline(t)
        if m is not None:
            results[f"{path.name} memory"] = m.tables()
    results["job"] = analyze_job(sorted(str(p) for p in (data / "ddp2_h200").glob("*.json.gz"))).tables()
    assert len(results) == 12  # (the JAX run folder's gzipped XSpace, read since session 45, has a memory timeline)
    bad = {(where, name, col): str(dt) for where, tables in results.items() for name, df in tables.items()
           for col, dt in df.schema.items() if isinstance(dt, (pl.Categorical, pl.Enum, pl.Object))}
    assert not bad


def test_a_pages_packed_arrays_are_set_in_as_they_are_and_the_rest_escaped():
    """``page`` moves each base64 array (``b64``: needs no escape) out of the document before it is escaped and sets
    it back after: the page's JSON reads back as the shown document, the arrays byte for byte, and neither a string
    nor a key that looks like the placeholder (a NUL and a number) is taken for one."""
    import re as _re

    import numpy as np

    from kernscope.render.html import b64, page

    arr = b64(np.arange(1000, dtype=np.float64))
    doc = {"a": arr, "list": [b64(np.array([1, 2], dtype=np.uint16)), "x<y>&z\u2028", 3.5, None],
           "\x000": "a key like the placeholder", "nul": "\x000", "evil": "evil\u202ekernel"}
    html = page(doc, "t")
    block = _re.search(r'<script type="application/json" id="ks-data">(.*?)</script>', html, _re.DOTALL).group(1)
    assert "<" not in block and "&" not in block and "\u2028" not in block and "\u202e" not in block
    got = json.loads(block)
    assert got["a"] == arr and got["list"][0] == str(b64(np.array([1, 2], dtype=np.uint16)))
    assert got["list"][1:] == ["x<y>&z\\u2028", 3.5, None] and got["\x000"] == "a key like the placeholder"
    assert got["nul"] == "\\x000" and got["evil"] == "evil\\u202ekernel"
    assert f'"{arr}"' in block  # (as it is: no escape pass over it)


def test_the_report_timeline_has_a_lane_per_device_and_stream_in_order():
    """The HTML timeline's packed rows: one lane per (device, stream), in order, each lane's rows sorted by start and
    counted as the GPU table counts that stream's records (a real multi-GPU JAX profile: several devices, streams)."""
    import base64
    import importlib

    import numpy as np
    import polars as pl

    import kernscope
    from kernscope.analyze.summary import analyze

    timeline_data = importlib.import_module("kernscope.render.html.analysis").timeline_data

    t = kernscope.load(Path(__file__).parent / "data" / "multigpu_h200" / "jax_dp.xplane.pb.gz", cache=False)
    g = analyze(t).gpu_interned
    tl = timeline_data(g, t.steps)
    want = (g.group_by(pl.col("device").fill_null(-1), pl.col("stream").fill_null(-1)).len()
            .sort("device", "stream"))
    assert want.height > 2 and want["device"].n_unique() > 1
    assert [(lane["device"], lane["stream"]) for lane in tl["lanes"]] == list(zip(want["device"], want["stream"]))
    assert np.diff(tl["lane_first"]).tolist() == want["len"].to_list() and tl["lane_first"][-1] == g.height
    start = np.frombuffer(base64.b64decode(tl["events"]["start"]), dtype="<f8")
    for a, b in zip(tl["lane_first"], tl["lane_first"][1:]):
        assert (np.diff(start[a:b]) >= 0).all()


@pytest.mark.parametrize("trace", ["src/kernscope/examples/h200_gpt_train_step.pt.trace.json.gz",
                                   "tests/data/recompile_h100/jax_recompile.xplane.pb.gz"])
def test_load_phases_script_times_both_formats(tmp_path, trace):
    """``benchmarks/load_phases.py`` (the table ``--timings`` follows) runs on a JAX profile as on a Kineto trace: it
    parsed the file with the Kineto reader only, so a JAX profile stopped with a traceback. It names the format's
    parse and counts the events the CLI's load counts."""
    import os
    import subprocess
    import sys

    import kernscope
    from kernscope.analyze.needs import analyze_projection

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, KERNSCOPE_CACHE_DIR=str(tmp_path / "cache"))
    p = subprocess.run([sys.executable, str(root / "benchmarks" / "load_phases.py"), str(root / trace)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    fmt = "xplane): XSpace decode" if trace.endswith(".pb.gz") else "kineto): pieces on threads"
    assert f"parse ({fmt}" in p.stdout and "default summary (analyze)" in p.stdout
    events = kernscope.load(str(root / trace), projection=analyze_projection(None), cache=False).stats.events
    assert f"{events:,} events" in p.stdout


def test_bench_commands_times_each_command_cold_and_after_analyze_against_another_tree(tmp_path):
    """``benchmarks/bench_commands.py`` runs a command cold and after ``analyze``, here against this same tree: a row
    each, the ratio of the medians, the outputs alike; a command that answers nothing (``memory`` of a trace without
    memory events) shows its exit code."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    p = subprocess.run([sys.executable, str(root / "benchmarks" / "bench_commands.py"),
                        str(root / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"),
                        "--repeat", "1", "--commands", "perf,memory", "--against", str(root / "src")],
                       capture_output=True, text=True, env=dict(os.environ), timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    import re

    rows = {ln[:24].strip(): ln[24:] for ln in p.stdout.splitlines() if ln.startswith(("perf ", "memory "))}
    assert set(rows) == {"perf cold", "perf after analyze", "memory cold", "memory after analyze"}
    for label in ("perf cold", "perf after analyze"):
        m = re.fullmatch(r"\s*([\d.]+) s \((\d+) MB\)\s+([\d.]+) s \((\d+) MB\)\s+([\d.]+)", rows[label])
        assert m is not None, rows[label]
        assert all(float(v) > 0 for v in m.groups())
    assert rows["memory cold"].split() == ["-", "(exit", "3)", "-", "(exit", "3)"]
    assert "outputs differ" not in p.stdout


def test_bench_scanner_build_compares_two_builds_of_the_library(tmp_path):
    """``benchmarks/bench_scanner_build.py`` (which flags the install compiles the scanners with) builds the library
    twice, runs each side's own build on a Kineto trace and a JAX profile (a side that ran the installed library
    instead stops the script) and prints a row per trace; flags the compiler refuses are said in one line, exit 1."""
    import os
    import re
    import shlex
    import shutil
    import subprocess
    import sys
    import sysconfig

    if shutil.which(shlex.split(sysconfig.get_config_var("CC") or "cc")[0]) is None:
        pytest.skip("no C compiler")
    root = Path(__file__).resolve().parents[1]
    script = str(root / "benchmarks" / "bench_scanner_build.py")
    traces = [str(root / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"),
              str(root / "tests" / "data" / "recompile_h100" / "jax_recompile.xplane.pb.gz")]
    env = dict(os.environ, KERNSCOPE_CACHE_DIR=str(tmp_path / "cache"))
    p = subprocess.run([sys.executable, script, *traces, "--a=-O1", "--b=-O3", "--rounds", "1"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("A: -O1   B: -O3")
    for name in ("h200_gpt_train_step.pt.trace.json.gz", "jax_recompile.xplane.pb.gz"):
        row = next(ln for ln in p.stdout.splitlines() if ln.startswith(name))
        m = re.search(r"A +([\d.]+) MB/s \(([\d.]+)\) +B +([\d.]+) MB/s \(([\d.]+)\) +B / A ([\d.]+)$", row)
        assert m is not None, row
        a, _, b, _, ratio = map(float, m.groups())
        # (the ratio is of the unrounded rates; a and b are printed to the MB/s: on a slow hour, 150 MB/s against 140,
        # that rounding alone moves b / a by 0.006)
        assert a > 0 and b > 0 and abs(ratio - b / a) <= 0.0005 + (b / a) * (0.5 / a + 0.5 / b)
    bad = subprocess.run([sys.executable, script, traces[0], "--b=-Onot-a-level", "--rounds", "1"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().startswith("the library did not build with '-Onot-a-level'")


def test_bench_headstart_runs_both_sides_and_compares_their_output(tmp_path):
    """``benchmarks/bench_headstart.py`` runs a cold analyze with the head starts on and off in alternating pairs, each
    in its own process, and says whether both printed the same JSON; its JSON file has every run."""
    import json
    import re
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    trace = str(root / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz")
    out = tmp_path / "ab.json"
    p = subprocess.run([sys.executable, str(root / "benchmarks" / "bench_headstart.py"), trace, "--pairs", "1",
                        "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    for side in ("on", "off"):
        assert re.search(rf"head start {side} *: median [\d.]+ s \(range [\d.]+-[\d.]+\), peak \d+-\d+ MiB", p.stdout)
    assert "the same JSON on both sides: True" in p.stdout
    runs = json.loads(out.read_text())[trace]["runs"]
    assert len(runs["on"]) == len(runs["off"]) == 1 and all(s > 0 and m > 0 for s, m in runs["on"] + runs["off"])


def test_bench_phases_compares_two_trees_phase_by_phase(tmp_path):
    """``benchmarks/bench_phases.py`` runs a cold analyze with this tree and another in alternating pairs and prints
    each ``--timings`` phase, the wall time and the peaks of both, and whether both printed the same JSON (here the
    other tree is this one); its phase reader sums a JAX profile's windows."""
    import json
    import re
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "benchmarks"))
    try:
        from bench_phases import phases
    finally:
        sys.path.pop(0)
    table = ("phase   seconds   share\nplan (8 windows)   0.250   10.0%\nwindow 1 of 2 (decode, link, analysis)   0.500   "
             "20.0%\nwindow 2 of 2 (decode, link, analysis)   0.250   10.0%\nmerge   0.100    4.0%\ntotal   2.500  100.0%\n")
    assert phases(table) == {"plan": 0.25, "window": 0.75, "merge": 0.1, "total": 2.5}
    trace = str(root / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz")
    out = tmp_path / "ab.json"
    p = subprocess.run([sys.executable, str(root / "benchmarks" / "bench_phases.py"), trace, "--against", str(root / "src"),
                        "--pairs", "1", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    for side in ("this", "against"):
        assert re.search(rf"{side} *: start [\d.]+ \([\d.]+-[\d.]+\), parse [\d.]+ \([\d.]+-[\d.]+\), link [\d.]+ .*wall "
                         rf"[\d.]+ .* s; peak \d+-\d+ MiB", p.stdout), p.stdout
    assert "the same JSON on both sides: True" in p.stdout
    runs = json.loads(out.read_text())[trace]["runs"]
    # (the total: the command's time from its process's start, read to a clock tick; the wall time: from its spawn to
    # its exit, measured here)
    assert all(times["link"] > 0 and times["wall"] + 0.011 > times["total"] > times["start"] > 0 and peak > 0
               for times, peak in runs["this"] + runs["against"])
