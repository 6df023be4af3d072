"""Progress records by mechanism (issue 22, point 2) and the verdicts drawn from them (point 4).

Each syntax is checked on a line shape the readers did not know before: litgpt's ``iter N step N |``,
llm.c's ``norm`` and ``tok/s`` columns, Lightning's spaced ``step 12 train_loss 3.21``, a bare ``N/M``
counter, a record split over several lines, and a ``Time:`` whose span the line does not say.
"""

from __future__ import annotations

import math

from llmdiag.logs import analyze_paths
from llmdiag.logs.formats import parse_progress


def _doc(tmp_path, text: str, name: str = "train.log") -> dict:
    p = tmp_path / name
    p.write_text(text)
    return analyze_paths([str(p)])


def test_litgpt_pipe_record():
    rec = parse_progress("iter 339 step 339 | loss train: 14.500, val: n/a | iter time: 322.03 ms (step) "
                         "remaining time: 0:10:12")
    assert (rec["iter"], rec["step"], rec["loss"], rec["step_time_ms"]) == (339, 339, 14.5, 322.03)


def test_llmc_norm_is_the_grad_norm_and_tok_per_s_a_throughput():
    rec = parse_progress("step    1/74 | train loss 11.009 | norm 15.4 | lr 1.00e-06 | (3032.12 ms | 1351 tok/s)")
    assert (rec["step"], rec["loss"], rec["grad_norm"], rec["lr"], rec["tokens_per_s"]) == (1, 11.009, 15.4, 1e-06,
                                                                                           1351.0)


def test_spaced_key_value_of_a_loss_family():
    rec = parse_progress("step 12 train_loss 3.21")
    assert (rec["step"], rec["loss"]) == (12, 3.21)
    assert parse_progress("epoch 3 val_loss 2.5")["eval"] is True


def test_a_bare_time_is_not_an_iteration_time():
    assert "step_time_ms" not in parse_progress("Epoch 0, batch 20/100 | loss 2.31 | Time: 4.52")
    assert parse_progress("iter 100: loss 2.30, time 123.45ms, mfu 12.0%")["step_time_ms"] == 123.45


def test_a_bare_count_is_the_counter():
    assert parse_progress("Epoch 0, batch 20/100 | loss 2.31")["iter"] == 20
    assert "iter" not in parse_progress("2024/05/06 loss 2.31")


def test_window_times_make_no_throughput_drop(tmp_path):
    # seconds per 20-batch window, with an evaluation inside some windows: read as iteration times they
    # would be a throughput drop
    rows = [f"Epoch 1, batch {i * 20}/2000 | loss {3 - i / 100:.3f} | Time: {12.0 if i % 10 > 6 else 4.0:.2f}"
            for i in range(1, 60)]
    doc = _doc(tmp_path, "\n".join(rows) + "\n")
    assert doc["findings"] == [] and doc["status"] == "pass"
    assert doc["metrics"]["num_steps_with_loss"] == 59


MEGATRON_SPLIT = """\
 iteration      {it}/  1000 | consumed samples:  {cs} | elapsed time per iteration (ms): 1234.5 |
 learning rate: 1.000E-04 | global batch size:    16 |
 lm loss: {loss} | loss scale: 1.0 |
 grad norm: {gn} | number of skipped iterations:   0 | number of nan iterations:   {nan} |
"""


def test_megatron_record_split_over_four_lines_bf16_nan(tmp_path):
    text = "".join(MEGATRON_SPLIT.format(it=it, cs=it * 16, loss="nan" if it >= 150 else f"{5 - it / 100:.4E}",
                                         gn="nan" if it >= 150 else "1.2", nan=int(it >= 150))
                   for it in range(10, 200, 10))
    doc = _doc(tmp_path, text)
    assert doc["steps_total"] == 19
    assert doc["steps"][0]["loss"] == 4.9 and doc["steps"][0]["grad_norm"] == 1.2
    nan = next(f for f in doc["findings"] if f["kind"] == "nan_loss")
    assert nan["step"] == 150 and doc["status"] == "fail"
    # a loss scale that stays 1 is no fp16 loss scaler: no "switch to bf16" advice
    assert "bf16" not in nan["next_step"] and "fp16" not in nan["cause"]
    assert nan["facts"].get("dtype") != "float16"


def test_deepspeed_scale_pinned_at_its_minimum_is_an_error(tmp_path):
    rows = [f"[2024-05-01 10:00:{i:02d},000] [INFO] [stage_1_and_2.py:1900:step] [deepspeed] OVERFLOW! Rank 0 "
            f"Skipping step. Attempted loss scale: 1, reducing to 1" for i in range(10)]
    doc = _doc(tmp_path, "\n".join(rows) + "\n")
    ov = next(f for f in doc["findings"] if f["kind"] == "grad_overflow")
    assert ov["severity"] == "error" and ov["facts"]["loss_scale_pinned"] is True
    assert doc["status"] == "fail"


