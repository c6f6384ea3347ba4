"""One regression test per class of hostile or unlucky input (the hardening issue): numbers that do not fit,
decompression bombs, injection through names, deep nesting, salvage, paths and files, pathological sizes."""

from __future__ import annotations

import gzip
import json
import os
import stat
import zipfile
from pathlib import Path

import polars as pl
import pytest
from conftest import write_trace

import kernscope
from kernscope.analyze.summary import analyze
from kernscope.analyze.timeline import TIMELINE_ROWS
from kernscope.cli import main
from kernscope.testing.synth import make_trace


def _k(ts, dur, corr, name="k", **args):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "device": 0, "stream": 7, **args}}


def _launch(ts, corr):
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts, "dur": 1,
            "args": {"correlation": corr}}


def _one_error(capsys, rc, *needles):
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert rc == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


# -- 2. numbers that do not fit ------------------------------------------------------------------------------
@pytest.mark.parametrize("ts,dur,needle", [
    (9_300_000_000_000_000, 1, "$.traceEvents[0].ts"),  # 9.3e18 ns > 2^63
    (9_223_372_036_854_775, 5_000_000, "'ts' + 'dur' does not fit"),  # each fits, the sum does not
    ("1e400", 1, "$.traceEvents[0]"),
])
def test_numbers_out_of_range(tmp_path, capsys, ts, dur, needle):
    raw = json.dumps({"traceEvents": [_k(0, 1, 1), _k(0, 1, 2)]}).replace('"ts": 0, "dur": 1, "args": {"correlation": 1',
                                                                           f'"ts": {ts}, "dur": {dur}, "args": {{"correlation": 1', 1)
    p = tmp_path / "t.json"
    p.write_text(raw)
    _one_error(capsys, main(["analyze", str(p), "--no-cache"]), str(p), needle)


def test_step_number_overflow_is_an_error_and_salvage_skips_it(tmp_path, capsys):
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#99999999999999999999", "pid": 1, "tid": 1,
           "ts": 0, "dur": 100}, _launch(5, 1), _k(10, 2, 1)]
    p = write_trace(tmp_path / "t.json", ev)
    _one_error(capsys, main(["analyze", str(p), "--no-cache"]), "does not fit int64")
    out = tmp_path / "o.json"
    assert main(["analyze", str(p), "--no-cache", "--salvage", "--format", "json", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["trace"]["kernels"] == 1 and any("does not fit int64" in s for s in doc["salvage_skipped"])


def test_integer_arg_beyond_int64_is_rejected_not_nulled(tmp_path, capsys):
    p = write_trace(tmp_path / "t.json", [_k(0, 1, 1, **{"External id": 18446744073709551615})])
    _one_error(capsys, main(["analyze", str(p), "--no-cache"]), "External id", "does not fit int64")


# -- 3. decompression bombs ----------------------------------------------------------------------------------
def test_event_bomb_is_bounded_by_the_memory_budget(tmp_path, capsys):
    ev = json.dumps(_k(1, 2, 1, name="x" * 200))
    body = ("," .join([ev] * 20000)).encode()
    p = tmp_path / "bomb.json.gz"
    with gzip.open(p, "wb") as f:
        f.write(b'{"traceEvents": [')
        for _ in range(40):  # 200 MB of JSON from a small file
            f.write(body + b",")
        f.write(ev.encode() + b"]}")
    assert p.stat().st_size < 2_000_000
    _one_error(capsys, main(["analyze", str(p), "--no-cache", "--max-memory", "20M"]), str(p), "memory budget",
               "--max-memory")


def test_whitespace_bomb_is_refused(tmp_path, capsys):
    p = tmp_path / "ws.json.gz"
    with gzip.open(p, "wb", compresslevel=1) as f:
        f.write(b'{"traceEvents": [' + json.dumps(_k(1, 2, 1)).encode())
        chunk = b" " * (64 << 20)
        for _ in range(5):  # 320 MB of blanks where the next event should be
            f.write(chunk)
        f.write(b"," + json.dumps(_k(5, 2, 2)).encode() + b"]}")
    _one_error(capsys, main(["analyze", str(p), "--no-cache"]), str(p), "larger than")


# -- 4. injection through names ------------------------------------------------------------------------------
EVIL = ["[/]", "[link=https://evil.example]click[/link]", "\x1b]8;;http://x\x07osc\x1b]8;;\x07", "\x1b[2Jclear",
        "=cmd|' /C calc'!A0", "+SUM(1;2)", "@import", "-2+3"]


def _evil_trace(tmp_path):
    ev = []
    for i, n in enumerate(EVIL):
        ev += [_launch(10 * i - 2, i + 1), _k(10 * i, 5 + i, i + 1, name=n)]
    return write_trace(tmp_path / "evil.json", ev)


def test_terminal_shows_names_as_text(tmp_path, capsys):
    p = _evil_trace(tmp_path)
    assert main(["analyze", str(p), "--no-cache", "--top", "20"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out  # no escape sequence reaches the terminal
    assert "[/]" in out and "[link=https://evil.example]" in out
    assert "\\x1b]8;;" in out  # shown, escaped


def test_csv_and_xlsx_do_not_run_formulas(tmp_path, capsys):
    p = _evil_trace(tmp_path)
    assert main(["analyze", str(p), "--no-cache", "--format", "csv"]) == 0
    csv = capsys.readouterr().out
    assert "'=cmd|" in csv and "'+SUM(1;2)" in csv and "'@import" in csv and "'-2+3" in csv
    assert "\n=cmd" not in csv and ",=cmd" not in csv
    out = tmp_path / "r.xlsx"
    assert main(["report", str(p), "--no-cache", "-o", str(out), "--quiet"]) == 0
    with zipfile.ZipFile(out) as z:
        sheets = [n for n in z.namelist() if n.startswith("xl/worksheets/sheet")]
        assert not any("<f>" in z.read(n).decode() for n in sheets)  # no formula cells
        assert "=cmd|" in z.read("xl/sharedStrings.xml").decode()


# -- 5. deep nesting and bad UTF-8 ---------------------------------------------------------------------------
def test_deep_nesting_is_a_clear_error(tmp_path, capsys):
    deep = "[" * 3000 + "]" * 3000
    p = tmp_path / "deep.json"
    p.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": {"d": ' + deep + "}}]}")
    _one_error(capsys, main(["analyze", str(p), "--no-cache"]), str(p), "nested too deeply")
    p.write_text('{"traceEvents": [], "meta": ' + deep + "}")
    _one_error(capsys, main(["analyze", str(p), "--no-cache"]), str(p))


