"""Seeded mutation fuzzing of real traces (a few hundred mutants, bounded time): kernscope rejects a mutant
with one line naming the file, or reports exactly what the raw JSON says. A longer run before releases:
``python benchmarks/fuzz_long.py``."""

from __future__ import annotations

import gzip
import io
import json
import os
import random
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from conftest import TRACES, needs_traces

from kernscope.cli import main
from kernscope.testing import fuzz

SMALL = ["hta/triton_example.json.gz", "hta/a100_alexnet_cuda_sync.json.gz", "hta/mi250_rocm62_minitoy_train.json.gz",
         "tracelens/torch_compile_triton.json.gz", "tracelens/rocm_vllm_decode_full_hipgraph.json.gz",
         "hta/event_sync_multi_stream.json.gz", "hta/cpu_only.pt.trace.json.gz"]
N = int(os.environ.get("KERNSCOPE_FUZZ_N", "240"))  # benchmarks/fuzz_long.py runs thousands


@needs_traces
def test_mutants_of_real_traces_keep_the_promise(tmp_path):
    sources = [TRACES / s for s in SMALL if (TRACES / s).exists()]
    rep = fuzz.run(sources, tmp_path, N, seed=int(os.environ.get("KERNSCOPE_FUZZ_SEED", "20261126")))
    assert not rep.failures, "\n".join(f"{f.mutator}: {f.problem}: {f.message}" for f in rep.failures[:10])
    by = rep.by_class()
    assert set(by) == set(fuzz.MUTATORS)
    assert all(c["tried"] >= N // len(fuzz.MUTATORS) for c in by.values())
    assert sum(c["accepted"] for c in by.values()) > 0 and sum(c["rejected"] for c in by.values()) > 0


def _kept_promise(rc: int, err: str, path) -> None:
    """The CLI's promise on bad input: a result (0), one line naming the file (2), or an empty result said (3); never a
    traceback or an internal error."""
    assert rc in (0, 2, 3), err
    assert "Traceback" not in err and "internal error" not in err, err
    if rc == 2:
        assert len([x for x in err.splitlines() if x.strip()]) == 1 and str(path) in err, err


@needs_traces
def test_cli_on_mutants_exits_0_2_or_3_with_one_line(tmp_path):
    """Mutated real traces: a result (0), one line naming the file and the problem (2), or a result that is
    empty for a reason named in one last line (3: a mutant that lost every GPU record)."""
    src = (TRACES / SMALL[2]).read_bytes()
    data = gzip.decompress(src)
    r = random.Random(5)
    names = sorted(fuzz.MUTATORS)
    for i in range(60):
        m = fuzz.MUTATORS[names[i % len(names)]](r, data)
        p = tmp_path / f"m{i}.json"
        p.write_bytes(m)
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            rc = main(["analyze", str(p), "--no-cache", "--format", "json", *(["--salvage"] if i % 5 == 0 else [])])
        e = err.getvalue()
        _kept_promise(rc, e, p)
        if rc == 3:
            last = [x for x in e.splitlines() if x.strip()][-1]
            assert str(p) in last and ("no GPU activity" in last or "launched no GPU work" in last), e
            assert json.loads(out.getvalue())["trace"]["gpu_events"] == 0


XSPACE = [Path(__file__).parent / "data" / "jax" / "mlp" / "vm.xplane.pb",
          Path(__file__).parent / "data" / "jax" / "transformer" / "vm.xplane.pb.gz"]


def _analyze(p, out, native: bool, monkeypatch) -> tuple[int, str]:
    monkeypatch.setenv("KERNSCOPE_NO_NATIVE", "0" if native else "1")
    err = io.StringIO()
    with redirect_stdout(io.StringIO()), redirect_stderr(err):
        rc = main(["analyze", str(p), "--no-cache", "--format", "json", "-o", str(out)])
    return rc, err.getvalue()


def test_mutants_of_jax_profiles_are_read_alike_or_rejected_in_one_line(tmp_path, monkeypatch):
    """Mutated XSpace protobufs (bytes flipped, cut, deleted, repeated or inserted; varints that never end; length
    prefixes shifted) through the compiled scanner and the numpy reader: each is a result (0) or one line naming the
    file (2; 3: a result that is empty for a reason given), never a crash or an internal error, and both readers give
    the same exit code and, on a result, the same JSON. (Session 27 ran 700 such mutants in a separate process per
    reader: the same outcomes.)"""
    sources = [gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes() for p in XSPACE]
    r = random.Random(int(os.environ.get("KERNSCOPE_FUZZ_SEED", "20261129")))
    names = sorted(fuzz.BINARY_MUTATORS)
    outcomes = {0: 0, 2: 0, 3: 0}
    for i in range(int(os.environ.get("KERNSCOPE_XFUZZ_N", "84"))):
        m = fuzz.BINARY_MUTATORS[names[i % len(names)]](r, sources[i % len(sources)])
        p = tmp_path / f"m{i}.xplane.pb"
        p.write_bytes(m)
        got = [_analyze(p, tmp_path / f"o{i}_{native}.json", native, monkeypatch) for native in (True, False)]
        for rc, e in got:
            _kept_promise(rc, e, p)
        assert got[0][0] == got[1][0], (names[i % len(names)], got)
        if got[0][0] == 0:
            assert (tmp_path / f"o{i}_True.json").read_bytes() == (tmp_path / f"o{i}_False.json").read_bytes()
        outcomes[got[0][0]] += 1
    assert outcomes[0] >= 5 and outcomes[2] >= 20, outcomes


def test_mutants_of_a_many_line_profile_scan_alike_a_run_of_lines_at_a_time(monkeypatch):
    """The compiled scanner called on a few KB of lines at a time (as it says its progress), and with every line cut
    into runs of ~4 KB of its fields (as a real profile's long GPU line is), gives on mutants of a profile of many lines
    the same table or the same error as called once per part on whole lines. (Session 28: 2,000 such mutants in a
    process of their own, the same outcome in all; session 30: 300 mutants of the transformer profile cut into 64-byte
    runs, the same outcome, error text included, in all.)"""
    import polars as pl

    from kernscope.errors import TraceError
    from kernscope.load import xscan
    from kernscope.load.xplane import decode
    from kernscope.testing.xspace import replicate_xspace

    transformer = next(p for p in XSPACE if "transformer" in str(p))
    raw = replicate_xspace(gzip.decompress(transformer.read_bytes()), 12)  # 48 lines, 3.4 MB

    def read(b: bytes, step: int, run: int = 1 << 62) -> tuple[str, pl.DataFrame | str, list[int]]:
        monkeypatch.setattr(xscan, "PROGRESS_BYTES", step)
        monkeypatch.setattr(xscan, "SEGMENT_BYTES", run)
        said: list[int] = []
        try:
            t = decode(b, "m.xplane.pb", progress=lambda done, total: said.append(done))
        except TraceError as e:
            return "rejected", str(e), said
        return "read", pl.concat([t.events.select(pl.all().cast(pl.String)), t.meta_events.select(pl.all().cast(pl.String))],
                                 how="diagonal"), said

    r = random.Random(int(os.environ.get("KERNSCOPE_FUZZ_SEED", "20261129")))
    names = sorted(fuzz.BINARY_MUTATORS)
    read_n = 0
    for i in range(int(os.environ.get("KERNSCOPE_XFUZZ_N", "84"))):
        m = fuzz.BINARY_MUTATORS[names[i % len(names)]](r, raw)
        whole, steps, runs = read(m, 1 << 40), read(m, 2048), read(m, 1 << 40, 4096)
        for other in (steps, runs):
            assert whole[0] == other[0], (names[i % len(names)], whole[1] if whole[0] == "rejected" else other[1])
            if whole[0] == "read":
                assert isinstance(whole[1], pl.DataFrame) and isinstance(other[1], pl.DataFrame)
                assert whole[1].equals(other[1]) and other[2] == sorted(other[2])
            else:
                assert whole[1] == other[1]
        read_n += whole[0] == "read"
    assert read_n >= 5, read_n


def test_check_binary_reads_a_profile_every_way_and_names_each_broken_promise(tmp_path, monkeypatch):
    """``fuzz.check_binary`` (``benchmarks/fuzz_long.py --jax``): the MLP profile, read whole by both readers and in
    three time windows by either plan (the near one from the lines indexed ahead too, as the command reads a large
    profile), is one result; a cut one is rejected in one line every way; a read that prints other JSON, exits
    otherwise or does not name the file is reported as the broken promise it is."""
    p = tmp_path / "t.xplane.pb"
    data = XSPACE[0].read_bytes()
    p.write_bytes(data)
    good = fuzz.check_binary(p, "none")
    assert good.ok and good.problem is None
    assert not list(tmp_path.glob("*.json"))  # (each read's output is removed)
    cut = tmp_path / "cut.xplane.pb"
    cut.write_bytes(data[: len(data) // 2])
    bad = fuzz.check_binary(cut, "truncate")
    assert not bad.ok and bad.problem is None and str(cut) in bad.message
    labels = {"plan (3 windows at quiet points)", "plan (3 windows at quiet points near the targets)",
              "plan (3 windows at quiet points near the targets, the lines indexed ahead)"}
    for read in fuzz.BINARY_READS[2:]:  # (the windowed reads: planned as they say)
        rc, err = fuzz._cli(p, tmp_path / "o.json", read._replace(options=(*read.options, "--timings")))
        plan = next(x for x in err.splitlines() if x.startswith("plan ("))
        assert rc == 0 and plan[:plan.index(")") + 1] in labels, (read.label, err)
        labels.discard(plan[:plan.index(")") + 1])
    assert not labels
    # a read whose JSON differs (another option), one that exits 2 where the other reads (a step that is not there)
    first = fuzz.BINARY_READS[0]
    monkeypatch.setattr(fuzz, "BINARY_READS", (first, fuzz.Read("fewer rows", "0", ("--windows", "0", "--no-bench", "--top", "1"), {})))
    assert fuzz.check_binary(p, "none").problem == "compiled scanner and fewer rows printed different JSON"
    monkeypatch.setattr(fuzz, "BINARY_READS", (first, fuzz.Read("step", "0", ("--windows", "0", "--no-bench", "--step", "999"), {})))
    out = fuzz.check_binary(p, "none")
    assert out.problem is not None and out.problem.startswith("compiled scanner exit 0, step exit 2"), out
    monkeypatch.setattr(fuzz, "_cli", lambda path, o, read: (2, "kernscope: error: something\nmore\n"))
    assert fuzz.check_binary(p, "none").problem == "error not one line naming the file (compiled scanner)"
    monkeypatch.setattr(fuzz, "_cli", lambda path, o, read: (1, "Traceback (most recent call last):\n"))
    assert fuzz.check_binary(p, "none").problem == "exit 1 (compiled scanner)"


@needs_traces
def test_check_head_start_reads_a_trace_with_a_head_start_and_without_and_names_a_broken_promise(tmp_path, monkeypatch):
    """``fuzz.check_head_start`` (``benchmarks/fuzz_long.py --head-start``): a real trace, plain and gzipped, in 64 KB
    pieces: the same tables with the parse taking pieces from the head start as without; a cut one: the same error;
    a load that answers otherwise with a head start is the broken promise named. ``small_pieces`` puts every setting
    back."""
    from kernscope import pipeline
    from kernscope.errors import TraceError
    from kernscope.load import document, gzhead, headstart

    data = gzip.decompress((TRACES / "tracelens/h100_gaunernst_bert-small-uncased__1016001.json.gz").read_bytes())
    plain, gz, cut = tmp_path / "t.json", tmp_path / "t.json.gz", tmp_path / "cut.json"
    plain.write_bytes(data)
    gz.write_bytes(gzip.compress(data, 1))
    cut.write_bytes(data[: len(data) * 2 // 3])
    before = (document.CHUNK_BYTES, headstart.HEAD_MIN_BYTES, gzhead.AHEAD_PIECES)
    with fuzz.small_pieces(1 << 16):
        for p in (plain, gz):
            for wait in (True, False):
                got = fuzz.check_head_start(p, "none", wait=wait)
                assert got.ok and got.problem is None, got
                if wait:  # (every piece but the last scanned ahead: 1 MB in 64 KB pieces)
                    assert got.ahead is not None and got.ahead >= len(data) // (1 << 16) - 2, got
        bad = fuzz.check_head_start(cut, "truncate", wait=True)
        assert not bad.ok and bad.problem is None and str(cut) in bad.message
        real = pipeline.load

        def other(path, **kw):  # (a load that fails where a head start is given)
            if kw.get("head") is not None:
                kw["head"].close()
                raise TraceError(str(path), "scanned ahead wrongly")
            return real(path, **kw)

        monkeypatch.setattr(pipeline, "load", other)
        assert fuzz.check_head_start(plain, "none", wait=True).problem == \
            "read with the head start and without: one result, one error"
    assert (document.CHUNK_BYTES, headstart.HEAD_MIN_BYTES, gzhead.AHEAD_PIECES) == before


def test_event_value_changes_one_number_of_one_event_and_keeps_the_structure():
    """``event_value`` (one of ``fuzz.BINARY_MUTATORS``): the mutant is an XSpace of the same planes, lines and events
    (every enclosing length re-encoded), with one event's bytes changed; bytes that are no XSpace come back as they are."""
    from kernscope.testing.xspace import _msg

    def shape(b: bytes) -> list[list[int]]:
        planes = [_msg(v) for f, _, v in _msg(b) if f == 1]
        return [[len([1 for f, _, _ in _msg(line) if f == 4]) for f, _, line in plane if f == 3] for plane in planes]

    def events(b: bytes) -> list[bytes]:
        return [ev for f, _, v in _msg(b) if f == 1 for pf, _, line in _msg(v) if pf == 3
                for ef, _, ev in _msg(line) if ef == 4]

    data = XSPACE[0].read_bytes()
    want, before = shape(data), events(data)
    r = random.Random(7)
    moved = 0
    for _ in range(12):
        m = fuzz.BINARY_MUTATORS["event_value"](r, data)
        assert shape(m) == want
        changed = [i for i, (a, b) in enumerate(zip(before, events(m))) if a != b]
        assert len(changed) <= 1  # (none where the number drawn was the one there)
        moved += len(changed)
    assert moved >= 9
    assert fuzz.BINARY_MUTATORS["event_value"](r, b"\xff\xff not a message") == b"\xff\xff not a message"


def test_event_structure_drops_repeats_or_moves_one_event_or_stat_and_keeps_the_rest():
    """``event_structure``: the mutant is an XSpace whose one line differs from the original's by one event dropped,
    repeated or moved, or by one stat of one event dropped or repeated (every enclosing length re-encoded); every
    other line is the same; bytes that are no XSpace come back as they are."""
    from collections import Counter

    from kernscope.testing.xspace import _msg

    def lines(b: bytes) -> list[list[bytes]]:
        return [[ev for ef, _, ev in _msg(line) if ef == 4] for f, _, v in _msg(b) if f == 1
                for pf, _, line in _msg(v) if pf == 3]

    def stats(ev: bytes) -> Counter:
        return Counter(v for f, _, v in _msg(ev) if f == 4)

    data = XSPACE[0].read_bytes()
    before = lines(data)
    r = random.Random(11)
    kinds: Counter = Counter()
    for _ in range(40):
        after = lines(fuzz.BINARY_MUTATORS["event_structure"](r, data))
        assert len(after) == len(before)
        differ = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
        assert len(differ) <= 1  # (none where an event moved to its own place)
        if not differ:
            kinds["same"] += 1
            continue
        a, b = before[differ[0]], after[differ[0]]
        if len(b) == len(a) - 1:
            assert (Counter(a) - Counter(b)).total() == 1 and not Counter(b) - Counter(a)
            kinds["drop"] += 1
        elif len(b) == len(a) + 1:
            assert (Counter(b) - Counter(a)).total() == 1 and not Counter(a) - Counter(b)
            kinds["repeat"] += 1
        elif Counter(a) == Counter(b):
            kinds["move"] += 1
        else:  # (one event's stats: one dropped or one repeated, the event's other fields as they were)
            (x,), (y,) = [e for e in a if e not in b], [e for e in b if e not in a]
            sx, sy = stats(x), stats(y)
            assert (sx - sy).total() + (sy - sx).total() == 1
            kinds["stat"] += 1
    assert all(kinds[k] >= 3 for k in ("drop", "repeat", "move", "stat")), kinds
    assert fuzz.BINARY_MUTATORS["event_structure"](r, b"\xff\xff not a message") == b"\xff\xff not a message"


def test_a_profile_whose_critical_path_links_go_round_a_cycle_gets_one_line_every_way(tmp_path):
    """A fuzzed JAX profile (``tests/data/fuzzed``, seed 111) whose records' times contradict each other: the critical
    path's predecessor links form a cycle, and the jump tables of ``_ancestors_lifted`` grew until the process was
    killed (4 GB within seconds). Every way of reading it now exits 2 with one line naming the file."""
    import numpy as np
    import pytest

    from kernscope.analyze import critical_path as cp

    p = tmp_path / "cycle.xplane.pb"
    p.write_bytes(gzip.decompress((Path(__file__).parent / "data" / "fuzzed" / "link_cycle_mutant.bin.gz").read_bytes()))
    out = fuzz.check_binary(p, "length")
    assert out.problem is None and not out.ok, out  # (rejected in one line alike every way: fuzz's promise)
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        rc = main(["analyze", str(p), "--no-cache", "--windows", "0", "--format", "json", "-o", str(tmp_path / "o.json")])
    lines = [x for x in err.getvalue().splitlines() if x.strip()]
    assert rc == 2 and len(lines) == 1 and str(p) in lines[0] and "cycle" in lines[0], err.getvalue()
    assert not (tmp_path / "o.json").exists()
    # the walk itself: a chain round a cycle raises at once; chains to the root are walked as before
    root = 4
    with pytest.raises(cp.LinkCycle):
        cp._ancestors_lifted(np.array([4, 2, 1, 0, 4]), np.array([1]), root)  # (1 -> 2 -> 1)
    owner, node = cp._ancestors_lifted(np.array([4, 0, 1, 2, 4]), np.array([3, 1]), root)
    assert owner.tolist() == [0, 0, 0, 0, 1, 1] and node.tolist() == [3, 2, 1, 0, 1, 0]
