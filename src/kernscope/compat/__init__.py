"""Compatibility entry points for users of other tools (TraceLens)."""

from .tracelens import TreePerfAnalyzer, generate_perf_report_pytorch

__all__ = ["TreePerfAnalyzer", "generate_perf_report_pytorch"]
