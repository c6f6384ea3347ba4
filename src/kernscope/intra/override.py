"""``kernscope intra override -- python script.py``: Proton's TTGIR-override workflow as one command.

Proton's tutorial profiles an unmodified kernel in three manual steps: (1) run the program with
``TRITON_KERNEL_DUMP=1`` to dump each kernel's TTGIR and delete every other IR file, (2) edit the TTGIR to
insert ``proton.record start/end "name"`` operations, (3) run again with ``TRITON_KERNEL_OVERRIDE=1`` so Triton
compiles the edited TTGIR, under a Proton instrumentation session. This module automates the three steps:

- :func:`insert_records` places the records (pure text, testable without a GPU): a ``kernel`` scope around the
  whole function body and one ``loop@L<line>`` scope around each top-level ``scf.for``/``scf.while`` (the
  source line is resolved through the TTGIR's ``#loc`` table), like :func:`kernscope.intra.instrument` does on
  the Python source;
- :func:`run_override` runs the program twice in child processes (dump, then override), each under a Proton
  session that :mod:`kernscope.intra.proton_session` opens around the unmodified script (or under the
  script's own session with ``session=False``), and returns Proton's ``.chrome_trace``, which
  :func:`kernscope.intra.io.load_tasks` reads like any other intra-kernel trace.

Dump and override directories are keyed by Triton's hash of the kernel *source* (``src.hash()``), so the
session's options do not change which file overrides which kernel.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import KernscopeError
from .units import SIDECAR_SUFFIX, sidecar_path

_FUNC = re.compile(r"^(\s*)tt\.func\s+public\s+@([\w$.]+)\s*\(")
_LOOP = re.compile(r"^(?:%[\w#:.]+(?:\s*,\s*%[\w#:.]+)*\s*=\s*)?scf\.(for|while)\b")
_LOCDEF = re.compile(r"^#(loc\d*)\s*=\s*(loc\(.*\))\s*$")
_LOCREF = re.compile(r"loc\(#(loc\d*)\)\s*$")
_FILELINE = re.compile(r'loc\("(?:[^"\\]|\\.)*":(\d+):\d+\)')
_INNER = re.compile(r"#(loc\d*)")


@dataclass(frozen=True)
class Instrumented:
    """One TTGIR file after :func:`insert_records`."""

    path: str
    kernel: str
    scopes: tuple[str, ...]


@dataclass
class OverrideResult:
    """What ``intra override`` produced: Proton's trace, the edited TTGIR files, and the two runs' exit codes."""

    trace: str | None
    files: list[Instrumented] = field(default_factory=list)
    dump_dir: str = ""
    exit_codes: tuple[int, int] = (0, 0)


def _source_line(ref: str, defs: dict[str, str], depth: int = 0) -> int | None:
    """The source line a ``#locN`` alias points at (following name and callsite wrappers)."""
    text = defs.get(ref)
    if text is None or depth > 32:
        return None
    m = _FILELINE.search(text)
    if m:
        return int(m.group(1))
    for inner in _INNER.findall(text):
        line = _source_line(inner, defs, depth + 1)
        if line is not None:
            return line
    return None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def insert_records(text: str, *, regions: Sequence[str] = ("body", "loops"), kernels: Sequence[str] = (),
                   where: str = "<ttgir>") -> tuple[str, str, tuple[str, ...]]:
    """Insert ``proton.record`` operations into one TTGIR module.

    Args:
        text: the TTGIR of one kernel, as Triton dumps it.
        regions: ``body`` (a scope named after the kernel around the function body) and/or ``loops`` (a
            ``loop@L<line>`` scope around each top-level loop of the function).
        kernels: only these kernel names (empty: every public function).
        where: the file's name, for error messages.

    Returns:
        (new text, kernel name, scope names in order). The text is unchanged and the scopes empty when the
        module's kernel is not among ``kernels``.

    Raises:
        KernscopeError: already instrumented, no public function, or ``loops`` asked for without ``body`` in a
            kernel with no top-level loop.
    """
    unknown = set(regions) - {"body", "loops"}
    if unknown or not regions:
        raise KernscopeError(f"--regions: use body and/or loops (got {', '.join(sorted(unknown)) or 'nothing'})")
    if "proton.record" in text:
        raise KernscopeError(f"{where}: already contains proton.record operations")
    lines = text.splitlines(keepends=True)
    defs = {m.group(1): m.group(2) for m in (_LOCDEF.match(x.strip()) for x in lines) if m}
    out: list[str] = []
    scopes: list[str] = []
    kernel = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _FUNC.match(line)
        if m is None or not line.rstrip().endswith("{"):
            out.append(line)
            i += 1
            continue
        name = m.group(2)
        kernel = kernel or name
        if kernels and name not in kernels:
            out.append(line)
            i += 1
            continue
        func_indent = len(m.group(1))
        body_indent = _indent(lines[i + 1]) if i + 1 < len(lines) else func_indent + 2
        pad = " " * body_indent
        out.append(line)
        if "body" in regions:
            out.append(f'{pad}proton.record start "{name}"\n')
            scopes.append(name)
        i += 1
        open_loop: int | None = None
        loops = 0
        while i < len(lines):
            cur = lines[i]
            ind, stripped = _indent(cur), cur.strip()
            if ind == func_indent and stripped.startswith("}"):  # the function's closing brace
                break
            if ind == body_indent and "loops" in regions and open_loop is None and _LOOP.match(stripped):
                open_loop, loops = len(out), loops + 1  # the start record's slot: named at the loop's end
                out.append("")
                scopes.append("")
                out.append(cur)
            elif open_loop is not None and ind == body_indent and stripped.startswith("}") and not stripped.endswith("{"):
                ref = _LOCREF.search(stripped)  # the loop's location is on its closing line
                src = _source_line(ref.group(1), defs) if ref else None
                label = f"loop@L{src}" if src is not None else f"loop{loops - 1}"
                while label in scopes:
                    label += "'"
                scopes[scopes.index("")] = label
                out[open_loop] = f'{pad}proton.record start "{label}"\n'
                out.append(cur)
                out.append(f'{pad}proton.record end "{label}"\n')
                open_loop = None
            elif stripped.startswith("tt.return") and "body" in regions:
                out.append(f'{" " * ind}proton.record end "{name}"\n')
                out.append(cur)
            else:
                out.append(cur)
            i += 1
        if "loops" in regions and "body" not in regions and loops == 0:
            raise KernscopeError(f"{where}: kernel {name!r} has no top-level loop to instrument")
    if not kernel:
        raise KernscopeError(f"{where}: no public tt.func in this TTGIR")
    return "".join(out), kernel, tuple(scopes)


