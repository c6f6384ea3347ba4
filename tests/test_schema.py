"""The JSON outputs' published schemas (issue #29, item 4): ``docs/schema/*.schema.json`` match what the code
emits, every output says its ``schema_version``, and real outputs validate (jsonschema, draft 2020-12)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from conftest import TRACES

from kernscope.cli import main
from kernscope.render.schema import samples, schema
from kernscope.version import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "docs" / "schema"
EXAMPLE = ROOT / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
DATA = ROOT / "tests" / "data"


@pytest.fixture(scope="module")
def generated() -> dict[str, dict]:
    return {name: schema(name, docs) for name, docs in samples(ROOT).items()}


def test_committed_schemas_are_what_the_code_emits(generated):
    for name, want in generated.items():
        have = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
        assert have == want, (f"docs/schema/{name}.schema.json is stale: run `python -m kernscope.render.schema` and bump "
                              "SCHEMA_VERSION (kernscope/version.py) if a field was removed or changed meaning")
        jsonschema.Draft202012Validator.check_schema(have)


def _validate(capsys, name: str, argv: list[str]) -> dict:
    assert main([*argv, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema_version"] == SCHEMA_VERSION
    jsonschema.validate(doc, json.loads((SCHEMAS / f"{name}.schema.json").read_text()))
    return doc


def test_outputs_validate_on_bundled_and_recorded_traces(capsys):
    mem = DATA / "memory_h100" / "h100_gpt_memory.pt.trace.json.gz"
    jax = DATA / "jax" / "transformer" / "vm.xplane.pb.gz"
    for t in (EXAMPLE, mem, jax):
        doc = _validate(capsys, "analyze", ["analyze", str(t), "--no-cache"])
        assert all(f["win_back_us"] >= 0 for f in doc["findings"])
        _validate(capsys, "perf", ["perf", str(t), "--no-cache"])
    _validate(capsys, "analyze", ["analyze", str(EXAMPLE), "--step", "3", "--by-annotation", "--no-cache"])
    _validate(capsys, "diff", ["diff", str(EXAMPLE), str(mem), "--no-cache"])
    _validate(capsys, "memory", ["memory", str(mem), "--no-cache"])
    _validate(capsys, "memory", ["memory", str(jax), "--no-cache"])  # XLA's allocator events: no reserved bytes


def test_perf_of_a_device_not_in_the_peaks_table_validates(tmp_path, capsys):
    """A device the peaks table does not know: ``device.peaks`` is null (the schema said an object: the output of
    HTA's 128-rank sample and TraceLens's JAX transformer-engine profile did not validate)."""
    from conftest import write_trace

    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0.0, "dur": 50.0,
           "args": {"Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"], "Concrete Inputs": ["", ""]}},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0,
           "args": {"correlation": 1}},
          {"ph": "X", "cat": "kernel", "name": "sgemm", "pid": 0, "tid": 7, "ts": 20.0, "dur": 10.0,
           "args": {"correlation": 1, "device": 0, "stream": 7}}]
    p = write_trace(tmp_path / "t.json", ev, deviceProperties=[{"id": 0, "name": "Mystery Accelerator 9000"}])
    doc = _validate(capsys, "perf", ["perf", str(p), "--no-cache", "-q"])
    assert doc["device"]["peaks"] is None and doc["ops"][0]["pct_of_peak"] is None


PUBLIC = sorted((TRACES / "tracelens").glob("*.json.gz"))[:3] + sorted((TRACES / "hta").glob("*.json.gz"))[:2] \
    if TRACES.is_dir() else []


@pytest.mark.skipif(not PUBLIC, reason="../shared/traces not present")
def test_outputs_validate_on_public_traces_and_a_job(capsys):
    for t in PUBLIC:
        _validate(capsys, "analyze", ["analyze", str(t), "--no-cache"])
        _validate(capsys, "perf", ["perf", str(t), "--no-cache"])
    ranks = sorted((TRACES / "multirank").glob("fsdp4_rank*.json.gz"))
    if ranks:
        doc = _validate(capsys, "job", ["analyze", *map(str, ranks), "-q"])
        assert doc["findings"] and doc["findings"][0]["rule"] == "straggler"


def _fields(node: dict, where: str):
    """(place, field schema) of every field under ``node``: object properties, table rows' cells, nested objects."""
    for k, v in (node.get("properties") or {}).items():
        yield f"{where}.{k}", v
        items = v.get("items") if isinstance(v.get("items"), dict) else {}
        yield from _fields(items if items.get("properties") else v, f"{where}.{k}")


def test_every_field_table_and_object_is_described_by_its_place(generated):
    """Every field, table and object of every output has a description, and a table or object is never described
    by a column's glossary term (the `kernels` table read "GPU kernel records. Unit: count", the job's `ranks` table
    "Ranks on which the collective instance was found", memory's `devices` table "GPU device ids", the timeline's
    `type` "Collective type", a trace's `path` "An annotation range's place"); every place the glossary names exists."""
    from kernscope.render.glossary import PLACES, TERMS

    seen = set()
    for name, s in generated.items():
        for place, f in _fields(s, name):
            seen.add(place)
            if place.endswith(".schema_version"):
                continue
            assert f.get("description"), f"{place} has no description"
            structured = "properties" in f or "properties" in (f.get("items") or {})
            term = TERMS.get(place.rsplit(".", 1)[1])
            if structured and term is not None:
                assert not f["description"].startswith(term.meaning), f"{place}: a table described as the column {term.name}"
    assert not set(PLACES) - seen, f"glossary places no output has: {sorted(set(PLACES) - seen)}"
    desc = {p: f["description"] for n, s in generated.items() for p, f in _fields(s, n)}
    assert desc["analyze.timeline.type"].startswith("In timelines, the time type")
    assert desc["job.collective_instances.bytes"].startswith("Message bytes")
    assert desc["memory.devices.peak_reserved"].startswith("The largest Total Reserved")


def test_the_job_sample_is_a_real_ddp_job_with_a_straggler():
    """The job schema's sample is two ranks of DDP recorded on two H200s (examples/record_ddp_job.py: rank 1 sleeps
    20 ms before each backward), so its stragglers, collectives and queues tables have rows and columns: before, a
    job of one trace twice had none, and the schema said nothing of those tables' columns."""
    from kernscope.analyze.ranks import RankTask
    from kernscope.engine import EngineSpec, analyze_job

    paths = [str(p) for p in sorted((DATA / "ddp2_h200").glob("rank*.pt.trace.json.gz"))]
    assert len(paths) == 2
    j = analyze_job(paths, RankTask(cache=False), EngineSpec(workers=1))
    assert j.world_size == 2 and j.ranks["rank"].to_list() == [0, 1]
    s = j.stragglers
    assert s["rank"].to_list() == [1, 1, 1] and s["step_number"].to_list() == [2, 3, 4]
    assert all(20_000 < w < 22_000 for w in s["max_wait_us"].to_list())  # the injected 20 ms, as rank 0 waited
    c = j.collectives.row(0, named=True)
    assert (c["type"], c["instances"], c["most_often_last"]) == ("allreduce", 15, 1)
    generated_job = json.loads((SCHEMAS / "job.schema.json").read_text())
    for t in ("stragglers", "collectives", "collective_instances", "queues", "failures"):
        assert generated_job["properties"][t]["items"]["properties"], t
