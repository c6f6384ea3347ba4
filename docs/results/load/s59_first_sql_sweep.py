import sys, glob, os, traceback
import kernscope
from kernscope.analyze import sql as S
from kernscope.analyze.needs import analyze_projection
from kernscope.pipeline import Held, stored_tables, projection_unread
from kernscope.model import Lazy
narrow = analyze_projection(None)
queries = ["SELECT name, count(*) AS n, sum(dur) AS t FROM kernels GROUP BY name ORDER BY t DESC, name",
           "SELECT step, device, stream, count(*) AS n, sum(dur) AS t, min(ts) AS a, max(\"end\") AS b FROM gpu GROUP BY step, device, stream ORDER BY step, device, stream",
           "SELECT launcher, op_name, launch_name, count(*) AS n, sum(launch_dur) AS d FROM gpu GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
           "SELECT * EXCLUDE (x) FROM (SELECT step, name, start, \"end\", 1 AS x FROM steps) ORDER BY step",
           "SELECT name, tid, count(*) AS n, sum(dur) AS t, min(idx) AS i, max(ts) AS l FROM cpu_ops GROUP BY 1, 2 ORDER BY 1, 2",
           "SELECT name, count(*) AS n, sum(dur) AS t, min(idx) AS i, max(correlation) AS c FROM launches GROUP BY 1 ORDER BY 1",
           "SELECT hlo_module, hlo_op, hlo_instruction, hlo_desc, hlo_source, count(*) AS n, sum(dur) AS t FROM gpu GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5"]
paths = sorted(set(glob.glob("/work/shared/traces/**/*.json*", recursive=True) + glob.glob("/work/shared/traces/**/*.pb*", recursive=True)
                   + glob.glob("tests/data/**/*.json*", recursive=True) + glob.glob("tests/data/**/*.pb*", recursive=True)))
ok = bad = skipped = 0
for p in paths:
    if os.path.getsize(p) > 60e6 or "reference" in p or p.endswith((".csv", ".md")):
        skipped += 1; print("skipped (size or not a trace):", p); continue
    try:
        whole = kernscope.load(p, cache=False)
    except Exception as e:
        skipped += 1; print("skipped (does not load:", type(e).__name__ + "):", p); continue
    try:
        t = kernscope.load(p, cache=False, projection=narrow)
        calls = []
        def w():
            calls.append(1); return whole
        tables = stored_tables(Held(t), narrow, w)
        for q in (queries if "hlo_module" in whole.gpu.columns else [q for q in queries if "hlo_module" not in q]):  # (hlo_*: a JAX profile's columns)
            got = S.stored_sql(tables, w, q)
            want = S.sql(whole, q)
            if not got.equals(want):
                bad += 1; print("DIFF", p, q[:40]); break
        else:
            ok += 1
            print("same:", p)
            if calls: print("whole read for", p)
    except Exception as e:
        bad += 1; print("ERR", p, type(e).__name__, str(e)[:200])
print(f"ok {ok} bad {bad} skipped {skipped}")
