"""One module per ``llmdiag`` subcommand (wired in :mod:`diag.cli`)."""
