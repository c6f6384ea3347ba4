# session 69: other steps work in step spans (timeline by step, job rank steps); before = session 68 main (worktree), after, interleaved
# usage: python s69_analysis.py BEFORE_SRC AFTER_SRC ROUNDS TRACE...
import os, subprocess, sys, time

before, after, rounds, traces = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
for trace in traces:
    for r in range(rounds):
        for name, src in (("before", before), ("after", after)):
            env = dict(os.environ, PYTHONPATH=src)
            t0 = time.perf_counter()
            p = subprocess.run(["/usr/bin/time", "-f", "%M", sys.executable, "-m", "kernscope", "analyze", "--no-cache", trace,
                                "--format", "json", "-o", f"/tmp/s69_{name}.json"], env=env, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            peak = int(p.stderr.strip().splitlines()[-1]) / 1024
            print(f"{os.path.basename(trace)} round {r} {name}: rc {p.returncode} wall {wall:.2f} s peak {peak:.0f} MiB", flush=True)
