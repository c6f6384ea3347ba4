"""``kernscope counters``: hardware counters of each kernel from a trace recorded with ``profiler_metrics`` (CUPTI's
range profiler). The real trace is HTA's ``cupti_counters.json.gz`` (an A100, 77 kernels of a small CNN, HTA's FLOP
counters); HTA 0.5.0's ``get_cupti_counter_data_with_operators`` on it matches the same launches and ops (its
``index_runtime``, ``bottom_level_op`` and ``top_level_op`` equal ``launch_idx``, ``op`` and ``top_op`` on all 77
rows, checked when this was written)."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from conftest import TRACES, cli

import kernscope
from kernscope.analyze.counters import SASS_OP, kernel_counters
from kernscope.testing.synth import COUNTER_METRICS, counters_trace

HTA = TRACES / "hta" / "cupti_counters.json.gz"
needs_hta = pytest.mark.skipif(not HTA.exists(), reason="HTA's traces not present")


run = cli  # (the CLI in this process: exit code, stdout, stderr)


@pytest.fixture(scope="module")
def hta_counters():
    c = kernel_counters(kernscope.load(HTA, cache=False)) if HTA.exists() else None
    return c


@needs_hta
def test_each_range_is_its_launch_and_ops_and_the_counters_are_the_files(hta_counters):
    c = hta_counters
    raw = [e for e in json.load(gzip.open(HTA))["traceEvents"] if e.get("cat") == "cuda_profiler_range"]
    raw.sort(key=lambda e: e["ts"])
    r = c.ranges
    assert c.linked and r.height == len(raw) == 77 and r["seq"].to_list() == list(range(77))
    assert [n[:300] for n in r["name"].to_list()] == [e["name"][:300] for e in raw]  # (the load caps 5 KB names)
    for m in raw[0]["args"]:  # every counter, every range, as the file has it
        assert r[m].to_list() == [float(e["args"][m]) for e in raw], m
    # the launches and ops HTA matches (its index_runtime, bottom_level_op, top_level_op)
    assert r["launch_idx"][:3].to_list() == [473, 3697, 3699]
    assert dict(Counter(r["op"].to_list())) == {"aten::cudnn_convolution": 28, "aten::clamp_min_": 14, "aten::addmm": 12,
                                                "aten::add_": 10, "aten::max_pool2d_with_indices": 6,
                                                "aten::native_dropout": 4, "aten::_adaptive_avg_pool2d": 2,
                                                "aten::uniform_": 1}
    assert dict(Counter(r["top_op"].to_list())) == {"aten::conv2d": 38, "aten::relu_": 14, "aten::linear": 12,
                                                    "aten::max_pool2d": 6, "aten::dropout": 4,
                                                    "aten::adaptive_avg_pool2d": 2, "aten::rand": 1}
    assert r.filter(pl.col("name").str.contains("sgemm_32x32"))["op"].unique().to_list() == ["aten::addmm"]


@needs_hta
def test_flops_per_precision_from_the_sass_counters(hta_counters):
    c = hta_counters
    raw = [e["args"] for e in json.load(gzip.open(HTA))["traceEvents"] if e.get("cat") == "cuda_profiler_range"]

    def total(p: str) -> float:
        return sum(a[SASS_OP.format(p + "add")] + a[SASS_OP.format(p + "mul")] + 2 * a[SASS_OP.format(p + "fma")] for a in raw)

    assert c.derived == ["flops_fp64", "flops_fp32", "flops_fp16", "flops"]  # (no DRAM counters recorded)
    for p, col in (("d", "flops_fp64"), ("f", "flops_fp32"), ("h", "flops_fp16")):
        assert c.ranges[col].sum() == c.kernels[col].sum() == total(p)
    assert c.ranges["flops"].sum() == total("d") + total("f") + total("h") == pytest.approx(80.23e9, rel=1e-3)
    top = c.kernels.row(0, named=True)  # by FLOPs: the linear layers' SGEMM
    assert (top["name"], top["op"], top["count"]) == ("ampere_sgemm_32x32_sliced1x4_tn", "aten::addmm", 6)
    assert top["flops_fp32"] == pytest.approx(30.16e9, rel=1e-3)
    assert c.kernels["count"].sum() == 77 and c.metrics.height == 9
    assert c.metrics.filter(pl.col("metric") == SASS_OP.format("ffma"))["kernels"].item() == 33


@needs_hta
def test_analyze_says_the_trace_holds_counters_not_times():
    r = run("analyze", str(HTA), "--no-cache")
    assert r.returncode == 3
    last = r.stderr.strip().splitlines()[-1]
    assert "recorded with hardware counters" in last and f"kernscope counters {HTA}" in last
    assert "lost the device side" not in r.stderr


@needs_hta
def test_cli_terminal_json_csv_xlsx(tmp_path):
    r = run("counters", str(HTA), "--no-cache")
    assert r.returncode == 0, r.stderr
    assert "77 kernels profiled with hardware counters" in r.stdout and "ampere_sgemm_32x32_sliced1x4_tn" in r.stdout
    assert "FLOP fp32" in r.stdout and "30.16 G" in r.stdout
    d = json.loads(run("counters", str(HTA), "--no-cache", "--format", "json").stdout)
    assert d["kernels_profiled"] == 77 and d["linked"] is True and len(d["ranges"]) == 77
    assert d["kernels"][0]["op"] == "aten::addmm" and sum(k["count"] for k in d["kernels"]) == 77
    assert run("counters", str(HTA), "--no-cache", "--format", "csv", "-o", str(tmp_path / "k.csv")).returncode == 0
    assert pl.read_csv(tmp_path / "k.csv")["count"].sum() == 77
    assert run("counters", str(HTA), "--no-cache", "-o", str(tmp_path / "c.xlsx")).returncode == 0
    import zipfile

    assert sum(n.startswith("xl/worksheets/sheet") for n in zipfile.ZipFile(tmp_path / "c.xlsx").namelist()) >= 3


def _two(tmp_path: Path, **kw) -> kernscope.Trace:
    kernels = [("sgemm", "aten::mm", {m: 10.0 for m in COUNTER_METRICS}),
               ("add_kernel", "aten::add", {**{m: 0.0 for m in COUNTER_METRICS}, "dram__bytes_read.sum": 4096.0,
                                            "dram__bytes_write.sum": 2048.0, SASS_OP.format("fadd"): 1024.0})]
    p = tmp_path / "c.json"
    counters_trace(p, kernels, **kw)
    return kernscope.load(p, cache=False)


def test_dram_bytes_and_flops_per_byte(tmp_path):
    c = kernel_counters(_two(tmp_path))
    assert c is not None and c.linked and c.derived == list(("flops_fp64", "flops_fp32", "flops_fp16", "flops", "dram_bytes",
                                                              "flops_per_byte"))
    add = c.ranges.row(1, named=True)
    assert (add["name"], add["op"], add["top_op"]) == ("add_kernel", "aten::add", "aten::add")
    assert add["flops_fp32"] == 1024 and add["dram_bytes"] == 6144 and add["flops_per_byte"] == pytest.approx(1024 / 6144)
    mm = c.ranges.row(0, named=True)
    assert mm["flops_fp64"] == mm["flops_fp32"] == mm["flops_fp16"] == 40 and mm["flops"] == 120  # 10 + 10 + 2 x 10
    assert mm["dram_bytes"] == 20 and mm["flops_per_byte"] == 6


def test_ranges_that_cannot_be_matched_stand_alone_and_say_why(tmp_path):
    more = kernel_counters(_two(tmp_path, extra_launches=1))
    assert more is not None and not more.linked and more.ranges["op"].null_count() == 2
    assert "3 kernel launches and 2 counter ranges" in more.notes[0]
    (tmp_path / "b").mkdir()
    two = kernel_counters(_two(tmp_path / "b", second_pid=True))
    assert two is not None and not two.linked and "several processes" in two.notes[0]
    assert two.ranges["flops"].to_list() == [120.0, 1024.0]  # (the counters are there either way)


def test_a_trace_without_counters_is_an_empty_answer():
    bundled = Path(kernscope.__file__).parent / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    r = run("counters", str(bundled), "--no-cache")
    assert r.returncode == 3 and "no hardware counters" in r.stderr and "profiler_metrics" in r.stderr


@needs_hta
def test_sql_and_the_report_have_the_counters(tmp_path):
    r = run("sql", "SELECT op, sum(flops) AS flops, sum(count) AS n FROM counters.kernels GROUP BY op ORDER BY flops DESC",
            str(HTA), "--no-cache", "--format", "json")
    rows = json.loads(r.stdout)["rows"]
    assert rows[0]["op"] == "aten::cudnn_convolution" and sum(x["n"] for x in rows) == 77
    empty = run("sql", "SELECT * FROM counters.ranges", str(Path(kernscope.__file__).parent / "examples" /
                                                            "h200_gpt_train_step.pt.trace.json.gz"), "--no-cache",
                "--format", "json")
    assert empty.returncode == 0 and json.loads(empty.stdout)["rows"] == []
    rep = run("report", str(HTA), "--no-cache", "-o", str(tmp_path / "r/"))
    assert rep.returncode == 3  # (no GPU time: said in one line; the counters are in the report)
    assert pl.read_csv(tmp_path / "r" / "counters_ranges.csv").height == 77
