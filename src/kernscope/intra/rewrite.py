"""Profile an unmodified Triton kernel: an instrumented copy of an existing ``@triton.jit`` function.

``instrument(kernel)`` rewrites the kernel's source (never its file): a profiler buffer parameter is added,
a named scope wraps the whole body (named after the kernel) and, by default, each top-level loop
(``loop@L<line>``), or chosen source line ranges (``lines=[(first, last, "name")]``). The copy is compiled
by Triton like the original; launching it through the returned :class:`InstrumentedKernel` passes the
buffer, and after each launch the records are read back into a task table (the first ``max_launches``
launches; later ones run the original kernel, unprofiled).

The source rewriting needs no GPU and no triton (``instrumented_source``); building the kernel needs triton.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import linecache
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import KernscopeError

BUF = "_ks_prof_buf"
PROF = "_ks_prof"
_COUNTER = itertools.count()


@dataclass(frozen=True)
class Rewrite:
    """The instrumented source of one kernel and the scope names it records."""

    name: str
    source: str
    scopes: tuple[str, ...]
    warps: tuple[int, ...] = ()  #: warp sampling: the warps that record (empty: one recorder per program)


def _enter(name: str) -> ast.stmt:
    return ast.parse(f"{PROF} = {PROF}.enter({name!r})").body[0]


def _exit(name: str) -> ast.stmt:
    return ast.parse(f"{PROF} = {PROF}.exit({name!r})").body[0]


def _has_return(nodes: Sequence[ast.stmt]) -> bool:
    return any(isinstance(n, ast.Return) for stmt in nodes for n in ast.walk(stmt))


def instrumented_source(source: str, *, regions: Sequence[str] = ("body", "loops"),
                        lines: Sequence[tuple[int, int, str]] = (), first_line: int = 1,
                        warps: Sequence[int] = ()) -> Rewrite:
    """Rewrite a kernel's source (``def name(...): ...``): a buffer parameter and named scopes.

    Args:
        regions: "body" (the whole kernel) and/or "loops" (each top-level ``for``/``while``).
        lines: ``(first, last, name)`` source line ranges (line numbers of the kernel's file, given
            ``first_line``, the line of its ``def``) whose top-level statements become a scope.
        warps: warp sampling: these warps of each program record (``Profiler.create(..., WARP_IDS=...)``).
    Raises:
        KernscopeError: the kernel cannot be instrumented as asked (no loop where loops were asked for, a line
            range with no statement, an early ``return``).
    """
    text = textwrap.dedent(source)
    try:
        mod = ast.parse(text)
    except SyntaxError as e:
        raise KernscopeError(f"cannot parse the kernel's source ({e.msg})") from None
    fns = [n for n in mod.body if isinstance(n, ast.FunctionDef)]
    if not fns:
        raise KernscopeError("no function definition in the kernel's source")
    fn = fns[0]
    fn.decorator_list = []
    name = fn.name
    body = fn.body
    doc = []
    first_stmt = body[0] if body else None
    if isinstance(first_stmt, ast.Expr) and isinstance(first_stmt.value, ast.Constant) and isinstance(first_stmt.value.value, str):
        doc, body = [first_stmt], body[1:]
    early = [s for s in body[:-1] if _has_return([s])] + ([body[-1]] if body and _has_return([body[-1]])
                                                          and not isinstance(body[-1], ast.Return) else [])
    if early:
        raise KernscopeError(f"kernel {name!r}: cannot instrument a kernel that returns early (line "
                             f"{early[0].lineno + first_line - 1})")
    scopes: list[str] = []
    off = first_line - 1
    wanted = [(a - off, b - off, n) for a, b, n in lines]
    range_names = {n for _, _, n in wanted}
    blocks: list[tuple[str | None, list[ast.stmt]]] = []
    loops_seen = 0
    for stmt in body:
        label = None
        for a, b, n in wanted:
            if a <= stmt.lineno and (stmt.end_lineno or stmt.lineno) <= b:
                label = n
        if label is None and "loops" in regions and isinstance(stmt, (ast.For, ast.While)):
            label = f"loop@L{stmt.lineno + off}"
            loops_seen += 1
        if blocks and label is not None and label in range_names and blocks[-1][0] == label:
            blocks[-1][1].append(stmt)  # consecutive statements of one line range: one scope
        else:
            blocks.append((label, [stmt]))
    merged: list[ast.stmt] = []
    for label, stmts in blocks:
        if label is None:
            merged += stmts
            continue
        if label not in scopes:
            scopes.append(label)
        merged += [_enter(label), *stmts, _exit(label)]
    if "loops" in regions and not loops_seen and "body" not in regions and not lines:
        raise KernscopeError(f"kernel {name!r} has no top-level loop to instrument")
    for a, b, n in lines:
        if n not in scopes:
            raise KernscopeError(f"kernel {name!r}: no top-level statement lies within lines {a}-{b} ({n!r})")
    tail: list[ast.stmt] = []
    if merged and isinstance(merged[-1], ast.Return):
        tail = [merged.pop()]
    sampling = f", WARP_IDS={tuple(int(w) for w in warps)!r}" if warps else ""
    setup = ast.parse(f"{PROF} = _ks_Profiler.create({BUF}, 0, 1, is_leader=(_ks_tid(0) == 0){sampling})").body
    if "body" in regions:
        scopes.insert(0, name)
        merged = [_enter(name), *merged, _exit(name)]
    fn.body = [*doc, *setup, *merged, *tail]
    args = fn.args
    n_pos = len(args.args)
    n_def = len(args.defaults)
    insert_at = n_pos - n_def  # after the last parameter without a default: still valid syntax
    args.args.insert(insert_at, ast.arg(arg=BUF))
    ast.fix_missing_locations(mod)
    return Rewrite(name, ast.unparse(fn) + "\n", tuple(scopes), tuple(int(w) for w in warps))


def _jit_parts(kernel: Any) -> tuple[Any, str, int]:
    """(python function, source text, line of its def) of a triton JITFunction."""
    fn = getattr(kernel, "fn", None)
    src = getattr(kernel, "src", None)
    if fn is None or not isinstance(src, str):
        kind = type(kernel).__name__
        raise KernscopeError(f"{getattr(kernel, '__name__', kind)}: not a @triton.jit function ({kind}); instrument the "
                             "@triton.jit function itself (for an autotuned kernel: its .fn)")
    first = getattr(kernel, "starting_line_number", None) or inspect.getsourcelines(fn)[1]
    # starting_line_number counts decorators: the def is the first line of src
    try:
        lines, start = inspect.getsourcelines(fn)
        def_line = start + next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("def "))
    except (OSError, StopIteration, TypeError):
        def_line = int(first)
    return fn, src, def_line


def compile_rewrite(rw: Rewrite, globals_: dict[str, Any]) -> Any:
    """Build the instrumented ``@triton.jit`` function from its source (registered with linecache, so Triton
    can read it back like any kernel defined in a file)."""
    import triton

    from .device import Profiler, tid

    filename = f"<kernscope-instrumented-{rw.name}-{next(_COUNTER)}>"
    lines = rw.source.splitlines(keepends=True)
    linecache.cache[filename] = (len(rw.source), None, lines, filename)
    ns: dict[str, Any] = dict(globals_)
    ns["_ks_Profiler"] = Profiler
    ns["_ks_tid"] = tid
    exec(compile(rw.source, filename, "exec"), ns)  # noqa: S102 - the kernel's own (rewritten) source
    k = triton.jit(ns[rw.name])
    k._ks_instrumented = True  # ``intra run``'s launch hook passes it straight to Triton
    return k


@dataclass
class InstrumentedKernel:
    """An instrumented copy of a kernel: launch it as the original (``k[grid](...)``); the profiler buffer is
    passed for you and read back after each launch. ``tasks()`` gives every profiled launch's tasks."""

    original: Any
    jit: Any
    rewrite: Rewrite
    max_launches: int = 16
    device: str | None = None
    launches: int = 0
    _tables: list[Any] = field(default_factory=list)
    _buffer: Any = None
    _params: list[str] = field(default_factory=list)
    unbalanced: list[tuple[str, int, int]] = field(default_factory=list)
    dropped: int = 0

    @property
    def __name__(self) -> str:
        return self.rewrite.name

    @property
    def scopes(self) -> tuple[str, ...]:
        return self.rewrite.scopes

    def __getitem__(self, grid: Any) -> Any:
        def launch(*args: Any, **kwargs: Any) -> Any:
            if self.launches >= self.max_launches:
                return self.original[grid](*args, **kwargs)
            return self._profiled(grid, args, kwargs)

        return launch

    def _programs(self, grid: Any, bound: dict[str, Any]) -> int:
        g = grid(bound) if callable(grid) else grid
        g = tuple(g) if isinstance(g, (tuple, list)) else (g,)
        n = 1
        for x in g:
            n *= int(x)
        return n

    def _profiled(self, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        import torch

        from .host import alloc_profiler_buffer, decode_profiler_buffer, reset_profiler_buffer

        names = list(self.original.arg_names)
        bound = dict(zip(names, args))
        bound.update(kwargs)
        recorders = self._programs(grid, bound) * max(1, len(self.rewrite.warps))
        slots = recorders * 2 * max(1, len(self.rewrite.scopes)) + 64
        dev = self.device or next((a.device for a in bound.values() if isinstance(a, torch.Tensor)), "cuda")
        if self._buffer is None or self._buffer.numel() < 8 + 4 * slots or self._buffer.device != torch.device(dev):
            self._buffer = alloc_profiler_buffer(slots, str(dev))
        else:
            reset_profiler_buffer(self._buffer)
        out = self.jit[grid](**bound, **{BUF: self._buffer})
        d = decode_profiler_buffer(self._buffer, scopes_map(self.rewrite))
        import polars as pl

        self._tables.append(d.tasks.with_columns(pl.lit(self.launches, dtype=pl.Int64).alias("launch")))
        self.dropped += d.dropped
        for row in d.unbalanced:
            self.unbalanced.append(row)
        self.launches += 1
        return out

    def tasks(self) -> Any:
        """Tasks of every profiled launch (a ``launch`` column numbers them)."""
        import polars as pl

        from .decode import SCHEMA

        if not self._tables:
            return pl.DataFrame(schema={**SCHEMA, "launch": pl.Int64})
        return pl.concat(self._tables)


def scopes_map(rw: Rewrite) -> dict[int, str]:
    from .scopes import scope_table

    return scope_table(names=rw.scopes)


def instrument(kernel: Any, *, regions: Sequence[str] = ("body", "loops"), lines: Sequence[tuple[int, int, str]] = (),
               max_launches: int = 16, device: str | None = None, warps: Sequence[int] = ()) -> InstrumentedKernel:
    """An instrumented copy of ``kernel`` (a ``@triton.jit`` function, e.g. imported from a library): named
    scopes around its body and top-level loops (``regions``) or chosen source ``lines``. ``warps`` (e.g.
    ``(0, 1, 2, 3)``): warp sampling, each listed warp records on its own (the ``group`` column is the warp)."""
    fn, src, def_line = _jit_parts(kernel)
    unknown = set(regions) - {"body", "loops"}
    if unknown:
        raise KernscopeError(f"unknown region kind(s) {sorted(unknown)}; use body, loops or line ranges")
    if warps:
        from .layout import warp_mask

        try:
            warp_mask(warps)
        except ValueError as e:
            raise KernscopeError(str(e)) from None
    try:
        rw = instrumented_source(src, regions=regions, lines=lines, first_line=def_line, warps=warps)
    except KernscopeError as e:
        raise KernscopeError(f"{getattr(fn, '__qualname__', fn)}: {e}") from None
    return InstrumentedKernel(kernel, compile_rewrite(rw, fn.__globals__), rw, max_launches=max_launches, device=device)
