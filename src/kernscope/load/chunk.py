"""One chunk of events (JSON text) -> a typed event table. No Python object per event on the fast path.

Fast path: polars' native JSON reader (Rust, releases the GIL) reads the needed keys straight into
columns; ``ts``/``dur`` arrive as float64, which is exact for Kineto's 3-decimal µs below 2^43 µs (the
recovered ns are proven within 0.49 ns of the text's value). Larger timestamps (absolute epoch times)
are re-read as text with msgspec and converted exactly. Args are read as text and typed in bulk, so an
integer that does not fit int64 is an error, never a silent null.

Fallback: when polars rejects a chunk (a type it does not expect, invalid JSON), msgspec decodes it
with precise error locations; the result has the same columns.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from functools import lru_cache
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np
import polars as pl

from .argspec import ARG_FIELDS, INT_COLUMNS, LOADER_ARGS, STR_COLUMNS, TEXT_COLUMNS
from .fields import exact_ns_at, line_key_values

#: Every arg value is read as JSON text first (ints exactly, even beyond int64), then typed in bulk.
Scalar = int | float | str | bool | None

#: msgspec struct for ``args`` (the fallback decoder): only the spec's keys, the rest skipped unbuilt.
Args = msgspec.defstruct(
    "Args",
    [(f.column, Scalar, msgspec.field(default=None, name=f.raw)) for f in ARG_FIELDS],
    frozen=True,
    gc=False,
)
EMPTY_ARGS: Any = Args()

#: |µs| below which a float64 holds a 3-decimal value to better than half a nanosecond
EXACT_FLOAT_US = float(2**43)
#: the largest µs value whose ns fit int64
MAX_US = (2**63 - 1) // 1000
STRING_COLUMNS = ("ph", "cat", "name", "pid", "tid")
#: the rows that are not events: flow arrows and metadata events (a table of their own each, these columns), and
#: counters (counted only)
FLOW_PHASES = ("s", "f", "t")
FLOW_COLUMNS = ["idx", "ph", "cat", "name", "pid", "tid", "ts", "flow_id"]
META_COLUMNS = ["idx", "name", "pid", "tid", "meta_name", "sort_index"]
#: longest name (or other string) kept whole; longer ones keep their head and a hash of the whole
MAX_NAME_BYTES = 4096

_ARGS_SCHEMA = pl.Struct({f.raw: pl.String for f in ARG_FIELDS})
POLARS_SCHEMA: dict[str, Any] = {
    "ph": pl.String, "cat": pl.String, "name": pl.String, "pid": pl.String, "tid": pl.String,
    "ts": pl.Float64, "dur": pl.Float64, "id": pl.String, "args": _ARGS_SCHEMA,
}
#: the args columns a load reads: None = all of ARG_FIELDS, else event-table column names
Args_ = tuple[str, ...] | None


@lru_cache(maxsize=32)
def reader_schema(args: Args_ = None, int_ts: bool = False, typed: bool = False, meta: bool = True) -> dict[str, Any]:
    """The readers' schema: the top-level keys and, inside ``args``, only the columns read (each key a
    reader is given costs time on every event). ``int_ts``: ``ts`` as integers (exact epoch µs);
    ``typed``: integer args as integers. A reader refuses a chunk where such a value is something else
    (then it is read again with text, which accepts "0x1f", "5.0" and reports what is invalid).
    ``meta=False``: without the metadata events' args (``name``, ``sort_index``), for text likely to hold
    no metadata event (8% of the line reader's time on a training trace)."""
    schema = dict(POLARS_SCHEMA)
    if int_ts:
        schema["ts"] = pl.Int64
    read = set(f.column for f in ARG_FIELDS) if args is None else set(args) | set(LOADER_ARGS)
    if not meta:
        read -= set(LOADER_ARGS)
    schema["args"] = pl.Struct({f.raw: pl.Int64 if typed and f.kind == "int" else pl.String
                                for f in ARG_FIELDS if f.column in read})
    return schema
#: the event table's columns and types (output of :func:`parse_chunk`)
EVENT_SCHEMA: dict[str, Any] = {
    **{c: pl.Categorical for c in STRING_COLUMNS},
    "ts": pl.Int64, "dur": pl.Int64, "ts_missing": pl.Boolean, "dur_missing": pl.Boolean, "flow_id": pl.String,
    **{c: pl.Int64 for c in INT_COLUMNS}, **{c: pl.Categorical for c in STR_COLUMNS}, **{c: pl.String for c in TEXT_COLUMNS},
}


class ChunkError(Exception):
    """The chunk is not a valid run of events. ``event`` is the index in the chunk, when known."""

    def __init__(self, message: str, event: int | None = None, byte: int | None = None, syntax: bool = False) -> None:
        super().__init__(message)
        self.event = event
        self.byte = byte
        self.syntax = syntax  #: malformed JSON (a cut inside a string makes one), not a bad value


class Event(msgspec.Struct, gc=False):
    """One trace event for the fallback decoder; only these keys are read."""

    ph: str | None = None
    cat: str | None = None
    name: int | float | str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: msgspec.Raw = msgspec.Raw(b"")
    dur: msgspec.Raw = msgspec.Raw(b"")
    id: int | str | None = None
    args: Args = EMPTY_ARGS  # type: ignore[valid-type]


class _Times(msgspec.Struct, gc=False):
    ts: msgspec.Raw = msgspec.Raw(b"")
    dur: msgspec.Raw = msgspec.Raw(b"")


class _IntTimes(msgspec.Struct, gc=False):
    ts: int | None = None


class _NumTimes(msgspec.Struct, gc=False):
    ts: int | float | None = None
    dur: int | float | None = None


_DEC_EVENTS = msgspec.json.Decoder(list[Event])
_DEC_TIMES = msgspec.json.Decoder(list[_Times])
_DEC_INT_TIMES = msgspec.json.Decoder(list[_IntTimes])
_DEC_NUM_TIMES = msgspec.json.Decoder(list[_NumTimes])


_BOOL_KEY = re.compile(rb'"(?:ts|dur)"\s*:\s*$')
#: above this many "true"/"false" words in a chunk, decode its times instead of looking at each word
_MAX_BOOL_WORDS = 20_000


def _numbers_only(text: bytes) -> bool:
    """False when some ``ts``/``dur`` may be a JSON boolean (polars reads ``true`` as 1.0 into a float
    column). Each "true"/"false" word is checked for a ``"ts":``/``"dur":`` key right before it (a quote
    inside a JSON string is escaped, so a match is a real key); many such words: a typed decode instead."""
    hits = []
    for word in (b"true", b"false"):
        i = text.find(word)
        while i >= 0:
            hits.append(i)
            if len(hits) > _MAX_BOOL_WORDS:
                try:
                    _DEC_NUM_TIMES.decode(text)
                    return True
                except (msgspec.ValidationError, msgspec.DecodeError):
                    return False
            i = text.find(word, i + 4)
    return not any(_BOOL_KEY.search(text, max(0, i - 32), i) for i in hits)


@dataclass
class Bad:
    """Rows of a chunk with a value kernscope cannot represent, and why (for errors and salvage)."""

    rows: np.ndarray
    field: str  #: JSON path below the event, e.g. "ts" or "args['correlation']"
    reason: str


# -- exact µs -> ns ---------------------------------------------------------------------------------
def us_text_to_ns(text: pl.Series) -> tuple[pl.Series, pl.Series, pl.Series]:
    """Exact ns from µs JSON number texts: (ns, missing, bad). Rounds half up at the fourth decimal.

    ``bad`` marks values that are not numbers or do not fit int64 ns; exponent forms go through float.
    """
    t = pl.col("t")
    missing = (t == "") | (t == "null")
    neg = t.str.starts_with("-")
    body = t.str.strip_prefix("-")
    parts = body.str.split_exact(".", 1)
    ip_txt = parts.struct.field("field_0")
    ip = ip_txt.str.to_integer(strict=False)
    fr = parts.struct.field("field_1").fill_null("").str.pad_end(4, "0").str.slice(0, 4).str.to_integer(strict=False)
    plain = body.str.contains(r"^[0-9]+(\.[0-9]*)?$") & (ip_txt.str.len_bytes() <= 16) & (ip <= MAX_US)
    ns = ip * 1000 + fr // 10 + (fr % 10 >= 5).cast(pl.Int64)
    sci = t.cast(pl.Float64, strict=False) * 1000.0
    sci_ok = ~plain & sci.is_finite() & (sci.abs() < 9.2e18)
    out = pl.DataFrame({"t": text}).select(
        pl.when(plain).then(pl.when(neg).then(-ns).otherwise(ns))
        .when(sci_ok).then(sci.round(0).cast(pl.Int64, strict=False))
        .otherwise(None).alias("ns"),
        missing.alias("missing"),
    )
    bad = out["ns"].is_null() & ~out["missing"]
    return out["ns"].fill_null(0), out["missing"], bad


def _float_us_to_ns(v: pl.Series) -> pl.Series:
    """ns from float µs known to be below 2^43 µs: integer part exact, fraction rounded half up."""
    ip = v.floor()
    out: pl.Series = ip.cast(pl.Int64) * 1000 + ((v - ip) * 1000.0 + 0.5).floor().cast(pl.Int64)
    return out


def _raw_times(text: bytes) -> list[Any]:
    """Each event's ``ts``/``dur`` as their JSON text."""
    try:
        out: list[Any] = _DEC_TIMES.decode(text)
        return out
    except msgspec.DecodeError:
        # text polars accepted but msgspec does not (a lone UTF-16 surrogate in a name): the stdlib keeps
        # number texts exactly with parse_float/parse_int
        import json
        from types import SimpleNamespace

        def num(s: str) -> bytes:
            return s.encode()

        try:
            evs = json.loads(text, parse_float=num, parse_int=num)
        except (ValueError, RecursionError) as e:
            raise ChunkError(f"not valid JSON ({e})", syntax=True) from None
        def raw(v: Any) -> bytes:
            return v if isinstance(v, bytes) else (b"" if v is None else b"invalid")
        return [SimpleNamespace(ts=raw(e.get("ts")), dur=raw(e.get("dur"))) if isinstance(e, dict)
                else SimpleNamespace(ts=b"", dur=b"") for e in evs]


def _times_from_text(text: bytes, n: int, which: tuple[str, ...]) -> dict[str, tuple[pl.Series, pl.Series, pl.Series]]:
    evs = _raw_times(text)
    if len(evs) != n:
        raise ChunkError(f"event count mismatch ({len(evs)} vs {n})")
    out = {}
    for col in which:
        # NUL cannot occur in JSON text (raw values may span lines: an object where a number belongs)
        joined = b"\x00".join(map(attrgetter(col), evs)).decode()
        s = pl.Series([joined]).str.split("\x00").explode() if n else pl.Series([], dtype=pl.String)
        out[col] = us_text_to_ns(s)
    return out


def _times(df: pl.DataFrame, text: bytes, numbers: bool | None = None,
           exact: dict[str, tuple[pl.Series, pl.Series]] | None = None) -> tuple[pl.DataFrame, list[Bad]]:
    """Replace float ``ts``/``dur`` by exact int64 ns columns and their missing masks.

    ``numbers``: True when the reader is known to have refused booleans in ``ts``/``dur`` (the line
    reader); None: look at the text. ``exact``: (ns, missing) of columns already read exactly."""
    bad: list[Bad] = []
    exact_text: list[str] = []
    cols: dict[str, pl.Series] = {}
    if numbers is None:
        numbers = _numbers_only(text)
    for col in ("ts", "dur"):
        if exact and col in exact:
            cols[col], cols[f"{col}_missing"] = exact[col]
            continue
        v = df[col]
        if v.dtype == pl.Int64:  # read as integers (µs) by the line reader: exact already
            over = v.abs() > MAX_US
            cols[col] = pl.select(pl.when(pl.lit(over)).then(0).otherwise(pl.lit(v) * 1000).fill_null(0)).to_series()
            cols[f"{col}_missing"] = v.is_null()
            rows = np.flatnonzero(over.fill_null(False).to_numpy())
            if len(rows):
                bad.append(Bad(rows, col, "is not a number of µs or does not fit int64 nanoseconds"))
            continue
        big = v.abs().max()
        if not numbers or (big is not None and float(big) >= EXACT_FLOAT_US):  # type: ignore[arg-type]
            exact_text.append(col)
        else:
            cols[col] = _float_us_to_ns(v.fill_null(0.0))
            cols[f"{col}_missing"] = v.is_null()
    if "ts" in exact_text and "dur" not in exact_text:
        # integer epoch µs (older Kineto) are exact as float64 below 2^53: check cheaply that none has decimals
        try:
            _DEC_INT_TIMES.decode(text)
            v = df["ts"]
            if float(v.abs().max()) < 2.0**53:  # type: ignore[arg-type]
                cols["ts"] = v.fill_null(0.0).cast(pl.Int64) * 1000
                cols["ts_missing"] = v.is_null()
                exact_text = []
        except (msgspec.ValidationError, msgspec.DecodeError):
            pass
    if exact_text:
        parsed = _times_from_text(text, df.height, tuple(exact_text))
        for col, (ns, missing, is_bad) in parsed.items():
            cols[col], cols[f"{col}_missing"] = ns, missing
            rows = np.flatnonzero(is_bad.to_numpy())
            if len(rows):
                bad.append(Bad(rows, col, "is not a number of µs or does not fit int64 nanoseconds"))
    return df.drop("ts", "dur").with_columns(**cols), bad


# -- args -------------------------------------------------------------------------------------------
def _int_expr(c: str) -> pl.Expr:
    """The slow form: decimal, hex string ("0x1f") or integral float text ("5.0") -> Int64, else null."""
    t = pl.col(c)
    dec = t.str.to_integer(base=10, strict=False)
    hexed = t.str.strip_prefix("0x").str.to_integer(base=16, strict=False)
    flt = t.cast(pl.Float64, strict=False)
    integral = flt.is_finite() & (flt == flt.floor()) & (flt.abs() < 9.2e18)
    return (
        pl.when(dec.is_not_null()).then(dec)
        .when(t.str.starts_with("0x") & hexed.is_not_null()).then(hexed)
        .when(integral).then(flt.cast(pl.Int64, strict=False))
        .otherwise(None)
    )


def _ints(df: pl.DataFrame) -> tuple[pl.DataFrame, list[Bad]]:
    """Integer args from their JSON text: decimal, integral floats ("5.0"), hex strings ("0x1f").

    One ``to_integer`` per column; the slower forms are tried only in columns where it failed.
    """
    # columns a reader typed already, and columns with no value at all, need no parsing
    present = [c for c in INT_COLUMNS if c in df.columns]  # unread columns are left out
    nulls = df.select(pl.col(present).null_count()).row(0)
    text = [c for c, n in zip(present, nulls) if df[c].dtype == pl.String and n < df.height]
    rest = [c for c in present if c not in text]
    df = df.with_columns(pl.col(rest).cast(pl.Int64))
    if not text:
        return df, []
    fast = df.select(pl.col(c).str.to_integer(base=10, strict=False) for c in text)
    failed = df.select((pl.col(c).is_not_null() & fast[c].is_null()).sum() for c in text).row(0)
    slow = [c for c, n in zip(text, failed) if n]
    typed = df.with_columns(fast)
    if not slow:
        return typed, []
    slow_vals = df.select(_int_expr(c).alias(c) for c in slow)
    typed = typed.with_columns(slow_vals)
    bad = []
    for c in slow:
        invalid = (df[c].is_not_null() & (df[c] != "") & slow_vals[c].is_null()).to_numpy()
        rows = np.flatnonzero(invalid)
        if len(rows):
            raw = next(f.raw for f in ARG_FIELDS if f.column == c)
            example = df[c][int(rows[0])]
            bad.append(Bad(rows, f"args[{raw!r}]", f"= {str(example)[:40]!r} is not an integer or does not fit int64"))
    return typed, bad


def cap_names(df: pl.DataFrame, columns: tuple[str, ...] = STRING_COLUMNS + STR_COLUMNS + TEXT_COLUMNS) -> pl.DataFrame:
    """Strings longer than ``MAX_NAME_BYTES`` keep their head plus a hash of the whole (names come from
    whoever wrote the trace: a 64 MB "kernel name" must not cost gigabytes in every table)."""
    long = df.select(pl.any_horizontal(pl.col(c).str.len_bytes() > MAX_NAME_BYTES for c in columns)).to_series()
    if not long.any():
        return df
    return df.with_columns(
        pl.when(pl.col(c).str.len_bytes() > MAX_NAME_BYTES)
        .then(pl.concat_str(pl.col(c).str.slice(0, MAX_NAME_BYTES // 2), pl.lit("…#"),
                            pl.col(c).hash().cast(pl.String)))
        .otherwise(pl.col(c)).alias(c)
        for c in columns
    )


def finish(df: pl.DataFrame, text: bytes, numbers: bool | None = None, args: Args_ = None,
           longest: int | None = None, peaks: dict[str, float | None] | None = None,
           exact: dict[str, tuple[pl.Series, pl.Series]] | None = None) -> tuple[pl.DataFrame, list[Bad]]:
    """From the reader's columns (strings, float times) to the event table schema. Args columns not in
    ``args`` (when given) are left out, whichever reader ran: an unread column is neither kept nor checked
    (the load adds it as one null literal, :func:`kernscope.load.kineto._join_pieces`); so are those a
    reader was not asked for (the metadata args of text without metadata events).

    ``longest``: the longest event's text (bytes) when the caller knows it; no string of a shorter event
    can need :func:`cap_names`. ``peaks``: the largest ``|ts|`` and ``|dur|`` (µs) when the caller has them;
    ``exact``: (ns, missing) of time columns the caller has read exactly from the text."""
    if args is not None:
        df = df.drop([f.column for f in ARG_FIELDS if f.column not in args and f.column not in LOADER_ARGS],
                     strict=False)
    if numbers and peaks is not None:
        fast = _finish_fast(df, longest, peaks, exact)
        if fast is not None:
            return fast, []
    df, bad_t = _times(df, text, numbers, exact)
    df, bad_i = _ints(df)
    if longest is None or longest > MAX_NAME_BYTES:
        df = cap_names(df, tuple(c for c in STRING_COLUMNS + STR_COLUMNS + TEXT_COLUMNS if c in df.columns))
    df = df.with_columns(
        *(pl.col(c).cast(pl.Categorical) for c in STRING_COLUMNS + STR_COLUMNS if c in df.columns),
        pl.col("id").alias("flow_id"),
    ).drop("id")
    return df.select([c for c in EVENT_SCHEMA if c in df.columns]), bad_t + bad_i


def _float_ns_expr(c: str) -> pl.Expr:
    """:func:`_float_us_to_ns` as an expression (nulls become 0)."""
    v = pl.col(c).fill_null(0.0)
    ip = v.floor()
    return ip.cast(pl.Int64) * 1000 + ((v - ip) * 1000.0 + 0.5).floor().cast(pl.Int64)


def _finish_fast(df: pl.DataFrame, longest: int | None, peaks: dict[str, float | None],
                 exact: dict[str, tuple[pl.Series, pl.Series]] | None = None) -> pl.DataFrame | None:
    """:func:`finish` in one polars call for what the line reader usually returns: float times below
    2^43 µs (or integer times that fit int64 ns, or times already read exactly: ``exact``), integer args
    already typed (or with no value), and no event long enough to hold a string for :func:`cap_names`.
    ``peaks``: the largest ``|ts|``/``|dur|``. None when the piece is not like that (the general path then
    runs; it gives the same table)."""
    if longest is None or longest > MAX_NAME_BYTES:
        return None
    exact = exact or {}
    kinds: list[str] = []
    for c in ("ts", "dur"):
        is_float = df[c].dtype == pl.Float64
        big = peaks[c]
        if c in exact:
            kinds.append("exact")
        elif df[c].dtype not in (pl.Float64, pl.Int64) or (big is not None and big >= (EXACT_FLOAT_US if is_float else MAX_US + 1)):
            return None
        else:
            kinds.append("float" if is_float else "int")
    text_ints = [c for c in INT_COLUMNS if c in df.columns and df[c].dtype != pl.Int64]
    if text_ints and (any(df[c].dtype != pl.String for c in text_ints)
                      or any(n < df.height for n in df.select(pl.col(text_ints).null_count()).row(0))):
        return None
    if exact:
        df = df.with_columns(**{k: v for c, (ns, missing) in exact.items() for k, v in ((c, ns), (f"{c}_missing", missing))})
    return df.select(_fast_exprs((kinds[0], kinds[1]), tuple(df.columns)))


@lru_cache(maxsize=64)
def _fast_exprs(kinds: tuple[str, str], columns: tuple[str, ...]) -> list[pl.Expr]:
    """The expressions of :func:`_finish_fast` (built once per layout: every piece of a trace has the same).
    ``kinds``: how ``ts`` and ``dur`` arrive: "float" µs, "int" µs, or "exact" (ns, with their ``_missing``)."""
    exprs: list[pl.Expr] = []
    for c in EVENT_SCHEMA:
        if c in ("ts", "dur"):
            kind = kinds[c == "dur"]
            exprs.append(pl.col(c) if kind == "exact" else
                         (_float_ns_expr(c) if kind == "float" else (pl.col(c) * 1000).fill_null(0)).alias(c))
        elif c in ("ts_missing", "dur_missing"):
            exprs.append(pl.col(c) if c in columns else pl.col(c.removesuffix("_missing")).is_null().alias(c))
        elif c == "flow_id":
            exprs.append(pl.col("id").alias(c))
        elif c in columns:
            exprs.append(pl.col(c).cast(EVENT_SCHEMA[c]))
    return exprs


#: the deepest nesting of JSON values read (as the compiled scanner's limit)
MAX_DEPTH = 1000
#: every byte but brackets, which :func:`check_depth` deletes
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))


