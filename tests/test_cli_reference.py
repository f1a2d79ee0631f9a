"""docs/cli.md is the commands' current help (regenerate: python -m diffrl.commands.cli_reference > docs/cli.md)."""
from pathlib import Path

from diffrl.commands.cli_reference import COMMANDS, render

DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def test_cli_reference_is_current():
    current = render()
    assert DOC.read_text() == current, (
        "docs/cli.md is out of date with the commands' --help; regenerate it with "
        "`python -m diffrl.commands.cli_reference > docs/cli.md`")


def test_cli_reference_covers_every_command_and_export_flags():
    from diffrl.cli import COMMANDS as CLI_COMMANDS

    documented = {name.split()[0] for name, _ in COMMANDS}
    assert documented == set(CLI_COMMANDS)
    text = DOC.read_text()
    for flag in ("--format", "--seed-index", "--reppo.anneal-lr", "--adjoint.control-bound", "--show"):
        assert flag in text


def test_algorithms_reference_is_current():
    from diffrl.commands.algorithms_reference import render as render_algorithms

    doc = DOC.parent / "algorithms.md"
    assert doc.read_text() == render_algorithms(), (
        "docs/algorithms.md is out of date with the modules' docstrings; regenerate it with "
        "`python -m diffrl.commands.algorithms_reference > docs/algorithms.md`")
