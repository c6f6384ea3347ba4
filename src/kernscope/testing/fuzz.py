"""Mutation fuzzing of trace files, with an oracle: kernscope either rejects a mutant with one clear
error, or what it reports equals what the raw JSON says (kernel count and exact summed durations). Binary profiles
(XSpace protobufs) have their own mutations (:data:`BINARY_MUTATORS`); their oracle is the other reader: the
compiled scanner and the numpy one must agree.

Used by ``tests/test_fuzz.py`` (a few hundred seeded mutants per CI run) and ``benchmarks/fuzz_long.py``
(many more, before releases).
"""

from __future__ import annotations

import gzip
import json
import random
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any, NamedTuple

Mutator = Callable[[random.Random, bytes], bytes]

_NUM = re.compile(rb'(?<=[:\[, ])-?[0-9][0-9.eE+-]*')


def _truncate(r: random.Random, b: bytes) -> bytes:
    return b[: r.randrange(1, max(2, len(b)))]


def _flip(r: random.Random, b: bytes) -> bytes:
    a = bytearray(b)
    for _ in range(r.randint(1, 8)):
        i = r.randrange(len(a))
        a[i] ^= 1 << r.randrange(8)
    return bytes(a)


def _delete_range(r: random.Random, b: bytes) -> bytes:
    i = r.randrange(len(b))
    return b[:i] + b[i + r.randint(1, 200):]


def _duplicate_range(r: random.Random, b: bytes) -> bytes:
    i = r.randrange(len(b))
    j = min(len(b), i + r.randint(1, 400))
    return b[:j] + b[i:j] + b[j:]


def _number(r: random.Random, b: bytes) -> bytes:
    ms = list(_NUM.finditer(b))
    if not ms:
        return b
    m = r.choice(ms)
    new = r.choice([b"99999999999999999999", b"-1", b"1e308", b"1e400", b"-9223372036854775809", b"0.0001",
                    b"9223372036854775807", b'"12"', b'"abc"', b"null", b"[]", b"{}", b"true", b"18446744073709551615",
                    b"9300000000000000", b"4398046511103.999"])
    return b[: m.start()] + new + b[m.end():]


def _name(r: random.Random, b: bytes) -> bytes:
    ms = list(re.finditer(rb'"name": ?"', b))
    if not ms:
        return b
    m = r.choice(ms)
    evil = r.choice([b"</script><img src=x onerror=alert(1)>", b"[/]", b"[link=https://x.example]click[/link]",
                     b"=cmd|' /C calc'!A0", b"\\u001b]8;;http://x\\u0007x\\u001b]8;;\\u0007", b"\\u001b[2J",
                     b"+SUM(1,2)", b"@x", b"},{", b'\\"},{\\"', b"\\ud800", b"x" * 5000])
    return b[: m.end()] + evil + b[m.end():]


def _nest(r: random.Random, b: bytes) -> bytes:
    ms = list(re.finditer(rb'"args": ?\{', b))
    if not ms:
        return b
    m = r.choice(ms)
    depth = r.choice([50, 1200, 5000])
    return b[: m.end()] + b'"deep": ' + b"[" * depth + b"]" * depth + b", " + b[m.end():]


def _retype(r: random.Random, b: bytes) -> bytes:
    key = r.choice([b"pid", b"tid", b"ph", b"cat", b"args", b"ts", b"dur", b"correlation", b"device", b"stream"])
    ms = list(re.finditer(rb'"' + key + rb'": ?', b))
    if not ms:
        return b
    m = r.choice(ms)
    return b[: m.end()] + r.choice([b"[1], ", b'{"a": 1}, ', b"null, ", b'"", ', b"true, "]) + b"\"junk\": " + b[m.end():]


def _drop_key(r: random.Random, b: bytes) -> bytes:
    key = r.choice([b"ts", b"dur", b"ph", b"args", b"name", b"correlation", b"External id"])
    return re.sub(rb'"' + key + rb'": ?[^,{}\[\]]*,? ?', b"", b, count=r.randint(1, 5))


