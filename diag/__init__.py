"""llmdiag core: CLI wiring, probe contract, context, config, runner, results."""

__version__ = "0.1.0"
