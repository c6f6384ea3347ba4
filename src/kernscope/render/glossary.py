"""What every column and metric means: one table, used by the terminal, the HTML report (header tooltips),
the xlsx ``definitions`` sheet and ``docs/glossary.md`` (generated: ``python -m kernscope.render.glossary``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    name: str
    unit: str
    meaning: str
    group: str = "general"


_T = [
    # -- trace facts
    Term("events", "count", "Events in the file's traceEvents array (metadata and flow events included, counters excluded); in memory's output, memory events (of the device, per device).", "trace"),
    Term("gpu_events", "count", "GPU activity records: kernels + memcpy + memset.", "trace"),
    Term("kernels", "count", "GPU kernel records (cat 'kernel'); memcpy and memset excluded.", "trace"),
    Term("kernel_time_us", "µs", "Sum of kernel durations (not a union: concurrent kernels on several streams add up).", "trace"),
    Term("devices", "ids", "GPU device ids that ran activity.", "trace"),
    Term("device_names", "", "Names of the GPUs that ran activity (from the trace's device properties), in the order of devices.", "trace"),
    Term("device", "id", "GPU device id (a finding's device; in memory's tables the allocator's device, -1 for the CPU).", "trace"),
    Term("device_type", "", "The memory event's device kind: cpu, cuda, hip (Kineto), gpu or tpu (XLA's allocators), else the allocator's name.", "memory"),
    Term("stream", "id", "GPU stream id.", "trace"),
    Term("rank", "id", "distributedInfo.rank of the trace, else the rank in the file name (rank-3, rank3, _rank3).", "trace"),
    Term("world_size", "count", "distributedInfo.world_size.", "trace"),
    Term("platform", "", "cuda or rocm, from metadata keys and runtime call names.", "trace"),
    Term("graph_launches", "count", "Distinct cudaGraphLaunch/hipGraphLaunch calls that launched kernels in the trace.", "trace"),
    Term("step_source", "", "How steps were found: ProfilerStep (ProfilerStep#N annotations), StepTraceAnnotation (JAX/TensorFlow step_num ranges), XLA module (the executions of a JAX trace's most frequent XLA module), marker:<regex> (--step-marker), auto (the repeating kernel sequence) or none.", "trace"),
    Term("salvaged_events", "count", "With --salvage: events recovered from a truncated or partly corrupt file (null otherwise).", "trace"),
    # -- steps
    Term("step", "number", "Step number (N of ProfilerStep#N, or the window's index for markers and automatic windows).", "steps"),
    Term("kind", "", "Kind of step from its marker (decode, prefill, mixed, extend...); null for ProfilerStep and automatic windows.", "steps"),
    Term("phase", "", "warmup (before the steady pattern starts), steady (the most common kernel sequence, or a full automatic window), irregular (a later step unlike the others), tail (a last, partial automatic window).", "steps"),
    Term("path", "", "The trace file's path; in annotation tables, the range's place in the tree of nested ranges (outer / inner).", "annotations"),
    Term("depth", "levels", "Nesting depth of an annotation range (0 = outermost).", "annotations"),
    Term("instances", "count", "Times the annotation range occurred (collectives: instances of the group and type).", "annotations"),
    Term("busy_us", "µs", "Union of GPU intervals, concurrent work counted once: of the work launched inside the range (annotations), or of the rank, step or stream (ranks, queues).", "annotations"),
    Term("pct_of_gpu", "%", "The range's GPU time as a share of all GPU time analysed.", "annotations"),
    Term("start_us", "µs", "Start of the step's CPU window, from the first event of the trace.", "steps"),
    Term("end_us", "µs", "End of the step's CPU window, from the first event of the trace.", "steps"),
    Term("cpu_duration_us", "µs", "Length of the step's CPU window (end − start).", "steps"),
    Term("kernel_count", "count", "Kernels launched inside the step's (or range's) CPU window (by launch time, not by when they ran).", "steps"),
    Term("gpu_event_count", "count", "GPU records (kernels, memcpy, memset) launched inside the step.", "steps"),
    Term("gpu_time_us", "µs", "Sum of durations of the GPU records (kernels, memcpy, memset) launched in the step or range (perf coverage: in the steps analysed).", "steps"),
    Term("gpu_span_us", "µs", "First start to last end of the GPU records launched in the step.", "steps"),
    # -- summaries
    Term("name", "", "The row's name as recorded: a kernel's (names longer than 4096 bytes keep their head and a hash of the whole), an op's, a step's or an annotation's.", "summaries"),
    Term("op", "", "A CPU op's name: the op a finding is about, a top-level op or user annotation on the critical path, or the innermost op around a memory event (null: none; the critical path's `(between ops)`: host time in no top-level op).", "summaries"),
    Term("kernel", "", "The kernel a finding is about (its name as recorded).", "summaries"),
    Term("launcher", "", "What launched the kernel: the innermost CPU op around its runtime launch (by External id, else by nesting on the launching thread); for graph launches, the graph launch call; '<no launch in trace>' when the launch is outside the trace.", "summaries"),
    Term("category", "", "What the kernel does (GEMM, Attention Forward, Communication, ...), from its name by the rules in analyze/rules.toml, or from its launching op when the name says nothing (see decided_by).", "summaries"),
    Term("decided_by", "", "Which signal gave the category: name (the kernel name rules), op (the launching CPU op), graph (the graph launch's op), or hlo (the XLA HLO instruction a JAX kernel was compiled from).", "summaries"),
    Term("decided_op", "", "The op that decided the category when decided_by is op, graph or hlo (a CPU op name, or an HLO instruction such as fusion.84); empty when the kernel name decided.", "summaries"),
    Term("library", "", "Who wrote the kernel (cuBLAS, cuDNN, NCCL, Triton, ATen, XLA, ...), from its name (in a JAX profile also from its HLO instruction: XLA's fusions, Pallas's calls).", "summaries"),
    Term("count", "count", "Records in the group.", "summaries"),
    Term("total_us", "µs", "Sum of durations in the group.", "summaries"),
    Term("mean_us", "µs", "Mean duration in the group.", "summaries"),
    Term("min_us", "µs", "Shortest duration in the group.", "summaries"),
    Term("max_us", "µs", "Longest duration in the group.", "summaries"),
    Term("pct", "%", "Share of the summed GPU time of the rows summarized (so rows add up to 100%).", "summaries"),
    Term("pct_wall", "%", "Group time as a share of the GPU wall span (first GPU start to last GPU end); null where there is no span.", "summaries"),
    Term("pct_of_launcher", "%", "Share of the launcher's GPU time (what dominates a graph launch).", "summaries"),
    # -- timeline
    Term("computation_time", "µs", "Union of kernels that are neither communication nor memcpy (memsets count here: they run as kernels). Every union is a device's own; with several devices the trace's and each step's timeline sum the devices' (device time).", "timeline"),
    Term("exposed_comm_time", "µs", "Communication kernels not overlapped by any computation (of a step's timeline: by any computation on its device, the step's own or another step's, as the whole trace's counts it).", "timeline"),
    Term("exposed_memcpy_time", "µs", "Memcpy not overlapped by computation or communication (of a step's timeline: by any on its device). computation + exposed comm + exposed memcpy = busy, but for a step's communication or memcpy that other steps' work hid.", "timeline"),
    Term("busy_time", "µs", "Union of all GPU activity (of each device, summed over several).", "timeline"),
    Term("other_work_time", "µs", "Of the timeline of a part of the GPU work (each step's, `analyze --step N`'s, an annotation's): the time in the part's span when a device ran other GPU work (another step's or annotation's, or work in none) and none of the part's. A GPU behind its host runs the step before's work inside a step's span; that is not idle. 0 in the whole trace's timeline.", "timeline"),
    Term("idle_time", "µs", "total_time − busy_time − other_work_time: no GPU work at all.", "timeline"),
    Term("total_time", "µs", "First GPU start to last GPU end; with several devices, that span over all of them, counted once per device (a GPU waiting while another works is idle). By default all GPU work is counted, also work queued before the profiling window (its launch is not in the trace); --linked-only counts only work launched inside the trace, as TraceLens does.", "timeline"),
    Term("total_comm_time", "µs", "Union of communication kernels.", "timeline"),
    Term("total_memcpy_time", "µs", "Union of memcpy activity.", "timeline"),
    Term("percent", "%", "Share of total_time (with several devices, their mean share).", "timeline"),
    Term("clipped_kernels", "count", "Kernels whose reported end ran past the start of the next kernel on the same stream (a ROCm timestamp artifact); they are clipped to it.", "timeline"),
    Term("time_us", "µs", "Length of the timeline quantity; in the critical path's tables, the row's time on the path; in a finding's evidence, the kernel's or op's time in the step.", "timeline"),
    # -- unlinked
    Term("gpu_without_launch", "count", "GPU records whose runtime launch is not in the trace.", "unlinked"),
    Term("gpu_without_correlation", "count", "GPU records with no correlation id.", "unlinked"),
    Term("gpu_launched_before_window", "count", "GPU records launched before the first runtime call of the trace (queued before profiling started).", "unlinked"),
    Term("launches_without_gpu", "count", "Launch/memcpy/memset runtime calls whose GPU record is missing.", "unlinked"),
    Term("launches_in_graph_capture", "count", "Of launches_without_gpu, those made while their thread was capturing a CUDA/HIP graph (between cudaStreamBeginCapture and cudaStreamEndCapture): they run nothing themselves, the graph's replays do.", "unlinked"),
    Term("launches_without_op", "count", "Launches that no CPU op encloses.", "unlinked"),
    Term("gpu_outside_steps", "count", "GPU records launched outside every step window.", "unlinked"),
    Term("gpu_in_earlier_step_runs", "count", "Of gpu_outside_steps, those launched in an earlier run of a step's ProfilerStep#N annotation (PyTorch Lightning opens ProfilerStep#2 before ProfilerStep#1 and again after it; the step is the last run).", "unlinked"),
    Term("flows_without_end", "count", "Flow starts (ph s) with no finish.", "unlinked"),
    # -- bench view
    Term("flush_kernels", "", "Kernels of the L2 flush at the start of the profiled step (kernscope::l2_flush annotation, or the leading fill/zero op).", "bench"),
    Term("compute_kernels", "", "Kernels of the profiled step after the flush.", "bench"),
    Term("cpu_step_us", "µs", "The profiled step's CPU window.", "bench"),
    Term("warmup_kernels_in_window", "count", "Kernels of earlier iterations that ran during the profiled step.", "bench"),
    Term("latency_ms", "ms", "Median of the timed calls (CUDA events around each call, L2 flushed before each).", "bench"),
    Term("ci_low_ms", "ms", "Lower end of the 95% bootstrap confidence interval of the median latency.", "bench"),
    Term("ci_high_ms", "ms", "Upper end of the 95% bootstrap confidence interval of the median latency.", "bench"),
    # -- perf model
    Term("op_class", "", "Perf-model class of the op (TraceLens's sheet names): GEMM, CONV_fwd/bwd, SDPA_fwd/bwd, Unary/Binary/TernaryElementwise, Normalization, Reduce_fwd, Softmax, Embedding, Pooling, Optimizer, Copy.", "perf"),
    Term("input_dims", "", "The op's recorded Input Dims (record_shapes=True), as JSON.", "perf"),
    Term("input_type", "", "The op's recorded Input type (element types), as JSON.", "perf"),
    Term("concrete_inputs", "", "The op's recorded Concrete Inputs (scalar arguments as text), as JSON.", "perf"),
    Term("dtype", "", "Precision of the operand that sets the peak (bf16, fp32, fp8, ...).", "perf"),
    Term("mean_time_us", "µs", "Mean GPU time per call (kernels launched inside the op, its subtree included).", "perf"),
    Term("median_time_us", "µs", "Median GPU time per call.", "perf"),
    Term("min_time_us", "µs", "Shortest GPU time of a call.", "perf"),
    Term("max_time_us", "µs", "Longest GPU time of a call.", "perf"),
    Term("flops", "FLOP", "Floating-point operations of one call from the closed form for the op (a multiply-add counts 2).", "perf"),
    Term("bytes", "B", "Bytes one call moves: every input read once, every output written once (an out= tensor is the output). Rates over 100% of the bandwidth on small tensors mean operands came from L2.", "perf"),
    Term("arithmetic_intensity", "FLOP/B", "flops / bytes: where the op sits on the roofline's x axis.", "perf"),
    Term("tflops_per_s", "TFLOP/s", "Achieved: flops x calls / kernel time.", "perf"),
    Term("tb_per_s", "TB/s", "Achieved: bytes x calls / kernel time.", "perf"),
    Term("peak_tflops", "TFLOP/s", "The device's dense peak for the op's precision (peak_precision) and unit (matrix or vector).", "perf"),
    Term("peak_tb_per_s", "TB/s", "The device's memory bandwidth.", "perf"),
    Term("peak_precision", "", "The precision whose FLOP peak rates the op. Matrix ops: the one their GEMMs ran in: the inputs' type, bf16/fp16 where an fp32 op's inner GEMMs ran under autocast, tf32 where fp32 GEMM kernels ran on TF32 tensor cores (a TF32 kernel by name, or faster than the fp32 peak allows). Vector ops: fp32 (fp64 for double). Empty for pure data movement (rated on the bandwidth).", "perf"),
    Term("pct_of_peak", "%", "Achieved rate as a share of the roofline at the op's arithmetic intensity: of the FLOP peak when compute-bound, of the bandwidth when memory-bound.", "perf"),
    Term("bound", "", "compute when the arithmetic intensity is at or above the device's ridge point (peak FLOP/s / bandwidth), else memory; link for a copy between two GPUs or between the host and a GPU (its bandwidth is the link's: NVLink, PCIe; not in the peaks table: no % of peak).", "perf"),
    Term("nested", "", "The op contains another modeled op (aten::linear around aten::addmm): its time is also counted there, so totals skip it.", "perf"),
    Term("params", "", "The model's parameters for the call (M, N, K, B for a GEMM; B and MNK, the product of its three sizes, for a torch.compile template GEMM, whose roles the profile does not tell; template: true; shapes for others; a cast's source type as from, or its result's as to; a JAX op's module, and its program where programs share the module's name), as JSON.", "perf"),
    Term("example_idx", "index", "Position in traceEvents of one call with these arguments.", "perf"),
    Term("calls", "count", "Op calls in the group.", "perf"),
    Term("pct_of_modeled", "%", "Share of the GPU time of all modeled (innermost) ops.", "perf"),
    Term("gflops", "GFLOP", "Total FLOPs of the group (10^9).", "perf"),
    Term("data_moved_mb", "MiB", "Total bytes moved by the group (2^20 bytes, as TraceLens).", "perf"),
    Term("reason", "", "Why the model could not use an op: no shapes recorded, tensor-list shapes not recorded, shapes outside physical bounds, or the model's own reason (not a 2-D or 3-D GEMM, shapes that do not broadcast ...).", "perf"),
    Term("op_name", "", "The launching CPU op of GPU work outside every modeled op.", "perf"),
    # -- diff
    Term("a_count", "count", "Occurrences in A (the first trace or step).", "diff"),
    Term("b_count", "count", "Occurrences in B.", "diff"),
    Term("a_us", "µs", "Summed time in A (GPU time for kernels and categories; host time for CPU ops).", "diff"),
    Term("b_us", "µs", "Summed time in B.", "diff"),
    Term("delta_us", "µs", "b_us − a_us: positive when B spends more.", "diff"),
    Term("a_gpu_us", "µs", "GPU time of the kernels the op launched in A.", "diff"),
    Term("b_gpu_us", "µs", "GPU time of the kernels the op launched in B.", "diff"),
    Term("only", "", "a or b when the row exists on one side only; empty when on both.", "diff"),
    Term("variants", "count", "Distinct raw kernel names merged into the row by --match loose.", "diff"),
    # -- many ranks
    Term("compute_us", "µs", "Union of kernels that are not communication (memcpy/memset records excluded).", "ranks"),
    Term("comm_us", "µs", "Union of communication kernels (NCCL, RCCL, ...).", "ranks"),
    Term("exposed_comm_us", "µs", "Communication not overlapped by compute (a step's: by any compute on its GPU, another step's too).", "ranks"),
    Term("overlap_pct", "%", "100 x |comm ∩ compute| / |comm|: the share of communication hidden under compute (HTA's definition).", "ranks"),
    Term("span_us", "µs", "First GPU start to last GPU end (in queues: of the stream); a rank with several devices counts it once per device (device time, its unions each device's own).", "ranks"),
    Term("other_work_us", "µs", "Of a rank's step (rank_steps): the time in the step's span when the GPU ran only other steps' work, or work in no step (a GPU behind its host runs the step before's work there; not idle). 0 for the rank overall and per stream.", "ranks"),
    Term("idle_us", "µs", "span_us − busy_us − other_work_us: no GPU activity at all (in queues: none on the stream, HTA's idle time "
         "breakdown per stream). kernscope counts every profiled step and all GPU work; HTA's temporal and idle "
         "breakdowns leave out the last ProfilerStep and kernels launched before the trace, so they report less: on "
         "the FSDP job's straggler (fsdp4_rank2) HTA says 88.3 ms idle over steps 2-4, kernscope 109.8 ms over "
         "steps 2-5 (rank_steps: 84.1 ms in steps 2-4, 23.2 ms in step 5).", "ranks"),
    Term("host_wait_us", "µs", "Idle gaps ended by a record launched after the GPU went idle (the CPU was late). A step's gaps count only their idle part: the other work in them is other_work_us.", "ranks"),
    Term("kernel_wait_us", "µs", "Idle gaps under 10 µs before a record launched in time (back-to-back launch overhead).", "ranks"),
    Term("other_idle_us", "µs", "The other idle gaps (waits on events, other streams, syncs).", "ranks"),
    Term("wall_us", "µs", "The step's CPU window (ProfilerStep annotation).", "ranks"),
    Term("launch_delay_p50_us", "µs", "Median time from the CPU launch call's start to the kernel's start.", "ranks"),
    Term("launch_delay_p99_us", "µs", "99th percentile of the launch → start delay.", "ranks"),
    Term("max_queue", "count", "Most kernels launched and not yet finished on one stream.", "ranks"),
    Term("mean_queue", "count", "Time-weighted mean of the stream's queue length.", "ranks"),
    Term("pct_time_empty", "%", "Share of the stream's time with nothing queued.", "ranks"),
    Term("launches", "count", "Kernel launches on the stream.", "ranks"),
    Term("pg", "", "Process group of the collective (Process Group Name, else its description).", "ranks"),
    Term("type", "", "In timelines, the time type (computation, communication, memcpy, memset, idle kinds ...); in collectives, the collective type (allreduce, allgather, reduce_scatter, alltoall, broadcast, send, recv, ...).", "ranks"),
    Term("key", "", "The instance's matching key within its group: Seq when recorded, else its position in the step.", "ranks"),
    Term("ranks", "count", "Ranks on which the collective instance was found.", "ranks"),
    Term("last_arriver_wait_us", "µs", "The part of the rank's critical path spent in collectives waiting for the rank that arrived last (a part of gpu_us and carryover_us, not a further segment).", "critical path"),
    Term("problem", "", "Why the rank's file could not be analyzed (the message kernscope gives for it alone).", "ranks"),
    Term("expected_ranks", "count", "The group's size (Group size), else the number of ranks analysed.", "ranks"),
    Term("skew_us", "µs", "Last start − first start of the instance across ranks (arrival skew).", "ranks"),
    Term("max_wait_us", "µs", "The longest wait of one rank (for an instance, or for a step's straggler).", "ranks"),
    Term("last_rank", "rank", "The rank that started the collective last (the others waited for it).", "ranks"),
    Term("transfer_us", "µs", "The last arriver's kernel time: the transfer without waiting.", "ranks"),
    Term("algbw_gb_s", "GB/s", "bytes / transfer time (NCCL-tests' algorithm bandwidth).", "ranks"),
    Term("busbw_gb_s", "GB/s", "algbw x 2(n−1)/n for all-reduce, (n−1)/n for all-gather, reduce-scatter, all-to-all, else 1 (NCCL-tests' bus bandwidth).", "ranks"),
    Term("algo", "", "NCCL algorithm from the kernel name (RING, TREE, NVLS, ...).", "ranks"),
    Term("protocol", "", "NCCL protocol from the kernel name (LL, LL128, SIMPLE).", "ranks"),
    Term("size_mismatch", "", "The ranks of the instance recorded different message sizes.", "ranks"),
    Term("start_ns", "ns", "First start of the instance on the trace clock.", "ranks"),
    Term("wait_us", "µs", "For a rank and instance: last start − its start. For a straggler: the wait it caused per other rank, summed over the step's collectives.", "ranks"),
    Term("total_wait_us", "µs", "All ranks' waits the straggler caused in the step.", "ranks"),
    Term("last_in", "count", "Collectives of the step in which the straggler arrived last.", "ranks"),
    Term("p2p", "count", "Collective instances of the step that are point-to-point transfers (send, recv and batches of them: type sendrecv).", "ranks"),
    Term("collectives", "count", "Collective instances in the step.", "ranks"),
    Term("step_number", "number", "N of ProfilerStep#N.", "ranks"),
    Term("skew_mean_us", "µs", "Mean arrival skew of the group and type.", "ranks"),
    Term("skew_max_us", "µs", "Largest arrival skew of the group and type.", "ranks"),
    Term("wait_mean_us", "µs", "Mean of the instances' longest waits.", "ranks"),
    Term("most_often_last", "rank", "The rank that arrived last most often.", "ranks"),
    # JAX/XLA profiles: columns of the GPU table (Trace.gpu) read from the XSpace (see docs/jax.md)
    Term("hlo_op", "", "JAX: the HLO instruction a GPU event belongs to (its hlo_op stat): a fusion, a custom call, or the XLA command buffer that ran it; the kernel's launcher.", "jax"),
    Term("hlo_module", "", "JAX: the XLA module (jit-compiled program) the kernel belongs to, e.g. jit_train_step.", "jax"),
    Term("op_path", "", "JAX: the JAX op the kernel comes from (its name stat, or the HLO instruction's op_name), e.g. jit(train_step)/jvp()/dot_general.", "jax"),
    Term("hlo_instruction", "", "JAX: the HLO instruction the kernel runs (named like the kernel: fusion.84 runs as fusion_84), when the profile's HLO names it.", "jax"),
    Term("hlo_desc", "", "JAX: what that instruction computes, for the category rules: hlo:<opcode>:<fusion kind>:<fused opcodes> or hlo:custom-call:<target>.", "jax"),
    Term("hlo_source", "", "JAX: the line of the program's source (path:line) the kernel's HLO instruction was traced from: the innermost frame of the user's code, a frame in an installed package giving way to its caller; empty for XLA's copies and the ops XLA added.", "jax"),
    Term("hlo_function", "", "JAX: the function of that line (its qualified name, e.g. transformer_setup.<locals>.layer); empty where the profile names none (older JAX).", "jax"),
    Term("hlo_flops", "FLOP", "JAX: floating-point operations of one run of the instruction (its matrix products; 0 for other fusions), from the HLO shapes.", "jax"),
    Term("hlo_bytes", "bytes", "JAX: bytes of the instruction's operands and results; empty where it touches only part of a buffer (a slice, dynamic update, gather, scatter).", "jax"),
    Term("cuda_graph_id", "", "JAX: the CUDA graph (XLA command buffer) that ran the kernel.", "jax"),
    Term("grid_x", "", "JAX: the kernel's grid (grid_x/y/z) and block (block_x/y/z) sizes, from kernel_details.", "jax"),
    Term("registers", "", "JAX: registers per thread of the kernel (kernel_details regs).", "jax"),
    Term("dynamic_shared", "bytes", "JAX: dynamic shared memory per block (kernel_details; AMD: group_mem); static_shared likewise.", "jax"),
    Term("occupancy_pct", "%", "The kernel's occupancy as its profiler records it: Kineto's estimated achieved occupancy (est. achieved occupancy %, whole percents); in JAX profiles the theoretical occupancy XLA's profiler computed.", "jax"),
    Term("step_num", "", "JAX/TensorFlow: the step number of a StepTraceAnnotation range (steps are named <name>#<step_num>).", "jax"),
    # -- findings (kernscope/analyze/findings.toml)
    Term("rule", "", "The findings rule that fired: launch_bound, step_start_idle, step_start_wait, step_start_queued, blocking_sync, exposed_comm, tiny_gemm, step_variance, recompile, graph_capture, host_callback, autotune, low_occupancy, far_from_roofline, straggler.", "findings"),
    Term("title", "", "The rule's title (from findings.toml).", "findings"),
    Term("win_back_us", "µs", "Time the step could save if the finding's cause were removed (upper bounds say so in the text); findings are ranked by it.", "findings"),
    Term("text", "", "The finding in words: where and how much, written from its evidence with the rule's sentence.", "findings"),
    Term("evidence", "", "The numbers behind the finding (an object; units in the key names).", "findings"),
    Term("occurrences", "count", "findings_by_kind: findings of the kind (the same rule in the same place: device, rank, op, kernel), one per step it fired in; its total_us adds up their win back over steps.", "findings"),
    Term("worst_us", "µs", "findings_by_kind: the win back of the kind's worst instance (its step, title and text are that instance's); kinds are ranked by it.", "findings"),
    Term("median_us", "µs", "findings_by_kind: the median win back of the kind's instances.", "findings"),
    Term("schema_version", "", "Version of the JSON output's contract (docs/schema/*.schema.json): minor grows with added fields, major when one is removed or changes meaning.", "findings"),
    # -- critical path (per step)
    Term("step_us", "µs", "The step's time: from its start to the next step's start (the last step: to its end or its GPU work's end, whichever is later).", "critical path"),
    Term("length_us", "µs", "Length of the critical path: the sum of its segments, equal to step_us (the path covers the step once).", "critical path"),
    Term("cpu_us", "µs", "Critical-path time on the host: ops, Python and launch calls before the GPU work that followed waited for them.", "critical path"),
    Term("launch_us", "µs", "Critical-path time from a launch call's start to its kernel's start, for kernels launched after their stream ran dry.", "critical path"),
    Term("gpu_us", "µs", "Kernel, memcpy and memset time on the critical path of the records launched in the step (each counted in full); earlier steps' records are carryover_us.", "critical path"),
    Term("queue_us", "µs", "Short gaps (under 2 µs) between a record and the one it was queued behind on its stream.", "critical path"),
    Term("stream_wait_us", "µs", "Critical-path time a record waited for work on another stream (events, cross-stream dependencies) or another GPU (a peer copy, in one process driving several).", "critical path"),
    Term("sync_return_us", "µs", "Time from the end of the GPU work a synchronizing call waited for to the call's return.", "critical path"),
    Term("carryover_us", "µs", "Critical-path time on GPU work launched before the step (still queued or running when it began): those records' time on the path and the wait before the first of them started.", "critical path"),
    Term("host_us", "µs", "Host time on the critical path that overlaps this top-level CPU op or user annotation (not the step's own) of the step's thread ((between ops): in none, e.g. Python between ops).", "critical path"),
    Term("change", "", "A what-if on the critical path: a category's kernels 2x faster, or a synchronizing call removed.", "critical path"),
    Term("saves_us", "µs", "First-order saving of the change (valid while the path stays critical): half the category's path time, or the smaller of a sync's wait and the host time after it.", "critical path"),
    # -- memory (kernscope memory: profile_memory traces)
    Term("peak_allocated", "bytes", "The largest Total Allocated of the device's [memory] events (in the per-step table: of the step, or allocated_at_start where the step began higher, its first event a free).", "memory"),
    Term("peak_reserved", "bytes", "The largest Total Reserved (the caching allocator's segments) of the device's [memory] events; empty for the CPU, whose allocator keeps no reserve (its events say 0), and for XLA's allocators (not reported).", "memory"),
    Term("peak_at_ns", "ns", "When the peak was reached, since the trace's first event.", "memory"),
    Term("peak_op", "", "The innermost CPU op around the allocation that reached the peak, on its thread.", "memory"),
    Term("peak_step", "number", "The step in which the peak was reached.", "memory"),
    Term("allocated_at_start", "bytes", "Allocated bytes just before the step's first memory event.", "memory"),
    Term("allocated_at_end", "bytes", "Allocated bytes after the last memory event (of the step, or of the trace).", "memory"),
    Term("growth", "bytes", "allocated_at_end - allocated_at_start of a step: memory the step kept (a leak grows it every step).", "memory"),
    Term("allocations", "count", "Allocations the op made (Bytes > 0).", "memory"),
    Term("allocated_bytes", "bytes", "Bytes the op allocated.", "memory"),
    # -- annotate (the user's code with each line's GPU time)
    Term("file", "", "A file of the user's code, as the profile names it (JAX: the path on the machine that recorded it; PyTorch: relative to its package or script).", "annotate"),
    Term("line", "number", "A line of the file (1-based): JAX, the line an HLO op was traced from; PyTorch, a function's first line (the Python tracer's frame).", "annotate"),
    Term("code", "", "The line's text in the file as found here, stripped; null where the file was not found.", "annotate"),
    Term("matches", "", "Whether the line lies in its function in the file as found (Python's ast): false where the file was edited since the profile was recorded; null where not checked (no file, no function name).", "annotate"),
    Term("scope", "", "The qualified name of the function around the line in the file as found (Python's __qualname__ from its ast: Block.forward where PyTorch's tracer names forward; a nested function setup.<locals>.layer, as JAX names it); null where the file was not found or the line is at module level.", "annotate"),
    Term("found", "", "The file read for the code: under a --root folder, where the profile says, under the current folder, or in an installed package; null: not found.", "annotate"),
    Term("changed", "", "Whether a line of the file is not in its function there (the file was edited since the profile was recorded: its code may not match); null where nothing was checked.", "annotate"),
    Term("lines", "count", "Lines of the file with GPU time.", "annotate"),
    Term("no_line_us", "µs", "GPU time of the records with no line of the user's code (XLA's copies and memsets, ops XLA added; PyTorch launches under no frame of the user's).", "annotate"),
    Term("no_line_pct", "%", "no_line_us as a share of the GPU time.", "annotate"),
    Term("framework", "", "jax (lines from the HLO) or pytorch (functions from the Python stacks).", "annotate"),
    # -- counters (kernscope counters: CUPTI's range profiler)
    Term("seq", "number", "The kernel's place in launch order (0-based): the i-th counter range is the i-th kernel launch.", "counters"),
    Term("top_op", "", "The outermost CPU op around the kernel's launch (aten::conv2d around aten::cudnn_convolution); null where not matched.", "counters"),
    Term("flops_fp64", "FLOP", "Double-precision FLOPs from the SASS counters: dadd + dmul + 2 × dfma thread instructions (Nsight Compute's roofline count).", "counters"),
    Term("flops_fp32", "FLOP", "Single-precision FLOPs from the SASS counters: fadd + fmul + 2 × ffma thread instructions (tensor-core work is not in them).", "counters"),
    Term("flops_fp16", "FLOP", "Half-precision FLOPs from the SASS counters: hadd + hmul + 2 × hfma thread instructions.", "counters"),
    Term("dram_bytes", "bytes", "DRAM bytes read and written (dram__bytes_read.sum + dram__bytes_write.sum).", "counters"),
    Term("flops_per_byte", "FLOP/byte", "flops / dram_bytes: the arithmetic intensity the counters measured (null without DRAM traffic).", "counters"),
    Term("metric", "", "A hardware counter's name, as CUPTI and Nsight Compute name it.", "counters"),
    Term("kernels_profiled", "count", "Kernels the range profiler recorded (its cuda_profiler_range events).", "counters"),
    Term("linked", "", "Whether the ranges were matched to their kernel launches (as many launches as ranges, from one process).", "counters"),
    Term("derived", "", "The derived columns the recorded counters allow (flops_fp64, ..., dram_bytes, flops_per_byte).", "counters"),
    *[Term(f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum", "count",
           f"Hardware counter: {what} {verb} thread instructions executed (predicated on), summed over the SM sub-partitions.", "counters")
      for p, what in (("d", "double-precision"), ("f", "single-precision"), ("h", "half-precision"))
      for op, verb in (("add", "add"), ("mul", "multiply"), ("fma", "fused multiply-add"))],
    Term("dram__bytes_read.sum", "bytes", "Hardware counter: bytes read from DRAM.", "counters"),
    Term("dram__bytes_write.sum", "bytes", "Hardware counter: bytes written to DRAM.", "counters"),
    Term("frees", "count", "Frees made inside the op (Bytes < 0).", "memory"),
    Term("freed_bytes", "bytes", "Bytes freed inside the op.", "memory"),
    Term("mean_lifetime_us", "µs", "Mean time from an allocation of the op to the free of the same block (blocks freed in the trace).", "memory"),
    Term("held_blocks", "count", "Blocks the op allocated and the trace never freed.", "memory"),
    Term("held_bytes", "bytes", "Bytes of held_blocks.", "memory"),
]

TERMS: dict[str, Term] = {t.name: t for t in _T}

#: the JSON outputs' tables and objects, and the fields whose meaning there differs from their glossary term, by
#: place (``output.table.field``; a table's rows are its place): the descriptions of docs/schema/*.schema.json
_P = [
    # -- analyze (one trace)
    Term("analyze.trace", "", "Facts of the trace file: events, GPU records, devices, rank, platform, steps found.", "analyze"),
    Term("analyze.steps", "", "Per step: its CPU window and the GPU work launched in it.", "analyze"),
    Term("analyze.kernels", "", "Per (kernel name, launching op, category): count and durations of the analysed GPU records.", "analyze"),
    Term("analyze.categories", "", "Per kernel category: count and durations.", "analyze"),
    Term("analyze.libraries", "", "Per library (who wrote the kernel: cuBLAS, NCCL, Triton, XLA, ...): count and durations of its GPU records.", "analyze"),
    Term("analyze.libraries.kernels", "count", "Distinct kernel names of the library (memcpy and memset excluded).", "analyze"),
    Term("analyze.sources", "", "JAX/XLA profiles, and PyTorch traces with --sources: per line of the user's code (and its function), count and durations of the GPU records that came from it; one row with a null source holds the records without a line.", "analyze"),
    Term("analyze.sources.source", "", "The line, path:line: JAX, where the kernel's HLO instruction was traced (hlo_source); PyTorch, the first line of the user's function the launch was made in (the Python tracer's frame name), for a backward kernel its forward op's. Null: no line (XLA's copies and memsets, ops XLA added; PyTorch launches under no frame of the user's).", "analyze"),
    Term("analyze.sources.function", "", "The function of the line (hlo_function): its qualified name; null where the profile names none (older JAX). PyTorch: a backward kernel's row says so, 'forward (backward)': the backward of the ops that function ran.", "analyze"),
    Term("analyze.sources.kernels", "count", "Distinct kernel names of the line (memcpy and memset excluded).", "analyze"),
    Term("analyze.sources.top_kernel", "", "The kernel of the line that took the most GPU time.", "analyze"),
    Term("analyze.ops", "", "Per launching CPU op (launcher): count and durations of the GPU work it launched.", "analyze"),
    Term("analyze.launcher_categories", "", "Per (launching op, category): the op's GPU time by category.", "analyze"),
    Term("analyze.timeline", "", "GPU time by type (computation, communication, memcpy, memset, idle kinds), HTA's temporal breakdown; with several devices, device time summed over them.", "analyze"),
    Term("analyze.timeline_by_device", "", "The timeline of each device, each over the span of all the trace's GPU work.", "analyze"),
    Term("analyze.unlinked", "", "Counts of what the link could not connect (GPU records without a launch, launches without GPU work, flows without an end ...).", "analyze"),
    Term("analyze.findings", "", "Ranked findings: what limits a step and the time fixing it could win back, one per rule, place and step.", "analyze"),
    Term("analyze.findings.evidence", "", "The numbers behind the finding's text (its keys depend on the rule; units in the key names).", "analyze"),
    Term("analyze.findings.evidence.wait_us", "µs", "launch_bound: GPU idle time waiting for the host's launches in the step; step_start_wait: from the launch of the device's first work in the step to its start; step_start_queued: from the return of the call that launched it to its start.", "analyze"),
    Term("analyze.findings.evidence.share_pct", "%", "The finding's time as a share of its step: of the GPU's span in it (launch_bound, exposed_comm), of the step's time (step_start_idle, step_start_wait, step_start_queued, low_occupancy).", "analyze"),
    Term("analyze.findings.evidence.gaps", "count", "launch_bound: idle gaps the host's launches ended.", "analyze"),
    Term("analyze.findings.evidence.kernels", "count", "launch_bound: kernels of the step on the device.", "analyze"),
    Term("analyze.findings.evidence.median_kernel_us", "µs", "launch_bound: median kernel duration in the step.", "analyze"),
    Term("analyze.findings.evidence.median_lead_us", "µs", "launch_bound: median time from a launch call's start to its kernel's start.", "analyze"),
    Term("analyze.findings.evidence.longest_gap_us", "µs", "launch_bound: the longest of the step's idle gaps that a late launch ended (where the host was the longest behind).", "analyze"),
    Term("analyze.findings.evidence.longest_gap_at_us", "µs", "launch_bound: where that gap began, from the start of the step's first GPU work on the device.", "analyze"),
    Term("analyze.findings.evidence.longest_gap_kernel", "", "launch_bound: the GPU record that ended that gap (the first work after it).", "analyze"),
    Term("analyze.findings.evidence.longest_gap_op", "", "launch_bound: the CPU op that launched that record (its launch call where no op encloses it, as every table's launcher); the host's work before it is what to look at.", "analyze"),
    Term("analyze.findings.evidence.call", "", "blocking_sync: the synchronizing runtime call (cudaDeviceSynchronize, cudaStreamSynchronize, ...).", "analyze"),
    Term("analyze.findings.evidence.count", "count", "The calls (blocking_sync) or kernels (tiny_gemm, low_occupancy) behind the finding in the step.", "analyze"),
    Term("analyze.findings.evidence.total_us", "µs", "blocking_sync: the calls' total time in the step.", "analyze"),
    Term("analyze.findings.evidence.idle_us", "µs", "step_start_idle: GPU idle time from the step's start (or the end of the work still running then) to its first GPU work (to that work's launch, where step_start_wait takes the rest; to its launch call's return, where step_start_queued does).", "analyze"),
    Term("analyze.findings.evidence.host_op", "", "step_start_idle: the host event (CPU op or user annotation) that held most of the idle start on the thread that launched the step's first GPU work (a DataLoader's __next__: the input pipeline), where it held at least half; absent otherwise.", "analyze"),
    Term("analyze.findings.evidence.host_op_us", "µs", "step_start_idle: the part of the idle start spent in host_op.", "analyze"),
    Term("analyze.findings.evidence.launched_us", "µs", "step_start_wait, step_start_queued: when the device's first work of the step was launched, from the step's start.", "analyze"),
    Term("analyze.findings.evidence.returned_us", "µs", "step_start_queued: when the call that launched the device's first work of the step returned, from the step's start.", "analyze"),
    Term("analyze.findings.evidence.waited_for", "", "step_start_wait: the record of another GPU that last ended during the wait (the waiting GPU was idle), in words: its name, GPU and stream.", "analyze"),
    Term("analyze.findings.evidence.exposed_us", "µs", "exposed_comm: communication not overlapped by compute in the step.", "analyze"),
    Term("analyze.findings_by_kind", "", "The findings gathered by kind (the same rule in the same place over steps), ranked by their worst instance.", "analyze"),
    Term("analyze.findings_by_kind.total_us", "µs", "The kind's win back summed over its steps.", "analyze"),
    Term("analyze.critical_path", "", "The critical path of each step (the chain of host and GPU work that sets its length) and its breakdowns.", "analyze"),
    Term("analyze.critical_path.steps", "", "Per step: the path's length and its segments (they add up to length_us).", "analyze"),
    Term("analyze.critical_path.categories", "", "Per (step, kernel category): GPU time on the path (carried-over records included: gpu_us plus their part of carryover_us).", "analyze"),
    Term("analyze.critical_path.kernels", "", "Per (step, kernel, launching op): records and GPU time on the path; a step's 10 longest, then one row '(N other kernels)' (null category and launcher) with the others' records and time.", "analyze"),
    Term("analyze.critical_path.ops", "", "Per (step, top-level CPU op or user annotation): host time on the path.", "analyze"),
    Term("analyze.critical_path.whatif", "", "Per (step, change): first-order savings of making a category faster or removing a sync.", "analyze"),
    Term("analyze.critical_path.notes", "", "What the path could not see or assumed, in words.", "analyze"),
    Term("analyze.annotations", "", "Per annotation range (--by-annotation): instances and the GPU work launched inside it.", "analyze"),
    Term("analyze.annotation_categories", "", "Per (annotation range, kernel category): count and GPU time.", "analyze"),
    Term("analyze.annotation_timeline", "", "Per annotation range: GPU time by type, as analyze.timeline.", "analyze"),
    # -- analyze of a job (several ranks)
    Term("job.ranks", "", "Per rank: its file and its GPU time split into compute, communication and idle kinds.", "job"),
    Term("job.ranks.steps", "count", "Steps found in the rank's trace.", "job"),
    Term("job.rank_steps", "", "Per (rank, step): as ranks, for the step.", "job"),
    Term("job.rank_steps.name", "", "The step's annotation (ProfilerStep#N).", "job"),
    Term("job.stragglers", "", "Per step: the rank the others waited for most at the collectives.", "job"),
    Term("job.stragglers.step", "", "The step's name (its number: step_number).", "job"),
    Term("job.findings", "", "Ranked findings of the job (stragglers, ...), as analyze.findings.", "job"),
    Term("job.findings.evidence", "", "The numbers behind the finding's text (straggler: the step, the late rank, the waits it caused).", "job"),
    Term("job.findings_by_kind", "", "The job's findings by kind, as analyze.findings_by_kind.", "job"),
    Term("job.findings_by_kind.total_us", "µs", "The kind's win back summed over its steps.", "job"),
    Term("job.critical_path", "", "Per (rank, step): the rank's critical path, as analyze.critical_path.steps, and the time it waited for the last rank.", "job"),
    Term("job.collectives", "", "Per (process group, collective type): instances matched across ranks, skew, transfer time and bandwidth.", "job"),
    Term("job.collectives.bytes", "bytes", "Message bytes of the group and type's instances, summed (as collective_instances.bytes).", "job"),
    Term("job.collective_instances.bytes", "bytes", "Message bytes of the instance: its message elements (Out msg nelems for all-gather, else In msg nelems) x the element size, the largest over its ranks.", "job"),
    Term("job.collective_instances", "", "Per collective instance matched across ranks: its ranks, bytes, skew and last rank.", "job"),
    Term("job.queues", "", "Per (rank, stream): launch queue depth and the stream's busy and idle time.", "job"),
    Term("job.failures", "", "Rank files that could not be analyzed (the job is analyzed without them).", "job"),
    Term("job.notes", "", "What the job's analysis assumed or could not check (clocks, ranks missing ...), in words.", "job"),
    # -- diff
    Term("diff.a", "", "Facts of side A (the first trace, or the step of it compared), as analyze.trace.", "diff"),
    Term("diff.b", "", "Facts of side B, as diff.a.", "diff"),
    Term("diff.a.steps", "count", "Steps found in the side's trace.", "diff"),
    Term("diff.b.steps", "count", "Steps found in the side's trace.", "diff"),
    Term("diff.match", "", "How kernel names were matched: exact, or loose (names differing only in template arguments, tile sizes or tuning numbers match; the lines of one function of the user's code are one row of sources).", "diff"),
    Term("diff.verdict", "", "The comparison in one sentence: which side is slower by how much and where (for ranks of one job: compute and waiting).", "diff"),
    Term("diff.notes", "", "What makes the comparison uneven (different devices, frameworks, steps), in words.", "diff"),
    Term("diff.total", "", "GPU time of each side (summed, and busy: each device's union, summed) and their difference.", "diff"),
    Term("diff.total.delta_pct", "%", "delta_us as a share of A's GPU time.", "diff"),
    Term("diff.total.a_busy_us", "µs", "A's GPU busy time: the union of its GPU records (concurrent work counted once), each device's own, summed over its devices.", "diff"),
    Term("diff.total.b_busy_us", "µs", "B's GPU busy time, as a_busy_us.", "diff"),
    Term("diff.categories", "", "Per kernel category: count and GPU time of each side.", "diff"),
    Term("diff.libraries", "", "Per library (who wrote the kernel): count and GPU time of each side.", "diff"),
    Term("diff.kernels", "", "Per (kernel name, launching op): count and GPU time of each side (kernels only, no memcpy/memset).", "diff"),
    Term("diff.ops", "", "Per CPU op: count and host time of each side, and the GPU time of the kernels it launched.", "diff"),
    Term("diff.sources", "", "Where both sides have lines of the user's code (JAX profiles; PyTorch traces with --sources): per line (with --match loose: per file and function), count and GPU time of each side's kernels, copies and sets that came from it; one row with a null source holds the records without a line.", "diff"),
    Term("diff.sources.source", "", "The line, path:line (as analyze.sources.source); with --match loose the file, path, its function's lines as one row. Null: the records without a line.", "diff"),
    Term("diff.sources.function", "", "The function of the line (as analyze.sources.function).", "diff"),
    # -- counters
    Term("counters.trace", "", "The trace file's path.", "counters"),
    Term("counters.notes", "", "Why ranges are not matched to launches, and that their times are not the kernels', in words.", "counters"),
    Term("counters.kernels", "", "Per (kernel name, launching op): count, the derived columns and every counter, summed over its launches; by FLOPs, else DRAM bytes, else count.", "counters"),
    Term("counters.metrics", "", "Per counter recorded: its total over every profiled kernel and the kernels where it is nonzero.", "counters"),
    Term("counters.ranges", "", "Per profiled kernel, in launch order: its launch, ops, derived columns and counters.", "counters"),
    Term("counters.kernels.op", "", "The innermost CPU op around the launches (null: not matched).", "counters"),
    Term("counters.ranges.op", "", "The innermost CPU op around the launch (null: not matched).", "counters"),
    Term("counters.kernels.count", "count", "Launches of the kernel by the op (profiled kernels).", "counters"),
    Term("counters.kernels.flops", "FLOP", "FLOPs of every precision from the SASS counters, summed over the launches.", "counters"),
    Term("counters.ranges.flops", "FLOP", "FLOPs of every precision from the SASS counters (flops_fp64 + flops_fp32 + flops_fp16).", "counters"),
    Term("counters.ranges.launch_idx", "", "The event index of the kernel's launch (cudaLaunchKernel) in the trace; null: not matched.", "counters"),
    Term("counters.metrics.total", "", "The counter summed over every profiled kernel (its unit: the counter's).", "counters"),
    Term("counters.metrics.kernels", "count", "Profiled kernels where the counter is nonzero.", "counters"),
    # -- annotate
    Term("annotate.trace", "", "The trace file's path.", "annotate"),
    Term("annotate.step", "", "The step listed; null: all steps.", "annotate"),
    Term("annotate.files", "", "Per file of the user's code with GPU time: where it was found, whether it changed since the profile was recorded, its lines, count and GPU time; by time.", "annotate"),
    Term("annotate.lines", "", "Per line (PyTorch: per function's first line and forward/backward) of each file: its code, function, kernels and GPU time; files in the files table's order, lines in file order.", "annotate"),
    Term("annotate.lines.function", "", "The function of the line as the profile names it (JAX: its qualified name; PyTorch: the function whose first line it is, a backward row marked (backward)).", "annotate"),
    Term("annotate.lines.kernels", "count", "Distinct kernel names of the line (memcpy and memset excluded).", "annotate"),
    Term("annotate.lines.top_kernel", "", "The kernel of the line that took the most GPU time.", "annotate"),
    Term("annotate.notes", "", "Files not found here, or edited since the profile was recorded, in words.", "annotate"),
    # -- memory
    Term("memory.trace", "", "The trace file's path.", "memory"),
    Term("memory.devices", "", "Per device (cpu:-1, cuda:0, ...): the allocator's peak, when and where it was reached, and what was held at the end.", "memory"),
    Term("memory.steps", "", "Per (device, step): allocated at the step's start and end, its growth and peak.", "memory"),
    Term("memory.ops", "", "Per (device, innermost CPU op): allocations, frees, lifetimes and blocks held at the end.", "memory"),
    Term("memory.notes", "", "What the timeline could not attribute (events outside any op, frees of blocks allocated before the trace), in words.", "memory"),
    # -- perf
    Term("perf.trace", "", "The trace file's path.", "perf"),
    Term("perf.device", "", "The GPU the ops are rated on, and its peaks (null when the device is not in the peaks table).", "perf"),
    Term("perf.device.name", "", "The GPU's name in the trace's device properties.", "perf"),
    Term("perf.device.peaks", "", "The device's dense peaks (datasheet values, or given with --peak).", "perf"),
    Term("perf.device.peaks.name", "", "The peaks table's name for the device (its model and form factor).", "perf"),
    Term("perf.device.peaks.matrix_tflops", "TFLOP/s", "Dense tensor-core peak per precision (fp64, fp32, tf32, bf16, fp16, fp8, int8).", "perf"),
    Term("perf.device.peaks.vector_tflops", "TFLOP/s", "Vector (CUDA-core) peak per precision (fp64, fp32).", "perf"),
    *[Term(f"perf.device.peaks.{unit}_tflops.{p}", "TFLOP/s", f"Dense {p} peak on the {what}.", "perf")
      for unit, what, precisions in (("matrix", "tensor cores", ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")),
                                     ("vector", "CUDA cores (vector units)", ("fp64", "fp32"))) for p in precisions],
    Term("perf.device.peaks.hbm_tb_s", "TB/s", "Memory bandwidth.", "perf"),
    Term("perf.device.peaks.source", "", "Where the peaks came from: table (kernscope's datasheet table), override (--peak names a device or gives every number) or table+override (--peak changed some of the table's numbers).", "perf"),
    Term("perf.coverage", "", "How much of the GPU time the model covers: modeled ops, ops it could not model, the rest.", "perf"),
    Term("perf.coverage.modeled_us", "µs", "Kernel time of the ops the model rated.", "perf"),
    Term("perf.coverage.missing_us", "µs", "Kernel time of modeled op types it could not rate (see missing).", "perf"),
    Term("perf.coverage.pct", "%", "modeled_us as a share of gpu_time_us.", "perf"),
    Term("perf.classes", "", "Per op class (GEMM, SDPA, elementwise ...): calls, time, FLOPs, bytes and achieved rates.", "perf"),
    Term("perf.ops", "", "Per (op, shapes, types): FLOPs and bytes per call, kernel time, achieved rates and % of the device's roof.", "perf"),
    Term("perf.nested_ops_hidden", "count", "Ops not listed because an op around them is modeled (their kernels are its).", "perf"),
    Term("perf.missing", "", "Op types the model knows but could not rate here, with the reason.", "perf"),
    Term("perf.uncovered", "", "Launching ops of GPU work outside every modeled op, by kernel time.", "perf"),
    Term("perf.notes", "", "What the model assumed (precision, peaks), in words.", "perf"),
    Term("perf.findings", "", "Ranked findings of the perf model (ops far from their roof), as analyze.findings.", "perf"),
    Term("perf.findings.evidence", "", "The numbers behind a far_from_roofline finding: the op's signature, its rates and % of peak.", "perf"),
    Term("perf.findings.evidence.time_us", "µs", "The op's kernel time per step.", "perf"),
    Term("perf.findings.evidence.share_pct", "%", "The op's share of the modeled kernel time.", "perf"),
    Term("perf.findings.evidence.target_us", "µs", "The op's time per step at the target share of its roof (findings.toml's target_pct_of_peak).", "perf"),
    Term("perf.findings.evidence.source", "", "JAX: the line of the user's code (path:line) the op's HLO instruction was traced from; absent for PyTorch ops.", "perf"),
    Term("perf.findings.evidence.steps", "count", "Steps the op's time is spread over (0: the trace has no steps).", "perf"),
    Term("perf.findings_by_kind", "", "The perf model's findings by kind, as analyze.findings_by_kind.", "perf"),
    Term("perf.findings_by_kind.total_us", "µs", "The kind's win back summed over its steps.", "perf"),
]
PLACES: dict[str, Term] = {t.name: t for t in _P}


def define(name: str) -> str:
    """One line: meaning and unit (for tooltips); empty when the term is unknown."""
    t = TERMS.get(name)
    if t is None:
        return ""
    return f"{t.meaning} ({t.unit})" if t.unit else t.meaning


#: the SQL tables of ``kernscope sql`` (their columns; kept with the glossary so docs/glossary.md has them)
SQL_TABLES = """## SQL tables (`kernscope sql QUERY TRACE`, `Trace.sql(query)`, `JobAnalysis.sql(query)`)