MUTATORS: dict[str, Mutator] = {
    "truncate": _truncate, "flip": _flip, "delete_range": _delete_range, "duplicate_range": _duplicate_range,
    "number": _number, "name_injection": _name, "deep_nesting": _nest, "retype": _retype, "drop_key": _drop_key,
}


def _long_varint(r: random.Random, b: bytes) -> bytes:
    """A varint that never ends within ten bytes (or a length beyond the file) in place of one byte."""
    i = r.randrange(len(b))
    return b[:i] + b"\xff" * r.randint(1, 10) + b[i + 1:]


def _length(r: random.Random, b: bytes) -> bytes:
    """One byte shifted by a small or large step: where it is a length prefix, the message it sizes overruns or
    stops short."""
    a = bytearray(b)
    i = r.randrange(len(a))
    a[i] = (a[i] + r.choice([1, 2, 64, 127, 255])) % 256
    return bytes(a)


def _insert(r: random.Random, b: bytes) -> bytes:
    i = r.randrange(len(b) + 1)
    return b[:i] + bytes(r.randrange(256) for _ in range(r.randint(1, 16))) + b[i:]


def _pick(r: random.Random, fields: list[tuple[int, int, Any]], field: int) -> int | None:
    """The index in ``fields`` of a random length-delimited field ``field``, None where there is none."""
    at = [i for i, (f, w, _) in enumerate(fields) if f == field and w == 2]
    return r.choice(at) if at else None


@dataclass
class _Event:
    """One event of an XSpace as fields (:func:`kernscope.testing.xspace._msg`), with the messages around it, for a
    mutation that re-encodes them (:meth:`encoded`): every length prefix stays right."""

    space: list[tuple[int, int, Any]]
    pi: int  #: the plane's index in ``space``
    plane: list[tuple[int, int, Any]]
    li: int  #: the line's index in ``plane``
    line: list[tuple[int, int, Any]]
    ei: int  #: the event's index in ``line``

    def fields(self) -> list[tuple[int, int, Any]] | None:
        """The event's own fields, None where its bytes are no message."""
        from .xspace import _msg

        try:
            return _msg(self.line[self.ei][2])
        except ValueError:
            return None

    def encoded(self) -> bytes:
        from .xspace import _enc

        self.plane[self.li] = (3, 2, _enc(self.line))
        self.space[self.pi] = (1, 2, _enc(self.plane))
        return _enc(self.space)


def _some_event(r: random.Random, b: bytes) -> _Event | None:
    """A random event of the XSpace ``b`` (of a plane with lines, a line with events), None where it has none or is
    no XSpace."""
    from .xspace import _msg

    try:
        space = _msg(b)
        # (a plane with lines, a line with events: many planes hold metadata only)
        planes = [(i, _msg(v)) for i, (f, w, v) in enumerate(space) if f == 1 and w == 2]
        planes = [(i, p) for i, p in planes if any(f == 3 for f, _, _ in p)]
        for _ in range(20):
            if not planes:
                return None
            pi, plane = r.choice(planes)
            li = _pick(r, plane, 3)  # XPlane.lines
            assert li is not None
            line = _msg(plane[li][2])
            ei = _pick(r, line, 4)  # XLine.events
            if ei is not None:
                return _Event(space, pi, plane, li, line, ei)
        return None
    except ValueError:  # (not a message: the bytes of a damaged or other file)
        return None