def check_depth(text: bytes) -> None:
    """Raise :class:`ChunkError` where a value in ``text`` (JSON values: an array, or one a line) is nested more than
    :data:`MAX_DEPTH` levels deep. polars' JSON readers overflow their thread's stack on such text, a segmentation
    fault rather than an error (polars 2.0's array reader and 2.1's line reader at 3,000 levels), so no text reaches
    them unchecked; msgspec's own limit is Python's recursion limit on 3.10 and 3.11 but about ten times it from
    3.12, so it cannot be the check. A bound first: the text's brackets alone (``bytes.translate``, ~3 GB/s) and
    their running depth, never below 0. Where that passes the limit, the depth outside strings (:func:`_depth`)."""
    brackets = np.frombuffer(text.translate(None, _NOT_BRACKETS), dtype=np.uint8)
    if len(brackets) <= MAX_DEPTH or _running_max(brackets) <= MAX_DEPTH:
        return
    if _depth(text) > MAX_DEPTH:
        raise ChunkError(f"an event is nested too deeply (over {MAX_DEPTH} levels)")


def _running_max(brackets: np.ndarray) -> int:
    """The deepest nesting of a run of bracket bytes (``[{`` open, ``]}`` close), the running depth never below 0."""
    depth = np.cumsum(np.where((brackets == 91) | (brackets == 123), 1, -1).astype(np.int32))
    depth -= np.minimum(np.minimum.accumulate(depth), 0)
    return int(depth.max())


