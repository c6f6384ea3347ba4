"""The published JSON Schemas of kernscope's JSON outputs (``docs/schema/*.schema.json``).

Scripts and LLM agents read ``kernscope analyze|diff|perf|memory --format json``; every output carries
``schema_version`` (:data:`kernscope.version.SCHEMA_VERSION`) and each has a JSON Schema (draft 2020-12):
its objects and tables, every field's JSON type, and the meaning and unit of each (a table or object by its place
in the glossary's ``PLACES``, a field by its place where the meaning there is narrower, else by its glossary
term). The schemas are written from what the renderers emit on sample runs (``python -m
kernscope.render.schema docs/schema`` regenerates them), so they cannot drift from the code unnoticed: a test
compares the committed files with a fresh generation and validates real outputs against them.

Conventions: objects allow extra keys (new fields are added in a minor version); the keys every sample had are
``required`` (outside table rows); scalar fields and table cells may be null (a field only seen null may hold
any type); numbers are JSON numbers (units in the names: ``_us`` µs, ``_ns`` ns, ``_pct`` %, ``bytes``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ..version import SCHEMA_VERSION
from .glossary import PLACES, TERMS

DIALECT = "https://json-schema.org/draft/2020-12/schema"
TITLES = {
    "analyze": "kernscope analyze --format json (one trace)",
    "job": "kernscope analyze --format json (several ranks of one job)",
    "diff": "kernscope diff --format json",
    "perf": "kernscope perf --format json",
    "memory": "kernscope memory --format json",
    "annotate": "kernscope annotate --format json",
    "counters": "kernscope counters --format json",
}


def _type_of(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _describe(name: str, node: dict[str, Any], where: str) -> dict[str, Any]:
    """``node`` (the field ``name`` of the object at place ``where``) with its description: the place's own
    (:data:`~kernscope.render.glossary.PLACES`: tables, objects, narrower meanings), else the glossary term of a
    scalar field or a list of scalars (a term names a column or a fact, never a table or an object)."""
    t = PLACES.get(f"{where}.{name}")
    structured = "properties" in node or "properties" in node.get("items", {})
    if t is None and not structured:
        t = TERMS.get(name)
    if t is not None:
        node["description"] = t.meaning + (f" Unit: {t.unit}." if t.unit else "")
    return node


def infer(samples: list[Any], *, cell: bool = False, depth: int = 0, where: str = "") -> dict[str, Any]:
    """A schema every sample satisfies: objects by key, arrays by the union of their items. ``required``: the
    keys of every sample, for the document and its direct objects (deeper ones, such as a device's peaks, vary
    with the input). ``cell``: a table cell, which may also be null (a cell only ever seen null may hold any
    type)."""
    seen = {_type_of(s) for s in samples}
    types = sorted(seen | ({"null"} if cell else set()))
    node: dict[str, Any] = {}
    if not (cell and seen <= {"null"}):
        node["type"] = types[0] if len(types) == 1 else types
    objects = [s for s in samples if isinstance(s, dict)]
    if objects:
        keys: list[str] = []
        for o in objects:
            keys += [k for k in o if k not in keys]
        node["properties"] = {k: _describe(k, _field([o[k] for o in objects if k in o], cell, depth + 1, f"{where}.{k}"), where)
                              for k in keys}
        required = [k for k in keys if all(k in o for o in objects)]
        if required and not cell and depth <= 1:
            node["required"] = required
    arrays = [s for s in samples if isinstance(s, list)]
    items = [x for a in arrays for x in a]
    if arrays:
        if items and all(isinstance(x, dict) for x in items):  # a table: rows are objects, their cells nullable
            node["items"] = _row(items, where)
        else:
            node["items"] = infer(items, where=where) if items else {}
    return node


def _field(values: list[Any], cell: bool, depth: int, where: str) -> dict[str, Any]:
    """A field of an object: scalars may be null (a step, a rank, a peak the trace has not), as cells may."""
    scalar = all(not isinstance(v, (dict, list)) for v in values)
    return infer(values, cell=cell or scalar, depth=depth, where=where)


def _row(rows: list[dict[str, Any]], where: str) -> dict[str, Any]:
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    return {"type": "object",
            "properties": {k: _describe(k, infer([r[k] for r in rows if k in r], cell=True, where=f"{where}.{k}"), where)
                           for k in keys},
            "required": [k for k in keys if all(k in r for r in rows)]}


def schema(name: str, samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON Schema of output ``name`` from sample outputs of it."""
    body = infer(samples, where=name)
    body["properties"]["schema_version"] = {"const": SCHEMA_VERSION, "description": "Version of this contract."}
    return {"$schema": DIALECT, "$id": f"https://kernscope.dev/schema/{name}-{SCHEMA_VERSION}.schema.json",
            "title": TITLES[name], "description": f"Schema version {SCHEMA_VERSION}; see kernscope/render/schema.py.",
            **body}


