"""``kernscope bench``: operators x implementations x inputs, measured properly."""

from __future__ import annotations

import click


def _split(v: str | None) -> list[str]:
    return [x.strip() for x in v.split(",") if x.strip()] if v else []


@click.command()
@click.option("--op", "op_name", help="Operator to run (see --list-ops).")
@click.option("--op-module", multiple=True, help="Python file or module defining extra Operator classes.")
@click.option("--list-ops", is_flag=True, help="List operators and exit.")
@click.option("--list-impls", is_flag=True, help="List the implementations of --op and exit.")
@click.option("--only", help="Comma-separated implementations to run.")
@click.option("--skip", help="Comma-separated implementations to skip.")
@click.option("--num-inputs", type=click.IntRange(min=1), help="Run the first N inputs.")
@click.option("--input-id", type=click.IntRange(min=0), help="Run only this input.")
@click.option("--metrics", default="latency", show_default=True,
              help="Comma-separated: latency,tflops,gbps,speedup,accuracy,gpu_peak_mem,kineto_trace")
@click.option("--mode", type=click.Choice(["fwd", "bwd", "fwd_bwd"]), default="fwd", show_default=True)
@click.option("--dtype", help="torch dtype name (default: the operator's).")
@click.option("--warmup", type=float, default=25.0, show_default=True, help="Warm-up time in milliseconds.")
@click.option("--rep", type=float, default=100.0, show_default=True, help="Measurement time in milliseconds.")
@click.option("--cudagraph", is_flag=True, help="Time CUDA-graph replays (flush inside the graph, subtracted).")
@click.option("--device", default="cuda", show_default=True, help="cuda, cuda:N or cpu.")
@click.option("--output-dir", default="kernscope-bench", show_default=True, help="Where Kineto traces go.")
@click.option("--csv", "csv_out", type=click.Path(dir_okay=False), help="Write the long result table as CSV.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Write all results (raw samples too) as JSON.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--keep-going", is_flag=True, help="Show a failing implementation's error in the table and continue.")
@click.option("--interleave/--no-interleave", default=True, show_default=True,
              help="Time the impls of an input round-robin in small batches, so clock drift hits them alike.")
@click.option("--batch-ms", type=float, default=20.0, show_default=True, help="GPU time per batch when interleaving (ms).")
@click.option("--cooldown", type=float, default=0.0, show_default=True, help="Seconds to idle before each input.")
@click.option("--duration", type=float, help="Seconds of timed calls per cell (instead of --rep).")
@click.option("--compare", nargs=2, type=click.Path(dir_okay=False), metavar="RUN_A.json RUN_B.json",
              help="Compare two --json result files cell by cell (B vs A: faster, slower or within noise, with the test "
                   "that fits the samples and its effect size); runs nothing.")
@click.option("--lock-clocks", metavar="max|MHZ", help="Try to lock the SM clock for the run (nvidia-smi, needs root); "
                                                       "the output says whether it worked.")
def bench(op_name, op_module, list_ops, list_impls, only, skip, num_inputs, input_id, metrics, mode, dtype, warmup, rep,
          cudagraph, device, output_dir, csv_out, json_out, fmt, keep_going, interleave, batch_ms, cooldown, duration,
          compare, lock_clocks) -> None:
    """Benchmark an operator's implementations; with kineto_trace, analyze every trace too."""
    import importlib.util
    import shutil
    import sys

    from ..errors import KernscopeError
    from ..files import write_text
    from ..render.formats import Options, text
    from .operators import builtin_registry

    if compare:
        from .compare import compare_runs

        # (a run's options beside --compare, which runs nothing, were ignored: --json FILE wrote no file)
        ctx = click.get_current_context()
        given = [p.opts[0] for p in ctx.command.params if isinstance(p, click.Option) and p.name not in ("compare", "fmt")
                 and ctx.get_parameter_source(p.name or "") == click.core.ParameterSource.COMMANDLINE]
        if given:
            raise KernscopeError(f"--compare compares two result files and runs nothing: {', '.join(given)} "
                                 f"{'does' if len(given) == 1 else 'do'} not apply to it")

        width = max(40, shutil.get_terminal_size((80, 24)).columns)
        body = text(compare_runs(*compare), "json" if fmt == "json" else "table", Options(width=width))
        click.echo(body, nl=not body.endswith("\n"))
        return
    reg = builtin_registry()
    for m in op_module:
        reg.load_module(m)
    if list_ops:
        for n in reg.names():
            cls = reg.get(n)
            click.echo(f"{n:18s} {', '.join(s.name + ('*' if s.baseline else '') for s in cls.impls())}")
        return
    if not op_name:
        raise KernscopeError("--op is required (see --list-ops)")
    cls = reg.get(op_name)
    if importlib.util.find_spec("torch") is None:
        raise KernscopeError('the benchmark harness needs torch (and triton for the Triton implementations): '
                             'pip install "kernscope[gpu]"')
    if list_impls:
        from .runner import installed

        for s in cls.impls():
            flags = [f for f, on in (("baseline", s.baseline), ("needs CUDA", s.needs_cuda)) if on]
            if not installed(s):
                flags.append(f"needs {' or '.join(s.modules)} (not installed)")
            alias = f" (alias {', '.join(s.aliases)})" if s.aliases else ""
            click.echo(f"{s.name:22s} modes={','.join(s.modes)} {' '.join(flags)}  {s.doc}{alias}")
        return
    from .runner import run

    def progress(msg: str) -> None:
        click.echo(f"… {msg}", err=True)

    r = run(cls, device=device, dtype=dtype, mode=mode, only=_split(only) or None, skip=_split(skip), num_inputs=num_inputs,
            input_id=input_id, metrics=_split(metrics), warmup=warmup, rep=rep, cudagraph=cudagraph, output_dir=output_dir,
            keep_going=keep_going, progress=progress, interleave=interleave, batch_ms=batch_ms, cooldown=cooldown,
            duration=duration, lock_clocks=lock_clocks)
    if csv_out:
        write_text(csv_out, text(r, "csv"))
    if json_out:
        write_text(json_out, text(r, "json"))
    if fmt == "json":
        click.echo(text(r, "json"))
        return
    for line in r.notes:
        click.echo(line, err=True)
    color = sys.stdout.isatty()
    width = max(60, shutil.get_terminal_size((160, 24)).columns) if color else 220  # piped: nothing shortened
    click.echo(text(r, "table", Options(width=width, color=color)), nl=False, color=color)
