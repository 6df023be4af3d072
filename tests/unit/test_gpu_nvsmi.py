"""bench/gpu_nvsmi.py: nvidia-smi -q -x parsed and compared with the NVML adapter's snapshot.

The fixtures are one H200 read at the same moment by both: ``h200-q.xml`` in nvidia-smi's
``nvsmi_device_v12`` format and ``h200-nvml.json``, a RecordedNvml document written from the
adapter's own GpuSnapshot type. Every field must agree (or differ for a named reason); each
deliberate mismatch below must be caught as a ``mismatch`` of exactly that field.
``h100-faulty-q.xml`` and ``h100-faulty-nvlink-s.txt`` are the faulty 8x H100 node of
``tests/fixtures/nvml/h100-faulty.json`` as a driver-525 nvidia-smi prints it (older spellings).
"""

import dataclasses
import sys

import pytest

from llmdiag.nvml import RecordedNvml
from tests.conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
import gpu_nvsmi as G  # noqa: E402

FIX = REPO / "tests" / "fixtures" / "nvidia-smi"
XML = (FIX / "h200-q.xml").read_text()
NO_LINKS = {"total": 0, "down": []}


@pytest.fixture
def snap():
    return RecordedNvml.from_file(FIX / "h200-nvml.json").snapshot(0)


def by_field(checks):
    return {c.field: c for c in checks}


def test_recorded_h200_agrees_field_by_field(snap):
    doc = G.parse_smi_xml(XML)
    assert doc["driver_version"] == "580.159.04" and doc["cuda_version"] == "13.0"
    checks = by_field(G.compare(snap, doc["gpus"][0], nvlink=NO_LINKS))
    assert {c.verdict for c in checks.values()} <= {"equal", "explained", "unsupported"}, \
        [c for c in checks.values() if c.verdict == "mismatch"]
    # every field the issue names is compared
    for f in ("name", "uuid", "memory_total_bytes", "memory_used_bytes", "ecc_mode_enabled", "ecc_uncorrectable_volatile",
              "ecc_uncorrectable_aggregate", "ecc_corrected_volatile", "retired_pages_dbe", "remapped_rows_pending",
              "remapped_rows_failure", "temperature_c", "power_limit_w", "sm_clock_mhz", "max_sm_clock_mhz",
              "throttle_reasons", "pcie_gen", "pcie_width", "nvlink", "persistence_mode", "compute_mode", "processes"):
        assert f in checks
    assert checks["uuid"].verdict == "equal" and checks["ecc_uncorrectable_aggregate"].smi == 1
    # NVML v1 counts the 551 MiB reserved as used: explained, not equal, not a mismatch
    assert checks["memory_used_bytes"].verdict == "explained" and "reserved" in checks["memory_used_bytes"].reason
    assert checks["retired_pages_dbe"].verdict == "unsupported"
    assert checks["temperature_slowdown_c"].verdict == "explained"
    assert checks["processes"].smi == [41207]
    assert G.summarise(list(checks.values()))["mismatch"] == 0


def _edit(old, new):
    assert old in XML, old
    return G.parse_smi_xml(XML.replace(old, new, 1))["gpus"][0]


