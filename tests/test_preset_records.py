"""Presets as declared records (diffrl.algos.preset): chains resolve from their root, wrong declarations
are refused with the reason, every value names its source, every measured source links to an existing
heading of docs/learning-evidence.md, and `diffrl presets --show/--algo` print them."""
import re
from pathlib import Path

import pytest

from diffrl.algos.preset import Preset, PresetError, catalogue, chain, evidence_anchor, resolve_values, walk
from diffrl.cli import main
from diffrl.config.presets import DEFAULTS, PRESETS, RECORDS, default_preset, every_preset, every_record, sources

ROOT = Path(__file__).resolve().parents[1]
EVIDENCE = ROOT / "docs" / "learning-evidence.md"


def _reads_only_own_section(algo: str, key: str) -> bool:
    """A toy rule: algorithm "a" reads section "x", "b" reads section "y"."""
    return "." not in key or key.split(".")[0] == {"a": "x", "b": "y"}[algo]


def _toy() -> dict[str, Preset]:
    return catalogue((
        Preset("a-big", "root", settings={"paper": {"algo": "a", "steps": 100, "x.width": 64}}),
        Preset("a-small", "fewer steps", base="a-big", settings={"budget": {"steps": 10}}),
        Preset("b-small", "b on a-small", base="a-small", settings={"paper b": {"algo": "b", "y.width": 8}}),
    ))


def test_a_chain_resolves_from_its_root_and_drops_what_its_algorithm_does_not_read():
    presets = _toy()
    assert [p.name for p in chain("b-small", presets)] == ["a-big", "a-small", "b-small"]
    assert resolve_values("a-small", presets, _reads_only_own_section) == {"algo": "a", "steps": 10, "x.width": 64}
    steps = list(walk("b-small", presets, _reads_only_own_section))
    assert [s.algo for s in steps] == ["a", "a", "b"]
    assert steps[-1].dropped == ("x.width",)
    assert dict(steps[-1].values) == {"algo": "b", "steps": 10, "y.width": 8}


def test_a_missing_base_a_loop_and_a_value_under_two_sources_are_refused():
    with pytest.raises(PresetError, match="'b-small': its base 'a-huge' is not a preset"):
        chain("b-small", {**_toy(), "b-small": Preset("b-small", "x", base="a-huge", settings={"s": {"algo": "b"}})})
    loop = {"p": Preset("p", "x", base="q", settings={"s": {"algo": "a"}}),
            "q": Preset("q", "x", base="p", settings={"s": {"steps": 1}})}
    with pytest.raises(PresetError, match=r"loops \(p -> q -> p\)"):
        chain("p", loop)
    with pytest.raises(PresetError, match="steps is set under two sources"):
        Preset("p", "x", settings={"one": {"algo": "a", "steps": 1}, "two": {"steps": 2}})
    with pytest.raises(PresetError, match="must name its algorithm"):
        Preset("p", "x", settings={"one": {"steps": 1}})
    with pytest.raises(PresetError, match="no source"):
        Preset("p", "x", settings={" ": {"algo": "a"}})
    with pytest.raises(PresetError, match="declared twice"):
        catalogue(tuple(_toy().values()), (Preset("a-big", "again", settings={"s": {"algo": "a"}}),))


def test_records_are_read_only():
    record = RECORDS["trudi-dmc-cpu"]
    with pytest.raises(TypeError):
        record.settings["another source"] = {"num_envs": 1}


def test_every_resolved_value_of_every_preset_names_its_source():
    for name, values in PRESETS.items():
        found = sources(name)
        assert set(found) == set(values), name
        for key, (owner, source) in found.items():
            assert owner in {p.name for p in chain(name, RECORDS)} and source and source.strip(), (name, key)


def _anchors(path: Path) -> set[str]:
    """GitHub-style anchors of a Markdown file's headings (as tests/test_docs_links.py)."""
    return {re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            for line in path.read_text().splitlines() if line.startswith("#")}


def test_every_learning_evidence_link_resolves_to_a_heading():
    anchors = _anchors(EVIDENCE)
    linked = set()
    for record in RECORDS.values():
        for text in (record.summary, *record.settings):
            anchor = evidence_anchor(text)
            if anchor is not None:
                linked.add(anchor)
                assert anchor in anchors, f"{record.name}: {text!r} links to a missing heading"
    assert {"reppo-dmc-cpu", "trudi-dmc-cpu", "amdp-dmc-cpu", "small-batch-stability"} <= linked


def test_the_default_preset_is_read_from_the_records():
    values, records = every_preset(), every_record()  # an outside algorithm registered in-process brings its own
    for (algo, fam), name in DEFAULTS.items():
        assert values[name]["algo"] == algo and fam in records[name].default_for
    assert default_preset("trudi", "playground/CartpoleBalance") == "trudi-dmc-cpu"
    assert default_preset("trudi", "toy/BimodalBandit") == "trudi-bandit"
    assert default_preset("ppo", "toy/BimodalBandit") == "ppo-toy"
    assert default_preset("sac", "toy/MirrorGoals") == "sac-dmc-cpu"  # the off-policy CPU preset elsewhere
    assert default_preset("ppo", "unknown/Task") is None


def test_presets_show_prints_the_chain_with_sources_and_the_resolved_sections(capsys):
    assert main(["presets", "--show", "trudi-dmc-cpu"]) == 0
    text = capsys.readouterr().out
    assert "chain: reppo-dmc-cpu -> trudi-dmc-cpu" in text
    assert "leaves at their defaults (trudi does not read them): gaussian.hidden, gaussian.norm" in text
    assert "docs/learning-evidence.md#trudi-dmc-cpu" in text and "arXiv 2606.15260" in text
    resolved = text.split("\nresolved for trudi")[1]
    assert "* reppo.critic_lr = 0.001" in resolved and "* diffusion.hidden = (128, 128)" in resolved
    assert "gaussian." not in resolved  # only the sections TruDi reads


def test_presets_algo_lists_only_that_algorithms_presets(capsys):
    assert main(["presets", "--algo", "trudi"]) == 0
    names = [line.split()[0].rstrip(":") for line in capsys.readouterr().out.splitlines() if not line.startswith(" ")]
    assert names == [n for n in PRESETS if PRESETS[n]["algo"] == "trudi"] and len(names) == 13


def test_unknown_names_are_answered_in_one_line(capsys):
    assert main(["presets", "--algo", "trudy"]) == 2
    err = capsys.readouterr().err.strip()
    assert "did you mean trudi" in err and len(err.splitlines()) == 1
    assert main(["presets", "--show", "reppo-dmc-cpux"]) == 2
    err = capsys.readouterr().err.strip()
    assert "did you mean reppo-dmc-cpu" in err and len(err.splitlines()) == 1
