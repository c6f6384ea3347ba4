"""Session 73: the four parts' analyze JSON (s73_parts.py) merged by hand against the whole profile's: which outputs a
simple merge gives exactly, and where they differ. Reads /tmp/parts/{h200_3300,part0..3}.xplane.json."""
import json, collections, math
W = json.load(open('/tmp/parts/h200_3300.xplane.json'))
P = [json.load(open(f'/tmp/parts/part{i}.xplane.json')) for i in range(4)]
def rows_eq(a, b, keys=None):
    if len(a) != len(b): return f"len {len(a)} vs {len(b)}"
    bad = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
    if bad:
        i = bad[0]; return f"{len(bad)} rows differ; first {i}: {a[i]} vs {b[i]}"
    return "equal"
# steps: concatenated
print("steps:", rows_eq(W["steps"], [r for p in P for r in p["steps"]]))
# critical path tables by step
for k in W["critical_path"]:
    if isinstance(W["critical_path"][k], list) and W["critical_path"][k] and "step" in W["critical_path"][k][0]:
        print("critical_path."+k+":", rows_eq(sorted(W["critical_path"][k], key=lambda r: json.dumps(r, sort_keys=True)),
                                              sorted([r for p in P for r in p["critical_path"][k]], key=lambda r: json.dumps(r, sort_keys=True))))
# findings per rule
fw = collections.defaultdict(list); fp = collections.defaultdict(list)
for r in W["findings"]: fw[r["rule"]].append(r)
for p in P:
    for r in p["findings"]: fp[r["rule"]].append(r)
for rule in sorted(set(fw) | set(fp)):
    a = sorted(fw[rule], key=lambda r: (r["step"] or -1, r["device"] or -1, r["text"]))
    b = sorted(fp[rule], key=lambda r: (r["step"] or -1, r["device"] or -1, r["text"]))
    print("findings."+rule+":", rows_eq(a, b))
# kernels: sum by key
def merged(table, keys, sums=("count", "total_us"), mins=("min_us",), maxs=("max_us",)):
    out = {}
    for p in P:
        for r in p[table]:
            k = tuple(r[c] for c in keys)
            o = out.setdefault(k, {c: 0 for c in sums} | {c: math.inf for c in mins} | {c: -math.inf for c in maxs})
            for c in sums: o[c] += r[c]
            for c in mins: o[c] = min(o[c], r[c])
            for c in maxs: o[c] = max(o[c], r[c])
    return out
for table, keys, mins, maxs in (("kernels", ["name", "launcher", "category", "library", "decided_by", "decided_op"], ("min_us",), ("max_us",)),
                                ("categories", ["category"], (), ()), ("libraries", ["library"], (), ()), ("ops", ["launcher"], (), ()),
                                ("launcher_categories", ["launcher", "category"], (), ()), ("sources", ["source", "function"], (), ())):
    m = merged(table, keys, mins=mins, maxs=maxs)
    w = {tuple(r[c] for c in keys): r for r in W[table]}
    diff = 0; maxrel = 0.0
    for k, r in w.items():
        o = m.get(k)
        if o is None: diff += 1; continue
        for c in o:
            if c == "count":
                if o[c] != r[c]: diff += 1
            else:
                rel = abs(o[c] - r[c]) / max(abs(r[c]), 1e-9); maxrel = max(maxrel, rel)
    print(f"{table}: whole {len(W[table])} rows, merged {len(m)}; rows differing in count or missing {diff}; max rel diff of sums {maxrel:.2e}")
print("timeline whole:", W["timeline"])
tl = collections.defaultdict(float)
for p in P:
    for r in p["timeline"]: tl[r["type"]] += r["time_us"]
print("timeline parts summed:", dict(tl))
print("trace facts whole:", {k: W["trace"][k] for k in ("events", "gpu_events", "kernels", "kernel_time_us")})
print("trace facts summed:", {k: sum(p["trace"][k] for p in P) for k in ("events", "gpu_events", "kernels", "kernel_time_us")})
print("unlinked whole", W["unlinked"]); print("unlinked parts", [p["unlinked"] for p in P])
print("---- keyed comparisons")
def keyed(rows, key): return {tuple(r[k] for k in key): r for r in rows}
for k, key in (("steps", ("step",)), ("whatif", ("step", "change")), ("categories", ("step", "category")), ("kernels", ("step", "name", "category", "launcher")), ("ops", ("step", "op"))):
    w = keyed(W["critical_path"][k], key); p = keyed([r for q in P for r in q["critical_path"][k]], key)
    diff = [x for x in w if w[x] != p.get(x)]
    extra = [x for x in p if x not in w]
    print(f"critical_path.{k}: whole {len(w)} parts {len(p)}; differing {len(diff)}, only in parts {len(extra)}", (w[diff[0]], p.get(diff[0])) if diff else "")
    if diff: print("   differing steps:", sorted({d[0] for d in diff})[:20])
print("notes whole", W["critical_path"]["notes"]); print("notes parts", [q["critical_path"]["notes"] for q in P])
w = keyed(W["steps"], ("step",)); p = keyed([r for q in P for r in q["steps"]], ("step",))
cols = set(W["steps"][0]) - {"start_us", "end_us"}
print("steps without start/end:", sum(1 for x in w if {c: w[x][c] for c in cols} != {c: p[x][c] for c in cols}), "differ")
offs = set()
for x in w:
    offs.add(round(w[x]["start_us"] - p[x]["start_us"], 3))
print("start offsets (per part):", sorted(offs)[:10], len(offs))
