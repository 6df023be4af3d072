"""busbw factors and byte accounting against hand-computed nccl-tests values; bad input."""

import pytest
from click.testing import CliRunner

from llmdiag.cli import cli
from llmdiag.ncclbench.collectives import COLLECTIVES, busbw_factor
from llmdiag.ncclbench.sizes import parse_size, size_sweep

HAND = {  # collective -> {n: factor}, computed by hand
    "all_reduce": {2: 1.0, 3: 4 / 3, 4: 1.5},
    "all_gather": {2: 0.5, 3: 2 / 3, 4: 0.75},
    "reduce_scatter": {2: 0.5, 3: 2 / 3, 4: 0.75},
    "all_to_all": {2: 0.5, 3: 2 / 3, 4: 0.75},
    "broadcast": {2: 1.0, 3: 1.0, 4: 1.0},
    "sendrecv": {2: 1.0, 3: 1.0, 4: 1.0},
}


@pytest.mark.parametrize("name", sorted(HAND))
@pytest.mark.parametrize("n", [2, 3, 4])
def test_busbw_factor(name, n):
    assert busbw_factor(name, n) == pytest.approx(HAND[name][n])


def test_split_collectives_count_per_rank():
    ag = COLLECTIVES["all_gather"]
    assert ag.count_for(1024, 4, 4) == 64 and ag.bytes_for(64, 4, 4) == 1024
    ar = COLLECTIVES["all_reduce"]
    assert ar.count_for(1024, 4, 4) == 256 and ar.bytes_for(256, 4, 4) == 1024


def test_sizes():
    assert parse_size("16M") == 16 << 20 and parse_size("1K") == 1024 and parse_size("1G") == 1 << 30
    assert size_sweep(1024, 8192, 2) == [1024, 2048, 4096, 8192]
    with pytest.raises(ValueError):
        parse_size("12Q")


@pytest.mark.parametrize("args, needle", [(["-b", "1M", "-e", "1K"], "larger than"),
                                          (["-d", "float8"], "float8"), (["-b", "xx"], "not a size")])
def test_bad_input_exit_2(args, needle):
    r = CliRunner().invoke(cli, ["nccl-bench", *args])
    assert r.exit_code == 2 and needle in r.output


@pytest.mark.parametrize("line, needle", [('pairwise_bytes = "12Q"', "pairwise_bytes"),
                                          ("pairwise_low_fraction = 3", "pairwise_low_fraction"),
                                          ("pairwise_iters = 0", "pairwise_iters")])
def test_bad_pairwise_config_exit_2(tmp_path, line, needle):
    cfg = tmp_path / "llmdiag.toml"
    cfg.write_text(f"[nccl_bench]\n{line}\n")
    r = CliRunner().invoke(cli, ["nccl-bench", "--config", str(cfg), "--pairwise"])
    assert r.exit_code == 2 and needle in r.output
