"""The configuration file: one TOML file describing the cluster and the planned job.

Precedence, stated once: **command-line flags override the config file, which overrides the
built-in defaults.** The file is found as ``--config PATH``, else ``$LLMDIAG_CONFIG``, else
``./llmdiag.toml`` when it exists; without any file every default applies.

Each setting is declared once: a section is a frozen dataclass decorated with :func:`section`,
each field a :func:`setting` carrying the TOML key (the field's name), its type (the field's
annotation), default, accepted range or validator, help and the command-line flag that mirrors
it where there is one. From that one declaration come the loader's checks, the typed values
(``config.settings(Cls)``), the click option (``llmdiag.cliutil.setting_option``) and the
reference table in ``docs/config.md``. The loader rejects unknown sections and keys (typos),
wrong types and out-of-range values with a :class:`~llmdiag.errors.ConfigError` naming the
field and the accepted range (exit code 2). Subsystems (memory plan, nccl-bench, smoke
training, monitor, analyze-log) declare their own sections. ``examples/llmdiag.toml`` is a full
example.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from llmdiag.errors import ConfigError
from llmdiag.util import toml as tomllib

CONFIG_ENV = "LLMDIAG_CONFIG"
DEFAULT_FILE = "llmdiag.toml"

_TYPES = ("int", "float", "str", "bool", "str_list", "port_range", "table_list", "table", "int_or_auto")


@dataclasses.dataclass(frozen=True)
class Field:
    """One configuration key: type, default, accepted range and a one-line help."""

    name: str
    type: str
    default: Any = None
    help: str = ""
    min: float | None = None
    max: float | None = None
    choices: Sequence[Any] | None = None
    item_fields: Sequence[Field] | None = None  # for table_list
    validator: Callable[[Any], str | None] | None = None  # returns an error message or None
    required: bool = False  # in a table_list item: the key must be given
    flag: tuple[str, ...] = ()  # the command-line option that mirrors it (click's declarations)
    metavar: str | None = None  # the flag's value placeholder in --help

    def __post_init__(self) -> None:
        if self.type not in _TYPES:
            raise ValueError(f"unknown config field type {self.type!r}")

    def accepted(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        kind = {
            "int": "an integer",
            "float": "a number",
            "str": "a string",
            "bool": "true or false",
            "str_list": "a list of strings",
            "port_range": 'a port range "LO-HI" within 1-65535',
            "table_list": "a list of tables",
            "table": "a table",
            "int_or_auto": 'an integer or "auto"',
        }[self.type]
        if self.min is not None and self.max is not None:
            return f"{kind} in {self.min:g}..{self.max:g}"
        if self.min is not None:
            return f"{kind} >= {self.min:g}"
        if self.max is not None:
            return f"{kind} <= {self.max:g}"
        return kind


SECTIONS: dict[str, dict[str, Field]] = {}
SECTION_HELP: dict[str, str] = {}
SETTINGS_CLASSES: dict[str, type] = {}  # section name -> its :func:`section` class

#: Modules that register further sections when imported (each subsystem owns its own). One
#: that fails to import is a broken install: BuiltinError (exit 3), never a silently unknown
#: section.
SECTION_MODULES: tuple[str, ...] = (
    "llmdiag.memory.config",  # [job]: the planned model and parallel plan
    "llmdiag.ncclbench.config",  # [nccl_bench]
    "llmdiag.trainer.config",  # [smoke]
    "llmdiag.monitor.config",  # [monitor]
    "llmdiag.logs.config",  # [analyze_log]
)
_sections_loaded = False


def _load_section_modules() -> None:
    global _sections_loaded
    if _sections_loaded:
        return
    _sections_loaded = True
    import importlib

    for name in SECTION_MODULES:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - a broken built-in is fatal, and named
            from llmdiag.errors import BuiltinError

            raise BuiltinError(f"built-in config section module {name} failed to import: "
                               f"{type(exc).__name__}: {exc}") from exc


def register_section(name: str, fields: Sequence[Field], help: str = "") -> None:
    """Declare a config section (idempotent for the same declaration)."""
    SECTIONS[name] = {f.name: f for f in fields}
    SECTION_HELP[name] = help


#: annotation of a settings field (``| None`` stripped) -> config field type
_ANNOTATION_TYPES = {"int": "int", "float": "float", "str": "str", "bool": "bool", "list[str]": "str_list",
                     "tuple[str, ...]": "str_list", "tuple[int, int]": "port_range", "list[dict]": "table_list",
                     "dict": "table", "int | str": "int_or_auto"}
_SPEC = "llmdiag.setting"
SettingsT = TypeVar("SettingsT")


def setting(default: Any = None, help: str = "", *, min: float | None = None, max: float | None = None,
            choices: Sequence[Any] | None = None, validator: Callable[[Any], str | None] | None = None,
            item_fields: Sequence[Field] | None = None, flag: Sequence[str] = (),
            metavar: str | None = None) -> Any:
    """One setting of a :func:`section` dataclass: its default, range, help and mirroring flag.

    The key is the dataclass field's name and the type its annotation, so neither is written
    twice. ``flag`` lists click's declarations of the option (``("-w", "--warmup-iters")``,
    ``("--fused-norm/--unfused-norm",)``); a command adds it with ``setting_option``."""
    spec = dict(default=default, help=help, min=min, max=max, choices=choices, validator=validator,
                item_fields=item_fields, flag=tuple(flag), metavar=metavar)
    if isinstance(default, (list, dict)):  # a fresh copy per instance, as dataclasses require
        return dataclasses.field(default_factory=lambda: copy.deepcopy(default), metadata={_SPEC: spec})
    return dataclasses.field(default=default, metadata={_SPEC: spec})


def _field_type(cls: type, f: dataclasses.Field) -> str:
    annotation = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    parts = [p.strip() for p in annotation.split("|") if p.strip() != "None"]
    kind = _ANNOTATION_TYPES.get(" | ".join(parts))
    if kind is None:
        raise TypeError(f"{cls.__name__}.{f.name}: no config type for annotation {annotation!r} "
                        f"(accepted: {', '.join(_ANNOTATION_TYPES)})")
    return kind


def section(name: str, help: str = "") -> Callable[[type[SettingsT]], type[SettingsT]]:
    """Class decorator: the class becomes a frozen dataclass and config section ``[name]``, one
    key per :func:`setting` field (in declaration order, which is the docs' order too)."""

    def deco(cls: type[SettingsT]) -> type[SettingsT]:
        cls = dataclasses.dataclass(frozen=True)(cls)
        fields = [Field(f.name, _field_type(cls, f), **f.metadata[_SPEC])
                  for f in dataclasses.fields(cls) if _SPEC in f.metadata]
        register_section(name, fields, help)
        cls.section_name = name  # type: ignore[attr-defined]
        SETTINGS_CLASSES[name] = cls
        return cls

    return deco


def spec(cls: type, key: str) -> tuple[str, Field]:
    """The section name and :class:`Field` of setting ``key`` of a :func:`section` class."""
    name = cls.section_name  # type: ignore[attr-defined]
    return name, SECTIONS[name][key]


def parse_port_range(value: Any) -> tuple[int, int]:
    """``"29500-29510"``, ``"29500"``, ``29500`` or ``[29500, 29510]`` → (lo, hi); ValueError if bad."""
    if isinstance(value, bool):
        raise ValueError("not a port range")
    if isinstance(value, int):
        lo = hi = value
    elif isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, int) for v in value):
        lo, hi = value
    elif isinstance(value, str):
        parts = value.replace(" ", "").split("-")
        if len(parts) == 1:
            lo = hi = int(parts[0])
        elif len(parts) == 2:
            lo, hi = int(parts[0]), int(parts[1])
        else:
            raise ValueError("not a port range")
    else:
        raise ValueError("not a port range")
    if not (1 <= lo <= hi <= 65535):
        raise ValueError("ports must satisfy 1 <= LO <= HI <= 65535")
    return lo, hi


