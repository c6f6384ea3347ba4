import subprocess, sys, time, os
cmd = sys.argv[1:]
p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
tick = os.sysconf("SC_CLK_TCK")
samples = []
t0 = time.perf_counter()
while p.poll() is None:
    try:
        with open(f"/proc/{p.pid}/stat") as f: s = f.read().split()
        samples.append((time.perf_counter() - t0, (int(s[13]) + int(s[14])) / tick))
    except Exception: pass
    time.sleep(0.02)
err = p.stderr.read().decode()
# utilization per 100 ms bucket
import collections
prev = (0.0, 0.0)
buckets = collections.defaultdict(float)
for t, c in samples:
    buckets[int(t * 10)] += c - prev[1]; prev = (t, c)
print(" ".join(f"{k/10:.1f}:{v/0.1:.1f}" for k, v in sorted(buckets.items())))
print(err[-800:])