def prepare_dump(dump_dir: str | os.PathLike[str], *, regions: Sequence[str] = ("body", "loops"),
                 kernels: Sequence[str] = ()) -> list[Instrumented]:
    """Step 2 on a dump directory: keep only ``.ttgir`` files (as Proton's ``dump_ttgir.sh`` does), insert the
    records into the chosen kernels' files and delete the others (so those kernels compile as usual)."""
    root = Path(dump_dir)
    done: list[Instrumented] = []
    found: set[str] = set()
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix != ".ttgir":
            p.unlink()
    for p in sorted(root.rglob("*.ttgir")):
        text = p.read_text(encoding="utf-8")
        new, kernel, scopes = insert_records(text, regions=regions, kernels=kernels, where=str(p))
        found.add(kernel)
        if scopes:
            tmp = p.with_suffix(".ttgir.tmp")
            tmp.write_text(new, encoding="utf-8")
            os.replace(tmp, p)
            done.append(Instrumented(str(p), kernel, scopes))
        else:
            p.unlink()
    missing = [k for k in kernels if k not in found]
    if missing:
        raise KernscopeError(f"no compiled kernel named {', '.join(missing)} (compiled: {', '.join(sorted(found)) or 'none'})")
    if not done:
        raise KernscopeError("the program compiled no Triton kernel (is a kernel launched?)")
    return done


