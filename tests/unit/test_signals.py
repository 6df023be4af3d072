"""SIGTERM and SIGHUP end every command like Ctrl-C (issue 14): real runs, real signals.

Each run is started in its own session so that everything it starts can be found by session
id afterwards; a process still there (zombies excepted: init reaps those) is a failure, and
so is a temporary file left in the private temp directory, the configured paths or /tmp.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import cli_env, llmdiag_argv

CODES = {signal.SIGTERM: 143, signal.SIGHUP: 129, signal.SIGINT: 130, signal.SIGUSR1: 138, signal.SIGXCPU: 152}


def session_members(sid: int) -> list[tuple[int, str]]:
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        state, session = fields[0], int(fields[3])
        if session == sid and state not in ("Z", "X"):
            out.append((int(d.name), (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]))
    return out


def children_of(pid: int) -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
                found.append(int(d.name))
    return found


def temp_left(tmp_path) -> list[str]:
    """What the run left in its TMPDIR (each run gets its own: other runs on the machine do not count)."""
    return sorted(str(p.relative_to(tmp_path / "tmp")) for p in (tmp_path / "tmp").rglob("*"))


def start(args, tmp_path, **env):
    (tmp_path / "tmp").mkdir(exist_ok=True)
    (tmp_path / "work").mkdir(exist_ok=True)
    return subprocess.Popen(llmdiag_argv(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path / "work", env=cli_env(TMPDIR=str(tmp_path / "tmp"), **env),
                            start_new_session=True)


def wait_for(cond, timeout=60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def finish(proc, sig) -> str:
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert wait_for(lambda: not session_members(proc.pid), 5), session_members(proc.pid)
    assert "Traceback" not in err, err
    assert proc.returncode == CODES[sig], (proc.returncode, err)
    return err


@pytest.fixture
def big_log(tmp_path_factory):
    """A log that takes the parallel reader (a worker pool) several seconds."""
    d = tmp_path_factory.mktemp("biglog")
    line = b"[rank0] iteration %d | lm loss 2.%04d | grad norm 1.%03d | elapsed time per iteration (ms): 512.3\n"
    with open(d / "train.log", "wb") as fh:
        for block in range(120):  # 4.8 M lines: the faster reader (bulk columns) must still be mid-run at the signal
            fh.write(b"".join(line % (i, i % 9999, i % 999) for i in range(block * 40000, (block + 1) * 40000)))
    return d / "train.log"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_analyze_log_pool_and_spill_files(tmp_path, big_log, sig):
    proc = start(["analyze-log", str(big_log), "--csv", "steps.csv", "-o", "r.txt"], tmp_path)
    assert wait_for(lambda: len(children_of(proc.pid)) >= 1, 30), "the worker pool never started"
    assert wait_for(lambda: temp_left(tmp_path), 10), "no spill file seen"
    err = finish(proc, sig)
    assert signal.Signals(sig).name in err
    assert temp_left(tmp_path) == []
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == []  # no output, no temp file


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_preflight_filesystem_probe_temp_file(tmp_path, sig):
    target = tmp_path / "shared"
    target.mkdir()
    (tmp_path / "c.toml").write_text(f'[filesystem]\nthroughput_test_mb = 4096\npaths = [{{path = "{target}"}}]\n')
    proc = start(["preflight", "-c", str(tmp_path / "c.toml"), "--probe", "filesystem"], tmp_path)
    assert wait_for(lambda: any(target.iterdir()), 30), "the probe never wrote its file"
    finish(proc, sig)
    assert list(target.iterdir()) == [] and temp_left(tmp_path) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_preflight_probe_subprocess(tmp_path, sig):
    proc = start(["preflight", "--probe", "software"], tmp_path)
    assert wait_for(lambda: len(children_of(proc.pid)) >= 1, 30), "no probe subprocess seen"
    finish(proc, sig)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_nccl_bench_ranks(tmp_path, sig):
    proc = start(["nccl-bench", "--nproc", "2", "--backend", "gloo", "-b", "1M", "-e", "8M", "-n", "500",
                  "--csv", "b.csv"], tmp_path)
    assert wait_for(lambda: len(children_of(proc.pid)) >= 2, 30), "ranks never started"
    time.sleep(1.0)  # inside the collectives
    finish(proc, sig)
    assert temp_left(tmp_path) == []
    # what was measured before the signal is kept (nccl-tests' partial table): the CSV, whole, and nothing else
    left = list((tmp_path / "work").iterdir())
    assert [p.name for p in left] in ([], ["b.csv"]), left
    if left:
        import csv

        rows = list(csv.DictReader(left[0].open()))
        assert all(r.keys() == rows[0].keys() and None not in r.values() for r in rows), rows


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1])
def test_train_workers(tmp_path, sig):
    proc = start(["train", "--nproc", "2", "--steps", "100000", "--device", "cpu", "--checkpoint-dir", "ck",
                  "--checkpoint-every", "5"], tmp_path)
    assert wait_for(lambda: len(children_of(proc.pid)) >= 2, 30), "workers never started"
    time.sleep(2.0)
    finish(proc, sig)


def test_monitor_sighup_still_writes(tmp_path):
    proc = start(["monitor", "--interval", "0.1", "--timeline", "t.csv", "-f", "json", "-o", "r.json"], tmp_path)
    t = tmp_path / "work" / "t.csv"
    assert wait_for(lambda: t.exists() and t.read_text().count("\n") > 2)
    finish(proc, signal.SIGHUP)
    assert (tmp_path / "work" / "r.json").read_text().startswith("{")


def _nohup() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # what `nohup` does before it runs the command


@pytest.mark.parametrize("args", [
    ["nccl-bench", "--nproc", "2", "--backend", "gloo", "-b", "1M", "-e", "8M", "-n", "500"],
    ["monitor", "--interval", "0.1", "--timeline", "t.csv", "-f", "json", "-o", "r.json"],
])
def test_under_nohup_sighup_is_left_ignored(tmp_path, args):
    """`nohup llmdiag ...` must outlive the terminal: the SIGHUP the caller ignored stays ignored,
    and SIGTERM still ends the run cleanly."""
    (tmp_path / "tmp").mkdir()
    (tmp_path / "work").mkdir()
    proc = subprocess.Popen(llmdiag_argv(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path / "work", env=cli_env(TMPDIR=str(tmp_path / "tmp")),
                            start_new_session=True, preexec_fn=_nohup)
    t = tmp_path / "work" / "t.csv"
    started = (lambda: len(children_of(proc.pid)) >= 2) if args[0] == "nccl-bench" else \
        (lambda: t.exists() and t.read_text().count("\n") > 2)
    assert wait_for(started, 30), "never started"
    proc.send_signal(signal.SIGHUP)
    time.sleep(1.0)
    assert proc.poll() is None, proc.communicate()[1][-2000:]
    err = finish(proc, signal.SIGTERM)
    assert "SIGHUP" not in err


def test_analyze_log_follow(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("step 1 loss 2.0\n")
    proc = start(["analyze-log", "--follow", str(log)], tmp_path)
    time.sleep(1.5)
    finish(proc, signal.SIGTERM)
    assert temp_left(tmp_path) == []


@pytest.mark.parametrize("args", [
    ["nccl-bench", "--nproc", "2", "--backend", "gloo", "-b", "1M", "-e", "8M", "-n", "500"],
    ["train", "--nproc", "2", "--steps", "100000", "--device", "cpu"],
])
def test_sigkill_of_llmdiag_takes_its_children(tmp_path, args):
    proc = start(args, tmp_path)
    assert wait_for(lambda: len(children_of(proc.pid)) >= 2, 30), "children never started"
    kids = children_of(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)

    def gone() -> bool:
        for k in kids:
            try:
                state = Path(f"/proc/{k}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state not in ("Z", "X"):
                return False
        return True

    try:
        assert wait_for(gone, 5), f"children {kids} outlived a SIGKILLed llmdiag"
    finally:
        for k in kids:
            try:
                os.kill(k, signal.SIGKILL)
            except OSError:
                pass


def test_sigkilled_runs_temp_dir_is_removed_by_the_next_run_and_a_live_one_is_kept(tmp_path, big_log):
    """SIGKILL cannot be handled: the next run removes the dead run's private directory (its
    lock is free), never a live run's (its lock is held), nor anything else in TMPDIR."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    (tmp / "llmdiag-not-ours").mkdir()  # no lock: another version's or a user's, left alone
    (tmp / "user-file").write_text("x")
    killed = start(["analyze-log", str(big_log), "-o", "k.txt"], tmp_path)
    assert wait_for(lambda: any(tmp.glob("llmdiag-*/*.pkl")) or any(tmp.glob("llmdiag-*/*/*")), 30), temp_left(tmp_path)
    dead = {p for p in tmp.glob("llmdiag-*") if (p / ".lock").exists()}
    assert len(dead) == 1
    os.killpg(killed.pid, signal.SIGKILL)
    killed.communicate(timeout=10)
    assert wait_for(lambda: not session_members(killed.pid), 10)
    assert all(p.exists() for p in dead)  # SIGKILL: nothing could clean up

    live = start(["analyze-log", str(big_log), "-o", "l.txt"], tmp_path)
    try:
        assert wait_for(lambda: len({p for p in tmp.glob("llmdiag-*") if (p / ".lock").exists()} - dead) == 1, 30)
        mine = {p for p in tmp.glob("llmdiag-*") if (p / ".lock").exists()} - dead
        short = subprocess.run(llmdiag_argv("runbook"), capture_output=True, text=True, timeout=60,
                               env=cli_env(TMPDIR=str(tmp)), cwd=tmp_path / "work")
        assert short.returncode == 0, short.stderr
        assert not any(p.exists() for p in dead), "the SIGKILLed run's directory is still there"
        assert all(p.exists() for p in mine), "a live run's directory was removed"
        assert (tmp / "llmdiag-not-ours").is_dir() and (tmp / "user-file").exists()
    finally:
        finish(live, signal.SIGTERM)
    assert temp_left(tmp_path) == ["llmdiag-not-ours", "user-file"]
