"""benchmarks/reference_reppo.py: fetches nothing, says how to install the reference, and tabulates what it measured.

The measurement itself needs a checkout of the official REPPO code (not in CI); these checks cover
what a user without one sees and the table the committed results come from.
"""
import reference_reppo


def test_without_a_checkout_it_says_how_to_get_one_and_measures_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    assert reference_reppo.main(["--reference", str(tmp_path / "no-reppo"), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "skipped" in said and "git clone https://github.com/cvoelcker/reppo" in said
    assert reference_reppo.REFERENCE_COMMIT in said and not out.exists()


def test_the_reference_configuration_is_the_shared_one():
    """The reference's fields that set the cost match diffrl's reppo-dmc-cpu preset."""
    from diffrl.config.presets import resolve

    ref = reference_reppo.reference_config(204_800, 32, 32, -0.5)
    ours = resolve("reppo", "playground/CartpoleSwingup", None)
    assert (ref["num_envs"], ref["num_steps"]) == (ours.num_envs, ours.num_steps)
    assert (ref["num_epochs"], ref["num_mini_batches"]) == (ours.reppo.num_epochs, ours.reppo.num_minibatches)
    assert ref["critic_hidden_dim"] == ours.critic.hidden and ref["num_bins"] == ours.critic.num_bins
    assert (ref["num_critic_encoder_layers"], ref["num_critic_head_layers"]) == (
        ours.critic.encoder_layers, ours.critic.head_layers)
    # the reference's actor "layers" count the output layer: 3 = two hidden layers
    assert ours.gaussian.hidden == (ref["actor_hidden_dim"],) * (ref["num_actor_layers"] - 1)
    assert ref["aux_loss_mult"] == ours.critic.aux_loss_weight and ref["hl_gauss"]
    assert (ref["vmin"], ref["vmax"]) == (ours.critic.vmin, ours.critic.vmax)
    assert ours.gaussian.kl_samples == 16 and not ref["reverse_kl"]  # both: 16 old-policy samples


def test_table_gives_each_repeat_and_the_mean_ratio():
    def row(repeat, d, r):
        side = {"compile_s": 30.0, "final_return": 500.0}
        return {"repeat": repeat, "cores": "0, 1", "diffrl": {**side, "sps": d}, "reference": {**side, "sps": r}}

    text = reference_reppo.table([row(0, 1500.0, 1000.0), row(1, 1800.0, 1000.0)])
    assert "| 0 | 0, 1 | 1,500 | 1,000 | 1.50x |" in text and "| 1 | 0, 1 | 1,800 | 1,000 | 1.80x |" in text
    assert "over 2 repeats: mean 1.65x, min 1.50x, max 1.80x" in text


def test_the_reference_preset_takes_the_official_update_hyperparameters():
    """reppo-dmc-cpu-reference = reppo-dmc-cpu with the reference's step sizes and KL multiplier."""
    from diffrl.config.presets import resolve

    ref = reference_reppo.reference_config(491_520, 32, 32, -0.5)
    ours = resolve("reppo", "playground/CartpoleBalance", "reppo-dmc-cpu-reference").reppo
    fast = resolve("reppo", "playground/CartpoleBalance", None).reppo
    assert ours.actor_lr == ours.critic_lr == ref["lr"] and ours.kl_start == ref["kl_start"]
    assert ours.kl_min == 0.0 and ours.kl_bound == ref["kl_bound"]  # the reference has no floor
    # the CPU entropy target (+0.5 d) = the reference's ent_target_mult -0.5 (target = -mult x d)
    assert ours.entropy_target_mult == -ref["ent_target_mult"] == fast.entropy_target_mult
    changed = {f for f in type(ours).__dataclass_fields__ if getattr(ours, f) != getattr(fast, f)}
    assert changed == {"critic_lr", "kl_start", "kl_min"}
