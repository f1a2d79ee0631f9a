"""Every diffrl command in the README and docs parses with diffrl's own parsers, and so does every
training flag written with a value in the prose (`--normalize-obs false`, `--adjoint.hidden 512,512`).

Commands written with placeholders (`diffrl eval RUN_DIR [--episodes N] [--checkpoint latest|best]`,
`diffrl presets --show NAME`) are parsed too, with each placeholder replaced by a value of its flag's type
(an integer for `--seed S`, a real preset for `NAME`), every optional part included and the first of
each `a|b` taken. Every `diffrl ...` span of the prose, fragments such as `diffrl export --format onnx`
included, names a command and only flags that command's parser accepts.

A command is parsed, not run: the parsers are stopped right after they accept the arguments."""
import argparse
import re
import sys
from pathlib import Path

import pytest
import tyro

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "cli.md")]
PLACEHOLDER = re.compile(r"\[|\||\{|\.\.\.|>|<|\b[A-Z][A-Z_]*\b")
LIST_OF_COMMANDS = re.compile(r" \| ")  # `diffrl eval | export | plot`: names, checked by test_documented_command_names
FRAGMENT = re.compile(r"/--")  # `diffrl train --out/--resume`: flags named together, not a command


# docs/extending.md runs the examples' own environment and algorithm with PYTHONPATH=examples
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

COMMAND_START = re.compile(r"^(\S+=\S+ )*(taskset -c \S+ )?(diffrl|python -m diffrl\.cli) ")


def block_commands(text: str) -> list[str]:
    """`diffrl ...` lines of the code blocks, fenced or indented by four spaces (continuation lines
    joined, comments, environment variables and a `taskset` prefix dropped)."""
    out, inside, buf = [], False, ""
    for line in text.splitlines():
        if line.strip().startswith("```"):
            inside = not inside
            continue
        stripped = line.split(" #")[0].strip()
        code = inside or line.startswith("    ")
        if not (buf or code and COMMAND_START.match(stripped)):
            continue
        buf = f"{buf} {stripped}".strip()
        if buf.endswith("\\"):
            buf = buf[:-1].rstrip()
            continue
        buf = re.sub(r"\$\w+", "0", re.sub(r"\s*&$", "", buf))  # a shell loop's variable, run in the background
        out.append(COMMAND_START.sub("", buf))
        buf = ""
    return out


def prose_commands(text: str) -> list[str]:
    """`diffrl ...` spans of the prose (code blocks left out), without the leading `diffrl`."""
    inside, prose = False, []
    for line in text.splitlines():
        if line.strip().startswith("```"):
            inside = not inside
        elif not inside and not line.startswith("    "):
            prose.append(line)
    # a span may wrap onto the next line of the paragraph
    return [re.sub(r"\s+", " ", c).strip() for c in re.findall(r"`diffrl ([^`]+)`", "\n".join(prose))]


def documented(kind):
    found = []
    for doc in DOCS:
        text = doc.read_text()
        if kind == "commands":
            found += [(doc.name, c) for c in block_commands(text) if not PLACEHOLDER.search(c)]
            # whole commands quoted in the prose: those that need no run directory
            found += [(doc.name, c) for c in prose_commands(text)
                      if re.match(r"(envs|presets|bench cost --env)\b", c) and not PLACEHOLDER.search(c)]
        elif kind == "synopses":  # commands with placeholders, in code blocks or quoted in the prose
            found += [(doc.name, c) for c in [*block_commands(text), *prose_commands(text)]
                      if PLACEHOLDER.search(c) and not LIST_OF_COMMANDS.search(c) and not FRAGMENT.search(c)]
        elif kind == "spans":  # every diffrl command or fragment, for its name and flags
            found += [(doc.name, c) for c in [*block_commands(text), *prose_commands(text)]]
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
    assert len(documented("synopses")) >= 10 and len(documented("spans")) >= 50


