"""Kernel-name categories and libraries, driven by the rule table in ``rules.toml``.

Each *distinct* (name, kind, launch call) is categorized once and the answer is joined back, so
categorizing costs O(distinct names), not O(events).
"""

from __future__ import annotations

import functools
import itertools
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ..errors import RulesError
from ..link.kinds import FLAT_KEYS, numbered

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

OTHER = "Other"
UNKNOWN_LIBRARY = "Unknown"
#: Categories of the built-in taxonomy (user rules may add more).
CATEGORIES = (
    "GEMM",
    "Attention Forward",
    "Attention Backward",
    "SSM/Linear Attention",
    "Convolution",
    "FFT",
    "Linear Algebra",
    "Communication",
    "Memory",
    "Elementwise",
    "Reduction",
    "Normalization",
    "Softmax",
    "Embedding/Indexing",
    "Optimizer",
    "Sort/Scan",
    "Loss",
    "MoE",
    "Quantization",
    "Pooling",
    OTHER,
)
_DIGITS_UNDERSCORES = re.compile(r"[_\d]")
_INDUCTOR = re.compile(r"triton_(poi|red|per|tem|for|spl)_(?:fused_)?")


def _strip_trailing_numbers(s: str) -> str:
    r"""``s`` without its trailing ``_<digits>`` groups, in linear time (the regex ``(.*?)(?:_\d+)*$`` backtracked
    quadratically: 87 ms for one adversarial 4 KB name)."""
    end = len(s)
    while end > 0:
        i = end
        while i > 0 and s[i - 1].isdecimal():
            i -= 1
        if i == end or i == 0 or s[i - 1] != "_":
            break
        end = i - 1
    return s[:end]
_DEFAULT_USER_PRIORITY = 10_000
#: Rules look at this many leading characters of a kernel's head (keywords sit at the front; long
#: template argument lists only slow the regexes down).
MATCH_CHARS = 512
#: Most answers a categorizer remembers (distinct (name, kind, launch) keys).
MEMO_MAX = 200_000
#: at most this many distinct names are categorized by the rules in Python, one name at a time, as the one-name API
#: does; more in one polars query. The query costs ~16 ms whatever the count (its regexes and word sets compiled
#: each time); Python 45-175 µs a name: 55-130 distinct names, what a real trace holds, 5-23 ms against 16-30 ms
PYTHON_LOOKUP_MAX = 150
#: an op name the categorizer has not seen (its category may be None)
_UNSEEN = object()


