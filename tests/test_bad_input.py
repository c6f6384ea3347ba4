"""Every class of bad input: one clear line naming the file, exit code 2, no traceback, no output file."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from kernscope.cli import main
from kernscope.testing.synth import make_trace

EV = '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2, "args": {"correlation": 1}}'
GOOD = b'{"traceEvents": [' + EV.encode() + b"]}"

CASES = {
    "not_json.json": (b"hello world", "not JSON"),
    "truncated.json": (GOOD[:-10], "truncated JSON"),
    "no_trace_events.json": (b'{"foo": 1}', "no 'traceEvents'"),
    "empty_trace.json": (b'{"traceEvents": []}', "no events"),
    "zero_bytes.json": (b"", "file is empty"),
    "events_not_array.json": (b'{"traceEvents": {"a": 1}}', "not an array"),
    "missing_ts.json": (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "dur": 2}]}', "has no 'ts'"),
    "missing_dur.json": (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 2}]}', "has no 'dur'"),
    "malformed_dur.json": (b'{"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": "abc"}]}', "$.traceEvents[0].dur"),
    "malformed_args.json": (b'{"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": 1, "args": 5}]}', "malformed event field"),
    "malformed_pid.json": (b'{"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": 1, "pid": [1]}]}', "malformed event field"),
    "negative_dur.json": (b'{"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": -5}]}', "negative duration"),
    "huge_ts.json": (b'{"traceEvents": [{"ph": "X", "name": "k", "ts": 123456789012345678901234567890, "dur": 1}]}', "does not fit"),
    "huge_arg.json": (b'{"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": 1, "args": {"correlation": 123456789012345678901234567890}}]}', "does not fit int64"),
    "bad_utf8.json": (b'{"traceEvents": [{"ph": "X", "name": "k\xff\xfe", "ts": 1, "dur": 1}]}', "invalid UTF-8"),
    "corrupt.json.gz": (None, "corrupt gzip"),
    "truncated.json.gz": (None, "truncated gzip"),
}


def _bytes(name: str, data: bytes | None) -> bytes:
    if data is not None:
        return data
    z = gzip.compress(GOOD * 50)
    return z[:10] + b"\x00" * 12 + z[22:] if name.startswith("corrupt") else z[: len(z) // 2]


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_one_line_exit_2(tmp_path, capsys, name):
    data, needle = CASES[name]
    p = tmp_path / name
    p.write_bytes(_bytes(name, data))
    out = tmp_path / "out.json"
    rc = main(["analyze", str(p), "--no-cache", "--format", "json", "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert str(p) in lines[0] and needle in lines[0]
    assert not out.exists()
    assert not [f for f in tmp_path.iterdir() if f.name.startswith(".out.json")]


def test_missing_file(tmp_path, capsys):
    assert main(["analyze", str(tmp_path / "nope.json"), "--no-cache"]) == 2
    assert "file not found" in capsys.readouterr().err


def test_salvage_truncated_trace(tmp_path, capsys):
    full = tmp_path / "full.json"
    st = make_trace(full, 200_000)
    data = full.read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: int(len(data) * 0.6)])
    assert main(["analyze", str(cut), "--no-cache"]) == 2
    assert "--salvage" in capsys.readouterr().err
    out = tmp_path / "s.json"
    assert main(["analyze", str(cut), "--no-cache", "--salvage", "--format", "json", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    doc = json.loads(out.read_text())
    n = doc["trace"]["salvaged_events"]
    assert 0.5 * st.events < n < 0.7 * st.events
    assert f"salvaged {n:,} complete events" in err
    # every recovered event is a whole one: the kernels are a prefix of the full trace's kernels
    assert doc["trace"]["kernels"] > 0


def test_salvage_truncated_gzip(tmp_path):
    full = tmp_path / "full.json.gz"
    make_trace(full, 200_000)
    z = full.read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(z[: len(z) // 2])
    assert main(["analyze", str(cut), "--no-cache", "--salvage", "--format", "json", "-o", str(tmp_path / "o.json")]) == 0
    assert json.loads((tmp_path / "o.json").read_text())["trace"]["salvaged_events"] > 100


def test_not_a_trace_says_what_it_is(tmp_path, capsys):
    """Files that are not traces (TOML, a JSON array of numbers, Proton's intra-kernel trace) get a message
    saying what they are, never "truncated JSON ... try --salvage"."""
    import bz2
    import lzma
    import zipfile
    from pathlib import Path

    doc = b'{"traceEvents": []}'
    zipped = tmp_path / "z.zip"
    with zipfile.ZipFile(zipped, "w") as z:
        z.writestr("t.json", doc)
    cases = {
        "a.toml": (b'[tool]\nname = "x"\n', "not JSON (it starts with '[tool]"),
        "b.json": (b"[1, 2, 3]", "a JSON array of values, not of trace events"),
        # compressions a profiler never writes: which one, and how to undo it (they read as "not JSON")
        "t.json.xz": (lzma.compress(doc), "xz-compressed: kernscope reads traces as written"),
        "t.json.bz2": (bz2.compress(doc), "bzip2-compressed"),
        "t.json.zst": (b"\x28\xb5\x2f\xfd" + b"\x00" * 16, "zstd-compressed"),
        "t.zip": (zipped.read_bytes(), "zip-compressed"),
    }
    proton = Path(__file__).parent / "data" / "proton_h100" / "proton_trace.chrome_trace"
    for name, (data, needle) in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        assert main(["analyze", str(p), "--no-cache"]) == 2
        err = capsys.readouterr().err
        assert needle in err and "salvage" not in err and len(err.strip().splitlines()) == 1
    assert main(["analyze", str(proton), "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert "intra-kernel trace (Proton's chrome_trace" in err and f"kernscope intra stats {proton}" in err


def test_analysis_of_a_step_the_trace_does_not_have():
    """The Python API refuses a step that does not exist (it would return all-zero tables), as the CLI does."""
    from pathlib import Path

    import kernscope
    from kernscope.analyze.summary import analyze
    from kernscope.errors import KernscopeError

    t = kernscope.load(Path(kernscope.__file__).parent / "examples" / "h200_gpt_train_step.pt.trace.json.gz", cache=False)
    with pytest.raises(KernscopeError, match=r"no step 5; available: 2, 3"):
        analyze(t, step=5)
    assert analyze(t, step=2).kernels.height > 0


def test_output_folder_is_never_created(tmp_path, capsys):
    """``-o`` into a folder that does not exist is refused (a typo would otherwise write somewhere new)."""
    from pathlib import Path

    import kernscope

    ex = Path(kernscope.__file__).parent / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    for out in (tmp_path / "no" / "such" / "r.html", tmp_path / "missing" / "csvs" / ""):
        assert main(["report", str(ex), "-o", str(out), "--no-cache"]) == 2
        err = capsys.readouterr().err
        assert "does not exist; create it first" in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    (tmp_path / "csvs").mkdir()
    assert main(["report", str(ex), "-o", str(tmp_path / "csvs" / "run1") + "/", "--no-cache"]) == 0  # its own folder is made


def test_seams_peak_typo_and_quiet_cache_notices(tmp_path, capsys, monkeypatch):
    """#31: `--peak fp32=1e400` is refused (it wrote Infinity into JSON); a missing file among several is
    named (it read 'no rank'); cache notices are said once, as plain lines, and never with -q."""
    from kernscope.cli import main

    example = Path(__file__).resolve().parents[1] / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    for spec in ("fp32=1e400", "bw=1e999", "bf16=0", "bw=inf"):
        assert main(["perf", str(example), "--peak", spec, "-q", "--no-cache"]) == 2
        err = capsys.readouterr().err
        assert ("positive finite number" in err or "cannot read" in err) and len(err.splitlines()) == 1
    assert main(["analyze", str(example), str(tmp_path / "typo.json"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"kernscope: error: {tmp_path / 'typo.json'}: file not found"
    monkeypatch.setenv("KERNSCOPE_CACHE_DIR", "/proc/kernscope-no-such-dir")
    assert main(["analyze", str(example)]) == 0
    err = capsys.readouterr().err
    assert err.count("cannot be used") == 1 and "CacheNotice" not in err and ".py:" not in err
    assert main(["analyze", str(example), "-q"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_output_that_cannot_be_written_is_one_line():
    """#31: `analyze T > /dev/full` was an internal error."""
    import subprocess
    import sys

    example = Path(__file__).resolve().parents[1] / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "kernscope", "analyze", str(example), "-q"], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.strip() == "kernscope: error: cannot write the output: No space left on device"