def _event_value(r: random.Random, b: bytes) -> bytes:
    """One number inside one event of an XSpace, every enclosing message's length kept right: the event's metadata
    id, start offset or duration, or one of its stats' metadata id or integer value (a correlation id, a step number, a
    size), moved a little or set to an edge (0, the largest). What the wire format cannot tell wrong: a kernel moved in
    time or renamed, a launch paired with another's rows, a step renumbered. The input as it is where it has no event
    (or is no XSpace)."""
    from .xspace import _enc, _msg

    at = _some_event(r, b)
    event = at.fields() if at is not None else None
    if at is None or event is None:
        return b
    # (the numbers of the event, and of each stat: ``None`` for the event's own)
    targets: list[tuple[int | None, int]] = [(None, i) for i, (f, w, _) in enumerate(event) if w == 0 and f in (1, 2, 3)]
    stats = {i: _msg(v) for i, (f, w, v) in enumerate(event) if f == 4 and w == 2}
    targets += [(si, j) for si, st in stats.items() for j, (f, w, _) in enumerate(st) if w == 0 and f in (1, 3, 4)]
    if not targets:
        return b
    si, j = r.choice(targets)
    held = event if si is None else stats[si]
    f, w, v = held[j]
    new = r.choice([v + 1, max(v - 1, 0), v + r.randint(2, 1000), v * 2, v // 2, 0, (1 << 63) - 1, (1 << 64) - 1,
                    r.getrandbits(32)])
    held[j] = (f, w, new)
    if si is not None:
        event[si] = (4, 2, _enc(stats[si]))
    at.line[at.ei] = (4, 2, _enc(event))
    return at.encoded()


def _event_structure(r: random.Random, b: bytes) -> bytes:
    """One event of an XSpace line dropped, repeated, or moved elsewhere in its line (out of time order), or one of its
    stats dropped or repeated, every enclosing message's length kept right. What the wire format cannot tell wrong: a
    launch without its kernel or a kernel without its launch, a correlation id or step number on two events, a line
    whose events are out of order, an event without its correlation id. The input as it is where it has no event (or
    is no XSpace)."""
    from .xspace import _enc

    at = _some_event(r, b)
    if at is None:
        return b
    line, ei = at.line, at.ei
    how = r.choice(["drop", "repeat", "move", "drop_stat", "repeat_stat"])
    if how in ("drop_stat", "repeat_stat"):
        event = at.fields()
        if event is None:
            return b
        si = _pick(r, event, 4)  # XEvent.stats
        if si is None:
            how = "drop"
        else:
            if how == "drop_stat":
                del event[si]
            else:
                event.insert(si + 1, event[si])
            line[ei] = (4, 2, _enc(event))
    if how == "drop":
        del line[ei]
    elif how == "repeat":
        line.insert(ei + 1, line[ei])
    elif how == "move":
        events = [i for i, (f, w, _) in enumerate(line) if f == 4 and w == 2]
        to = r.choice(events)
        line.insert(to, line.pop(ei))
    return at.encoded()


#: mutations of a binary profile (an XSpace protobuf): the byte-level ones above, ones aimed at the wire format, and two
#: that keep the lengths right: one number of an event changed (``event_value``), and an event or a stat dropped,
#: repeated or moved (``event_structure``)
BINARY_MUTATORS: dict[str, Mutator] = {
    "truncate": _truncate, "flip": _flip, "delete_range": _delete_range, "duplicate_range": _duplicate_range,
    "long_varint": _long_varint, "length": _length, "insert": _insert, "event_value": _event_value,
    "event_structure": _event_structure,
}


@dataclass
class Oracle:
    """What the raw JSON says (stdlib json, exact decimals), or why it cannot say."""

    valid: bool
    kernels: int = 0
    kernel_ns: int = 0
    ambiguous: bool = False  #: duplicate keys: JSON leaves the value unspecified


_NOT_KERNEL_PH = {"M", "s", "f", "t", "C", "i", "I", "n"}


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    d = dict(pairs)
    if len(set(keys)) != len(keys):
        d["__duplicate_keys__"] = True
    return d