def samples(root: Path) -> dict[str, list[dict[str, Any]]]:
    """Sample outputs of every JSON command, from the bundled example and ``tests/data`` (under ``root``, the
    repository): a trace with annotations and findings, a profile_memory trace, a JAX profile, a process on two GPUs,
    a job of two ranks."""
    import dataclasses
    import shutil
    import tempfile

    import polars as pl

    from ..analyze.diff import Side, diff
    from ..analyze.findings import find_roofline
    from ..analyze.memory import memory_timeline
    from ..analyze.perf import PerfReport, perf_model
    from ..analyze.ranks import Failure, combine, summarize_rank
    from ..analyze.summary import analyze
    from ..pipeline import load
    from .formats import render

    def as_json(result: Any) -> dict[str, Any]:
        body = render(result, "json")
        assert isinstance(body, bytes)
        return dict(json.loads(body))

    example = root / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    memory = root / "tests" / "data" / "memory_h100" / "h100_gpt_memory.pt.trace.json.gz"
    jax = root / "tests" / "data" / "jax" / "transformer" / "vm.xplane.pb.gz"
    host = root / "tests" / "data" / "align_h100" / "train.pt.trace.json.gz"
    rank0 = root / "tests" / "data" / "ddp2_h200" / "rank0.pt.trace.json.gz"  # NCCL: exposed communication
    pipeline = root / "tests" / "data" / "multigpu_h200" / "torch_mp.pt.trace.json.gz"  # two GPUs: step_start_wait
    traces = {p: load(p, cache=False) for p in (example, memory, jax, host, rank0, pipeline) if p.is_file()}
    out: dict[str, list[dict[str, Any]]] = {k: [] for k in TITLES}
    for p, t in traces.items():
        ann = "" if p == example else None  # the example has record_function ranges with GPU work
        out["analyze"].append(as_json(analyze(t, by_annotation=ann, benchmark=None)))
        pm = perf_model(t)
        out["perf"].append(as_json(PerfReport(pm, str(p), find_roofline(pm.ops, t.steps.height))))
    t0 = traces[example]
    # a device the peaks table does not know: no peaks (null), % of peak and bound empty
    out["perf"].append(as_json(PerfReport(dataclasses.replace(perf_model(t0), device=None), str(example))))
    out["diff"].append(as_json(diff(Side(t0, 2), Side(t0, 3))))
    if host in traces:
        out["diff"].append(as_json(diff(Side(t0, None), Side(traces[host], None))))
    if jax in traces:  # two steps of a JAX profile: by line of the user's code (sources), and by function
        for match in ("exact", "loose"):
            out["diff"].append(as_json(diff(Side(traces[jax], 0), Side(traces[jax], 2), match=match)))
    for p in (memory, jax):  # a profile_memory trace, and a JAX profile's allocator events (no reserved bytes)
        if p in traces:
            m = memory_timeline(traces[p])
            assert m is not None
            out["memory"].append(as_json(m))
    # the transformer profile's lines against its script as recorded (tests/data/code: every line's code found and
    # in its function), and the GPT trace's functions with no file found (code null)
    from ..analyze.listing import source_listing

    with tempfile.TemporaryDirectory() as tmp:
        script = root / "tests" / "data" / "code" / "record_jax_profiles_986ab98.py.txt"
        if jax in traces and script.is_file():
            (Path(tmp) / "examples").mkdir()
            shutil.copy(script, Path(tmp) / "examples" / "record_jax_profiles.py")
            listing = source_listing(traces[jax], roots=[Path(tmp)])
            assert listing is not None
            out["annotate"].append(as_json(listing))
        gpt = root / "tests" / "data" / "kineto" / "h100_gpt_stack_shapes.pt.trace.json.gz"
        if gpt.is_file():
            listing = source_listing(load(gpt, cache=False), step=2, roots=[Path(tmp)])
            assert listing is not None
            out["annotate"].append(as_json(dataclasses.replace(
                listing, files=listing.files.with_columns(pl.lit(None, pl.String).alias("found"),
                                                          pl.lit(None, pl.Boolean).alias("changed")),
                lines=listing.lines.with_columns(pl.lit(None, pl.String).alias("code"),
                                                 pl.lit(None, pl.Boolean).alias("matches")))))
    # hardware counters (CUPTI's range profiler): a trace written as PyTorch writes one (testing.synth), the kernels
    # matched to their launches, and one whose launches outnumber its ranges (not matched: ops null)
    from ..analyze.counters import kernel_counters
    from ..testing.synth import COUNTER_METRICS, counters_trace

    with tempfile.TemporaryDirectory() as tmp:
        kernels = [("ampere_sgemm_128x64_tn", "aten::mm", {m: float(1000 * (i + 1)) for i, m in enumerate(COUNTER_METRICS)}),
                   ("vectorized_elementwise_kernel", "aten::add", {m: 0.0 for m in COUNTER_METRICS})]
        for extra in (0, 1):
            p = Path(tmp) / f"c{extra}.json"
            counters_trace(p, kernels, extra_launches=extra)
            c = kernel_counters(load(p, cache=False))
            assert c is not None
            out["counters"].append(as_json(c))
    # a step whose first kernel queued behind nothing the trace holds (TraceLens's ROCm vLLM traces have it; no trace
    # of tests/data does): step_start_queued's evidence
    from ..testing.synth import queued_start_trace

    with tempfile.TemporaryDirectory() as tmp:
        queued_start_trace(Path(tmp) / "queued.json")
        out["analyze"].append(as_json(analyze(load(Path(tmp) / "queued.json", cache=False))))
    # a real job: two ranks of DDP on two H200s, rank 1 late to every all-reduce (stragglers, collectives, queues),
    # and a rank file that could not be read (failures)
    ddp = sorted((root / "tests" / "data" / "ddp2_h200").glob("rank*.pt.trace.json.gz"))
    ranks = [summarize_rank(load(p, cache=False), str(p)) for p in ddp] or [summarize_rank(t0, "rank0.json")]
    out["job"].append(as_json(combine(ranks, [Failure("rank2.pt.trace.json.gz", "not valid JSON at byte 7")])))
    return out


def write(dest: Path, root: Path) -> list[Path]:
    """(Re)write ``dest/<name>.schema.json`` for every output; returns the files."""
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for name, docs in samples(root).items():
        p = dest / f"{name}.schema.json"
        p.write_text(json.dumps(schema(name, docs), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(p)
    return written


if __name__ == "__main__":  # pragma: no cover - a developer's command
    repo = Path(__file__).resolve().parents[3]
    for f in write(Path(sys.argv[1]) if len(sys.argv) > 1 else repo / "docs" / "schema", repo):
        sys.stdout.write(f"{f}\n")
