"""Screenshots of kernscope's HTML pages for the docs, taken in headless Chromium (Debian's `chromium`).

    python examples/screenshot_reports.py [OUT_DIR=docs/images]

Writes ``report.png`` (the report of the bundled H200 training-step trace), ``report_zoomed.png`` (its
timeline zoomed into one step), ``jax_report.png`` and ``jax_report_zoomed.png`` (the report of a real JAX
transformer profile recorded on an H100, ``tests/data/jax/transformer``) and ``intra.png`` (the intra-kernel
timeline of a real Proton trace recorded on an H100, ``tests/data/proton_h100``) and ``job.png`` (the job
page of the real 4-rank DDP trace in ``../shared/traces/multirank``, when present).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))  # the Chromium driver lives with the tests (not shipped)

from browser import Browser, find_chromium  # noqa: E402

from kernscope.cli import main as ks  # noqa: E402

EXAMPLE = ROOT / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
DDP = ROOT.parent / "shared" / "traces" / "multirank"
PROTON = ROOT / "tests" / "data" / "proton_h100" / "proton_trace.chrome_trace"
JAX = ROOT / "tests" / "data" / "jax" / "transformer" / "vm.xplane.pb.gz"


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "images"
    out.mkdir(parents=True, exist_ok=True)
    if find_chromium() is None:
        print("no chromium: apt-get install chromium", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        report, intra = Path(tmp) / "report.html", Path(tmp) / "intra.html"
        assert ks(["report", str(EXAMPLE), "-o", str(report), "--quiet"]) == 0
        assert ks(["intra", "stats", str(PROTON), "--html", str(intra)]) == 0
        with Browser(width=1400, height=900) as b:
            b.open(report.as_uri())
            if b.errors():
                print("console errors:", b.errors(), file=sys.stderr)
                return 1
            b.screenshot(out / "report.png", full_page=True, max_height=2600)  # facts to the first tables
            b.eval("kernscope.timeline.zoom(0.25, 0.3)")  # a quarter of the range around 30% of the trace
            b.eval("window.scrollTo(0, 0)")
            b.screenshot(out / "report_zoomed.png", full_page=False)
            jax = Path(tmp) / "jax.html"
            assert ks(["report", str(JAX), "-o", str(jax), "--quiet"]) == 0
            b.open(jax.as_uri())
            if b.errors():
                print("console errors:", b.errors(), file=sys.stderr)
                return 1
            b.screenshot(out / "jax_report.png", full_page=True, max_height=2600)
            b.eval("kernscope.timeline.zoom(0.3, 0.2)")  # about one training step
            b.eval("window.scrollTo(0, 0)")
            b.screenshot(out / "jax_report_zoomed.png", full_page=False)
            b.open(intra.as_uri())
            b.screenshot(out / "intra.png", full_page=True)
            ddp = sorted(str(p) for p in DDP.glob("ddp4_rank*.json.gz"))
            if ddp:  # the real 4-rank job, when ../shared/traces is there
                job = Path(tmp) / "job.html"
                assert ks(["report", *ddp, "-o", str(job), "--quiet"]) == 0
                b.open(job.as_uri())
                b.screenshot(out / "job.png", full_page=False)
    for p in sorted(out.glob("*.png")):
        print(f"{p} {p.stat().st_size / 1024:.0f} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