def test_a_copy_of_an_analysed_trace_prints_its_own_path(tmp_path, capsys):
    """#31: stored outputs were keyed by content only: a copy printed the first file's path."""
    import shutil

    from kernscope.cli import main

    example = Path(__file__).resolve().parents[1] / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    copy = tmp_path / "copy.json.gz"
    shutil.copy(example, copy)
    for p in (example, copy, example, copy):  # the second round is served from stored outputs
        assert main(["analyze", str(p), "-q"]) == 0
        assert capsys.readouterr().out.splitlines()[0] == str(p)


def test_double_star_glob_over_symlink_loops_ends(tmp_path, capsys):
    """#31: `**` over a tree with two symlink loops hung with growing memory (glob follows links)."""
    import os
    import shutil
    import time

    from kernscope.cli import main
    from kernscope.files import expand_inputs

    example = Path(__file__).resolve().parents[1] / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    (tmp_path / "a" / "b").mkdir(parents=True)
    shutil.copy(example, tmp_path / "a" / "b" / "t.json.gz")
    (tmp_path / "a" / "other.txt").write_text("x")
    os.symlink("..", tmp_path / "a" / "b" / "up")
    os.symlink("../..", tmp_path / "a" / "up2")
    t0 = time.perf_counter()
    found = expand_inputs([str(tmp_path / "**" / "*.json.gz")])
    assert time.perf_counter() - t0 < 5 and found == [str(tmp_path / "a" / "b" / "t.json.gz")]
    assert expand_inputs([str(tmp_path / "a" / "**" / "t.json.gz")]) == found  # ** also matches one folder
    assert expand_inputs([str(tmp_path / "a" / "b" / "**" / "t.json.gz")]) == found  # and none
    assert main(["analyze", str(tmp_path / "**" / "*.json.gz"), "-q", "--no-cache"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == found[0]


def test_output_paths_fifo_symlink_modes(tmp_path, capsys):
    """#31: -o to a FIFO replaced it with a regular file; through a symlink a 0600 file became 0644; a dangling
    link created a file elsewhere. Now: a FIFO is written as a stream (or refused where a file is needed), a
    replaced file keeps its mode, a dangling link is refused."""
    import os
    import stat
    import threading

    from kernscope.cli import main

    example = Path(__file__).resolve().parents[1] / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    fifo = tmp_path / "out.html"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(Path(fifo).read_bytes()))  # (read and closed)
    reader.start()
    assert main(["report", str(example), "-o", str(fifo), "-q", "--no-cache"]) == 0
    reader.join(30)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and got and got[0].startswith(b"<!doctype html>")
    xfifo = tmp_path / "out.xlsx"
    os.mkfifo(xfifo)
    assert main(["report", str(example), "-o", str(xfifo), "-q", "--no-cache"]) == 2
    assert "not a regular file" in capsys.readouterr().err and stat.S_ISFIFO(os.stat(xfifo).st_mode)
    private = tmp_path / "private.html"
    private.write_text("old")
    private.chmod(0o600)
    (tmp_path / "link.html").symlink_to(private)
    assert main(["report", str(example), "-o", str(tmp_path / "link.html"), "-q", "--no-cache"]) == 0
    assert stat.S_IMODE(private.stat().st_mode) == 0o600 and private.read_text().startswith("<!doctype html>")
    (tmp_path / "dangling.html").symlink_to(tmp_path / "elsewhere" / "x.html")
    assert main(["report", str(example), "-o", str(tmp_path / "dangling.html"), "-q", "--no-cache"]) == 2
    assert "which does not exist" in capsys.readouterr().err
    assert not (tmp_path / "elsewhere").exists()


def test_options_of_one_traces_analysis_are_refused_for_a_job_and_a_bench_folder(tmp_path, capsys):
    """``--step``, ``--roofline`` and the other options of one trace's analysis were ignored for a job (several
    traces: the whole job came back, exit 0) and a folder of benchmark traces; they are refused in one line, exit 2,
    before anything is analyzed."""
    job = str(Path(__file__).parent / "data" / "ddp2_h200")
    for args, named in ((["--step", "3"], "--step: an option"), (["--roofline", "--untraced-waits"], "--roofline, --untraced-waits: options"),
                        (["--timings"], "--timings: an option")):
        assert main(["analyze", job, *args, "--no-cache"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and named in err[0] and "not of a job of 2 traces: give one trace" in err[0]
    assert main(["report", job, "-o", str(tmp_path / "r.html"), "--peak", "H100", "--no-cache"]) == 2
    assert "--peak: an option of one trace's analysis, not of a job of 2 traces" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()
    (tmp_path / "b").mkdir()
    assert main(["analyze", "--bench", str(tmp_path / "b"), "--step", "1", "--no-cache"]) == 2
    assert "not of a folder of benchmark traces" in capsys.readouterr().err
    assert main(["analyze", job, "--no-cache", "--format", "json"]) == 0  # (without them: the job)
    assert json.loads(capsys.readouterr().out)["ranks"]