def _text(v: Any) -> str:
    """A JSON scalar as the event table holds it (strings as they are, numbers and booleans as JSON text)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return v if isinstance(v, str) else str(v)


def oracle(json_bytes: bytes) -> Oracle:
    try:
        doc = json.loads(json_bytes, parse_float=Decimal, object_pairs_hook=_pairs)
    except (ValueError, RecursionError, UnicodeDecodeError):
        return Oracle(False)
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        return Oracle(False)
    ambiguous = "__duplicate_keys__" in json.dumps(doc, default=str)
    n, ns = 0, 0
    for e in events:
        if not isinstance(e, dict):
            continue
        ph, cat = e.get("ph"), e.get("cat")
        ph_s, cat_s = _text(ph), _text(cat).lower()
        if ph_s in _NOT_KERNEL_PH or cat_s != "kernel":
            continue
        dur = e.get("dur")
        if isinstance(dur, (int, Decimal)) and not isinstance(dur, bool):
            n += 1
            ns += int((Decimal(dur) * 1000).to_integral_value(rounding=ROUND_HALF_UP))
    return Oracle(True, n, ns, ambiguous)


@dataclass
class Outcome:
    mutator: str
    ok: bool  #: kernscope accepted it
    problem: str | None = None  #: a failure of the promise, None when the promise held
    message: str = ""
    ahead: int | None = None  #: :func:`check_head_start`: the pieces the parse took from the head start


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    def by_class(self) -> dict[str, Counter[str]]:
        out: dict[str, Counter[str]] = {}
        for o in self.outcomes:
            c = out.setdefault(o.mutator, Counter())
            c["tried"] += 1
            c["accepted" if o.ok else "rejected"] += 1
            if o.ahead:
                c["taken_ahead"] += 1
            if o.problem:
                c["failures"] += 1
        return out

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.problem]


def check_one(path: Path, json_bytes: bytes, mutator: str, *, salvage: bool = False) -> Outcome:
    """Load a mutant through the public API and hold kernscope to its promise."""
    from ..analyze.summary import analyze
    from ..errors import KernscopeError
    from ..pipeline import load

    try:
        t = load(path, cache=False, salvage=salvage, workers=1)
        analyze(t)
    except KernscopeError as e:
        msg = str(e)
        if "\n" in msg.strip():
            return Outcome(mutator, False, "error message is not one line", msg[:300])
        if str(path) not in msg:
            return Outcome(mutator, False, "error does not name the file", msg[:300])
        return Outcome(mutator, False, None, msg[:200])
    except Exception as e:  # noqa: BLE001 - any other exception is a bug the fuzzer reports
        return Outcome(mutator, False, f"unexpected {type(e).__name__}", str(e)[:300])
    want = oracle(json_bytes)
    got_n = int(t.kernels.height)
    got_ns = int(t.kernels["dur"].sum() or 0)
    if salvage:
        if want.valid and not want.ambiguous and (got_n > want.kernels):
            return Outcome(mutator, True, "salvage over-counted kernels", f"{got_n} > {want.kernels}")
        return Outcome(mutator, True)
    if not want.valid:
        return Outcome(mutator, True, "accepted a document that is not valid JSON", "")
    if want.ambiguous:
        return Outcome(mutator, True)
    if (got_n, got_ns) != (want.kernels, want.kernel_ns):
        return Outcome(mutator, True, "result differs from the raw JSON",
                       f"kernels {got_n} vs {want.kernels}, ns {got_ns} vs {want.kernel_ns}")
    return Outcome(mutator, True)


def _originals(sources: list[Path]) -> list[bytes]:
    """Each source's bytes, inflated where it is gzipped."""
    out = []
    for p in sources:
        raw = p.read_bytes()
        out.append(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    return out


def _record(rep: Report, out: Outcome, mutant: Path, source: Path) -> None:
    """``out`` added to ``rep``; the mutant kept as ``failed_*`` beside itself where it broke the promise (named in
    the outcome's message, with its source), else removed."""
    rep.outcomes.append(out)
    if out.problem:
        kept = mutant.with_name("failed_" + mutant.name)
        out.message += f" [kept as {kept}, from {source}]"
        mutant.rename(kept)
    else:
        mutant.unlink()


def run(sources: list[Path], workdir: Path, n: int, seed: int = 0, *, gzip_every: int = 5,
        only: list[str] | None = None) -> Report:
    """``n`` mutants of ``sources`` (round robin over mutators: ``only`` those named, where given), each checked with
    :func:`check_one`."""
    r = random.Random(seed)
    originals = _originals(sources)
    names = sorted(only or MUTATORS)
    rep = Report()
    for i in range(n):
        name = names[i % len(names)]
        mutant = MUTATORS[name](r, originals[i % len(originals)])
        gz = gzip_every and i % gzip_every == 0
        p = workdir / f"m{i}.json{'.gz' if gz else ''}"
        p.write_bytes(gzip.compress(mutant, 1) if gz else mutant)
        _record(rep, check_one(p, mutant, name, salvage=(i % 7 == 3)), p, sources[i % len(sources)])
    return rep


class Read(NamedTuple):
    """One way :func:`check_binary` reads a mutant: ``kernscope analyze`` with ``options``, ``KERNSCOPE_NO_NATIVE`` set
    to ``no_native`` and kernscope's module attributes ``settings`` (``package.module.NAME``: value) for the read;
    ``ahead``: with the line index made ahead (:class:`kernscope.load.xhead.XHeadStart`, which the command begins for a
    profile of 128 MB or more) begun before it."""

    label: str
    no_native: str
    options: tuple[str, ...]
    settings: Mapping[str, float]
    ahead: bool = False


#: how :func:`check_binary` reads each mutant. Each with ``--no-bench``: the windows decline a profile that may be a
#: benchmark trace (20,000 GPU records or fewer: every profile here), and the benchmark view is not what a reader's
#: fuzzing checks. The near plan (:func:`kernscope.load.xplan.plan_near`, the windows' plan of a large profile) gives
#: way on a profile this small unless it may read all of it (``NEAR_MOST_SHARE``)
BINARY_READS: tuple[Read, ...] = (
    Read("compiled scanner", "0", ("--windows", "0", "--no-bench"), {}),
    Read("numpy reader", "1", ("--windows", "0", "--no-bench"), {}),
    Read("compiled scanner, 3 time windows", "0", ("--windows", "3", "--no-bench"), {}),
    Read("compiled scanner, 3 time windows by the near plan", "0", ("--windows", "3", "--no-bench"),
         {"kernscope.load.xplan.NEAR_MOST_SHARE": 10.0}),
    # (the command's own way for a large profile: its lines indexed on a thread before the plan, ``load.xhead``)
    Read("compiled scanner, 3 time windows by the near plan, the lines indexed ahead", "0", ("--windows", "3", "--no-bench"),
         {"kernscope.load.xplan.NEAR_MOST_SHARE": 10.0, "kernscope.load.xhead.RACY_NS": 0}, ahead=True),
)


@contextmanager
def _settings(values: Mapping[str, Any]) -> Iterator[None]:
    """Module attributes (``package.module.NAME``: value) set within, put back after."""
    import importlib

    saved = []
    try:
        for key, value in values.items():
            module, name = key.rsplit(".", 1)
            m = importlib.import_module(module)
            saved.append((m, name, getattr(m, name)))
            setattr(m, name, value)
        yield
    finally:
        for m, name, value in reversed(saved):
            setattr(m, name, value)


def _cli(path: Path, out: Path, read: Read) -> tuple[int, str]:
    """``kernscope analyze PATH --no-cache --format json -o OUT`` and the read's options, in this process, as
    ``read`` says (:class:`Read`): (exit code, stderr)."""
    import io
    import os
    from contextlib import redirect_stderr, redirect_stdout

    from ..cli import main

    before = os.environ.get("KERNSCOPE_NO_NATIVE")
    os.environ["KERNSCOPE_NO_NATIVE"] = read.no_native
    err = io.StringIO()
    argv = ["analyze", str(path), "--no-cache", "--format", "json", "-o", str(out), *read.options]
    invocation = None
    try:
        with _settings(read.settings):
            if read.ahead:
                from ..load.xhead import XHeadStart
                from ..replay import Invocation

                invocation = Invocation(argv)  # (a mutant just written: its output is never kept for replay)
                invocation.head = XHeadStart.begin(str(path), 0)
            with redirect_stdout(io.StringIO()), redirect_stderr(err):
                rc = main(argv, invocation)
    finally:
        if invocation is not None and invocation.head is not None:
            invocation.head.close()
        if before is None:
            os.environ.pop("KERNSCOPE_NO_NATIVE", None)
        else:
            os.environ["KERNSCOPE_NO_NATIVE"] = before
    return rc, err.getvalue()


def check_binary(path: Path, mutator: str) -> Outcome:
    """A mutated XSpace profile through ``kernscope analyze`` each way of :data:`BINARY_READS` (the compiled scanner
    and the numpy reader, each whole, and the compiled scanner three time windows at a time, by either plan). The
    promise: each exits 0 (a result), 2 (one line naming the file) or 3 (a result empty for a reason said), never with
    a traceback or an internal error; all ways give the same exit code, and on a result the same JSON, byte for byte.
    ``ok``: the compiled scanner's whole read gave a result."""
    got = []
    for i, read in enumerate(BINARY_READS):
        label = read.label
        out = path.with_name(f"{path.name}.{i}.json")
        rc, err = _cli(path, out, read)
        lines = [x for x in err.splitlines() if x.strip()]
        if rc not in (0, 2, 3):
            return Outcome(mutator, False, f"exit {rc} ({label})", err[-300:])
        if "Traceback" in err or "internal error" in err:
            return Outcome(mutator, rc == 0, f"traceback or internal error ({label})", err[-300:])
        if rc == 2 and (len(lines) != 1 or str(path) not in err):
            return Outcome(mutator, False, f"error not one line naming the file ({label})", err[-300:])
        got.append((label, rc, out.read_bytes() if rc == 0 and out.exists() else b"", lines[-1] if lines else ""))
        out.unlink(missing_ok=True)
    first = got[0]
    for other in got[1:]:
        if other[1] != first[1]:
            return Outcome(mutator, first[1] == 0, f"{first[0]} exit {first[1]}, {other[0]} exit {other[1]}",
                           f"{first[3][:140]} | {other[3][:140]}")
        if first[1] == 0 and other[2] != first[2]:
            return Outcome(mutator, True, f"{first[0]} and {other[0]} printed different JSON", "")
    return Outcome(mutator, first[1] == 0, None, first[3][:200])


def run_binary(sources: list[Path], workdir: Path, n: int, seed: int = 0, *, only: list[str] | None = None) -> Report:
    """``n`` mutants of the XSpace profiles ``sources`` (plain or gzipped; round robin over profiles and
    :data:`BINARY_MUTATORS`, ``only`` those named where given), each written as a plain ``.xplane.pb`` and checked
    with :func:`check_binary`. A mutant that breaks the promise is kept in ``workdir`` as ``failed_*``."""
    r = random.Random(seed)
    originals = _originals(sources)
    names = sorted(only or BINARY_MUTATORS)
    rep = Report()
    for i in range(n):
        name = names[i % len(names)]
        p = workdir / f"m{i}.xplane.pb"
        p.write_bytes(BINARY_MUTATORS[name](r, originals[i % len(originals)]))
        _record(rep, check_binary(p, name), p, sources[i % len(sources)])
    return rep


@contextmanager
def small_pieces(chunk: int = 1 << 18) -> Iterator[None]:
    """Within it, the parse cuts a trace into pieces of ``chunk`` bytes and a head start begins for a trace of any
    size or age (the commands begin one for a trace of 24 MB or more not changed in the last 2 s): so that
    :func:`check_head_start` reads a small real trace's mutants as a large trace's are read, many pieces ahead. A gzip
    head start may run ahead of the parse by any number of pieces."""
    # (a gzip head start stays a bounded number of pieces ahead of the parse: unbounded, it can scan every piece
    # before the load begins, ``check_head_start(wait=True)``)
    load = "kernscope.load."
    with _settings({load + "document.CHUNK_BYTES": chunk, load + "headstart.HEAD_MIN_BYTES": 0,
                    load + "headstart.RACY_NS": 0, load + "gzhead.HEAD_MIN_BYTES": 0, load + "gzhead.RACY_NS": 0,
                    load + "gzhead.AHEAD_PIECES": 1 << 20}):
        yield


def check_head_start(path: Path, mutator: str, *, wait: bool = False) -> Outcome:
    """A mutated Kineto trace (plain or gzipped) loaded with ``analyze``'s projection twice: with a head start begun
    before the load (:mod:`kernscope.load.headstart`, :mod:`kernscope.load.gzhead`: its pieces scanned on a thread,
    as the command does while it imports) and without. The promise: the same tables (events, GPU rows, flows, steps,
    metadata, the events projected out) or the same one-line error naming the file; never another exception. Run it
    within :func:`small_pieces`. ``wait``: the head start scans every piece it will before the load begins (else the
    load takes its pieces as they come, as a command's does). ``ahead``: the pieces the parse took from the head start
    (0: it began and gave none; None: none began, which a file that does not begin as a trace or as gzip may get)."""
    from ..analyze.needs import analyze_projection
    from ..errors import KernscopeError
    from ..load import document
    from ..pipeline import load
    from ..replay import analyze_head_start

    p = analyze_projection(None)
    assert p is not None

    def attempt(head: Any) -> tuple[Any, int]:
        timings: list[tuple[str, float]] = []
        try:
            t = load(path, cache=False, projection=p, head=head, timings=timings, workers=1)
        except KernscopeError as e:
            return str(e), 0
        finally:
            if head is not None:
                head.close()
        found = [re.search(r"\((\d+) scanned ahead\)", phase) for phase, _ in timings]
        return t, next((int(m.group(1)) for m in found if m), 0)

    try:
        want, _ = attempt(None)
        head = analyze_head_start(str(path), document.CHUNK_BYTES)  # (as the command begins it: gzipped by the name)
        if head is not None and wait:
            head.wait()
        got, ahead = attempt(head) if head is not None else (want, None)
    except Exception as e:  # noqa: BLE001 - any other exception is a bug the fuzzer reports
        return Outcome(mutator, False, f"unexpected {type(e).__name__}", str(e)[:300])
    if isinstance(want, str) or isinstance(got, str):
        ok = not isinstance(want, str)
        if not (isinstance(want, str) and isinstance(got, str)):
            return Outcome(mutator, ok, "read with the head start and without: one result, one error",
                           str(want if isinstance(want, str) else got)[:300], ahead)
        if want != got:
            return Outcome(mutator, False, "the errors with the head start and without differ", f"{want[:140]} | {got[:140]}",
                           ahead)
        if "\n" in want.strip() or str(path) not in want:
            return Outcome(mutator, False, "error not one line naming the file", want[:300], ahead)
        return Outcome(mutator, False, None, want[:200], ahead)
    for table in ("events", "gpu", "flows", "steps"):
        if not getattr(got, table).equals(getattr(want, table)):
            return Outcome(mutator, True, f"the {table} with the head start and without differ", "", ahead)
    if got.metadata != want.metadata or got.stats.projected_out != want.stats.projected_out:
        return Outcome(mutator, True, "the metadata or the events projected out differ", "", ahead)
    return Outcome(mutator, True, None, "", ahead)


def run_head_start(sources: list[Path], workdir: Path, n: int, seed: int = 0, *, chunk: int = 1 << 18,
                   only: list[str] | None = None) -> Report:
    """``n`` mutants of the Kineto traces ``sources`` (round robin over :data:`MUTATORS`, ``only`` those named where
    given; every other one gzipped), each checked with :func:`check_head_start` in pieces of ``chunk`` bytes; for every
    other pair the head start scans all it will before the load (plain and gzipped alike)."""
    r = random.Random(seed)
    originals = _originals(sources)
    names = sorted(only or MUTATORS)
    rep = Report()
    with small_pieces(chunk):
        for i in range(n):
            name = names[i % len(names)]
            mutant = MUTATORS[name](r, originals[i % len(originals)])
            p = workdir / f"m{i}.json{'.gz' if i % 2 else ''}"
            p.write_bytes(gzip.compress(mutant, 1) if i % 2 else mutant)
            _record(rep, check_head_start(p, name, wait=i % 4 < 2), p, sources[i % len(sources)])
    return rep