Polars' SQL dialect over the tables below; a query builds only the tables it names, and the `analysis.*`
tables run the analysis (of `--step N`, else all steps) only when the query names one. Categorical columns read
as text (`WHERE name LIKE 'nvjet%'`). Output: the terminal table (numbers never cut), `--format json`
(`{"columns": …, "rows": […]}`) or `--format csv`. A bad query is one line naming polars' reason and the tables;
a kernel's `category` or `library` asked of `kernels` or `gpu` (the trace's tables: what was recorded) says that
they are the analysis's, in `analysis.kernels`.
`SHOW TABLES` lists every table, `analysis.*` included, without building one; a statement that is not a query
(`DROP`, `CREATE`, `INSERT`, …) or an empty one is refused in one line (exit 2): nothing changes a trace.
A trace the parse cache holds whole (after an earlier `sql` of its events, a `report` of a PyTorch trace, or
`kernscope.load()` in Python: a load of every event) is not loaded again: the trace tables are lazy frames over the cache entry's files, read only in the columns
(and, under `LIMIT`, the rows) the query asks for. A count of a 207 MB JAX profile's kernels reads two of the GPU
table's ~70 columns: 0.27–0.29 s and 140 MB of memory, where loading the trace took 0.69–0.74 s and 0.82 GB
(`docs/performance.md`, session 58). Where only `analyze`'s narrower load is stored, `gpu`, `kernels`, `steps`,
`cpu_ops` and `launches` come from it in the columns it holds as a whole load does (not the args and XLA stats it leaves
unread; it skips Python and instant events, never a CPU op or a launch): the first query after `analyze` of that
profile takes 0.35–0.38 s instead of a whole parse (1.5–1.7 s, 1.03 GB). `events`, `flows`, `call_tree`, `analysis.*`
and `counters.*`, and a column the stored load lacks, load the trace; a damaged entry is read again from the file, with
one notice. The first query of a file nothing has stored, when it names only those five tables and none of the columns
`analyze`'s load leaves unread (no `*` but `count(*)`: judged on the query's words, a doubt loads the whole trace),
reads that narrower load and stores it, for the next query and a later `analyze`: kernels by name of the 207 MB JAX
profile in 0.98–1.15 s and 0.53 GB instead of 1.31–1.42 s and 1.03 GB, of the 206 MB GPT trace with stacks
in 0.59–0.67 s instead of 0.71–0.79 s; CPU ops by name of that GPT trace in 0.75–0.84 s and 216 MB instead of 0.86–1.07
s and 286–301 MB (`docs/performance.md`, session 59).

