"""Planted secrets must appear in no output format, from the environment or command lines."""

from __future__ import annotations

import json
import subprocess

import pytest

from llmdiag.redact import MASK, redact_doc, redact_text
from llmdiag.result import ClusterReport, Evidence, NodeReport, Result, Status
from llmdiag.reports.base import FORMATS, RenderOptions, find_renderer, render
from tests.conftest import cli_env, llmdiag_argv
from tests.unit.test_plugins import install_fake_distribution

SECRETS = {
    "HF_TOKEN": "hf_" + "a1B2c3D4e5F6g7H8i9J0kLmNoPqRsTuV",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "AWS_ACCESS_KEY_ID": "AKIA" + "IOSFODNN7EXAMPLE",
    "WANDB_API_KEY": "0123456789abcdef0123456789abcdef01234567",
    "DB_PASSWORD": "correct-horse-battery",
}
IN_TEXT = [
    ("https://alice:s3cr3tpass@git.example.com/repo.git", "s3cr3tpass"),
    ("curl -H 'Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345'", "abcdefghijklmnopqrstuvwxyz012345"),
    ("python train.py --hf-token hf_zzzzzzzzzzzzzzzzzzzzzzzzzzzzzz --lr 3e-4", "hf_zzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"),
    ("deploy --password=hunter2hunter2 --verbose", "hunter2hunter2"),
    ("env: GITHUB_TOKEN=ghp_123456789012345678901234567890123456", "ghp_123456789012345678901234567890123456"),
    ("key AKIAABCDEFGHIJKLMNOP used", "AKIAABCDEFGHIJKLMNOP"),
    ("slack xoxb-1234567890-abcdefghij", "xoxb-1234567890-abcdefghij"),
]


@pytest.mark.parametrize("text, secret", IN_TEXT)
def test_known_formats_in_text(text, secret):
    out = redact_text(text)
    assert secret not in out and MASK in out


def test_harmless_text_untouched():
    for text in ["NCCL_SOCKET_IFNAME=eth0", "loss 3.2 at step 10", "keyboard layout us", "monkey=1",
                 "/home/user/keys/", "tokens_per_s=1200"]:
        assert redact_text(text) == text


def _planted_report() -> dict:
    cmdline = "torchrun train.py " + " ".join(t for t, _ in IN_TEXT)
    results = (
        Result(probe="software", check="env", node="n1", status=Status.PASS, summary="environment",
               data={"env": dict(SECRETS, NCCL_DEBUG="INFO")}),
        Result(probe="software", check="cmdline", node="n1", status=Status.WARN, summary=f"job command: {cmdline}",
               evidence=(Evidence("HF_TOKEN", SECRETS["HF_TOKEN"], None, ""),
                         Evidence("argv", f"--note {SECRETS['DB_PASSWORD']}", None, "")),
               remediation=f"unset WANDB_API_KEY={SECRETS['WANDB_API_KEY']}", runbook="probe-error"),
    )
    return ClusterReport(command="preflight", nodes=(NodeReport(node="n1", results=results),)).to_dict()


def _all_secrets():
    return list(SECRETS.values()) + [s for _, s in IN_TEXT]


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_secret_in_any_format(fmt):
    doc = redact_doc(_planted_report(), env=SECRETS)
    if find_renderer("cluster", fmt) is None:
        pytest.skip(f"no {fmt} renderer in this build")
    text = render(doc, fmt, RenderOptions(width=200))
    for s in _all_secrets():
        assert s not in text, (fmt, s)
    assert "NCCL_DEBUG" in json.dumps(doc)  # unrelated variables stay


def test_end_to_end_preflight_planted_secret(tmp_path):
    """Secrets in the environment and on a plugin's command line never reach stdout."""
    (tmp_path / "leaky.py").write_text(
        "from llmdiag.probe import BaseProbe\n"
        "class Leaky(BaseProbe):\n    name='leaky'\n    description='reports env and argv'\n"
        "    def run(self, ctx):\n"
        "        yield self.fail(ctx, 'env', 'argv: --token ' + ctx.env['HF_TOKEN'] + ' url ' + ctx.env['REPO_URL'],"
        " remediation='x', runbook='probe-error', data={'env': dict(ctx.env)},"
        " evidence=[('AWS_SECRET_ACCESS_KEY', ctx.env['AWS_SECRET_ACCESS_KEY'], None, '')])\n"
    )
    install_fake_distribution(tmp_path, {"leaky": "leaky:Leaky"})
    env = cli_env(**SECRETS, REPO_URL="https://bob:pa55w0rd-xyz@example.com/x.git")
    env["PYTHONPATH"] = f"{tmp_path}:{env['PYTHONPATH']}"
    for fmt in ("terminal", "json", "markdown"):
        proc = subprocess.run(llmdiag_argv("preflight", "--probe", "leaky", "-f", fmt, "--width", "250"),
                              capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 1, proc.stderr
        out = proc.stdout + proc.stderr
        for s in list(SECRETS.values()) + ["pa55w0rd-xyz"]:
            assert s not in out, (fmt, s)
        assert MASK in out


@pytest.mark.parametrize("name", ["HF_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "dbPassword", "GITHUB_TOKEN",
                                  "OPENAI_KEY", "MY_CLIENT_SECRET", "NCCL_IB_AUTH_TOKEN"])
def test_secret_names(name):
    from llmdiag.redact import is_secret_name

    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["PWD", "tokens_per_s", "max_tokens", "KEYBOARD", "NCCL_SOCKET_IFNAME", "runbook",
                                  "summary", "SSH_AUTH_SOCK", "monkey"])
def test_not_secret_names(name):
    from llmdiag.redact import is_secret_name

    assert not is_secret_name(name)