def _check(field: Field, value: Any, where: str, source: str | None) -> Any:
    def bad(msg: str | None = None) -> ConfigError:
        got = f"got {value!r}"
        return ConfigError(where, f"{msg or 'expected ' + field.accepted()}, {got}", source)

    t = field.type
    if value is None:
        return None
    if t == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad()
    elif t == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value in (
                float("inf"), float("-inf")):
            raise bad()  # TOML has nan and inf; no setting means either
        value = float(value)
    elif t == "int_or_auto":
        if value != "auto" and (isinstance(value, bool) or not isinstance(value, int)):
            raise bad()
    elif t == "str":
        if not isinstance(value, str):
            raise bad()
    elif t == "bool":
        if not isinstance(value, bool):
            raise bad()
    elif t == "str_list":
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise bad()
    elif t == "port_range":
        try:
            value = parse_port_range(value)
        except (ValueError, TypeError):
            raise bad() from None
    elif t == "table":
        if not isinstance(value, Mapping):
            raise bad()
        value = dict(value)
    elif t == "table_list":
        if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
            raise bad()
        items = []
        specs = {f.name: f for f in field.item_fields or ()}
        for i, item in enumerate(value):
            out = {}
            for k in item:
                if specs and k not in specs:
                    raise ConfigError(f"{where}[{i}].{k}", f"unknown key (accepted: {', '.join(specs)})", source)
            for name, spec in specs.items():
                if spec.required and item.get(name) is None:
                    raise ConfigError(f"{where}[{i}].{name}", f"required: every entry needs {name} "
                                      f"({spec.accepted()}: {spec.help})", source)
                out[name] = _check(spec, item.get(name, spec.default), f"{where}[{i}].{name}", source)
            if not specs:
                out = dict(item)
            items.append(out)
        value = items
    if t in ("int", "float", "int_or_auto") and value != "auto":
        if field.min is not None and value < field.min:
            raise bad()
        if field.max is not None and value > field.max:
            raise bad()
    if field.choices is not None and value not in field.choices:
        raise bad()
    if field.validator is not None:
        msg = field.validator(value)
        if msg:
            raise bad(msg)
    return value


