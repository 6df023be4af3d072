"""nccl-bench: collective bandwidth measured the way nccl-tests reports it, on torch.distributed.

Modules: :mod:`.sizes` (``1K``/``16M`` sizes and the sweep), :mod:`.collectives` (the operations
and their byte / bus-bandwidth factors), :mod:`.pattern` (fill and #wrong), :mod:`.timing`
(CUDA events or barrier-synchronised wall time), :mod:`.runner` (the sweep on one rank),
:mod:`.pairwise` (which node or link is slow), :mod:`.verdict` (plateau, straggler, pass/fail,
the report document), :mod:`.launch` (processes and process groups), :mod:`.config`
(the ``[nccl_bench]`` section and the run spec).

Nothing here imports torch at module level: the CLI must stay fast and a broken torch must be
a finding, not a crash.
"""
