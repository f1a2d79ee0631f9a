"""Headless videos of a policy in a MuJoCo-based task (Playground DM Control, Brax).

The rollout runs the unbatched env ``TimeLimit(NonFiniteGuard(RescaleAction(env)))`` under ``jit`` and
keeps only what a frame needs (qpos, qvel, mocap poses); frames are then drawn on the
host with ``mujoco.Renderer`` after ``mj_forward`` (MuJoCo's Python rendering documentation).

OpenGL backend (a decision): ``MUJOCO_GL`` is set to ``egl`` when this module
is imported before mujoco and the variable is unset (Mesa's EGL works headless on the
CPU and uses the GPU's EGL where there is one). MuJoCo and PyOpenGL fix their backend
at import, so a process cannot switch after EGL failed; instead the same states are
rendered in a child process with ``MUJOCO_GL=osmesa`` (needs ``libosmesa6``). If both
fail, the error says what to install.

Host environments (dm_control, ``dmc/``) are stepped in this process and rendered by their own
``physics.render`` (:func:`render_host_rollout`).

Videos: GIF via Pillow (always available); MP4 via mediapy when ffmpeg is found (system
``ffmpeg`` or the ``imageio-ffmpeg`` package), else a clear error.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

if "mujoco" not in sys.modules:  # must precede the first `import mujoco`
    os.environ.setdefault("MUJOCO_GL", "egl")

RENDERABLE_SUITES = ("playground/", "brax/")
_FIELDS = ("qpos", "qvel", "mocap_pos", "mocap_quat")


class NoRendererError(ValueError):
    """The task has no MuJoCo model to render (gymnax, toy, user tasks)."""


# ----------------------------------------------------------------------------- rollout
def _render_source(env_name: str, base_env):
    """(mj_model, inner state -> dict of the fields a frame needs) for a bare env."""
    if env_name.startswith("playground/"):
        def fields(inner):
            d = inner.data
            return {"qpos": d.qpos, "qvel": d.qvel, "mocap_pos": d.mocap_pos, "mocap_quat": d.mocap_quat}
        return base_env.env.mj_model, fields
    if env_name.startswith("brax/"):
        def fields(inner):
            ps = inner.pipeline_state
            out = {"qpos": ps.q, "qvel": ps.qd}
            if hasattr(ps, "mocap_pos") and hasattr(ps, "mocap_quat"):
                out.update(mocap_pos=ps.mocap_pos, mocap_quat=ps.mocap_quat)
            return out
        return base_env.env.sys.mj_model, fields
    raise NoRendererError(
        f"no renderer for task {env_name!r}: videos need a MuJoCo model "
        f"({', '.join(s + '*' for s in RENDERABLE_SUITES)} tasks)")


def rollout_states(env_name: str, act_fn: Callable, key, num_steps: int, episodes: int = 1,
                   episode_length: int | None = None, **env_kwargs):
    """Run ``episodes`` episodes of at most ``num_steps`` steps; return (mj_model, list of
    per-episode dicts of host arrays (frames, ...)), each cut after the first done.

    ``act_fn(obs (obs_size,), key) -> action (action_size,)`` in [-1, 1] is called on RAW
    observations (e.g. :func:`diffrl.artefacts.export.load_policy`), and must be jittable.
    """
    import jax
    import jax.numpy as jnp

    from diffrl.envs.registry import make
    from diffrl.envs.wrappers import NonFiniteGuard, RescaleAction, TimeLimit

    if not any(env_name.startswith(s) for s in RENDERABLE_SUITES):
        _render_source(env_name, None)  # raises NoRendererError
    base = make(env_name, **env_kwargs)
    mj_model, fields = _render_source(env_name, base)
    env = TimeLimit(NonFiniteGuard(RescaleAction(base)), episode_length)

    @jax.jit
    def episode(key):
        key_reset, key_run = jax.random.split(key)
        state = env.reset(key_reset)

        def step(state, key_step):
            nxt = env.step(state, act_fn(state.obs, key_step))
            return nxt, (fields(nxt.inner), nxt.done)

        _, (traj, done) = jax.lax.scan(step, state, jax.random.split(key_run, num_steps))
        first = jax.tree.map(lambda x: x[None], fields(state.inner))
        traj = jax.tree.map(lambda a, b: jnp.concatenate([a, b.astype(a.dtype)]), first, traj)
        return traj, done

    out = []
    for key_episode in jax.random.split(key, episodes):
        traj, done = jax.device_get(episode(key_episode))
        done = np.asarray(done)
        length = int(np.argmax(done)) + 1 if done.any() else num_steps
        frames = {k: np.asarray(v[: length + 1]) for k, v in traj.items()}
        # An episode the guard ended because the simulation went non-finite: its last state has no picture.
        if not np.all(np.isfinite(frames["qpos"][-1])):
            frames = {k: v[:-1] for k, v in frames.items()}
        out.append(frames)
    return mj_model, out


# ----------------------------------------------------------------------------- rendering
def _render_in_process(mj_model, trajectories: Sequence[dict], height: int, width: int,
                       camera: int | str) -> list[np.ndarray]:
    import mujoco

    data = mujoco.MjData(mj_model)
    frames = []
    with mujoco.Renderer(mj_model, height=height, width=width) as renderer:
        for traj in trajectories:
            for t in range(len(traj["qpos"])):
                for name in _FIELDS:
                    if name in traj and getattr(data, name).size:
                        setattr(data, name, traj[name][t])
                mujoco.mj_forward(mj_model, data)
                renderer.update_scene(data, camera=camera)
                frames.append(np.array(renderer.render(), dtype=np.uint8))
    return frames


def _render_in_child(mj_model, trajectories: Sequence[dict], height: int, width: int,
                     camera: int | str, backend: str) -> list[np.ndarray]:
    """Render in a fresh process whose OpenGL backend is ``backend``."""
    import mujoco

    with tempfile.TemporaryDirectory(prefix="diffrl-render-") as tmp:
        tmp = Path(tmp)
        mujoco.mj_saveModel(mj_model, str(tmp / "model.mjb"), None)
        arrays = {f"{i}/{k}": v for i, traj in enumerate(trajectories) for k, v in traj.items()}
        np.savez(tmp / "states.npz", **arrays)
        env = {k: v for k, v in os.environ.items() if k != "PYOPENGL_PLATFORM"}
        env["MUJOCO_GL"] = backend
        cmd = [sys.executable, "-c", "from diffrl.artefacts.video import _child_main; _child_main()",
               str(tmp), str(height), str(width), str(camera), str(len(trajectories))]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed")
        with np.load(tmp / "frames.npz", allow_pickle=False) as f:
            return list(f["frames"])


def _child_main() -> None:
    import mujoco

    tmp, height, width, camera, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
    camera = int(camera) if camera.lstrip("-").isdigit() else camera
    model = mujoco.MjModel.from_binary_path(os.path.join(tmp, "model.mjb"))
    with np.load(os.path.join(tmp, "states.npz"), allow_pickle=False) as f:
        trajs = [{k.split("/", 1)[1]: f[k] for k in f.files if k.split("/", 1)[0] == str(i)} for i in range(n)]
    frames = _render_in_process(model, trajs, height, width, camera)
    np.savez(os.path.join(tmp, "frames.npz"), frames=np.stack(frames))


def render_states(mj_model, trajectories: Sequence[dict], height: int = 240, width: int = 320,
                  camera: int | str = -1) -> list[np.ndarray]:
    """Frames (height, width, 3) uint8 of every state of every trajectory (dicts of
    qpos/qvel[/mocap_pos/mocap_quat] arrays with a leading time axis)."""
    try:
        return _render_in_process(mj_model, trajectories, height, width, camera)
    except Exception as first:  # noqa: BLE001 - GL context creation raises many types
        tried = [f"{os.environ.get('MUJOCO_GL', 'default')} in this process: {first}"]
        for backend in ("osmesa", "egl"):
            if backend == os.environ.get("MUJOCO_GL"):
                continue
            try:
                return _render_in_child(mj_model, trajectories, height, width, camera, backend)
            except Exception as e:  # noqa: BLE001
                tried.append(f"{backend} in a child process: {e}")
        raise RuntimeError(
            "headless rendering failed with every OpenGL backend:\n  " + "\n  ".join(tried) +
            "\nInstall Mesa's EGL (libegl-mesa0 libegl1 libgl1-mesa-dri) or OSMesa (libosmesa6), "
            "or set MUJOCO_GL to a backend that works here.") from first


def render_rollout(env_name: str, act_fn: Callable, key, num_steps: int, height: int = 240,
                   width: int = 320, episodes: int = 1, camera: int | str = -1,
                   episode_length: int | None = None, **env_kwargs) -> list[np.ndarray]:
    """Roll out ``act_fn`` in ``env_name`` and render it: a list of (H, W, 3) uint8 frames.

    Each episode gives its reset state and one frame per step, and stops after at most
    ``num_steps`` steps or when the episode ends (so up to ``num_steps + 1`` frames per
    episode). ``act_fn(obs, key) -> action in [-1, 1]`` sees raw observations.
    Raises :class:`NoRendererError` for tasks without a MuJoCo model (gymnax, toy).
    """
    from diffrl.envs.registry import is_host_env

    if is_host_env(env_name):
        return render_host_rollout(env_name, act_fn, key, num_steps, height, width, episodes, camera,
                                   episode_length)
    mj_model, trajectories = rollout_states(env_name, act_fn, key, num_steps, episodes,
                                            episode_length, **env_kwargs)
    return render_states(mj_model, trajectories, height, width, camera)


def render_host_rollout(env_name: str, act_fn: Callable, key, num_steps: int, height: int = 240,
                        width: int = 320, episodes: int = 1, camera: int | str = -1,
                        episode_length: int | None = None) -> list[np.ndarray]:
    """:func:`render_rollout` for a host environment, stepped in this process: dm_control tasks are
    drawn by their own ``physics.render``, gymnasium MuJoCo tasks by ``mujoco.Renderer`` on their model
    and data, ManiSkill tasks by SAPIEN's render camera; episode ``k`` starts from seed ``k``."""
    import jax
    import jax.numpy as jnp

    from diffrl.envs.host import native_action
    from diffrl.envs.registry import single_env_factory

    env = single_env_factory(env_name)()
    draw = _host_drawer(env, env_name, height, width, camera)
    low, high = np.asarray(env.spec.action_low, np.float32), np.asarray(env.spec.action_high, np.float32)
    limit = episode_length or env.spec.episode_length
    frames = []
    for episode in range(episodes):
        obs = env.reset(episode)
        frames.append(draw())
        for t in range(min(num_steps, limit)):
            key, key_act = jax.random.split(key)
            action = np.asarray(act_fn(jnp.asarray(obs), key_act), np.float32)
            obs, _, terminated, truncated = env.step(native_action(action, low, high))
            frames.append(draw())
            if terminated or truncated:
                break
    return frames


