"""Safe file output: atomic (temporary file beside the target, then rename), umask-honouring modes,
never following a symlink at the target. Imports nothing from kernscope but errors."""

from __future__ import annotations

import contextlib
import fnmatch
import glob
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import KernscopeError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def default_mode() -> int:
    """File mode a plain ``open(..., 'w')`` would give under the current umask (0644 under 022)."""
    return 0o666 & ~_umask()


@contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success it replaces ``target``, on error it is removed.

    ``target``'s folder must exist (it is never created). A new file gets the umask's default mode; a replaced
    one keeps its mode. A symlink at ``target`` is followed (its destination is replaced, the link stays), as a
    shell redirection would; a dangling one, a directory, a FIFO or a device at ``target`` is an error.
    """
    given = Path(target)
    t = Path(os.path.realpath(given)) if given.is_symlink() else given
    if given.is_symlink() and not t.exists():
        raise KernscopeError(f"{given}: is a symbolic link to {t}, which does not exist; give the file itself")
    if t.is_dir():
        raise KernscopeError(f"{given}: is a directory; give a file name")
    mode = default_mode()
    if t.exists():
        st = t.stat()
        if not stat.S_ISREG(st.st_mode):  # a FIFO or device would be replaced by a regular file
            raise KernscopeError(f"{given}: is not a regular file (a FIFO, device or socket); kernscope writes regular "
                                 "files: give a file name")
        mode = stat.S_IMODE(st.st_mode)  # replacing a file keeps its permissions (a 0600 file stays private)
    parent = t.parent if str(t.parent) else Path(".")
    if not parent.is_dir():  # never create folders the user did not ask for (a typo would write elsewhere)
        raise KernscopeError(f"{given}: the folder {parent} does not exist; create it first")
    _sweep(parent, f".{t.name}.")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{t.name}.{os.getpid()}.", suffix=".tmp", dir=parent)
    except OSError as e:
        raise KernscopeError(f"{given}: cannot write output ({e.strerror})") from None
    os.close(fd)
    tmp_p = Path(tmp)
    try:
        yield tmp_p
        os.chmod(tmp_p, mode)
        os.replace(tmp_p, t)
    except OSError as e:
        tmp_p.unlink(missing_ok=True)
        raise KernscopeError(f"{t}: cannot write output ({e.strerror or e})") from None
    except BaseException:
        tmp_p.unlink(missing_ok=True)
        raise


def _sweep(folder: Path, prefix: str) -> None:
    """Remove what an earlier write left in ``folder`` when its process was killed (``kill -9``): our temporaries
    (``<prefix><pid>.<random>``) whose writing process no longer runs. A live writer's are kept."""
    try:
        names = [n for n in os.listdir(folder) if n.startswith(prefix)]
    except OSError:
        return
    for n in names:  # a handful of leftovers, not per event
        pid_text = n[len(prefix):].split(".", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid():
            continue
        try:
            os.kill(int(pid_text), 0)
            continue  # its writer is alive (or another user's: not ours to judge)
        except ProcessLookupError:
            pass
        except (PermissionError, OverflowError, OSError):
            continue
        p = folder / n
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                p.unlink()


def _stream_target(target: str | os.PathLike[str]) -> bool:
    """True for a FIFO or character device (``-o /dev/stdout``, a named pipe): written as a stream, never
    replaced by a regular file."""
    try:
        st = os.stat(target)
    except OSError:
        return False
    return stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode)


def write_text(target: str | os.PathLike[str], text: str) -> None:
    write_bytes(target, text.encode("utf-8"))


def write_bytes(target: str | os.PathLike[str], data: bytes) -> None:
    """``data`` to ``target``: atomically (temp file, rename) for a file, as a stream for a FIFO or device."""
    if _stream_target(target):
        try:
            with open(target, "wb") as f:
                f.write(data)
        except OSError as e:
            raise KernscopeError(f"{target}: cannot write output ({e.strerror or e})") from None
        return
    with atomic_path(target) as p:
        p.write_bytes(data)


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


_TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz", ".xplane.pb")


#: files of a JAX run directory, richest first (the XSpace is the complete record; the JSON exports drop fields)
RUN_DIR_PREFERENCE = ("*.xplane.pb", "perfetto_trace.json.gz", "*.trace.json.gz", "*.trace.json", "perfetto_trace.json")


def resolve_run_dir(path: str) -> tuple[list[str], str] | None:
    """For a JAX profile run directory (``plugins/profile/<run>/``, or a log directory holding one run): the
    files to read (every host's ``*.xplane.pb``, else the first JSON export) and a one-line note saying
    which were chosen. None when ``path`` is not such a directory."""
    p = Path(path)
    if not p.is_dir():
        return None
    run = p
    if not any(p.glob("*.xplane.pb")) and not any(p.glob("perfetto_trace.json*")):
        runs = sorted({x.parent for x in p.glob("plugins/profile/*/*.xplane.pb")} | {x.parent for x in p.glob("*/*.xplane.pb")})
        if not runs:
            return None
        if len(runs) > 1:
            names = ", ".join(r.name for r in runs[-5:])
            raise KernscopeError(f"{p}: holds {len(runs)} JAX profile runs ({names}); name one run directory")
        run = runs[0]
    for pattern in RUN_DIR_PREFERENCE:
        found = sorted(str(x) for x in run.glob(pattern) if x.is_file())
        if found:
            if pattern != "*.xplane.pb":
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


def expand_inputs(items: Iterable[str], notes: list[str] | None = None) -> list[str]:
    """Files, directories (their ``*.json``/``*.json.gz``/``*.xplane.pb`` files, recursively; a JAX run
    directory: its richest file, see :func:`resolve_run_dir`) and globs -> sorted, unique paths.
    ``notes`` receives one line per JAX run directory resolved."""
    out: list[str] = []
    for item in items:
        run = resolve_run_dir(item) if os.path.isdir(item) else None
        if run is not None:
            out += run[0]
            if notes is not None:
                notes.append(run[1])
        elif os.path.isdir(item):
            found = [os.path.join(root, f) for root, _, files in os.walk(item) for f in files if f.endswith(_TRACE_SUFFIXES)]
            if not found:
                raise KernscopeError(f"{item}: no trace files (*.json, *.json.gz, *.xplane.pb) in this directory")
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
