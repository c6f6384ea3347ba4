"""The same answers whatever polars' thread count: a group-by or a join that gives its rows in the order its threads
finish, left unsorted, would show here. Users run kernscope with polars on every core of their machine (16 and more);
``make test`` runs it on two cores, where a few thousand rows group alike at any count (a group-by of 3,000 rows came
out in one order at 1 and 8 threads, one of 200,000 rows in another order every run at 8). So this test runs the
analyses in fresh processes at one thread and at eight, on real traces of each kind (up to 109,000 events) and a JAX
profile read whole and by time windows."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import needs_traces, real_traces

DATA = Path(__file__).parent / "data"
#: a trace of each kind: CUDA graphs and Triton (A100), ns-resolution (V100), ROCm with activation checkpointing
#: (MI300X), hipGraph launches (vLLM), an eager B200 run
KINDS = ("a100_16rank_rank0_triton", "v100_ns_resolution", "mi300_resnet_act_checkpoint",
         "rocm_vllm_piecewise_hipgraph", "b200_eager_trace")

#: in a fresh process: each trace's analysis as JSON (cache off), the 40-step JAX profile's whole and in five windows,
#: and polars' thread count as it ran
SCRIPT = """
import json, sys
import polars as pl
from kernscope import load
from kernscope.analyze.summary import analyze
from kernscope.analyze.windows import analyze_windows
from kernscope.render.formats import text
out = {"threads": pl.thread_pool_size()}
for p in sys.argv[2:]:
    out[p] = text(analyze(load(p, cache=False), benchmark=None), "json")
out["jax whole"] = text(analyze(load(sys.argv[1], cache=False)), "json")
out["jax windows"] = text(analyze_windows(sys.argv[1], 5), "json")
print(json.dumps(out))
"""


def _analyses(threads: int, jax: Path, paths: list[str]) -> dict:
    env = {**os.environ, "POLARS_MAX_THREADS": str(threads)}
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(jax), *paths],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


@needs_traces
def test_analyses_are_the_same_at_one_and_eight_polars_threads(tmp_path):
    jax = tmp_path / "vm.xplane.pb"  # (plain: windows are read from a mapped file)
    jax.write_bytes(gzip.decompress((DATA / "jax_long_h200" / "vm.xplane.pb.gz").read_bytes()))
    paths = [str(p) for p in real_traces() if any(p.name.startswith(k) for k in KINDS)]
    assert len(paths) == len(KINDS), paths
    one, eight = _analyses(1, jax, paths), _analyses(8, jax, paths)
    assert (one.pop("threads"), eight.pop("threads")) == (1, 8)
    assert one.keys() == eight.keys() and len(one) == len(KINDS) + 2
    for what in one:
        if one[what] != eight[what]:
            a, b = json.loads(one[what]), json.loads(eight[what])
            bad = [s for s in a if a[s] != b.get(s)]
            pytest.fail(f"{what}: {bad} differ between 1 and 8 polars threads; first: {a[bad[0]]!s:.300} vs "
                        f"{b.get(bad[0])!s:.300}")
    # the JAX profile's windows give its whole analysis at either count (tests/test_jax_windowed_analysis.py)
    assert one["jax windows"] == one["jax whole"]