| table | one row per | columns |
|---|---|---|
| `events` | event (not metadata, not flow) | idx, ph, cat, name, pid, tid, **ts, dur, end (int64 ns)**, flow_id, correlation, external_id, device, stream, python_id, python_parent_id, bytes, in_msg_nelems, out_msg_nelems, group_size, comm_rank, comm_seq, occupancy_pct, registers, seq_num, fwd_tid, mem_bytes, mem_allocated, mem_reserved, mem_device, mem_device_type, mem_addr (a `[memory]` event's args, bytes), collective, comm_dtype, pg_name, pg_desc, pg_ranks, gpu_kind, kind |
| `gpu` | GPU record (kernel, memcpy, memset) | the `events` columns (no ph/flow/python ids) plus launch_idx, launch_name, launch_ts, launch_dur, launch_pid, launch_tid, launch_external_id, graph_launch, op_idx, op_name, launcher, step |
| `kernels` | kernel | as `gpu`, `kind = 'kernel'` only |
| `cpu_ops` | CPU op (`kind = 'cpu_op'`) | as `events` |
| `launches` | runtime/driver call that launched GPU work | as `events` |
| `steps` | step | step, name, start, end (ns), kind, phase |
| `flows` | flow event | idx, ph, cat, name, pid, tid, ts, flow_id |
| `call_tree` | host event | idx, parent_idx, depth |
| `analysis.kernels` | (kernel name, launching op, category) | name, launcher, category, library, decided_by, decided_op, count, total_us, mean_us, min_us, max_us, pct, pct_wall |
| `analysis.kernels_by_stream` | … and (device, stream) | launcher, category, name, device, stream, decided_by, decided_op, count, total_us, mean_us, min_us, max_us, pct, pct_wall |
| `analysis.categories` | category | category, count, total_us, mean_us, min_us, max_us, pct, pct_wall |
| `analysis.libraries` | library (who wrote the kernel) | library, kernels (distinct kernel names), count, total_us, mean_us, min_us, max_us, pct, pct_wall |
| `analysis.sources` | line of the user's code (JAX; PyTorch recorded with stacks: as `analyze --sources`) | source, function, kernels, top_kernel, count, total_us, mean_us, min_us, max_us, pct, pct_wall |
| `analysis.ops` | launching CPU op | launcher, count, total_us, mean_us, min_us, max_us, pct, pct_wall |
| `analysis.ops_by_category` | (category, library) | category, library, count, total_us, mean_us, min_us, max_us, pct, pct_wall |
| `analysis.launcher_categories` | (launching op, category) | launcher, category, count, total_us, mean_us, min_us, max_us, pct, pct_of_launcher |
| `analysis.steps` | step | step, name, kind, phase, start_us, end_us, cpu_duration_us, kernel_count, kernel_time_us, gpu_event_count, gpu_time_us, gpu_span_us |
| `analysis.timeline` (`_by_device`, `_by_step`) | time type (compute, communication, idle kinds …) | [device / step,] type, time_us, percent, clipped_kernels |
| `analysis.step_categories` | (step, category) | step, name, category, total_us |
| `analysis.findings` | finding | rule, title, step, device, rank, op, kernel, win_back_us, text, evidence (JSON text) |
| `analysis.findings_by_kind` | (rule, device, rank, op, kernel) over steps | rule, device, rank, op, kernel, occurrences, worst_us, total_us, median_us, step, title, text |
| `analysis.critical_path` | step | step, step_us, length_us, cpu_us, launch_us, gpu_us, queue_us, stream_wait_us, sync_return_us, carryover_us |
| `analysis.critical_path_categories` / `_ops` / `_kernels` / `_whatif` | (step, category) / (step, op) / (step, kernel) / (step, change) | step, category, time_us / step, op, host_us / step, name, category, launcher, count, time_us / step, change, saves_us |
| `counters.kernels` / `counters.metrics` / `counters.ranges` | (kernel name, launching op) / counter / profiled kernel (a trace recorded with `profiler_metrics`; empty otherwise) | name, op, count, flops_fp64 … flops_per_byte, every counter / metric, total, kernels / seq, name, op, top_op, launch_idx, the derived columns, every counter (`kernscope counters`) |
| `job.ranks`, `job.rank_steps`, `job.stragglers`, `job.findings`, `job.findings_by_kind`, `job.critical_path`, `job.collectives`, `job.collective_instances`, `job.collective_waits`, `job.queues` | (several traces: the ranks of one job, `kernscope sql QUERY DIR` or `A B ...`) | the columns of `analyze DIR --format json`'s tables of the same names (`docs/schema/job.schema.json`); every step (`--step` is refused: `WHERE step = N`) |

Examples (tested in `tests/test_sql.py` against the raw JSON and `analyze --format json`):

```bash
kernscope sql "SELECT name, count(*) AS n, sum(dur)/1000.0 AS total_us FROM kernels GROUP BY name ORDER BY total_us DESC LIMIT 5" trace.json.gz
kernscope sql "SELECT category, total_us FROM analysis.categories ORDER BY total_us DESC" trace.json.gz --format csv
kernscope sql "SELECT step, length_us, gpu_us, cpu_us FROM analysis.critical_path" trace.json.gz --step 2
kernscope sql "SELECT rank, step_number, max_wait_us FROM job.stragglers" job_traces/
```"""


def markdown() -> str:
    groups: dict[str, list[Term]] = {}
    for t in TERMS.values():
        groups.setdefault(t.group, []).append(t)
    out = ["# Glossary: every column and metric kernscope prints", "",
           "Generated from `src/kernscope/render/glossary.py` (`python -m kernscope.render.glossary > docs/glossary.md`);",
           "the HTML report shows the same text on hover over a column header, and the xlsx report has it as its",
           "`definitions` sheet. Times in tables are µs unless the name says otherwise (`_ns`, `_ms`).", ""]
    for g, terms in groups.items():
        out += [f"## {g}", "", "| name | unit | meaning |", "|---|---|---|"]
        out += [f"| `{t.name}` | {t.unit} | {t.meaning.replace('|', '/')} |" for t in terms]
        out.append("")
    out += ["## JSON outputs: tables, objects and fields by place", "",
            "The `--format json` outputs (`docs/schema/`) by place (`output.table.field`): every table and object, and",
            "the fields whose meaning there is narrower than the term above.", "",
            "| place | unit | meaning |", "|---|---|---|"]
    out += [f"| `{t.name}` | {t.unit} | {t.meaning.replace('|', '/')} |" for t in PLACES.values()]
    out.append("")
    return "\n".join(out) + "\n" + SQL_TABLES + "\n"


if __name__ == "__main__":  # pragma: no cover
    sys.stdout.write(markdown())
