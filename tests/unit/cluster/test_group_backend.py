"""The group probes' backend follows the nodes' devices: NCCL only when every node has GPUs and
a torch with NCCL (what the job will use), gloo otherwise, with the reason."""

from __future__ import annotations

import pytest

from llmdiag.cluster import groupbackend, groupworker
from llmdiag.config import Config
from llmdiag.context import Context

GPU = {"gpus": 8, "nccl": True}
CPU = {"gpus": 0, "nccl": None}


@pytest.mark.parametrize("nodes,backend,why", [
    ({"node-0": GPU, "node-1": GPU}, "nccl", "every node has GPUs (8 per node)"),
    ({"node-0": GPU, "node-1": {"gpus": 4, "nccl": True}}, "nccl", "(4-8 per node)"),
    ({"node-0": CPU, "node-1": CPU}, "gloo", "no node has a GPU"),
    ({"node-0": GPU, "node-1": CPU, "node-2": GPU}, "gloo", "none on node-1"),
    ({"node-0": GPU, "node-1": {"gpus": 8, "nccl": False}}, "gloo", "torch has no NCCL on node-1"),
    ({"node-0": GPU, "node-1": None}, "gloo", "none on node-1"),  # a node that said nothing
    ({}, "gloo", "no node joined"),
])
def test_choice_follows_the_nodes(nodes, backend, why):
    choice = groupbackend.choose(nodes)
    assert choice["backend"] == backend and why in choice["reason"]
    assert choice["gpus_per_node"] == (min(d["gpus"] for d in nodes.values()) if backend == "nccl" else None)


def test_node_devices_without_gpu_files_never_imports_torch(tmp_path, monkeypatch):
    import sys

    (tmp_path / "nvidiactl").touch()  # the control device alone is no GPU
    monkeypatch.setitem(sys.modules, "torch", None)  # an import would raise
    assert groupbackend.node_devices(str(tmp_path)) == {"gpus": 0, "nccl": None}


def test_node_devices_asks_torch_where_gpu_files_exist(tmp_path):
    (tmp_path / "nvidia0").touch()
    got = groupbackend.node_devices(str(tmp_path))
    # this machine's torch is CPU-only: the device file alone does not make a usable GPU
    assert got["gpus"] == 0


def test_rank_0_chooses_from_what_the_joined_nodes_said():
    from llmdiag.cluster.agent import Agent

    class Session:  # the store's view: who joined, and their join records
        def joined(self):
            return [0, 2]

        def join_info(self, ranks):
            said = {0: {"node": "node-0", "devices": GPU}, 1: {"node": "node-1", "devices": CPU},
                    2: {"node": "node-2", "devices": GPU}}
            return {r: said[r] for r in ranks}

    agent = Agent.__new__(Agent)
    agent.session = Session()
    agent.ctx = Context.create(Config.from_mapping({"cluster": {"nproc_per_node": 2}}))
    assert agent._choose_group()["backend"] == "nccl"  # node-1 (no GPU) never joined: not in the group
    Session.joined = lambda self: [0, 1, 2]
    choice = agent._choose_group()
    assert choice["backend"] == "gloo" and "none on node-1" in choice["reason"]



@pytest.mark.parametrize("nodes,nproc,ranks,why", [
    ({"a": GPU, "b": GPU}, None, 8, "one per GPU"),  # torchrun --nproc-per-node=gpu
    ({"a": GPU, "b": {"gpus": 4, "nccl": True}}, None, 4, "one per GPU"),  # the smallest node
    ({"a": GPU, "b": GPU}, 2, 2, "nproc_per_node = 2"),
    ({"a": {"gpus": 2, "nccl": True}}, 4, 2, "capped at 2 GPU(s)"),  # NCCL: one rank per GPU at most
    ({"a": CPU, "b": CPU}, None, 1, "one per node"),
    ({"a": CPU, "b": CPU}, 2, 2, "nproc_per_node = 2"),  # a CPU job's processes per node
])
def test_ranks_per_node_follow_the_job(nodes, nproc, ranks, why):
    choice = groupbackend.choose(nodes, nproc)
    assert choice["ranks_per_node"] == ranks and why in choice["ranks_reason"], choice


def test_rank_layout_is_node_major_as_torchrun_numbers_ranks():
    assert [groupworker.layout(i, 2, 3) for i in range(3)] == [(0, 6), (2, 6), (4, 6)]


def test_workers_get_only_the_settings_the_user_gave():
    import json

    cfg = Config.from_mapping({"nccl_bench": {"probe_iters": 3}, "network": {"port_range": "29500-29503"}})
    got = groupworker.explicit_config(cfg)
    assert got == {"nccl_bench": {"probe_iters": 3}, "network": {"port_range": (29500, 29503)}}, got
    # through the worker's command line (JSON) and back: the same config, defaults still unset
    again = Config.from_mapping(json.loads(json.dumps(got, default=list)))
    assert again.is_set("nccl_bench", "probe_iters") and not again.is_set("nccl_bench", "pairwise_low_fraction")
    assert again.get("network", "port_range") == cfg.get("network", "port_range")
