"""Step-marker presets and the names steps may come from (no table library: the CLI's cached path uses it)."""

from __future__ import annotations

import re

PRESETS: dict[str, str] = {
    # vLLM / TRT-LLM style model runner ranges: execute_<tokens>_context_<n>(...)_generation_<m>(...)
    "vllm": r"^(?:execute_(?:\d+_)?context_(?P<ctx>\d+).*_generation_(?P<gen>\d+)|.*\bexecute_model\b.*)",
    # SGLang scheduler steps / forward passes
    "sglang": r"^(?:step\[(?P<kind>DECODE|EXTEND|PREFILL|MIXED|IDLE)\]|forward_(?P<kind2>decode|extend|idle|mixed|prefill)\b)",
    # Megatron / NeMo style training iterations
    "megatron": r"^(?:iteration(?:[ _#-]?\d+)?|train[_ -]step(?:[ _#-]?\d+)?|forward-backward)$",
    # torch.compile graph calls (each call of a compiled graph is a window)
    "compiled": r"^## Call CompiledFxGraph \w+ ##$",
}
DEFAULT_CASCADE = ("vllm", "sglang", "megatron", "compiled")


def marker_names(step_marker: str | None) -> str:
    """One regex (``re.search``) for every event name a step may come from: ProfilerStep, the presets
    (their named groups made plain) and ``step_marker``. A load that skips CPU events keeps these."""
    parts = ["ProfilerStep", *PRESETS.values()]
    if step_marker and step_marker not in ("auto", "ProfilerStep", "profilerstep"):
        parts.append(PRESETS.get(step_marker, step_marker))
    return "|".join(f"(?:{re.sub(r'[(][?]P<[A-Za-z_][A-Za-z0-9_]*>', '(?:', p)})" for p in parts)