@pytest.mark.parametrize("native", ["1", "0"], ids=["compiled scanner", "other readers"])
@pytest.mark.parametrize("levels", [1001, 3000])
def test_deep_nesting_never_reaches_polars(tmp_path, capsys, monkeypatch, native, levels):
    """polars' JSON readers overflow their stack on deeply nested text (a segmentation fault on 3,000 levels: polars
    2.0's array reader, 2.1's line reader): every reader path refuses it first, with one line; 993 levels read."""
    monkeypatch.setenv("KERNSCOPE_NO_NATIVE", "0" if native == "1" else "1")
    events = ",\n".join(json.dumps(_k(10 * i, 2, i + 1)) for i in range(2000))
    p = tmp_path / "deep.json"
    nest = "[" * levels + "]" * levels
    p.write_text('{"traceEvents": [' + events + ',\n{"ph": "X", "cat": "kernel", "name": "d", "ts": 1, "dur": 1, "args": {"d": '
                 + nest + "}}]}")
    _one_error(capsys, main(["analyze", str(p), "--no-cache"]), str(p), "nested too deeply")
    ok = "[" * 990 + "]" * 990  # (with the event's object, its "args" and the array: 993 levels)
    p.write_text('{"traceEvents": [' + events + ',\n{"ph": "X", "cat": "kernel", "name": "d", "ts": 1, "dur": 1, "args": {"d": '
                 + ok + "}}]}")
    assert kernscope.load(p, cache=False).kernels.height == 2001


