"""Each setting is declared once: the section classes give the loader's fields, the typed values,
the mirroring click options and the docs, and these stay consistent with each other."""

from __future__ import annotations

import dataclasses

import click
import pytest
from click.testing import CliRunner

from llmdiag import config as C
from llmdiag.cliutil import setting_flags, setting_option


def _all_commands():
    from llmdiag.cli import COMMANDS, cli

    ctx = click.Context(cli)
    for name in COMMANDS:
        cmd = cli.get_command(ctx, name)
        yield name, cmd
        if isinstance(cmd, click.Group):
            for sub in cmd.list_commands(ctx):
                yield f"{name} {sub}", cmd.get_command(ctx, sub)


def _mirrors():
    """(command, click option, Field) for every option made by setting_option."""
    for name, cmd in _all_commands():
        for p in cmd.params:
            where = getattr(p, "llmdiag_setting", None)
            if where:
                yield name, p, C.SECTIONS[where[0]][where[1]]


def test_every_section_is_a_settings_class_with_its_defaults():
    C._load_section_modules()
    assert set(C.SECTIONS) == set(C.SETTINGS_CLASSES), "a section registered without a settings class"
    cfg = C.Config.default()
    for name, cls in C.SETTINGS_CLASSES.items():
        assert set(C.SECTIONS[name]) <= {f.name for f in dataclasses.fields(cls)}
        defaults = cls()
        assert cfg.settings(cls) == defaults, name  # the loader's default is the class's default
        for key, field in C.SECTIONS[name].items():
            got = getattr(defaults, key)
            want = field.default
            assert (tuple(got) if isinstance(got, list) else got) == (
                tuple(want) if isinstance(want, list) else want), f"[{name}] {key}"


def test_every_declared_flag_is_an_option_that_mirrors_it():
    C._load_section_modules()
    mirrored = {(p.llmdiag_setting, tuple(sorted(p.opts + p.secondary_opts))) for _, p, _ in _mirrors()}
    for name, fields in C.SECTIONS.items():
        for key, field in fields.items():
            if not field.flag:
                continue
            opts = tuple(sorted(o for decl in field.flag for o in decl.split("/")))
            assert ((name, key), opts) in mirrored, f"[{name}] {key} declares {field.flag} but no command has it"


def test_a_mirroring_option_accepts_what_the_file_accepts():
    seen = 0
    for command, p, field in _mirrors():
        where = f"{command} {p.opts[0]}"
        if field.choices is not None and isinstance(p.type, click.Choice):
            assert set(field.choices) <= set(p.type.choices), where
            seen += 1
        elif field.type in ("int", "float") and not p.is_flag:
            assert isinstance(p.type, (click.IntRange, click.FloatRange)) or (field.min, field.max) == (None, None), where
            if isinstance(p.type, (click.IntRange, click.FloatRange)):
                assert (p.type.min, p.type.max) == (field.min, field.max), where
            seen += 1
        assert field.help[:20].lower() in (p.help or "").lower(), f"{where}: help not from the declaration"
        assert p.default is None, f"{where}: a default beside the declaration's"
    assert seen > 30


@pytest.fixture
def demo():
    """A section declared for one test (registered, then removed so no other test sees it)."""

    @C.section("zz_test", "A section for this test only.")
    class Demo:
        iters: int = C.setting(20, "timed iterations", min=1, max=100, flag=("-n", "--iters"))
        names: list[str] = C.setting(["a"], "names", flag=("--name",))
        fast: bool | None = C.setting(None, "go fast", flag=("--fast/--slow",))

    yield Demo
    C.SECTIONS.pop("zz_test")
    C.SETTINGS_CLASSES.pop("zz_test")


def _demo_command(cls, cfg_text: str | None):
    @click.command()
    @setting_option(cls, "iters")
    @setting_option(cls, "names", multiple=True)
    @setting_option(cls, "fast")
    def cmd(**_):
        base = C.Config.from_mapping(C.tomllib.loads(cfg_text)) if cfg_text else C.Config.default()
        s = base.with_overrides(setting_flags()).settings(cls)
        click.echo(f"{s.iters} {s.names} {s.fast}")

    return cmd


def test_flags_override_the_file_which_overrides_the_declared_default(demo):
    def run(cfg, *args):
        return CliRunner().invoke(_demo_command(demo, cfg), list(args))

    assert run(None).output.strip() == "20 ['a'] None"
    file = "[zz_test]\niters = 7\nfast = true\n"
    assert run(file).output.strip() == "7 ['a'] True"
    assert run(file, "-n", "9", "--name", "x", "--name", "y", "--slow").output.strip() == "9 ['x', 'y'] False"
    bad = run(None, "--iters", "101")  # the declared range, on the command line too
    assert bad.exit_code == 2 and "1<=x<=100" in bad.output
    assert "Timed iterations. Config: [zz_test] iters, default 20." in " ".join(run(None, "--help").output.split())


def test_an_annotation_without_a_config_type_is_refused():
    with pytest.raises(TypeError, match="no config type"):
        @C.section("zz_bad")
        class _Bad:
            when: complex = C.setting(None, "no such type")
    assert "zz_bad" not in C.SECTIONS
