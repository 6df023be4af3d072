"""The closed vocabularies of llmdiag's documents and contracts, each declared once here.

Each is a str-Enum: a member *is* its word (``Status.FAIL == "fail"``; JSON, ``str()`` and
f-strings write ``fail``), so documents keep today's strings, while a misspelt member
(``Status.FIAL``) is an AttributeError and an unknown word (``Status("fial")``) a ValueError: a
typo is an error, and grep finds every use. A new word is a new member here, and a schema change
(docs/reports.md, "Versions").
"""

from __future__ import annotations

import enum
from collections.abc import Iterable


class Vocab(str, enum.Enum):
    """Base of the vocabularies: the member prints as its word on every Python (3.11 changed
    ``format()`` of str-mixin enums to ``Class.MEMBER``)."""

    __str__ = str.__str__
    __format__ = str.__format__

    @classmethod
    def words(cls) -> tuple[str, ...]:
        return tuple(m.value for m in cls)


class Status(Vocab):
    """Outcome of one check, and of a document. Ordered by severity: pass < skip < warn < fail."""

    PASS = "pass"
    SKIP = "skip"
    WARN = "warn"
    FAIL = "fail"

    @property
    def severity(self) -> int:
        return _SEVERITY[self]

    @property
    def label(self) -> str:
        """How reports print it: PASS, SKIP, WARN, FAIL."""
        return self.value.upper()

    @classmethod
    def worst(cls, statuses: Iterable[Status | str]) -> Status:
        """Overall status: fail if any failed, else warn if any warned, else pass.

        Skips never make the overall status worse than pass: a missing GPU is not a failure.
        """
        worst = cls.PASS
        for s in statuses:
            s = cls(s)
            if s is cls.SKIP:
                continue
            if s.severity > worst.severity:
                worst = s
        return worst


_SEVERITY = {Status.PASS: 0, Status.SKIP: 1, Status.WARN: 2, Status.FAIL: 3}


class Severity(Vocab):
    """How bad a finding of analyze-log is."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def status(self) -> Status:
        return {Severity.ERROR: Status.FAIL, Severity.WARNING: Status.WARN}.get(self, Status.PASS)


class AlertSeverity(Vocab):
    """How bad a monitor alert is (Prometheus' and Alertmanager's words)."""

    CRITICAL = "critical"
    WARNING = "warning"

    @property
    def status(self) -> Status:
        return Status.FAIL if self is AlertSeverity.CRITICAL else Status.WARN


class Verdict(Vocab):
    """estimate-memory's answer: fits (<= 95 % of the GPU), tight (inside the estimate's error
    band), out-of-memory, unknown (no GPU memory to judge against), or invalid-plan (the
    framework refuses the plan at launch, whatever the memory)."""

    FITS = "fits"
    TIGHT = "tight"
    OUT_OF_MEMORY = "out-of-memory"
    UNKNOWN = "unknown"
    INVALID_PLAN = "invalid-plan"


class Backend(Vocab):
    """A torch.distributed backend as the commands accept it; auto: nccl with GPUs, else gloo."""

    AUTO = "auto"
    NCCL = "nccl"
    GLOO = "gloo"


class LauncherKind(Vocab):
    """What started the processes (llmdiag.launcher): one entry per family of launchers."""

    NONE = "none"
    TORCHRUN = "torchrun"
    KUBERNETES = "kubernetes"
    OPENMPI = "openmpi"
    MPICH = "mpich"
    PMIX = "pmix"
    SLURM = "slurm"
    ENV = "env"


class Requirement(Vocab):
    """What a probe needs to be meaningful; unmet, the probe is skipped with the reason."""

    GPU = "gpu"  # an NVIDIA driver answering NVML
    TORCH = "torch"  # an importable torch
    DISTRIBUTED = "distributed"  # a multi-process job (launcher variables or a process group)
    CONFIG = "config"  # its config_section present in the config file
