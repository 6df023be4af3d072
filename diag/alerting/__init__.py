"""What operators run on llmdiag's metrics: Prometheus alerting rules (:mod:`.rules`), a Grafana
dashboard (:mod:`.dashboard`) and an Alertmanager route to a chat channel (:mod:`.alertmanager`),
each declared once in Python and written by ``llmdiag alerting``. The recipe: docs/alerting.md.
"""
