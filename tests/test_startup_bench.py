"""benchmarks/startup.py: a start is timed in a fresh process from its launch to its first iteration,
and stops there (nothing is trained); a second start reads the traced programs back."""
import startup

TINY = ["--algo", "ppo", "--env", "gymnax/Pendulum-v1", "--total-env-steps", "1024000", "--num-envs", "16",
        "--num-steps", "32", "--num-evals", "1", "--eval-envs", "4"]


def test_a_start_is_timed_to_its_first_iteration_and_a_second_reads_its_programs(tmp_path):
    cache = tmp_path / "jax"
    first = startup.one_start(TINY, cache, tmp_path / "run")
    second = startup.one_start(TINY, cache, tmp_path / "run")
    # a budget of a million steps: had it trained, it would not have returned this soon
    assert 0 < second["first_iteration_s"] < 300 and first["compile/programs_read"] == 0
    assert second["compile/programs_read"] == 2
    assert not (tmp_path / "run" / "summary.json").exists()
