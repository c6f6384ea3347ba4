"""Bench numbers you can trust: machine state per cell, interleaved timing, confidence intervals, clock locking."""

from __future__ import annotations

import functools
import json
import math
import statistics
import time
from typing import Any

import numpy as np
import pytest

from kernscope.bench.machine import CellMachine, GpuState, lock_clocks, reasons_of
from kernscope.bench.stats import median_ci, ratio_ci, within_noise
from kernscope.bench.timing import Prepared, measure_batches

torch = pytest.importorskip("torch")

from kernscope.bench.api import Input, Operator, impl  # noqa: E402
from kernscope.bench.runner import run  # noqa: E402
from kernscope.cli import main  # noqa: E402


def test_median_ci_and_ratio_ci():
    import random

    rng = random.Random(1)
    small = [1.0 + rng.gauss(0, 0.01) for _ in range(50)]
    big = [1.0 + rng.gauss(0, 0.01) for _ in range(5000)]
    lo, hi = median_ci(small)
    lo2, hi2 = median_ci(big)
    assert lo < sorted(small)[25] < hi and (hi2 - lo2) < (hi - lo)  # more samples: a narrower interval
    assert median_ci([3.0]) == (3.0, 3.0) and median_ci([1.0, 2.0, 5.0]) == (1.0, 5.0)
    twice = [2 * x for x in small]
    r = ratio_ci(twice, small)
    assert 1.9 < r[0] < 2.0 < r[1] < 2.1 and not within_noise(r)
    assert within_noise(ratio_ci(small, small))  # the same samples: the interval contains 1


def test_cell_machine_flags_moving_clocks():
    steady = CellMachine("fake")
    for _ in range(4):
        steady.add(GpuState(1980.0, 2619.0, 650.0, 60.0, ("gpu_idle",)))
    assert not steady.moved and steady.readings == 4
    drop = CellMachine("fake")
    drop.add(GpuState(1980.0, 2619.0, 690.0, 70.0))
    drop.add(GpuState(1755.0, 2619.0, 700.0, 75.0))
    assert drop.moved and drop.sm_min_mhz == 1755 and drop.power_max_w == 700
    capped = CellMachine("fake")
    capped.add(GpuState(1980.0, 2619.0, 700.0, 70.0, reasons_of(0x4)))
    assert capped.moved and capped.reasons == ["sw_power_cap"]
    assert reasons_of(0x1 | 0x20 | 0x40) == ("gpu_idle", "sw_thermal_slowdown", "hw_thermal_slowdown")
    assert CellMachine("none").to_dict()["moved"] is False


def test_batches_are_round_robin():
    calls: list[str] = []
    items = {k: Prepared(functools.partial(calls.append, k), None, 1.0, 0) for k in "ab"}
    readings: list[str] = []
    out = measure_batches(items, {"a": 9, "b": 9}, device="cpu", flusher=None, batch_ms=3.0, read=lambda: 0,
                          on_reading=lambda k, _s: readings.append(k))
    assert [len(out["a"]), len(out["b"])] == [9, 9]
    assert "".join(calls) == "aaabbb" "bbbaaa" "aaabbb"  # batches of 3, each round starting one item later
    assert len(readings) == 2 * 6  # a reading before and after every batch
    calls.clear()
    measure_batches(items, {"a": 4, "b": 4}, device="cpu", flusher=None, batch_ms=None)
    assert "".join(calls) == "aaaabbbb"  # not interleaved: one after the other


class _Sleepy(Operator):
    name = "sleepy"
    x_label = ("ms",)
    default_dtype = "float32"

    def inputs(self):
        yield Input((1,), ())

    @impl(baseline=True)
    def slow(self):
        # 10x the fast one's sleep: a busy 2-core machine oversleeps by a ms or more, which at 2x (session 29) and at
        # 4x (a fresh clone's make test, session 36: a measured 2.1x read as noise) left the two cells' samples
        # overlapping enough to read as noise
        return lambda: time.sleep(0.010)

    @impl
    def fast(self):
        return lambda: time.sleep(0.001)