def _host_drawer(env, env_name: str, height: int, width: int, camera) -> Callable[[], np.ndarray]:
    """``() -> (H, W, 3) uint8`` frame of a host env's current state."""
    if hasattr(env, "physics"):  # dm_control
        return lambda: np.asarray(env.physics.render(height, width, camera_id=camera))
    inner = getattr(getattr(env, "env", None), "unwrapped", None)
    if inner is not None and hasattr(inner, "model") and hasattr(inner, "data"):  # gymnasium MuJoCo
        import mujoco

        renderer = mujoco.Renderer(inner.model, height, width)
        view = camera
        if camera == -1:  # a camera following the robot's root body (the free camera frames the whole floor)
            view = mujoco.MjvCamera()
            view.type, view.trackbodyid = mujoco.mjtCamera.mjCAMERA_TRACKING, 1
            view.distance, view.elevation, view.azimuth = 3.5, -20.0, 90.0

        def draw():
            renderer.update_scene(inner.data, camera=view)
            return np.asarray(renderer.render())

        return draw
    if env_name.startswith("maniskill/"):  # SAPIEN's own render camera, resized to the requested frame
        from PIL import Image

        return lambda: np.asarray(Image.fromarray(env.render()).resize((width, height), Image.BILINEAR))
    raise NoRendererError(f"{env_name} has no MuJoCo model to render")


