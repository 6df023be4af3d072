"""Training-log analysis behind ``llmdiag analyze-log``.

Data flows one way: readers (bytes → candidate lines) → prefixes (rank, host, time) →
formats (progress records) and signatures (failure events) → anomalies (over the step
series) → diagnosis (findings, root causes). ``analyze_paths`` wires them.
"""

from probes.logs.analyzer import analyze_paths

__all__ = ["analyze_paths"]
