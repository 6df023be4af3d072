"""Every runbook id the node probes can emit exists, with the sections a runbook must have."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from llmdiag import runbooks
from llmdiag.runner import run_probe
from llmdiag.probes.gpu import GpuProbe
from tests.probes.nodeutil import FIXTURES, context, nvml_fixture

PROBES = Path(__file__).resolve().parents[2] / "probes"
MODULES = ("gpu.py", "system.py", "software.py", "launcher.py", "platform.py", "dcgm.py")


def _source_ids() -> set[str]:
    ids: set[str] = set()
    for m in MODULES:
        ids |= set(re.findall(r'runbook="([a-z0-9-]+)"', (PROBES / m).read_text()))
    return ids


def test_fixture_results_name_existing_runbooks():
    seen = set()
    for f in sorted(FIXTURES.glob("*.json")):
        for r in run_probe(GpuProbe(), context(nvml=nvml_fixture(f.stem))):
            if r.runbook:
                seen.add(r.runbook)
                assert runbooks.exists(r.runbook), (f.name, r.check, r.runbook)
    assert {"gpu-leftover-process", "gpu-ecc-errors", "gpu-throttling", "nvlink-down"} <= seen


@pytest.mark.parametrize("rid", sorted(_source_ids()))
def test_every_runbook_id_in_the_probes_exists(rid):
    assert runbooks.exists(rid), rid
    text = runbooks.text(rid)
    assert text.startswith("# ")
    for section in ("## Symptoms", "## Likely causes", "## Checks", "## Fixes"):
        assert section in text, (rid, section)
    assert "`" in text.split("## Checks")[1], f"{rid}: Checks need concrete commands"


def test_source_scan_sees_the_ids():
    assert len(_source_ids()) >= 18
