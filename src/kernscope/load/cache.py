"""Parse cache that cannot lie: entries keyed by a hash of the input's content, checked on every read.

An entry is ``<cache dir>/v<format>/<key>/``: the linked tables as Arrow IPC (zstd-compressed above
:data:`COMPRESS_ABOVE`; categorical columns as their codes with the codes' strings in :data:`STRINGS_FILE`, and a
column that is the sum of two others in every row, ``end``, left out and summed when read), a ``manifest.json`` with
the xxh3-128 checksum of every file (and of itself), and ``results/``, rendered outputs keyed by the options that
made them (so an unchanged ``analyze`` is not recomputed).

- **Same input**: the key is derived from the xxh3-128 of the trace file's bytes (about 30 GB/s), the
  parse/link options and the format version, so an edited file — same size and mtime or not — never
  meets an old entry. A digest index (``digests/``) remembers the digest of a file by its identity
  (real path, size, mtime, ctime, inode; any write changes the ctime), only for files unchanged for
  2 s when hashed (as git's racily-clean rule), so an unchanged file is not read again.
- **Intact entry**: every file is checked against the manifest before use; a damaged, truncated or
  foreign entry is discarded and rebuilt, with a one-line notice (``CacheNotice``).
- **Races**: an entry is built in a temporary directory and renamed into place whole; a second writer
  of the same key keeps the first. Readers never see a partial entry.
- **Size**: at most ``KERNSCOPE_CACHE_MAX_BYTES`` (default 2 GB); least recently used entries go first.

Location: ``$KERNSCOPE_CACHE_DIR``, else ``$XDG_CACHE_HOME/kernscope``, else ``~/.cache/kernscope``;
without a usable home directory, a per-user directory under the system temp dir (with a notice).
This module imports polars only where it reads or writes tables, so a cached ``analyze`` that only
prints a stored result starts fast.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import mmap
import os
import shutil
import stat
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import xxhash

from ..version import __version__, code_fingerprint
from .argspec import ARG_SPEC_VERSION, XPLANE_SPEC_VERSION
from .cachedir import preferred_root
from .cachedir import read_private as _read_private
from .cachedir import secret as _secret
from .cachedir import uid as _uid

if TYPE_CHECKING:
    import polars as pl

#: Bump whenever decoding or linking changes what is stored.
CACHE_FORMAT_VERSION = 12
TABLES = ("events", "gpu", "flows", "steps")
DEFAULT_MAX_BYTES = 2 << 30
#: an entry whose tables take more than this in memory (bytes, all tables, all-null columns left out) is written
#: zstd-compressed, a smaller one as it is. zstd: the 200 MB JAX class's entry is 25 MB instead of 927 (its many
#: mostly-null columns), written in 0.8 s instead of 1.5-2.3 s and read in 0.4 s instead of 0.9-1.9; the 10 GB
#: replica's fits the cap (282 MB instead of 2.2 GB). A Kineto trace's tables compress as well (the 216 MB v100
#: replica's entry: 5.5 MB instead of 71 MB), and writing them as they are is the dearer: every byte goes into fresh
#: page cache, which the kernel allocates and copies into (its event table alone, 46 MB, in a fresh process: 0.17-0.20
#: s of system time as it is, 0.07-0.10 s of CPU zstd-compressed; polars 2.1, session 57). Under a few MB, as the
#: bundled example's entry (1 MB), there is nothing to gain, and the entry is written as it is
COMPRESS_ABOVE = 8 << 20
#: rows per record batch of a compressed table (a table written as it is is one batch; see ``write_entry``): one batch
#: reads back contiguous, several are compressed and read in parallel (a 1.5 M-row table as one batch: written in
#: 0.5-0.7 s and read in 0.45 s, against 0.35-0.43 s and 0.25 s in polars' default batches of 2**17 rows)
BATCH_ROWS = 1 << 22
#: a load writes the event table first, before the others exist (:class:`EntryWriter`), so it decides alone: an entry
#: whose event table takes more than this is compressed. It is two thirds of a Kineto entry's bytes (0.66-0.70 of
#: the tables of the v100, ns-resolution, a100 and GPT-with-stacks classes), so the entries compressed are those of
#: about :data:`COMPRESS_ABOVE` of tables, as when all the tables decided
COMPRESS_EVENTS_ABOVE = COMPRESS_ABOVE * 2 // 3
#: the bytes of a file mapped at a time to hash it (:func:`file_digest`), or read at a time into one buffer
#: (:func:`_read_digest`: a file that cannot be mapped, the parse cache's checksums). Mapped pages are in the process's
#: resident memory, and a windowed JAX analysis hashes its file at its end, at its peak: 16 MiB gave the 202.6 MB
#: profile's cold run (cache written) 271-278 MiB, 4 MiB 259-265 MiB, and the 216 MB v100 replica's 256-264 -> 240-245
#: MiB (session 90). As fast: 202.6 MB mapped in 29-31 ms either way (1 MiB maps: 21 -> 27 ms at 216 MB), and read
#: in 33-36 ms against 38-45 ms with 16 MiB reads
_READ = 4 << 20


class CacheNotice(UserWarning):
    """The cache could not be used as is (damaged entry rebuilt, fallback location, ...)."""


Notify = Callable[[str], None]


def _warn(msg: str) -> None:
    warnings.warn(msg, CacheNotice, stacklevel=3)


# -- location ---------------------------------------------------------------------------------------
def _private_dir(d: Path, *, follow: bool) -> str | None:
    """Make ``d`` a usable private cache directory of this user; None when it is, else why not.

    Created 0700 when missing. An existing one must be a directory (``follow``: a symlink to one, for a place the
    user named) owned by this user; a group- or world-accessible one of ours is made private. The write probe is
    a new file with a random name (``mkstemp``: O_EXCL, no link followed), so nothing planted is written through."""
    try:
        d.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(d, 0o700)
        st = os.stat(d) if follow else os.lstat(d)
    except (FileExistsError, NotADirectoryError) as e:  # (a file where a folder above it should be)
        blocker = next((p for p in (d, *d.parents) if p.exists() and not p.is_dir()), None)
        return f"cannot create it ({blocker} is not a folder)" if blocker else f"cannot create it ({e.strerror or e})"
    except OSError as e:
        return f"cannot create it ({e.strerror or e})"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory (a link or file is in its place)"
    uid = _uid()
    if uid is not None and st.st_uid != uid:
        return f"it belongs to another user (uid {st.st_uid})"
    try:
        if st.st_mode & 0o077:
            os.chmod(d, 0o700)
        fd, probe = tempfile.mkstemp(dir=d, prefix=".probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        return f"it is not writable ({e.strerror or e})"
    return None


def cache_root(notify: Notify | None = None) -> Path | None:
    """The cache directory, or None when no private, writable place exists (the cache is then off)."""
    say = notify or _warn
    env = os.environ.get("KERNSCOPE_CACHE_DIR")
    if env:
        d = Path(env)
        why = _private_dir(d, follow=True)
        if why is None:
            return d
        say(f"kernscope: cache directory {d} cannot be used: {why}; running without a cache")
        return None
    usual = preferred_root()
    if usual is not None and _private_dir(Path(usual), follow=True) is None:
        return Path(usual)
    uid = _uid()
    fallback = Path(tempfile.gettempdir()) / f"kernscope-cache-{uid if uid is not None else 'user'}"
    why = _private_dir(fallback, follow=False)  # a shared temp dir: another user may have made this name first
    if why is None:
        say(f"kernscope: no usable home cache directory; caching in {fallback}")
        return fallback
    say(f"kernscope: no usable cache directory ({fallback}: {why}); running without a cache")
    return None


def _mac(key: bytes, data: bytes) -> str:
    return hashlib.blake2b(data, key=key, digest_size=16).hexdigest()


def max_bytes() -> int:
    v = os.environ.get("KERNSCOPE_CACHE_MAX_BYTES")
    try:
        return int(v) if v else DEFAULT_MAX_BYTES
    except ValueError:
        return DEFAULT_MAX_BYTES


# -- hashing ----------------------------------------------------------------------------------------
def file_digest(path: str | os.PathLike[str]) -> str:
    """xxh3-128 of a file's bytes (as stored: compressed bytes for gzip).

    Read through memory maps of :data:`_READ` bytes, one at a time (no copy into a buffer: a 206 MB trace hashed in
    0.05-0.08 s instead of 0.21 s in a fresh process; one window at a time keeps a 10 GB file's pages out of the
    process's resident memory); a file that cannot be mapped is read."""
    h = xxhash.xxh3_128()
    with open(path, "rb", buffering=0) as f:
        try:
            size = os.fstat(f.fileno()).st_size
            for at in range(0, size, _READ):
                window = mmap.mmap(f.fileno(), min(_READ, size - at), offset=at, access=mmap.ACCESS_READ)
                try:
                    h.update(window)
                finally:
                    window.close()
            if f.seek(0, os.SEEK_END) == size:
                return h.hexdigest()
        except (OSError, ValueError, OverflowError):
            pass
        if f.seekable():  # not mappable (a special file), or it grew meanwhile: read it
            f.seek(0)
        return _read_digest(f)


def _read_digest(f: io.RawIOBase) -> str:
    """xxh3-128 of what ``f`` reads from where it is, in :data:`_READ`-byte reads into one buffer."""
    h = xxhash.xxh3_128()
    buf = bytearray(_READ)
    view = memoryview(buf)
    while True:
        n = f.readinto(buf)
        if not n:
            break
        h.update(view[:n])
    return h.hexdigest()


@dataclass(frozen=True)
class KnownDigest:
    """A file's content digest and the file's identity just before it was hashed: a later step may use the
    digest instead of hashing again while the file still has that identity."""

    identity: Any  #: :class:`kernscope.load.source.FileIdentity`
    hexdigest: str

    @classmethod
    def of(cls, path: str | os.PathLike[str], root: Path | None = None) -> KnownDigest:
        """The digest of ``path``: from the digest index when the file has the identity it had when
        it was hashed there (:func:`_indexed`), else hashed (and indexed)."""
        from .source import FileIdentity

        identity = FileIdentity.of(path)
        index = _digest_index(root)
        key = _secret(index.parent) if index is not None else None
        hexdigest = _indexed(index, identity, key) if index is not None and key is not None else None
        if hexdigest is None:
            hexdigest = file_digest(path)
            if index is not None and key is not None:
                _index(index, identity, hexdigest, key)
        return cls(identity, hexdigest)


class PendingDigest:
    """The content digest of a file that no cache entry can hold yet, hashed when first asked for rather than before
    the parse. No entry (and so no stored output) was ever written for a file of its size (:func:`size_seen`), so
    nothing can be looked up under its digest: a cold load parses at once, and the entry's writer hashes the file
    on its thread while the trace is linked (before, the hash came first, beside the command's imports: 0.03-0.04 s
    at 200 MB, 0.16-0.2 s at 975 MB, and 10 GB read from disk twice, the 10 GB replica's cold run 27.5 -> 24.2 s).
    :meth:`get` is None when the file no longer has ``identity`` after it was hashed (it changed after it was read:
    its entry is not written)."""

    def __init__(self, path: str | os.PathLike[str], identity: Any, root: Path | None = None) -> None:
        self.path, self.identity, self.root = str(path), identity, root
        self._lock = threading.Lock()
        self._done = False
        self._hex: str | None = None

    def known(self) -> str | None:
        """The digest when :meth:`get` has hashed the file (None before, or when it changed); never hashes."""
        with self._lock:
            return self._hex

    def get(self) -> str | None:
        """The digest (hashed on the first call, once), or None when the file changed since it was read."""
        from ..errors import TraceError
        from .source import FileIdentity

        with self._lock:
            if not self._done:
                self._done = True
                try:
                    hexdigest = file_digest(self.path)
                    same = FileIdentity.of(self.path) == self.identity
                except (OSError, TraceError):  # removed or unreadable since: not cached, as a changed file
                    same = False
                if same:
                    self._hex = hexdigest
                    index = _digest_index(self.root)
                    key = _secret(index.parent) if index is not None else None
                    if index is not None and key is not None:
                        _index(index, self.identity, hexdigest, key)
            return self._hex


def digest_later(path: str | os.PathLike[str], identity: Any, root: Path | None = None) -> PendingDigest | None:
    """A :class:`PendingDigest` for ``path`` when no cache entry can exist for a file of its size (then it need not be
    hashed before it is parsed), else None (look it up: :meth:`KnownDigest.of`)."""
    return None if size_seen(identity.size, root) else PendingDigest(path, identity, root)


#: a file is indexed only when it has not changed for this long (a change made within the timestamp
#: granularity of a coarse file system could keep the mtime, as git's "racily clean" entries)
RACY_NS = 2_000_000_000
#: the digest index keeps at most this many files (oldest first out)
MAX_INDEXED = 4096


def _subdir(root: Path | None, name: str) -> Path | None:
    """``name`` under the cache root (the configured one when ``root`` is None); None without a cache."""
    root = root if root is not None else cache_root(notify=lambda _m: None)
    return None if root is None else root / name


def _digest_index(root: Path | None) -> Path | None:
    return _subdir(root, "digests")


def _identity_fields(identity: Any) -> list[Any]:
    return [os.path.realpath(identity.path), identity.size, identity.mtime_ns, identity.ctime_ns, identity.inode]


def _index_file(index: Path, identity: Any) -> Path:
    return index / xxhash.xxh3_64_hexdigest(json.dumps(_identity_fields(identity)).encode())


def _indexed(index: Path, identity: Any, key: bytes) -> str | None:
    """The digest recorded for a file with exactly this identity (path, size, mtime, ctime, inode: any
    write to the file changes its ctime), or None."""
    try:
        doc = _unseal(_read_private(_index_file(index, identity)), key)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if doc.get("identity") != _identity_fields(identity) or not isinstance(doc.get("digest"), str):
        return None
    return str(doc["digest"])


def _index(index: Path, identity: Any, hexdigest: str, key: bytes) -> None:
    now = time.time_ns()
    if identity.mtime_ns > now - RACY_NS or identity.ctime_ns > now - RACY_NS:
        return  # changed very recently: hash it again next time
    try:
        index.mkdir(parents=True, exist_ok=True)
        target = _index_file(index, identity)
        fd, tmp = tempfile.mkstemp(dir=index, prefix=".tmp-")
        with os.fdopen(fd, "wb") as out:
            out.write(_seal({"identity": _identity_fields(identity), "digest": hexdigest}, key))
        os.replace(tmp, target)
        names = os.listdir(index)
        if len(names) > MAX_INDEXED:
            files = sorted((index / n for n in names), key=lambda f: f.stat().st_mtime if f.exists() else 0.0)
            for f in files[: len(files) - MAX_INDEXED]:
                f.unlink(missing_ok=True)
    except OSError:
        return


def entry_key(digest: str, options: dict[str, Any]) -> str:
    raw = json.dumps([digest, CACHE_FORMAT_VERSION, ARG_SPEC_VERSION, XPLANE_SPEC_VERSION, __version__, code_fingerprint(),
                      sorted(options.items())],
                     default=str)
    return xxhash.xxh3_128(raw.encode()).hexdigest()


def _version_dir(root: Path) -> Path:
    return root / f"v{CACHE_FORMAT_VERSION}"


def _checksum_file(p: Path) -> str:
    with open(p, "rb", buffering=0) as f:
        return _read_digest(f)


# -- manifest ---------------------------------------------------------------------------------------
def _seal(doc: dict[str, Any], key: bytes) -> bytes:
    # (keys in the order given: a trace's info read back from an entry must render as the fresh one does; sorted, a
    # cached load's ``unlinked`` counts came out in another order than a cold load's, and the JSON differed)
    body = json.dumps(doc, default=str)
    return json.dumps({"body": body, "check": _mac(key, body.encode())}).encode()


def _unseal(data: bytes, key: bytes) -> dict[str, Any]:
    outer = json.loads(data)
    body = outer["body"]
    if _mac(key, body.encode()) != outer["check"]:
        raise ValueError("manifest check failed (damaged, or not written by this user)")
    doc = json.loads(body)
    if not isinstance(doc, dict):
        raise ValueError("manifest is not an object")
    return doc


@dataclass
class Entry:
    """A verified cache entry."""

    path: Path
    manifest: dict[str, Any]
    key: bytes = b""  #: this user's MAC key (stored outputs are checked with it)
    _strings: Any = field(default=None, repr=False, compare=False)  #: the codes' strings, read once for all tables

    def _checked(self, name: str) -> Path:
        """The path of the entry's file ``name``, checked against its checksum (``ValueError`` when damaged)."""
        p = self.path / name
        want = self.manifest["files"][name]
        st = os.lstat(p)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{name} is not a regular file")
        if st.st_size != want["size"] or _checksum_file(p) != want["xxh3"]:
            raise ValueError(f"{name} does not match its checksum")
        return p

    def columns(self, name: str) -> list[str]:
        """Table ``name``'s columns, in order, as the manifest lists them (no file read)."""
        return list(self.manifest["files"][f"{name}.arrow"]["columns"])

    def shares_events(self, name: str) -> bool:
        """Whether table ``name`` is stored as a run of the event table's rows (:func:`_shared_run`: a JAX profile's
        GPU table), its shared columns read from the event table."""
        return bool(self.manifest["files"][f"{name}.arrow"].get("shared"))

    def table(self, name: str, columns: list[str] | None = None, rows: tuple[int, int] | None = None,
              events: pl.DataFrame | None = None) -> pl.DataFrame:
        """Read one table (all its columns, or ``columns`` in that order; all its rows, or ``rows``: (offset, length)),
        checking its checksums first (raises ``ValueError`` when damaged): its file, and for a GPU table stored as a
        run of the event table's rows (:func:`_shared_run`), the shared columns from the event table's file over that
        run, whose ``idx`` must be the GPU table's; or, given ``events`` (this entry's event table, read whole), as
        slices of its columns, which hold no second copy."""
        want = self.manifest["files"][f"{name}.arrow"]
        if columns is not None and not set(columns) <= set(want["columns"]):
            raise ValueError(f"{name}.arrow: columns it does not have")
        shared = want.get("shared")
        cols = list(shared["columns"]) if shared else []
        if columns is None and rows is None:
            df = self._columns(name)
        else:  # (its own columns asked for, and its row ids where shared ones are: the run is checked by them)
            own = [c for c in (want["columns"] if columns is None else columns) if c not in cols]
            df = self._columns(name, own + ["idx"] if shared and "idx" not in own else own, rows)
        if shared:  # (columns that are a run of the event table's rows, read from its file)
            start = int(shared["start"]) + (rows[0] if rows is not None else 0)
            if not set(cols) <= set(self.manifest["files"]["events.arrow"]["columns"]) or "idx" not in df.columns:
                raise ValueError(f"{name}.arrow: shared columns the event table does not have")
            cols = cols if columns is None else [c for c in cols if c in columns]
            run = (events.select([*cols, "idx"]).slice(start, df.height) if events is not None
                   else self._columns("events", [*cols, "idx"], (start, df.height)))
            if run.height != df.height or not run["idx"].equals(df["idx"]):
                raise ValueError(f"{name}.arrow: its rows are not the event table's run at {start}")
            df = df.with_columns(run.select(cols).get_columns())
        return df.select(want["columns"] if columns is None else columns) if shared or columns is not None else df

    def lazy(self, name: str, reread: Callable[[], pl.DataFrame] | None = None,
             holds: frozenset[str] | None = None) -> pl.LazyFrame:
        """Table ``name`` as a lazy frame that reads only the columns (and rows) a query asks for, when the query
        runs (:func:`lazy_frame`): ``kernscope sql`` over a stored trace reads a few columns, not the tables.
        ``reread()``: the table from elsewhere (a load that parses the file) when the entry is damaged or gone
        (else the error is raised), or when the query asks for a column not in ``holds`` (None: every column; an
        entry of a projected load holds some columns as they would be without the projection, not all)."""
        import polars as pl

        errors = (OSError, ValueError, KeyError, TypeError, pl.exceptions.PolarsError)
        try:
            schema = self.table(name, rows=(0, 0)).schema
        except errors:
            if reread is None:
                raise
            return reread().lazy()
        return lazy_frame(schema, partial(self.table, name), reread=reread, holds=holds, errors=errors,
                          explain_name=f"kernscope cache {name}")

    def _columns(self, name: str, columns: list[str] | None = None,
                 rows: tuple[int, int] | None = None) -> pl.DataFrame:
        """Table ``name`` as its file holds it (all its columns, or ``columns``; all its rows, or ``rows``: (offset,
        length)), checksum checked, with its categoricals, derived and null columns restored; without the columns it
        shares with the event table."""
        import polars as pl

        want = self.manifest["files"][f"{name}.arrow"]
        nulls, derived, codes = want.get("nulls") or {}, want.get("derived") or {}, want.get("codes") or []
        ranges: dict[str, int] = want.get("ranges") or {}
        if not all(isinstance(v, int) for v in ranges.values()):
            raise ValueError(f"{name}.arrow: a range column without its first value")
        shared = set((want.get("shared") or {}).get("columns") or ())
        order = [c for c in want["columns"] if c not in shared] if columns is None else columns
        path = self._checked(f"{name}.arrow")
        if columns is None and rows is None:
            df = pl.read_ipc(path)
        else:
            nulls = {c: t for c, t in nulls.items() if c in order}
            derived = {c: ab for c, ab in derived.items() if c in order}
            ranges = {c: v for c, v in ranges.items() if c in order}
            needed = [*order, *(x for ab in derived.values() for x in ab)]
            stored = (set(want["columns"]) - shared - set(want.get("nulls") or {}) - set(want.get("derived") or {})
                      - set(want.get("ranges") or {}))
            if not set(needed) <= stored | set(nulls) | set(derived) | set(ranges):
                raise ValueError(f"{name}.arrow: columns it does not have")
            read = list(dict.fromkeys(c for c in needed if c in stored))
            codes = [c for c in codes if c in read]
            lf = pl.scan_ipc(path)
            lf = lf.slice(*rows) if rows is not None else lf
            if read:
                df = lf.select(read).collect()
            else:  # (only columns made here, which take their height from the rows read: a column of the rows)
                df = pl.DataFrame({"__rows": pl.zeros(lf.select(pl.len()).collect().item(), dtype=pl.Int8, eager=True)})
        if ranges:  # (a column that counts up by one from its first value: not written)
            at = rows[0] if rows is not None else 0
            df = df.with_columns(pl.int_range(v + at, v + at + df.height, dtype=pl.Int64, eager=True).alias(c)
                                 for c, v in ranges.items())
        if codes:
            if STRINGS_FILE not in self.manifest["files"] or not set(codes) <= set(df.columns):
                raise ValueError(f"{name}.arrow: categorical columns without their strings")
            if self._strings is None:
                self._strings = pl.read_ipc(self._checked(STRINGS_FILE))["value"].cast(pl.Categorical)
            cats = self._strings
            try:
                df = df.with_columns(pl.lit(cats).gather(pl.col(c)).alias(c) for c in codes)
            except pl.exceptions.PolarsError as e:
                raise ValueError(f"{name}.arrow: a code without a string ({e})") from None
        if derived:
            if any(c not in _SUMS or list(_SUMS[c]) != ab or not set(ab) <= set(df.columns) for c, ab in derived.items()):
                raise ValueError(f"{name}.arrow: unknown derived column in the manifest")
            df = df.with_columns((pl.col(a) + pl.col(b)).alias(c) for c, (a, b) in derived.items())
        if nulls:
            if not set(nulls.values()) <= set(_NULL_TYPES):
                raise ValueError(f"{name}.arrow: unknown column type in the manifest")
            df = df.with_columns(pl.lit(None, dtype=getattr(pl, t)()).alias(c) for c, t in nulls.items())
        if nulls or derived or ranges or columns is not None:
            df = df.select(order)
        return df

    @property
    def info(self) -> dict[str, Any]:
        info: dict[str, Any] = self.manifest["info"]
        return info


def _discard(d: Path, why: str, notify: Notify | None) -> None:
    (notify or _warn)(f"kernscope: discarded a damaged cache entry ({why}); rebuilding it")
    shutil.rmtree(d, ignore_errors=True)


def open_entry(digest: str, options: dict[str, Any], *, notify: Notify | None = None) -> Entry | None:
    """The verified entry for (input digest, options), or None (absent, or damaged and discarded)."""
    root = cache_root(notify)
    key = _secret(root) if root is not None else None
    if root is None or key is None:
        return None
    d = _version_dir(root) / entry_key(digest, options)
    if not d.is_dir() or d.is_symlink():
        return None
    try:
        manifest = _unseal(_read_private(d / "manifest.json"), key)
        if manifest.get("digest") != digest or manifest.get("format") != CACHE_FORMAT_VERSION:
            raise ValueError("manifest is for another input")
        files = manifest["files"]
        for name in [f"{t}.arrow" for t in TABLES] + ([STRINGS_FILE] if STRINGS_FILE in files else []):
            if (d / name).stat().st_size != files[name]["size"]:
                raise ValueError(f"{name} has the wrong size")
    except FileNotFoundError:
        if d.exists():
            _discard(d, "files missing", notify)
        return None
    except (OSError, ValueError, KeyError, TypeError) as e:
        _discard(d, str(e) or type(e).__name__, notify)
        return None
    with contextlib.suppress(OSError):
        os.utime(d / "manifest.json")  # last use, for LRU eviction
    return Entry(d, manifest, key)


def lazy_frame(schema: Mapping[str, Any], read: Callable[[list[str], tuple[int, int] | None], pl.DataFrame], *,
               reread: Callable[[], pl.DataFrame] | None = None, holds: frozenset[str] | None = None,
               errors: tuple[type[BaseException], ...] = (), explain_name: str = "kernscope table") -> pl.LazyFrame:
    """A table of ``schema`` as a lazy frame that reads, when a query runs, only the columns (and, without a filter, the
    rows) the query asks for (polars' IO sources push the query's projection, filter and limit into it): ``read(columns,
    rows)`` gives them (``rows``: (offset, length), or None for all). ``reread()`` gives the whole table from elsewhere
    where the query asks for a column not in ``holds`` (None: every column is held) or ``read`` raises one of
    ``errors`` (without ``reread`` the error is raised). A parse-cache entry's tables (:meth:`Entry.lazy`) and a
    projected load's (``pipeline.Held``) are read so."""
    from polars.io.plugins import register_io_source

    names = list(schema)

    def source(with_columns: list[str] | None, predicate: pl.Expr | None, n_rows: int | None,
               batch_size: int | None) -> Iterator[pl.DataFrame]:
        want = names if with_columns is None else list(with_columns)
        need = list(dict.fromkeys([*want, *(predicate.meta.root_names() if predicate is not None else [])]))
        need = need or names[:1]  # (a count reads one column: a frame without columns has no rows)
        rows = (0, n_rows) if n_rows is not None and predicate is None else None
        cols = [c for c in names if c in need]
        if reread is not None and holds is not None and not set(cols) <= holds:
            df = reread().select(cols)
        else:
            try:
                df = read(cols, rows)
            except errors:
                if reread is None:
                    raise
                df = reread().select(cols)
        if predicate is not None:
            df = df.filter(predicate)
        yield (df if n_rows is None else df.head(n_rows)).select(want)

    return register_io_source(source, schema=dict(schema), explain_name=explain_name)


def write_entry(digest: str, options: dict[str, Any], tables: dict[str, pl.DataFrame], info: dict[str, Any],
                *, notify: Notify | None = None) -> Path | None:
    """Store tables and info atomically; returns the entry path, or None when the cache is unwritable."""
    writer = EntryWriter(digest, options, notify=notify,
                         compress=sum(_stored_size(df) for df in tables.values()) > COMPRESS_ABOVE)
    for name, df in tables.items():
        writer.add(name, df)
    return writer.commit(info)


def _stored_size(df: Any) -> int:
    """Bytes of ``df`` in memory without its all-null columns (what decides whether an entry is compressed)."""
    return int(df.drop(list(_null_columns(df))).estimated_size())


class EntryWriter:
    """Writes one cache entry table by table, then makes it visible whole (:meth:`commit`) or not at all
    (:meth:`abandon`). A table can be written as soon as it is final, while the rest of the trace is still being
    linked: a load writes the event table (two thirds of an entry's tables in memory) while the GPU table is linked.

    ``add`` and ``commit`` may run on other threads than the one that made the writer, one call at a time. A
    failure to write (disk full, unwritable cache) is told once through ``notify`` and the entry is dropped; the
    load goes on without it. ``compress``: write the tables zstd-compressed (default: when the first table added
    is the event table and takes more than :data:`COMPRESS_EVENTS_ABOVE` bytes in memory, or is another table and
    takes more than :data:`COMPRESS_ABOVE`)."""

    def __init__(self, digest: str | PendingDigest, options: dict[str, Any], *, notify: Notify | None = None,
                 compress: bool | None = None, size: int | None = None) -> None:
        self.digest, self.options, self.notify = digest, options, notify
        #: the file's size (as stored): marked at the commit (:func:`mark_size`), so that a file of this size is looked up
        self.size = digest.identity.size if isinstance(digest, PendingDigest) else size
        self.compress = compress
        self._files: dict[str, dict[str, Any]] = {}
        self._rows = 0  #: rows of the tables added so far (bounds the strings their codes may need)
        self._events: Any = None  #: the event table, once added (the GPU table's columns may be a run of its rows)
        self._top = -1  #: the largest code written (the strings file holds the strings of ids 0..top)
        self._tmp: Path | None = None
        root = cache_root(notify)
        self._root, self._key = root, (_secret(root) if root is not None else None)
        if root is None or self._key is None:
            return
        vdir = _version_dir(root)
        try:
            vdir.mkdir(parents=True, exist_ok=True)
            self._tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=vdir))
        except OSError:
            self._tmp = None

    @property
    def active(self) -> bool:
        """False once the entry is committed, abandoned or failed (or when the cache is unwritable)."""
        return self._tmp is not None

    def settle_digest(self) -> None:
        """Hash the file now when its digest is pending (:class:`PendingDigest`; else nothing): a load calls it on the
        thread that wrote the event table, while the link still runs."""
        if self._tmp is not None and isinstance(self.digest, PendingDigest):
            self.digest.get()

    def add(self, name: str, df: pl.DataFrame) -> None:
        """Write table ``name`` (one of :data:`TABLES`) into the entry."""
        if self._tmp is None:
            return
        if name == "events":
            self._events = df
        try:
            self._write_table(self._tmp, name, df)
        except _write_errors() as e:  # on a thread: told, not raised
            self._fail(e)

    def _write_table(self, tmp: Path, name: str, df: Any) -> None:
        import polars as pl

        nulls = _null_columns(df)  # kept as their type alone
        table = df.drop(list(nulls))
        shared = _shared_run(table, self._events) if name == "gpu" and self._events is not None else None
        if shared is not None:
            table = table.drop(shared["columns"])
        if self.compress is None:
            self.compress = table.estimated_size() > (COMPRESS_EVENTS_ABOVE if name == "events" else COMPRESS_ABOVE)
        derived = _derived_columns(table)
        ranges = _range_columns(table)
        table = table.drop([*derived, *ranges])
        self._rows += df.height
        codes = self._codes(table)
        if codes:
            table = table.with_columns(pl.col(codes).to_physical())
        p = tmp / f"{name}.arrow"
        # one record batch (a compressed table: batches of BATCH_ROWS), so that the table reads back with contiguous
        # columns as a parse leaves them: in polars' default batches of 2**17 rows, a query on the read table first
        # copied every column into one chunk (+0.5 GB on the 200 MB JAX class's cached analyze)
        rows = min(table.height, BATCH_ROWS) if self.compress else table.height
        table.write_ipc(p, compression="zstd" if self.compress else "uncompressed", record_batch_size=max(rows, 1))
        del table
        self._files[p.name] = {"size": p.stat().st_size, "xxh3": _checksum_file(p), "columns": df.columns,
                               "nulls": nulls, "derived": derived, "ranges": ranges, "codes": codes, "shared": shared}

    def _codes(self, table: Any) -> list[str]:
        """The categorical columns of ``table`` to write as their codes (polars' physical ids), with the strings of ids
        0..max once for the entry (:data:`STRINGS_FILE`). Written as categoricals, polars converted each code to an
        Arrow dictionary's, one at a time: a quarter of the CPU time of a 1 GB trace's entry. None when the process
        holds many more strings than the tables have rows (polars' categories are the process's: a long session's
        would be written whole): then they are written as categoricals."""
        import polars as pl

        cols = [c for c, t in table.schema.items() if isinstance(t, pl.Categorical) and t.categories.is_global()]
        if not cols or table.height == 0:
            return []
        top = table.select(pl.col(cols).to_physical().max()).max_horizontal().item()
        if top is None or max(top, self._top) + 1 > STRINGS_PER_ROW * self._rows + STRINGS_SLACK:
            return []
        self._top = max(top, self._top)
        return cols

    def commit(self, info: dict[str, Any]) -> Path | None:
        """Write the strings and the manifest and move the entry into place; returns its path (None when it could not
        be written: told through ``notify``)."""
        tmp = self._tmp
        if tmp is None or self._root is None or self._key is None:
            return None
        root, key = self._root, self._key
        pending: PendingDigest | None = None
        digest: str | None
        if isinstance(self.digest, str):
            digest = self.digest
        else:
            pending = self.digest
            digest = pending.get()
        if digest is None:
            self.abandon()
            (self.notify or _warn)(f"kernscope: {pending.path if pending else 'the trace'} changed while it was read; "
                                   "not caching it")
            return None
        final = _version_dir(root) / entry_key(digest, self.options)
        try:
            if set(TABLES) - {n.removesuffix(".arrow") for n in self._files}:
                raise ValueError("an entry without all its tables")
            if self._top >= 0:
                self._write_strings(tmp)
            (tmp / "results").mkdir()
            manifest = {"format": CACHE_FORMAT_VERSION, "digest": digest, "options": self.options,
                        "files": self._files, "info": info, "created": time.time()}
            (tmp / "manifest.json").write_bytes(_seal(manifest, key))
            try:
                os.rename(tmp, final)
            except OSError:  # another process stored the same entry first: keep it (identical content)
                if open_entry(digest, self.options, notify=self.notify) is None:
                    shutil.rmtree(final, ignore_errors=True)
                    os.rename(tmp, final)
                else:
                    shutil.rmtree(tmp, ignore_errors=True)
        except _write_errors() as e:
            self._fail(e)
            return None
        self._tmp = None
        if self.size is not None:
            mark_size(self.size, root)
        if _note_write(root, sum(int(f["size"]) for f in self._files.values())):
            evict(root)
        return final

    def _write_strings(self, tmp: Path) -> None:
        import itertools

        import polars as pl

        strings = list(itertools.islice(iter(pl.Categorical().categories), self._top + 1))
        if len(strings) != self._top + 1:
            raise ValueError("the categories hold fewer strings than the codes written")
        p = tmp / STRINGS_FILE
        pl.Series("value", strings, dtype=pl.String).to_frame().write_ipc(
            p, compression="zstd" if self.compress else "uncompressed")
        self._files[p.name] = {"size": p.stat().st_size, "xxh3": _checksum_file(p)}

    def abandon(self) -> None:
        """Drop the entry: nothing of it is kept."""
        tmp, self._tmp = self._tmp, None
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)

    def _fail(self, e: Exception) -> None:
        self.abandon()
        (self.notify or _warn)(f"kernscope: could not write the cache ({e}); continuing without it")


