"""``kernscope intra``: statistics, HTML timeline and exports for intra-kernel profiles."""

from __future__ import annotations

from typing import Any

import click

#: the merged outputs written as Perfetto protobuf (``intra align -o``)
PERFETTO_SUFFIXES = (".perfetto-trace", ".pftrace", ".perfetto-trace.gz", ".pftrace.gz")

_quiet = click.option("--quiet", "-q", is_flag=True, help="No notices on stderr.")


@click.group()
def intra() -> None:
    """Intra-kernel (Triton) profiles: buffers (.npz), Perfetto or Chrome traces."""


@intra.command()
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--task-names", help="Comma-separated names for task types 0, 1, ... (raw buffers).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--html", "html_out", type=click.Path(dir_okay=False), help="Also write an HTML timeline (rows = SM lanes).")
@click.option("--hatchet", "hatchet_out", type=click.Path(dir_okay=False),
              help="Also write the op-measure scope tree as a hatchet file (proton-viewer and kernscope intra view read it).")
@click.option("--clock-ghz", type=click.FloatRange(min=0.01, max=10.0), default=None,
              help="SM clock (cycles per ns): turns cycles into time and time into cycles [default: the clock a "
                   "cycle-mode buffer measured, the file's own, or FILE.clock.json recorded with the run; without "
                   "one, Proton's cycles stay cycles and no cycle column is made up].")
@click.option("--kernel", default=None, help="Proton traces with several kernels: only this kernel's launches.")
@_quiet
def stats(path: str, task_names: str | None, fmt: str, html_out: str | None, hatchet_out: str | None,
          clock_ghz: float | None, kernel: str | None = None, quiet: bool = False) -> None:
    """Per task/scope count/mean/p50/p95/max, the scope tree (op-measure), per-SM busy fraction, tail and SM imbalance.

    Reads kernscope buffers (.npz), kernscope's Perfetto/Chrome exports and Proton's instrumentation traces
    (.chrome_trace, optionally gzipped)."""

    import polars as pl
    from rich.console import Console

    from ..errors import KernscopeError
    from ..files import write_text
    from ..render.formats.json import strict_dumps
    from ..render.intra import render_stats, render_tree
    from . import stats as st
    from .export import assign_lanes
    from .hatchet import tree_to_hatchet
    from .io import load_tasks
    from .units import clock_for, in_time

    loaded = load_tasks(path, task_names.split(",") if task_names else None)
    clock = clock_for(loaded, clock_ghz, path)
    t, unit = in_time(loaded.tasks, loaded.unit, clock)
    units = loaded.launches
    if kernel is not None:
        names = sorted({k for k in units["kernel"].to_list() if k}) if units is not None else []
        if kernel not in names:
            raise KernscopeError(f"{path}: no kernel {kernel!r} in this trace"
                                 + (f"; it has: {', '.join(names)}" if names else " (one kernel, unnamed: omit --kernel)"))
        assert units is not None
        units = units.filter(pl.col("kernel") == kernel)
        t = t.filter(pl.col("block").is_in(units["block"].implode()))
    per_task = st.task_stats(t)
    summary = st.kernel_summary(t)
    per_sm = st.sm_stats(t)
    if units is not None and units.select("kernel", "launch").n_unique() > 1:
        # span, tail and SM balance mean something per launch only
        summary = {k: summary[k] for k in ("tasks", "blocks", "sms")}
        launches, sms = [], []
        for (k, n), u in units.group_by("kernel", "launch", maintain_order=True):
            one = t.filter(pl.col("block").is_in(u["block"].implode()))
            launches.append({"kernel": k, "launch": n, **st.kernel_summary(one)})
            sms.append(st.sm_stats(one).select(pl.lit(k).alias("kernel"), pl.lit(n, pl.Int64).alias("launch"), pl.all()))
        summary["launches"] = launches
        per_sm = pl.concat(sms)
    tree = st.scope_tree(t, clock_ghz=clock.ghz, unit=unit)
    overlap, overlap_cta = st.group_overlap(t)
    if overlap.height:  # warp groups (warp-specialized kernels): what each group's tasks overlap, per CTA
        summary["group_overlap"] = overlap.to_dicts()
        summary["group_overlap_per_cta"] = overlap_cta.to_dicts()
    summary["source"] = loaded.source
    summary["time_unit"] = unit
    summary["clock_ghz"] = clock.ghz
    summary["clock_source"] = clock.source
    if loaded.decoded is not None:
        d = loaded.decoded
        if d.stage_slots:
            summary["staged_ring_slots"] = d.stage_slots
            summary["staged_in"] = d.stage_memory
        if d.warps is not None:
            summary["sampled_warps"] = ",".join(map(str, d.warps))
            if d.silent_warps:
                summary["warps_without_records"] = ",".join(map(str, d.silent_warps))
        summary.update(records=d.records, dropped=d.dropped, ring_overwritten=d.ring_overwritten, unpaired=d.unpaired,
                       capacity_per_region=d.capacity_per_region,
                       unbalanced=[{"scope": n, "enter_without_exit": a, "exit_without_enter": b} for n, a, b in d.unbalanced])
    if loaded.finalize is not None and loaded.finalize.height:
        f = loaded.finalize["finalize_ns"]
        summary.update(finalize_ctas=loaded.finalize.height, finalize_mean_ns=float(f.mean() or 0),  # type: ignore[arg-type]
                       finalize_max_ns=int(f.max() or 0))  # type: ignore[arg-type]
    if html_out:
        from ..render.intra_html import render_html

        write_text(html_out, render_html(t, assign_lanes(t).units, summary, per_task, per_sm, title=path))
    if hatchet_out:
        write_text(hatchet_out, strict_dumps(tree_to_hatchet(tree, kernel=path.rsplit("/", 1)[-1])))
    if fmt == "json":
        click.echo(stats_json(summary, per_task, per_sm, tree, unit))
    else:
        con = Console()
        render_stats(con, path, summary, per_task)
        if tree.height and tree["depth"].max():  # nested scopes: show the tree too
            render_tree(con, "scope tree (op-measure)", tree, *(("total_ns", "time/ns") if unit == "ns" else ("total_cycles", "cycles")))


