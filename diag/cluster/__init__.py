"""Cluster preflight: one agent per node, coordinated through torch.distributed's c10d store.

Modules, in the order a run uses them: ``world`` (who am I, where is the rendezvous),
``reach`` (classify a TCP connect), ``rendezvous`` (store, join, roster, heartbeats,
barriers), ``clock`` (skew against rank 0), ``sharedfs`` (is a shared path really shared),
``portmatrix`` (node-to-node port reachability), ``facts`` (what nodes compare),
``gather`` (node reports to rank 0), ``compare`` (odd one out), ``merge`` (the cluster
report, also from files), ``agent`` (one node's run), ``hostfile`` and ``ssh`` (fan-out).
"""
