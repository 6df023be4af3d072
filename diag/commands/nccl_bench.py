"""``llmdiag nccl-bench``: collective bandwidth as nccl-tests reports it, plus which node is slow.

Short flags are nccl-tests' (``-b -e -f -w -n -c -d -o -r``), so a command line copied from
nccl-tests works; the options every llmdiag command shares are therefore long-only here
(``--format``, ``--output``, ``--config``).
"""

from __future__ import annotations

import click

from llmdiag.cliutil import config_option, emit_doc, guard_outputs, output_options, setting_flags, setting_option
from llmdiag.exitcodes import ExitCode
from llmdiag.ncclbench.config import COLLECTIVES, Settings


def _long_only(*names: str):
    """Drop the short aliases of shared options whose letters nccl-tests already uses."""

    def deco(fn):
        for param in getattr(fn, "__click_params__", []):
            if param.name in names:
                param.opts = [o for o in param.opts if o.startswith("--")]
        return fn

    return deco


def _corruption(value: str | None) -> tuple[int, int] | None:
    if not value:
        return None
    try:
        rank, _, count = value.partition(":")
        return int(rank), int(count or 1)
    except ValueError:
        from llmdiag.errors import UsageError

        raise UsageError(f"--inject-corruption expects RANK:ELEMENTS, got {value!r}") from None