@pytest.mark.parametrize("lines", [False, True])
def test_depth_check_of_each_polars_reader(lines):
    """The check in front of polars' two JSON readers counts brackets outside strings (escaped quotes and
    backslashes read as JSON does), whatever the Python version (msgspec's own limit grew tenfold in 3.12), and
    counts them all in text that is not JSON."""
    from kernscope.load.chunk import MAX_DEPTH, ChunkError, check_depth

    sep = b"\n" if lines else b","
    wrap = (lambda t: t) if lines else (lambda t: b"[" + t + b"]")
    ev = json.dumps(_k(1, 2, 1)).encode()
    check_depth(wrap(sep.join([ev] * 5000)))  # (nothing deep)
    for name in ["[" * 5000, '\\"' + "{" * 3000, "\\" + "[" * 2000 + '\\"x', "a\\\\" + "]" * 1500 + "[" * 1500]:
        check_depth(wrap(sep.join([ev, json.dumps({**_k(1, 2, 1), "name": name}).encode(), ev])))  # in strings
    levels = MAX_DEPTH - 1  # (in an array: one more)
    ok = b'{"a": ' + b"[" * (levels - 1) + b"]" * (levels - 1) + b"}"
    check_depth(wrap(sep.join([ev, ok, ev])))  # (MAX_DEPTH levels: read)
    over = b'{"a": ' + b"[" * levels + b"]" * levels + b"}"
    with pytest.raises(ChunkError, match="nested too deeply"):  # (one more, in an array)
        check_depth(b"[" + sep.join([ev, over, ev]) + b"]")
    deep = b'{"a": ' + b"[" * 1200 + b"]" * 1200 + b"}"
    with pytest.raises(ChunkError, match="nested too deeply"):
        check_depth(wrap(sep.join([ev] * 100 + [deep, ev])))
    with pytest.raises(ChunkError, match="nested too deeply"):  # (not JSON: every bracket outside strings counts)
        check_depth(wrap(sep.join([ev, deep[:-1]])))
    escaped_end = json.dumps({**_k(1, 2, 1), "name": "x\\"}).encode()  # a string ending in a backslash: it ends
    with pytest.raises(ChunkError, match="nested too deeply"):
        check_depth(wrap(sep.join([escaped_end, deep])))


def test_depth_outside_strings_equals_a_byte_by_byte_reading():
    """The vectorized depth (quotes, backslash runs, brackets) against a loop over the bytes, on random text of
    brackets, letters and strings holding brackets and escapes (backslashes only inside strings, as in JSON)."""
    import random

    from kernscope.load.chunk import _depth

    def slow(text: bytes) -> int:
        depth = best = 0
        inside = escaped = False
        for c in text:
            if inside:
                if escaped:
                    escaped = False
                elif c == 92:
                    escaped = True
                elif c == 34:
                    inside = False
            elif c == 34:
                inside = True
            elif c in b"[{":
                depth += 1
                best = max(best, depth)
            elif c in b"]}":
                depth = max(depth - 1, 0)
        return best

    r = random.Random(43)

    def string() -> bytes:
        return b'"' + b"".join(r.choice([b"[", b"]", b"{", b"}", b"x", b"\\\\", b'\\"']) for _ in range(r.randint(0, 6))) + b'"'

    for _ in range(500):
        text = b"".join(string() if r.random() < 0.3 else bytes([r.choice(b"[]{}a")]) for _ in range(r.randint(0, 40)))
        assert _depth(text) == slow(text), text


def test_gpu_events_without_a_device_have_a_device_timeline(tmp_path, capsys):
    """A kernel without a device (no "device" arg, no "pid") is neither an internal error (the rank of a null key was
    NaN) nor silently device 0 where other devices exist (the join's fill_null filled the key too): beside two
    devices it is a timeline row of its own (null device); where every other row ran on one device it ran there."""
    ev = [_k(10 * i, 4, i + 1) for i in range(4)]
    ev[0] = {k: v for k, v in ev[0].items() if k not in ("pid", "tid")}
    ev[0]["args"].pop("device")
    one = write_trace(tmp_path / "one.json", [*ev, _k(100, 5, 9)])
    two = write_trace(tmp_path / "two.json", [*ev, _k(100, 5, 9), {**_k(50, 6, 10), "pid": 1, "args": {
        "correlation": 10, "device": 1, "stream": 7}}])
    for p in (one, two):
        assert main(["analyze", str(p), "--no-cache", "--format", "json", "-o", str(tmp_path / "a.json")]) == 0
    by_dev = analyze(kernscope.load(one, cache=False)).timeline_by_device
    busy = by_dev.filter(pl.col("type") == "busy_time")
    assert busy["device"].to_list() == [0] and busy["time_us"].to_list() == [21.0]
    by_dev = analyze(kernscope.load(two, cache=False)).timeline_by_device
    busy = by_dev.filter(pl.col("type") == "busy_time").sort("device", nulls_last=True)
    assert busy["device"].to_list() == [0, 1, None] and busy["time_us"].to_list() == [17.0, 6.0, 4.0]
    assert by_dev.filter(pl.col("device").is_null()).height == by_dev.filter(pl.col("device") == 0).height == len(TIMELINE_ROWS)