class Config:
    """Validated configuration values, by section and field.

    ``cfg.get("network", "port_range")`` or ``cfg.section("network")["port_range"]``.
    ``has_section(name)`` tells whether the file (or a flag) set anything in that section.
    """

    def __init__(self, values: dict[str, dict[str, Any]], present: set[str], source: str | None,
                 explicit: set[tuple[str, str]] | None = None):
        self._values = values
        self._present = present
        self.source = source
        self._explicit = set(explicit or ())

    @classmethod
    def default(cls) -> Config:
        return cls.from_mapping({})

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str | None = None) -> Config:
        _load_section_modules()
        values: dict[str, dict[str, Any]] = {}
        for sname in data:
            if sname not in SECTIONS:
                raise ConfigError(sname, f"unknown section (accepted: {', '.join(sorted(SECTIONS))})", source)
            if not isinstance(data[sname], Mapping):
                raise ConfigError(sname, "must be a table ([section])", source)
        for sname, fields in SECTIONS.items():
            raw = dict(data.get(sname) or {})
            for key in raw:
                if key not in fields:
                    raise ConfigError(f"{sname}.{key}", f"unknown key (accepted: {', '.join(fields)})", source)
            values[sname] = {
                fname: _check(f, raw.get(fname, f.default), f"{sname}.{fname}", source)
                for fname, f in fields.items()
            }
        explicit = {(s, f) for s in data for f in (data[s] or {})}
        return cls(values, {s for s in data if data[s]}, source, explicit)

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Config:
        """Load the config file (explicit path, ``$LLMDIAG_CONFIG``, ``./llmdiag.toml``) or defaults."""
        env = os.environ if env is None else env
        explicit = path is not None or bool(env.get(CONFIG_ENV))
        p = Path(path) if path is not None else Path(env.get(CONFIG_ENV) or DEFAULT_FILE)
        if not p.exists():
            if explicit:
                raise ConfigError("--config", f"file {str(p)!r} does not exist")
            return cls.default()
        if p.is_dir():
            raise ConfigError("--config", f"{str(p)!r} is a directory, not a TOML file")
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise ConfigError("--config", f"{str(p)!r} is not UTF-8 text") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError("--config", f"{str(p)!r} is not valid TOML: {exc}") from None
        except OSError as exc:
            raise ConfigError("--config", f"cannot read {str(p)!r}: {exc.strerror}") from None
        return cls.from_mapping(data, source=str(p))

    def with_overrides(self, overrides: Mapping[tuple[str, str], Any]) -> Config:
        """A copy with flag values applied (``None`` means "flag not given")."""
        values = {s: dict(v) for s, v in self._values.items()}
        present = set(self._present)
        explicit = set(self._explicit)
        for (sname, fname), value in overrides.items():
            if value is None:
                continue
            field = SECTIONS[sname][fname]
            values[sname][fname] = _check(field, value, f"{sname}.{fname}", "command line")
            present.add(sname)
            explicit.add((sname, fname))
        return Config(values, present, self.source, explicit)

    def get(self, section: str, field: str, default: Any = None) -> Any:
        value = self._values.get(section, {}).get(field)
        return default if value is None else value

    def section(self, name: str) -> dict[str, Any]:
        return dict(self._values.get(name, {}))

    def settings(self, cls: type[SettingsT]) -> SettingsT:
        """The validated values of a :func:`section` class's section, as an instance of it."""
        return cls(**self.section(cls.section_name))  # type: ignore[attr-defined]

    def has_section(self, name: str | None) -> bool:
        return name is not None and name in self._present

    def is_set(self, section: str, field: str) -> bool:
        """True when the file or a flag gave ``section.field`` (a default is not the user's value)."""
        return (section, field) in self._explicit

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {s: dict(v) for s, v in self._values.items()}


