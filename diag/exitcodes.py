"""Process exit codes of every llmdiag command (documented in the README)."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    #: No check failed (warnings are allowed unless ``--strict``).
    OK = 0
    #: At least one check failed, or a benchmark missed its target.
    CHECKS_FAILED = 1
    #: Bad command line or configuration: nothing was run.
    USAGE_ERROR = 2
    #: llmdiag itself broke (a bug): the message says where.
    INTERNAL_ERROR = 3
    #: Interrupted by Ctrl-C / SIGINT.
    INTERRUPTED = 130
