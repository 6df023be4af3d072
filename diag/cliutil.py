"""Options and helpers every command shares: ``--format`` / ``-o``, ``--config``, emitting."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import click

from llmdiag.reports.base import FORMATS, RenderOptions
from llmdiag.util.clitypes import FiniteFloatRange  # noqa: F401 - the commands import it from here


def _one_format(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> str:
    """``-f`` once: ``-f json -o a.json -f prometheus -o b.prom`` cannot be paired reliably (click
    keeps the values of each option, not their order between options), so it is refused."""
    from llmdiag.errors import UsageError

    if len(set(value)) > 1:
        raise UsageError(f"{param.opts[-1]} given more than once ({', '.join(value)}): for several outputs in one "
                         "run name the format of each, e.g. -o json:report.json -o prometheus:node.prom")
    return value[-1] if value else param.default


def output_options(default_format: str = "terminal") -> Callable:
    """``--format/-f``, ``-o/--output``, ``--width``, ``--no-color``: the same for every command.
    ``-o`` is repeatable: ``-o FILE`` is where the ``-f`` report goes instead of stdout, and each
    ``-o FORMAT:FILE`` is one more output in that format (:func:`output_targets`)."""

    def deco(fn: Callable) -> Callable:
        fn = click.option("--no-color", is_flag=True, help="Plain text even on a terminal (also NO_COLOR=1).")(fn)
        fn = click.option("--width", type=click.IntRange(40, 1000), default=None,
                          help="Terminal width to render for (default: the terminal's).")(fn)
        fn = click.option("-o", "--output", type=click.Path(dir_okay=False), multiple=True, metavar="[FORMAT:]FILE",
                          help="Write the --format report to FILE instead of stdout ('-' is stdout); FORMAT:FILE "
                               f"writes one more output in FORMAT ({'|'.join(FORMATS)}). Repeatable.")(fn)
        fn = click.option("-f", "--format", "fmt", type=click.Choice(FORMATS), multiple=True, default=(default_format,),
                          show_default=True, callback=_one_format, help="Output format.")(fn)
        return fn

    return deco


def split_output(value: str) -> tuple[str | None, str]:
    """``FORMAT:FILE`` -> (FORMAT, FILE); anything else (``FILE``, ``-``, ``./json:x``) -> (None, value)."""
    head, sep, rest = value.partition(":")
    if sep and head in FORMATS:
        if not rest:
            from llmdiag.errors import UsageError

            raise UsageError(f"-o {value}: no file after {head}: (use {head}:- for stdout)")
        return head, rest
    return None, value


def _format_given() -> bool:
    """Whether ``-f`` was on the command line (a default -f gives way to ``-o FORMAT:-``)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None or "fmt" not in ctx.params:
        return False
    return ctx.get_parameter_source("fmt") not in (click.core.ParameterSource.DEFAULT, None)


def output_targets(fmt: str, output: str | Iterable[str] | None) -> list[tuple[str, str | None]]:
    """Every (format, path) one run writes; path None is stdout. ``-o FILE`` (at most one without
    a format) takes the ``-f`` report off stdout; each ``-o FORMAT:FILE`` adds one. Refused with
    one line (exit 2): two plain ``-o FILE`` and two outputs on stdout, which would be mixed."""
    from llmdiag.errors import UsageError

    raws = [output] if isinstance(output, str) else list(output or ())
    plain = [r for r in raws if split_output(r)[0] is None]
    if len(plain) > 1:
        raise UsageError(f"-o given {len(plain)} times without a format ({', '.join(plain)}): name the format of "
                         f"each, -o FORMAT:{plain[0]} -o FORMAT:{plain[1]} (FORMAT: {'|'.join(FORMATS)})")
    extra = [(f, None if path == "-" else path) for f, path in map(split_output, raws) if f is not None]
    targets = [(fmt, None if p == "-" else p) for p in plain]
    if not plain and (_format_given() or all(p is not None for _, p in extra)):
        targets.append((fmt, None))  # the -f report on stdout, unless -o FORMAT:- alone claims stdout
    targets += extra
    to_stdout = [f for f, p in targets if p is None]
    if len(to_stdout) > 1:
        raise UsageError(f"{len(to_stdout)} outputs on stdout ({', '.join(to_stdout)}): they would be mixed; "
                         "send all but one to files (-o FORMAT:FILE)")
    return targets


def config_option(fn: Callable) -> Callable:
    return click.option(
        "-c", "--config", "config_path", type=click.Path(dir_okay=True), default=None,
        help="Config file (TOML). Default: $LLMDIAG_CONFIG, else ./llmdiag.toml if present.",
    )(fn)


