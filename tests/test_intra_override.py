"""`kernscope intra override` without a GPU: proton.record insertion into real TTGIR (compiled for sm_90 on the CPU),
which Triton's MLIR parser with Proton's dialect accepts; the dump directory step; the child runner; bad input.
The full three-step run on a GPU is in test_gpu.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernscope.cli import main
from kernscope.errors import KernscopeError
from kernscope.intra.override import insert_records, prepare_dump

DATA = Path(__file__).parent / "data"
triton = pytest.importorskip("triton")


def _ttgir(kernel: str) -> str:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sys.path.insert(0, str(DATA))
    import libkernels

    sigs = {
        "add_kernel": ({"x_ptr": "*fp32", "y_ptr": "*fp32", "output_ptr": "*fp32", "n_elements": "i32",
                        "BLOCK_SIZE": "constexpr"}, {"BLOCK_SIZE": 1024}),
        "sum_rows": ({"x_ptr": "*fp32", "out_ptr": "*fp32", "n_cols": "i32", "stride": "i32", "BLOCK": "constexpr"},
                     {"BLOCK": 128}),
    }
    sig, cx = sigs[kernel]
    c = triton.compile(ASTSource(fn=getattr(libkernels, kernel), signature=sig, constexprs=cx),
                       target=GPUTarget("cuda", 90, 32))
    return str(c.asm["ttgir"])


def _parses(text: str, tmp_path: Path) -> bool:
    from triton._C.libtriton import ir, proton

    p = tmp_path / "check.ttgir"
    p.write_text(text)
    ctx = ir.context()
    ir.load_dialects(ctx)
    proton.load_dialects(ctx)
    return "proton.record" in str(ir.parse_mlir_module(str(p), ctx))


def _loop_line() -> int:
    src = (DATA / "libkernels.py").read_text().splitlines()
    return next(i + 1 for i, line in enumerate(src) if "for start in range(0, n_cols, BLOCK)" in line)


def test_records_around_body_and_top_level_loop_parse_with_protons_dialect(tmp_path):
    text = _ttgir("sum_rows")
    new, kernel, scopes = insert_records(text)
    loop = f"loop@L{_loop_line()}"  # the source line, resolved through the #loc table
    assert kernel == "sum_rows" and scopes == ("sum_rows", loop)
    for s in scopes:
        assert new.count(f'proton.record start "{s}"') == 1 and new.count(f'proton.record end "{s}"') == 1
    lines = new.splitlines()
    at = {ln.strip(): i for i, ln in enumerate(lines) if "proton.record" in ln}
    loop_line = next(i for i, ln in enumerate(lines) if "scf.for" in ln)
    assert at['proton.record start "sum_rows"'] < at[f'proton.record start "{loop}"'] == loop_line - 1
    assert at[f'proton.record end "{loop}"'] < at['proton.record end "sum_rows"'] < \
        next(i for i, ln in enumerate(lines) if "tt.return" in ln)
    # nothing else changed
    assert [ln for ln in lines if "proton.record" not in ln] == text.splitlines()
    assert _parses(new, tmp_path)
    only_loops, _, s2 = insert_records(text, regions=("loops",))
    assert s2 == (loop,) and _parses(only_loops, tmp_path)


def test_insert_errors():
    add = _ttgir("add_kernel")
    new, kernel, scopes = insert_records(add)
    assert kernel == "add_kernel" and scopes == ("add_kernel",)
    with pytest.raises(KernscopeError, match="no top-level loop"):
        insert_records(add, regions=("loops",), where="add.ttgir")
    with pytest.raises(KernscopeError, match="already contains proton.record"):
        insert_records(new)
    with pytest.raises(KernscopeError, match="--regions"):
        insert_records(add, regions=("everything",))
    with pytest.raises(KernscopeError, match="no public tt.func"):
        insert_records("module {\n}\n", where="x.ttgir")
    untouched, kernel, scopes = insert_records(add, kernels=("sum_rows",))
    assert untouched == add and kernel == "add_kernel" and scopes == ()


def _dump(root: Path) -> Path:
    """A dump directory as TRITON_KERNEL_DUMP writes it: one folder per kernel hash, every IR stage."""
    for k, h in (("add_kernel", "AAAA"), ("sum_rows", "BBBB")):
        (root / h).mkdir(parents=True)
        (root / h / f"{k}.ttgir").write_text(_ttgir(k))
        (root / h / f"{k}.ptx").write_text("// ptx")
        (root / h / f"{k}.ttir").write_text("// ttir")
    return root


def test_prepare_dump_keeps_only_the_chosen_kernels_ttgir(tmp_path):
    dump = _dump(tmp_path / "ttgir_dump")
    done = prepare_dump(dump, kernels=("sum_rows",))
    assert [(Path(d.path).name, d.scopes[0]) for d in done] == [("sum_rows.ttgir", "sum_rows")]
    assert sorted(p.relative_to(dump).as_posix() for p in dump.rglob("*") if p.is_file()) == ["BBBB/sum_rows.ttgir"]
    with pytest.raises(KernscopeError, match="already contains proton.record"):  # a second pass is refused
        prepare_dump(dump)
    with pytest.raises(KernscopeError, match="no compiled kernel named nope"):
        prepare_dump(_dump(tmp_path / "again"), kernels=("nope",))
    both = prepare_dump(_dump(tmp_path / "all"))
    assert sorted(d.kernel for d in both) == ["add_kernel", "sum_rows"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(KernscopeError, match="compiled no Triton kernel"):
        prepare_dump(empty)


def test_child_runner_passes_the_scripts_arguments(tmp_path):
    script = tmp_path / "s.py"
    out = tmp_path / "argv.txt"
    script.write_text(f"import sys\nopen({str(out)!r}, 'w').write(' '.join(sys.argv))\nsys.exit(3)\n")
    r = subprocess.run([sys.executable, "-m", "kernscope.intra.proton_session", "--name", str(tmp_path / "p"),
                        "--no-session", "--", str(script), "a", "--b"], check=False)
    assert r.returncode == 3 and out.read_text() == f"{script} a --b"
    # python -m module, from the current directory
    (tmp_path / "progmod.py").write_text(f"import sys\nopen({str(out)!r}, 'w').write(' '.join(sys.argv[1:]))\n")
    r = subprocess.run([sys.executable, "-m", "kernscope.intra.proton_session", "--name", str(tmp_path / "p"),
                        "--no-session", "--", "-m", "progmod", "x", "y"], check=False, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")})
    assert r.returncode == 0 and out.read_text() == "x y"



def test_child_asks_no_clock_of_a_program_that_never_imported_triton(tmp_path):
    """The child records the GPU's clock beside the trace after the program; a program that never imported triton
    ran no Triton kernel, and asking the clock imported torch (seconds, for a program that failed at once)."""
    script = tmp_path / "s.py"
    out = tmp_path / "modules.txt"
    # (atexit: after the child's own ending, which is where it asks the clock)
    script.write_text(f"import atexit, sys\natexit.register(lambda: open({str(out)!r}, 'w').write("
                      "' '.join(m for m in ('torch', 'triton') if m in sys.modules)))\nsys.exit(5)\n")
    r = subprocess.run([sys.executable, "-m", "kernscope.intra.proton_session", "--name", str(tmp_path / "p"),
                        "--no-session", "--", str(script)], check=False)
    assert r.returncode == 5 and out.read_text() == ""
    assert not list(tmp_path.glob("p*"))  # no clock file beside a trace that does not exist

def test_cli_bad_program_is_one_line(tmp_path, capsys):
    assert main(["intra", "override", "-o", str(tmp_path / "w"), "--", "python", str(tmp_path / "nope.py")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"kernscope: error: {tmp_path / 'nope.py'}: no such script"]
    assert not (tmp_path / "w").exists()  # refused before any folder was made
    failing = tmp_path / "fail.py"
    failing.write_text("raise SystemExit(5)\n")
    assert main(["intra", "override", "--no-session", "-o", str(tmp_path / "w"), "--", "python", str(failing)]) == 2
    assert "step 1 (dump the TTGIR): the program exited with 5" in capsys.readouterr().err
    assert not (tmp_path / "w").exists()  # the failed first step left no empty work folder behind
    (tmp_path / "kept").mkdir()  # a folder the user gave that existed stays
    assert main(["intra", "override", "--no-session", "-o", str(tmp_path / "kept"), "--", "python", str(failing)]) == 2
    capsys.readouterr()
    assert (tmp_path / "kept").is_dir() and not any((tmp_path / "kept").iterdir())
    quiet = tmp_path / "quiet.py"
    quiet.write_text("x = 1\n")
    assert main(["intra", "override", "--no-session", "-o", str(tmp_path / "w"), "--", "python", str(quiet)]) == 2
    assert "compiled no Triton kernel" in capsys.readouterr().err


def _proton_event(kernel: str, core: int, cta: int, warp: int, name: str, ts_us: float, dur_us: float) -> dict:
    return {"ph": "X", "name": name, "cat": kernel, "pid": f"{kernel} Core{core} CTA{cta}", "tid": f"warp {warp} (line 0)",
            "ts": ts_us, "dur": dur_us, "args": {"Finalization Time (ns)": 128, "Frequency (MHz)": 1000.0}}


def test_proton_trace_with_several_kernels_and_launches(tmp_path, capsys):
    """What `intra override` reads back: Proton writes every launch of every kernel on one time axis with CTA ids
    repeating per launch; blocks must not merge across launches, and span/tail are given per launch."""
    import json

    ev = []
    for launch, t0 in enumerate((0.0, 50.0, 100.0)):  # add: 3 launches of 4 CTAs x 2 warps
        for cta in range(4):
            for w in range(2):
                ev.append(_proton_event("add", cta % 2, cta, w, "add", t0 + cta, 2.0 + launch))
    for cta in range(3):  # rows: one launch, nested scopes
        ev.append(_proton_event("rows", cta, cta, 0, "rows", 200.0, 10.0))
        ev.append(_proton_event("rows", cta, cta, 0, "loop@L7", 201.0, 8.0))
    p = tmp_path / "p.chrome_trace"
    p.write_text(json.dumps({"traceEvents": ev}))
    from kernscope.intra.io import load_tasks

    loaded = load_tasks(p)
    assert loaded.launches is not None
    per = loaded.launches.group_by("kernel", "launch").len().sort("kernel", "launch").rows()
    assert per == [("add", 0, 4), ("add", 1, 4), ("add", 2, 4), ("rows", 0, 3)]
    assert loaded.tasks["block"].n_unique() == 15 and loaded.tasks.height == len(ev)
    assert main(["intra", "stats", str(p), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    runs = {(r["kernel"], r["launch"]): r for r in doc["summary"]["launches"]}
    # Proton's times count SM cycles (no clock known): the keys say cycles, never ns
    assert doc["summary"]["time_unit"] == "cycles" and doc["summary"]["clock_ghz"] is None
    assert runs[("add", 1)]["blocks"] == 4 and runs[("add", 1)]["span_cycles"] == 3000 + 3000  # CTAs at +0..3 k, 3 k each
    assert "span_cycles" not in doc["summary"] and "span_ns" not in runs[("add", 1)]  # one span over launches: nothing
    sms = {(r["kernel"], r["launch"], r["sm"]): r for r in doc["sms"]}  # per-SM busy time per launch too
    assert sms[("add", 2, 0)]["blocks"] == 2 and sms[("add", 2, 0)]["busy_cycles"] == 6000  # CTAs 0, 2: 100-104, 102-106 k
    html = tmp_path / "p.html"
    assert main(["intra", "stats", str(p), "--html", str(html)]) == 0
    capsys.readouterr()
    page = html.read_text()
    assert "Per kernel launch" in page and "[object Object]" not in page
    assert main(["intra", "stats", str(p), "--kernel", "rows", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"]["blocks"] == 3 and doc["summary"]["span_cycles"] == 10_000
    assert {s["path"] for s in doc["scopes"]} == {"rows", "rows/loop@L7"}
    assert main(["intra", "stats", str(p), "--kernel", "nope"]) == 2
    assert "it has: add, rows" in capsys.readouterr().err


def test_cli_without_proton_is_one_line(tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name.startswith("triton") else real(name, *a))
    script = tmp_path / "s.py"
    script.write_text("x = 1\n")
    assert main(["intra", "override", "-o", str(tmp_path / "w"), "--", "python", str(script)]) == 2
    assert capsys.readouterr().err.strip() == 'kernscope: error: intra override needs triton with Proton (triton.profiler): ' \
                                              'pip install "kernscope[gpu]"'
