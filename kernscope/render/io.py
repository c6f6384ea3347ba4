"""Atomic file output: write to a temporary file beside the target, then rename."""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..errors import KernscopeError


@contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path; on success it replaces ``target``, on error it is removed."""
    t = Path(target)
    parent = t.parent if str(t.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{t.name}.", suffix=".tmp", dir=parent)
    except OSError as e:
        raise KernscopeError(f"{t}: cannot write output ({e.strerror})") from None
    os.close(fd)
    tmp_p = Path(tmp)
    try:
        yield tmp_p
        os.replace(tmp_p, t)
    except BaseException:
        tmp_p.unlink(missing_ok=True)
        raise


def write_text(target: str | os.PathLike[str], text: str) -> None:
    with atomic_path(target) as p:
        p.write_text(text)


def write_bytes(target: str | os.PathLike[str], data: bytes) -> None:
    with atomic_path(target) as p:
        p.write_bytes(data)
