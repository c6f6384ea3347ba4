"""Self-contained HTML timeline of intra-kernel tasks: one row per SM lane, hover for details."""

from __future__ import annotations

import html
import json
from typing import Any

import polars as pl

from ..scalars import as_int

MAX_SLICES = 300_000

_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>%(title)s</title>
<style>
body{font:13px system-ui,sans-serif;margin:12px;color:#222}
#wrap{position:relative;border:1px solid #ccc;overflow:auto;height:80vh}
#tip{position:fixed;pointer-events:none;background:#fffbe6;border:1px solid #aaa;padding:4px 6px;display:none;font:12px monospace}
.legend span{display:inline-block;margin-right:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
</style></head><body>
<h3>%(title)s</h3>
<div>%(summary)s</div>
<div class="legend" id="legend"></div>
<div id="wrap"><canvas id="c"></canvas></div><div id="tip"></div>
<script>
const D = %(data)s;
const ROW = 14, LABEL = 110, W = Math.max(1200, window.innerWidth - 60);
const colors = ["#4e79a7","#f28e2b","#e15759","#76b7b2","#59a14f","#edc948","#b07aa1","#ff9da7","#9c755f","#bab0ac"];
const rows = D.rows, c = document.getElementById("c"), ctx = c.getContext("2d");
c.width = W; c.height = rows.length * ROW + 20;
const span = Math.max(1, D.t1 - D.t0), sx = (W - LABEL) / span;
ctx.font = "10px monospace";
rows.forEach((r, i) => { ctx.fillStyle = i %% 2 ? "#fafafa" : "#f0f0f0"; ctx.fillRect(0, i*ROW, W, ROW); ctx.fillStyle="#333"; ctx.fillText(r, 2, i*ROW+10); });
for (let k = 0; k < D.s.length; k++) {
  ctx.fillStyle = colors[D.k[k] %% colors.length];
  ctx.fillRect(LABEL + (D.s[k]-D.t0)*sx, D.r[k]*ROW+1, Math.max(1, D.d[k]*sx), ROW-2);
}
document.getElementById("legend").innerHTML = D.tasks.map((t,i)=>`<span><i style="background:${colors[i%%colors.length]}"></i>${t}</span>`).join("");
const tip = document.getElementById("tip");
c.addEventListener("mousemove", e => {
  const b = c.getBoundingClientRect(), x = e.clientX - b.left, y = e.clientY - b.top, row = Math.floor(y / ROW);
  const t = D.t0 + (x - LABEL) / sx; let hit = -1;
  for (let k = 0; k < D.s.length; k++) if (D.r[k] === row && D.s[k] <= t && t <= D.s[k] + D.d[k]) { hit = k; }
  if (hit < 0) { tip.style.display = "none"; return; }
  tip.style.display = "block"; tip.style.left = (e.clientX + 12) + "px"; tip.style.top = (e.clientY + 12) + "px";
  tip.textContent = `${D.tasks[D.k[hit]]}  block ${D.b[hit]}  ${(D.d[hit]/1000).toFixed(3)} us  start +${((D.s[hit]-D.t0)/1000).toFixed(3)} us`;
});
</script></body></html>
"""


def render_html(tasks: pl.DataFrame, lanes: pl.DataFrame, summary: dict[str, Any], title: str = "kernscope intra-kernel timeline") -> str:
    """HTML page; ``lanes`` maps (block, group, sm) -> lane (from ``export.assign_lanes``)."""
    t = tasks.join(lanes, on=["block", "group", "sm"], how="left").sort("start_ns")
    truncated = t.height > MAX_SLICES
    if truncated:
        t = t.head(MAX_SLICES)
    keys = t.select("sm", "lane").unique().sort(["sm", "lane"])
    keys = keys.with_row_index("row")
    t = t.join(keys, on=["sm", "lane"], how="left")
    names = sorted(set(t["task"].to_list()))
    idx = {n: i for i, n in enumerate(names)}
    data = {
        "t0": as_int(t["start_ns"].min()),
        "t1": as_int(t["end_ns"].max(), 1),
        "rows": [f"SM {sm} / {ln}" for sm, ln in keys.select("sm", "lane").iter_rows()],
        "tasks": names,
        "s": t["start_ns"].to_list(),
        "d": t["duration_ns"].to_list(),
        "r": t["row"].to_list(),
        "k": [idx[n] for n in t["task"].to_list()],
        "b": t["block"].to_list(),
    }
    items = ", ".join(f"{html.escape(str(k))}: {html.escape(f'{v:,.3f}' if isinstance(v, float) else f'{v:,}')}" for k, v in summary.items())
    if truncated:
        items += f" — showing the first {MAX_SLICES:,} tasks"
    return _PAGE % {"title": html.escape(title), "summary": items, "data": json.dumps(data)}
