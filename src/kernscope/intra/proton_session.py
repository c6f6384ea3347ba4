"""Run a Python script under a Proton instrumentation session (the child process of ``intra override``).

    python -m kernscope.intra.proton_session --name OUT [--mode MODE] [--no-session] -- script.py [args]
    python -m kernscope.intra.proton_session --name OUT [--mode MODE] [--no-session] -- -m module [args]

Opens ``proton.start(OUT, data="trace", backend="instrumentation", mode=MODE)`` around the unmodified script and
finalizes it at the end, so the script needs no Proton code; ``--no-session`` runs the script as it is (for
scripts that start Proton themselves, as Proton's tutorial does). Needs triton with Proton and a GPU.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from typing import Any


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kernscope.intra.proton_session")
    ap.add_argument("--name", required=True, help="Proton's output name (the trace is NAME.chrome_trace)")
    ap.add_argument("--mode", default=None, help="Proton instrumentation mode, e.g. 'default:optimizations=clock32,time_shift'")
    ap.add_argument("--no-session", action="store_true")
    ap.add_argument("program", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    program = a.program[1:] if a.program[:1] == ["--"] else a.program
    if not program:
        ap.error("give the script to run")
    module = program[1] if program[0] == "-m" and len(program) > 1 else None
    script = program[0]
    session: Any = None
    if not a.no_session:
        import triton.profiler

        session = triton.profiler
        try:
            session.start(a.name, data="trace", backend="instrumentation", mode=a.mode)
        except Exception as e:  # noqa: BLE001 - no GPU driver, no Proton backend: one line, not Proton's traceback
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            sys.stderr.write(f"kernscope: Proton could not start its session ({type(e).__name__}: {first}); intra "
                             "override needs a GPU and triton with Proton\n")
            return 2
    sys.argv = [module, *program[2:]] if module else list(program)
    sys.path.insert(0, os.getcwd() if module else os.path.dirname(os.path.abspath(script)))
    code = 0
    try:
        if module:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        if session is not None:
            session.finalize()
        # the SM clock of the GPU the trace was recorded on, beside the trace (NAME.chrome_trace.clock.json):
        # the reader turns Proton's cycles into time with it. A program that never imported triton ran no Triton
        # kernel and has no trace to time: it is not asked (the query imports torch, seconds for a failed program)
        if "triton" in sys.modules:
            from .units import device_clock, write_sidecar

            write_sidecar(a.name + ".chrome_trace", device_clock())
    return code


if __name__ == "__main__":
    sys.exit(main())
