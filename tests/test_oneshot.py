"""The one-shot command flow (``kernscope/oneshot.py``): a stored output answers without a load; a miss loads,
computes, writes the parse cache on a thread, emits and stores; an empty answer is never stored."""

from __future__ import annotations

import gzip
import os
import shutil
import threading
from pathlib import Path

import pytest

from kernscope import oneshot, pipeline
from kernscope.errors import EmptyAnswer


def _req(path, **kw):
    return oneshot.Request("analyze", str(path), {"fmt": "json"}, **kw)


EXAMPLE = Path(__file__).parents[1] / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"


def _real_load(path, loads):
    def load(digest, defer):
        loads.append(digest)
        return pipeline.load(path, digest=digest, defer_cache_write=defer)

    return load


def test_a_miss_loads_computes_emits_and_stores_then_a_hit_answers_alone(tmp_path):
    p = tmp_path / "t.json.gz"
    shutil.copy(EXAMPLE, p)
    out: list[bytes] = []
    loads: list = []
    oneshot.answer(_req(p), oneshot.Prefetch(lambda: None), _real_load(p, loads),
                   lambda t: f"{t.kernels.height} kernels".encode(), out.append)
    assert out[0].endswith(b" kernels") and int(out[0].split()[0]) == 728  # the bundled step: 728 kernels
    assert len(loads) == 1 and loads[0] is not None  # the digest of the lookup is handed to the load
    oneshot.answer(_req(p), oneshot.Prefetch(lambda: pytest.fail("a stored answer imports nothing")),
                   lambda d, w: pytest.fail("a stored answer loads nothing"), lambda t: b"", out.append)
    assert out[1] == out[0]
    # other options are another output: the load comes from the parse cache written on the thread
    oneshot.answer(oneshot.Request("analyze", str(p), {"fmt": "csv"}), oneshot.Prefetch(lambda: None), _real_load(p, loads),
                   lambda t: b"csv" if t.from_cache else b"parsed again", out.append)
    assert out[-1] == b"csv" and len(loads) == 2


def test_the_output_is_emitted_while_the_parse_cache_is_still_written(tmp_path):
    """The output does not wait for the parse-cache write (a 216 MB trace's entry takes 0.1-0.4 s): the write here
    finishes only once the output was emitted, and the command returns after both (the output is then stored)."""
    p = tmp_path / "t.json"
    p.write_bytes(b'{"traceEvents": []}' + b" " * 200_000)
    emitted = threading.Event()
    order: list[str] = []

    def load(digest, defer):
        def write():
            assert emitted.wait(10), "the output waited for the cache write"
            order.append("cache written")

        defer(write)
        return "t"

    def emit(body):
        order.append("emitted")
        emitted.set()

    oneshot.answer(_req(p), oneshot.Prefetch(lambda: None), load, lambda t: b"x", emit)
    assert order == ["emitted", "cache written"]


def test_an_empty_answer_is_emitted_but_never_stored(tmp_path):
    p = tmp_path / "t.json.gz"
    shutil.copy(EXAMPLE, p)
    out: list[bytes] = []

    def empty(t):
        raise EmptyAnswer("nothing ran on the GPU")

    for _ in range(2):
        with pytest.raises(EmptyAnswer):
            oneshot.answer(_req(p), oneshot.Prefetch(lambda: None), _real_load(p, []), lambda t: b"nothing", out.append,
                           check=empty)
    assert out == [b"nothing", b"nothing"]  # computed twice: the first was not stored


def test_no_cache_neither_reads_nor_writes(tmp_path):
    p = tmp_path / "t.json"
    p.write_bytes(b'{"traceEvents": []}' + b" " * 200_000)
    out: list[bytes] = []
    loads: list = []

    def load(digest, defer):
        loads.append(digest)
        return "t"

    for _ in range(2):
        oneshot.answer(_req(p, no_cache=True), oneshot.Prefetch(lambda: None), load, lambda t: b"x", out.append)
    assert loads == [None, None] and out == [b"x", b"x"]


def test_prefetch_hands_over_its_result_or_its_error():
    assert oneshot.Prefetch(lambda: 42).result() == 42

    def boom():
        raise ValueError("bad rules file")

    with pytest.raises(ValueError, match="bad rules file"):
        oneshot.Prefetch(boom).result()


def test_notices_are_said_once_from_any_thread():
    said: list[str] = []
    n = oneshot.Notices(said.append)
    threads = [threading.Thread(target=n, args=("kernscope: cache full",)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    n("kernscope: other")
    assert said == ["kernscope: cache full", "kernscope: other"]


def test_load_gives_the_parse_buffers_back_before_linking_and_analysis(monkeypatch):
    """#25 (peak RSS): pipeline.load returns the C heap's free pages after the parse and after linking, handing the
    trace's size as what its work freed; the call is glibc's malloc_trim where there is one, nothing elsewhere, and
    nothing under ``TRIM_MIN_BYTES`` (a small trace's pages would only be faulted in again)."""
    from pathlib import Path

    from kernscope import pipeline
    from kernscope.load import native

    calls: list[int | None] = []

    def counted(freed: int | None = None) -> None:
        calls.append(freed)
        native.trim_heap(freed)

    monkeypatch.setattr(pipeline, "trim_heap", counted)
    example = Path(__file__).resolve().parents[1] / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    t = pipeline.load(str(example), cache=False)
    inflated = len(gzip.decompress(example.read_bytes()))
    assert calls == [inflated, inflated] and t.gpu.height == 808

    trims: list[int] = []

    class Libc:
        def malloc_trim(self, pad: int) -> int:
            trims.append(pad)
            return 1

    monkeypatch.setattr(native, "_libc", lambda: Libc())
    native.trim_heap(inflated)  # 2.5 MB: left alone
    native.trim_heap(native.TRIM_MIN_BYTES - 1)
    assert trims == []
    native.trim_heap(native.TRIM_MIN_BYTES)
    native.trim_heap()  # (size unknown: trimmed)
    assert trims == [0, 0]


@pytest.mark.parametrize(("args", "decay"), [
    (["analyze", "run/host.xplane.pb"], oneshot.XSPACE_DECAY_MS),
    (["analyze", "PROFILE.XPLANE.PB.GZ", "--format", "json"], oneshot.XSPACE_DECAY_MS),
    (["analyze", "trace.json.gz"], oneshot.DECAY_MS),
    (["analyze", "trace.json", "--rules=extra.pb"], oneshot.DECAY_MS),  # an option's value is not the trace
    ([], oneshot.DECAY_MS),
])
def test_allocator_decay_follows_the_trace_class(monkeypatch, args, decay):
    """An XSpace profile's analysis gets polars' allocator a longer decay (fewer page faults); a Kineto trace keeps
    the short one its peak memory needs. (polars is already imported here: only the setting is made.)"""
    monkeypatch.delenv("_RJEM_MALLOC_CONF", raising=False)
    oneshot.tune_allocators(args)
    assert os.environ["_RJEM_MALLOC_CONF"] == f"narenas:1,dirty_decay_ms:{decay},muzzy_decay_ms:0"


def test_a_jax_run_directory_counts_as_an_xspace_profile(tmp_path):
    run = tmp_path / "logs" / "plugins" / "profile" / "2026_11_28"
    run.mkdir(parents=True)
    assert not oneshot.is_xspace_name(str(tmp_path / "logs"))
    (run / "host.xplane.pb").write_bytes(b"")
    assert all(oneshot.is_xspace_name(str(d)) for d in (run, tmp_path / "logs", tmp_path / "logs" / "plugins" / "profile"))
    assert not oneshot.is_xspace_name(str(tmp_path / "nowhere"))