def _depth(text: bytes) -> int:
    """The deepest nesting of brackets outside JSON strings in ``text``: a quote opens or closes a string unless an
    odd number of backslashes precede it; a bracket counts where an even number of such quotes precede it. On the
    positions of quotes, backslashes and brackets only (a few in a hundred bytes)."""
    b = np.frombuffer(text, dtype=np.uint8)
    quotes = np.flatnonzero(b == 34)
    slashes = np.flatnonzero(b == 92)
    if len(slashes):
        # each backslash's run of consecutive ones starts where the one before it is not its neighbour
        new_run = np.ones(len(slashes), dtype=bool)
        new_run[1:] = slashes[1:] != slashes[:-1] + 1
        run_start = slashes[np.maximum.accumulate(np.where(new_run, np.arange(len(slashes)), 0))]
        at = np.searchsorted(slashes, quotes) - 1  # the last backslash before each quote
        touching = (at >= 0) & (slashes[np.maximum(at, 0)] == quotes - 1)
        run = np.where(touching, quotes - run_start[np.maximum(at, 0)], 0)
        quotes = quotes[run % 2 == 0]
    at = np.flatnonzero((b == 91) | (b == 93) | (b == 123) | (b == 125))
    outside = at[np.searchsorted(quotes, at) % 2 == 0]
    return _running_max(b[outside]) if len(outside) else 0


