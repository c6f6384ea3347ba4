"""What the single-GPU recording scripts share (``record_inductor_kernels.py``, ``record_training_features.py``,
``record_hf_models.py``): a profiled run of a training step written as a gzipped Kineto trace, and a run of named
scenarios whose outcome (or error) lands in ``record_info.json``."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import tempfile
import traceback
from collections.abc import Callable
from typing import Any


def save_chrome_gz(prof: Any, path: str) -> str:
    """A finished profile's Kineto trace, written gzipped to ``path`` (through temporary files: never half-written)."""
    fd, tmp = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    prof.export_chrome_trace(tmp)
    with open(tmp, "rb") as src, gzip.open(path + ".tmp", "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    os.replace(path + ".tmp", path)
    os.unlink(tmp)
    return path


def profiled(step: Callable[[], Any], path: str, warmup: int = 3, steps: int = 3, sync_each: bool = True,
             **options: Any) -> str:
    """``step`` run ``warmup`` times, then ``steps`` profiled steps (one ``ProfilerStep#N`` each) after one profiler
    warm-up step, CPU and CUDA activities, ``options`` given to ``torch.profiler.profile`` (``record_shapes`` ...);
    the active steps' trace is written to ``path`` by ``on_trace_ready`` (exported after the profile ends, a trace
    holds only what ran after the last cycle). ``sync_each``: synchronize the GPU after each step."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
                 on_trace_ready=lambda p: save_chrome_gz(p, path), **options) as prof:
        for _ in range(steps + 1):
            step()
            if sync_each:
                torch.cuda.synchronize()
            prof.step()
        torch.cuda.synchronize()
    if not os.path.exists(path):
        raise RuntimeError(f"the profiler wrote no trace to {path}")
    return path


def run_all(out: str, scenarios: dict[str, Callable[[str], dict]], chosen: list[str], info: dict[str, Any],
            key: str = "scenarios", write: bool = True) -> dict[str, Any]:
    """Each chosen scenario run into ``out``: ``info[key][name]`` is its own record with ``ok``, or ``ok`` False and
    the error (a scenario the machine cannot run is recorded as such); ``info`` written to ``out/record_info.json``
    (unless ``write`` is False: the caller adds to it first)."""
    info.setdefault(key, {})
    for name in chosen:
        try:
            info[key][name] = {"ok": True, **scenarios[name](out)}
        except Exception as e:  # noqa: BLE001
            info[key][name] = {"ok": False, "error": f"{type(e).__name__}: {e}"[:2000],
                               "traceback": traceback.format_exc()[-4000:]}
        print(name, "ok" if info[key][name]["ok"] else info[key][name]["error"][:300], flush=True)
    if write:
        with open(os.path.join(out, "record_info.json"), "w") as f:
            json.dump(info, f, indent=1, sort_keys=True, default=str)
    return info
