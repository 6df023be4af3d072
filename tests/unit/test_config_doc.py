"""docs/config.md is generated from the declared sections; keep it current."""

from pathlib import Path

from llmdiag.config import markdown_reference


def test_config_reference_is_current():
    doc = Path(__file__).resolve().parents[2] / "docs" / "config.md"
    assert doc.read_text() == markdown_reference(), "run: python -m llmdiag.config > docs/config.md"


def test_example_config_loads():
    from llmdiag.config import Config

    cfg = Config.load(Path(__file__).resolve().parents[2] / "examples" / "llmdiag.toml")
    assert cfg.get("cluster", "gpus_per_node") == 8
    assert cfg.get("network", "port_range") == (29500, 29510)