def _polars(text: bytes, args: Args_ = None) -> pl.DataFrame:
    check_depth(text)
    df = pl.read_json(io.BytesIO(text), schema=reader_schema(args))
    return _unnest_args(df)


def _unnest_args(df: pl.DataFrame) -> pl.DataFrame:
    """The ``args`` struct as columns named as in the event table (those not read are added by :func:`finish`)."""
    args = df["args"].struct.unnest().rename({f.raw: f.column for f in ARG_FIELDS}, strict=False)
    return pl.concat([df.drop("args"), args], how="horizontal")


@dataclass
class ReadHints:
    """What the line reader has learned about a document, for its later pieces (shared by the parsing
    threads; a stale value costs one extra read of a piece, never a wrong value)."""

    int_ts: bool = False  #: ``ts`` are integer epoch µs: read them as integers (exact at once)
    typed: bool = True  #: integer args are plain integers: read them as integers


def parse_lines(text: bytes, lines: int, args: Args_ = None, hints: ReadHints | None = None,
                longest: int | None = None, meta: bool = True) -> tuple[pl.DataFrame, list[Bad]]:
    """Parse NDJSON events (:func:`kernscope.load.lines.to_lines`) with polars' strict line reader.

    ``hints``: read ``ts`` and integer args typed when they say so; where a value does not fit, the piece
    is read again with float times and text args (and ``hints.typed`` is turned off for the pieces after).
    ``meta=False``: the text likely holds no metadata event (``ph: "M"``), so their args are not read
    first; should the reader find one, the text is read again with them (only metadata events' rows of
    those columns are ever used).
    Raises :class:`ChunkError` when the reader refuses the text or the row count is not ``lines``
    (the caller then parses the original text with :func:`parse_chunk`, which locates any error)."""
    hints = hints if hints is not None else ReadHints()
    text = _readable(text)
    raw, error = _read_lines(text, args, hints, meta)
    if raw is not None and not meta and raw["ph"].eq("M").any():
        raw, error = _read_lines(text, args, hints, True)
    if raw is None:
        raise ChunkError(f"line reader: {error}", syntax=True) from None
    if raw.height != lines:
        raise ChunkError(f"line reader: {raw.height} rows for {lines} lines", syntax=True)
    # the largest |ts| and |dur| (µs), one polars call: they decide the exact path and the hints
    peaks: dict[str, float | None] = raw.select(pl.col("ts", "dur").abs().max().cast(pl.Float64)).row(0, named=True)
    ts, big_ts = raw["ts"], peaks["ts"]
    if not hints.int_ts and ts.dtype == pl.Float64 and big_ts is not None and big_ts >= EXACT_FLOAT_US:
        # integer epoch µs (older Kineto): the pieces after this one read them as integers, exact at once
        hints.int_ts = bool((ts.drop_nulls() == ts.drop_nulls().floor()).all())
    need = [c for c in peaks if raw[c].dtype == pl.Float64 and (peaks[c] or 0.0) >= EXACT_FLOAT_US]
    exact = exact_times(text, raw, need) if need else None
    if need and exact is None:
        text = b"".join((b"[", text.replace(b"\n", b","), b"]"))  # exact times are re-read from an array's text
    return finish(_unnest_args(raw), text, numbers=True, args=args, longest=longest, peaks=peaks, exact=exact)


