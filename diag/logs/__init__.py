"""Training-log analysis behind ``llmdiag analyze-log``.

Data flows one way: readers (bytes → candidate lines, with the keyword prefilter) →
prefixes (rank, host, time) → formats (progress records; bulk: learned line templates for
whole chunks) and signatures (failure events) → table (the streamed step table) and series
(per-rank metrics) and detectors (streaming anomaly rules) → diagnosis (findings, root causes).
``engine.analyze`` wires them.
"""

from llmdiag.logs.engine import analyze, analyze_paths

__all__ = ["analyze", "analyze_paths"]
