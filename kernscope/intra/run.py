"""``kernscope intra run -- python script.py``: run a program with chosen kernels profiled, unmodified.

While the script runs, ``triton.jit`` is hooked: every kernel it defines (in the script or in any library
it imports) stays a normal ``JITFunction`` (so kernels that call it as a device function are unaffected),
but when one of the chosen kernels is *launched*, the launch runs its instrumented copy
(:func:`~kernscope.intra.instrument.instrument`) and the records are read back. At the end, every profiled
kernel's tasks are returned (the CLI writes a Perfetto trace, a buffer-free task table and statistics).
"""

from __future__ import annotations

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


def _hook_class(base: type, state: dict[str, Any]) -> type:
    class HookedKernel(base):  # type: ignore[misc]
        """A JITFunction whose launches run an instrumented copy (first ``max_launches``)."""

        def run(self, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:  # noqa: D102
            ik = state["kernels"].get(self.fn.__name__)
            if warmup or (ik is not None and ik.launches >= ik.max_launches):
                return super().run(*args, grid=grid, warmup=warmup, **kwargs)
            if ik is None:
                ik = instrument(_plain(self), regions=state["regions"], lines=state["lines"].get(self.fn.__name__, ()),
                                max_launches=state["max_launches"])
                state["kernels"][self.fn.__name__] = ik
            return ik._profiled(grid, args, kwargs)

    return HookedKernel


class _Plain:
    """The attributes :func:`instrument` reads, without the hook (so the original launch path stays intact)."""

    def __init__(self, k: Any) -> None:
        self.fn, self.src, self.arg_names = k.fn, k.src, k.arg_names
        self.starting_line_number = getattr(k, "starting_line_number", None)
        self._k = k

    def __getitem__(self, grid: Any) -> Any:
        def launch(*args: Any, **kwargs: Any) -> Any:
            parent: Any = type(self._k).__mro__[1]  # the JITFunction class under the hook
            return parent.run(self._k, *args, grid=grid, warmup=False, **kwargs)

        return launch


def _plain(k: Any) -> Any:
    return _Plain(k)


def run_script(argv: Sequence[str], *, kernels: Sequence[str] = (), regions: Sequence[str] = ("body", "loops"),
               lines: dict[str, list[tuple[int, int, str]]] | None = None, max_launches: int = 16) -> RunResult:
    """Run ``argv`` (``script.py args...``, or ``python script.py ...``) in this process with the chosen
    kernels (all launched kernels when ``kernels`` is empty) profiled."""
    args = list(argv)
    if args and os.path.basename(args[0]).startswith("python"):
        args = args[1:]
    if not args:
        raise KernscopeError("give the program to run: kernscope intra run [options] -- python script.py [args]")
    script = args[0]
    if not os.path.isfile(script):
        raise KernscopeError(f"{script}: no such script")
    import triton
    import triton.runtime.jit as rj

    state: dict[str, Any] = {"kernels": {}, "regions": tuple(regions), "lines": lines or {},
                             "max_launches": max_launches}
    hooked = _hook_class(rj.JITFunction, state)
    wanted = set(kernels)
    result = RunResult()
    orig = rj.jit

    def jit(fn: Any = None, **kw: Any) -> Any:
        def deco(f: Any) -> Any:
            k = orig(f, **kw)
            if type(k) is rj.JITFunction:
                result.defined.append(f.__name__)
                if not wanted or f.__name__ in wanted:
                    k.__class__ = hooked
            return k

        return deco(fn) if fn is not None else deco

    saved_argv = sys.argv
    triton.jit = jit
    rj.jit = jit
    sys.argv = args
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        result.exit_code = int(e.code) if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        triton.jit = orig
        rj.jit = orig
        sys.argv = saved_argv
        sys.path.pop(0)
    missing = [k for k in wanted if k not in result.defined]
    if missing:
        raise KernscopeError(f"{script}: no @triton.jit kernel named {', '.join(missing)} was defined "
                             f"(defined: {', '.join(result.defined) or 'none'})")
    result.kernels = dict(state["kernels"])
    return result