def exact_times(text: bytes, raw: pl.DataFrame, columns: list[str]) -> dict[str, tuple[pl.Series, pl.Series]] | None:
    """``ts``/``dur`` (``columns``) as exact int64 ns read from NDJSON ``text`` with numpy (:mod:`.fields`):
    (ns, missing) per column, for values a float64 cannot hold to the ns (epoch µs with decimals). None
    when any value cannot be read for certain (then the text is decoded with msgspec, which also reports
    bad values). Each value must be the line's only ``"key":``, present exactly where the reader found a
    value, and agree with the reader's float to two units in the last place."""
    out: dict[str, tuple[pl.Series, pl.Series]] = {}
    for col in columns:
        pos = line_key_values(text, col.encode(), raw.height)
        if pos is None:
            return None
        v = raw[col]
        missing = v.is_null()
        if not np.array_equal(pos < 0, missing.to_numpy()):
            return None
        rows = np.flatnonzero(pos >= 0)
        ns, read = exact_ns_at(np.frombuffer(text, dtype=np.uint8), pos[rows])
        if not read.all():
            return None
        f = v.to_numpy()[rows]
        if not (np.abs(ns / 1000.0 - f) <= np.abs(f) * 2.0**-51 + 1e-3).all():
            return None
        full = np.zeros(raw.height, dtype=np.int64)
        full[rows] = ns
        out[col] = (pl.Series(col, full), missing)
    return out


