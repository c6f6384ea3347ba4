"""The memory timeline (issue #29, item 2): ``[memory]`` events of ``profile_memory=True`` traces.

Real files: a GPT training step recorded on an H100 with ``profile_memory=True`` (``tests/data/memory_h100``,
``examples/record_example_trace.py --memory``), and public traces in ``../shared/traces`` (skipped when absent).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest
from conftest import TRACES

import kernscope
from kernscope.analyze.memory import memory_timeline
from kernscope.cli import main

H100 = Path(__file__).parent / "data" / "memory_h100" / "h100_gpt_memory.pt.trace.json.gz"
PUBLIC = [TRACES / "hta" / "v100_2rank_nccl_rank1.json.gz",
          TRACES / "tracelens" / "mi300_google_owlv2-large-patch14-ensemble__1016001.json.gz"]


def _raw(path: Path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


def _raw_peaks(events: list[dict]) -> dict[tuple[int, int], int]:
    peaks: dict[tuple[int, int], int] = defaultdict(int)
    for e in events:
        if e.get("name") == "[memory]":
            a = e["args"]
            peaks[(a["Device Type"], a["Device Id"])] = max(peaks[(a["Device Type"], a["Device Id"])], a["Total Allocated"])
    return dict(peaks)


def test_h100_peak_op_step_and_allocations_match_the_raw_file():
    raw = _raw(H100)
    m = memory_timeline(kernscope.load(H100, cache=False))
    assert m is not None
    mem = [e for e in raw if e.get("name") == "[memory]"]
    (dev,) = m.devices.iter_rows(named=True)
    assert (dev["device_type"], dev["device"], dev["events"]) == ("cuda", 0, len(mem))
    assert dev["peak_allocated"] == _raw_peaks(raw)[(1, 0)] == 1_165_149_184
    assert dev["peak_reserved"] == max(e["args"]["Total Reserved"] for e in mem)
    # the op at the peak: the innermost cpu_op of the peak event's thread that holds its time (plain Python here)
    peak = min((e for e in mem if e["args"]["Total Allocated"] == dev["peak_allocated"]), key=lambda e: e["ts"])
    around = [e for e in raw if e.get("cat") == "cpu_op" and e["tid"] == peak["tid"] and e["ts"] <= peak["ts"] <= e["ts"] + e["dur"]]
    assert dev["peak_op"] == max(around, key=lambda e: (e["ts"], -e["dur"]))["name"] == "aten::_log_softmax_backward_data"
    assert dev["peak_step"] == 2
    allocs = [e for e in mem if e["args"]["Bytes"] > 0]
    assert m.ops["allocations"].sum() == len(allocs) and m.ops["allocated_bytes"].sum() == sum(e["args"]["Bytes"] for e in allocs)
    assert m.ops["frees"].sum() == len(mem) - len(allocs)
    # a steady training loop: every step ends holding what it started with (parameters and optimizer state)
    assert m.steps["step"].to_list() == [2, 3, 4] and m.steps["growth"].to_list() == [0, 0, 0]
    assert m.steps["allocated_at_start"].to_list() == [411_443_200] * 3 == [dev["allocated_at_end"]] * 3


@pytest.mark.parametrize("path", PUBLIC, ids=["hta_v100", "tracelens_mi300"])
def test_public_traces_peak_equals_the_largest_total_allocated(path):
    if not path.is_file():
        pytest.skip("../shared/traces not present")
    m = memory_timeline(kernscope.load(path, cache=False))
    assert m is not None
    codes = {"cpu": 0, "cuda": 1, "hip": 6}
    got = {(codes[r["device_type"]], r["device"]): r["peak_allocated"] for r in m.devices.iter_rows(named=True)}
    assert got == _raw_peaks(_raw(path))


@pytest.mark.parametrize("path", [H100, *PUBLIC], ids=["h100", "hta_v100", "tracelens_mi300"])
def test_a_whole_load_holds_the_memory_args_and_a_projected_one_reads_them_again_alike(path, monkeypatch):
    """A whole load reads the ``[memory]`` events' args into the event table (``mem_*``): the memory events come from
    it, the file is not read again. A projected load that skips them (analyze's args) has them read from the file: the same
    events, sizes, devices and addresses, row for row; the raw JSON's count of ``[memory]`` events with args."""
    from kernscope.analyze.memory import memory_events
    from kernscope.analyze.needs import analyze_projection
    from kernscope.load import opargs

    if not path.is_file():
        pytest.skip("../shared/traces not present")
    whole = kernscope.load(path, cache=False)
    real = opargs.read_memory_args
    reads: list[int] = []

    def counted(p, wanted):
        reads.append(1)
        return real(p, wanted)

    monkeypatch.setattr(opargs, "read_memory_args", counted)
    got = memory_events(whole)
    assert reads == []
    proj = analyze_projection()
    assert proj is not None
    # (analyze's, keeping instant events: the memory events without their args)
    narrow = kernscope.load(path, cache=False, projection=dataclasses.replace(proj, drop_phases=()))
    assert narrow.events["mem_bytes"].null_count() == narrow.events.height  # (skipped: a null literal)
    again = memory_events(narrow)
    assert reads == [1]
    assert got.equals(again)
    assert got.height == sum(1 for e in _raw(path) if e.get("name") == "[memory]" and e.get("args"))
    assert got["bytes"].null_count() == 0 and got["allocated"].null_count() == 0


def _synthetic(path: Path) -> None:
    """Two steps; each allocates a 4 MiB activation (freed 50 µs later) and leaks 1 MiB; one free of a block
    allocated before the trace began."""
    ev, ts = [], 0.0
    total = 10 << 20
    for step in range(2):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1, "ts": ts,
                   "dur": 1000.0})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": ts + 10, "dur": 5.0})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::leak", "pid": 1, "tid": 1, "ts": ts + 20, "dur": 5.0})
        for t, b, addr in ((ts + 12, 4 << 20, 1000), (ts + 22, 1 << 20, 2000 + step), (ts + 62, -(4 << 20), 1000)):
            total += b
            ev.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": t,
                       "args": {"Total Reserved": 64 << 20, "Total Allocated": total, "Bytes": b, "Device Id": 0,
                                "Device Type": 1, "Addr": addr}})
        ts += 1000
    total -= 2 << 20
    ev.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts + 5,
               "args": {"Total Reserved": 64 << 20, "Total Allocated": total, "Bytes": -(2 << 20), "Device Id": 0,
                        "Device Type": 1, "Addr": 9}})
    path.write_text(json.dumps({"traceEvents": ev}))


