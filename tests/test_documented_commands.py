"""Every diffrl command in the README and docs parses with diffrl's own parsers, and so does every
training flag written with a value in the prose (`--normalize-obs false`, `--adjoint.hidden 512,512`).

A command is parsed, not run: the parsers are stopped right after they accept the arguments."""
import argparse
import re
from pathlib import Path

import pytest
import tyro

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "cli.md")]
PLACEHOLDER = re.compile(r"\[|\||\{|\.\.\.|>|<|\b[A-Z][A-Z_]*\b")


def block_commands(text: str) -> list[str]:
    """`diffrl ...` lines of the fenced code blocks (continuation lines joined, comments dropped)."""
    out, inside, buf = [], False, ""
    for line in text.splitlines():
        if line.strip().startswith("```"):
            inside = not inside
            continue
        stripped = line.split(" #")[0].strip()
        if not inside or not (buf or re.match(r"^(\S+=\S+ )*(diffrl|python -m diffrl\.cli) ", stripped)):
            continue
        buf = f"{buf} {stripped}".strip()
        if buf.endswith("\\"):
            buf = buf[:-1].rstrip()
            continue
        buf = re.sub(r"\$\w+", "0", re.sub(r"\s*&$", "", buf))  # a shell loop's variable, run in the background
        out.append(re.sub(r"^(\S+=\S+ )*(diffrl|python -m diffrl\.cli) ", "", buf))
        buf = ""
    return out


def documented(kind):
    found = []
    for doc in DOCS:
        text = doc.read_text()
        if kind == "commands":
            found += [(doc.name, c) for c in block_commands(text) if "[" not in c]
            # whole commands quoted in the prose: those that need no run directory
            found += [(doc.name, c) for c in re.findall(r"`diffrl ((?:envs|presets|bench cost --env)[^`]*)`", text)
                      if not PLACEHOLDER.search(c)]
        else:  # inline `--flag value` spans with a concrete value
            found += [(doc.name, span) for span in re.findall(r"`(--[a-z][a-z0-9.-]+(?:[ =][^`]+))`", text)
                      if not PLACEHOLDER.search(span.split(None, 1)[-1] if " " in span else span.split("=", 1)[1])]
    return found


class Parsed(Exception):
    """Raised in place of running a command whose arguments were accepted."""


@pytest.fixture
def parse_only(monkeypatch):
    """Stop tyro and argparse right after a successful parse; --resume needs no run directory."""
    from diffrl.config import TrainConfig
    from diffrl.core import run_dir

    real_cli, real_parse = tyro.cli, argparse.ArgumentParser.parse_args

    def cli(*args, **kwargs):
        real_cli(*args, **kwargs)
        raise Parsed

    def parse_args(self, *args, **kwargs):
        real_parse(self, *args, **kwargs)
        raise Parsed

    monkeypatch.setattr(tyro, "cli", cli)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_args)
    monkeypatch.setattr(run_dir, "resume_config", lambda path, **kw: TrainConfig(resume=str(path), out=str(path)))


def test_the_docs_have_commands_to_check():
    assert len(documented("commands")) >= 15 and len(documented("flags")) >= 20


@pytest.mark.parametrize("doc, command", documented("commands"))
def test_documented_command_parses(parse_only, doc, command, capsys):
    import shlex

    from diffrl.cli import main

    with pytest.raises(Parsed):
        main(shlex.split(command))
    assert "Traceback" not in capsys.readouterr().err


def train_flags():
    from diffrl.config import ConfigError, TrainConfig
    from diffrl.overrides import field_type

    flags = []
    for doc, span in documented("flags"):
        try:
            field_type(TrainConfig(), re.split(r"[ =]", span, maxsplit=1)[0][2:])
        except ConfigError:  # a benchmark script's flag, not train's
            continue
        flags.append((doc, span))
    return flags


@pytest.mark.parametrize("doc, span", train_flags())
def test_documented_training_flag_parses(doc, span):
    import shlex

    from diffrl.cli import flag_values
    from diffrl.config import TrainConfig

    real_cli = tyro.cli
    real_cli(TrainConfig, args=flag_values(shlex.split(span)), prog="diffrl train")
