import sys, threading, time, numpy as np
mode = sys.argv[1]
a = np.random.default_rng(0).integers(0, 1<<60, 6_000_000)
t0 = time.perf_counter()
done = {}
def imp():
    import polars
    done["imp"] = time.perf_counter() - t0
def work():
    b = a.copy(); b.sort(); done.setdefault("work", []).append(time.perf_counter() - t0)
th = threading.Thread(target=imp); th.start()
if mode == "concurrent":
    ws = [threading.Thread(target=work) for _ in range(2)]
    [w.start() for w in ws]; [w.join() for w in ws]
th.join()
if mode == "after":
    ws = [threading.Thread(target=work) for _ in range(2)]
    [w.start() for w in ws]; [w.join() for w in ws]
print(mode, "import done %.3f" % done["imp"], "work done %s" % ["%.3f" % x for x in done["work"]], "total %.3f" % (time.perf_counter() - t0))
