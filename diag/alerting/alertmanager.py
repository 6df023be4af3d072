"""An Alertmanager configuration that routes llmdiag's alerts to a chat channel, written by
``llmdiag alerting alertmanager``.

Delivery is Alertmanager's own Slack integration (the same JSON Mattermost, Rocket.Chat and
most chat webhooks accept); llmdiag sends nothing itself. The webhook URL is read from a
file (``api_url_file``), so the secret is in neither this file nor llmdiag's output. Critical
alerts repeat sooner than warnings; alerts are grouped by alert name and node.
"""

from __future__ import annotations

from typing import Any

TITLE = '[{{ .Status | toUpper }}] {{ .CommonLabels.alertname }} on {{ .CommonLabels.node }}'
TEXT = ('{{ range .Alerts }}*{{ .Labels.severity }}* {{ .Annotations.summary }}\n{{ .Annotations.description }}\n'
        'node: {{ .Labels.node }} · runbook: `{{ .Annotations.runbook_command }}`'
        '{{ if .Annotations.runbook_url }} {{ .Annotations.runbook_url }}{{ end }}\n{{ end }}')


def config(*, url_file: str, channel: str, group_wait: str = "30s", group_interval: str = "5m",
           repeat_interval: str = "4h") -> dict[str, Any]:
    def slack(name: str) -> dict[str, Any]:
        return {"name": name, "slack_configs": [{
            "api_url_file": url_file, "channel": channel, "send_resolved": True, "title": TITLE, "text": TEXT}]}

    return {
        "route": {"receiver": "llmdiag-chat", "group_by": ["alertname", "node"], "group_wait": group_wait,
                  "group_interval": group_interval, "repeat_interval": repeat_interval,
                  "routes": [{"receiver": "llmdiag-page", "matchers": ['severity="critical"'],
                              "repeat_interval": "1h"}]},
        "receivers": [slack("llmdiag-chat"), slack("llmdiag-page")],
        "inhibit_rules": [{"source_matchers": ['alertname="LlmdiagNodeSilent"'],
                           "target_matchers": ['alertname=~"LlmdiagGpu.*|LlmdiagHost.*"'], "equal": ["node"]}],
    }


def config_yaml(**kw: Any) -> str:
    import yaml

    head = ("# Alertmanager routing for llmdiag's alerts (written by `llmdiag alerting alertmanager`).\n"
            "# Put the chat webhook URL (Slack incoming webhook or compatible) in the api_url_file.\n")
    return head + yaml.safe_dump(config(**kw), sort_keys=False, width=100, allow_unicode=True)
