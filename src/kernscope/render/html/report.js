// kernscope HTML report: a canvas timeline with level of detail, charts and sortable tables.
// Self-contained (no network). All text from the trace goes through textContent, never markup.
(function () {
  "use strict";
  const DATA = JSON.parse(document.getElementById("ks-data").textContent);
  const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac", "#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"];
  const ks = (window.kernscope = { errors: [], views: {} });

  // ---------------------------------------------------------------- helpers
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "text") e.textContent = v;
      else if (k === "cls") e.className = v;
      else e.setAttribute(k, v);
    }
    for (const k of kids) if (k != null) e.appendChild(typeof k === "string" ? document.createTextNode(k) : k);
    return e;
  }
  function bytesOf(b64) {
    const bin = atob(b64);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return bytes;
  }
  // a packed array: base64 of its bytes, or (a large one) already inflated by inflateAll
  function decode(b64, Type) {
    return new Type(b64 instanceof ArrayBuffer ? b64 : bytesOf(b64).buffer);
  }
  // large arrays come deflated, {deflate: base64}: each becomes its ArrayBuffer before the page is drawn
  function isDeflated(x) {
    return x !== null && typeof x === "object" && !Array.isArray(x) && typeof x.deflate === "string" && Object.keys(x).length === 1;
  }
  function deflatedPlaces(x, out) {  // [object, key] of every deflated array in the data
    for (const k of Object.keys(x)) {
      const v = x[k];
      if (isDeflated(v)) out.push([x, k]);
      else if (v !== null && typeof v === "object") deflatedPlaces(v, out);
    }
    return out;
  }
  function inflate(places) {
    if (typeof DecompressionStream === "undefined")
      return Promise.reject(new Error("this browser cannot inflate the report's data (no DecompressionStream): open it in a current Chrome, Edge, Firefox or Safari"));
    return Promise.all(places.map(async ([o, k]) => {
      const stream = new Blob([bytesOf(o[k].deflate)]).stream().pipeThrough(new DecompressionStream("deflate"));
      o[k] = await new Response(stream).arrayBuffer();
    }));
  }
  function fmtUs(us) {
    if (us == null || isNaN(us)) return "-";
    const a = Math.abs(us);
    if (a >= 1e6) return (us / 1e6).toFixed(3) + " s";
    if (a >= 1e3) return (us / 1e3).toFixed(3) + " ms";
    if (a >= 1) return us.toFixed(2) + " µs";
    return (us * 1e3).toFixed(0) + " ns";
  }
  function fmtCycles(c) {  // intra-kernel timelines recorded in SM cycles with no known clock
    const a = Math.abs(c);
    if (a >= 1e6) return (c / 1e6).toFixed(3) + " Mcycles";
    if (a >= 1e3) return (c / 1e3).toFixed(2) + " kcycles";
    return c.toFixed(0) + " cycles";
  }
  function fmtNum(v, col) {
    if (v == null) return "";
    if (typeof v !== "number") return String(v);
    if (col.endsWith("_us")) return fmtUs(v);
    if (col === "pct" || col === "percent" || col.endsWith("_pct") || col.startsWith("pct_")) return v.toFixed(1) + "%";
    if (Number.isInteger(v)) return v.toLocaleString("en-US");
    return Number(v.toPrecision(4)).toLocaleString("en-US", { maximumFractionDigits: 6 });
  }
  // a colour per category that never repeats: the palette, then hues spread by the golden angle
  function color(i) { return i < PALETTE.length ? PALETTE[i] : "hsl(" + ((i * 137.508) % 360).toFixed(1) + ",62%," + (i % 2 ? 42 : 56) + "%)"; }
  // one colour per category name on the whole page (timeline, legends, per-step bars, headline)
  const CAT_COLORS = DATA.category_colors || {};
  function colorOf(name, i) { return Object.prototype.hasOwnProperty.call(CAT_COLORS, name) ? CAT_COLORS[name] : color(i); }
  const defs = DATA.glossary || {};

  // ---------------------------------------------------------------- timeline (canvas, level of detail)
  class Timeline {
    constructor(root, tl) {
      this.tl = tl;
      this.colors = tl.categories.map((n, i) => colorOf(n, i));
      this.lanes = tl.lanes;
      this.start = decode(tl.events.start, Float64Array);
      this.dur = decode(tl.events.dur, Float64Array);
      this.cat = decode(tl.events.cat, Uint16Array);
      this.name = decode(tl.events.name, Uint32Array);
      this.flag = tl.events.flag ? decode(tl.events.flag, Uint8Array) : null;
      this.laneFirst = tl.lane_first;
      this.laneMaxDur = tl.lane_max_dur;
      this.span = Math.max(tl.span_ns, 1);
      this.fmt = tl.time_unit === "cycles" ? fmtCycles : (ns) => fmtUs(ns / 1000);  // the axis unit: ns, or cycles
      this.t0 = 0; this.t1 = this.span;
      this.rowH = 16; this.label = 180; this.axisH = tl.steps && tl.steps.length ? 36 : 22;  // step names below the ticks
      this.wrap = el("div", { cls: "tl-wrap" });
      this.canvas = el("canvas", { cls: "tl", "aria-label": "timeline" });
      this.tip = el("div", { cls: "tip" });
      this.range = el("div", { cls: "tl-range" });
      const bar = el("div", { cls: "tl-bar" },
        el("button", { text: "−", title: "zoom out", "data-act": "out" }),
        el("button", { text: "+", title: "zoom in", "data-act": "in" }),
        el("button", { text: "reset", title: "whole trace (double-click the timeline)", "data-act": "reset" }),
        this.range);
      bar.addEventListener("click", (e) => {
        const a = e.target.getAttribute && e.target.getAttribute("data-act");
        if (a === "in") this.zoom(0.5, 0.5); else if (a === "out") this.zoom(2, 0.5); else if (a === "reset") this.zoomTo(0, this.span);
      });
      this.wrap.appendChild(bar);
      this.wrap.appendChild(this.canvas);
      root.appendChild(this.wrap);
      document.body.appendChild(this.tip);
      this.bind();
      this.resize();
      window.addEventListener("resize", () => this.resize());
    }
    resize() {
      const w = Math.max(600, this.wrap.clientWidth || 1000);
      const h = this.axisH + this.lanes.length * this.rowH + 4;
      const dpr = window.devicePixelRatio || 1;
      this.W = w; this.H = h;
      this.canvas.width = w * dpr; this.canvas.height = h * dpr;
      this.canvas.style.width = w + "px"; this.canvas.style.height = h + "px";
      this.ctx = this.canvas.getContext("2d");
      this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      this.draw();
    }
    x(t) { return this.label + (t - this.t0) / (this.t1 - this.t0) * (this.W - this.label); }
    tAt(px) { return this.t0 + (px - this.label) / (this.W - this.label) * (this.t1 - this.t0); }
    zoomTo(a, b) {
      const minSpan = 100;
      if (b - a < minSpan) { const m = (a + b) / 2; a = m - minSpan / 2; b = m + minSpan / 2; }
      this.t0 = Math.max(0, a); this.t1 = Math.min(this.span, Math.max(b, this.t0 + minSpan));
      this.schedule();
    }
    zoom(f, frac) {
      const c = this.t0 + (this.t1 - this.t0) * frac;
      this.zoomTo(c - (c - this.t0) * f, c + (this.t1 - c) * f);
    }
    schedule() {
      if (this.pending) return;
      this.pending = true;
      requestAnimationFrame(() => { this.pending = false; this.draw(); });
    }
    first(lane, t) {  // first event of the lane that may end after t
      let lo = this.laneFirst[lane], hi = this.laneFirst[lane + 1];
      const target = t - this.laneMaxDur[lane];
      while (lo < hi) { const m = (lo + hi) >> 1; if (this.start[m] < target) lo = m + 1; else hi = m; }
      return lo;
    }
    draw() {
      const ctx = this.ctx, W = this.W, H = this.H;
      ctx.clearRect(0, 0, W, H);
      ctx.font = "11px system-ui, sans-serif";
      // axis
      const span = this.t1 - this.t0;
      const step = Math.pow(10, Math.floor(Math.log10(span / 8)));
      const mult = span / step > 40 ? 5 : span / step > 20 ? 2 : 1;
      const tick = step * mult;
      ctx.fillStyle = "#555"; ctx.strokeStyle = "#ddd";
      for (let t = Math.ceil(this.t0 / tick) * tick; t <= this.t1; t += tick) {
        const x = this.x(t);
        ctx.beginPath(); ctx.moveTo(x, this.axisH - 4); ctx.lineTo(x, H); ctx.stroke();
        ctx.fillText(this.fmt(t), x + 2, 12);
      }
      // steps
      for (const s of this.tl.steps || []) {
        const a = this.x(s.start_ns), b = this.x(s.end_ns);
        if (b < this.label || a > W) continue;
        ctx.fillStyle = "rgba(80,110,180,0.06)";
        ctx.fillRect(Math.max(a, this.label), this.axisH, Math.min(b, W) - Math.max(a, this.label), H - this.axisH);
        ctx.fillStyle = "#3a5aa0";
        ctx.fillRect(Math.max(a, this.label), this.axisH - 3, 1, H - this.axisH + 3);
        if (b - a > 40) ctx.fillText(s.name, Math.max(a, this.label) + 3, this.axisH - 6);
      }
      // lanes
      let drawn = 0;
      for (let l = 0; l < this.lanes.length; l++) {
        const y = this.axisH + l * this.rowH;
        ctx.fillStyle = l % 2 ? "#fafafa" : "#f2f4f7";
        ctx.fillRect(0, y, W, this.rowH);
        ctx.fillStyle = "#333";
        ctx.fillText(this.lanes[l].label, 4, y + 12);
        let i = this.first(l, this.t0);
        const end = this.laneFirst[l + 1];
        let lastPx = -1;
        for (; i < end; i++) {
          const s = this.start[i];
          if (s > this.t1) break;
          const e = s + this.dur[i];
          if (e < this.t0) continue;
          const x0 = Math.max(this.x(s), this.label), x1 = this.x(e);
          const px = x0 | 0;
          if (x1 - x0 < 1 && px === lastPx) continue;  // level of detail: one mark per pixel per lane
          lastPx = px;
          ctx.fillStyle = this.colors[this.cat[i]];
          ctx.fillRect(x0, y + 2, Math.max(1, x1 - x0), this.rowH - 4);
          if (this.flag && this.flag[i] === 1) { ctx.strokeStyle = "#000"; ctx.strokeRect(x0, y + 2, Math.max(1, x1 - x0), this.rowH - 4); }
          drawn++;
        }
      }
      this.drawn = drawn;
      this.range.textContent = "view " + this.fmt(this.t0) + " – " + this.fmt(this.t1) + " (" + this.fmt(span) + ")";
    }
    hit(mx, my) {
      const l = Math.floor((my - this.axisH) / this.rowH);
      if (l < 0 || l >= this.lanes.length || mx < this.label) return -1;
      const t = this.tAt(mx), tol = (this.t1 - this.t0) / (this.W - this.label) * 2;
      let best = -1;
      for (let i = this.first(l, t - tol), end = this.laneFirst[l + 1]; i < end && this.start[i] <= t + tol; i++) {
        if (this.start[i] + this.dur[i] >= t - tol) best = i;
      }
      return best;
    }
    bind() {
      const c = this.canvas;
      c.addEventListener("wheel", (e) => {
        e.preventDefault();
        const r = c.getBoundingClientRect();
        const frac = Math.min(1, Math.max(0, (e.clientX - r.left - this.label) / (this.W - this.label)));
        this.zoom(e.deltaY > 0 ? 1.25 : 0.8, frac);
      }, { passive: false });
      let drag = null;
      c.addEventListener("mousedown", (e) => { drag = { x: e.clientX, t0: this.t0, t1: this.t1 }; });
      window.addEventListener("mouseup", () => { drag = null; });
      c.addEventListener("dblclick", () => this.zoomTo(0, this.span));
      c.addEventListener("mousemove", (e) => {
        const r = c.getBoundingClientRect();
        if (drag) {
          const dt = (e.clientX - drag.x) / (this.W - this.label) * (drag.t1 - drag.t0);
          const a = Math.max(0, Math.min(this.span - (drag.t1 - drag.t0), drag.t0 - dt));
          this.t0 = a; this.t1 = a + (drag.t1 - drag.t0); this.schedule();
          return;
        }
        const i = this.hit(e.clientX - r.left, e.clientY - r.top);
        if (i < 0) { this.tip.style.display = "none"; return; }
        this.tip.textContent = "";
        this.tip.appendChild(el("b", { text: this.tl.names[this.name[i]] }));
        this.tip.appendChild(el("div", { text: this.tl.categories[this.cat[i]] + " · " + this.fmt(this.dur[i]) +
          " · starts at " + this.fmt(this.start[i]) + (this.flag && this.flag[i] === 1 ? " · L2 flush" : "") }));
        this.tip.style.display = "block";
        this.tip.style.left = Math.min(window.innerWidth - 420, e.clientX + 12) + "px";
        this.tip.style.top = (e.clientY + 14) + "px";
      });
      c.addEventListener("mouseleave", () => { this.tip.style.display = "none"; });
    }
  }

  // ---------------------------------------------------------------- charts
  function legend(names) {
    const d = el("div", { cls: "legend" });
    names.forEach((n) => d.appendChild(el("span", {}, el("i"), n)));
    d.querySelectorAll("i").forEach((e, i) => { e.style.background = colorOf(names[i], i); });
    return d;
  }
  function stackedSteps(root, sc) {
    const c = el("canvas", { cls: "bars", "aria-label": "per-step categories" });
    root.appendChild(legend(sc.categories));
    root.appendChild(c);
    const n = sc.steps.length, W = Math.max(600, root.clientWidth || 900), H = 220, pad = 40;
    const dpr = window.devicePixelRatio || 1;
    c.width = W * dpr; c.height = H * dpr; c.style.width = W + "px"; c.style.height = H + "px";
    const ctx = c.getContext("2d"); ctx.setTransform(dpr, 0, 0, dpr, 0, 0); ctx.font = "11px system-ui";
    let max = 0;
    for (const row of sc.values) max = Math.max(max, row.reduce((a, b) => a + b, 0));
    const bw = Math.max(2, Math.min(60, (W - pad) / Math.max(n, 1) - 4));
    let labelEnd = 0;
    sc.values.forEach((row, i) => {
      let y = H - 20;
      const x = pad + i * (bw + 4);
      row.forEach((v, k) => {
        const h = max ? v / max * (H - 40) : 0;
        ctx.fillStyle = colorOf(sc.categories[k], k); ctx.fillRect(x, y - h, bw, h); y -= h;
      });
      let name = sc.steps[i];
      if (ctx.measureText(name).width > bw + 2) name = name.replace(/^[^0-9#]*/, "");  // "ProfilerStep#12" -> "#12"
      if (x >= labelEnd) { ctx.fillStyle = "#333"; ctx.fillText(name, x, H - 6); labelEnd = x + ctx.measureText(name).width + 6; }
    });
    ctx.fillStyle = "#555"; ctx.fillText(fmtUs(max), 2, 14);
  }
  function fmtBytes(b) {
    const a = Math.abs(b);
    if (a >= 2 ** 30) return (b / 2 ** 30).toFixed(2) + " GiB";
    if (a >= 2 ** 20) return (b / 2 ** 20).toFixed(1) + " MiB";
    if (a >= 2 ** 10) return (b / 2 ** 10).toFixed(1) + " KiB";
    return b.toFixed(0) + " B";
  }
  function memoryChart(root, dev) {  // allocated (filled) and reserved (line) bytes over time, the peak marked
    const pk = dev.peak;
    const words = dev.label + ": peak " + fmtBytes(pk.bytes) + " allocated at " + fmtUs(pk.at_ns / 1000) +
      (pk.op ? " in " + pk.op : "") + (pk.step != null ? " (step " + pk.step + ")" : "");
    if (dev.chart === false) { root.appendChild(el("p", { cls: "note", text: words + " (too small to chart)" })); return; }
    const t = decode(dev.t, Float64Array), al = decode(dev.allocated, Float64Array), re = decode(dev.reserved, Float64Array);
    const c = el("canvas", { cls: "bars", "aria-label": "memory " + dev.label });
    root.appendChild(el("p", { cls: "note", text: words + "; filled: allocated, line: reserved" }));
    root.appendChild(c);
    const W = Math.max(600, root.clientWidth || 900), H = 200, pad = 70, dpr = window.devicePixelRatio || 1;
    c.width = W * dpr; c.height = H * dpr; c.style.width = W + "px"; c.style.height = H + "px";
    const ctx = c.getContext("2d"); ctx.setTransform(dpr, 0, 0, dpr, 0, 0); ctx.font = "11px system-ui";
    let t0 = Infinity, t1 = -Infinity, ymax = 1;
    for (let i = 0; i < t.length; i++) { t0 = Math.min(t0, t[i]); t1 = Math.max(t1, t[i]); ymax = Math.max(ymax, al[i], re[i]); }
    const x = (v) => pad + (v - t0) / Math.max(t1 - t0, 1) * (W - pad - 10), y = (v) => H - 18 - v / ymax * (H - 30);
    ctx.fillStyle = "rgba(80,110,180,0.35)"; ctx.beginPath(); ctx.moveTo(x(t[0]), y(0));
    for (let i = 0; i < t.length; i++) { if (i) ctx.lineTo(x(t[i]), y(al[i - 1])); ctx.lineTo(x(t[i]), y(al[i])); }
    ctx.lineTo(x(t[t.length - 1]), y(0)); ctx.closePath(); ctx.fill();
    ctx.strokeStyle = "#b33"; ctx.beginPath();
    for (let i = 0; i < t.length; i++) { if (i) ctx.lineTo(x(t[i]), y(re[i - 1])); else ctx.moveTo(x(t[i]), y(re[i])); ctx.lineTo(x(t[i]), y(re[i])); }
    ctx.stroke();
    const px = x(pk.at_ns); ctx.strokeStyle = "#000"; ctx.beginPath(); ctx.moveTo(px, 10); ctx.lineTo(px, H - 18); ctx.stroke();
    ctx.fillStyle = "#555"; ctx.fillText(fmtBytes(ymax), 2, 14); ctx.fillText("0", 2, H - 18);
    ctx.fillText(fmtUs(t0 / 1000), pad, H - 4); ctx.fillText(fmtUs(t1 / 1000), W - 80, H - 4);
  }
  function breakdown(root, rows) {
    const t = el("div", { cls: "breakdown" });
    for (const r of rows) {
      const bar = el("div", { cls: "bd-bar" }); bar.style.width = Math.min(100, r.percent).toFixed(2) + "%";
      t.appendChild(el("div", { cls: "bd-row", title: defs[r.type] || "" }, el("span", { cls: "bd-label", text: r.type.replace(/_/g, " ") }),
        el("span", { cls: "bd-track" }, bar), el("span", { cls: "bd-val", text: fmtUs(r.time_us) + " · " + r.percent.toFixed(1) + "%" })));
    }
    root.appendChild(t);
  }

  // ---------------------------------------------------------------- tables
  class SortTable {
    constructor(root, name, spec) {
      this.name = name; this.cols = spec.columns; this.rows = spec.rows; this.view = this.rows.slice();
      this.limit = 200; this.sortCol = -1; this.desc = true;
      this.filter = el("input", { type: "search", placeholder: "filter " + name + "…", cls: "filter" });
      this.info = el("span", { cls: "info" });
      this.table = el("table", { cls: "grid", "data-table": name });
      root.appendChild(el("div", { cls: "tbar" }, this.filter, this.info));
      root.appendChild(el("div", { cls: "twrap" }, this.table));  // wide tables scroll inside, not the page
      this.more = el("button", { text: "show more", cls: "more" });
      root.appendChild(this.more);
      this.more.addEventListener("click", () => { this.limit += 500; this.render(); });
      this.filter.addEventListener("input", () => this.apply());
      this.render();
      ks.views[name] = this;
    }
    apply() {
      const q = this.filter.value.toLowerCase();
      this.view = q ? this.rows.filter((r) => r.some((v) => typeof v === "string" && v.toLowerCase().includes(q))) : this.rows.slice();
      if (this.sortCol >= 0) this.sort(this.sortCol, this.desc, false);
      this.render();
    }
    sort(j, desc, rerender = true) {
      this.sortCol = j; this.desc = desc;
      this.view.sort((a, b) => {
        const x = a[j], y = b[j];
        if (x == null) return 1; if (y == null) return -1;
        const r = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
        return desc ? -r : r;
      });
      if (rerender) this.render();
    }
    render() {
      this.table.textContent = "";
      const head = el("tr");
      const numeric = this.cols.map((c, j) => this.rows.some((r) => typeof r[j] === "number"));
      this.cols.forEach((c, j) => {
        const base = c.replace(/_us$/, "");  // step_us beside step reads "step (µs)", not a second "step"
        const label = (base !== c && this.cols.includes(base) ? base + " (µs)" : base).replace(/^pct$/, "%").replace(/_/g, " ");
        const th = el("th", { text: label + (this.sortCol === j ? (this.desc ? " ▼" : " ▲") : ""), title: (defs[c] || "") + (defs[c] ? " " : "") + "(" + c + ")" });
        if (numeric[j]) th.className = "num";
        th.addEventListener("click", () => this.sort(j, this.sortCol === j ? !this.desc : true));
        head.appendChild(th);
      });
      this.table.appendChild(el("thead", {}, head));
      const body = el("tbody");
      for (const r of this.view.slice(0, this.limit)) {
        const tr = el("tr");
        r.forEach((v, j) => tr.appendChild(typeof v === "number"
          ? el("td", { text: fmtNum(v, this.cols[j]), cls: "num" })
          : el("td", { text: fmtNum(v, this.cols[j]), title: v == null ? "" : String(v) })));
        body.appendChild(tr);
      }
      this.table.appendChild(body);
      this.info.textContent = this.view.length.toLocaleString("en-US") + " of " + this.rows.length.toLocaleString("en-US") + " rows";
      this.more.style.display = this.view.length > this.limit ? "" : "none";
    }
  }

  // ---------------------------------------------------------------- page
  function section(title, id) {
    const s = el("section", { id: id }, el("h2", { text: title }));
    document.getElementById("main").appendChild(s);
    return s;
  }
  function facts(f) {
    const dl = el("dl", { cls: "facts" });
    for (const [k, v] of Object.entries(f)) {
      if (v == null || (Array.isArray(v) && !v.length)) continue;
      const label = k === "devices" ? "device ids" : typeof v === "number" ? k.replace(/_us$/, "") : k;
      dl.appendChild(el("dt", { text: label.replace(/_/g, " "), title: defs[k] || "" }));
      dl.appendChild(el("dd", { text: typeof v === "number" ? fmtNum(v, k) : Array.isArray(v) ? v.join(", ") : String(v) }));
    }
    return dl;
  }
  function headline(h) {
    const d = el("div", { cls: "headline" });
    const card = (label, value, note) => d.appendChild(el("div", { cls: "card" }, el("b", { text: value }), el("span", { text: label }),
      ...(note ? [el("small", { text: note })] : [])));
    if (h.step_time_us != null) card("step time", fmtUs(h.step_time_us), "mean of " + h.steps + " step" + (h.steps === 1 ? "" : "s"));
    if (h.gpu_busy_pct != null) card("GPU busy", h.gpu_busy_pct.toFixed(1) + "%", h.gpus > 1
      ? "mean of " + h.gpus + " GPUs, each of first GPU start to last GPU end" : "of first GPU start to last GPU end");
    card("GPU time", fmtUs(h.gpu_time_us), "summed over kernels, copies and sets");
    const top = el("div", { cls: "card top" }, el("span", { text: "top categories" }));
    for (const [i, [cat, us, pct]] of h.top_categories.entries()) {
      const sw = el("i"); sw.style.background = colorOf(cat, i);
      top.appendChild(el("div", {}, sw, el("b", { text: pct.toFixed(1) + "%" }), el("span", { text: " " + cat + " · " + fmtUs(us) })));
    }
    d.appendChild(top);
    if (h.findings && h.findings.length) {  // what to fix first: the top findings, by time to win back
      const f = el("div", { cls: "card findings" }, el("span", { text: "top findings (time to win back)" }));
      for (const x of h.findings) f.appendChild(el("div", {}, el("b", { text: "up to " + fmtUs(x.win_back_us) }),
        el("span", { text: " " + x.title + ": " + x.text + (x.occurrences > 1 ? " · in " + x.occurrences.toLocaleString("en-US")
          + " steps: " + fmtUs(x.total_us) + " in all" : "") })));
      d.appendChild(f);
    }
    return d;
  }
  function fail(err) {
    ks.errors.push(String(err));
    document.getElementById("main").appendChild(el("pre", { cls: "error", text: "report error: " + err }));
  }
  function draw() {
    try {
      document.getElementById("title").textContent = DATA.title;
      if (DATA.headline) section("Where the GPU time goes", "headline").appendChild(headline(DATA.headline));
      if (DATA.facts && !DATA.headline) section(DATA.facts_title || "Trace", "facts").appendChild(facts(DATA.facts));
      if (DATA.timeline && DATA.timeline.lanes.length) {
        const s = section("Timeline (wheel: zoom, drag: pan, double-click: reset)", "timeline");
        s.appendChild(legend(DATA.timeline.categories));
        ks.timeline = new Timeline(s, DATA.timeline);
        if (DATA.timeline.note) s.appendChild(el("p", { cls: "note", text: DATA.timeline.note }));
      }
      if (DATA.breakdown && DATA.breakdown_by_device && DATA.breakdown_by_device.length) {
        // several GPUs: one breakdown each (over the span of all GPU work), then their sum (device time)
        const s = section("GPU timeline breakdown, per GPU", "breakdown");
        const devices = [...new Set(DATA.breakdown_by_device.map(r => r.device))];
        for (const d of devices) {
          s.appendChild(el("h3", { text: d == null ? "GPU (no device)" : "GPU " + d }));
          breakdown(s, DATA.breakdown_by_device.filter(r => r.device === d));
        }
        s.appendChild(el("h3", { text: "All " + devices.length + " GPUs (device time: each GPU's time summed)" }));
        breakdown(s, DATA.breakdown);
      } else if (DATA.breakdown) breakdown(section("GPU timeline breakdown", "breakdown"), DATA.breakdown);
      for (const ch of DATA.charts || []) if (ch.steps.length) stackedSteps(section(ch.title, "chart-" + ch.name), ch);
      if (DATA.step_categories && DATA.step_categories.steps.length) stackedSteps(section("GPU time per step by category", "steps"), DATA.step_categories);
      if (DATA.memory && DATA.memory.length) {
        const s = section("Memory over time (profile_memory)", "memory");
        for (const dev of DATA.memory) memoryChart(s, dev);
      }
      for (const [name, spec] of Object.entries(DATA.tables || {})) new SortTable(section(spec.title, "table-" + name), name, spec);
      for (const v of DATA.views || []) {
        const s = section(v.title, "view-" + v.name);
        if (v.note) s.appendChild(el("p", { cls: "note", text: v.note }));
        new SortTable(s, v.name, v.table);
      }
      if (DATA.facts && DATA.headline) section(DATA.facts_title || "Trace", "facts").appendChild(facts(DATA.facts));
    } catch (err) {
      fail(err);
      throw err;
    }
    ks.ready = true;
  }
  const deflated = deflatedPlaces(DATA, []);
  if (deflated.length) inflate(deflated).then(draw, (err) => { fail(err); ks.ready = true; });
  else draw();
})();
