"""Headless rendering of a Playground rollout, GIF/MP4 writing, and clear refusals."""
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from PIL import Image

from diffrl.artefacts.video import (
    NoRendererError,
    _render_in_child,
    render_rollout,
    render_states,
    rollout_states,
    write_video,
)

pytest.importorskip("mujoco_playground")
ENV = "playground/CartpoleBalance"


def zero_policy(obs, key):
    return jnp.zeros((1,), jnp.float32)


@pytest.fixture(scope="module")
def cartpole_rollout():
    """Two episodes cut by a time limit of 4 steps (one compile serves every test)."""
    return rollout_states(ENV, zero_policy, jax.random.PRNGKey(1), num_steps=9, episodes=2,
                          episode_length=4)


@pytest.mark.timeout(300)
def test_render_cartpole_rollout_and_write_gif(tmp_path, cartpole_rollout):
    model, trajs = cartpole_rollout
    frames = render_states(model, trajs)
    assert len(frames) == 10  # per episode: reset state + 4 steps, then the time limit ends it
    for f in frames:
        assert f.shape == (240, 320, 3) and f.dtype == np.uint8
        assert len(np.unique(f.reshape(-1, 3), axis=0)) > 100  # a scene, not a blank image
    # the pole falls under a zero action: frames differ, increasingly from the first
    diffs = [np.abs(f.astype(int) - frames[0]).mean() for f in frames[:5]]
    assert all(d > 0 for d in diffs[1:]) and diffs[-1] > diffs[1]
    assert not np.array_equal(frames[0], frames[5])  # the second episode has its own reset

    gif = write_video(frames, tmp_path / "cartpole.gif", fps=20)
    with Image.open(gif) as img:
        assert img.format == "GIF" and img.size == (320, 240)
        # Pillow merges frames that look identical after quantisation, adding their
        # durations, so the playing time (not the frame count) is what is preserved
        durations = []
        for i in range(img.n_frames):
            img.seek(i)
            durations.append(img.info["duration"])
        assert sum(durations) == 10 * 50 and 2 <= img.n_frames <= 10
        last = np.asarray(img.convert("RGB"))
    assert last.shape == (240, 320, 3) and len(np.unique(last.reshape(-1, 3), axis=0)) > 20


@pytest.mark.timeout(300)
def test_episodes_cut_at_done_and_child_process_renderer_agrees(cartpole_rollout):
    model, trajs = cartpole_rollout
    assert len(trajs) == 2 and all(len(t["qpos"]) == 5 for t in trajs)
    assert not np.array_equal(trajs[0]["qpos"][0], trajs[1]["qpos"][0])  # different resets
    frames = render_states(model, trajs[:1], height=48, width=64)
    assert len(frames) == 5 and frames[0].shape == (48, 64, 3)
    # the fallback path (a fresh process with its own OpenGL backend) draws the same frames
    child = _render_in_child(model, trajs[:1], 48, 64, -1, backend="egl")
    np.testing.assert_array_equal(np.stack(child), np.stack(frames))


def test_tasks_without_a_mujoco_model_are_refused():
    for name in ("gymnax/Pendulum-v1", "toy/MirrorGoals"):
        with pytest.raises(NoRendererError, match="no renderer for task"):
            render_rollout(name, zero_policy, jax.random.PRNGKey(0), num_steps=2)


def test_write_video_formats(tmp_path):
    frames = [np.full((8, 10, 3), 40 * i, np.uint8) for i in range(4)]
    with pytest.raises(ValueError, match="use .gif or .mp4"):
        write_video(frames, tmp_path / "x.avi")
    with pytest.raises(ValueError, match="at least one frame"):
        write_video([], tmp_path / "x.gif")
    try:
        import imageio_ffmpeg  # noqa: F401
        has_ffmpeg = True
    except ImportError:
        has_ffmpeg = shutil.which("ffmpeg") is not None
    if has_ffmpeg:
        assert write_video(frames, tmp_path / "x.mp4").stat().st_size > 0
    else:
        with pytest.raises(RuntimeError, match="MP4 needs ffmpeg"):
            write_video(frames, tmp_path / "x.mp4")
