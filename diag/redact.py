"""Secrets never leave the machine in a report.

Every output format is rendered from a plain dict that first goes through :func:`redact_doc`:
- values under keys that look like credential names (TOKEN, SECRET, PASSWORD, KEY, ...);
- ``NAME=value`` / ``--password value`` pairs inside strings (command lines, env dumps);
- strings in known credential formats (AWS access keys, ``hf_`` / GitHub / Slack / OpenAI
  tokens, bearer tokens, JWTs, private-key blocks, ``user:password@`` in URLs);
- and any literal value of a credential-named variable of the current environment,
  wherever it appears (a token pasted into an unrelated argument).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***REDACTED***"

_SECRET_NAME = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|PWD$|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|"
    r"(^|_)KEY($|_)|AUTHORIZATION|COOKIE|SESSION_?ID|SIGNATURE|WEBHOOK)",
    re.IGNORECASE,
)
# Names that contain a trigger word but are not secrets.
_NOT_SECRET = re.compile(r"^(PWD|OLDPWD|KEYBOARD.*|.*_KEYMAP|XAUTHORITY|SSH_AUTH_SOCK|GPG_AGENT_INFO)$", re.I)

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # -----BEGIN ... PRIVATE KEY----- blocks
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)"), MASK),
    # user:password@host in URLs
    (re.compile(r"(?P<pre>[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]+:)[^@\s/]+(?P<post>@)"), r"\g<pre>" + MASK + r"\g<post>"),
    # Authorization: Bearer xxx / Basic xxx
    (re.compile(r"(?P<pre>\b(?:Bearer|Basic|Token)\s+)[A-Za-z0-9._~+/=-]{8,}", re.I), r"\g<pre>" + MASK),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), MASK),
    (re.compile(r"\bASIA[0-9A-Z]{16}\b"), MASK),
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"), MASK),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"), MASK),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b"), MASK),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b"), MASK),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{20,}\b"), MASK),
    (re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}\b"), MASK),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), MASK),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\b"), MASK),
    # NAME=value with a credential-looking NAME (env dumps, command lines)
    (
        re.compile(
            r"(?P<pre>\b[A-Za-z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY)"
            r"[A-Za-z0-9_]*\s*[=:]\s*)(?P<q>['\"]?)[^\s'\",;]+(?P=q)",
            re.I,
        ),
        r"\g<pre>" + MASK,
    ),
    # --password VALUE / --token=VALUE / --api-key VALUE
    (
        re.compile(r"(?P<pre>--?(?:[a-z0-9]+[-_])*(?:password|passwd|token|secret|api[-_]?key|access[-_]?key)(?:[ =]))[^\s]+", re.I),
        r"\g<pre>" + MASK,
    ),
]


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name)) and not _NOT_SECRET.match(name)


def secret_values(env: Mapping[str, str] | None) -> list[str]:
    """Values of credential-named variables worth searching for (long enough to be specific)."""
    if not env:
        return []
    vals = {v for k, v in env.items() if v and len(v) >= 6 and is_secret_name(k)}
    return sorted(vals, key=len, reverse=True)


def redact_text(text: str, literals: Iterable[str] = ()) -> str:
    for lit in literals:
        if lit in text:
            text = text.replace(lit, MASK)
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return text


def redact_doc(doc: Any, env: Mapping[str, str] | None = None) -> Any:
    """A copy of ``doc`` (dicts, lists, strings) with every secret replaced by the mask."""
    literals = secret_values(env)

    def walk(value: Any, key: str | None = None) -> Any:
        if isinstance(value, Mapping):
            out = {k: walk(v, str(k)) for k, v in value.items()}
            # {"name": "HF_TOKEN", "observed": "..."}: evidence about a credential variable
            name = value.get("name")
            if isinstance(name, str) and is_secret_name(name):
                for field in ("observed", "expected", "value"):
                    if isinstance(out.get(field), str) and out[field]:
                        out[field] = MASK
            return out
        if isinstance(value, list):
            return [walk(v, key) for v in value]
        if isinstance(value, tuple):
            return [walk(v, key) for v in value]
        if isinstance(value, str):
            if key is not None and is_secret_name(key) and value:
                return MASK
            return redact_text(value, literals)
        return value

    return walk(doc)