def _write_errors() -> tuple[type[Exception], ...]:
    """What writing an entry may raise that drops the entry with a notice (it runs on a thread beside the analysis: a
    traceback there would be a crash the command does not have): the file system's, polars', memory."""
    import polars as pl

    return (OSError, ValueError, MemoryError, pl.exceptions.PolarsError)


#: column types a table's all-null column may have to be stored as its type alone
_NULL_TYPES = ("Int64", "Int32", "UInt32", "Float64", "Boolean", "String", "Categorical")


def _null_columns(df: Any) -> dict[str, str]:
    """Columns of ``df`` with no value in any row, by type name (a projection's unread args: half of an
    event table's bytes in a cache entry if written out)."""
    if df.height == 0:
        return {}
    counts = df.null_count().row(0)
    return {c: type(t).__name__ for (c, t), n in zip(df.schema.items(), counts)
            if n == df.height and type(t).__name__ in _NULL_TYPES}


#: the file of an entry that holds the text of its categorical columns' codes (see :func:`_strings_as_codes`)
STRINGS_FILE = "strings.arrow"
#: the codes are written with the strings of ids 0..max only when there are at most this many per row of the tables,
#: plus the slack (else the columns are written as categoricals)
STRINGS_PER_ROW, STRINGS_SLACK = 4, 4096
#: a column computed from others when read, when every row equals it: name -> (a, b) for ``a + b``
_SUMS = {"end": ("ts", "dur")}


