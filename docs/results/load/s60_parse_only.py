import sys, time
from kernscope.oneshot import tune_allocators
tune_allocators([sys.argv[1]])
import polars, numpy, kernscope
from kernscope.analyze.needs import analyze_projection
from kernscope.load.formats import detect, ParseOptions
from kernscope.load.source import open_trace
src = open_trace(sys.argv[1]); fmt = detect(src)
t = time.perf_counter()
raw = fmt.parse(src, ParseOptions(projection=analyze_projection(None)))
print(f"{time.perf_counter() - t:.4f}")