# ---------------------------------------------------------------------------
# Core sections (probes of the foundation). Other subsystems declare theirs.


@section("cluster", "The cluster and the job's launch shape.")
class ClusterSettings:
    nodes: int | None = setting(None, "number of nodes expected in the job", min=1, max=100000, flag=("--nnodes",))
    gpus_per_node: int | None = setting(None, "GPUs every node must show (unset: no expectation)", min=0, max=64,
                                        flag=("--gpus-per-node",))
    nproc_per_node: int | None = setting(None, "processes (ranks) per node the job will start; the cluster's group "
                                         "probes run this many ranks per node (unset: one per GPU with NCCL, one "
                                         "with gloo)", min=1, max=1024)
    master_addr: str | None = setting(None, "rendezvous host (MASTER_ADDR)", flag=("--master-addr",), metavar="HOST")
    master_port: int = setting(29500, "rendezvous port (MASTER_PORT)", min=1, max=65535, flag=("--master-port",))
    hostfile: str | None = setting(None, "DeepSpeed/MPI hostfile: start an agent on every host over ssh (first "
                                   "host is rank 0)", flag=("--hostfile",))
    timeout_s: float = setting(60.0, "bound on rendezvous and every cluster step", min=1, max=3600)
    sample_peers: int = setting(2, "port matrix: random peers each node tests besides its ring neighbours",
                                min=0, max=1024, flag=("--sample-peers",))
    full_matrix: bool = setting(False, "port matrix: every node tests every other node (O(N^2) in total; "
                                "default: ring neighbours + sampled peers)", flag=("--full-matrix",))
    matrix_max_ports: int = setting(16, "port matrix: at most this many ports of network.port_range", min=1, max=1024)
    share_wait_s: float = setting(5.0, "how long a node waits to see rank 0's token file on a shared path",
                                  min=0.1, max=600)
    node_report_dir: str | None = setting(None, "every node writes its node report here (for `llmdiag report merge "
                                          "DIR`)", flag=("--node-report-dir",))
    ssh_config: str | None = setting(None, "--hostfile runs: ssh client config file (-F); default ~/.ssh/config",
                                     flag=("--ssh-config",))
    ssh_connect_timeout_s: int = setting(10, "--hostfile runs: ssh ConnectTimeout", min=1, max=300)
    ssh_window: int = setting(64, "--hostfile runs: at most this many ssh handshakes at once (sshd "
                              "MaxStartups, bastions)", min=1, max=10000)
    remote_command: str = setting("llmdiag", "--hostfile runs: how to start llmdiag on a host (shell words)",
                                  flag=("--remote-command",))


@section("network", "Interfaces and ports.")
class NetworkSettings:
    interfaces: list[str] | None = setting(None, "interfaces NCCL/gloo must use (names or prefixes; the flag is "
                                           "repeatable)", flag=("--interface",), metavar="IF")
    port_range: tuple[int, int] = setting((29500, 29510), "ports the job binds (rendezvous, NCCL, workers)",
                                          flag=("--port-range",), metavar="LO-HI")
    mtu: int | None = setting(None, "expected MTU of the job's interfaces", min=576, max=65536)
    min_speed_mbps: int | None = setting(None, "slowest acceptable link speed of the job's interface", min=1)
    connect_timeout_s: float = setting(3.0, "TCP connect timeout of reachability checks", min=0.1, max=120)