def _child(argv: Sequence[str], *, name: str, mode: str | None, session: bool) -> list[str]:
    from .run import program_args

    args = program_args(argv, "override", modules=True)
    cmd = [sys.executable, "-m", "kernscope.intra.proton_session", "--name", name]
    if mode:
        cmd += ["--mode", mode]
    if not session:
        cmd.append("--no-session")
    return [*cmd, "--", *args]


def run_override(argv: Sequence[str], work: str | os.PathLike[str], *, regions: Sequence[str] = ("body", "loops"),
                 kernels: Sequence[str] = (), mode: str | None = None, session: bool = True,
                 timeout: float | None = None) -> OverrideResult:
    """Run Proton's three steps on ``argv`` (``python script.py args``) in ``work`` (kept: the dump, the edited
    TTGIR and the trace stay there). Returns the trace (``work/proton.chrome_trace``; with ``session=False``
    the newest ``.chrome_trace`` the script wrote in the current directory or ``work``)."""
    import importlib.util

    if importlib.util.find_spec("triton") is None or (session and importlib.util.find_spec("triton.profiler") is None):
        raise KernscopeError("intra override needs triton with Proton (triton.profiler): pip install \"kernscope[gpu]\"")
    w = Path(work).resolve()
    name = str(w / "proton")
    cmd = _child(argv, name=name, mode=mode, session=session)  # (a missing script: refused before any folder is made)
    made = not w.exists()  #: the work folder is this run's: a failed first step leaves nothing of it behind
    dump = w / "ttgir_dump"
    if dump.exists():
        shutil.rmtree(dump)
    dump.mkdir(parents=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_KERNEL_", "TRITON_DUMP_DIR", "TRITON_OVERRIDE_DIR"))}
    env1 = {**base, "TRITON_ALWAYS_COMPILE": "1", "TRITON_KERNEL_DUMP": "1", "TRITON_DUMP_DIR": str(dump)}
    r1 = subprocess.run(cmd, env=env1, timeout=timeout, check=False)
    if r1.returncode != 0:
        with contextlib.suppress(OSError):  # (empty folders only: a dump the program did write stays to be read)
            dump.rmdir()
            if made:
                w.rmdir()
        raise KernscopeError(f"step 1 (dump the TTGIR): the program exited with {r1.returncode}")
    files = prepare_dump(dump, regions=regions, kernels=kernels)
    trace = Path(name + ".chrome_trace")
    trace.unlink(missing_ok=True)
    started = time.time()
    env3 = {**base, "TRITON_ALWAYS_COMPILE": "1", "TRITON_KERNEL_OVERRIDE": "1", "TRITON_OVERRIDE_DIR": str(dump)}
    r3 = subprocess.run(cmd, env=env3, timeout=timeout, check=False)
    if r3.returncode != 0:
        raise KernscopeError(f"step 3 (run with the instrumented TTGIR): the program exited with {r3.returncode}")
    found: str | None = str(trace) if trace.is_file() else None
    if found is None and not session:
        fresh = [p for d in (Path.cwd(), w) for p in d.glob("*.chrome_trace*")
                 if p.stat().st_mtime >= started and not p.name.endswith(SIDECAR_SUFFIX)]  # a trace, not its clock
        found = str(max(fresh, key=lambda p: p.stat().st_mtime)) if fresh else None
    clock = Path(sidecar_path(str(trace)))
    if found is not None and found != str(trace) and clock.is_file():  # a trace the script named: its clock beside it
        shutil.copyfile(clock, sidecar_path(found))
    return OverrideResult(found, files, str(dump), (r1.returncode, r3.returncode))
