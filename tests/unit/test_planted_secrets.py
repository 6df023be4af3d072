"""Planted secrets never come out (issue 14): each credential shape is planted in the
environment, the command line, the config file and the log content of real runs; stdout,
stderr and every file the runs write are searched for it."""

from __future__ import annotations

import secrets
import subprocess

import pytest

from tests.conftest import cli_env, llmdiag_argv


def _tok(n: int, alphabet: str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def planted() -> dict[str, tuple[str, str]]:
    """name -> (text as it appears in a log or command line, the secret part that must not leak)."""
    s = {}

    def add(name, secret, context):
        s[name] = (context.format(secret), secret)

    add("ngc", "nvapi-" + _tok(64), "export NGC_KEY={}")
    add("slack_webhook", f"T{_tok(8).upper()}/B{_tok(8).upper()}/{_tok(24)}",
        "posting to https://hooks.slack.com/services/{}")
    add("slack_bot", "xoxb-" + _tok(10, "0123456789") + "-" + _tok(24), "slack client {} ready")
    add("slack_user", "xoxp-" + _tok(12, "0123456789") + "-" + _tok(20), "SLACK={}")
    add("azure_sas", _tok(43) + "%3D", "downloading https://acct.blob.core.windows.net/ds/shard0?sv=2022-11-02&sr=b&sig={}&se=2030-01-01")
    add("wandb_login", _tok(40, "0123456789abcdef"), "running: wandb login {}")
    add("x_api_key", _tok(32), "request headers: X-Api-Key: {}")
    add("github", "ghp_" + _tok(36), "git clone https://github.com/o/r (token {})")
    add("github_pat", "github_pat_" + _tok(22) + "_" + _tok(59), "GH={}")
    add("openai", "sk-proj-" + _tok(40), "client = OpenAI(api_key={})")
    add("private_key", _tok(64), "-----BEGIN RSA PRIVATE KEY-----\nMIIEow{}\n-----END RSA PRIVATE KEY-----")
    add("password_flag", "Pw" + _tok(14), "launcher.sh --password {} --nodes 2")
    add("token_flag", "Tk" + _tok(18), "uploader --token {} --verbose")
    add("url_password", "Up" + _tok(12), "fetching https://alice:{}@data.example.com/shard.bin")
    add("hf", "hf_" + _tok(34), "huggingface token hf={}")
    add("aws", "AKIA" + _tok(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"), "aws key {}")
    add("bearer", _tok(40), "Authorization: Bearer {}")
    add("stripe", "sk_live_" + _tok(24), "STRIPE={}")
    add("discord", f"{_tok(18, '0123456789')}/{_tok(60)}", "hook https://discord.com/api/webhooks/{}")
    add("gcs_signed", _tok(64, "0123456789abcdef"),
        "https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Signature={}")
    add("docker_login", "Dk" + _tok(16), "docker login -u svc -p {} nvcr.io")
    return s


KEEP = ("GPU-5f6b1c2e-8d3a-4b7e-9c1d-2e3f4a5b6c7d",
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")


def test_planted_secrets_never_leave(tmp_path):
    shapes = planted()
    env_secrets = {"HF_TOKEN": "hf_" + _tok(34), "WANDB_API_KEY": _tok(40, "0123456789abcdef"),
                   "NGC_API_KEY": "nvapi-" + _tok(64), "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/"
                   + _tok(30), "DB_PASSWORD": "Db" + _tok(14), "AZURE_STORAGE_SAS_TOKEN": "sv=2022&sig=" + _tok(40)}
    env = cli_env(**env_secrets)
    log = tmp_path / "train.log"
    lines = [f"[rank0] iteration {i} | lm loss 2.5 | grad norm 1.0 | elapsed time per iteration (ms): 500.0\n"
             for i in range(50)]
    for text, _ in shapes.values():
        lines.append(f"[rank1]: RuntimeError: failed: {text}\n")
    lines.append(f"[rank0] {KEEP[0]} checkpoint sha256 {KEEP[1]}\n")
    lines.append("[rank0] " + " ".join(env_secrets.values()) + "\n")
    lines.append("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. " + shapes["hf"][0] + "\n")
    log.write_text("".join(lines))
    cfg = tmp_path / "llmdiag.toml"
    cfg.write_text('[cluster]\nremote_command = "llmdiag --password %s --token %s"\n'
                   % (shapes["password_flag"][1], shapes["token_flag"][1]))
    out = tmp_path / "out"
    out.mkdir()
    runs = [
        ["analyze-log", str(log), "-f", "json", "-o", str(out / "a.json"), "--csv", str(out / "a.csv")],
        ["analyze-log", str(log), "-f", "markdown"],
        ["analyze-log", str(log), "-f", "html", "-o", str(out / "a.html")],
        ["analyze-log", str(log), "-f", "junit", "-o", str(out / "a.xml")],
        ["analyze-log", str(log), "-f", "terminal", "--width", "200"],
        # secrets in argv: error messages on stderr
        ["analyze-log", "https://alice:%s@data.example.com/x.log" % shapes["url_password"][1]],
        ["analyze-log", str(log), "--csv", "https://alice:%s@h/x.csv" % shapes["url_password"][1]],
        ["report", "merge", "/nonexistent/" + shapes["github"][1]],
        ["estimate-memory", "--model", shapes["openai"][1]],
        ["analyze-log", "/nonexistent/" + shapes["ngc"][1] + ".log", shapes["slack_bot"][1]],
        # the config file's values, the environment: in the preflight report
        ["preflight", "-c", str(cfg), "--probe", "system", "--probe", "software", "-f", "json",
         "-o", str(out / "p.json")],
        ["preflight", "-c", str(cfg), "--probe", "system", "-f", "html", "-o", str(out / "p.html")],
    ]
    seen = []
    for args in runs:
        proc = subprocess.run(llmdiag_argv(*args), capture_output=True, text=True, env=env, timeout=180,
                              cwd=tmp_path)
        assert "Traceback" not in proc.stderr, proc.stderr
        seen.append((" ".join(args[:2]) + " stdout", proc.stdout))
        seen.append((" ".join(args[:2]) + " stderr", proc.stderr))
    for f in out.iterdir():
        seen.append((f.name, f.read_text(errors="replace")))
    assert any("OutOfMemoryError" in text or "cuda_oom" in text for _, text in seen)  # the runs did work
    leaks = [(name, where) for name, (_, secret) in shapes.items() for where, text in seen if secret in text]
    leaks += [(var, where) for var, secret in env_secrets.items() for where, text in seen
              if secret.split("=")[-1] in text]
    assert leaks == [], leaks
    assert sum(text.count("***REDACTED***") for _, text in seen) >= 8  # the secrets were there, masked
    # not over-redacted: GPU UUIDs and checksums stay
    from llmdiag.redact import redact_text

    assert redact_text(f"{KEEP[0]} sha256:{KEEP[1]} tokens_per_s=12 --max-tokens 5") == \
        f"{KEEP[0]} sha256:{KEEP[1]} tokens_per_s=12 --max-tokens 5"


@pytest.mark.parametrize("name", sorted(planted()))
def test_each_shape_is_redacted_in_text(name):
    from llmdiag.redact import redact_text

    text, secret = planted()[name]
    assert secret not in redact_text(text), (name, redact_text(text))