def _read_lines(text: bytes, args: Args_, hints: ReadHints, meta: bool) -> tuple[pl.DataFrame | None, Exception | None]:
    """polars' line reader with the schema ``hints`` suggest, then the more general ones: (table, last error)."""
    error: Exception | None = None
    check_depth(text)
    for int_ts, typed in dict.fromkeys([(hints.int_ts, hints.typed), (False, hints.typed), (False, False)]):
        try:
            raw = pl.read_ndjson(io.BytesIO(text), schema=reader_schema(args, int_ts, typed, meta))
            if hints.typed and not typed:
                hints.typed = False  # integer args that are not plain integers ("0x1f", 5.0): text from now on
            return raw, None
        except (pl.exceptions.PolarsError, OverflowError, ValueError) as e:
            error = e
    return None, error


def _text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _fallback(text: bytes) -> pl.DataFrame:
    """msgspec decode with exact error locations; the same columns as :func:`_polars` (float times)."""
    try:
        evs = _DEC_EVENTS.decode(text)
    except msgspec.ValidationError as e:
        msg = str(e)
        idx = None
        if "$[" in msg:
            try:
                idx = int(msg.split("$[", 1)[1].split("]", 1)[0])
            except ValueError:
                idx = None
        raise ChunkError(msg, event=idx) from None
    except msgspec.DecodeError as e:
        msg = str(e)
        byte = None
        if "byte " in msg:
            try:
                byte = int(msg.rsplit("byte ", 1)[1].rstrip(")"))
            except ValueError:
                byte = None
        raise ChunkError(msg, byte=byte, syntax=True) from None
    except UnicodeDecodeError as e:
        raise ChunkError(f"invalid UTF-8 ({e.reason} at byte {e.start})", byte=e.start) from None
    except RecursionError:
        raise ChunkError("an event is nested too deeply (over 1000 levels)") from None
    cols: dict[str, Any] = {}
    for c in STRING_COLUMNS + ("id",):
        cols[c] = pl.Series(c, [_text(v) for v in map(attrgetter(c), evs)], dtype=pl.String)
    for c in ("ts", "dur"):  # float for now; _times re-reads the exact text when it matters
        texts = [bytes(r).decode() if r else None for r in map(attrgetter(c), evs)]
        cols[c] = pl.Series(c, texts, dtype=pl.String).cast(pl.Float64, strict=False)
        if cols[c].null_count() != sum(t is None for t in texts):
            cols[c] = pl.Series(c, [float("inf") if t else None for t in texts], dtype=pl.Float64)  # forces exact path
    args = list(map(attrgetter("args"), evs))
    for f in ARG_FIELDS:
        cols[f.column] = pl.Series(f.column, [_text(v) for v in map(attrgetter(f.column), args)], dtype=pl.String)
    return pl.DataFrame(cols)


