"""How the HTML report scales: file size, time to open, and redraw time in headless Chromium.

    python benchmarks/bench_html.py [--mb 300] [--trace TRACE]

Builds a synthetic trace of about --mb MB (or uses --trace), writes `kernscope report -o x.html`, opens it
in Debian's chromium (the same driver as the browser tests) and reports: kernels, HTML size, report time,
time until the page is ready, and the time of one timeline redraw at the full view and zoomed in 10x and
1000x, and of one table sort (median of 5 each, measured inside the page with performance.now()).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))  # the Chromium driver lives with the tests (not in the shipped package)

from browser import Browser, find_chromium  # noqa: E402

from kernscope.cli import main as ks  # noqa: E402
from kernscope.testing.synth import make_trace  # noqa: E402

TIMED = """(() => {{ const out = []; for (let i = 0; i < 5; i++) {{ const t = performance.now(); {body};
  out.push(performance.now() - t); }} out.sort((a, b) => a - b); return out[2]; }})()"""


def gpu_only(path: str, n: int) -> None:
    """A GPU-only trace: n kernels of 40 names on 4 streams, 2-30 µs each, back to back per stream."""
    names = [f"void kernel_{i}<float, {i % 7}>(float*, int)" for i in range(40)]
    t = [1_000_000.0] * 4
    with open(path, "w") as f:
        f.write('{"traceEvents": [\n')
        for i in range(n):
            s, dur = i % 4, 2 + (i * 7919) % 29
            f.write(f'{{"ph": "X", "cat": "kernel", "name": "{names[(i * 31) % 40]}", "pid": 0, "tid": {7 + s}, '
                    f'"ts": {t[s]:.3f}, "dur": {dur}.000, "args": {{"device": 0, "stream": {7 + s}, '
                    f'"correlation": {i + 1}}}}},\n')
            t[s] += dur + 0.5
        f.write('{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}}]}\n')


def intra_page(tmp: Path, n: int) -> int:
    """The intra-kernel timeline of ``n`` tasks: n/16 blocks x 16 tasks (3 kinds) on 132 SMs, from the CPU model."""
    import numpy as np

    from kernscope.intra.simulate import Region, empty_buffer, fill_buffer

    blocks = max(1, n // 16)
    regions = []
    for b in range(blocks):
        t = 1000 + (b // 132) * 4000
        recs = []
        for k in range(16):
            recs += [(t + 200 * k, True, k % 3), (t + 200 * k + 150, False, k % 3)]
        regions.append(Region(recs, t0=0, sm=b % 132))
    buf = fill_buffer(empty_buffer(blocks * 32 + 64), regions)
    np.savez(tmp / "b.npz", buffer=buf, task_names=np.array(["load", "mma", "store"]))
    html = tmp / "intra.html"
    t = time.perf_counter()
    assert ks(["intra", "stats", str(tmp / "b.npz"), "--html", str(html)]) == 0
    t_html = time.perf_counter() - t
    with Browser(width=1400, height=900) as b:
        t = time.perf_counter()
        b.open(html.as_uri(), timeout=600)
        t_open = time.perf_counter() - t
        slices = b.eval("kernscope.timeline.start.length")
        full = b.eval(TIMED.format(body="kernscope.timeline.draw()"))
        b.eval("kernscope.timeline.zoom(0.01, 0.5)")
        z100 = b.eval(TIMED.format(body="kernscope.timeline.draw()"))
        errors = b.errors()
    print(f"intra page: {slices:,} slices, {blocks:,} blocks; console errors: {len(errors)}", file=sys.stderr)
    print(f"  stats + --html        {t_html:6.2f} s   HTML {html.stat().st_size / 1e6:.1f} MB")
    print(f"  open until ready      {t_open:6.2f} s")
    print(f"  redraw, full view     {full:6.1f} ms")
    print(f"  redraw, zoom 100x     {z100:6.1f} ms")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=300)
    ap.add_argument("--trace")
    ap.add_argument("--kernels", type=int, help="instead: a GPU-only trace of this many kernels on 4 streams")
    ap.add_argument("--intra-tasks", type=int,
                    help="instead: the intra-kernel page (intra stats --html) of a buffer with this many tasks")
    args = ap.parse_args()
    if find_chromium() is None:
        print("no chromium: apt-get install chromium", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        if args.intra_tasks:
            return intra_page(Path(tmp), args.intra_tasks)
        trace = args.trace
        if trace is None and args.kernels:
            trace = os.path.join(tmp, "kernels.json")
            gpu_only(trace, args.kernels)
        elif trace is None:
            trace = os.path.join(tmp, "synth.json")
            make_trace(trace, int(args.mb * 1e6))
        html = Path(tmp) / "report.html"
        t = time.perf_counter()
        assert ks(["report", trace, "-o", str(html), "--no-cache", "--quiet"]) == 0
        t_report = time.perf_counter() - t
        with Browser(width=1400, height=900) as b:
            t = time.perf_counter()
            b.open(html.as_uri(), timeout=600)
            t_open = time.perf_counter() - t
            errors = b.errors()
            kernels = b.eval("kernscope.timeline.start.length")
            full = b.eval(TIMED.format(body="kernscope.timeline.draw()"))
            drawn_full = b.eval("kernscope.timeline.drawn")
            b.eval("kernscope.timeline.zoom(0.1, 0.5)")
            z10 = b.eval(TIMED.format(body="kernscope.timeline.draw()"))
            b.eval("kernscope.timeline.zoom(0.01, 0.5)")
            z1000 = b.eval(TIMED.format(body="kernscope.timeline.draw()"))
            drawn_zoom = b.eval("kernscope.timeline.drawn")
            sort = b.eval(TIMED.format(body="document.querySelector('table[data-table=kernels] th:nth-child(6)').click()"))
        print(f"trace {os.path.getsize(trace) / 1e6:.0f} MB, {kernels:,} GPU events on the timeline; console errors: {len(errors)}")
        print(f"  report -o html       {t_report:6.2f} s   HTML {html.stat().st_size / 1e6:.1f} MB")
        print(f"  open until ready     {t_open:6.2f} s")
        print(f"  redraw, full view    {full:6.1f} ms  ({drawn_full:,} rectangles drawn)")
        print(f"  redraw, zoom 10x     {z10:6.1f} ms")
        print(f"  redraw, zoom 1000x   {z1000:6.1f} ms  ({drawn_zoom:,} rectangles drawn)")
        print(f"  table sort           {sort:6.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