@pytest.mark.parametrize("doc, command", documented("commands"))
def test_documented_command_parses(parse_only, doc, command, capsys):
    import shlex

    from diffrl.cli import main

    with pytest.raises(Parsed):
        main(shlex.split(command))
    assert "Traceback" not in capsys.readouterr().err


TRAIN_FLAGS_NOT_FIELDS = {"help", "move-aside", "no-compile-cache"}
"""Flags `diffrl train` takes besides the config's fields (diffrl.commands.train.cmd_train, diffrl.cli.main)."""
PLACEHOLDER_WORD = re.compile(r"[A-Z][A-Z_]*(\.[a-z]+)?")
EXAMPLE_VALUES = {"RUN_DIR": "runs/doc", "DIR": "runs/doc-out", "OUT": "cost.json", "F": "out.json",
                  "FIG.png": "fig.png", "PATH": "clip.gif", "NAME": "trudi-dmc-cpu",
                  "ENV": "playground/CartpoleBalance", "S": "sde"}
"""What a placeholder stands for where its flag's type does not say (numbers, choices)."""
FLAG_VALUES = {"--suite": "toy", "--algos": "reppo,trudi", "--diffusion-steps": "8,16"}
"""Values of flags whose placeholder is `...` or does not say what they take (`--suite S`)."""


def command_parser(name: str) -> argparse.ArgumentParser:
    """The argparse parser of a diffrl command other than train, caught before it parses."""
    from diffrl.cli import main

    caught = []

    def catch(self, *args, **kwargs):
        caught.append(self)
        raise Parsed

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_args", catch)
        with pytest.raises(Parsed):
            main([*name.split(), "--no-compile-cache"])  # --no-compile-cache: main leaves JAX's config alone
    return caught[0]


def train_field(flag: str, algo: str | None = None):
    """The type of the config field behind a `diffrl train` flag (tyro's `--section.no-field`
    negates a boolean), or None for a flag that is not a field; raises ConfigError for an unknown one.
    ``algo``: the command's --algo, whose own config sections (an algorithm from outside) count too."""
    from diffrl.config import ConfigError, config_type
    from diffrl.config.overrides import field_type

    name, template = flag[2:], config_type(algo or "ppo")()
    if name in TRAIN_FLAGS_NOT_FIELDS:
        return None
    try:
        return field_type(template, name)
    except ConfigError:
        head, _, last = name.rpartition(".")
        if last.startswith("no-") and field_type(template, f"{head}.{last[3:]}".lstrip(".")) is bool:
            return bool
        raise


def accepts(command: str, flag: str, algo: str | None = None) -> bool:
    from diffrl.config import ConfigError

    if command == "train":
        try:
            train_field(flag, algo)
        except ConfigError:
            return False
        return True
    return flag in command_parser(command)._option_string_actions


def example_value(command: str, flag: str | None, placeholder: str, argv: list[str]) -> str:
    """A value for `placeholder` written after `flag` (None: a positional argument)."""
    import typing

    if flag in FLAG_VALUES:
        return FLAG_VALUES[flag]
    if command == "train" and flag == "--preset":  # a preset of the command's own algorithm and env
        from diffrl.config.presets import resolve

        options = dict(zip(argv, argv[1:]))
        return resolve(options["--algo"], options["--env"], None).preset
    if flag is not None:
        if command == "train":
            kinds, choices = typing.get_args(train_field(flag)) or (train_field(flag),), None
        else:
            action = command_parser(command)._option_string_actions[flag]
            kinds, choices = (action.type,), action.choices
        if choices:
            return str(next(iter(choices)))
        if int in kinds and bool not in kinds:
            return "4"
        if float in kinds:
            return "0.5"
    assert placeholder in EXAMPLE_VALUES, f"no example value for the placeholder {placeholder}: add one"
    return EXAMPLE_VALUES[placeholder]


