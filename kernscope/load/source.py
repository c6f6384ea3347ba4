"""Reading trace bytes from disk: plain or gzip (zlib-ng when available), with one clear error."""

from __future__ import annotations

import contextlib
import mmap
import os
from dataclasses import dataclass
from pathlib import Path

from zlib_ng import zlib_ng as _zlib  # ~2x faster than zlib for inflate

from ..errors import TraceError

_ZError: type[Exception] = _zlib.error  # type: ignore[assignment]  # the stub types it as an instance

GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class FileIdentity:
    """What makes a cached parse valid: same path, size and modification time."""

    path: str
    size: int
    mtime_ns: int
    inode: int

    @classmethod
    def of(cls, path: str | os.PathLike[str]) -> "FileIdentity":
        p = Path(path)
        try:
            st = p.stat()
        except FileNotFoundError:
            raise TraceError(str(path), "file not found") from None
        except OSError as e:
            raise TraceError(str(path), f"cannot read file ({e.strerror})") from None
        if not p.is_file():
            raise TraceError(str(path), "not a regular file")
        return cls(str(p.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)


def _gunzip(data: bytes, path: str, salvage: bool) -> bytes:
    # wbits=31: gzip container; decompressobj tolerates concatenated members poorly, so loop.
    out: list[bytes] = []
    rest = data
    while rest:
        d = _zlib.decompressobj(31)
        try:
            out.append(d.decompress(rest))
        except _ZError as e:
            if salvage and out:
                break
            if salvage:
                raise TraceError(path, f"corrupt gzip data, nothing recoverable ({e})") from None
            raise TraceError(path, f"corrupt gzip data ({e}); try --salvage for a partial read") from None
        if not d.eof:
            if salvage:
                with contextlib.suppress(_ZError):
                    out.append(d.flush())
                break
            raise TraceError(path, "truncated gzip stream (file ends mid-member); try --salvage")
        rest = d.unused_data
        if rest[:2] != GZIP_MAGIC:
            break
    return b"".join(out)


def read_bytes(path: str | os.PathLike[str], *, salvage: bool = False) -> bytes | mmap.mmap:
    """Return the JSON bytes of ``path`` (gzip detected by magic, not by name).

    A plain JSON file is memory-mapped (read-only, no copy): decoder workers page in their own
    chunks in parallel. A gzip file is inflated into one bytes object.
    """
    p = str(path)
    try:
        with open(p, "rb") as f:
            magic = f.read(2)
            if magic != GZIP_MAGIC and os.fstat(f.fileno()).st_size > (1 << 20):
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                if not mm[: 1 << 16].strip() and not bytes(mm).strip():
                    raise TraceError(p, "file is empty")
                return mm
            f.seek(0)
            data = f.read()
    except FileNotFoundError:
        raise TraceError(p, "file not found") from None
    except IsADirectoryError:
        raise TraceError(p, "is a directory, not a trace file") from None
    except OSError as e:
        raise TraceError(p, f"cannot read file ({e.strerror})") from None
    if data[:2] == GZIP_MAGIC:
        data = _gunzip(data, p, salvage)
    if not data.strip():
        raise TraceError(p, "file is empty")
    return data
