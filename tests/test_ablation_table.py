"""benchmarks/ablation.py on hand-made stability records: the rows, their medians and IQMs."""
import json

import pytest

import ablation


def write_record(directory, algo, finals, drops, wall=None):
    directory.mkdir(parents=True, exist_ok=True)
    seeds = [{"seed": i, "best": f + d, "final": f, "worst_drop": d, "best_raw": 1000 * (f + d), "final_raw": 1000 * f}
             for i, (f, d) in enumerate(zip(finals, drops))]
    record = {"algo": algo, "env": "playground/CheetahRun", "samplers": ["sde", "mean"], "trained_env_steps": 98304,
              "per_sampler": {"sde": {"seeds": seeds}, "mean": {"seeds": []}}, "wall_s": wall}
    (directory / f"playground_CheetahRun--{algo}.json").write_text(json.dumps(record))
    (directory / "command.json").write_text(json.dumps({"not": "a record"}))  # skipped: no per_sampler


def test_rows_give_the_first_sampler_median_iqm_and_drops(tmp_path):
    write_record(tmp_path / "a", "trudi", [0.1, 0.5, 0.2, 0.4, 0.3], [0.0, 0.25, 0.1, 0.3, 0.0], wall=123.4)
    write_record(tmp_path / "b", "dime", [0.2] * 5, [0.0] * 5)
    out = tmp_path / "t.md"
    assert ablation.main(["TruDi: trajectory=" + str(tmp_path / "a"), "DIME=" + str(tmp_path / "b"),
                          "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 4
    first = [c.strip() for c in lines[2].strip("|").split("|")]
    assert first[:5] == ["CheetahRun", "TruDi: trajectory", "trudi (sde)", "5", "98,304"]
    assert first[5].startswith("0.300 [")  # median of 0.1..0.5
    assert first[6].startswith("0.300 [")  # IQM: the mean of 0.2, 0.3, 0.4 after dropping one at each end
    assert first[7:] == ["300", "2/5", "123"]  # raw median, 0.25 and 0.3 exceed 0.2, wall seconds
    second = [c.strip() for c in lines[3].strip("|").split("|")]
    assert second[5] == "0.200 [0.200, 0.200]" and second[-1] == "-"


def test_a_directory_without_records_and_a_bad_argument_are_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="no stability records"):
        ablation.main(["X=" + str(tmp_path / "empty"), "--out", str(tmp_path / "t.md")])
    with pytest.raises(SystemExit):
        ablation.main([str(tmp_path / "empty"), "--out", str(tmp_path / "t.md")])  # no LABEL=