def _bounded_update(memo: dict[Any, Any], answers: dict[Any, Any]) -> None:
    """``memo`` updated with ``answers``, at most :data:`MEMO_MAX` entries (the oldest dropped: insertion order)."""
    if len(memo) + len(answers) > MEMO_MAX:
        drop = len(memo) + len(answers) - MEMO_MAX
        for k in list(itertools.islice(memo, max(drop, MEMO_MAX // 2))):
            memo.pop(k, None)  # (another thread may have dropped it)
    memo.update(itertools.islice(answers.items(), MEMO_MAX))


def _lower_pattern(pattern: str) -> str:
    """Lowercase a regex's literal characters, leaving escapes (``\\D``, ``\\W``, ...) intact.

    Case-insensitive rules are matched as ``lowered pattern`` on ``lowered text``: ~4x faster than
    ``re.IGNORECASE`` on long alternations.
    """
    out = []
    escaped = False
    for ch in pattern:
        out.append(ch if escaped else ch.lower())
        escaped = (ch == "\\") and not escaped
    return "".join(out)


def kernel_head(name: str) -> str:
    """The part of a demangled kernel name that says what it does: no return type, no parameter list.

    ``void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, ...>(int, ...)``
    -> ``at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, ...>``. Matching the
    head keeps argument types (``TensorIterator&``, lambdas) from triggering false categories.
    """
    n = name.replace("(anonymous namespace)", "anon").strip()
    if n.startswith("void "):
        n = n[5:]
    if n.endswith(")"):  # strip the trailing parameter list: find its matching "(" (jumping paren to paren)
        depth = 0
        i = len(n)
        while True:
            i = max(n.rfind("(", 0, i), n.rfind(")", 0, i))
            if i <= 0:
                break
            depth += 1 if n[i] == ")" else -1
            if depth == 0:
                return n[:i] if n[:i].strip() else n
    return n


class Regex:
    """A regular expression compiled by Python's ``re`` on its first :meth:`search`. An analysis matches names with
    polars' engine, which takes the text (``pattern``); Python's engine is for what polars' refuses (lookaround,
    backreferences) and for single names. Compiling the built-in rules' ~100 expressions up front took ~50 ms of
    every command's start."""

    __slots__ = ("pattern", "_rx")

    def __init__(self, pattern: str, compiled: re.Pattern[str] | None = None) -> None:
        self.pattern = pattern
        self._rx = compiled

    def search(self, text: str) -> re.Match[str] | None:
        if self._rx is None:
            self._rx = re.compile(self.pattern)
        return self._rx.search(text)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Regex) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)

    def __repr__(self) -> str:
        return f"Regex({self.pattern!r})"


def _checked(pattern: str) -> Regex:
    """``pattern`` compiled now (``re.error`` when it is not a regular expression)."""
    return Regex(pattern, re.compile(pattern))


@dataclass(frozen=True)
class Rule:
    """One pattern -> value rule. Higher ``priority`` wins; ties go to the earlier rule.

    The pattern's top-level alternatives that are plain words are tested as substrings (``in``, C
    speed); only the others go through the regex engine (``residual``).
    """

    value: str
    pattern: Regex
    priority: int
    kinds: frozenset[str] | None = None
    launch: Regex | None = None
    order: int = 0
    source: str = "builtin"
    case_sensitive: bool = False
    words: tuple[str, ...] = ()
    residual: Regex | None = None

    def matches(self, name: str, kind: str, launch: str, lowered: str | None = None) -> bool:
        if self.kinds is not None and kind not in self.kinds:
            return False
        if self.launch is not None and not self.launch.search(launch):
            return False
        text = name if self.case_sensitive or lowered is None else lowered
        for w in self.words:
            if w in text:
                return True
        return self.residual is not None and self.residual.search(text) is not None


_META = set(".^$*+?{}[]()|\\")


def _split_alternatives(pattern: str) -> list[str]:
    """Top-level ``|`` alternatives of a regex (respecting groups, classes and escapes)."""
    parts, cur, depth, in_class, escaped = [], [], 0, False, False
    for ch in pattern:
        if escaped:
            cur.append(ch)
            escaped = False
            continue
        if ch == "\\":
            escaped = True
        elif in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return parts


def _words_and_residual(pattern: Regex, make: Callable[[str], Regex]) -> tuple[tuple[str, ...], Regex | None]:
    """The top-level alternatives of ``pattern`` that are plain words, and a regex of the others (``make``: how it is
    made, compiled now or on first use)."""
    if pattern.pattern.startswith("(?"):  # global inline flags: keep the regex whole
        return (), pattern
    alts = _split_alternatives(pattern.pattern)
    words = tuple(a for a in alts if a and not (_META & set(a)))
    rest = [a for a in alts if not a or (_META & set(a))]
    if not words:
        return (), pattern
    return words, (make("|".join(rest)) if rest else None)


def _compile(d: dict[str, Any], where: str, order: int, source: str, default_priority: int) -> Rule:
    """One rule of a rules file. Its regular expressions are compiled now, so that a bad one is reported as the
    rules are read, except the built-in rules' (``source`` "builtin"), which tests compile."""
    for key in ("value", "pattern"):
        if not isinstance(d.get(key), str) or not d[key]:
            raise RulesError(f"{where}: rule needs a non-empty string '{key}'")
    cs = bool(d.get("case_sensitive"))
    make = Regex if source == "builtin" else _checked
    try:
        try:
            pat = make(d["pattern"] if cs else _lower_pattern(d["pattern"]))
        except re.error:
            re.compile(d["pattern"])  # report the error against the pattern as written
            raise
        launch = make(d["launch"]) if d.get("launch") else None
        words, residual = _words_and_residual(pat, make)
    except re.error as e:
        raise RulesError(f"{where}: invalid regular expression {d.get('pattern')!r}: {e}") from None
    prio = d.get("priority", default_priority)
    if not isinstance(prio, int):
        raise RulesError(f"{where}: 'priority' must be an integer")
    kinds = d.get("kinds")
    if kinds is not None and not (isinstance(kinds, list) and all(isinstance(k, str) for k in kinds)):
        raise RulesError(f"{where}: 'kinds' must be a list of strings")
    unknown = set(d) - {"value", "pattern", "priority", "kinds", "launch", "case_sensitive"}
    if unknown:
        raise RulesError(f"{where}: unknown key(s) {sorted(unknown)}")
    return Rule(d["value"], pat, prio, frozenset(kinds) if kinds else None, launch, order, source, cs, words, residual)


@dataclass
class Categorizer:
    """Maps kernel names to (category, library). Build with :meth:`builtin` and :meth:`with_rules`."""

    categories: list[Rule] = field(default_factory=list)
    libraries: list[Rule] = field(default_factory=list)
    inductor_order: list[str] = field(default_factory=list)
    inductor_tokens: dict[str, list[str]] = field(default_factory=dict)
    #: launching-op rules ([[op_category]]) and the name categories they may replace ([launcher].generic)
    op_rules: list[Rule] = field(default_factory=list)
    generic: frozenset[str] = frozenset()
    #: kernel names that keep their own category whatever op launched them ([launcher].keep: dtype casts
    #: and copies are not the work of the op around them)
    keep: str = ""
    _memo: dict[tuple[str, str, str], tuple[str, str]] = field(default_factory=dict, repr=False, compare=False)
    #: op names (or HLO descriptions) -> their [[op_category]] category, None where no rule names them: a JAX profile's
    #: time windows ask again for the same names, 8-13 ms a window
    _op_memo: dict[str, str | None] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def builtin(cls) -> "Categorizer":
        """The built-in taxonomy (parsed and compiled once per process; rules are immutable)."""
        return _builtin()

    def with_rules(
        self, spec: dict[str, Any] | str | Path, *, source: str | None = None, default_priority: int = _DEFAULT_USER_PRIORITY
    ) -> "Categorizer":
        """Return a new categorizer with rules added from a TOML file path or a parsed dict.

        User rules default to priority 10000, so they override built-ins unless given lower.
        """
        if isinstance(spec, (str, Path)):
            where = str(spec)
            try:  # (UTF-8 whatever the locale, a byte order mark read as nothing: Windows editors write one)
                spec = dict(tomllib.loads(Path(spec).read_text(encoding="utf-8-sig")))
            except OSError as e:
                raise RulesError(f"{where}: cannot read rule file ({e.strerror})") from None
            except UnicodeDecodeError as e:
                raise RulesError(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from None
            except tomllib.TOMLDecodeError as e:
                raise RulesError(f"{where}: invalid TOML ({e})") from None
        else:
            where = source or "rules"
        src = source or where
        assert isinstance(spec, dict)
        unknown = set(spec) - {"version", "category", "library", "inductor", "op_category", "launcher"}
        if unknown:
            raise RulesError(f"{where}: unknown top-level key(s) {sorted(unknown)}; expected [[category]], [[library]], "
                             "[[op_category]] or [launcher]")
        cats = list(self.categories)
        libs = list(self.libraries)
        ops = list(self.op_rules)
        for key, target in (("category", cats), ("library", libs), ("op_category", ops)):
            rules = spec.get(key, [])
            if not isinstance(rules, list):
                raise RulesError(f"{where}: '{key}' must be an array of tables ([[{key}]])")
            for i, d in enumerate(rules):
                if not isinstance(d, dict):
                    raise RulesError(f"{where}: [[{key}]] #{i + 1} is not a table")
                target.append(_compile(d, f"{where}: [[{key}]] #{i + 1}", len(target), src, default_priority))
        ind = spec.get("inductor", {})
        order = list(ind.get("order", self.inductor_order))
        tokens = {**self.inductor_tokens, **ind.get("tokens", {})}
        launcher = spec.get("launcher", {})
        generic = launcher.get("generic", sorted(self.generic)) if isinstance(launcher, dict) else None
        if not isinstance(generic, list) or not all(isinstance(g, str) for g in generic):
            raise RulesError(f"{where}: [launcher].generic must be a list of category names")
        keep = launcher.get("keep", self.keep) if isinstance(launcher, dict) else self.keep
        if not isinstance(keep, str):
            raise RulesError(f"{where}: [launcher].keep must be a regular expression (a string)")
        try:
            re.compile(keep)
            pl.Series([""]).str.contains(f"(?i){keep}")
        except (re.error, pl.exceptions.ComputeError) as e:
            raise RulesError(f"{where}: [launcher].keep is not a valid regular expression ({e})") from None
        key_fn = lambda r: (-r.priority, r.order)  # noqa: E731
        return Categorizer(sorted(cats, key=key_fn), sorted(libs, key=key_fn), order, tokens, sorted(ops, key=key_fn),
                           frozenset(generic), keep)

    # -- single-name API -----------------------------------------------------------------------
    @functools.cached_property
    def _inductor_patterns(self) -> list[tuple[str, re.Pattern[str]]]:
        """Per Inductor category, one compiled alternation of its tokens (Memory: the tokens to strip)."""
        out = []
        for cat in self.inductor_order:
            toks = sorted(self.inductor_tokens.get(cat, []), key=len, reverse=True)
            if not toks:
                continue
            alt = "|".join(re.escape(t) for t in toks)
            out.append((cat, re.compile(rf"(^|_)(?:{alt})(?=_|$)")))
        return out

    def _inductor(self, name: str) -> str | None:
        m = _INDUCTOR.match(name)
        if not m:
            return None
        flavor, ops = m.group(1), _strip_trailing_numbers(name[m.end():])
        for cat, pat in self._inductor_patterns:
            if flavor != "tem" and cat in ("GEMM", "Convolution"):
                continue  # a generated pointwise/reduction kernel only fuses around an extern GEMM or convolution
            if cat == "Memory":  # only data movement fused (no ops named at all says nothing: the flavor's default;
                # a template is a matrix product, a convolution or attention, whatever it fused: zeros, a copy)
                if (flavor != "tem" and _DIGITS_UNDERSCORES.sub("", ops)
                        and not _DIGITS_UNDERSCORES.sub("", pat.sub("_", ops))):
                    return "Memory"
                continue
            if pat.search(ops):
                return cat
        return {"poi": "Elementwise", "red": "Reduction", "per": "Reduction", "tem": "GEMM"}.get(flavor, "Elementwise")

    def category(self, name: str, kind: str = "kernel", launch: str = "") -> str:
        """Category of one kernel name (``kind``: kernel/memcpy/memset; ``launch``: runtime call name)."""
        return self._classify(name, kind, launch)[0]

    def library(self, name: str, kind: str = "kernel", launch: str = "") -> str:
        """Library that wrote the kernel (cuBLAS, cuDNN, Triton, ATen, NCCL, ...)."""
        return self._classify(name, kind, launch)[1]

    def _classify(self, name: str, kind: str, launch: str) -> tuple[str, str]:
        hit = self._memo.get((name, kind, launch))
        if hit is not None:
            return hit
        found = self._classify_fresh(name, kind, launch)
        self._remember({(name, kind, launch): found})
        return found

    def _classify_fresh(self, name: str, kind: str, launch: str) -> tuple[str, str]:
        """(category, library) of one kernel by the rules, in Python (``re``)."""
        head = kernel_head(name)[:MATCH_CHARS]
        low = head.lower()
        cat = self._inductor(name) if kind == "kernel" else None
        if cat is None:
            cat = _first_match(self.categories, head, low, kind, launch, OTHER)
        return cat, _first_match(self.libraries, head, low, kind, launch, UNKNOWN_LIBRARY)

    # -- table API -----------------------------------------------------------------------------
    def lookup(self, keys: Iterable[tuple[str, str, str]]) -> pl.DataFrame:
        """Categorize distinct (name, kind, launch_name) triples, all rules at once over the column.

        Each rule is one vectorized test over all names (Aho-Corasick for its plain words, the Rust
        regex engine for the rest), so the cost grows with distinct names at a few µs each, not with
        rules times names in Python. Rules whose regex the Rust engine does not accept run in Python.
        """
        rows = list(keys)
        schema = {"name": pl.String, "kind": pl.String, "launch_name": pl.String, "category": pl.String,
                  "library": pl.String}
        known = [self._memo.get(r) for r in rows]
        todo = [r for r, v in zip(rows, known) if v is None]
        if todo:
            answers = dict(zip(todo, self._lookup_fresh(todo)))
            self._remember(answers)
            known = [v if v is not None else answers[r] for r, v in zip(rows, known)]
        done = [v for v in known if v is not None]
        return pl.DataFrame(
            [(n, k, ln, c, lib) for (n, k, ln), (c, lib) in zip(rows, done)], schema=schema, orient="row"
        )

    def _remember(self, answers: dict[tuple[str, str, str], tuple[str, str]]) -> None:
        _bounded_update(self._memo, answers)

    def _lookup_fresh(self, rows: list[tuple[str, str, str]]) -> list[tuple[str, str]]:
        """(category, library) of each (name, kind, launch_name) by the rules: in Python up to
        :data:`PYTHON_LOOKUP_MAX` rows, else one polars query (the same answers: tests compare both ways)."""
        if len(rows) <= PYTHON_LOOKUP_MAX:
            return [self._classify_fresh(*r) for r in rows]
        names = [r[0] for r in rows]
        heads = [kernel_head(n)[:MATCH_CHARS] for n in names]
        df = pl.DataFrame({"name": names, "kind": [r[1] for r in rows], "launch_name": [r[2] for r in rows],
                           "head": heads}, schema={"name": pl.String, "kind": pl.String, "launch_name": pl.String,
                                                   "head": pl.String})
        df = df.with_columns(pl.col("head").str.to_lowercase().alias("low"))
        inductor = [self._inductor(n) if k == "kernel" and n.startswith("triton_") else None
                    for n, k, _ in rows]
        df = df.with_columns(pl.Series("_ind", inductor, dtype=pl.String))
        cat = pl.coalesce(pl.col("_ind"), self._first_expr(self.categories, df), pl.lit(OTHER))
        lib = pl.coalesce(self._first_expr(self.libraries, df), pl.lit(UNKNOWN_LIBRARY))
        out = df.select(cat.alias("category"), lib.alias("library"))
        return list(zip(out["category"].to_list(), out["library"].to_list()))

    def op_categories(self, names: list[str]) -> pl.DataFrame:
        """``name, category`` of CPU op names by the [[op_category]] rules (null when no rule names the op); the
        rules run once per name this categorizer has not seen."""
        known = [self._op_memo.get(n, _UNSEEN) for n in names]
        todo = list(dict.fromkeys(n for n, v in zip(names, known) if v is _UNSEEN))
        if todo:
            df = pl.DataFrame({"name": todo}, schema={"name": pl.String}).with_columns(
                pl.col("name").alias("head"), pl.col("name").str.to_lowercase().alias("low"), pl.lit("").alias("kind"),
                pl.lit("").alias("launch_name"))
            answers = dict(zip(todo, df.select(self._first_expr(self.op_rules, df).alias("c"))["c"].to_list()))
            _bounded_update(self._op_memo, answers)
            known = [answers[n] if v is _UNSEEN else v for n, v in zip(names, known)]
        return pl.DataFrame({"name": names, "category": known}, schema={"name": pl.String, "category": pl.String})

    def _first_expr(self, rules: list[Rule], df: pl.DataFrame) -> pl.Expr:
        """The value of the first (highest-priority) matching rule, or null."""
        exprs = [pl.when(_match_expr(r, df)).then(pl.lit(r.value)) for r in rules]
        return pl.coalesce(exprs) if exprs else pl.lit(None, dtype=pl.String)

    def categorize(self, gpu: pl.DataFrame, *, platform: str | None = None) -> pl.DataFrame:
        """Add ``category`` and ``library`` columns (categorical) to a GPU event table (one lookup per distinct name).

        The distinct keys are found on the interned (physical) codes of the name, kind and launch columns, so no
        per-row string work is done: numbered by the compiled library where it is there (each row's category
        gathered by its number), else with polars' distinct keys joined back. ``platform`` (the trace's, "rocm"):
        copies and fills that no launch call or name tells apart are the platform's runtime's (:func:`_platform_runtime`).
        """
        return _platform_runtime(self._categorize(gpu), platform)

    def _categorize(self, gpu: pl.DataFrame) -> pl.DataFrame:
        launch = "launch_name" if "launch_name" in gpu.columns else None
        numbered = _numbered_keys(gpu, ["name", "kind", *([launch] if launch else [])])
        if numbered is not None:
            # the distinct (name, kind, launch) codes numbered in two compiled passes, each row's category gathered
            # by its number (the JAX class at 1 GB, 6.7 M rows, on first use: 0.32-0.59 s with polars' unique and join
            # back, 0.07-0.09 s so)
            number, one_row, unmatched = numbered
            rows = gpu[one_row]
            table = self.lookup(zip(rows["name"].cast(pl.String).fill_null("").to_list(),
                                    rows["kind"].cast(pl.String).fill_null("").to_list(),
                                    rows[launch].cast(pl.String).fill_null("").to_list() if launch else [""] * rows.height))
            # (a row whose name or kind is null matches nothing: its category is null)
            table = table.select(pl.when(pl.Series(unmatched)).then(None).otherwise(pl.col(c)).cast(pl.Categorical).alias(c)
                                 for c in ("category", "library"))
            at = pl.Series(number)
            return gpu.with_columns(table["category"].gather(at), table["library"].gather(at))

        schema = gpu.schema

        def code(c: str) -> pl.Expr:
            col = pl.col(c)
            if isinstance(schema[c], (pl.Enum, pl.Categorical)):
                return col.to_physical().cast(pl.Int64)
            return col.hash().reinterpret(signed=True)

        keyed = gpu.select(
            code("name").alias("_n"), code("kind").alias("_k"),
            (code(launch).fill_null(-1) if launch else pl.lit(-1, dtype=pl.Int64)).alias("_l"),
        )
        keys = ["_n", "_k", "_l"]
        if all(isinstance(schema[c], (pl.Enum, pl.Categorical)) for c in ("name", "kind", *([launch] if launch else []))):
            # interned codes fit one int64 (name's above launch's above kind's): the distinct keys and the join back
            # on one column, not three (the JAX class's 1.4 M rows: 0.1 s and +141 MiB, most of it the three-key join)
            top = keyed.select(pl.col("_n").max(), pl.col("_k").max(), pl.col("_l").max()).row(0)
            if (top[0] or 0) < 1 << 31 and (top[1] or 0) < 1 << 4 and (top[2] or 0) + 1 < 1 << 27:
                keyed = keyed.select((pl.col("_n") * (1 << 32) + (pl.col("_l") + 1) * (1 << 4) + pl.col("_k")).alias("_key"))
                keys = ["_key"]
        first = keyed.with_row_index("_r").unique(keys, keep="first").sort("_r")
        rows = gpu[first["_r"].to_list()]
        names = rows["name"].cast(pl.String).fill_null("").to_list()
        kinds = rows["kind"].cast(pl.String).fill_null("").to_list()
        launches = rows[launch].cast(pl.String).fill_null("").to_list() if launch else [""] * rows.height
        # interned: each row gets a code of the few distinct values, not a copy of the text
        table = self.lookup(zip(names, kinds, launches)).select(pl.col("category", "library").cast(pl.Categorical))
        table = pl.concat([first.select(keys), table], how="horizontal")
        # (a row whose name is null has a null key: it matches nothing, and its category is null)
        out = keyed.join(table, on=keys, how="left", maintain_order="left").select("category", "library")
        return gpu.with_columns(out["category"], out["library"])


#: the library the built-in rules give a copy or fill that neither its launch call nor its name places (CUDA's runtime),
#: and what it is on a ROCm trace
CUDA_RUNTIME, ROCM_RUNTIME = "CUDA Runtime", "ROCm runtime"


def _platform_runtime(gpu: pl.DataFrame, platform: str | None) -> pl.DataFrame:
    """On a ROCm trace (``platform`` "rocm"), the copies and fills that the rules left to CUDA's runtime are ROCm's:
    records with no launch in the trace (HIP-launched ones are ROCm's by the rules already). TraceLens's MI300 ResNet
    trace: 211 such records, 1.0 ms, read CUDA Runtime."""
    if platform != "rocm" or gpu.height == 0:
        return gpu
    cuda = (pl.col("kind").cast(pl.String).is_in(["memcpy", "memset"]) & (pl.col("library").cast(pl.String) == CUDA_RUNTIME))
    return gpu.with_columns(pl.when(cuda).then(pl.lit(ROCM_RUNTIME)).otherwise(pl.col("library").cast(pl.String))
                            .cast(pl.Categorical).alias("library"))


def _numbered_keys(gpu: pl.DataFrame, columns: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The distinct combinations of the interned ``columns`` of ``gpu``, numbered by the compiled library
    (:func:`kernscope.link.kinds.numbered`): (each row's number, one row of each combination, and per number
    whether its name or kind is null: such rows match no rule), or None where the columns are not all interned,
    the library is not there, or their codes' ranges multiply past
    :data:`~kernscope.link.kinds.FLAT_KEYS`."""
    if not gpu.height:
        return None
    got = numbered([gpu[c] for c in columns], FLAT_KEYS)
    if got is None:
        return None
    number, first, missing = got
    unmatched = np.zeros(len(first), dtype=bool)
    for m in missing[:2]:  # name, kind
        if m is not None:
            unmatched |= m[first]
    return number, first, unmatched


#: regex syntax polars' (Rust) engine refuses: lookaround and backreferences
_PYTHON_ONLY = re.compile(r"\(\?<?[=!]|\(\?P=|\\[1-9]")


@functools.lru_cache(maxsize=1024)
def _rust_ok(pattern: str, ask: bool = True) -> bool:
    """Does polars' (Rust) engine accept ``pattern``? Lookaround and backreferences are refused without asking it,
    and with ``ask`` False (the built-in rules: a test checks polars agrees on each) everything else is accepted
    without asking; the answer is kept for the process (asking compiles the regex: the built-in rules' 40 took ~20 ms
    of every analysis)."""
    if _PYTHON_ONLY.search(pattern):
        return False
    if not ask:
        return True
    try:
        pl.Series([""]).str.contains(pattern)
        return True
    except pl.exceptions.PolarsError:
        return False


def _match_expr(r: Rule, df: pl.DataFrame) -> pl.Expr | pl.Series:
    """Boolean: does rule ``r`` match each row (columns head, low, kind, launch_name)?"""
    text = "head" if r.case_sensitive else "low"
    m: pl.Expr | pl.Series = pl.lit(False)
    if r.words:
        m = pl.col(text).str.contains_any(list(r.words))
    ask = r.source != "builtin"
    if r.residual is not None:
        if _rust_ok(r.residual.pattern, ask):
            m = m | pl.col(text).str.contains(r.residual.pattern)
        else:  # a Python-only regex (lookaround, backreference): test it row by row
            py = pl.Series([r.residual.search(t) is not None for t in df[text].to_list()])
            m = m | py
    if r.kinds is not None:
        m = m & pl.col("kind").is_in(sorted(r.kinds))
    if r.launch is not None:
        if _rust_ok(r.launch.pattern, ask):
            m = m & pl.col("launch_name").str.contains(r.launch.pattern)
        else:
            m = m & pl.Series([r.launch.search(t) is not None for t in df["launch_name"].to_list()])
    return m


def _first_match(rules: list[Rule], head: str, low: str, kind: str, launch: str, default: str) -> str:
    """Value of the highest-priority rule matching a kernel head (rules are pre-sorted)."""
    for r in rules:
        if r.matches(head, kind, launch, low):
            return r.value
    return default


@functools.lru_cache(maxsize=1)
def _builtin() -> Categorizer:
    text = resources.files("kernscope.analyze").joinpath("rules.toml").read_text(encoding="utf-8")
    return Categorizer().with_rules(tomllib.loads(text), source="builtin", default_priority=0)