MISMATCHES = [
    ("uuid", "GPU-5f3c1a2e-8b4d-4e7a-9c21-0d6e3f8a7b19", "GPU-00000000-8b4d-4e7a-9c21-0d6e3f8a7b19"),
    ("name", "<product_name>NVIDIA H200</product_name>", "<product_name>NVIDIA H100 80GB HBM3</product_name>"),
    ("memory_total_bytes", "<total>143771 MiB</total>", "<total>81559 MiB</total>"),
    ("memory_used_bytes", "<used>2052 MiB</used>", "<used>9052 MiB</used>"),
    ("ecc_mode_enabled", "<current_ecc>Enabled</current_ecc>", "<current_ecc>Disabled</current_ecc>"),
    ("ecc_uncorrectable_volatile", "<dram_uncorrectable>0</dram_uncorrectable>",
     "<dram_uncorrectable>3</dram_uncorrectable>"),
    ("ecc_corrected_volatile", "<dram_correctable>2</dram_correctable>", "<dram_correctable>7</dram_correctable>"),
    ("remapped_rows_pending", "<remapped_row_pending>No</remapped_row_pending>",
     "<remapped_row_pending>Yes</remapped_row_pending>"),
    ("remapped_rows_failure", "<remapped_row_failure>No</remapped_row_failure>",
     "<remapped_row_failure>Yes</remapped_row_failure>"),
    ("temperature_c", "<gpu_temp>31 C</gpu_temp>", "<gpu_temp>58 C</gpu_temp>"),
    ("power_limit_w", "<current_power_limit>700.00 W</current_power_limit>",
     "<current_power_limit>500.00 W</current_power_limit>"),
    ("sm_clock_mhz", "<sm_clock>1980 MHz</sm_clock>\n\t\t\t<mem_clock>3201 MHz</mem_clock>\n\t\t\t<video_clock>1545",
     "<sm_clock>1410 MHz</sm_clock>\n\t\t\t<mem_clock>3201 MHz</mem_clock>\n\t\t\t<video_clock>1545"),
    ("throttle_reasons", "<clocks_event_reason_hw_slowdown>Not Active", "<clocks_event_reason_hw_slowdown>Active"),
    ("pcie_gen", "<current_link_gen>5</current_link_gen>", "<current_link_gen>6</current_link_gen>"),
    ("pcie_width", "<current_link_width>16x</current_link_width>", "<current_link_width>8x</current_link_width>"),
    ("persistence_mode", "<persistence_mode>Enabled</persistence_mode>", "<persistence_mode>Disabled</persistence_mode>"),
    ("compute_mode", "<compute_mode>Default</compute_mode>", "<compute_mode>Exclusive_Process</compute_mode>"),
    ("processes", "<pid>41207</pid>", "<pid>41999</pid>"),
]


@pytest.mark.parametrize("field, old, new", MISMATCHES, ids=[m[0] for m in MISMATCHES])
def test_each_deliberate_mismatch_is_caught_on_its_field(snap, field, old, new):
    checks = G.compare(snap, _edit(old, new), nvlink=NO_LINKS)
    bad = [c.field for c in checks if c.verdict == "mismatch"]
    assert bad == [field], (bad, [c for c in checks if c.field == field])


def test_adapter_returning_none_where_smi_reads_is_a_mismatch(snap):
    broken = dataclasses.replace(snap, uuid=None, power_limit_w=None)
    bad = {c.field: c.reason for c in G.compare(broken, G.parse_smi_xml(XML)["gpus"][0]) if c.verdict == "mismatch"}
    assert set(bad) == {"uuid", "power_limit_w"} and "adapter returned None" in bad["uuid"]


def test_moving_readings_are_bracketed_by_the_two_nvml_reads(snap):
    smi = _edit("<gpu_temp>31 C</gpu_temp>", "<gpu_temp>36 C</gpu_temp>")
    after = dataclasses.replace(snap, temperature_c=35, throttle_reasons=())
    checks = by_field(G.compare(snap, smi, after=after))
    assert checks["temperature_c"].verdict == "equal"  # 31 before, 35 after, 36 within 2 C
    assert by_field(G.compare(snap, smi))["temperature_c"].verdict == "mismatch"  # one read: 31 vs 36
    # gpu_idle flipping between reads is explained; a hardware slowdown is not
    busy = _edit("<clocks_event_reason_gpu_idle>Active", "<clocks_event_reason_gpu_idle>Not Active")
    hot = dataclasses.replace(snap, throttle_reasons=("hw_slowdown",))
    assert by_field(G.compare(snap, busy))["throttle_reasons"].verdict == "explained"
    assert by_field(G.compare(hot, G.parse_smi_xml(XML)["gpus"][0]))["throttle_reasons"].verdict == "mismatch"
    # a process that ended between the reads: explained when NVML saw it in one of them
    gone = dataclasses.replace(snap, processes=({"pid": 41207}, {"pid": 50000}))
    assert by_field(G.compare(gone, G.parse_smi_xml(XML)["gpus"][0]))["processes"].verdict == "explained"


def test_a_pcie_link_that_slowed_at_idle_is_explained(snap):
    idle = _edit("<current_link_gen>5</current_link_gen>", "<current_link_gen>1</current_link_gen>")
    check = by_field(G.compare(snap, idle))["pcie_gen"]
    assert check.verdict == "explained" and "idle" in check.reason


