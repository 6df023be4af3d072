"""One module per ``llmdiag`` subcommand (wired in :mod:`llmdiag.cli`)."""
