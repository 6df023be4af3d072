"""Memory estimate of a training plan and the parallel-plan checks (``llmdiag estimate-memory``)."""