def test_a_scaler_that_still_halves_is_a_warning(tmp_path):
    rows = [f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {2.0 ** (16 - i):g}, reducing to "
            f"{2.0 ** (15 - i):g}" for i in range(4)]
    doc = _doc(tmp_path, "\n".join(rows) + "\n")
    assert {f["kind"]: f["severity"] for f in doc["findings"]} == {"grad_overflow": "warning"}


def test_megatron_every_iteration_skipped_is_an_error(tmp_path):
    rows = [f" iteration {it:8d}/ 1000 | consumed samples: {it * 8} | elapsed time per iteration (ms): 900.1 | "
            f"learning rate: 0.000E+00 | global batch size: 8 | loss scale: {2.0 ** max(0, 20 - it):.1f} | "
            f"number of skipped iterations:   1 | number of nan iterations:   0 |" for it in range(1, 30)]
    doc = _doc(tmp_path, "\n".join(rows) + "\n")
    ov = next(f for f in doc["findings"] if f["kind"] == "grad_overflow")
    assert ov["severity"] == "error" and ov["facts"]["all_steps_skipped"] is True
    assert doc["status"] == "fail"


def test_empty_input_is_a_warning_that_says_so(tmp_path):
    doc = _doc(tmp_path, "")
    assert doc["status"] == "warn" and doc["findings"] == []
    assert [w["kind"] for w in doc["warnings"]] == ["empty_input"]


def test_records_no_reader_places_are_not_a_silent_pass(tmp_path):
    doc = _doc(tmp_path, "".join(f"ep 1 | bt {i} | LossValue {2 - i / 100} | acc 0.5 | ppl 3\n" for i in range(9)))
    assert doc["status"] == "warn"
    w = doc["warnings"][0]
    assert w["kind"] == "unread_progress" and w["count"] == 9 and w["line"] == 1


def test_a_spike_names_where_it_starts_and_where_it_peaks(tmp_path):
    losses = [2.0 + 0.01 * (i % 3) for i in range(40)] + [6.0, 9.0, 7.0] + [2.0] * 10
    doc = _doc(tmp_path, "".join(f"step={i} loss={v}\n" for i, v in enumerate(losses)))
    sp = next(f for f in doc["findings"] if f["kind"] == "loss_spike")
    assert sp["step"] == 40 and sp["facts"]["max_loss_step"] == 41
    assert "step 41" in sp["message"] and "from step 40" in sp["message"]
    assert not math.isnan(sp["facts"]["max_loss"])


def test_a_table_of_numbers_under_a_header(tmp_path):
    text = ("Starting training\n"
            "step    loss      lr        grad_norm   tok/s\n"
            "10      5.1234    1.0e-04   1.20        12000\n"
            "20      4.9000    1.0e-04   1.10        12100\n"
            "30      nan       1.0e-04   nan         12000\n"
            "saving checkpoint 40\n"
            "| iter | loss | lr |\n"
            "|   50 | 4.5  | 1e-4 |\n")
    doc = _doc(tmp_path, text)
    rows = [(s["step"], s["iter"], s["loss"], s["grad_norm"], s["tokens_per_s"]) for s in doc["steps"]]
    assert rows == [(10, None, 5.1234, 1.2, 12000.0), (20, None, 4.9, 1.1, 12100.0), (30, None, "nan", "nan", 12000.0),
                    (None, 50, 4.5, None, None)]
    assert next(f for f in doc["findings"] if f["kind"] == "nan_loss")["step"] == 30


def test_a_table_goes_on_past_its_rule_and_its_repeated_header(tmp_path):
    header = "  step       loss  grad_norm         lr      tok/s\n" + "-" * 50 + "\n"
    rows = [f"{s:6d} {('nan' if s == 13 else f'{6 - s / 10:.4f}'):>10s} {0.6:10.4f} {3e-3:10.2e} {15000:10d}\n"
            for s in range(1, 21)]
    doc = _doc(tmp_path, header + "".join(rows[:10]) + header + "\n" + "".join(rows[10:]))
    assert [s["step"] for s in doc["steps"]] == list(range(1, 21))
    assert next(f for f in doc["findings"] if f["kind"] == "nan_loss")["step"] == 13


