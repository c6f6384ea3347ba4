"""Two benchmark runs compared cell by cell (``kernscope bench --compare A.json B.json``): a regression check
across time, machines or versions.

Input: two ``--json`` result files of ``kernscope bench`` (raw samples included), or TritonBench's own result
files on either side (``--output`` CSV, ``--output-json``: medians only, so ratios without interval or test).
Cells match by (impl, input parameters; where one side lists fewer parameters, by those); for each,
:func:`kernscope.bench.stats.verdict` says whether B is faster, slower or within noise,
with the ratio of medians (B / A, < 1: B faster), its bootstrap interval, the test that fits the samples, its p
value and Cliff's delta. Notes say what moved between the runs: the GPU, software versions, clock locking, and
per cell a median SM clock that differs by more than 2%.
"""

from __future__ import annotations

import json
import os
import re
import statistics
from dataclasses import dataclass, field
from typing import Any, ClassVar

import polars as pl

from ..errors import KernscopeError
from .stats import verdict

#: median SM clocks of one cell further apart than this share count as "the clock moved between the runs"
CLOCK_MOVED_PCT = 2.0


@dataclass
class Comparison:
    """One row per cell present in both runs, and what differs between the runs."""

    a: str  #: path of run A
    b: str  #: path of run B
    op: str
    #: impl, input (the parameters, as text), median_a_ms, median_b_ms, ratio (B/A), ratio_low, ratio_high, test,
    #: p_value, cliffs_delta, effect, verdict, sm_mhz_a, sm_mhz_b, clock_moved
    cells: pl.DataFrame
    notes: list[str] = field(default_factory=list)
    only_a: int = 0  #: cells only in A
    only_b: int = 0  #: cells only in B

    kind: ClassVar[str] = "bench_compare"

    @property
    def title(self) -> str:
        return f"{self.op}: B = {self.b} vs A = {self.a}"

    def facts_dict(self) -> dict[str, Any]:
        """``op``, ``a`` and ``b`` (the runs' paths), ``only_a`` and ``only_b`` (cells on one side only)."""
        return {"op": self.op, "a": self.a, "b": self.b, "only_a": self.only_a, "only_b": self.only_b}

    def tables(self) -> dict[str, pl.DataFrame]:
        """``cells``: one row per cell in both runs (ms; ratio B/A with its interval, test and verdict)."""
        return {"cells": self.cells}


@dataclass
class _Run:
    """One side of a comparison: its operator (None: unknown), cells by (impl, input text), environment."""

    op: str | None
    cells: dict[tuple[str, str], dict[str, Any]]
    env: dict[str, Any]
    kind: str  #: "kernscope" or "tritonbench"
    mode: str | None = None
    dtype: str | None = None


def _load_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise KernscopeError(f"{path}: no such file") from None
    except OSError as e:
        raise KernscopeError(f"{path}: cannot be read ({e.strerror or e})") from None


def _x_text(v: Any) -> str:
    """An input's parameters as one text: ``(4, 48, 128, 64)``; TritonBench writes them so in its files."""
    if isinstance(v, (list, tuple)):
        return "(" + ", ".join(str(x) for x in v) + ")"
    return str(v).strip()


def _tritonbench_csv(data: bytes, path: str) -> _Run:
    """TritonBench's ``--output FILE.csv``: ``;``-separated, header ``<x label>;<impl>-<metric>;…``, one row per
    input (latency: its p50 in ms), a last ``average`` row (skipped)."""
    import csv
    import io

    rows = list(csv.reader(io.StringIO(data.decode("utf-8", "replace")), delimiter=";"))
    if not rows or len(rows[0]) < 2 or not all("-" in h for h in rows[0][1:]):
        raise KernscopeError(f"{path}: not a TritonBench result CSV (expected '<inputs>;<impl>-<metric>;…')")
    head = rows[0]
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows[1:]:
        if not r or r[0].strip() in ("average", "hashes"):
            continue
        for h, v in zip(head[1:], r[1:]):
            impl_name, _, metric = h.partition("-")
            if metric == "latency":
                try:
                    ms = float(str(v).split()[0])
                except (ValueError, IndexError):
                    continue  # an error message in place of the number
                cells[(impl_name, _x_text(r[0]))] = {"samples": None, "median": ms, "sm": None}
    m = re.match(r"op_(.+?)_[^_]*\.csv$", os.path.basename(path))
    return _Run(m.group(1) if m else None, cells, {}, "tritonbench")