@pytest.mark.parametrize("layout", ["object", "array", "gzip", "whole document", "other readers", "salvage"])
def test_a_utf8_byte_order_mark_is_read_as_a_blank(tmp_path, monkeypatch, layout):
    """A UTF-8 byte order mark before the JSON (Windows tools write one; RFC 8259 lets a reader ignore it) reads as
    the same trace, in every layout and reader path (it was "not JSON")."""
    from kernscope.load import document

    ev = [e for i in range(50) for e in (_launch(20 * i, i + 1), _k(20 * i + 5, 3, i + 1))]
    doc = json.dumps(ev if layout == "array" else {"traceName": "t", "traceEvents": ev}).encode()
    if layout == "whole document":  # ("traceEvents" beyond the head the pieces' reader searches)
        monkeypatch.setattr(document, "HEAD_LIMIT", 64)
        doc = json.dumps({"note": "x" * 200, "traceEvents": ev}).encode()
    if layout == "other readers":
        monkeypatch.setenv("KERNSCOPE_NO_NATIVE", "1")
    plain, marked = tmp_path / "plain.json", tmp_path / "bom.json"
    plain.write_bytes(doc)
    marked.write_bytes(gzip.compress(b"\xef\xbb\xbf" + doc) if layout == "gzip" else b"\xef\xbb\xbf" + doc)
    want = kernscope.load(plain, cache=False, salvage=layout == "salvage")
    got = kernscope.load(marked, cache=False, salvage=layout == "salvage")
    assert got.kernels.height == want.kernels.height == 50
    assert got.kernels.drop("idx").equals(want.kernels.drop("idx")) and got.metadata == want.metadata