def test_a_csv_with_empty_cells_is_a_table(tmp_path):
    """Lightning's CSVLogger metrics.csv printed after the run: a cell is empty where nothing was logged at
    that step (a validation row has no train_loss: no step record, and the table goes on)."""
    text = "epoch,grad_norm,step,train_loss,val_loss\n" + "".join(
        f"0,{0.25:.3f},{s},{(260.5 if s == 24 else 6 - s / 20):.4f},\n" for s in range(40))
    text = text.replace("0,0.250,20,5.0000,\n", "0,0.250,20,5.0000,\n0,,20,,4.9\n")
    doc = _doc(tmp_path, text)
    assert len(doc["steps"]) == 40 and doc["steps"][0]["step"] == 0
    spike = next(f for f in doc["findings"] if f["kind"] == "loss_spike")
    assert spike["step"] == 24


def test_prose_with_metric_words_is_no_table_header(tmp_path):
    doc = _doc(tmp_path, "Resetting step and loss\n1 2 3 4\n")
    assert doc["steps_total"] == 0


def test_a_dict_printed_over_several_lines_is_one_record(tmp_path):
    text = ("{'loss': 2.3,\n 'grad_norm': 1.2,\n 'learning_rate': 0.0001,\n 'epoch': 0.1}\n"
            "{'loss': 2.2,\n 'grad_norm': nan,\n 'learning_rate': 0.0001,\n 'epoch': 0.2}\n"
            "{'loss': 2.1, 'grad_norm': 1.0, 'learning_rate': 0.0001, 'epoch': 0.3}\n")
    doc = _doc(tmp_path, text)
    assert [(s["loss"], s["grad_norm"], s["epoch"]) for s in doc["steps"]] == [(2.3, 1.2, 0.1), (2.2, "nan", 0.2),
                                                                               (2.1, 1.0, 0.3)]
    assert [f["kind"] for f in doc["findings"]] == ["nan_grad_norm"]


def _bar_log() -> str:
    """Lightning's tqdm bar as a file gets it: a line per epoch of '\\r' redraws, each count drawn twice (the
    second time with the step's loss), a reset redraw at count 0, NaN from global step 250."""
    lines = []
    for ep in range(3):
        segs = [f"\rEpoch {ep}:   0%|          | 0/200 [00:00<?, ?it/s]"]
        for n in range(1, 201):
            g = ep * 200 + n
            prev = "nan" if g - 1 >= 250 else f"{3 - (g - 1) / 1000:.3f}"
            now = "nan" if g >= 250 else f"{3 - g / 1000:.3f}"
            bar = f"Epoch {ep}:  {n // 2:2d}%|#         | {n}/200 [00:01<00:08, 10.5it/s, v_num=0, train_loss="
            segs += [f"\r{bar}{prev}]" if n > 1 or ep else f"\r{bar[:-len(', v_num=0, train_loss=')]}]", f"\r{bar}{now}]"]
        lines.append("".join(segs))
    return "\n".join(lines) + "\n"


def test_a_bar_line_read_at_once_equals_redraw_by_redraw(tmp_path, monkeypatch):
    from llmdiag.logs.analyzer import LogAnalyzer

    p = tmp_path / "bar.log"
    p.write_text(_bar_log())
    fast = analyze_paths([str(p)])
    monkeypatch.setattr(LogAnalyzer, "bar_line", None)
    slow = analyze_paths([str(p)])
    for d in (fast, slow):
        d["read"].pop("elapsed_s")
    assert fast == slow
    nan = next(f for f in fast["findings"] if f["kind"] == "nan_loss")
    assert nan["step"] == 250 and nan["facts"]["last_finite_step"] == 249
    assert fast["steps_total"] == 600 and fast["metrics"]["last_step"] == 600


def test_a_spaced_batch_is_the_counter_and_a_batch_size_is_not():
    rec = parse_progress("INFO [train.py:529] (0/2) Epoch 11, batch 1200, loss[ctc_loss=0.1767, att_loss=0.3112, "
                         "loss=0.2843, over 2450.00 frames.], tot_loss[loss=0.2542, over 465668.99 frames.], batch size: 7")
    assert (rec["iter"], rec["loss"]) == (1200, 0.2843)  # not "(0/2)", the rank of two
    assert parse_progress("Epoch 1 batch: 20/100 loss: 2.3")["iter"] == 20
    assert "iter" not in parse_progress("batch: 8 loss: 2.3")  # a batch size


def test_a_bar_without_a_total_is_read_redraw_by_redraw(tmp_path):
    # tqdm over an iterable of unknown length (NeMo 1.x under Lightning): "N it [elapsed, rate, postfix]", no "%|"
    redraws = [f"Epoch 0: : {s}it [00:{s:02d}, 1.00it/s, loss={'nan' if s >= 8 else f'{5 - s / 10:.2f}'}, v_num=0]"
               for s in range(1, 11)]
    doc = _doc(tmp_path, "\r".join(redraws) + "\n")
    assert doc["metrics"]["num_steps_with_loss"] == 10
    nan = [f for f in doc["findings"] if f["kind"] == "nan_loss"]
    assert nan and nan[0]["facts"]["nan_first_step"] == 8
