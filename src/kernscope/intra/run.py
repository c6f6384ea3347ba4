"""``kernscope intra run -- python script.py``: run a program with chosen kernels profiled, unmodified.

While the script runs, ``JITFunction.run`` (the launch path of every ``@triton.jit`` kernel, also under
``@triton.autotune``) is wrapped, and ``triton.jit`` records which kernels the program defines. Kernels stay
normal ``JITFunction`` objects (so kernels that call one as a device function are unaffected, and kernels
imported before the script started are covered too); when one of the chosen kernels is *launched*, the
launch runs its instrumented copy (:func:`~kernscope.intra.rewrite.instrument`) and the records are read
back. At the end, every profiled
kernel's tasks are returned (the CLI writes a Perfetto trace, a buffer-free task table and statistics).
"""

from __future__ import annotations

import contextlib
import os
import runpy
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import KernscopeError
from .rewrite import InstrumentedKernel, instrument


@dataclass
class RunResult:
    """What ``intra run`` profiled: one :class:`InstrumentedKernel` per kernel that was launched."""

    kernels: dict[str, InstrumentedKernel] = field(default_factory=dict)
    defined: list[str] = field(default_factory=list)  #: every @triton.jit function the script defined
    exit_code: int = 0
    #: the exception the program raised (its traceback was printed on stderr, as Python prints it), or None
    error: str | None = None
    script: str = ""  #: the program's script


def _print_program_traceback(e: BaseException, script: str) -> None:
    """``e``'s traceback on stderr from the program's first frame on (kernscope's and runpy's frames left out)."""
    import traceback

    tb = e.__traceback__
    target = os.path.abspath(script)
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != target:
        tb = tb.tb_next
    traceback.print_exception(type(e), e, tb if tb is not None else e.__traceback__, file=sys.stderr)


def _hooked_run(orig_run: Any, state: dict[str, Any]) -> Any:
    """``JITFunction.run`` for the duration of the script: launches of a chosen kernel run its instrumented copy
    (its first ``max_launches`` launches); everything else (other kernels, warm-up compiles, the instrumented
    copies themselves, later launches) goes to Triton's own ``run`` unchanged."""

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        name = getattr(getattr(self, "fn", None), "__name__", None)
        wanted = state["wanted"]
        if warmup or getattr(self, "_ks_instrumented", False) or name is None or (wanted and name not in wanted):
            return orig_run(self, *args, grid=grid, warmup=warmup, **kwargs)
        held = state["by_kernel"].get(id(self))  # by object: two kernels may share a name
        ik = held[1] if held is not None else None
        if ik is not None and ik.launches >= ik.max_launches:
            return orig_run(self, *args, grid=grid, warmup=warmup, **kwargs)
        if ik is None:
            ik = instrument(self, regions=state["regions"], lines=state["lines"].get(name, ()),
                            max_launches=state["max_launches"], warps=state["warps"])
            state["by_kernel"][id(self)] = (self, ik)
            key = name if name not in state["kernels"] else f"{name}@{getattr(self.fn, '__module__', '?')}"
            state["kernels"][key] = ik
        return ik._profiled(grid, args, kwargs)

    run._kernscope_hook = True  # type: ignore[attr-defined]
    return run


def program_args(argv: Sequence[str], command: str, *, modules: bool = False) -> list[str]:
    """``script.py args...`` from ``[python] script.py args...`` (or ``[python] -m module args...`` when
    ``modules``), checked: one line naming what is missing (``command``: for the usage text)."""
    args = list(argv)
    if args and os.path.basename(args[0]).startswith("python"):
        args = args[1:]
    is_module = modules and args[:1] == ["-m"]
    if not args or (is_module and len(args) < 2):
        raise KernscopeError(f"give the program to run: kernscope intra {command} [options] -- python script.py [args]"
                             + (" (or -- python -m module [args])" if modules else ""))
    if not is_module and not os.path.isfile(args[0]):
        raise KernscopeError(f"{args[0]}: no such script")
    return args


def run_script(argv: Sequence[str], *, kernels: Sequence[str] = (), regions: Sequence[str] = ("body", "loops"),
               lines: dict[str, list[tuple[int, int, str]]] | None = None, max_launches: int = 16,
               warps: Sequence[int] = (), quiet_stdout: bool = False) -> RunResult:
    """Run ``argv`` (``script.py args...``, or ``python script.py ...``) in this process with the chosen
    kernels (all launched kernels when ``kernels`` is empty) profiled; ``warps``: warp sampling. ``quiet_stdout``:
    what the program prints goes to stderr (the caller's stdout carries a JSON document)."""
    args = program_args(argv, "run")
    script = args[0]
    try:
        import triton
        import triton.runtime.jit as rj
    except ImportError:
        raise KernscopeError('intra run needs triton (and torch with a GPU): pip install "kernscope[gpu]"') from None

    wanted = set(kernels)
    state: dict[str, Any] = {"kernels": {}, "regions": tuple(regions), "lines": lines or {},
                             "max_launches": max_launches, "wanted": wanted, "warps": tuple(warps),
                             "by_kernel": {}}
    result = RunResult(script=script)
    orig_jit, orig_run = rj.jit, rj.JITFunction.run

    def jit(fn: Any = None, **kw: Any) -> Any:  # only records which kernels the program defines
        def deco(f: Any) -> Any:
            if not getattr(getattr(f, "__code__", None), "co_filename", "").startswith("<kernscope-instrumented-"):
                result.defined.append(f.__name__)
            return orig_jit(f, **kw)

        return deco(fn) if fn is not None else deco

    saved_argv = sys.argv
    triton.jit = jit
    rj.jit = jit
    rj.JITFunction.run = _hooked_run(orig_run, state)  # kernels defined before (already imported) are hooked too
    sys.argv = args
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        with contextlib.redirect_stdout(sys.stderr) if quiet_stdout else contextlib.nullcontext():
            runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        result.exit_code = int(e.code) if isinstance(e.code, int) else (0 if e.code is None else 1)
    except Exception as e:  # noqa: BLE001 - the program's own error: its traceback, as Python shows it; exit code 1
        _print_program_traceback(e, script)
        result.exit_code, result.error = 1, f"{type(e).__name__}: {e}"
    finally:
        triton.jit = orig_jit
        rj.jit = orig_jit
        rj.JITFunction.run = orig_run
        sys.argv = saved_argv
        sys.path.pop(0)
    launched = {ik.rewrite.name for ik in state["kernels"].values()}
    missing = sorted(k for k in wanted if k not in result.defined and k not in launched)
    if missing:
        raise KernscopeError(f"{script}: no @triton.jit kernel named {', '.join(missing)} was defined or launched "
                             f"(defined: {', '.join(result.defined) or 'none'})")
    result.kernels = dict(state["kernels"])
    return result