@pytest.mark.parametrize("option", ["--rules", "--findings"])
def test_rule_files_are_utf8_with_or_without_a_byte_order_mark(tmp_path, capsys, option):
    """A rules or findings TOML file is read as UTF-8 whatever the locale, a byte order mark first (Windows editors
    write one) read as nothing (TOML's parser refused it: 'Invalid statement'); bytes that are not UTF-8 are one line
    (an internal error before)."""
    example = Path(kernscope.__file__).parent / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    body = ('[[category]]\nvalue = "Mine µ"\npattern = "nvjet"\n' if option == "--rules"
            else "[launch_bound]\nmin_us = 1.0\n")
    good = tmp_path / "good.toml"
    good.write_bytes(b"\xef\xbb\xbf" + body.encode())
    assert main(["analyze", str(example), option, str(good), "--no-cache", "--format", "json", "-q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    if option == "--rules":
        assert "Mine µ" in {c["category"] for c in doc["categories"]}
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"\xff\xfe" + body.encode())
    _one_error(capsys, main(["analyze", str(example), option, str(bad), "--no-cache"]), str(bad), "not UTF-8 text")


def test_bad_utf8_in_trailing_metadata(tmp_path, capsys):
    p = tmp_path / "u.json"
    p.write_bytes(b'{"traceEvents": [' + json.dumps(_k(1, 2, 1)).encode() + b'], "traceName": "\xff\xfe"}')
    _one_error(capsys, main(["analyze", str(p), "--no-cache"]), str(p), "UTF-8")


# -- 6. salvage ----------------------------------------------------------------------------------------------
def test_salvage_cut_inside_a_deeply_structured_event(tmp_path):
    ev = [_k(10 * i, 2, i + 1) for i in range(1000)]
    text = json.dumps({"traceEvents": ev})[:-2]  # drop "]}"
    many = ", ".join('{"a": {"b": 1}}' for _ in range(40))
    text += ', {"ph": "X", "cat": "kernel", "name": "cut", "ts": 1, "dur": 1, "args": {"list": [' + many
    p = tmp_path / "cut.json"
    p.write_text(text)
    t = kernscope.load(p, cache=False, salvage=True)
    assert t.kernels.height == 1000 and t.salvaged == 1000


def test_salvage_keeps_everything_but_the_bad_event(tmp_path):
    ev = [_k(10 * i, 2, i + 1) for i in range(3000)]
    text = json.dumps({"traceEvents": ev, "traceName": "x"})
    bad = json.dumps(ev[2990])
    text = text.replace(bad, bad.replace('"dur": 2', '"dur": {"not": "a number"}'))
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(kernscope.TraceError, match=r"traceEvents\[2990\]"):
        kernscope.load(p, cache=False)
    t = kernscope.load(p, cache=False, salvage=True)
    assert t.kernels.height == 2999 and t.metadata["traceName"] == "x"
    assert any("2990" in s for s in t.salvage_skipped)


# -- 7. paths and files --------------------------------------------------------------------------------------
def test_output_through_a_symlink_writes_its_target(tmp_path):
    p = write_trace(tmp_path / "t.json", [_launch(0, 1), _k(1, 2, 1)])
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert main(["analyze", str(p), "--no-cache", "--format", "json", "-o", str(link)]) == 0
    assert link.is_symlink() and json.loads(target.read_text())["trace"]["kernels"] == 1


def test_report_to_an_existing_directory_named_xlsx(tmp_path, capsys):
    p = write_trace(tmp_path / "t.json", [_launch(0, 1), _k(1, 2, 1)])
    (tmp_path / "x.xlsx").mkdir()
    _one_error(capsys, main(["report", str(p), "-o", str(tmp_path / "x.xlsx")]), "is a directory")
    assert list((tmp_path / "x.xlsx").iterdir()) == []


def test_outputs_honour_the_umask(tmp_path):
    p = write_trace(tmp_path / "t.json", [_launch(0, 1), _k(1, 2, 1)])
    old = os.umask(0o022)
    try:
        assert main(["analyze", str(p), "--no-cache", "--format", "json", "-o", str(tmp_path / "a.json")]) == 0
        assert main(["report", str(p), "--no-cache", "-o", str(tmp_path / "r.xlsx"), "--quiet"]) == 0
        assert main(["report", str(p), "--no-cache", "-o", str(tmp_path / "csvs"), "--quiet"]) == 0
    finally:
        os.umask(old)
    for f in [tmp_path / "a.json", tmp_path / "r.xlsx", *(tmp_path / "csvs").iterdir()]:
        assert stat.S_IMODE(f.stat().st_mode) == 0o644, f


@pytest.mark.parametrize("kind", ["dir", "fifo"])
def test_directory_or_fifo_as_trace(tmp_path, capsys, kind):
    p = tmp_path / "x.json"
    if kind == "dir":
        p.mkdir()
    else:
        os.mkfifo(p)
    line = _one_error(capsys, main(["analyze", str(p), "--no-cache"]), str(p))
    assert ("directory" in line) or ("not a regular file" in line)


# -- 8. pathological sizes ----------------------------------------------------------------------------------
def test_huge_names_are_capped(tmp_path):
    big = "k" * (8 << 20)
    p = write_trace(tmp_path / "t.json", [_launch(0, 1), _k(1, 2, 1, name=big)])
    t = kernscope.load(p, cache=False)
    name = t.kernels["name"].cast(pl.String)[0]
    assert len(name) < 5000 and name.startswith("kkkk") and "…#" in name


def test_no_categories_runs_no_rules(tmp_path, capsys, monkeypatch):
    p = tmp_path / "t.json"
    make_trace(p, 200_000)
    from kernscope.analyze import categories

    def boom(*a, **k):
        raise AssertionError("categorizer ran")

    monkeypatch.setattr(categories.Categorizer, "categorize", boom)
    assert main(["analyze", str(p), "--no-cache", "--no-categories", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {c["category"] for c in doc["categories"]} <= {"Uncategorized", "Communication"}
    assert any(t["type"] == "total_comm_time" and t["time_us"] > 0 for t in doc["timeline"])  # NCCL still found


def test_damaged_last_piece_is_not_reparsed_at_every_bracket(tmp_path, monkeypatch):
    """A syntax error inside the last piece (here: the only piece) must not make the loader try every `]` as the
    array's end with a full parse each (a 9 MB rank took 7 s to reject this way): ends after the error are skipped."""
    import json as _json

    from kernscope.errors import TraceError
    from kernscope.load import kineto
    from kernscope.pipeline import load

    evs = [{"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": i * 10, "dur": 5,
            "args": {"x": [{}], "correlation": i}} for i in range(3000)]  # every event holds a "}]"
    text = _json.dumps({"traceEvents": evs})
    cut = len(text) // 3
    broken = text[:cut] + "@@" + text[cut:]
    p = tmp_path / "broken.json"
    p.write_text(broken)
    calls = []
    real = kineto.parse_chunk

    def counting(b, *args):
        calls.append(len(b))
        return real(b, *args)

    monkeypatch.setattr(kineto, "parse_chunk", counting)
    try:
        load(p, cache=False)
    except TraceError as e:
        assert str(p) in str(e) and "not valid JSON" in str(e)
    else:
        raise AssertionError("a broken trace loaded")
    assert len(calls) <= 4, len(calls)  # not one parse per "}]" (there are 3,000)


def test_rank_workers_share_the_memory_budget(tmp_path, monkeypatch):
    """#31: each rank worker budgeted 80% of free memory, not shared: two bomb ranks with --workers 2 used 21.8 of
    23 GB. Ranks loaded at once now split the budget; a rank over its share fails alone, in one line."""
    import gzip as _gz

    from kernscope import engine
    from kernscope.analyze.ranks import RankTask, summarize_file

    monkeypatch.setattr(engine, "available_memory", lambda: 10 << 30)
    t = engine.shared_budget(RankTask(), 4)
    assert t.max_memory == int((10 << 30) * 0.8) // 4
    assert engine.shared_budget(RankTask(max_memory=123), 4).max_memory == 123  # a budget the caller set stays
    # a compressed bomb over a tiny per-rank budget: that rank fails, with its reason
    ev = ('{"traceEvents": [' + ",".join(['{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, '
                                           '"dur": 1, "args": {"correlation": 1, "stream": 7, "device": 0}}'] * 20000) + "]}")
    bomb = tmp_path / "rank1.json.gz"
    bomb.write_bytes(_gz.compress(ev.encode()))
    out = summarize_file(str(bomb), RankTask(cache=False, max_memory=1 << 20))
    assert "memory budget" in getattr(out, "problem", "")  # its own line: the job goes on with the other ranks


def test_duplicate_keys_one_rule_the_first_occurrence_wins(tmp_path):
    """#31: duplicate keys resolved differently by value size (first ts for µs times, last for epoch times). The
    first occurrence wins for every key, whatever the size of its value."""
    def trace(ts: tuple[str, str], dur: tuple[str, str]) -> str:
        ev = [f'{{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": {ts[0]}, "ts": {ts[1]}, "dur": {dur[0]}, '
              f'"dur": {dur[1]}, "args": {{"correlation": 1, "stream": 7, "device": 0}}}}',
              '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1, "dur": 1, '
              '"args": {"correlation": 1}}']
        return '{"traceEvents": [' + ",".join(ev) + "]}"

    for ts, want in ((("10", "20"), 10_000), (("1700000000000000.5", "1700000000000010.5"), 1_700_000_000_000_000_500),
                     (("10.25", "20.75"), 10_250)):
        p = tmp_path / "dup.json"
        p.write_text(trace(ts, ("3", "4")))
        assert kernscope.load(p, cache=False).kernels.select("ts", "dur").row(0) == (want, 3_000)


# -- #31: the rest of the seams: one line, exit 2 ---------------------------------------------------------------
def test_ids_beyond_any_real_size_are_one_line(tmp_path, capsys):
    ev = [_k(1, 1, 1), _launch(0, 1)]
    big = write_trace(tmp_path / "rank0.json", ev, distributedInfo={"rank": 2**70, "world_size": 2})
    ok = write_trace(tmp_path / "rank1.json", ev, distributedInfo={"rank": 1, "world_size": 2})
    _one_error(capsys, main(["analyze", str(big), str(ok), "-q", "--no-cache"]), "rank0.json", "rank id is not one")
    named = write_trace(tmp_path / "rank123456789012345678901234567890.json", ev)
    _one_error(capsys, main(["analyze", str(named), str(ok), "-q", "--no-cache"]), "rank id is not one")
    bd = tmp_path / "bd" / "kineto_traces" / "triton_123456789012345678901234567"
    bd.mkdir(parents=True)
    write_trace(bd / "t.pt.trace.json", ev)
    _one_error(capsys, main(["analyze", "--bench", str(tmp_path / "bd"), "-q", "--no-cache"]), "no benchmark traces found")
    for pid, tid in (("k Core1 CTA99999999999999999999999", "warp 0"), ("k Core1 CTA1", "warp 99999999999999999999999"),
                     ("k Core99999999999999999999999 CTA1", "warp 1")):
        p = tmp_path / "p.chrome_trace"
        p.write_text(json.dumps({"traceEvents": [{"ph": "X", "pid": pid, "tid": tid, "ts": 0, "dur": 1, "name": "a"}]}))
        _one_error(capsys, main(["intra", "stats", str(p)]), "id beyond 2^31 - 1")
    p.write_text("[1, 2, 3]")
    _one_error(capsys, main(["intra", "stats", str(p)]), "no intra-kernel events")


def test_scheduler_xlsx_full_disk_and_missing_triton_are_one_line(tmp_path, capsys, monkeypatch):
    ev = [_k(1, 1, 1), _launch(0, 1)]
    a = write_trace(tmp_path / "rank0.json", ev)
    b = write_trace(tmp_path / "rank1.json", ev)
    _one_error(capsys, main(["analyze", str(a), str(b), "--engine", "dask", "--scheduler", "bad", "-q"]),
               "not a Dask scheduler address")
    import errno

    import xlsxwriter

    def full(self):
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(xlsxwriter.Workbook, "_store_workbook", full)  # xlsxwriter wraps it in FileCreateError
        _one_error(capsys, main(["report", str(a), "-o", str(tmp_path / "r.xlsx"), "-q", "--no-cache"]),
                   "No space left on device")
    assert not [f for f in os.listdir(tmp_path) if f.endswith((".tmp", ".xlsx"))]
    script = tmp_path / "x.py"
    script.write_text("print('hi')")
    with monkeypatch.context() as m:
        m.setitem(__import__("sys").modules, "triton", None)
        _one_error(capsys, main(["intra", "run", "--", "python", str(script)]), "intra run needs triton")


def test_mixed_gpus_and_world_size_zero_get_notes(tmp_path, capsys):
    ev = [_k(1, 1, 1), _launch(0, 1)]
    r0 = write_trace(tmp_path / "w0.json", ev, distributedInfo={"rank": 0, "world_size": 0},
                     deviceProperties=[{"id": 0, "name": "NVIDIA H100"}, {"id": 1, "name": "NVIDIA A100"}])
    r1 = write_trace(tmp_path / "w1.json", ev, distributedInfo={"rank": 1, "world_size": 0},
                     deviceProperties=[{"id": 0, "name": "NVIDIA H100"}])
    assert main(["analyze", str(r0), str(r1), "-q", "--no-cache", "--format", "json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any("world_size 0" in n for n in notes) and any("different GPU models" in n for n in notes)


def test_a_killed_writer_leaves_nothing_behind_the_next_run(tmp_path, capsys):
    """kill -9 during report left hidden temporaries in the output folder; the next write there removes those of
    writers that no longer run, and keeps a live writer's."""
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout.strip()
    left = tmp_path / f".r.html.{dead}.abc123.tmp"
    left.write_text("partial")
    live = tmp_path / f".r.html.{os.getppid()}.def456.tmp"  # a running process's: not ours to remove
    live.write_text("in progress")
    csv_left = tmp_path / "csv" / f".kernscope-{dead}.xyz"
    csv_left.mkdir(parents=True)
    p = write_trace(tmp_path / "t.json", [_k(1, 1, 1), _launch(0, 1)])
    assert main(["report", str(p), "-o", str(tmp_path / "r.html"), "-q", "--no-cache"]) == 0
    assert main(["report", str(p), "-o", str(tmp_path / "csv"), "-q", "--no-cache"]) == 0
    assert not left.exists() and live.exists() and not csv_left.exists()
    assert (tmp_path / "r.html").is_file()


def test_a_failed_whole_file_write_leaves_the_target_and_no_temporary(tmp_path):
    import errno
    from pathlib import Path

    from kernscope.errors import KernscopeError
    from kernscope.sink import Temporary

    target = tmp_path / "out.json"
    target.write_text("before")
    with pytest.raises(KernscopeError, match=r"out\.json: cannot write output \(No space left"):
        with Temporary(target) as tmp:
            Path(tmp).write_text("half")
            raise OSError(errno.ENOSPC, "No space left on device")
    with pytest.raises(ValueError, match="a bug"):
        with Temporary(target) as tmp:
            raise ValueError("a bug")  # not an I/O error: raised as it is
    assert target.read_text() == "before" and sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]
    with Temporary(target) as tmp:
        Path(tmp).write_text("after")
    assert target.read_text() == "after" and sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]
