"""The ``kernscope`` command's entry point, and a cached ``kernscope analyze`` answered before anything else is
imported.

A stored output (:mod:`.outputs`) is found through the trace's content hash, and to find it the command line had to
be imported and parsed (click, the cache, ~0.1 s: most of a cached answer). When a run stores its output, or finds
it stored, it also keeps a *replay record*: the output bytes, keyed by everything the run's output can depend on
besides the files it read, and checked against those files' identities. The next run with the same key prints the
record and exits, importing nothing but the package's front, this module, :mod:`.sink`, :mod:`.errors`,
:mod:`.version` and :mod:`.load.cachedir` (and of the standard library ``os``, ``stat``, ``time`` and the builtin
BLAKE2b).

- **Key** (:meth:`Invocation.context`): kernscope's version and code fingerprint, the interpreter, the working
  directory, the arguments as given, the environment (less a shell's bookkeeping variables), and whether stdout and
  stderr are terminals (with stdout's size). Any difference is a miss, and the command runs as usual.
- **Files**: the trace and the rules files the run read, by identity (device, inode, size, modification and change
  times in ns; any write changes the change time). A record is kept only when each of them was last changed at
  least 2 s before the run began (a write within a coarse file system's timestamp granularity could keep them: git's
  "racily clean" rule), and only for a trace named as a file (a directory or a glob may resolve to other files
  later).
- **Integrity**: a record is sealed with the cache's per-user key (BLAKE2b MAC over key, file identities, output
  target and bytes); one that fails its check, or a damaged one, is a miss. ``kernscope cache clear`` removes them.
- **Size**: at most :data:`MAX_RECORDS` records and :data:`MAX_BYTES` in all (least recently used first out); an
  output over :data:`MAX_BODY` is not kept.

The records live apart from the parse-cache entries, so a trace whose entry is too big for the cache (a 10 GB
trace's) is still answered at once the second time.
"""

from __future__ import annotations

import gc
import os
import stat
import sys
import time

from .load.cachedir import is_private_dir, preferred_root, read_private, secret
from .sink import discard
from .version import __version__, code_fingerprint

#: not ``typing.TYPE_CHECKING``: ``typing``'s import would cost a cached answer (see :mod:`kernscope`)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .load.gzhead import GzHeadStart
    from .load.headstart import HeadStart
    from .load.xhead import XHeadStart

try:  # the builtin module: ``hashlib`` would load OpenSSL
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter built without it
    from hashlib import blake2b

MAGIC = b"kernscope-replay-1\n"
#: a file changed this recently before a run began is not trusted to show a later change (see the module's text)
RACY_NS = 2_000_000_000
#: allocations between two collections of young objects in a command's process (Python's default: 700)
GC_YOUNG = 100_000
MAX_RECORDS = 256
MAX_BYTES = 512 << 20
MAX_BODY = 256 << 20  # a 10 GB trace's analyze JSON is ~60 MB
#: variables a shell sets differently for two runs of the same command, which no output depends on
_VOLATILE = frozenset({"_", "OLDPWD", "PWD", "SHLVL"})


def _identity(path: str) -> tuple[int, ...]:
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _place() -> tuple[str, bytes] | None:
    """(``<cache>/replay``, the cache's key) when the cache directory is the usual, private one and its key exists
    (elsewhere the command runs as usual: it says why it cannot use the cache)."""
    root = preferred_root()
    if root is None or not is_private_dir(root):
        return None
    key = secret(root, create=False)
    return (os.path.join(root, "replay"), key) if key is not None else None


