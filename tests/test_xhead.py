"""The head start of a large JAX profile's windowed ``analyze`` (``kernscope.load.xhead``): the lines' time index made
on a thread while the command imports is the one the near plan makes itself, on every real profile; it is taken only
for the file and lines it was made of, and where it could not be made the plan reads the file itself and says what
is wrong; the command starts one only where ``analyze`` reads the profile a window at a time."""

from __future__ import annotations

import dataclasses
import importlib
import json
import mmap
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_jax import MLP, TRANSFORMER
from test_jax_windowed_analysis import LONG, _plain

from kernscope.analyze.windows import analyze_windows
from kernscope.errors import TraceError
from kernscope.load.native import scanner
from kernscope.load.protowire import as_array
from kernscope.render.formats import text

xplane = importlib.import_module("kernscope.load.xplane")
xplan = importlib.import_module("kernscope.load.xplan")
xscan = importlib.import_module("kernscope.load.xscan")
xhead = importlib.import_module("kernscope.load.xhead")
replay = importlib.import_module("kernscope.replay")
files = importlib.import_module("kernscope.files")
pytestmark = pytest.mark.skipif(scanner() is None, reason="the head start needs the compiled XSpace scanner")
DATA = Path(__file__).parent / "data"
PROFILES = [MLP, TRANSFORMER, DATA / "multigpu_h200" / "jax_dp.xplane.pb.gz", LONG]


@pytest.fixture(autouse=True)
def _files_just_written(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(xhead, "RACY_NS", 0)  # (the plain copies are written here: their change time is now)
    monkeypatch.setattr(xplan, "NEAR_MOST_SHARE", 10.0)  # (the near plan on small profiles: see test_jax_near_plan)


def _mapped(path: Path) -> mmap.mmap:
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def _equal(a: Any, b: Any) -> None:
    for f in dataclasses.fields(a):
        if f.name != "buf":
            assert np.array_equal(getattr(a, f.name), getattr(b, f.name)), f.name


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.parent.name)
def test_the_head_starts_index_is_the_plans_own(path: Path, tmp_path: Path) -> None:
    p = _plain(path, tmp_path)
    head = xhead.XHeadStart.begin(str(p), 0)
    assert head is not None
    data = _mapped(p)
    base = xplane.lines_and_metadata(data, str(p))
    buf = as_array(data)
    # the lines found without the planes' metadata are the decode's
    off, size = xscan.xspace_lines(buf)
    assert off.tolist() == base.line_off.tolist() and size.tolist() == base.line_len.tolist()
    got = head.take(str(p), buf, base.line_off, base.line_len, xscan.NEAR_STRIDE)
    assert got is not None and head.failed is None
    assert got.buf is buf  # (it reads the plan's mapping from now on, not the thread's, which is closed)
    assert head._data is None
    _equal(xscan.line_index(buf, base.line_off, base.line_len, xscan.NEAR_STRIDE), got)
    # and the plan with it is the plan without it
    with_head = xplan.plan_near(data, str(p), 3, head=xhead.XHeadStart.begin(str(p), 0))
    without = xplan.plan_near(data, str(p), 3)
    assert (with_head is None) == (without is None)
    if without is not None:
        assert with_head.cuts.times.tolist() == without.cuts.times.tolist()
        assert with_head.step_after.tolist() == without.step_after.tolist()


def test_an_index_is_taken_only_for_its_file_lines_and_stride(tmp_path: Path) -> None:
    p = _plain(TRANSFORMER, tmp_path)
    data = _mapped(p)
    base = xplane.lines_and_metadata(data, str(p))
    buf = as_array(data)

    def take(**change):
        head = xhead.XHeadStart.begin(str(p), 0)
        args = {"path": str(p), "buf": buf, "line_off": base.line_off, "line_len": base.line_len,
                "stride": xscan.NEAR_STRIDE, **change}
        return head.take(**args)

    assert take() is not None
    assert take(stride=xscan.NEAR_STRIDE * 2) is None
    assert take(line_off=base.line_off[1:], line_len=base.line_len[1:]) is None
    other = tmp_path / "other.xplane.pb"
    other.write_bytes(p.read_bytes())
    assert take(path=str(other)) is None  # (the same bytes, another file)
    # the file changed after the thread read it (its identity: size and times)
    head = xhead.XHeadStart.begin(str(p), 0)
    head._thread.join()
    st = os.stat(p)
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert head.take(str(p), buf, base.line_off, base.line_len, xscan.NEAR_STRIDE) is None


