"""--follow on a real growing file: alerts as they happen, rotation, --on-alert gets JSON."""

from __future__ import annotations

import io
import json
import os
import sys
import threading
import time

from llmdiag.logs.config import Settings
from llmdiag.logs.follow import follow_file


def test_follow_alerts_rotation_and_hook(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("step=1 loss=2.0\n")
    hook_out = tmp_path / "hook.jsonl"
    hook = f"{sys.executable} -c \"import sys; open({str(hook_out)!r}, 'a').write(sys.stdin.read())\""
    out = io.StringIO()

    def writer():
        time.sleep(0.5)
        with open(log, "a") as fh:
            fh.write("step=2 loss=nan\n")
        time.sleep(0.6)
        os.rename(log, tmp_path / "train.log.1")
        log.write_text("NCCL host-1:1:2 [0] x.cc:1 NCCL WARN Net : socket failed\n")

    t = threading.Thread(target=writer)
    t.start()
    follow_file(str(log), Settings(), on_alert=hook, no_progress_s=1.5, poll_s=0.05, max_seconds=3.5, out=out)
    t.join()
    kinds = [json.loads(line)["kind"] for line in out.getvalue().splitlines()]
    assert "nan_loss" in kinds and "nccl_warn" in kinds
    assert [json.loads(line)["kind"] for line in hook_out.read_text().splitlines()] == kinds