def _tritonbench_json(doc: dict[str, Any]) -> _Run:
    """TritonBench's ``--output-json``: ``{"tritonbench_<op>_<mode>[x_<input>-<impl>]_<metric>": value}``."""
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    ops = set()
    for k, v in doc.items():
        m = re.match(r"^tritonbench_(.+)\[x_(.*)-([^\]-]+)\]_(.+)$", k)
        if m is None or m.group(4) != "latency" or not isinstance(v, (int, float)):
            continue
        ops.add(m.group(1))
        cells[(m.group(3), _x_text(m.group(2)))] = {"samples": None, "median": float(v), "sm": None}
    op = None
    if len(ops) == 1:  # <op>_<mode>: the mode is the last part (fwd, bwd, fwd_bwd, fwd_no_grad)
        op = re.sub(r"_(fwd_bwd|fwd_no_grad|fwd|bwd)$", "", ops.pop())
    return _Run(op, cells, {}, "tritonbench")


def _read(path: str) -> _Run:
    """A kernscope ``--json`` result, or TritonBench's ``--output`` CSV / ``--output-json``."""
    data = _load_bytes(path)
    if path.endswith(".csv"):
        run = _tritonbench_csv(data, path)
    else:
        try:
            doc = json.loads(data)
        except ValueError as e:
            raise KernscopeError(f"{path}: not a kernscope bench result file ({e})") from None
        if isinstance(doc, dict) and doc and all(str(k).startswith("tritonbench_") for k in doc):
            run = _tritonbench_json(doc)
        elif isinstance(doc, dict) and isinstance(doc.get("results"), list) and "op" in doc:
            run = _Run(str(doc["op"]), _cells(doc), doc.get("env") or {}, "kernscope", doc.get("mode"), doc.get("dtype"))
        else:
            raise KernscopeError(f"{path}: not a kernscope bench result file (write one with kernscope bench --json "
                                 "FILE) nor TritonBench's --output CSV / --output-json")
    if not run.cells:
        raise KernscopeError(f"{path}: no timed cell (was it run with the latency metric?)")
    return run


