from __future__ import annotations

import gzip
import io
import json
import os
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# the terminal tables' width the tests read them at (`make test` sets it too): a plain `pytest` in a pipe would
# otherwise render them at rich's 80 columns, where two tests that read table rows see them wrapped
os.environ.setdefault("COLUMNS", "150")
TRACES = Path(os.environ.get("KERNSCOPE_TRACES", ROOT.parent / "shared" / "traces"))


def real_traces() -> list[Path]:
    if not TRACES.is_dir():
        return []
    return sorted(TRACES.rglob("*.json.gz"))


def trace_id(p: Path) -> str:
    return p.name.replace(".json.gz", "")[:40]


needs_traces = pytest.mark.skipif(not real_traces(), reason="../shared/traces not present")


def raw_events(path: Path) -> list[dict]:
    """The events of a trace as the standard library reads them (exact decimals). The collector is paused while the
    objects are made: with it on, its passes over the growing heap took two thirds of the time (the 36 real traces:
    16.4 s -> 5.2 s)."""
    from kernscope.pipeline import _gc_paused

    data = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
    with _gc_paused():
        return json.loads(data, parse_float=Decimal)["traceEvents"]


def us_to_ns(v) -> int:
    return int((Decimal(str(v)) * 1000).to_integral_value(rounding="ROUND_HALF_UP"))


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Each test gets its own cache directory (entries are content-addressed: tests must not share them)."""
    monkeypatch.setenv("KERNSCOPE_CACHE_DIR", str(tmp_path_factory.mktemp("kcache")))


@dataclass(frozen=True)
class Ran:
    """A CLI command's exit code and output, as a subprocess's ``CompletedProcess`` has them."""

    returncode: int
    stdout: str
    stderr: str


def cli(*args: str, cwd: Path | None = None) -> Ran:
    """``kernscope ARGS`` run in this process (no interpreter start and import per call, ~1 s each on a slow 2-core
    machine): exit code, stdout and stderr as a user sees them (no terminal: no progress bar)."""
    from kernscope.cli import main

    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with redirect_stdout(out), redirect_stderr(err):
            rc = main(list(args))
    finally:
        os.chdir(here)
    return Ran(rc, out.getvalue(), err.getvalue())


def write_trace(path: Path, events: list[dict], **meta) -> Path:
    doc = {"schemaVersion": 1, **meta, "traceEvents": events}
    text = json.dumps(doc)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def scanned_once(kept: dict, path: Path, monkeypatch, read):
    """``read(path)`` with the compiled scanner on (``KERNSCOPE_NO_NATIVE=0``), once a trace for a test that runs with
    the fallback readers first, then with the scanner: the fallback readers' run keeps its result in ``kept`` for the
    scanner's run, which takes it (test_fastscan checks both readers give the same tables on every real trace). Where
    ``make test``'s workers split the two runs (``--dist worksteal``), the scanner's run reads the trace itself."""
    if str(path) in kept:
        return kept.pop(str(path))
    reader = os.environ.get("KERNSCOPE_NO_NATIVE")
    monkeypatch.setenv("KERNSCOPE_NO_NATIVE", "0")
    try:
        out = read(path)
    finally:
        monkeypatch.setenv("KERNSCOPE_NO_NATIVE", reader or "0")
    if reader == "1":  # the scanner's run of this trace comes next
        kept[str(path)] = out
    return out


#: under make test and CI (KERNSCOPE_REQUIRE_TRACES=1) the real-trace tests must run: a skip for want of the traces
#: fails instead (every such skip names ../shared/traces in its reason)
REQUIRE_TRACES = os.environ.get("KERNSCOPE_REQUIRE_TRACES") == "1"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if REQUIRE_TRACES and rep.skipped and "shared/traces" in str(rep.longrepr):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        rep.outcome = "failed"
        rep.longrepr = (f"the real traces are required here (KERNSCOPE_REQUIRE_TRACES=1, as make test and CI set it) but "
                        f"{reason.removeprefix('Skipped: ')}: put them at {TRACES} or set KERNSCOPE_TRACES")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Say how many tests skipped for want of the real traces (they check counts and times against them)."""
    skipped = terminalreporter.stats.get("skipped", [])
    missing = [r for r in skipped if "shared/traces" in str(getattr(r, "longrepr", "")) or "multirank" in str(getattr(r, "longrepr", ""))]
    if missing:
        terminalreporter.write_line(
            f"kernscope: {len(missing)} tests skipped because the real traces are not at {TRACES} "
            f"(set KERNSCOPE_TRACES to their folder to run them)", yellow=True)


def pytest_configure(config):
    """Each pytest-xdist worker on cores of its own (``make test``: two workers, one core each on a 2-core machine; on
    more cores, each worker every n-th of them), unless ``KERNSCOPE_PIN_WORKERS=0``. Unpinned, each worker's parses,
    scans and analyses sized their threads for every core while the other worker ran on them too: 370 s of pytest
    (586 s of user CPU, 100 s of system time) against 304 s pinned (531 s, 62 s), and 294 s (512 s, 60 s) once
    kernscope sized its pools by the affinity mask (:func:`kernscope.cores.usable_cores`; session 91). A pinned worker
    runs as a user's process confined to one core would."""
    wid, count = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not wid or not count or os.environ.get("KERNSCOPE_PIN_WORKERS") == "0" or not hasattr(os, "sched_setaffinity"):
        return
    cpus, n = sorted(os.sched_getaffinity(0)), int(count)
    if len(cpus) >= n:  # (more workers than cores: the OS spreads them)
        os.sched_setaffinity(0, set(cpus[int(wid.removeprefix("gw")) % n::n]))
