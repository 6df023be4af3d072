"""A DataLoader worker killed while it hands a batch over (issue 22: a worker killed must be named).

Both logs are real: tests/live's DDP trainer under torchrun, its rank 1's only worker SIGKILLed at the batch of step
6 (``ddp-worker_kill``). Depending on the race, the main process never prints "DataLoader worker ... is killed by
signal": its traceback runs through ``dataloader.py _try_get_data`` into ``multiprocessing/resource_sharer.py`` and
ends in ``ConnectionResetError`` (``connection_reset.log``), or the rank dies while printing it and the traceback
stops inside the DataLoader (``cut_traceback.log``, with Python's "lost sys.stderr"). The traceback's frames are the
evidence: its innermost frame is the handoff, and it ends in a connection error or nowhere.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llmdiag.logs import analyze_paths

DATA = Path(__file__).parent / "data" / "worker_handoff"


@pytest.mark.parametrize("name", ["connection_reset.log", "cut_traceback.log"])
def test_a_worker_that_died_mid_handoff_is_named_on_its_rank(name):
    doc = analyze_paths([str(DATA / name)])
    found = [f for f in doc["findings"] if f["kind"] == "dataloader_worker_killed"]
    assert found and found[0]["rank"] == 1, doc["findings"]
    assert "handoff" in found[0]["facts"]["evidence"]
    assert doc["first_failing_rank"] == 1 and doc["status"] == "fail"


def test_a_user_error_inside_the_dataset_is_not_a_dead_worker(tmp_path):
    # the same DataLoader frames, but the innermost frame is the user's dataset and the exception is its own
    log = tmp_path / "train.log"
    log.write_text("""Traceback (most recent call last):
  File "/home/u/train.py", line 64, in main
    batch = next(loader)
  File "/usr/lib/python3/site-packages/torch/utils/data/dataloader.py", line 725, in __next__
    data = self._next_data()
  File "/usr/lib/python3/site-packages/torch/utils/data/dataloader.py", line 781, in _next_data
    data = self._dataset_fetcher.fetch(index)
  File "/usr/lib/python3/site-packages/torch/utils/data/_utils/fetch.py", line 52, in fetch
    data = [self.dataset[idx] for idx in possibly_batched_index]
  File "/home/u/data.py", line 20, in __getitem__
    raise KeyError(idx)
KeyError: 20
""")
    doc = analyze_paths([str(log)])
    assert "dataloader_worker_killed" not in {f["kind"] for f in doc["findings"]}, doc["findings"]


def test_a_traceback_still_being_written_is_not_cut_off():
    # a followed log read up to the middle of a traceback (the next read brings its exception), or a range of a
    # file split among workers: only the end of the input makes an open traceback a cut one
    from llmdiag.logs.analyzer import LogAnalyzer

    lines = (DATA / "cut_traceback.log").read_text().splitlines()
    head = lines[:lines.index(next(x for x in lines if "_next_data()" in x)) + 1]
    an = LogAnalyzer()
    for n, text in enumerate(head, 1):
        an("train.log", n, text)
    an.finish(end_of_input=False)
    assert not [e for e in an.events if e.kind == "dataloader_worker_killed"]
    an.finish()
    assert [e.rank for e in an.events if e.kind == "dataloader_worker_killed"] == [1]
