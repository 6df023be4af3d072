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


def _entry(seq, op="nccl:all_reduce", state="completed", sizes=((1024,),), dtype="Float"):
    return {"record_id": seq, "pg_id": 0, "process_group": ("0", "default_pg"), "collective_seq_id": seq,
            "p2p_seq_id": 0, "op_id": seq, "profiling_name": op, "input_sizes": [list(s) for s in sizes],
            "input_dtypes": [dtype], "output_sizes": [list(s) for s in sizes], "output_dtypes": [dtype],
            "state": state, "retired": state == "completed", "timeout_ms": 600000, "is_p2p": False, "frames": []}


def _dump(entries, ranks="[0, 1, 2, 3]"):
    return {"version": "2.4", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": ranks}},
            "pg_status": {}, "entries": entries}


def test_nccl_states_name_the_rank_whose_kernel_never_started(tmp_path):
    """NCCL dumps (the layout torch writes; no GPU here to make real ones): every rank entered #7,
    rank 2's is still 'scheduled' while the others' are 'started'."""
    for r in range(4):
        last = _entry(7, state="scheduled" if r == 2 else "started")
        (tmp_path / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(_dump([_entry(5), _entry(6), last])))
    dumps, problems = flight.read_dir(str(tmp_path))
    fr = flight.analyze(dumps)
    assert problems == [] and fr["suspect_ranks"] == [2] and "'scheduled'" in fr["reason"]
    (g,) = fr["process_groups"]
    assert g["seq_id"] == 7 and g["not_entered"] == [] and g["not_completed"] == [0, 1, 2, 3]


def test_old_seq_id_key_and_a_missing_rank(tmp_path):
    for r in (0, 1, 3):
        entries = [dict(_entry(q), seq_id=q) for q in (1, 2)]
        for e in entries:
            del e["collective_seq_id"]
        (tmp_path / f"trace{r}").write_bytes(pickle.dumps(_dump(entries)))
    fr = flight.analyze(flight.read_dir(str(tmp_path))[0])
    assert fr["ranks_missing"] == [2] and fr["partial"] and fr["suspect_ranks"] == [2]


@pytest.mark.parametrize("fmt", ["terminal", "markdown", "html", "json", "prometheus", "junit"])
def test_a_log_with_dumps_renders_in_every_format(tmp_path, fmt):
    """The Flight Recorder analysis is part of the typed log-analysis document: every renderer reads it
    (the tests read documents strictly, so a key the type lacks fails here, as it did for the text report)."""
    import json
    import subprocess

    log = tmp_path / "train.log"
    log.write_text("[rank0]: step 5 loss 2.0\n[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/"
                   "unbound_buffer.cc:78] Timed out waiting 3000ms for recv operation to complete\n")
    d = tmp_path / "train.log.fr"
    d.mkdir()
    for r in range(4):  # rank 3 never entered #7; ranks 0-2 disagree with nobody; a mismatch at #6 on rank 1
        entries = [_entry(5), _entry(6, sizes=((512,),) if r == 1 else ((1024,),))] + ([] if r == 3 else [_entry(7)])
        (d / f"trace_rank_{r}").write_bytes(pickle.dumps(_dump(entries)))
    proc = subprocess.run(llmdiag_argv("analyze-log", str(log), "--format", fmt, "--width", "1000"),
                          env=cli_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert proc.stdout.strip()
    if fmt == "json":
        fr = json.loads(proc.stdout)["flight_recorder"]
        assert fr["suspect_ranks"] == [3] and fr["mismatches"][0]["seq_id"] == 6
    elif fmt != "prometheus":
        assert "rank(s) [3] never entered" in proc.stdout
