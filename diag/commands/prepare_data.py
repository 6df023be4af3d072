"""``llmdiag prepare-data SOURCE OUTPUT``: text file or directory → the trainer's token file."""

from __future__ import annotations

import click

from llmdiag.errors import UsageError


@click.command()
@click.argument("source", type=click.Path(path_type=str))
@click.argument("output", type=click.Path(path_type=str))
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def prepare_data(source: str, output: str, force: bool, quiet: bool) -> None:
    """Tokenise SOURCE (a text file, or every text file under a directory) byte-level into OUTPUT.

    Documents are separated by an end-of-text token. OUTPUT is written to a temporary name and
    renamed at the end; an existing OUTPUT is kept unless --force. Exit 2 on bad input.
    """
    import os
    from pathlib import Path

    from llmdiag.trainer import prepare

    try:
        inputs = prepare.find_inputs(source)
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    if not inputs:
        raise UsageError(f"{source}: no text files ({', '.join(prepare.TEXT_SUFFIXES)}) found")
    from llmdiag.outputs import check_outputs

    check_outputs([("OUTPUT", output)], [("SOURCE", str(p)) for p in inputs])  # llmdiag's output rules
    out = Path(output)
    if out.exists() and not force:
        raise UsageError(f"{out} exists; pass --force to replace it")
    if out.is_dir():
        raise UsageError(f"{out} is a directory; give a file name")
    if any(out.resolve() == p.resolve() for p in inputs):
        raise UsageError(f"{out} is one of the inputs; choose another output")
    if not out.parent.is_dir():
        raise UsageError(f"{out.parent}: directory does not exist")
    total = sum(os.path.getsize(p) for p in inputs)
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    with Progress(TextColumn("tokenising"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  disable=quiet, transient=False) as bar:
        task = bar.add_task("tokenising", total=total)
        try:
            header = prepare.prepare(inputs, out, force=force, progress=lambda n: bar.advance(task, n))
        except OSError as exc:
            raise UsageError(f"cannot write {out}: {exc.strerror or exc}") from None
    click.echo(f"wrote {out}: {header.count} tokens (uint{header.token_bytes * 8}) from {len(inputs)} file(s)")
