"""Calls that may hang (stat on a dead NFS mount, DNS) run in a daemon thread with a bound.

A thread blocked in the kernel cannot be killed; it is abandoned and dies with the process.
That is the price of never letting the thing we diagnose hang the diagnostic.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class Hung(Exception):
    """The call did not return within its bound."""


def call_bounded(fn: Callable[..., Any], timeout: float, *args: Any) -> Any:
    """``fn(*args)`` or raise :class:`Hung` after ``timeout`` s; exceptions of ``fn`` propagate."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            box["error"] = exc

    t = threading.Thread(target=target, name="llmdiag-bounded", daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise Hung(f"no answer within {timeout:.3g} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")
