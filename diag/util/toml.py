"""TOML parsing on every supported Python: ``tomllib`` from 3.11, the same parser as ``tomli`` on 3.10."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    from tomllib import TOMLDecodeError, loads
else:  # pragma: no cover - Python 3.10
    from tomli import TOMLDecodeError, loads

__all__ = ["TOMLDecodeError", "loads"]
