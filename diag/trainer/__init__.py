"""The reference trainer: a small GPT-style decoder trained with DDP (or FSDP) to rehearse on.

One concept per module: ``model`` (the network), ``data`` (token streams), ``tokenizer`` (bytes),
``prepare`` (text to token files), ``checkpoint`` (crash-safe saves), ``inject`` (rehearsal
faults), ``train`` (the loop), ``launch`` (spawning workers). Importing this package imports
nothing heavy; torch is loaded by the modules that need it.
"""
