"""Training-log analysis behind ``llmdiag analyze-log``.

Data flows one way: readers (bytes → candidate lines, with the keyword prefilter) →
prefixes (rank, host, time) → formats (progress records; bulk: learned line templates for
whole chunks) and signatures (failure events) → table (the streamed step table) and series
(per-rank metrics) and detectors (streaming anomaly rules) → diagnosis (findings, root causes).
``analyze_paths`` wires them.
"""

from probes.logs.analyzer import analyze_paths

__all__ = ["analyze_paths"]