@click.command("nccl-bench")
@setting_option(Settings, "min_bytes")
@setting_option(Settings, "max_bytes")
@setting_option(Settings, "step_factor")
@setting_option(Settings, "warmup_iters")
@setting_option(Settings, "iters")
@setting_option(Settings, "check", type=click.IntRange(0, 1), metavar="0|1")
@setting_option(Settings, "dtype")
@setting_option(Settings, "op")
@setting_option(Settings, "root")
@setting_option(Settings, "collectives", multiple=True, type=click.Choice(COLLECTIVES + ("all",)))
@setting_option(Settings, "nproc")
@setting_option(Settings, "backend")
@setting_option(Settings, "expected_busbw_gbps", name="expect_busbw")
@click.option("--pairwise", is_flag=True, help="Also measure send/recv between node pairs and name slow ones.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), default=None, help="Also write the rows as CSV.")
@click.option("--inject-corruption", default=None, hidden=True,
              help="Test hook RANK:N: that rank spoils N elements of its result before the check.")
@_long_only("config_path")
@config_option
@_long_only("fmt", "output")
@output_options()
def nccl_bench(min_bytes, max_bytes, step_factor, warmup_iters, iters, check, dtype, op, root, collectives, nproc,
               backend, expect_busbw, pairwise, csv_path, inject_corruption, config_path, fmt, output, width,
               no_color):
    """Benchmark collectives (all_reduce, all_gather, reduce_scatter, broadcast, all_to_all,
    sendrecv) and print nccl-tests' table: algbw, busbw and #wrong, out-of-place and in-place.

    Runs as one rank under torchrun / srun / mpirun, or standalone (one process per local GPU,
    or --nproc CPU processes with gloo). Each row is printed on stderr as it is measured; the
    report (--format, --output, --csv) comes at the end, or with the rows so far when the run
    is interrupted (exit 130), times out or loses a rank (exit 1). On a terminal that shows
    both, the table is not printed twice: the end report gives the footers and findings. Exit code 1 when the
    plateau busbw misses the expectation, an element is wrong, a rank fails, or --pairwise
    finds a slow node or link.
    """
    import os

    from llmdiag.config import Config
    from llmdiag.launcher import parse_launcher
    from llmdiag.ncclbench import launch, verdict
    from llmdiag.ncclbench.config import build_spec

    env = dict(os.environ)
    guard_outputs([("--output", output), ("--csv", csv_path)], config_path=config_path, env=env)
    config = Config.load(config_path, env).with_overrides(setting_flags())
    settings = config.section("nccl_bench")
    spec = build_spec(settings, pairwise=pairwise, inject_corruption=_corruption(inject_corruption))
    info = parse_launcher(env)
    from llmdiag.ncclbench.memcheck import check_fits
    from llmdiag.runner import require_torch

    require_torch("nccl-bench")

    gpus = launch.cuda_device_count()
    backend_used = launch.resolve_backend(spec.backend, gpus)
    fits = check_fits if settings["memory_check"] else (lambda *a, **k: None)
    if info.distributed:
        fits(spec, info.world_size or 1, info.local_world_size or 1, backend_used, info.local_rank)
        rank, world = info.rank, info.world_size or 1
    else:
        world = settings["nproc"] or (gpus if backend_used == "nccl" else 2)
        fits(spec, world, world, backend_used)
        rank = 0

    progress = _live_progress(spec)

    def report(doc) -> None:
        if rank == 0:
            # rows streamed on stderr are on screen already when stdout is the same terminal
            shown = {"rows_shown": len(progress.rows)} if _same_terminal() else None
            emit_doc(doc, fmt, output, width, no_color, env=env, protect=[config_path] if config_path else [],
                     stream_extra=shown)
            if csv_path:
                write_csv(doc, csv_path)

    def partial(reason: str, detail: str):
        return verdict.build_doc(progress.result(world_size=world, backend=backend_used), settings,
                                 progress.stop(reason, detail))

    try:
        if info.distributed:
            result = launch.run_under_launcher(
                spec, info, env, emit=progress.record,
                on_limit=lambda: report(partial("timed out", f"the run passed timeout_s = {spec.timeout_s:g} s")))
        else:
            result = launch.spawn_local(spec, world, env=env, emit=progress.record)
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP: the rows measured so far, then exit 130/143/129
        report(partial("interrupted", "Ctrl-C (SIGINT)" if type(exc) is KeyboardInterrupt else str(exc)))
        raise
    except launch.BenchFailed as exc:
        from llmdiag.ncclbench.failures import first_line

        report(partial(exc.reason, first_line(exc)))
        raise
    doc = verdict.build_doc(result, settings)
    report(doc)
    if doc["status"] == "fail":
        raise SystemExit(ExitCode.CHECKS_FAILED)


def _live_progress(spec):
    """Rank 0's progress, each row printed on stderr as soon as it is measured (nccl-tests
    prints as it goes; a long sweep is not silent, and Ctrl-C keeps what was shown)."""
    import sys

    from llmdiag import documents as D
    from llmdiag.ncclbench.progress import Progress
    from llmdiag.reports.nccl_bench import LiveTable

    table = LiveTable(D.read_part(D.BenchSettings, spec.to_dict()))

    def show(rec) -> None:
        if "world" in rec:
            lines = table.world(D.read_part(D.BenchWorld, rec["world"]))
        elif "row" in rec:
            lines = table.row(D.read_part(D.BenchRow, rec["row"]))
        else:
            lines = []
        for line in lines:
            print(line, file=sys.stderr, flush=True)

    return Progress(spec, show)


def _same_terminal() -> bool:
    """Whether stdout and stderr are one terminal (a user watching the run: each row is printed
    once there, as nccl-tests does); a pipe, a file or two terminals get everything."""
    import os
    import sys

    try:
        return sys.stdout.isatty() and sys.stderr.isatty() and os.path.samestat(
            os.fstat(sys.stdout.fileno()), os.fstat(sys.stderr.fileno()))
    except (OSError, ValueError, AttributeError):  # a replaced stream without a descriptor
        return False


def csv_rows(doc) -> tuple[list[str], list[dict]]:
    """The rows flat, one column per nccl-tests column: (header, rows); N/A cells are empty."""
    header = ["collective", "size", "count", "type", "redop", "root"]
    for prefix in ("oop", "ip"):
        header += [f"{prefix}_{field}" for field in ("time_us", "algbw", "busbw", "wrong")]
    records = []
    for r in doc["results"]:
        rec = {k: r[k] for k in ("collective", "size", "count", "type", "redop", "root")}
        for key, prefix in (("out_of_place", "oop"), ("in_place", "ip")):
            cell = r.get(key) or {}
            for field in ("time_us", "algbw", "busbw", "wrong"):
                rec[f"{prefix}_{field}"] = cell.get(field)
        records.append(rec)
    return header, records


def write_csv(doc, path: str) -> None:
    from llmdiag.util.files import write_output

    import csv
    import io

    header, rows = csv_rows(doc)
    buf = io.StringIO()
    out = csv.DictWriter(buf, fieldnames=header, lineterminator="\n")
    out.writeheader()
    out.writerows(rows)
    write_output(path, buf.getvalue(), "--csv")