def test_no_head_start_for_small_gzipped_or_fresh_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = _plain(TRANSFORMER, tmp_path)
    assert xhead.XHeadStart.begin(str(p), p.stat().st_size + 1) is None
    assert xhead.XHeadStart.begin(str(TRANSFORMER), 0) is None  # (gzipped: inflated whole before its decode)
    assert xhead.XHeadStart.begin(str(tmp_path / "missing.xplane.pb"), 0) is None
    monkeypatch.setattr(xhead, "RACY_NS", 60 * 10**9)
    assert xhead.XHeadStart.begin(str(p), 0) is None  # (changed a moment ago: its identity may not show a change)


def test_a_damaged_profile_is_said_by_the_plan_not_the_head_start(tmp_path: Path) -> None:
    good = _plain(TRANSFORMER, tmp_path).read_bytes()
    bad = tmp_path / "bad.xplane.pb"
    bad.write_bytes(good[: len(good) // 2])  # (truncated: a plane's length runs past the end)
    head = xhead.XHeadStart.begin(str(bad), 0)
    assert head is not None
    head._thread.join()
    assert head.failed is not None and "WireError" in head.failed
    with pytest.raises(TraceError) as e:
        analyze_windows(bad, 3, head=head)
    assert str(bad) in str(e.value)
    assert head._data is None  # (closed)


def test_the_windowed_analysis_with_a_head_start_is_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = _plain(LONG, tmp_path)
    walked: list[int] = []
    own = xplan.line_index

    def line_index(buf, off, size, stride=xscan.INDEX_STRIDE, **kw):
        walked.append(stride)
        return own(buf, off, size, stride, **kw)

    monkeypatch.setattr(xplan, "line_index", line_index)
    want = json.loads(text(analyze_windows(p, 4), "json"))
    assert walked == [xscan.NEAR_STRIDE]
    walked.clear()
    head = xhead.XHeadStart.begin(str(p), 0)
    timings: list[tuple[str, float]] = []
    got = json.loads(text(analyze_windows(p, 4, head=head, timings=timings), "json"))
    assert walked == []  # (the plan took the head start's index: it walked no line itself)
    assert got == want
    assert head.taken and timings[0][0].startswith("plan (") and timings[0][0].endswith(", the lines indexed ahead)")


def test_the_command_starts_one_only_where_analyze_reads_windows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = str(_plain(TRANSFORMER, tmp_path))
    monkeypatch.setattr(files, "WINDOWED_FROM", 0)
    made: list[str] = []

    def begin(cls: Any, path: str, least: int) -> str:
        made.append(path)
        return "head"

    monkeypatch.setattr(xhead.XHeadStart, "begin", classmethod(begin))

    def started(*args: str) -> bool:
        made.clear()
        return replay._xhead_start(list(args)) == "head" and made == [p]

    assert started("analyze", p)
    assert started("analyze", p, "--format", "json", "-o", str(tmp_path / "out.json"))
    assert started("analyze", p, "--windows", "4") and started("analyze", p, "--windows=6")
    for whole in (["--windows", "0"], ["--windows=1"], ["--read-all"], ["--step", "3"], ["--by-annotation"],
                  ["--roofline"], ["--sources"], ["--untraced-waits"], ["--salvage"], ["--step-marker=x"], ["--bench"]):
        assert not started("analyze", p, *whole), whole
    assert not started("analyze", p, p)  # (two profiles: the ranks of a job)
    # a JAX run directory: its one host's profile
    run = tmp_path / "logs" / "plugins" / "profile" / "2026_12_06_12_00_00"
    run.mkdir(parents=True)
    one = run / "host0.xplane.pb"
    one.write_bytes(b"")
    made.clear()
    assert replay._xhead_start(["analyze", str(tmp_path / "logs")]) == "head" and made == [str(one)]
    (run / "host1.xplane.pb").write_bytes(b"")  # (two hosts: the ranks of a job, not windowed)
    assert replay._xhead_start(["analyze", str(tmp_path / "logs")]) is None
    kineto = tmp_path / "kineto"
    kineto.mkdir()
    (kineto / "rank0.pt.trace.json").write_text('{"traceEvents": []}')
    assert replay._xhead_start(["analyze", str(kineto)]) is None  # (not a JAX run directory)
    assert not started("analyze", str(TRANSFORMER))  # (gzipped)
    monkeypatch.setenv("KERNSCOPE_NO_HEADSTART", "1")
    assert not started("analyze", p)


def test_the_thread_needs_no_polars() -> None:
    # it runs while the command imports polars: importing it would only wait for that (numpy it imports itself)
    code = ("import sys; from kernscope.load import xhead; xhead.RACY_NS = 0; "
            "before = sorted(m for m in ('numpy', 'polars') if m in sys.modules); "
            f"h = xhead.XHeadStart.begin({str(MLP)!r}, 0); h._thread.join(); "
            "print(before, h.failed, h._index is not None, 'polars' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[] None True False"
