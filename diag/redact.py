"""Secrets never leave the machine: not in a report, not in an error message or a log line.

Every output format is rendered from a plain dict that first goes through :func:`redact_doc`:
- values under keys that look like credential names (TOKEN, SECRET, PASSWORD, KEY, ...);
- ``NAME=value`` / ``--password value`` pairs inside strings (command lines, env dumps);
- strings in known credential formats (AWS access keys, ``hf_`` / GitHub / Slack / OpenAI
  tokens, bearer tokens, JWTs, private-key blocks, ``user:password@`` in URLs);
- and any literal value of a credential-named variable of the current environment,
  wherever it appears (a token pasted into an unrelated argument).

:class:`RedactingStream` applies the same redactor to stdout and stderr (the CLI wraps both).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***REDACTED***"

_SECRET_WORDS = {
    "token", "secret", "password", "passwd", "passphrase", "pwd", "credential", "credentials",
    "apikey", "cookie", "signature", "webhook", "authorization", "privatekey", "accesskey", "secretkey",
}
_SECRET_PAIRS = {("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key"), ("session", "id"),
                 ("auth", "token"), ("client", "secret")}
# Names that look like credentials but are not.
_NOT_SECRET = {"pwd", "oldpwd", "xauthority", "ssh_auth_sock", "gpg_agent_info", "keyboard"}
_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
_SECRET_WORD_RE = r"(?:TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIALS?|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY)"

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # -----BEGIN ... PRIVATE KEY----- blocks
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)"), MASK),
    # user:password@host in URLs
    # (also "scheme:/" with one slash: a URL that went through a path normalisation)
    (re.compile(r"(?P<pre>[a-zA-Z][a-zA-Z0-9+.-]*:/{1,3}[^/\s:@]+:)[^@\s/]+(?P<post>@)"), r"\g<pre>" + MASK + r"\g<post>"),
    # Authorization: Bearer xxx / Basic xxx
    (re.compile(r"(?P<pre>\b(?:Bearer|Basic|Token)\s+)[A-Za-z0-9._~+/=-]{8,}", re.I), r"\g<pre>" + MASK),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), MASK),
    (re.compile(r"\bASIA[0-9A-Z]{16}\b"), MASK),
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"), MASK),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"), MASK),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b"), MASK),
    (re.compile(r"\bxox[a-z]-[A-Za-z0-9-]{10,}\b"), MASK),  # Slack bot/user/app/refresh tokens
    (re.compile(r"\bxapp-[A-Za-z0-9-]{10,}\b"), MASK),
    # Slack / Discord / Teams-style webhook URLs: the path after the host is the credential
    (re.compile(r"(?P<pre>https?://hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9/_-]+"),
     r"\g<pre>" + MASK),
    (re.compile(r"(?P<pre>https?://(?:[a-z]+\.)?discord(?:app)?\.com/api/webhooks/)[A-Za-z0-9/_-]+"),
     r"\g<pre>" + MASK),
    (re.compile(r"\bnvapi-[A-Za-z0-9_-]{20,}"), MASK),  # NVIDIA NGC / build.nvidia.com
    (re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b"), MASK),  # Stripe
    (re.compile(r"\bnpm_[A-Za-z0-9]{30,}\b"), MASK),
    (re.compile(r"\bpypi-[A-Za-z0-9_-]{50,}"), MASK),
    (re.compile(r"\bya29\.[A-Za-z0-9_-]{20,}"), MASK),  # Google OAuth access token
    # signed URLs: Azure SAS sig=, AWS / GCS presigned signatures and credentials
    (re.compile(r"(?P<pre>[?&](?:sig|X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token|X-Goog-Signature|"
                r"X-Goog-Credential)=)[^&\s\"'<>]+", re.I), r"\g<pre>" + MASK),
    # HTTP headers carrying a credential: X-Api-Key: v, Api-Key: v, Private-Token: v, X-Auth-Token: v
    (re.compile(r"(?P<pre>\b(?:X-)?(?:Api-Key|Auth-Token|Access-Token|Private-Token|Goog-Api-Key|Vault-Token)"
                r"\s*[:=]\s*)(?P<q>['\"]?)[^\s'\",;]+(?P=q)", re.I), r"\g<pre>" + MASK),
    # wandb login <key>, huggingface-cli login --token <t>, docker login -p <p>, curl -u user:password
    (re.compile(r"(?P<pre>\bwandb\s+login\s+(?:--?[a-z-]+(?:[= ]\S+)?\s+)*)(?!-)\S+", re.I), r"\g<pre>" + MASK),
    (re.compile(r"(?P<pre>\b(?:docker|podman|helm|oras|nerdctl)\s+(?:\S+\s+)*?login\b[^\n]*?\s-p\s*)\S+"),
     r"\g<pre>" + MASK),
    (re.compile(r"(?P<pre>\bcurl\b[^\n]*?\s(?:-u|--user)\s*[^\s:]+:)\S+"), r"\g<pre>" + MASK),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{20,}\b"), MASK),
    (re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}\b"), MASK),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), MASK),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\b"), MASK),
    # NAME=value with a credential-looking NAME (env dumps, command lines)
    (
        re.compile(
            r"(?P<pre>(?<![A-Za-z0-9])(?:[A-Za-z0-9]+_)*" + _SECRET_WORD_RE + r"(?:_[A-Za-z0-9]+)*"
            r"\s*[=:]\s*)(?P<q>['\"]?)[^\s'\",;]+(?P=q)",
            re.I,
        ),
        r"\g<pre>" + MASK,
    ),
    # --password VALUE / --token=VALUE / --api-key VALUE
    (
        re.compile(r"(?P<pre>--?(?:[a-z0-9]+[-_])*(?:password|passwd|passphrase|token|secret|api[-_]?key|access[-_]?key|"
                   r"auth[-_]?key|private[-_]?key|credentials?)(?:\s+|=))(?!-)[^\s]+", re.I),
        r"\g<pre>" + MASK,
    ),
]


def is_secret_name(name: str) -> bool:
    """True for names like HF_TOKEN, WANDB_API_KEY, dbPassword, AWS_SECRET_ACCESS_KEY.

    Words are compared whole, so ``tokens_per_s`` or ``max_tokens`` are not secrets.
    """
    if not name or name.lower() in _NOT_SECRET:
        return False
    words = [w.lower() for w in _SPLIT.split(name) if w]
    if any(w in _SECRET_WORDS for w in words):
        return True
    if any(pair in _SECRET_PAIRS for pair in zip(words, words[1:])):
        return True
    return len(words) > 1 and words[-1] == "key" or words == ["key"]


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


class RedactingStream:
    """A text stream (stdout, stderr) that redacts what goes through it, line by line, with the
    redactor of the reports: error messages and log lines carry no secret either. A partial
    line waits for its end (or a flush), so a secret split across writes is still caught."""

    MAX_PENDING = 1 << 16

    def __init__(self, stream: Any, env: Mapping[str, str] | None = None) -> None:
        self._stream = stream
        self._literals = secret_values(env)
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        cut = self._pending.rfind("\n") + 1
        if cut == 0 and len(self._pending) < self.MAX_PENDING:
            return len(text)
        if cut == 0:
            cut = len(self._pending)
        out, self._pending = self._pending[:cut], self._pending[cut:]
        self._stream.write(redact_text(out, self._literals))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._pending:
            out, self._pending = self._pending, ""
            self._stream.write(redact_text(out, self._literals))
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, buffer ...
        return getattr(self._stream, name)


def redact_doc(doc: Any, env: Mapping[str, str] | None = None) -> Any:
    """A copy of ``doc`` (dicts, lists, strings) with every secret replaced by the mask."""
    literals = secret_values(env)
    # a big document repeats its strings (file names in step rows) and keys: each is checked once
    texts: dict[str, str] = {}
    secret_keys: dict[str, bool] = {}

    def secret_key(key: str) -> bool:
        hit = secret_keys.get(key)
        if hit is None:
            hit = secret_keys[key] = is_secret_name(key)
        return hit

    def walk(value: Any, key: str | None = None) -> Any:
        t = type(value)
        if t is int or t is float or t is bool or value is None:
            return value
        if t is str:
            if key is not None and value and secret_key(key):
                return MASK
            out = texts.get(value)
            if out is None:
                out = texts[value] = redact_text(value, literals)
            return out
        if isinstance(value, Mapping):
            out = {k: walk(v, str(k)) for k, v in value.items()}
            # {"name": "HF_TOKEN", "observed": "..."}: evidence about a credential variable
            name = value.get("name")
            if isinstance(name, str) and is_secret_name(name):
                for field in ("observed", "expected", "value"):
                    if isinstance(out.get(field), str) and out[field]:
                        out[field] = MASK
            return out
        if isinstance(value, (list, tuple)):
            return [walk(v, key) for v in value]
        if isinstance(value, str):
            return walk(str(value), key)
        return value

    return walk(doc)
