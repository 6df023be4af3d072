"""nccl-bench as nccl-tests behaves, with real gloo ranks: rows on stderr while the run goes on,
a real SIGINT keeps the rows measured (exit 130), a rank SIGKILLed is named with the OOM killer,
a run past timeout_s under a launcher leaves a partial "timed out" report and no temp dirs."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from llmdiag.ncclbench.launch import free_port
from tests.conftest import cli_env, llmdiag_argv
from tests.distributed.nccl_ranks import rank_argv, rank_env, wait_all, write_config

pytestmark = pytest.mark.distributed

ROW = re.compile(r"^\s+(\d+)\s+\d+\s+float\s")
#: a sweep long enough to interrupt: the rows up to 64K take well under a second each, the
#: large ones seconds on a busy 2-core machine
LONG = ("-b", "1K", "-e", "256M", "-f", "4", "-w", "1", "-n", "20")


class Lines:
    """A process's stderr read line by line in a thread, so the test can wait for a line."""

    def __init__(self, stream) -> None:
        self.q: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            self.q.put(line)
        self.q.put(None)

    def _lines(self, timeout: float):
        """Each line as it comes, until the stream ends or ``timeout`` passes."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                line = self.q.get(timeout=0.2)
            except queue.Empty:
                continue
            if line is None:
                return
            self.seen.append(line)
            yield line

    def wait_rows(self, count: int, timeout: float) -> list[int]:
        for _ in self._lines(timeout):
            sizes = [int(m.group(1)) for m in map(ROW.match, self.seen) if m]
            if len(sizes) >= count:
                return sizes
        raise AssertionError("rows not printed in time:\n" + "".join(self.seen))

    def rest(self, timeout: float) -> str:
        for _ in self._lines(timeout):
            pass
        return "".join(self.seen)


def start(tmp_path: Path, *args: str, env=None) -> tuple[subprocess.Popen, Lines, Path]:
    out = tmp_path / "doc.json"
    proc = subprocess.Popen(llmdiag_argv("nccl-bench", "--nproc", "2", *args, "--format", "json", "--output",
                                         str(out)),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=env or cli_env())
    return proc, Lines(proc.stderr), out


@contextlib.contextmanager
def reaped(proc: subprocess.Popen):
    """Kill ``proc`` on the way out if the test left it running."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def children(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of the processes whose parent is ``pid``."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            out.append((int(entry), cmd))
    return out


def test_rows_stream_and_sigint_keeps_them(tmp_path):
    proc, lines, out = start(tmp_path, *LONG)
    with reaped(proc):
        sizes = lines.wait_rows(3, timeout=90)
        assert proc.poll() is None, "the rows came only after the run ended"
        proc.send_signal(signal.SIGINT)  # what Ctrl-C sends to the foreground process
        rc = proc.wait(timeout=60)
    err = lines.rest(5)
    assert rc == 130, err
    assert "interrupted" in err
    doc = json.loads(out.read_text())
    assert doc["stopped"]["reason"] == "interrupted"
    measured = [r["size"] for r in doc["results"]]
    assert measured[: len(sizes)] == sizes  # every row shown is in the report
    assert doc["stopped"]["rows_measured"] == len(measured)
    assert doc["stopped"]["rows_planned"] == 10 and len(measured) < 10
    (run,) = [f for f in doc["findings"] if f["check"] == "run"]
    assert run["status"] == "warn" and run["summary"].startswith(f"interrupted after {len(measured)} of 10 rows")


def test_rank_killed_by_sigkill_is_named_with_the_oom_killer(tmp_path):
    proc, lines, out = start(tmp_path, *LONG)
    with reaped(proc):
        lines.wait_rows(1, timeout=90)
        ranks = [pid for pid, cmd in children(proc.pid) if "rank1.json" in cmd]
        assert len(ranks) == 1, children(proc.pid)
        os.kill(ranks[0], signal.SIGKILL)  # what the kernel's OOM killer sends
        rc = proc.wait(timeout=60)
    err = lines.rest(5)
    assert rc == 1, err
    assert "rank 1 of 2 was killed by SIGKILL (signal 9): likely the kernel's OOM killer" in err
    assert "dmesg" in err and "internal error" not in err
    doc = json.loads(out.read_text())
    assert doc["status"] == "fail" and doc["stopped"]["reason"] == "failed"
    assert doc["results"], "the rows measured before the kill are kept"


def test_memory_check_refuses_a_gloo_sweep_that_cannot_fit(tmp_path):
    from llmdiag.ncclbench.memcheck import host_available

    avail = host_available()
    # all_reduce of avail/4 on 2 ranks: 2 ranks x (2 buffers x 1.5) x avail/4 = 1.5 x avail
    size = f"{max(1, avail // 4 >> 20)}M"
    proc = subprocess.run(llmdiag_argv("nccl-bench", "--nproc", "2", "-b", size, "-e", size),
                          capture_output=True, text=True, env=cli_env(), timeout=60)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "2 rank(s) on this host" in line and "available" in line and "memory_check = false" in line