#: the escape of a UTF-16 surrogate (``\ud800``-``\udfff``), a high one with its low half first; the backslashes before
#: it come in pairs (each an escaped backslash), so it is an escape, not text
_SURROGATE_ESCAPE = re.compile(rb"(?<!\\)((?:\\\\)*)(\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
                               rb"|\\u[dD][89a-fA-F][0-9a-fA-F]{2})")


def without_lone_surrogates(text: bytes) -> bytes:
    """``text`` with each escaped lone UTF-16 surrogate (a high half without its low half after it, or a low half
    alone) written as U+FFFD's escape, the same length (byte offsets hold). JSON's grammar allows them, though they
    name no character: polars' reader made one a NUL and msgspec refused it, so a name's text depended on which
    reader read its piece (the compiled scanner declines such a piece). Text without a ``\\ud`` escape is returned
    as it is."""
    if b"\\ud" not in text and b"\\uD" not in text:
        return text

    def fixed(m: re.Match[bytes]) -> bytes:
        return m.group(0) if len(m.group(2)) == 12 else m.group(1) + b"\\ufffd"

    return _SURROGATE_ESCAPE.sub(fixed, text)


def _readable(text: bytes) -> bytes:
    """The text the readers are given: checked to be UTF-8 throughout (polars does not check the strings it skips;
    :class:`ChunkError` at the first bad byte, ``isascii`` first: no copy of the text), its lone surrogate escapes
    made U+FFFD's (:func:`without_lone_surrogates`)."""
    try:
        if not text.isascii():
            text.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ChunkError(f"invalid UTF-8 ({e.reason})", byte=e.start) from None
    return without_lone_surrogates(text)


