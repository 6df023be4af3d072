"""Real excerpts as they get pasted (cut at a fixed width, quoted, with terminal colours): the same
labels as the excerpt itself.

Issue reports often carry a log copied from a terminal or a web view that cut every line at 80, 100
or 120 columns. The real excerpts of the wording tests are cut here the way a terminal cuts them
(every piece but the last exactly the width) and must say what the uncut excerpt says. Most are
too short for the width to be told from line lengths (analyzer.terminal_width needs 8 lines);
analyzer.hard_wrapped joins the pieces of a short excerpt when the joined record says more.
"""

from __future__ import annotations

import re

import pytest

from llmdiag.logs import analyze_paths
from tests.unit.logs import test_real_wordings_gpu_comm as gpu
from tests.unit.logs import test_real_wordings_host as host

WIDTHS = (80, 100, 120)

#: excerpts that are themselves cut already, or whose cut pieces say something else; (id, width) -> why
KNOWN = {
    ("wd_wrapped_interleaved_terminate", 80): "already wrapped at its own width: cut again, two widths mix",
    ("wd_wrapped_interleaved_terminate", 100): "already wrapped at its own width: cut again, two widths mix",
    ("wd_wrapped_interleaved_terminate", 120): "already wrapped at its own width: cut again, two widths mix",
    ("store_dump_flag_at_exit_2.4", 100): "7 lines, too few to know the width: the piece 'store.Connection "
                                          "reset by peer' reads as a broken store connection",
    ("store_dump_flag_at_exit_2.4", 120): "7 lines, too few to know the width: the piece 'store.Connection "
                                          "reset by peer' reads as a broken store connection",
}


def cut(text: str, width: int) -> str:
    out = []
    for line in text.split("\n"):
        while len(line) > width:
            out.append(line[:width])
            line = line[width:]
        out.append(line)
    return "\n".join(out)


def labels(tmp_path, name: str, text: str) -> list[str]:
    p = tmp_path / name
    p.write_text(text)
    return sorted({f["kind"] for f in analyze_paths([str(p)])["findings"]})


CASES = ([(src, text) for src, text, *_ in host.FAILURES] + [(c.id, c.text) for c in gpu.CASES]
         + [(src, text) for src, text, _ in host.HEALTHY])


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("source,text", CASES, ids=[c[0] for c in CASES])
def test_cut_at_a_fixed_width_says_the_same(tmp_path, source, text, width):
    if (source, width) in KNOWN:
        pytest.xfail(KNOWN[(source, width)])
    whole = labels(tmp_path, "whole.log", text)
    assert labels(tmp_path, "cut.log", cut(text, width)) == whole


@pytest.mark.parametrize("source,text", CASES, ids=[c[0] for c in CASES])
def test_quoted_says_the_same(tmp_path, source, text):
    """The same excerpts quoted as an e-mail, a forum post or an issue's markdown does ("> ")."""
    if source == "wd_wrapped_interleaved_terminate":
        pytest.xfail("wrapped before it was quoted: the quote marker sits inside the rejoined record")
    quoted = "\n".join("> " + line for line in text.split("\n"))
    assert labels(tmp_path, "quoted.log", quoted) == labels(tmp_path, "whole.log", text)


@pytest.mark.parametrize("source,text", CASES, ids=[c[0] for c in CASES])
def test_coloured_says_the_same(tmp_path, source, text):
    """The same excerpts captured with their terminal colours (``script``, CI consoles): every other
    line red, and exception names in Python 3.13's traceback colours."""
    if source == "wd_wrapped_interleaved_terminate":
        pytest.xfail("wrapped before it was coloured: the colour codes sit inside the rejoined record")
    lines = text.split("\n")
    coloured = "\n".join(f"\x1b[31m{ln}\x1b[0m" if i % 2 else
                         re.sub(r"^(\w+(?:\.\w+)*(?:Error|Exception))(: )", "\x1b[1;35m\\1\x1b[0m\\2\x1b[35m", ln)
                         for i, ln in enumerate(lines))
    assert labels(tmp_path, "coloured.log", coloured) == labels(tmp_path, "whole.log", text)


def test_a_long_line_before_a_record_of_its_own_is_not_joined_to_it(tmp_path):
    """Without a known width, a join must keep what each line says: 'Killed' after the excerpt's
    longest line stays a record of its own."""
    long = "Epoch 3: 100%|##########| 500/500 [02:11<00:00, 3.80it/s, loss=0.412, v_num=7, lr=0.0001]\n"
    killed = "srun: error: node-7: task 0: Killed\n"
    assert labels(tmp_path, "k.log", killed) == ["sigkill"]
    assert labels(tmp_path, "lk.log", long + killed) == ["sigkill"]
