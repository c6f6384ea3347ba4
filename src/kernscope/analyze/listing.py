"""The user's code with the GPU time of each line beside it (``kernscope annotate``): the source table
(:func:`kernscope.analyze.kernels.source_summary`) read against the files it names.

Input: a source table (``source`` as ``path:line``, ``function``, ``kernels``, ``top_kernel``, ``count``,
``total_us``, ``pct``) and where to look for the files. Output: a :class:`SourceListing`: per file where it was
found and whether it still holds the code that was profiled, per line its code and GPU time.

A profile names files as they were on the machine that recorded it: JAX by absolute path
(``/home/me/proj/train.py``), PyTorch's Python tracer relative to where its package or script lives
(``transformers/models/qwen2/modeling_qwen2.py``, ``train.py``). A file is looked for under each ``root`` by the
path's tails (``proj/train.py``, ``train.py``), then where it was recorded, then under the current folder, then, for
a path whose first part is an installed package, in that package. A file edited since it was profiled has other
code at its lines: each line's function (JAX: the function running the line; PyTorch: the function whose first line
it is) is checked against the function that encloses the line in the file as it is now (Python's ``ast``), and a file
where one does not match is marked ``changed``.
"""

from __future__ import annotations

import ast
import importlib.util
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import polars as pl

from ..model import Trace
from .sources import source_file, source_line, source_table

#: columns of :attr:`SourceListing.files`
FILE_SCHEMA = {"file": pl.String, "found": pl.String, "changed": pl.Boolean, "lines": pl.Int64, "count": pl.Int64,
               "total_us": pl.Float64, "pct": pl.Float64}
#: columns of :attr:`SourceListing.lines`
LINE_SCHEMA = {"file": pl.String, "line": pl.Int64, "function": pl.String, "code": pl.String, "matches": pl.Boolean,
               "scope": pl.String, "kernels": pl.Int64, "top_kernel": pl.String, "count": pl.Int64, "total_us": pl.Float64,
               "pct": pl.Float64}
#: a file larger than this is not read (not source code)
MAX_FILE_BYTES = 16 << 20
#: the files whose lines are read: Python source (a profile names only those; any other path it names is not read,
#: so a crafted trace cannot print lines of another file)
SOURCE_SUFFIXES = (".py", ".pyx", ".pyi")


@dataclass(frozen=True)
class SourceListing:
    """Result of :func:`source_listing` (µs; ``pct``: % of the trace's GPU time that the source table sums).

    Attributes:
        trace: the trace's path. step: the step listed (None: all).
        files: ``file`` (as the profile names it), ``found`` (the file read; null: not found), ``changed`` (a
            line's function is not the one enclosing it there now: the file was edited since), ``lines``, ``count``,
            ``total_us``, ``pct``; by time.
        lines: ``file``, ``line``, ``function``, ``code`` (the line's text, stripped; null where the file was not
            found), ``matches`` (the line is in its function; null: not checked), ``kernels``, ``top_kernel``,
            ``count``, ``total_us``, ``pct``; files in ``files``' order, lines in file order.
        no_line_us: GPU time of the records with no line (XLA's copies and memsets, ops XLA added; PyTorch
            launches under no frame of the user's code).
    """

    trace: str
    step: int | None
    files: pl.DataFrame
    lines: pl.DataFrame
    no_line_us: float
    no_line_pct: float
    framework: str = "jax"
    notes: tuple[str, ...] = field(default_factory=tuple)

    kind: ClassVar[str] = "annotate"

    @property
    def title(self) -> str:
        return self.trace

    def facts_dict(self) -> dict[str, Any]:
        """``trace``, ``step``, ``framework``, ``no_line_us``, ``no_line_pct``."""
        return {"trace": self.trace, "step": self.step, "framework": self.framework, "no_line_us": self.no_line_us,
                "no_line_pct": self.no_line_pct}

    def tables(self) -> dict[str, pl.DataFrame]:
        """``files``, ``lines``."""
        return {"files": self.files, "lines": self.lines}


