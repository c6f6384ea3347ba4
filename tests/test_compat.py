"""TraceLens-style API from the categorization seed: TreePerfAnalyzer and generate_perf_report_pytorch."""

from __future__ import annotations

import zipfile

import polars as pl
import pytest
from conftest import TRACES, needs_traces, write_trace

from kernscope.compat import TreePerfAnalyzer, generate_perf_report_pytorch


def _graph_trace(tmp_path):
    def k(ts, dur, name):
        return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
                "args": {"correlation": 9, "stream": 7, "device": 0}}

    ev = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 1, "tid": 1, "ts": 5, "dur": 3, "args": {"correlation": 9}},
          k(10, 220, "nvjet_tst_320x128_64x3_1x2_h_bz_coopB_TNT"), k(240, 150, "kernel_mha"),
          k(400, 80, "void tensorrt_llm::common::scaleMatrix<__nv_bfloat16>(__nv_bfloat16*, float const*, long, long)")]
    return write_trace(tmp_path / "graph.json", ev)


def test_seed_before_and_after(tmp_path):
    p = _graph_trace(tmp_path)
    before = TreePerfAnalyzer(p).get_df_kernel_summary()
    assert "kernel_category" not in before.columns
    assert set(before["Parent cpu_op"]) == {"cudaGraphLaunch"}
    pa = TreePerfAnalyzer(p, use_kernel_name_categories=True)
    after = pa.get_df_kernel_summary()
    cats = dict(zip(after["Kernel name"].str.slice(0, 12), after["kernel_category"]))
    assert cats["nvjet_tst_32"] == "GEMM" and cats["kernel_mha"] == "Attention Forward"
    assert cats["void tensorr"] == "Memory"
    g = pa.get_df_kernel_category_summary()
    assert g.select("kernel_category", pl.col("% of cpu_op time").round(1)).rows() == [
        ("GEMM", 48.9), ("Attention Forward", 33.3), ("Memory", 17.8)]
    assert g["total_time_ms"].to_list() == pytest.approx([0.22, 0.15, 0.08])
    with pytest.raises(ValueError):
        TreePerfAnalyzer(p).get_df_kernel_category_summary()


def test_generate_perf_report(tmp_path):
    p = _graph_trace(tmp_path)
    x = tmp_path / "r.xlsx"
    sheets = generate_perf_report_pytorch(p, output_xlsx_path=x, output_csvs_dir=tmp_path / "csv", use_kernel_name_categories=True)
    assert {"gpu_timeline", "kernel_summary", "kernel_category_summary", "ops_summary", "steps"} <= set(sheets)
    assert "kernel_category" in sheets["kernel_summary"].columns
    with zipfile.ZipFile(x) as z:
        assert 'name="kernel_category_summary"' in z.read("xl/workbook.xml").decode()
    assert (tmp_path / "csv" / "kernel_category_summary.csv").exists()


@needs_traces
def test_gpu_timeline_matches_tracelens_columns():
    name = "h100_gaunernst_bert-small-uncased__1016001"
    tl = TreePerfAnalyzer(TRACES / "tracelens" / f"{name}.json.gz").get_df_gpu_timeline()
    ref = pl.read_csv(TRACES / "tracelens" / "reference" / name / "gpu_timeline.csv")
    assert tl.columns == ref.columns
    m = tl.join(ref, on="type", suffix="_ref")
    assert (m["time ms"] - m["time ms_ref"]).abs().max() < 1e-5
