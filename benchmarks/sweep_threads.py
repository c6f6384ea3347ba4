"""Every real trace and profile here analyzed at several polars thread counts: the same bytes each time, for before
releases (``tests/test_threads.py`` runs a few of them in ``make test``).

    python benchmarks/sweep_threads.py [--threads 1 8] [--traces DIR] [--out docs/results/sweep_threads.json]

Each thread count runs in a fresh process (``POLARS_MAX_THREADS`` is read once, when polars starts its pool), which
runs ``analyze``, ``perf`` and ``memory`` (JSON) and a ``sql`` group-by (CSV) on every ``*.json.gz`` and
``*.xplane.pb*`` under ``../shared/traces`` and ``tests/data``, without the parse cache. Prints the outputs that
differ between the counts (none expected; an exit code counts as output), and how many commands answered and how
many refused in one line. Exit code 1 where any output differs.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUERY = "SELECT name, count(*) AS n, sum(dur) AS d FROM kernels GROUP BY name ORDER BY d DESC, name"


def _commands(path: str) -> list[list[str]]:
    return [["analyze", path, "--format", "json"], ["perf", path, "--format", "json"],
            ["memory", path, "--format", "json"], ["sql", QUERY, path, "--format", "csv"]]


def worker(paths: list[str], out: Path) -> None:
    """In this process (polars' thread count set by the caller): each command's exit code and output digest."""
    import polars as pl

    from kernscope.cli import main

    res: dict[str, object] = {"threads": pl.thread_pool_size()}
    with tempfile.TemporaryDirectory() as d:
        o = Path(d) / "out"
        for p in paths:
            for cmd in _commands(p):
                o.unlink(missing_ok=True)
                with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
                    try:
                        rc = main([*cmd, "--no-cache", "-o", str(o)])
                    except SystemExit as e:  # (click's own exits)
                        rc = e.code
                text = o.read_bytes() if o.exists() else b""
                res[f"{cmd[0]} {p}"] = [rc, hashlib.sha1(text).hexdigest()]
    out.write_text(json.dumps(res))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--traces", type=Path, default=Path(os.environ.get("KERNSCOPE_TRACES", ROOT.parent / "shared" / "traces")))
    ap.add_argument("--out", type=Path, help="write the per-count results (JSON) here")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(json.loads(Path(args.worker[0]).read_text()), Path(args.worker[1]))
        return 0
    found = [*args.traces.rglob("*.json.gz"), *args.traces.rglob("*.xplane.pb"),
             *(ROOT / "tests" / "data").rglob("*.json.gz"), *(ROOT / "tests" / "data").rglob("*.xplane.pb*")]
    paths = sorted(str(p) for p in found)
    runs: dict[int, dict] = {}
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "paths.json").write_text(json.dumps(paths))
        for n in args.threads:
            res = Path(d) / f"{n}.json"
            env = {**os.environ, "POLARS_MAX_THREADS": str(n)}
            subprocess.run([sys.executable, __file__, "--worker", str(Path(d) / "paths.json"), str(res)], env=env, check=True)
            runs[n] = json.loads(res.read_text())
            assert runs[n].pop("threads") == n, f"polars ran {n} threads?"
    first, *rest = args.threads
    differ = sorted({k for n in rest for k in runs[first] if runs[n].get(k) != runs[first][k]})
    codes = [v[0] for v in runs[first].values()]
    print(f"{len(paths)} traces and profiles, {len(codes)} commands at {', '.join(map(str, args.threads))} polars "
          f"threads: {codes.count(0)} answered, {len(codes) - codes.count(0)} refused (exit codes "
          f"{sorted(set(codes))}); {len(differ)} differ")
    for k in differ:
        print("  differs:", k, {n: runs[n].get(k) for n in args.threads})
    if args.out:
        args.out.write_text(json.dumps({"threads": args.threads, "traces": len(paths), "commands": len(codes),
                                        "answered": codes.count(0), "differ": differ}, indent=1) + "\n")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