def test_lifetimes_held_blocks_and_growth_across_steps(tmp_path):
    p = tmp_path / "mem.json"
    _synthetic(p)
    m = memory_timeline(kernscope.load(p, cache=False))
    assert m is not None
    ops = {r["op"]: r for r in m.ops.iter_rows(named=True)}
    assert ops["aten::empty"]["allocations"] == 2 and ops["aten::empty"]["mean_lifetime_us"] == pytest.approx(50.0)
    assert ops["aten::empty"]["held_blocks"] == 0 and ops["aten::leak"]["held_blocks"] == 2
    assert ops["aten::leak"]["held_bytes"] == 2 << 20 and ops["aten::leak"]["mean_lifetime_us"] is None
    assert m.steps["growth"].to_list() == [1 << 20, 1 << 20]  # the leak: held at each step's end grows
    assert m.devices["peak_allocated"][0] == (10 << 20) + (1 << 20) + (4 << 20) + (1 << 20) - 0  # in step 1, before its free
    assert any("allocated before the trace began" in n for n in m.notes)


def test_ops_on_two_devices_tied_on_bytes_come_in_one_order(tmp_path):
    """The by-op table is in a total order: ops tied on allocated bytes by name, then device type and device (an op
    freeing on the CPU and on GPU 0, no allocation on either, came out in either order from run to run)."""
    ev, total = [], 0
    for i in range(8):
        ts = 100.0 * i
        ev.append({"ph": "X", "cat": "cpu_op", "name": f"aten::op{i}", "pid": 1, "tid": 1, "ts": ts, "dur": 50.0})
        for k, (dtype, dev, b) in enumerate(((1, 0, -4096), (0, -1, -64), (1, 1, -128))):
            ev.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1,
                       "ts": ts + 10 + k, "args": {"Total Reserved": 1 << 20, "Total Allocated": total, "Bytes": b,
                                                   "Device Id": dev, "Device Type": dtype, "Addr": 100 * i + k}})
    p = tmp_path / "ties.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    m = memory_timeline(kernscope.load(p, cache=False))
    assert m is not None
    got = [(r["op"], r["device_type"], r["device"]) for r in m.ops.iter_rows(named=True)]
    assert got == sorted(got) and len(got) == 24, got


