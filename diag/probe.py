"""The probe contract: a small typed protocol every check plugin implements.

A probe has a ``name`` (lowercase, ``[a-z][a-z0-9_-]*``), a one-line ``description``, the set of
things it ``requires`` (see :class:`Requirement`), an optional ``config_section`` it reads, a
``timeout_s`` and a ``run(ctx)`` method returning an iterable of :class:`llmdiag.result.Result`.
Optionally ``group = True``: the probe runs collectives in the cluster's process group
(``ctx.services["process_group"]``) when there is one, so the cluster agent runs it once the
group has formed, one group probe at a time on every node; without a group it runs alone
(see :func:`llmdiag.registry.is_group_probe`).

Rules the runner enforces (so one broken plugin never breaks a run):
- a probe that raises becomes a ``fail`` result naming the exception;
- a probe that overruns ``timeout_s`` becomes a ``fail`` result "timed out after N s";
- a probe whose requirements are not met is skipped with the reason;
- probes return data and never print.

:class:`BaseProbe` is a convenience base with helpers that fill in probe and node names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

from llmdiag.context import Context
from llmdiag.result import Evidence, Result, Status
from llmdiag.vocab import Requirement  # noqa: F401 - part of the probe contract, imported from here


@runtime_checkable
class Probe(Protocol):
    name: str
    description: str
    requires: frozenset[Requirement]
    config_section: str | None
    timeout_s: float

    def run(self, ctx: Context) -> Iterable[Result]: ...


EvidenceLike = Evidence | tuple | Mapping[str, Any]


def as_evidence(items: Iterable[EvidenceLike] | None) -> tuple[Evidence, ...]:
    """Accept ``Evidence``, ``(name, observed, expected, unit)`` tuples or dicts."""
    out: list[Evidence] = []
    for e in items or ():
        if isinstance(e, Evidence):
            out.append(e)
        elif isinstance(e, Mapping):
            out.append(Evidence.from_dict(e))
        else:
            out.append(Evidence(*e))
    return tuple(out)


class BaseProbe:
    """Optional base class with result helpers. Subclasses set the class attributes."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    requires: ClassVar[frozenset[Requirement]] = frozenset()
    config_section: ClassVar[str | None] = None
    timeout_s: ClassVar[float] = 30.0
    #: (section, key) of a setting that bounds the probe's own work: its deadline is that value
    #: plus ``timeout_grace_s`` (to stop the work and report), so ``--list-probes`` and the
    #: timeout message show the bound really in force rather than a class constant
    timeout_setting: ClassVar[tuple[str, str] | None] = None
    timeout_grace_s: ClassVar[float] = 10.0
    group: ClassVar[bool] = False  # runs its collectives across the nodes in cluster mode

    def run(self, ctx: Context) -> Iterable[Result]:  # pragma: no cover - abstract
        raise NotImplementedError

    def result(
        self,
        ctx: Context,
        check: str,
        status: Status,
        summary: str,
        *,
        evidence: Sequence[EvidenceLike] | None = None,
        remediation: str | None = None,
        runbook: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> Result:
        return Result(
            probe=self.name,
            check=check,
            node=ctx.node,
            status=status,
            summary=summary,
            evidence=as_evidence(evidence),
            remediation=remediation,
            runbook=runbook,
            data=dict(data or {}),
        )

    def ok(self, ctx: Context, check: str, summary: str, **kw: Any) -> Result:
        return self.result(ctx, check, Status.PASS, summary, **kw)

    def warn(self, ctx: Context, check: str, summary: str, *, remediation: str, runbook: str, **kw: Any) -> Result:
        return self.result(ctx, check, Status.WARN, summary, remediation=remediation, runbook=runbook, **kw)

    def fail(self, ctx: Context, check: str, summary: str, *, remediation: str, runbook: str, **kw: Any) -> Result:
        return self.result(ctx, check, Status.FAIL, summary, remediation=remediation, runbook=runbook, **kw)

    def skip(self, ctx: Context, check: str, reason: str, *, runbook: str = "check-skipped", **kw: Any) -> Result:
        return self.result(ctx, check, Status.SKIP, reason, runbook=runbook, **kw)
