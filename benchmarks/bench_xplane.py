"""JAX profile (XSpace) benchmark: kernscope against xprof's own converter, on a real profile as recorded or replicated to size.

    python benchmarks/bench_xplane.py --trace vm.xplane.pb [--repeat 3] [--out results.json]
    python benchmarks/bench_xplane.py --size-mb 200 [--from tests/data/jax/transformer/vm.xplane.pb.gz]
        [--xprof-python /path/to/venv/bin/python] [--repeat 3] [--out results.json]

``--extend`` grows ``--from`` as a longer recording of the same loop would be (``kernscope.testing.xspace.extend_xspace``:
each line's events repeated after themselves, correlation ids and step numbers continued), which the windowed
analysis can read (the replica's repeated step numbers make it read whole); a real recording is still the better
measure. ``--trace`` measures a profile as it is: a real recording of the size wanted is the measure to trust
(``examples/record_jax_profiles.py OUT --which long --long-steps 3300 --no-perfetto --no-reference`` records a
207 MB one on one GPU, ``--long-steps 15500 --max-gpu-events 16000000`` a 975 MB one). Without it the benchmark
replicates ``--from`` to ``--size-mb``: every line repeated ``k`` times, each copy shifted in time by the profile's span
and given a new line id (the event bytes are the real ones). That replica flatters the decoder, and its numbers are
kept only to compare with earlier sessions: a real long profile keeps a GPU stream's events in one line (91% of the
bytes of the 975 MB recording, where the replica has 1,058 small lines at 200 MB), and ~13 plane stats per step that
the replica does not repeat (session 30 found both: a scan of whole lines on one core, and a plane-stat read
quadratic in the profile's length, 64 s at 975 MB). Its correlation ids repeat across copies (each copy's kernels link
to the first copy's launches) and its step windows merge (3 steps of 63 s at 200 MB, where the recording has 3,300
of ~5 ms).

Contenders, each in a fresh process on the same file, in turn ``--repeat`` times (median reported):
``kernscope_cold`` (``kernscope analyze FILE --format json`` with an empty cache: decode, link, the analysis, and
the parse cache written, as ``bench_load.py``'s cold run; a plain profile of 128 MB or more is read a time window at
a time), with ``--windows 0,4,8`` the same cold command with ``--windows N`` (``kernscope_whole``: 0, read whole;
``kernscope_wN``; each output compared with the whole one's), ``kernscope_cached`` (the same command again, on that
cache), ``kernscope_decode`` (``kernscope.load.parse`` only), ``kernscope_load`` (decode + link:
``kernscope.pipeline.load(path, cache=False)``; it also reports its own decode + link time, without the interpreter's
start and the imports, as ``inproc_*``), with ``--base-src DIR`` the same decode, load and cold analyze of another
source tree (``base_decode``, ``base_load``, ``base_cold``: an earlier commit, for a before/after in one run; its
compiled library must be built in that tree), and with ``--xprof-python`` (a Python
with ``pip install xprof``): ``xprof_trace_viewer`` (xprof's XSpace -> trace JSON, what JAX runs for
``create_perfetto_trace``) and ``xprof_op_stats`` (xprof's ``framework_op_stats`` tool).
"""

from __future__ import annotations

import argparse
import compileall
import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kernscope.testing.xspace import extend_xspace as extend  # noqa: E402
from kernscope.testing.xspace import replicate_xspace as replicate  # noqa: E402


def timed(cmd: list[str], env: dict[str, str] | None = None) -> dict:
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t0
    out = p.stdout.read().decode() if p.stdout else ""
    err = p.stderr.read().decode() if p.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        return {"error": (err.strip().splitlines() or ["failed"])[-1][:300]}
    return {"seconds": dt, "rss": ru.ru_maxrss * 1024, "stdout": out[-500:]}


#: decode + link in a fresh process; it also prints the load's own decode + link time (its ``timings``: without the
#: interpreter's start and the imports) as ``inproc=SECONDS``
_LOAD = ("{boot}import kernscope\nfrom kernscope.pipeline import load\ntm = []\nt = load({path!r}, cache=False, timings=tm)\n"
         "print(t.gpu.height)\nprint('inproc=%.4f' % sum(s for p, s in tm if p.startswith(('parse', 'link'))))")


def _read_through(path: str) -> None:
    """Read the file through (untimed), as ``bench_load.py`` does before each contender."""
    with open(path, "rb", buffering=0) as f:
        while f.read(1 << 24):
            pass