def test_timed_out_launched_run_writes_a_partial_report_and_cleans_up(tmp_path):
    """Two ranks under plain launcher variables, timeout_s = 15: a sweep that needs longer stops at
    the limit with rank 0's partial report ("timed out", what was running) and each rank's
    private temp dir removed (os._exit runs no `finally`)."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    cfg = write_config(tmp_path, timeout_s=15.0)
    port = free_port()
    procs = [subprocess.Popen(rank_argv(cfg, tmp_path / f"doc{k}.json", bench_args=LONG),
                              env=rank_env(k, 2, "127.0.0.1", port, GLOO_SOCKET_IFNAME="lo", TMPDIR=str(tmpdir)),
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for k in range(2)]
    results = wait_all(procs, 90)
    assert [rc for rc, _ in results] == [1, 1], results
    err0 = results[0][1]
    assert "internal error" not in err0 and "timeout_s = 15 s" in err0, err0
    doc = json.loads((tmp_path / "doc0.json").read_text())
    assert doc["status"] == "fail" and doc["stopped"]["reason"] == "timed out", doc["stopped"]
    assert doc["stopped"]["measuring"], doc["stopped"]  # e.g. "all_reduce 64 MiB (row 9 of 10)"
    assert len(doc["results"]) == doc["stopped"]["rows_measured"] < 10
    assert not (tmp_path / "doc1.json").exists()  # one report, rank 0's
    assert [p.name for p in tmpdir.iterdir() if p.name.startswith("llmdiag-")] == []


def test_sigint_to_a_launched_rank_0_keeps_its_rows(tmp_path):
    """Under a launcher rank 0 is this process: Ctrl-C there writes its rows (exit 130), and the
    other rank says its peer left (exit 1), not an internal error."""
    cfg = write_config(tmp_path, timeout_s=120.0)
    port = free_port()
    procs = [subprocess.Popen(rank_argv(cfg, tmp_path / f"doc{k}.json", bench_args=LONG),
                              env=rank_env(k, 2, "127.0.0.1", port, GLOO_SOCKET_IFNAME="lo"),
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for k in range(2)]
    lines = Lines(procs[0].stderr)
    with reaped(procs[0]), reaped(procs[1]):
        sizes = lines.wait_rows(2, timeout=90)
        procs[0].send_signal(signal.SIGINT)
        rc0 = procs[0].wait(timeout=60)
        _, err1 = procs[1].communicate(timeout=60)
    assert rc0 == 130, lines.rest(5)
    assert procs[1].returncode == 1 and "a peer left the group" in err1 and "internal error" not in err1, err1
    doc = json.loads((tmp_path / "doc0.json").read_text())
    assert doc["stopped"]["reason"] == "interrupted"
    assert [r["size"] for r in doc["results"]][: len(sizes)] == sizes


def _run_on_pty(args: tuple[str, ...], *, stdout_pipe: bool) -> tuple[int, str, str]:
    """Run the real CLI with stderr (and stdout unless ``stdout_pipe``) on a pseudo-terminal, as
    a user at a shell sees it; returns (exit code, what the terminal showed, stdout if piped)."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(llmdiag_argv("nccl-bench", "--nproc", "2", *args), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE if stdout_pipe else slave, stderr=slave, env=cli_env())
    os.close(slave)
    piped: list[bytes] = []
    reader = threading.Thread(target=lambda: piped.append(proc.stdout.read()), daemon=True) if stdout_pipe else None
    if reader:
        reader.start()
    shown = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer of the terminal has gone
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    rc = proc.wait(timeout=120)
    if reader:
        reader.join(10)
    return rc, shown.decode(errors="replace").replace("\r\n", "\n"), (piped[0].decode() if piped else "")


def _row_sizes(text: str) -> list[int]:
    return [int(m.group(1)) for m in map(ROW.match, text.splitlines()) if m]


SMALL = ("-b", "1K", "-e", "8K", "-f", "2", "-w", "1", "-n", "2", "-C", "all_reduce", "-C", "all_gather")


def test_on_a_terminal_each_row_is_shown_once(tmp_path):
    """stdout and stderr on one terminal: the rows streamed as measured are not repeated by the
    end report, which gives each collective's footer, the summary and the verdict once."""
    rc, shown, _ = _run_on_pty(SMALL, stdout_pipe=False)
    assert rc == 0, shown
    sizes = _row_sizes(shown)
    assert sizes == [1024, 2048, 4096, 8192] * 2, shown  # all_reduce then all_gather, each row once
    assert shown.count("# Collective test: all_reduce") == 2 and shown.count("# Avg bus bandwidth") == 2, shown
    assert shown.count("# llmdiag nccl-bench:") == 1 and shown.count("PASS: nccl-bench") == 1, shown
    # the footers come after the last row, named by collective
    assert shown.rindex("# Out of bounds values") > shown.rindex("8192"), shown


def test_stdout_not_a_terminal_keeps_the_whole_table(tmp_path):
    """Rows on the terminal (stderr) and the whole nccl-tests table on a pipe: each place has each
    row once, and a script reading stdout gets the table it parses."""
    rc, shown, out = _run_on_pty(SMALL, stdout_pipe=True)
    assert rc == 0, shown + out
    assert _row_sizes(shown) == [1024, 2048, 4096, 8192] * 2, shown
    assert _row_sizes(out) == [1024, 2048, 4096, 8192] * 2, out
    assert out.count("# llmdiag nccl-bench:") == 1 and "PASS: nccl-bench" in out, out
