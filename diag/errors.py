"""Exceptions that the CLI turns into clear messages and exit codes, never tracebacks."""

from __future__ import annotations


class LlmdiagError(Exception):
    """Base class: ``str(err)`` is shown to the user as is."""

    exit_code = 3


class UsageError(LlmdiagError):
    """Bad flags, bad input file, bad value: exit code 2."""

    exit_code = 2


class ConfigError(UsageError):
    """A configuration value is wrong; the message names the field and the accepted range."""

    def __init__(self, field: str, message: str, source: str | None = None):
        self.field = field
        self.source = source
        where = f" (in {source})" if source else ""
        super().__init__(f"config error{where}: {field}: {message}")


class PluginError(LlmdiagError):
    """A probe plugin breaks the probe contract; the message names the plugin and the rule."""

    exit_code = 2


class BuiltinError(LlmdiagError):
    """A part of llmdiag itself (a built-in probe, command, config section or renderer) failed
    to import: a broken install, never skipped silently. Exit code 3."""

    exit_code = 3