def stats_json(summary: dict[str, Any], per_task: Any, per_sm: Any, tree: Any, unit: str) -> str:
    """The ``intra stats --format json`` document; a table in cycles has ``*_cycles`` keys, never ``*_ns``."""
    from ..render.formats.json import strict_dumps
    from .units import cycle_keys

    doc: dict[str, Any] = {"summary": summary, "tasks": per_task.to_dicts(), "sms": per_sm.to_dicts()}
    if unit == "cycles":
        doc = cycle_keys(doc)
    doc["scopes"] = tree.to_dicts()
    return strict_dumps(doc, indent=2)


@intra.command()
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("-m", "--metric", default=None,
              help="cycles, normalized_cycles, time/ns, time/us or count [default: time/ns; for a hatchet file the "
                   "first of these it has].")
@click.option("--clock-ghz", type=click.FloatRange(min=0.01, max=10.0), default=None,
              help="SM clock (cycles per ns): converts cycles to time and time to cycles [default: the clock the "
                   "file states or FILE.clock.json recorded with the run; else each unit stays as recorded].")
@_quiet
def view(path: str, metric: str | None, clock_ghz: float | None, quiet: bool = False) -> None:
    """The scope tree of a hatchet file (kernscope's or Proton's) or of any intra-kernel trace, like proton-viewer."""

    from rich.console import Console

    from ..errors import KernscopeError
    from ..render.intra import render_tree
    from . import stats as st
    from .hatchet import VIEW_METRICS, is_hatchet, pick_metric, read_hatchet
    from .io import load_tasks
    from .units import clock_for, in_time

    if metric is not None and metric not in VIEW_METRICS:
        raise KernscopeError(f"unknown metric {metric!r}; use one of {', '.join(VIEW_METRICS)}")
    tree = read_hatchet(path) if is_hatchet(path) else None
    if tree is not None:  # the values proton-viewer shows: inclusive sums where hatchet makes them
        choice = pick_metric(tree, metric, clock_ghz, path)
        if choice.note and not quiet:
            click.echo(f"kernscope: {choice.note}", err=True)
        render_tree(Console(), path, choice.tree, choice.column, choice.metric,
                    count_column="count (inc)" if "count (inc)" in tree.columns else "count")
        return
    loaded = load_tasks(path)
    clock = clock_for(loaded, clock_ghz, path)
    t, unit = in_time(loaded.tasks, loaded.unit, clock)
    tree = st.scope_tree(t, clock_ghz=clock.ghz, unit=unit)
    asked = metric or ("time/ns" if unit == "ns" else "cycles")
    shown = asked
    if tree.height and tree[VIEW_METRICS[asked][0]].null_count() == tree.height:  # a unit this file cannot give
        shown = "cycles" if asked.startswith("time/") else "time/ns"
        if not quiet:
            click.echo(f"kernscope: {path}: no {'time' if asked.startswith('time/') else 'cycles'} without an SM clock; "
                       f"showing {shown} (--clock-ghz G converts)", err=True)
    render_tree(Console(), path, tree, VIEW_METRICS[shown][0], shown)


