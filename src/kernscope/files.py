"""Safe file output: atomic (temporary file beside the target, then rename; :mod:`.sink` writes the bytes of one
file), umask-honouring modes, never following a symlink at the target; and the trace inputs a command names
(files, directories, globs, JAX run directories). Imports nothing from kernscope but errors and the sink."""

from __future__ import annotations

import fnmatch
import glob
import gzip
import os
import re
import shutil
import tempfile
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import KernscopeError
from .sink import Temporary, default_mode, write_bytes
from .sink import sweep as _sweep


@contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success it replaces ``target``, on error it is removed.

    ``target``'s folder must exist (it is never created). A new file gets the umask's default mode; a replaced
    one keeps its mode. A symlink at ``target`` is followed (its destination is replaced, the link stays), as a
    shell redirection would; a dangling one, a directory, a FIFO or a device at ``target`` is an error.
    """
    with Temporary(target) as tmp:
        yield Path(tmp)


def write_text(target: str | os.PathLike[str], text: str) -> None:
    write_bytes(target, text.encode("utf-8"))


@contextmanager
def atomic_dir(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary directory beside ``target``; its files are moved into ``target`` on success."""
    d = Path(target)
    if d.exists() and not d.is_dir():
        raise KernscopeError(f"{d}: exists and is not a directory")
    if not d.parent.is_dir():  # the report's own folder is made, never the folders above it
        raise KernscopeError(f"{d}: the folder {d.parent} does not exist; create it first")
    try:
        d.mkdir(exist_ok=True)
        _sweep(d, ".kernscope-")
        tmp = Path(tempfile.mkdtemp(prefix=f".kernscope-{os.getpid()}.", dir=d))
    except OSError as e:
        raise KernscopeError(f"{d}: cannot write report ({e.strerror})") from None
    try:
        yield tmp
        mode = default_mode()
        for f in tmp.iterdir():
            os.chmod(f, mode)
            os.replace(f, d / f.name)
    except OSError as e:
        raise KernscopeError(f"{d}: cannot write report ({e.strerror or e})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


_TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz", ".xplane.pb", ".xplane.pb.gz")
_XSPACE_SUFFIXES = (".xplane.pb", ".xplane.pb.gz")


#: files of a JAX run directory, richest first (the XSpace is the complete record; the JSON exports drop fields)
RUN_DIR_PREFERENCE = ("*.xplane.pb*", "perfetto_trace.json.gz", "*.trace.json.gz", "*.trace.json", "perfetto_trace.json")


#: the name jax.profiler gives a run's folder (its start time): several of them are profiling sessions of one log
#: directory; folders of other names, each holding an XSpace, are taken for the processes of one job
_RUN_NAME = re.compile(r"^\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}")


def resolve_run_dir(path: str) -> tuple[list[str], str] | None:
    """For a JAX profile run directory (``plugins/profile/<run>/``, or a log directory holding one run): the
    files to read (every host's ``*.xplane.pb``, else the first JSON export) and a one-line note saying
    which were chosen. None when ``path`` is not such a directory."""
    p = Path(path)
    if not p.is_dir():
        return None
    run = p
    if not any(p.glob("*.xplane.pb*")) and not any(p.glob("perfetto_trace.json*")):
        runs = sorted({x.parent for x in p.glob("plugins/profile/*/*.xplane.pb*")} | {x.parent for x in p.glob("*/*.xplane.pb*")})
        if not runs:
            return None
        if len(runs) > 1:
            if not all(_RUN_NAME.match(r.name) for r in runs):  # (folders of their own: one per process of a job)
                return None
            names = ", ".join(r.name for r in runs[-5:])
            raise KernscopeError(f"{p}: holds {len(runs)} JAX profile runs ({names}); name one run directory")
        run = runs[0]
    for pattern in RUN_DIR_PREFERENCE:
        found = sorted(str(x) for x in run.glob(pattern)
                       if x.is_file() and (pattern != RUN_DIR_PREFERENCE[0] or x.name.endswith(_XSPACE_SUFFIXES)))
        if found:
            if pattern != RUN_DIR_PREFERENCE[0]:
                found = found[:1]
            what = ", ".join(os.path.basename(f) for f in found)
            others = sorted(x.name for x in run.iterdir() if x.is_file() and str(x) not in found)
            also = f"; also there: {', '.join(others)}" if others else ""
            return found, f"{run}: reading {what} (the richest file of this JAX run{also})"
    return None


def _walk_glob(pattern: str) -> list[str]:
    """Files matching a ``**`` pattern, found by walking the tree below its fixed part without following
    symbolic links to directories (``glob(recursive=True)`` follows them: a link loop never ended)."""
    parts = pattern.split(os.sep)
    fixed = []
    for part in parts:
        if any(ch in part for ch in "*?["):
            break
        fixed.append(part)
    root = os.sep.join(fixed) or "."
    flat = pattern.replace("**" + os.sep, "")  # ``**/`` also matches no folder at all
    bare = root == "." and not pattern.startswith("." + os.sep)  # os.walk(".") yields "./a": the pattern says "a"
    found = []
    for base, _dirs, files in os.walk(root, followlinks=False):
        for f in files:
            p = os.path.join(base, f)[2:] if bare else os.path.join(base, f)
            if (fnmatch.fnmatch(f, parts[-1]) and (fnmatch.fnmatch(p, pattern) or fnmatch.fnmatch(p, flat))
                    and os.path.isfile(p)):
                found.append(p)
    return found


#: a JSON file found in a directory is read whole to tell whether it is a trace only up to this size (a trace's
#: ``traceEvents`` key lies in its first :data:`_HEAD_BYTES` where Kineto, xprof and Perfetto write it)
SNIFF_MAX_BYTES = 16 << 20
_HEAD_BYTES = 1 << 16
#: the start of kernscope's own ``--format json`` outputs (Kineto's key is ``schemaVersion``)
_OWN_OUTPUT = re.compile(rb'\s*\{\s*"schema_version"\s*:\s*"\d+\.\d+"')


def _some_names(paths: list[str], under: str, n: int = 5) -> str:
    names = [os.path.relpath(p, under) for p in sorted(paths)]
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


def _xspaces_over_exports(paths: list[str]) -> tuple[list[str], list[str]]:
    """``paths`` less the JSON exports of a JAX run whose XSpace is among them (a run folder holding
    ``*.xplane.pb`` beside ``*.trace.json.gz`` or ``perfetto_trace.json.gz``: the same profile twice; the XSpace
    is the richer, :data:`RUN_DIR_PREFERENCE`), and those exports."""
    runs = {os.path.dirname(p) for p in paths if p.endswith(_XSPACE_SUFFIXES)}
    exports = [p for p in paths if os.path.dirname(p) in runs and not p.endswith(_XSPACE_SUFFIXES)
               and any(fnmatch.fnmatch(os.path.basename(p), pat) for pat in RUN_DIR_PREFERENCE[1:])]
    dropped = set(exports)
    return [p for p in paths if p not in dropped], exports


def not_a_trace(path: str) -> bool:
    """Whether a ``*.json``/``*.json.gz`` file found in a directory is certainly no trace: kernscope's own JSON output
    (any size), or a JSON object without a ``traceEvents`` key (the metadata, configs and reports users keep
    beside their traces). A file that names ``traceEvents`` in its first 64 KB, a JSON array (Chrome's array
    form), a file over :data:`SNIFF_MAX_BYTES`, an XSpace, and a file that does not parse are kept: the load
    says what is wrong with those."""
    if path.endswith(_XSPACE_SUFFIXES):
        return False
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as f:
            head = f.read(_HEAD_BYTES)
            if _OWN_OUTPUT.match(head):  # kernscope's own JSON output (any size): a report, not a trace
                return True
            if b'"traceEvents"' in head or head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] != b"{":
                return False
            rest = f.read(SNIFF_MAX_BYTES + 1 - len(head))
    except (OSError, EOFError, zlib.error):
        return False
    if len(head) + len(rest) > SNIFF_MAX_BYTES:
        return False
    import msgspec

    try:
        top = msgspec.json.decode(head + rest, type=dict[str, msgspec.Raw])
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        return False
    return "traceEvents" not in top


