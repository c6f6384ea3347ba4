"""SQL over a trace's tables and its analysis's (issue #26, item 4): ``kernscope sql`` and ``Trace.sql``,
checked against the raw JSON and against ``analyze --format json``."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from functools import partial
from pathlib import Path

import polars as pl
import pytest
from conftest import TRACES

import kernscope
from kernscope.analyze import sql as sql_mod
from kernscope.cli import main
from kernscope.errors import KernscopeError

EXAMPLE = Path(kernscope.__file__).parent / "examples" / "h200_gpt_train_step.pt.trace.json.gz"


@pytest.fixture(scope="module")
def raw():
    return json.loads(gzip.decompress(EXAMPLE.read_bytes()))["traceEvents"]


def test_trace_sql_counts_kernels_like_the_raw_json(raw):
    t = kernscope.load(EXAMPLE, cache=False)
    want: dict[str, list[float]] = defaultdict(list)
    for e in raw:
        if e.get("cat") == "kernel":
            want[e["name"]].append(e["dur"])
    got = t.sql("SELECT name, count(*) AS n, sum(dur) AS total_ns FROM kernels GROUP BY name")
    assert got.height == len(want)
    for name, n, total in got.iter_rows():
        assert n == len(want[name]) and total == pytest.approx(sum(want[name]) * 1000, abs=n)  # µs -> ns, rounded
    # categorical columns compare as text; LIKE works
    nccl = t.sql("SELECT count(*) AS n FROM kernels WHERE name LIKE 'nvjet%'")["n"][0]
    assert nccl == sum(len(v) for k, v in want.items() if k.startswith("nvjet"))
    steps = t.sql("SELECT step, name FROM steps ORDER BY step")
    assert steps["name"].to_list() == t.steps.sort("step")["name"].to_list()


def test_cli_sql_agrees_with_analyze_json(capsys):
    assert main(["analyze", str(EXAMPLE), "--format", "json", "--no-cache"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert main(["sql", "SELECT category, count, total_us FROM analysis.categories ORDER BY category", str(EXAMPLE),
                 "--format", "json", "--no-cache"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {r["category"]: (r["count"], r["total_us"]) for r in rows} == {
        c["category"]: (c["count"], c["total_us"]) for c in doc["categories"]}
    # CSV, and an aggregate over an analysis table: the kernel rows' counts per category, as analyze's JSON
    q = "SELECT category, sum(count) AS n FROM analysis.kernels GROUP BY category ORDER BY category"
    assert main(["sql", q, str(EXAMPLE), "--format", "csv", "--no-cache"]) == 0
    got = pl.read_csv(capsys.readouterr().out.encode())
    want: dict[str, int] = defaultdict(int)
    for k in doc["kernels"]:
        want[k["category"]] += k["count"]
    assert dict(zip(got["category"], got["n"])) == dict(want)
    assert main(["sql", "SELECT step, length_us, step_us FROM analysis.critical_path", str(EXAMPLE), "--format", "json",
                 "--no-cache", "--step", "2"]) == 0
    (cp,) = json.loads(capsys.readouterr().out)["rows"]
    assert cp["step"] == 2 and cp["length_us"] <= cp["step_us"] + 1e-6


def test_trace_queries_never_run_the_analysis(monkeypatch):
    t = kernscope.load(EXAMPLE, cache=False)

    def boom(*a, **k):
        raise AssertionError("analysis ran")

    monkeypatch.setattr(sql_mod, "analyze", boom)
    assert sql_mod.sql(t, "SELECT count(*) AS n FROM gpu")["n"][0] == t.gpu.height


def test_bad_queries_are_one_line(capsys):
    for q, needle in [("SELECT nope FROM kernels", 'unable to find column "nope"'),
                      ("SELECT * FROM nowhere", "nowhere"), ("SELEC 1", "SQL:")]:
        assert main(["sql", q, str(EXAMPLE), "--no-cache"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0] and "tables: events, gpu, kernels" in err[0], err
    with pytest.raises(KernscopeError, match="SQL:"):
        kernscope.load(EXAMPLE, cache=False).sql("SELECT FROM")


def test_the_trace_given_before_the_query_is_said_so(capsys, tmp_path):
    """``kernscope sql TRACE QUERY`` (the arguments swapped) names the mistake, not a file pattern that matches
    nothing; a query that names a file nobody wrote, or a second trace that is missing, keeps its own message."""
    for args in ([str(EXAMPLE), "SELECT count(*) AS n FROM kernels"], [str(EXAMPLE), "  with k AS (SELECT 1) SELECT 2"]):
        assert main(["sql", *args, "--no-cache"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "the query comes first (kernscope sql QUERY TRACE...)" in err[0], err
    assert main(["sql", "SELECT count(*) AS n FROM kernels", str(tmp_path / "nope.json"), "--no-cache"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope.json" in err[0] and "comes first" not in err[0], err
    assert main(["sql", "SELECT count(*) AS n FROM kernels", str(EXAMPLE), "--no-cache", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"][0]["n"] == sum(1 for e in json.loads(gzip.decompress(
        EXAMPLE.read_bytes()))["traceEvents"] if e.get("cat") == "kernel")


def test_a_kernels_category_asked_of_the_trace_points_to_the_analysis(capsys, raw):
    """``SELECT category ... FROM kernels`` is the first query a user tries: the trace's kernels table holds what was
    recorded, the category is the analysis's; the one line says where it is, and that query answers."""
    assert main(["sql", "SELECT category, count(*) AS n FROM kernels GROUP BY 1", str(EXAMPLE), "--no-cache"]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert 'unable to find column "category"' in err and "category is the analysis's: in analysis.kernels" in err
    assert main(["sql", "SELECT category, sum(count) AS n FROM analysis.kernels GROUP BY 1", str(EXAMPLE), "--no-cache",
                 "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    rows = got["rows"] if isinstance(got, dict) and "rows" in got else got
    assert sum(r["n"] for r in rows) == sum(1 for e in raw if e.get("cat") == "kernel")


def test_dotted_table_names_in_any_spelling_and_never_in_quotes():
    """analysis.<table> names are found as written in any case, qualify their columns, and stay as written inside
    quotes; an error names them as the user wrote them (they are registered under plain names, which polars 2.0,
    the newest on Python 3.10, needs)."""
    from kernscope.model import run_sql

    t = {"analysis.kernels": lambda: pl.DataFrame({"name": ["a", "analysis.kernels"], "us": [1.0, 2.0]}),
         "kernels": lambda: pl.DataFrame({"name": ["k"]})}
    got = run_sql("SELECT Analysis.Kernels.name, 'analysis.kernels' AS lit FROM ANALYSIS.KERNELS "
                  "WHERE name = 'analysis.kernels'", t)
    assert got.rows() == [("analysis.kernels", "analysis.kernels")]
    both = run_sql("SELECT k.name, a.us FROM kernels k, analysis.kernels a ORDER BY a.us", t)
    assert both.rows() == [("k", 1.0), ("k", 2.0)]
    with pytest.raises(KernscopeError) as e:
        run_sql("SELECT nope FROM analysis.kernels", t)
    assert "__ks_" not in str(e.value) and "analysis.kernels" in str(e.value)


def test_only_queries_run_and_show_tables_lists_every_table(capsys, monkeypatch):
    """A statement that is not a query (DROP, CREATE, INSERT, ...) or an empty one is refused in one line (polars' engine
    ran DROP on its own context and printed nothing, exit 0), before the trace is read (a JAX profile's 207 MB were
    loaded to refuse it: 1 s, 0.5 GB); SHOW TABLES lists the trace's tables and the analysis's without building any;
    a query after a comment or in parentheses runs."""
    t = kernscope.load(EXAMPLE, cache=False)
    loads = _count_loads(monkeypatch)
    for q in ("DROP TABLE kernels", "  insert into kernels values (1)", "/* x */ CREATE TABLE t AS SELECT 1", "", "  ;"):
        for cache in ([], ["--no-cache"]):
            assert main(["sql", q, str(EXAMPLE), *cache]) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and "only queries run here" in err[0] and "tables: events" in err[0], (q, err)
    assert loads == []
    with pytest.raises(KernscopeError, match="DROP changes nothing"):
        t.sql("drop table gpu")
    names = sql_mod.sql(t, "SHOW TABLES;")["name"].to_list()
    assert {"events", "gpu", "kernels", "steps", "analysis.kernels", "analysis.findings"} <= set(names)
    assert names == sql_mod.table_names()  # (the names a refusal lists before any load)
    assert sql_mod.sql(t, "-- kernels\n(SELECT count(*) AS n FROM kernels)")["n"][0] == t.kernels.height
    assert sql_mod.sql(t, "WITH k AS (SELECT * FROM kernels) SELECT count(*) AS n FROM k")["n"][0] == t.kernels.height


def test_analysis_tables_keep_their_columns_without_steps_or_gpu(tmp_path, capsys):
    """A trace with host events only (no steps, no GPU work): every ``analysis.`` table a query names has its columns
    (the critical path's tables had none: a query printed one empty line, exit 0, and naming a column failed), and
    the summaries have ``pct_wall`` (null: there is no GPU span) as on any other trace."""
    from conftest import write_trace

    p = tmp_path / "host_only.json"
    write_trace(p, [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0.0, "dur": 5.0}])
    t = kernscope.load(p, cache=False)
    cp = sql_mod.sql(t, "SELECT * FROM analysis.critical_path_ops")
    assert cp.columns == ["step", "op", "host_us"] and cp.height == 0
    assert sql_mod.sql(t, "SELECT step, length_us, gpu_us FROM analysis.critical_path").height == 0
    assert "pct_wall" in sql_mod.sql(t, "SELECT * FROM analysis.kernels").columns
    assert sql_mod.sql(t, "SELECT category, pct_wall FROM analysis.categories").height == 0
    full = kernscope.load(EXAMPLE, cache=False)
    for name in sql_mod.ANALYSIS_TABLES:  # the same columns as on a trace with steps and GPU work
        want = sql_mod.sql(full, f"SELECT * FROM analysis.{name}").schema
        got = sql_mod.sql(t, f"SELECT * FROM analysis.{name}").schema
        assert list(got) == list(want), name
    assert main(["sql", "SELECT * FROM analysis.critical_path_whatif", str(p), "--no-cache"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].split() == ["step", "change", "saves_us"]


def test_a_narrow_answer_keeps_its_title_on_one_line(capsys):
    """The terminal table's title is the query, on a line of its own as wide as the terminal: a one-column answer
    wrapped it inside the column, three letters a line."""
    q = "SELECT count(*) AS n FROM kernels"
    assert main(["sql", q, str(EXAMPLE), "--no-cache"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"{q} (1 row)", "  n", "728"]


def test_sql_over_a_job_reads_its_tables(tmp_path, capsys):
    """Several traces (a folder of ranks) are one job: `kernscope sql` queries its tables as job.<name>, with the
    values `analyze --format json` gives (the real 2-rank DDP job recorded on two H200s, rank 1 the straggler)."""
    job = Path(__file__).resolve().parent / "data" / "ddp2_h200"
    assert main(["analyze", str(job), "--no-cache", "--format", "json", "-q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert main(["sql", "SELECT rank, step_number, max_wait_us FROM job.stragglers ORDER BY step_number", str(job),
                 "--no-cache", "--format", "json", "-q"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["rows"] == [{k: s[k] for k in ("rank", "step_number", "max_wait_us")} for s in doc["stragglers"]]
    assert [r["rank"] for r in got["rows"]] == [1, 1, 1]
    q = "SELECT type, count(*) AS n, sum(bytes) AS b FROM job.collective_instances GROUP BY type"
    files = [str(p) for p in sorted(job.glob("rank*.json.gz"))]
    assert main(["sql", q, *files, "--no-cache", "--format", "json", "-q"]) == 0
    row = json.loads(capsys.readouterr().out)["rows"][0]
    assert row == {"type": "allreduce", "n": 15, "b": doc["collectives"][0]["bytes"]}
    assert main(["sql", "SHOW TABLES", str(job), "--no-cache", "--format", "json", "-q"]) == 0
    names = [r["name"] for r in json.loads(capsys.readouterr().out)["rows"]]
    assert names[:3] == ["job.ranks", "job.rank_steps", "job.stragglers"] and "job.collectives" in names
    from kernscope.engine import analyze_job

    api = analyze_job(files).sql("SELECT rank, step_number, max_wait_us FROM job.stragglers ORDER BY step_number")
    assert api.to_dicts() == got["rows"]
    assert main(["sql", "SELECT 1", str(job), "--step", "2", "--no-cache", "-q"]) == 2
    assert "a job's tables hold every step" in capsys.readouterr().err


# -- a stored trace: the parse cache's tables read as far as a query needs them ---------------------------------------

JAX_PROFILE = Path(__file__).parent / "data" / "multigpu_h200" / "jax_dp.xplane.pb.gz"
#: queries of every trace table: projections, filters, limits, joins and aggregates (ordered: compared as frames)
STORED_QUERIES = (
    "SELECT count(*) AS n FROM kernels",
    "SELECT name, count(*) AS n, sum(dur) AS total FROM kernels GROUP BY name ORDER BY total DESC, name",
    "SELECT * FROM gpu ORDER BY idx LIMIT 5",
    "SELECT * FROM events WHERE dur > 1000 ORDER BY idx LIMIT 20",
    "SELECT idx, name, ts FROM events LIMIT 7",
    "SELECT idx, name FROM events WHERE dur > 1000 LIMIT 9",
    "SELECT * FROM gpu LIMIT 3",
    "SELECT count(*) AS n, min(ts) AS t0, max(\"end\") AS t1 FROM cpu_ops",
    "SELECT name, count(*) AS n FROM launches GROUP BY name ORDER BY n DESC, name",
    "SELECT step, name, start, \"end\" FROM steps ORDER BY step",
    "SELECT count(*) AS n, count(DISTINCT flow_id) AS ids FROM flows",
    "SELECT k.idx, k.name, e.name AS launch, e.dur FROM kernels k JOIN events e ON k.launch_idx = e.idx "
    "ORDER BY k.idx LIMIT 10",
    "SELECT launcher, sum(dur) AS t FROM kernels WHERE name LIKE '%gemm%' OR name LIKE 'nvjet%' OR stream > 0 "
    "GROUP BY launcher ORDER BY t DESC, launcher",
    "SELECT count(*) AS n, max(depth) AS deepest FROM call_tree",
    "SELECT category, count, total_us FROM analysis.categories ORDER BY category",
)


def _entry(path):
    from kernscope.pipeline import LoadOptions, stored

    found = stored(path, LoadOptions())
    assert found is not None, "no parse-cache entry was written"
    return found[0]


def _stored_cases():
    shared = TRACES / "hta" / "a100_alexnet_cuda_sync.json.gz"
    return [EXAMPLE, JAX_PROFILE, pytest.param(shared, marks=pytest.mark.skipif(
        not shared.exists(), reason="a100_alexnet_cuda_sync not in ../shared/traces"))]


@pytest.mark.parametrize("path", _stored_cases(), ids=lambda p: Path(p).name[:24])
def test_a_stored_trace_answers_every_query_as_the_trace_does(path):
    """``kernscope sql`` over a trace in the parse cache reads its tables lazily (polars IO sources over the entry's
    files); every table, read whole or in part, filtered, limited and joined, answers as the loaded trace's do."""
    t = kernscope.load(path)  # (writes the entry)
    entry = _entry(path)
    for q in STORED_QUERIES:
        want = sql_mod.sql(t, q)
        got = sql_mod.stored_sql(entry.lazy, lambda: t, q)
        assert got.schema == want.schema and got.equals(want), q
    assert sql_mod.stored_sql(entry.lazy, lambda: t, "SELECT count(*) AS n FROM kernels")["n"][0] == t.kernels.height > 0


def test_a_stored_query_reads_only_the_columns_it_names(monkeypatch):
    import importlib

    cache_mod = importlib.import_module("kernscope.load.cache")  # (kernscope.load is the API's function)
    kernscope.load(EXAMPLE)
    entry = _entry(EXAMPLE)
    seen: list[tuple[str, list[str] | None]] = []
    read = cache_mod.Entry._columns

    def spy(self, name, columns=None, rows=None):
        if rows != (0, 0):  # (a lazy frame's schema: no rows read)
            seen.append((name, columns))
        return read(self, name, columns, rows)

    def no_trace():
        raise AssertionError("the trace was loaded for a query of its own tables")

    monkeypatch.setattr(cache_mod.Entry, "_columns", spy)
    n = sql_mod.stored_sql(entry.lazy, no_trace, "SELECT count(*) AS n FROM kernels")["n"][0]
    assert n == kernscope.load(EXAMPLE, cache=False).kernels.height
    # the kind, and a column polars counts the rows by (of ~70)
    assert seen and all(name == "gpu" and cols is not None and "kind" in cols and len(cols) <= 2 for name, cols in seen), seen
    seen.clear()
    sql_mod.stored_sql(entry.lazy, no_trace, "SELECT name, sum(dur) AS t FROM events GROUP BY name")
    assert seen and all(name == "events" and cols is not None and set(cols) == {"name", "dur"} for name, cols in seen), seen


def _count_loads(monkeypatch) -> list[tuple[str, object]]:
    """The loads the command session makes from now on, as (path, projection) (``Session.load`` counted, still run)."""
    from kernscope import commands

    loads: list[tuple[str, object]] = []
    real_load = commands.Session.load

    def counted(self, path, **kw):
        loads.append((path, kw.get("projection")))
        return real_load(self, path, **kw)

    monkeypatch.setattr(commands.Session, "load", counted)
    return loads


def test_cli_sql_reads_a_stored_trace_and_a_damaged_entry_is_read_again(tmp_path, capsys, monkeypatch):
    import shutil


    p = tmp_path / "t.json.gz"
    shutil.copy(EXAMPLE, p)
    q = "SELECT name, count(*) AS n FROM kernels GROUP BY name ORDER BY n DESC, name"
    # cold, a query of the events: the file parsed whole, the entry written
    assert main(["sql", "SELECT count(*) AS n FROM events", str(p), "--format", "json"]) == 0
    capsys.readouterr()
    loads = _count_loads(monkeypatch)
    assert main(["sql", q, str(p), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == sql_mod.sql(kernscope.load(p, cache=False), q).to_dicts()
    assert loads == []  # the stored tables, no trace loaded
    # a bit flipped in the stored event table: one notice, the file parsed again, the same answer
    entry = _entry(p)
    events = entry.path / "events.arrow"
    b = bytearray(events.read_bytes())
    b[len(b) // 2] ^= 0x01
    events.write_bytes(bytes(b))
    q2 = "SELECT count(*) AS n FROM events"
    assert main(["sql", q2, str(p), "--format", "json"]) == 0
    out = capsys.readouterr()
    n = json.loads(out.out)["rows"][0]["n"]
    assert n == kernscope.load(p, cache=False).events.height and len(loads) == 1
    assert "damaged cache entry" in out.err or "lost its" in out.err


def _analyzed_cases():
    data = Path(__file__).parent / "data"
    shared = [TRACES / "hta" / "a100_alexnet_cuda_sync.json.gz", TRACES / "hta" / "v100_ns_resolution.pt.trace.json.gz",
              TRACES / "tracelens" / "rocm_vllm_decode_full_hipgraph.json.gz", TRACES / "tracelens" / "mi210_gpu_only.json.gz"]
    return [EXAMPLE, data / "kineto" / "h100_gpt_stack_shapes.pt.trace.json.gz", data / "jax" / "transformer" / "vm.xplane.pb.gz",
            JAX_PROFILE, *(pytest.param(p, marks=pytest.mark.skipif(not p.exists(), reason=f"{p.name} not in ../shared/traces"))
                           for p in shared)]


@pytest.mark.parametrize("path", _analyzed_cases(), ids=lambda p: Path(p).name[:24])
def test_an_analyzes_entry_holds_the_gpu_rows_and_steps_as_a_whole_load_does(path):
    """Where only ``analyze``'s narrower load is stored, ``kernscope sql`` reads the GPU table and the steps from it:
    the columns ``projection_keeps`` names are the whole load's (PyTorch traces with and without stacks, CUDA and HIP
    graphs, ROCm, JAX profiles whose command buffers' library kernels get their instruction from the schedule: the
    narrower load writes it too); the others (unread args and stats) are read from the whole load."""
    from kernscope.analyze.needs import analyze_projection
    from kernscope.pipeline import LoadOptions, projection_keeps, stored

    narrow = analyze_projection(None)
    assert narrow is not None
    kernscope.load(path, projection="analyze")  # (the entry analyze writes)
    found = stored(path, LoadOptions(projection=narrow))
    assert found is not None
    entry = found[0]
    whole = kernscope.load(path, cache=False)
    for name in ("gpu", "steps"):
        want: pl.DataFrame = getattr(whole, name)
        keeps = projection_keeps(narrow, want.columns)
        assert {"name", "ts", "dur", "launch_idx", "launcher", "step"} <= keeps or name == "steps"
        got = entry.table(name, [c for c in want.columns if c in keeps])
        assert got.schema == want.select(got.columns).schema and got.equals(want.select(got.columns)), name
        lf = entry.lazy(name, reread=partial(getattr, whole, name), holds=keeps)
        assert lf.collect().equals(want), name  # (every column asked for: the whole load's where the entry lacks one)


def test_cli_sql_after_analyze_reads_its_entry_and_the_whole_load_only_when_a_query_needs_it(tmp_path, capsys, monkeypatch):
    import shutil


    p = tmp_path / "t.json.gz"
    shutil.copy(EXAMPLE, p)
    assert main(["analyze", str(p), "--format", "json"]) == 0  # the narrower entry only
    capsys.readouterr()
    loads = _count_loads(monkeypatch)
    whole = kernscope.load(p, cache=False)
    q = "SELECT name, count(*) AS n, sum(dur) AS t FROM kernels GROUP BY name ORDER BY t DESC, name"
    assert main(["sql", q, str(p), "--format", "json"]) == 0
    assert loads == [] and json.loads(capsys.readouterr().out)["rows"] == sql_mod.sql(whole, q).to_dicts()
    # the events (the narrower load has no Python events) and a column it left unread: the whole load, once
    for q in ("SELECT count(*) AS n FROM events", "SELECT count(*) AS n, sum(bytes) AS b FROM gpu WHERE bytes IS NOT NULL"):
        assert main(["sql", q, str(p), "--format", "json"]) == 0
        assert json.loads(capsys.readouterr().out)["rows"] == sql_mod.sql(whole, q).to_dicts(), q
    assert len(loads) == 1 and sql_mod.sql(whole, q)["n"][0] > 0  # (the copies' bytes: unread by analyze's load)


def test_reads_only_judges_the_tables_and_columns_a_query_can_need():
    """Which queries a projected load can answer (``analyze``'s: its GPU rows and steps, not the columns it leaves
    unread): by the words of the query, a doubt saying no."""
    from kernscope.analyze.needs import analyze_projection
    from kernscope.load.projection import Projection
    from kernscope.pipeline import projection_unread, served_tables

    narrow = analyze_projection(None)
    assert narrow is not None
    unread = projection_unread(narrow)
    assert {"bytes", "grid_x", "op_path", "hlo_flops"} <= unread and not {"name", "dur", "stream", "hlo_instruction"} & unread
    # analyze's load skips Python events and instant events: it holds the GPU rows, steps, CPU ops and launches whole;
    # a load that skips CPU ops holds no CPU ops table whole
    served = served_tables(narrow)
    assert served == {"gpu", "kernels", "steps", "cpu_ops", "launches"}
    assert "cpu_ops" not in served_tables(Projection()) and "launches" in served_tables(Projection())
    yes = ["SELECT name, count(*) AS n, sum(dur) AS t FROM kernels GROUP BY name ORDER BY t DESC",
           "SELECT COUNT( * ) FROM gpu", "select k.name, s.step from kernels k join steps s on k.step = s.step",
           "SELECT sum(dur) * 1e-3 AS us FROM kernels", "SHOW TABLES", "SELECT hlo_instruction, sum(dur) FROM kernels GROUP BY 1",
           "SELECT count(*) FROM cpu_ops", "SELECT name, sum(dur) FROM launches GROUP BY name"]
    no = ["SELECT count(*) FROM events", "SELECT * FROM kernels", "SELECT DISTINCT * FROM steps", "SELECT k.* FROM kernels k",
          "SELECT name, * EXCLUDE (name) FROM gpu", "SELECT sum(bytes) FROM gpu", "SELECT hlo_params FROM kernels",
          "SELECT * FROM analysis.kernels", "SELECT name FROM analysis.kernels",
          "SELECT count(*) FROM kernels NATURAL JOIN gpu",
          "SELECT COLUMNS('grid.*') FROM kernels", "SELECT count(*) FROM counters.kernels", "SELECT g.grid_x FROM gpu g",
          "SELECT count(*) FROM call_tree", "SELECT count(*) FROM flows"]
    for q in yes:
        assert sql_mod.reads_only(q, served, unread), q
    for q in no:
        assert not sql_mod.reads_only(q, served, unread), q
    # an XSpace load that does not match command buffers' library kernels to their calls (no source line nor cost
    # read) leaves their HLO columns unset: not as a whole load's
    no_match = projection_unread(Projection(keep="", drop_cats=(), drop_phases=(), stats=("hlo_op", "hlo_instruction")))
    assert {"hlo_instruction", "hlo_desc", "hlo_source"} <= no_match and "hlo_op" not in no_match


def _first_sql_cases():
    data = Path(__file__).parent / "data"
    ns = TRACES / "hta" / "v100_ns_resolution.pt.trace.json.gz"
    return [EXAMPLE, data / "kineto" / "h100_gpt_stack_shapes.pt.trace.json.gz", data / "jax" / "transformer" / "vm.xplane.pb.gz",
            pytest.param(ns, marks=pytest.mark.skipif(not ns.exists(), reason=f"{ns.name} not in ../shared/traces"))]


@pytest.mark.parametrize("path", _first_sql_cases(), ids=lambda p: Path(p).name[:24])
def test_cli_first_sql_of_a_file_reads_analyzes_narrower_load_where_it_holds_what_the_query_needs(path, tmp_path, capsys,
                                                                                                      monkeypatch):
    """The first ``kernscope sql`` of a file nothing has stored, when the query needs only the GPU rows, steps, CPU ops
    and launches in columns that ``analyze``'s narrower load fills: that load alone (a JAX profile's 207 MB: 1.3-1.4 s
    and 1.0 GB whole, 1.0-1.15 s and 0.53 GB so), the whole load's answer; it is stored, so the next such query loads
    nothing; a query of the events loads the whole trace once."""
    import shutil

    from kernscope.analyze.needs import analyze_projection

    p = tmp_path / Path(path).name
    shutil.copy(path, p)
    whole = kernscope.load(p, cache=False)
    loads = _count_loads(monkeypatch)
    queries = ["SELECT name, count(*) AS n, sum(dur) AS t FROM kernels GROUP BY name ORDER BY t DESC, name",
               "SELECT s.step, count(*) AS n, sum(g.dur) AS t FROM gpu g JOIN steps s ON g.step = s.step "
               "GROUP BY s.step ORDER BY s.step",
               "SELECT name, count(*) AS n, sum(dur) AS t, min(idx) AS i FROM cpu_ops GROUP BY name ORDER BY t DESC, name",
               "SELECT name, count(*) AS n, sum(dur) AS t, min(idx) AS i FROM launches GROUP BY name ORDER BY t DESC, name"]
    for q in queries:
        assert main(["sql", q, str(p), "--format", "json"]) == 0
        rows = json.loads(capsys.readouterr().out)["rows"]
        assert rows == sql_mod.sql(whole, q).to_dicts() and rows, q
    assert loads == [(str(p), analyze_projection(None))]  # (the later queries: from the entry the first stored)
    q = "SELECT count(*) AS n FROM events"
    assert main(["sql", q, str(p), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == [{"n": whole.events.height}]
    assert loads[1:] == [(str(p), None)]


def test_cli_first_sql_without_the_cache_and_a_query_the_narrower_load_cannot_answer(tmp_path, capsys, monkeypatch):
    """Without the cache the narrower load is read in memory as it would be from its entry; a query naming a column it
    leaves unread (a copy's bytes), the events, or every column (``*``) loads the whole trace, once, and nothing else."""
    import shutil

    from kernscope.analyze.needs import analyze_projection

    p = tmp_path / "t.json.gz"
    shutil.copy(EXAMPLE, p)
    whole = kernscope.load(p, cache=False)
    loads = _count_loads(monkeypatch)
    q = "SELECT name, count(*) AS n, sum(dur) AS t FROM kernels GROUP BY name ORDER BY t DESC, name"
    assert main(["sql", q, str(p), "--format", "json", "--no-cache"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == sql_mod.sql(whole, q).to_dicts()
    assert loads == [(str(p), analyze_projection(None))]
    for q in ("SELECT count(*) AS n, sum(bytes) AS b FROM gpu WHERE bytes IS NOT NULL", "SELECT count(*) AS n FROM events",
              "SELECT * FROM kernels ORDER BY idx LIMIT 5"):
        loads.clear()
        assert main(["sql", q, str(p), "--format", "json", "--no-cache"]) == 0
        assert json.loads(capsys.readouterr().out)["rows"] == sql_mod.sql(whole, q).to_dicts(), q
        assert loads == [(str(p), None)], q


def test_a_narrower_loads_tables_read_the_whole_load_for_a_column_they_lack():
    """``pipeline.Held``: a projected load's GPU rows read as its entry's are; a column the load left unread (which a
    query reaches without naming it where ``reads_only`` has no say) comes from the whole load, loaded once."""
    from kernscope.analyze.needs import analyze_projection
    from kernscope.pipeline import Held, stored_tables

    narrow = analyze_projection(None)
    assert narrow is not None
    t = kernscope.load(EXAMPLE, cache=False, projection=narrow)
    whole = kernscope.load(EXAMPLE, cache=False)
    calls: list[int] = []

    def load_whole():
        calls.append(1)
        return whole

    tables = stored_tables(Held(t), narrow, load_whole)
    q = "SELECT name, count(*) AS n, sum(dur) AS t FROM kernels GROUP BY name ORDER BY t DESC, name"
    assert sql_mod.stored_sql(tables, load_whole, q).equals(sql_mod.sql(whole, q)) and calls == []
    assert t.gpu["bytes"].null_count() == t.gpu.height > whole.gpu["bytes"].null_count()  # (unread by the narrower load)
    for q in ("SELECT count(*) AS n, sum(bytes) AS b FROM gpu WHERE bytes IS NOT NULL", "SELECT * FROM gpu ORDER BY idx"):
        assert sql_mod.stored_sql(tables, load_whole, q).equals(sql_mod.sql(whole, q)), q
    assert calls and set(calls) == {1}