@intra.command()
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, help="Output: .perfetto-trace (protobuf) or .json (Chrome).")
@click.option("--task-names", help="Comma-separated names for task types 0, 1, ... (raw buffers).")
@click.option("--clock-ghz", type=click.FloatRange(min=0.01, max=10.0), default=None,
              help="SM clock (cycles per ns) that turns a trace in cycles (Proton's) into time.")
@_quiet
def export(path: str, output: str, task_names: str | None, clock_ghz: float | None = None, quiet: bool = False) -> None:
    """Convert a buffer dump or trace to Perfetto protobuf or Chrome JSON (times in ns; a trace in cycles
    without a known SM clock is written 1 cycle = 1 ns, and said so)."""
    from .export import write_chrome, write_perfetto
    from .io import load_tasks
    from .units import clock_for, in_time

    loaded = load_tasks(path, task_names.split(",") if task_names else None)
    t, unit = in_time(loaded.tasks, loaded.unit, clock_for(loaded, clock_ghz, path))
    out = write_chrome(t, output, unit=unit) if output.endswith(".json") else write_perfetto(t, output)
    if not quiet:
        click.echo(f"wrote {out} ({t.height:,} slices)", err=True)
        if unit == "cycles":
            click.echo(f"kernscope: {path}: times are SM cycles, written as 1 cycle = 1 ns (no SM clock known; "
                       f"--clock-ghz G converts them)", err=True)


@intra.command()
@click.argument("host_trace", type=click.Path(dir_okay=False))
@click.argument("intra_files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-o", "--output", default=None, type=click.Path(dir_okay=False),
              help="Write the host trace with the records under their kernels: .json or .json.gz (Perfetto UI, "
                   "chrome://tracing and kernscope analyze read it), .perfetto-trace or .pftrace (Perfetto's protobuf; "
                   "the records on child tracks of the kernel's stream, flows from launches to kernels), or .html "
                   "(kernscope's report with the records on its timeline, rows below the kernel's stream).")
@click.option("--kernel", default=None, help="Kernel name in the host trace [default: the intra file's kernel "
                                             "(Proton's traces name it; intra run names files KERNEL.perfetto-trace)].")
@click.option("--clock-ghz", type=float, default=None,
              help="SM clock for records in cycles (Proton's cycle-mode traces) [default: measured or stated].")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@_quiet
def align(host_trace: str, intra_files: tuple[str, ...], output: str | None, kernel: str | None,
          clock_ghz: float | None, fmt: str, quiet: bool = False) -> None:
    """Place intra-kernel records (INTRA_FILES: kernscope buffers/traces, Proton's traces) under their kernels in
    HOST_TRACE (a Kineto trace of the same run): each profiled launch is matched to its kernel by name and time
    order, on the GPU clock both share, and the residual misalignment is reported per launch."""

    from rich.console import Console

    from .. import load as load_trace
    from ..errors import KernscopeError
    from ..load.source import Limits, open_trace
    from ..render.formats.json import strict_dumps
    from ..render.intra import render_alignment
    from ..sink import write_bytes
    from .align import align_files

    if output is not None and not output.endswith((".json", ".json.gz", ".html", *PERFETTO_SUFFIXES)):
        raise KernscopeError(f"{output}: the merged output is Chrome/Kineto JSON (.json, .json.gz), a Perfetto trace "
                             "(.perfetto-trace, .pftrace; .gz too) or the HTML report (.html)")
    trace = load_trace(host_trace)
    done = align_files(trace, intra_files, kernel, clock_ghz)
    if output is not None and output.endswith(".html"):
        from ..analyze.report import Report
        from ..analyze.summary import analyze
        from ..render.formats import render
        from .align import launches_sheet, timeline_rows

        page = render(Report(analyze(trace), intra_launches=launches_sheet(done),
                             intra_rows=timeline_rows([al for _, al in done])), "html")
        assert isinstance(page, bytes)
        write_bytes(output, page)
    elif output is not None and output.endswith(PERFETTO_SUFFIXES):
        from ..render.intra_align import encode
        from ..render.perfetto import perfetto_trace

        write_bytes(output, encode(perfetto_trace(trace, [a for _, a in done]), output))
    elif output is not None:
        from ..render.intra_align import encode, merged_json

        src = open_trace(host_trace)
        try:
            host = bytes(src.read_all(Limits()))
        finally:
            src.close()
        write_bytes(output, encode(merged_json(host, trace, [a for _, a in done]), output))
    if fmt == "json":
        click.echo(strict_dumps({"host_trace": host_trace, "output": output, "alignments": [
            {"file": f, "kernel": a.kernel, "matched": a.matched, "launches_profiled": a.launches.height,
             "offset_ns": a.offset_ns, "drift_ppm": a.drift_ppm, "notes": a.notes, "launches": a.launches.to_dicts()}
            for f, a in done]}, indent=2))
        return
    con = Console()
    for f, a in done:
        render_alignment(con, f, a)
    if output is not None and not quiet:
        click.echo(f"wrote {output}", err=True)


