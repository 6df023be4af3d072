"""One record printed a field per line: the lines of one step are one record, not duplicates of its first line."""

from __future__ import annotations

from llmdiag.logs import analyze_paths


def _doc(tmp_path, text: str) -> dict:
    p = tmp_path / "train.log"
    p.write_text(text)
    return analyze_paths([str(p)])


def _per_line(step: int, fields: dict[str, str]) -> str:
    return "".join(f"2020-09-10 11:52:14,447 (base_trainer:831) INFO: (Step: {step}) {k} = {v}.\n"
                   for k, v in fields.items())


def test_a_nan_component_on_a_later_line_is_a_nan_step(tmp_path):
    healthy = {"train_duration_loss": "0.0353", "train_mel_loss_before": "0.41", "train_mel_loss_after": "0.39"}
    text = "".join(_per_line(s, healthy) for s in range(100, 104))
    text += _per_line(104, {**healthy, "train_mel_loss_before": "nan", "train_mel_loss_after": "nan"})
    doc = _doc(tmp_path, text)
    kinds = {f["kind"]: f for f in doc["findings"]}
    assert "nan_loss" in kinds, doc["findings"]
    assert kinds["nan_loss"]["facts"]["nan_first_step"] == 104
    assert doc["status"] == "fail"


def test_the_same_fields_printed_again_are_one_step(tmp_path):
    text = "".join(_per_line(s, {"train_loss": f"{2 - s / 100:.3f}"}) * 2 for s in range(10, 20))  # tee'd twice
    doc = _doc(tmp_path, text)
    assert doc["findings"] == []
    assert doc["facts"]["num_steps_with_loss"] == 10