def _derived_columns(df: Any) -> dict[str, list[str]]:
    """Columns of ``df`` that equal a sum of two others in every row (``end`` = ``ts`` + ``dur``, nulls where
    either is null), as :data:`_SUMS` gives them: not written, computed when read. ``end`` was a fifth of a 1 GB
    trace's compressed entry and of the CPU time its write took (a timestamp compresses poorly)."""
    import polars as pl

    out: dict[str, list[str]] = {}
    schema = df.schema
    for c, (a, b) in _SUMS.items():
        if ({c, a, b} <= set(schema) and all(schema[x] == pl.Int64 for x in (c, a, b))
                and df.select((pl.col(a) + pl.col(b)).eq_missing(pl.col(c)).all()).item()):
            out[c] = [a, b]
    return out


#: columns written as their first value where they count up by one from it in every row (a JAX profile's ``idx``: its
#: event number, every event read)
_RANGES = ("idx",)


def _range_columns(df: Any) -> dict[str, int]:
    """Columns of :data:`_RANGES` that hold ``first, first + 1, ...`` in every row (Int64, no null): their first
    values. Not written, made again when read: a JAX profile's ``idx`` was 0.19 of the 1.1 s of CPU its 975 MB
    profile's event table took to compress, for an array of 8.8 M consecutive numbers."""
    import polars as pl

    out: dict[str, int] = {}
    for c in _RANGES:
        if c not in df.columns or df.schema[c] != pl.Int64 or df.height == 0 or df[c].null_count():
            continue
        v = df[c].to_numpy()
        if int(v[-1]) - int(v[0]) == len(v) - 1 and bool((v[1:] > v[:-1]).all()):  # (increasing integers: every one)
            out[c] = int(v[0])
    return out


