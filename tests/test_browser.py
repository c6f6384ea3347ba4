"""The HTML pages in a real browser (headless Chromium through the DevTools protocol): they load with no
console error or CSP violation, hold the same numbers as ``--format json``, draw the expected lanes, zoom
and pan, show hover details, and stay safe with hostile names."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from browser import Browser, find_chromium
from conftest import write_trace

import kernscope
from kernscope.cli import main

pytestmark = pytest.mark.skipif(
    find_chromium() is None and os.environ.get("KERNSCOPE_REQUIRE_BROWSER") != "1",
    reason="no chromium (make test installs Debian's chromium package)",
)
EXAMPLE = Path(__file__).resolve().parents[1] / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"


@pytest.fixture(scope="module")
def browser():
    with Browser() as b:
        yield b


def _fresh(b: Browser) -> None:
    b.events.clear()


def test_report_loads_and_matches_json(browser, tmp_path, capsys):
    html = tmp_path / "r.html"
    assert main(["report", str(EXAMPLE), "-o", str(html), "--no-cache"]) == 0
    assert main(["analyze", str(EXAMPLE), "--format", "json", "--no-cache"]) == 0
    doc = json.loads(capsys.readouterr().out)
    _fresh(browser)
    browser.open(html.as_uri())
    assert browser.errors() == []
    # tables: every kernel row of the JSON, with the same count and total
    rows = browser.eval("kernscope.views.kernels.rows")
    cols = browser.eval("kernscope.views.kernels.cols")
    key = ("name", "launcher", "category", "decided_by")
    page = {tuple(r[cols.index(c)] for c in key): (r[cols.index("count")], r[cols.index("total_us")]) for r in rows}
    want = {tuple(k[c] for c in key): (k["count"], k["total_us"]) for k in doc["kernels"]}
    assert page == want and len(page) == len(doc["kernels"])
    cats = browser.eval("kernscope.views.categories.rows")
    assert {r[0]: r[2] for r in cats} == {c["category"]: c["total_us"] for c in doc["categories"]}
    # the rendered table cells hold the numbers too
    nth = cols.index("count") + 1
    first_cell = browser.eval(f"document.querySelector('table[data-table=kernels] tbody tr td:nth-child({nth})').textContent")
    assert first_cell == f"{doc['kernels'][0]['count']:,}"
    # timeline: one lane per (device, stream), events drawn
    lanes = browser.eval("kernscope.timeline.lanes.map(l => l.label)")
    gpu = kernscope.load(EXAMPLE, cache=False).gpu
    streams = gpu.select("device", "stream").unique().height
    assert len(lanes) == streams and all(label.startswith("GPU ") for label in lanes)
    assert browser.eval("kernscope.timeline.drawn") > 0
    assert browser.eval("kernscope.timeline.tl.steps.length") == len(doc["steps"])


def test_zoom_pan_and_hover(browser, tmp_path):
    html = tmp_path / "r.html"
    assert main(["report", str(EXAMPLE), "-o", str(html), "--no-cache", "--quiet"]) == 0
    _fresh(browser)
    browser.open(html.as_uri())
    box = browser.eval("(() => { const r = kernscope.timeline.canvas.getBoundingClientRect(); "
                       "window.scrollTo(0, r.top + window.scrollY - 100); const q = kernscope.timeline.canvas.getBoundingClientRect();"
                       "return [q.left, q.top, q.width, q.height]; })()")
    span0 = browser.eval("kernscope.timeline.t1 - kernscope.timeline.t0")
    x, y = box[0] + box[2] * 0.6, box[1] + 30
    for _ in range(6):
        browser.mouse("mouseWheel", x, y, deltaX=0, deltaY=-120)
    browser.eval("new Promise(r => requestAnimationFrame(() => r(1)))")
    span1 = browser.eval("kernscope.timeline.t1 - kernscope.timeline.t0")
    assert span1 < span0 * 0.5
    t0 = browser.eval("kernscope.timeline.t0")
    browser.mouse("mousePressed", x, y, button="left", clickCount=1)
    browser.mouse("mouseMoved", x - 200, y, button="left")
    browser.mouse("mouseReleased", x - 200, y, button="left", clickCount=1)
    browser.eval("new Promise(r => requestAnimationFrame(() => r(1)))")
    assert browser.eval("kernscope.timeline.t0") > t0  # dragged left: later times come into view
    assert "view" in browser.eval("kernscope.timeline.range.textContent")
    # hover over a drawn kernel: the tooltip names it
    browser.eval("kernscope.timeline.zoomTo(0, kernscope.timeline.span)")
    pos = browser.eval("""(() => { const T = kernscope.timeline; const r = T.canvas.getBoundingClientRect();
        let best = 0; for (let i = 1; i < T.dur.length; i++) if (T.dur[i] > T.dur[best]) best = i;
        const x = T.x(T.start[best] + T.dur[best] / 2), lane = T.laneFirst.findIndex((f, l) => best < T.laneFirst[l + 1]);
        return [r.left + x, r.top + T.axisH + lane * T.rowH + 8, T.tl.names[T.name[best]]]; })()""")
    browser.mouse("mouseMoved", pos[0], pos[1])
    assert browser.eval("kernscope.timeline.tip.style.display") == "block"
    assert pos[2] in browser.eval("kernscope.timeline.tip.textContent")
    browser.eval("kernscope.timeline.zoomTo(0, kernscope.timeline.span)")
    assert browser.errors() == []


def test_table_sort_and_filter(browser, tmp_path):
    html = tmp_path / "r.html"
    assert main(["report", str(EXAMPLE), "-o", str(html), "--no-cache", "--quiet"]) == 0
    _fresh(browser)
    browser.open(html.as_uri())
    n = browser.eval("kernscope.views.kernels.view.length")
    browser.eval("(() => { const t = kernscope.views.kernels; t.filter.value = 'gemm'; t.apply(); })()")
    m = browser.eval("kernscope.views.kernels.view.length")
    assert 0 < m < n
    assert all("gemm" in " ".join(map(str, r)).lower() for r in browser.eval("kernscope.views.kernels.view"))
    browser.eval("document.querySelectorAll('table[data-table=kernels] th')[4].click()")  # count
    counts = browser.eval("kernscope.views.kernels.view.map(r => r[4])")
    assert counts == sorted(counts, reverse=True)


def test_hostile_names_stay_text(browser, tmp_path):
    evil = ['</script><img src=x onerror="window.pwned=1">', "<b onmouseover=alert(1)>x</b>", "=cmd|' /C calc'!A0",
            "\u001b]8;;http://x\u0007link\u001b]8;;\u0007", "[link=https://evil]click[/link]"]
    ev = []
    for i, name in enumerate(evil):
        ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": 10 * i, "dur": 5,
                   "args": {"correlation": i + 1, "device": 0, "stream": 7}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10 * i - 2,
                   "dur": 1, "args": {"correlation": i + 1}})
    p = write_trace(tmp_path / "evil.json", ev)
    html = tmp_path / "evil.html"
    assert main(["report", str(p), "-o", str(html), "--no-cache", "--quiet"]) == 0
    text = html.read_text()
    assert "</script><img" not in text and "<b onmouseover" not in text
    _fresh(browser)
    browser.open(html.as_uri())
    assert browser.errors() == []
    assert browser.eval("document.querySelectorAll('img').length") == 0
    assert browser.eval("window.pwned === undefined")
    names = browser.eval("Array.from(document.querySelectorAll('table[data-table=kernels] tbody td:first-child')).map(t => t.textContent)")
    from kernscope.render.names import visible

    assert set(names) == {visible(n) for n in evil}  # control characters shown escaped, as in the terminal


def test_intra_timeline_page(browser, tmp_path):
    from kernscope.intra.simulate import Region, empty_buffer, fill_buffer

    regions = [Region([(1000 + b * 50 + k * 200, s, k % 3) for k in range(40) for s in (True, False)], t0=0, sm=b % 16)
               for b in range(2000)]
    # starts and ends alternate per task: fix end times after their starts
    for r in regions:
        r.records = [(t + (0 if s else 150), s, k) for (t, s, k) in r.records]
    buf = fill_buffer(empty_buffer(2000 * 80 + 64), regions)
    np.savez(tmp_path / "b.npz", buffer=buf, task_names=np.array(["load", "mma", "store"]))
    html = tmp_path / "t.html"
    assert main(["intra", "stats", str(tmp_path / "b.npz"), "--html", str(html)]) == 0
    _fresh(browser)
    browser.open(html.as_uri())
    assert browser.errors() == []
    assert browser.eval("kernscope.timeline.dur.length") == 2000 * 40
    assert browser.eval("kernscope.timeline.lanes[0].label").startswith("SM 0")
    assert browser.eval("kernscope.timeline.tl.categories") == ["load", "mma", "store"]
    before = browser.eval("kernscope.timeline.t1 - kernscope.timeline.t0")
    browser.eval("kernscope.timeline.zoom(0.1, 0.5)")
    assert browser.eval("kernscope.timeline.t1 - kernscope.timeline.t0") < before
    assert set(browser.eval("Object.keys(kernscope.views)")) >= {"tasks", "sms"}


def _view(browser: Browser, name: str) -> list[dict]:
    cols = browser.eval(f"kernscope.views[{json.dumps(name)}].cols")
    return [dict(zip(cols, r)) for r in browser.eval(f"kernscope.views[{json.dumps(name)}].rows")]


def test_multi_rank_page(browser, tmp_path, capsys):
    from test_ranks import synth_rank

    d = tmp_path / "job"
    d.mkdir()
    for r in range(3):
        synth_rank(d / f"trainer_rank{r}.json", r, world=3, info=False)
    html = tmp_path / "job.html"
    assert main(["report", str(d), "-o", str(html), "--no-cache", "-q", "--workers", "1"]) == 0
    assert main(["analyze", str(d), "--no-cache", "--format", "json", "--workers", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    _fresh(browser)
    browser.open(html.as_uri())
    assert browser.errors() == []
    ranks = _view(browser, "ranks")
    keys = ("rank", "kernel_time_us", "compute_us", "comm_us", "exposed_comm_us", "idle_us", "overlap_pct")
    assert [tuple(r[k] for k in keys) for r in ranks] == [tuple(r[k] for k in keys) for r in doc["ranks"]]
    assert [(s["step"], s["rank"], s["wait_us"]) for s in _view(browser, "stragglers")] == \
        [(s["step"], s["rank"], s["wait_us"]) for s in doc["stragglers"]]
    assert browser.eval("document.querySelectorAll('#chart-ranks canvas').length") == 1
    assert "rank 1" in browser.eval("document.querySelector('dl.facts').textContent")  # the worst straggler
    # the critical path's step_us beside step read as a second "step" column; every view has a title of words
    heads = browser.eval("[...document.querySelectorAll('th')].map(t => t.textContent.replace(/ [▲▼]$/, ''))")
    assert "step (µs)" in heads
    titles = browser.eval("[...document.querySelectorAll('h2')].map(h => h.textContent)")
    assert not [t for t in titles if t in ("findings", "findings by kind", "critical path")], titles
    assert any(t.startswith("Critical path per rank and step") for t in titles), titles


def test_diff_and_perf_model_views(browser, tmp_path, capsys):
    html = tmp_path / "d.html"
    assert main(["report", str(EXAMPLE), "--step", "2", "--diff", str(EXAMPLE), "--step-b", "3", "-o", str(html),
                 "--no-cache", "-q"]) == 0
    assert main(["diff", str(EXAMPLE), str(EXAMPLE), "--step", "2", "--step-b", "3", "--format", "json", "--no-cache"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # the report's sheet holds every modeled signature (with its `nested` flag), as `perf --all` lists them
    assert main(["perf", str(EXAMPLE), "--step", "2", "--format", "json", "--no-cache", "--all"]) == 0
    perf = json.loads(capsys.readouterr().out)
    _fresh(browser)
    browser.open(html.as_uri())
    assert browser.errors() == []
    page = {(k["name"], k["launcher"]): k["delta_us"] for k in _view(browser, "diff_kernels")}
    assert page == {(k["name"], k["launcher"]): k["delta_us"] for k in doc["kernels"]}
    cats = {c["category"]: (c["a_us"], c["b_us"]) for c in _view(browser, "diff_categories")}
    assert cats == {c["category"]: (c["a_us"], c["b_us"]) for c in doc["categories"]}
    heads = browser.eval("Array.from(document.querySelectorAll('table[data-table=unified_perf_summary] th'))"
                         ".map(t => t.textContent)")
    assert heads[:7] == ["name", "op class", "count", "kernel time", "tflops per s", "tb per s", "pct of peak"]
    ops = _view(browser, "unified_perf_summary")
    assert len(ops) == len(perf["ops"]) > 0
    assert sum(o["kernel_time_us"] for o in ops) == pytest.approx(sum(o["kernel_time_us"] for o in perf["ops"]))


def test_bench_dir_page(browser, tmp_path, capsys):
    from test_bench_dir import SIZES, TIMES, bench_trace

    root = tmp_path / "out"
    for (impl, i), us in TIMES.items():
        bench_trace(root / "gemm" / impl / f"input_{i}.json.gz", SIZES[i], us, impl)
    html = tmp_path / "b.html"
    assert main(["report", str(root), "--bench", "-o", str(html), "--no-cache", "-q"]) == 0
    _fresh(browser)
    browser.open(html.as_uri())
    assert browser.errors() == []
    cells = {(c["impl"], c["input"]): c for c in _view(browser, "cells")}
    assert {k: c["kernel_time_us"] for k, c in cells.items()} == {(impl, i): us for (impl, i), us in TIMES.items()}
    assert cells[("triton", 1)]["fastest"] is True and cells[("aten", 1)]["vs_fastest"] == pytest.approx(1.2)
    assert browser.eval("document.querySelectorAll('#chart-bench canvas').length") == 1


def test_first_screen_is_the_answer(browser, tmp_path, capsys):
    """The report opens on step time, GPU busy and the top categories (the JSON's values), not on metadata;
    headers over numbers are right-aligned and carry no unit suffix the cells contradict; every category of
    the timeline has its own colour."""
    html = tmp_path / "r.html"
    assert main(["report", str(EXAMPLE), "-o", str(html), "--no-cache", "-q"]) == 0
    # (the report's findings are the analysis's and the perf model's: --roofline)
    assert main(["analyze", str(EXAMPLE), "--format", "json", "--no-cache", "--roofline"]) == 0
    doc = json.loads(capsys.readouterr().out)
    _fresh(browser)
    browser.open(html.as_uri())
    assert browser.errors() == []
    ids = browser.eval("Array.from(document.querySelectorAll('main > section')).map(s => s.id)")
    assert ids[0] == "headline" and ids[1] == "timeline" and ids[-1] == "facts"
    text = browser.eval("document.getElementById('headline').textContent")
    steps = doc["steps"]
    mean_ms = sum(s["cpu_duration_us"] for s in steps) / len(steps) / 1000
    busy = next(t["percent"] for t in doc["timeline"] if t["type"] == "busy_time")
    assert f"{mean_ms:.3f} ms" in text and f"mean of {len(steps)} steps" in text and f"{busy:.1f}%" in text
    for c in doc["categories"][:3]:
        assert f"{c['pct']:.1f}% {c['category']}" in text
    # the top findings by kind (a rule in one place over steps once: its worst step's words, its steps and total), on
    # the first screen too, in the JSON's order of their worst instances
    shown = browser.eval("Array.from(document.querySelectorAll('#headline .findings div span')).map(s => s.textContent)")
    kinds: dict[tuple, list[dict]] = {}
    for f in doc["findings"]:
        kinds.setdefault((f["rule"], f["device"], f["rank"], f["op"], f["kernel"]), []).append(f)
    assert len(shown) == min(3, len(kinds)) and shown
    for group, line in zip(kinds.values(), shown):
        assert group[0]["text"] in line and (len(group) == 1 or f" · in {len(group)} steps: " in line)
    heads = browser.eval("Array.from(document.querySelectorAll('table[data-table=kernels] th'))"
                         ".map(t => [t.textContent, getComputedStyle(t).textAlign])")
    by = {h.split(" ")[0] if h != "%" else h: a for h, a in heads}
    assert by["total"] == by["count"] == by["%"] == "right" and by["name"] == "left"
    assert not any(h.endswith("_us") for h, _ in heads)
    # key columns first: what the row is, then its time and share
    assert [h.split(" ")[0] for h, _ in heads[:6]] == ["name", "launcher", "category", "count", "total", "%"]
    swatches = browser.eval("Array.from(document.querySelectorAll('#timeline .legend i')).map(i => getComputedStyle(i).backgroundColor)")
    assert len(swatches) == len(set(swatches)) == len({c["category"] for c in doc["categories"]})


def test_category_colours_cover_the_taxonomy_and_never_repeat():
    from kernscope.analyze.categories import CATEGORIES
    from kernscope.render.html import CATEGORY_COLORS

    assert set(CATEGORY_COLORS) == set(CATEGORIES)
    assert len(set(CATEGORY_COLORS.values())) == len(CATEGORY_COLORS)


def test_bidi_controls_in_names_are_shown_escaped(browser, tmp_path):
    """A kernel name with U+202E (right-to-left override) would display as another name; the page shows the
    escape, as the terminal does, and no override character reaches the document."""
    from conftest import write_trace

    name = "evil\u202ekernel_gnp"
    tr = write_trace(tmp_path / "bidi.json", [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 5, "dur": 2,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": 10, "dur": 5,
         "args": {"correlation": 1, "stream": 7, "device": 0}}])
    html = tmp_path / "bidi.html"
    assert main(["report", str(tr), "-o", str(html), "--no-cache", "-q"]) == 0
    _fresh(browser)
    browser.open(html.as_uri())
    assert browser.errors() == []
    cells = browser.eval("Array.from(document.querySelectorAll('table[data-table=kernels] tbody td:first-child')).map(t => t.textContent)")
    assert cells == ["evil\\u202ekernel_gnp"]
    assert browser.eval("document.documentElement.outerHTML.indexOf('\\u202e')") == -1


def test_memory_chart_and_cycle_axis(browser, tmp_path):
    """#29.2: the report of a profile_memory trace draws the memory chart with its peak; #28.2: an intra timeline in
    SM cycles labels its axis and hovers in cycles, never as time."""
    mem = Path(__file__).parent / "data" / "memory_h100" / "h100_gpt_memory.pt.trace.json.gz"
    html = tmp_path / "m.html"
    assert main(["report", str(mem), "-o", str(html), "-q"]) == 0
    _fresh(browser)
    browser.open(html.as_uri())
    assert browser.errors() == []
    assert browser.eval("document.querySelectorAll('#memory canvas').length") == 1
    assert "peak 1.09 GiB allocated" in browser.eval("document.querySelector('#memory p.note').textContent")
    # a JAX profile's memory: XLA's allocator events, no reserved bytes
    jax = Path(__file__).parent / "data" / "jax" / "transformer" / "vm.xplane.pb.gz"
    assert main(["report", str(jax), "-o", str(html), "-q", "--no-cache"]) == 0
    _fresh(browser)
    browser.open(html.as_uri())
    assert browser.errors() == []
    assert browser.eval("document.querySelectorAll('#memory canvas').length") == 1
    assert "peak 1.01 GiB allocated" in browser.eval("document.querySelector('#memory p.note').textContent")
    # a CPU allocator that peaked at 8 bytes beside the GPU's 2.86 GiB (a Hugging Face training step): its line of
    # words, no chart (a chart of 8 B had been drawn)
    hf = Path(__file__).parent / "data" / "hf_h200" / "llama_train.pt.trace.json.gz"
    assert main(["report", str(hf), "-o", str(html), "-q", "--no-cache"]) == 0
    _fresh(browser)
    browser.open(html.as_uri())
    assert browser.errors() == []
    assert browser.eval("document.querySelectorAll('#memory canvas').length") == 1
    notes = browser.eval("Array.from(document.querySelectorAll('#memory p.note')).map(p => p.textContent)")
    assert [n.split(": peak")[0] for n in notes] == ["cpu", "cuda:0"]
    assert "peak 8 B allocated" in notes[0] and notes[0].endswith("(too small to chart)")
    assert "peak 2.86 GiB allocated" in notes[1] and "filled: allocated" in notes[1]
    proton = Path(__file__).parent / "data" / "proton_h100" / "tutorial_override.chrome_trace.gz"
    page = tmp_path / "c.html"
    assert main(["intra", "stats", str(proton), "--html", str(page)]) == 0
    _fresh(browser)
    browser.open(page.as_uri())
    assert browser.errors() == []
    assert browser.eval("kernscope.timeline.fmt(1500)") == "1.50 kcycles"


def test_report_with_intra_records_under_their_kernel(browser, tmp_path):
    """``intra align -o x.html`` (= ``report --intra``): the real H100 run's records on the report's timeline, in
    rows right below the kernel's stream; zooming onto one launch draws its records."""
    data = Path(__file__).parent / "data" / "align_h100"
    html = tmp_path / "m.html"
    assert main(["intra", "align", str(data / "train.pt.trace.json.gz"), str(data / "bias_gelu.perfetto-trace.gz"),
                 "-o", str(html)]) == 0
    _fresh(browser)
    browser.open(html.as_uri())
    assert browser.errors() == []
    labels = browser.eval("kernscope.timeline.lanes.map(l => l.label)")
    at = labels.index("GPU 0 \u00b7 stream 7")
    intra = [i for i, lbl in enumerate(labels) if lbl.startswith("\u21b3 bias_gelu \u00b7 SM ")]
    assert intra and intra == list(range(at + 1, at + 1 + len(intra)))
    first = browser.eval("kernscope.timeline.laneFirst")
    assert sum(first[i + 1] - first[i] for i in intra) == 4 * 4096
    cats = browser.eval("kernscope.timeline.tl.categories")
    assert any(c.startswith("intra \u00b7 ") for c in cats)
    # zoom onto the first record's launch: records drawn in the intra rows
    s0 = browser.eval(f"kernscope.timeline.start[{first[intra[0]]}]")
    browser.eval(f"kernscope.timeline.t0 = {s0} - 2000; kernscope.timeline.t1 = {s0} + 20000; kernscope.timeline.draw()")
    assert browser.eval("kernscope.timeline.drawn") > len(intra)
    assert set(browser.eval("Object.keys(kernscope.views)")) >= {"intra_launches", "kernels"}


def test_a_jax_reports_critical_path_carries_its_note(browser, tmp_path):
    """The critical path's notes (a JAX path blind to the host's untraced wait) were in the terminal and JSON only;
    the HTML report shows them above the path's table."""
    jax = Path(__file__).parent / "data" / "jax" / "transformer" / "vm.xplane.pb.gz"
    html = tmp_path / "j.html"
    assert main(["report", str(jax), "-o", str(html), "--no-cache", "-q"]) == 0
    _fresh(browser)
    browser.open(html.as_uri())
    assert browser.errors() == []
    note = browser.eval("document.querySelector('#view-critical_path p.note').textContent")
    assert note.startswith("XLA records no event for the host waiting on the GPU") and "3 of 3 steps" in note


def test_a_two_gpu_reports_busy_card_is_the_gpus_mean(browser, tmp_path):
    """One process on two GPUs (a pipeline, tests/data/multigpu_h200): the first screen's GPU busy is the GPUs' mean
    (49.1%), said so; it read 97.8% (any GPU busy), though each GPU idled about half of the time."""
    mp = Path(__file__).parent / "data" / "multigpu_h200" / "torch_mp.pt.trace.json.gz"
    html = tmp_path / "mp.html"
    assert main(["report", str(mp), "-o", str(html), "--no-cache", "-q"]) == 0
    _fresh(browser)
    browser.open(html.as_uri())
    assert browser.errors() == []
    text = browser.eval("document.getElementById('headline').textContent")
    assert "49.1%" in text and "mean of 2 GPUs" in text and "97.8%" not in text
    # the breakdown per GPU, then their sum
    heads = browser.eval("Array.from(document.querySelectorAll('#breakdown h3')).map(h => h.textContent)")
    assert heads == ["GPU 0", "GPU 1", "All 2 GPUs (device time: each GPU's time summed)"]
    busy = browser.eval("Array.from(document.querySelectorAll('#breakdown .bd-row')).filter(r => "
                        "r.querySelector('.bd-label').textContent === 'busy time').map(r => r.querySelector('.bd-val').textContent)")
    assert [b.split(" · ")[1] for b in busy] == ["46.1%", "52.1%", "49.1%"]


_ARRAYS = ("(() => { const t = kernscope.timeline; let s = 0, d = 0, n = 0, c = 0; for (let i = 0; i < t.start.length; i++) "
           "{ s += t.start[i] * (i % 7 + 1); d += t.dur[i]; n += t.name[i] * (i % 5 + 1); c += t.cat[i]; } "
           "return [t.start.length, s, d, n, c, t.drawn > 0]; })()")


def test_a_report_with_deflated_arrays_draws_the_same_timeline_and_memory(browser, tmp_path, monkeypatch):
    """Arrays past ``DEFLATE_ABOVE`` go into the page deflated and the page inflates them before it draws: with every
    array deflated, the timeline's arrays (weighted sums of every element) and the memory chart's points are the plain
    page's, and nothing fails."""
    import importlib

    html_mod = importlib.import_module("kernscope.render.html")
    trace = Path(__file__).parent / "data" / "memory_h100" / "h100_gpt_memory.pt.trace.json.gz"
    got = {}
    for name, above in (("plain", 1 << 40), ("deflated", 0)):
        monkeypatch.setattr(html_mod, "DEFLATE_ABOVE", above)
        out = tmp_path / f"{name}.html"
        assert main(["report", str(trace), "-o", str(out), "--no-cache", "--quiet"]) == 0
        assert ('{"deflate":' in out.read_text()) == (name == "deflated")
        _fresh(browser)
        browser.open(out.as_uri())
        assert browser.errors() == []
        memory = (browser.eval("document.querySelectorAll('#memory canvas').length"),
                  browser.eval("document.querySelector('#memory p.note').textContent"))
        got[name] = (browser.eval(_ARRAYS), memory)
    assert got["plain"] == got["deflated"] and got["plain"][0][0] > 0 and got["plain"][0][5]
    assert got["plain"][1][0] == 1 and "peak 1.09 GiB allocated" in got["plain"][1][1]
