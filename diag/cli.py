"""The ``llmdiag`` command: wiring only. Each subcommand lives in ``diag/commands/``.

Subcommands are imported only when run, so ``llmdiag --help`` stays fast and a subsystem
whose heavy dependency is broken cannot break the others.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback

import click

from llmdiag import __version__
from llmdiag.errors import LlmdiagError
from llmdiag.exitcodes import ExitCode
from llmdiag.util.clitypes import SuggestingGroup
from llmdiag.util.files import OutputError

#: name -> (module:attribute, one-line help). Every command is listed here; one whose module
#: fails to import is an error (exit 3 naming it), never a command that silently disappears.
COMMANDS: dict[str, tuple[str, str]] = {
    "preflight": ("llmdiag.commands.preflight:preflight", "Check every node and the cluster before launch."),
    "nccl-bench": ("llmdiag.commands.nccl_bench:nccl_bench", "Collective bandwidth as nccl-tests measures it."),
    "analyze-log": ("llmdiag.commands.analyze_log:analyze_log", "Find what went wrong in a training log, and why."),
    "estimate-memory": ("llmdiag.commands.estimate_memory:estimate_memory", "Predict per-GPU memory of a training plan."),
    "train": ("llmdiag.commands.train:train", "Minimal reference trainer to rehearse on."),
    "prepare-data": ("llmdiag.commands.prepare_data:prepare_data", "Tokenise text into the trainer's binary format."),
    "monitor": ("llmdiag.commands.monitor:monitor", "Sample GPUs and the host while a job runs."),
    "report": ("llmdiag.commands.report:report", "Work with saved reports (merge node reports, render one)."),
    "node-health": ("llmdiag.commands.node_health:node_health", "This node's checks for NPD, NHC and Slurm health hooks."),
    "alerting": ("llmdiag.commands.alerting:alerting", "Write Prometheus rules, a Grafana dashboard, Alertmanager routing."),
    "runbook": ("llmdiag.commands.runbook:runbook", "List runbooks, or print one."),
}


class LlmdiagGroup(SuggestingGroup):
    """Lazy subcommands, suggestions for a mistyped one, and one place that turns errors into
    messages and exit codes."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        entry = COMMANDS.get(name)
        if entry is None:
            return None
        module, _, attr = entry[0].partition(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except Exception as exc:  # noqa: BLE001 - a broken built-in command is fatal, and named
            click.echo(f"llmdiag: built-in command {name!r} ({entry[0]}) failed to import: "
                       f"{type(exc).__name__}: {exc} (a broken llmdiag install; reinstall it)", err=True)
            ctx.exit(ExitCode.INTERNAL_ERROR)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException):
            raise
        except click.exceptions.Abort as exc:
            ctx.exit(_interrupted(exc.__context__ or exc))
        except KeyboardInterrupt as exc:  # Ctrl-C, and SIGTERM / SIGHUP (llmdiag.util.procs.Terminated)
            ctx.exit(_interrupted(exc))
        except LlmdiagError as exc:
            click.echo(f"llmdiag: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except OutputError as exc:  # an output that cannot be written: llmdiag.util.files
            click.echo(f"llmdiag: {exc}", err=True)
            ctx.exit(ExitCode.USAGE_ERROR)
        except BrokenPipeError:
            # `llmdiag ... | head`: not an error of ours.
            try:
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115
            except OSError:
                pass
            ctx.exit(ExitCode.OK)
        except Exception as exc:  # noqa: BLE001 - the one place internal errors are reported
            if isinstance(exc, OSError) and exc.filename is not None:
                # a path the user gave that the system refuses (name too long, a loop of links,
                # permission): about the input, not a bug of ours
                click.echo(f"llmdiag: {exc.filename}: {exc.strerror or exc}", err=True)
                ctx.exit(ExitCode.USAGE_ERROR)
            click.echo(f"llmdiag: internal error: {type(exc).__name__}: {exc}", err=True)
            if os.environ.get("LLMDIAG_DEBUG"):
                traceback.print_exc()
            else:
                click.echo("llmdiag: set LLMDIAG_DEBUG=1 for the traceback, and please report it.", err=True)
            ctx.exit(ExitCode.INTERNAL_ERROR)


@click.group(cls=LlmdiagGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="llmdiag")
def cli() -> None:
    """llmdiag: preflight checks and troubleshooting for distributed LLM training.

    Exit codes: 0 no failure, 1 a check failed, 2 usage or config error,
    3 internal error, 130 interrupted (Ctrl-C), 143 SIGTERM, 129 SIGHUP.
    """


def _interrupted(exc: BaseException) -> int:
    """The message and exit code of an interruption: 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP."""
    from llmdiag.util.procs import exit_code, stop_all

    stop_all()  # children of threads the interruption could not unwind
    code = exit_code(exc)
    click.echo("interrupted" if code == ExitCode.INTERRUPTED else f"llmdiag: terminated by {exc}", err=True)
    return code


def _redact_streams() -> None:
    """stdout and stderr through the reports' redactor: no secret in an error message either."""
    from llmdiag.redact import RedactingStream

    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, RedactingStream):
            setattr(sys, name, RedactingStream(stream, os.environ))


def main(argv: list[str] | None = None) -> None:
    from llmdiag.util.procs import install_signal_handlers, private_tempdir

    install_signal_handlers()
    _redact_streams()
    with private_tempdir():
        try:
            cli.main(args=argv, prog_name="llmdiag")
        except KeyboardInterrupt as exc:
            sys.exit(_interrupted(exc))