class Invocation:
    """One run of the ``kernscope`` command with ``argv`` (the arguments after the program's name): its stored
    answer (:meth:`answer`), or the record of the answer it computed (:meth:`record`)."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = list(argv)
        self.started_ns = time.time_ns()
        # as the command began: the command itself sets variables (allocator settings) and may change directory
        self._env = sorted((k, v) for k, v in os.environ.items() if k not in _VOLATILE)
        self._cwd = os.getcwd()
        self._ttys = [os.isatty(1), os.isatty(2)]
        self._size: tuple[int, ...] | None = None
        if self._ttys[0]:
            try:
                self._size = tuple(os.get_terminal_size(1))
            except OSError:
                self._size = None
        self._context: bytes | None = None
        #: the trace's first pieces scanned ahead (:func:`_head_start`), for the command's load; or a large JAX
        #: profile's lines indexed ahead (:func:`_xhead_start`), for its windows' plan
        self.head: HeadStart | GzHeadStart | XHeadStart | None = None

    def context(self) -> bytes:
        """Everything besides the files read that the output may depend on (see the module's text), as the
        command began."""
        if self._context is None:
            parts = [__version__, code_fingerprint(), sys.executable, sys.version, self._cwd, self.argv, self._env,
                     self._ttys, self._size]
            self._context = repr(parts).encode("utf-8", "surrogateescape")
        return self._context

    def _name(self) -> str:
        return blake2b(self.context(), digest_size=16).hexdigest()

    def _mac(self, key: bytes, meta: bytes, identities: list[tuple[int, ...]], body: bytes) -> bytes:
        h = blake2b(key=key, digest_size=32)
        for part in (self.context(), repr(identities).encode(), meta, body):
            h.update(len(part).to_bytes(8, "big"))
            h.update(part)
        return h.digest()

    def answer(self) -> bool:
        """Write the stored answer of this invocation (stdout, or the file it names) and return True; False when
        there is none, or it no longer holds (then nothing was written)."""
        place = _place()
        if place is None:
            return False
        folder, key = place
        path = os.path.join(folder, self._name())
        try:
            data = read_private(path)
            if not data.startswith(MAGIC):
                return False
            at = len(MAGIC)
            mac, n = data[at:at + 32], int.from_bytes(data[at + 32:at + 36], "big")
            meta, body = data[at + 36:at + 36 + n], data[at + 36 + n:]
            fields = meta.decode("utf-8", "surrogateescape").split("\0")
            output, files = fields[0] or None, fields[1:]
            identities = [_identity(f) for f in files]
        except (OSError, ValueError):
            return False
        if not _equal(mac, self._mac(key, meta, identities, body)):
            return False
        from .errors import KernscopeError
        from .sink import emit_bytes

        try:
            emit_bytes(body, output)
        except KernscopeError:
            return False  # nothing was written: the command runs as usual and says what is wrong
        try:  # noqa: SIM105 - contextlib's import would cost the cached answer
            os.utime(path)  # least recently used first out
        except OSError:
            pass
        return True

    def record(self, files: list[str], output: str | None, body: bytes) -> bool:
        """Keep ``body``, the output this invocation wrote to ``output`` (None: stdout) after reading ``files``, for
        the next identical invocation. False when it is not kept (a file changed within :data:`RACY_NS` of the
        run's start or during it, an output over :data:`MAX_BODY`, no usable cache)."""
        place = _place()
        if place is None or len(body) > MAX_BODY:
            return False
        folder, key = place
        try:
            identities = [_identity(f) for f in files]
        except OSError:
            return False
        if any(i[3] > self.started_ns - RACY_NS or i[4] > self.started_ns - RACY_NS for i in identities):
            return False
        meta = "\0".join([output or "", *files]).encode("utf-8", "surrogateescape")
        data = b"".join([MAGIC, self._mac(key, meta, identities, body), len(meta).to_bytes(4, "big"), meta, body])
        target = os.path.join(folder, self._name())
        tmp = f"{target}.{os.getpid()}.tmp"
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, target)
        except OSError:
            discard(tmp)
            return False
        trim(folder)
        return True


def _equal(a: bytes, b: bytes) -> bool:
    """Constant-time comparison (``hmac.compare_digest`` without ``hmac``'s import of OpenSSL)."""
    from _operator import _compare_digest  # what hmac.compare_digest is

    return bool(_compare_digest(a, b))


def _listing(folder: str) -> list[tuple[float, int, str]]:
    """(last use, bytes, path) of each record in ``folder``, least recently used first; temporaries left by killed
    writers (over an hour old) are removed on the way."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    found = []
    now = time.time()
    for n in names:
        p = os.path.join(folder, n)
        try:
            st = os.stat(p)
        except OSError:
            continue
        if n.endswith(".tmp"):
            if now - st.st_mtime > 3600:
                discard(p)
            continue
        found.append((st.st_mtime, st.st_size, p))
    return sorted(found)


def records(folder: str) -> tuple[int, int]:
    """(records, bytes) in ``folder``."""
    found = _listing(folder)
    return len(found), sum(f[1] for f in found)


def trim(folder: str, max_records: int = MAX_RECORDS, max_bytes: int = MAX_BYTES) -> int:
    """Remove the least recently used records until at most ``max_records`` of at most ``max_bytes`` remain (and
    temporaries left by killed writers, older than an hour); returns how many were removed."""
    found = _listing(folder)
    total = sum(f[1] for f in found)
    removed = 0
    while found and (len(found) > max_records or total > max_bytes):
        _, size, p = found.pop(0)
        discard(p)
        total -= size
        removed += 1
    return removed


def _exit_code(error: BaseException) -> int:
    """``error`` said on stderr as the command line says it (:func:`kernscope.exits.guarded`); its exit code."""
    from .exits import guarded

    def fail() -> None:
        raise error

    return guarded(fail, lambda msg: None)


#: ``analyze`` options that change what the parse of a Kineto trace reads: with one, no head start (its scans would
#: not be the parse's, which checks that before it takes them)
_OWN_READ = frozenset({"--read-all", "--roofline", "--sources", "--salvage"})
#: ``analyze`` options with which a JAX profile is read whole, not a time window at a time (no plan to start ahead)
_WHOLE_READ = _OWN_READ | {"--step", "--by-annotation", "--untraced-waits", "--step-marker", "--bench"}


#: a gzipped trace of fewer bytes on disk gets no head start (its gzip trailer then says whether it inflates to
#: :data:`~kernscope.load.headstart.HEAD_MIN_BYTES`)
GZ_MIN_STORED = 1 << 20


def _head_start(args: list[str]) -> HeadStart | None:
    """For ``analyze`` of one large Kineto trace: its first pieces scanned on a thread while the command imports
    (:class:`kernscope.load.headstart.HeadStart`), or, gzipped, all of it inflated and scanned on a thread
    (:class:`kernscope.load.gzhead.GzHeadStart`); else None. The trace is the one argument that is a file of at
    least :data:`~kernscope.load.headstart.HEAD_MIN_BYTES` (gzipped: :data:`GZ_MIN_STORED`; an option's value that is
    a smaller file, an output written before, is not taken for it)."""
    if any(a.split("=", 1)[0] in _OWN_READ for a in args) or not _ahead_allowed():
        return None
    from .load.headstart import HEAD_MIN_BYTES

    files = []
    for a in args[1:]:
        if not a.startswith("-"):
            try:
                st = os.stat(a)
            except (OSError, ValueError):
                continue
            gz = a.lower().endswith(".gz")
            if stat.S_ISREG(st.st_mode) and st.st_size >= (GZ_MIN_STORED if gz else HEAD_MIN_BYTES):
                files.append(a)
    if len(files) != 1 or files[0].lower().endswith((".pb", ".pb.gz")):
        return None
    from .load.scanslots import CHUNK_BYTES

    return analyze_head_start(files[0], CHUNK_BYTES)


def analyze_head_start(path: str, chunk: int) -> HeadStart | None:
    """A head start for ``analyze``'s load of the Kineto trace at ``path`` (its projection's slots and drops, pieces
    of ``chunk`` bytes): :class:`~kernscope.load.gzhead.GzHeadStart` where the name ends in ``.gz``, else
    :class:`~kernscope.load.headstart.HeadStart`; None where it would not begin (see their ``begin``)."""
    from .analyze.needs import analyze_projection
    from .load.headstart import HeadStart
    from .load.scanslots import slots_of

    p = analyze_projection(None)
    if p is None:
        return None
    how = (path, slots_of(p.args), p.drop_phases if p.drops_events else (), p.drop_cats if p.drops_events else (), chunk)
    if path.lower().endswith(".gz"):
        from .load.gzhead import GzHeadStart

        return GzHeadStart.begin(*how)
    return HeadStart.begin(*how)


def _ahead_allowed() -> bool:
    return os.environ.get("KERNSCOPE_NO_NATIVE") != "1" and os.environ.get("KERNSCOPE_NO_HEADSTART") != "1"


def _windows_asked(args: list[str]) -> str | None:
    """The value of ``--windows`` on the command line (its last), or None."""
    asked = None
    for i, a in enumerate(args):
        if a == "--windows" and i + 1 < len(args):
            asked = args[i + 1]
        elif a.startswith("--windows="):
            asked = a.split("=", 1)[1]
    return asked


def _xhead_start(args: list[str]) -> XHeadStart | None:
    """For ``analyze`` of one large plain JAX profile (or the run directory of one), read a time window at a time
    (:func:`kernscope.files.windows_for`): its lines' time index made on a thread while the command imports
    (:class:`kernscope.load.xhead.XHeadStart`), for the windows' plan; else None."""
    if any(a.split("=", 1)[0] in _WHOLE_READ for a in args) or _windows_asked(args) in ("0", "1") or not _ahead_allowed():
        return None
    named = [a for a in args[1:] if not a.startswith("-")]
    pbs = [a for a in named if a.lower().endswith(".pb")]
    dirs = [a for a in named if not a.lower().endswith(".pb") and os.path.isdir(a)]
    if len(pbs) + len(dirs) != 1:  # (nothing imported else: a Kineto trace's command pays a stat per argument)
        return None
    from .errors import KernscopeError
    from .files import WINDOWED_FROM, resolve_run_dir
    from .load.xhead import XHeadStart

    if pbs:
        path = pbs[0]
    else:
        try:
            run = resolve_run_dir(dirs[0])
        except (KernscopeError, OSError):  # (said by the command itself)
            return None
        if run is None or len(run[0]) != 1 or not run[0][0].lower().endswith(".pb"):
            return None
        path = run[0][0]
    return XHeadStart.begin(path, WINDOWED_FROM)  # (None for a smaller file, or what is not a regular file)