def instantiate(synopsis: str) -> list[str]:
    """A synopsis as one concrete command: every optional part kept (words in brackets that are not
    arguments, as `[any config field]`, dropped), the first of each `a|b`, repetition marks dropped,
    each placeholder replaced by a value of its flag's type."""
    text = synopsis.replace("\\|", "|")
    while "[" in text:
        text = re.sub(r"\[([^\[\]]*)\]", lambda m: (m.group(1) if m.group(1).startswith(",") else f" {m.group(1)} ")
                      if re.match(r"\s*(-|,|[A-Z])", m.group(1)) else " ", text)
    tokens = text.split()
    words = 2 if tokens[0] == "bench" else 1
    command, argv = " ".join(tokens[:words]), tokens[:words]
    for token in tokens[words:]:
        flag = argv[-1] if argv[-1].startswith("--") else None
        if token == "...":  # `--algos ...` stands for a value; `RUN_DIR ...` and `S ...` for more of them
            if flag is not None:
                argv.append(example_value(command, flag, token, argv))
            continue
        if token.startswith("--"):
            argv.append(token)
            continue
        parts = token.replace("...", "").split("|")[0].split(",")
        argv.append(",".join(example_value(command, flag, part, argv) if PLACEHOLDER_WORD.fullmatch(part)
                             else part for part in parts))
    return argv


def test_instantiate():
    assert instantiate("eval RUN_DIR [--sampler S[,S...] ...] [--episodes N] [--checkpoint latest\\|best]") == [
        "eval", "runs/doc", "--sampler", "sde,sde", "--episodes", "4", "--checkpoint", "latest"]
    assert instantiate("presets [--show NAME [--env ENV]]") == [
        "presets", "--show", "trudi-dmc-cpu", "--env", "playground/CartpoleBalance"]
    assert instantiate("bench cost --env ENV [--algos ...] [--json OUT]") == [
        "bench", "cost", "--env", "playground/CartpoleBalance", "--algos", "reppo,trudi", "--json", "cost.json"]
    assert instantiate("train --algo ppo --env gymnax/Pendulum-v1 [--preset NAME] [--seed S] [any config field]") == [
        "train", "--algo", "ppo", "--env", "gymnax/Pendulum-v1", "--preset", "ppo-gymnax", "--seed", "4"]


@pytest.mark.parametrize("doc, synopsis", documented("synopses"))
def test_documented_synopsis_parses(parse_only, doc, synopsis, capsys):
    from diffrl.cli import main

    argv = instantiate(synopsis)
    with pytest.raises(Parsed):
        main(argv)
    assert "Traceback" not in capsys.readouterr().err, argv


@pytest.mark.parametrize("doc, span", documented("spans"))
def test_documented_command_names_and_flags(doc, span):
    """`diffrl NAME ...` names a command, and each of its flags is one that command accepts."""
    from diffrl.cli import COMMANDS

    for command in span.split(" | ") if LIST_OF_COMMANDS.search(span) else [span]:
        words = command.split()
        assert words[0] in COMMANDS, f"{doc}: diffrl {command}: no command {words[0]!r}"
        name = "bench cost" if words[0] == "bench" else words[0]
        if name == "bench cost":
            assert words[1:2] == ["cost"], f"{doc}: diffrl {command}"
        flags = {flag.split("=")[0] for word in words for flag in word.split("/") if flag.startswith("--")}
        algo = words[words.index("--algo") + 1] if "--algo" in words[:-1] else None
        unknown = sorted(flag for flag in flags if not accepts(name, flag, algo))
        assert not unknown, f"{doc}: diffrl {command}: diffrl {name} does not take {', '.join(unknown)}"


def train_flags():
    from diffrl.config import ConfigError, TrainConfig
    from diffrl.config.overrides import field_type

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

    from diffrl.commands.train_flags import flag_values
    from diffrl.config import TrainConfig

    real_cli = tyro.cli
    real_cli(TrainConfig, args=flag_values(shlex.split(span)), prog="diffrl train")
