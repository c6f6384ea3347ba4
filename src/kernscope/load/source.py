"""Reading trace bytes: plain files memory-mapped, gzip streamed in blocks, with memory bounds.

A gzip file is never inflated whole: blocks are decompressed as the parser consumes them, so a
"decompression bomb" costs time, not memory; the parser bounds the tables it builds (see ``Limits``).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from zlib_ng import zlib_ng as _zlib  # ~2x faster than zlib for inflate

from ..errors import TraceError

_ZError: type[Exception] = _zlib.error  # type: ignore[assignment]  # the stub types it as an instance

GZIP_MAGIC = b"\x1f\x8b"
#: decompressed bytes handed to the parser at a time: small beside a piece (``document.CHUNK_BYTES``), so that what
#: is left after a piece is cut, copied to start the next, is small too
BLOCK_BYTES = 1 << 20


def available_memory() -> int:
    """Bytes of memory available to this process now (MemAvailable, capped by a cgroup limit)."""
    avail = 0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    if not avail:
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            avail = 8 << 30
    for p in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            txt = Path(p).read_text().strip()
            if txt.isdigit():
                avail = min(avail, int(txt))
        except OSError:
            continue
    return avail


@dataclass(frozen=True)
class Limits:
    """Bounds on what one trace may cost.

    Attributes:
        max_memory: bytes the decoded tables may grow to (default: 80% of available memory).
        max_event_bytes: the largest single event (JSON text) accepted.
    """

    max_memory: int = 0
    max_event_bytes: int = 256 << 20

    def memory(self) -> int:
        return self.max_memory or int(available_memory() * 0.8)


@dataclass(frozen=True)
class FileIdentity:
    """Where a trace is and what it was when opened (the digest proves the content)."""

    path: str
    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int

    @classmethod
    def of(cls, path: str | os.PathLike[str]) -> FileIdentity:
        p = Path(path)
        try:
            st = p.stat()
        except FileNotFoundError:
            raise TraceError(str(path), "file not found") from None
        except OSError as e:
            raise TraceError(str(path), f"cannot read file ({e.strerror})") from None
        if stat.S_ISDIR(st.st_mode):
            raise TraceError(str(path), "is a directory, not a trace file")
        if not stat.S_ISREG(st.st_mode):
            raise TraceError(str(path), "not a regular file (a FIFO, device or socket cannot be read as a trace)")
        return cls(str(p.resolve()), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


class TraceSource:
    """An opened trace file: its (decompressed) JSON as blocks."""

    def __init__(self, path: str, data: mmap.mmap | bytes, gz: bool) -> None:
        self.path = path
        self._data = data
        self.gz = gz
        self.stored_bytes = len(data)
        self.json_bytes = 0 if gz else len(data)  #: decompressed bytes seen so far (gzip: grows while read)
        self.consumed = 0  #: stored bytes read so far (for progress)
        self._released = 0

    @property
    def plain(self) -> mmap.mmap | bytes | None:
        """The whole JSON document when it is a plain file (memory-mapped), else None."""
        return None if self.gz else self._data

    def blocks(self, *, salvage: bool = False) -> Iterator[bytes | memoryview]:
        """The JSON document in order, in blocks of about ``BLOCK_BYTES``."""
        if not self.gz:
            mv = memoryview(self._data)
            for i in range(0, len(mv), BLOCK_BYTES):
                yield mv[i : i + BLOCK_BYTES]
            return
        yield from self._inflate(salvage)

    def _inflate(self, salvage: bool) -> Iterator[bytes]:
        """Stream-decompress every gzip member; output comes in blocks of at most ``BLOCK_BYTES``."""
        data = memoryview(self._data)
        n = len(data)
        pos = 0
        while pos < n:
            if bytes(data[pos : pos + 2]) != GZIP_MAGIC:
                break  # trailing bytes after the last member are ignored, as gzip(1) does
            d = _zlib.decompressobj(31)
            while not d.eof:
                if d.unconsumed_tail:
                    inp: bytes | memoryview = d.unconsumed_tail
                elif pos < n:
                    inp = data[pos : pos + (1 << 20)]
                    pos += len(inp)
                    self.consumed = pos
                else:
                    break
                try:
                    out = d.decompress(inp, BLOCK_BYTES)
                except _ZError as e:
                    if salvage:
                        return
                    raise TraceError(self.path, f"corrupt gzip data ({e}); try --salvage for a partial read") from None
                if out:
                    self.json_bytes += len(out)
                    yield out
            if not d.eof:
                if salvage:
                    try:
                        rest = d.flush()
                    except _ZError:
                        rest = b""
                    if rest:
                        self.json_bytes += len(rest)
                        yield rest
                    return
                raise TraceError(self.path, "truncated gzip stream (file ends mid-member); try --salvage")
            pos -= len(d.unused_data)

    def head(self, n: int = 4096) -> bytes:
        """The first ``n`` bytes of the (decompressed) content, without consuming it (format detection)."""
        if not self.gz:
            return bytes(self._data[:n])
        d = _zlib.decompressobj(31)
        try:
            return d.decompress(bytes(self._data[: 1 << 16]), n)
        except _ZError:
            return b""

    def read_all(self, limits: Limits, progress: Callable[[int, int], None] | None = None) -> bytes | mmap.mmap:
        """The whole (decompressed) content for a binary format, bounded by ``limits`` (a gzip bomb
        stops with a one-line error at the budget). ``progress``: called with (compressed bytes read, file size)
        as a gzipped file is inflated."""
        if not self.gz:
            return self._data
        budget = limits.memory()
        parts: list[bytes] = []
        total = 0
        for block in self._inflate(salvage=False):
            total += len(block)
            if total > budget:
                raise TraceError(self.path, f"decompressed content exceeds the memory budget ({budget / 1e9:.1f} GB; "
                                            "--max-memory sets it)")
            parts.append(bytes(block))
            if progress is not None:
                progress(self.consumed, self.stored_bytes)
        return b"".join(parts)

    def release(self, upto: int) -> None:
        """Drop the mapped pages before byte ``upto`` from this process (they were parsed; the page cache
        keeps them), so a large plain trace does not count twice in memory."""
        if not isinstance(self._data, mmap.mmap) or self.gz:
            return
        end = min((upto // mmap.PAGESIZE) * mmap.PAGESIZE, (len(self._data) // mmap.PAGESIZE) * mmap.PAGESIZE)
        if end > self._released:
            try:
                self._data.madvise(mmap.MADV_DONTNEED, self._released, end - self._released)
                self._released = end
            except (OSError, ValueError, AttributeError):
                pass

    def close(self) -> None:
        if isinstance(self._data, mmap.mmap):
            with contextlib.suppress(BufferError):  # a view is still alive: the mapping goes with it
                self._data.close()


def open_trace(path: str | os.PathLike[str]) -> TraceSource:
    """Open a trace file (gzip detected from its bytes, not its name)."""
    p = str(path)
    FileIdentity.of(p)  # stat before open: opening a FIFO would block
    try:
        with open(p, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise TraceError(p, "not a regular file (a FIFO, device or socket cannot be read as a trace)")
            if st.st_size == 0:
                raise TraceError(p, "file is empty")
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        raise TraceError(p, "file not found") from None
    except IsADirectoryError:
        raise TraceError(p, "is a directory, not a trace file") from None
    except PermissionError:
        raise TraceError(p, "permission denied") from None
    except OSError as e:
        raise TraceError(p, f"cannot read file ({e.strerror or e})") from None
    gz = mm[:2] == GZIP_MAGIC
    if not gz and not mm[: 1 << 16].strip() and not bytes(mm).strip():
        mm.close()
        raise TraceError(p, "file is empty (only whitespace)")
    return TraceSource(p, mm, gz)