@intra.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--kernel", "kernels", multiple=True, help="Kernel (function) name to profile; repeat for several "
                                                         "(default: every launched kernel).")
@click.option("--regions", default="body,loops", show_default=True, help="Scopes: body, loops (each top-level loop).")
@click.option("--lines", "line_specs", multiple=True, metavar="KERNEL:FIRST-LAST[:NAME]",
              help="A scope around the top-level statements of these source lines of KERNEL's file.")
@click.option("--max-launches", type=click.IntRange(min=1), default=16, show_default=True,
              help="Profile the first N launches of each kernel; later ones run unprofiled.")
@click.option("--warps", "warp_spec", default=None, metavar="0,1,2,3",
              help="Warp sampling: these warps of each program record on their own (one track per warp).")
@click.option("-o", "--output", "out_dir", default="kernscope-intra", show_default=True, help="Directory for the results.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.argument("program", nargs=-1, type=click.UNPROCESSED, required=True)
def run(kernels: tuple[str, ...], regions: str, line_specs: tuple[str, ...], max_launches: int, warp_spec: str | None,
        out_dir: str, fmt: str, program: tuple[str, ...]) -> None:
    """Run PROGRAM (python script.py ...) with its kernels profiled, without editing them: each chosen kernel's
    launches run an instrumented copy (scopes around its body and top-level loops, or chosen lines).

    Writes <output>/<kernel>.perfetto-trace and <kernel>.hatchet per kernel and prints scope statistics."""
    import os

    from rich.console import Console

    from ..errors import KernscopeError
    from ..files import write_text
    from ..render.formats.json import strict_dumps
    from ..render.intra import render_tree
    from . import stats as st
    from .export import write_perfetto
    from .hatchet import tree_to_hatchet
    from .run import run_script
    from .units import device_clock, write_sidecar

    lines: dict[str, list[tuple[int, int, str]]] = {}
    for spec in line_specs:
        try:
            kname, rng, *rest = spec.split(":")
            a, b = (int(x) for x in rng.split("-"))
        except ValueError:
            raise KernscopeError(f"--lines {spec!r}: expected KERNEL:FIRST-LAST[:NAME]") from None
        lines.setdefault(kname, []).append((a, b, rest[0] if rest else f"lines {a}-{b}"))
    warps: list[int] = []
    if warp_spec:
        try:
            warps = [int(w) for w in warp_spec.split(",") if w.strip()]
        except ValueError:
            raise KernscopeError(f"--warps {warp_spec!r}: expected warp ids like 0,1,2,3") from None
    # (with --format json the program's own prints go to stderr: stdout is the JSON document alone)
    res = run_script(program, kernels=kernels, regions=[r.strip() for r in regions.split(",") if r.strip()],
                     lines=lines, max_launches=max_launches, warps=warps, quiet_stdout=fmt == "json")
    if res.kernels:  # (nothing profiled, nothing written: no empty folder left behind)
        os.makedirs(out_dir, exist_ok=True)
    clock = device_clock()  # the GPU the kernels just ran on: cycles in the trees, and recorded beside each trace
    kernels_doc: list[dict[str, object]] = []
    doc: dict[str, object] = {"program": list(program), "exit_code": res.exit_code, "error": res.error,
                              "kernels": kernels_doc,
                              "clock_ghz": clock.ghz if clock else None, "clock_source": clock.source if clock else "unknown"}
    con = Console(stderr=fmt == "json")
    for name, ik in res.kernels.items():
        t = ik.tasks()
        base = os.path.join(out_dir, name)
        shown = t.with_columns((t["block"] + t["launch"] * (int(t["block"].max() or 0) + 1)).alias("block")) if t.height else t
        write_perfetto(shown.drop("launch"), base + ".perfetto-trace", list(ik.scopes))
        write_sidecar(base + ".perfetto-trace", clock)
        tree = st.scope_tree(t, clock_ghz=clock.ghz if clock else None)
        write_text(base + ".hatchet", strict_dumps(tree_to_hatchet(tree, kernel=name)))
        kernels_doc.append({"name": name, "launches": ik.launches, "scopes": tree.to_dicts(),
                               "dropped": ik.dropped, "unbalanced": ik.unbalanced,
                               "files": [base + ".perfetto-trace", base + ".hatchet"]})
        if fmt == "table":
            render_tree(con, f"{name}: {ik.launches} profiled launch(es) -> {base}.perfetto-trace", tree, "total_ns", "time/ns")
    if not res.kernels:
        con.print(f"no chosen kernel was launched (defined: {', '.join(res.defined) or 'none'})")
    if fmt == "json":
        click.echo(strict_dumps(doc, indent=2))
    if res.error is not None:  # (the kernels launched before the error are profiled above)
        from ..errors import PartialFailure

        raise PartialFailure(f"{res.script}: the program raised {res.error} (its traceback above); the kernels it "
                             "launched before are profiled")


@intra.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--kernel", "kernels", multiple=True, help="Kernel (function) name to instrument; repeat for several "
                                                         "(default: every compiled kernel).")