def test_cli_memory_outputs_and_report(tmp_path, capsys):
    assert main(["memory", str(H100), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["devices"][0]["peak_allocated"] == 1_165_149_184 and doc["events"] == 2022
    assert main(["memory", str(H100)]) == 0
    out = capsys.readouterr().out
    assert "1.09 GiB" in out and "aten::_log_softmax_backward_data" in out
    # lifetimes in the unit that reads best, as every other time in the terminal (it read "3,816.5 µs")
    empty_strided = next(line for line in out.splitlines() if line.startswith("aten::empty_strided "))
    assert "3.817 ms" in empty_strided, empty_strided
    plain = Path(kernscope.__file__).parent / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    assert main(["memory", str(plain)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "profile_memory=True" in err[0]
    html = tmp_path / "r.html"
    assert main(["report", str(H100), "-o", str(html), "-q"]) == 0
    page = html.read_text()
    data = json.loads(page.split('id="ks-data">', 1)[1].split("</script>", 1)[0])
    (dev,) = data["memory"]
    assert dev["label"] == "cuda:0" and dev["peak"]["bytes"] == 1_165_149_184
    assert {v["name"] for v in data["views"]} >= {"memory_devices", "memory_steps", "memory_ops"}


JAX = Path(__file__).parent / "data" / "jax" / "transformer" / "vm.xplane.pb.gz"


def test_a_jax_profile_has_a_memory_timeline_from_xlas_allocator_events(capsys):
    """A JAX profile records XLA's allocator events by default (``MemoryAllocation``/``MemoryDeallocation``: the
    block's size and address, the allocator's bytes in use after it): ``kernscope memory`` reads them (it answered
    "record the trace with torch.profiler.profile(profile_memory=True)"). Checked against the events' own stats."""
    import polars as pl

    t = kernscope.load(JAX, cache=False)
    raw = (t.events.filter(pl.col("name").cast(pl.String).is_in(["MemoryAllocation", "MemoryDeallocation"]))
           .select(pl.col("name").cast(pl.String), "ts", "bytes_allocated", "allocation_bytes", "addr",
                   pl.col("allocator_name").cast(pl.String)).sort("ts"))
    assert raw.height == 78 and set(raw["allocator_name"]) == {"GPU_0_bfc"}
    m = memory_timeline(t)
    assert m is not None
    d = m.devices.row(0, named=True)
    assert (d["device_type"], d["device"], d["events"]) == ("gpu", 0, 78)
    assert d["peak_allocated"] == raw["bytes_allocated"].max() and d["allocated_at_end"] == raw["bytes_allocated"][-1]
    assert d["peak_reserved"] is None  # the BFC allocator reports none (0)
    assert d["peak_op"] == "Build buffer allocations"
    allocs = raw.filter(pl.col("name") == "MemoryAllocation")
    assert m.ops["allocations"].sum() == allocs.height and m.ops["allocated_bytes"].sum() == allocs["allocation_bytes"].sum()
    assert m.ops["frees"].sum() == raw.height - allocs.height
    # blocks by address: an allocation whose block is not freed after it (before the address is allocated again) is
    # held at the end; a free of a block allocated before the profile began is counted apart (in a note)
    by_addr: dict[int, list[str]] = {}
    for name, addr in raw.select("name", "addr").iter_rows():  # (in time order)
        by_addr.setdefault(addr, []).append(name)
    held = sum(seq[i] == "MemoryAllocation" and (i + 1 == len(seq) or seq[i + 1] != "MemoryDeallocation")
               for seq in by_addr.values() for i in range(len(seq)))
    early = sum(seq[i] == "MemoryDeallocation" and (i == 0 or seq[i - 1] != "MemoryAllocation")
                for seq in by_addr.values() for i in range(len(seq)))
    assert m.ops["held_blocks"].sum() == held == 11 and f"{early} frees of blocks allocated before the trace began" in m.notes
    s = m.steps
    assert s["step"].to_list() == [0, 1, 2] and (s["growth"] == s["allocated_at_end"] - s["allocated_at_start"]).all()
    assert main(["memory", str(JAX), "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "gpu:0" in out and "1.01 GiB" in out
    # the per-step table keeps to --top as every long table (a 3,300-step profile printed every step)
    assert main(["memory", str(JAX), "--no-cache", "--top", "2"]) == 0
    section = capsys.readouterr().out.split("Per step")[1].split("\n\n")[0].splitlines()
    assert [ln.split()[1] for ln in section[2:4]] == ["0", "1"] and section[4:] == ["… 1 more"]


def test_a_jax_profile_without_allocator_events_says_so(tmp_path, capsys):
    """A profile without XLA's allocator events (here: the events renamed in the file, names of the same length):
    one line that says so, not PyTorch's profile_memory advice."""
    data = gzip.decompress(JAX.read_bytes())
    assert data.count(b"MemoryAllocation") == 1 and data.count(b"MemoryDeallocation") == 1  # (the event metadata)
    p = tmp_path / "none.xplane.pb"
    p.write_bytes(data.replace(b"MemoryAllocation", b"MemoryAllocatioX").replace(b"MemoryDeallocation", b"MemoryDeallocatioX"))
    assert memory_timeline(kernscope.load(p, cache=False)) is None
    assert main(["memory", str(p), "--no-cache"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "XLA's allocator events" in err[0] and "profile_memory" not in err[0]


def test_a_step_starting_with_a_free_peaks_at_its_start_and_cpu_has_no_reserve(tmp_path):
    """A step whose first event frees a block held more before it than after any of its events: its peak read
    below its own allocated_at_start (a JAX profile's steps: start 1.73 GB, peak 1.15 GB). And the CPU allocator's
    events say Total Reserved 0 while holding bytes: peak_reserved 0 under a peak_allocated of 152 MB (owlv2); null."""
    ev = []
    for step in range(2):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1,
                   "ts": 1000.0 * step, "dur": 900.0})
    mem = [(100.0, 1, 0, 8 << 20, 8 << 20, 1), (950.0, 1, 0, 4 << 20, 12 << 20, 2),  # step 0, then between steps
           (1100.0, 1, 0, -(8 << 20), 4 << 20, 1), (1200.0, 1, 0, 1 << 20, 5 << 20, 3),  # step 1 opens with a free
           (120.0, 0, -1, 64, 64, 7), (1300.0, 0, -1, -64, 0, 7)]
    for ts, dtype, dev, b, total, addr in mem:
        ev.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
                   "args": {"Total Reserved": (32 << 20) if dtype else 0, "Total Allocated": total, "Bytes": b,
                            "Device Id": dev, "Device Type": dtype, "Addr": addr}})
    p = tmp_path / "free_first.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    m = memory_timeline(kernscope.load(p, cache=False))
    assert m is not None
    s1 = m.steps.filter((pl.col("device_type") == "cuda") & (pl.col("step") == 1)).row(0, named=True)
    assert s1["allocated_at_start"] == 12 << 20 and s1["allocated_at_end"] == 5 << 20
    assert s1["peak_allocated"] == 12 << 20  # the level it started at, not 5 MiB
    cpu = m.devices.filter(pl.col("device_type") == "cpu").row(0, named=True)
    assert cpu["peak_allocated"] == 64 and cpu["peak_reserved"] is None
    assert m.steps.filter(pl.col("device_type") == "cpu")["peak_reserved"].to_list() == [None, None]
    assert m.devices.filter(pl.col("device_type") == "cuda")["peak_reserved"].to_list() == [32 << 20]
