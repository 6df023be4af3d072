"""The platform probe on sysfs/procfs trees built here (an HGX-like node: two sockets, a PCIe
switch per GPU/NIC pair, NVSwitches) and with systemctl/lspci executables on the test's PATH."""

from __future__ import annotations

from llmdiag.probes import pcitree
from llmdiag.probes.platform import PlatformProbe
from llmdiag.result import Status
from llmdiag.runner import run_probe
from tests.probes.nodeutil import assert_actionable, by_check, context
from tests.probes.sysfs_tree import NIC, NVSWITCH, Tree, executable, path_env

# socket 0: root port 00:01.0 -> switch 01:00.0 -> ports 02:00.0 (GPU 03:00.0) and 02:01.0 (NIC 04:00.0)
GPU0 = ("0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0")
NIC0 = ("0000:00:01.0", "0000:01:00.0", "0000:02:01.0", "0000:04:00.0")
# socket 1: a GPU and a NIC behind their own switch
GPU1 = ("0000:80:01.0", "0000:81:00.0", "0000:82:00.0", "0000:83:00.0")
NIC1 = ("0000:80:01.0", "0000:81:00.0", "0000:82:01.0", "0000:84:00.0")


def hgx(tmp_path, *, nic_on_socket1: bool = True, peermem: bool = True, nvswitch: bool = False) -> Tree:
    t = Tree(tmp_path / "root")
    t.device(*GPU0, numa=0)
    t.rdma("mlx5_0", t.device(*NIC0, vendor=0x15B3, cls=NIC, numa=0))
    t.device(*GPU1, numa=1, domain="pci0000:80")
    if nic_on_socket1:
        t.rdma("mlx5_1", t.device(*NIC1, vendor=0x15B3, cls=NIC, numa=1, domain="pci0000:80"))
    if nvswitch:
        for i in range(4):
            t.device("0000:00:02.0", f"0000:0{5 + i}:00.0", cls=NVSWITCH, numa=0)
    t.modules(*(["nvidia_peermem"] if peermem else []))
    return t


def run(tree: Tree, bindir=None):
    env = path_env(bindir) if bindir else {"PATH": "/nonexistent"}
    results = run_probe(PlatformProbe(), context(env=env, root=tree.root))
    assert_actionable(results)
    return by_check(results)


def test_healthy_node_passes(tmp_path):
    r = run(hgx(tmp_path))
    assert r["gpudirect-rdma"].status is Status.PASS and "nvidia_peermem" in r["gpudirect-rdma"].summary
    assert r["pcie-acs"].status is Status.PASS
    # 2 GPUs x 2 NICs: one pair behind each switch, two across the root complex
    assert (r["pcie-acs"].data["paths_via_switch"], r["pcie-acs"].data["paths_via_root_complex"]) == (2, 2)
    assert r["gpu-nic-numa"].status is Status.PASS
    assert r["fabric-manager"].status is Status.SKIP and "no NVSwitch" in r["fabric-manager"].summary
    # the nearest NIC of each GPU is the one behind the same switch
    gpus = r["gpu-nic-numa"].data["gpus"]
    assert gpus["0000:03:00.0"]["nearest_nic"] == {"nic": "mlx5_0", "via": "PCIe switch", "bridges": 3}
    assert gpus["0000:83:00.0"]["nearest_nic"]["nic"] == "mlx5_1"


def test_no_peer_memory_module_warns(tmp_path):
    r = run(hgx(tmp_path, peermem=False))
    gdr = r["gpudirect-rdma"]
    assert gdr.status is Status.WARN and gdr.runbook == "gpudirect-rdma-off"
    assert "modprobe nvidia_peermem" in gdr.remediation


def test_legacy_nv_peer_mem_counts(tmp_path):
    t = hgx(tmp_path, peermem=False)
    t.modules("nv_peer_mem")
    assert run(t)["gpudirect-rdma"].status is Status.PASS


