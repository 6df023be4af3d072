"""Which probes exist: built-ins registered directly, plugins from the ``llmdiag.probes`` group.

A third-party package exposes a probe with an entry point::

    [project.entry-points."llmdiag.probes"]
    my-check = "my_pkg.probes:MyProbe"

The target may be a probe class (instantiated with no arguments), a probe instance, or a
zero-argument factory. :func:`validate` checks the contract at registration and raises
:class:`llmdiag.errors.PluginError` naming the plugin and the rule it breaks; the CLI turns a
plugin that fails validation into a failed result rather than aborting the run.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Callable, Iterable
from importlib import metadata
from typing import Any

from llmdiag.errors import BuiltinError, PluginError
from llmdiag.probe import Probe, Requirement

ENTRY_POINT_GROUP = "llmdiag.probes"
_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")

#: Built-in probes, in report order, as "module:attribute". One that fails to import or to
#: validate raises :class:`~llmdiag.errors.BuiltinError` (exit 3): a broken install is never a
#: silently shorter report. Third-party plugins that fail are findings instead.
BUILTIN_PROBES: tuple[str, ...] = (
    "llmdiag.probes.software:SoftwareProbe",
    "llmdiag.probes.launcher:LauncherProbe",
    "llmdiag.probes.gpu:GpuProbe",
    "llmdiag.probes.system:SystemProbe",
    "llmdiag.probes.platform:PlatformProbe",
    "llmdiag.probes.dcgm:DcgmProbe",
    "llmdiag.probes.network:NetworkProbe",
    "llmdiag.probes.ports:PortsProbe",
    "llmdiag.probes.filesystem:FilesystemProbe",
    "llmdiag.probes.memory:MemoryPlanProbe",
    "llmdiag.probes.nccl:NcclBenchProbe",
    "llmdiag.probes.smoke:SmokeTrainProbe",
)


@dataclasses.dataclass(frozen=True)
class LoadError:
    """A probe that could not be loaded or validated: shown as a failed result."""

    source: str
    message: str


def validate(obj: Any, source: str) -> Probe:
    """Check that ``obj`` honours the probe contract; return it (typed) or raise PluginError."""

    def bad(rule: str) -> PluginError:
        return PluginError(f"probe plugin {source!r}: {rule}")

    for attr in ("name", "description", "requires", "config_section", "timeout_s", "run"):
        if not hasattr(obj, attr):
            raise bad(f"missing attribute {attr!r} (see llmdiag.probe.Probe)")
    if not isinstance(obj.name, str) or not _NAME_RE.match(obj.name):
        raise bad(f"name {obj.name!r} must match {_NAME_RE.pattern}")
    if not isinstance(obj.description, str) or not obj.description.strip():
        raise bad("description must be a non-empty string")
    try:
        reqs = frozenset(Requirement(r) for r in obj.requires)
    except (TypeError, ValueError):
        raise bad(f"requires must be a set of {[r.value for r in Requirement]}, got {obj.requires!r}") from None
    if Requirement.CONFIG in reqs and not obj.config_section:
        raise bad("requires 'config' but names no config_section")
    if obj.config_section is not None and not isinstance(obj.config_section, str):
        raise bad("config_section must be a string or None")
    if not isinstance(obj.timeout_s, (int, float)) or not 0 < obj.timeout_s <= 3600:
        raise bad(f"timeout_s must be a number in (0, 3600], got {obj.timeout_s!r}")
    if not isinstance(getattr(obj, "group", False), bool):
        raise bad(f"group must be true or false, got {obj.group!r}")
    if not callable(obj.run):
        raise bad("run must be callable")
    if not isinstance(obj, Probe):
        raise bad("does not satisfy the Probe protocol")
    return obj


def is_group_probe(probe: Probe) -> bool:
    """Does ``probe`` run collectives in the cluster's process group?

    The one place that says so: the probe's own ``group`` attribute, or a requirement of a
    distributed job (such a probe is meaningless without a group). The cluster agent forms the
    group only when a selected probe is one, and runs these after the cluster stages.
    """
    return getattr(probe, "group", False) is True or Requirement.DISTRIBUTED in frozenset(
        getattr(probe, "requires", ()))


def _instantiate(target: Any, source: str) -> Probe:
    if isinstance(target, type):
        try:
            obj = target()
        except Exception as exc:  # noqa: BLE001
            raise PluginError(f"probe plugin {source!r}: constructing it raised {type(exc).__name__}: {exc}") from exc
    elif hasattr(target, "run") and hasattr(target, "name"):
        obj = target
    elif callable(target):
        obj = target()
    else:
        raise PluginError(f"probe plugin {source!r}: entry point is neither a class, an instance nor a factory")
    return validate(obj, source)


def load_target(spec: str) -> Any:
    module_name, _, attr = spec.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attr)


def builtin_probes(specs: Iterable[str] | None = None) -> tuple[list[Probe], list[LoadError]]:
    """The built-in probes; raises :class:`BuiltinError` naming the first one that fails to load."""
    probes: list[Probe] = []
    for spec in BUILTIN_PROBES if specs is None else specs:
        try:
            target = load_target(spec)
        except Exception as exc:  # noqa: BLE001 - any import failure of our own code is fatal
            raise BuiltinError(f"built-in probe {spec} failed to import: {type(exc).__name__}: {exc} "
                               "(a broken llmdiag install; reinstall it)") from exc
        try:
            probes.append(_instantiate(target, spec))
        except PluginError as exc:
            raise BuiltinError(f"built-in probe {spec} is invalid: {exc}") from exc
    return probes, []


def plugin_probes(
    entry_points: Callable[[], Iterable[Any]] | None = None,
) -> tuple[list[Probe], list[LoadError]]:
    """Probes from the ``llmdiag.probes`` entry-point group (installed packages)."""
    if entry_points is None:
        def entry_points() -> Iterable[Any]:
            return metadata.entry_points(group=ENTRY_POINT_GROUP)
    probes: list[Probe] = []
    errors: list[LoadError] = []
    for ep in entry_points():
        source = f"{ep.name} = {ep.value}"
        try:
            target = ep.load()
            probes.append(_instantiate(target, source))
        except PluginError as exc:
            errors.append(LoadError(source, str(exc)))
        except Exception as exc:  # noqa: BLE001
            errors.append(LoadError(source, f"loading failed: {type(exc).__name__}: {exc}"))
    return probes, errors


def all_probes(include_plugins: bool = True) -> tuple[list[Probe], list[LoadError]]:
    probes, errors = builtin_probes()
    if include_plugins:
        more, more_errors = plugin_probes()
        seen = {p.name for p in probes}
        for p in more:
            if p.name in seen:
                errors.append(LoadError(p.name, f"probe plugin {p.name!r}: name already taken by a built-in probe"))
                continue
            seen.add(p.name)
            probes.append(p)
        errors.extend(more_errors)
    return probes, errors