# ----------------------------------------------------------------------------- writing
def write_video(frames: Sequence[np.ndarray], path: str | Path, fps: int = 30) -> Path:
    """Write frames as a GIF (Pillow) or, for ``.mp4``, an MP4 (mediapy + ffmpeg)."""
    path = Path(path)
    if not len(frames):
        raise ValueError("write_video needs at least one frame")
    frames = [np.asarray(f, np.uint8) for f in frames]
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".mp4":
        import mediapy

        if not _find_ffmpeg(mediapy):
            raise RuntimeError(
                f"cannot write {path}: MP4 needs ffmpeg (apt-get install ffmpeg, or pip install "
                "imageio-ffmpeg); write a .gif instead, which needs nothing extra")
        mediapy.write_video(str(path), frames, fps=fps)
        return path
    if path.suffix.lower() != ".gif":
        raise ValueError(f"unsupported video format {path.suffix!r}: use .gif or .mp4")
    from PIL import Image

    images = [Image.fromarray(f) for f in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=max(1, round(1000 / fps)),
                   loop=0)
    return path


VIDEO_FORMATS = (".gif", ".mp4")
VIDEO_SUITES = RENDERABLE_SUITES + ("dmc/", "gym/", "maniskill/")
"""Tasks with a scene to draw: MuJoCo models (Playground, Brax, dm_control, gymnasium) and ManiSkill's SAPIEN."""


def video_problem(env_name: str, path: str | Path) -> str | None:
    """Why a video of ``env_name`` cannot be written to ``path``, in one line (None: it can).

    Checked before evaluating, so that a wrong file name or a task without a renderer is not
    found out only after minutes of evaluation."""
    suffix = Path(path).suffix.lower()
    if suffix not in VIDEO_FORMATS:
        return (f"--video {path}: unsupported format {suffix or '(no suffix)'!r}; use .gif (needs nothing "
                "extra) or .mp4 (needs ffmpeg)")
    if not env_name.startswith(VIDEO_SUITES):
        return (f"--video: {env_name} has no renderer; videos need a MuJoCo or SAPIEN scene "
                f"({', '.join(s + '*' for s in VIDEO_SUITES)} tasks)")
    if suffix == ".mp4":
        import mediapy

        if not _find_ffmpeg(mediapy):
            return (f"--video {path}: MP4 needs ffmpeg (apt-get install ffmpeg, or pip install imageio-ffmpeg); "
                    "write a .gif instead, which needs nothing extra")
    return None


def _find_ffmpeg(mediapy) -> bool:
    import shutil

    if shutil.which("ffmpeg"):
        return True
    try:
        import imageio_ffmpeg

        mediapy.set_ffmpeg(imageio_ffmpeg.get_ffmpeg_exe())
        return True
    except (ImportError, RuntimeError):
        return False
