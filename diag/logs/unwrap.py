"""Terminal-wrapped lines and progress bars.

A terminal (or ``tmux``/``screen`` capture) cuts long lines at the column width, so a
watchdog message can continue on the next physical line: ``NumelOut=5`` / ``496064, ...``.
A message is *incomplete* when it opened a ``WorkNCCL(`` without closing it, ends in the
middle of a ``key=value`` list, or ends inside ``CUDA error:`` (``... with exception: CUDA erro``); the
following line is then glued on without a separator.
Progress bars redraw with ``\\r``; the reader already splits those into segments.
"""

from __future__ import annotations

_OPENERS = ("WorkNCCL(",)
#: a watchdog message cut right before its WorkNCCL(...) record
_CUT_BEFORE = ("operation timeout:",)
#: words a message can be cut inside ("... terminated with exception: CUDA erro" / "r: unspecified launch failure")
_CUT_INSIDE = ("CUDA error:",)
#: the shortest cut piece that counts (shorter ends are ordinary words)
_MIN_CUT = 4


def _cut_inside(msg: str) -> bool:
    for word in _CUT_INSIDE:
        for k in range(_MIN_CUT, len(word)):
            if msg.endswith(word[:k]) and (len(msg) == k or not msg[-k - 1].isalnum()):
                return True
    return False


def needs_continuation(msg: str) -> bool:
    if msg.endswith(_CUT_BEFORE) or msg.rstrip().endswith(_CUT_BEFORE) or _cut_inside(msg):
        return True
    for opener in _OPENERS:
        i = msg.rfind(opener)
        if i >= 0 and msg.find(")", i) < 0 or (i >= 0 and "Timeout(ms)" in msg[i:] and
                                                   msg.rstrip().endswith(("Timeout(ms", "Timeout("))):
            return True
        if i >= 0:
            # "Timeout(ms)=1800000)" holds one nested pair; the work is closed by the second ')'
            tail = msg[i + len(opener):]
            depth = 1
            for ch in tail:
                depth += (ch == "(") - (ch == ")")
                if depth == 0:
                    break
            if depth > 0:
                return True
    return False


def join_wrapped(first: str, following: list[str]) -> str:
    """Glue continuation lines to ``first`` until the message is complete (at most len(following))."""
    text = first.rstrip("\n")
    for nxt in following:
        if not needs_continuation(text):
            break
        text = text + (" " if text.endswith(":") else "") + nxt.strip("\n")
    return text


def last_segment(line: str) -> str:
    """What a progress bar finally showed: the text after the last carriage return."""
    i = line.rstrip("\r").rfind("\r")
    return line if i < 0 else line[i + 1:]