def test_acs_on_the_switch_between_gpu_and_nic_warns(tmp_path):
    t = hgx(tmp_path)
    # what Linux does with an IOMMU: ACS on root ports, where it changes no GPU-NIC route
    t.acs("0000:00:01.0", "SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd")
    t.acs("0000:82:01.0", "DirectTrans")  # allows translated P2P: not a redirect
    assert run(t)["pcie-acs"].status is Status.PASS
    t.acs("0000:02:01.0", "SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd")  # the NIC's switch port
    acs = run(t)["pcie-acs"]
    assert acs.status is Status.WARN and acs.runbook == "pcie-acs-enabled"
    assert acs.data["acs_enabled"] == {"0000:02:01.0": ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"]}
    assert "setpci -s 0000:02:01.0 ECAP_ACS+0x6.w=0000" in acs.remediation
    assert acs.evidence[0].observed == "SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+"


def test_acs_without_a_shared_switch_passes_and_says_why(tmp_path):
    t = Tree(tmp_path / "root")
    t.device("0000:00:01.0", "0000:01:00.0", numa=0)  # GPU straight below a root port
    t.rdma("mlx5_0", t.device("0000:00:02.0", "0000:02:00.0", vendor=0x15B3, cls=NIC, numa=0))
    t.acs("0000:00:01.0", "SrcValid", "ReqRedir")
    t.modules("nvidia_peermem")
    acs = run(t)["pcie-acs"]
    assert acs.status is Status.PASS and "no GPU shares a PCIe switch with a NIC" in acs.summary


def test_acs_from_lspci_when_the_config_space_is_cut(tmp_path):
    """Not root: sysfs gives 64 bytes of config space; lspci -vvv (run as lspci is) answers."""
    t = hgx(tmp_path)
    for bdf in ("0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:02:01.0",
                "0000:80:01.0", "0000:81:00.0", "0000:82:00.0", "0000:82:01.0"):
        t.acs(bdf, size=64)
    bindir = tmp_path / "bin"
    executable(bindir, "lspci", """
case "$3" in
  0000:02:01.0) printf '\\t\\tACSCap:\\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\\n'
                printf '\\t\\tACSCtl:\\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\\n' ;;
  *) printf '\\tCapabilities: [40] Power Management version 3\\n' ;;
esac
""")
    acs = run(t, bindir)["pcie-acs"]
    assert acs.status is Status.WARN
    assert acs.data["acs_enabled"] == {"0000:02:01.0": ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"]}


def test_acs_unknown_without_root_or_lspci_is_a_skip_with_the_reason(tmp_path):
    t = hgx(tmp_path)
    t.acs("0000:02:00.0", size=64)
    acs = run(t)["pcie-acs"]
    assert acs.status is Status.SKIP and "lspci not installed" in acs.summary


def test_lspci_parser():
    assert pcitree.parse_lspci_acsctl("ACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- "
                                      "EgressCtrl- DirectTrans-") == ()
    assert pcitree.parse_lspci_acsctl("\tCapabilities: <access denied>") is None
    assert pcitree.parse_lspci_acsctl("ACSCtl: SrcValid+ EgressCtrl+ Bogus+") == ("SrcValid", "EgressCtrl")


def test_gpu_without_a_nic_on_its_socket_warns(tmp_path):
    numa = run(hgx(tmp_path, nic_on_socket1=False))["gpu-nic-numa"]
    assert numa.status is Status.WARN and numa.runbook == "gpu-nic-numa"
    assert "0000:83:00.0" in numa.summary and "0000:03:00.0" not in numa.summary
    assert numa.data["gpus"]["0000:83:00.0"]["nearest_nic"]["via"] == "root complex"


def test_numa_of_the_nics_not_reported_is_a_skip(tmp_path):
    t = Tree(tmp_path / "root")
    t.device(*GPU0, numa=0)
    t.device(*GPU1, numa=1, domain="pci0000:80")
    t.rdma("mlx5_0", t.device(*NIC0, vendor=0x15B3, cls=NIC, numa=-1))
    numa = run(t)["gpu-nic-numa"]
    assert numa.status is Status.SKIP and "not reported" in numa.summary


def test_fabric_manager_state_from_systemctl(tmp_path):
    bindir = tmp_path / "bin"
    t = hgx(tmp_path, nvswitch=True)
    executable(bindir, "systemctl", 'echo "$*" >> "$(dirname "$0")/calls"; echo inactive; exit 3\n')
    fm = run(t, bindir)["fabric-manager"]
    assert fm.status is Status.FAIL and fm.runbook == "fabric-manager-down"
    assert fm.data["nvswitches"] == [f"0000:0{5 + i}:00.0" for i in range(4)] and "inactive" in fm.summary
    assert (bindir / "calls").read_text().split() == ["is-active", "nvidia-fabricmanager"]
    executable(bindir, "systemctl", "echo active\n")
    assert run(t, bindir)["fabric-manager"].status is Status.PASS


def test_fabric_manager_without_systemctl_is_a_skip_with_the_reason(tmp_path):
    fm = run(hgx(tmp_path, nvswitch=True))["fabric-manager"]
    assert fm.status is Status.SKIP and "no systemctl" in fm.summary


def test_no_gpu_no_nic_skips_with_reasons(tmp_path):
    t = Tree(tmp_path / "root")
    r = run(t)
    assert {k: v.status for k, v in r.items()} == {k: Status.SKIP for k in r}
    assert "no NVIDIA GPU" in r["gpudirect-rdma"].summary
    t.device(*GPU0, numa=0)
    r = run(t)
    assert "no RDMA NIC" in r["pcie-acs"].summary and "no RDMA NIC" in r["gpu-nic-numa"].summary


def test_list_probes_shows_platform_and_dcgm():
    from click.testing import CliRunner

    from llmdiag.cli import cli

    out = CliRunner().invoke(cli, ["preflight", "--list-probes"]).output
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    assert "platform" in names and "dcgm" in names