def _shared_run(table: Any, events: Any) -> dict[str, Any] | None:
    """Where the GPU ``table``'s rows are one run of the event table's rows (by ``idx``), as every JAX profile's are:
    ``{"start": first row, "columns": [...]}``, the columns (but ``idx``) that equal the events' over that run, cell
    for cell and type for type. They are not written with the GPU table but read from the event table's file
    (:meth:`Entry.table`): at 1 GB of JAX they were 0.85 of the GPU table's 1 s of compression CPU, the same bytes
    the event table's write had compressed. None where the rows are not such a run or nothing is shared."""
    from ..model import row_run

    start = row_run(events, table)
    if start is None:
        return None
    n = table.height
    columns = [c for c in table.columns if c != "idx" and c in events.columns
               and events.schema[c] == table.schema[c] and events[c].slice(start, n).equals(table[c], check_dtypes=True)]
    return {"start": start, "columns": columns} if columns else None


# -- results (rendered outputs) -------------------------------------------------------------------
def _result_path(entry: Entry, key: dict[str, Any]) -> Path:
    k = xxhash.xxh3_128(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()
    return entry.path / "results" / k


def read_result(entry: Entry, key: dict[str, Any]) -> bytes | None:
    """A stored output for ``key`` (options, format, width...), checked; None if absent or damaged."""
    p = _result_path(entry, key)
    try:
        data = _read_private(p)
    except OSError:
        return None
    check, _, body = data.partition(b"\n")
    if not entry.key or _mac(entry.key, body).encode() != check:
        p.unlink(missing_ok=True)
        return None
    return body


def write_result(entry: Entry, key: dict[str, Any], body: bytes) -> None:
    p = _result_path(entry, key)
    try:
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(_mac(entry.key, body).encode() + b"\n" + body)
        os.replace(tmp, p)
    except OSError:
        return
    root = entry.path.parent.parent
    if _note_write(root, len(body)):
        evict(root)


# -- size cap -------------------------------------------------------------------------------------
def _size(d: Path) -> int:
    total = 0
    for p in d.rglob("*"):
        try:
            if p.is_file():
                total += p.stat().st_size
        except OSError:
            continue
    return total


def entries(root: Path | None = None) -> list[tuple[Path, int, float]]:
    """(entry, bytes, last use) of every entry, all format versions."""
    root = root or cache_root()
    if root is None or not root.is_dir():
        return []
    out = []
    for vdir in root.glob("v*"):
        for d in vdir.iterdir():
            if not d.is_dir() or d.name.startswith(".tmp-"):
                continue
            try:
                used = (d / "manifest.json").stat().st_mtime
            except OSError:
                used = 0.0
            out.append((d, _size(d), used))
    return out


#: a full pass over the entries (sizes, eviction) at least every this many writes, else only over the cap
FULL_PASS_EVERY = 512


def _note_write(root: Path, nbytes: int) -> bool:
    """Add a write of ``nbytes`` to the cache's running total (``root/usage``); True when a full eviction pass is
    due: over the cap, every :data:`FULL_PASS_EVERY` writes, or no total known. One small file per write
    instead of a scan of every entry, so many small writes (thousands of ranks) stay linear."""
    p = root / "usage"
    try:
        used, writes = json.loads(_read_private(p))
        used, writes = int(used) + int(nbytes), int(writes) + 1
    except (OSError, ValueError, TypeError):
        return True
    with contextlib.suppress(OSError):
        fd, tmp = tempfile.mkstemp(dir=root, prefix=".tmp-usage-")
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps([used, writes]))
        os.replace(tmp, p)
    return used > max_bytes() or writes % FULL_PASS_EVERY == 0