def _import_early(invocation: Invocation) -> None:
    """An ``analyze`` that was not answered will need polars (0.15-0.3 s to import): it is imported on a thread while
    the command line is imported and parsed, after the allocator settings that must come first; and a large trace's
    first pieces are scanned meanwhile (:func:`_head_start`)."""
    import contextlib
    import threading

    from .oneshot import tune_allocators

    tune_allocators(invocation.argv)
    invocation.head = _head_start(invocation.argv) or _xhead_start(invocation.argv)

    def work() -> None:
        with contextlib.suppress(ImportError):  # said where the command needs it
            import polars  # noqa: F401

    threading.Thread(target=work, name="kernscope-import", daemon=True).start()


def run() -> None:  # pragma: no cover - exits the process
    """The ``kernscope`` command: a stored answer when one holds, else the command line (:func:`kernscope.cli.run`)."""
    invocation = Invocation(sys.argv[1:])
    try:
        answered = invocation.answer()
    except (OSError, KeyboardInterrupt) as e:  # writing the answer failed: said as the command line says it
        os._exit(_exit_code(e))
    if answered:
        os._exit(0)
    # a command allocates most of the objects it will hold while importing polars, numpy and kernscope, and makes
    # few reference cycles after: at Python's default (a collection every 700 allocations) ~100 collections walked
    # those objects, 40-50 ms of a cold analyze; young objects are now collected every 100,000 allocations
    gc.set_threshold(GC_YOUNG, 50, 100)
    if invocation.argv[:1] == ["analyze"]:
        _import_early(invocation)
    from .cli import run as run_cli

    run_cli(invocation)
