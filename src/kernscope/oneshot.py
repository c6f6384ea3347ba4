"""What a one-shot command needs around the pipeline, so that ``cli.py`` only parses arguments, calls this and
picks a renderer: memory settings for a short-lived process, imports overlapped with the file's hash, the
stored-output flow (digest, lookup, load with the parse cache written on a thread while the analysis runs,
store) with its cache keys built in one place, notices said once, and the quick exit.

The library never calls :func:`tune_allocators` or :func:`quick_exit`; they are for the ``kernscope`` process.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Generic, NoReturn, TypeVar

from . import outputs
from .load.projection import Projection, load_keys

T = TypeVar("T")


#: how long polars' allocator keeps freed pages before giving them back (ms): Kineto traces, XSpace profiles
DECAY_MS = 200
XSPACE_DECAY_MS = 3000


def is_xspace_name(arg: str) -> bool:
    """Whether a command-line argument names an XSpace profile (``*.xplane.pb``, ``*.pb``, gzipped or not) or a JAX
    run directory whose profile is one (:func:`kernscope.files.resolve_run_dir` picks it)."""
    if arg.startswith("-"):
        return False
    if arg.lower().removesuffix(".gz").endswith(".pb"):
        return True
    if not os.path.isdir(arg):
        return False
    from .errors import KernscopeError
    from .files import resolve_run_dir

    try:
        run = resolve_run_dir(arg)
    except KernscopeError:  # several runs: the command says so
        return False
    return run is not None and any(f.endswith(".xplane.pb") for f in run[0])


def tune_allocators(args: Sequence[str] = ()) -> None:
    """Memory behaviour for a one-shot command (call before polars is imported); ``args``: the command's arguments.

    polars' jemalloc: one arena and a short decay, so memory freed by one parsing thread is reused by
    the next instead of being held per thread (peak RSS 20-25% lower, same speed). When ``args`` name an XSpace
    profile (:func:`is_xspace_name`) the decay is longer (:data:`XSPACE_DECAY_MS`): its analysis sorts and copies
    columns of millions of rows for seconds, and pages given back after 0.2 s were faulted in again by the next
    copy (a 200 MB profile's cold analyze: 400-440 k page faults, 2.1-2.9 s of system time; with 3 s: 235-242 k,
    1.2-1.5 s, 5.4-6.1 -> 4.6-5.1 s, the same peak RSS). A Kineto trace's peak rises with it (the ns-resolution
    replica 283-293 -> 323-329 MB), so it keeps the short one. glibc: one arena too
    (the parsing threads' numpy buffers would otherwise stay in a heap per thread: a 216 MB trace peaked
    at 2.2x its size, 2.05x with one arena, same speed). A fixed 1 MB mmap threshold (round 2) returned
    buffers to the system sooner but made every numpy temporary fault in fresh pages (0.3-1.6 s per load);
    the opposite, buffers up to 32 MB from the heap and the heap never trimmed, keeps the few MB of
    temporaries each parsing thread needs per piece mapped and reused: 15% fewer page faults, a 206 MB
    trace's cold analyze 1.29-1.39 -> 1.20-1.24 s, the 216 MB v100 trace 1.64-1.68 -> 1.45 s, same peak RSS.
    """
    decay = XSPACE_DECAY_MS if any(is_xspace_name(a) for a in args) else DECAY_MS
    os.environ.setdefault("_RJEM_MALLOC_CONF", f"narenas:1,dirty_decay_ms:{decay},muzzy_decay_ms:0")
    # numpy's OpenBLAS starts a thread per core at import, which spins a while though kernscope calls no BLAS:
    # ~3% of the samples of a 200 MB XSpace load on 2 cores, taken from the parse's own threads
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if "polars" in sys.modules or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-8, 1)  # M_ARENA_MAX
        libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD (the largest glibc takes)
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass


def process_started() -> float | None:
    """When this process started, on :func:`time.perf_counter`'s clock (seconds), from the kernel's record of it
    (Linux: ``/proc/self/stat``, in steps of a clock tick, 10 ms); None where there is no such record. The time before
    the command's first line of Python (the interpreter's own start and its ``site``) counts too."""
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read()
        # (the fields after the command's name, which may hold spaces and parentheses: after its last ')')
        ticks = int(stat[stat.rindex(b")") + 2:].split()[19])  # field 22, starttime: clock ticks after boot
        ago = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return time.perf_counter() - ago if ago >= 0 else None


def quick_exit(rc: int) -> NoReturn:
    """End the process with ``rc`` without tearing the interpreter down.

    After a large load, freeing every table and module one by one takes 0.05-0.1 s that nobody waits for:
    the streams are flushed and the ``atexit`` handlers run, then the process ends. With other (non-daemon)
    threads still running, the normal exit (which waits for them) is used."""
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(rc)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    atexit._run_exitfuncs()
    os._exit(rc)


class Notices:
    """Lines for stderr, each said once per command (the cache is asked several times and would repeat itself;
    the parse-cache write runs on another thread)."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self._say = say
        self._lines: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, msg: str) -> None:
        with self._lock:
            if msg in self._lines:
                return
            self._lines.add(msg)
        self._say(msg)


