"""The compiled scanners built with two sets of compiler flags, side by side (#25: which flags the install uses).

    python benchmarks/bench_scanner_build.py TRACE [TRACE ...] [--a=-O2] [--b=-O3] [--rounds 3]

(flags that begin with a dash are given with "=": ``"--b=-O3 -funroll-loops"``)

Each side's library is compiled here from ``src/kernscope/load/*.c`` as ``pip install`` compiles it (the
interpreter's ``CFLAGS``, e.g. ``-DNDEBUG -g -fwrapv -O3 -Wall``, then the side's flags, which come last and win).
Then, per trace and round, a fresh process per side (the sides alternate) times the scanner's call alone, best of
seven passes, one thread:

- a Kineto JSON: ``ks_kineto_scan`` on the document's first 16 pieces (cut as a load cuts them, analyze's projection
  applied, each piece's names judged once before, as in a load's later pieces);
- an XSpace profile (``.xplane.pb``, ``.xplane.pb.gz``): the line scan of analyze's load (``xscan.scan_lines``, one worker).

It prints MB/s of the trace's text per side and B / A (a side whose process ran a library other than its own
build, e.g. the installed one, stops the script). What the rest of a load does with the scanner's outputs
(tables, the join) is not timed: ``load_phases.py`` and ``bench_load.py`` time the whole.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import shlex
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / "src" / "kernscope" / "load" / f for f in ("_xspace.c", "_kineto.c", "_sweep.c")]

#: run in a fresh process: ``argv``: library folder, trace; prints MB/s and the path of the library that ran
PROBE = r"""
import sys, time
lib_dir, path = sys.argv[1], sys.argv[2]
from kernscope.oneshot import tune_allocators
tune_allocators([path])
import importlib
import numpy as np
native = importlib.import_module("kernscope.load.native")
nativelib = importlib.import_module("kernscope.load.nativelib")
nativelib.__file__ = lib_dir + "/nativelib.py"  # (the library is looked for beside this file)
nativelib._library.cache_clear()
assert native.scanner() is not None, "the library did not load"
from kernscope.analyze.needs import analyze_projection
proj = analyze_projection(None)
if path.endswith((".pb", ".pb.gz")):
    from kernscope.pipeline import load
    xscan = importlib.import_module("kernscope.load.xscan")
    xplane = importlib.import_module("kernscope.load.xplane")
    seen = {}
    real = xscan.scan_lines
    def spy(*a, **k):
        seen["call"] = (a, k)
        return real(*a, **k)
    xplane.scan_lines = spy
    load(path, cache=False, projection=proj)
    a, k = seen["call"]
    k = dict(k, workers=1, progress=None)
    size = int(a[2].sum())
    def once():
        real(*a, **k)
else:
    from kernscope.load import fastscan
    from kernscope.load.document import Splitter, tail_candidates
    from kernscope.load.source import Limits, open_trace
    keep = proj.compiled()
    splitter, texts = Splitter(open_trace(path), Limits()), []
    for piece, _ in zip(splitter.pieces(), range(16)):
        text = bytes(piece.text)
        if piece.final:  # (the array's end and what follows it cut off, as a load cuts them)
            at = next(iter(tail_candidates(piece.text, splitter.doc.bare_array, path, None)))[0]
            text = text[:at].rstrip()
        if text.strip():
            texts.append(text)
    for t in texts:
        fastscan.scan(t, proj.args, proj, keep)  # the names judged, as in a load's later pieces
    drops, lay, lib = fastscan._Drops.of(proj, keep), fastscan._layout(proj.args), fastscan.scanner()
    bufs = [np.frombuffer(t, dtype=np.uint8) for t in texts]
    size = sum(len(t) for t in texts)
    caps = []  # (each piece's outputs sized as a load sizes them, or for any count where that is too few)
    for b in bufs:
        cap = int(b.size / fastscan.BYTES_PER_EVENT * 1.25) + 64
        caps.append(cap if fastscan._run(lib, b, lay, cap, drops=drops)[0] != fastscan.KS_ROWS else b.size // 2 + 2)
    def once():
        for b, cap in zip(bufs, caps):
            assert fastscan._run(lib, b, lay, cap, drops=drops)[0] >= 0, "the scanner declined a piece"
best = float("inf")
for _ in range(7):
    t0 = time.perf_counter()
    once()
    best = min(best, time.perf_counter() - t0)
print(size / best / 1e6, native.scanner()._name)  # (and the library that ran: this side's)
"""


def build(flags: str, into: Path) -> Path:
    """The library compiled with the interpreter's CFLAGS and then ``flags``, in ``into``."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    out = into / f"_xspace{suffix}"
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    cflags = shlex.split(sysconfig.get_config_var("CFLAGS") or "") + shlex.split(sysconfig.get_config_var("CCSHARED") or "-fPIC")
    p = subprocess.run([*cc, *cflags, *shlex.split(flags), "-shared", "-I", sysconfig.get_paths()["include"],
                        *map(str, SOURCES), "-o", str(out)], capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"the library did not build with {flags!r}: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--a", default="-O2", help="side A's flags (default -O2)")
    ap.add_argument("--b", default="-O3", help="side B's flags (default -O3)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sides = {}
        for label, flags in (("A", args.a), ("B", args.b)):
            d = Path(tmp) / label
            d.mkdir()
            build(flags, d)
            sides[label] = d
        print(f"A: {args.a}   B: {args.b}   (after the interpreter's CFLAGS: {sysconfig.get_config_var('CFLAGS')})")
        for trace in args.traces:
            got: dict[str, list[float]] = {"A": [], "B": []}
            for r in range(args.rounds):
                for label in (("A", "B") if r % 2 == 0 else ("B", "A")):
                    p = subprocess.run([sys.executable, "-c", PROBE, str(sides[label]), trace], capture_output=True, text=True)
                    if p.returncode:
                        sys.exit(f"{trace}: side {label} failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
                    rate, lib = p.stdout.split()[-2:]
                    if Path(lib).parent != sides[label]:  # (the installed library ran, not this side's)
                        sys.exit(f"{trace}: side {label} ran {lib}, not its own build")
                    got[label].append(float(rate))
            a, b = statistics.median(got["A"]), statistics.median(got["B"])
            print(f"{Path(trace).name:40s} A {a:7.0f} MB/s ({' '.join(f'{x:.0f}' for x in got['A'])})   "
                  f"B {b:7.0f} MB/s ({' '.join(f'{x:.0f}' for x in got['B'])})   B / A {b / a:.3f}")


if __name__ == "__main__":
    main()
