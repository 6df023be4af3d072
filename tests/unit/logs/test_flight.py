"""Flight Recorder input is read safely: a pickle that wants a class is refused, a bad --fr is one line."""

from __future__ import annotations

import pickle

import pytest

from llmdiag.logs import flight
from tests.conftest import cli_env, llmdiag_argv


class Evil:
    def __reduce__(self):
        return (print, ("ran",))


def test_a_pickle_with_code_is_refused(tmp_path):
    (tmp_path / "rank_0").write_bytes(pickle.dumps({"entries": [Evil()]}))
    (tmp_path / "rank_1").write_bytes(b"not a pickle")
    dumps, problems = flight.read_dir(str(tmp_path))
    assert dumps == {} and len(problems) == 2
    assert "refusing to load" in problems[0]["message"]


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_bad_fr_dir_is_one_line_exit_2(tmp_path, make):
    import subprocess

    log = tmp_path / "a.log"
    log.write_text("step=1 loss=2.0\n")
    d = tmp_path / "fr"
    if make == "empty":
        d.mkdir()
    proc = subprocess.run(llmdiag_argv("analyze-log", str(log), "--fr", str(d)), env=cli_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--fr" in proc.stderr and "Traceback" not in proc.stderr
