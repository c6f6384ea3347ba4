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
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

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


#: mutations of a binary profile (an XSpace protobuf): the byte-level ones above, and ones aimed at the wire format
BINARY_MUTATORS: dict[str, Mutator] = {
    "truncate": _truncate, "flip": _flip, "delete_range": _delete_range, "duplicate_range": _duplicate_range,
    "long_varint": _long_varint, "length": _length, "insert": _insert,
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


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    def by_class(self) -> dict[str, Counter[str]]:
        out: dict[str, Counter[str]] = {}
        for o in self.outcomes:
            c = out.setdefault(o.mutator, Counter())
            c["tried"] += 1
            c["accepted" if o.ok else "rejected"] += 1
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


def run(sources: list[Path], workdir: Path, n: int, seed: int = 0, *, gzip_every: int = 5) -> Report:
    """``n`` mutants of ``sources`` (round robin over mutators), each checked with :func:`check_one`."""
    r = random.Random(seed)
    originals = [(p, gzip.decompress(p.read_bytes()) if p.read_bytes()[:2] == b"\x1f\x8b" else p.read_bytes()) for p in sources]
    names = sorted(MUTATORS)
    rep = Report()
    for i in range(n):
        src, data = originals[i % len(originals)]
        name = names[i % len(names)]
        mutant = MUTATORS[name](r, data)
        gz = gzip_every and i % gzip_every == 0
        p = workdir / f"m{i}.json{'.gz' if gz else ''}"
        p.write_bytes(gzip.compress(mutant, 1) if gz else mutant)
        out = check_one(p, mutant, name, salvage=(i % 7 == 3))
        rep.outcomes.append(out)
        if out.problem:
            out.message += f" [kept as {p.with_name('failed_' + p.name)}]"
            p.rename(p.with_name("failed_" + p.name))
        else:
            p.unlink()
    return rep
