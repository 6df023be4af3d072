"""``llmdiag runbook [ID]``: list the runbooks, or print one."""

from __future__ import annotations

import click

from llmdiag.errors import UsageError


@click.command()
@click.argument("runbook_id", required=False)
def runbook(runbook_id: str | None) -> None:
    """Without ID, list every runbook; with ID, print it (Markdown)."""
    from llmdiag import runbooks

    if not runbook_id:
        for rid in runbooks.ids():
            click.echo(f"{rid:<32} {runbooks.title(rid)}")
        return
    if not runbooks.exists(runbook_id):
        hint = runbooks.suggest(runbook_id)
        more = f"; did you mean {', '.join(hint)}?" if hint else "; `llmdiag runbook` lists them"
        raise UsageError(f"no runbook {runbook_id!r}{more}")
    click.echo(runbooks.text(runbook_id), nl=False)
