"""A repeated ``kernscope analyze`` command line answered from its kept output before anything is imported
(``kernscope/replay.py``): the same bytes as the run that kept them, and a miss whenever anything the output
depends on differs (the trace, a rules file, the arguments, the environment, the code) or the record was touched."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernscope import cli, replay
from kernscope.load import cache

EXAMPLE = Path(__file__).parents[1] / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"


@pytest.fixture
def trace(tmp_path, monkeypatch):
    """The bundled step, copied; records are kept at once (the default waits until the file is 2 s old)."""
    monkeypatch.setattr(replay, "RACY_NS", 0)
    p = tmp_path / "step.json.gz"
    shutil.copy(EXAMPLE, p)
    monkeypatch.chdir(tmp_path)
    return p


def _run(argv: list[str]) -> replay.Invocation:
    """The command line as the ``kernscope`` process runs it after a miss: :func:`kernscope.cli.main` with the
    invocation, which keeps what it stores."""
    inv = replay.Invocation(argv)
    before = dict(os.environ)
    try:
        assert cli.main(argv, invocation=inv) == 0
    finally:  # as the next process starts: without the allocator settings this one gave itself
        os.environ.clear()
        os.environ.update(before)
    return inv


def _records() -> list[Path]:
    root = Path(os.environ["KERNSCOPE_CACHE_DIR"]) / "replay"
    return sorted(root.iterdir()) if root.is_dir() else []


def test_a_kept_output_is_replayed_byte_for_byte_and_only_for_the_same_command(trace, tmp_path):
    argv = ["analyze", str(trace), "--format", "json", "-o", "out.json", "-q"]
    _run(argv)
    first = (tmp_path / "out.json").read_bytes()
    assert len(json.loads(first)["kernels"]) > 0 and len(_records()) == 1
    (tmp_path / "out.json").unlink()
    assert replay.Invocation(argv).answer()
    assert (tmp_path / "out.json").read_bytes() == first  # written whole, as the full run wrote it
    # another option, another output place: not this record
    assert not replay.Invocation([*argv, "--top", "3"]).answer()
    assert not replay.Invocation(["analyze", str(trace), "--format", "json", "-o", "other.json", "-q"]).answer()
    assert not (tmp_path / "other.json").exists()


def test_a_change_to_the_trace_the_environment_or_the_code_is_a_miss(trace, tmp_path, monkeypatch):
    argv = ["analyze", str(trace), "--format", "csv", "-o", "out.csv"]
    _run(argv)
    assert replay.Invocation(argv).answer()
    monkeypatch.setenv("KERNSCOPE_SOMETHING", "1")  # any variable: the command may read it
    assert not replay.Invocation(argv).answer()
    monkeypatch.delenv("KERNSCOPE_SOMETHING")
    assert replay.Invocation(argv).answer()
    fingerprint = replay.code_fingerprint
    monkeypatch.setattr(replay, "code_fingerprint", lambda: "edited")
    assert not replay.Invocation(argv).answer()
    monkeypatch.setattr(replay, "code_fingerprint", fingerprint)
    assert replay.Invocation(argv).answer()
    st = trace.stat()
    os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns))  # same content and times: the change time moves
    assert not replay.Invocation(argv).answer()


def test_a_rules_file_is_part_of_the_record(trace, tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text('[[category]]\nvalue = "Mine"\npattern = "gemm"\n')
    argv = ["analyze", str(trace), "--rules", str(rules), "--format", "json", "-o", "out.json", "-q"]
    _run(argv)
    assert replay.Invocation(argv).answer()
    rules.write_text('[[category]]\nvalue = "Yours"\npattern = "gemm"\n')
    assert not replay.Invocation(argv).answer()


def test_a_damaged_or_foreign_record_is_a_miss(trace, tmp_path):
    argv = ["analyze", str(trace), "--format", "json", "-o", "out.json", "-q"]
    _run(argv)
    (record,) = _records()
    data = bytearray(record.read_bytes())
    data[-2] ^= 0x01  # one bit of the output
    record.write_bytes(bytes(data))
    (tmp_path / "out.json").unlink()
    assert not replay.Invocation(argv).answer() and not (tmp_path / "out.json").exists()
    _run(argv)  # the full run keeps it again
    key = Path(os.environ["KERNSCOPE_CACHE_DIR"]) / "key"
    key.write_bytes(os.urandom(32))  # another user's key: their records fail the check
    assert not replay.Invocation(argv).answer()


def test_nothing_is_kept_for_a_trace_changed_just_before_the_run_or_named_by_a_pattern(trace, tmp_path, monkeypatch):
    monkeypatch.setattr(replay, "RACY_NS", 2_000_000_000)  # the default: the copy is younger than 2 s
    _run(["analyze", str(trace), "--format", "json", "-o", "out.json", "-q"])
    assert _records() == []
    monkeypatch.setattr(replay, "RACY_NS", 0)
    _run(["analyze", str(tmp_path / "*.json.gz"), "--format", "json", "-o", "out.json", "-q"])
    assert _records() == []  # a glob (or a directory) may name other files next time
    _run(["analyze", str(trace), "--format", "json", "-o", "out.json", "-q", "--no-cache"])
    assert _records() == []  # nothing stored, nothing kept


def test_a_replayed_answer_imports_neither_the_command_line_nor_polars(trace, tmp_path):
    argv = ["analyze", str(trace), "--format", "json"]
    inv = replay.Invocation(argv)
    before = dict(os.environ)
    assert cli.main([*argv, "-o", "first.json"]) == 0  # the same output, to a file (not kept: no invocation)
    os.environ.clear()
    os.environ.update(before)
    assert _records() == []
    env = dict(os.environ)
    code = ("import sys; from kernscope.replay import Invocation; "
            f"ok = Invocation({argv!r}).answer(); "
            "print(ok, sorted(m for m in sys.modules if m.split('.')[0] in ('click', 'polars', 'numpy', 'rich', "
            "'kernscope')), file=sys.stderr)")
    # keep it as the process would: stdout is a pipe there and here
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, cwd=tmp_path, check=True)
    assert out.stderr.decode().startswith("False")
    body = (tmp_path / "first.json").read_bytes()
    assert inv.record([str(trace)], None, body)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, cwd=tmp_path, check=True)
    said = out.stderr.decode()
    assert said.startswith("True"), said
    assert out.stdout == body + (b"" if body.endswith(b"\n") else b"\n")
    modules = eval(said.split(" ", 1)[1])  # noqa: S307 - our own child's print of a list of names
    assert set(modules) <= {"kernscope", "kernscope.errors", "kernscope.load", "kernscope.load.cachedir",
                            "kernscope.replay", "kernscope.sink", "kernscope.version"}, modules


def test_cache_clear_removes_the_records_and_info_counts_them(trace, tmp_path, capsys):
    argv = ["analyze", str(trace), "--format", "json", "-o", "out.json", "-q"]
    _run(argv)
    assert cli.main(["cache", "info"]) == 0
    assert "outputs kept for replay: 1" in capsys.readouterr().out
    assert cli.main(["cache", "clear"]) == 0
    assert _records() == [] and not replay.Invocation(argv).answer()


def test_an_unwritable_output_place_falls_back_to_the_full_command(trace, tmp_path):
    (tmp_path / "sub").mkdir()
    argv = ["analyze", str(trace), "--format", "json", "-o", "sub/out.json", "-q"]
    _run(argv)
    shutil.rmtree(tmp_path / "sub")
    assert not replay.Invocation(argv).answer()  # the full command says what is wrong
    assert cli.main(argv) == 2


def test_trim_keeps_the_most_recently_used(tmp_path):
    for i in range(5):
        p = tmp_path / f"r{i}"
        p.write_bytes(b"x" * 10)
        os.utime(p, (1000 + i, 1000 + i))
    (tmp_path / "dead.123.tmp").write_bytes(b"")
    os.utime(tmp_path / "dead.123.tmp", (1, 1))
    assert replay.trim(str(tmp_path), max_records=3) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r2", "r3", "r4"]
    assert replay.trim(str(tmp_path), max_bytes=15) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["r4"]
    assert replay.records(str(tmp_path)) == (1, 10)


def test_the_cache_key_file_is_never_made_by_a_lookup(tmp_path, monkeypatch):
    root = tmp_path / "c"
    root.mkdir(mode=0o700)
    monkeypatch.setenv("KERNSCOPE_CACHE_DIR", str(root))
    assert not replay.Invocation(["analyze", "x.json"]).answer()
    assert list(root.iterdir()) == [] and cache.cache_root() == root
