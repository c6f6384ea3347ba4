import sys, time, ctypes, importlib
native = importlib.import_module("kernscope.load.native")
libpath = sys.argv[2]
def lib_loader():
    lib = ctypes.CDLL(libpath)
    lib.ks_abi_version.restype = ctypes.c_int64
    for fn in ("ks_scan_events", "ks_count_events", "ks_cut_lines", "ks_count_fields", "ks_fields", "ks_innermost", "ks_nest",
               "ks_search_right", "ks_union_lengths", "ks_idle_gaps", "ks_clip", "ks_code_range",
               "ks_distinct_keys", "ks_distinct_number", "ks_mark_used", "ks_window_of", "ks_node_windows", "ks_group_last_max"):
        getattr(lib, fn).restype = ctypes.c_int64
    lib.ks_kineto_scan.restype = ctypes.c_int64
    return lib
L = lib_loader()
native._library = lambda: L
fastscan = importlib.import_module("kernscope.load.fastscan")
from kernscope.load.document import Splitter
from kernscope.load.kineto import piece_bytes
from kernscope.load.source import Limits, open_trace
from kernscope.analyze.needs import analyze_projection
proj = analyze_projection(None)
src = open_trace(sys.argv[1])
pieces = [bytes(p.text) for _, p in zip(range(10), Splitter(src, Limits(), chunk_bytes=piece_bytes()).pieces())]
best = None
for rep in range(3):
    keep = proj.compiled(); hints = fastscan.ScanHints()
    rows = dropped = vl = rvl = 0; t_scan = 0.0
    for text in pieces:
        t = time.perf_counter(); s = fastscan.scan(text, proj.args, proj, keep, hints); t_scan += time.perf_counter() - t
        rows += s.table.height; dropped += s.dropped; vl += s.via_layouts; rvl += s.rows_via_layouts
    best = t_scan if best is None else min(best, t_scan)
print(f"{sys.argv[1].split('/')[-1]:12s} {libpath.split('/')[-1]:10s} rows {rows} via {100*rvl/max(rows,1):.0f}%, dropped {dropped} via {100*vl/max(dropped,1):.0f}%, scan best {best:.3f} s")