def _cells(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for r in doc["results"]:
        t = r.get("timing") or {}
        samples = t.get("samples_ms") or []
        if r.get("error") or not samples:
            continue
        key = (str(r["impl"]), _x_text(r.get("x") or []))
        out[key] = {"samples": [float(x) for x in samples], "median": statistics.median(samples),
                    "sm": t.get("sm_mhz_median")}
    return out


def _match(ca: dict[tuple[str, str], Any], cb: dict[tuple[str, str], Any]) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """Pairs of cell keys: the same impl and input; failing that, inputs equal where one lists fewer parameters
    (TritonBench's attention input has no causal flag; kernscope's has)."""
    pairs = [(k, k) for k in ca if k in cb]
    if pairs:
        return pairs
    def params(x: str) -> list[str]:
        return [p.strip() for p in x.strip("()").split(",")]
    out = []
    for ka in ca:
        for kb in cb:
            pa, pb = params(ka[1]), params(kb[1])
            n = min(len(pa), len(pb))
            if ka[0] == kb[0] and n and pa[:n] == pb[:n]:
                out.append((ka, kb))
    return out


def _env_notes(ea: dict[str, Any], eb: dict[str, Any]) -> list[str]:
    notes = []
    for key, what in (("gpu", "GPU"), ("torch", "torch"), ("triton", "triton"), ("cuda", "CUDA"), ("driver", "driver")):
        if ea.get(key) != eb.get(key) and (ea.get(key) or eb.get(key)):
            notes.append(f"{what} differs: A {ea.get(key) or '-'}, B {eb.get(key) or '-'}")
    la, lb = (ea.get("clocks") or {}).get("locked"), (eb.get("clocks") or {}).get("locked")
    if la != lb:
        notes.append(f"SM clocks locked in {'A' if la else 'B'} only: timings of the other include boost changes")
    return notes


def compare_runs(path_a: str | os.PathLike[str], path_b: str | os.PathLike[str]) -> Comparison:
    """Compare two result files cell by cell (see the module doc): kernscope ``--json`` files, or TritonBench's
    ``--output`` CSV / ``--output-json`` on either side (they keep only each cell's median: the ratio is given,
    with no interval or test)."""
    pa, pb = str(path_a), str(path_b)
    ra, rb = _read(pa), _read(pb)
    if ra.op and rb.op and ra.op != rb.op:
        raise KernscopeError(f"{pb}: operator {rb.op} is not {pa}'s {ra.op}: compare runs of one operator")
    pairs = _match(ra.cells, rb.cells)
    rows = []
    for ka, kb in pairs:
        a, b = ra.cells[ka], rb.cells[kb]
        sa, sb = a["sm"], b["sm"]
        moved = bool(sa and sb and abs(sa - sb) / max(sa, sb) * 100 > CLOCK_MOVED_PCT)
        if a["samples"] and b["samples"]:
            v = verdict(a["samples"], b["samples"])
            ci: list[float] = v["ratio_ci"]  # type: ignore[assignment]
            stats = {"ratio": v["ratio"], "ratio_low": ci[0], "ratio_high": ci[1], "test": v["test"],
                     "p_value": v["p_value"], "cliffs_delta": v["cliffs_delta"], "effect": v["effect"],
                     "verdict": v["verdict"]}
        else:  # a TritonBench file: medians only
            ratio = b["median"] / a["median"] if a["median"] else float("nan")
            stats = {"ratio": ratio, "ratio_low": None, "ratio_high": None, "test": "none (medians only)",
                     "p_value": None, "cliffs_delta": None, "effect": None,
                     "verdict": "B faster (no test)" if ratio < 1 else "B slower (no test)" if ratio > 1 else "equal"}
        rows.append({"impl": ka[0], "input": ka[1] if len(ka[1]) >= len(kb[1]) else kb[1], "median_a_ms": a["median"],
                     "median_b_ms": b["median"], **stats, "sm_mhz_a": sa, "sm_mhz_b": sb, "clock_moved": moved})
    schema = {"impl": pl.String, "input": pl.String, "median_a_ms": pl.Float64, "median_b_ms": pl.Float64,
              "ratio": pl.Float64, "ratio_low": pl.Float64, "ratio_high": pl.Float64, "test": pl.String,
              "p_value": pl.Float64, "cliffs_delta": pl.Float64, "effect": pl.String, "verdict": pl.String,
              "sm_mhz_a": pl.Float64, "sm_mhz_b": pl.Float64, "clock_moved": pl.Boolean}
    cells = pl.DataFrame(rows, schema=schema)
    if cells.height == 0:
        raise KernscopeError(f"{pa} and {pb} share no (impl, input) cell (impl names must match: kernscope bench "
                             "accepts TritonBench's names with --only)")
    notes = _env_notes(ra.env, rb.env) if ra.kind == rb.kind == "kernscope" else []
    for side, r in (("A", ra), ("B", rb)):
        if r.kind == "tritonbench":
            notes.append(f"{side} is a TritonBench result file: each cell's median (p50) only, so the ratio has no "
                         "interval and no test; its GPU, clocks and versions are unknown")
    n_moved = int(cells["clock_moved"].sum())
    if n_moved:
        notes.append(f"{n_moved} cell(s) ran at a median SM clock more than {CLOCK_MOVED_PCT:g}% apart (⚠): their "
                     "difference may be the clock's, not the code's")
    if ra.kind == rb.kind == "kernscope" and (ra.dtype != rb.dtype or ra.mode != rb.mode):
        notes.append(f"dtype/mode differ: A {ra.dtype}/{ra.mode}, B {rb.dtype}/{rb.mode}")
    matched_a = {ka for ka, _ in pairs}
    matched_b = {kb for _, kb in pairs}
    return Comparison(pa, pb, str(ra.op or rb.op or "?"), cells, notes, len(set(ra.cells) - matched_a),
                      len(set(rb.cells) - matched_b))