def _tails(name: str) -> list[Path]:
    """The relative tails of a recorded path, longest first: ``/a/b/c.py`` → ``a/b/c.py``, ``b/c.py``, ``c.py``."""
    parts = [p for p in Path(name).parts if p not in ("/", "\\") and not p.endswith(":\\")]
    return [Path(*parts[i:]) for i in range(len(parts))]


def _package_file(name: str) -> Path | None:
    """``transformers/models/x.py`` in the installed package ``transformers``, where there is one."""
    head, _, rest = name.partition("/")
    if not rest or not head.isidentifier():
        return None
    try:
        spec = importlib.util.find_spec(head)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        p = Path(loc) / rest
        if p.is_file():
            return p
    return None


def find_file(name: str, roots: Sequence[Path] = ()) -> Path | None:
    """Where the recorded file ``name`` is on this machine (module docstring), or None (also for a file that is not
    Python source, :data:`SOURCE_SUFFIXES`)."""
    if not name.endswith(SOURCE_SUFFIXES):
        return None
    tails = _tails(name)
    for root in roots:
        for t in tails:
            if (root / t).is_file():
                return root / t
    recorded = Path(name)
    if recorded.is_file():
        return recorded
    if recorded.is_absolute():
        for t in tails[1:]:
            if t.is_file():
                return t
    return _package_file(name)


def _read(path: Path) -> list[str] | None:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None


