"""The analyses' numpy fast paths against the straightforward polars formulation they replace (random tables with
ties, nulls and many groups, and the GPU rows of real traces): group codes, the same-stream clip, the idle gaps and
the critical path's predecessors."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from conftest import TRACES

from kernscope.analyze.critical_path import _last_ended
from kernscope.analyze.idle import idle_breakdown
from kernscope.analyze.kernels import gpu_table
from kernscope.analyze.timeline import clip_overruns
from kernscope.intervals import integer_codes, merged, running_max
from kernscope.pipeline import load

REAL = [TRACES / "hta" / "v100_2rank_rank1_test.json.gz", TRACES / "tracelens" / "b200_eager_trace.json.gz"]


@pytest.fixture(params=["compiled", "numpy"])
def sweeps(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test that takes it runs twice: with the compiled sweeps (``_sweep.c``: the clip, the idle gaps, the
    unions) and with their numpy forms (``KERNSCOPE_NO_NATIVE=1``)."""
    from kernscope.load import native

    if request.param == "compiled" and native.scanner() is None:
        pytest.fail("the compiled library was not built (make install compiles src/kernscope/load/_sweep.c)")
    if request.param == "numpy":
        monkeypatch.setenv("KERNSCOPE_NO_NATIVE", "1")
    return str(request.param)


def _random_gpu(seed: int, n: int = 4000, nulls: bool = False) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    dev = rng.integers(0, 3, n)
    stream = rng.choice([7, 13, 2**40, 21], n)
    ts = rng.integers(0, 50_000, n)  # many ties within a stream
    dur = rng.integers(0, 400, n)
    launch = ts - rng.integers(-50, 3000, n)
    df = pl.DataFrame({"step": rng.integers(0, 4, n), "device": dev, "stream": stream, "ts": ts, "end": ts + dur,
                       "launch_ts": launch})
    if nulls:
        def holes(col: str, share: float) -> pl.Expr:
            return pl.when(pl.lit(pl.Series(rng.random(n) < share))).then(None).otherwise(pl.col(col)).alias(col)

        df = df.with_columns(holes("device", 0.05), holes("stream", 0.05), holes("launch_ts", 0.2))
    return df


