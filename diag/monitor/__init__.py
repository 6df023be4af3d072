"""``llmdiag monitor``: sample GPUs (through :mod:`llmdiag.nvml`) and the host at an interval,
evaluate alert rules, and hand samples to sinks (timeline file, Prometheus, alert command).

Modules: ``config`` (the ``[monitor]`` section), ``host`` and ``gpus`` (samplers that return
plain dicts), ``rules`` (samples → alerts), ``sinks`` (timeline CSV/Parquet, Prometheus
textfile and HTTP endpoint, ``--on-alert``), ``heartbeat`` (nodes gone silent) and ``loop``
(the sampling loop and the summary document). Nothing here prints: the command does.
"""
