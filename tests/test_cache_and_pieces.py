"""The parse cache cannot lie, and the piecewise parser survives cuts in strings, tails and gzip streams."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from conftest import ROOT, TRACES, needs_traces, write_trace

import kernscope
from kernscope import pipeline
from kernscope.cli import main
from kernscope.load import cache as kcache
from kernscope.load import document
from kernscope.testing.synth import make_trace

EXAMPLE = Path(kernscope.__file__).parent / "examples" / "h200_gpt_train_step.pt.trace.json.gz"


def _kernel(ts, dur, corr, name="k", stream=7):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "device": 0, "stream": stream}}


def _entry_dir() -> Path:
    found = kcache.entries()
    assert len(found) == 1, found
    return found[0][0]


# -- cache integrity ---------------------------------------------------------------------------------
def test_same_size_edit_with_mtime_restored_is_not_served_stale(tmp_path):
    p = write_trace(tmp_path / "t.json", [_kernel(1, 2, 1), _kernel(10, 3, 2)])
    a = kernscope.load(p)
    assert int(a.kernels["dur"].sum()) == 5000
    st = os.stat(p)
    data = p.read_bytes().replace(b'"dur": 3', b'"dur": 7')  # same size
    p.write_bytes(data)
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(p).st_size == st.st_size and os.stat(p).st_mtime_ns == st.st_mtime_ns
    b = kernscope.load(p)
    assert not b.from_cache and int(b.kernels["dur"].sum()) == 9000


@pytest.mark.parametrize("damage", ["flip_bit", "truncate", "empty", "manifest_empty_object", "manifest_garbage",
                                    "missing_table", "strings_flip_bit", "strings_missing"])
def test_damaged_entry_is_discarded_and_rebuilt(tmp_path, damage, monkeypatch):
    monkeypatch.setattr(kcache, "STRINGS_SLACK", 1 << 40)  # codes and strings, however many strings this process holds
    p = tmp_path / "t.json"
    make_trace(p, 200_000)
    want = kernscope.load(p, cache=False)
    kernscope.load(p)  # writes the entry
    d = _entry_dir()
    target = d / ("strings.arrow" if damage.startswith("strings") else "gpu.arrow")
    if damage in ("flip_bit", "strings_flip_bit"):
        b = bytearray(target.read_bytes())
        b[len(b) // 2] ^= 0x10
        target.write_bytes(bytes(b))
    elif damage == "truncate":
        target.write_bytes(target.read_bytes()[: 100])
    elif damage == "empty":
        target.write_bytes(b"")
    elif damage == "manifest_empty_object":
        (d / "manifest.json").write_text("{}")
    elif damage == "manifest_garbage":
        (d / "manifest.json").write_bytes(b"\x00\xff garbage")
    else:
        target.unlink()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        t = kernscope.load(p)
    assert not t.from_cache
    assert any("damaged cache entry" in str(x.message) for x in w)
    assert t.gpu.select("ts", "dur").equals(want.gpu.select("ts", "dur"))
    again = kernscope.load(p)  # rebuilt: the next load is a clean hit
    assert again.from_cache and again.gpu.select("ts", "dur").equals(want.gpu.select("ts", "dur"))


def _categorical_tables(n: int, end_off_by: int | None = None) -> dict[str, pl.DataFrame]:
    names = pl.Series([f"kernel_{i % 37}" if i % 5 else None for i in range(n)], dtype=pl.Categorical)
    ts = pl.Series([1_000 + 7 * i for i in range(n)], dtype=pl.Int64)
    dur = pl.Series([None if i % 11 == 0 else i % 13 for i in range(n)], dtype=pl.Int64)
    events = pl.DataFrame({"name": names, "ts": ts, "dur": dur,
                           "tid": pl.Series([str(i % 3) for i in range(n)], dtype=pl.Categorical)})
    events = events.with_columns((pl.col("ts") + pl.col("dur")).alias("end"), pl.Series("n", range(n), dtype=pl.Int64))
    if end_off_by is not None:
        events = events.with_columns(pl.when(pl.col("n") == n // 2).then(pl.col("end") + end_off_by)
                                     .otherwise(pl.col("end")).alias("end"))
    gpu = events.head(n // 2).select("ts", "name")
    return {"events": events, "gpu": gpu, "flows": events.head(0).select("ts"), "steps": pl.DataFrame({"step": [0]})}


@pytest.mark.parametrize("compressed", [False, True])
def test_entry_writes_categoricals_as_codes_and_end_as_a_sum(monkeypatch, compressed):
    """Categorical columns are written as their codes with the strings of the codes once for the entry, and ``end``
    (= ``ts`` + ``dur`` in every row, null with ``dur``) is not written but summed when read: the tables read back
    equal, types and nulls included; an ``end`` that differs in one row is written as it is."""
    from polars.testing import assert_frame_equal

    monkeypatch.setattr(kcache, "COMPRESS_ABOVE", 0 if compressed else 1 << 40)
    monkeypatch.setattr(kcache, "STRINGS_SLACK", 1 << 40)  # however many strings this process holds
    for i, off in enumerate((None, 1)):
        tables = _categorical_tables(5_000, off)
        d = kcache.write_entry(f"{i:032x}", {"o": 3}, tables, {}, notify=lambda m: None)
        assert d is not None
        e = kcache.open_entry(f"{i:032x}", {"o": 3}, notify=lambda m: None)
        assert e is not None
        for t in kcache.TABLES:
            assert_frame_equal(e.table(t), tables[t], check_exact=True)
        files = e.manifest["files"]
        assert files["events.arrow"]["codes"] == ["name", "tid"] and files["gpu.arrow"]["codes"] == ["name"]
        stored = pl.read_ipc_schema(d / "events.arrow")
        assert stored["name"] == pl.UInt32 and stored["tid"] == pl.UInt32
        if off is None:
            assert files["events.arrow"]["derived"] == {"end": ["ts", "dur"]} and "end" not in stored
        else:
            assert files["events.arrow"]["derived"] == {} and "end" in stored
        strings = pl.read_ipc(d / kcache.STRINGS_FILE)["value"]
        assert {"kernel_0", "kernel_36", "0", "2"} <= set(strings.drop_nulls().to_list())


def test_entry_writes_categoricals_as_such_when_the_process_holds_many_more_strings(monkeypatch):
    """polars' categories are the process's: when it holds many more strings than the tables have rows, the
    columns are written as categoricals (no strings file), and read back equal."""
    from polars.testing import assert_frame_equal

    monkeypatch.setattr(kcache, "STRINGS_PER_ROW", 0)
    monkeypatch.setattr(kcache, "STRINGS_SLACK", 0)
    tables = _categorical_tables(2_000)
    d = kcache.write_entry("c" * 32, {"o": 4}, tables, {}, notify=lambda m: None)
    assert d is not None and not (d / kcache.STRINGS_FILE).exists()
    e = kcache.open_entry("c" * 32, {"o": 4}, notify=lambda m: None)
    assert e is not None and e.manifest["files"]["events.arrow"]["codes"] == []
    assert pl.read_ipc_schema(d / "events.arrow")["name"] == pl.Categorical
    for t in kcache.TABLES:
        assert_frame_equal(e.table(t), tables[t], check_exact=True)


def test_a_code_without_its_string_is_a_damaged_entry(monkeypatch):
    """A code past the strings written (a strings file of another entry, checksums and all) is damage, not a wrong
    name: reading the table raises ValueError, which the load turns into a discarded entry."""
    monkeypatch.setattr(kcache, "STRINGS_SLACK", 1 << 40)
    tables = _categorical_tables(2_000)
    d = kcache.write_entry("b" * 32, {"o": 5}, tables, {}, notify=lambda m: None)
    assert d is not None
    e = kcache.open_entry("b" * 32, {"o": 5}, notify=lambda m: None)
    assert e is not None
    short = d / kcache.STRINGS_FILE
    pl.read_ipc(short).head(1).write_ipc(short)
    e.manifest["files"][kcache.STRINGS_FILE].update(size=short.stat().st_size, xxh3=kcache._checksum_file(short))
    with pytest.raises(ValueError, match="code without a string"):
        e.table("events")


def test_flipped_bit_in_lazy_events_table_reparses(tmp_path):
    p = tmp_path / "t.json"
    make_trace(p, 200_000)
    kernscope.load(p)
    d = _entry_dir()
    b = bytearray((d / "events.arrow").read_bytes())
    b[len(b) // 3] ^= 0x01
    (d / "events.arrow").write_bytes(bytes(b))
    t = kernscope.load(p)
    assert t.from_cache
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ev = t.events
    assert any("lost its events table" in str(x.message) for x in w)
    assert ev.height == kernscope.load(p, cache=False).events.height


def test_entry_checksums_cover_every_file(tmp_path, monkeypatch):
    monkeypatch.setattr(kcache, "STRINGS_SLACK", 1 << 40)  # codes and strings, however many strings this process holds
    p = tmp_path / "t.json"
    make_trace(p, 100_000)
    kernscope.load(p)
    d = _entry_dir()
    key = kcache._secret(d.parent.parent)
    assert key is not None
    manifest = kcache._unseal((d / "manifest.json").read_bytes(), key)
    assert set(manifest["files"]) == {f"{t}.arrow" for t in kcache.TABLES} | {kcache.STRINGS_FILE}
    assert set(manifest["files"]) == {f.name for f in d.iterdir() if f.is_file() and f.name != "manifest.json"}
    for name, f in manifest["files"].items():
        assert kcache._checksum_file(d / name) == f["xxh3"]


def _stored_and_in_memory(trace):
    d = _entry_dir()
    stored = sum((d / f"{t}.arrow").stat().st_size for t in kcache.TABLES)
    return stored, sum(getattr(trace, t).estimated_size() for t in ("events", "gpu", "flows", "steps"))


def test_entry_tables_over_the_threshold_are_compressed_and_read_back_equal(monkeypatch):
    """Tables over COMPRESS_ABOVE are zstd-compressed Arrow IPC (mostly-null columns and repeated values: a JAX
    profile's entry was 37x smaller compressed): with the threshold at 0 the example trace's entry is well under its
    tables' size in memory, and a cached load gives the same tables."""
    monkeypatch.setattr(kcache, "COMPRESS_ABOVE", 0)
    monkeypatch.setattr(kcache, "COMPRESS_EVENTS_ABOVE", 0)  # a load's event table, written first, decides
    fresh = kernscope.load(EXAMPLE)
    stored, in_memory = _stored_and_in_memory(fresh)
    assert stored * 3 < in_memory, (stored, in_memory)
    again = kernscope.load(EXAMPLE)
    assert again.from_cache
    for t in ("events", "gpu", "flows", "steps"):
        assert getattr(again, t).equals(getattr(fresh, t)), t


def test_small_entries_are_written_uncompressed_and_read_back_equal():
    """Under COMPRESS_ABOVE (a few MB) the tables are written as they are: the example's entry is about its tables'
    size, and reads back equal."""
    fresh = kernscope.load(EXAMPLE)
    stored, in_memory = _stored_and_in_memory(fresh)
    assert stored > in_memory / 3, (stored, in_memory)
    again = kernscope.load(EXAMPLE)
    assert again.from_cache
    for t in ("events", "gpu", "flows", "steps"):
        assert getattr(again, t).equals(getattr(fresh, t)), t


@needs_traces
def test_a_real_trace_of_tens_of_mb_gets_a_compressed_entry_that_reads_back_equal():
    """With the default thresholds a real trace whose tables are over COMPRESS_ABOVE (HTA's v100 DDP rank: ~26 MB of
    tables) is stored zstd-compressed, far under its size in memory (written as it was before session 57, every byte
    was fresh page cache: 0.17-0.20 s of system time for a 216 MB replica's event table against 0.07-0.10 s of CPU
    compressed), and a cached load gives the same tables."""
    path = TRACES / "hta" / "v100_2rank_nccl_rank1.json.gz"
    fresh = kernscope.load(path)
    stored, in_memory = _stored_and_in_memory(fresh)
    assert in_memory > kcache.COMPRESS_ABOVE
    assert stored * 3 < in_memory, (stored, in_memory)
    again = kernscope.load(path)
    assert again.from_cache
    for t in ("events", "gpu", "flows", "steps"):
        assert getattr(again, t).equals(getattr(fresh, t)), t


@pytest.mark.parametrize("compressed", [False, True])
def test_entry_tables_read_back_in_one_chunk_or_in_batches_when_large(monkeypatch, compressed):
    """A table written as it is reads back as one chunk per column, as a parse leaves it (in polars' batches of 2**17
    rows, a query on the read table first copied every column into one chunk: +0.5 GB on a JAX profile's cached
    analyze); a compressed one keeps batches of BATCH_ROWS, which polars compresses and reads in parallel."""
    monkeypatch.setattr(kcache, "COMPRESS_ABOVE", 0 if compressed else 1 << 40)
    monkeypatch.setattr(kcache, "BATCH_ROWS", 100_000)
    n = 300_000  # over polars' default batch
    tables = {t: pl.DataFrame({"a": pl.int_range(n, eager=True), "b": pl.Series([None] * n, dtype=pl.Int64)})
              for t in kcache.TABLES}
    assert kcache.write_entry("e" * 32, {"o": 2}, tables, {}, notify=lambda m: None) is not None
    e = kcache.open_entry("e" * 32, {"o": 2}, notify=lambda m: None)
    assert e is not None
    for t in kcache.TABLES:
        back = e.table(t)
        assert back.equals(tables[t])
        assert back["a"].n_chunks() == (3 if compressed else 1)


def test_a_loads_event_table_decides_the_entrys_compression(monkeypatch):
    """A load writes the event table before the other tables exist, so its size alone decides (over
    COMPRESS_EVENTS_ABOVE: compressed), whatever COMPRESS_ABOVE says; the entry reads back equal either way."""
    monkeypatch.setattr(kcache, "COMPRESS_ABOVE", 1 << 40)
    monkeypatch.setattr(kcache, "COMPRESS_EVENTS_ABOVE", 0)
    monkeypatch.setattr(kcache, "STRINGS_SLACK", 1 << 40)  # codes and strings, however many strings this process holds
    fresh = kernscope.load(EXAMPLE)
    stored, in_memory = _stored_and_in_memory(fresh)
    assert stored * 3 < in_memory, (stored, in_memory)
    manifest_files = kcache.open_entry(*_only_entry_key(), notify=lambda m: None).manifest["files"]
    assert set(manifest_files) == {f"{t}.arrow" for t in kcache.TABLES} | {kcache.STRINGS_FILE}
    again = kernscope.load(EXAMPLE)
    assert again.from_cache
    for t in ("events", "gpu", "flows", "steps"):
        assert getattr(again, t).equals(getattr(fresh, t)), t


def _only_entry_key() -> tuple[str, dict]:
    import json as _json

    d = _entry_dir()
    body = _json.loads(_json.loads((d / "manifest.json").read_bytes())["body"])
    return body["digest"], body["options"]


@pytest.mark.parametrize("salvage", [False, True])
def test_link_hands_over_the_event_table_it_keeps(tmp_path, salvage):
    """``link`` hands the event table over (the load starts writing it to the cache) once, and it is the very table
    the trace keeps: also when salvaging, where a step annotation whose number does not fit int64 is filtered out
    of it first."""
    from kernscope.link import StepSpec, link
    from kernscope.load.formats import ParseOptions, detect
    from kernscope.load.source import open_trace

    events = [_kernel(10, 2, 1), {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                                  "ts": 5, "dur": 1, "args": {"correlation": 1}},
              {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#99999999999999999999", "pid": 1, "tid": 1,
               "ts": 1, "dur": 30}]
    p = write_trace(tmp_path / "t.json", events if salvage else events[:2])
    src = open_trace(str(p))
    raw = detect(src).parse(src, ParseOptions(salvage=salvage))
    src.close()
    if salvage:
        raw.salvaged = raw.salvaged or 3  # a salvaged read of a whole file (the error path needs one)
    handed: list[pl.DataFrame] = []
    trace = link(raw, str(p), steps=StepSpec(), events_ready=handed.append)
    assert len(handed) == 1
    assert handed[0] is trace.events
    assert trace.events.height == 2  # the launch and the kernel: the bad step annotation is gone when salvaging


def test_entry_writer_keeps_nothing_when_abandoned_or_incomplete(tmp_path):
    """An entry written table by table is visible only once committed whole: abandoned, or committed without all its
    tables (a failed write), it leaves no entry and no temporary directory."""
    tables = _categorical_tables(50)
    w = kcache.EntryWriter("a" * 32, {"o": 1}, notify=lambda m: None)
    w.add("events", tables["events"])
    w.abandon()
    assert not w.active
    notes: list[str] = []
    w = kcache.EntryWriter("a" * 32, {"o": 1}, notify=notes.append)
    w.add("events", tables["events"])
    assert w.commit({}) is None
    assert "could not write the cache" in notes[0]
    assert kcache.open_entry("a" * 32, {"o": 1}, notify=lambda m: None) is None
    root = kcache.cache_root()
    assert not list(root.rglob(".tmp-*")), list(root.rglob("*"))
    w = kcache.EntryWriter("a" * 32, {"o": 1}, notify=lambda m: None)
    for name, df in tables.items():
        w.add(name, df)
    assert w.commit({}) is not None
    e = kcache.open_entry("a" * 32, {"o": 1}, notify=lambda m: None)
    assert e is not None and all(e.table(n).equals(df) for n, df in tables.items())


def test_an_event_table_write_that_fails_on_its_thread_is_told_and_the_load_goes_on(tmp_path, monkeypatch):
    """The event table is written on a thread during the link: an error there (polars' own, here) is one notice, no
    traceback, no entry and no temporary directory; the load returns the linked trace."""
    p = write_trace(tmp_path / "t.json", [_kernel(1, 2, 1), _kernel(10, 3, 2)])

    def broken(self, tmp, name, df):
        raise pl.exceptions.ComputeError("no space for the event table")

    monkeypatch.setattr(kcache.EntryWriter, "_write_table", broken)
    notes: list[str] = []
    assert pipeline.load(str(p), notify=notes.append).gpu.height == 2
    assert notes == ["kernscope: could not write the cache (no space for the event table); continuing without it"]
    assert kcache.entries() == []
    assert not list(kcache.cache_root().rglob(".tmp-*"))


def test_an_error_committing_the_entry_is_told_and_leaves_nothing(tmp_path, monkeypatch):
    """The strings and the manifest are written last, on the analysis's writer thread: polars failing there is one
    notice, no entry and no temporary directory."""
    def broken(self, tmp):
        raise pl.exceptions.ComputeError("strings not written")

    monkeypatch.setattr(kcache.EntryWriter, "_write_strings", broken)
    monkeypatch.setattr(kcache, "STRINGS_SLACK", 1 << 40)  # codes, whatever strings this worker holds already
    notes: list[str] = []
    w = kcache.EntryWriter("c" * 32, {"o": 1}, notify=notes.append)
    for name, df in _categorical_tables(50).items():
        w.add(name, df)
    assert w.commit({}) is None
    assert notes == ["kernscope: could not write the cache (strings not written); continuing without it"]
    assert kcache.entries() == []
    assert not list(kcache.cache_root().rglob(".tmp-*"))


def test_a_trace_removed_while_it_was_linked_is_kept_and_not_cached(tmp_path, monkeypatch):
    """The file is gone by the time the link ends (its event table already went to the cache writer): the trace read
    is returned, with the notice that it changed, and the cache holds no entry and no temporary directory."""
    p = write_trace(tmp_path / "t.json", [_kernel(1, 2, 1), _kernel(10, 3, 2)])
    real = pipeline.link

    def link_then_remove(*a, **k):
        trace = real(*a, **k)
        p.unlink()
        return trace

    monkeypatch.setattr(pipeline, "link", link_then_remove)
    notes: list[str] = []
    assert pipeline.load(str(p), notify=notes.append).gpu.height == 2
    assert notes == [f"kernscope: {p} changed while it was read; not caching it"]
    assert kcache.entries() == []
    assert not list(kcache.cache_root().rglob(".tmp-*"))


def test_a_link_that_fails_after_the_event_table_was_handed_over_leaves_no_entry(tmp_path):
    """A step marker that matches nothing fails the link after the event table went to the cache writer: the error is
    the usual one, and the cache holds neither an entry nor a temporary directory; the same trace then loads and
    caches as usual."""
    from kernscope.errors import TraceError
    from kernscope.link import StepSpec

    p = write_trace(tmp_path / "t.json", [_kernel(1, 2, 1), _kernel(10, 3, 2)])
    with pytest.raises(TraceError, match="matches no annotation"):
        kernscope.load(p, steps=StepSpec(marker="no_such_marker"))
    root = kcache.cache_root()
    assert kcache.entries() == []
    assert not list(root.rglob(".tmp-*"))
    assert kernscope.load(p).gpu.height == 2
    assert kernscope.load(p).from_cache


def test_concurrent_cold_loads_leave_one_clean_entry(tmp_path):
    p = tmp_path / "t.json"
    make_trace(p, 1_500_000)
    code = ("import kernscope, sys; t = kernscope.load(sys.argv[1]); "
            "print(t.kernels.height, int(t.kernels['dur'].sum()))")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    procs = [subprocess.Popen([sys.executable, "-c", code, str(p)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=env) for _ in range(4)]
    outs = [pr.communicate(timeout=120) for pr in procs]
    assert all(pr.returncode == 0 for pr in procs), [o[1][-300:] for o in outs]
    assert len({o[0] for o in outs}) == 1
    assert len(kcache.entries()) == 1
    assert not list(_entry_dir().parent.glob(".tmp-*"))
    assert kernscope.load(p).from_cache


def test_lru_eviction_keeps_the_cache_under_its_cap(tmp_path, monkeypatch):
    paths = []
    for i in range(3):
        p = tmp_path / f"t{i}.json"
        make_trace(p, 300_000, seed=i)
        paths.append(p)
    kernscope.load(paths[0])
    one = kcache.entries()[0][1]
    monkeypatch.setenv("KERNSCOPE_CACHE_MAX_BYTES", str(int(one * 2.5)))
    kernscope.load(paths[1])
    kernscope.load(paths[0])  # touch: paths[1] is now the least recently used
    kernscope.load(paths[2])
    assert len(kcache.entries()) == 2
    assert kernscope.load(paths[0]).from_cache and kernscope.load(paths[2]).from_cache
    assert not kernscope.load(paths[1]).from_cache


def test_cache_cli_info_and_clear(tmp_path, capsys):
    p = tmp_path / "t.json"
    make_trace(p, 100_000)
    kernscope.load(p)
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert "entries: 1" in out and "cap:" in out
    assert main(["cache", "clear"]) == 0
    assert kcache.entries() == []


def test_no_usable_home_falls_back_to_a_temp_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("KERNSCOPE_CACHE_DIR")
    monkeypatch.setenv("HOME", "/proc/no-home-here")
    monkeypatch.setenv("XDG_CACHE_HOME", "/proc/no-home-here")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    p = write_trace(tmp_path / "t.json", [_kernel(1, 2, 1)])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        kernscope.load(p)
        assert kernscope.load(p).from_cache  # (the notice again, recorded here: not one more warning of the run)
    assert any("no usable home cache directory" in str(x.message) for x in w)


# -- stored outputs ------------------------------------------------------------------------------------
def test_second_analyze_prints_the_stored_output(tmp_path, capsys, monkeypatch):
    p = tmp_path / "t.json"
    make_trace(p, 300_000)
    assert main(["analyze", str(p), "--format", "json"]) == 0
    first = capsys.readouterr().out
    import kernscope.pipeline as pipeline

    def boom(*a, **k):
        raise AssertionError("the trace was loaded again")

    with monkeypatch.context() as m:
        m.setattr(pipeline, "load", boom)
        assert main(["analyze", str(p), "--format", "json"]) == 0
        assert capsys.readouterr().out == first
    # other options: a different output, computed (and the trace comes from the parse cache)
    assert main(["analyze", str(p), "--format", "json", "--top", "3"]) == 0
    third = json.loads(capsys.readouterr().out)
    assert len(third["kernels"]) <= 3 and third["trace"]["kernels"] == json.loads(first)["trace"]["kernels"]


# -- pieces ---------------------------------------------------------------------------------------------
def test_cut_inside_a_string_is_repaired(tmp_path, monkeypatch):
    """Names that contain the boundary pattern ``},{``: pieces cut there are merged and parsed again."""
    monkeypatch.setattr(document, "CHUNK_BYTES", 200)
    evil = 'x}, {"ph": "X", "cat": "kernel", "name": "fake", "ts": 1, "dur": 1} ,{y' * 5
    ev = [_kernel(10 * i, 2, i + 1, name=evil if i % 3 == 0 else f"k{i}") for i in range(60)]
    p = write_trace(tmp_path / "evil.json", ev)
    t = kernscope.load(p, cache=False)
    assert t.kernels.height == 60
    assert t.kernels.filter(pl.col("name").cast(pl.String) == evil).height == 20
    assert "fake" not in set(t.kernels["name"].cast(pl.String).to_list())


def test_metadata_arrays_after_the_events_in_a_gzip_stream(tmp_path, monkeypatch):
    """Kineto writes deviceProperties (an array of objects) after traceEvents; a streamed cut may land there."""
    monkeypatch.setattr(document, "CHUNK_BYTES", 300)
    from kernscope.load import source

    monkeypatch.setattr(source, "BLOCK_BYTES", 512)
    ev = [_kernel(10 * i, 2, i + 1) for i in range(80)]
    props = [{"id": i, "name": "NVIDIA H100", "numSms": 132, "nested": [{"a": [1, 2]}, {"b": {}}]} for i in range(30)]
    doc = {"schemaVersion": 1, "traceEvents": ev, "deviceProperties": props, "traceName": "x"}
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(json.dumps(doc, indent=2).encode()))
    t = kernscope.load(p, cache=False)
    assert t.kernels.height == 80
    assert len(t.device_properties) == 30 and t.metadata["traceName"] == "x"


def test_parallel_pieces_equal_one_piece(tmp_path, monkeypatch):
    p = tmp_path / "t.json"
    st = make_trace(p, 2_000_000)
    whole = kernscope.load(p, cache=False, workers=1)
    monkeypatch.setattr(document, "CHUNK_BYTES", 1 << 16)
    pieces = kernscope.load(p, cache=False, workers=2)
    assert pieces.kernels.height == whole.kernels.height == st.kernels
    cols = ["idx", "ts", "dur", "correlation", "external_id"]
    assert pieces.events.select(cols).equals(whole.events.select(cols))
    assert pieces.flows.height == whole.flows.height


def _plain_and_gzipped(tmp_path: Path) -> tuple[bytes, Path, Path]:
    """The bundled example's JSON text, written plain and gzipped."""
    example = ROOT / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    text = gzip.decompress(example.read_bytes())
    plain, packed = tmp_path / "t.json", tmp_path / "t.json.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text))
    return text, plain, packed


def test_a_gzip_traces_pieces_are_its_buffers_not_copies(tmp_path, monkeypatch):
    """A gzip trace's pieces are cut from the decompressed buffer by handing the buffer itself over (no copy of the
    piece's text): joined with their separators they are the plain file's, cut at the same places."""
    from kernscope.load import source
    from kernscope.load.document import Splitter

    text, plain, packed = _plain_and_gzipped(tmp_path)
    monkeypatch.setattr(source, "BLOCK_BYTES", 1 << 14)
    cut = {}
    for path in (plain, packed):
        src = source.open_trace(path)
        try:
            pieces = list(Splitter(src, source.Limits(), chunk_bytes=1 << 16).pieces())
            cut[path] = [(p.offset, bytes(p.text), p.sep, p.final) for p in pieces]
            if path == packed:
                assert all(isinstance(p.text, memoryview) and isinstance(p.text.obj, bytearray) for p in pieces)
        finally:
            src.close()
    assert len(cut[packed]) > 20 and cut[packed] == cut[plain]


def test_a_gzip_traces_piece_buffers_are_reused_once_parsed_and_never_while_viewed(tmp_path, monkeypatch):
    """After the first piece (whose buffer grows with its text: a small document needs no more), a streamed piece's
    text is written into a buffer of one size, which ``Splitter.recycle`` takes back once the piece is parsed: the
    next pieces reuse it (a new buffer a piece was fresh memory to fault in, 89 k more page faults on a 216 MB gzip
    than on the same file plain). A buffer something still views is not reused (its text stays as it was); the cuts
    are the plain file's."""
    import numpy as np

    from kernscope.load import source
    from kernscope.load.document import Splitter

    text, plain, packed = _plain_and_gzipped(tmp_path)
    monkeypatch.setattr(source, "BLOCK_BYTES", 1 << 14)
    src = source.open_trace(plain)
    try:
        want = [(p.offset, bytes(p.text), p.sep, p.final) for p in Splitter(src, source.Limits(), chunk_bytes=1 << 16).pieces()]
    finally:
        src.close()
    got, buffers = [], []
    src = source.open_trace(packed)
    try:
        splitter = Splitter(src, source.Limits(), chunk_bytes=1 << 16)
        for i, p in enumerate(splitter.pieces()):
            got.append((p.offset, bytes(p.text), p.sep, p.final))
            if p.buffer is not None:
                buffers.append(p.buffer)
            if i == 3:
                held_buffer, held_view = p.buffer, np.frombuffer(p.text, dtype=np.uint8)  # still viewed when recycled
            splitter.recycle(p)
    finally:
        src.close()
    assert len(got) > 20 and got == want
    assert len(buffers) == len(got) - 1  # (the final piece keeps its own)
    assert 2 <= len({id(b) for b in buffers[1:]}) <= 3 and buffers[0] is not buffers[1]
    assert all(b is not held_buffer for b in buffers[4:]) and held_view.tobytes() == want[3][1]


def test_a_gzip_event_longer_than_a_piece_buffer_grows_it_and_cuts_as_the_plain_file(tmp_path):
    """An event longer than a piece's buffer (a piece and two blocks: 2.06 MB here) is gathered in a grown buffer
    of its own; the pieces around it still come from the reused ones, and every cut is the plain file's."""
    from kernscope.load import source
    from kernscope.load.document import Splitter

    ev: list[dict[str, Any]] = [{"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": i, "dur": 1,
                                 "args": {"n": i}} for i in range(3000)]
    ev[1500]["args"] = {"n": 1500, "long": "x" * (3 << 20)}
    text = json.dumps({"traceEvents": ev}).encode()
    plain, packed = tmp_path / "t.json", tmp_path / "t.json.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text))
    cut: dict[Path, list[tuple[int, bytes, bytes, bool]]] = {}
    for path in (plain, packed):
        src = source.open_trace(path)
        try:
            splitter = Splitter(src, source.Limits(), chunk_bytes=1 << 16)
            cut[path] = []
            for p in splitter.pieces():
                cut[path].append((p.offset, bytes(p.text), p.sep, p.final))
                splitter.recycle(p)
        finally:
            src.close()
    assert cut[packed] == cut[plain] and max(len(c[1]) for c in cut[packed]) > 3 << 20
    assert kernscope.load(packed, cache=False).events.equals(kernscope.load(plain, cache=False).events)


def test_a_gzip_traces_heap_is_trimmed_as_its_pieces_are_parsed(tmp_path, monkeypatch):
    """A gzip trace's pieces are decompressed buffers from the C heap: it is trimmed every ``TRIM_BYTES`` of text
    parsed (the 216 MB v100 replica gzipped: peak 393-434 -> 339-348 MB), a plain one's is not; the same
    tables either way."""
    import importlib

    kineto = importlib.import_module("kernscope.load.kineto")
    text, plain, packed = _plain_and_gzipped(tmp_path)
    monkeypatch.setattr(document, "CHUNK_BYTES", 1 << 16)  # dozens of pieces
    monkeypatch.setattr(kineto, "TRIM_BYTES", 1 << 18)
    trims: list[int] = []
    trim = kineto.trim_heap

    def counted() -> None:
        trims.append(1)
        trim()

    monkeypatch.setattr(kineto, "trim_heap", counted)
    loads = {}
    for path in (plain, packed):
        trims.clear()
        loads[path] = (kernscope.load(path, cache=False), len(trims))
    (a, plain_trims), (b, gz_trims) = loads[plain], loads[packed]
    assert gz_trims - plain_trims >= len(text) // (1 << 18) - 2 > 3  # the join's own trims are the same for both
    for name in ("events", "gpu", "flows", "steps"):
        assert getattr(a, name).equals(getattr(b, name)), name


def test_the_join_trims_the_heap_per_16_mb_of_parts_freed(monkeypatch):
    """The join of the pieces trims the C heap as their parts are freed, once per ``TRIM_MIN_BYTES`` of them: a small
    trace's join trims nothing (each trim's pages are faulted in again by the next allocations), a large one's as it
    goes (here the bound set to 0: once per column); the same table either way."""
    import importlib

    kineto = importlib.import_module("kernscope.load.kineto")
    example = ROOT / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    trims: list[int] = []
    monkeypatch.setattr(kineto, "trim_heap", lambda freed=None: trims.append(1))
    built: list[str] = []  # the event columns the join built (not the flow arrows' and metadata's, stacked after)
    joined, stacked, stacking = kineto._joined, kineto.stacked, [False]

    def joined_counted(c, *a, **k):
        if not stacking[0]:
            built.append(c)
        return joined(c, *a, **k)

    monkeypatch.setattr(kineto, "_joined", joined_counted)

    def stacked_apart(*a, **k):
        stacking[0] = True
        try:
            return stacked(*a, **k)
        finally:
            stacking[0] = False

    monkeypatch.setattr(kineto, "stacked", stacked_apart)
    small = kernscope.load(example, cache=False, projection="analyze")
    assert trims == [] and len(built) > 10
    built.clear()
    monkeypatch.setattr(kineto, "TRIM_MIN_BYTES", 0)
    large = kernscope.load(example, cache=False, projection="analyze")
    assert len(trims) == len(built) > 10
    assert small.events.equals(large.events) and small.gpu.equals(large.gpu)


@pytest.mark.parametrize("trace", [
    ROOT / "tests" / "data" / "kineto" / "h100_gpt_stack_shapes.pt.trace.json.gz",  # stacks, shapes, flows
    ROOT / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz",
])
@pytest.mark.parametrize("projected", [False, True])
def test_pieces_merged_into_blocks_equal_pieces_joined_once(trace, projected, tmp_path, monkeypatch):
    """Large traces merge their parsed pieces into blocks as they go (bounded memory at 10 GB): with blocks of a
    few pieces (and of one), every table equals the load that joins all pieces at the end."""
    import importlib

    from kernscope.analyze.needs import analyze_projection

    kineto = importlib.import_module("kernscope.load.kineto")
    plain = tmp_path / "t.json"
    plain.write_bytes(gzip.decompress(trace.read_bytes()))
    trace = plain
    monkeypatch.setattr(document, "CHUNK_BYTES", 1 << 16)  # dozens of pieces
    merges: list[int] = []
    merge = kineto.merge_pieces
    def counted(tables: list[pl.DataFrame]) -> pl.DataFrame:
        merges.append(len(tables))
        return merge(tables)

    monkeypatch.setattr(kineto, "merge_pieces", counted)
    projection = analyze_projection() if projected else None
    monkeypatch.setattr(kineto, "BLOCK_BYTES", 1 << 40)
    joined = kernscope.load(trace, cache=False, projection=projection)
    assert joined.stats.events > 1000
    for block in (1, 1 << 18):
        monkeypatch.setattr(kineto, "BLOCK_BYTES", block)
        merges.clear()
        merged = kernscope.load(trace, cache=False, projection=projection)
        assert len(merges) > 3 and (max(merges) == 1 if block == 1 else max(merges) >= 2), merges
        for name in ("events", "gpu", "flows", "steps"):
            assert getattr(merged, name).equals(getattr(joined, name)), (name, block)
    # the join one column at a time (large traces), against two at a time
    monkeypatch.setattr(kineto, "SERIAL_JOIN_ROWS", 1)
    serial = kernscope.load(trace, cache=False, projection=projection)
    for name in ("events", "gpu", "flows", "steps"):
        assert getattr(serial, name).equals(getattr(joined, name)), name


def test_cached_analyze_prints_the_stored_output_without_importing_polars(tmp_path):
    """The second analyze of an unchanged file is a hash and a read: no table library is even imported."""
    trace = tmp_path / "t.json"
    make_trace(trace, 300_000)
    env = {**os.environ, "KERNSCOPE_CACHE_DIR": str(tmp_path / "cache")}
    probe = ("import sys\nfrom kernscope.cli import main\n"
             f"rc = main(['analyze', {str(trace)!r}, '--format', 'json', '-o', sys.argv[1]])\n"
             "print(rc, 'polars' in sys.modules)\n")
    first = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "a.json")], capture_output=True, text=True,
                           env=env, cwd=ROOT)
    second = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "b.json")], capture_output=True, text=True,
                            env=env, cwd=ROOT)
    assert first.stdout.split() == ["0", "True"], first.stderr
    assert second.stdout.split() == ["0", "False"], second.stderr
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_cache_entries_keep_columns_without_values_as_their_type(tmp_path, monkeypatch):
    """All-null columns (a projection's unread args) are not written out; a reload gives the same tables."""
    from polars.testing import assert_frame_equal

    from kernscope.analyze.needs import analyze_projection
    from kernscope.pipeline import load

    monkeypatch.setenv("KERNSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    example = Path(kernscope.__file__).parent / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    proj = analyze_projection(None)
    fresh = load(example, projection=proj)
    again = load(example, projection=proj)
    assert again.from_cache and not fresh.from_cache
    for name in ("events", "gpu", "flows", "steps"):
        assert_frame_equal(getattr(fresh, name), getattr(again, name))
    (entry,) = [d for d in (tmp_path / "cache").glob("v*/*") if d.is_dir()]
    key = kcache._secret(entry.parent.parent)
    assert key is not None
    files = kcache._unseal((entry / "manifest.json").read_bytes(), key)["files"]
    nulls = files["events.arrow"]["nulls"]
    assert {"python_id", "bytes", "collective", "pg_name"} <= set(nulls) and nulls["collective"] == "Categorical"
    stored = pl.read_ipc_schema(entry / "events.arrow")
    assert not set(nulls) & set(stored) and "correlation" in stored


def test_size_marks_say_when_no_stored_output_can_answer(tmp_path, monkeypatch):
    """A stored output has the size of its file: a file of an unseen size cannot have one (analyze then
    imports while it hashes); after an analyze the size is marked; cache clear forgets the marks."""
    from kernscope import outputs

    monkeypatch.setenv("KERNSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    trace = tmp_path / "t.json"
    make_trace(trace, 300_000)
    other = tmp_path / "u.json"
    other.write_bytes(trace.read_bytes() + b" ")  # one byte more: another size
    assert not outputs.may_be_stored(str(trace)) and not outputs.may_be_stored(str(other))
    assert main(["analyze", str(trace), "--format", "json", "-o", str(tmp_path / "a.json")]) == 0
    assert outputs.may_be_stored(str(trace)) and not outputs.may_be_stored(str(other))
    assert main(["analyze", str(other), "--format", "json", "-o", str(tmp_path / "b.json")]) == 0
    a = json.loads((tmp_path / "a.json").read_text())
    b = json.loads((tmp_path / "b.json").read_text())
    assert a["kernels"] == b["kernels"] and a["trace"]["kernels"] == b["trace"]["kernels"] > 0
    assert main(["cache", "clear"]) == 0
    assert not outputs.may_be_stored(str(trace))


def test_a_file_of_an_unseen_size_is_parsed_first_and_hashed_beside_the_link(tmp_path, monkeypatch):
    """No entry can exist for a file whose size no entry has: the load parses at once and the entry's writer hashes
    the file on its own thread; the entry has the content's key all the same (a copy of the file is served it), and
    the size is marked by the entry alone (no output stored)."""
    from kernscope import outputs
    from kernscope.analyze.needs import analyze_projection

    monkeypatch.setattr(kcache, "RACY_NS", 0)  # the digest index written at once
    trace = tmp_path / "t.json"
    make_trace(trace, 300_000)
    real = kcache.file_digest
    hashed: list[str] = []

    def digest(path):
        import threading

        hashed.append(threading.current_thread().name)
        return real(path)

    monkeypatch.setattr(kcache, "file_digest", digest)
    proj = analyze_projection(None)
    fresh = kernscope.load(trace, projection=proj)
    assert not fresh.from_cache and hashed == ["kernscope-cache-events"]
    assert outputs.may_be_stored(str(trace)) and kcache.size_seen(trace.stat().st_size)
    again = kernscope.load(trace, projection=proj)  # the digest index knows the file: not read again
    assert again.from_cache and hashed == ["kernscope-cache-events"]
    copy = tmp_path / "copy.json"
    copy.write_bytes(trace.read_bytes())
    assert kernscope.load(copy, projection=proj).from_cache and hashed[-1] == "MainThread"
    # (a Kineto trace's entry: under the projection without the XSpace stats, which this format reads none of)
    assert _entry_dir().name == kcache.entry_key(real(trace), pipeline.LoadOptions(projection=proj.without_stats()).key())
    for name in ("events", "gpu", "steps"):
        assert getattr(fresh, name).equals(getattr(again, name)), name


def test_a_file_changed_before_its_pending_hash_is_not_cached(tmp_path, monkeypatch):
    """The pending digest is checked against the file's identity when it was read: a file edited after its parse and
    before its hash gets no entry (a notice says so), and the next load reads the new content."""
    from kernscope import outputs
    from kernscope.load.source import FileIdentity

    trace = write_trace(tmp_path / "t.json", [_kernel(1, 2, 1)])
    real = kcache.file_digest

    def edit_then_hash(path):
        write_trace(Path(path), [_kernel(1, 2, 1), _kernel(5, 3, 2, name="later")])
        return real(path)

    notes: list[str] = []
    monkeypatch.setattr(kcache, "file_digest", edit_then_hash)
    first = pipeline.load(trace, notify=notes.append)
    assert first.gpu.height == 1 and any("changed while it was read" in n for n in notes), notes
    assert not kcache.entries()
    monkeypatch.setattr(kcache, "file_digest", real)
    second = kernscope.load(trace)
    assert not second.from_cache and second.gpu["name"].cast(pl.String).to_list() == ["k", "later"]
    # a pending digest never hashed (its entry was not written) stores no output, and does not hash to find out
    pending = kcache.PendingDigest(str(trace), FileIdentity.of(trace))
    monkeypatch.setattr(kcache, "file_digest", edit_then_hash)
    outputs.store(pending, [{}], {"command": "analyze"}, b"out", None)
    assert pending.known() is None
    monkeypatch.setattr(kcache, "file_digest", real)
    gone = kcache.PendingDigest(str(trace), FileIdentity.of(trace))
    trace.unlink()  # removed before its hash: no digest, no error
    assert gone.get() is None and gone.known() is None


def test_a_trace_read_from_its_entry_renders_as_a_fresh_one(tmp_path):
    """An output made from a cached load is the same, byte for byte, as the one a fresh load makes: the trace's info
    (the unlinked counts, names, metadata) keeps its order through the entry's manifest (sorted there, a cached
    load's ``unlinked`` came out in another order, and the JSON differed from a cold run's)."""
    from kernscope.analyze.needs import analyze_projection

    first, cached, fresh = (tmp_path / n for n in ("first.json", "cached.json", "fresh.json"))
    assert main(["analyze", str(EXAMPLE), "--format", "json", "-o", str(first)]) == 0  # writes the entry
    assert main(["analyze", str(EXAMPLE), "--format", "json", "--top", "3", "-o", str(cached)]) == 0
    assert main(["analyze", str(EXAMPLE), "--format", "json", "--top", "3", "--no-cache", "-o", str(fresh)]) == 0
    assert kernscope.load(EXAMPLE, projection=analyze_projection(None)).from_cache  # (the second run read the entry)
    assert cached.read_bytes() == fresh.read_bytes()
    doc = {"unlinked": {"b": 1, "a": 2}, "z": [1], "m": {"2": "x", "10": "y"}}
    key = b"k" * 32
    assert list(kcache._unseal(kcache._seal(doc, key), key)["unlinked"]) == ["b", "a"]


# -- digest index ---------------------------------------------------------------------------------------
def test_digest_index_skips_reading_an_unchanged_file(tmp_path, monkeypatch):
    from kernscope.load import cache as C

    monkeypatch.setattr(C, "RACY_NS", 0)  # index at once (the default waits 2 s after the last change)
    p = tmp_path / "t.json"
    p.write_bytes(b'{"traceEvents": []}')
    first = C.KnownDigest.of(p, root=tmp_path / "c")
    assert first.hexdigest == C.file_digest(p)

    def boom(_path):
        raise AssertionError("the file was read again")

    monkeypatch.setattr(C, "file_digest", boom)
    assert C.KnownDigest.of(p, root=tmp_path / "c").hexdigest == first.hexdigest


def test_digest_index_never_serves_an_edited_file(tmp_path, monkeypatch):
    from kernscope.load import cache as C

    monkeypatch.setattr(C, "RACY_NS", 0)
    p = tmp_path / "t.json"
    p.write_bytes(b'{"traceEvents": [1]}')
    old = C.KnownDigest.of(p, root=tmp_path / "c")
    st = os.stat(p)
    p.write_bytes(b'{"traceEvents": [2]}')  # same size
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime: only the ctime tells
    new = C.KnownDigest.of(p, root=tmp_path / "c")
    assert new.hexdigest != old.hexdigest and new.hexdigest == C.file_digest(p)


def test_recently_changed_files_and_damaged_index_entries_are_hashed(tmp_path):
    from kernscope.load import cache as C

    p = tmp_path / "t.json"
    p.write_bytes(b'{"traceEvents": []}')
    C.KnownDigest.of(p, root=tmp_path / "c")
    assert not (tmp_path / "c" / "digests").exists()  # changed within 2 s: not indexed
    (tmp_path / "c" / "digests").mkdir(parents=True)
    ident = C.KnownDigest.of(p, root=tmp_path / "c").identity
    C._index_file(tmp_path / "c" / "digests", ident).write_bytes(b"garbage")
    assert C.KnownDigest.of(p, root=tmp_path / "c").hexdigest == C.file_digest(p)


def test_cache_clear_removes_the_digest_index(tmp_path, monkeypatch):
    from kernscope.load import cache as C

    monkeypatch.setattr(C, "RACY_NS", 0)
    p = tmp_path / "t.json"
    p.write_bytes(b'{"traceEvents": []}')
    C.KnownDigest.of(p, root=tmp_path / "c")
    assert any((tmp_path / "c" / "digests").iterdir())
    C.clear(tmp_path / "c")
    assert not (tmp_path / "c" / "digests").exists()


def test_cache_entries_are_keyed_on_the_code_not_only_the_version(tmp_path, monkeypatch):
    """An edited checkout (same version number) never reads what older code stored: touching one module of the
    package changes the fingerprint and with it every entry key. (On a copy of the package: touching the real one
    changed the key that other test processes, running meanwhile, computed.)"""
    import shutil

    import kernscope
    from kernscope import version
    from kernscope.load import cache

    tree = tmp_path / "kernscope"
    shutil.copytree(Path(kernscope.__file__).parent, tree, ignore=shutil.ignore_patterns("__pycache__"))
    assert version.fingerprint_of(str(tree)) == version.fingerprint_of(str(tree))
    before_fp = version.fingerprint_of(str(tree))
    console = tree / "render" / "console.py"
    st = os.stat(console)
    os.utime(console, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    after_fp = version.fingerprint_of(str(tree))
    assert after_fp != before_fp
    (tree / "render" / "__pycache__").mkdir()
    (tree / "render" / "__pycache__" / "console.cpython-311.pyc").write_bytes(b"x")  # (bytecode is not code)
    assert version.fingerprint_of(str(tree)) == after_fp
    # the entry key follows the fingerprint
    key = cache.entry_key("d" * 32, {"a": 1})
    monkeypatch.setattr(cache, "code_fingerprint", lambda: after_fp)
    assert cache.entry_key("d" * 32, {"a": 1}) != key
    assert version.code_fingerprint() == version.fingerprint_of(str(Path(kernscope.__file__).parent))


# -- another local user (#31: security) ------------------------------------------------------------------
def _fallback_env(tmp_path, monkeypatch) -> Path:
    monkeypatch.delenv("KERNSCOPE_CACHE_DIR")
    monkeypatch.setenv("HOME", "/proc/no-home-here")
    monkeypatch.setenv("XDG_CACHE_HOME", "/proc/no-home-here")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    return tmp_path / f"kernscope-cache-{os.getuid()}"


def test_fallback_cache_made_by_another_user_is_refused(tmp_path, monkeypatch):
    """A user who makes kernscope-cache-<uid> first (or plants a link in its place) gets no write through it."""
    fallback = _fallback_env(tmp_path, monkeypatch)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    fallback.symlink_to(tmp_path / "elsewhere", target_is_directory=True)  # a planted link in the cache's place
    (tmp_path / "elsewhere").mkdir()
    p = write_trace(tmp_path / "t.json", [_kernel(1, 2, 1)])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert kernscope.load(p).kernels.height == 1
    assert any("not a directory" in str(x.message) and "running without a cache" in str(x.message) for x in w)
    assert not any((tmp_path / "elsewhere").iterdir()) and victim.read_text() == "precious"
    fallback.unlink()
    fallback.mkdir(mode=0o777)
    monkeypatch.setattr(os, "getuid", lambda: os.stat(fallback).st_uid + 1)  # the directory is someone else's
    assert kcache.cache_root(notify=lambda m: None) is None


def test_our_cache_is_made_private_and_entries_need_our_key(tmp_path, monkeypatch):
    fallback = _fallback_env(tmp_path, monkeypatch)
    fallback.mkdir(mode=0o777)
    os.chmod(fallback, 0o777)
    (fallback / ".probe-1").symlink_to(tmp_path / "victim")  # a predictable probe name is never written through
    p = write_trace(tmp_path / "t.json", [_kernel(1, 2, 1)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kernscope.load(p)
    assert os.stat(fallback).st_mode & 0o777 == 0o700 and not (tmp_path / "victim").exists()
    key = fallback / "key"
    assert os.stat(key).st_mode & 0o777 == 0o600 and len(key.read_bytes()) == 32
    (entry,) = [e for e, _, _ in kcache.entries(fallback)]
    # an entry re-sealed with an unkeyed checksum (what anyone could compute) is refused and rebuilt
    doc = json.loads((entry / "manifest.json").read_bytes())
    import xxhash

    forged = doc["body"]
    (entry / "manifest.json").write_text(json.dumps({"body": forged, "check": xxhash.xxh3_128(forged.encode()).hexdigest()}))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        t = kernscope.load(p)
    assert not t.from_cache and any("not written by this user" in str(x.message) for x in w)
    # a stored output: read back with our key; one with an unkeyed check (what anyone could write) is not
    tables = {n: pl.DataFrame({"a": [1]}) for n in kcache.TABLES}
    assert kcache.write_entry("d" * 32, {"o": 1}, tables, {}, notify=lambda m: None) is not None
    e = kcache.open_entry("d" * 32, {"o": 1}, notify=lambda m: None)
    assert e is not None
    kcache.write_result(e, {"x": 1}, b"ours")
    assert kcache.read_result(e, {"x": 1}) == b"ours"
    kcache._result_path(e, {"x": 1}).write_bytes(xxhash.xxh3_128(b"theirs").hexdigest().encode() + b"\ntheirs")
    assert kcache.read_result(e, {"x": 1}) is None
    # a key readable by others is not used
    os.chmod(key, 0o644)
    assert kcache._secret(fallback) is None


def test_many_small_writes_do_not_rescan_the_cache_each_time(tmp_path, monkeypatch):
    """#31: 3,000 tiny ranks took 323 s on a first cached run because every write rescanned every entry. Writes now
    keep a running total; a full pass runs over the cap or every FULL_PASS_EVERY writes."""
    scans = []
    real = kcache.entries

    def counted(root=None):
        scans.append(1)
        return real(root)

    monkeypatch.setattr(kcache, "entries", counted)
    tables = {n: pl.DataFrame({"a": [1]}) for n in kcache.TABLES}
    for i in range(300):
        assert kcache.write_entry(f"{i:032x}", {}, tables, {}, notify=lambda m: None) is not None
    assert len(scans) <= 2  # the first write (no total yet) and at most one periodic pass
    monkeypatch.setenv("KERNSCOPE_CACHE_MAX_BYTES", "20000")  # now over the cap: the next write evicts
    kcache.write_entry("f" * 32, {}, tables, {}, notify=lambda m: None)
    assert sum(size for _, size, _ in real()) <= 20000 + 10000


def test_the_content_digest_is_the_xxh3_of_every_byte_across_map_windows(tmp_path, monkeypatch):
    import xxhash

    from kernscope.load import cache as C

    monkeypatch.setattr(C, "_READ", 1 << 16)  # windows of 64 KB: a file of several, and a partial last one
    data = os.urandom(5 * (1 << 16) + 12345)
    p = tmp_path / "t.json"
    p.write_bytes(data)
    assert C.file_digest(p) == xxhash.xxh3_128(data).hexdigest()
    data2 = bytearray(data)
    data2[3 * (1 << 16) + 7] ^= 1  # one bit in the fourth window
    p.write_bytes(bytes(data2))
    assert C.file_digest(p) == xxhash.xxh3_128(bytes(data2)).hexdigest() != xxhash.xxh3_128(data).hexdigest()
    (tmp_path / "empty").write_bytes(b"")
    assert C.file_digest(tmp_path / "empty") == xxhash.xxh3_128(b"").hexdigest()
    fifo = tmp_path / "fifo"  # not mappable: read as a stream
    os.mkfifo(fifo)
    import threading

    writer = threading.Thread(target=lambda: fifo.write_bytes(b"abc"))
    writer.start()
    assert C.file_digest(fifo) == xxhash.xxh3_128(b"abc").hexdigest()
    writer.join()


def _gpu_run_tables(n: int, start: int, m: int) -> dict[str, pl.DataFrame]:
    """An event table (idx, interned names, ``end`` as a sum, a column without values) and a GPU table that is the run
    of its rows ``start .. start + m``: its event columns as they are but ``device`` (filled in, as the link does),
    and columns of its own."""
    events = pl.DataFrame({
        "idx": pl.Series(range(0, 2 * n, 2), dtype=pl.Int64),
        "name": pl.Series([f"k{i % 37}" for i in range(n)], dtype=pl.Categorical),
        "ts": pl.Series(range(1000, 1000 + 10 * n, 10), dtype=pl.Int64),
        "dur": pl.Series([i % 7 for i in range(n)], dtype=pl.Int64),
        "device": pl.Series([None if i % 5 == 0 else 0 for i in range(n)], dtype=pl.Int64),
        "bytes": pl.Series([None] * n, dtype=pl.Int64),
    }).with_columns((pl.col("ts") + pl.col("dur")).alias("end"))
    run = events.slice(start, m)
    gpu = run.with_columns(pl.col("device").fill_null(3), pl.Series("step", [i // 100 for i in range(m)]),
                           pl.col("name").alias("launcher"))
    return {"events": events, "gpu": gpu, "flows": events.head(0).select("ts"), "steps": pl.DataFrame({"step": [0]})}


@pytest.mark.parametrize("compressed", [False, True])
def test_a_gpu_table_that_is_a_run_of_the_events_reads_their_columns_from_its_file(monkeypatch, compressed):
    """A GPU table whose rows are one run of the event table's (every JAX profile's) is written without the columns
    it shares with it, cell for cell; they are read from the event table's file over that run, and the table reads
    back equal, column order, types and nulls included. A column that differs (``device``, filled in), ``idx`` (the
    check of the run) and the GPU table's own columns are written. Rows that are not one run share nothing."""
    from polars.testing import assert_frame_equal

    monkeypatch.setattr(kcache, "COMPRESS_ABOVE", 0 if compressed else 1 << 40)
    monkeypatch.setattr(kcache, "STRINGS_SLACK", 1 << 40)
    for i, (start, m) in enumerate(((300, 5_000), (0, 6_000), (5_995, 5))):
        tables = _gpu_run_tables(6_000, start, m)
        d = kcache.write_entry(f"{i:032x}", {"run": 1}, tables, {}, notify=lambda m: None)
        assert d is not None
        e = kcache.open_entry(f"{i:032x}", {"run": 1}, notify=lambda m: None)
        assert e is not None
        assert e.manifest["files"]["gpu.arrow"]["shared"] == {"start": start, "columns": ["name", "ts", "dur", "end"]}
        assert set(pl.read_ipc_schema(d / "gpu.arrow")) == {"idx", "device", "step", "launcher"}
        for t in kcache.TABLES:
            assert_frame_equal(e.table(t), tables[t], check_exact=True)
    scattered = _gpu_run_tables(6_000, 0, 6_000)
    scattered["gpu"] = scattered["gpu"].gather_every(2)
    d = kcache.write_entry("e" * 32, {"run": 2}, scattered, {}, notify=lambda m: None)
    e = kcache.open_entry("e" * 32, {"run": 2}, notify=lambda m: None)
    assert d is not None and e is not None and e.manifest["files"]["gpu.arrow"]["shared"] is None
    assert_frame_equal(e.table("gpu"), scattered["gpu"], check_exact=True)


def test_a_gpu_table_that_is_a_run_of_the_events_reads_slices_of_a_given_event_table():
    """``Entry.table("gpu", events=...)``: the shared columns are slices of the event table given (read from this
    entry), the same table as read from the file; a run that is not the given table's is a damaged entry."""
    import numpy as np
    from polars.testing import assert_frame_equal

    tables = _gpu_run_tables(3_000, 200, 1_500)
    assert kcache.write_entry("b" * 32, {"run": 5}, tables, {}, notify=lambda m: None) is not None
    e = kcache.open_entry("b" * 32, {"run": 5}, notify=lambda m: None)
    assert e is not None and e.shares_events("gpu") and not e.shares_events("events")
    events = e.table("events")
    gpu = e.table("gpu", events=events)
    assert_frame_equal(gpu, tables["gpu"], check_exact=True)
    assert_frame_equal(gpu, e.table("gpu"), check_exact=True)
    assert np.shares_memory(gpu["ts"].to_numpy(), events["ts"].to_numpy())
    with pytest.raises(ValueError, match="not the event table's run"):
        e.table("gpu", events=events.with_columns(pl.col("idx") + 1))


def test_a_gpu_table_read_from_the_wrong_run_of_events_is_a_damaged_entry():
    """The GPU table keeps its ``idx``: shared columns read from any other run of the event table's rows (a manifest
    from another entry, its checksums right) raise ValueError, which the load turns into a discarded entry."""
    tables = _gpu_run_tables(3_000, 100, 1_000)
    assert kcache.write_entry("f" * 32, {"run": 3}, tables, {}, notify=lambda m: None) is not None
    e = kcache.open_entry("f" * 32, {"run": 3}, notify=lambda m: None)
    assert e is not None
    e.manifest["files"]["gpu.arrow"]["shared"]["start"] = 101
    with pytest.raises(ValueError, match="not the event table's run"):
        e.table("gpu")
    e.manifest["files"]["gpu.arrow"]["shared"]["start"] = 2_500  # past the end: fewer rows
    with pytest.raises(ValueError, match="not the event table's run"):
        e.table("gpu")


def test_a_jax_profiles_gpu_table_shares_the_event_columns_in_its_entry(tmp_path, monkeypatch):
    """The real JAX fixture's GPU rows are one run of its events: the entry's GPU table holds its own columns, its
    ``idx`` is a range, and the cached trace's tables equal the parsed ones. Read back, the GPU table's shared columns
    are slices of the event table, one copy in memory as a parse leaves them (not a second read of the run)."""
    import numpy as np
    from polars.testing import assert_frame_equal

    monkeypatch.setenv("KERNSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    path = ROOT / "tests" / "data" / "jax" / "mlp" / "vm.xplane.pb"
    fresh = kernscope.load(path)
    e = kcache.open_entry(kcache.file_digest(path), pipeline.LoadOptions().key(), notify=lambda m: None)
    assert e is not None
    shared = e.manifest["files"]["gpu.arrow"]["shared"]
    assert {"name", "ts", "dur", "end", "correlation", "hlo_op"} <= set(shared["columns"])
    assert e.manifest["files"]["events.arrow"]["ranges"] == {"idx": 0}  # every event read, numbered in order
    again = kernscope.load(path)
    assert again.from_cache
    for t in ("gpu", "events", "steps"):
        assert_frame_equal(getattr(again, t), getattr(fresh, t), check_exact=True)
    for c in ("ts", "dur", "name"):  # (columns without nulls: numpy views of polars' buffers)
        assert np.shares_memory(again.gpu[c].to_physical().to_numpy(), again.events[c].to_physical().to_numpy()), c
        g, ev = fresh.gpu[c].to_physical(), fresh.events[c].to_physical()
        assert (g.n_chunks(), ev.n_chunks()) == (1, 1), c  # (a second chunk: to_numpy copies, and a query rechunks)
        assert np.shares_memory(g.to_numpy(), ev.to_numpy()), c


def test_an_idx_that_counts_up_by_one_is_written_as_its_first_value(monkeypatch):
    """``idx`` holding first, first + 1, ... in every row (a JAX profile's events, and its GPU table, a run of them)
    is not written: the manifest keeps its first value and a read makes it again, also over a run of rows. An
    ``idx`` with a gap, a repeat or a null is written as it is."""
    from polars.testing import assert_frame_equal

    monkeypatch.setattr(kcache, "STRINGS_SLACK", 1 << 40)
    tables = _gpu_run_tables(4_000, 1_000, 2_000)
    tables = {k: (t.with_columns(pl.col("idx") // 2 + 7) if "idx" in t.columns else t) for k, t in tables.items()}
    d = kcache.write_entry("a1" * 16, {"run": 4}, tables, {}, notify=lambda m: None)
    e = kcache.open_entry("a1" * 16, {"run": 4}, notify=lambda m: None)
    assert d is not None and e is not None
    files = e.manifest["files"]
    assert files["events.arrow"]["ranges"] == {"idx": 7} and files["gpu.arrow"]["ranges"] == {"idx": 1_007}
    assert "idx" not in pl.read_ipc_schema(d / "events.arrow") and "idx" not in pl.read_ipc_schema(d / "gpu.arrow")
    assert files["gpu.arrow"]["shared"]["start"] == 1_000
    for t in kcache.TABLES:
        assert_frame_equal(e.table(t), tables[t], check_exact=True)
    cases: list[list[int | None]] = [[0, 1, 3], [0, 1, 1], [0, None, 2], [5, 4, 3]]
    for i, idx in enumerate(cases):
        odd = {**tables, "events": pl.DataFrame({"idx": pl.Series(idx, dtype=pl.Int64), "ts": [1, 2, 3]})}
        odd["gpu"] = odd["events"].head(0)
        d = kcache.write_entry(f"b{i}" * 16, {"run": 5}, odd, {}, notify=lambda m: None)
        e = kcache.open_entry(f"b{i}" * 16, {"run": 5}, notify=lambda m: None)
        assert d is not None and e is not None and e.manifest["files"]["events.arrow"]["ranges"] == {}
        assert_frame_equal(e.table("events"), odd["events"], check_exact=True)


def test_a_projected_load_of_a_jax_profile_reads_its_whole_entry_without_the_stats_it_leaves_null(tmp_path, monkeypatch):
    """Where only a whole load's entry is stored (``kernscope.load()`` in Python, a query of the events), analyze's
    projected load reads it, not the file: its tables are the projected parse's, the XLA stats it does not read null
    as there, the GPU table's shared columns slices of its events. A rank summary's load, which reads the GPU cliques'
    stats a whole load leaves unread, parses the file."""
    from polars.testing import assert_frame_equal

    from kernscope.analyze.needs import analyze_projection
    from kernscope.analyze.ranks import RankTask

    monkeypatch.setenv("KERNSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    path = ROOT / "tests" / "data" / "jax" / "transformer" / "vm.xplane.pb.gz"
    kernscope.load(path)  # the whole load's entry
    narrow = analyze_projection()
    read = kernscope.load(path, projection=narrow)
    parsed = kernscope.load(path, cache=False, projection=narrow)
    assert read.from_cache and not parsed.from_cache
    for t in ("events", "gpu", "steps"):
        assert_frame_equal(getattr(read, t), getattr(parsed, t), check_exact=True)
    assert read.events["grid_x"].null_count() == read.events.height  # (a stat analyze does not read)
    rank = RankTask().load_projection()
    assert rank is not None and not kernscope.load(path, projection=rank).from_cache


def _loads_counted(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each load of a command (``Session.load``) from now on was read from the cache, in order."""
    from kernscope import commands

    loads: list[bool] = []
    real = commands.Session.load

    def counted(self: Any, path: str, **kw: Any) -> Any:
        trace = real(self, path, **kw)
        loads.append(trace.from_cache)
        return trace

    monkeypatch.setattr(commands.Session, "load", counted)
    return loads


def test_cli_analyze_after_a_whole_load_reads_its_entry_and_stores_its_output_there(tmp_path, capsys, monkeypatch):
    """``analyze`` of a trace whose whole load is stored (and not its own narrower one) reads that entry, prints what a
    cold run prints, and stores its output there: the next identical command loads nothing."""
    import shutil

    from kernscope.cli import main

    monkeypatch.setenv("KERNSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    p = tmp_path / "t.json.gz"
    shutil.copy(ROOT / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz", p)
    assert main(["analyze", str(p), "--format", "json", "--no-cache"]) == 0
    cold = capsys.readouterr().out
    kernscope.load(p)  # the whole load's entry
    loads = _loads_counted(monkeypatch)
    for _ in range(2):
        assert main(["analyze", str(p), "--format", "json"]) == 0
        assert capsys.readouterr().out == cold
    assert loads == [True]  # (read from the whole load's entry once; then the stored output)


def test_perf_after_analyze_reads_analyzes_entry_with_a_jax_profiles_costs_read_from_its_hlo(tmp_path, capsys,
                                                                                              monkeypatch):
    """``analyze``, ``analyze --roofline`` and ``perf`` load a PyTorch trace alike: their projections differ only in the
    XSpace stats they would read, which a Kineto trace has none of. The first stores its entry under the projection
    without them, and the others read it instead of parsing the file again; each prints what a cold run prints. Of a JAX
    profile, ``perf`` and ``--roofline`` read the HLO cost model's stats, which ``analyze``'s entry lacks: they read
    that entry and the costs from the profile's HLO (its metadata, not its events), where the costs can be told so
    (``xplane.cost_rows``); where not (a function compiled for two shapes: two programs of one name), they parse."""
    import shutil

    monkeypatch.setenv("KERNSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    kineto = tmp_path / "t.json.gz"
    shutil.copy(ROOT / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz", kineto)
    jax = tmp_path / "vm.xplane.pb.gz"
    shutil.copy(ROOT / "tests" / "data" / "jax" / "transformer" / "vm.xplane.pb.gz", jax)
    two = tmp_path / "partial.xplane.pb.gz"  # (its kernels ran in programs that share their module's name)
    shutil.copy(ROOT / "tests" / "data" / "jax_kernels_h200" / "partial" / "vm.xplane.pb.gz", two)
    plain = tmp_path / "mlp.xplane.pb"  # (not compressed: its HLO read where the file is mapped)
    shutil.copy(ROOT / "tests" / "data" / "jax" / "mlp" / "vm.xplane.pb", plain)
    commands_run = [["analyze", "--format", "json"], ["perf", "--format", "json"],
                    ["analyze", "--roofline", "--format", "json"]]
    cold = {}
    for p in (kineto, jax, two, plain):
        for args in commands_run:
            assert main([args[0], str(p), *args[1:], "--no-cache"]) == 0
            cold[p, tuple(args)] = capsys.readouterr().out
    loads = _loads_counted(monkeypatch)
    for p, want in ((kineto, [False, True, True]), (jax, [False, True, True]), (two, [False, False, True]),
                    (plain, [False, True, True])):
        loads.clear()
        for args in commands_run:
            assert main([args[0], str(p), *args[1:]]) == 0
            assert capsys.readouterr().out == cold[p, tuple(args)]
        assert loads == want, (p.name, loads)
    entries = [d for d in (tmp_path / "cache").glob("v*/*") if (d / "manifest.json").exists()]
    # (the PyTorch trace's one; each JAX profile's analyze load; the second profile's perf load, which --roofline read)
    assert len(entries) == 5


def test_load_keys_are_the_loads_own_then_without_stats_then_whole():
    from kernscope.analyze.needs import analyze_projection
    from kernscope.load.projection import Projection, costs_key, load_key, load_keys

    proj = analyze_projection()
    assert proj is not None and proj.stats
    assert load_keys(False, None, proj) == [load_key(False, None, proj), load_key(False, None, proj.without_stats()),
                                            load_key(False, None, None)]
    # a load reading the HLO costs: last, the same load without them (its entry, the costs read from the profile's HLO)
    roof = analyze_projection(roofline=True)
    assert roof is not None and roof.without_costs() == proj and proj.without_costs() is proj
    assert load_keys(False, None, roof) == [load_key(False, None, roof), load_key(False, None, roof.without_stats()),
                                            load_key(False, None, None), load_key(False, None, proj)]
    assert costs_key(False, None, roof) == load_key(False, None, proj) and costs_key(False, None, proj) is None
    assert costs_key(True, None, roof) is None and costs_key(False, None, None) is None
    assert "stats" in load_keys(False, None, proj)[0]["projection"]
    assert "stats" not in load_keys(False, None, proj)[1]["projection"]
    assert load_keys(False, None, None) == [load_key(False, None, None)]
    assert load_keys(True, None, proj) == [load_key(True, None, None)]  # (a salvaged load: one key, the whole one's)
    plain = Projection(keep="x")
    assert plain.without_stats() is plain and load_keys(False, "m", plain) == [load_key(False, "m", plain),
                                                                              load_key(False, "m", None)]


def test_file_digest_is_the_bytes_xxh3_mapped_or_read(tmp_path, monkeypatch):
    """The content digest (the caches' key) is xxh3-128 of the file's bytes, through memory maps of ``_READ``-byte
    windows (4 MiB) or, where the file cannot be mapped, read into a buffer of that size; the parse cache's checksums
    read the same way."""
    import mmap

    import xxhash

    p = tmp_path / "t.bin"
    data = os.urandom(2 * kcache._READ + 12345)  # (two windows and a part of one)
    p.write_bytes(data)
    want = xxhash.xxh3_128(data).hexdigest()
    assert kcache.file_digest(p) == want and kcache._checksum_file(p) == want

    def unmappable(*args: Any, **kwargs: Any) -> Any:
        raise OSError("not mappable")

    monkeypatch.setattr(mmap, "mmap", unmappable)
    assert kcache.file_digest(p) == want
