"""The estimate-memory page in headless Chromium: the GPU-memory limit line is drawn on the same
box as the stacked bar, so an out-of-memory plan's bar runs past the line at any window width."""

from __future__ import annotations

import json
import subprocess

import pytest

from llmdiag.reports.base import render
from tests.browser import headless
from tests.conftest import cli_env, llmdiag_argv

ok, why = headless.available()
pytestmark = pytest.mark.skipif(not ok, reason=why)

# x of the first bar's right end (its last segment) and of its limit line, and the bar's box
GEOMETRY = {"geo": """(() => {
  const bar = document.querySelector('.cap .bar');
  const segs = [...bar.children].filter(x => !x.classList.contains('limit'));
  const lim = document.querySelector('.cap .limit').getBoundingClientRect();
  const b = bar.getBoundingClientRect();
  return JSON.stringify({left: b.left, width: b.width, end: segs[segs.length - 1].getBoundingClientRect().right,
                         limit: lim.left});
})()"""}


@pytest.mark.parametrize("width", [800, 1600])
@pytest.mark.parametrize("gpu,over", [("24GiB", True), ("80GiB", False)])
def test_limit_line_and_bar_share_one_box(tmp_path, width, gpu, over):
    p = subprocess.run(llmdiag_argv("estimate-memory", "--model", "llama2-7b", "--world-size", "8", "--zero", "1",
                                    "--gpu-memory", gpu, "--format", "json"),
                       capture_output=True, text=True, env=cli_env(), timeout=60)
    doc = json.loads(p.stdout)
    page = tmp_path / "memory.html"
    page.write_text(render(doc, "html"), encoding="utf-8")
    res = headless.load(page, GEOMETRY, width=width)
    assert res.errors == []
    g = json.loads(res.values["geo"])
    total, cap = doc["breakdown"]["total"], doc["gpu_memory"]
    scale = max(total, cap) * 1.05
    # both at their share of the same box (within a pixel or two of rounding and the border)
    assert g["limit"] - g["left"] == pytest.approx(g["width"] * cap / scale, abs=3)
    assert g["end"] - g["left"] == pytest.approx(g["width"] * total / scale, abs=3)
    assert (g["end"] > g["limit"]) is over