def expand_inputs(items: Iterable[str], notes: list[str] | None = None) -> list[str]:
    """Files, directories (their ``*.json``/``*.json.gz``/``*.xplane.pb`` files, recursively, less the JSON files
    that are certainly not traces, :func:`not_a_trace`; a JAX run directory: its richest file, see
    :func:`resolve_run_dir`) and globs -> sorted, unique paths. ``notes`` receives one line per JAX run directory
    resolved and per directory where JSON files that are not traces were skipped."""
    out: list[str] = []
    for item in items:
        run = resolve_run_dir(item) if os.path.isdir(item) else None
        if run is not None:
            out += run[0]
            if notes is not None:
                notes.append(run[1])
        elif os.path.isdir(item):
            found = [os.path.join(root, f) for root, _, files in os.walk(item) for f in files if f.endswith(_TRACE_SUFFIXES)]
            found, exports = _xspaces_over_exports(found)
            skip = [not_a_trace(f) for f in found]
            others = [f for f, s in zip(found, skip) if s]
            found = [f for f, s in zip(found, skip) if not s]
            skipped = (f" (skipped {len(others)} JSON file(s) that are not traces, no 'traceEvents': "
                       f"{_some_names(others, item)})") if others else ""
            if not found:
                raise KernscopeError(f"{item}: no trace files (*.json, *.json.gz, *.xplane.pb, *.xplane.pb.gz) in this directory{skipped}")
            if notes is not None:
                if exports:
                    runs = len({os.path.dirname(f) for f in exports})
                    notes.append(f"{item}: reading the XSpace of each of {runs} JAX profile run(s), not the JSON "
                                 f"export(s) beside them ({_some_names(exports, item)})")
                if others:
                    notes.append(f"{item}: skipped {len(others)} JSON file(s) that are not traces (no 'traceEvents'): "
                                 f"{_some_names(others, item)}")
            out += found
        elif any(ch in item for ch in "*?[") and not os.path.exists(item):
            found = _walk_glob(item) if "**" in item else [p for p in glob.glob(item) if os.path.isfile(p)]
            if not found:
                raise KernscopeError(f"{item}: no file matches this pattern")
            out += found
        elif not os.path.exists(item):  # named before any is read: a typo among rank files is not "no rank"
            raise KernscopeError(f"{item}: file not found")
        else:
            out.append(item)
    seen: set[str] = set()
    unique = []
    for p in sorted(out):
        key = os.path.realpath(p)
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique


