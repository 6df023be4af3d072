"""Node-health hooks: a node's results told the way node-health frameworks read them
(Kubernetes node-problem-detector custom plugins, LBNL NHC checks, Slurm health programs)."""
