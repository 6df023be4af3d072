"""Two wordings whose errno is hidden: torch.save onto a full disk, and a DataLoader worker's bus error.

The lines are PyTorch's own (public reports, paths and numbers changed): torch.save's zip writer raises
``[enforce fail at inline_container.cc:N] . PytorchStreamWriter failed writing file data/K: file write failed``
for the record it could not write and ``unexpected pos N vs M`` when it closes the archive; a DataLoader
worker killed by SIGBUS (its shared-memory batch) is ``killed by signal: Bus error``.
"""

from __future__ import annotations

from llmdiag.logs import analyze_paths

SAVE_TRACE = """\
[INFO|trainer.py:2926] 2023-10-19 09:48:54,430 >> Saving model checkpoint to out/checkpoint-10
Traceback (most recent call last):
  File "/opt/conda/lib/python3.10/site-packages/torch/serialization.py", line 619, in save
    _save(obj, opened_zipfile, pickle_module, pickle_protocol, _disable_byteorder_record)
  File "/opt/conda/lib/python3.10/site-packages/torch/serialization.py", line 853, in _save
    zip_file.write_record(name, storage.data_ptr(), num_bytes)
RuntimeError: [enforce fail at inline_container.cc:593] . PytorchStreamWriter failed writing file data/1: file write failed

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "train.py", line 1097, in <module>
    torch.save(model.state_dict(), "ckpt/last.pt")
  File "/opt/conda/lib/python3.10/site-packages/torch/serialization.py", line 466, in __exit__
    self.file_like.write_end_of_file()
RuntimeError: [enforce fail at inline_container.cc:424] . unexpected pos 2752575744 vs 2752575640
"""

SHM = """\
step 40 | loss 2.3100
Traceback (most recent call last):
  File "/opt/conda/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1133, in _try_get_data
    data = self._data_queue.get(timeout=timeout)
  File "/opt/conda/lib/python3.10/site-packages/torch/utils/_utils/signal_handling.py", line 66, in handler
    _error_if_any_worker_fails()
RuntimeError: DataLoader worker (pid 18234) is killed by signal: Bus error. It is possible that dataloader's \
workers are out of shared memory. Please try to raise your shared memory limit.
"""


def _kinds(tmp_path, text):
    p = tmp_path / "train.log"
    p.write_text(text)
    doc = analyze_paths([str(p)])
    return doc, {f["kind"] for f in doc["findings"]}


def test_torch_save_onto_a_full_disk_is_disk_full(tmp_path):
    doc, kinds = _kinds(tmp_path, SAVE_TRACE)
    assert "disk_full" in kinds and doc["status"] == "fail"
    assert doc["root_causes"][0]["kind"] == "disk_full"


def test_unexpected_pos_alone_is_disk_full(tmp_path):
    """Only the close of the archive printed (the first error swallowed): still the short write."""
    _doc, kinds = _kinds(tmp_path, "RuntimeError: [enforce fail at inline_container.cc:664] . unexpected pos 704 vs 598\n")
    assert "disk_full" in kinds


def test_dataloader_worker_bus_error_is_also_sigbus(tmp_path):
    doc, kinds = _kinds(tmp_path, SHM)
    assert {"sigbus", "dataloader_worker_killed"} <= kinds
    worker = next(f for f in doc["findings"] if f["kind"] == "dataloader_worker_killed")
    assert worker["facts"]["worker_pids"] == 18234


def test_dataloader_worker_killed_otherwise_is_not_sigbus(tmp_path):
    _doc, kinds = _kinds(tmp_path, "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed.\n")
    assert "dataloader_worker_killed" in kinds and "sigbus" not in kinds


def test_a_full_dev_shm_is_named_as_shared_memory_not_a_disk(tmp_path):
    # torch.multiprocessing's segment file in /dev/shm could not grow (idiap/ESLAM#20's wording): the kind stays
    # disk_full (errno 28), the device, the advice and the runbook are shared memory's
    doc, kinds = _kinds(tmp_path, "RuntimeError: unable to write to file </torch_31911_952036340_6686>: "
                                  "No space left on device (28)\n")
    f = next(f for f in doc["findings"] if f["kind"] == "disk_full")
    assert f["facts"]["shared_memory"] == "/torch_31911_952036340_6686"
    assert "/dev/shm" in f["cause"] and "shm-size" in f["next_step"] and f["runbook"] == "shm-too-small"
    # a checkpoint onto a full disk keeps the disk's advice
    doc, kinds = _kinds(tmp_path, "OSError: [Errno 28] No space left on device: '/ckpt/step100.pt'\n")
    f = next(f for f in doc["findings"] if f["kind"] == "disk_full")
    assert "shared_memory" not in f["facts"] and f["runbook"] == "disk-full"
