"""Units that cannot mislead (issue #28, item 2): Proton's cycles stay cycles unless a known SM clock turns them
into time, with the clock's source said, in the table, JSON, HTML, hatchet, view and export alike."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from kernscope.cli import main

TRACE = Path(__file__).parent / "data" / "proton_h100" / "tutorial_override.chrome_trace.gz"


def _raw_cycles() -> dict[str, int]:
    out: dict[str, int] = {}
    for e in json.loads(gzip.decompress(TRACE.read_bytes()))["traceEvents"]:
        if e.get("ph") == "X":  # µs at Proton's 1,000 MHz convention: x 1000 = cycles
            out[e["name"]] = out.get(e["name"], 0) + round(e["dur"] * 1000)
    return out


def _stats(capsys, *args: str) -> dict:
    assert main(["intra", "stats", *args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_proton_cycles_stay_cycles_without_a_clock(capsys):
    assert main(["intra", "stats", str(TRACE)]) == 0
    out = capsys.readouterr().out
    assert "kcycles" in out and "µs" not in out and "times are SM cycles" in out
    doc = _stats(capsys, str(TRACE))
    assert doc["summary"]["time_unit"] == "cycles" and doc["summary"]["clock_ghz"] is None
    assert not [k for row in doc["tasks"] for k in row if k.endswith("_ns")]  # no key says ns of a cycle count
    assert {r["task"]: r["total_cycles"] for r in doc["tasks"]} == pytest.approx(_raw_cycles(), abs=388)
    tree = {r["name"]: r for r in doc["scopes"]}
    assert all(r["total_ns"] is None for r in tree.values())
    assert {n: r["total_cycles"] for n, r in tree.items()} == pytest.approx(_raw_cycles(), abs=388)


def test_clock_ghz_turns_cycles_into_time_and_says_so(capsys):
    doc = _stats(capsys, str(TRACE), "--clock-ghz", "1.98")
    s = doc["summary"]
    assert s["time_unit"] == "ns" and s["clock_ghz"] == 1.98 and s["clock_source"] == "--clock-ghz"
    raw = _raw_cycles()
    got = {r["task"]: r["total_ns"] for r in doc["tasks"]}
    assert got == pytest.approx({k: v / 1.98 for k, v in raw.items()}, rel=2e-3)  # each task rounded to 1 ns
    assert main(["intra", "stats", str(TRACE), "--clock-ghz", "1.98"]) == 0
    out = capsys.readouterr().out
    assert "µs" in out and "kcycles" not in out
    assert "SM clock 1.980 GHz (--clock-ghz)" in out


def test_clock_recorded_next_to_the_run_is_used_and_named(tmp_path, capsys):
    p = tmp_path / "proton.chrome_trace.gz"
    shutil.copyfile(TRACE, p)
    side = tmp_path / "proton.chrome_trace.gz.clock.json"
    side.write_text(json.dumps({"sm_clock_ghz": 1.98, "source": "max SM clock of the NVIDIA H100, recorded with the run"}))
    s = _stats(capsys, str(p))["summary"]
    assert s["time_unit"] == "ns" and s["clock_ghz"] == 1.98 and "recorded with the run" in s["clock_source"]
    assert "proton.chrome_trace.gz.clock.json" in s["clock_source"]
    assert _stats(capsys, str(p), "--clock-ghz", "1.5")["summary"]["clock_ghz"] == 1.5  # the option wins
    for bad in ('{"sm_clock_ghz": 0}', '{"sm_clock_ghz": "fast"}', "not json", '{"sm_clock_ghz": 1e9}'):
        side.write_text(bad)
        assert _stats(capsys, str(p))["summary"]["time_unit"] == "cycles"  # an unusable clock is not believed


def test_a_proton_trace_at_a_real_frequency_is_time_with_that_clock(tmp_path, capsys):
    doc = json.loads(gzip.decompress(TRACE.read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("ph") == "X":
            e["args"]["Frequency (MHz)"] = 1980.0
    p = tmp_path / "real.chrome_trace"
    p.write_text(json.dumps(doc))
    s = _stats(capsys, str(p))["summary"]
    assert s["time_unit"] == "ns" and s["clock_ghz"] == pytest.approx(1.98) and "1980 MHz" in s["clock_source"]


def test_hatchet_view_export_and_html_keep_the_unit(tmp_path, capsys):
    h = tmp_path / "t.hatchet"
    assert main(["intra", "stats", str(TRACE), "--hatchet", str(h), "--html", str(tmp_path / "t.html")]) == 0
    capsys.readouterr()
    kernel = json.loads(h.read_text())[0]["children"][0]["children"][0]
    assert "cycles" in kernel["metrics"] and "time (ns)" not in kernel["metrics"]  # no time made up
    page = (tmp_path / "t.html").read_text()
    assert '"time_unit": "cycles"' in page or '"time_unit":"cycles"' in page
    assert main(["intra", "view", str(TRACE), "-m", "time/us"]) == 0
    cap = capsys.readouterr()
    assert "no time without an SM clock; showing cycles" in cap.err and "cycles" in cap.out
    assert main(["intra", "view", str(TRACE), "-m", "time/us", "--clock-ghz", "1.98"]) == 0
    assert capsys.readouterr().err == ""
    out = tmp_path / "t.json"
    assert main(["intra", "export", str(TRACE), "-o", str(out)]) == 0
    assert "1 cycle = 1 ns" in capsys.readouterr().err
    assert json.loads(out.read_text())["otherData"]["time_unit"] == "cycles"
    assert _stats(capsys, str(out))["summary"]["time_unit"] == "cycles"  # read back: still cycles
