"""Where only a whole load's entry is stored, a projected load reads it: the analysis, perf model and memory timeline
of that load against those of the projected parse (no cache), on every real trace and test profile here."""
import sys, glob, os, tempfile
os.environ["KERNSCOPE_CACHE_DIR"] = tempfile.mkdtemp()
import warnings; warnings.simplefilter("ignore")
import kernscope
from kernscope import pipeline
from kernscope.analyze.summary import analyze
from kernscope.analyze.needs import analyze_projection, perf_projection, memory_projection
from kernscope.analyze.perf import perf_model
from kernscope.analyze.memory import memory_timeline
paths = sorted(set(glob.glob("/work/shared/traces/**/*.json*", recursive=True) + glob.glob("/work/shared/traces/**/*.pb*", recursive=True)
                   + glob.glob("tests/data/**/*.json*", recursive=True) + glob.glob("tests/data/**/*.pb*", recursive=True)))
from polars.testing import assert_frame_equal


def same_table(x, y):
    """Equal, but for the order of rows that tie and float sums' last bits (launcher_categories' percentages are summed
    in parallel: the same trace analyzed twice differs at 1e-14; the printed outputs are byte-identical)."""
    try:
        assert_frame_equal(x, y, check_row_order=False, check_exact=False, rel_tol=1e-12, abs_tol=1e-9)
        return True
    except AssertionError:
        return False


def tables_of(kind, t):
    if kind == "analyze": return analyze(t).tables()
    if kind == "perf":
        pm = perf_model(t); return {"ops": pm.ops, "missing": pm.missing, "classes": pm.classes}
    m = memory_timeline(t)
    return {} if m is None else {"devices": m.devices, "steps": m.steps, "ops": m.ops, "events": m.events}
ok = bad = skipped = served = 0
for p in paths:
    if os.path.getsize(p) > 60e6 or "reference" in p:
        skipped += 1; continue
    try:
        pipeline.load(p)  # the whole load's entry
    except Exception as e:
        skipped += 1; continue
    try:
        same = True
        for kind, proj in (("analyze", analyze_projection(None)), ("perf", perf_projection(None)), ("memory", memory_projection())):
            read = pipeline.load(p, projection=proj)
            served += read.from_cache
            parsed = pipeline.load(p, cache=False, projection=proj)
            a, b = tables_of(kind, read), tables_of(kind, parsed)
            if a.keys() != b.keys() or not all(same_table(a[k], b[k]) for k in a):
                same = False; print("DIFF", kind, p, [k for k in a if k in b and not same_table(a[k], b[k])])
        if same:
            ok += 1; print("same:", p)
        else:
            bad += 1
    except Exception as e:
        bad += 1; print("ERR", p, type(e).__name__, str(e)[:200])
print(f"ok {ok} bad {bad} skipped {skipped}; loads read from the whole entry {served} of {3 * (ok + bad)}")
