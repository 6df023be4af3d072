"""Output files never harm what is there (issue 14): one writer, its rules, real CLI runs.

Device-node tests run as root only inside a private mount namespace (``unshare -m``) on a
fake device made with mknod in a throw-away tmpfs and bind-mounted over the path: the real
/dev/null is never touched.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import threading

import pytest

from tests.conftest import cli_env, llmdiag_argv

EST = ("estimate-memory", "--model", "llama2-7b", "--gpu-memory", "80GiB")


def run(*args, cwd=None, env=None, umask=None, timeout=120):
    def pre():
        if umask is not None:
            os.umask(umask)

    return subprocess.run(llmdiag_argv(*args), capture_output=True, text=True, cwd=cwd, env=env or cli_env(),
                          timeout=timeout, preexec_fn=pre if umask is not None else None)


def one_line_error(proc) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.strip().splitlines()  # click's usage banner is not the message
             if ln.strip() and not ln.startswith(("Usage:", "Try '"))]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def no_temp(d) -> None:
    left = [p.name for p in d.iterdir() if p.name.endswith(".tmp")]
    assert left == [], left


def test_new_file_gets_the_umask_mode(tmp_path):
    out = tmp_path / "r.json"
    proc = run(*EST, "-f", "json", "-o", str(out), umask=0o027)
    assert proc.returncode in (0, 1), proc.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    run(*EST, "-f", "json", "-o", str(tmp_path / "b.json"), umask=0o022)
    assert stat.S_IMODE((tmp_path / "b.json").stat().st_mode) == 0o644
    no_temp(tmp_path)


def test_existing_file_keeps_mode_and_owner(tmp_path):
    out = tmp_path / "r.prom"
    out.write_text("old\n")
    out.chmod(0o644)
    if os.geteuid() == 0:
        os.chown(out, 65534, 65534)
    proc = run(*EST, "-f", "json", "-o", str(out), umask=0o077)
    assert proc.returncode in (0, 1), proc.stderr
    st = out.stat()
    assert stat.S_IMODE(st.st_mode) == 0o644
    if os.geteuid() == 0:
        assert (st.st_uid, st.st_gid) == (65534, 65534)
    assert json.loads(out.read_text())["kind"]


def test_symlink_is_written_through(tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "r.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    proc = run(*EST, "-f", "json", "-o", str(link))
    assert proc.returncode in (0, 1), proc.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert json.loads(target.read_text())["kind"]
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "real" / "new.json")
    assert run(*EST, "-f", "json", "-o", str(dangling)).returncode in (0, 1)
    assert dangling.is_symlink() and json.loads((tmp_path / "real" / "new.json").read_text())
    no_temp(tmp_path)
    no_temp(tmp_path / "real")


def test_fifo_is_written_not_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()), daemon=True)  # noqa: SIM115
    reader.start()
    proc = run(*EST, "-f", "json", "-o", str(fifo))
    reader.join(10)
    assert proc.returncode in (0, 1), proc.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert json.loads(got[0])["kind"]


def test_refused_targets_exit_2_one_line_no_temp(tmp_path):
    assert "directory" in one_line_error(run(*EST, "-o", str(tmp_path)))
    assert "does not exist" in one_line_error(run(*EST, "-o", str(tmp_path / "no" / "r.txt")))
    if os.path.exists("/dev/full"):  # written directly (a character device): ENOSPC, exit 2
        assert "No space left" in one_line_error(run(*EST, "-o", "/dev/full"))
    no_temp(tmp_path)


def test_output_same_file_as_an_input_is_refused_before_work(tmp_path):
    cfg = tmp_path / "llmdiag.toml"
    cfg.write_text("[job]\n")
    before = cfg.read_text()
    line = one_line_error(run(*EST, "-c", str(cfg), "-o", str(cfg)))
    assert "--config" in line and str(cfg) in line
    # another spelling of the same file: a symlink, a hard link, a relative path
    (tmp_path / "alias.toml").symlink_to(cfg)
    os.link(cfg, tmp_path / "hard.toml")
    one_line_error(run(*EST, "-c", str(cfg), "-o", str(tmp_path / "alias.toml")))
    one_line_error(run(*EST, "-c", str(cfg), "-o", str(tmp_path / "hard.toml")))
    # the implicit ./llmdiag.toml and $LLMDIAG_CONFIG
    line = one_line_error(run(*EST, "-o", "llmdiag.toml", cwd=tmp_path))
    assert "config file" in line
    other = tmp_path / "other.toml"
    other.write_text("[job]\n")
    line = one_line_error(run(*EST, "-o", str(other), env=cli_env(LLMDIAG_CONFIG=str(other))))
    assert "LLMDIAG_CONFIG" in line
    hf = tmp_path / "config.json"
    hf.write_text(json.dumps({"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 2,
                              "num_attention_heads": 8, "vocab_size": 1000, "intermediate_size": 1024}))
    hf_before = hf.read_text()
    assert "--hf-config" in one_line_error(run("estimate-memory", "--hf-config", str(hf), "-o", str(hf)))
    assert "--model" in one_line_error(run("estimate-memory", "--model", str(hf), "-o", str(hf)))
    assert hf.read_text() == hf_before and cfg.read_text() == before


def test_analyze_log_inputs_and_outputs_clash(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("step 1 loss 2.0\n")
    line = one_line_error(run("analyze-log", str(log), "-o", str(log)))
    assert "log" in line and str(log) in line
    line = one_line_error(run("analyze-log", str(tmp_path), "--csv", str(log)))  # a log inside a directory input
    assert "--csv" in line
    a = tmp_path / "a.csv"
    line = one_line_error(run("analyze-log", str(log), "--csv", str(a), "-o", str(a)))
    assert "-o" in line and "--csv" in line and not a.exists()
    assert log.read_text() == "step 1 loss 2.0\n"


def test_monitor_and_nccl_bench_outputs_clash(tmp_path):
    t = tmp_path / "t.csv"
    line = one_line_error(run("monitor", "--count", "1", "--timeline", str(t), "--prometheus-file", str(t)))
    assert "--timeline" in line and "--prometheus-file" in line
    one_line_error(run("monitor", "--count", "1", "--timeline", str(t), "-o", str(t)))
    line = one_line_error(run("nccl-bench", "--csv", str(t), "--output", str(t)))
    assert "--csv" in line and "--output" in line
    assert not t.exists()
    # devices may be named twice: both written directly
    proc = run("monitor", "--count", "1", "--interval", "0.1", "--timeline", str(t), "--prometheus-file",
               "/dev/null", "-o", "/dev/null")
    assert proc.returncode in (0, 1), proc.stderr
    assert t.read_text().startswith("time,")


def test_report_merge_refuses_a_node_report_as_output(tmp_path):
    node = tmp_path / "node-00000.json"
    node.write_text("{}")
    one_line_error(run("report", "merge", str(tmp_path), "-o", str(node)))
    assert node.read_text() == "{}"


needs_ns = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                              reason="needs root and unshare for a private mount namespace")


def _in_namespace(script: str, tmp_path) -> subprocess.CompletedProcess:
    """``script`` in a private mount namespace, with $FAKE a throw-away tmpfs."""
    fake = tmp_path / "fake"
    fake.mkdir()
    env = cli_env(FAKE=str(fake), PY=llmdiag_argv()[0])
    full = ("set -e; mount --make-rprivate / 2>/dev/null || true; mount -t tmpfs none \"$FAKE\"; " + script)
    proc = subprocess.run(["unshare", "-m", "sh", "-c", full], capture_output=True, text=True, env=env, timeout=120)
    if proc.returncode == 99 or "Operation not permitted" in proc.stderr:
        pytest.skip(f"no private mount namespace here: {proc.stderr.strip()}")
    return proc


@needs_ns
def test_dev_null_stays_a_character_device(tmp_path):
    proc = _in_namespace(
        'mknod "$FAKE/null" c 1 3; chmod 666 "$FAKE/null"; mount --bind "$FAKE/null" /dev/null; '
        'set +e; "$PY" -m llmdiag estimate-memory --model llama2-7b -o /dev/null; echo "rc=$?"; '
        '"$PY" -m llmdiag preflight --probe system -o /dev/null >/dev/null 2>&1 || true; '
        'stat -c "%F %a" /dev/null; ls -A "$FAKE"', tmp_path)
    assert "rc=0" in proc.stdout or "rc=1" in proc.stdout, proc.stdout + proc.stderr
    assert "character special file 666" in proc.stdout, proc.stdout + proc.stderr
    assert ".tmp" not in proc.stdout


@needs_ns
def test_read_only_target_is_exit_2_one_line(tmp_path):
    proc = _in_namespace(
        'echo old > "$FAKE/r.txt"; mount -o remount,ro "$FAKE"; '
        'set +e; "$PY" -m llmdiag estimate-memory --model llama2-7b -o "$FAKE/r.txt"; echo "rc=$?"; '
        '"$PY" -m llmdiag estimate-memory --model llama2-7b -o "$FAKE/new.txt"; echo "rc=$?"; ls -A "$FAKE"',
        tmp_path)
    assert proc.stdout.count("rc=2") == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("llmdiag: -o") == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout.split()[-1] == "r.txt"  # nothing else was created


def test_dev_stdout_into_a_redirected_file_appends_in_place(tmp_path):
    out = tmp_path / "log.txt"
    out.write_text("first\n")
    with open(out, "a") as fh:
        proc = subprocess.run(llmdiag_argv(*EST, "-f", "json", "-o", "/dev/stdout"), stdout=fh,
                              stderr=subprocess.PIPE, text=True, env=cli_env(), timeout=60)
    assert proc.returncode in (0, 1), proc.stderr
    text = out.read_text()
    assert text.startswith("first\n{") and json.loads(text[len("first\n"):])["kind"]