def parse_chunk(text: bytes, args: Args_ = None) -> tuple[pl.DataFrame, list[Bad]]:
    """Parse ``[ev, ev, ...]`` text. Raises :class:`ChunkError` when it is not a valid event array.

    ``args``: the args columns to read (None: all); the others are null."""
    text = _readable(text)
    try:
        raw = _polars(text, args)
    except (pl.exceptions.PolarsError, OverflowError, ValueError):
        raw = _fallback(text)
    return finish(raw, text, args=args)


def parse_events(items: list[bytes]) -> tuple[pl.DataFrame, list[int]]:
    """Parse events one by one (salvage); returns the table of the good ones and the indices of the bad."""
    good: list[pl.DataFrame] = []
    bad: list[int] = []
    for i, ev in enumerate(items):
        try:
            df, problems = parse_chunk(b"[" + ev + b"]")
        except ChunkError:
            bad.append(i)
            continue
        if problems:
            bad.append(i)
            continue
        good.append(df)
    return (pl.concat(good) if good else empty_table()), bad


def empty_table() -> pl.DataFrame:
    return pl.DataFrame(schema=EVENT_SCHEMA)


def nulls(n: int, dtype: Any) -> pl.Series:
    """``n`` nulls of ``dtype`` (no Python list; named ""). One null repeated by the series itself: ``pl.repeat``
    runs a query (0.2-0.4 ms a call: dozens of calls a load, a missing column in every piece)."""
    return pl.Series("", [None], dtype=dtype).new_from_index(0, n)
