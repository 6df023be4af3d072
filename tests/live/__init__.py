"""Live frameworks: real launchers and trainers run on CPU with a fault injected, their output read back.

``pytest tests/live`` (markers ``distributed`` and ``slow``; run by ``make test`` and CI). Needs the
``test`` extra (torch, transformers and accelerate at the pinned versions); the Trainer cases skip
without them, the full-disk case skips where a tmpfs cannot be mounted. Each case is one launch of two
processes: about 15-25 s on a busy 2-core machine, almost all of it interpreter and torch start-up.
"""
