"""Options and helpers every command shares: ``--format`` / ``-o``, ``--config``, emitting."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import click

from llmdiag.reports.base import FORMATS, RenderOptions


class FiniteFloatRange(click.FloatRange):
    """``click.FloatRange`` that also refuses nan and ±inf: NaN slips through every comparison
    (``--interval nan`` sampled "every nan s" forever), inf through every lower bound."""

    name = "float range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        import math

        out = super().convert(value, param, ctx)
        if isinstance(out, float) and not math.isfinite(out):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return out


def output_options(default_format: str = "terminal") -> Callable:
    """``--format/-f``, ``-o/--output``, ``--width``, ``--no-color``: the same for every command."""

    def deco(fn: Callable) -> Callable:
        fn = click.option("--no-color", is_flag=True, help="Plain text even on a terminal (also NO_COLOR=1).")(fn)
        fn = click.option("--width", type=click.IntRange(40, 1000), default=None,
                          help="Terminal width to render for (default: the terminal's).")(fn)
        fn = click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
                          help="Write the report to FILE instead of stdout ('-' is stdout).")(fn)
        fn = click.option("-f", "--format", "fmt", type=click.Choice(FORMATS), default=default_format,
                          show_default=True, help="Output format.")(fn)
        return fn

    return deco


def config_option(fn: Callable) -> Callable:
    return click.option(
        "-c", "--config", "config_path", type=click.Path(dir_okay=True), default=None,
        help="Config file (TOML). Default: $LLMDIAG_CONFIG, else ./llmdiag.toml if present.",
    )(fn)


def emit_doc(
    doc: Mapping[str, Any],
    fmt: str,
    output: str | None,
    width: int | None,
    no_color: bool,
    *,
    env: Mapping[str, str] | None = None,
    protect: Iterable[str] = (),
    extra: Mapping[str, Any] | None = None,
) -> str:
    from llmdiag.reports.base import emit

    import sys

    to_file = output not in (None, "-")
    color = (not to_file and fmt == "terminal" and not no_color and "NO_COLOR" not in os.environ
             and sys.stdout.isatty())
    opts = RenderOptions(width=width, color=color, extra=dict(extra or {}))
    return emit(doc, fmt, output, env=env, opts=opts, protect=protect)


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
    check_outputs(outputs, [*inputs, *([found] if found else [])])