def _clip_reference(table: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """The clip as one polars sort and window (what ``clip_overruns`` did before its numpy form)."""
    t = table.with_row_index("_row").sort(["device", "stream", "ts", "_row"]).with_columns(
        pl.col("ts").shift(-1).over(["device", "stream"]).alias("_next"))
    over = ((pl.col("_next").is_not_null()) & (pl.col("end") > pl.col("_next"))).fill_null(False).alias("clipped")
    t = t.with_columns(over).with_columns(
        pl.when(pl.col("clipped")).then(pl.col("_next")).otherwise(pl.col("end")).alias("end")).drop("_next")
    return t.sort("_row").drop("_row"), int(t["clipped"].sum())


@pytest.mark.parametrize("seed", range(6))
def test_clip_equals_the_sort_and_window(seed: int, sweeps: str) -> None:
    table = _random_gpu(seed, nulls=seed % 2 == 1)
    got, n = clip_overruns(table)
    want, n_want = _clip_reference(table)
    assert n == n_want and n > 0
    assert got.equals(want)  # in the table's own row order, ties clipped in row order


def test_clip_tells_null_keys_from_zero(sweeps: str) -> None:
    """A null device or stream is a key of its own, not the 0 its cell is filled with: a record on stream 0 is not
    clipped by the next record of the null stream, nor the other way round (rows in the sort's order)."""
    table = pl.DataFrame({"device": [0, 0, None, None, 0, 0], "stream": [None, 0, 0, 0, 0, None],
                          "ts": [0, 5, 0, 5, 100, 105], "end": [50, 60, 50, 60, 150, 160]})
    got, n = clip_overruns(table)
    want, n_want = _clip_reference(table)
    assert (n, got["end"].to_list()) == (n_want, want["end"].to_list()) == (1, [50, 60, 5, 60, 150, 160])


@pytest.mark.parametrize("seed", range(3))
def test_clip_of_rows_in_stream_order_equals_the_sort_and_window(seed: int, sweeps: str) -> None:
    """Rows already sorted by (device, stream, start), as a JAX profile's come, are clipped in place (no sort): the
    same table as the polars form, and as through the sort (rows out of order, or a null key, take the sort)."""
    import kernscope.analyze.timeline as tl

    table = _random_gpu(seed).sort("device", "stream", "ts", maintain_order=True)
    assert tl._in_stream_order(*(table[c].to_numpy() for c in ("device", "stream", "ts")))
    got, n = clip_overruns(table)
    want, n_want = _clip_reference(table)
    assert n == n_want and n > 0 and got.equals(want)
    swapped = pl.concat([table.slice(1, 1), table.slice(0, 1), table.slice(2)])
    assert not tl._in_stream_order(*(swapped[c].to_numpy() for c in ("device", "stream", "ts")))
    got, n = clip_overruns(swapped)
    assert got.equals(_clip_reference(swapped)[0])


def test_clip_of_real_traces_counts_the_overruns(sweeps: str) -> None:
    for path in REAL:
        if not path.exists():
            pytest.skip(f"{path} not in shared/traces")
        g = gpu_table(load(path, cache=False), text_names=False)
        got, n = clip_overruns(g.select("device", "stream", "ts", "end"))
        want, n_want = _clip_reference(g.select("device", "stream", "ts", "end"))
        assert (n, got.equals(want)) == (n_want, True)
        assert n > 0  # both traces have kernels that overrun the next one of their stream (31 and 74)


@pytest.mark.parametrize("keys", [["step"], ["step", "device"], ["device", "stream", "step"], ["one"], ["one", "step"],
                                  ["step", "one", "device"], ["step", "device", "one"]])
def test_integer_codes_equal_the_struct_rank(keys: list[str]) -> None:
    """Keys of one value (``one``: a one-GPU profile's device) add nothing to the order and are left out."""
    table = _random_gpu(3).with_columns(pl.lit(7, dtype=pl.Int64).alias("one"))
    want = table.select(pl.struct(keys).rank("dense").cast(pl.Int64) - 1).to_series().to_numpy()
    got = integer_codes(table, keys)
    assert got is not None and np.array_equal(got, want)


def test_partition_equals_polars_and_reads_one_group_in_place() -> None:
    """``intervals.partition`` gives what ``partition_by(as_dict=True, include_key=False)`` gives (Categorical keys as
    text, null keys as None, several groups or one); rows of one (pid, tid) come back as the table's own columns."""
    from kernscope.intervals import partition

    pid = pl.Series(["7", "7", "9", "7"], dtype=pl.Categorical)
    tid = pl.Series(["a", "b", "a", "a"], dtype=pl.Categorical)
    table = pl.DataFrame({"pid": pid, "tid": tid, "ts": [1, 2, 3, 4], "n": [None, 1, 2, 3]})
    one = table.filter((pl.col("pid") == "7") & (pl.col("tid") == "a"))
    nulls = table.with_columns(pl.lit(None, dtype=pl.Int64).alias("n"), pl.Series("m", [None, 5, None, 5]))
    for t, keys in ((table, ("pid", "tid")), (one, ("pid", "tid")), (table.head(0), ("pid",)), (nulls, ("n",)),
                    (nulls, ("m",)), (nulls, ("n", "pid")), (table.with_columns(pl.col("pid").cast(pl.String)), ("pid",)),
                    (one.with_columns(pl.col("tid").cast(pl.String)), ("pid", "tid"))):
        want = t.partition_by(*keys, as_dict=True, include_key=False)
        got = partition(t, keys)
        assert list(got) == list(want), keys
        for k in want:
            assert got[k].equals(want[k]), (keys, k)
    # not copied: the part's column is the table's own buffer. The table is made one chunk first: polars 2.0 leaves a
    # filter's result in two, and to_numpy then copies each time, so that two addresses were equal only where the
    # allocator gave the first copy's freed memory to the second (under pytest's assertion rewriting it did not)
    one = one.rechunk()
    got = partition(one, ("pid", "tid"))
    assert list(got) == [("7", "a")]
    part_ts, own_ts = got["7", "a"]["ts"].to_numpy(), one["ts"].to_numpy()
    assert np.shares_memory(part_ts, own_ts)
    assert not np.shares_memory(one.partition_by("pid", "tid", as_dict=True)["7", "a"]["ts"].to_numpy(), own_ts)


def test_integer_codes_decline_nulls_and_text() -> None:
    table = _random_gpu(4, nulls=True).with_columns(pl.col("step").cast(pl.String).alias("name"))
    assert integer_codes(table, ["device"]) is None  # nulls: polars ranks them
    assert integer_codes(table, ["name"]) is None
    wide = pl.DataFrame({"a": [2**50, 1, 2**50, -(2**60)]})  # past the table of values: ranked by sorting
    codes = integer_codes(wide, ["a", "a"])
    assert codes is not None and np.array_equal(codes, [2, 1, 2, 0])


def _idle_reference(g: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """``idle_breakdown`` with polars' struct rank, a table sort and the sorting union (its form before numpy)."""
    from kernscope.analyze.idle import KERNEL_WAIT_US

    t = g.select(*keys, "ts", "end", "launch_ts").with_columns(pl.struct(keys).rank("dense").cast(pl.Int64).sub(1).alias("_code"))
    t = t.sort("_code", "ts", maintain_order=True)
    code = t["_code"].to_numpy()
    ts, en = t["ts"].to_numpy().astype(np.int64), t["end"].to_numpy().astype(np.int64)
    has_launch = t["launch_ts"].is_not_null().to_numpy()
    launch = t["launch_ts"].fill_null(0).to_numpy().astype(np.int64)
    t0 = int(min(ts.min(), en.min(), launch[has_launch].min()))
    span = int(max(ts.max(), en.max(), launch[has_launch].max()) - t0) + 2
    off = code * span - t0
    s, e = merged(ts + off, en + off)
    seg = s // span
    n = int(code.max()) + 1
    busy = np.bincount(seg, weights=(e - s).astype(float), minlength=n).astype(np.int64)
    same = seg[1:] == seg[:-1]
    gap_start, nxt = e[:-1][same], s[1:][same]
    gap = nxt - gap_start
    first = np.searchsorted(ts + off, nxt, side="left")
    late = has_launch[first] & (launch[first] + off[first] > gap_start)
    quick = ~late & has_launch[first] & (gap < KERNEL_WAIT_US * 1000)
    gc = seg[1:][same]

    def per(w: np.ndarray) -> np.ndarray:
        return np.bincount(gc, weights=np.where(w, gap, 0).astype(float), minlength=n) / 1000

    firsts = t.select(*keys, "_code").unique("_code", keep="first", maintain_order=True).sort("_code")
    c = firsts["_code"].to_numpy()
    return firsts.with_columns(pl.Series("_busy", busy[c]), pl.Series("host_wait_us", per(late)[c]),
                               pl.Series("kernel_wait_us", per(quick)[c]), pl.Series("other_idle_us", per(~late & ~quick)[c]),
                               pl.Series("host_wait_gaps", np.bincount(gc, weights=late.astype(float), minlength=n)
                                         .astype(np.int64)[c])).drop("_code")


@pytest.mark.parametrize("seed", range(4))
def test_idle_breakdown_equals_the_sorting_form(seed: int, sweeps: str) -> None:
    g = _random_gpu(seed, nulls=seed >= 2)
    keys = ["step", "device"] if seed < 2 else ["step", "stream"]  # nulls in the keys: polars ranks them
    got = idle_breakdown(g, keys)
    want = _idle_reference(g, keys)
    assert got.height == want.height > 3
    assert got.select(want.columns).equals(want.cast(got.select(want.columns).schema))
    assert got["host_wait_gaps"].sum() > 0 and got["kernel_wait_us"].sum() > 0


@pytest.mark.parametrize("seed", range(4))
def test_idle_breakdown_extent_and_counts_equal_a_group_by(seed: int, sweeps: str) -> None:
    """``span_us`` and the counts that ``launch_bound`` reads from the idle breakdown's sort equal the group-by they
    replaced, float bits included (the span's µs by polars' division); null tests count as not."""
    rng = np.random.default_rng(seed)
    g = _random_gpu(seed, nulls=seed >= 2).with_columns(
        pl.Series("kind", [("kernel", "memcpy", None)[i] for i in rng.integers(0, 3, 4000)], dtype=pl.String),
        (pl.col("ts") + 4_802_299_396_839_288).alias("ts"), (pl.col("end") + 4_802_299_396_839_288).alias("end"),
        (pl.col("launch_ts") + 4_802_299_396_839_288).alias("launch_ts"))  # epoch-like ns, as Kineto writes them
    keys = ["step", "device"] if seed < 2 else ["step", "stream"]
    got = idle_breakdown(g, keys, extent=True, counts={"kernels": pl.col("kind") == "kernel"})
    want = g.group_by(keys).agg(((pl.col("end").max() - pl.col("ts").min()) / 1000.0).alias("span_us"),
                                (pl.col("kind") == "kernel").sum().cast(pl.Int64).alias("kernels"))
    joined = got.join(want, on=keys, how="full", nulls_equal=True, suffix="_want")
    assert joined.height == got.height == want.height > 3
    assert joined["span_us"].to_list() == joined["span_us_want"].to_list()
    assert joined["kernels"].to_list() == joined["kernels_want"].to_list() and got["kernels"].sum() > 0
    plain = idle_breakdown(g, keys)
    assert got.drop("span_us", "kernels").equals(plain)  # the breakdown itself is unchanged


@pytest.mark.parametrize("seed", range(4))
def test_running_max_and_last_ended_equal_polars(seed: int) -> None:
    rng = np.random.default_rng(seed)
    g = (_random_gpu(seed).with_columns(pl.col("device").fill_null(-1), pl.col("stream").fill_null(-1))
         .sort("device", "stream", "ts", "end").with_row_index("_g").with_columns(pl.col("_g").cast(pl.Int64)))
    if seed == 3:  # a range too wide to lift the runs: each on its own
        g = g.with_columns(pl.col("end") + pl.Series(rng.integers(0, 2, g.height) * 2**61))
    want = g.with_columns(pl.col("end").cum_max().shift(1).over("device", "stream").alias("_p_end"))["_p_end"]
    dev, stream = g["device"].to_numpy(), g["stream"].to_numpy()
    first = np.ones(g.height, dtype=bool)
    first[1:] = (dev[1:] != dev[:-1]) | (stream[1:] != stream[:-1])
    got = running_max(g["end"].to_numpy(), first)
    ok = ~first
    assert np.array_equal(got[:-1][ok[1:]], want.to_numpy()[1:][ok[1:]])
    # the as-of search: the device's record that ended last at or before each start (equal ends: the later record)
    by_end = g.select("device", pl.col("end").alias("_w_end"), pl.col("_g").alias("_w")).sort("_w_end", "_w")
    ref = (g.sort("ts", "_g").join_asof(by_end, left_on="ts", right_on="_w_end", by="device", strategy="backward",
                                        check_sortedness=False).sort("_g"))
    w, w_ok = _last_ended(dev, g["ts"].to_numpy(), g["end"].to_numpy())
    assert np.array_equal(w_ok, ref["_w"].is_not_null().to_numpy())
    assert np.array_equal(w[w_ok], ref["_w"].to_numpy()[w_ok])


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("by_gpu_time", [False, True])
def test_assign_steps_equals_the_asof_join(by_gpu_time: bool, compiled: bool, monkeypatch) -> None:
    """Each GPU row's step: the window starting last at or before its launch (or start), when the key is before that
    window's end; null keys, keys before every window, keys in gaps between windows and keys in a window without an
    end or a number get none. The compiled pass (``ks_window_of``) and numpy's search agree."""
    from kernscope.link.steps import assign_steps
    from kernscope.load import native

    if compiled and native.scanner() is None:
        pytest.fail("the compiled library was not built (make install compiles src/kernscope/load/_sweep.c)")
    if not compiled:
        monkeypatch.setenv("KERNSCOPE_NO_NATIVE", "1")
    gpu = _random_gpu(7, nulls=True).drop("step")
    edges = [999, 1_000, 8_000, 9_000, 20_000, 21_000, 48_000, 50_000, 60_500, 70_000]  # on the windows' edges
    gpu = pl.concat([gpu, gpu.head(len(edges)).with_columns(pl.Series("ts", edges), pl.Series("launch_ts", edges))])
    steps = pl.DataFrame({"step": [3, 4, 5, 6, None, 8], "start": [1_000, 9_000, 20_000, 33_000, 50_000, 60_000],
                          "end": [8_000, 21_000, 30_000, 48_000, 55_000, None]})  # a gap, an overlap, no number, no end
    key = "ts" if by_gpu_time else "launch_ts"
    ref = (gpu.with_row_index("_r").filter(pl.col(key).is_not_null()).sort(key)
           .join_asof(steps.select(pl.col("start").alias("_s"), pl.col("end").alias("_e"), "step").sort("_s"),
                      left_on=key, right_on="_s", strategy="backward")
           .select("_r", pl.when(pl.col(key) < pl.col("_e")).then(pl.col("step")).alias("step")))
    want = pl.Series([None] * gpu.height, dtype=pl.Int64).scatter(ref["_r"], ref["step"])
    got = assign_steps(gpu, steps, by_gpu_time=by_gpu_time)["step"]
    assert got.equals(want.alias("step"))
    assert got.null_count() > 0 and got.n_unique() == 5  # four steps and the rows in none


def test_last_ended_over_the_whole_int64_range() -> None:
    """Times far apart (a damaged trace's) on one device or several: no lifting that overflows, no endless split."""
    ts = np.array([-(2**62), 0, 5, 2**62, 2**62 + 10], dtype=np.int64)
    end = ts + np.array([3, 5, 1, 10, 1], dtype=np.int64)
    for device in (np.zeros(5, dtype=np.int64), np.array([0, 1, 0, 1, 0], dtype=np.int64)):
        w, ok = _last_ended(device, ts, end)
        for i in range(5):  # the straightforward search: the latest end at or before my start, then the later record
            cand = [j for j in range(5) if device[j] == device[i] and end[j] <= ts[i]]
            best = max(cand, key=lambda j: (end[j], j)) if cand else None
            assert (bool(ok[i]), int(w[i]) if ok[i] else None) == (best is not None, best)


@pytest.mark.parametrize("dtype", ["categorical", "enum", "text"])
def test_event_kinds_by_code_table_equal_by_search_and_by_text(dtype: str, monkeypatch) -> None:
    """link.kinds.classify: each row's kind from its phase's and category's codes, by the compiled numbering of the
    distinct pairs, equals it through a table from code to index, the binary search that replaced, and the kind of
    each row's text (nulls, unknown categories)."""
    from kernscope.link import kinds

    rng = np.random.default_rng(4)
    n = 20_000
    ph = rng.choice(["X", "i", "s", "f", "M", "C", "B", ""], n)
    cat = rng.choice(["kernel", "cpu_op", "cuda_runtime", "python_function", "gpu_memcpy", "ac2g", "Kernel", "odd", ""], n)

    def series(values: np.ndarray) -> pl.Series:
        s = pl.Series(values.tolist())
        s = s.set(s == "", None)
        if dtype == "text":
            return s
        return s.cast(pl.Categorical if dtype == "categorical" else pl.Enum(sorted(set(values.tolist()) - {""})))

    got = kinds.classify(series(ph), series(cat))
    if dtype == "enum":  # (an Enum's codes are its own: narrow; a categorical's are the process's, wide in a long one)
        assert kinds.numbered([series(ph), series(cat)]) is not None  # (the compiled numbering ran)
    monkeypatch.setattr(kinds, "numbered", lambda *a, **k: None)
    assert got.equals(kinds.classify(series(ph), series(cat)))  # by a table of codes
    monkeypatch.setattr(kinds, "LUT_MAX_CODE", 0)  # every code through the binary search
    assert got.equals(kinds.classify(series(ph), series(cat)))
    want = [kinds.kind_of(p, c) for p, c in zip(ph.tolist(), cat.tolist())]
    assert got.cast(pl.String).to_list() == want and len(set(want)) >= 5


@pytest.mark.parametrize("seed", range(4))
def test_idle_breakdown_of_rows_in_order_reads_them_in_place(seed: int, sweeps: str, monkeypatch) -> None:
    """Rows that come sorted by group and start (a JAX profile's do) skip the sort and its gathers: the same
    breakdown, extent and counts as through the sort (its order, the identity, applied)."""
    import kernscope.analyze.idle as idle
    from kernscope.intervals import stable_order

    keys = ["step", "device"]
    g = _random_gpu(seed).with_columns(pl.col("device").fill_null(-1)).sort(*keys, "ts", maintain_order=True)
    g = g.with_columns(pl.Series("kind", np.where(np.arange(g.height) % 3 == 0, "memcpy", "kernel")))
    counts = {"kernels": pl.col("kind") == "kernel"}
    seen: list[object] = []

    def spied(key: np.ndarray) -> np.ndarray | None:
        seen.append(stable_order(key))
        return stable_order(key)

    monkeypatch.setattr(idle, "stable_order", spied)
    got = idle_breakdown(g, keys, extent=True, counts=counts)
    monkeypatch.setattr(idle, "stable_order", lambda key: np.argsort(key, kind="stable"))
    want = idle_breakdown(g, keys, extent=True, counts=counts)
    assert seen == [None] and got.height > 3 and got.equals(want)
    assert got.drop("span_us", "kernels").equals(_idle_reference(g, keys).select(got.drop("span_us", "kernels").columns))


def _step_firsts_reference(g: pl.DataFrame) -> pl.DataFrame:
    """What ``step_start_idle`` computed in polars before its numpy form."""
    g = g.sort("device", "ts", maintain_order=True).with_columns(
        pl.col("end").cum_max().shift(1).over("device").alias("_prev_end"))
    launch = [pl.col("launch_ts").first().alias("_launch")] if "launch_ts" in g.columns else []
    return (g.group_by("step", "device").agg(pl.col("ts").first().alias("_first"), pl.col("_prev_end").first(), *launch)
            .filter(pl.col("step").is_not_null()).sort("step", "device"))


@pytest.mark.parametrize("layout", ["random", "in order", "far apart", "outside steps"])
def test_step_firsts_equal_the_sort_and_window(layout: str) -> None:
    from kernscope.analyze.findings import _step_firsts

    g = _random_gpu(11).with_columns(pl.col("device").fill_null(-1)).select("step", "device", "ts", "end")
    if layout == "in order":  # the identity order: no sort at all
        g = g.sort("device", "ts", maintain_order=True)
    if layout == "far apart":  # devices too far apart in time to lay end to end on one axis
        g = g.with_columns(pl.col("ts") + pl.col("device") * 2**61, pl.col("end") + pl.col("device") * 2**61)
    if layout == "outside steps":  # records in no step (unlinked, or launched before the steps): busy, but no group
        g = g.with_columns(pl.when(pl.int_range(pl.len()) % 4 == 0).then(None).otherwise(pl.col("step")).alias("step"))
    got = _step_firsts(g).sort("step", "device")
    want = _step_firsts_reference(g)
    assert got.height == want.height > 6 and got.equals(want.select(got.columns))
    # with the launches: each first record's own (with its ties at one start, the first in row order)
    launched = g.with_columns(_random_gpu(11, nulls=True)["launch_ts"])
    got = _step_firsts(launched).sort("step", "device")
    assert got.columns[-1] == "_launch" and got.equals(_step_firsts_reference(launched).select(got.columns))
    if layout != "outside steps":
        assert got["_prev_end"].null_count() == 3  # each device's first record has none before it
    else:
        assert got["step"].null_count() == 0 and g["step"].null_count() > 10


def test_step_firsts_of_real_traces() -> None:
    from kernscope.analyze.findings import _step_firsts

    for path in REAL + [TRACES / "multirank" / "ddp4_rank0.json.gz"]:
        if not path.exists():
            pytest.skip(f"{path} not present")
        g = load(str(path)).gpu.select("step", pl.col("device").fill_null(-1), "ts", "end")  # (in a step or not)
        got = _step_firsts(g).sort("step", "device")
        assert got.height > 0 and got.equals(_step_firsts_reference(g).select(got.columns))


def test_sort_helpers_equal_numpy() -> None:
    from kernscope.analyze.critical_path import _lookup
    from kernscope.intervals import merged_at, stable_order

    rng = np.random.default_rng(5)
    x = rng.integers(0, 50, 1000)
    order = stable_order(x)
    assert order is not None and np.array_equal(order, np.argsort(x, kind="stable"))
    assert stable_order(np.sort(x)) is None and stable_order(x[:1]) is None
    # segments of sorted intervals and the first interval of each, as a search of the starts finds it
    s = np.sort(rng.integers(0, 20_000, 1000))
    e = s + rng.integers(0, 60, 1000)
    seg_s, seg_e, at = merged_at(s, e)
    want_s, want_e = merged(s, e, presorted=True)
    assert np.array_equal(seg_s, want_s) and np.array_equal(seg_e, want_e) and 50 < len(at) < 1000
    assert np.array_equal(at, np.searchsorted(s, seg_s, side="left"))
    # each step's first position in the sorted keys, by a table or (wide keys) a search
    for keys in (np.array([2, 3, 3, 5, 9, 9, 9]), np.array([-2**62, 3, 3, 2**62]), np.array([2**63 - 9, 2**63 - 2])):
        values = np.concatenate([keys, keys - 1, keys + 1, [-2**63, 2**63 - 1]])
        k, found = _lookup(keys, values)
        want = np.minimum(np.searchsorted(keys, values), len(keys) - 1)
        want_found = keys[want] == values
        assert np.array_equal(found, want_found) and np.array_equal(k[found], want[found]) and found.sum() >= len(keys)


@pytest.mark.parametrize("compiled", [True, False])
def test_search_right_equals_numpy(compiled: bool, monkeypatch) -> None:
    """``intervals.search_right`` (compiled: each search gallops from the last answer) is numpy's right-side search,
    on queries in order, nearly in order, in no order, with ties, runs of equal values and the int64 extremes."""
    from kernscope.load import native
    from kernscope.load.native import search_right

    if compiled and native.scanner() is None:
        pytest.fail("the compiled library was not built (make install compiles src/kernscope/load/_sweep.c)")
    if not compiled:
        monkeypatch.setenv("KERNSCOPE_NO_NATIVE", "1")
    rng = np.random.default_rng(11)
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    cases = []
    for n, m in ((0, 5), (5, 0), (1, 7), (40, 300), (3_000, 20_000), (20_000, 3_000)):
        for narrow in (True, False):
            hay = np.sort(rng.integers(-50, 50, n) if narrow else rng.integers(lo, hi, n, dtype=np.int64))
            q = rng.integers(-60, 60, m) if narrow else rng.integers(lo, hi, m, dtype=np.int64)
            nearly = np.sort(q)
            swap = rng.integers(0, max(m - 1, 1), m // 10)
            if m > 1:
                nearly[swap], nearly[swap + 1] = nearly[swap + 1], nearly[swap].copy()
            cases += [(hay, q), (hay, np.sort(q)), (hay, np.sort(q)[::-1].copy()), (hay, nearly),
                      (hay, np.concatenate([q, [lo, hi, lo, hi]]).astype(np.int64))]
    cases.append((np.array([lo, lo, 0, hi, hi], dtype=np.int64), np.array([hi, lo, 0, -1, 1, hi, lo], dtype=np.int64)))
    for hay, q in cases:
        assert np.array_equal(search_right(hay, q), np.searchsorted(hay, q, side="right"))


@pytest.mark.parametrize("seed", range(4))
def test_rows_by_one_integer_key_equals_polars_group_by(seed: int) -> None:
    """``kernels.rows_by`` groups by one integer a row (``intervals.row_keys``) where the keys allow it: the groups
    and their counts, sums, minima and maxima are polars' group-by of the keys themselves (nulls a group of their own),
    for categorical, enum, text, boolean and integer keys (one with values near the int64 extremes: the wide path)."""
    from kernscope.analyze.kernels import rows_by
    from kernscope.intervals import row_keys

    rng = np.random.default_rng(seed)
    n = 3000
    kinds = pl.Enum(["kernel", "memcpy", "memset"])

    def holes(values: list, share: float) -> list:
        return [None if rng.random() < share else v for v in values]

    t = pl.DataFrame({
        "name": pl.Series(holes([f"k{i}" for i in rng.integers(0, 40, n)], 0.05), dtype=pl.Categorical),
        "launcher": pl.Series(holes([f"op{i}" for i in rng.integers(0, 9, n)], 0.1)),  # text
        "kind": pl.Series(holes(["kernel", "memcpy", "memset"] * (n // 3), 0.02), dtype=kinds),
        "graph": pl.Series(holes([bool(x) for x in rng.integers(0, 2, n)], 0.1), dtype=pl.Boolean),
        "device": pl.Series(holes([int(x) for x in rng.integers(0, 3, n)], 0.05), dtype=pl.Int64),
        "stream": pl.Series([int(x) for x in rng.choice([7, 13, 40], n)], dtype=pl.Int64),
        "dur": pl.Series(holes([int(x) for x in rng.integers(0, 500, n)], 0.1), dtype=pl.Int64),
    })
    keys = ["name", "launcher", "kind", "graph", "device", "stream"]
    if seed == 3:  # a key too wide to combine: polars' group-by of the keys
        t = t.with_columns(pl.Series("stream", rng.choice([-(2**62), 0, 2**62], n)))
    want = (t.group_by(keys).agg(pl.len().alias("_rows"), pl.col("dur").count().alias("_n"), pl.col("dur").sum().alias("_sum"),
                                 pl.col("dur").min().alias("_min"), pl.col("dur").max().alias("_max")))
    got = rows_by(t, keys)
    assert got.schema == want.schema and got.height == want.height > 100
    order = [pl.col(k).cast(pl.String) for k in keys]
    assert got.sort(order, nulls_last=True).equals(want.sort(order, nulls_last=True))
    # (the categoricals' codes are global: their ranges depend on what else the process interned, so the names and
    # launchers are made enums here, whose codes this test decides)
    fixed = t.with_columns(pl.col(c).cast(pl.Enum(sorted(t[c].drop_nulls().unique().cast(pl.String).to_list())))
                           for c in ("name", "launcher"))
    one = row_keys(fixed, keys)
    assert (one is None) == (seed == 3)
    if one is not None:  # equal keys, equal numbers; different keys, different numbers
        assert pl.Series(one).n_unique() == want.height
    fast = rows_by(fixed, keys)  # (through those numbers where seed < 3)
    assert fast.with_columns(pl.col("name", "launcher").cast(pl.String)).sort(order, nulls_last=True).equals(
        want.with_columns(pl.col("name", "launcher").cast(pl.String)).sort(order, nulls_last=True))
    assert row_keys(t, ["name", "dur"]) is not None and row_keys(t.with_columns(pl.col("dur").cast(pl.Float64)), ["dur"]) is None
    # uint64 keys past int64 (hashes), even of a narrow range: not combined, and grouped by polars as they are
    hashed = t.with_columns(pl.Series("stream", rng.choice(np.array([2**63 + 5, 2**63 + 7], dtype=np.uint64), n)))
    assert row_keys(hashed, keys) is None
    assert rows_by(hashed, keys).height == hashed.group_by(keys).len().height


@pytest.mark.parametrize("share", [0.0, 0.01, 0.5, 1.0])
def test_rows_of_groups_equals_the_semi_join(share: float) -> None:
    """``findings._rows_of``: the rows whose (step, device) a group table lists, through one integer a row, are the
    rows a semi join on the two keys keeps (none, a few, half, every group; null keys match nothing, as in a join)."""
    from kernscope.analyze.findings import _rows_of
    from kernscope.intervals import group_by_keys

    g = _random_gpu(3, nulls=True).with_row_index("_r")
    groups = g.select("step", "device").unique().sort("step", "device", nulls_last=True)
    groups = groups.filter(pl.Series(np.random.default_rng(1).random(groups.height) < share) | (pl.int_range(pl.len()) == 0))
    groups = groups.head(0) if share == 0.0 else groups
    if share == 1.0:
        groups = groups.drop_nulls()  # (every group a join can match)
    if share == 0.01:  # keys g does not have: past its values (its nulls' code), below them, and nulls
        groups = pl.concat([groups, pl.DataFrame({"step": [0, -5, None, 0], "device": [3, 0, 1, None]},
                                                 schema=groups.schema)])
    got = _rows_of(g, ["step", "device"], groups).sort("_r")
    want = g.join(groups, on=["step", "device"], how="semi").sort("_r")
    assert got.equals(want) and (got.height == 0) == (share == 0.0)
    # the group-by through one integer a row: the same groups and aggregates as polars' group-by of the keys
    aggs = (pl.len().alias("n"), pl.col("ts").mean().alias("mean_ts"), pl.col("end").median().alias("median_end"))
    a = group_by_keys(g, ["step", "device", "stream"], aggs).sort("step", "device", "stream", nulls_last=True)
    b = g.group_by("step", "device", "stream").agg(*aggs).sort("step", "device", "stream", nulls_last=True)
    assert a.equals(b) and a.height > 20


@pytest.mark.parametrize("seed", range(4))
def test_looked_up_equals_the_left_join(seed: int) -> None:
    from kernscope.link.ops import looked_up

    rng = np.random.default_rng(seed)
    n, k = 20_000, 700
    table_keys = rng.choice(np.arange(-50, 3 * k), size=k, replace=False).astype(np.int64)  # negatives too
    table = pl.DataFrame({"key": table_keys, "v": pl.Series(rng.integers(0, 1 << 40, k), dtype=pl.Int64)})
    table = table.with_columns(pl.when(pl.col("v") % 7 == 0).then(None).otherwise(pl.col("v")).alias("v"))  # null values
    keys = pl.Series("key", rng.integers(-80, 3 * k + 60, n), dtype=pl.Int64)  # some outside the table's range
    keys = keys.scatter(rng.choice(n, 300, replace=False), None)
    got = looked_up(keys, table["key"], table["v"])
    want = keys.to_frame().join(table, on="key", how="left", maintain_order="left")["v"]
    assert got is not None and got.name == "v" and got.equals(want)


def test_looked_up_declines_wide_ranges_and_other_types() -> None:
    from kernscope.link.ops import DENSE_RANGE, looked_up

    keys = pl.Series([1, 2, None], dtype=pl.Int64)
    wide = pl.Series([0, DENSE_RANGE * 10], dtype=pl.Int64)  # a range over DENSE_RANGE times the rows: a join
    assert looked_up(keys, wide, pl.Series([5, 6], dtype=pl.Int64)) is None
    assert looked_up(keys.cast(pl.Int32), pl.Series([1], dtype=pl.Int32), pl.Series([5], dtype=pl.Int64)) is None
    assert looked_up(keys, pl.Series([], dtype=pl.Int64), pl.Series([], dtype=pl.Int64)) is None
    assert looked_up(keys, pl.Series([2, 1], dtype=pl.Int64), pl.Series([20, 10], dtype=pl.Int64)).to_list() == [10, 20, None]


def test_steps_in_order_are_said_sorted_and_group_the_same() -> None:
    """GPU rows all in steps and in step order (a JAX profile's) get a ``step`` column flagged sorted, so polars groups
    it in runs; rows out of order, or some in no step, are not flagged. Grouped by step, the flagged column gives the
    same sums as the same values unflagged."""
    from kernscope.link.steps import assign_steps

    steps = pl.DataFrame({"step": [7, 8, 9], "start": [0, 100, 200], "end": [100, 200, 300]})
    rng = np.random.default_rng(5)
    launch = np.sort(rng.integers(0, 300, 5_000))
    gpu = pl.DataFrame({"launch_ts": launch, "dur": rng.integers(1, 50, 5_000)})
    in_order = assign_steps(gpu, steps)["step"]
    assert in_order.flags["SORTED_ASC"] and in_order.null_count() == 0
    shuffled = assign_steps(gpu.sample(fraction=1.0, shuffle=True, seed=1), steps)["step"]
    assert not shuffled.flags["SORTED_ASC"]
    partly = assign_steps(gpu.with_columns(pl.col("launch_ts") + 50), steps)["step"]  # the last rows in no step
    assert partly.null_count() > 0 and not partly.flags["SORTED_ASC"]
    flagged = gpu.with_columns(in_order).group_by("step").agg(pl.col("dur").sum()).sort("step")
    plain = gpu.with_columns(pl.Series("step", in_order.to_list())).group_by("step").agg(pl.col("dur").sum()).sort("step")
    assert flagged.equals(plain) and flagged.height == 3