class _Drifting:
    """A fake GPU whose SM clock drops during the run."""

    name = "fake"

    def __init__(self) -> None:
        self.n = 0

    def read(self) -> GpuState:
        self.n += 1
        return GpuState(1980.0 - 10 * self.n, 2619.0, 600.0 + self.n, 50.0 + self.n)


class _Throttled:
    """A fake GPU at 1980 MHz max that alternates between 1980 and 990 MHz every other reading pair, and a callable
    whose time follows the clock (what a compute-bound kernel does): 1 ms at 1980 MHz, 2 ms at 990 MHz."""

    name = "fake"

    def __init__(self) -> None:
        self.n = 0
        self.mhz = 1980.0

    def max_sm_mhz(self) -> float:
        return 1980.0

    def read(self) -> GpuState:
        self.n += 1
        if self.n % 2 == 1:  # a reading before a batch sets the clock for the batch
            self.mhz = 1980.0 if (self.n // 2) % 2 == 0 else 990.0
        return GpuState(self.mhz, 2619.0, 600.0, 50.0)


class _Clock:
    """The host clock the CPU timer reads (``time.perf_counter_ns``), advanced by the work itself: samples that do
    not depend on how busy the machine is (a ``time.sleep`` of 1 ms overslept to 1.5 ms under the suite's load)."""

    def __init__(self) -> None:
        self.ns = 0

    def perf_counter_ns(self) -> int:
        return self.ns

    def perf_counter(self) -> float:
        return self.ns / 1e9


def test_samples_carry_their_clock_and_the_normalized_median_removes_it(monkeypatch):
    from kernscope.bench import timing
    from kernscope.bench.timing import summarize

    gpu = _Throttled()
    clock = _Clock()
    monkeypatch.setattr(timing, "time", clock)

    def call() -> None:  # 1 ms at 1980 MHz, 2 ms at 990 MHz
        clock.ns += round(1e6 * 1980.0 / gpu.mhz)

    work = {"a": call}
    items = {k: Prepared(f, None, 1.0, 0) for k, f in work.items()}
    clocks: dict[str, list[float]] = {}
    out = measure_batches(items, {"a": 12}, device="cpu", flusher=None, batch_ms=3.0, read=gpu.read, sm_mhz=clocks)
    assert len(clocks["a"]) == len(out["a"]) == 12 and sorted(set(clocks["a"])) == [990.0, 1980.0]
    t = summarize(out["a"], "perf_counter").with_clocks(clocks["a"], gpu.max_sm_mhz())
    slow = [x for x, f in zip(out["a"], clocks["a"]) if f == 990.0]
    assert min(slow) > 1.8  # the raw samples: half of them take twice as long
    assert t.at_ref_clock_ms == pytest.approx(1.0, rel=0.3) and t.ref_sm_mhz == 1980.0
    # normalized, the samples are 1 ms
    norm = sorted(x * f / 1980.0 for x, f in zip(out["a"], clocks["a"]))
    assert norm[len(norm) // 2] < 1.5 and norm[len(norm) // 2] < 0.75 * min(slow)
    assert t.sm_mhz_median in (990.0, 1485.0, 1980.0)
    # unknown clocks: no normalization, never a wrong number
    same = summarize(out["a"], "perf_counter").with_clocks([float("nan")] * 12, 1980.0)
    assert math.isnan(same.at_ref_clock_ms) and math.isnan(same.sm_mhz_median)


def test_run_records_state_ci_and_speedup_noise(tmp_path):

    from kernscope.bench.stats import cliffs_delta
    from kernscope.render.bench import machine_table
    from kernscope.render.formats import Options, text

    r = run(_Sleepy, device="cpu", metrics=["latency", "speedup"], warmup=5, rep=200, backend=_Drifting(), batch_ms=20)
    cols, rows = machine_table(r)
    assert len(rows) == 2 and all(len(row) == len(cols) for row in rows)
    for width in (80, 200):  # the terminal tables, with a row per cell of machine state
        assert "GPU state while each cell was timed" in text(r, "table", Options(width=width))
    slow, fast = r.cells
    assert slow.metrics["speedup_noise"] is True  # the baseline against itself
    # the speedup is the baseline's median over this cell's: 10 ms over 1 ms of sleep, less where a busy machine
    # oversleeps both by the same ms or more (2 ms over 1 ms gave 1.58 once, 4 over 1 gave 2.1): its arithmetic
    # exactly, its size only roughly
    assert fast.metrics["speedup"] == pytest.approx(statistics.median(slow.timing.samples_ms) / fast.timing.median_ms)
    assert 2.5 < fast.metrics["speedup"] < 12.0 and fast.metrics["speedup_noise"] is False
    # the effect is Cliff's delta of the two cells' own samples; how large it is depends on how well the machine
    # kept its sleeps (a busy 2-core machine once gave -0.46, "medium"): only its sign and that it is not negligible
    assert fast.metrics["speedup_effect"] == pytest.approx(cliffs_delta(fast.timing.samples_ms, slow.timing.samples_ms))
    assert fast.metrics["speedup_verdict"] == "faster" and fast.metrics["speedup_effect"] < -0.147
    assert fast.metrics["speedup_test"] in ("bootstrap", "mann-whitney") and fast.metrics["speedup_p"] < 0.05
    assert slow.metrics["speedup_verdict"] == "within noise"
    lo, hi = fast.metrics["speedup_ci"]
    assert lo <= fast.metrics["speedup"] <= hi
    for c in r.cells:
        assert c.timing.ci_low_ms <= c.timing.median_ms <= c.timing.ci_high_ms
        assert c.machine.readings >= 2 and c.machine.moved  # 10 MHz per reading: well past 1%
    assert r.env["clocks"] == {"locked": False, "mhz": None, "requested": False, "message": "not requested", "monitor": "fake"}
    doc = r.to_dict()
    m = doc["results"][1]["machine"]
    assert m["moved"] and m["sm_max_mhz"] > m["sm_min_mhz"] and m["before"]["sm_mhz"] > m["after"]["sm_mhz"]
    assert doc["results"][1]["timing"]["ci_low_ms"] > 0


def test_cli_states_clocks_and_lock_failure(tmp_path, capsys):
    assert lock_clocks("cpu", "max").locked is False
    args = ["bench", "--op", "softmax", "--device", "cpu", "--num-inputs", "1", "--warmup", "2", "--rep", "5",
            "--metrics", "latency,speedup", "--lock-clocks", "max", "--cooldown", "0.01", "--json", str(tmp_path / "r.json")]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "clocks: not locked (could not: nvidia-smi not found)" in out and "±" in out
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["env"]["clocks"]["requested"] and not doc["env"]["clocks"]["locked"]
    # (a short warm-up and duration: on a CPU each call is preceded by a 64 MB flush, ~10 ms here, that neither counts)
    assert main(["bench", "--op", "softmax", "--device", "cpu", "--num-inputs", "1", "--warmup", "1", "--duration", "0.005",
                 "--no-interleave", "--format", "json"]) == 0
    cell = json.loads(capsys.readouterr().out)["results"][0]
    assert cell["timing"]["n"] >= 5


def test_mann_whitney_and_cliffs_delta_by_hand():
    from kernscope.bench.stats import cliffs_delta, effect_label, mann_whitney

    u, p = mann_whitney([1, 2, 3], [4, 5, 6])  # every a below every b: U = 0
    # normal approximation with continuity: var = 3*3/12*7 = 5.25, z = (4.5 - 0.5)/sqrt(5.25)
    assert u == 0 and p == pytest.approx(math.erfc((4.0 / math.sqrt(5.25)) / math.sqrt(2)), rel=1e-9)
    assert cliffs_delta([1, 2, 3], [4, 5, 6]) == -1.0 and cliffs_delta([4, 5, 6], [1, 2, 3]) == 1.0
    u, p = mann_whitney([1, 1, 2], [1, 2, 2])  # ties: average ranks, tie-corrected variance
    # ranks: the three 1s share 2, the three 2s share 5; U = 9 - 6 = 3; var = 9/12 * (7 - 2*(27-3)/30) = 4.05
    assert u == 3.0 and p == pytest.approx(math.erfc((1.0 / math.sqrt(4.05)) / math.sqrt(2)), rel=1e-9)
    assert cliffs_delta([5.0] * 4, [5.0] * 4) == 0.0 and effect_label(0.1) == "negligible" and effect_label(-0.5) == "large"


def test_verdict_picks_the_test_that_fits():
    from kernscope.bench.stats import skewed, verdict

    rng = np.random.default_rng(1)
    a = list(1.0 + 0.01 * rng.standard_normal(400))
    faster: dict[str, Any] = verdict(a, [x * 0.9 for x in a])
    assert faster["verdict"] == "faster" and faster["test"] == "bootstrap" and faster["ratio"] == pytest.approx(0.9)
    assert faster["ratio_ci"][1] < 1 and faster["effect"] == "large"
    same: dict[str, Any] = verdict(a, list(1.0 + 0.01 * rng.standard_normal(400)))
    assert same["verdict"] == "within noise" and same["ratio_ci"][0] <= 1 <= same["ratio_ci"][1]
    tail = list(1.0 + 0.01 * rng.standard_normal(400)) + [3.0] * 40  # stalls: a long tail
    assert skewed(tail) and not skewed(a)
    v = verdict(a, tail)
    assert v["test"] == "mann-whitney" and v["verdict"] == "within noise"  # the bulk did not move


def test_compare_two_runs(tmp_path, capsys, monkeypatch):
    from kernscope.cli import main

    rng = np.random.default_rng(2)

    def doc(scale, mhz, torch_v):
        res = []
        for i, x in enumerate([[1024], [4096]]):
            for name in ("torch_add", "triton_add"):
                base = 0.1 * (i + 1) * (1.0 + 0.01 * rng.standard_normal(300))
                f = scale if name == "triton_add" and i == 1 else 1.0
                res.append({"input_id": i, "x": x, "impl": name, "error": None, "metrics": {},
                            "timing": {"samples_ms": list(base * f), "sm_mhz_median": mhz if i == 1 else 1980.0}})
        return {"op": "vector_add", "mode": "fwd", "dtype": "float32", "results": res,
                "env": {"gpu": "NVIDIA H100", "torch": torch_v, "clocks": {"locked": False}}}

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(doc(1.0, 1980.0, "2.11")))
    b.write_text(json.dumps(doc(1.25, 1755.0, "2.12")))
    assert main(["bench", "--compare", str(a), str(b), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    cells = {(c["impl"], c["input"]): c for c in out["cells"]}
    assert len(cells) == 4
    slow = cells[("triton_add", "(4096)")]
    assert slow["verdict"] == "slower" and slow["ratio"] == pytest.approx(1.25, rel=0.02) and slow["clock_moved"]
    assert cells[("torch_add", "(1024)")]["verdict"] in ("within noise", "faster", "slower")
    assert cells[("torch_add", "(1024)")]["clock_moved"] is False
    assert any("torch differs: A 2.11, B 2.12" in n for n in out["notes"])
    assert any("2 cell(s) ran at a median SM clock" in n for n in out["notes"])
    assert main(["bench", "--compare", str(a), str(b)]) == 0
    text = capsys.readouterr().out
    assert "slower ⚠" in text and "B/A [95% CI]" in text
    for width in (60, 80):  # narrow: impl names whole and the verdict shown, the medians and the test left out first
        monkeypatch.setenv("COLUMNS", str(width))
        assert main(["bench", "--compare", str(a), str(b)]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert max(map(len, lines)) <= width
        rows = [ln for ln in lines if ln.startswith(("tri", "tor"))]
        assert len(rows) == 4 and all(ln.split()[0] in ("torch_add", "triton_add") for ln in rows)
        assert any("slower ⚠" in ln for ln in rows)
    # a run's options beside --compare (which runs nothing) are refused: --json FILE wrote no file
    monkeypatch.delenv("COLUMNS", raising=False)
    assert main(["bench", "--compare", str(a), str(b), "--json", str(tmp_path / "c.json"), "--op", "gemm"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["kernscope: error: --compare compares two result files and runs nothing: --op, --json do not apply to it"]
    assert not (tmp_path / "c.json").exists()
    other = tmp_path / "o.json"
    other.write_text(json.dumps({**doc(1.0, 1980.0, "2.11"), "op": "softmax"}))
    assert main(["bench", "--compare", str(a), str(other)]) == 2
    assert "compare runs of one operator" in capsys.readouterr().err
    (tmp_path / "x.json").write_text("[1, 2]")
    assert main(["bench", "--compare", str(a), str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a kernscope bench result file" in err[0]


def test_compare_with_tritonbench_result_files(tmp_path, capsys, monkeypatch):
    """#27.5: TritonBench's --output CSV (';'-separated, '<impl>-<metric>' columns, an 'average' row) and its
    --output-json compared with a kernscope run of the same operator under TritonBench's names. TritonBench's
    attention input has no causal flag: cells match on the parameters both list."""
    csv_text = ("(Batch, Heads, SeqLen, Dhead);cudnn-latency;cudnn-tflops;triton_tutorial_flash_v2-latency\n"
                "(4, 48, 128, 64);0.0150;51.2;0.0140\n(4, 48, 256, 64);0.0200;110.0;0.0200\n"
                "average;0.0175;80.6;0.0195\n")
    tb_csv = tmp_path / "op_flash_attention_abc123.csv"
    tb_csv.write_text(csv_text)
    tb_json = tmp_path / "tb.json"
    tb_json.write_text(json.dumps({"tritonbench_flash_attention_fwd[x_(4, 48, 128, 64)-cudnn]_latency": 0.0150,
                                   "tritonbench_flash_attention_fwd[x_(4, 48, 128, 64)-cudnn]_tflops": 51.2,
                                   "tritonbench_flash_attention_fwd[x_(4, 48, 256, 64)-cudnn]_latency": 0.0200}))
    rng = np.random.default_rng(3)
    res = [{"input_id": i, "x": [4, 48, s, 64, False], "impl": name, "error": None, "metrics": {},
            "timing": {"samples_ms": list(med * (1 + 0.001 * rng.standard_normal(200))), "sm_mhz_median": 1980.0}}
           for i, s in enumerate((128, 256)) for name, med in (("cudnn", 0.0131 if s == 128 else 0.0186),
                                                              ("triton_tutorial_flash_v2", 0.0129 if s == 128 else 0.0222))]
    ks = tmp_path / "ks.json"
    ks.write_text(json.dumps({"op": "flash_attention", "mode": "fwd", "dtype": "bfloat16", "results": res, "env": {}}))
    assert main(["bench", "--compare", str(tb_csv), str(ks), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    cells = {(c["impl"], c["input"]): c for c in out["cells"]}
    assert set(cells) == {("cudnn", "(4, 48, 128, 64, False)"), ("cudnn", "(4, 48, 256, 64, False)"),
                          ("triton_tutorial_flash_v2", "(4, 48, 128, 64, False)"),
                          ("triton_tutorial_flash_v2", "(4, 48, 256, 64, False)")}
    c = cells[("cudnn", "(4, 48, 128, 64, False)")]
    assert c["median_a_ms"] == 0.0150 and c["ratio"] == pytest.approx(0.0131 / 0.0150, rel=1e-2)
    assert c["test"] == "none (medians only)" and c["ratio_low"] is None and c["verdict"] == "B faster (no test)"
    assert cells[("triton_tutorial_flash_v2", "(4, 48, 256, 64, False)")]["verdict"] == "B slower (no test)"
    assert out["op"] == "flash_attention" and any("A is a TritonBench result file" in n for n in out["notes"])
    monkeypatch.setenv("COLUMNS", "160")
    assert main(["bench", "--compare", str(tb_json), str(ks)]) == 0  # the JSON form; terminal table
    text = capsys.readouterr().out
    assert "B faster (no test)" in text and "none (medians only)" in text
    assert "0 cell(s) only in A, 2 only in B" in text  # triton_tutorial_flash_v2: counted, not compared
    bad = tmp_path / "op_x_1.csv"
    bad.write_text("a,b,c\n1,2,3\n")
    assert main(["bench", "--compare", str(bad), str(ks)]) == 2
    assert "not a TritonBench result CSV" in capsys.readouterr().err
