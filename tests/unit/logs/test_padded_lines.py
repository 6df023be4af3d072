"""A line padded to the terminal's width is a whole line, not a piece the terminal cut.

tqdm.write pads what it prints (the Hugging Face Trainer's dicts) with blanks to the width of the bar it clears;
a capture of such a run has every line at one width, which looks like a terminal that cut its lines there. Only a
piece that ends in text (or the few blanks between two words or columns) goes on on the next line.
"""

from __future__ import annotations

from llmdiag.logs import analyze_paths
from llmdiag.logs.analyzer import terminal_width

BAR = "100%|" + "█" * 100 + "| 7/7 [00:00<00:00, 1809.34it/s]"
W = len(BAR)


def _dict(i: int, norm: str) -> str:
    return f"{{'loss': {0.15 + i / 1000:.4f}, 'grad_norm': {norm}, 'learning_rate': 0.0001, 'epoch': {0.04 * (i + 1):.2f}}}"


def test_padded_records_are_no_terminal_cut(tmp_path):
    lines = [BAR] + [_dict(i, "nan" if i in (0, 3) else "0.5").ljust(W) for i in range(9)]
    assert terminal_width(lines) is None
    log = tmp_path / "trainer.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    doc = analyze_paths([str(log)])
    assert doc["facts"]["num_steps_with_loss"] == 9
    assert {f["kind"] for f in doc["findings"]} == {"nan_grad_norm"}


def test_text_cut_at_the_width_still_goes_on():
    lines = []
    for rank in range(4):  # each rank's long message cut at 80 columns, its last piece shorter
        text = f"[rank{rank}]: " + " ".join(f"word{i:03d}" for i in range(30)) + " end"
        lines += [text[i:i + 80] for i in range(0, len(text), 80)]
    assert terminal_width(lines) == 80