def emit_doc(
    doc: Mapping[str, Any],
    fmt: str,
    output: str | Iterable[str] | None,
    width: int | None,
    no_color: bool,
    *,
    env: Mapping[str, str] | None = None,
    protect: Iterable[str] = (),
    extra: Mapping[str, Any] | None = None,
    stream_extra: Mapping[str, Any] | None = None,
) -> str:
    """Write ``doc`` to every output of the run (:func:`output_targets`); returns the first text.
    ``stream_extra``: render options for the stdout report only (:func:`reports.base.emit_all`)."""
    from llmdiag.reports.base import emit_all

    import sys

    color = not no_color and "NO_COLOR" not in os.environ and sys.stdout.isatty()  # stdout's terminal report only
    opts = RenderOptions(width=width, color=color, extra=dict(extra or {}))
    return emit_all(doc, output_targets(fmt, output), env=env, opts=opts, protect=protect, stream_extra=stream_extra)


def pass_env(fn: Callable) -> Callable:
    """Give the command a copy of the environment (commands never hand os.environ around)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, env=dict(os.environ), **kwargs)

    return wrapper


def guard_outputs(outputs: Iterable[tuple[str, str | None]], inputs: Iterable[tuple[str, str | None]] = (), *,
                  config_path: str | None = None, env: Mapping[str, str] | None = None) -> None:
    """Refuse, before any work, outputs that clash with an input (the config file the command
    reads included, however it was found) or with each other: llmdiag.outputs.check_outputs."""
    from llmdiag.outputs import check_outputs, config_input

    found = config_input(config_path, env)
    flat: list[tuple[str, str | None]] = []
    for option, value in outputs:
        if isinstance(value, (tuple, list)):  # the repeatable -o: its conflicts first, then each file
            output_targets("terminal", value)
            flat += [(f"{option} {f}:" if f else option, path) for f, path in map(split_output, value)]
        else:
            flat.append((option, value))
    check_outputs(flat, [*inputs, *([found] if found else [])])


def _toml_word(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value)) or "none"
    return f"{value:g}" if isinstance(value, float) else str(value)


def setting_option(settings: type, key: str, name: str | None = None, **overrides: Any) -> Callable:
    """The click option that mirrors setting ``key`` of a ``llmdiag.config.section`` class: its
    flags, type and range (or choices), metavar and help come from the setting's declaration, so
    a flag accepts what the file accepts. Its default is None ("not given": the file's value, or
    the declared default, applies); :func:`setting_flags` collects what was given. ``name`` is
    the function's parameter when it is not ``key``; ``overrides`` are click arguments for a flag
    whose form differs from the file's (nccl-tests' ``-c 0|1``, a repeatable list)."""
    from llmdiag.config import spec

    section, field = spec(settings, key)
    if not field.flag:
        raise ValueError(f"[{section}] {key} declares no flag")
    where = f"[{section}] {key}" + ("" if field.default is None else f", default {_toml_word(field.default)}")
    kw: dict[str, Any] = {"default": None, "metavar": field.metavar,
                          "help": f"{field.help[:1].upper()}{field.help[1:]}. Config: {where}."}
    if field.type == "bool" and "type" not in overrides:
        kw["is_flag"] = True  # "--x/--no-x" gives both ways; a lone "--x" sets true
    elif field.choices is not None:
        kw["type"] = click.Choice(list(field.choices))
    elif field.type == "int" and (field.min is not None or field.max is not None):
        kw["type"] = click.IntRange(_bound(field.min), _bound(field.max))
    elif field.type == "int":
        kw["type"] = click.INT
    elif field.type == "float":
        kw["type"] = FiniteFloatRange(field.min, field.max)
    elif field.type == "int_or_auto":
        kw["callback"] = _int_or_auto(field)
    kw.update(overrides)
    option = click.Option([*field.flag, name or key], **kw)
    option.llmdiag_setting = (section, key)  # type: ignore[attr-defined]

    def deco(fn: Callable) -> Callable:
        if not hasattr(fn, "__click_params__"):
            fn.__click_params__ = []  # type: ignore[attr-defined]
        fn.__click_params__.append(option)  # type: ignore[attr-defined]
        return fn

    return deco


def _bound(value: float | None) -> int | None:
    return None if value is None else int(value)


def _int_or_auto(field: Any) -> Callable:
    def convert(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
        if value is None or value == "auto":
            return value
        try:
            n = int(value)
        except ValueError:
            raise click.BadParameter(f"expected an integer or 'auto', got {value!r}") from None
        if field.min is not None and n < field.min:
            raise click.BadParameter(f"must be >= {field.min:g}, got {n}")
        return n

    return convert


def setting_flags(ctx: click.Context | None = None) -> dict[tuple[str, str], Any]:
    """The settings given on the command line, ``{(section, key): value}``, from the options
    :func:`setting_option` made (ready for ``Config.with_overrides``; an absent flag is None,
    an empty repeatable one too)."""
    from llmdiag.config import SECTIONS

    ctx = ctx or click.get_current_context()
    out: dict[tuple[str, str], Any] = {}
    for param in ctx.command.params:
        where = getattr(param, "llmdiag_setting", None)
        if where is None:
            continue
        value = ctx.params.get(param.name)
        if isinstance(value, tuple):
            value = list(value) or None
        if SECTIONS[where[0]][where[1]].type == "bool" and value is not None:
            value = bool(value)  # nccl-tests' -c 1 / -c 0
        out[where] = value
    return out
