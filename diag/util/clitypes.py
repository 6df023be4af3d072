"""click parameter types shared by the commands and by the trainer's own entry point."""

from __future__ import annotations

import math
from typing import Any

import click


class FiniteFloatRange(click.FloatRange):
    """``click.FloatRange`` that also refuses nan and ±inf: NaN slips through every comparison
    (``--interval nan`` sampled "every nan s" forever), inf through every lower bound."""

    name = "float range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        out = super().convert(value, param, ctx)
        if isinstance(out, float) and not math.isfinite(out):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return out


class SuggestingGroup(click.Group):
    """A command group that answers a mistyped command with the names it probably meant."""

    def resolve_command(self, ctx: click.Context, args: list[str]):
        name = args[0] if args else ""
        names = self.list_commands(ctx)
        if name and not name.startswith("-") and name not in names:
            import difflib

            close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
            hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            ctx.fail(f"No such command {name!r}.{hint} The commands: {', '.join(names)}.")
        return super().resolve_command(ctx, args)