class Prefetch(Generic[T]):
    """Runs ``work`` (the imports an analysis needs, ~0.15 s, and what it builds first) on a daemon thread,
    overlapping the trace's hash and parse instead of adding to them. :func:`answer` starts it before the
    hash only when no stored output can answer (none was ever stored for a file of this size), else once the
    lookup missed: a cached answer stays import-free (overlapping the imports with the hash of a file written
    a moment ago made its cached answer 0.03 s slower)."""

    def __init__(self, work: Callable[[], T]) -> None:
        self._work = work
        self._thread: threading.Thread | None = None
        self._result: T | None = None
        self._error: BaseException | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kernscope-prefetch", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        try:
            self._result = self._work()
        except BaseException as e:  # noqa: BLE001 - handed to the main thread by result()
            self._error = e

    def result(self) -> T:
        """What ``work`` returned (its error raised here, where running it would have raised it)."""
        self.start()
        assert self._thread is not None
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._result  # type: ignore[return-value]


@dataclass
class Request:
    """One command's answer for one trace: what makes its stored output (the cache keys, built here only)."""

    command: str  #: e.g. "analyze"
    path: str
    options: dict[str, Any]  #: every option that changes the output (the output cache key)
    rules: str | None = None  #: a categorization rules file (its content is part of the key)
    salvage: bool = False
    step_marker: str | None = None
    projection: Projection | None = None  #: what the load may skip
    no_cache: bool = False  #: neither read nor write any cache
    notify: Callable[[str], None] = field(default=lambda msg: None)
    #: given the output when it is stored or found stored (:mod:`kernscope.replay` keeps it for the next identical
    #: command line)
    keep: Callable[[bytes], object] | None = None
    #: more entries whose stored output may answer, after the loads' (an analysis by time windows':
    #: :func:`kernscope.pipeline.windowed_key`)
    more_keys: tuple[dict[str, Any], ...] = ()

    @cached_property
    def load_keys(self) -> list[dict[str, Any]]:
        """The entries whose stored output may answer, in order: this load's, those of the wider loads that
        ``pipeline.load`` reads where its own is not stored (:func:`kernscope.load.projection.load_keys`), and
        :attr:`more_keys`."""
        keys = load_keys(self.salvage, self.step_marker, self.projection)
        return keys + [k for k in self.more_keys if k not in keys]

    @cached_property
    def key(self) -> dict[str, Any]:
        """(Built once: it digests the rules file's content.)"""
        return outputs.result_key(self.command, self.options, self.rules)


#: ``load(digest, defer_cache_write)``: the command's load of the trace (``digest``: the content digest when the
#: lookup computed it; ``defer_cache_write``: takes the parse-cache write to run later)
Loader = Callable[[Any, Callable[[Callable[[], None]], None]], T]


def answer(req: Request, prefetch: Prefetch[Any], load: Loader[T], compute: Callable[[T], bytes],
           emit: Callable[[bytes], None], check: Callable[[T], None] = lambda trace: None) -> None:
    """The command's output for ``req``: a stored one when the trace and options are unchanged (no table is
    loaded), else ``compute(load(...))``, with the parse cache written on a thread meanwhile. ``emit`` writes
    the output; ``check`` may raise after it (an empty answer), and then nothing is stored."""
    digest = None
    if req.no_cache or not outputs.may_be_stored(req.path):
        prefetch.start()  # no stored output can answer: import while the file is hashed
    if not req.no_cache:
        digest, stored = outputs.lookup(req.path, req.load_keys, req.key, req.notify)
        if stored is not None:
            emit(stored)
            if req.keep is not None:
                req.keep(stored)
            return
    prefetch.start()
    writes: list[Callable[[], None]] = []
    trace = load(digest, writes.append)
    # the rest of the parse cache's entry is written while the trace is analyzed (both mostly wait on polars, on other
    # cores); its event table was written while the trace was linked (``pipeline._StagedWrite``)
    writer = threading.Thread(target=writes[0], name="kernscope-cache-write") if writes else None
    if writer is not None:
        writer.start()
    try:
        body = compute(trace)
        emit(body)  # the output as soon as it is made, while the parse cache may still be written
        check(trace)  # an empty answer is never stored: a stored output would exit 0
    finally:
        if writer is not None:
            writer.join()
    if digest is not None:
        outputs.store(digest, req.load_keys, req.key, body, req.notify)
        if req.keep is not None:
            req.keep(body)