@click.option("--regions", default="body,loops", show_default=True,
              help="proton.record scopes: body (the whole kernel), loops (each top-level loop, named loop@L<line>).")
@click.option("--mode", default=None, metavar="MODE",
              help="Proton instrumentation mode, e.g. 'default:optimizations=clock32,time_shift' or "
                   "'default:sampling_strategy=selective:sampling_options=0,1,2,3'.")
@click.option("--no-session", is_flag=True, help="The script starts its own Proton session (as Proton's tutorial does).")
@click.option("-o", "--output", "out_dir", default="kernscope-override", show_default=True,
              help="Directory kept for the TTGIR dump, the edited TTGIR and Proton's trace.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@_quiet
@click.argument("program", nargs=-1, type=click.UNPROCESSED, required=True)
@click.pass_context
def override(ctx: click.Context, kernels: tuple[str, ...], regions: str, mode: str | None, no_session: bool,
             out_dir: str, fmt: str, program: tuple[str, ...], quiet: bool = False) -> None:
    """Proton's TTGIR-override workflow in one command: run PROGRAM (python script.py ...) once to dump each kernel's
    TTGIR, insert proton.record scopes (kernel body, top-level loops), run it again with TRITON_KERNEL_OVERRIDE under a
    Proton instrumentation session, and show the scopes of Proton's trace (<output>/proton.chrome_trace).

    Needs a GPU and triton with Proton. For kernscope's own records without Proton, use `kernscope intra run`."""
    from ..errors import KernscopeError
    from .override import run_override

    res = run_override(program, out_dir, regions=[r.strip() for r in regions.split(",") if r.strip()],
                       kernels=kernels, mode=mode, session=not no_session)
    for f in res.files if not quiet else []:
        click.echo(f"instrumented {f.kernel}: {', '.join(f.scopes)} ({f.path})", err=True)
    if res.trace is None:
        raise KernscopeError(f"the instrumented run wrote no Proton trace ({out_dir}/proton.chrome_trace"
                             + (", or a new .chrome_trace here" if no_session else "") + ")")
    if not quiet:
        click.echo(f"Proton trace: {res.trace}", err=True)
    ctx.invoke(stats, path=res.trace, task_names=None, fmt=fmt, html_out=None, hatchet_out=None, clock_ghz=None,
               quiet=quiet)
