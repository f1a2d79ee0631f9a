"""benchmarks/paper_cost.py (with paper_cost_model.py and paper_cost_report.py) and benchmarks/xla_cost.py:
loop-corrected XLA FLOP counts against hand counts, and the command on one small preset."""
import json

import jax
import jax.numpy as jnp
import pytest

import paper_cost
import paper_cost_model
import paper_cost_report
import xla_cost

M, K, STEPS = 64, 128, 10


def _chain(unroll=1):
    def chain(x, ws):
        return jax.lax.scan(lambda h, w: (jnp.dot(h, w), None), x, ws, unroll=unroll)[0]
    return chain


def _compile(fn, *shapes):
    return jax.jit(fn).lower(*(jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes)).compile()


def test_xla_counts_a_scan_body_once_and_the_correction_counts_every_trip():
    hand = 2 * M * K * K * STEPS  # STEPS matmuls (M x K) @ (K x K)
    r = xla_cost.compiled_cost(_compile(_chain(), (M, K), (STEPS, K, K)))
    # XLA's own figure: one body (what the correction is for); the re-parsed entry reproduces it
    assert r["xla_cost_analysis"]["flops"] == pytest.approx(hand / STEPS, rel=1e-3)
    assert r["xla"]["flops"] == pytest.approx(r["xla_cost_analysis"]["flops"], rel=1e-9)
    assert r["corrected"]["flops"] == pytest.approx(hand, rel=1e-4)  # + the loop counter's adds
    assert [(loop["trip_count"], loop["depth"]) for loop in r["loops"]] == [(STEPS, 0)]
    assert r["unknown_trip_loops"] == 0
    # unrolled, XLA itself sees every matmul: the same count
    unrolled = xla_cost.compiled_cost(_compile(_chain(True), (M, K), (STEPS, K, K)))
    assert unrolled["xla"]["flops"] == pytest.approx(hand, rel=1e-6)


def test_nested_scans_inside_a_conditional_match_the_unrolled_program():
    def make(unroll):
        def f(x, ws, p):
            def inner(h, w):
                return jnp.tanh(h @ w), None

            def outer(h, _):
                h = jax.lax.cond(p[0] > 0, lambda h: jax.lax.scan(inner, h, ws, unroll=unroll)[0],
                                 lambda h: h * 2.0, h)
                return h, None
            return jax.lax.scan(outer, x, None, length=3, unroll=unroll)[0]
        return f

    shapes = ((8, 16), (5, 16, 16), (1,))
    looped = xla_cost.compiled_cost(_compile(make(1), *shapes))
    unrolled = xla_cost.compiled_cost(_compile(make(True), *shapes))
    hand_dots = 3 * 5 * 2 * 8 * 16 * 16
    assert unrolled["xla"]["flops"] == pytest.approx(hand_dots, rel=0.01)
    assert looped["corrected"]["flops"] == pytest.approx(unrolled["xla"]["flops"], rel=0.01)
    assert looped["corrected"]["transcendentals"] == unrolled["xla"]["transcendentals"] == 3 * 5 * 8 * 16
    assert looped["xla"]["flops"] < hand_dots / 10  # counted once: 1 of 15 matmuls
    assert looped["loop_trips"] == 3 + 3 * 5


def test_a_data_dependent_while_loop_is_counted_once_and_reported():
    def f(x, w):
        return jax.lax.while_loop(lambda c: jnp.sum(c) < 1e6, lambda c: jnp.abs(c @ w) + 1.0, x)

    r = xla_cost.compiled_cost(_compile(f, (8, 16), (16, 16)))
    assert r["unknown_trip_loops"] == 1
    assert r["corrected"]["flops"] == pytest.approx(r["xla"]["flops"], rel=1e-9)


def test_roofline_is_the_larger_of_compute_and_memory_time():
    gpu = paper_cost_model.GPUS["H100 SXM"]
    assert paper_cost_model.roofline_s(494e12, 0.0, gpu) == pytest.approx(1.0)
    assert paper_cost_model.roofline_s(67e12, 0.0, gpu, tensor=False) == pytest.approx(1.0)
    assert paper_cost_model.roofline_s(1.0, 3.35e12, gpu) == pytest.approx(1.0)


@pytest.mark.heavy(55)  # compiles a small preset's programs: 102 s on one core, cold compile cache, of which 49 s were the full matmul probe the test tier no longer runs
def test_the_command_measures_one_small_preset(tmp_path):
    assert paper_cost.main(["--tier", "test", "--out", str(tmp_path), "--time-iterations", "1"]) == 0
    record = json.loads((tmp_path / "test.json").read_text())
    (row,) = record["results"]
    assert row["status"] == "ok", row["error"]
    for program in ("iteration", "update", "evaluation"):
        p = row[program]
        assert p["corrected"]["flops"] > p["xla"]["flops"] > 0  # the update's epoch/minibatch scans
        assert p["memory"]["peak_estimate_bytes"] > 0
    # the iteration contains the update; per env step figures follow from the batch
    assert row["iteration"]["corrected"]["flops"] >= row["update"]["corrected"]["flops"]
    d = paper_cost_model.derive(row)
    assert d["flop_per_env_step"] == pytest.approx(row["iteration"]["corrected"]["flops"] / (32 * 32))
    assert d["gpu"]["H100 SXM"]["fits"] and d["achieved_gflops"] > 0
    assert record["matmul"]["this process"]["peak_flops"] > 1e9
    md = (tmp_path / "test.md").read_text()
    assert "| reppo | reppo-gymnax | 32 x 32 |" in md and "achieved GFLOP/s" in md
    assert paper_cost.main(["--tier", "test", "--out", str(tmp_path), "--report"]) == 0
    assert (tmp_path / "test.md").read_text() == md


def test_a_host_environment_compiles_the_learner_only_and_memory_over_80_gb_is_flagged():
    # ManiSkill is stepped outside JAX (and need not be installed): its learner's update and acting step
    # compile against the task's sizes; iteration and evaluation are not asked of it
    row = paper_cost.measure_cell("ppo", "ppo-maniskill-cpu", paper_cost_model.MANISKILL)
    assert row["status"] == "ok", row["error"]
    assert row["host_env"] and "iteration" not in row and "evaluation" not in row
    assert row["update"]["corrected"]["flops"] > 0 and row["act"]["corrected"]["flops"] > 0
    d = paper_cost_model.derive(row)
    n = row["num_steps"]
    assert d["iteration_gflop"] * 1e9 == pytest.approx(row["update"]["corrected"]["flops"]
                                                       + n * row["act"]["corrected"]["flops"])
    record = {"tier": "paper", "command": "test", "versions": {"jax": jax.__version__}, "results": [row]}
    md = paper_cost_report.markdown(record)
    assert "| ppo | ppo-maniskill-cpu \u2020 |" in md and "learner only" in md and "obs 35, action 8" in md
    assert "every preset above fits an H100's 80 GB" in md and "**> 80 GB**" not in md
    big = json.loads(json.dumps(row))
    big["update"]["memory"]["peak_estimate_bytes"] = 100e9
    md = paper_cost_report.markdown({**record, "results": [big]})
    assert "**> 80 GB**" in md and "**over an H100's 80 GB: ppo-maniskill-cpu**" in md
