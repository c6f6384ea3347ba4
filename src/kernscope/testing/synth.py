"""Synthesize realistic PyTorch-profiler (Kineto) traces of a chosen size.

The layout follows what PyTorch 2.x writes: metadata first, then ``traceEvents`` with
``ProfilerStep#N`` annotations, nested ``cpu_op`` events, ``cudaLaunchKernel`` runtime calls carrying
``correlation`` and ``External id``, kernels on two streams, memcpy/memset, ac2g flow pairs and a
``cudaGraphLaunch`` every few steps. Timestamps are absolute µs with 3 decimals (the hard case).
"""

from __future__ import annotations

import gzip
import json
import os
import random
from dataclasses import dataclass
from typing import IO

KERNELS = [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)", "aten::add"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", "aten::mm"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float, false>(int, float, float const*, float const*, float const*, float*, float*, float*)", "aten::native_layer_norm"),
    ("void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t> >(pytorch_flash::Flash_fwd_params)", "aten::_flash_attention_forward"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)", "aten::mean"),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "nccl:all_reduce"),
    ("triton_poi_fused__to_copy_add_mul_0", "triton_poi_fused__to_copy_add_mul_0"),
]


@dataclass
class SynthStats:
    events: int = 0
    kernels: int = 0
    kernel_ns: int = 0
    steps: int = 0
    graph_launches: int = 0


def _fmt_us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def write_trace(out: IO[str], target_bytes: int, *, seed: int = 0, pid: int = 4242, base_us: int = 1_712_195_495_000_000) -> SynthStats:
    """Write one Kineto JSON document of about ``target_bytes`` to ``out``; return exact totals."""
    rng = random.Random(seed)
    st = SynthStats()
    head = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85045870592, "numSms": 132}],
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8},
        "record_shapes": 1,
    }
    w = out.write
    w("{\n" + ",\n".join(f'  "{k}": {json.dumps(v)}' for k, v in head.items()) + ',\n  "traceEvents": [\n')
    written = 200
    t = base_us * 1000
    corr = 1000
    ext = 1
    first = True
    step = 0

    def emit(s: str) -> None:
        nonlocal first, written
        if not first:
            w(",\n")
        first = False
        w(s)
        written += len(s) + 2
        st.events += 1

    gpu_t = t
    while written < target_bytes:
        step += 1
        st.steps += 1
        step_start = t
        n_ops = 60
        t += 3_000
        step_ops: list[str] = []
        for i in range(n_ops):
            kname, opname = KERNELS[rng.randrange(len(KERNELS))]
            op_start = t
            ext += 1
            corr += 1
            launch_ts = t + 2_000 + rng.randrange(1000)
            launch_dur = 4_000 + rng.randrange(3000)
            op_end = launch_ts + launch_dur + 1_500
            child_start = t + 500
            emit(f'  {{"ph": "X", "cat": "cpu_op", "name": "{opname}", "pid": {pid}, "tid": {pid}, "ts": {_fmt_us(op_start)}, "dur": {_fmt_us(op_end - op_start)}, "args": {{"External id": {ext}, "Record function id": 0, "Sequence number": {ext}, "Fwd thread id": 0, "Input Dims": [[8, 1024, 4096], [4096, 4096]], "Input type": ["c10::BFloat16", "c10::BFloat16"], "Input Strides": [[4194304, 4096, 1], [4096, 1]], "Concrete Inputs": ["", ""]}}}}')
            emit(f'  {{"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": {pid}, "tid": {pid}, "ts": {_fmt_us(child_start)}, "dur": {_fmt_us(800)}, "args": {{"External id": {ext + 100000000}, "Record function id": 0}}}}')
            graph = (i == n_ops - 1) and step % 3 == 0
            rt_name = "cudaGraphLaunch" if graph else "cudaLaunchKernel"
            emit(f'  {{"ph": "X", "cat": "cuda_runtime", "name": "{rt_name}", "pid": {pid}, "tid": {pid}, "ts": {_fmt_us(launch_ts)}, "dur": {_fmt_us(launch_dur)}, "args": {{"External id": {ext}, "cbid": 211, "correlation": {corr}}}}}')
            emit(f'  {{"ph": "s", "id": {corr}, "pid": {pid}, "tid": {pid}, "ts": {_fmt_us(launch_ts)}, "cat": "ac2g", "name": "ac2g"}}')
            n_k = 4 if graph else 1
            if graph:
                st.graph_launches += 1
            for _ in range(n_k):
                gpu_t = max(gpu_t, launch_ts + 5_000)
                kd = 2_000 + rng.randrange(200_000)
                stream = 7 if "nccl" not in kname else 21
                emit(f'  {{"ph": "X", "cat": "kernel", "name": "{kname}", "pid": 0, "tid": {stream}, "ts": {_fmt_us(gpu_t)}, "dur": {_fmt_us(kd)}, "args": {{"External id": {ext}, "queued": 0, "device": 0, "context": 1, "stream": {stream}, "correlation": {corr}, "registers per thread": 128, "shared memory": 49152, "blocks per SM": 2.5, "warps per SM": 10.0, "grid": [330, 1, 1], "block": [256, 1, 1], "est. achieved occupancy %": 25}}}}')
                emit(f'  {{"ph": "f", "id": {corr}, "pid": 0, "tid": {stream}, "ts": {_fmt_us(gpu_t)}, "cat": "ac2g", "name": "ac2g", "bp": "e"}}')
                st.kernels += 1
                st.kernel_ns += kd
                gpu_t += kd + 1_000
            t = op_end + 1_000
            step_ops.append(opname)
        corr += 1
        ext += 1
        mt = t
        emit(f'  {{"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": {pid}, "tid": {pid}, "ts": {_fmt_us(mt)}, "dur": {_fmt_us(9_000)}, "args": {{"External id": {ext}, "cbid": 41, "correlation": {corr}}}}}')
        gpu_t = max(gpu_t, mt + 3_000)
        emit(f'  {{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "pid": 0, "tid": 7, "ts": {_fmt_us(gpu_t)}, "dur": {_fmt_us(5_000)}, "args": {{"External id": {ext}, "device": 0, "context": 1, "stream": 7, "correlation": {corr}, "bytes": 4096, "memory bandwidth (GB/s)": 0.8}}}}')
        gpu_t += 6_000
        t += 12_000
        emit(f'  {{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", "pid": {pid}, "tid": {pid}, "ts": {_fmt_us(step_start)}, "dur": {_fmt_us(t - step_start)}, "args": {{"External id": {ext + 200000000}, "Record function id": 0}}}}')
        t += 2_000
    w('\n  ],\n  "baseTimeNanoseconds": 1712195495000000000,\n  "traceName": "synthetic.json",\n  "displayTimeUnit": "ms"\n}\n')
    return st


