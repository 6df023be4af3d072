"""``llmdiag alerting``: write the Prometheus rules, the Grafana dashboard and the Alertmanager
route for llmdiag's metrics (docs/alerting.md has the recipe)."""

from __future__ import annotations

import click
from llmdiag.util.clitypes import SuggestingGroup


def _out(fn):
    return click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
                        help="Write to FILE instead of stdout (atomically).")(fn)


def _rule_options(fn):
    fn = click.option("--label", "labels", multiple=True, metavar="KEY=VALUE",
                      help="A label every alert gets (e.g. team=training); repeatable.")(fn)
    fn = click.option("--stale-after", "stale_s", type=click.IntRange(5, 86400), default=None,
                      help="Seconds without a monitor sample before LlmdiagNodeSilent (default 60).")(fn)
    fn = click.option("--runbook-url", default=None, metavar="URL",
                      help="Base URL of the runbooks: alerts link URL/<id>.md (e.g. your copy of runbooks/).")(fn)
    return fn


def _write(text: str, output: str | None) -> None:
    if output in (None, "-"):
        click.echo(text, nl=False)
        return
    from llmdiag.outputs import check_output_path, write_output

    write_output(check_output_path(output), text)


def _rules_text(runbook_url, stale_s, labels) -> str:
    from llmdiag.alerting import rules
    from llmdiag.errors import UsageError

    extra = {}
    for item in labels:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier() or key in ("severity", "alertname"):
            raise UsageError(f"--label {item!r}: expected KEY=VALUE with KEY a label name other than severity")
        extra[key] = value
    return rules.rules_yaml(runbook_url=runbook_url, stale_s=stale_s or rules.STALE_S, extra_labels=extra)


def _alertmanager_text(url_file, channel) -> str:
    from llmdiag.alerting import alertmanager

    return alertmanager.config_yaml(url_file=url_file, channel=channel)


@click.group(cls=SuggestingGroup)
def alerting():
    """Prometheus rules, a Grafana dashboard and Alertmanager routing for llmdiag's metrics."""


@alerting.command("rules")
@_rule_options
@_out
def rules_cmd(runbook_url, stale_s, labels, output):
    """The Prometheus alerting rules (loss NaN/spike, GPU memory, Xid, ECC, throttling, temperature,
    host memory, a node that stopped reporting, preflight failures, busbw below the expected)."""
    _write(_rules_text(runbook_url, stale_s, labels), output)


@alerting.command("dashboard")
@click.option("--title", default="llmdiag", show_default=True, help="Dashboard title.")
@_out
def dashboard_cmd(title, output):
    """The Grafana dashboard (JSON to import; pick the Prometheus data source when importing)."""
    from llmdiag.alerting import dashboard

    _write(dashboard.dashboard_json(title), output)


def _am_options(fn):
    fn = click.option("--channel", default="#gpu-alerts", show_default=True, help="Chat channel.")(fn)
    fn = click.option("--webhook-url-file", "url_file", default="/etc/alertmanager/llmdiag-webhook-url",
                      show_default=True, metavar="FILE",
                      help="File holding the chat webhook URL (Slack incoming webhook or compatible).")(fn)
    return fn


@alerting.command("alertmanager")
@_am_options
@_out
def alertmanager_cmd(url_file, channel, output):
    """An Alertmanager config routing llmdiag's alerts to a chat webhook (Slack-compatible JSON)."""
    _write(_alertmanager_text(url_file, channel), output)


@alerting.command("write")
@click.argument("directory", type=click.Path(file_okay=False))
@_rule_options
@_am_options
def write_cmd(directory, runbook_url, stale_s, labels, url_file, channel):
    """All three into DIRECTORY: llmdiag-rules.yml, llmdiag-dashboard.json, alertmanager-llmdiag.yml."""
    import os

    from llmdiag.alerting import dashboard
    from llmdiag.errors import UsageError
    from llmdiag.outputs import check_outputs, write_output

    if not os.path.isdir(directory):
        raise UsageError(f"{directory} is not a directory")
    files = {"llmdiag-rules.yml": _rules_text(runbook_url, stale_s, labels),
             "llmdiag-dashboard.json": dashboard.dashboard_json(),
             "alertmanager-llmdiag.yml": _alertmanager_text(url_file, channel)}
    paths = check_outputs([(name, os.path.join(directory, name)) for name in files])
    for name, text in files.items():
        write_output(paths[name], text, name)
        click.echo(paths[name])