def test_older_dtd_spellings_parse():
    old = (XML.replace("clocks_event_reason", "clocks_throttle_reason")
           .replace("<gpu_power_readings>", "<power_readings>").replace("</gpu_power_readings>", "</power_readings>")
           .replace("<current_power_limit>", "<enforced_power_limit>")
           .replace("</current_power_limit>", "</enforced_power_limit>")
           .replace("<gpu_temp_slow_tlimit_threshold>-2 C</gpu_temp_slow_tlimit_threshold>",
                    "<gpu_temp_slow_threshold>87 C</gpu_temp_slow_threshold>"))
    old = old.replace("<volatile>\n\t\t\t\t<sram_correctable>0</sram_correctable>",
                      "<volatile>\n\t\t\t\t<single_bit><total>2</total></single_bit>"
                      "<double_bit><total>0</total></double_bit>\n\t\t\t\t<x>0</x>", 1)
    gpu = G.parse_smi_xml(old)["gpus"][0]
    assert gpu["throttle_reasons"] == ("gpu_idle",) and gpu["power_limit_w"] == 700.0
    assert gpu["temperature_slowdown_c"] == 87
    assert (gpu["ecc_uncorrectable_volatile"], gpu["ecc_corrected_volatile"]) == (0, 2)


@pytest.mark.parametrize("text", ["", "not xml <", "<other/>", XML.replace("143771 MiB", "lots")])
def test_bad_xml_raises_one_error(text):
    with pytest.raises(G.SmiParseError):
        G.parse_smi_xml(text)


def test_nvlink_status_and_its_comparison(snap):
    text = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n"
            "\t Link 2: 26.562 GB/s\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-2)\n\t Link 0: 26.562 GB/s\n")
    links = G.parse_nvlink_status(text)
    assert links == {0: {"total": 3, "down": [1]}, 1: {"total": 1, "down": []}}
    smi = G.parse_smi_xml(XML)["gpus"][0]
    three = dataclasses.replace(snap, nvlink_total=3, nvlink_down=(1,))
    assert by_field(G.compare(three, smi, nvlink=links[0]))["nvlink"].verdict == "equal"
    assert by_field(G.compare(three, smi, nvlink=links[1]))["nvlink"].verdict == "mismatch"
    assert by_field(G.compare(snap, smi))["nvlink"].verdict == "unsupported"
    assert G.parse_nvlink_status("") == {}


def test_gpus_are_matched_by_uuid_then_bus_id(snap):
    smi = G.parse_smi_xml(XML)["gpus"]
    other = dataclasses.replace(snap, uuid="GPU-other", pci_bus_id="0000:18:00.0")
    pairs = G.match_gpus([snap, other, dataclasses.replace(snap, uuid="x", pci_bus_id="00000000:99:00.0")], smi)
    assert [p[1] is not None for p in pairs] == [True, True, False]


def test_faulty_8x_h100_in_the_older_format_agrees_and_shows_every_fault():
    """8 H100s in the driver-525 spelling (clocks_throttle_reasons, power_readings, single/double-bit
    ECC totals) against the adapter's recorded faulty node: every fault is read the same by both."""
    api = RecordedNvml.from_file(REPO / "tests" / "fixtures" / "nvml" / "h100-faulty.json")
    snaps = [api.snapshot(i) for i in range(api.device_count())]
    smi = G.parse_smi_xml((FIX / "h100-faulty-q.xml").read_text())
    links = G.parse_nvlink_status((FIX / "h100-faulty-nvlink-s.txt").read_text())
    assert smi["driver_version"] == "525.147.05" and len(smi["gpus"]) == 8 and len(links) == 8
    smi["gpus"].reverse()  # paired by UUID, not by position
    for snap, gpu in G.match_gpus(snaps, smi["gpus"]):
        checks = G.compare(snap, gpu, nvlink=links[snap.index])
        assert [c.field for c in checks if c.verdict == "mismatch"] == [], snap.index
    by_uuid = {g["uuid"]: g for g in smi["gpus"]}
    faults = {1: ("power_limit_w", 400.0), 2: ("pcie_width", 8), 3: ("compute_mode", "exclusive_process"),
              4: ("persistence_mode", False), 5: ("ecc_uncorrectable_volatile", 2), 6: ("sm_clock_mhz", 1095)}
    for i, (field, value) in faults.items():
        assert by_uuid[snaps[i].uuid][field] == value == getattr(snaps[i], field)
    assert by_uuid[snaps[5].uuid]["remapped_rows_pending"] is True
    assert by_uuid[snaps[6].uuid]["throttle_reasons"] == ("hw_slowdown", "hw_thermal_slowdown")
    assert [p["pid"] for p in by_uuid[snaps[3].uuid]["processes"]] == [48213]
    assert links[7] == {"total": 18, "down": [4, 11]} and links[0]["down"] == []
    # and the pairing by position would have been wrong on every GPU
    wrong = G.compare(snaps[0], smi["gpus"][0], nvlink=links[0])
    assert "uuid" in [c.field for c in wrong if c.verdict == "mismatch"]