def make_trace(path: str | os.PathLike[str], target_bytes: int, *, seed: int = 0) -> SynthStats:
    """Write a synthetic trace file (gzip if the name ends in .gz) of about ``target_bytes`` JSON."""
    p = str(path)
    with (gzip.open(p, "wt", compresslevel=1) if p.endswith(".gz") else open(p, "w")) as f:  # noqa: SIM115
        return write_trace(f, target_bytes, seed=seed)


#: the counters :func:`counters_trace` records: HTA's FLOP set and DRAM bytes
COUNTER_METRICS = tuple(f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum" for p in "dfh"
                        for op in ("add", "mul", "fma")) + ("dram__bytes_read.sum", "dram__bytes_write.sum")


def counters_trace(path: str | os.PathLike[str], kernels: list[tuple[str, str, dict[str, float]]], *,
                   extra_launches: int = 0, second_pid: bool = False) -> None:
    """Write a trace as PyTorch writes one recorded with ``profiler_metrics`` (CUPTI's range profiler, per kernel):
    per ``(kernel name, op, counters)`` a ``cpu_op`` around a ``cudaLaunchKernel`` on the host, and a
    ``cuda_profiler_range`` event named after the kernel (pid 0, tid 0, evenly spaced as Kineto writes them) with the
    counters as its args; no kernel events. ``extra_launches``: launches with no range (a count that disagrees);
    ``second_pid``: every other launch from another process."""
    events: list[dict[str, object]] = []
    t = 1_700_000_000_000_000
    for i, (_name, op, _c) in enumerate(kernels):
        pid = 4243 if second_pid and i % 2 else 4242
        events.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": pid, "tid": pid, "ts": t + 100 * i, "dur": 50,
                       "args": {"External id": i + 1}})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": pid,
                       "ts": t + 100 * i + 10, "dur": 20, "args": {"External id": i + 1, "correlation": 1000 + i}})
    for j in range(extra_launches):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, "tid": 4242,
                       "ts": t + 100 * (len(kernels) + j), "dur": 20, "args": {"correlation": 5000 + j}})
    span = 121_431
    for i, (name, _op, counters) in enumerate(kernels):
        events.append({"ph": "X", "cat": "cuda_profiler_range", "name": name, "pid": 0, "tid": 0,
                       "ts": t - 50_000 + span * i, "dur": span, "args": dict(counters)})
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9,
                                                      "computeMinor": 0}], "traceEvents": events}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f)


def queued_start_trace(path: str | os.PathLike[str], *, launch_us: float = 200.0, launch_dur_us: float = 5.0,
                       start_us: float = 2000.0, kernel_us: float = 500.0) -> None:
    """A Kineto trace of one 3,000 µs step (``ProfilerStep#1`` from 0 µs) on one GPU: its one kernel (``kernel_us``) is
    launched at ``launch_us`` by a ``cudaLaunchKernel`` of ``launch_dur_us`` and starts at ``start_us``, nothing else
    on the GPU. At the defaults the kernel waits 1,795 µs after its launch returned, behind nothing the trace holds:
    ``step_start_queued`` (:func:`kernscope.analyze.findings.step_start_idle`)."""
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0.0, "dur": 3000.0},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": launch_us,
         "dur": launch_dur_us, "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": start_us, "dur": kernel_us,
         "args": {"correlation": 1, "device": 0, "stream": 7}},
    ]
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"schemaVersion": 1, "traceEvents": events}, f)