def evict(root: Path, limit: int | None = None) -> int:
    """Remove least recently used entries (and old format versions) until the cache fits ``limit``; records the
    total it leaves (the running total of :func:`_note_write`)."""
    limit = max_bytes() if limit is None else limit
    removed = 0
    for vdir in root.glob("v*"):
        if vdir.name != f"v{CACHE_FORMAT_VERSION}":
            shutil.rmtree(vdir, ignore_errors=True)
    # stale temporaries of crashed writers (older than an hour)
    vdir = _version_dir(root)
    if vdir.is_dir():
        for t in vdir.glob(".tmp-*"):
            try:
                if time.time() - t.stat().st_mtime > 3600:
                    shutil.rmtree(t, ignore_errors=True)
            except OSError:
                continue
    found = sorted(entries(root), key=lambda e: e[2])
    total = sum(e[1] for e in found)
    for d, size, _ in found:
        if total <= limit:
            break
        shutil.rmtree(d, ignore_errors=True)
        total -= size
        removed += 1
    with contextlib.suppress(OSError):
        fd, tmp = tempfile.mkstemp(dir=root, prefix=".tmp-usage-")
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps([total, 0]))
        os.replace(tmp, root / "usage")
    return removed


def clear(root: Path | None = None) -> int:
    """Remove every entry, and the stored outputs kept for replay (:mod:`kernscope.replay`); returns the bytes
    freed."""
    root = root or cache_root()
    if root is None:
        return 0
    freed = sum(e[1] for e in entries(root)) + _size(root / "replay")
    for vdir in root.glob("v*"):
        shutil.rmtree(vdir, ignore_errors=True)
    shutil.rmtree(root / "digests", ignore_errors=True)
    shutil.rmtree(root / "replay", ignore_errors=True)  # kernscope.replay's records of stored outputs
    shutil.rmtree(root / "sizes", ignore_errors=True)
    with contextlib.suppress(OSError):
        (root / "usage").unlink()
    return freed


# -- file sizes with cache entries ------------------------------------------------------------------
# An entry (and a stored output in it) is found by its file's content hash, so a load would hash the file before
# anything else. Content of a given hash has one size: when no entry was ever written for a file of this size, none
# can be found, and the file is parsed at once, hashed later (:class:`PendingDigest`). The marks are never removed
# with an entry: a stale one only means hashing first, as before; an entry written before marks existed is found
# again once a load of its file has written it anew.
def _sizes(root: Path | None) -> Path | None:
    return _subdir(root, "sizes")


def mark_size(size: int, root: Path | None = None) -> None:
    """Record that an entry (where outputs are stored) was written for a file of ``size`` bytes (as stored)."""
    d = _sizes(root)
    if d is None:
        return
    with contextlib.suppress(OSError):
        d.mkdir(parents=True, exist_ok=True)
        (d / str(int(size))).touch()


def size_seen(size: int, root: Path | None = None) -> bool:
    """False only when no entry (and so no stored output) was ever written for a file of ``size`` bytes."""
    d = _sizes(root)
    if d is None:
        return False
    try:
        return (d / str(int(size))).exists()
    except OSError:
        return True
