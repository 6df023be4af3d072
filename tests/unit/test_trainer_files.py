"""Checkpoint verification, the token file format and `llmdiag prepare-data`."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import cli_env, llmdiag_argv


def test_partial_or_corrupt_checkpoints_are_never_chosen(tmp_path):
    import torch

    from llmdiag.trainer.checkpoint import CheckpointManager, rng_state

    m = CheckpointManager(tmp_path, keep=5)
    for step in (5, 10, 15):
        m.save(step, {"step": step, "w": torch.full((4,), float(step))}, [rng_state()])
    (tmp_path / "step_00000015" / "manifest.json").unlink()  # a save that never finished
    with (tmp_path / "step_00000010" / "state.pt").open("r+b") as f:  # bit rot after the save
        f.seek(40)
        f.write(b"\xff\xff")
    (tmp_path / ".tmp-step_00000020-1").mkdir()  # a killed save's temporary directory
    skipped = []
    m.log = skipped.append
    latest = m.latest()
    assert latest.step == 5
    assert any("no manifest" in s for s in skipped) and any("checksum" in s for s in skipped)
    assert m.load(latest, 0)["step"] == 5


def test_keep_last_k(tmp_path):
    import torch

    from llmdiag.trainer.checkpoint import CheckpointManager, rng_state

    m = CheckpointManager(tmp_path, keep=2, background=True)
    for step in range(1, 6):
        m.save(step, {"step": step, "w": torch.zeros(2)}, [rng_state()])
    m.wait()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_00000004", "step_00000005"]


def test_prepare_data_round_trip_and_no_overwrite(tmp_path):
    from llmdiag.trainer import data, tokenizer

    src = tmp_path / "corpus"
    src.mkdir()
    (src / "a.txt").write_text("héllo")
    (src / "b.md").write_text("world")
    out = tmp_path / "tok.bin"
    run = lambda *a: subprocess.run(llmdiag_argv("prepare-data", *a), env=cli_env(), capture_output=True,  # noqa: E731
                                    text=True, timeout=60)
    res = run(str(src), str(out))
    assert res.returncode == 0, res.stderr
    header = data.read_header(out)
    assert header.count == len("héllo".encode()) + 1 + 5 and header.token_bytes == 2
    ds = data.TokenFile(out, seq_len=4)
    assert tokenizer.decode(ds.tokens) == "héllo\nworld"
    before = out.read_bytes()
    again = run(str(src), str(out))
    assert again.returncode == 2 and "--force" in again.stderr and out.read_bytes() == before
    assert run(str(src), str(out), "--force").returncode == 0
    assert run(str(tmp_path / "missing"), str(tmp_path / "x.bin")).returncode == 2


def test_token_file_errors_name_the_problem(tmp_path):
    from llmdiag.trainer import data

    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"not a token file at all, really not....")
    with pytest.raises(data.DataError, match="magic"):
        data.read_header(bad)
    short = tmp_path / "short.bin"
    short.write_bytes(data.pack_header(2, 100) + b"\0" * 10)
    with pytest.raises(data.DataError, match="truncated"):
        data.read_header(short)


def test_training_on_a_token_file(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 200)
    tok = tmp_path / "t.bin"
    assert subprocess.run(llmdiag_argv("prepare-data", "--quiet", str(text), str(tok)), env=cli_env(),
                          timeout=60).returncode == 0
    res = subprocess.run(llmdiag_argv("train", "--nproc", "1", "--steps", "20", "--seq-len", "32", "--hidden", "32",
                                      "--data", str(tok), "--summary-file", str(tmp_path / "s.json")),
                         env=cli_env(), capture_output=True, text=True, timeout=90)
    assert res.returncode == 0, res.stderr[-1500:]
    losses = json.loads((tmp_path / "s.json").read_text())["ranks"][0]["losses"]
    assert losses["20"] < losses["1"] - 1.0