def _functions(text: list[str]) -> list[tuple[int, int, str, str]] | None:
    """Every function and lambda of a Python file: (first line with decorators, last line, name, qualified name as
    Python's ``__qualname__`` has it: ``Block.forward``, ``setup.<locals>.layer``); None where the file is not Python
    that parses."""
    try:
        tree = ast.parse("\n".join(text))
    except (SyntaxError, ValueError):
        return None
    out: list[tuple[int, int, str, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                out.append((first, child.end_lineno or child.lineno, child.name, prefix + child.name))
                visit(child, f"{prefix}{child.name}.<locals>.")
            elif isinstance(child, ast.Lambda):
                out.append((child.lineno, child.end_lineno or child.lineno, "<lambda>", prefix + "<lambda>"))
                visit(child, f"{prefix}<lambda>.<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def _check(funcs: list[tuple[int, int, str, str]], line: int, function: str | None) -> tuple[bool | None, str | None]:
    """(whether ``line`` lies in a function named as ``function``'s last part, the qualified name of the innermost
    function around it). The first is None where there is nothing to check: no name, a comprehension's frame (a
    qualified name's last part; a PyTorch backward row's ``(backward)`` mark left out)."""
    around = [f for f in funcs if f[0] <= line <= f[1]]
    scope = max(around, key=lambda f: (f[0], -f[1]))[3] if around else None
    name = (function or "").removesuffix(" (backward)").rsplit(".", 1)[-1]
    if not name or (name.startswith("<") and name not in ("<lambda>", "<module>")):
        return None, scope
    return name == "<module>" or any(f[2] == name for f in around), scope


@dataclass(frozen=True)
class _Read:
    """One file of a listing as read here: where (``found``; None: not read), each line's code, check and scope (in
    the rows' order), whether the file changed since the recording (None: nothing checked), and the note to say."""

    found: str | None
    codes: list[str | None]
    matches: list[bool | None]
    scopes: list[str | None]
    changed: bool | None
    note: str | None


def _read_file(name: str, rows: list[dict[str, Any]], roots: Sequence[Path]) -> _Read:
    """Find and read the recorded file ``name``, and check ``rows`` (its lines: ``line``, ``function``) against it."""
    path = find_file(name, roots)
    text = _read(path) if path is not None else None
    if text is None:
        missing = (f"{name}: not a Python source file: not read" if not name.endswith(SOURCE_SUFFIXES) else
                   f"{name}: not found here" + (" (--root DIR: where your code is)" if not roots else
                                                f" (nor under {', '.join(str(r) for r in roots)})"))
        return _Read(None, [None] * len(rows), [None] * len(rows), [None] * len(rows), None, missing)
    funcs = _functions(text)
    codes: list[str | None] = []
    matches: list[bool | None] = []
    scopes: list[str | None] = []
    for r in rows:
        n = r["line"]
        code = text[n - 1].strip() if 0 < n <= len(text) else None
        ok, scope = _check(funcs, n, r["function"]) if funcs is not None and code is not None else (None, None)
        codes.append(code)
        matches.append(False if code is None else ok)  # (a line past the file's end: it was edited)
        scopes.append(scope)
    checked = [m for m in matches if m is not None]
    changed = None if not checked else not all(checked)
    note: str | None = None
    if changed:
        bad = rows[matches.index(False)]
        note = (f"{name}: changed since the profile was recorded (line {bad['line']} is not in {bad['function']} in "
                f"{path}): its code is shown as it is now; --root DIR: the code as it was")
    return _Read(str(path), codes, matches, scopes, changed, note)


def source_listing(trace: Trace, *, step: int | None = None, python: bool = True,
                   roots: Sequence[Path] = ()) -> SourceListing | None:
    """The user's code with the GPU time of each line of ``trace`` (of ``step``; all steps: None): a JAX profile's
    lines from its HLO, with ``python`` a PyTorch trace's from its Python stacks (the trace loaded with its Python
    events), the files looked for under ``roots`` first. None where no GPU record has a line."""
    table = source_table(trace, step, python)
    if table.height == 0:
        return None
    return listing_of(table, trace.path, step=step, roots=roots,
                      framework="jax" if trace.metadata.get("framework") == "jax" else "pytorch")


def listing_of(sources: pl.DataFrame, trace: str, *, step: int | None = None, roots: Sequence[Path] = (),
               framework: str = "jax") -> SourceListing:
    """The files and lines of ``sources`` (a source table, :data:`kernscope.analyze.kernels.SOURCE_SCHEMA`) with
    their code, looked for under ``roots`` first (module docstring)."""
    has = sources.filter(pl.col("source").is_not_null())
    none = sources.filter(pl.col("source").is_null())
    split = has.with_columns(source_file().alias("file"), source_line().alias("line"))
    per = (split.group_by("file").agg(pl.len().cast(pl.Int64).alias("lines"), pl.col("count").sum(),
                                      pl.col("total_us").sum(), pl.col("pct").sum())
           .sort(["total_us", "file"], descending=[True, False]))
    # the lines in the files' order (by time), each file's in line order
    lines = (split.join(per.select("file").with_row_index("_rank"), on="file")
             .sort("_rank", "line", "function", nulls_last=True).drop("_rank"))
    read = [_read_file(f, part.to_dicts(), roots) for f, part in
            zip(per["file"].to_list(), lines.partition_by("file", maintain_order=True, include_key=True))]
    lines = lines.with_columns(pl.Series("code", [c for r in read for c in r.codes], dtype=pl.String),
                               pl.Series("matches", [m for r in read for m in r.matches], dtype=pl.Boolean),
                               pl.Series("scope", [x for r in read for x in r.scopes], dtype=pl.String))
    files = per.with_columns(pl.Series("found", [r.found for r in read], dtype=pl.String),
                             pl.Series("changed", [r.changed for r in read], dtype=pl.Boolean))
    notes = tuple(r.note for r in read if r.note is not None)
    no_us, no_pct = float(none["total_us"].sum() or 0.0), float(none["pct"].sum() or 0.0)
    return SourceListing(trace, step, files.select(list(FILE_SCHEMA)).cast(FILE_SCHEMA),  # type: ignore[arg-type]
                         lines.select(list(LINE_SCHEMA)).cast(LINE_SCHEMA),  # type: ignore[arg-type]
                         no_us, no_pct, framework, notes)


def roots_of(paths: Sequence[str]) -> list[Path]:
    """``--root`` folders as paths (``~`` expanded)."""
    return [Path(os.path.expanduser(p)) for p in paths]
