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


def test_reference_has_one_row_per_setting_with_its_flag():
    """Every declared key is documented once, with its range, default and mirroring flag, and
    every row is a declared key (nothing documented that the loader would refuse)."""
    from llmdiag import config as C

    doc = (Path(__file__).resolve().parents[2] / "docs" / "config.md").read_text()
    rows: dict[tuple[str, str], list[str]] = {}
    section = None
    for line in doc.splitlines():
        if line.startswith("## ["):
            section = line[4:-1]
        elif line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            key = cells[0].strip("`")
            assert (section, key) not in rows, f"[{section}] {key} documented twice"
            rows[(section, key)] = cells
    want = {}
    for name, fields in C.SECTIONS.items():
        for f in fields.values():
            want[(name, f.name)] = (f.accepted(), f.flag)
            for item in f.item_fields or ():
                want[(name, f"{f.name}[].{item.name}")] = (item.accepted(), ())
    assert set(rows) == set(want)
    for where, (accepted, flag) in want.items():
        cells = rows[where]
        assert cells[1] == accepted, where
        assert cells[3] == (", ".join(f"`{d}`" for d in flag) or "-"), where
