"""A JAX profile analyzed a time window at a time (``kernscope.analyze.windows``): the merged analysis of the windows
is the whole profile's, to the byte of its JSON, on every real JAX profile here that has steps; a profile that cannot
be cut so is said so (``NotWindowed``), for the caller to read it whole."""

from __future__ import annotations

import dataclasses
import gzip
import importlib
import json
from pathlib import Path

import polars as pl
import pytest
from test_jax import MLP, TRACELENS_JAX, TRANSFORMER

from kernscope import load
from kernscope.analyze.summary import analyze
from kernscope.analyze.windows import NotWindowed, analyze_windows, keep, merge
from kernscope.load.native import scanner
from kernscope.render.formats import text

xplan = importlib.import_module("kernscope.load.xplan")
pytestmark = pytest.mark.skipif(scanner() is None, reason="time windows need the compiled XSpace scanner")
DATA = Path(__file__).parent / "data"


def _stepped() -> list[Path]:
    """The real JAX profiles here with StepTraceAnnotation steps (one to eleven steps, one or two GPUs)."""
    return [MLP, TRANSFORMER, *sorted((DATA / "jax_kernels_h200").glob("*/vm.xplane.pb.gz")),
            DATA / "multigpu_h200" / "jax_dp.xplane.pb.gz", DATA / "recompile_h100" / "jax_recompile.xplane.pb.gz",
            *sorted(DATA.glob("jax_job_h200*/process0/plugins/profile/*/vm.xplane.pb.gz"))]


def _plain(path: Path, tmp_path: Path) -> Path:
    """The profile as a plain ``.xplane.pb`` (windows are read from a mapped file)."""
    if path.suffix != ".gz":
        return path
    out = tmp_path / path.name.removesuffix(".gz")
    out.write_bytes(gzip.decompress(path.read_bytes()))
    return out


def _json(a) -> dict:
    return json.loads(text(a, "json"))


@pytest.mark.parametrize("path", _stepped(), ids=lambda p: "/".join(p.parts[-3:]))
def test_the_windows_merged_are_the_whole_profiles_analysis(path, tmp_path):
    p = _plain(path, tmp_path)
    whole = text(analyze(load(p, cache=False)), "json")
    data = p.read_bytes()
    for k in (2, 3, 5):
        plan = xplan.plan(data, str(p), k)
        assert plan is not None and plan.windows >= 2  # (cut for real: two windows at least)
        merged = text(analyze_windows(p, k), "json")
        if merged != whole:  # (the first section that differs, for the message)
            w, m = json.loads(whole), json.loads(merged)
            bad = [s for s in w if w[s] != m.get(s)]
            pytest.fail(f"{plan.windows} windows: {bad} differ; first: {w[bad[0]]!s:.400} vs {m.get(bad[0])!s:.400}")


def test_a_windowed_analysis_holds_what_a_user_checks(tmp_path):
    """The 11-step transformer read in three windows: the counts and the kernel time against the GPU rows of the
    whole profile's table, every step once and in order, and the findings ranked."""
    p = _plain(TRANSFORMER, tmp_path)
    t = load(p, cache=False)
    m = _json(analyze_windows(p, 3))
    kernels = t.gpu.filter(pl.col("kind") == "kernel")
    assert m["trace"]["kernels"] == kernels.height and m["trace"]["gpu_events"] == t.gpu.height
    assert m["trace"]["kernel_time_us"] == int(kernels["dur"].sum()) / 1000
    assert sum(r["count"] for r in m["categories"]) == t.gpu.height
    assert [r["step"] for r in m["steps"]] == sorted(t.steps["step"].to_list())
    wins = [r["win_back_us"] for r in m["findings"]]
    assert wins == sorted(wins, reverse=True)


def test_profiles_without_steps_or_with_other_options_are_read_whole(tmp_path):
    if TRACELENS_JAX.is_dir():
        for p in sorted(TRACELENS_JAX.glob("*.xplane.pb")):  # (no StepTraceAnnotation: windows could cut a module)
            with pytest.raises(NotWindowed, match="no step annotations"):
                analyze_windows(p, 3)
    with pytest.raises(NotWindowed, match="options"):
        analyze_windows(MLP, 3, step=1)
    with pytest.raises(NotWindowed, match="no plan"):
        analyze_windows(MLP, 1)


def test_a_step_in_two_windows_is_not_merged(tmp_path, monkeypatch):
    """Windows whose steps are not each whole in one (here: a window's steps renumbered to the next one's) are not
    merged into an answer that would count a step twice."""
    from kernscope.analyze import windows
    from kernscope.link import build

    p = _plain(TRANSFORMER, tmp_path)
    real = build.link

    def renumbered(raw, path, **kw):
        t = real(raw, path, **kw)
        return dataclasses.replace(t, steps=t.steps.with_columns(pl.lit(5, pl.Int64).alias("step")))

    monkeypatch.setattr(windows, "link", renumbered)
    with pytest.raises(NotWindowed, match="two windows"):
        analyze_windows(p, 3)


def test_merge_needs_each_windows_sums():
    a = analyze(load(MLP, cache=False))
    with pytest.raises(ValueError, match="keep_sums"):
        keep(a)
    with pytest.raises(ValueError, match="no windows"):
        merge([])


def test_findings_over_every_step_are_ranked_over_the_whole_profile(tmp_path):
    """With thresholds low enough that each window finds slow steps of its own (against its own median), the merged
    findings are still the whole profile's: step variance is judged against the median of every step."""
    from kernscope.analyze.findings import FindingRules

    rules_file = tmp_path / "rules.toml"
    rules_file.write_text("[step_variance]\nmin_steps = 2\nmin_excess_pct = 0.0\n")
    rules = FindingRules.load(rules_file)
    p = _plain(TRANSFORMER, tmp_path)
    whole = _json(analyze(load(p, cache=False), finding_rules=rules))
    assert sum(r["rule"] == "step_variance" for r in whole["findings"]) >= 1
    for k in (2, 3):
        parts = _json(analyze_windows(p, k, finding_rules=rules))
        assert parts["findings"] == whole["findings"] and parts["findings_by_kind"] == whole["findings_by_kind"]