def contenders(path: str, tmp: str, xprof_python: str | None, base_src: str | None = None,
               windows: list[int] | None = None) -> dict[str, list[str]]:
    out = os.path.join(tmp, "a.json")
    analyze = [sys.executable, "-m", "kernscope", "analyze", path, "--format", "json"]
    c = {
        "kernscope_cold": [*analyze, "-o", out],
        "kernscope_cached": [*analyze, "-o", out],
        "kernscope_decode": [sys.executable, "-c", f"from kernscope.load import parse; r = parse({path!r}); print(r.events.height)"],
        "kernscope_load": [sys.executable, "-c", _LOAD.format(boot="", path=path)],
    }
    for n in windows or []:  # the same cold command read whole (0) or n time windows at a time, each its own output
        c["kernscope_whole" if n == 0 else f"kernscope_w{n}"] = [*analyze, "--windows", str(n), "-o",
                                                                 os.path.join(tmp, f"w{n}.json")]
    if base_src:  # another kernscope source tree (an earlier commit's src/), the same decode + link, in the same run
        boot = f"import sys; sys.path.insert(0, {base_src!r}); "
        c["base_decode"] = [sys.executable, "-c", boot + f"from kernscope.load import parse; r = parse({path!r}); print(r.events.height)"]
        c["base_load"] = [sys.executable, "-c", _LOAD.format(boot=boot, path=path)]
        # and its cold `analyze` with its own defaults (a windowed one where that tree reads the profile by windows)
        c["base_cold"] = [sys.executable, "-c", boot + "import runpy; sys.argv = ['kernscope', 'analyze', "
                          f"{path!r}, '--format', 'json', '-o', {os.path.join(tmp, 'base.json')!r}]; "
                          "runpy.run_module('kernscope', run_name='__main__')"]
    if xprof_python:
        for name, tool in (("xprof_trace_viewer", "trace_viewer"), ("xprof_op_stats", "framework_op_stats")):
            c[name] = [xprof_python, "-c", "import logging, os; os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'\n"
                       "from xprof.convert import raw_to_tool_data as r\n"
                       f"d, _ = r.xspace_to_tool_data([{path!r}], {tool!r}, {{'use_saved_result': False}})\nprint(len(d or b''))"]
    return c


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", help="measure this profile as it is (no replica)")
    ap.add_argument("--from", dest="src", default=str(ROOT / "tests" / "data" / "jax" / "transformer" / "vm.xplane.pb.gz"))
    ap.add_argument("--size-mb", type=float, default=200)
    ap.add_argument("--extend", action="store_true",
                    help="grow --from by running it longer (extend_xspace: its lines' events repeated after themselves, "
                         "ids and step numbers continued) rather than by copies of its lines")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--xprof-python")
    ap.add_argument("--out")
    ap.add_argument("--base-src", help="an earlier kernscope src/ folder: its decode, load and cold analyze run in the same rounds")
    ap.add_argument("--windows", default="",
                    help="comma-separated window counts (0: whole) of `analyze --windows N`, each a cold contender")
    ap.add_argument("--only", default="", help="comma-separated contenders to run (default: all)")
    a = ap.parse_args()
    # kernscope as installed: its modules compiled to bytecode, as pip does at install time. A checkout run with
    # PYTHONDONTWRITEBYTECODE=1 would otherwise compile its changed modules (the base tree: every module) each run
    import kernscope

    for tree in {Path(kernscope.__file__).parent, *([Path(a.base_src) / "kernscope"] if a.base_src else [])}:
        compileall.compile_dir(str(tree), quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        if a.trace:
            path, copies, source = a.trace, 0, a.trace
            size = os.path.getsize(path)
            print(f"profile: {path} = {size / 1e6:.1f} MB", flush=True)
        else:
            raw = Path(a.src).read_bytes()
            raw = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
            grow = extend if a.extend else replicate
            one, two = len(grow(raw, 1)), len(grow(raw, 2))  # the metadata (HLO programs) is not repeated
            copies = max(1, round((a.size_mb * 1e6 - one) / (two - one)) + 1)
            path, source = os.path.join(tmp, "replica.xplane.pb"), a.src
            t = time.perf_counter()
            Path(path).write_bytes(grow(raw, copies))
            size = os.path.getsize(path)
            print(f"replica: {copies} copies of {a.src} = {size / 1e6:.1f} MB ({time.perf_counter() - t:.1f} s to build)", flush=True)
        runs: dict[str, list[dict]] = {}
        cmds = contenders(path, tmp, a.xprof_python, a.base_src, [int(n) for n in a.windows.split(",") if n.strip()])
        if a.only:
            cmds = {k: v for k, v in cmds.items() if k in a.only.split(",")}
        for i in range(a.repeat):
            cache = tempfile.mkdtemp(dir=tmp)  # empty for the cold run, then the cached run's
            for name, cmd in cmds.items():
                env = dict(os.environ, KERNSCOPE_CACHE_DIR=cache) if name in ("kernscope_cold", "kernscope_cached") else None
                if name in ("kernscope_whole", "base_cold") or name.startswith("kernscope_w"):  # (cold: a cache of its own)
                    env = dict(os.environ, KERNSCOPE_CACHE_DIR=tempfile.mkdtemp(dir=tmp))
                _read_through(path)  # every contender finds the file in the page cache
                r = timed(cmd, env)
                runs.setdefault(name, []).append(r)
                inproc = [x[7:] for x in r.get("stdout", "").splitlines() if x.startswith("inproc=")]
                print(f"  round {i + 1} {name}: " + (r["error"] if "error" in r else f"{r['seconds']:.2f} s, {r['rss'] / 1e6:.0f} MB"
                                                     + (f" (decode + link in process {float(inproc[0]):.2f} s)" if inproc else "")),
                      flush=True)
        # the windowed outputs against the whole profile's (the same bytes: the windows' merge is exact)
        whole_json = Path(tmp, "w0.json").read_bytes() if Path(tmp, "w0.json").exists() else None
        same = {f"w{n}": Path(tmp, f"w{n}.json").read_bytes() == whole_json for n in
                (int(x) for x in a.windows.split(",") if x.strip()) if n and whole_json is not None}
        if whole_json is not None and Path(tmp, "a.json").exists():  # (the default: windowed from 128 MB)
            same["default"] = Path(tmp, "a.json").read_bytes() == whole_json
        if whole_json is not None and Path(tmp, "base.json").exists():  # (the base tree's cold analyze)
            same["base"] = Path(tmp, "base.json").read_bytes() == whole_json
    summary = {}
    for name, rs in runs.items():
        ok = [r for r in rs if "error" in r] == []
        if not ok:
            summary[name] = {"error": next(r["error"] for r in rs if "error" in r)}
            continue
        secs = [r["seconds"] for r in rs]
        med = statistics.median(secs)
        summary[name] = {"median_s": round(med, 3), "min_s": round(min(secs), 3), "max_s": round(max(secs), 3),
                         "mb_per_s": round(size / 1e6 / med, 1), "peak_rss_x": round(max(r["rss"] for r in rs) / size, 2),
                         "peak_rss_mib": [round(min(r["rss"] for r in rs) / 2**20), round(max(r["rss"] for r in rs) / 2**20)]}
        inproc = [float(line[7:]) for r in rs for line in r.get("stdout", "").splitlines() if line.startswith("inproc=")]
        if len(inproc) == len(rs):  # the load's own decode + link, without the interpreter's start and imports
            summary[name].update(inproc_median_s=round(statistics.median(inproc), 3), inproc_min_s=round(min(inproc), 3),
                                 inproc_max_s=round(max(inproc), 3),
                                 inproc_mb_per_s=round(size / 1e6 / statistics.median(inproc), 1))
    base = summary.get("kernscope_cold", {}).get("median_s")
    for s in summary.values():
        if base and "median_s" in s:
            s["vs_kernscope_cold"] = round(s["median_s"] / base, 2)
    cold, cached = summary.get("kernscope_cold", {}).get("median_s"), summary.get("kernscope_cached", {}).get("median_s")
    ratios = {"cold / cached": round(cold / cached, 1)} if cold and cached else {}
    xprof = summary.get("xprof_trace_viewer", {}).get("median_s")
    if cold and xprof:
        ratios["xprof trace_viewer / kernscope cold"] = round(xprof / cold, 1)
    result = {"file_mb": round(size / 1e6, 1), "source": source, "copies": copies, "ratios": ratios,
              "windowed_output_equals_whole": same, "machine": platform.platform(),
              "cpus": os.cpu_count(), "cpus_usable": len(os.sched_getaffinity(0)), "base_src": a.base_src, "summary": summary}
    print(json.dumps(result, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