#: a plain XSpace profile (``*.xplane.pb``) of at least this many bytes is analyzed a time window at a time by
#: default (:mod:`kernscope.analyze.windows`: the same output, a fraction of the memory; docs/performance.md)
WINDOWED_FROM = 128 << 20
#: bytes of profile per time window of such an analysis, at least (up to :data:`MOST_WINDOWS` windows): two windows'
#: tables are held at a time (the next one is decoded while this one is analyzed); a real 207 MB profile in 8 windows
#: peaks at 1.43x the file, in 7 at 1.55x (docs/performance.md, session 76); since each window's scan gives back the
#: file's pages as it walks them (session 81), a 210 MB one in 8 at 1.33x, 1.45-1.47x on a fresh install (polars'
#: whole binary in the page cache), in 7 at 1.39x and 1.51-1.53x
WINDOW_BYTES = 26 << 20
#: events per time window of such an analysis, at most, where the profile's bytes would make fewer windows (up to
#: :data:`MOST_WINDOWS`): a window's tables grow with its events. A real 40-step profile run 80 times as long (202.6
#: MB, 1.84 M events) is 8 windows by its bytes; with a data loader's thread of 1 µs ranges every 10 µs beside it
#: (200.8 MB, 3.27 M events) 8 windows peaked at 1.66-1.72x the file, 12 at 1.32-1.41x (session 87). On polars 2.2.0
#: the data loader's class (199.0 MB, 2.79 M events) peaked at 1.47-1.55x in the 12 windows that 240 k made, and at
#: 1.38-1.44x in the 14 this makes, +4-5% time; the 202.6 MB profile at 1.39-1.41x in 8 and 1.29-1.30x in the 10 this
#: makes, +2-11% time (docs/performance.md, session 94)
WINDOW_EVENTS = 200_000
#: windows of such an analysis, at most: each costs a fixed share whatever its size (~0.14 s on 2 cores, session 94:
#: its analysis ~0.08 s, decode ~0.035 s, link ~0.02 s, part of it beside the next window's decode); a real 982 MB
#: profile peaks at 0.88x the file in 8 windows and 0.67x in 12, a 633 MB one at 0.96x in 8 and 0.75x in 12, for
#: 6-8% more time than in 8 (session 76); on polars 2.2.0 a 983 MB one at 0.59x in 12 windows and 0.53-0.56x in 14,
#: in 7.3 and 6.9 s (session 94)
MOST_WINDOWS = 14


def windows_for(path: str, asked: int | None = None) -> int:
    """How many time windows ``analyze`` reads the profile at ``path`` in, 0 for whole: for a plain (not gzipped)
    XSpace profile, ``asked`` where given (0 or 1: whole), else one per :data:`WINDOW_BYTES` up to
    :data:`MOST_WINDOWS` from :data:`WINDOWED_FROM` bytes on (at least: the plan adds windows where the profile has
    more than :data:`WINDOW_EVENTS` events a window); 0 for anything else (a gzipped profile is inflated
    whole before its decode; a Kineto trace has no windows). Reads the file's first bytes only."""
    if not path.lower().endswith(".pb") or asked in (0, 1):
        return 0
    try:
        size = os.stat(path).st_size
        with open(path, "rb") as f:
            head = f.read(2)
    except OSError:
        return 0
    if head == b"\x1f\x8b":
        return 0
    if asked is not None:
        return asked
    return min(MOST_WINDOWS, -(-size // WINDOW_BYTES)) if size >= WINDOWED_FROM else 0
