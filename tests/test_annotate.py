"""``kernscope annotate``: the user's code with each line's GPU time. The recordings' scripts as they were when
recorded are in ``tests/data/code``: ``examples/record_jax_profiles.py`` at 986ab98 (the transformer JAX profile:
the model on lines 73-102; ``norm`` 73-76, ``layer`` 78-84 with cuDNN attention on 82, ``loss_fn`` 86-91, the SGD
update's lambda on 102) and ``examples/record_example_trace.py`` at f03e1d8 (the GPT trace with stacks:
``Block.forward`` defined on line 36, ``GPT.forward`` on 53, ``step`` on 82)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from conftest import cli

import kernscope
from kernscope.analyze.listing import find_file, source_listing
from kernscope.analyze.summary import analyze

DATA = Path(__file__).parent / "data"
TRANSFORMER = DATA / "jax" / "transformer" / "vm.xplane.pb.gz"
GPT_STACK = DATA / "kineto" / "h100_gpt_stack_shapes.pt.trace.json.gz"
BUNDLED = Path(kernscope.__file__).parent / "examples" / "h200_gpt_train_step.pt.trace.json.gz"


@pytest.fixture(scope="module")
def transformer() -> kernscope.Trace:
    return kernscope.load(TRANSFORMER, cache=False, projection="analyze")


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    """A folder holding both scripts as they were when their profiles were recorded."""
    (tmp_path / "examples").mkdir()
    shutil.copy(DATA / "code" / "record_jax_profiles_986ab98.py.txt", tmp_path / "examples" / "record_jax_profiles.py")
    shutil.copy(DATA / "code" / "record_example_trace_f03e1d8.py.txt", tmp_path / "record_example_trace.py")
    return tmp_path


run = cli  # (the CLI in this process: exit code, stdout, stderr)


def test_jax_lines_beside_their_code_as_recorded(transformer, recorded):
    lst = source_listing(transformer, roots=[recorded])
    assert lst is not None and lst.framework == "jax"
    f = lst.files.row(0, named=True)
    assert lst.files.height == 1 and f["file"].endswith("examples/record_jax_profiles.py")
    assert f["found"] == str(recorded / "examples" / "record_jax_profiles.py") and f["changed"] is False
    lines = {r["line"]: r for r in lst.lines.iter_rows(named=True)}
    assert list(lines) == sorted(lines) == [74, 75, 76, 80, 81, 82, 83, 84, 87, 88, 89, 90, 91, 102]
    assert all(r["matches"] for r in lines.values())
    assert all(r["scope"] == r["function"] for r in lines.values())  # (the ast's qualified names are JAX's)
    assert lines[82]["code"].startswith("y = jax.nn.dot_product_attention(") and lines[82]["top_kernel"].startswith("cudnn")
    assert lines[88]["code"] == 'h, _ = jax.lax.scan(layer, h, p["layers"])'
    assert lines[90]["code"] == "logp = jax.nn.log_softmax(logits)" and lines[90]["top_kernel"].startswith("triton_softmax")
    assert lines[102]["code"].startswith("return jax.tree_util.tree_map(lambda a, b:")
    # the lines' GPU time is the analysis's by line; with the records without a line, all of it
    s = analyze(transformer).sources
    assert lst.lines["total_us"].sum() == pytest.approx(s.drop_nulls("source")["total_us"].sum())
    assert lst.no_line_us == pytest.approx(s.filter(pl.col("source").is_null())["total_us"].sum())
    assert lst.no_line_pct + f["pct"] == pytest.approx(100.0)
    assert lst.notes == ()


def test_a_file_edited_since_the_recording_is_flagged(transformer, tmp_path):
    """Five lines added above the model: its lines now point at other code; the file is flagged, the lines that left
    their function say so, and a note names the first."""
    text = (DATA / "code" / "record_jax_profiles_986ab98.py.txt").read_text().splitlines(keepends=True)
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "record_jax_profiles.py").write_text("".join(text[:60] + ["# added\n"] * 5 + text[60:]))
    lst = source_listing(transformer, roots=[tmp_path])
    assert lst is not None and lst.files["changed"].to_list() == [True]
    assert not lst.lines["matches"].all()
    assert lst.lines.filter(pl.col("line") == 87)["code"].item().startswith("y = jax.nn.dot_product_attention(")
    assert len(lst.notes) == 1 and "changed since the profile was recorded (line 74 is not in" in lst.notes[0]


def test_pytorch_functions_beside_their_first_lines(recorded):
    t = kernscope.load(GPT_STACK, cache=False)
    lst = source_listing(t, roots=[recorded])
    assert lst is not None and lst.framework == "pytorch" and lst.no_line_us == 0
    got = {(r["line"], r["function"]): (r["count"], r["code"], r["matches"]) for r in lst.lines.iter_rows(named=True)}
    assert {k: v[0] for k, v in got.items()} == {(36, "forward"): 252, (36, "forward (backward)"): 492,
                                                 (53, "forward"): 30, (53, "forward (backward)"): 123,
                                                 (82, "step"): 303, (82, "step (backward)"): 12}
    assert {v[1].split("(")[0] for v in got.values()} == {"def forward", "def step"} and all(v[2] for v in got.values())
    assert {(r["line"], r["scope"]) for r in lst.lines.iter_rows(named=True)} == {
        (36, "Block.forward"), (53, "GPT.forward"), (82, "main.<locals>.step")}  # (what PyTorch names "forward")
    one = source_listing(t, step=2, roots=[recorded])
    assert one is not None and one.lines["count"].sum() == 404  # (step 2's kernels, copies and sets)


def test_files_are_found_by_the_tails_of_their_path_and_in_installed_packages(tmp_path, monkeypatch):
    (tmp_path / "proj" / "pkg").mkdir(parents=True)
    (tmp_path / "proj" / "pkg" / "model.py").write_text("x = 1\n")
    assert find_file("/home/someone/proj/pkg/model.py", [tmp_path]) == tmp_path / "proj" / "pkg" / "model.py"
    monkeypatch.chdir(tmp_path / "proj")
    assert find_file("/elsewhere/pkg/model.py") == Path("pkg/model.py")  # (under the current folder)
    assert find_file("polars/dataframe/frame.py") == Path(pl.__file__).parent / "dataframe" / "frame.py"
    assert find_file("/nowhere/at/all.py") is None and find_file("nothing_here.py") is None
    (tmp_path / "secret.txt").write_text("not code\n")
    assert find_file(str(tmp_path / "secret.txt")) is None and find_file("/etc/passwd") is None  # (Python source only)


def test_cli_terminal_json_csv_and_a_file_not_found(recorded, tmp_path):
    r = run("annotate", str(TRANSFORMER), "--root", str(recorded), "--no-cache")
    assert r.returncode == 0, r.stderr
    assert "GPU time by line of your code" in r.stdout and "jax.lax.scan(layer, h" in r.stdout and "CHANGED" not in r.stdout
    torch = run("annotate", str(GPT_STACK), "--root", str(recorded), "--no-cache")
    assert "Block.forward" in torch.stdout and "GPT.forward" in torch.stdout
    d = json.loads(run("annotate", str(TRANSFORMER), "--root", str(recorded), "--no-cache", "--format", "json").stdout)
    assert d["framework"] == "jax" and len(d["lines"]) == 14 and d["files"][0]["changed"] is False
    assert run("annotate", str(TRANSFORMER), "--root", str(recorded), "--no-cache", "--format", "csv",
               "-o", str(tmp_path / "l.csv")).returncode == 0
    assert pl.read_csv(tmp_path / "l.csv")["line"].to_list()[:3] == [74, 75, 76]
    (tmp_path / "elsewhere").mkdir()
    lost = run("annotate", str(GPT_STACK), "--no-cache", "--format", "json", cwd=tmp_path / "elsewhere")
    d = json.loads(lost.stdout)
    assert d["files"][0]["found"] is None and all(x["code"] is None for x in d["lines"])
    assert d["notes"] == ["record_example_trace.py: not found here (--root DIR: where your code is)"]


def test_a_trace_without_stacks_is_an_empty_answer_said_in_one_line():
    r = run("annotate", str(BUNDLED), "--no-cache")
    assert r.returncode == 3 and "no GPU record has a line of your code" in r.stderr and "with_stack=True" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_path_that_is_not_python_source_is_never_read(tmp_path):
    from kernscope.analyze.kernels import SOURCE_SCHEMA
    from kernscope.analyze.listing import listing_of

    (tmp_path / "notes.txt").write_text("a\nb\nc\n")
    table = pl.DataFrame([{"source": f"{tmp_path / 'notes.txt'}:2", "function": "f", "kernels": 1, "top_kernel": "k",
                           "count": 3, "total_us": 9.0, "mean_us": 3.0, "min_us": 3.0, "max_us": 3.0, "pct": 100.0,
                           "pct_wall": 50.0}], schema=SOURCE_SCHEMA)
    lst = listing_of(table, "t.json", roots=[tmp_path])
    assert lst.lines["code"].to_list() == [None] and lst.files["found"].to_list() == [None]
    assert lst.notes == (f"{tmp_path / 'notes.txt'}: not a Python source file: not read",)


def test_report_code_adds_the_lines_with_their_code(recorded, tmp_path):
    r = run("report", str(TRANSFORMER), "--code", "--root", str(recorded), "-o", str(tmp_path / "csv/"), "--no-cache")
    assert r.returncode == 0, r.stderr
    lines = pl.read_csv(tmp_path / "csv" / "code_lines.csv")
    assert lines.height == 14 and lines.filter(pl.col("line") == 88)["code"].item() == 'h, _ = jax.lax.scan(layer, h, p["layers"])'
    assert pl.read_csv(tmp_path / "csv" / "code_files.csv")["changed"].to_list() == [False]
    html = run("report", str(TRANSFORMER), "--code", "--root", str(recorded), "-o", str(tmp_path / "r.html"), "--no-cache")
    assert html.returncode == 0 and "jax.nn.log_softmax(logits)" in (tmp_path / "r.html").read_text()
    assert run("report", str(TRANSFORMER), "-o", str(tmp_path / "plain/"), "--no-cache").returncode == 0
    assert not (tmp_path / "plain" / "code_lines.csv").exists()  # (asked for only)
    none = run("report", str(BUNDLED), "--code", "-o", str(tmp_path / "b/"), "--no-cache")
    assert none.returncode == 0 and "--code: no GPU record of" in none.stderr and "with_stack=True" in none.stderr
    assert not (tmp_path / "b" / "code_lines.csv").exists()
