"""Safe file output: atomic (temporary file beside the target, then rename), umask-honouring modes,
never following a symlink at the target. Imports nothing from kernscope but errors."""

from __future__ import annotations

import glob
import os
import shutil
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

    The result gets the umask's default mode. A symlink at ``target`` is followed (its destination is
    replaced, the link stays), as a shell redirection would. A directory at ``target`` is an error.
    """
    given = Path(target)
    t = Path(os.path.realpath(given)) if given.is_symlink() else given
    if t.is_dir():
        raise KernscopeError(f"{given}: is a directory; give a file name")
    parent = t.parent if str(t.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{t.name}.", suffix=".tmp", dir=parent)
    except OSError as e:
        raise KernscopeError(f"{given}: cannot write output ({e.strerror})") from None
    os.close(fd)
    tmp_p = Path(tmp)
    try:
        yield tmp_p
        os.chmod(tmp_p, default_mode())
        os.replace(tmp_p, t)
    except OSError as e:
        tmp_p.unlink(missing_ok=True)
        raise KernscopeError(f"{t}: cannot write output ({e.strerror or e})") from None
    except BaseException:
        tmp_p.unlink(missing_ok=True)
        raise


def write_text(target: str | os.PathLike[str], text: str) -> None:
    with atomic_path(target) as p:
        p.write_text(text, encoding="utf-8")


def write_bytes(target: str | os.PathLike[str], data: bytes) -> None:
    with atomic_path(target) as p:
        p.write_bytes(data)


@contextmanager
def atomic_dir(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary directory beside ``target``; its files are moved into ``target`` on success."""
    d = Path(target)
    if d.exists() and not d.is_dir():
        raise KernscopeError(f"{d}: exists and is not a directory")
    try:
        d.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".kernscope-", dir=d))
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


_TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")


def expand_inputs(items: Iterable[str]) -> list[str]:
    """Files, directories (their ``*.json``/``*.json.gz`` files, recursively) and globs -> sorted, unique paths."""
    out: list[str] = []
    for item in items:
        if os.path.isdir(item):
            found = [os.path.join(root, f) for root, _, files in os.walk(item) for f in files if f.endswith(_TRACE_SUFFIXES)]
            if not found:
                raise KernscopeError(f"{item}: no trace files (*.json, *.json.gz) in this directory")
            out += found
        elif any(ch in item for ch in "*?[") and not os.path.exists(item):
            found = [p for p in glob.glob(item, recursive=True) if os.path.isfile(p)]
            if not found:
                raise KernscopeError(f"{item}: no file matches this pattern")
            out += found
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