@section("filesystem", "Paths the job depends on.")
class FilesystemSettings:
    paths: list[dict] = setting(
        [],
        "paths the job reads or writes (datasets, checkpoints)",
        item_fields=[
            Field("path", "str", None, "absolute path (required)", required=True,
                  validator=lambda v: None if v.strip() else "must not be empty"),
            Field("required_free_gb", "float", 0.0, "free space the job needs there", min=0),
            Field("writable", "bool", True, "the job writes here"),
            Field("shared", "bool", False, "must be the same shared filesystem on every node"),
        ],
    )
    throughput_test_mb: int = setting(16, "size of the bounded write/read test (0 disables)", min=0, max=4096)
    min_write_mb_s: float | None = setting(None, "slowest acceptable write throughput", min=0)


@section("thresholds", "Limits that turn readings into pass / warn / fail.")
class ThresholdSettings:
    shm_min_mib: int = setting(1024, "smallest acceptable /dev/shm", min=0)
    nofile_min: int = setting(65536, "smallest acceptable open-files soft limit", min=0)
    memlock_min_mib: int | None = setting(
        None, "smallest acceptable locked-memory limit (unset: unlimited when RDMA is present)", min=0)
    host_memory_min_gib: float | None = setting(None, "smallest acceptable host memory", min=0)
    gpu_temp_warn_c: int = setting(85, "GPU temperature that warns", min=0, max=150)
    gpu_temp_fail_c: int = setting(95, "GPU temperature that fails", min=0, max=150)
    gpu_memory_used_max_mib: int = setting(1024, "GPU memory already in use before launch that warns", min=0)
    clock_skew_warn_ms: float = setting(100.0, "clock skew against rank 0 that warns", min=0)


@section("dcgm", "The dcgm probe: NVIDIA DCGM's diagnostic where dcgmi is installed.")
class DcgmSettings:
    level: int = setting(1, "dcgmi diag run level: 1 quick (about a minute), 2 short tests (minutes), "
                         "3 and 4 stress tests (tens of minutes to hours)", min=1, max=4)
    timeout_s: float = setting(300.0, "bound on one dcgmi diag run (the run's --timeout bounds it too)",
                               min=1, max=3600)


@section("probes", "Which probes run.")
class ProbeSettings:
    skip: list[str] = setting([], "probes not to run")
    only: list[str] = setting([], "run only these probes")
    timeout_s: float | None = setting(None, "deadline of every probe, in seconds, over each probe's own (a cluster "
                                      "run's steps are bounded by it too)", min=0.1, max=3600, flag=("--timeout",))


def markdown_reference() -> str:
    """The config reference (docs/config.md is generated from this; a test keeps them equal)."""
    _load_section_modules()
    lines = [
        "# Configuration reference",
        "",
        "llmdiag reads one TOML file: `--config PATH`, else `$LLMDIAG_CONFIG`, else `./llmdiag.toml`",
        "when it exists. Without a file every default applies. **Command-line flags override the",
        "file, which overrides the defaults.** Unknown sections or keys, wrong types and values out",
        "of range are rejected with a message naming the field and the accepted range (exit code 2).",
        "A full example: `examples/llmdiag.toml`.",
        "",
        "Each setting is declared once, in its section's settings class (`llmdiag.config.section`);",
        "this page, the loader's checks and the mirroring flags (column *flag*) all come from that",
        "declaration. The page is generated by `python -m llmdiag.config > docs/config.md`.",
        "",
    ]
    for sname in sorted(SECTIONS):
        lines += [f"## [{sname}]", ""]
        if SECTION_HELP.get(sname):
            lines += [SECTION_HELP[sname], ""]
        lines += ["| key | accepted | default | flag | meaning |", "|---|---|---|---|---|"]
        for f in SECTIONS[sname].values():
            default = "-" if f.default is None else f"`{f.default!r}`"
            flag = ", ".join(f"`{d}`" for d in f.flag) or "-"
            lines.append(f"| `{f.name}` | {f.accepted()} | {default} | {flag} | {f.help} |")
            for item in f.item_fields or ():
                idef = "-" if item.default is None else f"`{item.default!r}`"
                lines.append(f"| `{f.name}[].{item.name}` | {item.accepted()} | {idef} | - | {item.help} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    # Run as a script this module is a second copy (__main__); the subsystems register their
    # sections into the imported llmdiag.config, so render from that one.
    from llmdiag.config import markdown_reference as _reference

    print(_reference(), end="")
